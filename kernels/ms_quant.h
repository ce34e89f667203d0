/* ms_quant.h — block formats of GGUF weights: one traits row per type.
 *
 * Types: F32, F16, BF16 and the ggml blocks Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 * (32 elements a block) and Q4_K, Q5_K, Q6_K (256 a block); byte layouts are
 * listed in common/ms_tensor.c. Weights stay in their stored format in memory:
 * a weight is a view of m rows of k elements, each row `row_bytes` bytes of
 * blocks (ms_qweight); the kernels read the blocks in place.
 *
 * The scalar C dequantization per type (ms_q_dequant_ref) is the
 * specification: it equals ggml's / the `gguf` package's dequantization bit
 * for bit (f32). Faster paths are tested against it.
 *
 * Batch invariance: ms_q_linear computes every output element as a function
 * of (one x row, one weight row) only, with one fixed accumulation order, so a
 * row's result is bitwise the same whether it is computed alone or among n
 * rows, and whatever the thread count. Speculative output (a verify of n rows)
 * stays token-identical to autoregressive decoding (one row) on real models,
 * where near-ties are common.
 */
#ifndef MS_QUANT_H
#define MS_QUANT_H

#include "ms_common.h"
#include "ms_tensor.h"

/* A typed 2-d weight: m rows of k elements, row r at data + r·row_bytes.
 * tiles: NULL, or the same blocks in the AMX tile layout (ms_qdot_pack,
 * ms_qdot.h), which the multi-row products read instead of data — so a
 * view of other rows or data made by copying a packed weight must set it
 * to NULL (ms_qweight_view does). */
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

/* y[n, m] = x[n, k] · Wᵀ (+ b[m] when b != NULL), f32 in and out, batch
 * invariant (above). y must not alias x. */
void ms_q_linear(float *y, const float *x, const ms_qweight *w, const float *b, int64_t n);
/* The same over a subset of W's rows: y[n, n_rows] with column j = row
 * rows[j] of W (a draft head over a vocabulary window, read in place). */
void ms_q_linear_rows(float *y, const float *x, const ms_qweight *w, const int32_t *rows, int64_t n_rows, int64_t n);

#endif
