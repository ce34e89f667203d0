/* ms_tok_spm.c — SentencePiece-style encoding of GGUF "llama" tokenizers, as
 * llama.cpp's llm_tokenizer_spm: ' ' written U+2581, the text cut into UTF-8
 * characters, adjacent symbols whose concatenation is a token merged highest
 * score first (leftmost on ties), and a final symbol that is no token
 * written as its <0xXX> byte tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "ms_tok_int.h"

/* One fragment: s->buf holds the escaped text (n bytes). */
static ms_status spm_encode_escaped(const ms_tok *t, bpe_scratch *s, size_t n, ms_ids *out) {
    static const uint8_t lead_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    const uint8_t *w = (const uint8_t *)s->buf;
    /* symbols: sym[i].id = byte offset in w, wlen[i] = byte length (0 = merged away) */
    MS_TRY(tok_scratch_syms(s, (int64_t)n));
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
                              ? tok_strmap_find(t, &t->piece_map, t->piece, w + s->sym[l_].id, m_)              \
                              : -1;                                                                             \
            if (id_ >= 0)                                                                                       \
                MS_TRY_GOTO(st,                                                                                 \
                            tok_heap_push(s, (bpe_cand){.prio = -(double)t->score[id_], .pos = l_, .left = l_,      \
                                                    .right = r_, .merged = (int32_t)m_}),                       \
                            done);                                                                              \
        }                                                                                                       \
    } while (0)
    for (int32_t i = 1; i < k; i++) SPM_TRY_PAIR(i - 1, i);
    while (s->heap_n > 0) {
        bpe_cand c = tok_heap_pop(s);
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
        int32_t id = tok_strmap_find(t, &t->piece_map, t->piece, p, wlen[i]);
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

ms_status tok_spm_encode_fragment(const ms_tok *t, bpe_scratch *s, const uint8_t *text, size_t len, bool prefix,
                                     ms_ids *out) {
    /* ' ' → U+2581 (3 bytes): at most 3 bytes per input byte, plus the prefix */
    MS_TRY(tok_scratch_buf(s, 3 * len + 3));
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
