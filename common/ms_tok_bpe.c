/* ms_tok_bpe.c — byte-level BPE encoding (Hugging Face tokenizer.json and
 * GGUF "gpt2"): the pre-tokenizer regex (PCRE2, UTF + UCP), NFC, the
 * leftmost-longest scan for HF added tokens, and BPE over each word.
 *
 * The encoder works on raw bytes: the GPT-2 byte↦unicode map is a bijection,
 * so merging raw-byte symbols is the same as merging the mapped characters.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "ms_tok_int.h"

/* Unicode White_Space (Rust char::is_whitespace): length of the whitespace
 * character at s, 0 if none. */
static int ws_len(const uint8_t *s, size_t n) {
    uint32_t c;
    int len = utf8_decode(s, n, &c);
    if (len == 0) return 0;
    bool ws = (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
              (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
    return ws ? len : 0;
}

/* ---- GPT-2 bytes_to_unicode ---------------------------------------------------
 * Printable Latin-1 bytes (! .. ~, ¡ .. ¬, ® .. ÿ) stand for themselves; the
 * other 68 bytes map, in byte order, to U+0100 + n. */
static void byte_unicode_tables(uint32_t b2u[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        b2u[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

void tok_unicode_to_byte(int16_t u2b[512]) {
    uint32_t b2u[256];
    byte_unicode_tables(b2u);
    for (int i = 0; i < 512; i++) u2b[i] = -1;
    for (int b = 0; b < 256; b++) u2b[b2u[b]] = (int16_t)b;
}

/* Byte-level piece → raw bytes. A character outside the map keeps its own
 * UTF-8 (as the tokenizers ByteLevel decoder does). out has ≥ len bytes. */
size_t tok_byte_level_decode(const uint8_t *s, size_t len, const int16_t *u2b, uint8_t *out) {
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        int l = utf8_decode(s + i, len - i, &cp);
        if (l == 0) {
            out[o++] = s[i++];
            continue;
        }
        if (cp < 512 && u2b[cp] >= 0) {
            out[o++] = (uint8_t)u2b[cp];
        } else {
            memcpy(out + o, s + i, (size_t)l);
            o += (size_t)l;
        }
        i += (size_t)l;
    }
    return o;
}

/* ---- per-call word cache ---------------------------------------------------- */

static struct wc_slot *wc_probe(const bpe_scratch *s, const uint8_t *w, size_t n, uint32_t h) {
    for (uint64_t i = h & s->wc_mask;; i = (i + 1) & s->wc_mask) {
        struct wc_slot *e = &s->wc[i];
        if (e->key_len == 0) return e;
        if (e->hash == h && e->key_len == n && memcmp(s->wc_keys + e->key_off, w, n) == 0) return e;
    }
}

/* Ids of a cached word, or NULL. */
static const int32_t *wc_find(const bpe_scratch *s, const uint8_t *w, size_t n, uint32_t h, int *n_ids) {
    if (!s->wc || n == 0 || n > WC_MAX_WORD) return NULL;
    const struct wc_slot *e = wc_probe(s, w, n, h);
    if (e->key_len == 0) return NULL;
    *n_ids = e->n_ids;
    return s->wc_ids + e->ids_off;
}

/* Remember a word's ids. Best effort: a full cache or a failed allocation
 * only means the word is not cached. */
static void wc_insert(bpe_scratch *s, const uint8_t *w, size_t n, uint32_t h, const int32_t *ids, int64_t n_ids) {
    if (n == 0 || n > WC_MAX_WORD || n_ids > UINT16_MAX) return;
    if (!s->wc || (s->wc_used + 1) * 2 > s->wc_mask + 1) {
        uint64_t cap = s->wc ? (s->wc_mask + 1) * 2 : 1024;
        if (cap > WC_MAX_SLOTS) return;
        struct wc_slot *old = s->wc;
        uint64_t old_cap = s->wc ? s->wc_mask + 1 : 0;
        s->wc = calloc(cap, sizeof *s->wc);
        if (!s->wc) {
            s->wc = old;
            return;
        }
        s->wc_mask = cap - 1;
        for (uint64_t i = 0; i < old_cap; i++)
            if (old[i].key_len) *wc_probe(s, s->wc_keys + old[i].key_off, old[i].key_len, old[i].hash) = old[i];
        free(old);
    }
    if (!tok_grow((void **)&s->wc_keys, &s->wc_keys_cap, s->wc_keys_n + n, 1) ||
        !tok_grow((void **)&s->wc_ids, &s->wc_ids_cap, s->wc_ids_n + (size_t)n_ids, sizeof *s->wc_ids) ||
        s->wc_keys_n + n > UINT32_MAX || s->wc_ids_n + (size_t)n_ids > UINT32_MAX)
        return;
    struct wc_slot *e = wc_probe(s, w, n, h);
    if (e->key_len) return;
    memcpy(s->wc_keys + s->wc_keys_n, w, n);
    memcpy(s->wc_ids + s->wc_ids_n, ids, (size_t)n_ids * sizeof *ids);
    *e = (struct wc_slot){h, (uint32_t)s->wc_keys_n, (uint32_t)s->wc_ids_n, (uint16_t)n, (uint16_t)n_ids};
    s->wc_keys_n += n;
    s->wc_ids_n += (size_t)n_ids;
    s->wc_used++;
}

/* ---- the pre-tokenizer regex ------------------------------------------------ */

ms_status tok_compile_regex(const char *name, const char *pattern, ms_tok *t) {
    int err;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP;
#ifdef PCRE2_MATCH_INVALID_UTF
    opts |= PCRE2_MATCH_INVALID_UTF; /* raw input may hold invalid UTF-8: such bytes match nothing */
#endif
    t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &err, &off, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        MS_FAIL(MS_ERR_FORMAT, "%s: pre_tokenizer Split regex does not compile at offset %zu: %s", name, (size_t)off,
                (char *)msg);
    }
    if (pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) != 0)
        MS_LOG_DEBUG("%s: PCRE2 JIT unavailable, interpreting the regex", name);
    return MS_OK;
}

ms_status tok_re_open(const ms_tok *t, tok_re_ctx *rx) {
    *rx = (tok_re_ctx){0};
    if (!t->re) return MS_OK;
    rx->md = pcre2_match_data_create_from_pattern(t->re, NULL);
    rx->mc = pcre2_match_context_create(NULL);
    if (!rx->md || !rx->mc) {
        tok_re_close(rx);
        MS_FAIL(MS_ERR_NOMEM, "tokenizer: out of memory for the regex match data");
    }
    rx->js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (rx->js) pcre2_jit_stack_assign(rx->mc, NULL, rx->js);
    return MS_OK;
}

void tok_re_close(tok_re_ctx *rx) {
    if (rx->js) pcre2_jit_stack_free(rx->js);
    pcre2_match_context_free(rx->mc);
    pcre2_match_data_free(rx->md);
    *rx = (tok_re_ctx){0};
}

/* ---- encoding ------------------------------------------------------------------ */

/* One pre-split word (raw bytes) → ids. */
static ms_status hf_encode_word(const ms_tok *t, bpe_scratch *s, const uint8_t *w, size_t n, ms_ids *out) {
    if (t->ignore_merges) {
        int32_t id = tok_strmap_find(t, &t->bytes_map, t->bytes, w, n);
        if (id >= 0) return ms_ids_push(out, id);
    }
    uint32_t h = n <= WC_MAX_WORD ? tok_hash_bytes(w, n) : 0;
    int n_cached;
    const int32_t *cached = wc_find(s, w, n, h, &n_cached);
    if (cached && n_cached > 0) {
        MS_TRY(ms_ids_reserve(out, out->n + n_cached));
        memcpy(out->v + out->n, cached, (size_t)n_cached * sizeof *cached);
        out->n += n_cached;
        return MS_OK;
    }
    int64_t start = out->n;
    MS_TRY(tok_scratch_syms(s, (int64_t)n));
    int64_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0) id = t->unk_id;
        if (id < 0) continue; /* no symbol and no unk: dropped, as tokenizers' BPE does */
        s->sym[k] = (bpe_sym){.id = id, .prev = (int32_t)k - 1, .next = (int32_t)k + 1};
        k++;
    }
    if (k > 0) {
        s->sym[k - 1].next = -1;
        MS_TRY(tok_bpe_merge(t, s, k, out));
    }
    if (out->n > start) wc_insert(s, w, n, h, out->v + start, out->n - start);
    return MS_OK;
}

/* Pre-tokenize (Split regex, behavior Isolated: matches and the gaps between
 * them are both words) and BPE each word. */
ms_status tok_bpe_encode_segment(const ms_tok *t, bpe_scratch *s, const tok_re_ctx *rx, const uint8_t *text,
                                 size_t len, ms_ids *out) {
    if (!t->re) return hf_encode_word(t, s, text, len, out);
    size_t pos = 0, done = 0;
    while (pos < len) {
        int rc = pcre2_match(t->re, text, len, pos, PCRE2_NO_UTF_CHECK, rx->md, rx->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            MS_FAIL(MS_ERR_INTERNAL, "tokenizer: pre-tokenizer regex failed at byte %zu: %s", pos, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(rx->md);
        size_t a = ov[0], b = ov[1];
        if (b <= a) { /* an empty match splits nothing: search again one character on */
            pos = a + 1;
            while (pos < len && (text[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (a > done) MS_TRY(hf_encode_word(t, s, text + done, a - done, out));
        MS_TRY(hf_encode_word(t, s, text + a, b - a, out));
        done = pos = b;
    }
    if (len > done) MS_TRY(hf_encode_word(t, s, text + done, len - done, out));
    return MS_OK;
}

/* NFC of [a, b) (valid UTF-8) appended to s->buf at *o. */
static ms_status nfc_chunk(bpe_scratch *s, const uint8_t *a, size_t n, size_t *o) {
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t m = utf8proc_map(a, (utf8proc_ssize_t)n, &dst, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (m < 0) {
        free(dst);
        MS_FAIL(MS_ERR_INTERNAL, "tokenizer: NFC failed: %s", utf8proc_errmsg(m));
    }
    ms_status st = tok_scratch_buf(s, *o + (size_t)m);
    if (st == MS_OK) {
        memcpy(s->buf + *o, dst, (size_t)m);
        *o += (size_t)m;
    }
    free(dst);
    return st;
}

/* NFC, applied only where it can change something: an ASCII character never
 * composes with what precedes it, so the text splits into ASCII runs (left
 * as they are) and chunks of [the ASCII character before a non-ASCII run,
 * the run]. Invalid UTF-8 bytes are kept as they are. Sets *res to the text
 * to use (the input itself when it is all ASCII). */
static ms_status nfc_segment(bpe_scratch *s, const uint8_t *text, size_t len, const uint8_t **res, size_t *res_len) {
    size_t i = 0;
    while (i < len && text[i] < 0x80) i++;
    if (i == len) {
        *res = text;
        *res_len = len;
        return MS_OK;
    }
    size_t o = 0;
    MS_TRY(tok_scratch_buf(s, len + 16));
    i = 0;
    while (i < len) {
        size_t a = i;
        while (i < len && text[i] < 0x80) i++;
        if (i == len) {
            MS_TRY(tok_scratch_buf(s, o + (i - a)));
            memcpy(s->buf + o, text + a, i - a);
            o += i - a;
            break;
        }
        /* the ASCII run minus its last character (which may start a composition) */
        size_t keep = i > a ? i - 1 : i;
        MS_TRY(tok_scratch_buf(s, o + (keep - a)));
        memcpy(s->buf + o, text + a, keep - a);
        o += keep - a;
        size_t c = keep;
        int l;
        while (i < len && text[i] >= 0x80 && (l = utf8_valid_len(text + i, len - i)) > 0) i += (size_t)l;
        if (i > c) MS_TRY(nfc_chunk(s, text + c, i - c, &o));
        if (i < len && text[i] >= 0x80) { /* an invalid byte */
            MS_TRY(tok_scratch_buf(s, o + 1));
            s->buf[o++] = (char)text[i++];
        }
    }
    *res = (const uint8_t *)s->buf;
    *res_len = o;
    return MS_OK;
}

static ms_status hf_encode_plain(const ms_tok *t, bpe_scratch *s, const tok_re_ctx *rx, const uint8_t *text,
                                 size_t len, ms_ids *out) {
    if (len == 0) return MS_OK;
    if (t->nfc) MS_TRY(nfc_segment(s, text, len, &text, &len));
    return tok_bpe_encode_segment(t, s, rx, text, len, out);
}

static bool is_word_char_at(const uint8_t *s, size_t n) {
    uint32_t c;
    if (utf8_decode(s, n, &c) == 0) return false;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO) || c == '_';
}

/* Longest added token starting at text[i] (leftmost-longest overall, since
 * the caller scans left to right); -1 if none. */
static int32_t added_match_at(const ms_tok *t, const uint8_t *text, size_t len, size_t i, bool parse_special) {
    uint8_t c = text[i];
    for (int64_t k = t->by_first[c]; k < t->by_first[c + 1]; k++) {
        int32_t id = t->added[k];
        const span *p = &t->piece[id];
        if (!parse_special && (t->flags[id] & TOK_SPECIAL)) continue;
        if (p->len > len - i || memcmp(text + i, t->arena + p->off, p->len) != 0) continue;
        if (t->flags[id] & TOK_SINGLE) {
            size_t e = i + p->len;
            if (i > 0) {
                size_t q = i - 1; /* start of the previous character */
                while (q > 0 && i - q < 4 && (text[q] & 0xC0) == 0x80) q--;
                if (is_word_char_at(text + q, i - q)) continue;
            }
            if (e < len && is_word_char_at(text + e, len - e)) continue;
        }
        return id;
    }
    return -1;
}

ms_status tok_hf_encode(const ms_tok *t, const uint8_t *text, size_t len, bool parse_special, ms_ids *out) {
    bpe_scratch s = {0};
    tok_re_ctx rx;
    ms_status st = tok_re_open(t, &rx);
    if (st < 0) goto done;
    bool scan = t->n_added > 0 && (parse_special || t->any_nonspecial_added);
    size_t seg = 0; /* start of the text not yet encoded */
    for (size_t i = 0; scan && i < len; i++) {
        int32_t id = added_match_at(t, text, len, i, parse_special);
        if (id < 0) continue;
        size_t a = i, b = i + t->piece[id].len;
        int l;
        if (t->flags[id] & TOK_LSTRIP)
            while (a > seg) {
                size_t p = a - 1;
                while (p > seg && (text[p] & 0xC0) == 0x80) p--;
                if (ws_len(text + p, a - p) != (int)(a - p)) break;
                a = p;
            }
        if (t->flags[id] & TOK_RSTRIP)
            while (b < len && (l = ws_len(text + b, len - b)) > 0) b += (size_t)l;
        MS_TRY_GOTO(st, hf_encode_plain(t, &s, &rx, text + seg, a - seg, out), done);
        MS_TRY_GOTO(st, ms_ids_push(out, id), done);
        seg = b;
        i = b - 1;
    }
    st = hf_encode_plain(t, &s, &rx, text + seg, len - seg, out);
done:
    tok_re_close(&rx);
    tok_scratch_free(&s);
    return st;
}

