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
 * ms_k_cuda_capture_end). */
#include <stdlib.h>
#include <string.h>

#include "ms_k_backend.h"
#include "ms_k_cuda.h"

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
                        const ms_q8_act *xq, const void *b, int64_t n, int64_t k, int64_t m) {
    /* block formats stay on the CPU: the model refuses a GGUF file on CUDA */
    MS_ASSERT(!q && !xq);
    ops->linear(ops->ctx, y, x, w, b, n, k, m);
}

static ms_status cuda_linear_f32out(const ms_k_ops *ops, float *y, const void *x, const void *w, const ms_qweight *q,
                                    const ms_q8_act *xq, int64_t n, int64_t k, int64_t m) {
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
};

const ms_k_backend *ms_k_backend_cuda(void) { return &cuda_backend; }
