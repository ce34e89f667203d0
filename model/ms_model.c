/* ms_model.c — Llama / Qwen2 / Qwen3 decoder runtime over the op table.
 *
 * One layer (HF semantics; Qwen3 adds the per-head q/k RMSNorm before RoPE):
 *   h  = x + Wo · Attn(RoPE(norm_qk(Wq·n1(x) + bq)), RoPE(norm_qk(Wk·n1(x) + bk)), Wv·n1(x) + bv)
 *   x' = h + Wdown · (silu(Wgate · n2(h)) ⊙ Wup · n2(h))
 * logits = lm_head · norm(x)   (lm_head = embed_tokens when tied).
 *
 * Backends. The same op sequence (run_layers) runs on the CPU table (f32
 * activations and weights) or on a device table (CUDA: BF16 / F16
 * activations and weights, device memory). Everything else that differs per
 * device — buffers, copies, synchronisation, the linear over a typed weight,
 * recorded forwards — goes through the backend table (ms_k_backend.h), picked
 * once at load. Buffers are `void *` of `es`-byte elements so the one
 * sequence serves both; on the CPU every pointer is what it always was.
 *
 * CPU weights: F32 tensors aligned in the mmap are used in place; others are
 * converted to owned f32 once at load; GGUF matrices stay in their block
 * formats. Device weights: converted to act on the host chunk by chunk and
 * uploaded once. The KV cache is [layer][max_ctx][kv_dim] for K and V; every
 * activation buffer is sized for max_batch rows at load.
 *
 * Device forward: host tokens / positions / mask are copied into pinned
 * staging, uploaded asynchronously into fixed device staging, then the op
 * sequence runs on the model's stream through the backend's recorded forward
 * per shape key (rows, logits mode, masked: ms_k_backend.graph_run; on CUDA a
 * graph, cuda/ms_k_cuda_backend.c), and only the requested f32 logits rows
 * come back. One synchronisation per forward, which also reports errors the
 * ops recorded.
 */
#include "ms_model.h"
#include "ms_isa.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_k_random.h"
#include "ms_gguf.h"
#include "ms_k_backend.h"
#include "ms_safetensors.h"
#include "ms_weights.h"

typedef struct {
    const void *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *q_norm, *k_norm;
    const void *ffn_norm, *w_gate, *w_up, *w_down;
    const void *post_attn_norm, *post_ffn_norm; /* Gemma 3 */
} layer_w;

/* The matrices of a layer as stored in a GGUF file (CPU): block formats read
 * in place by the backend's linear. */
typedef struct {
    ms_qweight wq, wk, wv, wo, w_gate, w_up, w_down;
} layer_q;

/* Staging rows for compaction moves per device round trip. */
#define MOVE_CHUNK 64
/* Host conversion chunk for CUDA weight uploads (elements). */
#define UPLOAD_CHUNK ((int64_t)1 << 22)

struct ms_model {
    ms_hfconfig cfg;
    const ms_k_ops *ops;
    const ms_k_backend *be; /* buffers, copies, sync, typed linear, recorded forwards of ops' device */
    int cuda_dev;      /* -1: CPU */
    ms_dtype wdtype;   /* storage dtype of weights and activations: F32 (CPU) or act (CUDA) */
    size_t es;         /* bytes per element of wdtype */
    ms_st_model *st;   /* NULL for ms_model_new_random and GGUF */
    ms_gguf *gg;       /* a GGUF model (CPU): typed weights below */
    layer_q *lq;       /* [n_layers] when gg */
    ms_qweight embed_q, lm_head_q; /* when gg */
    ms_k_rope rope_local; /* sliding-window layers' RoPE (Gemma 3); max_pos 0 when unused */
    bool f32_matmul;      /* GGUF: the block-format linear on f32 activations instead of 8-bit ones */
    ms_k_act *act;        /* GGUF, 8-bit path: the quantized input of the next matmuls, [max_batch, ≤ max k] */
    const void *act_src;  /* the f32 rows `act` was quantized from (checked by lin) */
    int64_t n_layers, d, hd, n_heads, n_kv, q_dim, kv_dim, ffn, vocab;
    const void *embed, *lm_head, *final_norm;
    layer_w *layers;
    ms_weights weights; /* CPU: converted copies of non-F32 tensors, random weights */
    ms_k_rope rope;     /* host table: validates positions; the CPU op's table */
    uint64_t seed;      /* ms_model_new_random */
    int64_t n_random;   /* tensors generated so far (each gets its own seed) */

    int64_t len, max_ctx, max_batch, last_n;
    void *kcache, *vcache; /* [n_layers][max_ctx][kv_dim] */

    /* activations, sized for max_batch rows (device memory on CUDA) */
    void *x;      /* [B, d] residual stream */
    void *xb;     /* [B, max(d, q_dim)] normed input / projection output */
    void *q;      /* [B, q_dim] */
    void *att;    /* [B, q_dim] attention output */
    void *hb;     /* [B, ffn] gate, then silu(gate)·up */
    void *hb2;    /* [B, ffn] up */
    void *hidden; /* [B, d] final-norm hidden states */
    float *scores; /* [MS_K_ATTN_PARTS, max_ctx] CPU attention scratch, a row per pool part */
    int32_t *pos;  /* [B] host positions of the current forward */

    /* device only (NULL / 0 on CPU) */
    void *stream;
    ms_k_rope rope_dev; /* cos/sin in device memory */
    void **dev_bufs;    /* every alloc_buf allocation, freed with the model */
    int64_t n_dev_bufs, cap_dev_bufs;
    float *d_logits;    /* [B, V] f32 */
    int32_t *d_tokens, *d_pos; /* [B] device staging */
    uint64_t *d_mask;          /* [64] */
    int64_t *d_src, *d_dst;    /* [MOVE_CHUNK] */
    int32_t *h_tokens, *h_pos; /* pinned twins */
    uint64_t *h_mask;
    int64_t *h_src, *h_dst;
    void *h_act;          /* pinned [UPLOAD_CHUNK] act: uploads, hidden and head downloads */
    float *h_f32;         /* [UPLOAD_CHUNK] host conversion buffer */
    float *hidden_host;   /* [B, d] f32 copy for ms_model_hidden */
    bool hidden_fresh;
    float *lm_head_host;  /* [V, d] f32, made on first ms_model_lm_head */
    ms_k_graphs *graphs;  /* recorded forwards, one per shape key: [(B + 1) · 3 · 2] */
    int no_graphs;
};

static void *el(const void *p, int64_t i, size_t es) { return (char *)p + (size_t)i * es; }

/* ---- device parsing ------------------------------------------------------ */

ms_status ms_model_device_parse(const char *s, int *cuda_dev) {
    *cuda_dev = -1;
    if (!s || !*s || !strcmp(s, "cpu")) return MS_OK;
    if (!strcmp(s, "cuda")) {
        *cuda_dev = 0;
        return MS_OK;
    }
    int64_t n;
    if (!strncmp(s, "cuda:", 5) && s[5] >= '0' && s[5] <= '9' && ms_parse_i64(s + 5, 0, 255, &n)) {
        *cuda_dev = (int)n;
        return MS_OK;
    }
    MS_FAIL(MS_ERR_INVALID, "device \"%.64s\": expected \"cpu\", \"cuda\" or \"cuda:N\" (N in 0..255)", s);
}

/* ---- buffers --------------------------------------------------------------- */

/* A buffer of a·b elements of the model's dtype from the backend: zeroed
 * host f32 on CPU, device memory on a device (tracked in dev_bufs). */
static ms_status alloc_buf(ms_model *m, void **p, int64_t a, int64_t b) {
    *p = NULL;
    size_t n;
    if (a < 0 || b < 0 || !ms_mul_size((size_t)a, (size_t)b, &n) || !ms_mul_size(n, m->es, &n))
        MS_FAIL(MS_ERR_RANGE, "device buffer of %lld x %lld elements overflows", (long long)a, (long long)b);
    if (m->n_dev_bufs == m->cap_dev_bufs) {
        int64_t c = m->cap_dev_bufs ? 2 * m->cap_dev_bufs : 64;
        void **nb = ms_realloc(m->dev_bufs, (size_t)c * sizeof *nb);
        if (!nb) return MS_ERR_NOMEM;
        m->dev_bufs = nb;
        m->cap_dev_bufs = c;
    }
    void *d = NULL;
    MS_TRY(m->be->buf_alloc(&d, n));
    m->dev_bufs[m->n_dev_bufs++] = d;
    *p = d;
    return MS_OK;
}

/* Buffer of raw bytes (staging, logits), tracked like alloc_buf. */
static ms_status alloc_dev_bytes(ms_model *m, void **p, size_t bytes) {
    size_t es = m->es;
    m->es = 1;
    ms_status st = alloc_buf(m, p, (int64_t)bytes, 1);
    m->es = es;
    return st;
}

/* ---- weights ------------------------------------------------------------------ */

/* Upload tensor t (F32/F16/BF16, nelem n) to dev as act: uploaded as is when
 * already act, else converted on the host UPLOAD_CHUNK elements at a time. */
static ms_status upload_tensor(ms_model *m, void *dev, const ms_tensor *t, int64_t n) {
    const size_t src_es = ms_dtype_size(t->dtype);
    for (int64_t at = 0; at < n; at += UPLOAD_CHUNK) {
        const int64_t c = n - at < UPLOAD_CHUNK ? n - at : UPLOAD_CHUNK;
        const void *src = (const char *)t->data + (size_t)at * src_es;
        if (t->dtype == m->wdtype) {
            memcpy(m->h_act, src, (size_t)c * m->es); /* the mmap may be unaligned; pinned is faster anyway */
        } else {
            ms_convert_to_f32(m->h_f32, src, t->dtype, c);
            ms_convert_from_f32(m->h_act, m->wdtype, m->h_f32, c);
        }
        MS_TRY(m->be->upload(m->ops, el(dev, at, m->es), m->h_act, (size_t)c * m->es));
    }
    return MS_OK;
}

/* A weight [d0] (ndim 1) or [d0, d1]: from the checkpoint when the model has
 * one, else seeded random with deviation `scale` around `offset`. */
static ms_status get_weight(ms_model *m, const char *name, int ndim, int64_t d0, int64_t d1, float scale,
                            float offset, const void **out) {
    *out = NULL;
    const int64_t n = ndim == 1 ? d0 : d0 * d1;
    if (m->st && !m->be->on_device) {
        const float *p;
        MS_TRY(ms_weights_get(&m->weights, m->st, name, ndim, d0, d1, &p));
        *out = p;
        return MS_OK;
    }
    if (!m->st) {
        const uint64_t seed = ms_k_random_mix(m->seed ^ (0x632BE59BD9B4E019ull * (uint64_t)++m->n_random));
        if (!m->be->on_device) {
            float *p;
            MS_TRY(ms_alloc_f32(&p, d0, ndim == 1 ? 1 : d1));
            MS_TRY(ms_weights_own(&m->weights, p));
            for (int64_t i = 0; i < n; i++) p[i] = ms_k_random_value(seed, i, scale, offset);
            *out = p;
            return MS_OK;
        }
        void *d;
        MS_TRY(alloc_buf(m, &d, d0, ndim == 1 ? 1 : d1));
        MS_TRY(m->be->fill_random(m->ops, d, n, seed, scale, offset));
        *out = d;
        return MS_OK;
    }
    int64_t shape[2] = {d0, d1};
    ms_tensor t;
    MS_TRY(ms_st_get_shaped(m->st, name, ndim, shape, &t));
    if (t.dtype != MS_DTYPE_F32 && t.dtype != MS_DTYPE_F16 && t.dtype != MS_DTYPE_BF16)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16",
                ms_st_file_of(m->st, name), name, ms_dtype_name(t.dtype));
    void *d;
    MS_TRY(alloc_buf(m, &d, d0, ndim == 1 ? 1 : d1));
    MS_TRY(upload_tensor(m, d, &t, n));
    *out = d;
    return MS_OK;
}

#define NORM_DEV 0.05f
#define BIAS_DEV 0.02f

static ms_status load_weights(ms_model *m) {
    char name[256];
    const float s_d = 1.0f / sqrtf((float)m->d), s_q = 1.0f / sqrtf((float)m->q_dim);
    const float s_ffn = 1.0f / sqrtf((float)m->ffn);
    MS_TRY(get_weight(m, "model.embed_tokens.weight", 2, m->vocab, m->d, s_d, 0.0f, &m->embed));
    MS_TRY(get_weight(m, "model.norm.weight", 1, m->d, 0, NORM_DEV, 1.0f, &m->final_norm));
    ms_tensor head;
    bool has_head = m->st ? ms_st_find(m->st, "lm_head.weight", &head) : !m->cfg.tie_word_embeddings;
    if (m->cfg.tie_word_embeddings || !has_head) {
        if (!m->cfg.tie_word_embeddings)
            MS_LOG_WARN("lm_head.weight absent: using the tied embedding as the LM head");
        m->lm_head = m->embed;
    } else {
        MS_TRY(get_weight(m, "lm_head.weight", 2, m->vocab, m->d, s_d, 0.0f, &m->lm_head));
    }
    for (int64_t l = 0; l < m->n_layers; l++) {
        layer_w *w = &m->layers[l];
#define LW(field, suffix, ndim, a, b, scale, offset)                                          \
    do {                                                                                      \
        snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l, suffix);            \
        MS_TRY(get_weight(m, name, ndim, a, b, scale, offset, &w->field));                    \
    } while (0)
        LW(attn_norm, "input_layernorm.weight", 1, m->d, 0, NORM_DEV, 1.0f);
        LW(wq, "self_attn.q_proj.weight", 2, m->q_dim, m->d, s_d, 0.0f);
        LW(wk, "self_attn.k_proj.weight", 2, m->kv_dim, m->d, s_d, 0.0f);
        LW(wv, "self_attn.v_proj.weight", 2, m->kv_dim, m->d, s_d, 0.0f);
        LW(wo, "self_attn.o_proj.weight", 2, m->d, m->q_dim, s_q, 0.0f);
        if (m->cfg.attention_bias) {
            LW(bq, "self_attn.q_proj.bias", 1, m->q_dim, 0, BIAS_DEV, 0.0f);
            LW(bk, "self_attn.k_proj.bias", 1, m->kv_dim, 0, BIAS_DEV, 0.0f);
            LW(bv, "self_attn.v_proj.bias", 1, m->kv_dim, 0, BIAS_DEV, 0.0f);
            /* transformers: Llama and Qwen3 give o_proj a bias with attention_bias;
             * Qwen2 has q/k/v biases only. */
            if (m->cfg.arch != MS_ARCH_QWEN2) LW(bo, "self_attn.o_proj.bias", 1, m->d, 0, BIAS_DEV, 0.0f);
        }
        if (m->cfg.qk_norm) {
            LW(q_norm, "self_attn.q_norm.weight", 1, m->hd, 0, NORM_DEV, 1.0f);
            LW(k_norm, "self_attn.k_norm.weight", 1, m->hd, 0, NORM_DEV, 1.0f);
        }
        LW(ffn_norm, "post_attention_layernorm.weight", 1, m->d, 0, NORM_DEV, 1.0f);
        LW(w_gate, "mlp.gate_proj.weight", 2, m->ffn, m->d, s_d, 0.0f);
        LW(w_up, "mlp.up_proj.weight", 2, m->ffn, m->d, s_d, 0.0f);
        LW(w_down, "mlp.down_proj.weight", 2, m->d, m->ffn, s_ffn, 0.0f);
#undef LW
    }
    return MS_OK;
}

/* ---- GGUF weights (CPU, stored format) ------------------------------------------ */

/* A 1-d weight [d0] (norms, biases): F32 used in place (GGUF aligns tensor
 * data to ≥ 8 bytes), F16/BF16 converted once into an owned buffer. */
static ms_status gguf_vec(ms_model *m, const char *name, int64_t d0, const void **out) {
    static const ms_dtype ok[] = {MS_DTYPE_F32, MS_DTYPE_F16, MS_DTYPE_BF16};
    const ms_gguf_tensor_info *t;
    MS_TRY(ms_gguf_get_tensor(m->gg, name, 1, &d0, ok, 3, &t));
    if (t->dtype == MS_DTYPE_F32 && ((uintptr_t)t->data & 3u) == 0) {
        *out = t->data;
        return MS_OK;
    }
    float *p;
    MS_TRY(ms_alloc_f32(&p, d0, 1));
    MS_TRY(ms_weights_own(&m->weights, p));
    ms_convert_to_f32(p, t->data, t->dtype, d0);
    *out = p;
    return MS_OK;
}

/* A matrix of `rows` rows of `cols` elements, kept in its stored format. */
static ms_status gguf_mat(ms_model *m, const char *name, int64_t rows, int64_t cols, ms_qweight *out) {
    static const ms_dtype ok[] = {MS_DTYPE_F32,  MS_DTYPE_F16,  MS_DTYPE_BF16, MS_DTYPE_Q4_0, MS_DTYPE_Q4_1,
                                  MS_DTYPE_Q5_0, MS_DTYPE_Q5_1, MS_DTYPE_Q8_0, MS_DTYPE_Q4_K, MS_DTYPE_Q5_K,
                                  MS_DTYPE_Q6_K};
    const int64_t shape[2] = {rows, cols};
    const ms_gguf_tensor_info *t;
    MS_TRY(ms_gguf_get_tensor(m->gg, name, 2, shape, ok, (int)(sizeof ok / sizeof *ok), &t));
    *out = ms_qweight_view(t->dtype, t->data, rows, cols);
    return MS_OK;
}

/* GGUF tensor names (llama.cpp's converter): token_embd, output_norm, output,
 * blk.L.{attn_norm, attn_q, attn_k, attn_v, attn_output, attn_{q,k,v}.bias,
 * attn_q_norm, attn_k_norm, post_attention_norm, ffn_norm, ffn_gate, ffn_up,
 * ffn_down, post_ffw_norm}. */
static ms_status load_weights_gguf(ms_model *m) {
    char name[128];
    const ms_hfconfig *c = &m->cfg;
    MS_TRY(gguf_mat(m, "token_embd.weight", m->vocab, m->d, &m->embed_q));
    MS_TRY(gguf_vec(m, "output_norm.weight", m->d, &m->final_norm));
    if (c->tie_word_embeddings) m->lm_head_q = m->embed_q;
    else MS_TRY(gguf_mat(m, "output.weight", m->vocab, m->d, &m->lm_head_q));
    m->lq = ms_calloc((size_t)m->n_layers, sizeof *m->lq);
    if (!m->lq) return MS_ERR_NOMEM;
    for (int64_t l = 0; l < m->n_layers; l++) {
        layer_w *w = &m->layers[l];
        layer_q *q = &m->lq[l];
#define GV(field, suffix, d0)                                              \
    do {                                                                   \
        snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, suffix); \
        MS_TRY(gguf_vec(m, name, d0, &w->field));                          \
    } while (0)
#define GM(field, suffix, rows, cols)                                      \
    do {                                                                   \
        snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, suffix); \
        MS_TRY(gguf_mat(m, name, rows, cols, &q->field));                  \
    } while (0)
        GV(attn_norm, "attn_norm.weight", m->d);
        GM(wq, "attn_q.weight", m->q_dim, m->d);
        GM(wk, "attn_k.weight", m->kv_dim, m->d);
        GM(wv, "attn_v.weight", m->kv_dim, m->d);
        GM(wo, "attn_output.weight", m->d, m->q_dim);
        if (c->attention_bias) {
            GV(bq, "attn_q.bias", m->q_dim);
            GV(bk, "attn_k.bias", m->kv_dim);
            GV(bv, "attn_v.bias", m->kv_dim);
        }
        if (c->qk_norm) {
            GV(q_norm, "attn_q_norm.weight", m->hd);
            GV(k_norm, "attn_k_norm.weight", m->hd);
        }
        if (c->post_norms) {
            GV(post_attn_norm, "post_attention_norm.weight", m->d);
            GV(post_ffn_norm, "post_ffw_norm.weight", m->d);
        }
        GV(ffn_norm, "ffn_norm.weight", m->d);
        GM(w_gate, "ffn_gate.weight", m->ffn, m->d);
        GM(w_up, "ffn_up.weight", m->ffn, m->d);
        GM(w_down, "ffn_down.weight", m->d, m->ffn);
#undef GV
#undef GM
    }
    return MS_OK;
}

/* Matrix i of the ones the products read, i < 1 + 7·layers: the head,
 * then each layer's q, k, v, o, gate, up, down. */
static ms_qweight *gguf_product_mat(ms_model *m, int64_t i) {
    if (i == 0) return &m->lm_head_q;
    layer_q *q = &m->lq[(i - 1) / 7];
    ms_qweight *w[] = {&q->wq, &q->wk, &q->wv, &q->wo, &q->w_gate, &q->w_up, &q->w_down};
    return w[(i - 1) % 7];
}

/* Each of them in the tile layout where this CPU reads it (be->pack:
 * a copy as large as the matrix; Q4_K wherever AVX-512 VNNI runs, Q6_K and
 * Q8_0 where AMX does; nothing elsewhere). The input embedding is only
 * looked up, never packed (a tied head's copy of it is). */
static ms_status pack_gguf(ms_model *m, const char *path) {
    const int64_t n = 1 + 7 * m->n_layers;
    size_t bytes = 0;
    for (int64_t i = 0; i < n; i++) bytes += m->be->pack_bytes(gguf_product_mat(m, i));
    if (bytes == 0) return MS_OK;
    MS_LOG_INFO("%s: packing %.0f MiB of weights into the tile layout (16 rows a vector)", path,
                (double)bytes / 1048576.0);
    for (int64_t i = 0; i < n; i++) MS_TRY(m->be->pack(gguf_product_mat(m, i)));
    return MS_OK;
}

/* ---- construction ------------------------------------------------------------ */

/* Backend selection: the backend table of the device, its op table (CPU,
 * or a device table on its own stream) and the staging buffers. `what`
 * names the model in errors. */
static ms_status open_backend(ms_model *m, const ms_model_opts *o, const char *what) {
    MS_TRY(ms_model_device_parse(o->device, &m->cuda_dev));
    MS_TRY(ms_k_backend_for(m->cuda_dev, what, &m->be));
    if (!m->be->on_device) {
        MS_TRY(m->be->open(m->cuda_dev, MS_DTYPE_F32, &m->ops, &m->stream));
        m->wdtype = MS_DTYPE_F32;
        m->es = sizeof(float);
        return MS_OK;
    }
    ms_dtype act = o->act ? o->act : MS_DTYPE_BF16;
    if (act != MS_DTYPE_BF16 && act != MS_DTYPE_F16)
        MS_FAIL(MS_ERR_INVALID, "%s: CUDA activation dtype %s unsupported (BF16 or F16)", what, ms_dtype_name(act));
    MS_TRY(m->be->open(m->cuda_dev, act, &m->ops, &m->stream));
    m->wdtype = act;
    m->es = ms_dtype_size(act);
    m->no_graphs = o->no_graphs;
    MS_TRY(m->be->host_alloc(&m->h_act, (size_t)UPLOAD_CHUNK * m->es));
    m->h_f32 = ms_malloc((size_t)UPLOAD_CHUNK * sizeof(float));
    if (!m->h_f32) return MS_ERR_NOMEM;
    char dev[256];
    if (m->be->device_info(m->cuda_dev, dev, sizeof dev) == MS_OK)
        MS_LOG_INFO("%s: cuda:%d %s, %s", what, m->cuda_dev, dev, m->ops->name);
    return MS_OK;
}

/* Sizes from the config and the options; checked against the config. */
static ms_status set_shape(ms_model *m, const ms_model_opts *o, const char *what) {
    const ms_hfconfig *c = &m->cfg;
    m->d = c->hidden_size;
    m->hd = c->head_dim;
    m->n_heads = c->n_heads;
    m->n_kv = c->n_kv_heads;
    m->q_dim = m->n_heads * m->hd;
    m->kv_dim = m->n_kv * m->hd;
    m->ffn = c->intermediate_size;
    m->vocab = c->vocab_size;
    m->n_layers = c->n_layers;
    if (o->n_layers < 0 || o->n_layers > c->n_layers)
        MS_FAIL(MS_ERR_INVALID, "%s: asked for %lld layers, the model has %lld", what, (long long)o->n_layers,
                (long long)c->n_layers);
    if (o->n_layers > 0) m->n_layers = o->n_layers;
    m->max_ctx = o->max_ctx > 0 ? o->max_ctx : (c->max_position_embeddings < 4096 ? c->max_position_embeddings : 4096);
    if (o->extra_ctx < 0 || o->extra_ctx > 4096)
        MS_FAIL(MS_ERR_INVALID, "%s: extra_ctx %lld outside 0..4096", what, (long long)o->extra_ctx);
    m->max_ctx += o->extra_ctx;
    m->max_batch = o->max_batch > 0 ? o->max_batch : 256;
    if (m->max_batch > m->max_ctx) m->max_batch = m->max_ctx;
    /* The attention op never hides a row of the current batch (ms_k_attn_shape):
     * keep batches inside the sliding window. */
    if (c->sliding_window > 0 && m->max_batch > c->sliding_window) m->max_batch = c->sliding_window;
    m->layers = ms_calloc((size_t)m->n_layers, sizeof *m->layers);
    return m->layers ? MS_OK : MS_ERR_NOMEM;
}

/* RoPE, KV cache, activations and (CUDA) staging, logits, graph slots. */
static ms_status alloc_state(ms_model *m) {
    ms_k_rope_params rp = ms_rope_params_of(&m->cfg);
    MS_TRY(ms_k_rope_build(&m->rope, m->max_ctx, m->hd, &rp));
    if (m->cfg.sliding_window > 0) {
        ms_k_rope_params lp = rp;
        lp.theta = m->cfg.rope_local_theta;
        MS_TRY(ms_k_rope_build(&m->rope_local, m->max_ctx, m->hd, &lp));
    }

    const int64_t B = m->max_batch;
    MS_TRY(alloc_buf(m, &m->kcache, m->n_layers * m->max_ctx, m->kv_dim));
    MS_TRY(alloc_buf(m, &m->vcache, m->n_layers * m->max_ctx, m->kv_dim));
    MS_TRY(alloc_buf(m, &m->x, B, m->d));
    MS_TRY(alloc_buf(m, &m->xb, B, m->d > m->q_dim ? m->d : m->q_dim));
    MS_TRY(alloc_buf(m, &m->q, B, m->q_dim));
    MS_TRY(alloc_buf(m, &m->att, B, m->q_dim));
    MS_TRY(alloc_buf(m, &m->hb, B, m->ffn));
    MS_TRY(alloc_buf(m, &m->hb2, B, m->ffn));
    MS_TRY(alloc_buf(m, &m->hidden, B, m->d));
    m->pos = ms_calloc((size_t)B, sizeof *m->pos);
    if (!m->pos) return MS_ERR_NOMEM;
    /* one scratch row per attention part (MS_K_ATTN_PARTS, ms_kernels.h) */
    if (!m->be->on_device) return ms_alloc_f32(&m->scores, m->max_ctx, MS_K_ATTN_PARTS);
    const ms_k_backend *be = m->be;
    size_t lb;
    if (!ms_mul_size((size_t)B, (size_t)m->vocab * sizeof(float), &lb))
        MS_FAIL(MS_ERR_RANGE, "logits buffer of %lld x %lld overflows", (long long)B, (long long)m->vocab);
    MS_TRY(be->rope_upload(&m->rope, &m->rope_dev));
    MS_TRY(alloc_dev_bytes(m, (void **)&m->d_logits, lb));
    MS_TRY(alloc_dev_bytes(m, (void **)&m->d_tokens, (size_t)B * sizeof(int32_t)));
    MS_TRY(alloc_dev_bytes(m, (void **)&m->d_pos, (size_t)B * sizeof(int32_t)));
    MS_TRY(alloc_dev_bytes(m, (void **)&m->d_mask, 64 * sizeof(uint64_t)));
    MS_TRY(alloc_dev_bytes(m, (void **)&m->d_src, MOVE_CHUNK * sizeof(int64_t)));
    MS_TRY(alloc_dev_bytes(m, (void **)&m->d_dst, MOVE_CHUNK * sizeof(int64_t)));
    MS_TRY(be->host_alloc((void **)&m->h_tokens, (size_t)B * sizeof(int32_t)));
    MS_TRY(be->host_alloc((void **)&m->h_pos, (size_t)B * sizeof(int32_t)));
    MS_TRY(be->host_alloc((void **)&m->h_mask, 64 * sizeof(uint64_t)));
    MS_TRY(be->host_alloc((void **)&m->h_src, MOVE_CHUNK * sizeof(int64_t)));
    MS_TRY(be->host_alloc((void **)&m->h_dst, MOVE_CHUNK * sizeof(int64_t)));
    MS_TRY(ms_alloc_f32(&m->hidden_host, B, m->d));
    MS_TRY(be->graphs_new((B + 1) * 6, m->no_graphs, &m->graphs));
    /* device memory comes uninitialised; the CPU twin's is zeroed */
    const size_t cache = (size_t)(m->n_layers * m->max_ctx * m->kv_dim) * m->es;
    MS_TRY(be->memset_async(m->ops, m->kcache, 0, cache));
    MS_TRY(be->memset_async(m->ops, m->vcache, 0, cache));
    MS_TRY(be->memset_async(m->ops, m->hidden, 0, (size_t)(B * m->d) * m->es));
    /* Nothing may allocate during a forward (graph capture): attention's
     * split-KV workspace for every batch size up to B over the whole cache. */
    MS_TRY(be->attn_reserve(m->ops, B, m->n_heads, m->hd, m->max_ctx));
    /* the random fills and uploads above ran on the stream: finish them */
    return be->sync(m->ops);
}

/* A GGUF file: configuration from its metadata, weights kept in their stored
 * block formats (CPU only in this version). */
static ms_status load_gguf(ms_model *m, const char *path, const ms_model_opts *o) {
    MS_TRY(ms_gguf_open_resident(path, &m->gg)); /* weights in private memory: ms_gguf.h */
    MS_TRY(ms_hfcfg_from_gguf(m->gg, &m->cfg));
    int dev;
    MS_TRY(ms_model_device_parse(o->device, &dev));
    if (dev >= 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: GGUF models run on the CPU in this version (device \"%s\" asked)", path,
                o->device);
    MS_TRY(open_backend(m, o, path));
    if (m->cfg.act == MS_ACT_GELU_TANH && !m->ops->gelu_glu)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: the %s op table has no GELU", path, m->ops->name);
    MS_TRY(set_shape(m, o, path));
    /* The file's tokenizer must name exactly the embedding's rows: ids past
     * either end would index nothing, or tokens the tokenizer cannot print. */
    ms_gguf_vtype et;
    int64_t n_tok = 0;
    const void *tok_data;
    if (ms_gguf_get_arr(m->gg, "tokenizer.ggml.tokens", &et, &n_tok, &tok_data) == MS_OK && n_tok != m->vocab)
        MS_FAIL(MS_ERR_FORMAT, "%s: key 'tokenizer.ggml.tokens' has %lld tokens but tensor 'token_embd.weight' %lld rows",
                path, (long long)n_tok, (long long)m->vocab);
    MS_LOG_INFO("%s: %s, %lld layers, d %lld, vocab %lld, loading", path, m->cfg.arch_name, (long long)m->n_layers,
                (long long)m->d, (long long)m->vocab);
    MS_TRY(load_weights_gguf(m));
    m->f32_matmul = !o->q8_matmul;
    MS_LOG_INFO("%s: matmuls %s; CPU kernels %s (this CPU: %s; MS_ISA caps it)", path,
                m->f32_matmul ? "exact f32" : "with 8-bit activations", ms_isa_name(ms_isa_active()),
                ms_isa_name(ms_isa_cpu()));
    if (!m->f32_matmul) {
        MS_TRY(pack_gguf(m, path));
        int64_t kmax = m->d > m->q_dim ? m->d : m->q_dim;
        if (m->ffn > kmax) kmax = m->ffn;
        MS_TRY(m->be->act_new(m->max_batch, kmax, &m->act));
    }
    return alloc_state(m);
}

ms_status ms_model_load(const char *dir, const ms_model_opts *opts, ms_model **out) {
    *out = NULL;
    ms_model_opts o = opts ? *opts : (ms_model_opts){0};
    ms_model *m = ms_calloc(1, sizeof *m);
    if (!m) return MS_ERR_NOMEM;
    m->cuda_dev = -1;
    ms_status st = MS_OK;
    if (ms_gguf_is_gguf(dir)) {
        st = load_gguf(m, dir, &o);
        if (st < 0) goto fail;
        *out = m;
        return MS_OK;
    }
    char *cfg_path = ms_path_join(dir, "config.json");
    if (!cfg_path) {
        st = MS_ERR_NOMEM;
        goto fail;
    }
    st = ms_hfcfg_load(cfg_path, &m->cfg);
    free(cfg_path);
    if (st < 0) goto fail;
    MS_TRY_GOTO(st, ms_st_open_dir(dir, &m->st), fail);
    MS_TRY_GOTO(st, open_backend(m, &o, dir), fail);
    MS_TRY_GOTO(st, set_shape(m, &o, dir), fail);
    MS_TRY_GOTO(st, load_weights(m), fail);
    MS_TRY_GOTO(st, alloc_state(m), fail);
    *out = m;
    return MS_OK;
fail:
    ms_model_free(&m);
    return st;
}

/* The shape facts the runtime relies on (ms_hfcfg_load checks the same for
 * a config.json; a hand-made cfg is checked here). */
static ms_status check_cfg(const ms_hfconfig *c) {
    if (c->vocab_size < 1 || c->vocab_size > INT32_MAX || c->hidden_size < 1 || c->intermediate_size < 1 ||
        c->n_layers < 1 || c->n_heads < 1 || c->n_kv_heads < 1 || c->n_heads % c->n_kv_heads != 0 ||
        c->head_dim < 2 || c->head_dim % 2 != 0 || c->max_position_embeddings < 1 || !(c->rms_norm_eps > 0) ||
        !(c->rope_theta > 0))
        MS_FAIL(MS_ERR_INVALID,
                "random model: bad config (vocab %lld, hidden %lld, ffn %lld, layers %lld, heads %lld/%lld, "
                "head_dim %lld, max_pos %lld)",
                (long long)c->vocab_size, (long long)c->hidden_size, (long long)c->intermediate_size,
                (long long)c->n_layers, (long long)c->n_heads, (long long)c->n_kv_heads, (long long)c->head_dim,
                (long long)c->max_position_embeddings);
    return MS_OK;
}

ms_status ms_model_new_random(const ms_hfconfig *cfg, uint64_t seed, const ms_model_opts *opts, ms_model **out) {
    *out = NULL;
    MS_TRY(check_cfg(cfg));
    ms_model_opts o = opts ? *opts : (ms_model_opts){0};
    ms_model *m = ms_calloc(1, sizeof *m);
    if (!m) return MS_ERR_NOMEM;
    m->cuda_dev = -1;
    m->cfg = *cfg;
    m->seed = seed;
    ms_status st;
    MS_TRY_GOTO(st, open_backend(m, &o, "random model"), fail);
    MS_TRY_GOTO(st, set_shape(m, &o, "random model"), fail);
    MS_TRY_GOTO(st, load_weights(m), fail);
    MS_TRY_GOTO(st, alloc_state(m), fail);
    *out = m;
    return MS_OK;
fail:
    ms_model_free(&m);
    return st;
}

void ms_model_free(ms_model **pm) {
    ms_model *m = *pm;
    if (!m) return;
    const ms_k_backend *be = m->be;
    if (be) { /* NULL: the backend was never picked */
        if (be->set_device(m->cuda_dev) != MS_OK) MS_LOG_WARN("model free: cannot select cuda:%d", m->cuda_dev);
        if (m->graphs) be->graphs_free(&m->graphs);
        be->close(m->cuda_dev, &m->ops, &m->stream); /* waits for the stream */
        for (int64_t i = 0; i < m->n_dev_bufs; i++) be->buf_free(&m->dev_bufs[i]);
        if (be->on_device) be->rope_free(&m->rope_dev);
        be->host_free((void **)&m->h_tokens);
        be->host_free((void **)&m->h_pos);
        be->host_free((void **)&m->h_mask);
        be->host_free((void **)&m->h_src);
        be->host_free((void **)&m->h_dst);
        be->host_free(&m->h_act);
        /* GGUF weights load on the CPU table only (load_gguf), whose entries these are */
        for (int64_t i = 0; m->gg && m->lq && i < 1 + 7 * m->n_layers; i++) be->pack_free(gguf_product_mat(m, i));
        if (m->act) be->act_free(&m->act);
    }
    free(m->dev_bufs);
    free(m->h_f32);
    free(m->hidden_host);
    free(m->lm_head_host);
    ms_weights_free(&m->weights);
    free(m->layers);
    free(m->lq);
    ms_k_rope_free(&m->rope);
    ms_k_rope_free(&m->rope_local);
    free(m->scores);
    free(m->pos);
    ms_st_close(&m->st);
    ms_gguf_close(&m->gg);
    free(m);
    *pm = NULL;
}

const ms_hfconfig *ms_model_config(const ms_model *m) { return &m->cfg; }
int64_t ms_model_vocab(const ms_model *m) { return m->vocab; }
int64_t ms_model_len(const ms_model *m) { return m->len; }
int64_t ms_model_max_ctx(const ms_model *m) { return m->max_ctx; }
int64_t ms_model_max_batch(const ms_model *m) { return m->max_batch; }
void ms_model_reset(ms_model *m) { m->len = 0; }
const ms_k_ops *ms_model_ops(const ms_model *m) { return m->ops; }
void *ms_model_stream(const ms_model *m) { return m->stream; }
int ms_model_device(const ms_model *m) { return m->cuda_dev; }
const void *ms_model_hidden_dev(const ms_model *m) { return m->be->on_device ? m->hidden : NULL; }
const void *ms_model_lm_head_dev(const ms_model *m) { return m->be->on_device ? m->lm_head : NULL; }

void ms_model_graph_counts(const ms_model *m, int64_t *inst, int64_t *upd) {
    m->be->graph_counts(m->graphs, inst, upd);
}

/* The host copies below are caches filled on demand by const accessors: the
 * model object itself is never const (it is allocated by ms_model_load). */
const float *ms_model_hidden(const ms_model *cm) {
    if (!cm->be->on_device) return (const float *)cm->hidden;
    ms_model *m = (ms_model *)cm;
    if (m->hidden_fresh) return m->hidden_host;
    const int64_t n = m->last_n * m->d; /* ≤ B·d; converted in UPLOAD_CHUNK pieces */
    for (int64_t at = 0; at < n; at += UPLOAD_CHUNK) {
        const int64_t c = n - at < UPLOAD_CHUNK ? n - at : UPLOAD_CHUNK;
        if (m->be->download(m->ops, m->h_act, el(m->hidden, at, m->es), (size_t)c * m->es) != MS_OK) {
            MS_LOG_ERROR("model hidden: download failed; the host copy is stale");
            return m->hidden_host;
        }
        ms_convert_to_f32(m->hidden_host + at, m->h_act, m->wdtype, c);
    }
    m->hidden_fresh = true;
    return m->hidden_host;
}

const ms_qweight *ms_model_lm_head_q(const ms_model *m) { return m->gg ? &m->lm_head_q : NULL; }

ms_status ms_model_embed_table(const ms_model *m, ms_qweight *out) {
    if (m->gg) {
        *out = m->embed_q;
        return MS_OK;
    }
    if (m->be->on_device || m->wdtype != MS_DTYPE_F32)
        MS_FAIL(MS_ERR_UNSUPPORTED, "model embedding: the table lives on the device; a host reader needs a CPU model");
    *out = ms_qweight_view(MS_DTYPE_F32, m->embed, m->vocab, m->d);
    return MS_OK;
}
bool ms_model_q8_matmul(const ms_model *m) { return m->gg && !m->f32_matmul; }

const float *ms_model_lm_head(const ms_model *cm) {
    if (cm->gg) { /* stored blocks: read them through ms_model_lm_head_q (no f32 copy) */
        MS_LOG_ERROR("model lm_head: a GGUF head stays in its block format (ms_model_lm_head_q)");
        return NULL;
    }
    if (!cm->be->on_device) return (const float *)cm->lm_head;
    ms_model *m = (ms_model *)cm;
    if (m->lm_head_host) return m->lm_head_host;
    float *h;
    if (ms_alloc_f32(&h, m->vocab, m->d) != MS_OK) {
        MS_LOG_ERROR("model lm_head: no host memory for the %lld x %lld f32 copy", (long long)m->vocab,
                     (long long)m->d);
        return NULL;
    }
    const int64_t n = m->vocab * m->d;
    for (int64_t at = 0; at < n; at += UPLOAD_CHUNK) {
        const int64_t c = n - at < UPLOAD_CHUNK ? n - at : UPLOAD_CHUNK;
        if (m->be->download(m->ops, m->h_act, el(m->lm_head, at, m->es), (size_t)c * m->es) != MS_OK) {
            free(h);
            return NULL;
        }
        ms_convert_to_f32(h + at, m->h_act, m->wdtype, c);
    }
    m->lm_head_host = h;
    return h;
}

/* ---- forward ------------------------------------------------------------- */

ms_status ms_model_forward(ms_model *m, const int32_t *tokens, int64_t n, const int32_t *pos, const uint64_t *mask,
                           ms_logits_mode mode, float *logits) {
    return ms_model_forward_masked(m, tokens, n, pos, mask, 0, mode, logits);
}

/* y[n, mo] = x[n, k] · Wᵀ (+ b): the stored-format weight q when the model
 * came from GGUF, else w in the backend's dtype through the op table. */
static void lin(const ms_model *m, void *y, const void *x, const void *w, const ms_qweight *q, const void *b,
                int64_t n, int64_t k, int64_t mo) {
    const ms_k_act *xq = NULL;
    if (q && !m->f32_matmul) {
        /* x was quantized by quant() for this and the matmuls sharing it */
        MS_ASSERT(m->act_src == x);
        xq = m->act;
    }
    m->be->linear(m->ops, y, x, w, q, xq, b, n, k, mo);
}

/* lin for the matmuls that read the same x (q, k, v; gate, up): on the
 * GGUF 8-bit path one pool round for all of them (be->linear_multi,
 * the same bits as one lin each; GGUF weights load on the CPU backend
 * only); else one lin each. */
typedef struct {
    void *y;
    const void *w;
    const ms_qweight *q;
    const void *b;
    int64_t mo;
} lin_out;

static void lin_same_x(const ms_model *m, const lin_out *o, int count, const void *x, int64_t n, int64_t k) {
    if (o[0].q && !m->f32_matmul) {
        MS_ASSERT(m->act_src == x && count <= MS_K_LINEAR_MULTI_MAX);
        ms_k_linear_out qo[MS_K_LINEAR_MULTI_MAX];
        for (int i = 0; i < count; i++) qo[i] = (ms_k_linear_out){.y = o[i].y, .w = o[i].q, .b = o[i].b};
        m->be->linear_multi(qo, count, m->act, n, k);
        return;
    }
    for (int i = 0; i < count; i++) lin(m, o[i].y, x, o[i].w, o[i].q, o[i].b, n, k, o[i].mo);
}

/* GGUF 8-bit path: quantize the n rows of x [n, k] once for every matmul that
 * reads them (q, k, v; gate, up), in the forms their weights read (ws[i]
 * NULL: none). A no-op otherwise. */
static void quant(ms_model *m, const void *x, int64_t n, int64_t k, const ms_qweight *const *ws, int count) {
    if (!m->gg || m->f32_matmul) return;
    m->be->act_quantize(m->act, x, n, k, ws, count);
    m->act_src = x;
}

/* The op sequence of one forward of n rows at cache rows [len, len + n).
 * tokens / pos / mask are where the backend reads them (host on CPU, device
 * staging on CUDA); logits the f32 output (host on CPU, device on CUDA). */
static ms_status run_layers(ms_model *m, const int32_t *tokens, const int32_t *pos, const uint64_t *mask,
                            const ms_k_attn_shape *shape, const ms_k_rope *rope, ms_logits_mode mode, float *logits) {
    const ms_k_ops *k = m->ops;
    void *c = k->ctx;
    const int64_t n = shape->n_q, d = m->d, es = (int64_t)m->es;
    const float eps = (float)m->cfg.rms_norm_eps;

    if (m->gg) {
        for (int64_t i = 0; i < n; i++) ms_q_row(&m->embed_q, tokens[i], (float *)m->x + i * d);
    } else {
        k->embed(c, m->x, m->embed, m->wdtype, tokens, n, d);
    }
    if (m->cfg.embed_scale) k->scale(c, m->x, sqrtf((float)d), n * d); /* Gemma: embeddings × sqrt(d) */
    for (int64_t l = 0; l < m->n_layers; l++) {
        const layer_w *w = &m->layers[l];
        const layer_q *q = m->lq ? &m->lq[l] : NULL;
        /* Gemma 3: local layers see a sliding window, with their own RoPE base. */
        const bool local = ms_hfcfg_layer_is_local(&m->cfg, l);
        ms_k_attn_shape ls = *shape;
        if (local) ls.window = m->cfg.sliding_window;
        const ms_k_rope *lrope = local ? &m->rope_local : rope;
        void *kc = el(m->kcache, l * m->max_ctx * m->kv_dim, m->es); /* [max_ctx, kv_dim] */
        void *vc = el(m->vcache, l * m->max_ctx * m->kv_dim, m->es);
        void *kn = el(kc, m->len * m->kv_dim, m->es); /* the batch's K rows, written in place */
        void *vn = el(vc, m->len * m->kv_dim, m->es);

        k->rmsnorm(c, m->xb, m->x, w->attn_norm, n, d, eps);
        quant(m, m->xb, n, d, (const ms_qweight *const[]){q ? &q->wq : NULL, q ? &q->wk : NULL, q ? &q->wv : NULL}, 3);
        const lin_out qkv[3] = {{m->q, w->wq, q ? &q->wq : NULL, w->bq, m->q_dim},
                                {kn, w->wk, q ? &q->wk : NULL, w->bk, m->kv_dim},
                                {vn, w->wv, q ? &q->wv : NULL, w->bv, m->kv_dim}};
        lin_same_x(m, qkv, 3, m->xb, n, d);
        if (w->q_norm) { /* Qwen3, Gemma 3: RMSNorm over each head's hd values */
            k->rmsnorm(c, m->q, m->q, w->q_norm, n * m->n_heads, m->hd, eps);
            k->rmsnorm(c, kn, kn, w->k_norm, n * m->n_kv, m->hd, eps);
        }
        k->rope(c, m->q, n, m->n_heads, m->hd, pos, lrope);
        k->rope(c, kn, n, m->n_kv, m->hd, pos, lrope);
        k->attention(c, m->att, m->q, kc, vc, &ls, mask, m->scores);
        quant(m, m->att, n, m->q_dim, (const ms_qweight *const[]){q ? &q->wo : NULL}, 1);
        lin(m, m->xb, m->att, w->wo, q ? &q->wo : NULL, w->bo, n, m->q_dim, d);
        if (w->post_attn_norm) k->rmsnorm(c, m->xb, m->xb, w->post_attn_norm, n, d, eps);
        k->add(c, m->x, m->xb, n * d);

        k->rmsnorm(c, m->xb, m->x, w->ffn_norm, n, d, eps);
        quant(m, m->xb, n, d, (const ms_qweight *const[]){q ? &q->w_gate : NULL, q ? &q->w_up : NULL}, 2);
        const lin_out gate_up[2] = {{m->hb, w->w_gate, q ? &q->w_gate : NULL, NULL, m->ffn},
                                    {m->hb2, w->w_up, q ? &q->w_up : NULL, NULL, m->ffn}};
        lin_same_x(m, gate_up, 2, m->xb, n, d);
        if (m->cfg.act == MS_ACT_GELU_TANH) k->gelu_glu(c, m->hb, m->hb, m->hb2, n * m->ffn);
        else k->silu_glu(c, m->hb, m->hb, m->hb2, n * m->ffn);
        quant(m, m->hb, n, m->ffn, (const ms_qweight *const[]){q ? &q->w_down : NULL}, 1);
        lin(m, m->xb, m->hb, w->w_down, q ? &q->w_down : NULL, NULL, n, m->ffn, d);
        if (w->post_ffn_norm) k->rmsnorm(c, m->xb, m->xb, w->post_ffn_norm, n, d, eps);
        k->add(c, m->x, m->xb, n * d);
    }
    k->rmsnorm(c, m->hidden, m->x, m->final_norm, n, d, eps);
    if (mode == MS_LOGITS_NONE) return MS_OK;
    const int64_t rows = mode == MS_LOGITS_LAST ? 1 : n;
    const void *h = mode == MS_LOGITS_LAST ? el(m->hidden, (n - 1) * d, (size_t)es) : m->hidden;
    quant(m, h, rows, d, (const ms_qweight *const[]){m->gg ? &m->lm_head_q : NULL}, 1);
    return m->be->linear_f32out(k, logits, h, m->lm_head, m->gg ? &m->lm_head_q : NULL,
                                m->gg && !m->f32_matmul ? m->act : NULL, rows, d, m->vocab);
}

/* run_layers over the device staging, as a recorded forward's body. */
typedef struct {
    ms_model *m;
    const uint64_t *mask;
    const ms_k_attn_shape *shape;
    ms_logits_mode mode;
} dev_run;

static ms_status dev_run_layers(void *arg) {
    const dev_run *r = arg;
    ms_model *m = r->m;
    return run_layers(m, m->d_tokens, m->d_pos, r->mask, r->shape, &m->rope_dev, r->mode, m->d_logits);
}

/* The device forward after validation: staging, the op sequence (a recorded
 * forward per shape key), logits rows down, one synchronisation. */
static ms_status forward_dev(ms_model *m, const int32_t *tokens, int64_t n, const uint64_t *mask,
                             const ms_k_attn_shape *shape, ms_logits_mode mode, float *logits) {
    const ms_k_ops *k = m->ops;
    const ms_k_backend *be = m->be;
    MS_TRY(be->set_device(m->cuda_dev));
    memcpy(m->h_tokens, tokens, (size_t)n * sizeof(int32_t));
    memcpy(m->h_pos, m->pos, (size_t)n * sizeof(int32_t));
    MS_TRY(be->upload_async(k, m->d_tokens, m->h_tokens, (size_t)n * sizeof(int32_t)));
    MS_TRY(be->upload_async(k, m->d_pos, m->h_pos, (size_t)n * sizeof(int32_t)));
    if (mask) {
        memcpy(m->h_mask, mask, (size_t)n * sizeof(uint64_t));
        MS_TRY(be->upload_async(k, m->d_mask, m->h_mask, (size_t)n * sizeof(uint64_t)));
    }
    /* key: (rows, logits mode, masked); n ≤ B, mode < 3 */
    const int64_t key = (n * 3 + (int64_t)mode) * 2 + (mask ? 1 : 0);
    dev_run r = {.m = m, .mask = mask ? m->d_mask : NULL, .shape = shape, .mode = mode};
    ms_status st = be->graph_run(k, m->graphs, key, dev_run_layers, &r);
    if (st == MS_OK && mode != MS_LOGITS_NONE) {
        const int64_t rows = mode == MS_LOGITS_LAST ? 1 : n;
        st = be->download_async(k, logits, m->d_logits, (size_t)(rows * m->vocab) * sizeof(float));
    }
    /* always synchronise: the pinned staging is reused by the next call, and
     * errors the ops recorded come back here */
    ms_status ss = be->sync(k);
    return st < 0 ? st : ss;
}

ms_status ms_model_forward_masked(ms_model *m, const int32_t *tokens, int64_t n, const int32_t *pos,
                                  const uint64_t *mask, int64_t mask_back, ms_logits_mode mode, float *logits) {
    if (n <= 0 || n > m->max_batch)
        MS_FAIL(MS_ERR_RANGE, "forward of %lld rows (1..%lld allowed)", (long long)n, (long long)m->max_batch);
    if (mask && (mask_back < 0 || mask_back > m->len || mask_back + n > 64))
        MS_FAIL(MS_ERR_RANGE, "tree forward of %lld rows reaching back %lld (≤ 64 masked rows, ≤ len %lld)",
                (long long)n, (long long)mask_back, (long long)m->len);
    if (m->len + n > m->max_ctx)
        MS_FAIL(MS_ERR_RANGE, "KV cache full: %lld + %lld rows > max_ctx %lld", (long long)m->len, (long long)n,
                (long long)m->max_ctx);
    if (mode != MS_LOGITS_NONE && mode != MS_LOGITS_LAST && mode != MS_LOGITS_ALL)
        MS_FAIL(MS_ERR_INVALID, "forward: logits mode %d", (int)mode);
    if (mode != MS_LOGITS_NONE && !logits) MS_FAIL(MS_ERR_INVALID, "forward: logits requested into NULL");
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->vocab)
            MS_FAIL(MS_ERR_INVALID, "token id %d at row %lld outside the vocabulary [0, %lld)", tokens[i],
                    (long long)i, (long long)m->vocab);
        int64_t p = pos ? pos[i] : m->len + i;
        if (p < 0 || p >= m->rope.max_pos)
            MS_FAIL(MS_ERR_RANGE, "position %lld at row %lld outside [0, %lld)", (long long)p, (long long)i,
                    (long long)m->rope.max_pos);
        m->pos[i] = (int32_t)p;
    }

    const ms_k_attn_shape shape = {.n_q = n,
                                   .ctx = m->len,
                                   .n_heads = m->n_heads,
                                   .n_kv_heads = m->n_kv,
                                   .head_dim = m->hd,
                                   .scale = m->cfg.attn_scale > 0 ? (float)m->cfg.attn_scale
                                                                  : 1.0f / sqrtf((float)m->hd),
                                   .mask_back = mask ? mask_back : 0,
                                   .window = 0,
                                   .q_pos = m->pos,
                                   .scratch_parts = MS_K_ATTN_PARTS};
    if (!m->be->on_device) {
        MS_TRY(run_layers(m, tokens, m->pos, mask, &shape, &m->rope, mode, logits));
    } else {
        m->hidden_fresh = false;
        MS_TRY(forward_dev(m, tokens, n, mask, &shape, mode, logits));
    }
    m->len += n;
    m->last_n = n;
    return MS_OK;
}

ms_status ms_model_prefill(ms_model *m, const int32_t *tokens, int64_t n, float *last_logits) {
    if (n <= 0) MS_FAIL(MS_ERR_INVALID, "prefill of an empty prompt");
    if (m->len + n > m->max_ctx)
        MS_FAIL(MS_ERR_RANGE, "prompt of %lld tokens does not fit: %lld rows used, max_ctx %lld", (long long)n,
                (long long)m->len, (long long)m->max_ctx);
    for (int64_t at = 0; at < n; at += m->max_batch) {
        int64_t chunk = n - at < m->max_batch ? n - at : m->max_batch;
        bool last = at + chunk == n;
        MS_TRY(ms_model_forward(m, tokens + at, chunk, NULL, NULL,
                                last && last_logits ? MS_LOGITS_LAST : MS_LOGITS_NONE, last_logits));
    }
    return MS_OK;
}

ms_status ms_model_truncate(ms_model *m, int64_t len) {
    if (len < 0 || len > m->len)
        MS_FAIL(MS_ERR_RANGE, "truncate to %lld rows (have %lld)", (long long)len, (long long)m->len);
    m->len = len;
    return MS_OK;
}

ms_status ms_model_compact(ms_model *m, int64_t base, const int64_t *rows, int64_t n) {
    if (base < 0 || n < 0 || base + n > m->len)
        MS_FAIL(MS_ERR_RANGE, "compact: base %lld + %lld rows past len %lld", (long long)base, (long long)n,
                (long long)m->len);
    for (int64_t i = 0; i < n; i++) {
        if (rows[i] < i || base + rows[i] >= m->len || (i > 0 && rows[i] <= rows[i - 1]))
            MS_FAIL(MS_ERR_RANGE, "compact: row %lld → %lld is not an increasing path inside [%lld, %lld)",
                    (long long)rows[i], (long long)i, (long long)base, (long long)m->len);
    }
    /* Ascending order with dst ≤ src never overwrites a row still to be read. */
    int64_t hsrc[MOVE_CHUNK], hdst[MOVE_CHUNK];
    const ms_k_backend *be = m->be;
    const bool dev = be->on_device;
    int64_t *src = dev ? m->h_src : hsrc, *dst = dev ? m->h_dst : hdst;
    for (int64_t at = 0; at < n; at += MOVE_CHUNK) {
        int64_t cnt = n - at < MOVE_CHUNK ? n - at : MOVE_CHUNK;
        for (int64_t i = 0; i < cnt; i++) {
            src[i] = base + rows[at + i];
            dst[i] = base + at + i;
        }
        const int64_t *s_op = src, *d_op = dst;
        if (dev) {
            MS_TRY(be->set_device(m->cuda_dev));
            MS_TRY(be->upload_async(m->ops, m->d_src, src, (size_t)cnt * sizeof(int64_t)));
            MS_TRY(be->upload_async(m->ops, m->d_dst, dst, (size_t)cnt * sizeof(int64_t)));
            s_op = m->d_src;
            d_op = m->d_dst;
        }
        for (int64_t l = 0; l < m->n_layers; l++) {
            m->ops->move_rows(m->ops->ctx, el(m->kcache, l * m->max_ctx * m->kv_dim, m->es), m->kv_dim, s_op, d_op,
                              cnt);
            m->ops->move_rows(m->ops->ctx, el(m->vcache, l * m->max_ctx * m->kv_dim, m->es), m->kv_dim, s_op, d_op,
                              cnt);
        }
        if (dev) MS_TRY(be->sync(m->ops)); /* the pinned src/dst are refilled next chunk */
    }
    m->len = base + n;
    return MS_OK;
}
