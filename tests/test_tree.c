/* test_tree.c — the EAGLE-2 draft tree builder (draft-node/ms_tree.c) against
 * a naive reference that literally enumerates the history as
 * eagle2-frspec-notes §2.2-2.3 describe, plus structural properties, a
 * hand-worked example, chain mode, ties, bad parameters and failing callbacks.
 *
 * The draft is synthetic: a deterministic log-softmax over a small vocabulary
 * whose logits are a hash of the root-to-node token path. The callback
 * reconstructs each row's path from parent_row and checks what the builder
 * submits (depth, parent, mask, token ∈ the parent's returned children). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tree.h"

#include "ms_check.h"

/* ---- synthetic draft distribution ------------------------------------------------------------ */

enum { D_HASH, D_TIES, D_UNIFORM, D_MASKED, D_KINDS };
static const char *kind_name[D_KINDS] = {"hash", "ties", "uniform", "masked"};

typedef struct {
    int kind;
    int64_t V;
    uint64_t seed;
} dist_cfg;

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* path = [root token, depth-1 token, ..., this node's token] */
static uint64_t path_hash(const dist_cfg *d, const int32_t *path, int64_t len) {
    uint64_t h = mix64(d->seed);
    for (int64_t i = 0; i < len; i++) h = mix64(h ^ (uint64_t)(uint32_t)path[i]);
    return h;
}

/* The k best (logp desc, id asc) of log_softmax(logits(path)) over V ids. */
static void dist_topk(const dist_cfg *d, const int32_t *path, int64_t len, int64_t k, int32_t *ids, float *logp) {
    double logit[256];
    float lp[256];
    int taken[256];
    if (d->V > 256 || k > d->V) abort();
    uint64_t h = path_hash(d, path, len);
    for (int64_t v = 0; v < d->V; v++) {
        uint64_t r = mix64(h ^ ((uint64_t)v * 0x2545f4914f6cdd1dULL));
        switch (d->kind) {
        case D_HASH: logit[v] = (double)(r >> 11) * 0x1p-53 * 8.0 - 4.0; break;
        case D_TIES: logit[v] = (double)(r % 3); break;
        case D_UNIFORM: logit[v] = 0.0; break;
        default: logit[v] = (r % 7 == 0 || v == (int64_t)(h % (uint64_t)d->V)) ? (double)(r % 5) : -INFINITY; break;
        }
    }
    double m = -INFINITY;
    for (int64_t v = 0; v < d->V; v++) m = logit[v] > m ? logit[v] : m;
    double sum = 0.0;
    for (int64_t v = 0; v < d->V; v++) sum += exp(logit[v] - m);
    double lse = m + log(sum);
    for (int64_t v = 0; v < d->V; v++) {
        lp[v] = (float)(logit[v] - lse);
        taken[v] = 0;
    }
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t v = 0; v < d->V; v++)
            if (!taken[v] && (best < 0 || lp[v] > lp[best])) best = v;
        taken[best] = 1;
        ids[j] = (int32_t)best;
        logp[j] = lp[best];
    }
}

/* ---- the callback under test, with its own bookkeeping of submitted rows --------------------- */

enum { BAD_NONE, BAD_NAN, BAD_POSITIVE, BAD_NEG_ID, BAD_ASCENDING, BAD_UNWRITTEN };

typedef struct {
    dist_cfg d;
    int32_t root;
    int64_t k_expect, rows_expect;
    int32_t root_ids[MS_TREE_MAX_K];
    float root_logp[MS_TREE_MAX_K];
    int64_t n_rows;
    int32_t row_token[MS_TREE_MAX], row_parent[MS_TREE_MAX], row_depth[MS_TREE_MAX];
    int32_t ret_ids[MS_TREE_MAX][MS_TREE_MAX_K];
    int64_t calls;
    int64_t fail_at; /* call index that returns fail_code; −1 never */
    ms_status fail_code;
    int bad; /* BAD_*: corrupt the output of call `fail_at` */
} cb_ctx;

/* root_k candidates for level 1; the builder must then ask for k_expect children of k_expect rows per pass. */
static void cb_init2(cb_ctx *c, dist_cfg d, int32_t root, int64_t root_k, int64_t k_expect) {
    memset(c, 0, sizeof *c);
    c->d = d;
    c->root = root;
    c->k_expect = k_expect;
    c->rows_expect = k_expect;
    c->fail_at = -1;
    int32_t path[1] = {root};
    dist_topk(&d, path, 1, root_k, c->root_ids, c->root_logp);
}
static void cb_init(cb_ctx *c, dist_cfg d, int32_t root, int64_t K) { cb_init2(c, d, root, K, K); }

/* Tokens from the root along submitted rows to row g: [root, ..., token of g]; returns the length. */
static int64_t row_path(const cb_ctx *c, int64_t g, int32_t *path) {
    int32_t rev[MS_TREE_MAX + 1];
    int64_t n = 0;
    for (int64_t r = g; r >= 0; r = c->row_parent[r]) rev[n++] = c->row_token[r];
    path[0] = c->root;
    for (int64_t i = 0; i < n; i++) path[1 + i] = rev[n - 1 - i];
    return n + 1;
}

static ms_status cb_expand(void *ctx, const int32_t *tokens, const int32_t *depth, const int32_t *parent_row,
                           const uint64_t *mask, int64_t n_rows, int64_t k, int32_t *out_ids, float *out_logp) {
    cb_ctx *c = ctx;
    int64_t call = c->calls++;
    if (call == c->fail_at && c->bad == BAD_NONE) return c->fail_code;
    CHECK(n_rows == c->rows_expect, "call %lld: %lld rows, expected %lld", (long long)call, (long long)n_rows,
          (long long)c->rows_expect);
    CHECK(k == c->k_expect, "call %lld: k %lld, expected %lld", (long long)call, (long long)k, (long long)c->k_expect);
    if (n_rows != c->rows_expect || k != c->k_expect || c->n_rows + n_rows > MS_TREE_MAX) return MS_ERR_INTERNAL;
    int64_t first = c->n_rows;
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t g = first + r;
        int32_t pr = parent_row[r];
        CHECK(pr >= -1 && pr < first, "row %lld: parent_row %d not an earlier pass (first %lld)", (long long)g, pr,
              (long long)first);
        if (!(pr >= -1 && pr < first)) return MS_ERR_INTERNAL;
        /* One pass = one level: every row of pass `call` has depth call+1 and a parent of the previous pass. */
        CHECK(depth[r] == call + 1, "row %lld: depth %d in pass %lld", (long long)g, depth[r], (long long)call);
        CHECK(pr < 0 ? call == 0 : c->row_depth[pr] == depth[r] - 1, "row %lld: parent row %d depth mismatch",
              (long long)g, pr);
        /* The token must be one of the children returned for the parent (root_ids for level 1). */
        const int32_t *sib = pr < 0 ? c->root_ids : c->ret_ids[pr];
        int found = 0;
        for (int64_t j = 0; j < k; j++) found |= sib[j] == tokens[r];
        CHECK(found, "row %lld: token %d is not a child of parent row %d", (long long)g, tokens[r], pr);
        c->row_token[g] = tokens[r];
        c->row_parent[g] = pr;
        c->row_depth[g] = depth[r];
        /* The mask is exactly the row's chain of parent rows, itself included. */
        uint64_t want = 0;
        for (int64_t a = g; a >= 0; a = c->row_parent[a]) want |= UINT64_C(1) << a;
        CHECK(mask[r] == want, "row %lld: mask %#llx, expected %#llx", (long long)g, (unsigned long long)mask[r],
              (unsigned long long)want);
    }
    c->n_rows += n_rows;
    for (int64_t r = 0; r < n_rows; r++) {
        int32_t path[MS_TREE_MAX + 2];
        int64_t len = row_path(c, first + r, path);
        CHECK(len == depth[r] + 1, "row %lld: path length %lld, depth %d", (long long)(first + r), (long long)len,
              depth[r]);
        dist_topk(&c->d, path, len, k, out_ids + r * k, out_logp + r * k);
        memcpy(c->ret_ids[first + r], out_ids + r * k, (size_t)k * sizeof *out_ids);
    }
    if (call == c->fail_at) {
        switch (c->bad) {
        case BAD_NAN: out_logp[0] = NAN; break;
        case BAD_POSITIVE: out_logp[0] = 0.5f; break;
        case BAD_NEG_ID: out_ids[n_rows * k - 1] = -3; break;
        case BAD_ASCENDING:
            if (k > 1) out_logp[k - 1] = out_logp[0] + 0.25f;
            if (k > 1 && out_logp[k - 1] > 0.0f) {
                out_logp[k - 1] = 0.0f;
                out_logp[0] = -1.0f;
            }
            break;
        case BAD_UNWRITTEN:
            for (int64_t i = 0; i < n_rows * k; i++) out_logp[i] = -1.0f;
            out_logp[n_rows * k - 1] = NAN; /* what the builder pre-fills: "not written" */
            break;
        default: break;
        }
    }
    return MS_OK;
}

/* ---- naive reference: the history as the notes enumerate it ---------------------------------- */

typedef struct {
    int32_t token;
    int32_t parent; /* history index, −1 = root */
    float s;
} nv_entry;

static const nv_entry *g_nv; /* for the qsort comparator */
static int nv_by_score(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g_nv[x].s != g_nv[y].s) return g_nv[x].s > g_nv[y].s ? -1 : 1;
    return x < y ? -1 : x > y;
}
static int nv_by_index(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t nv_path(const nv_entry *e, int32_t root, int32_t h, int32_t *path) {
    int32_t rev[128];
    int64_t n = 0;
    for (int32_t x = h; x >= 0; x = e[x].parent) rev[n++] = e[x].token;
    path[0] = root;
    for (int64_t i = 0; i < n; i++) path[1 + i] = rev[n - 1 - i];
    return n + 1;
}

/* Returns the number of history entries (K + depth·K²); fills *out. */
static int64_t naive_tree(const dist_cfg *d, int32_t root, int64_t K, int64_t depth, int64_t total, ms_tree *out) {
    int64_t H = K + depth * K * K;
    nv_entry *e = calloc((size_t)H, sizeof *e);
    int32_t *idx = calloc((size_t)H, sizeof *idx);
    int32_t beam[MS_TREE_MAX_K], ids[MS_TREE_MAX_K], path[128];
    float lp[MS_TREE_MAX_K];
    if (!e || !idx) abort();
    path[0] = root;
    dist_topk(d, path, 1, K, ids, lp);
    for (int64_t j = 0; j < K; j++) {
        e[j] = (nv_entry){ids[j], -1, lp[j]};
        beam[j] = (int32_t)j;
    }
    g_nv = e;
    for (int64_t i = 1; i <= depth; i++) {
        int64_t base = K + (i - 1) * K * K;
        for (int64_t r = 0; r < K; r++) {
            int64_t len = nv_path(e, root, beam[r], path);
            dist_topk(d, path, len, K, ids, lp);
            for (int64_t j = 0; j < K; j++) e[base + r * K + j] = (nv_entry){ids[j], beam[r], e[beam[r]].s + lp[j]};
        }
        for (int64_t q = 0; q < K * K; q++) idx[q] = (int32_t)(base + q);
        qsort(idx, (size_t)(K * K), sizeof *idx, nv_by_score);
        for (int64_t r = 0; r < K; r++) beam[r] = idx[r];
    }
    for (int64_t q = 0; q < H; q++) idx[q] = (int32_t)q;
    qsort(idx, (size_t)H, sizeof *idx, nv_by_score);
    int64_t m = total - 1 < H ? total - 1 : H;
    qsort(idx, (size_t)m, sizeof *idx, nv_by_index);
    out->n = 1 + m;
    out->token[0] = root;
    out->parent[0] = -1;
    out->depth[0] = 0;
    out->score[0] = 0.0f;
    for (int64_t i = 0; i < m; i++) {
        const nv_entry *x = &e[idx[i]];
        int32_t pn = 0;
        if (x->parent >= 0) { /* searchsorted, as SB does */
            pn = -1;
            for (int64_t q = 0; q < m; q++)
                if (idx[q] == x->parent) pn = (int32_t)(q + 1);
            CHECK(pn > 0, "naive: parent of history %d not selected (closure broken)", idx[i]);
        }
        out->token[1 + i] = x->token;
        out->parent[1 + i] = pn;
        out->depth[1 + i] = (int32_t)nv_path(e, root, idx[i], path) - 1;
        out->score[1 + i] = x->s;
    }
    /* Masks by walking to the root (not by OR-ing the parent's). */
    for (int64_t i = 0; i < out->n; i++) {
        uint64_t mk = 0;
        for (int32_t a = (int32_t)i; a >= 0; a = a == 0 ? -1 : out->parent[a]) {
            if (a < 0 || a >= out->n) break;
            mk |= UINT64_C(1) << a;
        }
        out->mask[i] = mk;
    }
    free(e);
    free(idx);
    return H;
}

static void naive_chain(const dist_cfg *d, int32_t root, int64_t depth, ms_tree *out) {
    int32_t path[MS_TREE_MAX + 2], id;
    float lp;
    path[0] = root;
    out->n = depth + 2;
    out->token[0] = root;
    out->parent[0] = -1;
    out->depth[0] = 0;
    out->mask[0] = 1;
    out->score[0] = 0.0f;
    for (int64_t i = 1; i < out->n; i++) {
        dist_topk(d, path, i, 1, &id, &lp);
        path[i] = id;
        out->token[i] = id;
        out->parent[i] = (int32_t)(i - 1);
        out->depth[i] = (int32_t)i;
        out->mask[i] = out->mask[i - 1] | (UINT64_C(1) << i);
        out->score[i] = out->score[i - 1] + lp;
    }
}

/* ---- comparisons and properties -------------------------------------------------------------- */

static void tree_same(const ms_tree *a, const ms_tree *b, const char *what) {
    CHECK(a->n == b->n, "%s: n %lld vs naive %lld", what, (long long)a->n, (long long)b->n);
    if (a->n != b->n) return;
    for (int64_t i = 0; i < a->n; i++) {
        int same = a->token[i] == b->token[i] && a->parent[i] == b->parent[i] && a->depth[i] == b->depth[i] &&
                   a->mask[i] == b->mask[i] && a->score[i] == b->score[i];
        CHECK(same, "%s: node %lld: tok %d/%d parent %d/%d depth %d/%d mask %#llx/%#llx s %g/%g", what, (long long)i,
              a->token[i], b->token[i], a->parent[i], b->parent[i], a->depth[i], b->depth[i],
              (unsigned long long)a->mask[i], (unsigned long long)b->mask[i], (double)a->score[i], (double)b->score[i]);
        if (!same) return;
    }
}

static void tree_props(const ms_tree *t, const dist_cfg *d, const cb_ctx *c, int64_t K, int64_t depth,
                       int64_t n_expect, const char *what) {
    CHECK(t->n == n_expect, "%s: n %lld, expected %lld", what, (long long)t->n, (long long)n_expect);
    CHECK(ms_tree_validate(t) == MS_OK, "%s: ms_tree_validate", what);
    CHECK(t->token[0] == c->root && t->parent[0] == -1 && t->depth[0] == 0 && t->mask[0] == 1 && t->score[0] == 0.0f,
          "%s: root node", what);
    for (int64_t i = 1; i < t->n; i++) {
        int32_t p = t->parent[i];
        CHECK(p >= 0 && p < i, "%s: node %lld parent %d not before it", what, (long long)i, p);
        if (!(p >= 0 && p < i)) return;
        CHECK(t->depth[i] == t->depth[p] + 1 && t->depth[i] <= depth + 1, "%s: node %lld depth %d", what,
              (long long)i, t->depth[i]);
        CHECK(t->score[i] <= t->score[p], "%s: node %lld score %g above parent %g", what, (long long)i,
              (double)t->score[i], (double)t->score[p]);
        /* Mask = exactly the ancestors-or-self, by walking the parents. */
        uint64_t want = 0;
        for (int64_t a = i; a > 0; a = t->parent[a]) want |= UINT64_C(1) << a;
        want |= 1;
        CHECK(t->mask[i] == want, "%s: node %lld mask %#llx, expected %#llx", what, (long long)i,
              (unsigned long long)t->mask[i], (unsigned long long)want);
        /* The token is one of the K best children of its parent's path, with s = s_parent + logp. */
        int32_t path[MS_TREE_MAX + 2], ids[MS_TREE_MAX_K];
        float lp[MS_TREE_MAX_K];
        int64_t len = 0;
        int32_t rev[MS_TREE_MAX];
        for (int64_t a = p; a > 0; a = t->parent[a]) rev[len++] = t->token[a];
        path[0] = t->token[0];
        for (int64_t q = 0; q < len; q++) path[1 + q] = rev[len - 1 - q];
        dist_topk(d, path, len + 1, K, ids, lp);
        int found = 0;
        for (int64_t j = 0; j < K; j++)
            if (ids[j] == t->token[i]) found = t->score[i] == t->score[p] + lp[j];
        CHECK(found, "%s: node %lld token %d is not a top-%lld child of node %d with s = s_parent + logp", what,
              (long long)i, t->token[i], (long long)K, p);
        if (p == 0) {
            int in_root = 0;
            for (int64_t j = 0; j < K; j++) in_root |= c->root_ids[j] == t->token[i];
            CHECK(in_root, "%s: root child %d not in root_ids", what, t->token[i]);
        }
        for (int64_t q = 1; q < i; q++)
            CHECK(!(t->parent[q] == p && t->token[q] == t->token[i]), "%s: siblings %lld and %lld share token %d", what,
                  (long long)q, (long long)i, t->token[i]);
    }
    /* C_draft: distinct non-root ids in order of first occurrence, checked with a seen-table. */
    int32_t ids[MS_TREE_MAX], want[MS_TREE_MAX];
    int64_t m = ms_tree_distinct_ids(t, ids), mw = 0;
    char seen[256] = {0};
    for (int64_t i = 1; i < t->n; i++)
        if (t->token[i] < 256 && !seen[t->token[i]]) {
            seen[t->token[i]] = 1;
            want[mw++] = t->token[i];
        }
    CHECK(m == mw && memcmp(ids, want, (size_t)m * sizeof *ids) == 0, "%s: distinct ids %lld vs %lld", what,
          (long long)m, (long long)mw);
}

/* t against the naive build of the same depth (the tree the builder must
 * make after `depth` passes), then the structural properties. */
static void check_naive(const ms_tree *t, const dist_cfg *d, const cb_ctx *c, int32_t root, int64_t K, int64_t depth,
                        int64_t total, bool chain, const char *what) {
    ms_tree ref;
    int64_t n_expect;
    if (chain) {
        naive_chain(d, root, depth, &ref);
        n_expect = depth + 2;
    } else {
        int64_t H = naive_tree(d, root, K, depth, total, &ref);
        n_expect = 1 + (total - 1 < H ? total - 1 : H);
    }
    tree_same(t, &ref, what);
    tree_props(t, d, c, chain ? 1 : K, depth, n_expect, what);
}

/* One build + naive + properties. Returns the number of history entries. */
static void run_case(dist_cfg d, int32_t root, int64_t K, int64_t depth, int64_t total, bool chain) {
    char what[160];
    snprintf(what, sizeof what, "%s V=%lld seed=%llu K=%lld depth=%lld total=%lld%s", kind_name[d.kind],
             (long long)d.V, (unsigned long long)d.seed, (long long)K, (long long)depth, (long long)total,
             chain ? " chain" : "");
    ms_tree_params p = {.top_k = K, .depth = depth, .total = total, .chain = chain};
    cb_ctx c;
    cb_init2(&c, d, root, K, chain ? 1 : K); /* chain mode: top_k is unused, root_ids[0] is the first token */
    ms_tree t;
    memset(&t, 0xa5, sizeof t);
    ms_status st = ms_tree_build(&p, root, c.root_ids, c.root_logp, cb_expand, &c, &t);
    CHECK(st == MS_OK, "%s: status %d", what, st);
    if (st != MS_OK) return;
    CHECK(c.calls == depth, "%s: %lld callback calls", what, (long long)c.calls);
    CHECK(c.n_rows == (chain ? 1 : K) * depth, "%s: %lld rows submitted", what, (long long)c.n_rows);
    check_naive(&t, &d, &c, root, K, depth, total, chain, what);
}

/* ---- confidence stop (p_min) ------------------------------------------------------------------- */

static int64_t g_pmin_cut, g_pmin_full; /* cases where p_min stopped early / let every pass run */

/* The builder with p_min must equal the p_min = 0 reference built to the depth
 * where drafting should stop: before pass δ+1 (δ = 0..depth-1), chain — the
 * level-(δ+1) token's own probability from the draft (dist_topk along the
 * naive chain); tree — the best cumulative probability among the level-(δ+1)
 * candidates of the full naive history of depth δ (total 64 keeps all of it:
 * callers keep K + δK² ≤ 63). The first δ where that is below p_min is the
 * effective depth; the callback must run exactly that often. */
static void run_pmin_case(dist_cfg d, int32_t root, int64_t K, int64_t depth, int64_t total, bool chain, float p_min) {
    char what[192];
    snprintf(what, sizeof what, "p_min %g: %s V=%lld seed=%llu K=%lld depth=%lld total=%lld%s", (double)p_min,
             kind_name[d.kind], (long long)d.V, (unsigned long long)d.seed, (long long)K, (long long)depth,
             (long long)total, chain ? " chain" : "");
    int64_t eff = depth;
    for (int64_t delta = 0; delta < depth && eff == depth; delta++) {
        ms_tree full;
        double best = -INFINITY;
        if (chain) {
            naive_chain(&d, root, delta, &full); /* tokens of levels 1..delta+1 */
            int32_t path[MS_TREE_MAX + 2], id;
            float lp;
            for (int64_t i = 0; i <= delta; i++) path[i] = full.token[i];
            dist_topk(&d, path, delta + 1, 1, &id, &lp); /* the level-(delta+1) token given its parent */
            CHECK(id == full.token[delta + 1], "%s: naive chain token", what);
            best = lp;
        } else {
            int64_t H = naive_tree(&d, root, K, delta, MS_TREE_MAX, &full);
            CHECK(H <= MS_TREE_MAX - 1, "%s: history %lld does not fit the reference", what, (long long)H);
            for (int64_t i = 1; i < full.n; i++)
                if (full.depth[i] == delta + 1 && full.score[i] > best) best = full.score[i];
        }
        if (exp(best) < (double)p_min) eff = delta;
    }
    if (eff < depth) g_pmin_cut++;
    else if (depth > 0) g_pmin_full++;

    ms_tree_params p = {.top_k = K, .depth = depth, .total = total, .chain = chain, .p_min = p_min};
    cb_ctx c;
    cb_init2(&c, d, root, K, chain ? 1 : K);
    ms_tree t;
    memset(&t, 0xa5, sizeof t);
    ms_status st = ms_tree_build(&p, root, c.root_ids, c.root_logp, cb_expand, &c, &t);
    CHECK(st == MS_OK, "%s: status %d", what, st);
    if (st != MS_OK) return;
    CHECK(c.calls == eff, "%s: %lld callback calls, expected %lld", what, (long long)c.calls, (long long)eff);
    check_naive(&t, &d, &c, root, K, eff, total, chain, what);
    /* p_min > 1: no pass at all, the level-1 candidates only (chain: one token). */
    if (p_min > 1.0f) CHECK(c.calls == 0 && t.n == 1 + (chain ? 1 : (total - 1 < K ? total - 1 : K)),
                            "%s: %lld calls, %lld nodes", what, (long long)c.calls, (long long)t.n);
}

static int64_t test_pmin(void) {
    static const float p_mins[] = {0.0f, 0.07f, 0.3f, 0.45f, 0.9f, 1.01f}; /* none is 1/n: no exact ties */
    int64_t cases = 0;
    for (int kind = 0; kind < D_KINDS; kind++)
        for (size_t pi = 0; pi < sizeof p_mins / sizeof p_mins[0]; pi++)
            for (uint64_t seed = 1; seed <= 6; seed++) {
                /* peaked draws (small V) pass high thresholds sometimes, flat ones (large V) rarely */
                dist_cfg d = {kind, seed % 2 ? 4 : 40, seed * 31 + pi};
                run_pmin_case(d, (int32_t)(seed % 4), 1, (int64_t)(2 + seed), 2, true, p_mins[pi]), cases++;
                dist_cfg dt = {kind, seed % 2 ? 5 : 40, seed * 17 + pi};
                int64_t K = seed % 2 ? 2 : 3; /* K + δK² ≤ 63 for δ < 4 */
                run_pmin_case(dt, (int32_t)(seed % 5), K, 4, seed % 3 ? 12 : 40, false, p_mins[pi]), cases++;
            }
    /* The stop must have happened and also not happened: a builder that
     * ignores p_min, or stops always, fails the comparisons above. */
    CHECK(g_pmin_cut > 10 && g_pmin_full > 10, "p_min cases: %lld cut early, %lld full depth", (long long)g_pmin_cut,
          (long long)g_pmin_full);
    ms_tree_params bad = {.top_k = 1, .depth = 2, .total = 2, .chain = true, .p_min = -0.5f};
    CHECK(ms_tree_params_check(&bad) == MS_ERR_INVALID, "negative p_min accepted");
    bad.p_min = NAN;
    CHECK(ms_tree_params_check(&bad) == MS_ERR_INVALID, "NaN p_min accepted");
    bad.p_min = INFINITY;
    CHECK(ms_tree_params_check(&bad) == MS_ERR_INVALID, "infinite p_min accepted");
    return cases;
}

/* ---- hand-worked example: K=2, depth=1 ---------------------------------------------------------- */

static ms_status hand_expand(void *ctx, const int32_t *tokens, const int32_t *depth, const int32_t *parent_row,
                             const uint64_t *mask, int64_t n_rows, int64_t k, int32_t *out_ids, float *out_logp) {
    /* row 0 = token 5: children 8 (−0.25), 9 (−0.5); row 1 = token 7: children 8 (−0.125), 3 (−1). */
    CHECK(n_rows == 2 && k == 2 && tokens[0] == 5 && tokens[1] == 7, "hand: rows");
    CHECK(depth[0] == 1 && depth[1] == 1 && parent_row[0] == -1 && parent_row[1] == -1, "hand: depth/parent");
    CHECK(mask[0] == 1 && mask[1] == 2, "hand: masks %#llx %#llx", (unsigned long long)mask[0],
          (unsigned long long)mask[1]);
    static const int32_t ids[4] = {8, 9, 8, 3};
    static const float lp[4] = {-0.25f, -0.5f, -0.125f, -1.0f};
    memcpy(out_ids, ids, sizeof ids);
    memcpy(out_logp, lp, sizeof lp);
    return MS_OK;
}

static void test_hand(void) {
    const int32_t root_ids[2] = {5, 7};
    const float root_logp[2] = {-0.125f, -2.0f};
    /* History: 0:5(−0.125) 1:7(−2) 2:8(−0.375,p0) 3:9(−0.625,p0) 4:8(−2.125,p1) 5:3(−3,p1). */
    ms_tree_params p = {.top_k = 2, .depth = 1, .total = 4};
    ms_tree t;
    CHECK(ms_tree_build(&p, 100, root_ids, root_logp, hand_expand, NULL, &t) == MS_OK, "hand build");
    /* top 3: slots 0, 2, 3 → nodes 5, 8, 9 under the first. */
    const int32_t tok4[4] = {100, 5, 8, 9}, par4[4] = {-1, 0, 1, 1};
    const uint64_t mask4[4] = {1, 3, 7, 11};
    CHECK(t.n == 4, "hand n %lld", (long long)t.n);
    for (int i = 0; i < 4 && t.n == 4; i++)
        CHECK(t.token[i] == tok4[i] && t.parent[i] == par4[i] && t.mask[i] == mask4[i], "hand node %d", i);
    CHECK(t.score[2] == -0.375f && t.score[3] == -0.625f, "hand scores");

    p.total = 6; /* top 5: slots 0..4 → 5, 7, 8(p 5), 9(p 5), 8(p 7) */
    CHECK(ms_tree_build(&p, 100, root_ids, root_logp, hand_expand, NULL, &t) == MS_OK, "hand build 6");
    const int32_t tok6[6] = {100, 5, 7, 8, 9, 8}, par6[6] = {-1, 0, 0, 1, 1, 2}, dep6[6] = {0, 1, 1, 2, 2, 2};
    const uint64_t mask6[6] = {1, 3, 5, 11, 19, 37};
    CHECK(t.n == 6, "hand n %lld", (long long)t.n);
    for (int i = 0; i < 6 && t.n == 6; i++)
        CHECK(t.token[i] == tok6[i] && t.parent[i] == par6[i] && t.depth[i] == dep6[i] && t.mask[i] == mask6[i],
              "hand6 node %d", i);
    int32_t ids[8];
    int64_t m = ms_tree_distinct_ids(&t, ids);
    CHECK(m == 4 && ids[0] == 5 && ids[1] == 7 && ids[2] == 8 && ids[3] == 9, "hand distinct %lld", (long long)m);

    p.total = 64; /* more than the 6 history entries → all of them */
    CHECK(ms_tree_build(&p, 100, root_ids, root_logp, hand_expand, NULL, &t) == MS_OK && t.n == 7, "hand all");
}

/* ---- errors ------------------------------------------------------------------------------------ */

static void expect_build_fails(const ms_tree_params *p, const int32_t *ids, const float *lp, ms_tree_expand_fn f,
                               void *ctx, ms_status want, const char *what) {
    ms_tree t;
    t.n = 99;
    ms_status st = ms_tree_build(p, 3, ids, lp, f, ctx, &t);
    CHECK(st == want, "%s: status %d, expected %d", what, st, want);
    CHECK(t.n == 0, "%s: out.n %lld after failure", what, (long long)t.n);
}

static void test_errors(void) {
    /* Every rejected input logs one error line; keep the output readable. */
    ms_log_level saved = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    dist_cfg d = {D_HASH, 40, 7};
    cb_ctx c;
    cb_init(&c, d, 3, 10);
    ms_tree_params def = ms_tree_params_default();
    CHECK(def.top_k == 10 && def.depth == 5 && def.total == 60 && !def.chain, "defaults");
    CHECK(ms_tree_params_check(&def) == MS_OK, "defaults valid");

    const ms_tree_params bad[] = {
        {.top_k = 0, .depth = 5, .total = 60},   {.top_k = -1, .depth = 5, .total = 60},
        {.top_k = 17, .depth = 3, .total = 60},  {.top_k = 10, .depth = -1, .total = 60},
        {.top_k = 10, .depth = 5, .total = 1},   {.top_k = 10, .depth = 5, .total = 0},
        {.top_k = 10, .depth = 5, .total = 65},  {.top_k = 10, .depth = 7, .total = 60},
        {.top_k = 1, .depth = 65, .total = 60},  {.top_k = 16, .depth = 5, .total = 60},
        {.top_k = 2, .depth = INT64_MAX / 2, .total = 60},
        {.top_k = 1, .depth = 63, .total = 60, .chain = true},
        {.top_k = 0, .depth = 5, .total = 60, .chain = true},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(ms_tree_params_check(&bad[i]) == MS_ERR_INVALID, "bad params %zu accepted", i);
        expect_build_fails(&bad[i], c.root_ids, c.root_logp, cb_expand, &c, MS_ERR_INVALID, "bad params");
    }
    CHECK(c.calls == 0, "callback called for bad params");
    CHECK(ms_tree_params_check(NULL) == MS_ERR_INVALID, "NULL params");
    const ms_tree_params good[] = {
        {.top_k = 16, .depth = 4, .total = 64}, {.top_k = 1, .depth = 64, .total = 2},
        {.top_k = 8, .depth = 0, .total = 2},   {.top_k = 1, .depth = 62, .total = 0, .chain = true},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(ms_tree_params_check(&good[i]) == MS_OK, "good params %zu refused", i);

    expect_build_fails(NULL, c.root_ids, c.root_logp, cb_expand, &c, MS_ERR_INVALID, "NULL params");
    expect_build_fails(&def, NULL, c.root_logp, cb_expand, &c, MS_ERR_INVALID, "NULL root ids");
    expect_build_fails(&def, c.root_ids, NULL, cb_expand, &c, MS_ERR_INVALID, "NULL root logp");
    expect_build_fails(&def, c.root_ids, c.root_logp, NULL, &c, MS_ERR_INVALID, "NULL callback");
    CHECK(ms_tree_build(&def, 3, c.root_ids, c.root_logp, cb_expand, &c, NULL) == MS_ERR_INVALID, "NULL out");
    {
        ms_tree t;
        CHECK(ms_tree_build(&def, -1, c.root_ids, c.root_logp, cb_expand, &c, &t) == MS_ERR_INVALID, "neg root");
    }
    /* Bad root candidates. */
    int32_t ids[MS_TREE_MAX_K];
    float lp[MS_TREE_MAX_K];
    for (int b = 0; b < 4; b++) {
        memcpy(ids, c.root_ids, sizeof ids);
        memcpy(lp, c.root_logp, sizeof lp);
        if (b == 0) lp[3] = NAN;
        if (b == 1) lp[0] = 0.25f;
        if (b == 2) ids[9] = -5;
        if (b == 3) lp[9] = lp[0] + 0.001f;
        expect_build_fails(&def, ids, lp, cb_expand, &c, MS_ERR_INVALID, "bad root candidates");
    }
    CHECK(c.calls == 0, "callback called for bad root candidates");

    /* A failing callback at each pass: its status comes back, nothing else. */
    for (int64_t at = 0; at < def.depth; at++) {
        cb_init(&c, d, 3, 10);
        c.fail_at = at;
        c.fail_code = MS_ERR_PEER;
        expect_build_fails(&def, c.root_ids, c.root_logp, cb_expand, &c, MS_ERR_PEER, "failing callback");
        CHECK(c.calls == at + 1, "failing callback: %lld calls after failing at %lld", (long long)c.calls,
              (long long)at);
    }
    /* A callback returning garbage. */
    for (int bad_kind = BAD_NAN; bad_kind <= BAD_UNWRITTEN; bad_kind++)
        for (int64_t at = 0; at < def.depth; at += 2) {
            cb_init(&c, d, 3, 10);
            c.fail_at = at;
            c.bad = bad_kind;
            expect_build_fails(&def, c.root_ids, c.root_logp, cb_expand, &c, MS_ERR_INVALID, "bad callback output");
        }

    /* ms_tree_validate rejects corrupted trees. */
    cb_init(&c, d, 3, 10);
    ms_tree t;
    CHECK(ms_tree_build(&def, 3, c.root_ids, c.root_logp, cb_expand, &c, &t) == MS_OK, "build for validate");
    CHECK(ms_tree_validate(&t) == MS_OK, "validate good");
    for (int b = 0; b < 8; b++) {
        ms_tree u = t;
        switch (b) {
        case 0: u.n = 0; break;
        case 1: u.n = 65; break;
        case 2: u.parent[0] = 0; break;
        case 3: u.parent[20] = 20; break;
        case 4: u.depth[30] += 1; break;
        case 5: u.mask[40] ^= UINT64_C(1) << 41; break;
        case 6: u.token[7] = -2; break;
        default: u.mask[0] = 3; break;
        }
        CHECK(ms_tree_validate(&u) == MS_ERR_FORMAT, "validate corrupted %d", b);
    }
    ms_log_set_level(saved);
}

/* ---- driver ------------------------------------------------------------------------------------ */

int main(void) {
    int64_t cases = 0;
    test_hand();
    test_errors();

    /* The defaults: 10/5/60, 50 rows per round. */
    for (int kind = 0; kind < D_KINDS; kind++)
        for (uint64_t seed = 1; seed <= 8; seed++) {
            dist_cfg d = {kind, seed % 2 ? 200 : 37, seed};
            run_case(d, (int32_t)(seed * 11 % 37), 10, 5, 60, false), cases++;
        }

    /* K = 1..8, depth 1..7 (and 0), a spread of totals 2..64. */
    static const int64_t totals[] = {2, 3, 5, 11, 30, 60, 64};
    for (int kind = 0; kind < D_KINDS; kind++)
        for (int64_t K = 1; K <= 8; K++)
            for (int64_t depth = 0; depth <= 7; depth++)
                for (size_t ti = 0; ti < sizeof totals / sizeof totals[0]; ti++) {
                    int64_t V = (depth + (int64_t)ti) % 3 == 0 ? K : (depth % 2 ? 23 : 97);
                    if (V < K) V = K;
                    dist_cfg d = {kind, V, (uint64_t)(K * 1000 + depth * 10 + (int64_t)ti)};
                    run_case(d, (int32_t)((K + depth) % V), K, depth, totals[ti], false), cases++;
                }

    /* Wide beams up to the limits: K = 9..16 with K·depth ≤ 64. */
    for (int kind = 0; kind < D_KINDS; kind++)
        for (int64_t K = 9; K <= MS_TREE_MAX_K; K++)
            for (int64_t depth = 1; K * depth <= MS_TREE_MAX; depth++)
                for (int64_t total = 2; total <= 64; total += 31) {
                    dist_cfg d = {kind, K + 5 * depth, (uint64_t)(K * 77 + depth + total)};
                    run_case(d, 1, K, depth, total, false), cases++;
                }
    /* K = 1 down the full 64-row depth. */
    for (int kind = 0; kind < D_KINDS; kind++) {
        dist_cfg d = {kind, 5, 99};
        run_case(d, 2, 1, 64, 64, false), cases++;
        run_case(d, 2, 1, 64, 20, false), cases++;
    }

    /* Chain mode: depth+1 tokens, top-1 each, one row per pass; top_k/total unused. */
    for (int kind = 0; kind < D_KINDS; kind++)
        for (int64_t depth = 0; depth <= MS_TREE_MAX - 2; depth += (depth < 8 ? 1 : 9)) {
            dist_cfg d = {kind, 10 + depth % 50, (uint64_t)depth};
            run_case(d, 0, depth % 2 ? 10 : 1, depth, depth % 3 ? 60 : 2, true), cases++;
        }
    for (int kind = 0; kind < D_KINDS; kind++) {
        dist_cfg d = {kind, 31, 5};
        run_case(d, 4, 1, MS_TREE_MAX - 2, 60, true), cases++;
    }

    cases += test_pmin();

    if (g_fail) {
        fprintf(stderr, "test_tree: %d failures in %lld cases\n", g_fail, (long long)cases);
        return 1;
    }
    printf("test_tree: %lld cases ok\n", (long long)cases);
    return 0;
}
