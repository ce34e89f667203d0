/* ms_k_backend.h — the backend table: what differs per device beside the ops.
 *
 * ms_k_ops (ms_kernels.h) holds the compute ops of one device and dtype. The
 * backend table holds the rest of what a model, a draft head or a transport
 * does differently on each device: making the op table and its stream,
 * buffers, host ↔ buffer copies, synchronisation and error polling, the
 * linear over a typed weight (the one way callers multiply by a matrix: the
 * op table's gemm is its dense primitive), recorded forwards (graphs) and
 * the draft head over the vocabulary window (head top-k on the device). Every entry is a function pointer chosen once,
 * when the caller picks the table (ms_k_backend_for); callers never test
 * which device they run on to choose code, only `on_device` to choose where
 * data lives.
 *
 * Two tables exist: the CPU one (this folder, ms_k_backend.c) and, in builds
 * with CUDA, the CUDA one (cuda/ms_k_cuda_backend.c, over ms_k_cuda.h). A
 * build without CUDA has no CUDA table: ms_k_backend_cuda() returns NULL
 * there (ms_k_backend_nocuda.c, the one place that knows) and
 * ms_k_backend_for answers MS_ERR_UNSUPPORTED.
 *
 * Memory. On the CPU table every buffer is host memory and the copies are
 * memcpy. On a device table "buffer" means device memory; "host" arguments
 * are host memory, pinned when it comes from host_alloc. The `_async` copies
 * are ordered on the op table's stream and complete at the next sync.
 *
 * Errors. Entries returning ms_status log where the error is found. Entries
 * returning void (linear) only enqueue work; a device records its errors and
 * returns the first from sync.
 */
#ifndef MS_K_BACKEND_H
#define MS_K_BACKEND_H

#include "ms_common.h"
#include "ms_kernels.h"
#include "ms_qweight.h"

/* Recorded forwards of one model: one slot per shape key (ms_k_backend.graph_run). */
typedef struct ms_k_graphs ms_k_graphs;

/* Activations quantized to 8-bit blocks (CPU): rows of x quantized once for
 * every block-format matmul that reads them (layout and arithmetic:
 * cpu/ms_qdot.h). Made by act_new, filled by act_quantize, read by linear. */
typedef struct ms_k_act ms_k_act;

/* One product of linear_multi: y [n, w->m] = x · wᵀ (+ b[w->m] when b != NULL),
 * w in its block format. */
enum { MS_K_LINEAR_MULTI_MAX = 4 };
typedef struct {
    float *y;
    const ms_qweight *w;
    const float *b;
} ms_k_linear_out;

/* ---- the draft head on a device ----------------------------------------------
 *
 * The draft's LM head over one vocabulary mode with everything on the
 * device: the hidden rows never come down, the logits stay there, and only
 * [n, kk] top-k ids and log-probs return (one host synchronisation per
 * evaluation). Rows: FULL = dense over the model's head W [V, d]; STATIC =
 * dense over the K rows gathered once (indexed: read by id in place);
 * WINDOW = the device twin of the dynamic window (ms_k_cuda_vocab: packed
 * rows gathered on a second stream, overlapping the next backbone forward;
 * indexed: read by id). The window is fed the same stream changes as the C
 * window in draft-node/ms_vocab.c (the specification) through head_reset /
 * head_append, so both hold the same window and slot layout. The CPU table
 * has no device head (head_new NULL): a CPU draft's head is ms_vocab itself
 * (draft-node/ms_head.h). */
typedef struct ms_k_head ms_k_head;
typedef enum { MS_K_HEAD_FULL = 0, MS_K_HEAD_STATIC, MS_K_HEAD_WINDOW } ms_k_head_rows;
typedef struct {
    int dev;               /* device index */
    const ms_k_ops *ops;   /* the draft model's table: all head work runs on its stream */
    void *stream;          /* that table's stream */
    ms_dtype act;          /* the model's act dtype */
    const void *W;         /* [V, d] act, device: the model's head (not owned, outlives the head) */
    int64_t V, d;
    ms_k_head_rows rows;
    bool indexed;          /* read the rows of W by id (no packed rows, no gather) */
    const int32_t *static_ids; /* STATIC: host [k_static] slot → id */
    int64_t k_static;
    int64_t w_max;         /* WINDOW: W_max */
    int64_t max_append;    /* WINDOW: most ids of one head_append */
    int64_t max_rows, max_k; /* largest evaluation: rows × top-k */
} ms_k_head_opts;

typedef struct {
    /* A device head (device buffers sized for the largest evaluation;
     * synchronises once). NULL entry: the table has no device head. */
    ms_status (*head_new)(const ms_k_head_opts *o, ms_k_head **out);
    /* Waits for the head's work, frees, nulls *h. */
    void (*head_free)(ms_k_head **h);
    /* WINDOW: empty the stream and the window. Others: no-op. */
    ms_status (*head_reset)(ms_k_head *h);
    /* WINDOW: append host ids [n ≤ max_append] in order, plain or their
     * union in first-occurrence order (ms_vocab_step). Enqueued only. */
    ms_status (*head_append)(ms_k_head *h, const int32_t *ids, int64_t n, bool distinct);
    /* After the appends of one stream change: start the gather of the
     * entering rows (gathered, WINDOW), so it overlaps the next forward. */
    ms_status (*head_appended)(ms_k_head *h);
    /* The table's stream was synchronised by its owner: staging is free again. */
    void (*head_synced)(ms_k_head *h);
    /* Logits of hid [n, d] (act, device) over the mode's columns (WINDOW:
     * W_max columns, those ≥ |I| at −inf), log-softmax, the kk = min(k,
     * columns) best per row, slots → ids (−1 for a masked slot). *ids,
     * *logp [n, kk] point at host memory owned by the head, valid until its
     * next call. 1 ≤ n ≤ max_rows, 1 ≤ k ≤ max_k. */
    ms_status (*head_topk)(ms_k_head *h, const void *hid, int64_t n, int64_t k, const int32_t **ids,
                           const float **logp, int64_t *kk);
    /* The device window (WINDOW), else NULL: for tests. */
    void *(*head_window)(ms_k_head *h);
    /* Host synchronisations the window module made so far (tests). */
    int64_t (*head_window_syncs)(void);
} ms_k_head_table;

typedef struct ms_k_backend ms_k_backend;
struct ms_k_backend {
    const char *name;   /* "cpu", "cuda" */
    bool on_device;     /* buffers are device memory, not host-addressable */

    /* ---- device and op table --------------------------------------------- */

    /* Make device `dev` current for this thread (CPU: no-op). */
    ms_status (*set_device)(int dev);
    /* Name and memory of device `dev` into buf (CPU: "host"). */
    ms_status (*device_info)(int dev, char *buf, size_t cap);
    /* The op table of a model on device `dev` with activations and weights in
     * `act` (CPU: f32 only, act ignored): a stream of its own (*stream; NULL
     * on the CPU) and, on CUDA, a fixed GEMM workspace so no op allocates
     * later. Undo with close (waits for the stream first; nulls both). */
    ms_status (*open)(int dev, ms_dtype act, const ms_k_ops **ops, void **stream);
    void (*close)(int dev, const ms_k_ops **ops, void **stream);
    /* Wait for the table's stream; return (and clear) the first error its ops
     * recorded since the last call (CPU: MS_OK). */
    ms_status (*sync)(const ms_k_ops *ops);

    /* ---- memory ------------------------------------------------------------ */

    /* A buffer of `bytes`, zeroed on the CPU, uninitialised on a device (0
     * gives a valid 1-byte allocation); free nulls *p (NULL is fine). */
    ms_status (*buf_alloc)(void **p, size_t bytes);
    void (*buf_free)(void **p);
    /* Host staging for the async copies (pinned on a device; bytes == 0 gives NULL). */
    ms_status (*host_alloc)(void **p, size_t bytes);
    void (*host_free)(void **p);
    /* Copies ordered after the table's work; upload/download complete on return. */
    ms_status (*upload)(const ms_k_ops *ops, void *buf, const void *host, size_t bytes);
    ms_status (*download)(const ms_k_ops *ops, void *host, const void *buf, size_t bytes);
    ms_status (*upload_async)(const ms_k_ops *ops, void *buf, const void *host, size_t bytes);
    ms_status (*download_async)(const ms_k_ops *ops, void *host, const void *buf, size_t bytes);
    ms_status (*copy_async)(const ms_k_ops *ops, void *dst, const void *src, size_t bytes);
    ms_status (*memset_async)(const ms_k_ops *ops, void *buf, int value, size_t bytes);

    /* ---- tables and weights ----------------------------------------------- */

    /* A RoPE table the ops can read: device copies of host's cos/sin (CPU:
     * *dev is a view of *host). Free with rope_free. */
    ms_status (*rope_upload)(const ms_k_rope *host, ms_k_rope *dev);
    void (*rope_free)(ms_k_rope *dev);
    /* dst[i] (act) = ms_k_random_value(seed, i, scale, offset), i < n (ms_k_random.h). */
    ms_status (*fill_random)(const ms_k_ops *ops, void *dst, int64_t n, uint64_t seed, float scale, float offset);
    /* Size attention's workspace once for every later call (CPU: no-op). */
    ms_status (*attn_reserve)(const ms_k_ops *ops, int64_t max_q, int64_t n_heads, int64_t head_dim, int64_t max_rows);

    /* ---- linear over a typed weight ---------------------------------------- */

    /* y[n, m] = x[n, k] · Wᵀ (+ b[m]) with W either dense `w` [m, k] in the
     * table's weight dtype (q == NULL: the op table's gemm) or `q`, a matrix
     * in its stored block format (GGUF; CPU only): f32 activations (xq ==
     * NULL, cpu/ms_quant.h) or the 8-bit activations xq that act_quantize
     * made of x's n rows of k (cpu/ms_qdot.h). One call per matmul; the
     * choice is one branch on the arguments. */
    void (*linear)(const ms_k_ops *ops, void *y, const void *x, const void *w, const ms_qweight *q,
                   const ms_k_act *xq, const void *b, int64_t n, int64_t k, int64_t m);
    /* The same without bias and with f32 output whatever the act dtype (the
     * LM head: logits are never rounded to act). */
    ms_status (*linear_f32out)(const ms_k_ops *ops, float *y, const void *x, const void *w, const ms_qweight *q,
                               const ms_k_act *xq, int64_t n, int64_t k, int64_t m);

    /* ---- block-format weights and 8-bit activations (CPU; NULL on a device) --
     *
     * GGUF weights load on the CPU table only, so a device table has none of
     * these entries. */

    /* Room for up to max_rows rows of max_k elements (sized once at load);
     * act_free frees and nulls *a (NULL is fine). */
    ms_status (*act_new)(int64_t max_rows, int64_t max_k, ms_k_act **out);
    void (*act_free)(ms_k_act **a);
    /* Quantize x [n, k] (f32, host; k a multiple of 32) into a for the
     * matmuls that follow on these rows, in the forms the weights ws[count]
     * read (ws[i] NULL: none; no weight at all: every form). Deterministic. */
    void (*act_quantize)(ms_k_act *a, const float *x, int64_t n, int64_t k, const ms_qweight *const *ws, int count);
    /* Several products of the same quantized rows (q, k, v; gate, up) in one
     * pool round: outs[i] exactly as linear computes it (the same bits).
     * xq holds n rows of k; 1 ≤ count ≤ MS_K_LINEAR_MULTI_MAX. */
    void (*linear_multi)(const ms_k_linear_out *outs, int count, const ms_k_act *xq, int64_t n, int64_t k);
    /* linear over a subset of q's rows, no bias: y[n, n_rows], column j =
     * row rows[j] of q (a draft head over a vocabulary window, read in
     * place); f32 x [n, q->k] (xq NULL) or xq (x NULL). */
    void (*linear_rows)(float *y, const float *x, const ms_k_act *xq, const ms_qweight *q, const int32_t *rows,
                        int64_t n_rows, int64_t n);
    /* Copy q's blocks into the tile layout where this CPU's multi-row
     * products read it (q->tiles; the same bits with or without:
     * cpu/ms_qdot.h); pack_bytes: what pack would allocate (0: nothing);
     * pack_free frees q->tiles and nulls it. */
    ms_status (*pack)(ms_qweight *q);
    size_t (*pack_bytes)(const ms_qweight *q);
    void (*pack_free)(ms_qweight *q);

    /* ---- recorded forwards --------------------------------------------------- */

    /* A cache of n_keys recorded op sequences. graph_run(key, fn, arg) runs
     * fn(arg), which enqueues ops on the table's stream: on the CPU it just
     * calls fn. On CUDA a key's first call runs eagerly (cuBLAS picks and
     * loads its kernels before anything is captured); later calls record fn
     * into a CUDA graph, update the key's executable in place when only
     * parameters changed (else instantiate a new one) and launch it; with
     * `eager` every call runs eagerly. fn must not allocate or synchronise. */
    ms_status (*graphs_new)(int64_t n_keys, bool eager, ms_k_graphs **out);
    void (*graphs_free)(ms_k_graphs **g);
    ms_status (*graph_run)(const ms_k_ops *ops, ms_k_graphs *g, int64_t key, ms_status (*fn)(void *arg), void *arg);
    /* Executables instantiated and updated in place so far. */
    void (*graph_counts)(const ms_k_graphs *g, int64_t *inst, int64_t *upd);

    /* ---- the draft head (above) ------------------------------------------------ */
    ms_k_head_table head;
};

/* The CPU table. */
const ms_k_backend *ms_k_backend_cpu(void);
/* The CUDA table; NULL in a build without CUDA. */
const ms_k_backend *ms_k_backend_cuda(void);
/* The table of device `cuda_dev` (-1: CPU): MS_ERR_UNSUPPORTED (logged, with
 * `what` naming the caller) when CUDA is asked of a build without it. */
ms_status ms_k_backend_for(int cuda_dev, const char *what, const ms_k_backend **out);

#endif
