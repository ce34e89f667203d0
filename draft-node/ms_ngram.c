/* ms_ngram.c — the n-gram draft source (ms_ngram.h). */
#include "ms_ngram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A match's context: the suffix matched, extended backwards while the tokens
 * before the earlier occurrence agree with the history's (up to NG_L_CAP).
 * Its record bucket: 1-4 tokens each their own, 5-7, 8-15, 16-31, 32+. A
 * copy with a long shared context (a docstring re-quoted, a paragraph
 * summarised) is accepted far more often than a 2-token coincidence, and the
 * policy should know which it is verifying. */
#define NG_L_CAP 32
#define NG_BUCKETS 9

struct ms_ngram {
    ms_ngram_params p;
    int32_t *hist;    /* [p.max_history] the request's tokens, oldest first */
    int64_t len;
    int32_t *pos;     /* [cap] entry: end of the n-gram's latest occurrence (its next token's index); −1 empty */
    uint8_t *gram_n;  /* [cap] entry: its n */
    uint64_t mask;    /* cap − 1 (cap a power of two ≥ 2 · entries) */
    /* acceptance record per (length of the match's context, position in the continuation) */
    float acc[NG_BUCKETS][MS_TREE_MAX], tried[NG_BUCKETS][MS_TREE_MAX];
    int32_t last[MS_TREE_MAX]; /* the proposal awaiting its verdict */
    int64_t n_last, last_bucket;
    int64_t proposed, accepted;
};

/* The record's prior: 2 tries per position, accepted at a rate that grows
 * with the match's context (a guess the request's own verdicts soon
 * replace; with 1 in 2 for every bucket the policy never verified deep
 * enough into a long copy to learn that it pays); decay per verdict. */
#define NG_PRIOR_TRIED 2.0f
static const float ng_prior_rate[NG_BUCKETS] = {0.5f, 0.5f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 0.95f, 0.97f};
#define NG_PRIOR_ACC(b) (NG_PRIOR_TRIED * ng_prior_rate[b])
#define NG_DECAY 0.95f

ms_ngram_params ms_ngram_params_default(void) {
    return (ms_ngram_params){.n_min = 2, .n_max = 4, .max_len = 16, .max_history = 32768};
}

ms_status ms_ngram_params_check(const ms_ngram_params *p) {
    if (p->n_min < 1 || p->n_min > MS_NGRAM_N_MAX)
        MS_FAIL(MS_ERR_INVALID, "ngram.n_min must be in [1, %d], got %lld", MS_NGRAM_N_MAX, (long long)p->n_min);
    if (p->n_max < p->n_min || p->n_max > MS_NGRAM_N_MAX)
        MS_FAIL(MS_ERR_INVALID, "ngram.n_max must be in [n_min = %lld, %d], got %lld", (long long)p->n_min,
                MS_NGRAM_N_MAX, (long long)p->n_max);
    if (p->max_len < 1 || p->max_len > MS_TREE_MAX - 1)
        MS_FAIL(MS_ERR_INVALID, "ngram.max_len must be in [1, %d], got %lld", MS_TREE_MAX - 1, (long long)p->max_len);
    if (p->max_history < 2 * p->n_max + 2 || p->max_history > (int64_t)1 << 28)
        MS_FAIL(MS_ERR_INVALID, "ngram.max_history must be in [%lld, 2^28], got %lld", (long long)(2 * p->n_max + 2),
                (long long)p->max_history);
    return MS_OK;
}

/* The record at its prior (at creation only: it outlives requests, so a
 * workload where copies do not pay — math, open QA — stops paying for failed
 * verifies after its first request instead of at every request). */
static void record_init(ms_ngram *g) {
    for (int b = 0; b < NG_BUCKETS; b++)
        for (int i = 0; i < MS_TREE_MAX; i++) {
            g->acc[b][i] = NG_PRIOR_ACC(b);
            g->tried[b][i] = NG_PRIOR_TRIED;
        }
}

ms_status ms_ngram_new(const ms_ngram_params *p, ms_ngram **out) {
    *out = NULL;
    MS_TRY(ms_ngram_params_check(p));
    ms_ngram *g = calloc(1, sizeof *g);
    if (!g) MS_FAIL(MS_ERR_NOMEM, "ngram: out of memory");
    g->p = *p;
    const uint64_t entries = (uint64_t)p->max_history * (uint64_t)(p->n_max - p->n_min + 1);
    uint64_t cap = 64;
    while (cap < 2 * entries) cap *= 2;
    g->mask = cap - 1;
    g->hist = malloc((size_t)p->max_history * sizeof *g->hist);
    g->pos = malloc((size_t)cap * sizeof *g->pos);
    g->gram_n = malloc((size_t)cap);
    if (!g->hist || !g->pos || !g->gram_n) {
        ms_ngram_free(&g);
        MS_FAIL(MS_ERR_NOMEM, "ngram: out of memory for a history of %lld tokens", (long long)p->max_history);
    }
    ms_ngram_reset(g);
    record_init(g);
    *out = g;
    return MS_OK;
}

void ms_ngram_free(ms_ngram **g) {
    if (!g || !*g) return;
    free((*g)->hist);
    free((*g)->pos);
    free((*g)->gram_n);
    free(*g);
    *g = NULL;
}

void ms_ngram_reset(ms_ngram *g) {
    g->len = 0;
    g->n_last = 0;
    memset(g->pos, 0xFF, (size_t)(g->mask + 1) * sizeof *g->pos);
}

const int32_t *ms_ngram_history(const ms_ngram *g, int64_t *n) {
    *n = g->len;
    return g->hist;
}

/* FNV-1a over the n ids, then n. */
static uint64_t gram_hash(const int32_t *ids, int64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < n; i++) {
        h ^= (uint32_t)ids[i];
        h *= 1099511628211ull;
    }
    h ^= (uint64_t)n;
    h *= 1099511628211ull;
    return h ^ (h >> 29);
}

/* The slot of the n-gram ids[n]: its entry, or the empty slot where it goes. */
static uint64_t find_slot(const ms_ngram *g, const int32_t *ids, int64_t n) {
    uint64_t s = gram_hash(ids, n) & g->mask;
    while (g->pos[s] >= 0) {
        const int32_t e = g->pos[s];
        if (g->gram_n[s] == n && !memcmp(g->hist + e - n, ids, (size_t)n * sizeof *ids)) return s;
        s = (s + 1) & g->mask;
    }
    return s;
}

/* The n-grams that end just before index i now have i as their latest next token. */
static void index_at(ms_ngram *g, int64_t i) {
    for (int64_t n = g->p.n_min; n <= g->p.n_max && n <= i; n++) {
        const uint64_t s = find_slot(g, g->hist + i - n, n);
        g->pos[s] = (int32_t)i;
        g->gram_n[s] = (uint8_t)n;
    }
}

void ms_ngram_append(ms_ngram *g, const int32_t *ids, int64_t n) {
    for (int64_t k = 0; k < n; k++) {
        if (g->len == g->p.max_history) {
            /* keep the newer half and index it again */
            const int64_t keep = g->len / 2;
            memmove(g->hist, g->hist + g->len - keep, (size_t)keep * sizeof *g->hist);
            g->len = keep;
            memset(g->pos, 0xFF, (size_t)(g->mask + 1) * sizeof *g->pos);
            for (int64_t i = 1; i < keep; i++) index_at(g, i);
        }
        g->hist[g->len] = ids[k];
        if (g->len > 0) index_at(g, g->len);
        g->len++;
    }
}

/* The continuation (≤ max tokens into out) and its start; 0 when nothing matched. */
static int64_t lookup(const ms_ngram *g, int64_t max, int32_t *out, int64_t *n_match, int64_t *from_out) {
    if (n_match) *n_match = 0;
    for (int64_t n = g->p.n_max; n >= g->p.n_min; n--) {
        if (g->len < n + 1) continue; /* an earlier occurrence needs a token after it */
        const uint64_t s = find_slot(g, g->hist + g->len - n, n);
        if (g->pos[s] < 0) continue;
        const int64_t from = g->pos[s];
        int64_t k = 0;
        while (k < max && from + k < g->len) {
            out[k] = g->hist[from + k];
            k++;
        }
        if (n_match) *n_match = n;
        *from_out = from;
        return k;
    }
    return 0;
}

int64_t ms_ngram_lookup(const ms_ngram *g, int64_t max, int32_t *out, int64_t *n_match) {
    int64_t from;
    return lookup(g, max, out, n_match, &from);
}

/* The match's context length (≥ n, ≤ NG_L_CAP): the occurrence ends at
 * from − 1, the history at len − 1. */
static int64_t context_len(const ms_ngram *g, int64_t from, int64_t n) {
    int64_t L = n;
    while (L < NG_L_CAP && from - 1 - L >= 0 && g->hist[from - 1 - L] == g->hist[g->len - 1 - L]) L++;
    return L;
}

static int64_t bucket_of(int64_t L) { return L <= 4 ? L : L < 8 ? 5 : L < 16 ? 6 : L < NG_L_CAP ? 7 : 8; }

void ms_ngram_begin(ms_ngram *g, const int32_t *prompt, int64_t n, int32_t root) {
    ms_ngram_reset(g);
    ms_ngram_append(g, prompt, n);
    ms_ngram_append(g, &root, 1);
}

int64_t ms_ngram_propose(ms_ngram *g, int32_t *ids, float *logp) {
    int64_t m, from = 0;
    int64_t n = lookup(g, MS_TREE_MAX - 1, ids, &m, &from);
    const int64_t L = n > 0 ? context_len(g, from, m) : 0, b = bucket_of(L);
    /* a copy with ≥ 16 tokens of shared context may run 4x longer */
    const int64_t cap = L >= 16 ? (4 * g->p.max_len < MS_TREE_MAX - 1 ? 4 * g->p.max_len : MS_TREE_MAX - 1) : g->p.max_len;
    if (n > cap) n = cap;
    for (int64_t i = 0; i < n; i++) logp[i] = logf(g->acc[b][i] / g->tried[b][i]);
    memcpy(g->last, ids, (size_t)n * sizeof *ids);
    g->n_last = n;
    g->last_bucket = b;
    g->proposed += n;
    return n;
}

void ms_ngram_commit(ms_ngram *g, const int32_t *emitted, int64_t n) {
    if (g->n_last > 0) {
        /* Scored against what the target emitted, the bonus included: a token
         * that matches it would have been accepted had it been verified (the
         * cost policy may have left it out), so left-out proposals do not
         * count as refused. Positions past the emitted tokens are untried. */
        int64_t a = 0;
        while (a < g->n_last && a < n && emitted[a] == g->last[a]) a++;
        float *acc = g->acc[g->last_bucket], *tried = g->tried[g->last_bucket];
        for (int64_t i = 0; i <= a && i < g->n_last && i < n; i++) {
            acc[i] = NG_DECAY * acc[i] + (1.0f - NG_DECAY) * NG_PRIOR_ACC(g->last_bucket) + (i < a ? 1.0f : 0.0f);
            tried[i] = NG_DECAY * tried[i] + (1.0f - NG_DECAY) * NG_PRIOR_TRIED + 1.0f;
        }
        g->accepted += a < n - 1 ? a : n - 1; /* on the accepted path */
        g->n_last = 0;
    }
    ms_ngram_append(g, emitted, n);
}

void ms_ngram_counts(const ms_ngram *g, int64_t *proposed, int64_t *accepted) {
    *proposed = g->proposed;
    *accepted = g->accepted;
}

int64_t ms_ngram_graft(ms_tree *t, const int32_t *ids, const float *logp, int64_t n, int64_t max_nodes) {
    if (max_nodes > MS_TREE_MAX) max_nodes = MS_TREE_MAX;
    int64_t added = 0;
    int32_t cur = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t next = -1;
        for (int32_t c = cur + 1; c < t->n && next < 0; c++)
            if (t->parent[c] == cur && t->token[c] == ids[i]) next = c;
        if (next < 0) {
            if (t->n >= max_nodes) break;
            next = (int32_t)t->n++;
            t->token[next] = ids[i];
            t->parent[next] = cur;
            t->depth[next] = t->depth[cur] + 1;
            t->mask[next] = t->mask[cur] | (uint64_t)1 << next;
            t->score[next] = t->score[cur] + (logp ? logp[i] : 0.0f);
            added++;
        }
        cur = next;
        t->ngram |= UINT64_C(1) << next;
    }
    return added;
}

/* ---- the draft kind `ngram` ------------------------------------------------ */

struct ms_ngd {
    ms_ngram *g;
    bool active;
    uint64_t rid;
    int64_t round; /* last round drafted */
    ms_tree tree;  /* the last tree drafted */
};

ms_status ms_ngd_new(const ms_ngram_params *p, ms_ngd **out) {
    *out = NULL;
    ms_ngd *d = calloc(1, sizeof *d);
    if (!d) MS_FAIL(MS_ERR_NOMEM, "ngram draft: out of memory");
    ms_status s = ms_ngram_new(p, &d->g);
    if (s < 0) {
        free(d);
        return s;
    }
    *out = d;
    return MS_OK;
}

void ms_ngd_free(ms_ngd **d) {
    if (!d || !*d) return;
    ms_ngram_free(&(*d)->g);
    free(*d);
    *d = NULL;
}

static ms_status ngd_begin(void *ctx, const ms_msg_begin *m) {
    ms_ngd *d = ctx;
    d->active = false;
    if (m->n_prompt <= 0) MS_FAIL(MS_ERR_INVALID, "ngram draft begin: empty prompt");
    if (m->root < 0) MS_FAIL(MS_ERR_INVALID, "ngram draft begin: root %d is negative", m->root);
    for (int64_t i = 0; i < m->n_prompt; i++)
        if (m->prompt[i] < 0) MS_FAIL(MS_ERR_INVALID, "ngram draft begin: prompt id %d at %lld", m->prompt[i], (long long)i);
    ms_ngram_begin(d->g, m->prompt, m->n_prompt, m->root);
    d->rid = m->request_id;
    d->round = 0;
    d->tree.n = 0;
    d->active = true;
    return MS_OK;
}

static ms_status ngd_draft(void *ctx, uint64_t rid, int64_t round, ms_msg_tree *out) {
    ms_ngd *d = ctx;
    if (!d->active || rid != d->rid)
        MS_FAIL(MS_ERR_INVALID, "ngram draft: request %llu is not the active one", (unsigned long long)rid);
    if (round != d->round + 1 || (d->round > 0 && d->tree.n == 0))
        MS_FAIL(MS_ERR_INVALID, "ngram draft: round %lld out of order (last drafted %lld)", (long long)round,
                (long long)d->round);
    const uint64_t t0 = ms_now_ns();
    int64_t n_hist;
    const int32_t *h = ms_ngram_history(d->g, &n_hist);
    ms_tree *t = &d->tree;
    ms_tree_root(t, h[n_hist - 1]);
    int32_t ids[MS_TREE_MAX];
    float logp[MS_TREE_MAX];
    const int64_t n = ms_ngram_propose(d->g, ids, logp);
    ms_ngram_graft(t, ids, logp, n, MS_TREE_MAX);
    memset(out, 0, sizeof *out);
    out->request_id = rid;
    out->round = round;
    out->tree = *t;
    out->stats.backbone_ns = ms_now_ns() - t0;
    d->round = round;
    return MS_OK;
}

static ms_status ngd_accept(void *ctx, const ms_msg_verify *m) {
    ms_ngd *d = ctx;
    const ms_tree *t = &d->tree;
    if (!d->active || m->request_id != d->rid || m->round != d->round || t->n == 0)
        MS_FAIL(MS_ERR_INVALID, "ngram draft accept: request %llu round %lld does not match the last tree",
                (unsigned long long)m->request_id, (long long)m->round);
    MS_TRY(ms_tree_path_check(t, m->path, m->n_path, "ngram draft accept"));
    if (m->bonus < 0) MS_FAIL(MS_ERR_INVALID, "ngram draft accept: bonus %d is negative", m->bonus);
    int32_t emitted[MS_TREE_MAX + 1];
    ms_ngram_commit(d->g, emitted, ms_tree_path_tokens(t, m->path, m->n_path, m->bonus, emitted));
    return MS_OK;
}

static void ngd_end(void *ctx, uint64_t rid) {
    ms_ngd *d = ctx;
    if (d->rid == rid) d->active = false;
}

ms_draft_port ms_ngd_port(ms_ngd *d) {
    return (ms_draft_port){.ctx = d, .model_free = true, .no_topk_pre = true, .begin = ngd_begin, .draft = ngd_draft, .accept = ngd_accept, .end = ngd_end};
}
