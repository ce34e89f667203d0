/* ms_tokenizer.c — byte-level BPE (Hugging Face tokenizer.json) and llama2.c
 * tokenizer.bin: loading, encoding, streaming decoding.
 *
 * Both encoders run the same merge loop (bpe_merge): a doubly linked list of
 * symbols and a min-heap of candidate pairs keyed by (priority, position),
 * with stale heap entries dropped when popped. For HF the priority is the
 * merge rank (lowest first, leftmost on ties, as tokenizers' BPE::merge_word);
 * for llama2.c it is −score (highest score first, leftmost on ties, which is
 * what run.c encode()'s "first pair with a strictly better score" loop picks).
 *
 * Vocabulary lookups are open-addressing hash tables over spans of one arena:
 * `piece` is the token as written in the file (byte-level unicode for HF),
 * `bytes` the raw bytes it stands for. The HF encoder works on raw bytes: the
 * GPT-2 byte↦unicode map is a bijection, so merging raw-byte symbols is the
 * same as merging the mapped characters.
 */
#include "ms_tokenizer.h"

#include <sys/stat.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "ms_gguf.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* ---- types ----------------------------------------------------------------- */

enum tok_kind { TOK_HF_BPE = 0, TOK_LLAMA2C, TOK_SPM /* GGUF "llama" */ };

enum {
    TOK_PRESENT = 1u << 0, /* the id has an entry (HF added ids may leave holes) */
    TOK_SPECIAL = 1u << 1, /* control token: dropped by decode with skip_special */
    TOK_ADDED = 1u << 2,   /* HF added token: matched in the raw text */
    TOK_LSTRIP = 1u << 3,  /* added token swallows whitespace on its left */
    TOK_RSTRIP = 1u << 4,  /* ... and on its right */
    TOK_SINGLE = 1u << 5,  /* single_word: not matched inside a word */
    TOK_USERDEF = 1u << 6, /* GGUF user-defined token: cut out of the text even without parse_special */
};

#define TOK_MAX_EOS 8
/* Added-token ids may leave holes above the model vocabulary, but not many:
 * the per-id tables are sized by the largest id. */
#define TOK_ID_SLACK 65536
/* llama2.c: a merge needs a score strictly above this (run.c best_score). */
#define LLAMA2C_MIN_SCORE -1e10f

typedef struct {
    size_t off;
    uint32_t len;
} span;

/* string → id, keys are spans of the arena (open addressing, linear probe) */
typedef struct {
    int32_t *slot; /* id or -1 */
    uint32_t *hash;
    uint64_t mask;
} strmap;

/* (left id, right id) → (rank, merged id); one 16-byte slot per probe */
typedef struct {
    uint64_t key; /* UINT64_MAX = empty */
    int32_t rank;
    int32_t merged;
} pair_slot;

typedef struct {
    pair_slot *slot;
    uint64_t mask;
} pairmap;

struct ms_tok {
    enum tok_kind kind;
    int64_t n_ids;   /* length of the per-id tables */
    int64_t n_model; /* HF: model vocab ids are [0, n_model) */
    char *arena;
    size_t arena_len, arena_cap;
    span *piece;      /* [n_ids] token as written in the file */
    span *bytes;      /* [n_ids] raw bytes it stands for */
    uint8_t *flags;   /* [n_ids] TOK_* */
    float *score;     /* [n_ids] llama2.c merge scores, NULL for HF */
    strmap piece_map; /* piece → id: model vocab, then added tokens */
    strmap bytes_map; /* raw bytes → id: the vocab BPE merges into */
    pairmap merges;
    int32_t byte_id[256]; /* HF: id of each single-byte symbol, -1 if absent */
    int32_t unk_id;
    bool ignore_merges, nfc;
    pcre2_code *re;
    /* added tokens sorted by (first byte, length desc); by_first[b]..by_first[b+1] */
    int32_t *added;
    int64_t n_added;
    int64_t by_first[257];
    bool any_nonspecial_added;
    int32_t bos;
    int32_t eos[TOK_MAX_EOS];
    int n_eos;
    ms_chat_kind chat;
    uint32_t max_piece_len;
    bool add_bos;
    /* GGUF: encoding follows llama.cpp (no NFC; specials cut out longest first) */
    bool gguf;
    bool add_space_prefix; /* TOK_SPM: ' ' before text at the start and after a special */
    /* GGUF control/unknown/user-defined ids, longest text first (then lowest id) */
    int32_t *special;
    int64_t n_special;
};

/* ---- hashing --------------------------------------------------------------- */

static uint32_t hash_bytes(const void *p, size_t n) {
    const uint8_t *s = p;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h ? h : 1;
}

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

static ms_status strmap_init(strmap *m, int64_t n) {
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

static int32_t strmap_find(const ms_tok *t, const strmap *m, const span *keys, const void *s, size_t n) {
    if (!m->slot) return -1;
    uint32_t h = hash_bytes(s, n);
    for (uint64_t i = h & m->mask;; i = (i + 1) & m->mask) {
        int32_t id = m->slot[i];
        if (id < 0) return -1;
        if (m->hash[i] == h && keys[id].len == n && memcmp(t->arena + keys[id].off, s, n) == 0) return id;
    }
}

/* Insert `id` under keys[id]; the first id of a given key wins. The table was
 * sized for every insertion, so it never fills. */
static void strmap_insert(const ms_tok *t, strmap *m, const span *keys, int32_t id) {
    const char *s = t->arena + keys[id].off;
    size_t n = keys[id].len;
    uint32_t h = hash_bytes(s, n);
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

static ms_status pairmap_init(pairmap *m, int64_t n) {
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
static bool pairmap_find(const pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged) {
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
static void pairmap_insert(pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged) {
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

static ms_status arena_put(ms_tok *t, const void *s, size_t n, span *out) {
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

static ms_status tok_alloc_ids(ms_tok *t, int64_t n_ids, bool scores) {
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

static ms_tok *tok_new(enum tok_kind kind) {
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

/* ---- UTF-8 ----------------------------------------------------------------- */

/* Length a lead byte announces (1..4), 0 if it can never start a character. */
static int utf8_need(uint8_t c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Is `c` a valid k-th byte (k ≥ 1) after `lead`? (no overlongs, surrogates, > U+10FFFF) */
static bool utf8_cont_ok(uint8_t lead, int k, uint8_t c) {
    if (k == 1) {
        if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF;
        if (lead == 0xED) return c >= 0x80 && c <= 0x9F;
        if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
        if (lead == 0xF4) return c >= 0x80 && c <= 0x8F;
    }
    return (c & 0xC0) == 0x80;
}

/* Length of the valid character at s (n bytes available), 0 if invalid or cut. */
static int utf8_valid_len(const uint8_t *s, size_t n) {
    int need = utf8_need(s[0]);
    if (need == 0 || (size_t)need > n) return 0;
    for (int k = 1; k < need; k++)
        if (!utf8_cont_ok(s[0], k, s[k])) return 0;
    return need;
}

/* Decode the valid character at s; returns its length (0 if invalid). */
static int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    int len = utf8_valid_len(s, n);
    if (len == 1)
        *cp = s[0];
    else if (len == 2)
        *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    else if (len == 3)
        *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    else if (len == 4)
        *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
              (s[3] & 0x3F);
    return len;
}

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

/* Byte-level piece → raw bytes. A character outside the map keeps its own
 * UTF-8 (as the tokenizers ByteLevel decoder does). out has ≥ len bytes. */
static size_t byte_level_decode(const uint8_t *s, size_t len, const int16_t *u2b, uint8_t *out) {
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

/* ---- the merge loop ------------------------------------------------------------ */

typedef struct {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
} bpe_sym;

typedef struct {
    double prio; /* lower merges first */
    int32_t pos; /* left symbol; leftmost first on equal priority */
    int32_t left, right, merged;
} bpe_cand;

typedef struct {
    bpe_sym *sym;
    int64_t sym_cap;
    bpe_cand *heap;
    int64_t heap_n, heap_cap;
    char *buf; /* NFC output, llama2.c concatenations */
    size_t buf_cap;
    /* per-call word cache (word bytes → ids): real text repeats its words,
     * and the tokenizer itself stays read-only, so threads can share it */
    struct wc_slot {
        uint32_t hash, key_off, ids_off;
        uint16_t key_len, n_ids; /* key_len 0 = empty */
    } * wc;
    uint64_t wc_mask, wc_used;
    uint8_t *wc_keys;
    int32_t *wc_ids;
    size_t wc_keys_n, wc_keys_cap, wc_ids_n, wc_ids_cap;
} bpe_scratch;

#define WC_MAX_WORD 64          /* longer words are not cached */
#define WC_MAX_SLOTS (1u << 18) /* the cache stops growing here and stops taking words */

static void scratch_free(bpe_scratch *s) {
    free(s->sym);
    free(s->heap);
    free(s->buf);
    free(s->wc);
    free(s->wc_keys);
    free(s->wc_ids);
}

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

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
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
    if (!grow((void **)&s->wc_keys, &s->wc_keys_cap, s->wc_keys_n + n, 1) ||
        !grow((void **)&s->wc_ids, &s->wc_ids_cap, s->wc_ids_n + (size_t)n_ids, sizeof *s->wc_ids) ||
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

static ms_status scratch_syms(bpe_scratch *s, int64_t n) {
    if (n <= s->sym_cap) return MS_OK;
    int64_t c = s->sym_cap ? s->sym_cap : 64;
    while (c < n) c *= 2;
    bpe_sym *p = ms_realloc(s->sym, (size_t)c * sizeof *p);
    if (!p) return MS_ERR_NOMEM;
    s->sym = p;
    s->sym_cap = c;
    return MS_OK;
}

static ms_status scratch_buf(bpe_scratch *s, size_t n) {
    if (n <= s->buf_cap) return MS_OK;
    size_t c = s->buf_cap ? s->buf_cap : 256;
    while (c < n) c *= 2;
    char *p = ms_realloc(s->buf, c);
    if (!p) return MS_ERR_NOMEM;
    s->buf = p;
    s->buf_cap = c;
    return MS_OK;
}

static bool cand_less(const bpe_cand *a, const bpe_cand *b) {
    return a->prio < b->prio || (a->prio == b->prio && a->pos < b->pos);
}

static ms_status heap_push(bpe_scratch *s, bpe_cand c) {
    if (s->heap_n == s->heap_cap) {
        int64_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        bpe_cand *h = ms_realloc(s->heap, (size_t)cap * sizeof *h);
        if (!h) return MS_ERR_NOMEM;
        s->heap = h;
        s->heap_cap = cap;
    }
    int64_t i = s->heap_n++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!cand_less(&c, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = c;
    return MS_OK;
}

static bpe_cand heap_pop(bpe_scratch *s) {
    bpe_cand top = s->heap[0];
    bpe_cand last = s->heap[--s->heap_n];
    int64_t i = 0;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        const bpe_cand *best = &last;
        if (l < s->heap_n && cand_less(&s->heap[l], best)) {
            m = l;
            best = &s->heap[l];
        }
        if (r < s->heap_n && cand_less(&s->heap[r], best)) m = r;
        if (m == i) break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (s->heap_n > 0) s->heap[i] = last;
    return top;
}

/* Candidate merge of (a, b): false if the pair never merges. */
static bool pair_candidate(const ms_tok *t, bpe_scratch *s, int32_t a, int32_t b, double *prio, int32_t *merged) {
    if (t->kind == TOK_HF_BPE) {
        int32_t rank;
        if (!pairmap_find(&t->merges, a, b, &rank, merged)) return false;
        *prio = rank;
        return true;
    }
    /* llama2.c: the concatenated piece must be in the vocab with a usable score */
    const span *pa = &t->piece[a], *pb = &t->piece[b];
    size_t n = (size_t)pa->len + pb->len;
    if (n > t->max_piece_len) return false;
    memcpy(s->buf, t->arena + pa->off, pa->len);
    memcpy(s->buf + pa->len, t->arena + pb->off, pb->len);
    int32_t id = strmap_find(t, &t->piece_map, t->piece, s->buf, n);
    if (id < 0 || !(t->score[id] > LLAMA2C_MIN_SCORE)) return false;
    *prio = -(double)t->score[id];
    *merged = id;
    return true;
}

static ms_status push_pair(const ms_tok *t, bpe_scratch *s, int32_t pos) {
    int32_t nx = s->sym[pos].next;
    if (nx < 0) return MS_OK;
    bpe_cand c = {.pos = pos, .left = s->sym[pos].id, .right = s->sym[nx].id};
    if (!pair_candidate(t, s, c.left, c.right, &c.prio, &c.merged)) return MS_OK;
    return heap_push(s, c);
}

/* Merge s->sym[0..n) (linked in order) until no candidate is left; append
 * the surviving ids to out. */
static ms_status bpe_merge(const ms_tok *t, bpe_scratch *s, int64_t n, ms_ids *out) {
    s->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++) MS_TRY(push_pair(t, s, i));
    while (s->heap_n > 0) {
        bpe_cand c = heap_pop(s);
        bpe_sym *l = &s->sym[c.pos];
        if (l->id != c.left || l->next < 0) continue; /* stale: left changed */
        bpe_sym *r = &s->sym[l->next];
        if (r->id != c.right) continue; /* stale: right changed */
        l->id = c.merged;
        r->id = -1;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = c.pos;
        if (l->prev >= 0) MS_TRY(push_pair(t, s, l->prev));
        MS_TRY(push_pair(t, s, c.pos));
    }
    for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = s->sym[i].next) MS_TRY(ms_ids_push(out, s->sym[i].id));
    return MS_OK;
}

/* ---- HF encoding ------------------------------------------------------------------ */

/* One pre-split word (raw bytes) → ids. */
static ms_status hf_encode_word(const ms_tok *t, bpe_scratch *s, const uint8_t *w, size_t n, ms_ids *out) {
    if (t->ignore_merges) {
        int32_t id = strmap_find(t, &t->bytes_map, t->bytes, w, n);
        if (id >= 0) return ms_ids_push(out, id);
    }
    uint32_t h = n <= WC_MAX_WORD ? hash_bytes(w, n) : 0;
    int n_cached;
    const int32_t *cached = wc_find(s, w, n, h, &n_cached);
    if (cached && n_cached > 0) {
        MS_TRY(ms_ids_reserve(out, out->n + n_cached));
        memcpy(out->v + out->n, cached, (size_t)n_cached * sizeof *cached);
        out->n += n_cached;
        return MS_OK;
    }
    int64_t start = out->n;
    MS_TRY(scratch_syms(s, (int64_t)n));
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
        MS_TRY(bpe_merge(t, s, k, out));
    }
    if (out->n > start) wc_insert(s, w, n, h, out->v + start, out->n - start);
    return MS_OK;
}

/* Pre-tokenize (Split regex, behavior Isolated: matches and the gaps between
 * them are both words) and BPE each word. */
static ms_status hf_encode_segment(const ms_tok *t, bpe_scratch *s, pcre2_match_data *md, pcre2_match_context *mc,
                                   const uint8_t *text, size_t len, ms_ids *out) {
    if (!t->re) return hf_encode_word(t, s, text, len, out);
    size_t pos = 0, done = 0;
    while (pos < len) {
        int rc = pcre2_match(t->re, text, len, pos, PCRE2_NO_UTF_CHECK, md, mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            MS_FAIL(MS_ERR_INTERNAL, "tokenizer: pre-tokenizer regex failed at byte %zu: %s", pos, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
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
    ms_status st = scratch_buf(s, *o + (size_t)m);
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
    MS_TRY(scratch_buf(s, len + 16));
    i = 0;
    while (i < len) {
        size_t a = i;
        while (i < len && text[i] < 0x80) i++;
        if (i == len) {
            MS_TRY(scratch_buf(s, o + (i - a)));
            memcpy(s->buf + o, text + a, i - a);
            o += i - a;
            break;
        }
        /* the ASCII run minus its last character (which may start a composition) */
        size_t keep = i > a ? i - 1 : i;
        MS_TRY(scratch_buf(s, o + (keep - a)));
        memcpy(s->buf + o, text + a, keep - a);
        o += keep - a;
        size_t c = keep;
        int l;
        while (i < len && text[i] >= 0x80 && (l = utf8_valid_len(text + i, len - i)) > 0) i += (size_t)l;
        if (i > c) MS_TRY(nfc_chunk(s, text + c, i - c, &o));
        if (i < len && text[i] >= 0x80) { /* an invalid byte */
            MS_TRY(scratch_buf(s, o + 1));
            s->buf[o++] = (char)text[i++];
        }
    }
    *res = (const uint8_t *)s->buf;
    *res_len = o;
    return MS_OK;
}

static ms_status hf_encode_plain(const ms_tok *t, bpe_scratch *s, pcre2_match_data *md, pcre2_match_context *mc,
                                 const uint8_t *text, size_t len, ms_ids *out) {
    if (len == 0) return MS_OK;
    if (t->nfc) MS_TRY(nfc_segment(s, text, len, &text, &len));
    return hf_encode_segment(t, s, md, mc, text, len, out);
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

static ms_status hf_encode(const ms_tok *t, const uint8_t *text, size_t len, bool parse_special, ms_ids *out) {
    bpe_scratch s = {0};
    pcre2_match_data *md = NULL;
    pcre2_match_context *mc = NULL;
    pcre2_jit_stack *js = NULL;
    ms_status st = MS_OK;
    if (t->re) {
        md = pcre2_match_data_create_from_pattern(t->re, NULL);
        mc = pcre2_match_context_create(NULL);
        if (!md || !mc) {
            st = MS_ERR_NOMEM;
            MS_LOG_ERROR("tokenizer: out of memory for the regex match data");
            goto done;
        }
        js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
        if (js) pcre2_jit_stack_assign(mc, NULL, js);
    }
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
        MS_TRY_GOTO(st, hf_encode_plain(t, &s, md, mc, text + seg, a - seg, out), done);
        MS_TRY_GOTO(st, ms_ids_push(out, id), done);
        seg = b;
        i = b - 1;
    }
    st = hf_encode_plain(t, &s, md, mc, text + seg, len - seg, out);
done:
    if (js) pcre2_jit_stack_free(js);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    scratch_free(&s);
    return st;
}

/* ---- llama2.c encoding (run.c encode) ----------------------------------------------- */

static ms_status llama2c_encode(const ms_tok *t, const uint8_t *text, size_t len, ms_ids *out) {
    if (len == 0) return MS_OK;
    bpe_scratch s = {0};
    ms_status st = MS_OK;
    /* worst case: the dummy prefix and one byte-fallback token per byte */
    MS_TRY_GOTO(st, scratch_syms(&s, (int64_t)len + 1), done);
    MS_TRY_GOTO(st, scratch_buf(&s, (size_t)t->max_piece_len + 8), done);
    int64_t k = 0;
    int32_t dummy = strmap_find(t, &t->piece_map, t->piece, " ", 1);
    if (dummy >= 0) s.sym[k++].id = dummy;
    /* one piece per UTF-8 character: a non-continuation byte and at most 3
     * continuation bytes after it (run.c's str_len < 4 guard) */
    for (size_t i = 0; i < len;) {
        size_t n = 1;
        while (i + n < len && (text[i + n] & 0xC0) == 0x80 && n < 4) n++;
        int32_t id = strmap_find(t, &t->piece_map, t->piece, text + i, n);
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
    st = bpe_merge(t, &s, k, out);
done:
    scratch_free(&s);
    return st;
}

static ms_status gguf_encode(const ms_tok *t, const uint8_t *text, size_t len, bool parse_special, ms_ids *out);

ms_status ms_tok_encode(const ms_tok *t, const char *text, size_t len, bool parse_special, ms_ids *out) {
    MS_ASSERT(t && out && (text || len == 0));
    if (len > (size_t)INT32_MAX / 4) MS_FAIL(MS_ERR_RANGE, "tokenizer: text of %zu bytes is too long", len);
    if (t->gguf) return gguf_encode(t, (const uint8_t *)text, len, parse_special, out);
    if (t->kind == TOK_LLAMA2C) return llama2c_encode(t, (const uint8_t *)text, len, out);
    return hf_encode(t, (const uint8_t *)text, len, parse_special, out);
}

/* ---- HF tokenizer.json ----------------------------------------------------------------- */

/* GPT-2's own pattern, used by a ByteLevel pre-tokenizer with use_regex true. */
static const char *const GPT2_REGEX =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char *json_type_name(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Optional boolean field: absent or null → def. */
static ms_status get_bool(const char *name, const json_t *obj, const char *where, const char *key, bool def,
                          bool *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return MS_OK;
    }
    if (!json_is_boolean(v))
        MS_FAIL(MS_ERR_FORMAT, "%s: %s.%s must be a boolean, got %s", name, where, key, json_type_name(v));
    *out = json_is_true(v);
    return MS_OK;
}

/* Optional string field: absent or null → NULL. */
static ms_status get_str(const char *name, const json_t *obj, const char *where, const char *key, const char **out) {
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v)) return MS_OK;
    if (!json_is_string(v))
        MS_FAIL(MS_ERR_FORMAT, "%s: %s.%s must be a string, got %s", name, where, key, json_type_name(v));
    *out = json_string_value(v);
    return MS_OK;
}

static ms_status hf_normalizer(const char *name, const json_t *n, ms_tok *t) {
    if (!n || json_is_null(n)) return MS_OK;
    if (!json_is_object(n)) MS_FAIL(MS_ERR_FORMAT, "%s: normalizer must be an object or null", name);
    const char *type;
    MS_TRY(get_str(name, n, "normalizer", "type", &type));
    if (!type) MS_FAIL(MS_ERR_FORMAT, "%s: normalizer.type is missing", name);
    if (strcmp(type, "NFC") == 0) {
        t->nfc = true;
        return MS_OK;
    }
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) MS_FAIL(MS_ERR_FORMAT, "%s: normalizer.normalizers must be an array", name);
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            if (!json_is_object(e))
                MS_FAIL(MS_ERR_FORMAT, "%s: normalizer.normalizers[%zu] must be an object", name, i);
            MS_TRY(hf_normalizer(name, e, t));
        }
        return MS_OK;
    }
    MS_FAIL(MS_ERR_UNSUPPORTED, "%s: normalizer.type \"%s\" is not supported (only NFC)", name, type);
}

/* A ByteLevel pre-tokenizer; *regex is set to GPT-2's when use_regex. */
static ms_status hf_byte_level(const char *name, const json_t *p, const char *where, const char **regex) {
    bool prefix, use_regex;
    MS_TRY(get_bool(name, p, where, "add_prefix_space", true, &prefix));
    MS_TRY(get_bool(name, p, where, "use_regex", true, &use_regex));
    if (prefix) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s.add_prefix_space true is not supported", name, where);
    *regex = use_regex ? GPT2_REGEX : NULL;
    return MS_OK;
}

/* Accepted: ByteLevel, or Sequence [Split{Regex, Isolated}, ByteLevel]. */
static ms_status hf_pre_tokenizer(const char *name, const json_t *p, const char **regex) {
    if (!p || json_is_null(p))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: pre_tokenizer is null; only byte-level BPE is supported", name);
    if (!json_is_object(p)) MS_FAIL(MS_ERR_FORMAT, "%s: pre_tokenizer must be an object", name);
    const char *type;
    MS_TRY(get_str(name, p, "pre_tokenizer", "type", &type));
    if (!type) MS_FAIL(MS_ERR_FORMAT, "%s: pre_tokenizer.type is missing", name);
    if (strcmp(type, "ByteLevel") == 0) return hf_byte_level(name, p, "pre_tokenizer", regex);
    if (strcmp(type, "Sequence") != 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: pre_tokenizer.type \"%s\" is not supported (ByteLevel or Sequence)", name,
                type);
    json_t *list = json_object_get(p, "pretokenizers");
    if (!json_is_array(list)) MS_FAIL(MS_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers must be an array", name);
    const char *split = NULL;
    bool byte_level = false;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        char where[64];
        snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%zu]", i);
        if (!json_is_object(e)) MS_FAIL(MS_ERR_FORMAT, "%s: %s must be an object", name, where);
        const char *et;
        MS_TRY(get_str(name, e, where, "type", &et));
        if (!et) MS_FAIL(MS_ERR_FORMAT, "%s: %s.type is missing", name, where);
        if (byte_level) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s: nothing may follow ByteLevel", name, where);
        if (strcmp(et, "Split") == 0) {
            if (split) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s: only one Split is supported", name, where);
            json_t *pat = json_object_get(e, "pattern");
            if (!json_is_object(pat)) MS_FAIL(MS_ERR_FORMAT, "%s: %s.pattern must be an object", name, where);
            json_t *re = json_object_get(pat, "Regex");
            if (!re) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s.pattern: only {\"Regex\": ...} is supported", name, where);
            if (!json_is_string(re)) MS_FAIL(MS_ERR_FORMAT, "%s: %s.pattern.Regex must be a string", name, where);
            const char *behavior;
            bool invert;
            MS_TRY(get_str(name, e, where, "behavior", &behavior));
            MS_TRY(get_bool(name, e, where, "invert", false, &invert));
            if (!behavior || strcmp(behavior, "Isolated") != 0 || invert)
                MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s: only behavior \"Isolated\" without invert is supported", name,
                        where);
            split = json_string_value(re);
        } else if (strcmp(et, "ByteLevel") == 0) {
            const char *own;
            MS_TRY(hf_byte_level(name, e, where, &own));
            if (own && split)
                MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s: ByteLevel use_regex after a Split is not supported", name, where);
            if (own) split = own;
            byte_level = true;
        } else {
            MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s.type \"%s\" is not supported (Split or ByteLevel)", name, where, et);
        }
    }
    if (!byte_level)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: pre_tokenizer has no ByteLevel step; only byte-level BPE is supported", name);
    *regex = split;
    return MS_OK;
}

static ms_status hf_decoder(const char *name, const json_t *d) {
    if (!d || json_is_null(d)) return MS_OK;
    if (!json_is_object(d)) MS_FAIL(MS_ERR_FORMAT, "%s: decoder must be an object or null", name);
    const char *type;
    MS_TRY(get_str(name, d, "decoder", "type", &type));
    if (!type || strcmp(type, "ByteLevel") != 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: decoder.type \"%s\" is not supported (only ByteLevel)", name,
                type ? type : "(missing)");
    return MS_OK;
}

static ms_status hf_compile_regex(const char *name, const char *pattern, ms_tok *t) {
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

static ms_status hf_set_piece(ms_tok *t, int32_t id, const char *s, size_t n, const int16_t *u2b, bool byte_level) {
    MS_TRY(arena_put(t, s, n, &t->piece[id]));
    if (!byte_level) {
        t->bytes[id] = t->piece[id];
        return MS_OK;
    }
    /* decoded bytes are never longer than the piece; decode in place at the arena end */
    span tmp;
    MS_TRY(arena_put(t, s, n, &tmp));
    size_t m = byte_level_decode((const uint8_t *)s, n, u2b, (uint8_t *)t->arena + tmp.off);
    t->bytes[id] = (span){tmp.off, (uint32_t)m};
    t->arena_len = tmp.off + m;
    return MS_OK;
}

typedef struct {
    uint8_t first;
    uint32_t len;
    int32_t id;
} added_key;

/* (first byte asc, length desc, id asc) */
static int cmp_added(const void *a, const void *b) {
    const added_key *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static ms_status hf_parse(const json_t *root, const char *name, ms_tok *t) {
    if (!json_is_object(root)) MS_FAIL(MS_ERR_FORMAT, "%s: top level must be an object", name);
    json_t *model = json_object_get(root, "model");
    if (!model) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing field \"model\"", name);
    if (!json_is_object(model))
        MS_FAIL(MS_ERR_FORMAT, "%s: model must be an object, got %s", name, json_type_name(model));
    const char *type;
    MS_TRY(get_str(name, model, "model", "type", &type));
    if (type && strcmp(type, "BPE") != 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model.type \"%s\" is not supported (only BPE)", name, type);
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model.dropout must be null (BPE dropout is not supported)", name);
    bool byte_fallback;
    MS_TRY(get_bool(name, model, "model", "byte_fallback", false, &byte_fallback));
    if (byte_fallback) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model.byte_fallback true is not supported", name);
    const char *prefix, *suffix, *unk;
    MS_TRY(get_str(name, model, "model", "continuing_subword_prefix", &prefix));
    MS_TRY(get_str(name, model, "model", "end_of_word_suffix", &suffix));
    if ((prefix && *prefix) || (suffix && *suffix))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model.continuing_subword_prefix/end_of_word_suffix are not supported", name);
    MS_TRY(get_str(name, model, "model", "unk_token", &unk));
    MS_TRY(get_bool(name, model, "model", "ignore_merges", false, &t->ignore_merges));

    json_t *vocab = json_object_get(model, "vocab");
    if (!vocab) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing field \"model.vocab\"", name);
    if (!json_is_object(vocab))
        MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab must be an object, got %s", name, json_type_name(vocab));
    json_t *merges = json_object_get(model, "merges");
    if (!merges) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing field \"model.merges\"", name);
    if (!json_is_array(merges))
        MS_FAIL(MS_ERR_FORMAT, "%s: model.merges must be an array, got %s", name, json_type_name(merges));
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        MS_FAIL(MS_ERR_FORMAT, "%s: added_tokens must be an array, got %s", name, json_type_name(added));
    size_t n_added = json_is_array(added) ? json_array_size(added) : 0;

    const char *regex = NULL;
    MS_TRY(hf_normalizer(name, json_object_get(root, "normalizer"), t));
    MS_TRY(hf_pre_tokenizer(name, json_object_get(root, "pre_tokenizer"), &regex));
    MS_TRY(hf_decoder(name, json_object_get(root, "decoder")));

    /* ids: the model vocab is dense [0, n_model); added tokens may sit above it */
    int64_t n_model = (int64_t)json_object_size(vocab);
    if (n_model == 0) MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab is empty", name);
    if (n_model >= INT32_MAX / 2) MS_FAIL(MS_ERR_RANGE, "%s: model.vocab has too many entries", name);
    int64_t id_bound = n_model + (int64_t)n_added + TOK_ID_SLACK, n_ids = n_model;
    for (size_t i = 0; i < n_added; i++) {
        json_t *a = json_array_get(added, i);
        if (!json_is_object(a)) MS_FAIL(MS_ERR_FORMAT, "%s: added_tokens[%zu] must be an object", name, i);
        json_t *id = json_object_get(a, "id");
        if (!json_is_integer(id)) MS_FAIL(MS_ERR_FORMAT, "%s: added_tokens[%zu].id must be an integer", name, i);
        json_int_t v = json_integer_value(id);
        if (v < 0 || v >= id_bound)
            MS_FAIL(MS_ERR_RANGE, "%s: added_tokens[%zu].id = %lld is out of range [0, %lld)", name, i, (long long)v,
                    (long long)id_bound);
        if (v + 1 > n_ids) n_ids = v + 1;
    }
    t->n_model = n_model;
    MS_TRY(tok_alloc_ids(t, n_ids, false));

    uint32_t b2u[256];
    int16_t u2b[512];
    byte_unicode_tables(b2u);
    for (int i = 0; i < 512; i++) u2b[i] = -1;
    for (int b = 0; b < 256; b++) u2b[b2u[b]] = (int16_t)b;

    const char *key;
    size_t key_len;
    json_t *val;
    json_object_keylen_foreach(vocab, key, key_len, val) {
        if (!json_is_integer(val)) MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab[\"%s\"] must be an integer id", name, key);
        json_int_t v = json_integer_value(val);
        if (v < 0 || v >= n_model)
            MS_FAIL(MS_ERR_RANGE, "%s: model.vocab[\"%s\"] = %lld is out of range [0, %lld) (ids must be dense)", name,
                    key, (long long)v, (long long)n_model);
        if (t->flags[v] & TOK_PRESENT)
            MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab: id %lld appears twice (\"%s\")", name, (long long)v, key);
        if (key_len == 0) MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab: empty token for id %lld", name, (long long)v);
        MS_TRY(hf_set_piece(t, (int32_t)v, key, key_len, u2b, true));
        t->flags[v] = TOK_PRESENT;
    }

    /* added tokens */
    if (n_added) {
        t->added = ms_malloc(n_added * sizeof *t->added);
        if (!t->added) return MS_ERR_NOMEM;
    }
    for (size_t i = 0; i < n_added; i++) {
        json_t *a = json_array_get(added, i);
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        json_t *content = json_object_get(a, "content");
        if (!json_is_string(content) || json_string_length(content) == 0)
            MS_FAIL(MS_ERR_FORMAT, "%s: %s.content must be a non-empty string", name, where);
        const char *c = json_string_value(content);
        size_t clen = json_string_length(content);
        bool special, lstrip, rstrip, single, normalized;
        MS_TRY(get_bool(name, a, where, "special", false, &special));
        MS_TRY(get_bool(name, a, where, "lstrip", false, &lstrip));
        MS_TRY(get_bool(name, a, where, "rstrip", false, &rstrip));
        MS_TRY(get_bool(name, a, where, "single_word", false, &single));
        MS_TRY(get_bool(name, a, where, "normalized", false, &normalized));
        if (t->flags[id] & TOK_ADDED)
            MS_FAIL(MS_ERR_FORMAT, "%s: %s: id %d appears twice in added_tokens", name, where, id);
        if (t->flags[id] & TOK_PRESENT) {
            /* an added token may re-declare a vocab entry, but only with its own text */
            const span *p = &t->piece[id];
            if (p->len != clen || memcmp(t->arena + p->off, c, clen) != 0)
                MS_FAIL(MS_ERR_FORMAT, "%s: %s: id %d is already the vocab entry \"%.*s\"", name, where, id,
                        (int)p->len, t->arena + p->off);
        } else {
            MS_TRY(hf_set_piece(t, id, c, clen, u2b, false));
        }
        /* the text of an added token is its content, not a byte-level string */
        MS_TRY(arena_put(t, c, clen, &t->bytes[id]));
        t->flags[id] |= TOK_PRESENT | TOK_ADDED | (special ? TOK_SPECIAL : 0) | (lstrip ? TOK_LSTRIP : 0) |
                        (rstrip ? TOK_RSTRIP : 0) | (single ? TOK_SINGLE : 0);
        if (!special) t->any_nonspecial_added = true;
        t->added[t->n_added++] = id;
    }

    /* lookup tables: pieces (vocab first, then added) and raw bytes of the vocab */
    MS_TRY(strmap_init(&t->piece_map, n_ids));
    MS_TRY(strmap_init(&t->bytes_map, n_model));
    for (int64_t id = 0; id < n_model; id++) {
        strmap_insert(t, &t->piece_map, t->piece, (int32_t)id);
        strmap_insert(t, &t->bytes_map, t->bytes, (int32_t)id);
    }
    for (int64_t i = 0; i < t->n_added; i++) strmap_insert(t, &t->piece_map, t->piece, t->added[i]);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = strmap_find(t, &t->bytes_map, t->bytes, &c, 1);
    }
    if (unk) {
        t->unk_id = strmap_find(t, &t->piece_map, t->piece, unk, strlen(unk));
        if (t->unk_id < 0) MS_FAIL(MS_ERR_FORMAT, "%s: model.unk_token \"%s\" is not in the vocab", name, unk);
    }

    /* added tokens by (first byte, longest first) for the leftmost-longest scan */
    if (t->n_added) {
        added_key *keys = ms_malloc((size_t)t->n_added * sizeof *keys);
        if (!keys) return MS_ERR_NOMEM;
        for (int64_t i = 0; i < t->n_added; i++) {
            const span *p = &t->piece[t->added[i]];
            keys[i] = (added_key){(uint8_t)t->arena[p->off], p->len, t->added[i]};
        }
        qsort(keys, (size_t)t->n_added, sizeof *keys, cmp_added);
        for (int64_t i = 0; i < t->n_added; i++) t->added[i] = keys[i].id;
        free(keys);
    }
    int64_t k = 0;
    for (int b = 0; b < 256; b++) {
        t->by_first[b] = k;
        while (k < t->n_added && (uint8_t)t->arena[t->piece[t->added[k]].off] == b) k++;
    }
    t->by_first[256] = k;

    /* merges: "a b" strings or ["a", "b"] pairs; rank = position */
    size_t n_merges = json_array_size(merges);
    if (n_merges >= INT32_MAX) MS_FAIL(MS_ERR_RANGE, "%s: model.merges has too many entries", name);
    MS_TRY(pairmap_init(&t->merges, (int64_t)n_merges));
    char *cat = NULL;
    size_t cat_cap = 0;
    ms_status st = MS_OK;
    for (size_t r = 0; r < n_merges; r++) {
        json_t *m = json_array_get(merges, r);
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(m)) {
            a = json_string_value(m);
            const char *sp = memchr(a, ' ', json_string_length(m));
            if (!sp || memchr(sp + 1, ' ', json_string_length(m) - (size_t)(sp + 1 - a))) {
                st = MS_ERR_FORMAT;
                MS_LOG_ERROR("%s: model.merges[%zu] \"%s\" is not two tokens separated by one space", name, r, a);
                break;
            }
            la = (size_t)(sp - a);
            b = sp + 1;
            lb = json_string_length(m) - la - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            la = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            lb = json_string_length(json_array_get(m, 1));
        } else {
            st = MS_ERR_FORMAT;
            MS_LOG_ERROR("%s: model.merges[%zu] must be \"a b\" or [\"a\", \"b\"], got %s", name, r, json_type_name(m));
            break;
        }
        int32_t ia = strmap_find(t, &t->piece_map, t->piece, a, la);
        int32_t ib = strmap_find(t, &t->piece_map, t->piece, b, lb);
        if (ia < 0 || ia >= n_model || ib < 0 || ib >= n_model) {
            st = MS_ERR_FORMAT;
            MS_LOG_ERROR("%s: model.merges[%zu]: token \"%.*s\" is not in model.vocab", name, r,
                         (int)(ia < 0 || ia >= n_model ? la : lb), ia < 0 || ia >= n_model ? a : b);
            break;
        }
        if (la + lb > cat_cap) {
            cat_cap = (la + lb) * 2 + 16;
            char *p = ms_realloc(cat, cat_cap);
            if (!p) {
                st = MS_ERR_NOMEM;
                break;
            }
            cat = p;
        }
        memcpy(cat, a, la);
        memcpy(cat + la, b, lb);
        int32_t im = strmap_find(t, &t->piece_map, t->piece, cat, la + lb);
        if (im < 0 || im >= n_model) {
            st = MS_ERR_FORMAT;
            MS_LOG_ERROR("%s: model.merges[%zu]: the merged token \"%.*s\" is not in model.vocab", name, r,
                         (int)(la + lb), cat);
            break;
        }
        pairmap_insert(&t->merges, ia, ib, (int32_t)r, im);
    }
    free(cat);
    MS_TRY(st);

    if (regex) MS_TRY(hf_compile_regex(name, regex, t));
    for (int64_t id = 0; id < n_ids; id++)
        if (t->flags[id] & TOK_PRESENT && t->bytes[id].len > t->max_piece_len) t->max_piece_len = t->bytes[id].len;
    return MS_OK;
}

ms_status ms_tok_load_hf_memory(const char *json, size_t len, const char *name, ms_tok **out) {
    MS_ASSERT(out && (json || len == 0));
    *out = NULL;
    if (!name) name = "tokenizer.json";
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!root)
        MS_FAIL(MS_ERR_FORMAT, "%s: not valid JSON (line %d, column %d): %s", name, err.line, err.column, err.text);
    ms_tok *t = tok_new(TOK_HF_BPE);
    if (!t) {
        json_decref(root);
        return MS_ERR_NOMEM;
    }
    ms_status st = hf_parse(root, name, t);
    json_decref(root);
    if (st < 0) {
        ms_tok_free(&t);
        return st;
    }
    *out = t;
    return MS_OK;
}

/* ---- tokenizer_config.json ----------------------------------------------------------- */

static void eos_add(ms_tok *t, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < t->n_eos; i++)
        if (t->eos[i] == id) return;
    if (t->n_eos < TOK_MAX_EOS) t->eos[t->n_eos++] = id;
}

/* bos_token / eos_token: a string, {"content": ...}, or null. *id = -1 when null/absent. */
static ms_status config_token(const ms_tok *t, const char *name, const json_t *root, const char *key, int32_t *id) {
    *id = -1;
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return MS_OK;
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) MS_FAIL(MS_ERR_FORMAT, "%s: %s must be a string, {\"content\": string} or null", name, key);
    *id = ms_tok_find(t, json_string_value(v));
    if (*id < 0)
        MS_FAIL(MS_ERR_NOT_FOUND, "%s: %s \"%s\" is not a token of the tokenizer", name, key, json_string_value(v));
    return MS_OK;
}

static ms_status config_parse(ms_tok *t, const char *name, const json_t *root) {
    if (!json_is_object(root)) MS_FAIL(MS_ERR_FORMAT, "%s: top level must be an object", name);
    int32_t bos, eos;
    MS_TRY(config_token(t, name, root, "bos_token", &bos));
    MS_TRY(config_token(t, name, root, "eos_token", &eos));
    /* chat_template: a string, or a list of {"name", "template"} (the "default" one) */
    json_t *ct = json_object_get(root, "chat_template");
    const char *tmpl = NULL;
    if (json_is_string(ct)) {
        tmpl = json_string_value(ct);
    } else if (json_is_array(ct)) {
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            json_t *nm = json_object_get(e, "name"), *tx = json_object_get(e, "template");
            if (!json_is_string(tx))
                MS_FAIL(MS_ERR_FORMAT, "%s: chat_template[%zu].template must be a string", name, i);
            if (!tmpl || (json_is_string(nm) && strcmp(json_string_value(nm), "default") == 0))
                tmpl = json_string_value(tx);
        }
    } else if (ct && !json_is_null(ct)) {
        MS_FAIL(MS_ERR_FORMAT, "%s: chat_template must be a string or a list", name);
    }
    t->chat = MS_CHAT_NONE;
    if (tmpl && strstr(tmpl, "<|start_header_id|>"))
        t->chat = MS_CHAT_LLAMA3;
    else if (tmpl && strstr(tmpl, "<|im_start|>"))
        t->chat = MS_CHAT_CHATML;
    t->bos = bos;
    t->n_eos = 0;
    eos_add(t, eos);
    if (t->chat == MS_CHAT_LLAMA3) {
        eos_add(t, ms_tok_find(t, "<|eot_id|>"));
        eos_add(t, ms_tok_find(t, "<|end_of_text|>"));
    } else if (t->chat == MS_CHAT_CHATML) {
        eos_add(t, ms_tok_find(t, "<|im_end|>"));
        eos_add(t, ms_tok_find(t, "<|endoftext|>"));
    }
    return MS_OK;
}

ms_status ms_tok_load_hf(const char *tokenizer_json, const char *config_path, ms_tok **out) {
    MS_ASSERT(tokenizer_json && out);
    *out = NULL;
    char *data;
    size_t len;
    MS_TRY(ms_read_file(tokenizer_json, &data, &len));
    ms_tok *t;
    ms_status st = ms_tok_load_hf_memory(data, len, tokenizer_json, &t);
    free(data);
    MS_TRY(st);
    if (config_path && ms_file_exists(config_path)) {
        st = ms_read_file(config_path, &data, &len);
        if (st == MS_OK) {
            json_error_t err;
            /* model_max_length may exceed int64 (Llama-3: 1e30); no integer is read here */
            json_t *root = json_loadb(data, len, JSON_DECODE_INT_AS_REAL, &err);
            free(data);
            if (!root) {
                st = MS_ERR_FORMAT;
                MS_LOG_ERROR("%s: not valid JSON (line %d, column %d): %s", config_path, err.line, err.column,
                             err.text);
            } else {
                st = config_parse(t, config_path, root);
                json_decref(root);
            }
        }
        if (st < 0) {
            ms_tok_free(&t);
            return st;
        }
    }
    *out = t;
    return MS_OK;
}

/* ---- llama2.c tokenizer.bin -------------------------------------------------------------- */

static bool parse_byte_piece(const char *s, size_t n, uint8_t *b) {
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
        MS_TRY(arena_put(t, d + off, (size_t)len, &t->piece[id]));
        uint8_t b;
        if (parse_byte_piece((const char *)d + off, (size_t)len, &b))
            MS_TRY(arena_put(t, &b, 1, &t->bytes[id]));
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
    MS_TRY(strmap_init(&t->piece_map, vocab_size));
    for (int64_t id = 0; id < vocab_size; id++) strmap_insert(t, &t->piece_map, t->piece, (int32_t)id);
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

static ms_status config_vocab_size(const char *path, int64_t *vocab_size) {
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
        st = config_vocab_size(cj, &vs);
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

/* ---- GGUF tokenizer (tokenizer.ggml.*) ------------------------------------------------------
 *
 * Encoding follows llama.cpp (src/llama-vocab.cpp), the reference for GGUF
 * files:
 *  1. Partition: control and unknown tokens (only with parse_special) and
 *     user-defined tokens (always) are cut out of the raw text, one token at a
 *     time, longest text first, every occurrence, leftmost first.
 *  2. "gpt2": each remaining fragment is split by the pre-tokenizer regex and
 *     each word merged by rank over its bytes (the HF path above, minus NFC).
 *  3. "llama": each fragment (after a ' ' prefix when add_space_prefix and it
 *     follows a special or starts the text) has ' ' written as U+2581, is cut
 *     into UTF-8 characters (the length a lead byte announces, continuation
 *     bytes alone), and adjacent symbols whose concatenation is a token merge,
 *     highest score first, leftmost on ties. A final symbol that is no token
 *     becomes its <0xXX> byte tokens.
 */

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
    if (!grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v)) MS_FAIL(MS_ERR_NOMEM, "tokenizer: out of memory");
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

/* Step 3 for one fragment: s->buf holds the escaped text (n bytes). */
static ms_status spm_encode_escaped(const ms_tok *t, bpe_scratch *s, size_t n, ms_ids *out) {
    static const uint8_t lead_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    const uint8_t *w = (const uint8_t *)s->buf;
    /* symbols: sym[i].id = byte offset in w, wlen[i] = byte length (0 = merged away) */
    MS_TRY(scratch_syms(s, (int64_t)n));
    uint32_t *wlen = ms_malloc((n ? n : 1) * sizeof *wlen);
    if (!wlen) return MS_ERR_NOMEM;
    int32_t k = 0;
    for (size_t o = 0; o < n; k++) {
        size_t l = lead_len[w[o] >> 4];
        if (l > n - o) l = n - o;
        s->sym[k] = (bpe_sym){.id = (int32_t)o, .prev = k - 1, .next = o + l < n ? k + 1 : -1};
        wlen[k] = (uint32_t)l;
        o += l;
    }
    ms_status st = MS_OK;
    s->heap_n = 0;
    /* candidate (left, right): prio −score, pos = left, merged = byte length of the pair */
#define SPM_TRY_PAIR(L, R)                                                                                      \
    do {                                                                                                        \
        int32_t l_ = (L), r_ = (R);                                                                             \
        if (l_ >= 0 && r_ >= 0) {                                                                               \
            size_t m_ = (size_t)wlen[l_] + wlen[r_];                                                            \
            int32_t id_ = m_ <= t->max_piece_len                                                                \
                              ? strmap_find(t, &t->piece_map, t->piece, w + s->sym[l_].id, m_)                  \
                              : -1;                                                                             \
            if (id_ >= 0)                                                                                       \
                MS_TRY_GOTO(st,                                                                                 \
                            heap_push(s, (bpe_cand){.prio = -(double)t->score[id_], .pos = l_, .left = l_,      \
                                                    .right = r_, .merged = (int32_t)m_}),                       \
                            done);                                                                              \
        }                                                                                                       \
    } while (0)
    for (int32_t i = 1; i < k; i++) SPM_TRY_PAIR(i - 1, i);
    while (s->heap_n > 0) {
        bpe_cand c = heap_pop(s);
        /* stale unless both symbols still exist with the sizes they had */
        if (wlen[c.left] == 0 || wlen[c.right] == 0 || wlen[c.left] + wlen[c.right] != (uint32_t)c.merged) continue;
        bpe_sym *l = &s->sym[c.left], *r = &s->sym[c.right];
        wlen[c.left] += wlen[c.right];
        wlen[c.right] = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = c.left;
        SPM_TRY_PAIR(l->prev, c.left);
        SPM_TRY_PAIR(c.left, l->next);
    }
#undef SPM_TRY_PAIR
    for (int32_t i = k > 0 ? 0 : -1; i >= 0; i = s->sym[i].next) {
        const uint8_t *p = w + s->sym[i].id;
        int32_t id = strmap_find(t, &t->piece_map, t->piece, p, wlen[i]);
        if (id >= 0) {
            MS_TRY_GOTO(st, ms_ids_push(out, id), done);
            continue;
        }
        for (uint32_t j = 0; j < wlen[i]; j++) {
            int32_t b = t->byte_id[p[j]] >= 0 ? t->byte_id[p[j]] : t->unk_id;
            if (b < 0) {
                st = MS_ERR_NOT_FOUND;
                MS_LOG_ERROR("tokenizer: byte 0x%02X has no <0x%02X> token and there is no unknown token", p[j], p[j]);
                goto done;
            }
            MS_TRY_GOTO(st, ms_ids_push(out, b), done);
        }
    }
done:
    free(wlen);
    return st;
}

static ms_status spm_encode_fragment(const ms_tok *t, bpe_scratch *s, const uint8_t *text, size_t len, bool prefix,
                                     ms_ids *out) {
    /* ' ' → U+2581 (3 bytes): at most 3 bytes per input byte, plus the prefix */
    MS_TRY(scratch_buf(s, 3 * len + 3));
    size_t n = 0;
    static const char SP[3] = {(char)0xE2, (char)0x96, (char)0x81};
    if (prefix) {
        memcpy(s->buf, SP, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(s->buf + n, SP, 3);
            n += 3;
        } else {
            s->buf[n++] = (char)text[i];
        }
    }
    return spm_encode_escaped(t, s, n, out);
}

static ms_status gguf_encode(const ms_tok *t, const uint8_t *text, size_t len, bool parse_special, ms_ids *out) {
    gfrags fr = {0};
    MS_TRY(gguf_partition(t, text, len, parse_special, &fr));
    bpe_scratch s = {0};
    pcre2_match_data *md = NULL;
    pcre2_match_context *mc = NULL;
    pcre2_jit_stack *js = NULL;
    ms_status st = MS_OK;
    if (t->re) {
        md = pcre2_match_data_create_from_pattern(t->re, NULL);
        mc = pcre2_match_context_create(NULL);
        if (!md || !mc) {
            st = MS_ERR_NOMEM;
            MS_LOG_ERROR("tokenizer: out of memory for the regex match data");
            goto done;
        }
        js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
        if (js) pcre2_jit_stack_assign(mc, NULL, js);
    }
    bool prev_special = true; /* the text start counts as after a special (llama.cpp) */
    for (size_t i = 0; i < fr.n; i++) {
        const gfrag *f = &fr.v[i];
        if (f->id >= 0) {
            MS_TRY_GOTO(st, ms_ids_push(out, f->id), done);
            prev_special = true;
        } else if (t->kind == TOK_SPM) {
            MS_TRY_GOTO(st,
                        spm_encode_fragment(t, &s, text + f->off, f->len, t->add_space_prefix && prev_special, out),
                        done);
            prev_special = false;
        } else {
            MS_TRY_GOTO(st, hf_encode_segment(t, &s, md, mc, text + f->off, f->len, out), done);
        }
    }
done:
    if (js) pcre2_jit_stack_free(js);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    scratch_free(&s);
    free(fr.v);
    return st;
}

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
        if (!parse_byte_piece(s, n, &b))
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d] \"%.*s\" has type byte but is not <0xXX>", name, id,
                    (int)(n > 64 ? 64 : n), s);
        if (t->byte_id[b] < 0) t->byte_id[b] = id;
        return arena_put(t, &b, 1, &t->bytes[id]);
    }
    if (type != GT_NORMAL) {
        t->bytes[id] = t->piece[id];
        return MS_OK;
    }
    /* both decodings are never longer than the piece: decode at the arena end
     * (reserved first, as the piece itself lives in the arena) */
    span tmp;
    MS_TRY(arena_put(t, NULL, n, &tmp));
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
        m = byte_level_decode((const uint8_t *)s, n, u2b, o);
    }
    t->bytes[id] = (span){tmp.off, (uint32_t)m};
    t->arena_len = tmp.off + m;
    return MS_OK;
}

static const char *const EOG_TEXTS[] = {"<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<|eot_id|>",
                                        "<|end_of_text|>"};

static ms_status gguf_parse(const ms_gguf *g, ms_tok *t) {
    const char *name = ms_gguf_path(g);
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
    const char *regex = NULL;
    t->add_bos = t->kind == TOK_SPM;
    t->add_space_prefix = t->kind == TOK_SPM;
    if (t->kind == TOK_HF_BPE) {
        st = ms_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL);
        if (st == MS_ERR_NOT_FOUND)
            MS_FAIL(MS_ERR_UNSUPPORTED, "%s: missing key tokenizer.ggml.pre (the pre-tokenizer: qwen2 or llama-bpe)",
                    name);
        MS_TRY(st);
        if (strcmp(pre, "qwen2") == 0) {
            regex = QWEN2_REGEX;
        } else if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0 || strcmp(pre, "llama-v3") == 0) {
            regex = LLAMA3_REGEX;
            t->ignore_merges = true;
            t->add_bos = true;
        } else {
            MS_FAIL(MS_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre \"%s\" is not supported (qwen2 or llama-bpe)", name,
                    pre);
        }
    }

    /* the arrays: tokens (strings), token_type (int32), scores (f32 or i32), same length */
    ms_gguf_vtype et;
    int64_t n;
    const void *arr;
    st = ms_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &arr);
    if (st == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing key tokenizer.ggml.tokens", name);
    MS_TRY(st);
    if (et != MS_GGUF_STRING) MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be an array of strings", name);
    if (n < 1 || n >= INT32_MAX / 2)
        MS_FAIL(MS_ERR_RANGE, "%s: tokenizer.ggml.tokens has %lld entries, outside [1, %d)", name, (long long)n,
                INT32_MAX / 2);
    const uint8_t *types = NULL, *scores = NULL;
    ms_gguf_vtype score_type = MS_GGUF_F32;
    int64_t m;
    st = ms_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &m, &arr);
    if (st != MS_ERR_NOT_FOUND) {
        MS_TRY(st);
        if (et != MS_GGUF_I32) MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be an array of int32", name);
        if (m != n)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %lld entries but tokenizer.ggml.tokens has %lld",
                    name, (long long)m, (long long)n);
        types = arr;
    }
    st = ms_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &m, &arr);
    if (st != MS_ERR_NOT_FOUND) {
        MS_TRY(st);
        if (et != MS_GGUF_F32 && et != MS_GGUF_I32)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.scores must be an array of float32 or int32", name);
        if (m != n)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.scores has %lld entries but tokenizer.ggml.tokens has %lld",
                    name, (long long)m, (long long)n);
        scores = arr;
        score_type = et;
    }

    t->n_model = n;
    MS_TRY(tok_alloc_ids(t, n, t->kind == TOK_SPM));
    MS_TRY(strmap_init(&t->piece_map, n));
    uint32_t b2u[256];
    int16_t u2b[512];
    byte_unicode_tables(b2u);
    for (int i = 0; i < 512; i++) u2b[i] = -1;
    for (int b = 0; b < 256; b++) u2b[b2u[b]] = (int16_t)b;
    int64_t n_special = 0;
    for (int64_t id = 0; id < n; id++) {
        const char *s;
        size_t len;
        MS_TRY(ms_gguf_arr_str(g, "tokenizer.ggml.tokens", id, &s, &len));
        if (len == 0) MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%lld] is empty", name, (long long)id);
        int32_t type = GT_NORMAL;
        if (types) memcpy(&type, types + 4 * id, 4);
        if (type < GT_NORMAL || type > GT_BYTE)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%lld] = %d is not a token type (1..6)", name,
                    (long long)id, type);
        int32_t dup = strmap_find(t, &t->piece_map, t->piece, s, len);
        if (dup >= 0)
            MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%lld] \"%.*s\" repeats token %d", name, (long long)id,
                    (int)(len > 64 ? 64 : len), s, dup);
        MS_TRY(arena_put(t, s, len, &t->piece[id]));
        strmap_insert(t, &t->piece_map, t->piece, (int32_t)id);
        MS_TRY(gguf_set_bytes(name, t, (int32_t)id, type, u2b));
        t->flags[id] = TOK_PRESENT;
        if (type == GT_CONTROL || type == GT_UNKNOWN) t->flags[id] |= TOK_SPECIAL;
        if (type == GT_USER) t->flags[id] |= TOK_USERDEF;
        if (type == GT_CONTROL || type == GT_UNKNOWN || type == GT_USER) n_special++;
        if (t->score) {
            if (!scores) {
                t->score[id] = 0.0f;
            } else if (score_type == MS_GGUF_F32) {
                memcpy(&t->score[id], scores + 4 * id, 4);
            } else {
                int32_t v;
                memcpy(&v, scores + 4 * id, 4);
                t->score[id] = (float)v;
            }
        }
        if (len > t->max_piece_len) t->max_piece_len = (uint32_t)len;
    }

    /* gpt2: raw bytes → id over the normal tokens (what BPE merges into) */
    if (t->kind == TOK_HF_BPE) {
        MS_TRY(strmap_init(&t->bytes_map, n));
        for (int64_t id = 0; id < n; id++) {
            int32_t type = GT_NORMAL;
            if (types) memcpy(&type, types + 4 * id, 4);
            if (type == GT_NORMAL) strmap_insert(t, &t->bytes_map, t->bytes, (int32_t)id);
        }
        for (int b = 0; b < 256; b++) {
            uint8_t c = (uint8_t)b;
            t->byte_id[b] = strmap_find(t, &t->bytes_map, t->bytes, &c, 1);
        }
        /* merges: "a b" (split at the first space after the first byte, as llama.cpp), rank = index */
        st = ms_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &m, &arr);
        if (st == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing key tokenizer.ggml.merges", name);
        MS_TRY(st);
        if (et != MS_GGUF_STRING) MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer.ggml.merges must be an array of strings", name);
        if (m >= INT32_MAX) MS_FAIL(MS_ERR_RANGE, "%s: tokenizer.ggml.merges has too many entries", name);
        MS_TRY(pairmap_init(&t->merges, m));
        char *cat = ms_malloc((size_t)t->max_piece_len + 1);
        if (!cat) return MS_ERR_NOMEM;
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
            size_t la = (size_t)(sp - s), lb = len - la - 1;
            int32_t ia = strmap_find(t, &t->piece_map, t->piece, s, la);
            int32_t ib = strmap_find(t, &t->piece_map, t->piece, sp + 1, lb);
            int32_t im = -1;
            if (ia >= 0 && ib >= 0 && la + lb <= t->max_piece_len) {
                memcpy(cat, s, la);
                memcpy(cat + la, sp + 1, lb);
                im = strmap_find(t, &t->piece_map, t->piece, cat, la + lb);
            }
            if (ia < 0 || ib < 0 || im < 0) {
                st = MS_ERR_FORMAT;
                MS_LOG_ERROR("%s: tokenizer.ggml.merges[%lld] \"%.*s\": %s is not in tokenizer.ggml.tokens", name,
                             (long long)r, (int)(len > 64 ? 64 : len), s,
                             ia < 0 ? "the left token" : ib < 0 ? "the right token" : "the merged token");
                break;
            }
            pairmap_insert(&t->merges, ia, ib, (int32_t)r, im);
        }
        free(cat);
        MS_TRY(st);
        MS_TRY(hf_compile_regex(name, regex, t));
    } else {
        /* "llama": the byte fallback needs <0xXX> tokens (set by gguf_set_bytes); text lookups use piece_map */
        t->unk_id = 0 < n ? 0 : -1;
    }

    /* special ids (llama.cpp defaults, then the file's keys) */
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
    eos_add(t, eos);
    eos_add(t, eot);
    /* end-of-generation tokens found by text (llama.cpp does the same), and
     * made control tokens so raw text never produces them */
    for (size_t i = 0; i < sizeof EOG_TEXTS / sizeof *EOG_TEXTS; i++) {
        int32_t id = strmap_find(t, &t->piece_map, t->piece, EOG_TEXTS[i], strlen(EOG_TEXTS[i]));
        if (id < 0) continue;
        eos_add(t, id);
        if (!(t->flags[id] & (TOK_SPECIAL | TOK_USERDEF))) n_special++;
        t->flags[id] = (uint8_t)((t->flags[id] & ~TOK_USERDEF) | TOK_SPECIAL);
    }

    /* control / unknown / user-defined tokens, longest first */
    if (n_special) {
        t->special = ms_malloc((size_t)n_special * sizeof *t->special);
        special_key *keys = ms_malloc((size_t)n_special * sizeof *keys);
        if (!t->special || !keys) {
            free(keys);
            return MS_ERR_NOMEM;
        }
        int64_t k = 0;
        for (int64_t id = 0; id < n; id++)
            if (t->flags[id] & (TOK_SPECIAL | TOK_USERDEF)) keys[k++] = (special_key){t->piece[id].len, (int32_t)id};
        MS_ASSERT(k == n_special);
        qsort(keys, (size_t)k, sizeof *keys, cmp_special);
        for (int64_t i = 0; i < k; i++) t->special[i] = keys[i].id;
        t->n_special = k;
        free(keys);
    }

    /* chat template */
    const char *tmpl;
    st = ms_gguf_get_str(g, "tokenizer.chat_template", &tmpl, NULL);
    t->chat = MS_CHAT_NONE;
    if (st == MS_OK) {
        if (strstr(tmpl, "<|im_start|>"))
            t->chat = MS_CHAT_CHATML;
        else if (strstr(tmpl, "<|start_header_id|>"))
            t->chat = MS_CHAT_LLAMA3;
        else
            MS_LOG_INFO("%s: tokenizer.chat_template is neither ChatML nor Llama-3; no chat template", name);
    } else if (st != MS_ERR_NOT_FOUND) {
        return st;
    }
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

ms_status ms_tok_load_path(const char *path, ms_tok **out) {
    MS_ASSERT(path && out);
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) MS_FAIL(MS_ERR_NOT_FOUND, "%s: no such file or directory", path);
    if (S_ISDIR(sb.st_mode)) return ms_tok_load_dir(path, out);
    if (!ms_gguf_is_gguf(path))
        MS_FAIL(MS_ERR_FORMAT, "%s: not a GGUF file (no GGUF magic) and not a model directory", path);
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
    int32_t id = strmap_find(t, &t->piece_map, t->piece, piece, n);
    if (id < 0 && t->kind == TOK_HF_BPE) id = strmap_find(t, &t->bytes_map, t->bytes, piece, n);
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
