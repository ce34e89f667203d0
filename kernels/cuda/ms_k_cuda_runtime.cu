/* ms_k_cuda_runtime.cu — what the model runtime needs around the op table on
 * a GPU: device selection, its own stream, pinned staging, asynchronous
 * copies, the f32-output GEMM of the LM head, a fixed cuBLAS workspace,
 * seeded random weights on the device, and CUDA-graph capture / update /
 * launch of a forward (ms_k_cuda.h documents each). */
#include "ms_k_cuda_impl.h"
#include "ms_k_random.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdlib.h>

static ms_k_cuda_ctx *ctx_of(const ms_k_ops *ops) { return (ms_k_cuda_ctx *)ops->ctx; }

/* ---- device, stream, pinned memory ------------------------------------------------ */

extern "C" ms_status ms_k_cuda_set_device(int dev) {
    const int n = ms_k_cuda_device_count();
    if (dev < 0 || dev >= n) MS_FAIL(MS_ERR_NOT_FOUND, "cuda:%d: no such device (%d present)", dev, n);
    MS_CUDA_TRY(cudaSetDevice(dev));
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_stream_new(void **stream) {
    cudaStream_t s = NULL;
    *stream = NULL;
    MS_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = (void *)s;
    return MS_OK;
}

extern "C" void ms_k_cuda_stream_free(void **stream) {
    if (!stream || !*stream) return;
    cudaStream_t s = (cudaStream_t)*stream;
    cudaError_t e = cudaStreamSynchronize(s);
    if (e == cudaSuccess) e = cudaStreamDestroy(s);
    if (e != cudaSuccess) MS_LOG_WARN("cuda stream free: %s", cudaGetErrorString(e));
    *stream = NULL;
}

extern "C" ms_status ms_k_cuda_host_alloc(void **p, size_t bytes) {
    *p = NULL;
    if (bytes == 0) return MS_OK;
    MS_CUDA_TRY(cudaMallocHost(p, bytes));
    return MS_OK;
}

extern "C" void ms_k_cuda_host_free(void **p) {
    if (!p || !*p) return;
    cudaError_t e = cudaFreeHost(*p);
    if (e != cudaSuccess) MS_LOG_WARN("cudaFreeHost: %s", cudaGetErrorString(e));
    *p = NULL;
}

extern "C" ms_status ms_k_cuda_upload_async(const ms_k_ops *ops, void *dev, const void *host, size_t bytes) {
    if (bytes == 0) return MS_OK;
    MS_CUDA_TRY(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, ctx_of(ops)->stream));
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_download_async(const ms_k_ops *ops, void *host, const void *dev, size_t bytes) {
    if (bytes == 0) return MS_OK;
    MS_CUDA_TRY(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, ctx_of(ops)->stream));
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_copy_async(const ms_k_ops *ops, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return MS_OK;
    MS_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_of(ops)->stream));
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_memset_async(const ms_k_ops *ops, void *dev, int value, size_t bytes) {
    if (bytes == 0) return MS_OK;
    MS_CUDA_TRY(cudaMemsetAsync(dev, value, bytes, ctx_of(ops)->stream));
    return MS_OK;
}

/* ---- the LM head's GEMM with f32 output --------------------------------------------- */

/* As cu_linear (ms_k_cuda.cu): column-major yᵀ[m,n] = W·xᵀ, A/B in act, C in
 * f32, CUBLAS_COMPUTE_32F; the f32 logits are never rounded to act. */
extern "C" ms_status ms_k_cuda_linear_f32out(const ms_k_ops *ops, float *y, const void *x, const void *w, int64_t n,
                                             int64_t k, int64_t m) {
    ms_k_cuda_ctx *c = ctx_of(ops);
    if (n <= 0 || m <= 0) return MS_OK;
    if (n > INT32_MAX || k > INT32_MAX || m > INT32_MAX)
        MS_FAIL(MS_ERR_RANGE, "cuda linear_f32out: shape %lld x %lld x %lld past cuBLAS's int range", (long long)n,
                (long long)k, (long long)m);
    const cudaDataType_t t = c->ops.act == MS_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f, beta = 0.0f;
    MS_CUBLAS_TRY(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &alpha, w, t, (int)k, x,
                               t, (int)k, &beta, y, CUDA_R_32F, (int)m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return MS_OK;
}

/* ---- a fixed cuBLAS workspace ------------------------------------------------------- */

/* cublasSetStream resets the workspace to cuBLAS's own pool, so this is
 * called after the table is made (ms_k_cuda_ops sets the stream once). */
extern "C" ms_status ms_k_cuda_blas_workspace(const ms_k_ops *ops, size_t bytes) {
    ms_k_cuda_ctx *c = ctx_of(ops);
    if (bytes == 0) MS_FAIL(MS_ERR_INVALID, "cuda blas workspace: 0 bytes");
    void *ws = NULL;
    MS_TRY(ms_k_cuda_malloc(&ws, bytes));
    cublasStatus_t s = cublasSetWorkspace(c->blas, ws, bytes);
    if (s != CUBLAS_STATUS_SUCCESS) {
        MS_LOG_ERROR("cublasSetWorkspace(%zu bytes): %s", bytes, cublasGetStatusString(s));
        ms_k_cuda_free(&ws);
        return ms_k_cublas_status_of(s);
    }
    /* cuBLAS may still hold work on the old buffer: free it after the stream drains */
    if (c->blas_ws) {
        cudaError_t e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) MS_LOG_WARN("cuda blas workspace: stream: %s", cudaGetErrorString(e));
        ms_k_cuda_free(&c->blas_ws);
    }
    c->blas_ws = ws;
    c->blas_ws_bytes = bytes;
    return MS_OK;
}

/* ---- seeded random weights ------------------------------------------------------------ */

template <typename T> __device__ __forceinline__ T to_act(float v);
template <> __device__ __forceinline__ __nv_bfloat16 to_act<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half to_act<__half>(float v) { return __float2half_rn(v); }

template <typename T> __global__ void k_fill_random(T *dst, int64_t n, uint64_t seed, float scale, float offset) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = to_act<T>(ms_k_random_value(seed, i, scale, offset));
}

extern "C" ms_status ms_k_cuda_fill_random(const ms_k_ops *ops, void *dst, int64_t n, uint64_t seed, float scale,
                                           float offset) {
    ms_k_cuda_ctx *c = ctx_of(ops);
    if (n <= 0) return MS_OK;
    const int64_t want = (n + 255) / 256;
    const unsigned blocks = (unsigned)(want < (1 << 20) ? want : (1 << 20));
    if (c->ops.act == MS_DTYPE_BF16)
        k_fill_random<__nv_bfloat16><<<blocks, 256, 0, c->stream>>>((__nv_bfloat16 *)dst, n, seed, scale, offset);
    else
        k_fill_random<__half><<<blocks, 256, 0, c->stream>>>((__half *)dst, n, seed, scale, offset);
    MS_CUDA_TRY(cudaGetLastError());
    return MS_OK;
}

/* ---- CUDA graphs ---------------------------------------------------------------------- */

struct ms_k_cuda_graph {
    cudaGraphExec_t exec;
};

/* Thread-local capture: another thread's unrelated CUDA calls (a second
 * model, the vocabulary window) neither break this capture nor get refused. */
extern "C" ms_status ms_k_cuda_capture_begin(const ms_k_ops *ops) {
    ms_k_cuda_ctx *c = ctx_of(ops);
    if (!c->stream) MS_FAIL(MS_ERR_INVALID, "cuda capture: the legacy default stream cannot be captured");
    MS_CUDA_TRY(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_capture_end(const ms_k_ops *ops, ms_k_cuda_graph **g, int *event) {
    ms_k_cuda_ctx *c = ctx_of(ops);
    *event = 0;
    cudaGraph_t graph = NULL;
    MS_CUDA_TRY(cudaStreamEndCapture(c->stream, &graph));
    if (c->status != MS_OK) { /* an op failed while being recorded: do not run a partial graph */
        ms_status st = c->status;
        c->status = MS_OK;
        cudaGraphDestroy(graph);
        return st;
    }
    ms_status st = MS_OK;
    if (*g) {
        cudaGraphExecUpdateResultInfo info;
        cudaError_t e = cudaGraphExecUpdate((*g)->exec, graph, &info);
        if (e == cudaSuccess) {
            *event = MS_K_CUDA_GRAPH_UPDATED;
        } else {
            /* refused (topology or kernel changed, e.g. attention split on/off):
             * not an error; clear it so the next op's check does not see it */
            cudaGetLastError();
            MS_LOG_DEBUG("cuda graph update refused (%s, result %d): re-instantiating", cudaGetErrorName(e),
                         (int)info.result);
            ms_k_cuda_graph_free(g);
        }
    }
    if (!*g) {
        ms_k_cuda_graph *ng = (ms_k_cuda_graph *)ms_calloc(1, sizeof *ng);
        if (!ng) {
            st = MS_ERR_NOMEM;
        } else {
            cudaError_t e = cudaGraphInstantiate(&ng->exec, graph, 0);
            if (e != cudaSuccess) {
                MS_LOG_ERROR("cudaGraphInstantiate: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
                st = ms_k_cuda_status_of(e);
                free(ng);
            } else {
                *g = ng;
                *event = MS_K_CUDA_GRAPH_INSTANTIATED;
            }
        }
    }
    cudaError_t e = cudaGraphDestroy(graph);
    if (e != cudaSuccess) MS_LOG_WARN("cudaGraphDestroy: %s", cudaGetErrorString(e));
    return st;
}

extern "C" ms_status ms_k_cuda_graph_launch(const ms_k_ops *ops, const ms_k_cuda_graph *g) {
    MS_CUDA_TRY(cudaGraphLaunch(g->exec, ctx_of(ops)->stream));
    return MS_OK;
}

extern "C" void ms_k_cuda_graph_free(ms_k_cuda_graph **g) {
    if (!g || !*g) return;
    cudaError_t e = cudaGraphExecDestroy((*g)->exec);
    if (e != cudaSuccess) MS_LOG_WARN("cudaGraphExecDestroy: %s", cudaGetErrorString(e));
    free(*g);
    *g = NULL;
}
