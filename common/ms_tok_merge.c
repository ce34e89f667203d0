/* ms_tok_merge.c — the merge loop every tokenizer kind runs.
 *
 * A doubly linked list of symbols and a min-heap of candidate pairs keyed by
 * (priority, position), with stale heap entries dropped when popped. For
 * byte-level BPE the priority is the merge rank (lowest first, leftmost on
 * ties, as tokenizers' BPE::merge_word); for llama2.c it is −score (highest
 * score first, leftmost on ties, which is what run.c encode()'s "first pair
 * with a strictly better score" loop picks). GGUF "llama" (ms_tok_spm.c)
 * runs its own loop over the same heap.
 */
#include <stdlib.h>
#include <string.h>

#include "ms_tok_int.h"

void tok_scratch_free(bpe_scratch *s) {
    free(s->sym);
    free(s->heap);
    free(s->buf);
    free(s->wc);
    free(s->wc_keys);
    free(s->wc_ids);
}

ms_status tok_scratch_syms(bpe_scratch *s, int64_t n) {
    if (n <= s->sym_cap) return MS_OK;
    int64_t c = s->sym_cap ? s->sym_cap : 64;
    while (c < n) c *= 2;
    bpe_sym *p = ms_realloc(s->sym, (size_t)c * sizeof *p);
    if (!p) return MS_ERR_NOMEM;
    s->sym = p;
    s->sym_cap = c;
    return MS_OK;
}

ms_status tok_scratch_buf(bpe_scratch *s, size_t n) {
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

ms_status tok_heap_push(bpe_scratch *s, bpe_cand c) {
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

bpe_cand tok_heap_pop(bpe_scratch *s) {
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
        if (!tok_pairmap_find(&t->merges, a, b, &rank, merged)) return false;
        *prio = rank;
        return true;
    }
    /* llama2.c: the concatenated piece must be in the vocab with a usable score */
    const span *pa = &t->piece[a], *pb = &t->piece[b];
    size_t n = (size_t)pa->len + pb->len;
    if (n > t->max_piece_len) return false;
    memcpy(s->buf, t->arena + pa->off, pa->len);
    memcpy(s->buf + pa->len, t->arena + pb->off, pb->len);
    int32_t id = tok_strmap_find(t, &t->piece_map, t->piece, s->buf, n);
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
    return tok_heap_push(s, c);
}

ms_status tok_bpe_merge(const ms_tok *t, bpe_scratch *s, int64_t n, ms_ids *out) {
    s->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++) MS_TRY(push_pair(t, s, i));
    while (s->heap_n > 0) {
        bpe_cand c = tok_heap_pop(s);
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
