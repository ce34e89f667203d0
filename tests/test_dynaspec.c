/* test_dynaspec — the C side of DynaSpec (draft-node/ms_dynaspec.c) against
 * the training tool (tools/vocab/dynaspec_train.py) and a naive re-computation.
 *
 *   test_dynaspec ARTEFACT MODEL DUMP     checks below; exit 0 / 1
 *   test_dynaspec --load ARTEFACT MODEL   load only: exit 0 loaded, 1 refused
 *                                         (tests/test_dynaspec.py checks the message)
 *
 * DUMP is the trainer's --dump-forward file: router inputs of held-out
 * recorded positions and the outputs of its float64 numpy forward.
 *  1. CSR: every id is a member of exactly its cluster_of cluster (read from
 *     the artefact here with ms_gguf, not through the loader), ascending.
 *  2. The router input built by the pick path (raw embedding row + prev)
 *     equals the dump's z; ms_dynaspec_forward equals numpy within 1e-4
 *     relative to max(1, |s|).
 *  3. ms_dynaspec_pick on levels of 1, 3 and all dump rows at depths 0..3
 *     equals a naive pick: k_c from the budget formula written out here, each
 *     row's top-k_c clusters by the dump's scores (repeated argmax, ties to
 *     the lower cluster), then every id whose cluster is marked, cluster by
 *     cluster, ids ascending; n_ids ≤ ms_vsel.max_ids.
 *  4. A capacity one short of the union is refused with MS_ERR_RANGE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"
#include "ms_dynaspec.h"
#include "ms_gguf.h"

int g_fail; /* ms_check.h (test_fs.c is not linked: this binary is driven by test_dynaspec.py) */

typedef struct {
    uint32_t n, d, M;
    int32_t *tok;
    float *prev, *z, *scores;
} dump;

static bool read_dump(const char *path, dump *D) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char magic[8];
    uint32_t h[4];
    bool ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, "MSDSFWD1", 8) && fread(h, 4, 4, f) == 4;
    if (ok) {
        D->n = h[0], D->d = h[1], D->M = h[2];
        D->tok = malloc((size_t)D->n * 4);
        D->prev = malloc((size_t)D->n * D->d * 4);
        D->z = malloc((size_t)D->n * 2 * D->d * 4);
        D->scores = malloc((size_t)D->n * D->M * 4);
        ok = D->tok && D->prev && D->z && D->scores && fread(D->tok, 4, D->n, f) == D->n &&
             fread(D->prev, 4, (size_t)D->n * D->d, f) == (size_t)D->n * D->d &&
             fread(D->z, 4, (size_t)D->n * 2 * D->d, f) == (size_t)D->n * 2 * D->d &&
             fread(D->scores, 4, (size_t)D->n * D->M, f) == (size_t)D->n * D->M;
    }
    fclose(f);
    return ok;
}

/* k_c(depth) = min(M, max(k_min, floor(k_c0 · r^depth))) — ms_dynaspec.h, written out again */
static int64_t naive_k(const ms_dynaspec_budget *b, int64_t depth, int64_t M) {
    double k = (double)b->k_c0;
    for (int64_t i = 0; i < depth; i++) k *= b->decay;
    int64_t kc = (int64_t)floor(k);
    if (kc < b->k_min) kc = b->k_min;
    return kc > M ? M : kc;
}

/* Rows r0..r0+n of the dump: the union as described at the top. */
static int64_t naive_pick(const dump *D, const int32_t *cluster_of, int64_t V, int64_t r0, int64_t n, int64_t k,
                          int32_t *ids) {
    uint8_t *mark = calloc(D->M, 1), *used = malloc(D->M);
    for (int64_t r = r0; r < r0 + n; r++) {
        memset(used, 0, D->M);
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t c = 0; c < D->M; c++)
                if (!used[c] && (best < 0 || D->scores[r * D->M + c] > D->scores[r * D->M + best])) best = c;
            used[best] = mark[best] = 1;
        }
    }
    int64_t m = 0;
    for (int64_t c = 0; c < D->M; c++)
        if (mark[c])
            for (int64_t id = 0; id < V; id++)
                if (cluster_of[id] == c) ids[m++] = (int32_t)id;
    free(mark);
    free(used);
    return m;
}

/* The model file's token_embd.weight as the loader's embedding view (the
 * draft passes its model's own; here the GGUF is opened for it). */
static ms_gguf *g_model;
static bool model_embd(const char *path, ms_qweight *out) {
    const ms_gguf_tensor_info *t;
    if (ms_gguf_open(path, &g_model) < 0 || ms_gguf_get_tensor(g_model, "token_embd.weight", 0, NULL, NULL, 0, &t) < 0 ||
        t->ndim != 2)
        return false;
    *out = ms_qweight_view(t->dtype, t->data, t->shape[0], t->shape[1]);
    return true;
}

int main(int argc, char **argv) {
    ms_log_set_level(MS_LOG_WARN);
    ms_qweight emb;
    ms_dynaspec_budget budget = {.k_c0 = 3, .decay = 0.6, .k_min = 1};
    if (argc == 4 && !strcmp(argv[1], "--load")) {
        ms_dynaspec *ds = NULL;
        ms_status s = model_embd(argv[3], &emb) ? ms_dynaspec_load(argv[2], argv[3], &emb, &budget, 4, &ds)
                                                : MS_ERR_FORMAT;
        printf("load: %s\n", ms_status_str(s));
        ms_dynaspec_free(&ds);
        ms_gguf_close(&g_model);
        return s == MS_OK ? 0 : 1;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: test_dynaspec ARTEFACT MODEL DUMP | --load ARTEFACT MODEL\n");
        return 2;
    }
    dump D = {0};
    if (!read_dump(argv[3], &D)) {
        fprintf(stderr, "FAIL: cannot read the dump %s\n", argv[3]);
        return 1;
    }
    ms_dynaspec *ds = NULL;
    if (!model_embd(argv[2], &emb) || ms_dynaspec_load(argv[1], argv[2], &emb, &budget, D.n, &ds) < 0) {
        fprintf(stderr, "FAIL: the artefact %s was refused for %s\n", argv[1], argv[2]);
        return 1;
    }
    const int64_t V = ms_dynaspec_vocab(ds), d = ms_dynaspec_hidden(ds), M = ms_dynaspec_clusters(ds);
    CHECK(d == D.d && M == D.M, "sizes: d %lld M %lld, dump d %u M %u", (long long)d, (long long)M, D.d, D.M);

    /* 1. cluster_of read independently, and the member lists */
    ms_gguf *g = NULL;
    MS_ASSERT(ms_gguf_open(argv[1], &g) == MS_OK);
    const ms_gguf_tensor_info *ti = ms_gguf_find_tensor(g, "dynaspec.cluster_of");
    MS_ASSERT(ti && ti->nbytes == (size_t)V * 4);
    int32_t *cluster_of = malloc((size_t)V * 4);
    memcpy(cluster_of, ti->data, (size_t)V * 4);
    ms_gguf_close(&g);
    int64_t total = 0;
    for (int32_t c = 0; c < M; c++) {
        int64_t n;
        const int32_t *mem = ms_dynaspec_members(ds, c, &n);
        total += n;
        for (int64_t i = 0; i < n; i++) {
            CHECK(cluster_of[mem[i]] == c, "id %d listed in cluster %d, cluster_of %d", mem[i], c, cluster_of[mem[i]]);
            CHECK(i == 0 || mem[i] > mem[i - 1], "cluster %d not ascending at %lld", c, (long long)i);
        }
    }
    CHECK(total == V, "clusters hold %lld ids of %lld", (long long)total, (long long)V);
    for (int64_t id = 0; id < V; id++)
        CHECK(ms_dynaspec_cluster_of(ds, (int32_t)id) == cluster_of[id], "cluster_of[%lld]", (long long)id);

    /* 2. forward == numpy */
    float *scores = malloc((size_t)D.n * M * 4);
    ms_dynaspec_forward(ds, D.z, D.n, scores);
    double worst = 0;
    for (int64_t i = 0; i < (int64_t)D.n * M; i++) {
        double e = fabs((double)scores[i] - D.scores[i]) / fmax(1.0, fabs((double)D.scores[i]));
        ms_check_worst(&worst, e);
    }
    printf("router forward: %u rows x %lld clusters, worst relative error %.3g\n", D.n, (long long)M, worst);
    CHECK(worst <= 1e-4, "router forward differs from numpy: %.3g relative", worst);

    /* 3. pick == naive (the pick also rebuilds z from the embedding table) */
    ms_vsel vs;
    ms_dynaspec_vsel(ds, &vs);
    CHECK(!strcmp(vs.name, "dynaspec") && vs.ctx == ds && vs.pick == ms_dynaspec_pick, "ms_vsel fields");
    int32_t *got = malloc((size_t)V * 4), *want = malloc((size_t)V * 4);
    const int64_t sizes[] = {1, 3, D.n};
    int64_t checks = 0;
    for (int si = 0; si < 3; si++) {
        int64_t n = sizes[si];
        for (int64_t r0 = 0; r0 + n <= D.n; r0 += n) {
            for (int64_t depth = 0; depth < 4; depth++) {
                int64_t k = naive_k(&budget, depth, M);
                CHECK(ms_dynaspec_k(ds, depth) == k, "k_c(%lld) = %lld, want %lld", (long long)depth,
                      (long long)ms_dynaspec_k(ds, depth), (long long)k);
                int64_t nw = naive_pick(&D, cluster_of, V, r0, n, k, want), ng = -1;
                ms_status s = vs.pick(vs.ctx, NULL, D.prev + r0 * d, D.tok + r0, n, depth, got, V, &ng);
                CHECK(s == MS_OK && ng == nw && !memcmp(got, want, (size_t)nw * 4),
                      "pick rows %lld..%lld depth %lld: %lld ids (status %d), naive %lld", (long long)r0,
                      (long long)(r0 + n), (long long)depth, (long long)ng, s, (long long)nw);
                CHECK(ng <= vs.max_ids, "n_ids %lld > max_ids %lld", (long long)ng, (long long)vs.max_ids);
                /* 4. one id short of the union: refused */
                if (depth == 0 && nw > 0) {
                    ms_log_set_level(MS_LOG_OFF);
                    s = vs.pick(vs.ctx, NULL, D.prev + r0 * d, D.tok + r0, n, depth, got, nw - 1, &ng);
                    ms_log_set_level(MS_LOG_WARN);
                    CHECK(s == MS_ERR_RANGE, "capacity %lld below the union: status %d", (long long)(nw - 1), s);
                }
                checks++;
            }
        }
    }
    printf("pick: %lld levels checked against the naive union\n", (long long)checks);
    vs.free(vs.ctx);
    free(got);
    free(want);
    free(scores);
    free(cluster_of);
    free(D.tok);
    free(D.prev);
    free(D.z);
    free(D.scores);
    ms_gguf_close(&g_model);
    printf("%s\n", g_fail ? "FAILED" : "ok");
    return g_fail ? 1 : 0;
}
