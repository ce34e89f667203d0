/* test_qdot.c — quantized matmul with 8-bit activations (kernels/cpu/ms_qdot.h).
 *
 *  1. ms_q8_quantize against the header's definition, recomputed here: d =
 *     max|x|/127 bitwise, |q − x/d| ≤ 1/2, |q| ≤ 127, s = Σq, the transposed
 *     layout, zero padding, NaN scale for a non-finite block; the same for
 *     the per-super-block form that Q4_K reads;
 *  2. the scalar twin (ms_qdot_linear_ref) against a naive double dot of the
 *     ms_q_dequant_ref weights with the dequantized activations (d·q; for
 *     Q4_K the per-super-block dk·qk), every
 *     type, odd m, n, several k (partial groups), within 1e-4 of Σ|W||x̂|;
 *  Every check of the fast paths (1, 3, 4, 5) runs at each instruction-set
 *  level this CPU has (ms_isa.h: avx2, avx512, amx; neon, dotprod, i8mm; the
 *  threaded twin where it has none), set with ms_isa_set, against one twin:
 *  a level's quantizer writes the twin's bytes and its products the twin's bits.
 *  3. the fast path (ms_qdot_linear, SIMD where the CPU has it) == the twin
 *     bitwise, every type, n across the row tiles, with bias, with guard
 *     values after y, with 1 and 2 pool threads; ms_qdot_linear_rows == the
 *     twin's rows variant and == the matching columns;
 *     The same with the weight packed into the AMX tile layout
 *     (ms_qdot_pack, where the CPU takes the AMX path): == the twin bitwise;
 *  4. batch and thread invariance: row r of an n-row product == the 1-row
 *     product of row r alone, bitwise, n = 1..64, 1 and 2 threads, the
 *     weight as stored and packed — across the paths, where the CPU has AMX
 *     (VNNI for n < 8, AMX tiles from 8 rows);
 *     ms_q8_quantize_forms with only the form a weight reads: the same bits;
 *  5. accuracy versus the f32 ms_q_linear on Gaussian x: |Δy| ≤ Σ_b (d_b/2)
 *     Σ_{e∈b}|W_e| (+ f32 slack) per element, and the rms relative error
 *     (printed) below 2 %.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_check.h"
#include "ms_isa.h"
#include "ms_pool.h"
#include "ms_qdot.h"

static const ms_dtype k_types[] = {MS_DTYPE_Q4_K, MS_DTYPE_Q6_K, MS_DTYPE_Q5_0, MS_DTYPE_Q8_0,
                                   MS_DTYPE_Q4_0, MS_DTYPE_Q4_1, MS_DTYPE_Q5_1, MS_DTYPE_Q5_K,
                                   MS_DTYPE_F32,  MS_DTYPE_F16,  MS_DTYPE_BF16};
enum { N_TYPES = sizeof(k_types) / sizeof(k_types[0]), GUARD = 16 };

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ms_pool_set_threads, then a pause: a worker started by it snapshots the
 * pool's job counter when it first runs, so a job published before that
 * would be missed and ms_pool_run would wait for ever (kernels/cpu/ms_pool.c;
 * reported). Workers are started once, here. */
static void set_threads(int n) {
    ms_pool_set_threads(n);
    usleep(200000);
}

/* The levels to test: every SIMD level this CPU has, lowest first (the
 * threaded twin alone where it has none). */
static int g_nlev;
static ms_isa g_lev[MS_ISA_COUNT];

static void find_levels(void) {
    const ms_isa cpu = ms_isa_cpu();
    for (int i = 1; i < MS_ISA_COUNT; i++)
        if (ms_isa_includes(cpu, (ms_isa)i)) g_lev[g_nlev++] = (ms_isa)i;
    if (g_nlev == 0) g_lev[g_nlev++] = MS_ISA_SCALAR;
    printf("  CPU level %s; testing", ms_isa_name(cpu));
    for (int i = 0; i < g_nlev; i++) printf(" %s", ms_isa_name(g_lev[i]));
    printf("\n");
}

/* The level a path of ms_qdot_path needs; MS_ISA_COUNT for a name not known. */
static ms_isa path_level(const char *path) {
    static const struct {
        const char *name;
        ms_isa isa;
    } k_paths[] = {{"scalar", MS_ISA_SCALAR},       {"avx2", MS_ISA_AVX2},   {"avx2-vnni", MS_ISA_AVXVNNI},
                   {"avx512vnni", MS_ISA_AVX512},   {"avx512vnni+amx", MS_ISA_AMX}, {"neon", MS_ISA_NEON},
                   {"neon-dotprod", MS_ISA_DOTPROD}, {"neon-i8mm", MS_ISA_I8MM}};
    for (size_t i = 0; i < sizeof k_paths / sizeof k_paths[0]; i++)
        if (!strcmp(path, k_paths[i].name)) return k_paths[i].isa;
    return MS_ISA_COUNT;
}

/* The path each dtype takes needs no more than level l: at avx512 no AMX
 * tile path, at neon no dotprod. */
static void check_paths(ms_isa l) {
    for (int ti = 0; ti < N_TYPES; ti++) {
        const char *p = ms_qdot_path(k_types[ti]);
        const ms_isa need = path_level(p);
        CHECK(need != MS_ISA_COUNT && ms_isa_includes(l, need), "%s at level %s takes path %s",
              ms_dtype_name(k_types[ti]), ms_isa_name(l), p);
    }
}

static void set_level(ms_isa l) {
    CHECK(ms_isa_set(l) && ms_isa_active() == l, "ms_isa_set(%s): active %s", ms_isa_name(l),
          ms_isa_name(ms_isa_active()));
    check_paths(l);
}

/* test_qdot --isa-cap LEVEL, run with MS_ISA=LEVEL (or MS_NO_AMX=1 for
 * avx512) in the environment: the kernels' level must be LEVEL where the CPU
 * has it, else the CPU's own, and no dtype may take a path above it. */
static int isa_cap(const char *name) {
    ms_isa cap;
    if (!ms_isa_parse(name, &cap)) {
        fprintf(stderr, "test_qdot --isa-cap: unknown level '%s'\n", name);
        return 2;
    }
    const ms_isa cpu = ms_isa_cpu(), want = ms_isa_includes(cpu, cap) ? cap : cpu, got = ms_isa_active();
    CHECK(got == want, "MS_ISA=%s (MS_NO_AMX=%s) on a %s CPU: the kernels run %s, want %s",
          getenv("MS_ISA") ? getenv("MS_ISA") : "", getenv("MS_NO_AMX") ? getenv("MS_NO_AMX") : "", ms_isa_name(cpu),
          ms_isa_name(got), ms_isa_name(want));
    check_paths(want);
    printf("test_qdot --isa-cap %s: CPU %s, kernels %s, paths", name, ms_isa_name(cpu), ms_isa_name(got));
    for (int ti = 0; ti < N_TYPES; ti++) printf(" %s:%s", ms_dtype_name(k_types[ti]), ms_qdot_path(k_types[ti]));
    printf("\n");
    return g_fail ? 1 : 0;
}

/* Bitwise equal and not NaN: inputs here are finite, so a NaN in either
 * output is a fault, even when the other one has it too. */
static bool same(float a, float b) { return !isnan(a) && f32_bits(a) == f32_bits(b); }

static void put_f16(uint8_t *p, float f) {
    uint16_t h = ms_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* m rows of k elements of dtype t: random bytes, f16 scales of moderate
 * size (|d| < 0.05, either sign), scalar dtypes uniform in [-1, 1). */
static uint8_t *make_weights(ms_rng *r, ms_dtype t, int64_t m, int64_t k) {
    size_t rb;
    MS_ASSERT(ms_dtype_row_bytes(t, k, &rb));
    const size_t bytes = rb * (size_t)m;
    uint8_t *p = malloc(bytes + 1);
    MS_ASSERT(p);
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)ms_rng_u64(r);
    const size_t bb = ms_dtype_block_bytes(t);
    int off[2] = {-1, -1};
    switch (t) {
    case MS_DTYPE_Q4_0:
    case MS_DTYPE_Q5_0:
    case MS_DTYPE_Q8_0: off[0] = 0; break;
    case MS_DTYPE_Q4_1:
    case MS_DTYPE_Q5_1:
    case MS_DTYPE_Q4_K:
    case MS_DTYPE_Q5_K: off[0] = 0, off[1] = 2; break;
    case MS_DTYPE_Q6_K: off[0] = 208; break;
    default: break;
    }
    if (t == MS_DTYPE_F32 || t == MS_DTYPE_F16 || t == MS_DTYPE_BF16) {
        for (size_t i = 0; i < bytes / bb; i++) {
            float f = (float)(ms_rng_uniform(r) * 2 - 1);
            if (t == MS_DTYPE_F32) memcpy(p + 4 * i, &f, 4);
            else if (t == MS_DTYPE_F16) put_f16(p + 2 * i, f);
            else {
                uint16_t h = ms_f32_to_bf16(f);
                memcpy(p + 2 * i, &h, 2);
            }
        }
    } else {
        for (size_t blk = 0; blk < bytes / bb; blk++)
            for (int j = 0; j < 2 && off[j] >= 0; j++)
                put_f16(p + blk * bb + (size_t)off[j], (float)((ms_rng_uniform(r) * 2 - 1) * 0.05));
    }
    return p;
}

/* x[n, k]: Gaussian, each row with its own scale; row 1 (if any) gets a
 * zero block and a block with one large outlier. */
static float *make_x(ms_rng *r, int64_t n, int64_t k) {
    float *x = malloc((size_t)(n * k) * sizeof(float));
    MS_ASSERT(x);
    for (int64_t i = 0; i < n; i++) {
        const float sc = (float)(0.1 + 4.0 * ms_rng_uniform(r));
        for (int64_t e = 0; e < k; e++) x[i * k + e] = sc * ms_rng_normal(r);
    }
    if (n > 1 && k >= 64) {
        for (int e = 0; e < 32; e++) x[k + e] = 0.0f;
        x[k + 40] = 300.0f;
    }
    return x;
}

/* The header's layout: q of element e of row r. */
static int8_t act_q(const ms_q8_act *a, int64_t r, int64_t e) {
    const int64_t g = ms_q8_groups(a->k), b = e / 32, G = b / 16, j = b % 16, t = (e % 32) / 4, i = e % 4;
    return a->q[(size_t)(r * g + G) * 512 + (size_t)(64 * t + 4 * j + i)];
}
static float act_d(const ms_q8_act *a, int64_t r, int64_t b) { return a->d[r * ms_q8_groups(a->k) * 16 + b]; }
static int32_t act_s(const ms_q8_act *a, int64_t r, int64_t b) { return a->s[r * ms_q8_groups(a->k) * 16 + b]; }
/* The per-super-block form (Q4_K reads it): q, the scale of element e. */
static int8_t actk_q(const ms_q8_act *a, int64_t r, int64_t e) { return a->qk[r * ms_q8_groups(a->k) * 512 + e]; }
static float actk_d(const ms_q8_act *a, int64_t r, int64_t e) { /* the step of e's 32-block */
    const int64_t g = ms_q8_groups(a->k);
    return ldexpf(a->uk[r * g * 2 + e / 256], a->ek[r * g * 16 + e / 32]);
}
/* What type t's products read of element e of row r: its scale and q. */
static float xd_of(ms_dtype t, const ms_q8_act *a, int64_t r, int64_t e) {
    return t == MS_DTYPE_Q4_K ? actk_d(a, r, e) : act_d(a, r, e / 32);
}
static int xq_of(ms_dtype t, const ms_q8_act *a, int64_t r, int64_t e) {
    return t == MS_DTYPE_Q4_K ? actk_q(a, r, e) : act_q(a, r, e);
}

/* k values per type: partial groups, one group, several groups. */
static int ks_for(ms_dtype t, int64_t ks[5]) {
    if (ms_dtype_block(t) == 256) {
        ks[0] = 256, ks[1] = 768, ks[2] = 4096 + 768; /* 1, 3, 19 super-blocks */
        return 3;
    }
    ks[0] = 32, ks[1] = 544, ks[2] = 896, ks[3] = 640, ks[4] = 608; /* tails of 1, 1, 12, 4, 3 blocks */
    return 5;
}

/* ---- 1 ---------------------------------------------------------------------- */

static void test_quantize(void) {
    ms_rng r;
    ms_rng_seed(&r, 11);
    const int64_t n = 5, k = 1056; /* 33 blocks: 3 groups, the last with 1 */
    float *x = make_x(&r, n, k);
    x[3 * k + 100] = NAN; /* block 3 of row 3 */
    ms_q8_act a;
    CHECK(ms_q8_act_alloc(&a, n, k) == MS_OK, "alloc");
    memset(a.q, 0x5A, (size_t)a.cap_groups * 512); /* padding must be written */
    for (int64_t i = 0; i < a.cap_groups * 16; i++) a.d[i] = 7.0f, a.s[i] = 7;
    ms_q8_quantize(&a, x, n, k);
    CHECK(a.n == n && a.k == k && ms_q8_groups(k) == 3, "n %lld k %lld", (long long)a.n, (long long)a.k);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t b = 0; b < 48; b++) {
            if (b >= k / 32) { /* padding */
                bool z = act_d(&a, i, b) == 0.0f && act_s(&a, i, b) == 0;
                for (int e = 0; e < 32; e++)
                    z = z && a.q[(size_t)(i * 3 + b / 16) * 512 + (size_t)(64 * (e / 4) + 4 * (b % 16) + e % 4)] == 0;
                bad += !z;
                continue;
            }
            const float *xb = x + i * k + b * 32;
            if (i == 3 && b == 3) {
                CHECK(isnan(act_d(&a, i, b)), "non-finite block: d %g", act_d(&a, i, b));
                continue;
            }
            float amax = 0.0f;
            for (int e = 0; e < 32; e++) amax = fmaxf(amax, fabsf(xb[e]));
            const float d = amax / 127.0f;
            if (f32_bits(act_d(&a, i, b)) != f32_bits(d)) {
                bad++;
                continue;
            }
            int32_t s = 0;
            for (int e = 0; e < 32; e++) {
                const int q = act_q(&a, i, b * 32 + e);
                const double want = d > 0 ? (double)xb[e] / (double)d : 0.0;
                if (q < -127 || q > 127 || fabs(q - want) > 0.5 + 1e-5) bad++;
                s += q;
            }
            if (s != act_s(&a, i, b)) bad++;
        }
    }
    CHECK(bad == 0, "%d quantized blocks/elements off the definition", bad);
    /* qp (element order, row stride 512·groups) holds the same q, h6 −32 × each block's halves summed */
    bad = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = 0; e < 48 * 32; e++) {
            const int8_t want = e < k ? (int8_t)act_q(&a, i, e) : 0;
            bad += a.qp[(size_t)(i * 3 * 512 + e)] != want;
            if (e % 32 == 0) {
                int32_t h[2] = {0, 0};
                for (int64_t f = e; f < e + 32 && f < k; f++) h[(f - e) / 16] += act_q(&a, i, f);
                bad += a.h6[2 * (i * 48 + e / 32)] != -32 * h[0];
                bad += a.h6[2 * (i * 48 + e / 32) + 1] != -32 * h[1];
            }
        }
    CHECK(bad == 0, "%d plain-order q / half sums differ from q", bad);
    /* q of the outlier block: the outlier is 127, the rest small */
    CHECK(act_q(&a, 1, 40) == 127 && act_d(&a, 1, 0) == 0.0f, "outlier %d, zero-block d %g", act_q(&a, 1, 40),
          act_d(&a, 1, 0));
    ms_q8_act_free(&a);
    CHECK(a.q == NULL && a.d == NULL && a.s == NULL, "free clears");
    free(x);
}

/* The per-super-block form (ms_qdot.h, Q4_K): made only where k is a whole
 * number of super-blocks; the unit bitwise, each 32-block's exponent the
 * finest allowed, |q − x/step| ≤ 1/2, the shifted sums, the padding
 * super-block of the last group zero, NaN for a non-finite one; a block of
 * small values beside an outlier gets the finest step (e = 0). */
static void test_quantize_k(void) {
    ms_rng r;
    ms_rng_seed(&r, 12);
    const int64_t n = 3, k = 768; /* 3 super-blocks: the second group holds one and a padding one */
    float *x = make_x(&r, n, k);
    x[2 * k + 300] = INFINITY; /* super-block 1 of row 2 */
    x[k + 256 + 5] = 1000.0f;  /* an outlier in super-block 1 of row 1 */
    ms_q8_act a;
    CHECK(ms_q8_act_alloc(&a, n, k) == MS_OK, "alloc");
    memset(a.qk, 0x5A, (size_t)a.cap_groups * 512);
    for (int64_t i = 0; i < a.cap_groups * 16; i++) a.sk[i] = a.ek[i] = 7;
    for (int64_t i = 0; i < a.cap_groups * 2; i++) a.uk[i] = 7.0f;
    ms_q8_quantize(&a, x, n, k);
    CHECK(a.has_k, "k = 768 gets the per-super-block form");
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t S = 0; S < 4; S++) {
            const float uk = a.uk[i * 4 + S];
            if (S == 3) { /* padding */
                bad += uk != 0.0f;
                for (int e = 0; e < 256; e++) bad += a.qk[i * 1024 + 256 * S + e] != 0;
                for (int b = 0; b < 8; b++) bad += a.sk[i * 32 + 8 * S + b] != 0 || a.ek[i * 32 + 8 * S + b] != 0;
                continue;
            }
            if (i == 2 && S == 1) {
                CHECK(isnan(uk), "non-finite super-block: unit %g", uk);
                continue;
            }
            const float *xs = x + i * k + 256 * S;
            float amax = 0.0f;
            for (int e = 0; e < 256; e++) amax = fmaxf(amax, fabsf(xs[e]));
            bad += f32_bits(uk) != f32_bits(amax / 127.0f / 32.0f);
            for (int b = 0; b < 8; b++) {
                float bmax = 0.0f;
                for (int e = 32 * b; e < 32 * (b + 1); e++) bmax = fmaxf(bmax, fabsf(xs[e]));
                const int ex = a.ek[i * 32 + 8 * S + b], j = 5 - ex;
                bad += ex < 0 || ex > 5 || ldexpf(bmax, j) > amax || (j < 5 && ldexpf(bmax, j + 1) <= amax);
                const double step = ldexp((double)uk, ex);
                int32_t half[2] = {0, 0};
                for (int e = 32 * b; e < 32 * (b + 1); e++) {
                    const int q = a.qk[i * 1024 + 256 * S + e];
                    const double want = step > 0 ? (double)xs[e] / step : 0.0;
                    bad += q < -127 || q > 127 || fabs(q - want) > 0.5 + 1e-5;
                    half[(e % 32) / 16] += q;
                }
                bad += a.sk[i * 32 + 8 * S + b] != (half[0] + half[1]) * (1 << ex);
            }
        }
    CHECK(bad == 0, "%d per-super-block units / exponents / q / sums off the definition", bad);
    CHECK(a.ek[1 * 32 + 8] == 5 && a.ek[1 * 32 + 9] == 0, "outlier block: e %d, its neighbour: e %d (want 5, 0)",
          a.ek[1 * 32 + 8], a.ek[1 * 32 + 9]);
    float *x800 = make_x(&r, n, 800); /* rows of 800 (the same 2 groups a row as 768) */
    ms_q8_quantize(&a, x800, n, 800);
    CHECK(!a.has_k, "k = 800 (not whole super-blocks): no per-super-block form");
    free(x800);
    ms_q8_act_free(&a);
    CHECK(a.qk == NULL && a.uk == NULL && a.sk == NULL && a.ek == NULL, "free clears");
    free(x);
}

/* ---- 2 ---------------------------------------------------------------------- */

static void test_twin_vs_naive(void) {
    ms_rng r;
    ms_rng_seed(&r, 22);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const ms_dtype t = k_types[ti];
        int64_t ks[5];
        const int nk = ks_for(t, ks);
        for (int ki = 0; ki < nk; ki++) {
            const int64_t k = ks[ki], m = 37, n = 5;
            uint8_t *wd = make_weights(&r, t, m, k);
            ms_qweight w = ms_qweight_view(t, wd, m, k);
            float *x = make_x(&r, n, k), *wf = malloc((size_t)k * sizeof(float));
            float *y = malloc((size_t)(n * m) * sizeof(float)), *bias = malloc((size_t)m * sizeof(float));
            for (int64_t j = 0; j < m; j++) bias[j] = (float)ms_rng_normal(&r);
            ms_q8_act a;
            MS_ASSERT(ms_q8_act_alloc(&a, n, k) == MS_OK);
            ms_q8_quantize(&a, x, n, k);
            ms_qdot_linear_ref(y, &a, &w, bias);
            double worst = 0;
            for (int64_t j = 0; j < m; j++) {
                ms_q_dequant_ref(t, (const uint8_t *)wd + (size_t)j * w.row_bytes, wf, k);
                for (int64_t i = 0; i < n; i++) {
                    double acc = 0, mag = 0;
                    for (int64_t e = 0; e < k; e++) {
                        const double xh = (double)xd_of(t, &a, i, e) * xq_of(t, &a, i, e);
                        acc += (double)wf[e] * xh;
                        mag += fabs((double)wf[e] * xh);
                    }
                    acc += bias[j];
                    const double err = fabs(y[i * m + j] - acc) / (mag + fabs(bias[j]) + 1e-30);
                    ms_check_worst(&worst, err);
                }
            }
            CHECK(worst <= 1e-4, "%s k=%lld: twin vs naive rel err %.3g", ms_dtype_name(t), (long long)k, worst);
            ms_q8_act_free(&a);
            free(wd), free(x), free(wf), free(y), free(bias);
        }
    }
}

/* ---- 3 ---------------------------------------------------------------------- */

static void test_fast_vs_twin(int threads) {
    ms_rng r;
    ms_rng_seed(&r, 33);
    static const int64_t ns[] = {1, 3, 8, 11, 17, 64, 130}; /* AMX: partial row tiles, chunks of 64 */
    int packed = 0;
    for (int ti = 0; ti < N_TYPES; ti++) {
        const ms_dtype t = k_types[ti];
        int64_t ks[5];
        const int nk = ks_for(t, ks);
        if (threads == 1) {
            printf("  %-5s paths", ms_dtype_name(t));
            for (int l = 0; l < g_nlev; l++) {
                set_level(g_lev[l]);
                printf(" %s: %s", ms_isa_name(g_lev[l]), ms_qdot_path(t));
            }
            printf("\n");
        }
        for (int ki = 0; ki < nk; ki++) {
            const int64_t k = ks[ki], m = 67, nmax = 130;
            uint8_t *wd = make_weights(&r, t, m, k);
            ms_qweight w = ms_qweight_view(t, wd, m, k), wp[MS_ISA_COUNT];
            for (int l = 0; l < g_nlev; l++) { /* packed where that level reads the tile layout */
                set_level(g_lev[l]);
                wp[l] = w;
                MS_ASSERT(ms_qdot_pack(&wp[l]) == MS_OK);
                packed += wp[l].tiles != NULL;
            }
            float *x = make_x(&r, nmax, k), *bias = malloc((size_t)m * sizeof(float));
            for (int64_t j = 0; j < m; j++) bias[j] = (float)ms_rng_normal(&r);
            const size_t ny = (size_t)(nmax * m) + GUARD;
            float *y = malloc(ny * sizeof(float)), *yr = malloc(ny * sizeof(float));
            int32_t rows[9] = {66, 0, 5, 5, 31, 32, 64, 1, 40};
            float *z = malloc((size_t)(nmax * 9) * sizeof(float)), *zr = malloc((size_t)(nmax * 9) * sizeof(float));
            ms_q8_act a;
            MS_ASSERT(ms_q8_act_alloc(&a, nmax, k) == MS_OK);
            for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
                const int64_t n = ns[ni];
                const float *bb = (ni % 2) ? bias : NULL;
                /* the twin, once, over the scalar quantizer's activations */
                set_level(MS_ISA_SCALAR);
                ms_q8_quantize(&a, x, n, k);
                for (size_t i = 0; i < ny; i++) yr[i] = -12345.0f;
                ms_qdot_linear_ref(yr, &a, &w, bb);
                ms_qdot_linear_rows_ref(zr, &a, &w, rows, 9);
                for (int l = 0; l < g_nlev; l++) {
                    set_level(g_lev[l]);
                    ms_q8_quantize(&a, x, n, k); /* this level's quantizer: the same bytes */
                    int diff = 0;
                    /* as stored, then (where made) in the tile layout: the same bits */
                    for (const ms_qweight *ww = &w; ww; ww = ww == &w && wp[l].tiles ? &wp[l] : NULL) {
                        for (size_t i = 0; i < ny; i++) y[i] = -12345.0f;
                        ms_qdot_linear(y, &a, ww, bb);
                        int guard = 0;
                        diff = 0;
                        for (int64_t i = 0; i < n * m; i++) diff += !same(y[i], yr[i]);
                        for (size_t i = (size_t)(n * m); i < ny; i++) guard += y[i] != -12345.0f;
                        CHECK(diff == 0 && guard == 0,
                              "%s %s k=%lld n=%lld threads=%d%s: %d outputs differ from the twin, %d guards",
                              ms_isa_name(g_lev[l]), ms_dtype_name(t), (long long)k, (long long)n, threads,
                              ww == &w ? "" : " packed", diff, guard);
                    }
                    ms_qdot_linear_rows(z, &a, &w, rows, 9);
                    ms_qdot_linear(y, &a, &w, NULL);
                    diff = 0;
                    for (int64_t i = 0; i < n; i++)
                        for (int c = 0; c < 9; c++)
                            diff += !same(z[i * 9 + c], zr[i * 9 + c]) + !same(z[i * 9 + c], y[i * m + rows[c]]);
                    CHECK(diff == 0, "%s %s k=%lld n=%lld: rows variant %d differences", ms_isa_name(g_lev[l]),
                          ms_dtype_name(t), (long long)k, (long long)n, diff);
                }
            }
            ms_q8_act_free(&a);
            for (int l = 0; l < g_nlev; l++) ms_qdot_pack_free(&wp[l]);
            free(wd), free(x), free(bias), free(y), free(yr), free(z), free(zr);
        }
    }
    if (threads == 1) printf("  %d weights packed into the tile layout\n", packed);
}

/* ---- 4 ---------------------------------------------------------------------- */

static void test_invariance(int threads) {
    ms_rng r;
    ms_rng_seed(&r, 44);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const ms_dtype t = k_types[ti];
        const int64_t k = ms_dtype_block(t) == 256 ? 768 : 544, m = 41, N = 64;
        uint8_t *wd = make_weights(&r, t, m, k);
        ms_qweight w = ms_qweight_view(t, wd, m, k);
        float *x = make_x(&r, N, k);
        float *one = malloc((size_t)(N * m) * sizeof(float)), *y = malloc((size_t)(N * m) * sizeof(float));
        float *tw = malloc((size_t)(N * m) * sizeof(float));
        ms_q8_act a;
        MS_ASSERT(ms_q8_act_alloc(&a, N, k) == MS_OK);
        set_level(MS_ISA_SCALAR);
        for (int64_t i = 0; i < N; i++) { /* the thread-free twin, each row alone */
            ms_q8_quantize(&a, x + i * k, 1, k);
            ms_qdot_linear_ref(tw + i * m, &a, &w, NULL);
        }
        for (int l = 0; l < g_nlev; l++) {
            set_level(g_lev[l]);
            ms_qweight wp = w;
            MS_ASSERT(ms_qdot_pack(&wp) == MS_OK);
            for (int64_t i = 0; i < N; i++) { /* each row alone, this level */
                ms_q8_quantize(&a, x + i * k, 1, k);
                ms_qdot_linear(one + i * m, &a, &w, NULL);
            }
            int diff = 0;
            for (int64_t i = 0; i < N * m; i++) diff += !same(tw[i], one[i]);
            for (int64_t n = 1; n <= N; n++) {
                ms_q8_quantize(&a, x, n, k);
                ms_qdot_linear(y, &a, &w, NULL);
                for (int64_t i = 0; i < n * m; i++) diff += !same(y[i], one[i]);
                if (wp.tiles) {
                    ms_qdot_linear(y, &a, &wp, NULL);
                    for (int64_t i = 0; i < n * m; i++) diff += !same(y[i], one[i]);
                }
            }
            CHECK(diff == 0, "%s %s threads=%d: %d outputs of n-row products differ from the 1-row product",
                  ms_isa_name(g_lev[l]), ms_dtype_name(t), threads, diff);
            ms_qdot_pack_free(&wp);
        }
        ms_q8_act_free(&a);
        free(wd), free(x), free(one), free(y), free(tw);
    }
}

/* ---- 4b: several products of one x in one pool round ------------------------ */

/* ms_qdot_linear_multi over products of mixed dtypes and sizes (as q, k, v
 * of a layer): each output equals the scalar twin of its own product bit
 * for bit, nothing is written past it, for n = 1 (VNNI / AMX GEMV) up to
 * AMX-sized batches. */
static void test_multi(int threads) {
    ms_rng r;
    ms_rng_seed(&r, 45);
    const int64_t k = 768, nmax = 19;
    static const ms_dtype types[3] = {MS_DTYPE_Q4_K, MS_DTYPE_Q6_K, MS_DTYPE_Q8_0};
    static const int64_t ms[3] = {97, 33, 130};
    static const int64_t ns[] = {1, 2, 5, 19};
    uint8_t *wd[3];
    ms_qweight w[3];
    float *y[3], *yr[3];
    for (int i = 0; i < 3; i++) {
        wd[i] = make_weights(&r, types[i], ms[i], k);
        w[i] = ms_qweight_view(types[i], wd[i], ms[i], k);
        y[i] = malloc((size_t)(nmax * ms[i] + GUARD) * sizeof(float));
        yr[i] = malloc((size_t)(nmax * ms[i]) * sizeof(float));
    }
    float *x = make_x(&r, nmax, k), *bias = malloc((size_t)ms[0] * sizeof(float));
    for (int64_t j = 0; j < ms[0]; j++) bias[j] = (float)ms_rng_normal(&r);
    ms_q8_act a;
    MS_ASSERT(ms_q8_act_alloc(&a, nmax, k) == MS_OK);
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        const int64_t n = ns[ni];
        set_level(MS_ISA_SCALAR);
        ms_q8_quantize(&a, x, n, k);
        ms_qdot_out outs[3];
        for (int i = 0; i < 3; i++) {
            outs[i] = (ms_qdot_out){.y = y[i], .w = &w[i], .b = i == 0 ? bias : NULL};
            ms_qdot_linear_ref(yr[i], &a, &w[i], outs[i].b);
        }
        for (int l = 0; l < g_nlev; l++) {
            set_level(g_lev[l]);
            ms_q8_quantize(&a, x, n, k);
            for (int i = 0; i < 3; i++)
                for (int64_t e = 0; e < nmax * ms[i] + GUARD; e++) y[i][e] = -12345.0f;
            ms_qdot_linear_multi(outs, 3, &a);
            int diff = 0, guard = 0;
            for (int i = 0; i < 3; i++) {
                for (int64_t e = 0; e < n * ms[i]; e++) diff += !same(y[i][e], yr[i][e]);
                for (int64_t e = n * ms[i]; e < nmax * ms[i] + GUARD; e++) guard += y[i][e] != -12345.0f;
            }
            CHECK(diff == 0 && guard == 0, "%s multi n=%lld threads=%d: %d outputs differ from the twins, %d guards",
                  ms_isa_name(g_lev[l]), (long long)n, threads, diff, guard);
        }
    }
    ms_q8_act_free(&a);
    for (int i = 0; i < 3; i++) free(wd[i]), free(y[i]), free(yr[i]);
    free(x), free(bias);
}

/* ---- 5 ---------------------------------------------------------------------- */

/* ms_q8_quantize_forms: a product over the form its weight reads
 * (ms_q8_forms: Q4_K the per-super-block form, others the blocks) gives
 * the bits it gives after a full ms_q8_quantize, packed and not, across the
 * VNNI / AMX row counts; the form not asked for is marked absent. */
static void test_forms(int threads) {
    ms_rng r;
    ms_rng_seed(&r, 51);
    const int64_t k = 768, m = 67, nmax = 16;
    static const ms_dtype types[2] = {MS_DTYPE_Q4_K, MS_DTYPE_Q6_K};
    static const int64_t ns[] = {1, 6, 16};
    float *x = make_x(&r, nmax, k);
    float *y = malloc((size_t)(nmax * m) * sizeof(float)), *yf = malloc((size_t)(nmax * m) * sizeof(float));
    ms_q8_act a;
    MS_ASSERT(ms_q8_act_alloc(&a, nmax, k) == MS_OK);
    for (int ti = 0; ti < 2 * g_nlev; ti++) {
        set_level(g_lev[ti / 2]);
        uint8_t *wd = make_weights(&r, types[ti % 2], m, k);
        ms_qweight w = ms_qweight_view(types[ti % 2], wd, m, k), wp = w;
        MS_ASSERT(ms_qdot_pack(&wp) == MS_OK);
        const int want = ti % 2 == 0 ? MS_Q8_SUPER : MS_Q8_BLOCKS;
        CHECK(ms_q8_forms(&w) == want, "%s reads form %d, want %d", ms_dtype_name(types[ti % 2]), ms_q8_forms(&w), want);
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
            const int64_t n = ns[ni];
            for (const ms_qweight *ww = &w; ww; ww = ww == &w && wp.tiles ? &wp : NULL) {
                ms_q8_quantize(&a, x, n, k);
                ms_qdot_linear(y, &a, ww, NULL);
                ms_q8_quantize_forms(&a, x, n, k, want);
                CHECK(a.has_b == (want == MS_Q8_BLOCKS) && a.has_k == (want == MS_Q8_SUPER),
                      "%s n=%lld: forms made %d/%d", ms_dtype_name(types[ti % 2]), (long long)n, a.has_b, a.has_k);
                ms_qdot_linear(yf, &a, ww, NULL);
                int diff = 0;
                for (int64_t i = 0; i < n * m; i++) diff += !same(y[i], yf[i]);
                CHECK(diff == 0, "%s %s n=%lld threads=%d%s: %d outputs differ with only its form made",
                      ms_isa_name(g_lev[ti / 2]), ms_dtype_name(types[ti % 2]), (long long)n, threads, ww == &wp ? " packed" : "", diff);
            }
        }
        ms_qdot_pack_free(&wp);
        free(wd);
    }
    ms_q8_act_free(&a);
    free(x), free(y), free(yf);
}

static void test_accuracy(void) {
    ms_rng r;
    ms_rng_seed(&r, 55);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const ms_dtype t = k_types[ti];
        const int64_t k = 1536, m = 53, n = 4;
        uint8_t *wd = make_weights(&r, t, m, k);
        ms_qweight w = ms_qweight_view(t, wd, m, k);
        float *x = malloc((size_t)(n * k) * sizeof(float)), *wf = malloc((size_t)k * sizeof(float));
        for (int64_t i = 0; i < n * k; i++) x[i] = ms_rng_normal(&r);
        float *y8 = malloc((size_t)(n * m) * sizeof(float)), *yf = malloc((size_t)(n * m) * sizeof(float));
        ms_q8_act a;
        MS_ASSERT(ms_q8_act_alloc(&a, n, k) == MS_OK);
        ms_q8_quantize(&a, x, n, k);
        ms_qdot_linear(y8, &a, &w, NULL);
        ms_q_linear(yf, x, &w, NULL, n);
        double num = 0, den = 0;
        int over = 0;
        for (int64_t j = 0; j < m; j++) {
            ms_q_dequant_ref(t, (const uint8_t *)wd + (size_t)j * w.row_bytes, wf, k);
            for (int64_t i = 0; i < n; i++) {
                double bound = 0, mag = 0;
                for (int64_t e = 0; e < k; e++) {
                    bound += 0.5 * xd_of(t, &a, i, e) * fabs(wf[e]);
                    mag += fabs(wf[e] * x[i * k + e]);
                }
                const double dy = (double)y8[i * m + j] - yf[i * m + j];
                over += !(fabs(dy) <= bound * (1 + 1e-3) + 1e-5 * mag); /* a NaN is over */
                num += dy * dy;
                den += (double)yf[i * m + j] * yf[i * m + j];
            }
        }
        const double rel = sqrt(num / den);
        printf("  %-5s 8-bit activations vs f32: rms relative error %.3f %%\n", ms_dtype_name(t), 100 * rel);
        CHECK(over == 0, "%s: %d outputs past the activation-rounding bound", ms_dtype_name(t), over);
        CHECK(rel < 0.02, "%s: rms relative error %.4f", ms_dtype_name(t), rel);
        ms_q8_act_free(&a);
        free(wd), free(x), free(wf), free(y8), free(yf);
    }
}

/* Q4_K at the edges of its integer ranges: nibbles all 15 or all 0, sub-block
 * scales and mins 63, activations ±1 everywhere (qk = ±127, e = 5): the
 * sums the AMX path carries in 16-bit lanes reach their bounds (|Σ(q − 8)·qk|
 * = 32·8·127 with q = 0, |8·Q| = 8·32·127). Fast == twin bitwise, n rows
 * where that path runs and where it does not. */
static void test_q4k_extremes(void) {
    ms_rng r;
    ms_rng_seed(&r, 46);
    const int64_t m = 32, k = 512, N = 9;
    uint8_t *wd = make_weights(&r, MS_DTYPE_Q4_K, m, k);
    for (int64_t j = 0; j < m; j++)
        for (int64_t S = 0; S < k / 256; S++) {
            uint8_t *b = wd + (size_t)(j * (k / 256) + S) * 144;
            memset(b + 4, 0xFF, 12);                /* every 6-bit scale and min 63 */
            memset(b + 16, j % 2 ? 0x00 : 0xFF, 128); /* nibbles 0 or 15 */
        }
    ms_qweight w = ms_qweight_view(MS_DTYPE_Q4_K, wd, m, k);
    float *x = malloc((size_t)(N * k) * sizeof(float));
    for (int64_t i = 0; i < N * k; i++) x[i] = (i / k) % 2 ? -1.0f : 1.0f;
    float *y = malloc((size_t)(N * m) * sizeof(float)), *yr = malloc((size_t)(N * m) * sizeof(float));
    ms_q8_act a;
    MS_ASSERT(ms_q8_act_alloc(&a, N, k) == MS_OK);
    for (int l = 0; l < g_nlev; l++) {
        set_level(g_lev[l]);
        ms_qweight wp = w;
        MS_ASSERT(ms_qdot_pack(&wp) == MS_OK);
        int diff = 0;
        for (int64_t n = 1; n <= N; n++) {
            ms_q8_quantize(&a, x, n, k);
            ms_qdot_linear_ref(yr, &a, &w, NULL);
            ms_qdot_linear(y, &a, wp.tiles ? &wp : &w, NULL);
            for (int64_t i = 0; i < n * m; i++) diff += !same(y[i], yr[i]);
        }
        CHECK(diff == 0, "%s: Q4_K at its integer bounds: %d outputs differ from the twin", ms_isa_name(g_lev[l]),
              diff);
        ms_qdot_pack_free(&wp);
    }
    ms_q8_act_free(&a);
    free(wd), free(x), free(y), free(yr);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--isa-cap")) return isa_cap(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_qdot [--isa-cap LEVEL]\n");
        return 2;
    }
    /* 1 thread, then 2: the pool is started once (see set_threads) */
    find_levels();
    for (int l = 0; l < g_nlev; l++) { /* each level's quantizer against the definition */
        set_level(g_lev[l]);
        test_quantize();
        test_quantize_k();
    }
    test_twin_vs_naive();
    test_fast_vs_twin(1);
    test_invariance(1);
    test_multi(1);
    test_forms(1);
    set_threads(2);
    CHECK(ms_pool_threads() == 2, "pool threads %d", ms_pool_threads());
    test_fast_vs_twin(2);
    test_invariance(2);
    test_multi(2);
    test_forms(2);
    test_q4k_extremes();
    set_level(g_lev[g_nlev - 1]);
    test_accuracy();
    ms_pool_set_threads(1);
    if (g_fail) fprintf(stderr, "test_qdot: %d failures\n", g_fail);
    else printf("test_qdot: ok\n");
    return g_fail ? 1 : 0;
}
