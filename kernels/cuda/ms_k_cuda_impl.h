/* ms_k_cuda_impl.h — private to kernels/cuda: the table's state, the check
 * macros and the op entry points the .cu files share. CUDA/C++ only. */
#ifndef MS_K_CUDA_IMPL_H
#define MS_K_CUDA_IMPL_H

#include "ms_k_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

/* Device-side input flags (bits of ms_k_cuda_ctx.d_flags). */
enum { MS_K_CUDA_FLAG_ROPE_POS = 1, MS_K_CUDA_FLAG_EMBED_ID = 2 };

/* The table's state; ops.ctx points back here. */
typedef struct {
    ms_k_ops ops;
    cudaStream_t stream;
    cublasHandle_t blas;
    unsigned *d_flags; /* device: MS_K_CUDA_FLAG_* raised by kernels */
    int n_sm;          /* multiprocessors of the device, for split decisions */
    float *d_attn_ws;  /* device: split-KV attention partials, grown on first need */
    size_t attn_ws_bytes;
    void *blas_ws;     /* device: fixed cuBLAS workspace (ms_k_cuda_blas_workspace), or NULL */
    size_t blas_ws_bytes;
    ms_status status;  /* first error recorded since the last ms_k_cuda_sync */
} ms_k_cuda_ctx;

ms_status ms_k_cuda_status_of(cudaError_t e);
ms_status ms_k_cublas_status_of(cublasStatus_t s);

/* Check macros (STYLE.md): evaluate once, log file:line and the library's
 * own error string, return an ms_status. Never exit. */
#define MS_CUDA_TRY(expr)                                                                           \
    do {                                                                                            \
        cudaError_t ms_cu_e_ = (expr);                                                              \
        if (ms_cu_e_ != cudaSuccess) {                                                              \
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: %s (%s)", #expr,                      \
                       cudaGetErrorString(ms_cu_e_), cudaGetErrorName(ms_cu_e_));                   \
            return ms_k_cuda_status_of(ms_cu_e_);                                                   \
        }                                                                                           \
    } while (0)

#define MS_CUBLAS_TRY(expr)                                                                         \
    do {                                                                                            \
        cublasStatus_t ms_cb_s_ = (expr);                                                           \
        if (ms_cb_s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: %s (%s)", #expr,                      \
                       cublasGetStatusString(ms_cb_s_), cublasGetStatusName(ms_cb_s_));             \
            return ms_k_cublas_status_of(ms_cb_s_);                                                 \
        }                                                                                           \
    } while (0)

/* Keep the first error an op met; ops are void, ms_k_cuda_sync reports it. */
static inline void ms_k_cuda_record(ms_k_cuda_ctx *c, ms_status s) {
    if (s < 0 && c->status == MS_OK) c->status = s;
}

/* Op entry points of ms_k_cuda_kernels.cu (same shapes as ms_k_ops). */
void ms_k_cuda_op_rmsnorm(void *ctx, void *y, const void *x, const void *w, int64_t n, int64_t d, float eps);
void ms_k_cuda_op_add(void *ctx, void *y, const void *x, int64_t n);
void ms_k_cuda_op_rope(void *ctx, void *x, int64_t n, int64_t n_heads, int64_t hd, const int32_t *pos,
                       const ms_k_rope *table);
void ms_k_cuda_op_attention(void *ctx, void *out, const void *q, const void *kc, const void *vc,
                            const ms_k_attn_shape *s, const uint64_t *mask, float *scratch);
void ms_k_cuda_op_silu_glu(void *ctx, void *y, const void *gate, const void *up, int64_t n);
void ms_k_cuda_op_embed(void *ctx, void *y, const void *table, ms_dtype table_dtype, const int32_t *ids,
                        int64_t n, int64_t d);
void ms_k_cuda_op_move_rows(void *ctx, void *cache, int64_t row_elems, const int64_t *src, const int64_t *dst,
                            int64_t n);
/* y[n,m] = b[m] broadcast to every row (the linear's bias, added by the GEMM's beta = 1). */
ms_status ms_k_cuda_fill_bias(ms_k_cuda_ctx *c, void *y, const void *b, int64_t n, int64_t m);

#endif
