/* ms_k_cpu.c — the C reference for every op in the table (f32 activations).
 *
 * These loops are the specification the CUDA twins are tested against, so
 * they stay plain: one output element's arithmetic is readable in one place.
 * GEMM goes through OpenBLAS (single thread by default: at batch 1 the
 * matrices are small and thread hand-off costs more than it saves).
 */
#include "ms_kernels.h"
#include "ms_pool.h"
#include "ms_k_hot.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Clang contracts a·b + c into an FMA where the target has one (the AVX-512
 * copies of ms_k_hot.h): off, so every copy computes the same bits (GCC does
 * not contract in ISO C mode). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Hot loops are compiled for AVX-512 / AVX2 / baseline and picked per call by
 * the active ISA level (ms_k_hot.h); the arithmetic is the same. */
/* Helpers of hot loops: inlined, so each clone gets them for its target. */
#define MS_INLINE static inline __attribute__((always_inline))

void ms_k_cpu_set_threads(int n) {
    openblas_set_num_threads(n > 0 ? n : 1);
    ms_pool_set_threads(n); /* the quantized matmuls (ms_quant.h) */
}

int ms_k_cpu_cores(void) { return ms_pool_cores(); }

void ms_k_cpu_fix_blas_core(char **argv) {
#if defined(__x86_64__)
    if (getenv("OPENBLAS_CORETYPE")) return; /* the user's choice, or our re-exec already happened */
    const char *core = openblas_get_corename();
    if (!core || (strcasecmp(core, "prescott") != 0 && strcasecmp(core, "core2") != 0)) return;
    __builtin_cpu_init();
    const char *want = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2") ? "Haswell"
                                                         : NULL;
    if (!want) return;
    MS_LOG_DEBUG("OpenBLAS fell back to %s kernels; re-running with OPENBLAS_CORETYPE=%s", core, want);
    setenv("OPENBLAS_CORETYPE", want, 1);
    /* Also start OpenBLAS without its idle thread pool, which spins in
     * sched_yield after start-up; ms_k_cpu_set_threads can still raise it. */
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    execv("/proc/self/exe", argv);
    MS_LOG_WARN("re-exec with OPENBLAS_CORETYPE=%s failed; continuing with %s kernels", want, core);
#else
    (void)argv;
#endif
}

/* y[n,m] = x[n,k] · W[m,k]ᵀ (+ b). */
static void cpu_gemm(void *ctx, void *yv, const void *xv, const void *wv, const void *bv, int64_t n, int64_t k,
                     int64_t m) {
    float *y = yv;
    const float *x = xv, *w = wv, *b = bv;
    if (n == 1) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)m, (blasint)k, 1.0f, w, (blasint)k, x, 1, 0.0f, y, 1);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)m, (blasint)k, 1.0f, x,
                    (blasint)k, w, (blasint)k, 0.0f, y, (blasint)m);
    }
    if (b) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) y[i * m + j] += b[j];
    }
}

/* y = x / sqrt(mean(x²) + eps) · w, per row of d. */
MS_HOT_IMPL(cpu_rmsnorm)(void *ctx, void *yv, const void *xv, const void *wv, int64_t n, int64_t d, float eps) {
    float *y = yv;
    const float *x = xv, *w = wv;
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        float ss = 0.0f;
        for (int64_t i = 0; i < d; i++) ss += xr[i] * xr[i];
        float s = 1.0f / sqrtf(ss / (float)d + eps);
        for (int64_t i = 0; i < d; i++) yr[i] = w[i] * (s * xr[i]);
    }
}
MS_HOT_CLONES(cpu_rmsnorm, (void *ctx, void *yv, const void *xv, const void *wv, int64_t n, int64_t d, float eps), (ctx, yv, xv, wv, n, d, eps))

static void cpu_add(void *ctx, void *yv, const void *xv, int64_t n) {
    float *y = yv;
    const float *x = xv;
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

/* Rotate-half RoPE: pairs (i, i + hd/2) of each head, angle pos·inv_freq[i]. */
static void cpu_rope(void *ctx, void *xv, int64_t n, int64_t n_heads, int64_t hd, const int32_t *pos,
                     const ms_k_rope *t) {
    float *x = xv;
    int64_t half = hd / 2;
    MS_ASSERT(t->half == half);
    for (int64_t r = 0; r < n; r++) {
        MS_ASSERT(pos[r] >= 0 && pos[r] < t->max_pos);
        const float *c = t->cos + (int64_t)pos[r] * half;
        const float *s = t->sin + (int64_t)pos[r] * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *v = x + (r * n_heads + h) * hd;
            for (int64_t i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = a * s[i] + b * c[i];
            }
        }
    }
}


/* e^x for x ≤ 0 as a pure-arithmetic polynomial so loops over it vectorise:
 * x = n·ln2 + r, |r| ≤ ln2/2, e^r by a degree-6 Taylor/Horner polynomial
 * (relative error < 2e-7 on the range), 2^n through the exponent bits.
 * Needs strict IEEE float evaluation (no -ffast-math) for the rounding trick.
 * Inputs below −87 flush to 0 (callers zero masked entries themselves). */
static inline float exp_neg(float x) {
    if (x < -87.0f) x = -87.0f;
    /* round to nearest by adding and removing 1.5·2^23 (|x·log2 e| ≤ 126 here):
     * no libm call, so the loop stays vectorised */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union {
        float f;
        int32_t i;
    } s = {.i = ((int32_t)n + 127) << 23};
    return p * s.f;
}

/* Sums in a fixed order that vectorises: element e goes to lane e mod 16
 * (whole runs of 16 first, then the tail into lanes 0..), and the 16 lanes
 * are folded by halves (l + 8, then + 4, + 2, + 1). A plain `s += a[e]` is
 * one dependent add per element under strict IEEE evaluation: at head_dim
 * 128 over a few hundred cached rows that made attention a sixth of a
 * decode step. The order depends only on n, so a (row, head) pair gets the
 * same bits alone or in a batch.
 *
 * The 16 lanes are held as LV_N pieces of the widest vector every copy of
 * ms_k_hot.h handles natively (x86: 8 floats, a ymm; else 4, a NEON or SSE
 * register): a 64-byte vector in the AVX2 copy was split by the compiler
 * through the stack (stores of pieces reloaded whole, the accumulators
 * spilled each row), and attention took 28 % of a decode step at a 350-token
 * context on the AVX2 path. Lane l is element l mod LV_W of piece l / LV_W,
 * so every lane sees the same operations as before: the same bits. */
#if defined(__x86_64__)
#define LV_W 8
#else
#define LV_W 4
#endif
#define LV_N (16 / LV_W)
typedef float ms_lv __attribute__((vector_size(4 * LV_W)));

typedef float ms_lv4 __attribute__((vector_size(16)));
typedef float ms_lv2 __attribute__((vector_size(8)));

/* The 16 lanes plus the tail (a·b, or a where b is NULL) in lanes 0..,
 * folded by halves on vectors: l + 8, + 4, + 2, + 1 (a scalar loop over
 * the lanes in memory was a chain of store-to-load waits, once per
 * attention score). */
MS_INLINE float lanes_fold(const ms_lv *p, const float *a, const float *b, int64_t tail) {
    ms_lv q[LV_N];
    memcpy(q, p, sizeof q);
    if (tail > 0) {
        float l[16];
        memcpy(l, p, sizeof l);
        for (int64_t e = 0; e < tail; e++) l[e] += b ? a[e] * b[e] : a[e];
        memcpy(q, l, sizeof q);
    }
#if LV_W == 8
    const ms_lv s8 = q[0] + q[1];
    const ms_lv4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
#else
    const ms_lv4 s4 = (q[0] + q[2]) + (q[1] + q[3]);
#endif
    const ms_lv2 s2 = __builtin_shufflevector(s4, s4, 0, 1) + __builtin_shufflevector(s4, s4, 2, 3);
    return s2[0] + s2[1];
}

MS_INLINE float dot_lanes(const float *a, const float *b, int64_t n) {
    ms_lv p[LV_N] = {{0}}, va, vb;
    int64_t e = 0;
    for (; e + 16 <= n; e += 16)
        for (int j = 0; j < LV_N; j++) {
            memcpy(&va, a + e + LV_W * j, sizeof va);
            memcpy(&vb, b + e + LV_W * j, sizeof vb);
            p[j] += va * vb;
        }
    return lanes_fold(p, a + e, b + e, n - e);
}

MS_INLINE float sum_lanes(const float *a, int64_t n) {
    ms_lv p[LV_N] = {{0}}, va;
    int64_t e = 0;
    for (; e + 16 <= n; e += 16)
        for (int j = 0; j < LV_N; j++) {
            memcpy(&va, a + e + LV_W * j, sizeof va);
            p[j] += va;
        }
    return lanes_fold(p, a + e, NULL, n - e);
}

/* out[e] = Σ_t p[t]·v[row(t)·stride + e] for e < n, summed over t in order;
 * row(t) = t below `base`, else idx[t − base] (idx NULL: row(t) = t). The
 * sums of 64 columns at a time stay in registers (the obvious loop loads,
 * adds and stores out[] once per row t). */
MS_INLINE const float *row_at(const float *v, int64_t t, int64_t stride, int64_t base, const int32_t *idx) {
    return v + (idx && t >= base ? (int64_t)idx[t - base] : t) * stride;
}

MS_INLINE void weighted_rows(float *out, const float *p, const float *v, int64_t rows, int64_t stride, int64_t n,
                             int64_t base, const int32_t *idx) {
    enum { WR_PIECES = 8, WR_COLS = WR_PIECES * LV_W }; /* accumulators a pass: 8 registers */
    int64_t c = 0;
    for (; c + WR_COLS <= n; c += WR_COLS) {
        ms_lv a[WR_PIECES] = {{0}}, x;
        for (int64_t t = 0; t < rows; t++) {
            const float *vr = row_at(v, t, stride, base, idx) + c;
            for (int u = 0; u < WR_PIECES; u++) {
                memcpy(&x, vr + LV_W * u, sizeof(x));
                a[u] += p[t] * x;
            }
        }
        memcpy(out + c, a, sizeof(a));
    }
    for (; c + LV_W <= n; c += LV_W) {
        ms_lv a = {0}, x;
        for (int64_t t = 0; t < rows; t++) {
            memcpy(&x, row_at(v, t, stride, base, idx) + c, sizeof(x));
            a += p[t] * x;
        }
        memcpy(out + c, &a, sizeof(a));
    }
    for (; c < n; c++) {
        float a = 0.0f;
        for (int64_t t = 0; t < rows; t++) a += p[t] * row_at(v, t, stride, base, idx)[c];
        out[c] = a;
    }
}

/* Causal / tree-masked GQA attention over a KV cache (see ms_k_attn_shape).
 * Per query row and head: scores over the visible rows, softmax, weighted
 * sum of their V rows. One (row, head) pair is always computed by this one
 * loop body, so splitting the pairs over threads does not change a bit.
 * Under a mask the visible rows of the masked region are first compacted
 * (in row order) behind the committed ones, so the sums see the same
 * sequence of values in the same lanes as a causal query at that depth: a
 * tree node's output is the bits of the same token decoded after its path,
 * wherever its ancestors sit in the batch (summed over the candidate rows
 * with the hidden ones as zeros, a node off the tree's first chain got
 * other lanes and other roundings). */
typedef struct {
    float *out;
    const float *q, *kc, *vc;
    const ms_k_attn_shape *s;
    const uint64_t *mask;
    float *scratch;  /* [parts, ctx + n_q] */
    int64_t parts;   /* pool parts the pairs are split into */
} attn_job;

/* (row, head) pairs [p0, p1) with att [ctx + n_q] of scratch. */
MS_HOT_IMPL(attn_pairs)(const attn_job *J, int64_t p0, int64_t p1, float *att) {
    const ms_k_attn_shape *s = J->s;
    const uint64_t *mask = J->mask;
    const float *q = J->q, *kc = J->kc, *vc = J->vc;
    const int64_t hd = s->head_dim, kv_dim = s->n_kv_heads * hd, group = s->n_heads / s->n_kv_heads;
    const int64_t base = mask ? s->ctx - s->mask_back : s->ctx; /* first row the mask governs */
    for (int64_t p = p0; p < p1; p++) {
        const int64_t i = p / s->n_heads, h = p % s->n_heads;
        /* Rows past the last visible one never count: causal rows > ctx + i,
         * masked rows past the highest set bit. */
        const int64_t n_rows = mask ? base + (64 - __builtin_clzll(mask[i] | 1)) : s->ctx + i + 1;
        /* Sliding window: committed rows below t0 are out of reach. */
        int64_t t0 = 0;
        if (s->window > 0) {
            const int64_t lo = (int64_t)s->q_pos[i] - s->window + 1;
            t0 = lo < 0 ? 0 : lo > base ? base : lo;
        }
        const float *qh = q + (i * s->n_heads + h) * hd;
        const float *kh = kc + (h / group) * hd, *vh = vc + (h / group) * hd;
        float mx = -INFINITY;
        for (int64_t t = 0; t < t0; t++) att[t] = -INFINITY;
        for (int64_t t = t0; t < n_rows; t++) att[t] = dot_lanes(qh, kh + t * kv_dim, hd) * s->scale;
        int64_t n_vis = n_rows;
        int32_t vis[64]; /* masked region: the visible rows, in order */
        if (mask) {
            n_vis = base;
            for (int64_t t = base; t < n_rows; t++)
                if ((mask[i] >> (t - base)) & 1u) {
                    vis[n_vis - base] = (int32_t)t;
                    att[n_vis++] = att[t];
                }
        }
        for (int64_t t = 0; t < n_vis; t++) mx = att[t] > mx ? att[t] : mx;
        for (int64_t t = 0; t < n_vis; t++) att[t] = att[t] == -INFINITY ? 0.0f : exp_neg(att[t] - mx);
        const float sum = sum_lanes(att, n_vis);
        float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        float *oh = J->out + (i * s->n_heads + h) * hd;
        for (int64_t t = 0; t < n_vis; t++) att[t] *= inv;
        weighted_rows(oh, att, vh, n_vis, kv_dim, hd, base, mask ? vis : NULL);
    }
}
MS_HOT_CLONES(attn_pairs, (const attn_job *J, int64_t p0, int64_t p1, float *att), (J, p0, p1, att))

/* The least work (multiply-adds of q·K, about as many of p·V) that is split over the pool. */
enum { ATTN_SPLIT_MIN = 1 << 16 };

/* Pool part t of J->parts: its share of the pairs, its own scratch row. */
static void attn_part(void *arg, int64_t t0, int64_t t1) {
    const attn_job *J = arg;
    const int64_t pairs = J->s->n_q * J->s->n_heads, stride = J->s->ctx + J->s->n_q;
    for (int64_t t = t0; t < t1; t++)
        attn_pairs(J, pairs * t / J->parts, pairs * (t + 1) / J->parts, J->scratch + t * stride);
}

static void cpu_attention(void *ctx, void *outv, const void *qv, const void *kcv, const void *vcv,
                          const ms_k_attn_shape *s, const uint64_t *mask, float *att) {
    (void)ctx;
    MS_ASSERT(s->n_heads % s->n_kv_heads == 0);
    MS_ASSERT(!mask || (s->mask_back >= 0 && s->mask_back <= s->ctx && s->mask_back + s->n_q <= 64));
    attn_job J = {.out = outv, .q = qv, .kc = kcv, .vc = vcv, .s = s, .mask = mask, .scratch = att, .parts = 1};
    const int64_t pairs = s->n_q * s->n_heads;
    /* split only work worth a pool round (a decode step at a short context is not) */
    if (s->scratch_parts > 1 && pairs * (s->ctx + s->n_q) * s->head_dim >= ATTN_SPLIT_MIN) {
        J.parts = ms_pool_threads();
        if (J.parts > s->scratch_parts) J.parts = s->scratch_parts;
        if (J.parts > pairs) J.parts = pairs;
    }
    if (J.parts <= 1) attn_pairs(&J, 0, pairs, att);
    else ms_pool_run(attn_part, &J, J.parts, 1);
}

/* The gated activations, y = act(g) · u elementwise, over the pool in
 * ranges of at least GLU_GRAIN elements from GLU_SPLIT_MIN on (a decode
 * step's 8,960 expf of the 1.5B's FFN took ~30 µs a layer on one thread).
 * Each element's value is the same function of its inputs whatever the
 * split. */
enum { GLU_GRAIN = 1024, GLU_SPLIT_MIN = 4096 };

typedef struct {
    float *y;
    const float *g, *u;
} glu_job;

#if defined(__x86_64__) && defined(MS_HAVE_MVEC)
#include <immintrin.h>
#define GLU_AVX512 __attribute__((target("avx512f")))
/* glibc's vector expf (libmvec, the x86_64 vector function ABI), 16 lanes. */
GLU_AVX512 __m512 _ZGVeN16v_expf(__m512 x);

/* SiLU-GLU 16 elements a step, the tail masked, so every element takes the
 * same expf (libmvec's, not the scalar one: they may differ in the last
 * bit) whatever n and the split; then the scalar loop's steps, g / (1 + e)
 * then · u, no fused operation. */
GLU_AVX512 static void silu_v16(float *y, const float *g, const float *u, int64_t i, int64_t e) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    for (; i < e; i += 16) {
        const __mmask16 k = e - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (e - i)) - 1u);
        const __m512 gv = _mm512_maskz_loadu_ps(k, g + i), uv = _mm512_maskz_loadu_ps(k, u + i);
        const __m512 ex = _ZGVeN16v_expf(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(gv), sign)));
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, ex)), uv));
    }
}

#define GLU_AVX2 __attribute__((target("avx2")))
/* libmvec's AVX2 expf, 8 lanes (its results may differ in the last bit
 * from the 16-lane one: a level computes the same bits on every machine
 * that runs it, not across levels). */
GLU_AVX2 __m256 _ZGVdN8v_expf(__m256 x);

/* silu_v16 on AVX2: 8 elements a step, the tail through a zero-padded
 * copy (every element takes the same expf whatever n and the split). */
GLU_AVX2 static void silu_v8(float *y, const float *g, const float *u, int64_t i, int64_t e) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    for (; i < e; i += 8) {
        __m256 gv, uv;
        float gt[8] = {0}, ut[8] = {0}, yt[8];
        const int64_t c = e - i >= 8 ? 8 : e - i;
        if (c == 8) {
            gv = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
        } else {
            memcpy(gt, g + i, (size_t)c * sizeof(float));
            memcpy(ut, u + i, (size_t)c * sizeof(float));
            gv = _mm256_loadu_ps(gt), uv = _mm256_loadu_ps(ut);
        }
        const __m256 ex = _ZGVdN8v_expf(_mm256_xor_ps(gv, sign));
        const __m256 v = _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, ex)), uv);
        if (c == 8) {
            _mm256_storeu_ps(y + i, v);
        } else {
            _mm256_storeu_ps(yt, v);
            memcpy(y + i, yt, (size_t)c * sizeof(float));
        }
    }
}
#endif

MS_HOT_IMPL(silu_scalar)(float *y, const float *g, const float *u, int64_t i, int64_t e) {
    for (; i < e; i++) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
MS_HOT_CLONES(silu_scalar, (float *y, const float *g, const float *u, int64_t i, int64_t e), (y, g, u, i, e))

static void silu_part(void *arg, int64_t i0, int64_t i1) {
    const glu_job *J = arg;
#if defined(__x86_64__) && defined(MS_HAVE_MVEC)
    const ms_isa l = ms_isa_active();
    if (ms_isa_includes(l, MS_ISA_AVX512)) {
        silu_v16(J->y, J->g, J->u, i0, i1);
        return;
    }
    if (ms_isa_includes(l, MS_ISA_AVX2)) {
        silu_v8(J->y, J->g, J->u, i0, i1);
        return;
    }
#endif
    silu_scalar(J->y, J->g, J->u, i0, i1);
}

/* GELU, tanh approximation (Gemma's gelu_pytorch_tanh):
 * 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))). */
MS_HOT_IMPL(gelu_part)(void *arg, int64_t i0, int64_t i1) {
    const glu_job *J = arg;
    const float c = 0.7978845608028654f; /* sqrt(2/π) */
    for (int64_t i = i0; i < i1; i++) {
        const float x = J->g[i];
        J->y[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * J->u[i];
    }
}
MS_HOT_CLONES(gelu_part, (void *arg, int64_t i0, int64_t i1), (arg, i0, i1))

static void glu_run(ms_pool_fn fn, void *yv, const void *gv, const void *uv, int64_t n) {
    glu_job J = {.y = yv, .g = gv, .u = uv};
    if (n < GLU_SPLIT_MIN) fn(&J, 0, n);
    else ms_pool_run(fn, &J, n, GLU_GRAIN);
}

static void cpu_silu_glu(void *ctx, void *yv, const void *gv, const void *uv, int64_t n) {
    (void)ctx;
    glu_run(silu_part, yv, gv, uv, n);
}

static void cpu_gelu_glu(void *ctx, void *yv, const void *gv, const void *uv, int64_t n) {
    (void)ctx;
    glu_run(gelu_part, yv, gv, uv, n);
}

static void cpu_scale(void *ctx, void *yv, float sc, int64_t n) {
    float *y = yv;
    for (int64_t i = 0; i < n; i++) y[i] *= sc;
}

static void cpu_embed(void *ctx, void *yv, const void *table, ms_dtype table_dtype, const int32_t *ids, int64_t n,
                      int64_t d) {
    float *y = yv;
    size_t row_bytes = (size_t)d * ms_dtype_size(table_dtype);
    for (int64_t i = 0; i < n; i++)
        ms_convert_to_f32(y + i * d, (const char *)table + (size_t)ids[i] * row_bytes, table_dtype, d);
}

static void cpu_move_rows(void *ctx, void *cache, int64_t row_elems, const int64_t *src, const int64_t *dst,
                          int64_t n) {
    float *c = cache;
    for (int64_t i = 0; i < n; i++)
        if (src[i] != dst[i]) memmove(c + dst[i] * row_elems, c + src[i] * row_elems, (size_t)row_elems * 4);
}

static const ms_k_ops cpu_ops = {
    .name = "cpu-f32",
    .act = MS_DTYPE_F32,
    .weight = MS_DTYPE_F32,
    .ctx = NULL,
    .gemm = cpu_gemm,
    .rmsnorm = cpu_rmsnorm,
    .add = cpu_add,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .silu_glu = cpu_silu_glu,
    .gelu_glu = cpu_gelu_glu,
    .scale = cpu_scale,
    .embed = cpu_embed,
    .move_rows = cpu_move_rows,
};

const ms_k_ops *ms_k_cpu_ops(void) { return &cpu_ops; }
