/* ms_k_backend.c — the CPU backend table (ms_k_backend.h) and the picker.
 *
 * Host memory throughout: buffers are zeroed heap blocks, copies memcpy, and
 * there is nothing to wait for. The linear entry is the CPU hot path of every
 * matmul: one branch on the weight's form, then the op table's OpenBLAS GEMM
 * (dense f32), ms_q_linear (block format, f32 activations) or ms_qdot_linear
 * (block format, 8-bit activations quantized once by the caller). The
 * table's ms_k_act is ms_qdot.h's ms_q8_act. */
#include "ms_k_backend.h"
#include "ms_qdot.h"
#include "ms_quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_k_random.h"

static ms_status cpu_set_device(int dev) {
    (void)dev;
    return MS_OK;
}

static ms_status cpu_device_info(int dev, char *buf, size_t cap) {
    (void)dev;
    snprintf(buf, cap, "host");
    return MS_OK;
}

static ms_status cpu_open(int dev, ms_dtype act, const ms_k_ops **ops, void **stream) {
    (void)dev;
    (void)act;
    *ops = ms_k_cpu_ops();
    *stream = NULL;
    return MS_OK;
}

static void cpu_close(int dev, const ms_k_ops **ops, void **stream) {
    (void)dev;
    *ops = NULL;
    *stream = NULL;
}

static ms_status cpu_sync(const ms_k_ops *ops) {
    (void)ops;
    return MS_OK;
}

static ms_status cpu_alloc(void **p, size_t bytes) {
    *p = ms_calloc(1, bytes ? bytes : 1);
    return *p ? MS_OK : MS_ERR_NOMEM;
}

static void cpu_free(void **p) {
    free(*p);
    *p = NULL;
}

static ms_status cpu_host_alloc(void **p, size_t bytes) {
    *p = NULL;
    return bytes ? cpu_alloc(p, bytes) : MS_OK;
}

static ms_status cpu_copy(const ms_k_ops *ops, void *dst, const void *src, size_t bytes) {
    (void)ops;
    if (bytes) memmove(dst, src, bytes);
    return MS_OK;
}

static ms_status cpu_memset(const ms_k_ops *ops, void *buf, int value, size_t bytes) {
    (void)ops;
    if (bytes) memset(buf, value, bytes);
    return MS_OK;
}

static ms_status cpu_rope_upload(const ms_k_rope *host, ms_k_rope *dev) {
    *dev = *host; /* a view: the ops read the host table */
    return MS_OK;
}

static void cpu_rope_free(ms_k_rope *dev) { memset(dev, 0, sizeof *dev); }

static ms_status cpu_fill_random(const ms_k_ops *ops, void *dst, int64_t n, uint64_t seed, float scale, float offset) {
    (void)ops;
    float *p = dst;
    for (int64_t i = 0; i < n; i++) p[i] = ms_k_random_value(seed, i, scale, offset);
    return MS_OK;
}

static ms_status cpu_attn_reserve(const ms_k_ops *ops, int64_t max_q, int64_t n_heads, int64_t head_dim,
                                  int64_t max_rows) {
    (void)ops, (void)max_q, (void)n_heads, (void)head_dim, (void)max_rows;
    return MS_OK;
}

static void cpu_linear(const ms_k_ops *ops, void *y, const void *x, const void *w, const ms_qweight *q,
                       const ms_k_act *xq, const void *b, int64_t n, int64_t k, int64_t m) {
    if (!q) {
        ops->gemm(ops->ctx, y, x, w, b, n, k, m);
    } else if (!xq) {
        ms_q_linear(y, x, q, b, n);
    } else {
        MS_ASSERT(xq->n == n && xq->k == k); /* xq was quantized from these rows */
        ms_qdot_linear(y, xq, q, b);
    }
}

static ms_status cpu_linear_f32out(const ms_k_ops *ops, float *y, const void *x, const void *w, const ms_qweight *q,
                                   const ms_k_act *xq, int64_t n, int64_t k, int64_t m) {
    cpu_linear(ops, y, x, w, q, xq, NULL, n, k, m);
    return MS_OK;
}

static ms_status cpu_act_new(int64_t max_rows, int64_t max_k, ms_k_act **out) {
    *out = ms_calloc(1, sizeof **out);
    if (!*out) return MS_ERR_NOMEM;
    ms_status s = ms_q8_act_alloc(*out, max_rows, max_k);
    if (s < 0) {
        free(*out);
        *out = NULL;
    }
    return s;
}

static void cpu_act_free(ms_k_act **a) {
    if (!*a) return;
    ms_q8_act_free(*a);
    free(*a);
    *a = NULL;
}

static void cpu_act_quantize(ms_k_act *a, const float *x, int64_t n, int64_t k, const ms_qweight *const *ws,
                             int count) {
    int forms = 0;
    for (int i = 0; i < count; i++) forms |= ws[i] ? ms_q8_forms(ws[i]) : 0;
    ms_q8_quantize_forms(a, x, n, k, forms ? forms : MS_Q8_ALL);
}

static void cpu_linear_multi(const ms_k_linear_out *outs, int count, const ms_k_act *xq, int64_t n, int64_t k) {
    MS_ASSERT(xq->n == n && xq->k == k);
    ms_qdot_linear_multi(outs, count, xq);
}

static void cpu_linear_rows(float *y, const float *x, const ms_k_act *xq, const ms_qweight *q, const int32_t *rows,
                            int64_t n_rows, int64_t n) {
    MS_ASSERT((x == NULL) != (xq == NULL));
    if (xq) {
        MS_ASSERT(xq->n == n && xq->k == q->k);
        ms_qdot_linear_rows(y, xq, q, rows, n_rows);
    } else {
        ms_q_linear_rows(y, x, q, rows, n_rows, n);
    }
}

/* Nothing to record on the CPU: the cache is a token. */
struct ms_k_graphs {
    int unused;
};

static ms_status cpu_graphs_new(int64_t n_keys, bool eager, ms_k_graphs **out) {
    (void)n_keys, (void)eager;
    *out = ms_calloc(1, sizeof **out);
    return *out ? MS_OK : MS_ERR_NOMEM;
}

static void cpu_graphs_free(ms_k_graphs **g) {
    free(*g);
    *g = NULL;
}

static ms_status cpu_graph_run(const ms_k_ops *ops, ms_k_graphs *g, int64_t key, ms_status (*fn)(void *arg),
                               void *arg) {
    (void)ops, (void)g, (void)key;
    return fn(arg);
}

static void cpu_graph_counts(const ms_k_graphs *g, int64_t *inst, int64_t *upd) {
    (void)g;
    if (inst) *inst = 0;
    if (upd) *upd = 0;
}

static const ms_k_backend cpu_backend = {
    .name = "cpu",
    .on_device = false,
    .set_device = cpu_set_device,
    .device_info = cpu_device_info,
    .open = cpu_open,
    .close = cpu_close,
    .sync = cpu_sync,
    .buf_alloc = cpu_alloc,
    .buf_free = cpu_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .upload_async = cpu_copy,
    .download_async = cpu_copy,
    .copy_async = cpu_copy,
    .memset_async = cpu_memset,
    .rope_upload = cpu_rope_upload,
    .rope_free = cpu_rope_free,
    .fill_random = cpu_fill_random,
    .attn_reserve = cpu_attn_reserve,
    .linear = cpu_linear,
    .linear_f32out = cpu_linear_f32out,
    .act_new = cpu_act_new,
    .act_free = cpu_act_free,
    .act_quantize = cpu_act_quantize,
    .linear_multi = cpu_linear_multi,
    .linear_rows = cpu_linear_rows,
    .pack = ms_qdot_pack,
    .pack_bytes = ms_qdot_pack_bytes,
    .pack_free = ms_qdot_pack_free,
    .graphs_new = cpu_graphs_new,
    .graphs_free = cpu_graphs_free,
    .graph_run = cpu_graph_run,
    .graph_counts = cpu_graph_counts,
};

const ms_k_backend *ms_k_backend_cpu(void) { return &cpu_backend; }

ms_status ms_k_backend_for(int cuda_dev, const char *what, const ms_k_backend **out) {
    *out = cuda_dev < 0 ? ms_k_backend_cpu() : ms_k_backend_cuda();
    if (!*out)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: device cuda:%d requested, but this program was built without CUDA", what,
                cuda_dev);
    return MS_OK;
}
