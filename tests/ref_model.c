/* ref_model.c — naive double-precision reference forward (see ref_model.h).
 *
 * Reads like llama2.c's run.c on purpose: plain loops, one buffer per
 * activation with its shape in a comment. Semantics follow transformers'
 * modeling_llama / modeling_qwen2 / modeling_qwen3:
 *   x = embed[tok]
 *   per layer:  h = rmsnorm(x)·w_in
 *               q,k,v = h·Wᵀ (+ b);  Qwen3: q,k = rmsnorm_per_head(q,k)·w  (before RoPE)
 *               q,k = rope(q,k) rotate-half, pairs (i, i+hd/2)
 *               a = softmax(q·kᵀ/sqrt(hd), causal)·v      (GQA: head h → kv h/(H/KV))
 *               x += a·Woᵀ (+ bo)
 *               x += down(silu(gate(h2))·up(h2)),  h2 = rmsnorm(x)·w_post
 *   logits = rmsnorm(x)·w_final · lm_headᵀ   (lm_head = embed when tied/absent)
 */
#include "ref_model.h"

#include "ms_safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct {
    double *attn_norm;          /* [d] */
    double *wq, *wk, *wv, *wo;  /* [H·hd, d], [KV·hd, d], [KV·hd, d], [d, H·hd] */
    double *bq, *bk, *bv, *bo;  /* [H·hd], [KV·hd], [KV·hd], [d]; NULL when absent */
    double *q_norm, *k_norm;    /* [hd] (Qwen3) or NULL */
    double *ffn_norm;           /* [d] */
    double *gate, *up, *down;   /* [f, d], [f, d], [d, f] */
} ref_layer;

struct ref_model {
    ms_hfconfig cfg;
    int64_t n_layers; /* layers used */
    double *embed;    /* [V, d] */
    double *lm_head;  /* [V, d]; == embed when tied */
    double *norm;     /* [d] */
    ref_layer *layers;
    double *inv_freq; /* [hd/2] */
};

/* ---- loading ------------------------------------------------------------- */

/* Tensor `name` with the given shape, widened to a new double array. */
static ms_status load_tensor(const ms_st_model *st, const char *name, int ndim, const int64_t *shape,
                             double **out) {
    ms_tensor t;
    MS_TRY(ms_st_get_shaped(st, name, ndim, shape, &t));
    if (t.dtype != MS_DTYPE_F32 && t.dtype != MS_DTYPE_F16 && t.dtype != MS_DTYPE_BF16)
        MS_FAIL(MS_ERR_UNSUPPORTED, "ref: tensor %s has dtype %s", name, ms_dtype_name(t.dtype));
    int64_t n = ms_tensor_nelem(&t);
    float *f = ms_malloc((size_t)n * sizeof(float));
    double *d = ms_malloc((size_t)n * sizeof(double));
    if (!f || !d) {
        free(f);
        free(d);
        return MS_ERR_NOMEM;
    }
    ms_convert_to_f32(f, t.data, t.dtype, n);
    for (int64_t i = 0; i < n; i++) d[i] = (double)f[i];
    free(f);
    *out = d;
    return MS_OK;
}

static ms_status load_1d(const ms_st_model *st, const char *name, int64_t n0, double **out) {
    return load_tensor(st, name, 1, (int64_t[]){n0}, out);
}

static ms_status load_2d(const ms_st_model *st, const char *name, int64_t n0, int64_t n1, double **out) {
    return load_tensor(st, name, 2, (int64_t[]){n0, n1}, out);
}

/* An optional tensor: absent → *out = NULL. */
static ms_status load_opt_1d(const ms_st_model *st, const char *name, int64_t n0, double **out) {
    ms_tensor t;
    *out = NULL;
    if (!ms_st_find(st, name, &t)) return MS_OK;
    return load_1d(st, name, n0, out);
}

static ms_status load_layer(const ms_st_model *st, const ms_hfconfig *c, int64_t l, ref_layer *L) {
    int64_t d = c->hidden_size, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    int64_t f = c->intermediate_size;
    char name[256];
#define NAME(suffix) (snprintf(name, sizeof name, "model.layers.%lld." suffix, (long long)l), name)
    MS_TRY(load_1d(st, NAME("input_layernorm.weight"), d, &L->attn_norm));
    MS_TRY(load_2d(st, NAME("self_attn.q_proj.weight"), qd, d, &L->wq));
    MS_TRY(load_2d(st, NAME("self_attn.k_proj.weight"), kvd, d, &L->wk));
    MS_TRY(load_2d(st, NAME("self_attn.v_proj.weight"), kvd, d, &L->wv));
    MS_TRY(load_2d(st, NAME("self_attn.o_proj.weight"), d, qd, &L->wo));
    if (c->attention_bias) {
        MS_TRY(load_1d(st, NAME("self_attn.q_proj.bias"), qd, &L->bq));
        MS_TRY(load_1d(st, NAME("self_attn.k_proj.bias"), kvd, &L->bk));
        MS_TRY(load_1d(st, NAME("self_attn.v_proj.bias"), kvd, &L->bv));
    }
    /* Llama/Qwen3 give o_proj a bias when attention_bias is set; Qwen2 never
     * does. Use it whenever the file has it. */
    MS_TRY(load_opt_1d(st, NAME("self_attn.o_proj.bias"), d, &L->bo));
    if (c->qk_norm) {
        MS_TRY(load_1d(st, NAME("self_attn.q_norm.weight"), hd, &L->q_norm));
        MS_TRY(load_1d(st, NAME("self_attn.k_norm.weight"), hd, &L->k_norm));
    }
    MS_TRY(load_1d(st, NAME("post_attention_layernorm.weight"), d, &L->ffn_norm));
    MS_TRY(load_2d(st, NAME("mlp.gate_proj.weight"), f, d, &L->gate));
    MS_TRY(load_2d(st, NAME("mlp.up_proj.weight"), f, d, &L->up));
    MS_TRY(load_2d(st, NAME("mlp.down_proj.weight"), d, f, &L->down));
#undef NAME
    return MS_OK;
}

static ms_status load_all(ref_model *r, const char *dir) {
    char *cfg_path = ms_path_join(dir, "config.json");
    if (!cfg_path) return MS_ERR_NOMEM;
    ms_status st = ms_hfcfg_load(cfg_path, &r->cfg);
    free(cfg_path);
    MS_TRY(st);
    const ms_hfconfig *c = &r->cfg;
    r->n_layers = c->n_layers;

    ms_st_model *w = NULL;
    MS_TRY(ms_st_open_dir(dir, &w));
    int64_t V = c->vocab_size, d = c->hidden_size;
    MS_TRY_GOTO(st, load_2d(w, "model.embed_tokens.weight", V, d, &r->embed), done);
    MS_TRY_GOTO(st, load_1d(w, "model.norm.weight", d, &r->norm), done);
    ms_tensor t;
    if (c->tie_word_embeddings || !ms_st_find(w, "lm_head.weight", &t))
        r->lm_head = r->embed;
    else
        MS_TRY_GOTO(st, load_2d(w, "lm_head.weight", V, d, &r->lm_head), done);
    r->layers = ms_calloc((size_t)c->n_layers, sizeof(ref_layer));
    if (!r->layers) {
        st = MS_ERR_NOMEM;
        goto done;
    }
    for (int64_t l = 0; l < c->n_layers; l++) MS_TRY_GOTO(st, load_layer(w, c, l, &r->layers[l]), done);

    r->inv_freq = ms_malloc((size_t)(c->head_dim / 2) * sizeof(double));
    if (!r->inv_freq) {
        st = MS_ERR_NOMEM;
        goto done;
    }
    ref_rope_inv_freq(r->inv_freq, c->head_dim, c->rope_theta, c->rope_scaling.type == MS_ROPE_LLAMA3,
                      c->rope_scaling.factor, c->rope_scaling.low_freq_factor, c->rope_scaling.high_freq_factor,
                      (double)c->rope_scaling.original_max_position_embeddings);
    st = MS_OK;
done:
    ms_st_close(&w);
    return st;
}

ms_status ref_model_load(const char *dir, ref_model **out) {
    *out = NULL;
    ref_model *r = ms_calloc(1, sizeof *r);
    if (!r) return MS_ERR_NOMEM;
    ms_status st = load_all(r, dir);
    if (st < 0) {
        ref_model_free(&r);
        return st;
    }
    *out = r;
    return MS_OK;
}

void ref_model_free(ref_model **pr) {
    ref_model *r = *pr;
    if (!r) return;
    if (r->layers) {
        for (int64_t l = 0; l < r->cfg.n_layers; l++) {
            ref_layer *L = &r->layers[l];
            double *all[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv, L->bo,
                             L->q_norm, L->k_norm, L->ffn_norm, L->gate, L->up, L->down};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
        }
        free(r->layers);
    }
    if (r->lm_head != r->embed) free(r->lm_head);
    free(r->embed);
    free(r->norm);
    free(r->inv_freq);
    free(r);
    *pr = NULL;
}

const ms_hfconfig *ref_model_config(const ref_model *r) { return &r->cfg; }

void ref_model_set_layers(ref_model *r, int64_t n) {
    r->n_layers = (n <= 0 || n > r->cfg.n_layers) ? r->cfg.n_layers : n;
}

/* ---- RoPE frequencies ----------------------------------------------------- */

void ref_rope_inv_freq(double *inv_freq, int64_t head_dim, double theta, bool llama3, double factor,
                       double low_freq_factor, double high_freq_factor, double original_max_pos) {
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t i = 0; i < head_dim / 2; i++) {
        double inv = pow(theta, -(double)(2 * i) / (double)head_dim);
        if (llama3) {
            double low_wavelen = original_max_pos / low_freq_factor;
            double high_wavelen = original_max_pos / high_freq_factor;
            double wavelen = two_pi / inv;
            if (wavelen < high_wavelen) {
                /* high frequency: unchanged */
            } else if (wavelen > low_wavelen) {
                inv = inv / factor;
            } else {
                double smooth = (original_max_pos / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                inv = (1.0 - smooth) * inv / factor + smooth * inv;
            }
        }
        inv_freq[i] = inv;
    }
}

/* ---- forward -------------------------------------------------------------- */

/* y[n, m] = x[n, k] · W[m, k]ᵀ (+ b[m]) */
static void matmul(double *y, const double *x, const double *w, const double *b, int64_t n, int64_t k, int64_t m) {
    for (int64_t i = 0; i < n; i++) {
        for (int64_t o = 0; o < m; o++) {
            double s = b ? b[o] : 0.0;
            const double *wr = w + o * k, *xr = x + i * k;
            for (int64_t j = 0; j < k; j++) s += xr[j] * wr[j];
            y[i * m + o] = s;
        }
    }
}

/* y[d] = x / sqrt(mean(x²) + eps) · w */
static void rmsnorm(double *y, const double *x, const double *w, int64_t d, double eps) {
    double ss = 0.0;
    for (int64_t j = 0; j < d; j++) ss += x[j] * x[j];
    double inv = 1.0 / sqrt(ss / (double)d + eps);
    for (int64_t j = 0; j < d; j++) y[j] = x[j] * inv * w[j];
}

/* In place on one head v[hd] at position p: rotate-half. */
static void rope_head(double *v, int64_t hd, int64_t p, const double *inv_freq) {
    int64_t half = hd / 2;
    for (int64_t i = 0; i < half; i++) {
        double a = (double)p * inv_freq[i], c = cos(a), s = sin(a);
        double x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
    }
}

ms_status ref_forward(const ref_model *r, const int32_t *tokens, int64_t n, bool all_rows, double *logits) {
    const ms_hfconfig *c = &r->cfg;
    int64_t V = c->vocab_size, d = c->hidden_size, hd = c->head_dim, H = c->n_heads, KV = c->n_kv_heads;
    int64_t qd = H * hd, kvd = KV * hd, f = c->intermediate_size, group = H / KV;
    double eps = c->rms_norm_eps;
    if (n <= 0) MS_FAIL(MS_ERR_INVALID, "ref_forward: n = %lld", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) MS_FAIL(MS_ERR_RANGE, "ref_forward: token %d out of range", tokens[i]);

    size_t nd = (size_t)n;
    double *x = ms_malloc(nd * (size_t)d * sizeof(double));    /* [n, d] residual */
    double *h = ms_malloc(nd * (size_t)d * sizeof(double));    /* [n, d] normed */
    double *q = ms_malloc(nd * (size_t)qd * sizeof(double));   /* [n, H·hd] */
    double *k = ms_malloc(nd * (size_t)kvd * sizeof(double));  /* [n, KV·hd] */
    double *v = ms_malloc(nd * (size_t)kvd * sizeof(double));  /* [n, KV·hd] */
    double *att = ms_malloc(nd * (size_t)qd * sizeof(double)); /* [n, H·hd] */
    double *o = ms_malloc(nd * (size_t)d * sizeof(double));    /* [n, d] */
    double *g = ms_malloc(nd * (size_t)f * sizeof(double));    /* [n, f] */
    double *u = ms_malloc(nd * (size_t)f * sizeof(double));    /* [n, f] */
    double *p = ms_malloc(nd * sizeof(double));                /* [n] attention weights */
    if (!x || !h || !q || !k || !v || !att || !o || !g || !u || !p) {
        free(x), free(h), free(q), free(k), free(v), free(att), free(o), free(g), free(u), free(p);
        return MS_ERR_NOMEM;
    }

    for (int64_t i = 0; i < n; i++) memcpy(x + i * d, r->embed + (int64_t)tokens[i] * d, (size_t)d * sizeof(double));

    for (int64_t l = 0; l < r->n_layers; l++) {
        const ref_layer *L = &r->layers[l];
        for (int64_t i = 0; i < n; i++) rmsnorm(h + i * d, x + i * d, L->attn_norm, d, eps);
        matmul(q, h, L->wq, L->bq, n, d, qd);
        matmul(k, h, L->wk, L->bk, n, d, kvd);
        matmul(v, h, L->wv, L->bv, n, d, kvd);
        for (int64_t i = 0; i < n; i++) {
            for (int64_t hh = 0; hh < H; hh++) {
                double *qh = q + i * qd + hh * hd;
                if (L->q_norm) rmsnorm(qh, qh, L->q_norm, hd, eps);
                rope_head(qh, hd, i, r->inv_freq);
            }
            for (int64_t hh = 0; hh < KV; hh++) {
                double *kh = k + i * kvd + hh * hd;
                if (L->k_norm) rmsnorm(kh, kh, L->k_norm, hd, eps);
                rope_head(kh, hd, i, r->inv_freq);
            }
        }
        double scale = 1.0 / sqrt((double)hd);
        for (int64_t i = 0; i < n; i++) {
            for (int64_t hh = 0; hh < H; hh++) {
                const double *qh = q + i * qd + hh * hd;
                int64_t kvh = hh / group;
                double mx = -INFINITY;
                for (int64_t j = 0; j <= i; j++) {
                    const double *kh = k + j * kvd + kvh * hd;
                    double s = 0.0;
                    for (int64_t e = 0; e < hd; e++) s += qh[e] * kh[e];
                    p[j] = s * scale;
                    if (p[j] > mx) mx = p[j];
                }
                double sum = 0.0;
                for (int64_t j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                double *ah = att + i * qd + hh * hd;
                for (int64_t e = 0; e < hd; e++) ah[e] = 0.0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *vh = v + j * kvd + kvh * hd;
                    for (int64_t e = 0; e < hd; e++) ah[e] += p[j] / sum * vh[e];
                }
            }
        }
        matmul(o, att, L->wo, L->bo, n, qd, d);
        for (int64_t i = 0; i < n * d; i++) x[i] += o[i];

        for (int64_t i = 0; i < n; i++) rmsnorm(h + i * d, x + i * d, L->ffn_norm, d, eps);
        matmul(g, h, L->gate, NULL, n, d, f);
        matmul(u, h, L->up, NULL, n, d, f);
        for (int64_t i = 0; i < n * f; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        matmul(o, g, L->down, NULL, n, f, d);
        for (int64_t i = 0; i < n * d; i++) x[i] += o[i];
    }

    int64_t first = all_rows ? 0 : n - 1;
    for (int64_t i = first; i < n; i++) rmsnorm(h + i * d, x + i * d, r->norm, d, eps);
    matmul(logits, h + first * d, r->lm_head, NULL, n - first, d, V);

    free(x), free(h), free(q), free(k), free(v), free(att), free(o), free(g), free(u), free(p);
    return MS_OK;
}

/* ---- test helpers --------------------------------------------------------- */

int ref_run_tool(const char *tool, const char *dir, const char *args) {
    enum { MAX_ARGS = 64 };
    char *copy = strdup(args ? args : "");
    char *argv[MAX_ARGS + 4];
    int argc = 0;
    argv[argc++] = (char *)tool;
    argv[argc++] = "--out";
    argv[argc++] = (char *)dir;
    for (char *save = NULL, *tok = strtok_r(copy, " ", &save); tok && argc < MAX_ARGS;
         tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (!getenv("REF_VERBOSE")) posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, tool, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(copy);
    if (rc != 0) {
        fprintf(stderr, "ref_run_tool: cannot start %s: %s\n", tool, strerror(rc));
        return -1;
    }
    int ws = 0;
    if (waitpid(pid, &ws, 0) < 0) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}

ms_status ref_copy_model(const char *src, const char *dst, const char *name, int64_t index, double delta,
                         int64_t n_extra, const char *const *extra_names, const ms_tensor *extra) {
    ms_st_model *w = NULL;
    MS_TRY(ms_st_open_dir(src, &w));
    int64_t n_src = ms_st_count(w), n = n_src + n_extra;
    const char **names = ms_calloc((size_t)n, sizeof *names);
    ms_tensor *ts = ms_calloc((size_t)n, sizeof *ts);
    void **bufs = ms_calloc((size_t)n, sizeof *bufs);
    ms_status st = MS_ERR_NOMEM;
    bool found = name == NULL;
    char *cfg_src = ms_path_join(src, "config.json"), *cfg_dst = ms_path_join(dst, "config.json");
    char *st_dst = ms_path_join(dst, "model.safetensors");
    char *cfg = NULL;
    size_t cfg_len = 0;
    if (!names || !ts || !bufs || !cfg_src || !cfg_dst || !st_dst) goto done;
    if (mkdir(dst, 0755) != 0 && errno != EEXIST) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: cannot create: %s", dst, strerror(errno));
        st = MS_ERR_IO;
        goto done;
    }
    for (int64_t i = 0; i < n_src; i++) {
        names[i] = ms_st_name(w, i);
        MS_TRY_GOTO(st, ms_st_get(w, names[i], &ts[i]), done);
        size_t nb = ms_tensor_nbytes(&ts[i]);
        bufs[i] = ms_malloc(nb ? nb : 1);
        if (!bufs[i]) {
            st = MS_ERR_NOMEM;
            goto done;
        }
        memcpy(bufs[i], ts[i].data, nb);
        ts[i].data = bufs[i];
        if (name && !strcmp(names[i], name)) {
            if (index < 0 || index >= ms_tensor_nelem(&ts[i])) {
                st = MS_ERR_RANGE;
                goto done;
            }
            size_t es = ms_dtype_size(ts[i].dtype);
            char *elem = (char *)bufs[i] + (size_t)index * es;
            float val;
            ms_convert_to_f32(&val, elem, ts[i].dtype, 1);
            val = (float)((double)val + delta);
            ms_convert_from_f32(elem, ts[i].dtype, &val, 1);
            found = true;
        }
    }
    /* An extra tensor replaces a source tensor of the same name, else is added. */
    for (int64_t i = 0; i < n_extra; i++) {
        int64_t at = n;
        for (int64_t j = 0; j < n && at == n; j++)
            if (names[j] && !strcmp(names[j], extra_names[i])) at = j;
        if (at == n) at = n_src + i;
        names[at] = extra_names[i];
        ts[at] = extra[i];
    }
    int64_t kept = 0; /* squeeze out the slots of extras that replaced */
    for (int64_t j = 0; j < n; j++)
        if (names[j]) {
            names[kept] = names[j];
            ts[kept++] = ts[j];
        }
    n = kept;
    if (!found) {
        st = MS_ERR_NOT_FOUND;
        goto done;
    }
    MS_TRY_GOTO(st, ms_read_file(cfg_src, &cfg, &cfg_len), done);
    MS_TRY_GOTO(st, ms_write_file_atomic(cfg_dst, cfg, cfg_len), done);
    MS_TRY_GOTO(st, ms_st_write(st_dst, n, names, ts, 0, NULL), done);
    st = MS_OK;
done:
    if (bufs)
        for (int64_t i = 0; i < n_src; i++) free(bufs[i]);
    free(bufs);
    free(ts);
    free(names);
    free(cfg_src);
    free(cfg_dst);
    free(st_dst);
    free(cfg);
    ms_st_close(&w);
    return st;
}

ms_status ref_copy_perturbed(const char *src, const char *dst, const char *name, int64_t index, double delta) {
    return ref_copy_model(src, dst, name, index, delta, 0, NULL, NULL);
}

double ref_max_abs_diff(const float *a, const double *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (isnan(e)) return INFINITY; /* a NaN is a failure, never a pass */
        if (e > m) m = e;
    }
    return m;
}

double ref_max_abs(const double *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(b[i]) > m) m = fabs(b[i]);
    return m;
}

double ref_logits_err(const float *a, const double *b, int64_t n) {
    return ref_max_abs_diff(a, b, n) / fmax(1.0, ref_max_abs(b, n));
}

double ref_logits_err_f(const float *a, const float *b, int64_t n) {
    double m = 0.0, s = 1.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (isnan(e)) return INFINITY;
        if (e > m) m = e;
        if (fabs((double)b[i]) > s) s = fabs((double)b[i]);
    }
    return m / s;
}

ms_status ref_make_model(const char *root, const char *name, const char *args, char *dir, size_t cap) {
#ifdef REF_MKMODEL
    const char *tool = REF_MKMODEL;
#else
    const char *tool = "microspec-mkmodel";
#endif
    if ((size_t)snprintf(dir, cap, "%s/%s", root, name) >= cap) MS_FAIL(MS_ERR_RANGE, "path too long");
    if (access(tool, X_OK) != 0) MS_FAIL(MS_ERR_NOT_FOUND, "%s: not built", tool);
    int rc = ref_run_tool(tool, dir, args);
    if (rc != 0) MS_FAIL(MS_ERR_IO, "%s --out %s %s: exit status %d", tool, dir, args, rc);
    return MS_OK;
}

ms_status ref_set_rope_llama3(const char *dir, double factor, double low, double high, int64_t original_max) {
    char *path = ms_path_join(dir, "config.json");
    if (!path) return MS_ERR_NOMEM;
    ms_hfconfig c;
    ms_status st = ms_hfcfg_load(path, &c);
    if (st == MS_OK) {
        c.rope_scaling.type = factor > 0 ? MS_ROPE_LLAMA3 : MS_ROPE_DEFAULT;
        c.rope_scaling.factor = factor;
        c.rope_scaling.low_freq_factor = low;
        c.rope_scaling.high_freq_factor = high;
        c.rope_scaling.original_max_position_embeddings = original_max;
        st = ms_hfcfg_write(path, &c);
    }
    free(path);
    return st;
}

void ref_random_tokens(ms_rng *r, int32_t *tokens, int64_t n, int64_t vocab) {
    for (int64_t i = 0; i < n; i++) tokens[i] = (int32_t)(ms_rng_u64(r) % (uint64_t)vocab);
}
