/* ms_k_cuda_kernels.cu — the CUDA twins of the CPU reference ops
 * (kernels/cpu/ms_k_cpu.c, the specification) and of the f32 row ops
 * (kernels/cpu/ms_k_rows.c). Activations are BF16 or F16 in memory and f32
 * in registers: every kernel loads with ld(), computes in f32 and rounds once
 * with st(). Kernels are templated on the activation type only (two
 * instantiations each) to keep CI compile time low. Correct first: simple
 * grid-stride loops, one block per row for reductions, one block per
 * (head, query) for attention. */
#include "ms_k_cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

typedef __nv_bfloat16 bf16;
typedef __half f16;

__device__ __forceinline__ float ld(const float *p) { return *p; }
__device__ __forceinline__ float ld(const f16 *p) { return __half2float(*p); }
__device__ __forceinline__ float ld(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(f16 *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void st(bf16 *p, float v) { *p = __float2bfloat16_rn(v); }

#define THREADS 256         /* element-wise and row kernels */
#define MAX_BLOCKS (1 << 20) /* grid-stride loops cover the rest */

static unsigned blocks_for(int64_t total) {
    int64_t b = (total + THREADS - 1) / THREADS;
    return (unsigned)(b < MAX_BLOCKS ? b : MAX_BLOCKS);
}

#define GRID_STRIDE(i, total)                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (total);          \
         i += (int64_t)gridDim.x * blockDim.x)

/* Dispatch on the table's act dtype once per op: f(tag<T>{}) with T the
 * storage type. */
template <typename T> struct tag {
    typedef T type;
};
template <typename F> static void by_act(ms_dtype act, F &&f) {
    if (act == MS_DTYPE_BF16)
        f(tag<bf16>());
    else
        f(tag<f16>());
}

/* ---- block reductions (blockDim.x a multiple of 32, ≤ 1024; every thread
 * calls; the result is returned to every thread) ---------------------------- */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The leading barrier keeps a previous call's readers of red[] ahead of
 * this call's writers; every warp then reduces the per-warp partials itself,
 * so no third barrier is needed to broadcast. */
__device__ float block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    return warp_sum(lane < nw ? red[lane] : 0.0f);
}
__device__ double block_sum_d(double v, double *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    return warp_sum_d(lane < nw ? red[lane] : 0.0);
}
/* fmaxf ignores NaN, like the CPU's `x > mx` scans. */
__device__ float block_max(float v, float *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    return warp_max(lane < nw ? red[lane] : -INFINITY);
}

/* ---- linear's bias ------------------------------------------------------------ */

template <typename T> __global__ void k_fill_bias(T *y, const T *b, int64_t n, int64_t m) {
    GRID_STRIDE(i, n * m) y[i] = b[i % m];
}

ms_status ms_k_cuda_fill_bias(ms_k_cuda_ctx *c, void *y, const void *b, int64_t n, int64_t m) {
    by_act(c->ops.act, [&](auto t) {
        using T = typename decltype(t)::type;
        k_fill_bias<T><<<blocks_for(n * m), THREADS, 0, c->stream>>>((T *)y, (const T *)b, n, m);
    });
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

/* ---- rmsnorm: one block per row ------------------------------------------------ */

/* y = x / sqrt(mean(x²) + eps) · w. Alias-safe: each thread rewrites only the
 * elements it read, after the reduction's barriers. */
template <typename T> __global__ void k_rmsnorm(T *y, const T *x, const T *w, int64_t d, float eps) {
    __shared__ float red[32];
    const T *xr = x + (int64_t)blockIdx.x * d;
    T *yr = y + (int64_t)blockIdx.x * d;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = ld(xr + i);
        ss += v * v;
    }
    ss = block_sum(ss, red);
    const float s = 1.0f / sqrtf(ss / (float)d + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) st(yr + i, ld(w + i) * (s * ld(xr + i)));
}

static ms_status cu_rmsnorm(ms_k_cuda_ctx *c, void *y, const void *x, const void *w, int64_t n, int64_t d,
                            float eps) {
    if (n <= 0 || d <= 0) return MS_OK;
    if (n > INT32_MAX) MS_FAIL(MS_ERR_RANGE, "cuda rmsnorm: %lld rows", (long long)n);
    by_act(c->ops.act, [&](auto t) {
        using T = typename decltype(t)::type;
        k_rmsnorm<T><<<(unsigned)n, THREADS, 0, c->stream>>>((T *)y, (const T *)x, (const T *)w, d, eps);
    });
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

void ms_k_cuda_op_rmsnorm(void *ctx, void *y, const void *x, const void *w, int64_t n, int64_t d, float eps) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ctx;
    ms_k_cuda_record(c, cu_rmsnorm(c, y, x, w, n, d, eps));
}

/* ---- add, silu_glu ----------------------------------------------------------------- */

template <typename T> __global__ void k_add(T *y, const T *x, int64_t n) {
    GRID_STRIDE(i, n) st(y + i, ld(y + i) + ld(x + i));
}

static ms_status cu_add(ms_k_cuda_ctx *c, void *y, const void *x, int64_t n) {
    if (n <= 0) return MS_OK;
    by_act(c->ops.act, [&](auto t) {
        using T = typename decltype(t)::type;
        k_add<T><<<blocks_for(n), THREADS, 0, c->stream>>>((T *)y, (const T *)x, n);
    });
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

void ms_k_cuda_op_add(void *ctx, void *y, const void *x, int64_t n) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ctx;
    ms_k_cuda_record(c, cu_add(c, y, x, n));
}

template <typename T> __global__ void k_silu_glu(T *y, const T *g, const T *u, int64_t n) {
    GRID_STRIDE(i, n) {
        const float gv = ld(g + i);
        st(y + i, gv / (1.0f + expf(-gv)) * ld(u + i));
    }
}

static ms_status cu_silu_glu(ms_k_cuda_ctx *c, void *y, const void *gate, const void *up, int64_t n) {
    if (n <= 0) return MS_OK;
    by_act(c->ops.act, [&](auto t) {
        using T = typename decltype(t)::type;
        k_silu_glu<T><<<blocks_for(n), THREADS, 0, c->stream>>>((T *)y, (const T *)gate, (const T *)up, n);
    });
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

void ms_k_cuda_op_silu_glu(void *ctx, void *y, const void *gate, const void *up, int64_t n) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ctx;
    ms_k_cuda_record(c, cu_silu_glu(c, y, gate, up, n));
}

/* ---- rope: rotate-half, one thread per (row, head, pair) ---------------------------- */

template <typename T>
__global__ void k_rope(T *x, int64_t n, int64_t n_heads, int64_t hd, const int32_t *pos, const float *cs,
                       const float *sn, int64_t max_pos, unsigned *flags) {
    const int64_t half = hd / 2;
    GRID_STRIDE(idx, n * n_heads * half) {
        const int64_t i = idx % half, rh = idx / half, r = rh / n_heads;
        const int32_t p = pos[r];
        if (p < 0 || p >= max_pos) {
            atomicOr(flags, (unsigned)MS_K_CUDA_FLAG_ROPE_POS);
            continue;
        }
        T *v = x + rh * hd;
        const float a = ld(v + i), b = ld(v + i + half);
        const float c = cs[(int64_t)p * half + i], s = sn[(int64_t)p * half + i];
        st(v + i, a * c - b * s);
        st(v + i + half, a * s + b * c);
    }
}

static ms_status cu_rope(ms_k_cuda_ctx *c, void *x, int64_t n, int64_t n_heads, int64_t hd, const int32_t *pos,
                         const ms_k_rope *t) {
    MS_ASSERT(t->half == hd / 2);
    if (n <= 0 || n_heads <= 0 || hd < 2) return MS_OK;
    by_act(c->ops.act, [&](auto tg) {
        using T = typename decltype(tg)::type;
        k_rope<T><<<blocks_for(n * n_heads * (hd / 2)), THREADS, 0, c->stream>>>(
            (T *)x, n, n_heads, hd, pos, t->cos, t->sin, t->max_pos, c->d_flags);
    });
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

void ms_k_cuda_op_rope(void *ctx, void *x, int64_t n, int64_t n_heads, int64_t hd, const int32_t *pos,
                       const ms_k_rope *table) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ctx;
    ms_k_cuda_record(c, cu_rope(c, x, n, n_heads, hd, pos, table));
}

/* ---- embed: gather + convert ------------------------------------------------------------ */

template <typename T, typename TT>
__global__ void k_embed(T *y, const TT *table, const int32_t *ids, int64_t n, int64_t d, unsigned *flags) {
    GRID_STRIDE(idx, n * d) {
        const int64_t r = idx / d, j = idx % d;
        const int32_t id = ids[r];
        if (id < 0) {
            if (j == 0) atomicOr(flags, (unsigned)MS_K_CUDA_FLAG_EMBED_ID);
            continue;
        }
        st(y + idx, ld(table + (int64_t)id * d + j));
    }
}

static ms_status cu_embed(ms_k_cuda_ctx *c, void *y, const void *table, ms_dtype td, const int32_t *ids, int64_t n,
                          int64_t d) {
    if (td != MS_DTYPE_F32 && td != MS_DTYPE_F16 && td != MS_DTYPE_BF16)
        MS_FAIL(MS_ERR_UNSUPPORTED, "cuda embed: table dtype %s", ms_dtype_name(td));
    if (n <= 0 || d <= 0) return MS_OK;
    const unsigned nb = blocks_for(n * d);
    by_act(c->ops.act, [&](auto t) {
        using T = typename decltype(t)::type;
        if (td == MS_DTYPE_F32)
            k_embed<T, float><<<nb, THREADS, 0, c->stream>>>((T *)y, (const float *)table, ids, n, d, c->d_flags);
        else if (td == MS_DTYPE_F16)
            k_embed<T, f16><<<nb, THREADS, 0, c->stream>>>((T *)y, (const f16 *)table, ids, n, d, c->d_flags);
        else
            k_embed<T, bf16><<<nb, THREADS, 0, c->stream>>>((T *)y, (const bf16 *)table, ids, n, d, c->d_flags);
    });
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

void ms_k_cuda_op_embed(void *ctx, void *y, const void *table, ms_dtype table_dtype, const int32_t *ids, int64_t n,
                        int64_t d) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ctx;
    ms_k_cuda_record(c, cu_embed(c, y, table, table_dtype, ids, n, d));
}

/* ---- move_rows: KV compaction ------------------------------------------------------------- */

/* Row i's column j only ever meets column j of other rows, so one thread per
 * column replaying the moves in ascending i gives exactly the CPU's
 * sequential memmove result, overlaps included, with no barrier. W is a
 * 2-byte element, or 16 bytes (8 elements) when rows and base allow. */
template <typename W>
__global__ void k_move_rows(W *cache, int64_t row_w, const int64_t *src, const int64_t *dst, int64_t n) {
    GRID_STRIDE(j, row_w) {
        for (int64_t i = 0; i < n; i++) {
            const int64_t s = src[i], d = dst[i];
            if (s != d) cache[d * row_w + j] = cache[s * row_w + j];
        }
    }
}

static ms_status cu_move_rows(ms_k_cuda_ctx *c, void *cache, int64_t row_elems, const int64_t *src,
                              const int64_t *dst, int64_t n) {
    if (n <= 0 || row_elems <= 0) return MS_OK;
    if (row_elems % 8 == 0 && (uintptr_t)cache % 16 == 0) {
        const int64_t row_w = row_elems / 8;
        k_move_rows<uint4><<<blocks_for(row_w), THREADS, 0, c->stream>>>((uint4 *)cache, row_w, src, dst, n);
    } else {
        k_move_rows<uint16_t>
            <<<blocks_for(row_elems), THREADS, 0, c->stream>>>((uint16_t *)cache, row_elems, src, dst, n);
    }
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

void ms_k_cuda_op_move_rows(void *ctx, void *cache, int64_t row_elems, const int64_t *src, const int64_t *dst,
                            int64_t n) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ctx;
    ms_k_cuda_record(c, cu_move_rows(c, cache, row_elems, src, dst, n));
}

/* ---- attention ------------------------------------------------------------------------------ */

/* One block per (head h, query i, split z). A block walks its rows in
 * chunks of ATT_CHUNK: scores of a chunk go to shared memory, then an online
 * softmax (running max m and sum l, the accumulator rescaled by
 * e^(m_old − m_new), FlashAttention, Dao et al. 2022, §3.1) folds the chunk
 * into acc[hd], so any context length fits in (2·hd + ATT_CHUNK) floats of
 * shared memory. Visibility is the CPU's: causal rows ≤ ctx + i; with a
 * mask, every row < base and row base + j iff bit j, up to the highest set
 * bit. A query that sees no row at all gets zeros (the CPU's sum == 0 case).
 *
 * Split-KV (flash-decoding): when (query, head) pairs are too few to fill
 * the device (decode), gridDim.z splits cover consecutive ranges of
 * rows_per_split rows; each writes its unnormalised (m, l, acc[hd]) to
 * part[((i·n_heads + h)·splits + z)·(hd + 2)] and k_attn_combine merges them:
 * out = Σ_z acc_z·e^(m_z − M) / Σ_z l_z·e^(m_z − M), M = max_z m_z. Without a
 * split (part == NULL) the block normalises and stores the output itself. */
#define ATT_THREADS 128
#define ATT_CHUNK 1024
#define ATT_SPLIT_ROWS 512 /* fewest rows worth a split of their own */
#define ATT_MAX_SPLITS 32

template <typename T>
__global__ void __launch_bounds__(ATT_THREADS)
    k_attention(T *out, float *part, const T *q, const T *kc, const T *vc, ms_k_attn_shape s, const uint64_t *mask,
                int64_t base, int64_t rows_per_split) {
    extern __shared__ float sm[];
    __shared__ float red[32];
    const int64_t hd = s.head_dim, kv_dim = s.n_kv_heads * hd, group = s.n_heads / s.n_kv_heads;
    const int64_t h = blockIdx.x, i = blockIdx.y, z = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    float *qs = sm, *acc = sm + hd, *p = sm + 2 * hd; /* q[hd] | acc[hd] | p[ATT_CHUNK] */

    const T *qh = q + (i * s.n_heads + h) * hd;
    const T *kh = kc + (h / group) * hd, *vh = vc + (h / group) * hd;
    for (int64_t e = tid; e < hd; e += blockDim.x) {
        qs[e] = ld(qh + e);
        acc[e] = 0.0f;
    }
    const uint64_t mk = mask ? mask[i] : 0;
    const int64_t n_rows = mask ? base + (64 - __clzll((long long)(mk | 1))) : s.ctx + i + 1;
    const int64_t r_begin = z * rows_per_split;
    const int64_t r_end = n_rows < r_begin + rows_per_split ? n_rows : r_begin + rows_per_split;
    __syncthreads();

    float m_run = -INFINITY, l_run = 0.0f; /* the same in every thread: built from block reductions */
    for (int64_t c0 = r_begin; c0 < r_end; c0 += ATT_CHUNK) {
        const int cn = (int)(r_end - c0 < ATT_CHUNK ? r_end - c0 : ATT_CHUNK);
        /* scores: a warp per row, lanes split the head dimension */
        for (int r = warp; r < cn; r += nwarps) {
            const int64_t t = c0 + r;
            const T *kt = kh + t * kv_dim;
            float dot = 0.0f;
            for (int64_t e = lane; e < hd; e += 32) dot += qs[e] * ld(kt + e);
            dot = warp_sum(dot);
            if (lane == 0) {
                float sc = dot * s.scale;
                if (mask && t >= base && !((mk >> (t - base)) & 1u)) sc = -INFINITY;
                p[r] = sc;
            }
        }
        __syncthreads();
        float cmax = -INFINITY;
        for (int r = tid; r < cn; r += blockDim.x) cmax = fmaxf(cmax, p[r]);
        cmax = block_max(cmax, red);
        const float m_new = fmaxf(m_run, cmax);
        float csum = 0.0f;
        for (int r = tid; r < cn; r += blockDim.x) {
            const float e = p[r] == -INFINITY ? 0.0f : expf(p[r] - m_new);
            p[r] = e;
            csum += e;
        }
        csum = block_sum(csum, red); /* its barriers also publish p[] */
        const float alpha = m_run == -INFINITY ? 0.0f : expf(m_run - m_new);
        l_run = l_run * alpha + csum;
        m_run = m_new;
        /* acc[e] belongs to thread e (mod blockDim) for the whole kernel */
        for (int64_t e = tid; e < hd; e += blockDim.x) {
            float a = acc[e] * alpha;
            const T *ve = vh + c0 * kv_dim + e;
            for (int r = 0; r < cn; r++) a += p[r] * ld(ve + r * kv_dim);
            acc[e] = a;
        }
        __syncthreads(); /* p[] is rewritten by the next chunk */
    }
    if (part) {
        float *pp = part + ((i * s.n_heads + h) * gridDim.z + z) * (hd + 2);
        if (tid == 0) {
            pp[0] = m_run;
            pp[1] = l_run;
        }
        for (int64_t e = tid; e < hd; e += blockDim.x) pp[2 + e] = acc[e];
        return;
    }
    const float inv = l_run > 0.0f ? 1.0f / l_run : 0.0f;
    T *oh = out + (i * s.n_heads + h) * hd;
    for (int64_t e = tid; e < hd; e += blockDim.x) st(oh + e, acc[e] * inv);
}

/* Merges the splits of one (head, query): block (h, i). A split that saw no
 * row (m = −inf) weighs nothing; no row anywhere gives zeros. */
template <typename T>
__global__ void __launch_bounds__(ATT_THREADS)
    k_attn_combine(T *out, const float *part, int64_t n_heads, int64_t hd, int splits) {
    const int64_t h = blockIdx.x, i = blockIdx.y, stride = hd + 2;
    const float *pp = part + (i * n_heads + h) * splits * stride;
    float mx = -INFINITY;
    for (int z = 0; z < splits; z++) mx = fmaxf(mx, pp[z * stride]);
    float l = 0.0f;
    for (int z = 0; z < splits; z++)
        if (pp[z * stride] != -INFINITY) l += pp[z * stride + 1] * expf(pp[z * stride] - mx);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    T *oh = out + (i * n_heads + h) * hd;
    for (int64_t e = threadIdx.x; e < hd; e += blockDim.x) {
        float a = 0.0f;
        for (int z = 0; z < splits; z++)
            if (pp[z * stride] != -INFINITY) a += pp[z * stride + 2 + e] * expf(pp[z * stride] - mx);
        st(oh + e, a * inv);
    }
}

/* Splits per (query, head): enough blocks for two waves over the
 * multiprocessors, each split at least ATT_SPLIT_ROWS rows, at most
 * ATT_MAX_SPLITS. 1 = no split (prefill, verify, short contexts). */
static int attn_splits(const ms_k_cuda_ctx *c, int64_t pairs, int64_t max_rows) {
    int64_t by_rows = max_rows / ATT_SPLIT_ROWS;
    int64_t by_fill = (2 * (int64_t)c->n_sm + pairs - 1) / pairs;
    int64_t sp = by_rows < by_fill ? by_rows : by_fill;
    if (sp > ATT_MAX_SPLITS) sp = ATT_MAX_SPLITS;
    return sp < 2 ? 1 : (int)sp;
}

static ms_status cu_attention(ms_k_cuda_ctx *c, void *out, const void *q, const void *kc, const void *vc,
                              const ms_k_attn_shape *s, const uint64_t *mask) {
    /* The CPU twin's preconditions, checked the same way (programmer errors). */
    MS_ASSERT(s->n_kv_heads > 0 && s->n_heads % s->n_kv_heads == 0);
    MS_ASSERT(!mask || (s->mask_back >= 0 && s->mask_back <= s->ctx && s->mask_back + s->n_q <= 64));
    if (s->n_q <= 0 || s->n_heads <= 0 || s->head_dim <= 0) return MS_OK;
    if (s->n_q > 65535 || s->n_heads > INT32_MAX)
        MS_FAIL(MS_ERR_RANGE, "cuda attention: %lld queries x %lld heads past the grid", (long long)s->n_q,
                (long long)s->n_heads);
    const size_t smem = (size_t)(2 * s->head_dim + ATT_CHUNK) * sizeof(float);
    if (smem > 48 * 1024) MS_FAIL(MS_ERR_UNSUPPORTED, "cuda attention: head_dim %lld", (long long)s->head_dim);
    const int64_t base = mask ? s->ctx - s->mask_back : s->ctx;
    /* the most rows any query can see (with a mask: base + mask_back + n_q) */
    const int64_t max_rows = s->ctx + s->n_q;
    const int splits = attn_splits(c, s->n_q * s->n_heads, max_rows);
    const int64_t rows_per_split = (max_rows + splits - 1) / splits;
    float *part = NULL;
    if (splits > 1) {
        const size_t need = (size_t)(s->n_q * s->n_heads * splits) * (size_t)(s->head_dim + 2) * sizeof(float);
        if (need > c->attn_ws_bytes) { /* grows once to the largest decode shape; not per token */
            cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
            MS_CUDA_TRY(cudaStreamIsCapturing(c->stream, &cs));
            if (cs != cudaStreamCaptureStatusNone)
                MS_FAIL(MS_ERR_INTERNAL, "cuda attention: workspace of %zu bytes needed while capturing a graph "
                                         "(reserve it first: ms_k_cuda_attn_reserve)", need);
            ms_k_cuda_free((void **)&c->d_attn_ws);
            c->attn_ws_bytes = 0;
            MS_TRY(ms_k_cuda_malloc((void **)&c->d_attn_ws, need));
            c->attn_ws_bytes = need;
        }
        part = c->d_attn_ws;
    }
    const dim3 grid((unsigned)s->n_heads, (unsigned)s->n_q, (unsigned)splits);
    by_act(c->ops.act, [&](auto t) {
        using T = typename decltype(t)::type;
        k_attention<T><<<grid, ATT_THREADS, smem, c->stream>>>((T *)out, part, (const T *)q, (const T *)kc,
                                                                (const T *)vc, *s, mask, base, rows_per_split);
        if (splits > 1)
            k_attn_combine<T><<<dim3((unsigned)s->n_heads, (unsigned)s->n_q), ATT_THREADS, 0, c->stream>>>(
                (T *)out, part, s->n_heads, s->head_dim, splits);
    });
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_attn_reserve(const ms_k_ops *ops, int64_t max_q, int64_t n_heads, int64_t head_dim,
                                            int64_t max_rows) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ops->ctx;
    if (max_q <= 0 || n_heads <= 0 || head_dim <= 0 || max_rows <= 0)
        MS_FAIL(MS_ERR_INVALID, "cuda attn reserve: %lld queries, %lld heads, hd %lld, %lld rows", (long long)max_q,
                (long long)n_heads, (long long)head_dim, (long long)max_rows);
    /* cu_attention's sizing for every n_q ≤ max_q; its splits only grow with
     * the rows seen, so max_rows gives each n_q its largest need */
    size_t need = 0;
    for (int64_t q = 1; q <= max_q; q++) {
        const int sp = attn_splits(c, q * n_heads, max_rows);
        if (sp < 2) continue;
        size_t b;
        if (!ms_mul_size((size_t)(q * n_heads * sp), (size_t)(head_dim + 2) * sizeof(float), &b))
            MS_FAIL(MS_ERR_RANGE, "cuda attn reserve: workspace size overflows");
        if (b > need) need = b;
    }
    if (need <= c->attn_ws_bytes) return MS_OK;
    ms_k_cuda_free((void **)&c->d_attn_ws);
    c->attn_ws_bytes = 0;
    MS_TRY(ms_k_cuda_malloc((void **)&c->d_attn_ws, need));
    c->attn_ws_bytes = need;
    return MS_OK;
}

void ms_k_cuda_op_attention(void *ctx, void *out, const void *q, const void *kc, const void *vc,
                            const ms_k_attn_shape *s, const uint64_t *mask, float *scratch) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ctx;
    ms_k_cuda_record(c, cu_attention(c, out, q, kc, vc, s, mask));
}

/* ---- row ops on f32 logits ------------------------------------------------------------------ */

/* ms_k_log_softmax per row: max ignoring NaN; all −inf → −log n; the sum of
 * e^(x − max) and its log in double, as on the CPU. Alias-safe as rmsnorm. */
__global__ void k_log_softmax_rows(float *y, const float *x, int64_t n, int64_t ldx) {
    __shared__ float red[32];
    __shared__ double redd[32];
    const float *xr = x + (int64_t)blockIdx.x * ldx;
    float *yr = y + (int64_t)blockIdx.x * ldx;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        if (xr[j] > mx) mx = xr[j];
    mx = block_max(mx, red);
    if (mx == -INFINITY) { /* the same in every thread */
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = -logf((float)n);
        return;
    }
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp((double)xr[j] - mx);
    sum = block_sum_d(sum, redd);
    const double ls = log(sum);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = (float)(((double)xr[j] - mx) - ls);
}

extern "C" ms_status ms_k_cuda_log_softmax_rows(const ms_k_ops *ops, float *y, const float *x, int64_t rows,
                                                int64_t n, int64_t ld) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ops->ctx;
    if (n < 1 || ld < n || rows < 0 || rows > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "cuda log_softmax_rows: rows %lld n %lld ld %lld", (long long)rows, (long long)n,
                (long long)ld);
    if (rows == 0) return MS_OK;
    k_log_softmax_rows<<<(unsigned)rows, THREADS, 0, c->stream>>>(y, x, n, ld);
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

/* "a ranks above b" as in ms_k_topk: larger value, ties to the lower index,
 * NaN last; an empty slot (index −1) ranks below everything. */
__device__ __forceinline__ bool ranks_above(float va, int32_t ia, float vb, int32_t ib) {
    if (ib < 0) return ia >= 0;
    if (ia < 0) return false;
    if (isnan(vb)) return !isnan(va) || ia < ib;
    if (isnan(va)) return false;
    return va > vb || (va == vb && ia < ib);
}

/* One block per row. Each thread keeps its best TOPK_MAX candidates sorted
 * in registers (fully unrolled insertion: no run-time register indexing);
 * then k rounds of a block-wide arg-max over the threads' heads, the winner
 * popping its head. */
#define TOPK_MAX MS_K_CUDA_TOPK_MAX
__global__ void __launch_bounds__(THREADS)
    k_topk_rows(const float *x, int64_t n, int64_t ldx, int k, int32_t *idx, float *val) {
    __shared__ float sv[32];
    __shared__ int32_t si[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const float *xr = x + (int64_t)blockIdx.x * ldx;
    float lv[TOPK_MAX];
    int32_t li[TOPK_MAX];
#pragma unroll
    for (int j = 0; j < TOPK_MAX; j++) {
        lv[j] = -INFINITY;
        li[j] = -1;
    }
    for (int64_t jj = threadIdx.x; jj < n; jj += blockDim.x) {
        float cv = xr[jj];
        int32_t ci = (int32_t)jj;
        if (!ranks_above(cv, ci, lv[TOPK_MAX - 1], li[TOPK_MAX - 1])) continue;
#pragma unroll
        for (int j = 0; j < TOPK_MAX; j++) {
            if (ranks_above(cv, ci, lv[j], li[j])) {
                const float tv = lv[j];
                const int32_t ti = li[j];
                lv[j] = cv;
                li[j] = ci;
                cv = tv;
                ci = ti;
            }
        }
    }
    for (int r = 0; r < k; r++) {
        float bv = lv[0];
        int32_t bi = li[0];
        for (int o = 16; o; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ranks_above(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            sv[warp] = bv;
            si[warp] = bi;
        }
        __syncthreads();
        bv = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : -1;
        for (int o = 16; o; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ranks_above(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (threadIdx.x == 0) {
            idx[(int64_t)blockIdx.x * k + r] = bi;
            val[(int64_t)blockIdx.x * k + r] = bv;
        }
        if (li[0] == bi) { /* indices are unique: exactly one thread pops */
#pragma unroll
            for (int j = 0; j < TOPK_MAX - 1; j++) {
                lv[j] = lv[j + 1];
                li[j] = li[j + 1];
            }
            lv[TOPK_MAX - 1] = -INFINITY;
            li[TOPK_MAX - 1] = -1;
        }
        __syncthreads(); /* sv/si are rewritten next round */
    }
}

extern "C" ms_status ms_k_cuda_topk_rows(const ms_k_ops *ops, int32_t *idx, float *val, const float *x, int64_t rows,
                                         int64_t n, int64_t ld, int64_t k) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ops->ctx;
    if (k < 1 || k > TOPK_MAX || k > n || n > INT32_MAX || ld < n || rows < 0 || rows > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "cuda topk_rows: rows %lld n %lld ld %lld k %lld (k in [1, %d], k <= n)",
                (long long)rows, (long long)n, (long long)ld, (long long)k, TOPK_MAX);
    if (rows == 0) return MS_OK;
    k_topk_rows<<<(unsigned)rows, THREADS, 0, c->stream>>>(x, n, ld, (int)k, idx, val);
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}
