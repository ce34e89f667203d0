/* ms_head.h — the draft's LM head over its vocabulary mode (docs/architecture.md §5),
 * on the backend the draft picks once, at creation. The mode is an
 * implementation of ms_vmode_i (ms_vmode.h): it owns the vocabularies and
 * names the rows of each step; the head only evaluates them.
 *
 * One interface, two implementations:
 *   - host: the C window ms_vocab (ms_vocab.c, the specification of the
 *     window rule I = Unique(Suffix(S, W_max)) and its swap-remove slot
 *     layout) with the head rows in f32 (OpenBLAS over the packed rows, or
 *     by id for the indexed head) or in the model's GGUF block format
 *     (ms_vocab_logits_q, f32 or 8-bit activations); log-softmax and top-k
 *     on the host.
 *   - device: the backend's draft head (ms_k_backend.h, ms_k_head_table; on
 *     CUDA the device window twin in kernels/cuda): hidden rows, logits and
 *     the window stay on the device; only [n, k] ids and log-probs come
 *     down. The C window is kept beside it, without rows, for the
 *     bookkeeping (coverage, |I|), and both twins are fed the same stream
 *     plan (ms_vocab_begin_plan / ms_vocab_round_plan) in order, so they hold
 *     the same window and slot layout.
 * Nothing is allocated per call.
 */
#ifndef MS_HEAD_H
#define MS_HEAD_H

#include "ms_common.h"
#include "ms_draft.h" /* ms_dft_opts: what a mode reads */
#include "ms_k_backend.h"
#include "ms_vocab.h"

typedef struct ms_head ms_head;
typedef struct ms_vmode_i ms_vmode_i;

/* One head evaluation at draft depth `depth` (0: the root's step; ms_vsel.h):
 * hid [n, d] the rows' hidden states (host), prev [n, d] their parents', tok
 * [n] their tokens. A mode that works here adds its time to *vocab_ns. */
typedef struct {
    const float *hid, *prev;
    const int32_t *tok;
    int64_t n, depth;
    uint64_t *vocab_ns;
} ms_vmode_step;

/* A request's start: S_init of `stream` (ms_vocab_begin_stream). */
typedef struct {
    ms_vocab_stream stream;
    const int32_t *prompt;
    int64_t n_prompt;
    const int32_t *topk_pre; /* [n_prompt, k_pre] */
    int64_t k_pre;
} ms_vmode_begin_in;
/* A verdict's stream additions (ms_vocab_stream_round). */
typedef struct {
    ms_vocab_stream stream;
    const int32_t *tree_ids, *emitted, *ver_topk; /* [n_tree], [n_emit], [n_path, k_ver] */
    int64_t n_tree, n_emit, n_path, k_ver;
} ms_vmode_round_in;

typedef struct {
    const ms_vmode_i *vmode;   /* the vocabulary mode (ms_vmode.h); NULL: ms_vmode_of(mode, none) */
    ms_vocab_mode mode;
    const ms_dft_opts *dft;    /* the draft's options a mode reads (list file, selector, budgets); may be NULL */
    const char *head_model;    /* selectors: the model whose head their artefact approximates */
    ms_status (*embed)(void *ctx, ms_qweight *out); /* dynaspec: the draft's embedding table */
    void *embed_ctx;
    bool indexed;              /* read the head's rows by id (no packed rows, no gathers) */
    int64_t V, d;
    int64_t w_max;             /* dynamic */
    const int32_t *static_ids; /* static: [k_static] slot → id, read at creation */
    int64_t k_static;
    int64_t max_rows, max_k;   /* largest evaluation: rows × top-k */
    /* host head: exactly one of W (f32 [V, d]) and Wq (block format) */
    const float *W;
    const ms_qweight *Wq;
    bool q8;                   /* Wq: 8-bit activations (act_quantize once per call) */
    /* device head: be->head.head_new != NULL and W_dev set (then W, Wq unused) */
    const ms_k_backend *be;
    int dev;
    const ms_k_ops *ops;       /* the draft model's table and stream */
    void *stream;
    ms_dtype act;
    const void *W_dev;         /* [V, d] act, device */
    int64_t max_append;        /* dynamic: most ids of one stream change */
} ms_head_opts;

/* A head (and its C window) over o's rows; the device head when o->W_dev is
 * set. W / Wq / W_dev are not owned and must outlive the head. */
ms_status ms_head_new(const ms_head_opts *o, ms_head **out);
/* Waits for the device work, frees, nulls *h (NULL is fine). */
void ms_head_free(ms_head **h);

/* A new request: empty the window(s), then S_init of `stream`
 * (ms_vocab_begin_stream), validated first. */
ms_status ms_head_begin(ms_head *h, ms_vocab_stream stream, const int32_t *prompt, int64_t n_prompt,
                        const int32_t *topk_pre, int64_t k_pre);
/* One round's stream additions (ms_vocab_stream_round), validated first. */
ms_status ms_head_append_round(ms_head *h, ms_vocab_stream stream, const int32_t *tree_ids, int64_t n_tree,
                               const int32_t *emitted, int64_t n_emit, const int32_t *ver_topk, int64_t n_path,
                               int64_t k_ver);

/* For n rows (host hid [n, d] f32 on the host head; device hid_dev [n, d]
 * act on the device head): logits over the active rows, log-softmax over
 * them, the k best as ids [n, k] and log-probs logp [n, k]. Fewer than k
 * active rows: padded with −inf entries repeating the last real id (with an
 * empty window, `pad` — the root — at −inf). A device head whose window
 * could not follow the stream refuses until the next begin. */
ms_status ms_head_topk(ms_head *h, const float *hid, const void *hid_dev, int64_t n, int64_t k, int32_t pad,
                       int32_t *ids, float *logp);
/* MS_OK, or (logged) the failure that put the device window out of step
 * with the stream since the last begin. */
ms_status ms_head_ready(const ms_head *h);
/* The device stream was synchronised by its owner (a forward): the head's
 * staging may be reused. No-op on the host head. */
void ms_head_synced(ms_head *h);

/* The vocabulary coverage is measured against (the window, the list, …). */
const ms_vocab *ms_head_vocab(const ms_head *h);
/* Before each ms_head_topk: the mode picks the step's rows (a per-step
 * selector, a static list's position-aware prefix; most modes: nothing). */
ms_status ms_head_plan(ms_head *h, const ms_vmode_step *s);
/* The vocabulary whose rows the head reads now. */
const ms_vocab *ms_head_rows(const ms_head *h);
const ms_vmode_i *ms_head_mode(const ms_head *h);
bool ms_head_on_device(const ms_head *h);
/* The device window (dynamic, device head), else NULL: tests. */
void *ms_head_device_window(ms_head *h);
/* Host synchronisations of the device window module so far (0 on the host). */
int64_t ms_head_window_syncs(const ms_head *h);
/* "on the host, Q8_0 rows, 8-bit activations" and the like, for the log. */
void ms_head_describe(const ms_head *h, char *buf, size_t cap);

#endif
