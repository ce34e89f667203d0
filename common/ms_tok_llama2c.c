/* ms_tok_llama2c.c — llama2.c tokenizer.bin (e.g. tok512.bin): loading, and
 * run.c's encode(): one piece per UTF-8 character (byte fallback to <0xXX> =
 * byte + 3), a dummy ' ' prefix, then merges by best score.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tok_int.h"

/* ---- llama2.c encoding (run.c encode) ----------------------------------------------- */

ms_status tok_llama2c_encode(const ms_tok *t, const uint8_t *text, size_t len, ms_ids *out) {
    if (len == 0) return MS_OK;
    bpe_scratch s = {0};
    ms_status st = MS_OK;
    /* worst case: the dummy prefix and one byte-fallback token per byte */
    MS_TRY_GOTO(st, tok_scratch_syms(&s, (int64_t)len + 1), done);
    MS_TRY_GOTO(st, tok_scratch_buf(&s, (size_t)t->max_piece_len + 8), done);
    int64_t k = 0;
    int32_t dummy = tok_strmap_find(t, &t->piece_map, t->piece, " ", 1);
    if (dummy >= 0) s.sym[k++].id = dummy;
    /* one piece per UTF-8 character: a non-continuation byte and at most 3
     * continuation bytes after it (run.c's str_len < 4 guard) */
    for (size_t i = 0; i < len;) {
        size_t n = 1;
        while (i + n < len && (text[i + n] & 0xC0) == 0x80 && n < 4) n++;
        int32_t id = tok_strmap_find(t, &t->piece_map, t->piece, text + i, n);
        if (id >= 0) {
            s.sym[k++].id = id;
        } else {
            for (size_t j = 0; j < n; j++) s.sym[k++].id = (int32_t)text[i + j] + 3; /* <0xXX> = byte + 3 */
        }
        i += n;
    }
    for (int64_t i = 0; i < k; i++) {
        s.sym[i].prev = (int32_t)i - 1;
        s.sym[i].next = i + 1 < k ? (int32_t)i + 1 : -1;
    }
    st = tok_bpe_merge(t, &s, k, out);
done:
    tok_scratch_free(&s);
    return st;
}

/* ---- tokenizer.bin ---------------------------------------------------------- */

static ms_status llama2c_parse(const char *path, const uint8_t *d, size_t n, int64_t vocab_size, ms_tok *t) {
    if (vocab_size < 259 || vocab_size > INT32_MAX / 2)
        MS_FAIL(MS_ERR_RANGE, "%s: vocab_size %lld is out of range [259, %d] (3 specials + 256 bytes)", path,
                (long long)vocab_size, INT32_MAX / 2);
    if (n < 4) MS_FAIL(MS_ERR_FORMAT, "%s: truncated: no max_token_length", path);
    int32_t max_len;
    memcpy(&max_len, d, 4);
    if (max_len <= 0 || max_len > (1 << 20))
        MS_FAIL(MS_ERR_FORMAT, "%s: max_token_length %d is out of range [1, %d]", path, max_len, 1 << 20);
    MS_TRY(tok_alloc_ids(t, vocab_size, true));
    t->n_model = vocab_size;
    size_t off = 4;
    for (int64_t id = 0; id < vocab_size; id++) {
        if (n - off < 8)
            MS_FAIL(MS_ERR_FORMAT, "%s: truncated at token %lld of %lld (score, length)", path, (long long)id,
                    (long long)vocab_size);
        float score;
        int32_t len;
        memcpy(&score, d + off, 4);
        memcpy(&len, d + off + 4, 4);
        off += 8;
        if (len < 0 || len > max_len)
            MS_FAIL(MS_ERR_FORMAT, "%s: token %lld has length %d outside [0, max_token_length %d]", path, (long long)id,
                    len, max_len);
        if (n - off < (size_t)len)
            MS_FAIL(MS_ERR_FORMAT, "%s: truncated in the text of token %lld", path, (long long)id);
        MS_TRY(tok_arena_put(t, d + off, (size_t)len, &t->piece[id]));
        uint8_t b;
        if (tok_parse_byte_piece((const char *)d + off, (size_t)len, &b))
            MS_TRY(tok_arena_put(t, &b, 1, &t->bytes[id]));
        else
            t->bytes[id] = t->piece[id];
        off += (size_t)len;
        t->score[id] = score;
        t->flags[id] = TOK_PRESENT;
        if ((uint32_t)len > t->max_piece_len) t->max_piece_len = (uint32_t)len;
    }
    if (off != n) MS_LOG_DEBUG("%s: %zu bytes after the %lld tokens are ignored", path, n - off, (long long)vocab_size);
    /* <unk>, <s>, </s> */
    for (int i = 0; i < 3; i++) t->flags[i] |= TOK_SPECIAL;
    t->bos = 1;
    /* llama2.c's run.c stops when the model emits BOS (a TinyStories model
     * ends each story with it) and never sees </s>: both end generation. */
    t->eos[0] = 2;
    t->eos[1] = 1;
    t->n_eos = 2;
    /* piece → id; the first of equal pieces wins (run.c's bsearch picks any) */
    MS_TRY(tok_strmap_init(&t->piece_map, vocab_size));
    for (int64_t id = 0; id < vocab_size; id++) tok_strmap_insert(t, &t->piece_map, t->piece, (int32_t)id);
    return MS_OK;
}

ms_status ms_tok_load_llama2c(const char *path, int64_t vocab_size, ms_tok **out) {
    MS_ASSERT(path && out);
    *out = NULL;
    char *data;
    size_t len;
    MS_TRY(ms_read_file(path, &data, &len));
    ms_tok *t = tok_new(TOK_LLAMA2C);
    ms_status st = t ? llama2c_parse(path, (const uint8_t *)data, len, vocab_size, t) : MS_ERR_NOMEM;
    free(data);
    if (st < 0) {
        ms_tok_free(&t);
        return st;
    }
    *out = t;
    return MS_OK;
}

ms_status tok_config_vocab_size(const char *path, int64_t *vocab_size) {
    char *data;
    size_t len;
    MS_TRY(ms_read_file(path, &data, &len));
    json_error_t err;
    json_t *root = json_loadb(data, len, JSON_DECODE_INT_AS_REAL, &err); /* other fields may exceed int64 */
    free(data);
    if (!root)
        MS_FAIL(MS_ERR_FORMAT, "%s: not valid JSON (line %d, column %d): %s", path, err.line, err.column, err.text);
    json_t *v = json_is_object(root) ? json_object_get(root, "vocab_size") : NULL;
    double d = json_is_number(v) ? json_number_value(v) : -1;
    ms_status st = MS_OK;
    if (!v) {
        st = MS_ERR_NOT_FOUND;
        MS_LOG_ERROR("%s: missing field \"vocab_size\"", path);
    } else if (!json_is_number(v) || d < 0 || d > 1e9 || d != floor(d)) {
        st = MS_ERR_FORMAT;
        MS_LOG_ERROR("%s: vocab_size must be a non-negative integer", path);
    } else {
        *vocab_size = (int64_t)d;
    }
    json_decref(root);
    return st;
}
