/* ms_k_cuda_lmhead.h — the draft LM-head step on the device (docs/architecture.md §5):
 * logits of the draft's hidden rows against the rows of one vocabulary mode,
 * and the slot → token id map after top-k. C-callable, no CUDA header.
 *
 * Variants (n = query rows, d = hidden, all f32 logits with row stride ld):
 *   - dense:    logits[n, m] = h[n, d] · rows[m, d]ᵀ (cuBLAS GemmEx, act in,
 *               f32 out, CUBLAS_COMPUTE_32F). Full (rows = W, m = V), static
 *               (rows = ms_k_cuda_static_rows_new's [K, d]).
 *   - packed:   the dynamic window's packed rows [W_max, d]: the dense GEMM
 *               over all W_max rows, then columns ≥ *n_active (a DEVICE
 *               count, never read by the host) set to −INFINITY.
 *   - indexed:  the naive ablation (eagle2-frspec-notes.md §7 item 6b):
 *               logits[r, s] = h[r] · W[id_of[s]] for s < *n_active, −INFINITY
 *               for s ≥ *n_active up to W_max; one warp per slot reads the
 *               head row by id (no packed buffer, no gather). n ≤ 16.
 * Then ms_k_cuda_topk_rows (ms_k_cuda.h) over the logits gives slots (ties
 * to the lower slot, NaN last) and ms_k_cuda_slots_to_ids maps them to ids.
 *
 * Every pointer is DEVICE memory except the host id list of
 * ms_k_cuda_static_rows_new. All functions take the op table (made by
 * ms_k_cuda_ops) and only enqueue work on its stream: none synchronises with
 * the host (except ms_k_cuda_static_rows_new, a setup call). With the dynamic
 * window (ms_k_cuda_vocab), pass the window's compute stream as the table's
 * stream so the appends that change id_of / n_active are ordered before the
 * head, and call ms_k_cuda_vocab_wait(window, stream) before `packed` (the
 * gathered rows); `indexed` reads only id_of / n_active and needs no wait.
 *
 * Errors: argument errors come back at once (MS_ERR_INVALID, logged); launch
 * and cuBLAS errors as their MS_ERR_*. A slot whose id_of entry is out of
 * [0, V) (indexed) gets −INFINITY and raises a device flag of the table,
 * reported by ms_k_cuda_sync as MS_ERR_RANGE.
 */
#ifndef MS_K_CUDA_LMHEAD_H
#define MS_K_CUDA_LMHEAD_H

#include "ms_common.h"
#include "ms_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most query rows of the indexed kernel (a draft tree level has ≤ 10). */
#define MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS 16

/* logits[r·ld + j] = Σ_k h[r·d + k] · rows[j·d + k], r < n, j < m (f32).
 * h, rows in the table's act dtype. Columns ≥ m of each row are untouched.
 * n, m, d ≥ 1 (n == 0: no-op), ld ≥ m, all < 2^31. */
ms_status ms_k_cuda_lmhead_dense(const ms_k_ops *ops, float *logits, int64_t ld, const void *h, const void *rows,
                                 int64_t n, int64_t m, int64_t d);

/* logits[r·ld + j] = −INFINITY for r < n, *n_active ≤ j < m (n_active a
 * device int32; a count < 0 is taken as 0, > m as m). */
ms_status ms_k_cuda_lmhead_mask(const ms_k_ops *ops, float *logits, int64_t ld, int64_t n, int64_t m,
                                const int32_t *n_active);

/* Dynamic, gathered: dense over the packed rows [w_max, d] then mask at
 * *n_active. The caller has made the stream wait for the gather
 * (ms_k_cuda_vocab_wait). */
ms_status ms_k_cuda_lmhead_packed(const ms_k_ops *ops, float *logits, int64_t ld, const void *h, const void *rows,
                                  const int32_t *n_active, int64_t n, int64_t w_max, int64_t d);

/* Dynamic, indexed: logits[r·ld + s] = h[r] · W[id_of[s]] for s < *n_active,
 * −INFINITY for *n_active ≤ s < w_max. W [V, d] in act; 1 ≤ n ≤
 * MS_K_CUDA_LMHEAD_INDEXED_MAX_ROWS. 16-byte loads when d % 8 == 0 and h, W
 * are 16-byte aligned, 2-byte loads otherwise. */
ms_status ms_k_cuda_lmhead_indexed(const ms_k_ops *ops, float *logits, int64_t ld, const void *h, const void *W,
                                   int64_t V, const int32_t *id_of, const int32_t *n_active, int64_t n,
                                   int64_t w_max, int64_t d);

/* Static (FR-Spec) rows: validates ids (HOST [k]: 0 ≤ id < V, 1 ≤ k ≤ V) on the
 * host, uploads them and gathers rows[j] = W[ids[j]] with a kernel, once at
 * setup (synchronises). *rows: new device [k, d] act buffer; *d_ids (optional,
 * NULL: not kept): new device copy of ids [k] for ms_k_cuda_slots_to_ids.
 * Free both with ms_k_cuda_free. On error both are NULL. */
ms_status ms_k_cuda_static_rows_new(const ms_k_ops *ops, const void *W, int64_t V, int64_t d, const int32_t *ids,
                                    int64_t k, void **rows, int32_t **d_ids);

/* ids[i] = id_of[slots[i]] for i < n (id_of NULL: identity, the full mode).
 * A slot out of [0, n_slots), or ≥ *n_active when n_active is not NULL, gives
 * −1 (top-k over a window smaller than k returns masked slots). */
ms_status ms_k_cuda_slots_to_ids(const ms_k_ops *ops, int32_t *ids, const int32_t *slots, int64_t n,
                                 const int32_t *id_of, int64_t n_slots, const int32_t *n_active);

/* ---- benchmark helpers (tools/bench/microspec_gpu_bench.c) ---------------------- */

/* x[i] = lo + (hi − lo)·u_i, i < n, in the table's act dtype, u_i ∈ [0, 1) a
 * hash of (seed, i): the same seed gives the same values on every device.
 * Random weights for benchmarks; enqueued on the table's stream. */
ms_status ms_k_cuda_fill_uniform(const ms_k_ops *ops, void *x, int64_t n, uint64_t seed, float lo, float hi);
/* Keeps the table's stream busy for about `us` microseconds (one thread
 * sleeping), so that work enqueued behind it starts back to back and event
 * timings do not include the host's launch latency. */
ms_status ms_k_cuda_busy_wait(const ms_k_ops *ops, double us);

#ifdef __cplusplus
}
#endif

#endif
