/* ms_tree.c — EAGLE-2 dynamic draft tree: expansion, rerank, flattening
 * (eagle2-frspec-notes §2.2-2.3; see ms_tree.h for the algorithm). */
#include "ms_tree.h"

#include <math.h>
#include <string.h>

/* History slots: K + depth·K² with K·depth ≤ MS_TREE_MAX rows → ≤ K·(1 + MS_TREE_MAX). */
#define MS_TREE_MAX_HIST (MS_TREE_MAX_K * (1 + MS_TREE_MAX))

typedef struct {
    int64_t n;                           /* slots used */
    int32_t token[MS_TREE_MAX_HIST];
    int32_t parent[MS_TREE_MAX_HIST];    /* parent slot; −1 = the root */
    int32_t row[MS_TREE_MAX_HIST];       /* submission row once expanded, else −1 */
    int32_t level[MS_TREE_MAX_HIST];     /* node depth (1 = child of the root) */
    float score[MS_TREE_MAX_HIST];       /* cumulative log-prob s */
    float step[MS_TREE_MAX_HIST];        /* own log-prob given the parent (the draft's candidate logp) */
} tree_history;
_Static_assert(MS_TREE_MAX_HIST < INT32_MAX, "history slots fit int32");

ms_tree_params ms_tree_params_default(void) {
    return (ms_tree_params){.top_k = 10, .depth = 5, .total = 60, .chain = false, .p_min = 0.0f};
}

ms_status ms_tree_params_check(const ms_tree_params *p) {
    if (!p) MS_FAIL(MS_ERR_INVALID, "draft tree: no parameters");
    if (p->top_k < 1 || p->top_k > MS_TREE_MAX_K)
        MS_FAIL(MS_ERR_INVALID, "draft tree: top_k = %lld, expected 1..%d", (long long)p->top_k, MS_TREE_MAX_K);
    if (p->depth < 0) MS_FAIL(MS_ERR_INVALID, "draft tree: depth = %lld, expected ≥ 0", (long long)p->depth);
    if (!(p->p_min >= 0.0f) || isinf(p->p_min))
        MS_FAIL(MS_ERR_INVALID, "draft tree: p_min = %g, expected a finite value ≥ 0", (double)p->p_min);
    if (p->chain) {
        if (p->depth > MS_TREE_MAX - 2)
            MS_FAIL(MS_ERR_INVALID, "draft tree: chain depth = %lld, expected ≤ %d (depth+2 nodes ≤ %d)",
                    (long long)p->depth, MS_TREE_MAX - 2, MS_TREE_MAX);
        return MS_OK;
    }
    if (p->total < 2 || p->total > MS_TREE_MAX)
        MS_FAIL(MS_ERR_INVALID, "draft tree: total = %lld nodes, expected 2..%d", (long long)p->total, MS_TREE_MAX);
    /* depth ≤ MS_TREE_MAX first, so the product cannot overflow. */
    if (p->depth > MS_TREE_MAX || p->top_k * p->depth > MS_TREE_MAX)
        MS_FAIL(MS_ERR_INVALID, "draft tree: top_k·depth = %lld·%lld rows per round, expected ≤ %d (uint64 masks)",
                (long long)p->top_k, (long long)p->depth, MS_TREE_MAX);
    return MS_OK;
}

/* Candidates from the draft: ids ≥ 0, log-probs ≤ 0 (−inf ok, NaN not), non-increasing.
 * Log-probs ≤ 0 is what makes s_child ≤ s_parent, which the parent closure of the rerank rests on. */
static ms_status check_candidates(const int32_t *ids, const float *logp, int64_t k, const char *what, int64_t row) {
    for (int64_t j = 0; j < k; j++) {
        if (ids[j] < 0)
            MS_FAIL(MS_ERR_INVALID, "draft tree: %s row %lld candidate %lld: token id %d < 0", what, (long long)row,
                    (long long)j, (int)ids[j]);
        if (!(logp[j] <= 0.0f))
            MS_FAIL(MS_ERR_INVALID, "draft tree: %s row %lld candidate %lld: log-prob %g is not ≤ 0", what,
                    (long long)row, (long long)j, (double)logp[j]);
        if (j > 0 && logp[j] > logp[j - 1])
            MS_FAIL(MS_ERR_INVALID, "draft tree: %s row %lld: log-probs not descending at candidate %lld (%g > %g)",
                    what, (long long)row, (long long)j, (double)logp[j], (double)logp[j - 1]);
    }
    return MS_OK;
}

/* Inserts slot h into best[0..*n) (ranked by score desc, then slot asc), keeping at most cap.
 * Slots arrive in ascending order, so an equal score ranks after those already there. */
static void rank_insert(const float *score, int32_t h, int32_t *best, int64_t *n, int64_t cap) {
    int64_t pos = *n;
    while (pos > 0 && score[best[pos - 1]] < score[h]) pos--;
    if (pos >= cap) return;
    int64_t end = *n < cap ? *n : cap - 1; /* the last one falls off when full */
    memmove(best + pos + 1, best + pos, (size_t)(end - pos) * sizeof *best);
    best[pos] = h;
    if (*n < cap) (*n)++;
}

static int32_t hist_push(tree_history *h, int32_t token, int32_t parent, int32_t level, float score, float step) {
    MS_ASSERT(h->n < MS_TREE_MAX_HIST);
    int32_t i = (int32_t)h->n++;
    h->token[i] = token;
    h->parent[i] = parent;
    h->row[i] = -1;
    h->level[i] = level;
    h->score[i] = score;
    h->step[i] = step;
    return i;
}

/* The confidence stop before a pass: true when the best node the pass would
 * submit has probability below p_min. beam[0] is the best-ranked beam node;
 * chain: its own step's log-prob (the token's draft top-1 probability), tree:
 * its cumulative s. Compared in the log domain: log(p_min) is −inf for
 * p_min = 0, so nothing stops then. */
static bool confidence_stop(const tree_history *h, const int32_t *beam, bool chain, float log_p_min) {
    int32_t b = beam[0];
    return (chain ? h->step[b] : h->score[b]) < log_p_min;
}

static ms_status build(int64_t K, int64_t depth, int64_t total, bool chain, float p_min, int32_t root_token,
                       const int32_t *root_ids, const float *root_logp, ms_tree_expand_fn expand, void *ctx,
                       ms_tree *out) {
    tree_history h;
    h.n = 0;
    /* Rows submitted this round (≤ MS_TREE_MAX): what the callback sees. */
    int32_t row_token[MS_TREE_MAX], row_depth[MS_TREE_MAX], row_parent[MS_TREE_MAX];
    uint64_t row_mask[MS_TREE_MAX];
    int32_t cand_ids[MS_TREE_MAX_K * MS_TREE_MAX_K];
    float cand_logp[MS_TREE_MAX_K * MS_TREE_MAX_K];
    int32_t beam[MS_TREE_MAX_K];

    MS_TRY(check_candidates(root_ids, root_logp, K, "root", 0));
    for (int64_t j = 0; j < K; j++) beam[j] = hist_push(&h, root_ids[j], -1, 1, root_logp[j], root_logp[j]);

    const float log_p_min = p_min > 0.0f ? logf(p_min) : -INFINITY;
    int64_t n_rows = 0;
    for (int64_t pass = 1; pass <= depth; pass++) {
        if (confidence_stop(&h, beam, chain, log_p_min)) break;
        int64_t first = n_rows;
        MS_ASSERT(first + K <= MS_TREE_MAX);
        for (int64_t r = 0; r < K; r++) {
            int32_t b = beam[r];
            int32_t par = h.parent[b];
            int64_t row = first + r;
            row_token[row] = h.token[b];
            row_depth[row] = h.level[b];
            row_parent[row] = par < 0 ? -1 : h.row[par];
            MS_ASSERT(par < 0 || (h.row[par] >= 0 && h.row[par] < first));
            row_mask[row] = (par < 0 ? 0 : row_mask[h.row[par]]) | (UINT64_C(1) << row);
            h.row[b] = (int32_t)row;
        }
        n_rows += K;
        /* NaN guard: a callee that leaves entries unwritten fails the check below. */
        for (int64_t i = 0; i < K * K; i++) {
            cand_ids[i] = 0;
            cand_logp[i] = NAN;
        }
        MS_TRY(expand(ctx, row_token + first, row_depth + first, row_parent + first, row_mask + first, K, K,
                      cand_ids, cand_logp));
        for (int64_t r = 0; r < K; r++)
            MS_TRY(check_candidates(cand_ids + r * K, cand_logp + r * K, K, "draft", first + r));

        /* K² children in slot order K + (pass-1)K² + r·K + j; the next beam is their top-K. */
        int64_t n_beam = 0;
        int32_t next[MS_TREE_MAX_K];
        for (int64_t r = 0; r < K; r++) {
            int32_t b = beam[r];
            for (int64_t j = 0; j < K; j++) {
                int32_t c = hist_push(&h, cand_ids[r * K + j], b, h.level[b] + 1,
                                      h.score[b] + cand_logp[r * K + j], cand_logp[r * K + j]);
                rank_insert(h.score, c, next, &n_beam, K);
            }
        }
        MS_ASSERT(n_beam == K);
        memcpy(beam, next, (size_t)K * sizeof *beam);
    }

    /* Rerank: top (total-1) slots by s. */
    int32_t sel[MS_TREE_MAX];
    int64_t n_sel = 0;
    for (int64_t i = 0; i < h.n; i++) rank_insert(h.score, (int32_t)i, sel, &n_sel, total - 1);

    /* Flatten in ascending slot order. node_of[slot] = node index, −1 if not selected. */
    int32_t node_of[MS_TREE_MAX_HIST];
    for (int64_t i = 0; i < h.n; i++) node_of[i] = -1;
    for (int64_t i = 0; i < n_sel; i++) node_of[sel[i]] = 0;

    out->token[0] = root_token;
    out->parent[0] = -1;
    out->depth[0] = 0;
    out->mask[0] = 1;
    out->score[0] = 0.0f;
    out->ngram = 0;
    int64_t n = 1;
    for (int64_t i = 0; i < h.n; i++) {
        if (node_of[i] < 0) continue;
        int32_t ps = h.parent[i];
        /* Parent closure: s_child ≤ s_parent (log-probs ≤ 0, checked) and the parent's slot is
         * lower, so the parent ranks strictly before the child and is selected too. */
        int32_t pn = ps < 0 ? 0 : node_of[ps];
        MS_ASSERT(pn >= 0 && pn < n);
        MS_ASSERT(n < MS_TREE_MAX);
        node_of[i] = (int32_t)n;
        out->token[n] = h.token[i];
        out->parent[n] = pn;
        out->depth[n] = out->depth[pn] + 1;
        out->mask[n] = out->mask[pn] | (UINT64_C(1) << n);
        out->score[n] = h.score[i];
        MS_ASSERT(out->depth[n] == h.level[i]);
        n++;
    }
    MS_ASSERT(n == n_sel + 1);
    out->n = n;
    return MS_OK;
}

ms_status ms_tree_build(const ms_tree_params *p, int32_t root_token, const int32_t *root_ids,
                        const float *root_logp, ms_tree_expand_fn expand, void *ctx, ms_tree *out) {
    if (!out) MS_FAIL(MS_ERR_INVALID, "draft tree: no output tree");
    out->n = 0;
    MS_TRY(ms_tree_params_check(p));
    if (!root_ids || !root_logp) MS_FAIL(MS_ERR_INVALID, "draft tree: no root candidates");
    if (p->depth > 0 && !expand) MS_FAIL(MS_ERR_INVALID, "draft tree: depth %lld needs a draft callback",
                                         (long long)p->depth);
    if (root_token < 0) MS_FAIL(MS_ERR_INVALID, "draft tree: root token %d < 0", (int)root_token);
    /* Chain = tree with K = 1 whose rerank keeps every slot (1 + depth of them). */
    int64_t K = p->chain ? 1 : p->top_k;
    int64_t total = p->chain ? p->depth + 2 : p->total;
    ms_status st = build(K, p->depth, total, p->chain, p->p_min, root_token, root_ids, root_logp, expand, ctx, out);
    if (st < 0) out->n = 0;
    return st;
}
