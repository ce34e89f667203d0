/* ms_k_cuda.cu — the CUDA op table: device discovery, error mapping, memory
 * helpers, table lifetime and the GEMM (cuBLAS). The element-wise, attention
 * and row kernels are in ms_k_cuda_kernels.cu. */
#include "ms_k_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>

extern "C" int ms_k_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

extern "C" ms_status ms_k_cuda_device_info(int dev, char *buf, size_t cap) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "cuda device %d: %s", dev, cudaGetErrorString(e));
        return MS_ERR_NOT_FOUND;
    }
    snprintf(buf, cap, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return MS_OK;
}

ms_status ms_k_cuda_status_of(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return MS_OK;
    case cudaErrorMemoryAllocation: return MS_ERR_NOMEM;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidDevicePointer: return MS_ERR_INVALID;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice: return MS_ERR_UNSUPPORTED;
    default: return MS_ERR_INTERNAL;
    }
}

ms_status ms_k_cublas_status_of(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return MS_OK;
    case CUBLAS_STATUS_ALLOC_FAILED: return MS_ERR_NOMEM;
    case CUBLAS_STATUS_INVALID_VALUE: return MS_ERR_INVALID;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return MS_ERR_UNSUPPORTED;
    default: return MS_ERR_INTERNAL;
    }
}

/* ---- memory ------------------------------------------------------------------ */

extern "C" ms_status ms_k_cuda_malloc(void **p, size_t bytes) {
    *p = NULL;
    if (bytes == 0) return MS_OK;
    MS_CUDA_TRY(cudaMalloc(p, bytes));
    return MS_OK;
}

extern "C" void ms_k_cuda_free(void **p) {
    if (!p || !*p) return;
    cudaError_t e = cudaFree(*p);
    if (e != cudaSuccess)
        ms_log_msg(MS_LOG_WARN, __FILE__, __LINE__, "cudaFree: %s", cudaGetErrorString(e));
    *p = NULL;
}

static cudaStream_t stream_of(const ms_k_ops *ops) {
    return ops ? ((const ms_k_cuda_ctx *)ops->ctx)->stream : (cudaStream_t)0;
}

extern "C" ms_status ms_k_cuda_upload(const ms_k_ops *ops, void *dev, const void *host, size_t bytes) {
    if (bytes == 0) return MS_OK;
    cudaStream_t st = stream_of(ops);
    MS_CUDA_TRY(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, st));
    MS_CUDA_TRY(cudaStreamSynchronize(st));
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_download(const ms_k_ops *ops, void *host, const void *dev, size_t bytes) {
    if (bytes == 0) return MS_OK;
    cudaStream_t st = stream_of(ops);
    MS_CUDA_TRY(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, st));
    MS_CUDA_TRY(cudaStreamSynchronize(st));
    return MS_OK;
}

/* ---- RoPE table ----------------------------------------------------------------- */

extern "C" ms_status ms_k_cuda_rope_upload(const ms_k_rope *host, ms_k_rope *dev) {
    dev->max_pos = dev->half = 0;
    dev->cos = dev->sin = NULL;
    size_t bytes;
    if (host->max_pos <= 0 || host->half <= 0 ||
        !ms_mul_size((size_t)host->max_pos, (size_t)host->half * sizeof(float), &bytes))
        MS_FAIL(MS_ERR_INVALID, "rope upload: bad table %lld x %lld", (long long)host->max_pos,
                (long long)host->half);
    ms_status st = ms_k_cuda_malloc((void **)&dev->cos, bytes);
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&dev->sin, bytes);
    if (st == MS_OK) st = ms_k_cuda_upload(NULL, dev->cos, host->cos, bytes);
    if (st == MS_OK) st = ms_k_cuda_upload(NULL, dev->sin, host->sin, bytes);
    if (st != MS_OK) {
        ms_k_cuda_rope_free(dev);
        return st;
    }
    dev->max_pos = host->max_pos;
    dev->half = host->half;
    return MS_OK;
}

extern "C" void ms_k_cuda_rope_free(ms_k_rope *dev) {
    ms_k_cuda_free((void **)&dev->cos);
    ms_k_cuda_free((void **)&dev->sin);
    dev->max_pos = dev->half = 0;
}

/* ---- gemm (cuBLAS) ------------------------------------------------------------------ */

/* y[n,m] = x[n,k] · W[m,k]ᵀ (+ b). cuBLAS is column-major: the row-major
 * y[n,m] is the column-major m×n matrix yᵀ = W·xᵀ, with W seen as the
 * column-major k×m matrix (ld k) transposed and x as k×n (ld k). A bias is
 * broadcast into y first and added by beta = 1, so y is rounded to act once. */
static ms_status cu_gemm(ms_k_cuda_ctx *c, void *y, const void *x, const void *w, const void *b, int64_t n,
                         int64_t k, int64_t m) {
    if (n <= 0 || m <= 0) return MS_OK;
    if (n > INT32_MAX || k > INT32_MAX || m > INT32_MAX)
        MS_FAIL(MS_ERR_RANGE, "cuda gemm: shape %lld x %lld x %lld past cuBLAS's int range", (long long)n,
                (long long)k, (long long)m);
    const cudaDataType_t t = c->ops.act == MS_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f;
    float beta = 0.0f;
    if (b) {
        MS_TRY(ms_k_cuda_fill_bias(c, y, b, n, m));
        beta = 1.0f;
    }
    MS_CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &alpha, w, t, (int)k, x,
                               t, (int)k, &beta, y, t, (int)m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return MS_OK;
}

static void op_gemm(void *ctx, void *y, const void *x, const void *w, const void *b, int64_t n, int64_t k,
                    int64_t m) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ctx;
    ms_k_cuda_record(c, cu_gemm(c, y, x, w, b, n, k, m));
}

/* ---- the table ---------------------------------------------------------------------- */

extern "C" const ms_k_ops *ms_k_cuda_ops(ms_dtype act_dtype, void *stream) {
    if (act_dtype != MS_DTYPE_BF16 && act_dtype != MS_DTYPE_F16) {
        MS_LOG_ERROR("cuda ops: activation dtype %s unsupported (BF16 or F16)", ms_dtype_name(act_dtype));
        return NULL;
    }
    if (ms_k_cuda_device_count() == 0) {
        MS_LOG_ERROR("cuda ops: no CUDA device");
        return NULL;
    }
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ms_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->stream = (cudaStream_t)stream;
    ms_status st = MS_OK;
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        MS_LOG_ERROR("cublasCreate: %s", cublasGetStatusString(bs));
        c->blas = NULL;
        st = MS_ERR_INTERNAL;
    }
    if (st == MS_OK && (bs = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS) {
        MS_LOG_ERROR("cublasSetStream: %s", cublasGetStatusString(bs));
        st = MS_ERR_INTERNAL;
    }
    if (st == MS_OK) {
        int dev = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&c->n_sm, cudaDevAttrMultiProcessorCount, dev);
        if (e != cudaSuccess) {
            MS_LOG_ERROR("cuda ops: device attributes: %s", cudaGetErrorString(e));
            st = ms_k_cuda_status_of(e);
        }
    }
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&c->d_flags, sizeof(unsigned));
    if (st == MS_OK) {
        cudaError_t e = cudaMemsetAsync(c->d_flags, 0, sizeof(unsigned), c->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) {
            MS_LOG_ERROR("cuda ops: clearing the flags: %s", cudaGetErrorString(e));
            st = ms_k_cuda_status_of(e);
        }
    }
    if (st != MS_OK) {
        const ms_k_ops *o = &c->ops;
        c->ops.ctx = c;
        ms_k_cuda_ops_destroy(&o);
        return NULL;
    }
    c->ops.name = act_dtype == MS_DTYPE_BF16 ? "cuda-bf16" : "cuda-f16";
    c->ops.act = act_dtype;
    c->ops.weight = act_dtype;
    c->ops.ctx = c;
    c->ops.gemm = op_gemm;
    c->ops.rmsnorm = ms_k_cuda_op_rmsnorm;
    c->ops.add = ms_k_cuda_op_add;
    c->ops.rope = ms_k_cuda_op_rope;
    c->ops.attention = ms_k_cuda_op_attention;
    c->ops.silu_glu = ms_k_cuda_op_silu_glu;
    c->ops.embed = ms_k_cuda_op_embed;
    c->ops.move_rows = ms_k_cuda_op_move_rows;
    return &c->ops;
}

extern "C" void ms_k_cuda_ops_destroy(const ms_k_ops **ops) {
    if (!ops || !*ops) return;
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)(*ops)->ctx;
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) MS_LOG_WARN("cuda ops destroy: stream: %s", cudaGetErrorString(e));
    if (c->blas) cublasDestroy(c->blas);
    ms_k_cuda_free((void **)&c->d_flags);
    ms_k_cuda_free((void **)&c->d_attn_ws);
    ms_k_cuda_free(&c->blas_ws); /* after cublasDestroy: the handle may use it until then */
    free(c);
    *ops = NULL;
}

extern "C" ms_status ms_k_cuda_sync(const ms_k_ops *ops) {
    ms_k_cuda_ctx *c = (ms_k_cuda_ctx *)ops->ctx;
    ms_status st = c->status;
    c->status = MS_OK;
    unsigned flags = 0;
    cudaError_t e = cudaMemcpyAsync(&flags, c->d_flags, sizeof flags, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        MS_LOG_ERROR("cuda sync (%s): %s (%s)", ops->name, cudaGetErrorString(e), cudaGetErrorName(e));
        return st != MS_OK ? st : ms_k_cuda_status_of(e);
    }
    if (flags) {
        if (flags & MS_K_CUDA_FLAG_ROPE_POS) MS_LOG_ERROR("cuda rope: a position was past the rope table (row skipped)");
        if (flags & MS_K_CUDA_FLAG_EMBED_ID) MS_LOG_ERROR("cuda embed: a negative token id (row skipped)");
        e = cudaMemsetAsync(c->d_flags, 0, sizeof(unsigned), c->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) {
            MS_LOG_ERROR("cuda sync: clearing the flags: %s", cudaGetErrorString(e));
            return st != MS_OK ? st : ms_k_cuda_status_of(e);
        }
        if (st == MS_OK) st = MS_ERR_RANGE;
    }
    return st;
}
