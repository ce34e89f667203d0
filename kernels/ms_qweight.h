/* ms_qweight.h — block formats of GGUF weights: the weight view and its
 * dequantization, one traits row per type.
 *
 * Types: F32, F16, BF16 and the ggml blocks Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 * (32 elements a block) and Q4_K, Q5_K, Q6_K (256 a block); byte layouts are
 * listed in common/ms_tensor.c. Weights stay in their stored format in memory:
 * a weight is a view of m rows of k elements, each row `row_bytes` bytes of
 * blocks (ms_qweight); the kernels read the blocks in place. The matmuls over
 * such a weight are the backend table's linear entries (ms_k_backend.h); the
 * CPU kernels behind them are internal to kernels/ (cpu/ms_quant.h,
 * cpu/ms_qdot.h).
 *
 * The scalar C dequantization per type (ms_q_dequant_ref) is the
 * specification: it equals ggml's / the `gguf` package's dequantization bit
 * for bit (f32). Faster paths are tested against it.
 */
#ifndef MS_QWEIGHT_H
#define MS_QWEIGHT_H

#include "ms_common.h"
#include "ms_tensor.h"

/* A typed 2-d weight: m rows of k elements, row r at data + r·row_bytes.
 * tiles: NULL, or the same blocks in the AMX tile layout (the backend's
 * pack, cpu/ms_qdot.h), which the multi-row products read instead of data —
 * so a view of other rows or data made by copying a packed weight must set
 * it to NULL (ms_qweight_view does). */
typedef struct {
    ms_dtype dtype;
    const void *data;
    int64_t m, k;
    size_t row_bytes;
    const void *tiles;
} ms_qweight;

/* A view; MS_ASSERTs that k is a whole number of blocks of dtype and that
 * dtype is F32, F16, BF16 or a block format. */
ms_qweight ms_qweight_view(ms_dtype dtype, const void *data, int64_t m, int64_t k);
/* True if this module reads `dtype` (F32, F16, BF16 and the block formats above). */
bool ms_q_supported(ms_dtype dtype);

/* The specification: dequantize n elements (a whole number of blocks) from
 * `src` (may be unaligned) into dst. Scalar C, one block at a time. */
void ms_q_dequant_ref(ms_dtype dtype, const void *src, float *dst, int64_t n);
/* The same, the fast path (bitwise equal to ms_q_dequant_ref). */
void ms_q_dequant(ms_dtype dtype, const void *src, float *dst, int64_t n);
/* Row r of w as f32 [k] (embedding lookup). */
void ms_q_row(const ms_qweight *w, int64_t r, float *dst);

#endif
