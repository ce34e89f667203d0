/* ms_tokenizer.c — the tokenizer core: lookup tables, arena and per-id data,
 * GGUF special-token splitting, the encode dispatch to each kind's encoder,
 * loading by path, queries and streaming decoding. The kinds live in their
 * own files (ms_tok_int.h lists them).
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_gguf.h"
#include "ms_tok_int.h"

/* ---- hashing --------------------------------------------------------------- */

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb3fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint64_t table_size_for(int64_t n) {
    uint64_t c = 16;
    while (c < (uint64_t)n * 2 + 1) c *= 2;
    return c;
}

ms_status tok_strmap_init(strmap *m, int64_t n) {
    uint64_t c = table_size_for(n);
    m->slot = ms_malloc(c * sizeof *m->slot);
    m->hash = ms_calloc(c, sizeof *m->hash);
    if (!m->slot || !m->hash) return MS_ERR_NOMEM;
    memset(m->slot, 0xff, c * sizeof *m->slot);
    m->mask = c - 1;
    return MS_OK;
}

static void strmap_free(strmap *m) {
    free(m->slot);
    free(m->hash);
    memset(m, 0, sizeof *m);
}

int32_t tok_strmap_find(const ms_tok *t, const strmap *m, const span *keys, const void *s, size_t n) {
    if (!m->slot) return -1;
    uint32_t h = tok_hash_bytes(s, n);
    for (uint64_t i = h & m->mask;; i = (i + 1) & m->mask) {
        int32_t id = m->slot[i];
        if (id < 0) return -1;
        if (m->hash[i] == h && keys[id].len == n && memcmp(t->arena + keys[id].off, s, n) == 0) return id;
    }
}

/* Insert `id` under keys[id]; the first id of a given key wins. The table was
 * sized for every insertion, so it never fills. */
void tok_strmap_insert(const ms_tok *t, strmap *m, const span *keys, int32_t id) {
    const char *s = t->arena + keys[id].off;
    size_t n = keys[id].len;
    uint32_t h = tok_hash_bytes(s, n);
    for (uint64_t i = h & m->mask;; i = (i + 1) & m->mask) {
        int32_t o = m->slot[i];
        if (o < 0) {
            m->slot[i] = id;
            m->hash[i] = h;
            return;
        }
        if (m->hash[i] == h && keys[o].len == n && memcmp(t->arena + keys[o].off, s, n) == 0) return;
    }
}

ms_status tok_pairmap_init(pairmap *m, int64_t n) {
    uint64_t c = table_size_for(n);
    m->slot = ms_malloc(c * sizeof *m->slot);
    if (!m->slot) return MS_ERR_NOMEM;
    for (uint64_t i = 0; i < c; i++) m->slot[i].key = UINT64_MAX;
    m->mask = c - 1;
    return MS_OK;
}

static void pairmap_free(pairmap *m) {
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

/* Returns false if the pair has no merge. */
bool tok_pairmap_find(const pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged) {
    if (!m->slot) return false;
    uint64_t k = pair_key(a, b);
    for (uint64_t i = hash_u64(k) & m->mask;; i = (i + 1) & m->mask) {
        const pair_slot *p = &m->slot[i];
        if (p->key == k) {
            *rank = p->rank;
            *merged = p->merged;
            return true;
        }
        if (p->key == UINT64_MAX) return false;
    }
}

/* A repeated pair keeps its first (lowest) rank. */
void tok_pairmap_insert(pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged) {
    uint64_t k = pair_key(a, b);
    for (uint64_t i = hash_u64(k) & m->mask;; i = (i + 1) & m->mask) {
        pair_slot *p = &m->slot[i];
        if (p->key == k) return;
        if (p->key == UINT64_MAX) {
            *p = (pair_slot){k, rank, merged};
            return;
        }
    }
}

/* ---- arena and per-id tables ------------------------------------------------- */

ms_status tok_arena_put(ms_tok *t, const void *s, size_t n, span *out) {
    if (n > UINT32_MAX) MS_FAIL(MS_ERR_RANGE, "token of %zu bytes is too long", n);
    if (t->arena_len + n > t->arena_cap) {
        size_t c = t->arena_cap ? t->arena_cap : 4096;
        while (c < t->arena_len + n) c *= 2;
        char *a = ms_realloc(t->arena, c);
        if (!a) return MS_ERR_NOMEM;
        t->arena = a;
        t->arena_cap = c;
    }
    if (n && s) memcpy(t->arena + t->arena_len, s, n); /* s NULL: reserve only */
    out->off = t->arena_len;
    out->len = (uint32_t)n;
    t->arena_len += n;
    return MS_OK;
}

ms_status tok_alloc_ids(ms_tok *t, int64_t n_ids, bool scores) {
    t->n_ids = n_ids;
    t->piece = ms_calloc((size_t)n_ids, sizeof *t->piece);
    t->bytes = ms_calloc((size_t)n_ids, sizeof *t->bytes);
    t->flags = ms_calloc((size_t)n_ids, sizeof *t->flags);
    if (!t->piece || !t->bytes || !t->flags) return MS_ERR_NOMEM;
    if (scores) {
        t->score = ms_calloc((size_t)n_ids, sizeof *t->score);
        if (!t->score) return MS_ERR_NOMEM;
    }
    return MS_OK;
}

ms_tok *tok_new(enum tok_kind kind) {
    ms_tok *t = ms_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = kind;
    t->bos = -1;
    t->unk_id = -1;
    t->add_bos = true; /* HF, llama2.c: whenever there is a BOS id */
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    return t;
}

void ms_tok_free(ms_tok **tp) {
    if (!tp || !*tp) return;
    ms_tok *t = *tp;
    free(t->arena);
    free(t->piece);
    free(t->bytes);
    free(t->flags);
    free(t->score);
    strmap_free(&t->piece_map);
    strmap_free(&t->bytes_map);
    pairmap_free(&t->merges);
    if (t->re) pcre2_code_free(t->re);
    free(t->added);
    free(t->special);
    free(t);
    *tp = NULL;
}

bool tok_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

ms_status tok_merge_ids(const ms_tok *t, const char *a, size_t la, const char *b, size_t lb, tok_catbuf *cat,
                        int32_t ids[3], int *missing) {
    *missing = 0;
    ids[0] = tok_strmap_find(t, &t->piece_map, t->piece, a, la);
    ids[1] = tok_strmap_find(t, &t->piece_map, t->piece, b, lb);
    if (ids[0] < 0 || ids[0] >= t->n_model) {
        *missing = 1;
        return MS_OK;
    }
    if (ids[1] < 0 || ids[1] >= t->n_model) {
        *missing = 2;
        return MS_OK;
    }
    if (!tok_grow((void **)&cat->v, &cat->cap, la + lb, 1)) MS_FAIL(MS_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(cat->v, a, la);
    memcpy(cat->v + la, b, lb);
    ids[2] = tok_strmap_find(t, &t->piece_map, t->piece, cat->v, la + lb);
    if (ids[2] < 0 || ids[2] >= t->n_model) *missing = 3;
    return MS_OK;
}

void tok_eos_add(ms_tok *t, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < t->n_eos; i++)
        if (t->eos[i] == id) return;
    if (t->n_eos < TOK_MAX_EOS) t->eos[t->n_eos++] = id;
}

bool tok_parse_byte_piece(const char *s, size_t n, uint8_t *b) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return false;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0) return false;
        v = v * 16 + d;
    }
    *b = (uint8_t)v;
    return true;
}

/* ---- GGUF encoding: special-token splitting, then each kind's encoder ------------------------
 *
 * Encoding follows llama.cpp (src/llama-vocab.cpp), the reference for GGUF
 * files:
 *  1. Partition: control and unknown tokens (only with parse_special) and
 *     user-defined tokens (always) are cut out of the raw text, one token at a
 *     time, longest text first, every occurrence, leftmost first.
 *  2. "gpt2": each remaining fragment is split by the pre-tokenizer regex and
 *     each word merged by rank over its bytes (the HF path, minus NFC: ms_tok_bpe.c).
 *  3. "llama": each fragment (after a ' ' prefix when add_space_prefix and it
 *     follows a special or starts the text) has ' ' written as U+2581, is cut
 *     into UTF-8 characters (the length a lead byte announces, continuation
 *     bytes alone), and adjacent symbols whose concatenation is a token merge,
 *     highest score first, leftmost on ties. A final symbol that is no token
 *     becomes its <0xXX> byte tokens (ms_tok_spm.c).
 */

/* a piece of the text: raw bytes [off, off+len) when id < 0, else one token */
typedef struct {
    size_t off, len;
    int32_t id;
} gfrag;

/* First occurrence of needle (m ≥ 1 bytes) in hay (n bytes), or NULL (memmem is not C11). */
static const uint8_t *find_bytes(const uint8_t *hay, size_t n, const char *needle, size_t m) {
    const uint8_t first = (uint8_t)needle[0];
    while (n >= m) {
        const uint8_t *p = memchr(hay, first, n - m + 1);
        if (!p) return NULL;
        if (memcmp(p, needle, m) == 0) return p;
        n -= (size_t)(p - hay) + 1;
        hay = p + 1;
    }
    return NULL;
}

typedef struct {
    gfrag *v;
    size_t n, cap;
} gfrags;

static ms_status gfrags_push(gfrags *f, gfrag x) {
    if (!tok_grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v)) MS_FAIL(MS_ERR_NOMEM, "tokenizer: out of memory");
    f->v[f->n++] = x;
    return MS_OK;
}

/* Step 1 above. *res is a (caller-freed) array of fragments covering the text. */
static ms_status gguf_partition(const ms_tok *t, const uint8_t *text, size_t len, bool parse_special, gfrags *res) {
    gfrags cur = {0}, nxt = {0};
    ms_status st = MS_OK;
    if (len > 0) MS_TRY_GOTO(st, gfrags_push(&cur, (gfrag){0, len, -1}), done);
    for (int64_t k = 0; k < t->n_special && cur.n > 0; k++) {
        int32_t id = t->special[k];
        if (!parse_special && !(t->flags[id] & TOK_USERDEF)) continue;
        const char *p = t->arena + t->piece[id].off;
        size_t pl = t->piece[id].len;
        bool hit = false;
        for (size_t i = 0; i < cur.n && !hit; i++)
            hit = cur.v[i].id < 0 && find_bytes(text + cur.v[i].off, cur.v[i].len, p, pl) != NULL;
        if (!hit) continue;
        nxt.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            gfrag f = cur.v[i];
            if (f.id >= 0) {
                MS_TRY_GOTO(st, gfrags_push(&nxt, f), done);
                continue;
            }
            size_t a = f.off, end = f.off + f.len;
            const uint8_t *m;
            while (a < end && (m = find_bytes(text + a, end - a, p, pl)) != NULL) {
                size_t at = (size_t)(m - text);
                if (at > a) MS_TRY_GOTO(st, gfrags_push(&nxt, (gfrag){a, at - a, -1}), done);
                MS_TRY_GOTO(st, gfrags_push(&nxt, (gfrag){at, pl, id}), done);
                a = at + pl;
            }
            if (a < end) MS_TRY_GOTO(st, gfrags_push(&nxt, (gfrag){a, end - a, -1}), done);
        }
        gfrags tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
done:
    free(nxt.v);
    if (st < 0) {
        free(cur.v);
        return st;
    }
    *res = cur;
    return MS_OK;
}

static ms_status gguf_encode(const ms_tok *t, const uint8_t *text, size_t len, bool parse_special, ms_ids *out) {
    gfrags fr = {0};
    MS_TRY(gguf_partition(t, text, len, parse_special, &fr));
    bpe_scratch s = {0};
    tok_re_ctx rx;
    ms_status st = tok_re_open(t, &rx);
    if (st < 0) goto done;
    bool prev_special = true; /* the text start counts as after a special (llama.cpp) */
    for (size_t i = 0; i < fr.n; i++) {
        const gfrag *f = &fr.v[i];
        if (f->id >= 0) {
            MS_TRY_GOTO(st, ms_ids_push(out, f->id), done);
            prev_special = true;
        } else if (t->kind == TOK_SPM) {
            MS_TRY_GOTO(st,
                        tok_spm_encode_fragment(t, &s, text + f->off, f->len, t->add_space_prefix && prev_special, out),
                        done);
            prev_special = false;
        } else {
            MS_TRY_GOTO(st, tok_bpe_encode_segment(t, &s, &rx, text + f->off, f->len, out), done);
        }
    }
done:
    tok_re_close(&rx);
    tok_scratch_free(&s);
    free(fr.v);
    return st;
}

/* ---- encoding and loading by path ------------------------------------------------------- */

ms_status ms_tok_encode(const ms_tok *t, const char *text, size_t len, bool parse_special, ms_ids *out) {
    MS_ASSERT(t && out && (text || len == 0));
    if (len > (size_t)INT32_MAX / 4) MS_FAIL(MS_ERR_RANGE, "tokenizer: text of %zu bytes is too long", len);
    if (t->gguf) return gguf_encode(t, (const uint8_t *)text, len, parse_special, out);
    if (t->kind == TOK_LLAMA2C) return tok_llama2c_encode(t, (const uint8_t *)text, len, out);
    return tok_hf_encode(t, (const uint8_t *)text, len, parse_special, out);
}

ms_status ms_tok_load_dir(const char *dir, ms_tok **out) {
    MS_ASSERT(dir && out);
    *out = NULL;
    char *tj = ms_path_join(dir, "tokenizer.json");
    char *tc = ms_path_join(dir, "tokenizer_config.json");
    char *tb = ms_path_join(dir, "tokenizer.bin");
    char *cj = ms_path_join(dir, "config.json");
    ms_status st;
    if (!tj || !tc || !tb || !cj) {
        st = MS_ERR_NOMEM;
    } else if (ms_file_exists(tj)) {
        st = ms_tok_load_hf(tj, tc, out);
    } else if (ms_file_exists(tb)) {
        int64_t vs = 0;
        st = tok_config_vocab_size(cj, &vs);
        if (st == MS_OK) st = ms_tok_load_llama2c(tb, vs, out);
    } else {
        st = MS_ERR_NOT_FOUND;
        MS_LOG_ERROR("%s: no tokenizer.json or tokenizer.bin", dir);
    }
    free(tj);
    free(tc);
    free(tb);
    free(cj);
    return st;
}

/* A tokenizer.json file (any name): its chat template and special-token
 * settings from tokenizer_config.json in the same folder, where present. */
static ms_status tok_load_json_file(const char *path, ms_tok **out) {
    FILE *f = fopen(path, "rb");
    int c = ' ';
    while (f && (c == ' ' || c == '\t' || c == '\r' || c == '\n')) c = fgetc(f);
    if (f) fclose(f);
    if (c != '{')
        MS_FAIL(MS_ERR_FORMAT, "%s: not a GGUF file (no GGUF magic), a model directory or a tokenizer.json", path);
    char *dir = strdup(path);
    if (!dir) return MS_ERR_NOMEM;
    char *slash = strrchr(dir, '/');
    char *cfg = slash ? (*slash = '\0', ms_path_join(dir, "tokenizer_config.json")) : strdup("tokenizer_config.json");
    free(dir);
    if (!cfg) return MS_ERR_NOMEM;
    ms_status s = ms_tok_load_hf(path, cfg, out);
    free(cfg);
    return s;
}

ms_status ms_tok_load_path(const char *path, ms_tok **out) {
    MS_ASSERT(path && out);
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) MS_FAIL(MS_ERR_NOT_FOUND, "%s: no such file or directory", path);
    if (S_ISDIR(sb.st_mode)) return ms_tok_load_dir(path, out);
    if (!ms_gguf_is_gguf(path)) return tok_load_json_file(path, out);
    ms_gguf *g;
    MS_TRY(ms_gguf_open(path, &g));
    ms_status st = ms_tok_load_gguf(g, out);
    ms_gguf_close(&g);
    return st;
}

/* ---- queries -------------------------------------------------------------------------- */

int64_t ms_tok_vocab_size(const ms_tok *t) { return t->n_ids; }
int32_t ms_tok_bos(const ms_tok *t) { return t->bos; }
bool ms_tok_add_bos(const ms_tok *t) { return t->add_bos && t->bos >= 0; }
ms_chat_kind ms_tok_chat_kind(const ms_tok *t) { return t->chat; }

int ms_tok_eos(const ms_tok *t, const int32_t **ids) {
    if (ids) *ids = t->eos;
    return t->n_eos;
}

bool ms_tok_is_eos(const ms_tok *t, int32_t id) {
    for (int i = 0; i < t->n_eos; i++)
        if (t->eos[i] == id) return true;
    return false;
}

/* The token as written in the file (e.g. "<|eot_id|>", "Ġthe"), else, for
 * HF, the raw text of a vocab entry (" the"). */
int32_t ms_tok_find(const ms_tok *t, const char *piece) {
    size_t n = strlen(piece);
    int32_t id = tok_strmap_find(t, &t->piece_map, t->piece, piece, n);
    if (id < 0 && t->kind == TOK_HF_BPE) id = tok_strmap_find(t, &t->bytes_map, t->bytes, piece, n);
    return id;
}

ms_status ms_tok_token_bytes(const ms_tok *t, int32_t id, const uint8_t **bytes, size_t *len) {
    if (id < 0 || id >= t->n_ids || !(t->flags[id] & TOK_PRESENT))
        MS_FAIL(MS_ERR_RANGE, "tokenizer: token id %d is not in the vocabulary (%lld ids)", id, (long long)t->n_ids);
    *bytes = (const uint8_t *)t->arena + t->bytes[id].off;
    *len = t->bytes[id].len;
    return MS_OK;
}

/* ---- decoding --------------------------------------------------------------------------- */

void ms_tok_decoder_init(ms_tok_decoder *d) {
    memset(d, 0, sizeof *d);
    d->prev_id = -1;
}

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD */

/* Emit complete characters of pending ++ b; invalid bytes become U+FFFD (one
 * per maximal invalid subpart); an unfinished character at the end is kept
 * in `hold`. With out == NULL only counts. Returns the output length. */
static size_t utf8_stream(const uint8_t *pend, int np, const uint8_t *b, size_t nb, char *out, uint8_t *hold,
                          int *nhold) {
    size_t total = (size_t)np + nb, o = 0, i = 0;
#define AT(k) ((k) < (size_t)np ? pend[(k)] : b[(k) - (size_t)np])
    if (nhold) *nhold = 0;
    while (i < total) {
        uint8_t c = AT(i);
        int need = utf8_need(c);
        if (need == 1) {
            if (out) out[o] = (char)c;
            o++;
            i++;
            continue;
        }
        if (need == 0) {
            if (out) memcpy(out + o, REPLACEMENT, 3);
            o += 3;
            i++;
            continue;
        }
        int k = 1;
        while (k < need && i + (size_t)k < total && utf8_cont_ok(c, k, AT(i + (size_t)k))) k++;
        if (k == need) {
            if (out)
                for (int j = 0; j < need; j++) out[o + (size_t)j] = (char)AT(i + (size_t)j);
            o += (size_t)need;
        } else if (i + (size_t)k == total) { /* unfinished: hold back (≤ 3 bytes) */
            if (hold)
                for (int j = 0; j < k; j++) hold[j] = AT(i + (size_t)j);
            if (nhold) *nhold = k;
        } else {
            if (out) memcpy(out + o, REPLACEMENT, 3);
            o += 3;
        }
        i += (size_t)k;
    }
#undef AT
    return o;
}

ms_status ms_tok_decode_next(const ms_tok *t, ms_tok_decoder *d, int32_t id, bool skip_special, char *out, size_t cap,
                             size_t *n) {
    MS_ASSERT(t && d && n && (out || cap == 0));
    *n = 0;
    if (id < 0 || id >= t->n_ids || !(t->flags[id] & TOK_PRESENT))
        MS_FAIL(MS_ERR_RANGE, "tokenizer: token id %d is not in the vocabulary (%lld ids)", id, (long long)t->n_ids);
    int32_t prev = d->prev_id;
    if (skip_special && (t->flags[id] & TOK_SPECIAL)) {
        d->prev_id = id;
        return MS_OK;
    }
    const uint8_t *b = (const uint8_t *)t->arena + t->bytes[id].off;
    size_t nb = t->bytes[id].len;
    /* llama2.c decode(): after BOS the piece's leading space is dropped */
    if (t->kind == TOK_LLAMA2C && prev == t->bos && t->piece[id].len > 0 && t->arena[t->piece[id].off] == ' ' &&
        b == (const uint8_t *)t->arena + t->piece[id].off) {
        b++;
        nb--;
    }
    /* GGUF "llama" with a space prefix: the space the encoder put after a
     * special token (BOS included) is not part of the text */
    if (t->kind == TOK_SPM && t->add_space_prefix && nb > 0 && b[0] == ' ' &&
        prev >= 0 && (t->flags[prev] & (TOK_SPECIAL | TOK_USERDEF))) {
        b++;
        nb--;
    }
    size_t need = utf8_stream(d->pending, d->n_pending, b, nb, NULL, NULL, NULL);
    if (need > cap) MS_FAIL(MS_ERR_RANGE, "tokenizer: decode buffer of %zu bytes is too small (%zu needed)", cap, need);
    uint8_t hold[8];
    int nhold;
    *n = utf8_stream(d->pending, d->n_pending, b, nb, out, hold, &nhold);
    memcpy(d->pending, hold, (size_t)nhold);
    d->n_pending = nhold;
    d->prev_id = id;
    return MS_OK;
}

ms_status ms_tok_decode_flush(ms_tok_decoder *d, char *out, size_t cap, size_t *n) {
    MS_ASSERT(d && n && (out || cap == 0));
    *n = 0;
    if (d->n_pending == 0) return MS_OK;
    if (cap < 3) MS_FAIL(MS_ERR_RANGE, "tokenizer: decode buffer of %zu bytes is too small (3 needed)", cap);
    memcpy(out, REPLACEMENT, 3); /* held bytes are a valid but unfinished prefix: one U+FFFD */
    *n = 3;
    d->n_pending = 0;
    return MS_OK;
}

ms_status ms_tok_decode_all(const ms_tok *t, const int32_t *ids, int64_t n, bool skip_special, char **text) {
    MS_ASSERT(t && text && (ids || n == 0));
    *text = NULL;
    size_t cap = 64, len = 0;
    char *s = ms_malloc(cap);
    if (!s) return MS_ERR_NOMEM;
    ms_tok_decoder d;
    ms_tok_decoder_init(&d);
    ms_status st = MS_OK;
    for (int64_t i = 0; i <= n; i++) {
        /* worst case: every byte, held ones included, becomes a 3-byte U+FFFD */
        size_t nb = 0;
        if (i < n && ids[i] >= 0 && ids[i] < t->n_ids) nb = t->bytes[ids[i]].len;
        size_t need = len + 3 * (nb + (size_t)d.n_pending) + 4;
        if (need > cap) {
            while (cap < need) cap *= 2;
            char *p = ms_realloc(s, cap);
            if (!p) {
                st = MS_ERR_NOMEM;
                break;
            }
            s = p;
        }
        size_t got;
        st = i < n ? ms_tok_decode_next(t, &d, ids[i], skip_special, s + len, cap - len - 1, &got)
                   : ms_tok_decode_flush(&d, s + len, cap - len - 1, &got);
        if (st < 0) break;
        len += got;
    }
    if (st < 0) {
        free(s);
        return st;
    }
    s[len] = '\0';
    *text = s;
    return MS_OK;
}
