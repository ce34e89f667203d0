/* ms_quant.h — the CPU matmul over block-format weights (ms_qweight.h) with
 * f32 activations. Internal to kernels/: callers reach it through the
 * backend table's linear (ms_k_backend.h, xq == NULL).
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

#include "ms_qweight.h"

/* y[n, m] = x[n, k] · Wᵀ (+ b[m] when b != NULL), f32 in and out, batch
 * invariant (above). y must not alias x. */
void ms_q_linear(float *y, const float *x, const ms_qweight *w, const float *b, int64_t n);
/* The same over a subset of W's rows: y[n, n_rows] with column j = row
 * rows[j] of W (a draft head over a vocabulary window, read in place). */
void ms_q_linear_rows(float *y, const float *x, const ms_qweight *w, const int32_t *rows, int64_t n_rows, int64_t n);

#endif
