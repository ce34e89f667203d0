/* test_vocab_rows.c — full, static and dynamic vocabularies give the same
 * LM-head logits at the same ids.
 *
 * For each mode, the logits over its packed rows (a naive double dot product,
 * and the CPU op table's GEMM as the draft would run it) must equal the full
 * logits at the corresponding ids (exactly for the naive product, which sums
 * in the same order; within 1e-5 relative for the GEMM). And the argmax over
 * the slots, mapped back through slot → id, equals the argmax of the full
 * logits restricted to the vocabulary's ids (found here by scanning all V ids
 * with ms_vocab_contains).
 */
#include "ms_kernels.h"
#include "ms_vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

enum { V = 3001, D = 37, T = 3 }; /* odd sizes; T query rows (tree nodes) */

static double dot(const float *a, const float *b) {
    double s = 0.0;
    for (int j = 0; j < D; j++) s += (double)a[j] * (double)b[j];
    return s;
}

static void check_mode(const ms_vocab *v, const float *W, const float *h, const double *z_full, const float *g_full,
                       const char *name) {
    const float *rows;
    const int32_t *id_of;
    int64_t n;
    ms_vocab_rows(v, &rows, &n, &id_of);
    CHECK(n > 0 && rows != NULL, "%s: no rows", name);
    if (n <= 0 || !rows) return;
    float *g = malloc((size_t)(T * n) * sizeof(float));
    ms_k_cpu_ops()->gemm(NULL, g, h, rows, NULL, T, D, n); /* g [T, n] = h · rowsᵀ */
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        int64_t best_slot = 0;
        double best_z = -INFINITY;
        for (int64_t s = 0; s < n; s++) {
            int32_t id = id_of ? id_of[s] : (int32_t)s;
            double z = dot(rows + s * D, h + t * D);
            CHECK(z == z_full[(int64_t)t * V + id], "%s: t=%d slot %lld id %d: %.17g vs full %.17g", name, t,
                  (long long)s, id, z, z_full[(int64_t)t * V + id]);
            double ref = g_full[(int64_t)t * V + id];
            double e = fabs((double)g[(int64_t)t * n + s] - ref) / (1.0 + fabs(ref));
            ms_check_worst(&worst, e);
            if (z > best_z) {
                best_z = z;
                best_slot = s;
            }
            if (g_fail > 20) goto out;
        }
        /* Argmax over the vocabulary's ids, from the full logits, by definition. */
        int32_t best_id = -1;
        for (int32_t id = 0; id < V; id++)
            if (ms_vocab_contains(v, id) && (best_id < 0 || z_full[(int64_t)t * V + id] > z_full[(int64_t)t * V + best_id]))
                best_id = id;
        int32_t got = id_of ? id_of[best_slot] : (int32_t)best_slot;
        CHECK(got == best_id || z_full[(int64_t)t * V + got] == z_full[(int64_t)t * V + best_id],
              "%s: t=%d draft argmax id %d, restricted full argmax %d", name, t, got, best_id);
    }
    CHECK(worst <= 1e-5, "%s: GEMM over packed rows vs full GEMM: max rel diff %.3g", name, worst);
    printf("  %-8s |rows| = %-5lld GEMM max rel diff vs full %.3g\n", name, (long long)n, worst);
out:
    free(g);
}

int main(void) {
    ms_rng r;
    ms_rng_seed(&r, 2024);
    float *W = malloc((size_t)V * D * sizeof(float)), *h = malloc((size_t)T * D * sizeof(float));
    for (int64_t i = 0; i < (int64_t)V * D; i++) W[i] = ms_rng_normal(&r);
    for (int64_t i = 0; i < T * D; i++) h[i] = ms_rng_normal(&r);
    double *z_full = malloc((size_t)T * V * sizeof(double));
    float *g_full = malloc((size_t)T * V * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int64_t i = 0; i < V; i++) z_full[(int64_t)t * V + i] = dot(W + i * D, h + t * D);
    ms_k_cpu_ops()->gemm(NULL, g_full, h, W, NULL, T, D, V);

    ms_vocab *full = NULL, *stat = NULL, *dyn = NULL;
    CHECK(ms_vocab_new_full(W, V, D, &full) == MS_OK, "full");
    int32_t ids[700];
    uint8_t *used = calloc(V, 1);
    for (int i = 0; i < 700;) { /* distinct random ids */
        int32_t id = (int32_t)(ms_rng_u64(&r) % V);
        if (!used[id]) {
            used[id] = 1;
            ids[i++] = id;
        }
    }
    free(used);
    CHECK(ms_vocab_new_static(W, V, D, ids, 700, &stat) == MS_OK, "static");
    CHECK(ms_vocab_new_dynamic(W, V, D, 512, &dyn) == MS_OK, "dynamic");
    if (!full || !stat || !dyn) goto done;
    check_mode(full, W, h, z_full, g_full, "full");
    check_mode(stat, W, h, z_full, g_full, "static");
    /* Dynamic after a prompt and rounds that made ids enter and leave. */
    int32_t prompt[300], pre[900];
    for (int i = 0; i < 300; i++) prompt[i] = (int32_t)(ms_rng_u64(&r) % 800);
    for (int i = 0; i < 900; i++) pre[i] = (int32_t)(ms_rng_u64(&r) % 1200);
    CHECK(ms_vocab_init_stream(dyn, prompt, 300, pre, 3) == MS_OK, "init");
    for (int round = 0; round < 200; round++) {
        int32_t tree[60], ver[18];
        for (int i = 0; i < 60; i++) tree[i] = (int32_t)((ms_rng_u64(&r) % 300) + (uint64_t)round * 10) % V;
        for (int i = 0; i < 18; i++) ver[i] = (int32_t)((ms_rng_u64(&r) % 400) + (uint64_t)round * 10) % V;
        CHECK(ms_vocab_append_round(dyn, tree, 60, ver, 6, 3) == MS_OK, "round");
    }
    CHECK(ms_vocab_counters_get(dyn).moved > 0, "the stream should have made ids leave");
    check_mode(dyn, W, h, z_full, g_full, "dynamic");
done:
    ms_vocab_free(&full);
    ms_vocab_free(&stat);
    ms_vocab_free(&dyn);
    free(W);
    free(h);
    free(z_full);
    free(g_full);
    if (g_fail) {
        fprintf(stderr, "test_vocab_rows: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_vocab_rows: ok\n");
    return 0;
}
