/* ms_k_cuda_lmhead.cu — the draft LM-head step on the device (see
 * ms_k_cuda_lmhead.h): the dense GEMM (full / static / packed dynamic rows),
 * the −∞ mask past the window's device count, the indexed gather-GEMM
 * ablation, the static rows gather and the slot → id map. Everything is
 * enqueued on the op table's stream; nothing here reads a device value on
 * the host. */
#include "ms_k_cuda_lmhead.h"

#include "ms_k_cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

typedef __nv_bfloat16 bf16;
typedef __half f16;

/* Device flag raised (in the table's d_flags, next to MS_K_CUDA_FLAG_*) by the
 * indexed head for a slot whose id_of entry is out of [0, V); ms_k_cuda_sync
 * reports any raised flag as MS_ERR_RANGE. */
#define LMHEAD_FLAG_BAD_ID (1u << 8)

#define LMH_THREADS 256
#define LMH_WARPS (LMH_THREADS / 32)
#define LMH_MAX_BLOCKS 65535u

static ms_k_cuda_ctx *ctx_of(const ms_k_ops *ops) { return (ms_k_cuda_ctx *)ops->ctx; }

static unsigned grid_for(int64_t units, int64_t per_block) {
    const int64_t b = (units + per_block - 1) / per_block;
    return (unsigned)(b < 1 ? 1 : b < (int64_t)LMH_MAX_BLOCKS ? b : (int64_t)LMH_MAX_BLOCKS);
}

/* ---- loads -------------------------------------------------------------------- */

__device__ __forceinline__ float ld1(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ float ld1(const f16 *p) { return __half2float(*p); }

/* 8 act values of one 16-byte load, to f32. */
__device__ __forceinline__ void unpack8(uint4 u, float f[8], const bf16 *) {
    const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 t = __bfloat1622float2(p[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}
__device__ __forceinline__ void unpack8(uint4 u, float f[8], const f16 *) {
    const __half2 *p = reinterpret_cast<const __half2 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 t = __half22float2(p[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The device count clamped to [0, m]. */
__device__ __forceinline__ int64_t active_of(const int32_t *n_active, int64_t m) {
    const int64_t a = *n_active;
    return a < 0 ? 0 : a > m ? m : a;
}

/* ---- dense: cuBLAS ------------------------------------------------------------------ */

/* logits[n, m] (f32, ld) = h[n, d] · rows[m, d]ᵀ. Column-major view as in the
 * table's linear: logitsᵀ (m × n, ldc = ld) = rowsᵀᵀ · hᵀ with rows the
 * column-major d × m matrix (ld d) transposed and h the d × n matrix (ld d). */
extern "C" ms_status ms_k_cuda_lmhead_dense(const ms_k_ops *ops, float *logits, int64_t ld, const void *h,
                                            const void *rows, int64_t n, int64_t m, int64_t d) {
    if (n == 0) return MS_OK;
    if (n < 0 || m < 1 || d < 1 || ld < m || n > INT32_MAX || m > INT32_MAX || d > INT32_MAX || ld > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "cuda lm head: bad shape n %lld m %lld d %lld ld %lld", (long long)n, (long long)m,
                (long long)d, (long long)ld);
    if (!logits || !h || !rows) MS_FAIL(MS_ERR_INVALID, "cuda lm head: NULL buffer");
    ms_k_cuda_ctx *c = ctx_of(ops);
    const cudaDataType_t t = c->ops.act == MS_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f, beta = 0.0f;
    MS_CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)d, &alpha, rows, t, (int)d,
                               h, t, (int)d, &beta, logits, CUDA_R_32F, (int)ld, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
    return MS_OK;
}

/* ---- mask ----------------------------------------------------------------------------- */

/* One block per row: columns [*n_active, m) ← −∞. */
__global__ void k_lmhead_mask(float *logits, int64_t ld, int64_t m, const int32_t *n_active) {
    const int64_t a = active_of(n_active, m);
    float *row = logits + (int64_t)blockIdx.x * ld;
    for (int64_t j = a + threadIdx.x; j < m; j += blockDim.x) row[j] = -INFINITY;
}

extern "C" ms_status ms_k_cuda_lmhead_mask(const ms_k_ops *ops, float *logits, int64_t ld, int64_t n, int64_t m,
                                           const int32_t *n_active) {
    if (n == 0) return MS_OK;
    if (n < 0 || n > INT32_MAX || m < 1 || ld < m)
        MS_FAIL(MS_ERR_INVALID, "cuda lm head mask: bad shape n %lld m %lld ld %lld", (long long)n, (long long)m,
                (long long)ld);
    if (!logits || !n_active) MS_FAIL(MS_ERR_INVALID, "cuda lm head mask: NULL buffer");
    k_lmhead_mask<<<(unsigned)n, LMH_THREADS, 0, ctx_of(ops)->stream>>>(logits, ld, m, n_active);
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_lmhead_packed(const ms_k_ops *ops, float *logits, int64_t ld, const void *h,
                                             const void *rows, const int32_t *n_active, int64_t n, int64_t w_max,
                                             int64_t d) {
    MS_TRY(ms_k_cuda_lmhead_dense(ops, logits, ld, h, rows, n, w_max, d));
    return ms_k_cuda_lmhead_mask(ops, logits, ld, n, w_max, n_active);
}

/* ---- indexed: one warp per slot ---------------------------------------------------------- */

/* logits[r·ld + s] = h[r] · W[id_of[s]] (s < *n_active), −∞ beyond. Warp w
 * of block b takes slots b·LMH_WARPS + w, grid-stride. Each lane walks the
 * head row in 16-byte units (VEC) or single elements, keeping one f32
 * partial per query row in registers (fixed-index unrolled loops), then a
 * warp reduction per row; lane r stores row r. h (≤ 16 rows) is re-read by
 * every warp and stays in L1/L2; W rows are read once each. */
template <typename T, bool VEC>
__global__ void __launch_bounds__(LMH_THREADS)
    k_lmhead_indexed(float *logits, int64_t ld, const T *h, const T *W, int64_t V, const int32_t *id_of,
                     const int32_t *n_active, int n, int64_t w_max, int64_t d, unsigned *flags) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t a = active_of(n_active, w_max);
    for (int64_t s = (int64_t)blockIdx.x * LMH_WARPS + warp; s < w_max; s += (int64_t)gridDim.x * LMH_WARPS) {
        const int32_t id = s < a ? id_of[s] : -1;
        if (s >= a || id < 0 || id >= V) {
            if (s < a && lane == 0) atomicOr(flags, LMHEAD_FLAG_BAD_ID);
            if (lane < n) logits[(int64_t)lane * ld + s] = -INFINITY;
            continue;
        }
        float acc[MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS];
#pragma unroll
        for (int r = 0; r < MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS; r++) acc[r] = 0.0f;
        const T *wr = W + (int64_t)id * d;
        if (VEC) {
            const int64_t units = d / 8;
            const uint4 *w4 = reinterpret_cast<const uint4 *>(wr);
            const uint4 *h4 = reinterpret_cast<const uint4 *>(h);
            for (int64_t u = lane; u < units; u += 32) {
                float wf[8], hf[8];
                unpack8(__ldg(w4 + u), wf, (const T *)0);
#pragma unroll
                for (int r = 0; r < MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS; r++) {
                    if (r >= n) break;
                    unpack8(__ldg(h4 + (int64_t)r * units + u), hf, (const T *)0);
                    float p = 0.0f;
#pragma unroll
                    for (int i = 0; i < 8; i++) p = fmaf(wf[i], hf[i], p);
                    acc[r] += p;
                }
            }
        } else {
            for (int64_t k = lane; k < d; k += 32) {
                const float wv = ld1(wr + k);
#pragma unroll
                for (int r = 0; r < MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS; r++) {
                    if (r >= n) break;
                    acc[r] = fmaf(wv, ld1(h + (int64_t)r * d + k), acc[r]);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS; r++) {
            if (r >= n) break;
            const float v = warp_sum(acc[r]);
            if (lane == r) logits[(int64_t)r * ld + s] = v;
        }
    }
}

template <typename T>
static void launch_indexed(ms_k_cuda_ctx *c, bool vec, unsigned grid, float *logits, int64_t ld, const void *h,
                           const void *W, int64_t V, const int32_t *id_of, const int32_t *n_active, int n,
                           int64_t w_max, int64_t d) {
    if (vec)
        k_lmhead_indexed<T, true><<<grid, LMH_THREADS, 0, c->stream>>>(logits, ld, (const T *)h, (const T *)W, V, id_of,
                                                                       n_active, n, w_max, d, c->d_flags);
    else
        k_lmhead_indexed<T, false><<<grid, LMH_THREADS, 0, c->stream>>>(logits, ld, (const T *)h, (const T *)W, V,
                                                                        id_of, n_active, n, w_max, d, c->d_flags);
}

extern "C" ms_status ms_k_cuda_lmhead_indexed(const ms_k_ops *ops, float *logits, int64_t ld, const void *h,
                                              const void *W, int64_t V, const int32_t *id_of,
                                              const int32_t *n_active, int64_t n, int64_t w_max, int64_t d) {
    if (n < 1 || n > MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS || w_max < 1 || w_max > INT32_MAX || d < 1 || V < 1 ||
        ld < w_max)
        MS_FAIL(MS_ERR_INVALID, "cuda indexed lm head: bad shape n %lld (1..%d) W_max %lld d %lld V %lld ld %lld",
                (long long)n, MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS, (long long)w_max, (long long)d, (long long)V,
                (long long)ld);
    if (!logits || !h || !W || !id_of || !n_active) MS_FAIL(MS_ERR_INVALID, "cuda indexed lm head: NULL buffer");
    ms_k_cuda_ctx *c = ctx_of(ops);
    const bool vec = d % 8 == 0 && (uintptr_t)h % 16 == 0 && (uintptr_t)W % 16 == 0;
    const unsigned grid = grid_for(w_max, LMH_WARPS);
    if (c->ops.act == MS_DTYPE_BF16)
        launch_indexed<bf16>(c, vec, grid, logits, ld, h, W, V, id_of, n_active, (int)n, w_max, d);
    else
        launch_indexed<f16>(c, vec, grid, logits, ld, h, W, V, id_of, n_active, (int)n, w_max, d);
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

/* ---- static rows: one gather at setup ------------------------------------------------------ */

/* rows[j] = W[ids[j]], one block per row (grid-stride); U the copy unit. */
template <typename U>
__global__ void k_gather_rows(U *rows, const U *W, const int32_t *ids, int64_t k, int64_t units) {
    for (int64_t j = blockIdx.x; j < k; j += gridDim.x) {
        const U *src = W + (int64_t)ids[j] * units;
        U *dst = rows + j * units;
        for (int64_t i = threadIdx.x; i < units; i += blockDim.x) dst[i] = src[i];
    }
}

extern "C" ms_status ms_k_cuda_static_rows_new(const ms_k_ops *ops, const void *W, int64_t V, int64_t d,
                                               const int32_t *ids, int64_t k, void **rows, int32_t **d_ids) {
    MS_ASSERT(rows);
    *rows = NULL;
    if (d_ids) *d_ids = NULL;
    if (V < 1 || V > INT32_MAX || d < 1 || k < 1 || k > V)
        MS_FAIL(MS_ERR_INVALID, "cuda static rows: bad shape V %lld d %lld K %lld (1 <= K <= V)", (long long)V,
                (long long)d, (long long)k);
    if (!W || !ids) MS_FAIL(MS_ERR_INVALID, "cuda static rows: NULL W or id list");
    for (int64_t j = 0; j < k; j++)
        if (ids[j] < 0 || ids[j] >= V)
            MS_FAIL(MS_ERR_INVALID, "cuda static rows: id %d at position %lld out of [0, %lld)", ids[j], (long long)j,
                    (long long)V);
    size_t row_bytes, bytes;
    if (!ms_mul_size((size_t)d, 2, &row_bytes) || !ms_mul_size(row_bytes, (size_t)k, &bytes))
        MS_FAIL(MS_ERR_INVALID, "cuda static rows: %lld rows of %lld overflow", (long long)k, (long long)d);
    ms_k_cuda_ctx *c = ctx_of(ops);
    int32_t *dev_ids = NULL;
    ms_status st = ms_k_cuda_malloc((void **)&dev_ids, (size_t)k * sizeof(int32_t));
    if (st == MS_OK) st = ms_k_cuda_malloc(rows, bytes);
    if (st == MS_OK) st = ms_k_cuda_upload(ops, dev_ids, ids, (size_t)k * sizeof(int32_t));
    if (st == MS_OK) {
        const unsigned grid = grid_for(k, 1);
        if (row_bytes % 16 == 0 && (uintptr_t)W % 16 == 0 && (uintptr_t)*rows % 16 == 0)
            k_gather_rows<uint4><<<grid, 128, 0, c->stream>>>((uint4 *)*rows, (const uint4 *)W, dev_ids, k,
                                                             (int64_t)(row_bytes / 16));
        else
            k_gather_rows<uint16_t><<<grid, 128, 0, c->stream>>>((uint16_t *)*rows, (const uint16_t *)W, dev_ids, k,
                                                                d);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream); /* setup: the ids may go now */
        if (e != cudaSuccess) {
            MS_LOG_ERROR("cuda static rows: gather: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
            st = ms_k_cuda_status_of(e);
        }
    }
    if (st != MS_OK || !d_ids) ms_k_cuda_free((void **)&dev_ids);
    if (st != MS_OK) {
        ms_k_cuda_free(rows);
        return st;
    }
    if (d_ids) *d_ids = dev_ids;
    return MS_OK;
}

/* ---- slots → ids ------------------------------------------------------------------------------ */

__global__ void k_slots_to_ids(int32_t *ids, const int32_t *slots, int64_t n, const int32_t *id_of, int64_t n_slots,
                               const int32_t *n_active) {
    const int64_t lim = n_active ? active_of(n_active, n_slots) : n_slots;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t s = slots[i];
        ids[i] = s < 0 || s >= lim ? -1 : id_of ? id_of[s] : (int32_t)s;
    }
}

extern "C" ms_status ms_k_cuda_slots_to_ids(const ms_k_ops *ops, int32_t *ids, const int32_t *slots, int64_t n,
                                            const int32_t *id_of, int64_t n_slots, const int32_t *n_active) {
    if (n == 0) return MS_OK;
    if (n < 0 || n_slots < 1 || n_slots > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "cuda slots to ids: n %lld, %lld slots", (long long)n, (long long)n_slots);
    if (!ids || !slots) MS_FAIL(MS_ERR_INVALID, "cuda slots to ids: NULL buffer");
    k_slots_to_ids<<<grid_for(n, LMH_THREADS), LMH_THREADS, 0, ctx_of(ops)->stream>>>(ids, slots, n, id_of, n_slots,
                                                                                       n_active);
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

/* ---- benchmark helpers ---------------------------------------------------------------------------- */

/* splitmix64 of (seed, i): 53 bits to [0, 1). */
__device__ __forceinline__ double hash_unit(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

template <typename T> __device__ __forceinline__ void st1(T *p, float v);
template <> __device__ __forceinline__ void st1<bf16>(bf16 *p, float v) { *p = __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ void st1<f16>(f16 *p, float v) { *p = __float2half_rn(v); }

template <typename T> __global__ void k_fill_uniform(T *x, int64_t n, uint64_t seed, float lo, float span) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st1<T>(x + i, lo + span * (float)hash_unit(seed, (uint64_t)i));
}

extern "C" ms_status ms_k_cuda_fill_uniform(const ms_k_ops *ops, void *x, int64_t n, uint64_t seed, float lo,
                                            float hi) {
    if (n == 0) return MS_OK;
    if (n < 0 || !x) MS_FAIL(MS_ERR_INVALID, "cuda fill: n %lld", (long long)n);
    ms_k_cuda_ctx *c = ctx_of(ops);
    const unsigned grid = grid_for(n, LMH_THREADS);
    if (c->ops.act == MS_DTYPE_BF16)
        k_fill_uniform<bf16><<<grid, LMH_THREADS, 0, c->stream>>>((bf16 *)x, n, seed, lo, hi - lo);
    else
        k_fill_uniform<f16><<<grid, LMH_THREADS, 0, c->stream>>>((f16 *)x, n, seed, lo, hi - lo);
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

__global__ void k_busy_wait(int64_t ns) {
    uint64_t start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
        uint64_t now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if ((int64_t)(now - start) >= ns) break;
        __nanosleep(1000);
    }
}

extern "C" ms_status ms_k_cuda_busy_wait(const ms_k_ops *ops, double us) {
    if (!(us >= 0) || us > 1e7) MS_FAIL(MS_ERR_INVALID, "cuda busy wait: %g us", us);
    k_busy_wait<<<1, 1, 0, ctx_of(ops)->stream>>>((int64_t)(us * 1000.0));
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}
