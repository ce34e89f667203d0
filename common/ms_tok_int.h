/* ms_tok_int.h — what the tokenizer files share (ms_tokenizer.h is the
 * contract): the tokenizer struct, its lookup tables, the merge loop's
 * scratch, and the functions one kind's file calls in another.
 *
 * Files, one per tokenizer kind (as llama.cpp's src/llama-vocab.cpp keeps one
 * implementation per kind):
 *  - ms_tokenizer.c   the struct, vocab lookup tables, arena, special-token
 *                     splitting (GGUF), encode dispatch, queries, decoding
 *  - ms_tok_merge.c   the merge loop every kind runs (symbol list + heap)
 *  - ms_tok_bpe.c     byte-level BPE encoding (GPT-2 byte map, pre-tokenizer
 *                     regex, NFC, HF added tokens)
 *  - ms_tok_spm.c     SentencePiece-style encoding of GGUF "llama"
 *  - ms_tok_hf.c      tokenizer.json and tokenizer_config.json loading
 *  - ms_tok_llama2c.c llama2.c tokenizer.bin: loading and run.c's encoder
 *  - ms_tok_gguf.c    GGUF metadata (tokenizer.ggml.*) loading
 *
 * Vocabulary lookups are open-addressing hash tables over spans of one arena:
 * `piece` is the token as written in the file (byte-level unicode for HF),
 * `bytes` the raw bytes it stands for.
 */
#ifndef MS_TOK_INT_H
#define MS_TOK_INT_H

#include <stdint.h>
#include <string.h>

#include "ms_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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

/* ---- hashing and UTF-8 (inline: the hot loops of several files use them) ---- */

static inline uint32_t tok_hash_bytes(const void *p, size_t n) {
    const uint8_t *s = p;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h ? h : 1;
}

/* Length a lead byte announces (1..4), 0 if it can never start a character. */
static inline int utf8_need(uint8_t c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Is `c` a valid k-th byte (k ≥ 1) after `lead`? (no overlongs, surrogates, > U+10FFFF) */
static inline bool utf8_cont_ok(uint8_t lead, int k, uint8_t c) {
    if (k == 1) {
        if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF;
        if (lead == 0xED) return c >= 0x80 && c <= 0x9F;
        if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
        if (lead == 0xF4) return c >= 0x80 && c <= 0x8F;
    }
    return (c & 0xC0) == 0x80;
}

/* Length of the valid character at s (n bytes available), 0 if invalid or cut. */
static inline int utf8_valid_len(const uint8_t *s, size_t n) {
    int need = utf8_need(s[0]);
    if (need == 0 || (size_t)need > n) return 0;
    for (int k = 1; k < need; k++)
        if (!utf8_cont_ok(s[0], k, s[k])) return 0;
    return need;
}

/* Decode the valid character at s; returns its length (0 if invalid). */
static inline int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
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

/* ---- the merge loop's state (ms_tok_merge.c) --------------------------------- */

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

/* ---- ms_tokenizer.c: tables, arena, per-id data -------------------------------- */

ms_status tok_strmap_init(strmap *m, int64_t n);
int32_t tok_strmap_find(const ms_tok *t, const strmap *m, const span *keys, const void *s, size_t n);
/* Insert `id` under keys[id]; the first id of a given key wins. */
void tok_strmap_insert(const ms_tok *t, strmap *m, const span *keys, int32_t id);
ms_status tok_pairmap_init(pairmap *m, int64_t n);
/* Returns false if the pair has no merge. */
bool tok_pairmap_find(const pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged);
/* A repeated pair keeps its first (lowest) rank. */
void tok_pairmap_insert(pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
/* Append n bytes of s (s NULL: reserve only) to the arena; *out is their span. */
ms_status tok_arena_put(ms_tok *t, const void *s, size_t n, span *out);
ms_status tok_alloc_ids(ms_tok *t, int64_t n_ids, bool scores);
ms_tok *tok_new(enum tok_kind kind);
void tok_eos_add(ms_tok *t, int32_t id);
/* "<0xXX>" → the byte XX; false for any other piece. */
bool tok_parse_byte_piece(const char *s, size_t n, uint8_t *b);
/* Grow *p (elem-byte elements) to hold `need`; false when out of memory. */
bool tok_grow(void **p, size_t *cap, size_t need, size_t elem);
/* A growable byte buffer (a merge's concatenation). */
typedef struct {
    char *v;
    size_t cap;
} tok_catbuf;
/* A merge "a b": ids[0..2] = the model ids [0, n_model) of a, b and a ++ b.
 * *missing = 0, or which is not such a token (1 a, 2 b, 3 a ++ b; the sides
 * are looked up first). cat->v holds a ++ b once both sides are found. */
ms_status tok_merge_ids(const ms_tok *t, const char *a, size_t la, const char *b, size_t lb, tok_catbuf *cat,
                        int32_t ids[3], int *missing);

/* ---- ms_tok_merge.c ---------------------------------------------------------- */

void tok_scratch_free(bpe_scratch *s);
ms_status tok_scratch_syms(bpe_scratch *s, int64_t n);
ms_status tok_scratch_buf(bpe_scratch *s, size_t n);
ms_status tok_heap_push(bpe_scratch *s, bpe_cand c);
bpe_cand tok_heap_pop(bpe_scratch *s);
/* Merge s->sym[0..n) (linked in order) until no candidate is left; append
 * the surviving ids to out. */
ms_status tok_bpe_merge(const ms_tok *t, bpe_scratch *s, int64_t n, ms_ids *out);

/* ---- ms_tok_bpe.c ------------------------------------------------------------- */

/* GPT-2 bytes_to_unicode inverted: u2b[code point] = byte, -1 elsewhere. */
void tok_unicode_to_byte(int16_t u2b[512]);
/* Byte-level piece → raw bytes; out has ≥ len bytes. Returns the length. */
size_t tok_byte_level_decode(const uint8_t *s, size_t len, const int16_t *u2b, uint8_t *out);
/* Compile the pre-tokenizer regex into t->re; errors name `name`. */
ms_status tok_compile_regex(const char *name, const char *pattern, ms_tok *t);
/* Per-call match state for t->re (all NULL when the tokenizer has no regex). */
typedef struct {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
} tok_re_ctx;
ms_status tok_re_open(const ms_tok *t, tok_re_ctx *rx);
void tok_re_close(tok_re_ctx *rx);
/* Pre-tokenize (t->re) and BPE each word of text. */
ms_status tok_bpe_encode_segment(const ms_tok *t, bpe_scratch *s, const tok_re_ctx *rx, const uint8_t *text,
                                 size_t len, ms_ids *out);
/* HF tokenizer.json encoding: added tokens, NFC, pre-tokenizer, BPE. */
ms_status tok_hf_encode(const ms_tok *t, const uint8_t *text, size_t len, bool parse_special, ms_ids *out);

/* ---- ms_tok_spm.c, ms_tok_llama2c.c ------------------------------------------- */

/* GGUF "llama": one fragment of text (after a ' ' when prefix). */
ms_status tok_spm_encode_fragment(const ms_tok *t, bpe_scratch *s, const uint8_t *text, size_t len, bool prefix,
                                  ms_ids *out);
ms_status tok_llama2c_encode(const ms_tok *t, const uint8_t *text, size_t len, ms_ids *out);
/* vocab_size of a model directory's config.json (for its tokenizer.bin). */
ms_status tok_config_vocab_size(const char *path, int64_t *vocab_size);

#endif
