/* ms_model.c — Llama / Qwen2 / Qwen3 decoder runtime over the op table.
 *
 * One layer (HF semantics; Qwen3 adds the per-head q/k RMSNorm before RoPE):
 *   h  = x + Wo · Attn(RoPE(norm_qk(Wq·n1(x) + bq)), RoPE(norm_qk(Wk·n1(x) + bk)), Wv·n1(x) + bv)
 *   x' = h + Wdown · (silu(Wgate · n2(h)) ⊙ Wup · n2(h))
 * logits = lm_head · norm(x)   (lm_head = embed_tokens when tied).
 *
 * Weights: F32 tensors aligned in the mmap are used in place; others are
 * converted to owned f32 once at load. The KV cache is [layer][max_ctx][kv_dim]
 * for K and V; every activation buffer is sized for max_batch rows at load.
 */
#include "ms_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_safetensors.h"
#include "ms_weights.h"

typedef struct {
    const float *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *q_norm, *k_norm;
    const float *ffn_norm, *w_gate, *w_up, *w_down;
} layer_w;

struct ms_model {
    ms_hfconfig cfg;
    const ms_k_ops *ops;
    ms_st_model *st;
    int64_t n_layers, d, hd, n_heads, n_kv, q_dim, kv_dim, ffn, vocab;
    const float *embed, *lm_head, *final_norm;
    layer_w *layers;
    ms_weights weights; /* converted copies of non-F32 tensors */
    ms_k_rope rope;

    int64_t len, max_ctx, max_batch, last_n;
    float *kcache, *vcache; /* [n_layers][max_ctx][kv_dim] */

    /* activations, sized for max_batch rows */
    float *x;      /* [B, d] residual stream */
    float *xb;     /* [B, d] normed input / projection output */
    float *q;      /* [B, q_dim] */
    float *att;    /* [B, q_dim] attention output */
    float *hb;     /* [B, ffn] gate, then silu(gate)·up */
    float *hb2;    /* [B, ffn] up */
    float *hidden; /* [B, d] final-norm hidden states */
    float *scores; /* [max_ctx] attention scratch */
    int32_t *pos;  /* [B] */
};

/* ---- weight loading ---------------------------------------------------- */

static ms_status load_weights(ms_model *m) {
    char name[256];
    MS_TRY(ms_weights_get(&m->weights, m->st, "model.embed_tokens.weight", 2, m->vocab, m->d, &m->embed));
    MS_TRY(ms_weights_get(&m->weights, m->st, "model.norm.weight", 1, m->d, 0, &m->final_norm));
    ms_tensor head;
    if (m->cfg.tie_word_embeddings || !ms_st_find(m->st, "lm_head.weight", &head)) {
        if (!m->cfg.tie_word_embeddings)
            MS_LOG_WARN("lm_head.weight absent: using the tied embedding as the LM head");
        m->lm_head = m->embed;
    } else {
        MS_TRY(ms_weights_get(&m->weights, m->st, "lm_head.weight", 2, m->vocab, m->d, &m->lm_head));
    }
    for (int64_t l = 0; l < m->n_layers; l++) {
        layer_w *w = &m->layers[l];
#define LW(field, suffix, ndim, a, b)                                                 \
    do {                                                                              \
        snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l, suffix);    \
        MS_TRY(ms_weights_get(&m->weights, m->st, name, ndim, a, b, &w->field));                               \
    } while (0)
        LW(attn_norm, "input_layernorm.weight", 1, m->d, 0);
        LW(wq, "self_attn.q_proj.weight", 2, m->q_dim, m->d);
        LW(wk, "self_attn.k_proj.weight", 2, m->kv_dim, m->d);
        LW(wv, "self_attn.v_proj.weight", 2, m->kv_dim, m->d);
        LW(wo, "self_attn.o_proj.weight", 2, m->d, m->q_dim);
        if (m->cfg.attention_bias) {
            LW(bq, "self_attn.q_proj.bias", 1, m->q_dim, 0);
            LW(bk, "self_attn.k_proj.bias", 1, m->kv_dim, 0);
            LW(bv, "self_attn.v_proj.bias", 1, m->kv_dim, 0);
            /* transformers: Llama and Qwen3 give o_proj a bias with attention_bias;
             * Qwen2 has q/k/v biases only. */
            if (m->cfg.arch != MS_ARCH_QWEN2) LW(bo, "self_attn.o_proj.bias", 1, m->d, 0);
        }
        if (m->cfg.qk_norm) {
            LW(q_norm, "self_attn.q_norm.weight", 1, m->hd, 0);
            LW(k_norm, "self_attn.k_norm.weight", 1, m->hd, 0);
        }
        LW(ffn_norm, "post_attention_layernorm.weight", 1, m->d, 0);
        LW(w_gate, "mlp.gate_proj.weight", 2, m->ffn, m->d);
        LW(w_up, "mlp.up_proj.weight", 2, m->ffn, m->d);
        LW(w_down, "mlp.down_proj.weight", 2, m->d, m->ffn);
#undef LW
    }
    return MS_OK;
}

ms_status ms_model_load(const char *dir, const ms_model_opts *opts, ms_model **out) {
    *out = NULL;
    ms_model_opts o = opts ? *opts : (ms_model_opts){0};
    ms_model *m = ms_calloc(1, sizeof *m);
    if (!m) return MS_ERR_NOMEM;
    ms_status st = MS_OK;
    char *cfg_path = ms_path_join(dir, "config.json");
    if (!cfg_path) {
        st = MS_ERR_NOMEM;
        goto fail;
    }
    st = ms_hfcfg_load(cfg_path, &m->cfg);
    free(cfg_path);
    if (st < 0) goto fail;
    MS_TRY_GOTO(st, ms_st_open_dir(dir, &m->st), fail);

    const ms_hfconfig *c = &m->cfg;
    m->ops = ms_k_cpu_ops();
    m->d = c->hidden_size;
    m->hd = c->head_dim;
    m->n_heads = c->n_heads;
    m->n_kv = c->n_kv_heads;
    m->q_dim = m->n_heads * m->hd;
    m->kv_dim = m->n_kv * m->hd;
    m->ffn = c->intermediate_size;
    m->vocab = c->vocab_size;
    m->n_layers = c->n_layers;
    if (o.n_layers < 0 || o.n_layers > c->n_layers) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: asked for %lld layers, the model has %lld", dir,
                   (long long)o.n_layers, (long long)c->n_layers);
        st = MS_ERR_INVALID;
        goto fail;
    }
    if (o.n_layers > 0) m->n_layers = o.n_layers;
    m->max_ctx = o.max_ctx > 0 ? o.max_ctx : (c->max_position_embeddings < 4096 ? c->max_position_embeddings : 4096);
    m->max_batch = o.max_batch > 0 ? o.max_batch : 256;
    if (m->max_batch > m->max_ctx) m->max_batch = m->max_ctx;

    m->layers = ms_calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) {
        st = MS_ERR_NOMEM;
        goto fail;
    }
    MS_TRY_GOTO(st, load_weights(m), fail);

    ms_k_rope_params rp = ms_rope_params_of(c);
    MS_TRY_GOTO(st, ms_k_rope_build(&m->rope, m->max_ctx, m->hd, &rp), fail);

    const int64_t B = m->max_batch;
    MS_TRY_GOTO(st, ms_alloc_f32(&m->kcache, m->n_layers * m->max_ctx, m->kv_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->vcache, m->n_layers * m->max_ctx, m->kv_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->x, B, m->d), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->xb, B, m->d > m->q_dim ? m->d : m->q_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->q, B, m->q_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->att, B, m->q_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->hb, B, m->ffn), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->hb2, B, m->ffn), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->hidden, B, m->d), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&m->scores, m->max_ctx, 1), fail);
    m->pos = ms_calloc((size_t)B, sizeof *m->pos);
    if (!m->pos) {
        st = MS_ERR_NOMEM;
        goto fail;
    }
    *out = m;
    return MS_OK;
fail:
    ms_model_free(&m);
    return st;
}

void ms_model_free(ms_model **pm) {
    ms_model *m = *pm;
    if (!m) return;
    ms_weights_free(&m->weights);
    free(m->layers);
    ms_k_rope_free(&m->rope);
    free(m->kcache);
    free(m->vcache);
    free(m->x);
    free(m->xb);
    free(m->q);
    free(m->att);
    free(m->hb);
    free(m->hb2);
    free(m->hidden);
    free(m->scores);
    free(m->pos);
    ms_st_close(&m->st);
    free(m);
    *pm = NULL;
}

const ms_hfconfig *ms_model_config(const ms_model *m) { return &m->cfg; }
int64_t ms_model_vocab(const ms_model *m) { return m->vocab; }
int64_t ms_model_len(const ms_model *m) { return m->len; }
int64_t ms_model_max_ctx(const ms_model *m) { return m->max_ctx; }
int64_t ms_model_max_batch(const ms_model *m) { return m->max_batch; }
const float *ms_model_hidden(const ms_model *m) { return m->hidden; }
void ms_model_reset(ms_model *m) { m->len = 0; }

/* ---- forward ------------------------------------------------------------- */

ms_status ms_model_forward(ms_model *m, const int32_t *tokens, int64_t n, const int32_t *pos, const uint64_t *mask,
                           ms_logits_mode mode, float *logits) {
    return ms_model_forward_masked(m, tokens, n, pos, mask, 0, mode, logits);
}

const float *ms_model_lm_head(const ms_model *m) { return m->lm_head; }

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

    const ms_k_ops *k = m->ops;
    void *c = k->ctx;
    const int64_t d = m->d;
    const float eps = (float)m->cfg.rms_norm_eps;
    const ms_k_attn_shape shape = {.n_q = n,
                                   .ctx = m->len,
                                   .n_heads = m->n_heads,
                                   .n_kv_heads = m->n_kv,
                                   .head_dim = m->hd,
                                   .scale = 1.0f / sqrtf((float)m->hd),
                                   .mask_back = mask ? mask_back : 0};

    k->embed(c, m->x, m->embed, MS_DTYPE_F32, tokens, n, d);
    for (int64_t l = 0; l < m->n_layers; l++) {
        const layer_w *w = &m->layers[l];
        float *kc = m->kcache + l * m->max_ctx * m->kv_dim; /* [max_ctx, kv_dim] */
        float *vc = m->vcache + l * m->max_ctx * m->kv_dim;
        float *kn = kc + m->len * m->kv_dim; /* the batch's K rows, written in place */
        float *vn = vc + m->len * m->kv_dim;

        k->rmsnorm(c, m->xb, m->x, w->attn_norm, n, d, eps);
        k->linear(c, m->q, m->xb, w->wq, w->bq, n, d, m->q_dim);
        k->linear(c, kn, m->xb, w->wk, w->bk, n, d, m->kv_dim);
        k->linear(c, vn, m->xb, w->wv, w->bv, n, d, m->kv_dim);
        if (w->q_norm) { /* Qwen3: RMSNorm over each head's hd values */
            k->rmsnorm(c, m->q, m->q, w->q_norm, n * m->n_heads, m->hd, eps);
            k->rmsnorm(c, kn, kn, w->k_norm, n * m->n_kv, m->hd, eps);
        }
        k->rope(c, m->q, n, m->n_heads, m->hd, m->pos, &m->rope);
        k->rope(c, kn, n, m->n_kv, m->hd, m->pos, &m->rope);
        k->attention(c, m->att, m->q, kc, vc, &shape, mask, m->scores);
        k->linear(c, m->xb, m->att, w->wo, w->bo, n, m->q_dim, d);
        k->add(c, m->x, m->xb, n * d);

        k->rmsnorm(c, m->xb, m->x, w->ffn_norm, n, d, eps);
        k->linear(c, m->hb, m->xb, w->w_gate, NULL, n, d, m->ffn);
        k->linear(c, m->hb2, m->xb, w->w_up, NULL, n, d, m->ffn);
        k->silu_glu(c, m->hb, m->hb, m->hb2, n * m->ffn);
        k->linear(c, m->xb, m->hb, w->w_down, NULL, n, m->ffn, d);
        k->add(c, m->x, m->xb, n * d);
    }
    k->rmsnorm(c, m->hidden, m->x, m->final_norm, n, d, eps);
    if (mode == MS_LOGITS_LAST) k->linear(c, logits, m->hidden + (n - 1) * d, m->lm_head, NULL, 1, d, m->vocab);
    else if (mode == MS_LOGITS_ALL) k->linear(c, logits, m->hidden, m->lm_head, NULL, n, d, m->vocab);
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
    int64_t src[64], dst[64];
    for (int64_t at = 0; at < n; at += 64) {
        int64_t cnt = n - at < 64 ? n - at : 64;
        for (int64_t i = 0; i < cnt; i++) {
            src[i] = base + rows[at + i];
            dst[i] = base + at + i;
        }
        for (int64_t l = 0; l < m->n_layers; l++) {
            m->ops->move_rows(m->ops->ctx, m->kcache + l * m->max_ctx * m->kv_dim, m->kv_dim, src, dst, cnt);
            m->ops->move_rows(m->ops->ctx, m->vcache + l * m->max_ctx * m->kv_dim, m->kv_dim, src, dst, cnt);
        }
    }
    m->len = base + n;
    return MS_OK;
}
