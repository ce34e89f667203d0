/* test_model_tree.c — tree attention and KV compaction, as properties.
 *
 * (b) A random tree (≤ 64 nodes, parents before children, random branching,
 *     sometimes several roots) forwarded in ONE ms_model_forward call with
 *     pos = len + depth and mask = ancestors-or-self gives, for every node, the
 *     logits of feeding its root-to-node path one token at a time from the
 *     committed prefix (ms_model_truncate back between paths). Spot checks
 *     against the double-precision reference too.
 * (c) After the tree forward, ms_model_compact onto a root-to-leaf path, then
 *     one more decoded token, equals prefix + path + token from scratch (a
 *     fresh engine state and the reference).
 * The comparator is shown to reject the tree forwarded with a plain causal
 * mask, and a compaction onto the wrong path.
 */
#include "ms_model.h"
#include "ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4 /* comparator: max|a − b| / max(1, max|b|) */
#define MAX_NODES 64

#include "ms_check.h"

typedef struct {
    const char *name;
    const char *args;
    int64_t n_prefix, n_nodes;
} tree_case;

static const tree_case CASES[] = {
    {"llama-f32-gqa",
     "--arch llama --vocab 101 --hidden 48 --layers 2 --heads 6 --kv-heads 2 --ffn 72 --dtype f32 --seed 31", 9, 64},
    {"llama3-rope-bf16",
     "--arch llama --vocab 64 --hidden 32 --layers 2 --heads 2 --kv-heads 1 --ffn 48 --theta 500000 "
     "--rope-factor 4 --rope-low 1 --rope-high 4 --rope-orig 64 --dtype bf16 --seed 32",
     7, 40},
    {"qwen2-f32-bias-tied",
     "--arch qwen2 --vocab 97 --hidden 40 --layers 2 --heads 5 --kv-heads 1 --ffn 56 --tie 1 --seed 33", 5, 48},
    {"qwen3-bf16-hd24",
     "--arch qwen3 --vocab 89 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --head-dim 24 --ffn 64 --dtype bf16 "
     "--seed 34",
     11, 33},
    {"qwen2-vocab151936",
     "--arch qwen2 --vocab 151936 --hidden 16 --layers 1 --heads 2 --ffn 32 --tie 1 --dtype bf16 --seed 35", 4, 12},
};

typedef struct {
    int64_t n;
    int32_t parent[MAX_NODES], depth[MAX_NODES], tok[MAX_NODES];
    uint64_t mask[MAX_NODES]; /* ancestors-or-self */
    bool leaf[MAX_NODES];
} tree;

/* Random branching: half the nodes extend the previous node (deep chains),
 * the rest pick any earlier node; now and then a new root. */
static void make_tree(ms_rng *r, tree *t, int64_t n, int64_t vocab) {
    t->n = n;
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = ms_rng_u64(r) % 100;
        int32_t p = i == 0 || u < 4 ? -1 : u < 54 ? (int32_t)(i - 1) : (int32_t)(ms_rng_u64(r) % (uint64_t)i);
        t->parent[i] = p;
        t->depth[i] = p < 0 ? 0 : t->depth[p] + 1;
        t->mask[i] = ((uint64_t)1 << i) | (p < 0 ? 0 : t->mask[p]);
        t->tok[i] = (int32_t)(ms_rng_u64(r) % (uint64_t)vocab);
        t->leaf[i] = true;
        if (p >= 0) t->leaf[p] = false;
    }
}

/* Root-to-node path as node indices (increasing); returns its length. */
static int64_t path_of(const tree *t, int64_t node, int64_t *rows) {
    int64_t k = t->depth[node] + 1;
    for (int64_t i = node, j = k - 1; i >= 0; i = t->parent[i], j--) rows[j] = i;
    return k;
}

static void run_case(const char *root, const tree_case *tc, ms_rng *rng) {
    char dir[512];
    ref_model *ref = NULL;
    ms_model *m = NULL;
    if (ref_make_model(root, tc->name, tc->args, dir, sizeof dir) != MS_OK || ref_model_load(dir, &ref) != MS_OK) {
        CHECK(0, "%s: cannot make or load the model", tc->name);
        return;
    }
    ms_model_opts opts = {.max_ctx = 160, .max_batch = 64};
    if (ms_model_load(dir, &opts, &m) != MS_OK) {
        CHECK(0, "%s: engine cannot load", tc->name);
        ref_model_free(&ref);
        return;
    }
    int64_t V = ms_model_vocab(m), P = tc->n_prefix, N = tc->n_nodes;
    int32_t prefix[16], seq[16 + MAX_NODES + 2], pos[MAX_NODES];
    ref_random_tokens(rng, prefix, P, V);
    tree t;
    make_tree(rng, &t, N, V);
    for (int64_t i = 0; i < N; i++) pos[i] = (int32_t)(P + t.depth[i]);
    float *tree_lg = malloc((size_t)(N * V) * sizeof(float)), *lg = malloc((size_t)V * sizeof(float));
    float *causal_lg = malloc((size_t)(N * V) * sizeof(float));
    double *want = malloc((size_t)V * sizeof(double));
    int64_t rows[MAX_NODES];
    int32_t max_depth = 0, n_roots = 0;
    for (int64_t i = 0; i < N; i++) {
        if (t.depth[i] > max_depth) max_depth = t.depth[i];
        n_roots += t.parent[i] < 0;
    }
    printf("%s: prefix %lld, tree of %lld nodes, %d root(s), max depth %d\n", tc->name, (long long)P, (long long)N,
           n_roots, max_depth);

    /* (b) the whole tree in one call. */
    CHECK(ms_model_prefill(m, prefix, P, NULL) == MS_OK, "prefill");
    CHECK(ms_model_forward(m, t.tok, N, pos, t.mask, MS_LOGITS_ALL, tree_lg) == MS_OK, "tree forward");
    CHECK(ms_model_len(m) == P + N, "len %lld after the tree, want %lld", (long long)ms_model_len(m),
          (long long)(P + N));

    double err_path = 0, err_ref = 0;
    int64_t n_ref = 0;
    for (int64_t node = 0; node < N; node++) {
        int64_t k = path_of(&t, node, rows);
        CHECK(ms_model_truncate(m, P) == MS_OK, "truncate");
        for (int64_t j = 0; j < k; j++)
            CHECK(ms_model_forward(m, &t.tok[rows[j]], 1, NULL, NULL, MS_LOGITS_LAST, lg) == MS_OK, "path step");
        err_path = fmax(err_path, ref_logits_err_f(tree_lg + node * V, lg, V));
        if (node % 5 == 0 || node == N - 1) {
            memcpy(seq, prefix, (size_t)P * sizeof(int32_t));
            for (int64_t j = 0; j < k; j++) seq[P + j] = t.tok[rows[j]];
            CHECK(ref_forward(ref, seq, P + k, false, want) == MS_OK, "reference");
            err_ref = fmax(err_ref, ref_logits_err(tree_lg + node * V, want, V));
            n_ref++;
        }
    }
    printf("  tree vs path-by-path: err %.3g over %lld nodes; vs reference: err %.3g over %lld nodes (tol %g)\n",
           err_path, (long long)N, err_ref, (long long)n_ref, TOL);
    CHECK(err_path <= TOL, "%s: tree logits differ from path-by-path (%g)", tc->name, err_path);
    CHECK(err_ref <= TOL, "%s: tree logits differ from the reference (%g)", tc->name, err_ref);

    /* Negative: the same tokens with the default causal mask and positions
     * must differ at some node whose path is not the batch prefix. */
    CHECK(ms_model_truncate(m, P) == MS_OK, "truncate");
    CHECK(ms_model_forward(m, t.tok, N, NULL, NULL, MS_LOGITS_ALL, causal_lg) == MS_OK, "causal forward");
    double err_causal = 0;
    for (int64_t node = 0; node < N; node++)
        err_causal = fmax(err_causal, ref_logits_err_f(causal_lg + node * V, tree_lg + node * V, V));
    printf("  negative: same batch under a causal mask → err %.3g (must be > %g)\n", err_causal, TOL);
    CHECK(err_causal > TOL, "%s: the tree mask makes no difference", tc->name);

    /* (c) compaction onto root-to-leaf paths: the deepest leaf, the last
     * leaf and a random leaf; each with the tree forwarded afresh. */
    int64_t leaves[3] = {-1, -1, -1}, n_leaves = 0;
    int64_t deepest = 0, last = 0;
    for (int64_t i = 0; i < N; i++) {
        if (!t.leaf[i]) continue;
        if (t.depth[i] > t.depth[deepest] || !t.leaf[deepest]) deepest = i;
        last = i;
        n_leaves++;
    }
    int64_t pick = (int64_t)(ms_rng_u64(rng) % (uint64_t)n_leaves);
    for (int64_t i = 0; i < N; i++)
        if (t.leaf[i] && pick-- == 0) leaves[2] = i;
    leaves[0] = deepest;
    leaves[1] = last;
    double err_compact = 0, err_fresh = 0, err_wrong = INFINITY;
    for (int li = 0; li < 3; li++) {
        int64_t leaf = leaves[li], k = path_of(&t, leaf, rows);
        int32_t next = (int32_t)(ms_rng_u64(rng) % (uint64_t)V);
        CHECK(ms_model_truncate(m, P) == MS_OK, "truncate");
        CHECK(ms_model_forward(m, t.tok, N, pos, t.mask, MS_LOGITS_NONE, NULL) == MS_OK, "tree forward");
        CHECK(ms_model_compact(m, P, rows, k) == MS_OK, "compact");
        CHECK(ms_model_len(m) == P + k, "len %lld after compaction, want %lld", (long long)ms_model_len(m),
              (long long)(P + k));
        CHECK(ms_model_forward(m, &next, 1, NULL, NULL, MS_LOGITS_LAST, lg) == MS_OK, "decode after compaction");

        memcpy(seq, prefix, (size_t)P * sizeof(int32_t));
        for (int64_t j = 0; j < k; j++) seq[P + j] = t.tok[rows[j]];
        seq[P + k] = next;
        CHECK(ref_forward(ref, seq, P + k + 1, false, want) == MS_OK, "reference");
        err_compact = fmax(err_compact, ref_logits_err(lg, want, V));

        float *fresh = malloc((size_t)V * sizeof(float));
        ms_model_reset(m);
        CHECK(ms_model_prefill(m, seq, P + k + 1, fresh) == MS_OK, "fresh prefill");
        err_fresh = fmax(err_fresh, ref_logits_err_f(lg, fresh, V));

        /* Negative: compacting onto the first k rows of the batch instead
         * (wrong unless the path already is that prefix). */
        bool contiguous = true;
        for (int64_t j = 0; j < k; j++) contiguous &= rows[j] == j;
        if (!contiguous) {
            int64_t wrong[MAX_NODES];
            for (int64_t j = 0; j < k; j++) wrong[j] = j;
            CHECK(ms_model_truncate(m, P) == MS_OK, "truncate");
            CHECK(ms_model_forward(m, t.tok, N, pos, t.mask, MS_LOGITS_NONE, NULL) == MS_OK, "tree forward");
            CHECK(ms_model_compact(m, P, wrong, k) == MS_OK, "compact (wrong rows)");
            CHECK(ms_model_forward(m, &next, 1, NULL, NULL, MS_LOGITS_LAST, fresh) == MS_OK, "decode");
            double w = ref_logits_err(fresh, want, V);
            err_wrong = isinf(err_wrong) ? w : fmax(err_wrong, w);
        }
        free(fresh);
        ms_model_reset(m);
        CHECK(ms_model_prefill(m, prefix, P, NULL) == MS_OK, "prefill");
        printf("  compaction onto the path to node %lld (%lld rows%s)\n", (long long)leaf, (long long)k,
               contiguous ? ", contiguous" : "");
    }
    printf("  compaction + 1 token vs reference: err %.3g, vs fresh engine: err %.3g (tol %g)\n", err_compact,
           err_fresh, TOL);
    CHECK(err_compact <= TOL, "%s: compacted cache differs from recompute (%g)", tc->name, err_compact);
    CHECK(err_fresh <= TOL, "%s: compacted cache differs from a fresh engine (%g)", tc->name, err_fresh);
    if (!isinf(err_wrong)) {
        printf("  negative: compaction onto the wrong rows → err %.3g (must be > %g)\n", err_wrong, TOL);
        CHECK(err_wrong > TOL, "%s: compaction onto the wrong rows not detected", tc->name);
    }

    /* Bad compaction requests are refused. */
    CHECK(ms_model_truncate(m, P) == MS_OK, "truncate");
    CHECK(ms_model_forward(m, t.tok, N, pos, t.mask, MS_LOGITS_NONE, NULL) == MS_OK, "tree forward");
    int64_t dec[2] = {3, 1}, past[1] = {N};
    CHECK(ms_model_compact(m, P, dec, 2) < 0, "decreasing rows accepted");
    CHECK(ms_model_compact(m, P, past, 1) < 0, "row past len accepted");
    CHECK(ms_model_len(m) == P + N, "refused compaction changed len");

    free(tree_lg);
    free(causal_lg);
    free(lg);
    free(want);
    ms_model_free(&m);
    ref_model_free(&ref);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char root[256];
    if (!ms_test_tmpdir("ms-model-test", root, sizeof root)) {
        fprintf(stderr, "cannot make a temporary folder\n");
        return 1;
    }
    ms_rng rng;
    ms_rng_seed(&rng, 4321);
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) run_case(root, &CASES[ci], &rng);
    ms_test_rmtree(root);
    if (g_fail) {
        fprintf(stderr, "%d check(s) failed\n", g_fail);
        return 1;
    }
    return 0;
}
