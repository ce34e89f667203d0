/* ms_k_cuda.h — the CUDA twin of the op table (kernels/ms_kernels.h).
 *
 * This header includes no CUDA header so plain C code can call it; streams
 * are passed as void * (a cudaStream_t, NULL = the legacy default stream).
 *
 * Memory. Every pointer an op or a function below takes is DEVICE memory:
 * activations, weights, caches, logits and also the small index arrays the CPU
 * table takes on the host (rope pos, attention mask, embed ids, move_rows
 * src/dst). Exceptions: the ms_k_attn_shape struct (host), and the ms_k_rope
 * struct itself, a host struct whose cos/sin point to device memory (made by
 * ms_k_cuda_rope_upload). The attention `scratch` argument is unused (NULL ok).
 *
 * Numbers. Activations and weights are stored in the table's act dtype
 * (BF16 or F16); every op loads them to f32, computes in f32 (GEMM: cuBLAS
 * with CUBLAS_COMPUTE_32F) and rounds once to act on store. Logits for the
 * row ops are f32.
 *
 * Errors. Ops return void like the CPU table and only enqueue work on the
 * table's stream. A failed launch or cuBLAS call is logged where found
 * (file:line and the library's string) and recorded in the table; kernels
 * that find bad device-side input (a rope position past the table, a
 * negative embed id) skip that element and raise a device flag. The first
 * recorded error, and any flag, come back from ms_k_cuda_sync.
 */
#ifndef MS_K_CUDA_H
#define MS_K_CUDA_H

#include "ms_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "ms_kernels.h"
#include "ms_tensor.h"

/* Number of usable CUDA devices; 0 when there is no driver or no device
 * (never an error: callers report GPU tests as skipped). */
int ms_k_cuda_device_count(void);
/* Name and memory of device `dev` into buf; MS_ERR_NOT_FOUND if absent. */
ms_status ms_k_cuda_device_info(int dev, char *buf, size_t cap);

/* ---- the op table ---------------------------------------------------------- */

/* A new op table on the current device: activations and weights in
 * `act_dtype` (MS_DTYPE_BF16 or MS_DTYPE_F16), work enqueued on `stream`
 * (a cudaStream_t the caller keeps alive, NULL = default stream). Owns a
 * cuBLAS handle. NULL on failure (logged: bad dtype, no device, cuBLAS). */
const ms_k_ops *ms_k_cuda_ops(ms_dtype act_dtype, void *stream);
/* Frees a table made by ms_k_cuda_ops (waits for its stream first) and
 * nulls *ops. NULL / *ops == NULL is a no-op. */
void ms_k_cuda_ops_destroy(const ms_k_ops **ops);
/* Waits for the table's stream; returns (and clears) the first error
 * recorded by its ops since the last call: a launch / cuBLAS error as its
 * MS_ERR_*, a device-side input flag as MS_ERR_RANGE (logged here). */
ms_status ms_k_cuda_sync(const ms_k_ops *ops);

/* ---- RoPE table ------------------------------------------------------------ */

/* Uploads host's cos/sin once: *dev gets the same max_pos/half and device
 * copies of cos/sin. Free with ms_k_cuda_rope_free. */
ms_status ms_k_cuda_rope_upload(const ms_k_rope *host, ms_k_rope *dev);
void ms_k_cuda_rope_free(ms_k_rope *dev);

/* ---- row-wise ops on f32 logits (device twins of ms_k_log_softmax / ms_k_topk) */

/* For r < rows: y[r·ld + j] = log_softmax(x[r·ld + 0..n))[j], j < n; columns
 * ≥ n are neither read nor written. y may alias x. Same semantics as
 * ms_k_log_softmax (NaN ignored by the max, an all −inf row → −log n, sums
 * in double). MS_ERR_INVALID for n < 1 or ld < n. */
ms_status ms_k_cuda_log_softmax_rows(const ms_k_ops *ops, float *y, const float *x, int64_t rows, int64_t n,
                                     int64_t ld);
/* The k (1 ≤ k ≤ MS_K_CUDA_TOPK_MAX, k ≤ n) largest of x[r·ld + 0..n) per row,
 * descending, ties to the lower index, NaN ranking last (as ms_k_topk), into
 * idx[r·k + j], val[r·k + j]. n < 2^31. MS_ERR_INVALID on a bad k/n/ld. */
#define MS_K_CUDA_TOPK_MAX 16
ms_status ms_k_cuda_topk_rows(const ms_k_ops *ops, int32_t *idx, float *val, const float *x, int64_t rows,
                              int64_t n, int64_t ld, int64_t k);

/* ---- memory ---------------------------------------------------------------- */

/* Device allocation (logged on failure; bytes == 0 gives *p = NULL, MS_OK). */
ms_status ms_k_cuda_malloc(void **p, size_t bytes);
/* Frees *p (NULL is fine) and nulls it. */
void ms_k_cuda_free(void **p);
/* Host ↔ device copies, ordered after the work already enqueued on the
 * table's stream (ops NULL: the default stream) and complete on return. */
ms_status ms_k_cuda_upload(const ms_k_ops *ops, void *dev, const void *host, size_t bytes);
ms_status ms_k_cuda_download(const ms_k_ops *ops, void *host, const void *dev, size_t bytes);

/* ---- dynamic draft vocabulary window (ms_k_cuda_vocab.cu; docs/architecture.md §5) ---- */

/* The device twin of the `dynamic` mode of draft-node/ms_vocab.h: ring of the
 * last W_max stream entries, per-id counts, slot map id → slot and its
 * inverse, and the packed LM-head rows [W_max, d] (act dtype) whose first
 * |I| rows are the window's rows. Entries are processed one by one in order,
 * exactly as ms_vocab_append, so the window set and the slot layout equal the
 * CPU twin's fed the same ids.
 *
 * The round functions (append, append_distinct, reset, gather, wait, rows)
 * only enqueue work and record/wait on events: they never synchronise with
 * the host. append/append_distinct/reset run on the compute stream; gather
 * runs on the copy stream after an event recorded when the append finished
 * and records a "gathered" event; wait makes a stream (the compute stream,
 * just before the draft LM-head GEMM) wait on it. Not thread-safe. */
typedef struct ms_k_cuda_vocab ms_k_cuda_vocab;

/* W: device [V, d] LM head in act (BF16 or F16), not owned, must outlive the
 * window. Streams are cudaStream_t (NULL = legacy default); use two distinct
 * streams for the gather to overlap. V, W_max in [1, INT32_MAX], d ≥ 1.
 * Creation synchronises once (initial state). MS_ERR_INVALID / MS_ERR_NOMEM. */
ms_status ms_k_cuda_vocab_new(int64_t V, int64_t w_max, int64_t d, ms_dtype act, const void *W,
                              void *stream_compute, void *stream_copy, ms_k_cuda_vocab **out);
/* Waits for the window's work, frees, nulls *v. NULL / *v == NULL: no-op. */
void ms_k_cuda_vocab_free(ms_k_cuda_vocab **v);
/* Empty the stream and the window: one kernel, O(W_max + |I|). */
ms_status ms_k_cuda_vocab_reset(ms_k_cuda_vocab *v);
/* Append ids (DEVICE [n]) to the stream in order: one kernel, one block. The
 * block validates every id first; if any is out of [0, V) nothing is appended
 * and a device flag is raised (reported by download_state as MS_ERR_INVALID).
 * MS_ERR_INVALID (host) only for n < 0 or ids NULL with n > 0. */
ms_status ms_k_cuda_vocab_append(ms_k_cuda_vocab *v, const int32_t *ids, int64_t n);
/* As append, for the distinct ids of ids [n] in first-occurrence order (one
 * union, as ms_vocab_append_distinct; append_round = two of them). */
ms_status ms_k_cuda_vocab_append_distinct(ms_k_cuda_vocab *v, const int32_t *ids, int64_t n);
/* Gather rows[s] = W[id_of[s]] for every slot an entering id took or
 * swap-remove refilled since the last gather, on the copy stream. No-op when
 * nothing was appended since. */
ms_status ms_k_cuda_vocab_gather(ms_k_cuda_vocab *v);
/* `stream` waits for the last gather (issuing it first if an append is not
 * gathered yet). Call just before the draft LM-head GEMM. */
ms_status ms_k_cuda_vocab_wait(ms_k_cuda_vocab *v, void *stream);
/* Device pointers for the GEMM and the slot → id map: rows [W_max, d],
 * *n_active (device int32, |I|), id_of [W_max]. Any output may be NULL. */
void ms_k_cuda_vocab_rows(const ms_k_cuda_vocab *v, const void **rows, const int32_t **n_active,
                          const int32_t **id_of);
int64_t ms_k_cuda_vocab_w_max(const ms_k_cuda_vocab *v);

/* Host copy of the whole state (tests, debugging): synchronises. Array
 * outputs are optional (NULL: skipped): counts/slot_of [V], ring/id_of
 * [W_max], rows [W_max · d] act values. MS_ERR_INVALID (logged, flag
 * cleared, state still filled) if an append since the last call had an id
 * out of range. */
typedef struct {
    int32_t n_active, ring_n, head; /* |I|; ring entries; oldest at ring[head] */
    uint32_t flags;
    int32_t *counts, *slot_of, *ring, *id_of;
    void *rows;
} ms_k_cuda_vocab_state;
ms_status ms_k_cuda_vocab_download_state(ms_k_cuda_vocab *v, ms_k_cuda_vocab_state *h);

/* Host synchronisations made by this module so far (creation, free,
 * download_state); the round functions add none. For tests. */
int64_t ms_k_cuda_vocab_host_syncs(void);

/* ---- model runtime support (ms_k_cuda_runtime.cu) --------------------------- */

/* Make device `dev` current for this thread; MS_ERR_NOT_FOUND when absent. */
ms_status ms_k_cuda_set_device(int dev);
/* A non-blocking stream on the current device (*stream = its cudaStream_t);
 * free waits for it, destroys it and nulls *stream (NULL is fine). */
ms_status ms_k_cuda_stream_new(void **stream);
void ms_k_cuda_stream_free(void **stream);
/* Page-locked host memory, for staging asynchronous copies (bytes == 0 gives
 * NULL); free nulls *p. */
ms_status ms_k_cuda_host_alloc(void **p, size_t bytes);
void ms_k_cuda_host_free(void **p);
/* Copies enqueued on the table's stream, NOT complete on return: the host
 * side must stay untouched until the stream is synchronised (ms_k_cuda_sync).
 * Pinned host memory makes them truly asynchronous. */
ms_status ms_k_cuda_upload_async(const ms_k_ops *ops, void *dev, const void *host, size_t bytes);
ms_status ms_k_cuda_download_async(const ms_k_ops *ops, void *host, const void *dev, size_t bytes);
ms_status ms_k_cuda_copy_async(const ms_k_ops *ops, void *dst, const void *src, size_t bytes);
/* dev[0, bytes) = byte value, enqueued on the table's stream. */
ms_status ms_k_cuda_memset_async(const ms_k_ops *ops, void *dev, int value, size_t bytes);

/* y[n,m] (f32) = x[n,k] · W[m,k]ᵀ with x, W in act (the LM head: logits are
 * never rounded to act). Enqueued on the table's stream. */
ms_status ms_k_cuda_linear_f32out(const ms_k_ops *ops, float *y, const void *x, const void *w, int64_t n, int64_t k,
                                  int64_t m);

/* Give cuBLAS a fixed workspace of `bytes` (owned by the table, freed with
 * it) so that no GEMM allocates: required before capturing a graph. Call
 * after ms_k_cuda_ops (cublasSetStream resets it). 32 MiB covers Hopper. */
#define MS_K_CUDA_BLAS_WS_BYTES ((size_t)32 << 20)
ms_status ms_k_cuda_blas_workspace(const ms_k_ops *ops, size_t bytes);
/* Size the split-KV attention workspace once for every call with n_q ≤ max_q
 * queries of n_heads × head_dim over ≤ max_rows cache rows, so attention
 * never allocates later (nothing may allocate during graph capture). */
ms_status ms_k_cuda_attn_reserve(const ms_k_ops *ops, int64_t max_q, int64_t n_heads, int64_t head_dim,
                                 int64_t max_rows);

/* dst[i] (act dtype) = the seeded value of ms_k_random.h for i < n
 * (mean offset, deviation scale), enqueued on the table's stream. */
ms_status ms_k_cuda_fill_random(const ms_k_ops *ops, void *dst, int64_t n, uint64_t seed, float scale, float offset);

/* CUDA graphs of a forward. begin starts a (thread-local) capture of the
 * table's stream: ops called until end are recorded, not run, and must not
 * allocate or synchronise. end stops it and, when *g holds an executable
 * graph, tries cudaGraphExecUpdate with the new recording (cheap: kernel
 * parameters such as the context length change every call); when that is
 * refused (topology changed) or *g is NULL it instantiates a new one into
 * *g. *event says which (MS_K_CUDA_GRAPH_*). An op error recorded during
 * capture is returned by end (and cleared); nothing is launched then.
 * launch enqueues *g on the table's stream. */
typedef struct ms_k_cuda_graph ms_k_cuda_graph;
enum { MS_K_CUDA_GRAPH_INSTANTIATED = 1, MS_K_CUDA_GRAPH_UPDATED = 2 };
ms_status ms_k_cuda_capture_begin(const ms_k_ops *ops);
ms_status ms_k_cuda_capture_end(const ms_k_ops *ops, ms_k_cuda_graph **g, int *event);
ms_status ms_k_cuda_graph_launch(const ms_k_ops *ops, const ms_k_cuda_graph *g);
void ms_k_cuda_graph_free(ms_k_cuda_graph **g);

#ifdef __cplusplus
}
#endif

#endif
