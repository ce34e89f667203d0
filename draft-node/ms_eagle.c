/* ms_eagle.c — the EAGLE-1/2 draft head over the op table (notes §1.1-1.4).
 *
 * fc is split at load into its embedding half W_e = fc[:, :d] and feature half
 * W_f = fc[:, d:] (as FR-Spec does, eagle.py:58-65), so the concat never has to
 * be materialised: x = W_e·e + b + W_f·f. The rest is ms_model's layer without
 * the input norm and without the final norm.
 */
#include "ms_eagle.h"

#include "ms_weights.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_hfconfig.h"
#include "ms_k_backend.h"
#include "ms_safetensors.h"

struct ms_eagle {
    const ms_k_backend *be; /* the CPU tables: the head runs on the host */
    const ms_k_ops *ops;
    ms_st_model *st;  /* the draft's weights (mmap'd; f32 views point into it) */
    ms_st_model *tst; /* the target's weights */
    int64_t d, hd, n_heads, n_kv, q_dim, kv_dim, ffn, vocab;
    float eps;

    const float *fc_e, *fc_f, *fc_b; /* [d, d], [d, d], [d] or NULL */
    const float *wq, *wk, *wv, *wo;  /* [q_dim, d], [kv_dim, d] x2, [d, q_dim] */
    const float *bq, *bk, *bv, *bo;  /* optional biases */
    const float *ffn_norm;           /* [d] post_attention_layernorm */
    const float *w_gate, *w_up, *w_down;
    const float *embed, *lm_head; /* target's [V, d] */
    ms_weights weights; /* converted copies of non-F32 tensors */
    ms_k_rope rope;

    int64_t len, max_ctx, max_batch, last_n;
    float *kcache, *vcache; /* [max_ctx, kv_dim] */

    /* activations, sized for max_batch rows */
    float *x;      /* [B, d] residual stream; after a forward: y */
    float *xb;     /* [B, d] W_f·f, projection outputs, normed h */
    float *q;      /* [B, q_dim] */
    float *att;    /* [B, q_dim] embedding rows, then attention output (q_dim == d) */
    float *hb;     /* [B, ffn] gate, then silu(gate)·up */
    float *hb2;    /* [B, ffn] up */
    float *scores; /* [max_ctx] attention scratch */
    int32_t *pos;  /* [B] */
};

/* ---- config ---------------------------------------------------------------- */

static ms_status json_bool(const json_t *root, const char *name, const char *key, bool *present, bool *out) {
    const json_t *v = json_object_get(root, key);
    *present = false;
    if (!v || json_is_null(v)) return MS_OK;
    if (!json_is_boolean(v)) MS_FAIL(MS_ERR_FORMAT, "%s: field '%s' must be true or false", name, key);
    *out = json_is_true(v);
    *present = true;
    return MS_OK;
}

/* An EAGLE config is a LlamaConfig with one layer, often without a usable
 * "architectures" entry (or with a draft-specific one): the common fields are
 * read by ms_hfcfg_parse after the architecture is pinned to llama (qwen2 when
 * model_type says so); "bias" and "qkv_bias" are EAGLE's own. */
ms_status ms_eagle_config_parse(const char *json, size_t len, const char *name, ms_eagle_config *ec) {
    memset(ec, 0, sizeof *ec);
    if (!name) name = "config.json";
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (!root) MS_FAIL(MS_ERR_FORMAT, "%s: not valid JSON: %s (line %d)", name, jerr.text, jerr.line);
    ms_status st = MS_OK;
    char *norm = NULL;
    if (!json_is_object(root)) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: not a JSON object", name);
        st = MS_ERR_FORMAT;
        goto done;
    }
    const json_t *mt = json_object_get(root, "model_type");
    const char *type = json_is_string(mt) && !strcmp(json_string_value(mt), "qwen2") ? "qwen2" : "llama";
    json_object_del(root, "architectures");
    json_object_set_new(root, "model_type", json_string(type));

    bool have = false, v = false;
    MS_TRY_GOTO(st, json_bool(root, name, "bias", &have, &v), done);
    ec->fc_bias = have ? v : true; /* EA ea_model.py: default True */
    MS_TRY_GOTO(st, json_bool(root, name, "qkv_bias", &have, &v), done);
    ec->qkv_bias = have && v;

    norm = json_dumps(root, JSON_COMPACT);
    if (!norm) {
        st = MS_ERR_NOMEM;
        goto done;
    }
    MS_TRY_GOTO(st, ms_hfcfg_parse(norm, strlen(norm), name, &ec->base), done);
    if (ec->base.attention_bias) ec->qkv_bias = true; /* qwen2, or "attention_bias": true */
    if (ec->base.n_layers != 1) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: num_hidden_layers = %lld; an EAGLE-1/2 head has 1 layer",
                   name, (long long)ec->base.n_layers);
        st = MS_ERR_UNSUPPORTED;
        goto done;
    }
    if (ec->base.head_dim * ec->base.n_heads != ec->base.hidden_size) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__,
                   "%s: head_dim %lld with %lld heads; the EAGLE head needs head_dim = hidden_size / heads (%lld)",
                   name, (long long)ec->base.head_dim, (long long)ec->base.n_heads, (long long)ec->base.hidden_size);
        st = MS_ERR_UNSUPPORTED;
        goto done;
    }
done:
    free(norm);
    json_decref(root);
    if (st < 0) memset(ec, 0, sizeof *ec);
    return st;
}

static ms_status load_eagle_config(const char *path, ms_eagle_config *ec) {
    char *text = NULL;
    size_t len = 0;
    MS_TRY(ms_read_file(path, &text, &len));
    ms_status st = ms_eagle_config_parse(text, len, path, ec);
    free(text);
    return st;
}

/* ---- weights --------------------------------------------------------------- */

/* fc.weight [d, 2d] → W_e = columns [0, d) and W_f = columns [d, 2d), each
 * [d, d] row-major f32 (input order: embedding first, notes §1.2). */
static ms_status load_fc(ms_eagle *e) {
    const int64_t d = e->d;
    const float *w; /* [d, 2d] f32 */
    MS_TRY(ms_weights_get(&e->weights, e->st, "fc.weight", 2, d, 2 * d, &w));
    float *we = ms_malloc((size_t)d * (size_t)d * sizeof *we);
    if (!we) return MS_ERR_NOMEM;
    MS_TRY(ms_weights_own(&e->weights, we));
    float *wf = ms_malloc((size_t)d * (size_t)d * sizeof *wf);
    if (!wf) return MS_ERR_NOMEM;
    MS_TRY(ms_weights_own(&e->weights, wf));
    for (int64_t i = 0; i < d; i++) {
        memcpy(we + i * d, w + i * 2 * d, (size_t)d * sizeof *we);
        memcpy(wf + i * d, w + i * 2 * d + d, (size_t)d * sizeof *wf);
    }
    e->fc_e = we;
    e->fc_f = wf;
    return MS_OK;
}

static ms_status load_weights(ms_eagle *e, const ms_eagle_config *ec) {
    MS_TRY(load_fc(e));
    MS_TRY(ms_weights_get_opt(&e->weights, e->st, "fc.bias", e->d, &e->fc_b));
    if (!e->fc_b && ec->fc_bias) MS_LOG_DEBUG("eagle: config asks for fc.bias but the file has none: zero bias");
    MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.self_attn.q_proj.weight", 2, e->q_dim, e->d, &e->wq));
    MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.self_attn.k_proj.weight", 2, e->kv_dim, e->d, &e->wk));
    MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.self_attn.v_proj.weight", 2, e->kv_dim, e->d, &e->wv));
    MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.self_attn.o_proj.weight", 2, e->d, e->q_dim, &e->wo));
    if (ec->qkv_bias) { /* required when the config says so */
        MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.self_attn.q_proj.bias", 1, e->q_dim, 0, &e->bq));
        MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.self_attn.k_proj.bias", 1, e->kv_dim, 0, &e->bk));
        MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.self_attn.v_proj.bias", 1, e->kv_dim, 0, &e->bv));
    } else {
        MS_TRY(ms_weights_get_opt(&e->weights, e->st, "layers.0.self_attn.q_proj.bias", e->q_dim, &e->bq));
        MS_TRY(ms_weights_get_opt(&e->weights, e->st, "layers.0.self_attn.k_proj.bias", e->kv_dim, &e->bk));
        MS_TRY(ms_weights_get_opt(&e->weights, e->st, "layers.0.self_attn.v_proj.bias", e->kv_dim, &e->bv));
    }
    MS_TRY(ms_weights_get_opt(&e->weights, e->st, "layers.0.self_attn.o_proj.bias", e->d, &e->bo));
    MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.post_attention_layernorm.weight", 1, e->d, 0, &e->ffn_norm));
    MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.mlp.gate_proj.weight", 2, e->ffn, e->d, &e->w_gate));
    MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.mlp.up_proj.weight", 2, e->ffn, e->d, &e->w_up));
    MS_TRY(ms_weights_get(&e->weights, e->st, "layers.0.mlp.down_proj.weight", 2, e->d, e->ffn, &e->w_down));
    return MS_OK;
}

/* The target's embedding and LM head (tied or lm_head absent → the embedding,
 * as ms_model). */
static ms_status load_target(ms_eagle *e, const ms_hfconfig *tc) {
    MS_TRY(ms_weights_get(&e->weights, e->tst, "model.embed_tokens.weight", 2, e->vocab, e->d, &e->embed));
    if (tc->tie_word_embeddings || !ms_st_find(e->tst, "lm_head.weight", NULL)) {
        if (!tc->tie_word_embeddings) MS_LOG_WARN("target lm_head.weight absent: using the tied embedding");
        e->lm_head = e->embed;
        return MS_OK;
    }
    return ms_weights_get(&e->weights, e->tst, "lm_head.weight", 2, e->vocab, e->d, &e->lm_head);
}

static ms_status load_config_file(const char *dir, ms_eagle_config *ec, ms_hfconfig *tc, const char *target_dir,
                                  char **eagle_path, char **target_path) {
    *eagle_path = ms_path_join(dir, "config.json");
    *target_path = ms_path_join(target_dir, "config.json");
    if (!*eagle_path || !*target_path) return MS_ERR_NOMEM;
    MS_TRY(load_eagle_config(*eagle_path, ec));
    MS_TRY(ms_hfcfg_load(*target_path, tc));
    if (ec->base.hidden_size != tc->hidden_size)
        MS_FAIL(MS_ERR_FORMAT, "hidden_size %lld in %s differs from hidden_size %lld in %s (the EAGLE head must match "
                "its target)", (long long)ec->base.hidden_size, *eagle_path, (long long)tc->hidden_size, *target_path);
    if (ec->base.vocab_size != tc->vocab_size)
        MS_LOG_WARN("%s: vocab_size %lld differs from the target's %lld (%s); the target's embedding and LM head "
                    "are used", *eagle_path, (long long)ec->base.vocab_size, (long long)tc->vocab_size, *target_path);
    return MS_OK;
}

ms_status ms_eagle_load(const char *eagle_dir, const char *target_dir, const ms_eagle_opts *opts, ms_eagle **out) {
    *out = NULL;
    ms_eagle_opts o = opts ? *opts : (ms_eagle_opts){0};
    if (o.max_ctx < 0 || o.max_batch < 0)
        MS_FAIL(MS_ERR_INVALID, "eagle: negative max_ctx (%lld) or max_batch (%lld)", (long long)o.max_ctx,
                (long long)o.max_batch);
    ms_eagle *e = ms_calloc(1, sizeof *e);
    if (!e) return MS_ERR_NOMEM;
    ms_eagle_config ec;
    ms_hfconfig tc;
    memset(&ec, 0, sizeof ec);
    char *eagle_path = NULL, *target_path = NULL;
    ms_status st = load_config_file(eagle_dir, &ec, &tc, target_dir, &eagle_path, &target_path);
    free(eagle_path);
    free(target_path);
    if (st < 0) goto fail;
    MS_TRY_GOTO(st, ms_st_open_dir(eagle_dir, &e->st), fail);
    MS_TRY_GOTO(st, ms_st_open_dir(target_dir, &e->tst), fail);

    const ms_hfconfig *c = &ec.base;
    e->be = ms_k_backend_cpu();
    e->ops = ms_k_cpu_ops();
    e->d = c->hidden_size;
    e->hd = c->head_dim;
    e->n_heads = c->n_heads;
    e->n_kv = c->n_kv_heads;
    e->q_dim = e->n_heads * e->hd; /* == d (checked with the config) */
    e->kv_dim = e->n_kv * e->hd;
    e->ffn = c->intermediate_size;
    e->vocab = tc.vocab_size;
    e->eps = (float)c->rms_norm_eps;
    e->max_ctx = o.max_ctx > 0 ? o.max_ctx : 4096;
    e->max_batch = o.max_batch > 0 ? o.max_batch : 256;
    if (e->max_batch > e->max_ctx) e->max_batch = e->max_ctx;
    if (e->max_ctx > INT32_MAX) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "eagle: max_ctx %lld too large", (long long)e->max_ctx);
        st = MS_ERR_RANGE;
        goto fail;
    }
    MS_TRY_GOTO(st, load_weights(e, &ec), fail);
    MS_TRY_GOTO(st, load_target(e, &tc), fail);

    ms_k_rope_params rp = ms_rope_params_of(c);
    MS_TRY_GOTO(st, ms_k_rope_build(&e->rope, e->max_ctx, e->hd, &rp), fail);

    const int64_t B = e->max_batch;
    MS_TRY_GOTO(st, ms_alloc_f32(&e->kcache, e->max_ctx, e->kv_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&e->vcache, e->max_ctx, e->kv_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&e->x, B, e->d), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&e->xb, B, e->d), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&e->q, B, e->q_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&e->att, B, e->q_dim), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&e->hb, B, e->ffn), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&e->hb2, B, e->ffn), fail);
    MS_TRY_GOTO(st, ms_alloc_f32(&e->scores, e->max_ctx, 1), fail);
    e->pos = ms_calloc((size_t)B, sizeof *e->pos);
    if (!e->pos) {
        st = MS_ERR_NOMEM;
        goto fail;
    }
    MS_LOG_INFO("eagle: d %lld, heads %lld/%lld, head_dim %lld, ffn %lld, vocab %lld, fc.bias %s, qkv bias %s, "
                "theta %g%s, max_ctx %lld, max_batch %lld",
                (long long)e->d, (long long)e->n_heads, (long long)e->n_kv, (long long)e->hd, (long long)e->ffn,
                (long long)e->vocab, e->fc_b ? "yes" : "no", e->bq ? "yes" : "no", c->rope_theta,
                rp.llama3 ? " (llama3 scaling)" : "", (long long)e->max_ctx, (long long)e->max_batch);
    *out = e;
    return MS_OK;
fail:
    ms_eagle_free(&e);
    return st;
}

void ms_eagle_free(ms_eagle **pe) {
    ms_eagle *e = *pe;
    if (!e) return;
    ms_weights_free(&e->weights);
    ms_k_rope_free(&e->rope);
    free(e->kcache);
    free(e->vcache);
    free(e->x);
    free(e->xb);
    free(e->q);
    free(e->att);
    free(e->hb);
    free(e->hb2);
    free(e->scores);
    free(e->pos);
    ms_st_close(&e->st);
    ms_st_close(&e->tst);
    free(e);
    *pe = NULL;
}

int64_t ms_eagle_hidden(const ms_eagle *e) { return e->d; }
int64_t ms_eagle_vocab(const ms_eagle *e) { return e->vocab; }
int64_t ms_eagle_len(const ms_eagle *e) { return e->len; }
int64_t ms_eagle_max_ctx(const ms_eagle *e) { return e->max_ctx; }
int64_t ms_eagle_max_batch(const ms_eagle *e) { return e->max_batch; }
const float *ms_eagle_out(const ms_eagle *e) { return e->x; }
const float *ms_eagle_lm_head(const ms_eagle *e) { return e->lm_head; }
const float *ms_eagle_embed(const ms_eagle *e) { return e->embed; }

ms_status ms_eagle_truncate(ms_eagle *e, int64_t len) {
    if (len < 0 || len > e->len)
        MS_FAIL(MS_ERR_RANGE, "eagle: truncate to %lld rows (have %lld)", (long long)len, (long long)e->len);
    e->len = len;
    return MS_OK;
}

/* ---- forward ------------------------------------------------------------- */

/* y [n, m] = x [n, k] · Wᵀ (+ b [m]): the backend's linear over dense f32 W. */
static void lin(const ms_eagle *e, float *y, const float *x, const float *w, const float *b, int64_t n, int64_t k,
                int64_t m) {
    e->be->linear(e->ops, y, x, w, NULL, NULL, b, n, k, m);
}

ms_status ms_eagle_forward(ms_eagle *e, const int32_t *tokens, const float *feat, int64_t n, const int32_t *pos,
                           const uint64_t *mask, int64_t mask_back) {
    if (n <= 0 || n > e->max_batch)
        MS_FAIL(MS_ERR_RANGE, "eagle: forward of %lld rows (1..%lld allowed)", (long long)n, (long long)e->max_batch);
    if (!tokens || !feat) MS_FAIL(MS_ERR_INVALID, "eagle: forward without %s", tokens ? "features" : "tokens");
    if (mask && (mask_back < 0 || mask_back > e->len || mask_back + n > 64))
        MS_FAIL(MS_ERR_RANGE, "eagle: tree forward of %lld rows reaching back %lld (≤ 64 masked rows, ≤ len %lld)",
                (long long)n, (long long)mask_back, (long long)e->len);
    if (e->len + n > e->max_ctx)
        MS_FAIL(MS_ERR_RANGE, "eagle: KV cache full: %lld + %lld rows > max_ctx %lld", (long long)e->len,
                (long long)n, (long long)e->max_ctx);
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= e->vocab)
            MS_FAIL(MS_ERR_INVALID, "eagle: token id %d at row %lld outside the vocabulary [0, %lld)", tokens[i],
                    (long long)i, (long long)e->vocab);
        int64_t p = pos ? pos[i] : e->len + i;
        if (p < 0 || p >= e->rope.max_pos)
            MS_FAIL(MS_ERR_RANGE, "eagle: position %lld at row %lld outside [0, %lld)", (long long)p, (long long)i,
                    (long long)e->rope.max_pos);
        e->pos[i] = (int32_t)p;
    }

    const ms_k_ops *k = e->ops;
    void *c = k->ctx;
    const int64_t d = e->d;
    const ms_k_attn_shape shape = {.n_q = n,
                                   .ctx = e->len,
                                   .n_heads = e->n_heads,
                                   .n_kv_heads = e->n_kv,
                                   .head_dim = e->hd,
                                   .scale = 1.0f / sqrtf((float)e->hd),
                                   .mask_back = mask ? mask_back : 0};
    float *kn = e->kcache + e->len * e->kv_dim; /* the batch's K rows, written in place */
    float *vn = e->vcache + e->len * e->kv_dim;

    /* x = W_e·Embed(token) + b + W_f·f. feat is read first: a caller may pass
     * rows of ms_eagle_out (= e->x) as the features of the next level. */
    lin(e, e->xb, feat, e->fc_f, NULL, n, d, d);
    k->embed(c, e->att, e->embed, MS_DTYPE_F32, tokens, n, d);
    lin(e, e->x, e->att, e->fc_e, e->fc_b, n, d, d);
    k->add(c, e->x, e->xb, n * d);

    /* h = x + Wo·Attn(x): no input_layernorm on the EAGLE layer. */
    lin(e, e->q, e->x, e->wq, e->bq, n, d, e->q_dim);
    lin(e, kn, e->x, e->wk, e->bk, n, d, e->kv_dim);
    lin(e, vn, e->x, e->wv, e->bv, n, d, e->kv_dim);
    k->rope(c, e->q, n, e->n_heads, e->hd, e->pos, &e->rope);
    k->rope(c, kn, n, e->n_kv, e->hd, e->pos, &e->rope);
    k->attention(c, e->att, e->q, e->kcache, e->vcache, &shape, mask, e->scores);
    lin(e, e->xb, e->att, e->wo, e->bo, n, e->q_dim, d);
    k->add(c, e->x, e->xb, n * d);

    /* y = h + MLP(n(h)); no final norm. */
    k->rmsnorm(c, e->xb, e->x, e->ffn_norm, n, d, e->eps);
    lin(e, e->hb, e->xb, e->w_gate, NULL, n, d, e->ffn);
    lin(e, e->hb2, e->xb, e->w_up, NULL, n, d, e->ffn);
    k->silu_glu(c, e->hb, e->hb, e->hb2, n * e->ffn);
    lin(e, e->xb, e->hb, e->w_down, NULL, n, e->ffn, d);
    k->add(c, e->x, e->xb, n * d);

    e->len += n;
    e->last_n = n;
    return MS_OK;
}

ms_status ms_eagle_logits(ms_eagle *e, int64_t first, int64_t n, float *logits) {
    if (first < 0 || n <= 0 || first + n > e->last_n)
        MS_FAIL(MS_ERR_RANGE, "eagle: logits of rows [%lld, %lld) outside the last forward's %lld rows",
                (long long)first, (long long)(first + n), (long long)e->last_n);
    if (!logits) MS_FAIL(MS_ERR_INVALID, "eagle: logits into NULL");
    lin(e, logits, e->x + first * e->d, e->lm_head, NULL, n, e->d, e->vocab);
    return MS_OK;
}
