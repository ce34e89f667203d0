/* ms_tok_gguf.c — a tokenizer from GGUF metadata (tokenizer.ggml.*), read as
 * llama.cpp (src/llama-vocab.cpp) reads it: "gpt2" is byte-level BPE with
 * the pre-tokenizer regex named by tokenizer.ggml.pre (qwen2, llama-bpe),
 * "llama" is SentencePiece-style with scores and <0xXX> byte fallback.
 * Everything is copied out of the reader. Encoding: ms_tokenizer.c's
 * gguf_encode.
 */
#include <stdlib.h>
#include <string.h>

#include "ms_gguf.h"
#include "ms_tok_int.h"

/* llama.cpp's regexes for these pre-tokenizers: the tokenizer.json Split
 * regex of Qwen2 / Llama-3 with (?i:'s|...) spelled as '[sS]|... */
static const char *const QWEN2_REGEX =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const LLAMA3_REGEX =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* GGUF token types (llama.cpp's LLAMA_TOKEN_TYPE_*) */
enum { GT_NORMAL = 1, GT_UNKNOWN = 2, GT_CONTROL = 3, GT_USER = 4, GT_UNUSED = 5, GT_BYTE = 6 };

/* (length desc, id asc): llama.cpp's cache_special_tokens order, made total */
typedef struct {
    uint32_t len;
    int32_t id;
} special_key;
static int cmp_special(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Optional token id key: absent → keep *id; present → must be a token. */
static ms_status gguf_token_id(const ms_gguf *g, const ms_tok *t, const char *key, int32_t *id) {
    int64_t v;
    ms_status st = ms_gguf_get_i64(g, key, &v);
    if (st == MS_ERR_NOT_FOUND) return MS_OK;
    MS_TRY(st);
    if (v < 0 || v >= t->n_ids)
        MS_FAIL(MS_ERR_RANGE, "%s: %s = %lld is out of range [0, %lld) (tokenizer.ggml.tokens)", ms_gguf_path(g), key,
                (long long)v, (long long)t->n_ids);
    *id = (int32_t)v;
    return MS_OK;
}

static ms_status gguf_opt_bool(const ms_gguf *g, const char *key, bool *v) {
    ms_status st = ms_gguf_get_bool(g, key, v);
    return st == MS_ERR_NOT_FOUND ? MS_OK : st;
}

/* Token piece → the bytes it stands for (written at the arena end). */
static ms_status gguf_set_bytes(const char *name, ms_tok *t, int32_t id, int type, const int16_t *u2b) {
    const char *s = t->arena + t->piece[id].off;
    size_t n = t->piece[id].len;
    if (type == GT_UNUSED) { /* llama.cpp renders nothing for unused tokens */
        t->bytes[id] = (span){t->piece[id].off, 0};
        return MS_OK;
    }
    if (type == GT_BYTE && t->kind == TOK_SPM) {
        uint8_t b;
        if (!tok_parse_byte_piece(s, n, &b))
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d] \"%.*s\" has type byte but is not <0xXX>", name, id,
                    (int)(n > 64 ? 64 : n), s);
        if (t->byte_id[b] < 0) t->byte_id[b] = id;
        return tok_arena_put(t, &b, 1, &t->bytes[id]);
    }
    if (type != GT_NORMAL) {
        t->bytes[id] = t->piece[id];
        return MS_OK;
    }
    /* both decodings are never longer than the piece: decode at the arena end
     * (reserved first, as the piece itself lives in the arena) */
    span tmp;
    MS_TRY(tok_arena_put(t, NULL, n, &tmp));
    s = t->arena + t->piece[id].off;
    uint8_t *o = (uint8_t *)t->arena + tmp.off;
    size_t m = 0;
    if (t->kind == TOK_SPM) {
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                o[m++] = ' ';
                i += 3;
            } else {
                o[m++] = (uint8_t)s[i++];
            }
        }
    } else {
        m = tok_byte_level_decode((const uint8_t *)s, n, u2b, o);
    }
    t->bytes[id] = (span){tmp.off, (uint32_t)m};
    t->arena_len = tmp.off + m;
    return MS_OK;
}

static const char *const EOG_TEXTS[] = {"<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<|eot_id|>",
                                        "<|end_of_text|>"};

/* tokenizer.ggml.model → the kind; "gpt2" also names its pre-tokenizer regex
 * in tokenizer.ggml.pre. */
static ms_status gguf_kind(const ms_gguf *g, const char *name, ms_tok *t, const char **regex) {
    const char *model, *pre = NULL;
    ms_status st = ms_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL);
    if (st == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing key tokenizer.ggml.model", name);
    MS_TRY(st);
    if (strcmp(model, "gpt2") == 0) {
        t->kind = TOK_HF_BPE;
    } else if (strcmp(model, "llama") == 0) {
        t->kind = TOK_SPM;
    } else {
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model \"%s\" is not supported (gpt2 or llama)", name, model);
    }
    *regex = NULL;
    t->add_bos = t->kind == TOK_SPM;
    t->add_space_prefix = t->kind == TOK_SPM;
    if (t->kind != TOK_HF_BPE) return MS_OK;
    st = ms_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL);
    if (st == MS_ERR_NOT_FOUND)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: missing key tokenizer.ggml.pre (the pre-tokenizer: qwen2 or llama-bpe)", name);
    MS_TRY(st);
    if (strcmp(pre, "qwen2") == 0) {
        *regex = QWEN2_REGEX;
    } else if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0 || strcmp(pre, "llama-v3") == 0) {
        *regex = LLAMA3_REGEX;
        t->ignore_merges = true;
        t->add_bos = true;
    } else {
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre \"%s\" is not supported (qwen2 or llama-bpe)", name, pre);
    }
    return MS_OK;
}

/* the arrays: tokens (strings), token_type (int32), scores (f32 or i32), same length */
typedef struct {
    int64_t n;                      /* tokens */
    const uint8_t *types, *scores; /* [n] int32 / 4-byte values, NULL when absent */
    ms_gguf_vtype score_type;
} gguf_arrays;

static ms_status gguf_read_arrays(const ms_gguf *g, const char *name, gguf_arrays *a) {
    ms_gguf_vtype et;
    int64_t n, m;
    const void *arr;
    ms_status st = ms_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &arr);
    if (st == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing key tokenizer.ggml.tokens", name);
    MS_TRY(st);
    if (et != MS_GGUF_STRING) MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be an array of strings", name);
    if (n < 1 || n >= INT32_MAX / 2)
        MS_FAIL(MS_ERR_RANGE, "%s: tokenizer.ggml.tokens has %lld entries, outside [1, %d)", name, (long long)n,
                INT32_MAX / 2);
    *a = (gguf_arrays){.n = n, .score_type = MS_GGUF_F32};
    st = ms_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &m, &arr);
    if (st != MS_ERR_NOT_FOUND) {
        MS_TRY(st);
        if (et != MS_GGUF_I32) MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be an array of int32", name);
        if (m != n)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %lld entries but tokenizer.ggml.tokens has %lld",
                    name, (long long)m, (long long)n);
        a->types = arr;
    }
    st = ms_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &m, &arr);
    if (st != MS_ERR_NOT_FOUND) {
        MS_TRY(st);
        if (et != MS_GGUF_F32 && et != MS_GGUF_I32)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.scores must be an array of float32 or int32", name);
        if (m != n)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.scores has %lld entries but tokenizer.ggml.tokens has %lld",
                    name, (long long)m, (long long)n);
        a->scores = arr;
        a->score_type = et;
    }
    return MS_OK;
}

static int32_t gguf_type(const gguf_arrays *a, int64_t id) {
    int32_t type = GT_NORMAL;
    if (a->types) memcpy(&type, a->types + 4 * id, 4);
    return type;
}

/* Every token: its piece, bytes, flags and score. *n_special counts the
 * control, unknown and user-defined ones. */
static ms_status gguf_load_tokens(const ms_gguf *g, const char *name, ms_tok *t, const gguf_arrays *a,
                                  int64_t *n_special) {
    t->n_model = a->n;
    MS_TRY(tok_alloc_ids(t, a->n, t->kind == TOK_SPM));
    MS_TRY(tok_strmap_init(&t->piece_map, a->n));
    int16_t u2b[512];
    tok_unicode_to_byte(u2b);
    *n_special = 0;
    for (int64_t id = 0; id < a->n; id++) {
        const char *s;
        size_t len;
        MS_TRY(ms_gguf_arr_str(g, "tokenizer.ggml.tokens", id, &s, &len));
        if (len == 0) MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%lld] is empty", name, (long long)id);
        int32_t type = gguf_type(a, id);
        if (type < GT_NORMAL || type > GT_BYTE)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%lld] = %d is not a token type (1..6)", name,
                    (long long)id, type);
        int32_t dup = tok_strmap_find(t, &t->piece_map, t->piece, s, len);
        if (dup >= 0)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%lld] \"%.*s\" repeats token %d", name, (long long)id,
                    (int)(len > 64 ? 64 : len), s, dup);
        MS_TRY(tok_arena_put(t, s, len, &t->piece[id]));
        tok_strmap_insert(t, &t->piece_map, t->piece, (int32_t)id);
        MS_TRY(gguf_set_bytes(name, t, (int32_t)id, type, u2b));
        t->flags[id] = TOK_PRESENT;
        if (type == GT_CONTROL || type == GT_UNKNOWN) t->flags[id] |= TOK_SPECIAL;
        if (type == GT_USER) t->flags[id] |= TOK_USERDEF;
        if (type == GT_CONTROL || type == GT_UNKNOWN || type == GT_USER) (*n_special)++;
        if (t->score) {
            if (!a->scores) {
                t->score[id] = 0.0f;
            } else if (a->score_type == MS_GGUF_F32) {
                memcpy(&t->score[id], a->scores + 4 * id, 4);
            } else {
                int32_t v;
                memcpy(&v, a->scores + 4 * id, 4);
                t->score[id] = (float)v;
            }
        }
        if (len > t->max_piece_len) t->max_piece_len = (uint32_t)len;
    }
    return MS_OK;
}

/* gpt2: raw bytes → id over the normal tokens (what BPE merges into), then
 * the merges: "a b" (split at the first space after the first byte, as
 * llama.cpp), rank = index */
static ms_status gguf_load_merges(const ms_gguf *g, const char *name, ms_tok *t, const gguf_arrays *a) {
    MS_TRY(tok_strmap_init(&t->bytes_map, a->n));
    for (int64_t id = 0; id < a->n; id++)
        if (gguf_type(a, id) == GT_NORMAL) tok_strmap_insert(t, &t->bytes_map, t->bytes, (int32_t)id);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = tok_strmap_find(t, &t->bytes_map, t->bytes, &c, 1);
    }
    ms_gguf_vtype et;
    int64_t m;
    const void *arr;
    ms_status st = ms_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &m, &arr);
    if (st == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing key tokenizer.ggml.merges", name);
    MS_TRY(st);
    if (et != MS_GGUF_STRING) MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.merges must be an array of strings", name);
    if (m >= INT32_MAX) MS_FAIL(MS_ERR_RANGE, "%s: tokenizer.ggml.merges has too many entries", name);
    MS_TRY(tok_pairmap_init(&t->merges, m));
    tok_catbuf cat = {0};
    for (int64_t r = 0; r < m; r++) {
        const char *s;
        size_t len;
        st = ms_gguf_arr_str(g, "tokenizer.ggml.merges", r, &s, &len);
        if (st < 0) break;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            st = MS_ERR_FORMAT;
            MS_LOG_ERROR("%s: tokenizer.ggml.merges[%lld] \"%.*s\" is not two tokens separated by a space", name,
                         (long long)r, (int)(len > 64 ? 64 : len), s);
            break;
        }
        size_t la = (size_t)(sp - s);
        int32_t ids[3];
        int missing;
        st = tok_merge_ids(t, s, la, sp + 1, len - la - 1, &cat, ids, &missing);
        if (st < 0) break;
        if (missing) {
            st = MS_ERR_FORMAT;
            MS_LOG_ERROR("%s: tokenizer.ggml.merges[%lld] \"%.*s\": %s is not in tokenizer.ggml.tokens", name,
                         (long long)r, (int)(len > 64 ? 64 : len), s,
                         missing == 1 ? "the left token" : missing == 2 ? "the right token" : "the merged token");
            break;
        }
        tok_pairmap_insert(&t->merges, ids[0], ids[1], (int32_t)r, ids[2]);
    }
    free(cat.v);
    return st;
}

/* special ids (llama.cpp defaults, then the file's keys) and the
 * end-of-generation tokens; *n_special grows by the tokens made control */
static ms_status gguf_special_ids(const ms_gguf *g, const char *name, ms_tok *t, int64_t *n_special) {
    int64_t n = t->n_ids;
    t->bos = t->kind == TOK_SPM && n > 1 ? 1 : -1;
    int32_t eos = t->kind == TOK_SPM && n > 2 ? 2 : -1, eot = -1;
    MS_TRY(gguf_token_id(g, t, "tokenizer.ggml.bos_token_id", &t->bos));
    MS_TRY(gguf_token_id(g, t, "tokenizer.ggml.eos_token_id", &eos));
    MS_TRY(gguf_token_id(g, t, "tokenizer.ggml.eot_token_id", &eot));
    MS_TRY(gguf_token_id(g, t, "tokenizer.ggml.unknown_token_id", &t->unk_id));
    MS_TRY(gguf_opt_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos));
    MS_TRY(gguf_opt_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix));
    if (t->add_bos && t->bos < 0)
        MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id",
                name);
    t->n_eos = 0;
    tok_eos_add(t, eos);
    tok_eos_add(t, eot);
    /* end-of-generation tokens found by text (llama.cpp does the same), and
     * made control tokens so raw text never produces them */
    for (size_t i = 0; i < sizeof EOG_TEXTS / sizeof *EOG_TEXTS; i++) {
        int32_t id = tok_strmap_find(t, &t->piece_map, t->piece, EOG_TEXTS[i], strlen(EOG_TEXTS[i]));
        if (id < 0) continue;
        tok_eos_add(t, id);
        if (!(t->flags[id] & (TOK_SPECIAL | TOK_USERDEF))) (*n_special)++;
        t->flags[id] = (uint8_t)((t->flags[id] & ~TOK_USERDEF) | TOK_SPECIAL);
    }
    return MS_OK;
}

/* control / unknown / user-defined tokens, longest first */
static ms_status gguf_sort_specials(ms_tok *t, int64_t n_special) {
    if (!n_special) return MS_OK;
    t->special = ms_malloc((size_t)n_special * sizeof *t->special);
    special_key *keys = ms_malloc((size_t)n_special * sizeof *keys);
    if (!t->special || !keys) {
        free(keys);
        return MS_ERR_NOMEM;
    }
    int64_t k = 0;
    for (int64_t id = 0; id < t->n_ids; id++)
        if (t->flags[id] & (TOK_SPECIAL | TOK_USERDEF)) keys[k++] = (special_key){t->piece[id].len, (int32_t)id};
    MS_ASSERT(k == n_special);
    qsort(keys, (size_t)k, sizeof *keys, cmp_special);
    for (int64_t i = 0; i < k; i++) t->special[i] = keys[i].id;
    t->n_special = k;
    free(keys);
    return MS_OK;
}

static ms_status gguf_chat(const ms_gguf *g, const char *name, ms_tok *t) {
    const char *tmpl;
    ms_status st = ms_gguf_get_str(g, "tokenizer.chat_template", &tmpl, NULL);
    t->chat = MS_CHAT_NONE;
    if (st == MS_ERR_NOT_FOUND) return MS_OK;
    MS_TRY(st);
    if (strstr(tmpl, "<|im_start|>"))
        t->chat = MS_CHAT_CHATML;
    else if (strstr(tmpl, "<|start_header_id|>"))
        t->chat = MS_CHAT_LLAMA3;
    else
        MS_LOG_INFO("%s: tokenizer.chat_template is neither ChatML nor Llama-3; no chat template", name);
    return MS_OK;
}

static ms_status gguf_parse(const ms_gguf *g, ms_tok *t) {
    const char *name = ms_gguf_path(g);
    const char *regex;
    MS_TRY(gguf_kind(g, name, t, &regex));
    gguf_arrays a;
    MS_TRY(gguf_read_arrays(g, name, &a));
    int64_t n_special;
    MS_TRY(gguf_load_tokens(g, name, t, &a, &n_special));
    if (t->kind == TOK_HF_BPE) {
        MS_TRY(gguf_load_merges(g, name, t, &a));
        MS_TRY(tok_compile_regex(name, regex, t));
    } else {
        /* "llama": the byte fallback needs <0xXX> tokens (set by gguf_set_bytes); text lookups use piece_map */
        t->unk_id = 0 < a.n ? 0 : -1;
    }
    MS_TRY(gguf_special_ids(g, name, t, &n_special));
    MS_TRY(gguf_sort_specials(t, n_special));
    MS_TRY(gguf_chat(g, name, t));
    t->gguf = true;
    return MS_OK;
}

ms_status ms_tok_load_gguf(const ms_gguf *g, ms_tok **out) {
    MS_ASSERT(g && out);
    *out = NULL;
    ms_tok *t = tok_new(TOK_HF_BPE);
    if (!t) return MS_ERR_NOMEM;
    ms_status st = gguf_parse(g, t);
    if (st < 0) {
        ms_tok_free(&t);
        return st;
    }
    *out = t;
    return MS_OK;
}
