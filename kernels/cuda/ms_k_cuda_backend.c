/* ms_k_cuda_backend.c — the CUDA backend table (ms_k_backend.h): plain C
 * over the C-callable CUDA API of ms_k_cuda.h, built only with CUDA (a build
 * without it links ms_k_backend_nocuda.c instead).
 *
 * A model on CUDA: the op table on a non-blocking stream of its own with a
 * fixed cuBLAS workspace (so nothing allocates during graph capture);
 * weights and activations in act (BF16 / F16) in device memory; staging in
 * pinned host memory.
 *
 * Recorded forwards: one slot per shape key. A key's first call runs
 * eagerly, so cuBLAS chooses and loads every kernel and every module is
 * loaded before anything is captured; later calls record the op sequence
 * into a CUDA graph and replay it through an executable graph that is
 * updated in place when only parameters changed (the context length changes
 * every call) and re-instantiated when the topology changed (ms_k_cuda.h:
 * ms_k_cuda_capture_end).
 *
 * The draft head: the LM head of a CUDA lm / layerskip draft, its top-k and
 * (dynamic mode) the device twin of the vocabulary window, moved here from
 * the draft so the draft itself has no CUDA code (ms_k_backend.h). */
#include <stdlib.h>
#include <string.h>

#include "ms_k_backend.h"
#include "ms_k_cuda.h"
#include "ms_k_cuda_lmhead.h"

static ms_status cuda_device_info(int dev, char *buf, size_t cap) { return ms_k_cuda_device_info(dev, buf, cap); }

static ms_status cuda_open(int dev, ms_dtype act, const ms_k_ops **ops, void **stream) {
    *ops = NULL;
    *stream = NULL;
    if (act != MS_DTYPE_BF16 && act != MS_DTYPE_F16)
        MS_FAIL(MS_ERR_INVALID, "CUDA activation dtype %s unsupported (BF16 or F16)", ms_dtype_name(act));
    MS_TRY(ms_k_cuda_set_device(dev));
    MS_TRY(ms_k_cuda_stream_new(stream));
    *ops = ms_k_cuda_ops(act, *stream);
    if (!*ops) MS_FAIL(MS_ERR_INTERNAL, "cannot make the CUDA op table on cuda:%d", dev);
    return ms_k_cuda_blas_workspace(*ops, MS_K_CUDA_BLAS_WS_BYTES);
}

static void cuda_close(int dev, const ms_k_ops **ops, void **stream) {
    if (ms_k_cuda_set_device(dev) != MS_OK) MS_LOG_WARN("cuda close: cannot select cuda:%d", dev);
    ms_k_cuda_ops_destroy(ops); /* waits for the stream */
    ms_k_cuda_stream_free(stream);
}

static ms_status cuda_alloc(void **p, size_t bytes) { return ms_k_cuda_malloc(p, bytes ? bytes : 1); }

static ms_status cuda_rope_upload(const ms_k_rope *host, ms_k_rope *dev) { return ms_k_cuda_rope_upload(host, dev); }

static void cuda_linear(const ms_k_ops *ops, void *y, const void *x, const void *w, const ms_qweight *q,
                        const ms_k_act *xq, const void *b, int64_t n, int64_t k, int64_t m) {
    /* block formats stay on the CPU: the model refuses a GGUF file on CUDA */
    MS_ASSERT(!q && !xq);
    ops->gemm(ops->ctx, y, x, w, b, n, k, m);
}

static ms_status cuda_linear_f32out(const ms_k_ops *ops, float *y, const void *x, const void *w, const ms_qweight *q,
                                    const ms_k_act *xq, int64_t n, int64_t k, int64_t m) {
    MS_ASSERT(!q && !xq);
    return ms_k_cuda_linear_f32out(ops, y, x, w, n, k, m);
}

struct ms_k_graphs {
    int64_t n_keys;
    bool eager;
    ms_k_cuda_graph **g; /* [n_keys] */
    uint8_t *seen;       /* [n_keys] the key ran once eagerly */
    int64_t n_inst, n_upd;
};

static void cuda_graphs_free(ms_k_graphs **pg) {
    ms_k_graphs *g = *pg;
    if (!g) return;
    if (g->g)
        for (int64_t i = 0; i < g->n_keys; i++) ms_k_cuda_graph_free(&g->g[i]);
    free(g->g);
    free(g->seen);
    free(g);
    *pg = NULL;
}

static ms_status cuda_graphs_new(int64_t n_keys, bool eager, ms_k_graphs **out) {
    ms_k_graphs *g = ms_calloc(1, sizeof *g);
    *out = NULL;
    if (!g) return MS_ERR_NOMEM;
    g->n_keys = n_keys;
    g->eager = eager;
    g->g = ms_calloc((size_t)n_keys, sizeof *g->g);
    g->seen = ms_calloc((size_t)n_keys, 1);
    if (!g->g || !g->seen) {
        cuda_graphs_free(&g);
        return MS_ERR_NOMEM;
    }
    *out = g;
    return MS_OK;
}

static ms_status cuda_graph_run(const ms_k_ops *ops, ms_k_graphs *g, int64_t key, ms_status (*fn)(void *arg),
                                void *arg) {
    MS_ASSERT(key >= 0 && key < g->n_keys);
    if (g->eager || !g->seen[key]) {
        g->seen[key] = 1;
        return fn(arg);
    }
    MS_TRY(ms_k_cuda_capture_begin(ops));
    ms_status st = fn(arg);
    int ev = 0;
    ms_status se = ms_k_cuda_capture_end(ops, &g->g[key], &ev); /* always: ends the capture */
    if (st == MS_OK) st = se;
    if (ev == MS_K_CUDA_GRAPH_INSTANTIATED) g->n_inst++;
    if (ev == MS_K_CUDA_GRAPH_UPDATED) g->n_upd++;
    if (st == MS_OK) st = ms_k_cuda_graph_launch(ops, g->g[key]);
    return st;
}

static void cuda_graph_counts(const ms_k_graphs *g, int64_t *inst, int64_t *upd) {
    if (inst) *inst = g ? g->n_inst : 0;
    if (upd) *upd = g ? g->n_upd : 0;
}

/* ---- the draft head (ms_k_backend.h) -------------------------------------------
 *
 * Every pointer is device memory unless named h_*. Sized at head_new for the
 * largest evaluation: max_rows rows × top-max_k. */
struct ms_k_head {
    ms_k_head_opts o;
    int64_t m;            /* logit columns: V (full), K (static), W_max (window) */
    int64_t kk_max;       /* max_rows · max_k */
    float *logits;        /* [max_rows, m] f32 */
    int32_t *slots, *ids;
    float *vals;          /* [max_rows · max_k] top-k of each row */
    int32_t *h_ids;       /* pinned, same shape */
    float *h_vals;
    void *srows;          /* static: [K, d] act rows */
    int32_t *sids;        /* static: [K] slot → id */
    int32_t *kcount;      /* static: [1] = K (the indexed kernel's active count) */
    ms_k_cuda_vocab *win; /* window */
    void *copy;           /* gathered window: the gather stream (owned) */
    int32_t *h_stage;     /* pinned [stage_cap]: stream ids on their way to the window */
    int32_t *stage;       /* [stage_cap] */
    int64_t stage_cap, stage_off; /* h_stage[0, stage_off) may still be read by an async copy */
};

static void head_free(ms_k_head **ph) {
    ms_k_head *v = *ph;
    if (!v) return;
    if (ms_k_cuda_set_device(v->o.dev) != MS_OK) MS_LOG_WARN("draft: device %d lost at teardown", v->o.dev);
    ms_k_cuda_vocab_free(&v->win); /* waits for its work on both streams */
    ms_k_cuda_stream_free(&v->copy);
    if (v->o.ops && ms_k_cuda_sync(v->o.ops) != MS_OK) MS_LOG_WARN("draft: device head had a pending error at teardown");
    ms_k_cuda_free((void **)&v->logits);
    ms_k_cuda_free((void **)&v->slots);
    ms_k_cuda_free((void **)&v->ids);
    ms_k_cuda_free((void **)&v->vals);
    ms_k_cuda_free(&v->srows);
    ms_k_cuda_free((void **)&v->sids);
    ms_k_cuda_free((void **)&v->kcount);
    ms_k_cuda_free((void **)&v->stage);
    ms_k_cuda_host_free((void **)&v->h_ids);
    ms_k_cuda_host_free((void **)&v->h_vals);
    ms_k_cuda_host_free((void **)&v->h_stage);
    free(v);
    *ph = NULL;
}

static ms_status head_alloc(ms_k_head *v) {
    const ms_k_head_opts *o = &v->o;
    MS_TRY(ms_k_cuda_set_device(o->dev));
    v->m = o->rows == MS_K_HEAD_FULL ? o->V : o->rows == MS_K_HEAD_STATIC ? o->k_static : o->w_max;
    const size_t kk = (size_t)v->kk_max;
    MS_TRY(ms_k_cuda_malloc((void **)&v->logits, (size_t)o->max_rows * (size_t)v->m * sizeof(float)));
    MS_TRY(ms_k_cuda_malloc((void **)&v->slots, kk * sizeof(int32_t)));
    MS_TRY(ms_k_cuda_malloc((void **)&v->ids, kk * sizeof(int32_t)));
    MS_TRY(ms_k_cuda_malloc((void **)&v->vals, kk * sizeof(float)));
    MS_TRY(ms_k_cuda_host_alloc((void **)&v->h_ids, kk * sizeof(int32_t)));
    MS_TRY(ms_k_cuda_host_alloc((void **)&v->h_vals, kk * sizeof(float)));
    if (o->rows == MS_K_HEAD_STATIC) {
        MS_TRY(ms_k_cuda_static_rows_new(o->ops, o->W, o->V, o->d, o->static_ids, o->k_static, &v->srows, &v->sids));
        const int32_t kc = (int32_t)o->k_static;
        MS_TRY(ms_k_cuda_malloc((void **)&v->kcount, sizeof(int32_t)));
        MS_TRY(ms_k_cuda_upload(o->ops, v->kcount, &kc, sizeof kc));
    } else if (o->rows == MS_K_HEAD_WINDOW) {
        v->stage_cap = o->max_append;
        MS_TRY(ms_k_cuda_host_alloc((void **)&v->h_stage, (size_t)v->stage_cap * sizeof(int32_t)));
        MS_TRY(ms_k_cuda_malloc((void **)&v->stage, (size_t)v->stage_cap * sizeof(int32_t)));
        MS_TRY(ms_k_cuda_stream_new(&v->copy));
        MS_TRY(ms_k_cuda_vocab_new(o->V, o->w_max, o->d, o->act, o->W, o->stream, v->copy, &v->win));
    }
    return ms_k_cuda_sync(o->ops);
}

static ms_status head_new(const ms_k_head_opts *o, ms_k_head **out) {
    *out = NULL;
    if (o->max_rows < 1 || o->max_k < 1 || (o->rows == MS_K_HEAD_WINDOW && o->max_append < 1))
        MS_FAIL(MS_ERR_INVALID, "draft device head: %lld rows × top-%lld, %lld staged ids", (long long)o->max_rows,
                (long long)o->max_k, (long long)o->max_append);
    ms_k_head *v = ms_calloc(1, sizeof *v);
    if (!v) return MS_ERR_NOMEM;
    v->o = *o;
    v->o.act = o->act ? o->act : MS_DTYPE_BF16;
    v->kk_max = o->max_rows * o->max_k;
    ms_status st = head_alloc(v);
    v->o.static_ids = NULL; /* the host list is read once, by head_alloc */
    if (st < 0) {
        head_free(&v);
        return st;
    }
    *out = v;
    return MS_OK;
}

static ms_status head_reset(ms_k_head *v) {
    if (!v->win) return MS_OK;
    MS_TRY(ms_k_cuda_set_device(v->o.dev));
    return ms_k_cuda_vocab_reset(v->win);
}

/* ids go through pinned staging (async upload), then one append kernel on
 * the model's stream. The staging is reused only after a synchronisation of
 * the stream (every forward and every head download is one: head_synced). */
static ms_status head_append(ms_k_head *v, const int32_t *ids, int64_t n, bool distinct) {
    if (!v->win || n == 0) return MS_OK;
    MS_TRY(ms_k_cuda_set_device(v->o.dev));
    if (n > v->stage_cap)
        MS_FAIL(MS_ERR_RANGE, "draft: %lld stream ids at once exceed the device window staging of %lld",
                (long long)n, (long long)v->stage_cap);
    if (v->stage_off + n > v->stage_cap) { /* only a begin with a long prompt and a large K_pre gets here */
        MS_TRY(ms_k_cuda_sync(v->o.ops));
        v->stage_off = 0;
    }
    int32_t *h = v->h_stage + v->stage_off, *dids = v->stage + v->stage_off;
    memcpy(h, ids, (size_t)n * sizeof(int32_t));
    MS_TRY(ms_k_cuda_upload_async(v->o.ops, dids, h, (size_t)n * sizeof(int32_t)));
    v->stage_off += n;
    return distinct ? ms_k_cuda_vocab_append_distinct(v->win, dids, n) : ms_k_cuda_vocab_append(v->win, dids, n);
}

static ms_status head_appended(ms_k_head *v) {
    if (!v->win || v->o.indexed) return MS_OK;
    MS_TRY(ms_k_cuda_set_device(v->o.dev));
    return ms_k_cuda_vocab_gather(v->win);
}

static void head_synced(ms_k_head *v) { v->stage_off = 0; }

/* All on the model's stream: logits over the mode's columns (window: W_max
 * columns, those ≥ |I| at −inf so that exp() gives 0 in the log-softmax and
 * top-k never prefers them to an active slot), log-softmax, top-k slots,
 * slots → ids (−1 for a masked slot), then [n, kk] ids and log-probs down
 * with one synchronisation. */
static ms_status head_topk(ms_k_head *v, const void *h, int64_t n, int64_t k, const int32_t **ids, const float **logp,
                           int64_t *kk_out) {
    const ms_k_ops *ops = v->o.ops;
    if (n < 1 || n > v->o.max_rows || k < 1 || k > v->o.max_k)
        MS_FAIL(MS_ERR_RANGE, "draft device head: %lld rows × top-%lld outside [1, %lld] × [1, %lld]", (long long)n,
                (long long)k, (long long)v->o.max_rows, (long long)v->o.max_k);
    MS_TRY(ms_k_cuda_set_device(v->o.dev));
    const int64_t m = v->m, kk = k < m ? k : m, dim = v->o.d;
    const bool indexed = v->o.indexed;
    const int32_t *id_of = NULL, *n_active = NULL;
    switch (v->o.rows) {
    case MS_K_HEAD_FULL: /* indexed over the identity map is the dense GEMM over W in place */
        MS_TRY(ms_k_cuda_lmhead_dense(ops, v->logits, m, h, v->o.W, n, m, dim));
        break;
    case MS_K_HEAD_STATIC:
        id_of = v->sids;
        if (indexed) {
            n_active = v->kcount;
            MS_TRY(ms_k_cuda_lmhead_indexed(ops, v->logits, m, h, v->o.W, v->o.V, id_of, n_active, n, m, dim));
        } else {
            MS_TRY(ms_k_cuda_lmhead_dense(ops, v->logits, m, h, v->srows, n, m, dim));
        }
        break;
    case MS_K_HEAD_WINDOW: {
        const void *rows;
        ms_k_cuda_vocab_rows(v->win, &rows, &n_active, &id_of);
        if (indexed) {
            MS_TRY(ms_k_cuda_lmhead_indexed(ops, v->logits, m, h, v->o.W, v->o.V, id_of, n_active, n, m, dim));
        } else {
            MS_TRY(ms_k_cuda_vocab_wait(v->win, v->o.stream)); /* the rows gathered since the last appends */
            MS_TRY(ms_k_cuda_lmhead_packed(ops, v->logits, m, h, rows, n_active, n, m, dim));
        }
        break;
    }
    }
    MS_TRY(ms_k_cuda_log_softmax_rows(ops, v->logits, v->logits, n, m, m));
    MS_TRY(ms_k_cuda_topk_rows(ops, v->slots, v->vals, v->logits, n, m, m, kk));
    MS_TRY(ms_k_cuda_slots_to_ids(ops, v->ids, v->slots, n * kk, id_of, m, n_active));
    MS_TRY(ms_k_cuda_download_async(ops, v->h_ids, v->ids, (size_t)(n * kk) * sizeof(int32_t)));
    MS_TRY(ms_k_cuda_download_async(ops, v->h_vals, v->vals, (size_t)(n * kk) * sizeof(float)));
    ms_status st = ms_k_cuda_sync(ops); /* the level's one synchronisation */
    head_synced(v);
    MS_TRY(st);
    *ids = v->h_ids;
    *logp = v->h_vals;
    *kk_out = kk;
    return MS_OK;
}

static void *head_window(ms_k_head *v) { return v->win; }

static const ms_k_backend cuda_backend = {
    .name = "cuda",
    .on_device = true,
    .set_device = ms_k_cuda_set_device,
    .device_info = cuda_device_info,
    .open = cuda_open,
    .close = cuda_close,
    .sync = ms_k_cuda_sync,
    .buf_alloc = cuda_alloc,
    .buf_free = ms_k_cuda_free,
    .host_alloc = ms_k_cuda_host_alloc,
    .host_free = ms_k_cuda_host_free,
    .upload = ms_k_cuda_upload,
    .download = ms_k_cuda_download,
    .upload_async = ms_k_cuda_upload_async,
    .download_async = ms_k_cuda_download_async,
    .copy_async = ms_k_cuda_copy_async,
    .memset_async = ms_k_cuda_memset_async,
    .rope_upload = cuda_rope_upload,
    .rope_free = ms_k_cuda_rope_free,
    .fill_random = ms_k_cuda_fill_random,
    .attn_reserve = ms_k_cuda_attn_reserve,
    .linear = cuda_linear,
    .linear_f32out = cuda_linear_f32out,
    .graphs_new = cuda_graphs_new,
    .graphs_free = cuda_graphs_free,
    .graph_run = cuda_graph_run,
    .graph_counts = cuda_graph_counts,
    .head = {.head_new = head_new,
             .head_free = head_free,
             .head_reset = head_reset,
             .head_append = head_append,
             .head_appended = head_appended,
             .head_synced = head_synced,
             .head_topk = head_topk,
             .head_window = head_window,
             .head_window_syncs = ms_k_cuda_vocab_host_syncs},
};

const ms_k_backend *ms_k_backend_cuda(void) { return &cuda_backend; }
