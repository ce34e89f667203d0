/* test_vocab_q.c — draft vocabularies over a typed (GGUF block-format) LM head.
 *
 * For seeded random heads W [V, d] in Q8_0, Q4_K, Q6_K (the formats of the
 * real drafts' heads) and F16 at an odd d (f32 path only: the 8-bit path
 * needs whole blocks of 32), both activation paths (f32: ms_q_linear; 8-bit:
 * ms_qdot_linear on x quantized once) and 1 and 2 pool threads:
 *
 *  1. the full-head product itself against a naive double dot of the
 *     ms_q_dequant_ref rows (f32 path; within 1e-4 of Σ|W||x|), so the
 *     reference below is not garbage;
 *  2. full / static / dynamic vocabularies made by the *_q constructors:
 *     ms_vocab_logits_q out[t, s] == the full product [t, id_at(s)] bitwise
 *     (the kernels are batch invariant, so any difference is a wrong row);
 *     every packed row equals W's row byte for byte; full keeps no copy
 *     (its rows are W itself); ms_vocab_rows gives no f32 rows;
 *  3. dynamic after rounds that made ids enter and leave (gathered > W_max,
 *     moved > 0), checked after every few rounds;
 *  4. indexed: ms_vocab_logits_indexed_q over a maps-only vocabulary fed the
 *     same stream, and over the typed one, == the same full-product columns;
 *  5. guard values after every output, and bad typed heads refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_check.h"
#include "ms_pool.h"
#include "ms_qdot.h"
#include "ms_vocab.h"

enum { V = 4099, T = 5, K_STATIC = 701, W_MAX = 257, GUARD = 8 };
static const float GUARD_VAL = -12345.5f;

typedef struct {
    ms_dtype t;
    int64_t d;
} head_case;

static const head_case k_cases[] = {
    {MS_DTYPE_Q8_0, 544},  /* 17 blocks of 32 (one group and a partial one) */
    {MS_DTYPE_Q8_0, 640},  /* Gemma 3 270M's d */
    {MS_DTYPE_Q4_K, 768},  /* 3 super-blocks */
    {MS_DTYPE_Q6_K, 256},
    {MS_DTYPE_F16, 37},    /* odd d: f32 path only */
};

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static bool same(float a, float b) { return f32_bits(a) == f32_bits(b) || (isnan(a) && isnan(b)); }

/* See test_qdot.c: a worker started by ms_pool_set_threads must be running
 * before the first job is published. */
static void set_threads(int n) {
    ms_pool_set_threads(n);
    usleep(200000);
}

static void put_f16(uint8_t *p, float f) {
    uint16_t h = ms_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* m rows of k elements of dtype t: random bytes, f16 scales of moderate size
 * (|d| < 0.05, either sign); F16 elements uniform in [-1, 1). */
static uint8_t *make_weights(ms_rng *r, ms_dtype t, int64_t m, int64_t k, size_t *row_bytes) {
    size_t rb;
    MS_ASSERT(ms_dtype_row_bytes(t, k, &rb));
    *row_bytes = rb;
    const size_t bytes = rb * (size_t)m;
    uint8_t *p = malloc(bytes);
    MS_ASSERT(p);
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)ms_rng_u64(r);
    const size_t bb = ms_dtype_block_bytes(t);
    int off[2] = {-1, -1};
    switch (t) {
    case MS_DTYPE_Q8_0: off[0] = 0; break;
    case MS_DTYPE_Q4_K: off[0] = 0, off[1] = 2; break;
    case MS_DTYPE_Q6_K: off[0] = 208; break;
    default: break;
    }
    if (t == MS_DTYPE_F16) {
        for (size_t i = 0; i < bytes / 2; i++) put_f16(p + 2 * i, (float)(ms_rng_uniform(r) * 2 - 1));
    } else {
        for (size_t blk = 0; blk < bytes / bb; blk++)
            for (int j = 0; j < 2 && off[j] >= 0; j++)
                put_f16(p + blk * bb + (size_t)off[j], (float)((ms_rng_uniform(r) * 2 - 1) * 0.05));
    }
    return p;
}

/* out [T, n] + GUARD guard values, set to GUARD_VAL. */
static float *new_out(int64_t n) {
    float *o = malloc((size_t)(T * n + GUARD) * sizeof(float));
    MS_ASSERT(o);
    for (int64_t i = 0; i < T * n + GUARD; i++) o[i] = GUARD_VAL;
    return o;
}

static void check_guard(const float *o, int64_t n, const char *what) {
    for (int64_t i = 0; i < GUARD; i++)
        CHECK(f32_bits(o[T * n + i]) == f32_bits(GUARD_VAL), "%s: guard %lld after [%d, %lld] overwritten", what,
              (long long)i, T, (long long)n);
}

/* out [T, n] over slots of v == y_full [T, V] at id_at(slot), bitwise. */
static void check_cols(const ms_vocab *v, const float *out, const float *y_full, const char *what) {
    const int64_t n = ms_vocab_size(v);
    int bad = 0;
    for (int64_t s = 0; s < n && bad < 5; s++) {
        const int32_t id = ms_vocab_id_at(v, s);
        for (int t = 0; t < T; t++) {
            float a = out[(int64_t)t * n + s], b = y_full[(int64_t)t * V + id];
            if (!same(a, b)) {
                CHECK(same(a, b), "%s: t=%d slot %lld id %d: %.9g vs full %.9g", what, t, (long long)s, id, a, b);
                bad++;
            }
        }
    }
    check_guard(out, n, what);
}

/* The typed packed rows equal W's rows byte for byte. */
static void check_rows(const ms_vocab *v, const uint8_t *W, size_t rb, const char *what) {
    ms_qweight rows;
    const int32_t *id_of;
    CHECK(ms_vocab_rows_q(v, &rows, &id_of), "%s: no typed rows", what);
    const float *f32;
    ms_vocab_rows(v, &f32, NULL, NULL);
    CHECK(f32 == NULL, "%s: a typed vocabulary gave f32 rows", what);
    if (!rows.data) return;
    CHECK(rows.m == ms_vocab_size(v) && rows.row_bytes == rb, "%s: view m=%lld rb=%zu", what, (long long)rows.m,
          rows.row_bytes);
    for (int64_t s = 0; s < rows.m; s++) {
        const int32_t id = id_of ? id_of[s] : (int32_t)s;
        if (memcmp((const uint8_t *)rows.data + (size_t)s * rb, W + (size_t)id * rb, rb) != 0) {
            CHECK(0, "%s: packed row %lld is not W's row %d", what, (long long)s, id);
            return;
        }
    }
}

/* x and xq: exactly one set (the path under test). */
typedef struct {
    const float *x;
    const ms_q8_act *xq;
} acts;

static void run_packed(const ms_vocab *v, acts a, const float *y_full, const char *what) {
    const int64_t n = ms_vocab_size(v);
    float *out = new_out(n);
    ms_vocab_logits_q(v, a.x, a.xq, T, out);
    check_cols(v, out, y_full, what);
    free(out);
}

static void run_indexed(const ms_vocab *v, const ms_qweight *W, acts a, const float *y_full, const char *what) {
    const int64_t n = ms_vocab_size(v);
    float *out = new_out(n);
    ms_vocab_logits_indexed_q(v, W, a.x, a.xq, T, out);
    check_cols(v, out, y_full, what);
    free(out);
}

/* One stream round (as ms_dft_accept appends it): ids drift upwards with the
 * round so old ones leave the window. */
static void one_round(ms_rng *r, int round, ms_vocab *a, ms_vocab *b) {
    int32_t tree[60], ver[18];
    for (int i = 0; i < 60; i++) tree[i] = (int32_t)(((ms_rng_u64(r) % 300) + (uint64_t)round * 37) % V);
    for (int i = 0; i < 18; i++) ver[i] = (int32_t)(((ms_rng_u64(r) % 500) + (uint64_t)round * 37) % V);
    CHECK(ms_vocab_append_round(a, tree, 60, ver, 6, 3) == MS_OK, "round");
    CHECK(ms_vocab_append_round(b, tree, 60, ver, 6, 3) == MS_OK, "round (maps only)");
}

static void test_case(const head_case *hc, int threads, uint64_t seed) {
    const int64_t d = hc->d;
    const bool q8_ok = d % MS_Q8_BLOCK == 0;
    ms_rng r;
    ms_rng_seed(&r, seed);
    size_t rb;
    uint8_t *Wd = make_weights(&r, hc->t, V, d, &rb);
    const ms_qweight W = ms_qweight_view(hc->t, Wd, V, d);
    float *x = malloc((size_t)(T * d) * sizeof(float));
    for (int64_t i = 0; i < T * d; i++) x[i] = ms_rng_normal(&r);
    ms_q8_act xq = {0};
    if (q8_ok) MS_ASSERT(ms_q8_act_alloc(&xq, T, d) == MS_OK);

    /* 1: the f32 full product against a naive dot of the dequantized rows */
    float *y32 = malloc((size_t)(T * V) * sizeof(float)), *yq = NULL;
    ms_q_linear(y32, x, &W, NULL, T);
    float *row = malloc((size_t)d * sizeof(float));
    for (int64_t id = 0; id < V; id += 97) {
        ms_q_dequant_ref(hc->t, Wd + (size_t)id * rb, row, d);
        for (int t = 0; t < T; t++) {
            double z = 0, mag = 0;
            for (int64_t e = 0; e < d; e++) {
                z += (double)row[e] * (double)x[t * d + e];
                mag += fabs((double)row[e] * (double)x[t * d + e]);
            }
            const float y = y32[(int64_t)t * V + id];
            CHECK(fabs(z - y) <= 1e-4 * mag + 1e-6, "%s d=%lld: full product id %lld t=%d: %.9g vs naive %.9g",
                  ms_dtype_name(hc->t), (long long)d, (long long)id, t, y, z);
        }
    }
    free(row);
    if (q8_ok) {
        ms_q8_quantize(&xq, x, T, d);
        yq = malloc((size_t)(T * V) * sizeof(float));
        ms_qdot_linear(yq, &xq, &W, NULL);
    }

    int32_t ids[K_STATIC];
    uint8_t *used = calloc(V, 1);
    for (int i = 0; i < K_STATIC;) {
        int32_t id = (int32_t)(ms_rng_u64(&r) % V);
        if (!used[id]) {
            used[id] = 1;
            ids[i++] = id;
        }
    }
    free(used);

    ms_vocab *full = NULL, *stat = NULL, *dyn = NULL, *stat_m = NULL, *dyn_m = NULL;
    CHECK(ms_vocab_new_full_q(&W, &full) == MS_OK, "full_q");
    CHECK(ms_vocab_new_static_q(&W, ids, K_STATIC, &stat) == MS_OK, "static_q");
    CHECK(ms_vocab_new_dynamic_q(&W, W_MAX, &dyn) == MS_OK, "dynamic_q");
    CHECK(ms_vocab_new_static(NULL, V, d, ids, K_STATIC, &stat_m) == MS_OK, "static maps only");
    CHECK(ms_vocab_new_dynamic(NULL, V, d, W_MAX, &dyn_m) == MS_OK, "dynamic maps only");
    if (!full || !stat || !dyn || !stat_m || !dyn_m) goto done;
    {
        ms_qweight fr;
        CHECK(ms_vocab_rows_q(full, &fr, NULL) && fr.data == (const void *)Wd && fr.m == V,
              "full: the rows must be W itself (no copy)");
    }
    check_rows(stat, Wd, rb, "static rows");

    int32_t prompt[200], pre[600];
    for (int i = 0; i < 200; i++) prompt[i] = (int32_t)(ms_rng_u64(&r) % 900);
    for (int i = 0; i < 600; i++) pre[i] = (int32_t)(ms_rng_u64(&r) % 1500);
    CHECK(ms_vocab_init_stream(dyn, prompt, 200, pre, 3) == MS_OK, "init");
    CHECK(ms_vocab_init_stream(dyn_m, prompt, 200, pre, 3) == MS_OK, "init (maps only)");

    for (int p = 0; p < 2; p++) { /* 0: f32 activations, 1: 8-bit */
        if (p == 1 && !q8_ok) continue;
        const acts a = p ? (acts){NULL, &xq} : (acts){x, NULL};
        const float *y = p ? yq : y32;
        char what[96];
#define WHAT(mode) (snprintf(what, sizeof what, "%s d=%lld %s %s threads=%d", ms_dtype_name(hc->t), (long long)d, \
                             p ? "q8" : "f32", mode, threads), what)
        run_packed(full, a, y, WHAT("full"));
        run_packed(stat, a, y, WHAT("static"));
        run_indexed(full, &W, a, y, WHAT("indexed full"));
        run_indexed(stat_m, &W, a, y, WHAT("indexed static"));
        run_indexed(stat, &W, a, y, WHAT("indexed static (typed vocabulary)"));
        run_packed(dyn, a, y, WHAT("dynamic after init"));
        run_indexed(dyn_m, &W, a, y, WHAT("indexed dynamic after init"));
        for (int round = 0; round < 60; round++) {
            one_round(&r, round + 60 * p, dyn, dyn_m);
            if (round % 7 != 6) continue;
            check_rows(dyn, Wd, rb, WHAT("dynamic rows"));
            run_packed(dyn, a, y, WHAT("dynamic"));
            run_indexed(dyn_m, &W, a, y, WHAT("indexed dynamic"));
            CHECK(ms_vocab_size(dyn) == ms_vocab_size(dyn_m), "maps-only twin size differs");
        }
        const ms_vocab_counters c = ms_vocab_counters_get(dyn);
        CHECK(c.gathered > W_MAX && c.moved > 0,
              "%s: the stream should make ids enter and leave (gathered %lld, moved %lld)", WHAT("dynamic"),
              (long long)c.gathered, (long long)c.moved);
#undef WHAT
    }
    /* the packed view after a reset and an empty window: no rows, no work */
    ms_vocab_reset(dyn);
    {
        ms_qweight e;
        CHECK(ms_vocab_rows_q(dyn, &e, NULL) && e.m == 0, "empty window view");
        float g = GUARD_VAL;
        ms_vocab_logits_q(dyn, x, NULL, T, &g);
        CHECK(f32_bits(g) == f32_bits(GUARD_VAL), "empty window wrote output");
    }
done:
    ms_vocab_free(&full);
    ms_vocab_free(&stat);
    ms_vocab_free(&dyn);
    ms_vocab_free(&stat_m);
    ms_vocab_free(&dyn_m);
    ms_q8_act_free(&xq);
    free(Wd);
    free(x);
    free(y32);
    free(yq);
}

/* Typed heads that do not describe themselves are refused, not trusted. */
static void test_refused(void) {
    uint8_t blk[34 * 4] = {0};
    ms_qweight w = ms_qweight_view(MS_DTYPE_Q8_0, blk, 2, 64);
    ms_vocab *v = NULL;
    ms_qweight bad = w;
    bad.row_bytes = 33;
    CHECK(ms_vocab_new_full_q(&bad, &v) == MS_ERR_INVALID && !v, "wrong row_bytes refused");
    bad = w;
    bad.m = 0;
    CHECK(ms_vocab_new_dynamic_q(&bad, 4, &v) == MS_ERR_INVALID && !v, "V = 0 refused");
    bad = w;
    bad.data = NULL;
    CHECK(ms_vocab_new_static_q(&bad, (const int32_t[]){0}, 1, &v) == MS_ERR_INVALID && !v, "no data refused");
    CHECK(ms_vocab_new_full_q(NULL, &v) == MS_ERR_INVALID && !v, "NULL head refused");
    CHECK(ms_vocab_new_static_q(&w, (const int32_t[]){1, 1}, 2, &v) == MS_ERR_INVALID && !v, "repeated id refused");
    CHECK(ms_vocab_new_dynamic_q(&w, 0, &v) == MS_ERR_INVALID && !v, "W_max 0 refused");
}

int main(void) {
    test_refused();
    const int n_cases = (int)(sizeof k_cases / sizeof *k_cases);
    for (int threads = 1; threads <= 2; threads++) {
        set_threads(threads);
        for (int c = 0; c < n_cases; c++) test_case(&k_cases[c], threads, 1000u + (uint64_t)c);
    }
    for (int c = 0; c < n_cases; c++) printf("  %-5s d=%-4lld qdot path %s\n", ms_dtype_name(k_cases[c].t),
                                            (long long)k_cases[c].d, ms_qdot_path(k_cases[c].t));
    if (g_fail) {
        fprintf(stderr, "test_vocab_q: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_vocab_q: ok\n");
    return 0;
}
