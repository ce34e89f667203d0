/* test_eagle.c — the EAGLE-1/2 draft head (draft-node/ms_eagle.c) against a
 * naive double-precision reference written here from the architecture
 * (eagle2-frspec-notes §1.1), not from the runtime:
 *   x = fc·[Embed_target(tok); f] + b,  h = x + Wo·Attn(x),  y = h + MLP(post_ln(h)),
 *   logits = lm_head_target · y.
 * The reference reads config.json with jansson and the safetensors through
 * ms_st_*, widens every weight to double and computes each row from scratch
 * over exactly the rows that row may see (its visible set is recorded when the
 * row is forwarded: causal, or the tree mask reaching back over earlier passes).
 *
 * (a) causal forward of committed rows (two chunks, implicit and explicit
 *     positions) with random features;
 * (b) tree passes level by level with masks and mask_back > 0, deeper rows fed
 *     their parent's y (once straight from ms_eagle_out, aliasing the output);
 *     the comparator is shown to reject the same rows judged as causal;
 * (c) truncate then re-forward gives bit-identical outputs;
 * (d) cases: fc bias / qkv bias on and off, f32 / bf16 / f16, GQA, llama3
 *     RoPE, tied target head, a decoy embed_tokens.weight and an o_proj.bias;
 * (e) logits = lm_head · y for a few rows (ms_eagle_logits and the exposed head);
 * (f) a perturbed weight is rejected by the comparator; bad files and bad
 *     inputs give specific error codes and leave len unchanged.
 */
#include "ms_eagle.h"
#include "ms_safetensors.h"
#include "ref_model.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOL 1e-4 /* max|a − b| / max(1, max|b|) */
#define MAXR 160 /* rows recorded per case */
#define DMAX 64

#ifndef MS_BUILD_DIR
#define MS_BUILD_DIR "."
#endif
#define MKEAGLE MS_BUILD_DIR "/tools/microspec-mkeagle"

#include "ms_check.h"

/* ---- reference ------------------------------------------------------------- */

typedef struct {
    int64_t d, hd, nh, nkv, ffn, V;
    double eps;
    double *fc, *fcb;          /* [d, 2d], [d] or NULL */
    double *wq, *wk, *wv, *wo; /* [nh·hd, d], [nkv·hd, d] x2, [d, nh·hd] */
    double *bq, *bk, *bv, *bo; /* optional */
    double *ln, *wg, *wu, *wd; /* [d], [ffn, d] x2, [d, ffn] */
    double *embed, *head;      /* target [V, d] */
    double *inv_freq;          /* [hd / 2] */
} ref_eagle;

static void ref_eagle_free(ref_eagle *r) {
    double **all[] = {&r->fc, &r->fcb, &r->wq, &r->wk, &r->wv, &r->wo, &r->bq, &r->bk,
                      &r->bv, &r->bo, &r->ln, &r->wg, &r->wu, &r->wd, &r->embed, &r->head, &r->inv_freq};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

/* Tensor `name` as doubles; absent → NULL when optional, else a failure. */
static bool ref_tensor(const ms_st_model *st, const char *name, int64_t n, bool optional, double **out) {
    ms_tensor t;
    *out = NULL;
    if (!ms_st_find(st, name, &t)) {
        if (!optional) fprintf(stderr, "reference: tensor %s missing\n", name);
        return optional;
    }
    if (ms_tensor_nelem(&t) != n) {
        fprintf(stderr, "reference: tensor %s has %lld elements, expected %lld\n", name,
                (long long)ms_tensor_nelem(&t), (long long)n);
        return false;
    }
    float *f = malloc((size_t)n * sizeof *f);
    double *d = malloc((size_t)n * sizeof *d);
    if (!f || !d) {
        free(f);
        free(d);
        return false;
    }
    ms_convert_to_f32(f, t.data, t.dtype, n);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    free(f);
    *out = d;
    return true;
}

static json_t *read_json(const char *dir) {
    char *path = ms_path_join(dir, "config.json");
    json_error_t err;
    json_t *j = path ? json_load_file(path, 0, &err) : NULL;
    free(path);
    return j;
}

static double jnum(const json_t *o, const char *key, double dflt) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static bool ref_eagle_load(const char *eagle_dir, const char *target_dir, ref_eagle *r) {
    memset(r, 0, sizeof *r);
    json_t *ec = read_json(eagle_dir), *tc = read_json(target_dir);
    ms_st_model *est = NULL, *tst = NULL;
    bool ok = ec && tc && ms_st_open_dir(eagle_dir, &est) == MS_OK && ms_st_open_dir(target_dir, &tst) == MS_OK;
    if (ok) {
        r->d = (int64_t)jnum(ec, "hidden_size", 0);
        r->nh = (int64_t)jnum(ec, "num_attention_heads", 0);
        r->nkv = (int64_t)jnum(ec, "num_key_value_heads", (double)r->nh);
        r->ffn = (int64_t)jnum(ec, "intermediate_size", 0);
        r->eps = jnum(ec, "rms_norm_eps", 0);
        r->hd = r->d / r->nh;
        r->V = (int64_t)jnum(tc, "vocab_size", 0);
        ok = r->d > 0 && r->d <= DMAX && r->ffn > 0 && r->V > 0;
    }
    if (ok) {
        const json_t *rs = json_object_get(ec, "rope_scaling");
        bool llama3 = json_is_object(rs);
        r->inv_freq = malloc((size_t)(r->hd / 2) * sizeof *r->inv_freq);
        ok = r->inv_freq != NULL;
        if (ok)
            ref_rope_inv_freq(r->inv_freq, r->hd, jnum(ec, "rope_theta", 10000.0), llama3,
                              llama3 ? jnum(rs, "factor", 1) : 1, llama3 ? jnum(rs, "low_freq_factor", 1) : 1,
                              llama3 ? jnum(rs, "high_freq_factor", 4) : 4,
                              llama3 ? jnum(rs, "original_max_position_embeddings", 8192) : 8192);
    }
    int64_t d = r->d, q = r->nh * r->hd, kv = r->nkv * r->hd;
    ok = ok && ref_tensor(est, "fc.weight", d * 2 * d, false, &r->fc) && ref_tensor(est, "fc.bias", d, true, &r->fcb) &&
         ref_tensor(est, "layers.0.self_attn.q_proj.weight", q * d, false, &r->wq) &&
         ref_tensor(est, "layers.0.self_attn.k_proj.weight", kv * d, false, &r->wk) &&
         ref_tensor(est, "layers.0.self_attn.v_proj.weight", kv * d, false, &r->wv) &&
         ref_tensor(est, "layers.0.self_attn.o_proj.weight", d * q, false, &r->wo) &&
         ref_tensor(est, "layers.0.self_attn.q_proj.bias", q, true, &r->bq) &&
         ref_tensor(est, "layers.0.self_attn.k_proj.bias", kv, true, &r->bk) &&
         ref_tensor(est, "layers.0.self_attn.v_proj.bias", kv, true, &r->bv) &&
         ref_tensor(est, "layers.0.self_attn.o_proj.bias", d, true, &r->bo) &&
         ref_tensor(est, "layers.0.post_attention_layernorm.weight", d, false, &r->ln) &&
         ref_tensor(est, "layers.0.mlp.gate_proj.weight", r->ffn * d, false, &r->wg) &&
         ref_tensor(est, "layers.0.mlp.up_proj.weight", r->ffn * d, false, &r->wu) &&
         ref_tensor(est, "layers.0.mlp.down_proj.weight", d * r->ffn, false, &r->wd) &&
         ref_tensor(tst, "model.embed_tokens.weight", r->V * d, false, &r->embed);
    if (ok) {
        ms_tensor t;
        if (json_is_true(json_object_get(tc, "tie_word_embeddings")) || !ms_st_find(tst, "lm_head.weight", &t)) {
            r->head = malloc((size_t)(r->V * d) * sizeof *r->head);
            ok = r->head != NULL;
            if (ok) memcpy(r->head, r->embed, (size_t)(r->V * d) * sizeof *r->head);
        } else {
            ok = ref_tensor(tst, "lm_head.weight", r->V * d, false, &r->head);
        }
    }
    json_decref(ec);
    json_decref(tc);
    ms_st_close(&est);
    ms_st_close(&tst);
    if (!ok) ref_eagle_free(r);
    return ok;
}

/* y[m] = W[m, k] · x[k] (+ b) */
static void mv(double *y, const double *w, const double *x, const double *b, int64_t m, int64_t k) {
    for (int64_t o = 0; o < m; o++) {
        double s = b ? b[o] : 0.0;
        for (int64_t j = 0; j < k; j++) s += w[o * k + j] * x[j];
        y[o] = s;
    }
}

static void rope(double *v, int64_t hd, int64_t p, const double *inv_freq) {
    int64_t half = hd / 2;
    for (int64_t i = 0; i < half; i++) {
        double a = (double)p * inv_freq[i], c = cos(a), s = sin(a);
        double x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
    }
}

/* x = fc · concat(embed[tok], f) (+ fc.bias) */
static void ref_input(const ref_eagle *r, int32_t tok, const float *f, double *x) {
    double in[2 * DMAX];
    for (int64_t j = 0; j < r->d; j++) {
        in[j] = r->embed[tok * r->d + j];
        in[r->d + j] = f[j];
    }
    mv(x, r->fc, in, r->fcb, r->d, 2 * r->d);
}

/* The rows of one case as they went into the cache: inputs, positions and,
 * for each row, the cache rows it was allowed to see (itself included). */
typedef struct {
    int64_t n;
    int32_t tok[MAXR], pos[MAXR];
    float feat[MAXR][DMAX];
    bool vis[MAXR][MAXR];
    float out[MAXR][DMAX]; /* the runtime's y when the row was forwarded */
} row_log;

/* y of cache row `row` from its visible set `vis` (rows < log->n). */
static void ref_row(const ref_eagle *r, const row_log *lg, int64_t row, const bool *vis, double *y) {
    const int64_t d = r->d, hd = r->hd, q_dim = r->nh * hd, kv_dim = r->nkv * hd;
    double x[DMAX], qv[DMAX], h[DMAX], nh[DMAX], att[DMAX], o[DMAX];
    static double ks[MAXR][DMAX], vs[MAXR][DMAX], g[1024], u[1024];
    int64_t nv = 0;
    for (int64_t j = 0; j < lg->n; j++) {
        if (!vis[j]) continue;
        double xj[DMAX];
        ref_input(r, lg->tok[j], lg->feat[j], xj);
        mv(ks[nv], r->wk, xj, r->bk, kv_dim, d);
        mv(vs[nv], r->wv, xj, r->bv, kv_dim, d);
        for (int64_t kh = 0; kh < r->nkv; kh++) rope(ks[nv] + kh * hd, hd, lg->pos[j], r->inv_freq);
        nv++;
    }
    ref_input(r, lg->tok[row], lg->feat[row], x);
    mv(qv, r->wq, x, r->bq, q_dim, d);
    for (int64_t hh = 0; hh < r->nh; hh++) {
        double *qh = qv + hh * hd;
        rope(qh, hd, lg->pos[row], r->inv_freq);
        int64_t kvh = hh / (r->nh / r->nkv);
        double sc[MAXR], mx = -INFINITY, sum = 0.0;
        for (int64_t t = 0; t < nv; t++) {
            double s = 0.0;
            for (int64_t i = 0; i < hd; i++) s += qh[i] * ks[t][kvh * hd + i];
            sc[t] = s / sqrt((double)hd);
            if (sc[t] > mx) mx = sc[t];
        }
        for (int64_t t = 0; t < nv; t++) sum += (sc[t] = exp(sc[t] - mx));
        for (int64_t i = 0; i < hd; i++) {
            double a = 0.0;
            for (int64_t t = 0; t < nv; t++) a += sc[t] / sum * vs[t][kvh * hd + i];
            att[hh * hd + i] = a;
        }
    }
    mv(o, r->wo, att, r->bo, d, q_dim);
    for (int64_t j = 0; j < d; j++) h[j] = x[j] + o[j];
    double ss = 0.0;
    for (int64_t j = 0; j < d; j++) ss += h[j] * h[j];
    double inv = 1.0 / sqrt(ss / (double)d + r->eps);
    for (int64_t j = 0; j < d; j++) nh[j] = h[j] * inv * r->ln[j];
    mv(g, r->wg, nh, NULL, r->ffn, d);
    mv(u, r->wu, nh, NULL, r->ffn, d);
    for (int64_t i = 0; i < r->ffn; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
    mv(o, r->wd, g, NULL, d, r->ffn);
    for (int64_t j = 0; j < d; j++) y[j] = h[j] + o[j];
}

/* Worst comparator value over rows [from, to) of the log, each judged on its
 * recorded visible set (causal = true: on rows [0, row] instead). */
static double ref_check_rows(const ref_eagle *r, const row_log *lg, int64_t from, int64_t to, bool causal) {
    double worst = 0.0;
    for (int64_t row = from; row < to; row++) {
        double y[DMAX];
        bool cz[MAXR] = {false};
        for (int64_t j = 0; j <= row; j++) cz[j] = true;
        ref_row(r, lg, row, causal ? cz : lg->vis[row], y);
        double e = ref_logits_err(lg->out[row], y, r->d);
        ms_check_worst(&worst, e);
    }
    return worst;
}

/* ---- runtime with a recorded log ------------------------------------------- */

/* ms_eagle_forward and, on success, the rows appended to the log with their
 * visible sets and outputs. */
static ms_status fwd(ms_eagle *e, row_log *lg, const int32_t *tok, const float *feat, int64_t n, const int32_t *pos,
                     const uint64_t *mask, int64_t mask_back) {
    int64_t len = ms_eagle_len(e), d = ms_eagle_hidden(e);
    MS_ASSERT(len == lg->n && len + n <= MAXR && d <= DMAX);
    /* feat may alias ms_eagle_out: keep a copy for the log first. */
    static float fcopy[MAXR][DMAX];
    for (int64_t r = 0; r < n; r++) memcpy(fcopy[r], feat + r * d, (size_t)d * sizeof(float));
    ms_status st = ms_eagle_forward(e, tok, feat, n, pos, mask, mask_back);
    if (st != MS_OK) return st;
    const float *y = ms_eagle_out(e);
    for (int64_t r = 0; r < n; r++) {
        int64_t row = len + r;
        lg->tok[row] = tok[r];
        lg->pos[row] = pos ? pos[r] : (int32_t)row;
        memcpy(lg->feat[row], fcopy[r], (size_t)d * sizeof(float));
        memcpy(lg->out[row], y + r * d, (size_t)d * sizeof(float));
        memset(lg->vis[row], 0, sizeof lg->vis[row]);
        int64_t b = len - (mask ? mask_back : 0);
        for (int64_t j = 0; j < b; j++) lg->vis[row][j] = true;
        for (int64_t j = b; j <= row; j++)
            lg->vis[row][j] = mask ? (mask[r] >> (j - b) & 1) != 0 : true;
    }
    lg->n = len + n;
    return MS_OK;
}

static void random_feats(ms_rng *rng, float *f, int64_t n) {
    for (int64_t i = 0; i < n; i++) f[i] = ms_rng_normal(rng);
}

/* ---- cases ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    const char *target_args; /* microspec-mkmodel */
    const char *eagle_args;  /* microspec-mkeagle (after --target) */
    bool extras;             /* add a decoy embed_tokens.weight and an o_proj.bias */
} eagle_case;

static const eagle_case CASES[] = {
    {"llama-gqa-fcbias-f32", "--arch llama --vocab 97 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --ffn 48 --seed 1",
     "--seed 11 --fc-bias 1 --qkv-bias 0 --dtype f32", false},
    {"qkvbias-nofcbias-bf16-gqa4", "--arch llama --vocab 89 --hidden 48 --layers 1 --heads 6 --ffn 64 --seed 2",
     "--seed 12 --fc-bias 0 --qkv-bias 1 --heads 4 --kv-heads 1 --ffn 80 --dtype bf16 --theta 500000", false},
    {"qwen2-tied-bf16-llama3rope-f16", "--arch qwen2 --vocab 101 --hidden 40 --layers 1 --heads 5 --kv-heads 1 "
     "--ffn 56 --tie 1 --dtype bf16 --rope-factor 4 --rope-low 1 --rope-high 4 --rope-orig 32 --seed 3",
     "--seed 13 --fc-bias 1 --qkv-bias 1 --dtype f16", false},
    {"extras-decoy-embed-obias", "--arch llama --vocab 64 --hidden 16 --layers 1 --heads 2 --ffn 24 --seed 4",
     "--seed 14 --fc-bias 1", true},
};

static bool make_eagle(const char *target, const char *out, const char *args) {
    char full[1024];
    snprintf(full, sizeof full, "--target %s %s", target, args);
    int rc = ref_run_tool(MKEAGLE, out, full);
    if (rc != 0) fprintf(stderr, "%s --out %s %s: exit status %d\n", MKEAGLE, out, full, rc);
    return rc == 0;
}

/* Copy an EAGLE folder, adding a decoy embed_tokens.weight (must be ignored:
 * the target's embedding is used) and an o_proj.bias. */
static bool add_extras(const char *src, const char *dst, int64_t V, int64_t d, ms_rng *rng) {
    static float emb[4096 * DMAX], ob[DMAX];
    MS_ASSERT(V * d <= 4096 * DMAX);
    for (int64_t i = 0; i < V * d; i++) emb[i] = 3.0f * ms_rng_normal(rng);
    for (int64_t i = 0; i < d; i++) ob[i] = 0.2f * ms_rng_normal(rng);
    int64_t es[2] = {V, d};
    ms_tensor t[2] = {ms_tensor_view(emb, MS_DTYPE_F32, 2, es), ms_tensor_view(ob, MS_DTYPE_F32, 1, &d)};
    const char *names[2] = {"embed_tokens.weight", "layers.0.self_attn.o_proj.bias"};
    return ref_copy_model(src, dst, NULL, 0, 0, 2, names, t) == MS_OK;
}

/* (a)-(e) on one case. */
static void run_case(const char *root, const eagle_case *c, int ci) {
    char target[512], eagle[600], tmp[600];
    if (ref_make_model(root, c->name, c->target_args, target, sizeof target) != MS_OK) {
        CHECK(false, "%s: cannot make the target", c->name);
        return;
    }
    snprintf(eagle, sizeof eagle, "%s/%s-eagle", root, c->name);
    if (!make_eagle(target, eagle, c->eagle_args)) {
        CHECK(false, "%s: cannot make the EAGLE head", c->name);
        return;
    }
    ms_rng rng;
    ms_rng_seed(&rng, 100 + (uint64_t)ci);
    ref_eagle R;
    bool ok = ref_eagle_load(eagle, target, &R);
    CHECK(ok, "%s: reference load", c->name);
    if (!ok) return;
    if (c->extras) {
        if (snprintf(tmp, sizeof tmp, "%s-x", eagle) >= (int)sizeof tmp) return;
        CHECK(add_extras(eagle, tmp, R.V, R.d, &rng), "%s: extras", c->name);
        ref_eagle_free(&R);
        memcpy(eagle, tmp, sizeof eagle);
        ok = ref_eagle_load(eagle, target, &R);
        CHECK(ok && R.bo, "%s: reference load with extras", c->name);
        if (!ok) return;
    }

    ms_eagle *e = NULL;
    ms_eagle_opts o = {.max_ctx = 256, .max_batch = 32};
    ms_status st = ms_eagle_load(eagle, target, &o, &e);
    CHECK(st == MS_OK, "%s: load: %s", c->name, ms_status_str(st));
    if (st != MS_OK) {
        ref_eagle_free(&R);
        return;
    }
    const int64_t d = R.d, V = R.V;
    CHECK(ms_eagle_hidden(e) == d && ms_eagle_vocab(e) == V && ms_eagle_len(e) == 0, "%s: dims", c->name);

    static row_log lg;
    memset(&lg, 0, sizeof lg);
    int32_t tok[64], pos[64];
    static float feat[64 * DMAX];

    /* (a) committed rows: 12 with implicit positions, then 5 with explicit ones. */
    for (int i = 0; i < 12; i++) tok[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
    random_feats(&rng, feat, 12 * d);
    CHECK(fwd(e, &lg, tok, feat, 12, NULL, NULL, 0) == MS_OK, "%s: forward 12", c->name);
    double err = ref_check_rows(&R, &lg, 0, 12, false);
    CHECK(err < TOL, "%s: (a) causal 12 rows err %.3g", c->name, err);
    for (int i = 0; i < 5; i++) {
        tok[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
        pos[i] = 12 + i;
    }
    random_feats(&rng, feat, 5 * d);
    CHECK(fwd(e, &lg, tok, feat, 5, pos, NULL, 0) == MS_OK, "%s: forward 5", c->name);
    err = ref_check_rows(&R, &lg, 12, 17, false);
    CHECK(err < TOL, "%s: (a) second chunk err %.3g", c->name, err);
    const int64_t committed = 17;

    /* (b) tree levels: level 1 = K rows at position `committed` that see the
     * committed rows and themselves; each deeper level's rows pick a parent in
     * the previous level, see its ancestors (rows of earlier passes, through
     * mask_back) and themselves, and take the parent's y as feature. */
    enum { LEVELS = 5 };
    const int64_t width[LEVELS] = {6, 5, 4, 7, 3}; /* level 2 ≤ level 1: see `alias` */
    int64_t level_start[LEVELS];
    uint64_t anc[MAXR] = {0}; /* ancestors-or-self as bits over rows [committed, ...) */
    int64_t prev_first = 0, prev_n = 0;
    double tree_err = 0.0, causal_err = 0.0;
    for (int lv = 0; lv < LEVELS; lv++) {
        int64_t n = width[lv], len = ms_eagle_len(e), back = len - committed;
        level_start[lv] = len;
        uint64_t mask[64];
        static float pf[64 * DMAX];
        /* Level 2: row r's parent is row r of level 1, so ms_eagle_out itself
         * is passed as the features (the output buffer aliased as input). */
        bool alias = lv == 1;
        for (int64_t r = 0; r < n; r++) {
            tok[r] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
            pos[r] = (int32_t)(committed + lv);
            int64_t self = len + r - committed;
            if (lv == 0) {
                anc[len + r] = (uint64_t)1 << self;
                random_feats(&rng, pf + r * d, d);
            } else {
                int64_t p = alias ? r : (int64_t)(ms_rng_u64(&rng) % (uint64_t)prev_n);
                int64_t prow = prev_first + p;
                anc[len + r] = anc[prow] | (uint64_t)1 << self;
                memcpy(pf + r * d, lg.out[prow], (size_t)d * sizeof(float));
            }
            mask[r] = anc[len + r];
        }
        st = fwd(e, &lg, tok, alias ? ms_eagle_out(e) : pf, n, pos, mask, back);
        CHECK(st == MS_OK, "%s: tree level %d: %s", c->name, lv + 1, ms_status_str(st));
        if (st != MS_OK) break;
        double le = ref_check_rows(&R, &lg, len, len + n, false);
        if (le > tree_err) tree_err = le;
        if (lv > 0) {
            double ce = ref_check_rows(&R, &lg, len, len + n, true);
            if (ce > causal_err) causal_err = ce;
        }
        prev_first = len;
        prev_n = n;
    }
    CHECK(tree_err < TOL, "%s: (b) tree rows err %.3g", c->name, tree_err);
    CHECK(causal_err > 100 * TOL, "%s: (b) comparator cannot tell tree from causal (%.3g)", c->name, causal_err);

    /* (c) truncate then re-forward: identical outputs. Back to the committed
     * rows, then re-run tree level 1 and 2 from the log; then into the
     * committed rows (keep 10) and re-run rows 10..16 as one chunk. */
    CHECK(ms_eagle_truncate(e, committed) == MS_OK, "%s: truncate", c->name);
    CHECK(ms_eagle_len(e) == committed, "%s: len after truncate", c->name);
    for (int lv = 0; lv < 2 && lv + 1 < LEVELS; lv++) {
        int64_t a = level_start[lv], n = level_start[lv + 1] - a, back = a - committed;
        uint64_t mask[64];
        for (int64_t r = 0; r < n; r++) mask[r] = anc[a + r];
        st = ms_eagle_forward(e, lg.tok + a, lg.feat[a], 0, NULL, NULL, 0); /* n = 0: refused */
        CHECK(st == MS_ERR_RANGE, "%s: n = 0 → %s", c->name, ms_status_str(st));
        static float f2[64 * DMAX];
        for (int64_t r = 0; r < n; r++) memcpy(f2 + r * d, lg.feat[a + r], (size_t)d * sizeof(float));
        st = ms_eagle_forward(e, lg.tok + a, f2, n, lg.pos + a, mask, back);
        CHECK(st == MS_OK, "%s: re-forward level %d", c->name, lv + 1);
        const float *y = ms_eagle_out(e);
        bool same = true;
        for (int64_t r = 0; r < n; r++) same &= memcmp(y + r * d, lg.out[a + r], (size_t)d * sizeof(float)) == 0;
        CHECK(same, "%s: (c) level %d after truncate differs", c->name, lv + 1);
    }
    CHECK(ms_eagle_truncate(e, 10) == MS_OK, "%s: truncate 10", c->name);
    {
        static float f2[8 * DMAX];
        for (int64_t r = 0; r < 7; r++) memcpy(f2 + r * d, lg.feat[10 + r], (size_t)d * sizeof(float));
        st = ms_eagle_forward(e, lg.tok + 10, f2, 7, NULL, NULL, 0);
        CHECK(st == MS_OK, "%s: re-forward 10..16", c->name);
        const float *y = ms_eagle_out(e);
        double worst = 0.0;
        for (int64_t r = 0; r < 7; r++) {
            double ref[DMAX];
            for (int64_t j = 0; j < d; j++) ref[j] = lg.out[10 + r][j];
            double er = ref_logits_err(y + r * d, ref, d);
            ms_check_worst(&worst, er);
        }
        /* different chunking (12+5 vs 10+7) changes GEMM blocking: equal up to rounding */
        CHECK(worst < 1e-5, "%s: (c) rows 10..16 re-chunked differ by %.3g", c->name, worst);
        CHECK(ms_eagle_len(e) == committed, "%s: len %lld", c->name, (long long)ms_eagle_len(e));
    }

    /* (e) logits of a few rows of the last forward vs lm_head · y_ref. */
    {
        static float lo[3 * 4096];
        MS_ASSERT(V <= 4096);
        st = ms_eagle_logits(e, 4, 3, lo);
        CHECK(st == MS_OK, "%s: logits", c->name);
        double worst = 0.0, worst_head = 0.0;
        const float *head = ms_eagle_lm_head(e);
        for (int64_t r = 0; r < 3; r++) {
            double y[DMAX], ref[4096];
            int64_t row = 14 + r;
            ref_row(&R, &lg, row, lg.vis[row], y);
            mv(ref, R.head, y, NULL, V, d);
            double er = ref_logits_err(lo + r * V, ref, V);
            ms_check_worst(&worst, er);
        }
        for (int64_t i = 0; i < V * d; i++) {
            double er = fabs((double)head[i] - R.head[i]);
            ms_check_worst(&worst_head, er);
        }
        CHECK(worst < TOL, "%s: (e) logits err %.3g", c->name, worst);
        CHECK(worst_head == 0.0, "%s: (e) exposed lm_head differs from the target's by %.3g", c->name, worst_head);
        CHECK(ms_eagle_logits(e, 5, 3, lo) == MS_ERR_RANGE, "%s: logits past the last forward", c->name);
    }
    printf("  %-34s tree err %.2e, causal-judged %.2e, %lld rows\n", c->name, tree_err, causal_err,
           (long long)lg.n);
    ms_eagle_free(&e);
    CHECK(e == NULL, "free nulls");
    ref_eagle_free(&R);
}

/* ---- (f) bad files and bad inputs -------------------------------------------- */

/* Copy an EAGLE folder without tensor `skip`, with n_extra tensors added, and
 * optionally one config field replaced by an integer / boolean. */
static bool copy_variant(const char *src, const char *dst, const char *skip, int64_t n_extra, const char **xn,
                         const ms_tensor *xt, const char *cfg_key, json_t *cfg_val) {
    ms_st_model *w = NULL;
    if (ms_st_open_dir(src, &w) != MS_OK) return false;
    const char *names[32];
    ms_tensor ts[32];
    int64_t n = 0;
    for (int64_t i = 0; i < ms_st_count(w) && n < 32; i++) {
        const char *nm = ms_st_name(w, i);
        if (skip && !strcmp(nm, skip)) continue;
        names[n] = nm;
        ms_st_get(w, nm, &ts[n++]);
    }
    for (int64_t i = 0; i < n_extra && n < 32; i++) {
        names[n] = xn[i];
        ts[n++] = xt[i];
    }
    json_t *cfg = read_json(src);
    if (cfg_key) json_object_set_new(cfg, cfg_key, cfg_val);
    char *cfg_path = ms_path_join(dst, "config.json"), *st_path = ms_path_join(dst, "model.safetensors");
    bool ok = cfg && (mkdir(dst, 0755) == 0 || errno == EEXIST) && json_dump_file(cfg, cfg_path, 0) == 0 &&
              ms_st_write(st_path, n, names, ts, 0, NULL) == MS_OK;
    json_decref(cfg);
    free(cfg_path);
    free(st_path);
    ms_st_close(&w);
    return ok;
}

static void expect_load(const char *what, const char *eagle, const char *target, ms_status want) {
    ms_eagle *e = NULL;
    ms_status st = ms_eagle_load(eagle, target, NULL, &e);
    CHECK(st == want && (e != NULL) == (want == MS_OK), "%s: load gave %s, expected %s", what, ms_status_str(st),
          ms_status_str(want));
    ms_eagle_free(&e);
}

/* The runtime on rt_dir vs the reference on ref_dir: comparator value over
 * 10 causal rows with random inputs (+inf when either fails to load). */
static double compare_dirs(const char *rt_dir, const char *ref_dir, const char *target) {
    ref_eagle R;
    if (!ref_eagle_load(ref_dir, target, &R)) return INFINITY;
    ms_eagle *e = NULL;
    double err = INFINITY;
    if (ms_eagle_load(rt_dir, target, NULL, &e) == MS_OK) {
        static row_log lg;
        memset(&lg, 0, sizeof lg);
        ms_rng rng;
        ms_rng_seed(&rng, 5);
        int32_t tok[10];
        static float feat[10 * DMAX];
        for (int i = 0; i < 10; i++) tok[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)R.V);
        random_feats(&rng, feat, 10 * R.d);
        if (fwd(e, &lg, tok, feat, 10, NULL, NULL, 0) == MS_OK) err = ref_check_rows(&R, &lg, 0, 10, false);
    }
    ms_eagle_free(&e);
    ref_eagle_free(&R);
    return err;
}

static void run_negative(const char *root) {
    char t32[512], t48[512], e32[512], v[600];
    if (ref_make_model(root, "neg-t32", "--arch llama --vocab 50 --hidden 32 --layers 1 --heads 4 --ffn 40 --seed 7",
                       t32, sizeof t32) != MS_OK ||
        ref_make_model(root, "neg-t48", "--arch llama --vocab 50 --hidden 48 --layers 1 --heads 4 --ffn 40 --seed 8",
                       t48, sizeof t48) != MS_OK) {
        CHECK(false, "cannot make negative-test targets");
        return;
    }
    snprintf(e32, sizeof e32, "%s/neg-e32", root);
    if (!make_eagle(t32, e32, "--seed 21")) {
        CHECK(false, "cannot make the negative-test head");
        return;
    }

    /* A perturbed weight is seen by the comparator: the runtime on a copy with
     * one element changed vs the reference on the original. */
    static const struct {
        const char *name;
        int64_t index;
    } pert[] = {{"layers.0.mlp.down_proj.weight", 77},
                {"fc.weight", 5 * 64 + 40}, /* feature half of row 5 */
                {"fc.weight", 9 * 64 + 3},  /* embedding half of row 9 */
                {"layers.0.self_attn.k_proj.weight", 100}};
    double base = compare_dirs(e32, e32, t32);
    CHECK(base < TOL, "(f) unperturbed head err %.3g", base);
    for (size_t pi = 0; pi < sizeof pert / sizeof *pert; pi++) {
        snprintf(v, sizeof v, "%s/neg-pert%zu", root, pi);
        CHECK(ref_copy_perturbed(e32, v, pert[pi].name, pert[pi].index, 0.05) == MS_OK, "perturb copy");
        double err = compare_dirs(v, e32, t32);
        CHECK(err > 10 * TOL && isfinite(err), "(f) perturbed %s[%lld] not detected (err %.3g)", pert[pi].name,
              (long long)pert[pi].index, err);
    }

    /* Bad files. */
    expect_load("hidden size mismatch", e32, t48, MS_ERR_FORMAT);
    snprintf(v, sizeof v, "%s/neg-nofc", root);
    CHECK(copy_variant(e32, v, "fc.weight", 0, NULL, NULL, NULL, NULL), "variant");
    expect_load("missing fc.weight", v, t32, MS_ERR_NOT_FOUND);
    {
        static float w[32 * 32];
        int64_t sh[2] = {32, 32};
        ms_tensor t = ms_tensor_view(w, MS_DTYPE_F32, 2, sh);
        const char *nm = "fc.weight";
        snprintf(v, sizeof v, "%s/neg-fcshape", root);
        CHECK(copy_variant(e32, v, "fc.weight", 1, &nm, &t, NULL, NULL), "variant");
        expect_load("fc.weight [32, 32]", v, t32, MS_ERR_FORMAT);
        int32_t iw[32];
        memset(iw, 0, sizeof iw);
        int64_t n32 = 32;
        ms_tensor ti = ms_tensor_view(iw, MS_DTYPE_I32, 1, &n32);
        const char *nb = "fc.bias";
        snprintf(v, sizeof v, "%s/neg-fcbias-i32", root);
        CHECK(copy_variant(e32, v, "fc.bias", 1, &nb, &ti, NULL, NULL), "variant");
        expect_load("fc.bias as I32", v, t32, MS_ERR_UNSUPPORTED);
    }
    snprintf(v, sizeof v, "%s/neg-nofcbias", root);
    CHECK(copy_variant(e32, v, "fc.bias", 0, NULL, NULL, NULL, NULL), "variant");
    expect_load("fc.bias absent (tolerated)", v, t32, MS_OK);
    double nb_err = compare_dirs(v, v, t32);
    CHECK(nb_err < TOL, "fc.bias absent: err %.3g", nb_err);
    snprintf(v, sizeof v, "%s/neg-layers2", root);
    CHECK(copy_variant(e32, v, NULL, 0, NULL, NULL, "num_hidden_layers", json_integer(2)), "variant");
    expect_load("num_hidden_layers 2", v, t32, MS_ERR_UNSUPPORTED);
    snprintf(v, sizeof v, "%s/neg-qkvbias", root);
    CHECK(copy_variant(e32, v, NULL, 0, NULL, NULL, "qkv_bias", json_true()), "variant");
    expect_load("qkv_bias true without biases", v, t32, MS_ERR_NOT_FOUND);
    snprintf(v, sizeof v, "%s/neg-headdim", root);
    CHECK(copy_variant(e32, v, NULL, 0, NULL, NULL, "head_dim", json_integer(16)), "variant");
    expect_load("head_dim ≠ hidden/heads", v, t32, MS_ERR_UNSUPPORTED);
    snprintf(v, sizeof v, "%s/neg-noarch", root);
    CHECK(copy_variant(e32, v, NULL, 0, NULL, NULL, "architectures", json_null()), "variant");
    expect_load("no architectures (tolerated)", v, t32, MS_OK);
    snprintf(v, sizeof v, "%s/neg-bias-str", root);
    CHECK(copy_variant(e32, v, NULL, 0, NULL, NULL, "bias", json_string("yes")), "variant");
    expect_load("\"bias\": \"yes\"", v, t32, MS_ERR_FORMAT);
    snprintf(v, sizeof v, "%s/neg-none", root);
    expect_load("missing folder", v, t32, MS_ERR_IO);

    /* Bad inputs: specific codes, len unchanged, nothing crashes. */
    ms_eagle *e = NULL;
    ms_eagle_opts o = {.max_ctx = 40, .max_batch = 16};
    CHECK(ms_eagle_load(e32, t32, &o, &e) == MS_OK, "load for bad inputs");
    if (!e) return;
    CHECK(ms_eagle_max_ctx(e) == 40 && ms_eagle_max_batch(e) == 16, "opts");
    int32_t tok[20] = {0};
    static float feat[20 * 32];
    int32_t pos[20] = {0};
    uint64_t mask[20];
    for (int i = 0; i < 20; i++) mask[i] = (uint64_t)1 << i;
    CHECK(ms_eagle_forward(e, tok, feat, 10, NULL, NULL, 0) == MS_OK, "forward 10");
    tok[3] = 50;
    CHECK(ms_eagle_forward(e, tok, feat, 5, NULL, NULL, 0) == MS_ERR_INVALID, "token = V");
    tok[3] = -1;
    CHECK(ms_eagle_forward(e, tok, feat, 5, NULL, NULL, 0) == MS_ERR_INVALID, "token < 0");
    tok[3] = 0;
    CHECK(ms_eagle_forward(e, NULL, feat, 5, NULL, NULL, 0) == MS_ERR_INVALID, "NULL tokens");
    CHECK(ms_eagle_forward(e, tok, NULL, 5, NULL, NULL, 0) == MS_ERR_INVALID, "NULL features");
    CHECK(ms_eagle_forward(e, tok, feat, 17, NULL, NULL, 0) == MS_ERR_RANGE, "n > max_batch");
    CHECK(ms_eagle_forward(e, tok, feat, -1, NULL, NULL, 0) == MS_ERR_RANGE, "n < 0");
    pos[2] = 40;
    CHECK(ms_eagle_forward(e, tok, feat, 5, pos, NULL, 0) == MS_ERR_RANGE, "position = max_ctx");
    pos[2] = -3;
    CHECK(ms_eagle_forward(e, tok, feat, 5, pos, NULL, 0) == MS_ERR_RANGE, "negative position");
    CHECK(ms_eagle_forward(e, tok, feat, 5, NULL, mask, 11) == MS_ERR_RANGE, "mask_back > len");
    CHECK(ms_eagle_forward(e, tok, feat, 5, NULL, mask, -1) == MS_ERR_RANGE, "mask_back < 0");
    CHECK(ms_eagle_forward(e, tok, feat, 16, NULL, mask, 0) == MS_OK, "forward 16");
    CHECK(ms_eagle_forward(e, tok, feat, 16, NULL, mask, 0) == MS_ERR_RANGE, "cache overflow 26 + 16 > 40");
    CHECK(ms_eagle_len(e) == 26, "len after refusals %lld", (long long)ms_eagle_len(e));
    CHECK(ms_eagle_truncate(e, 27) == MS_ERR_RANGE && ms_eagle_truncate(e, -1) == MS_ERR_RANGE, "truncate range");
    CHECK(ms_eagle_truncate(e, 0) == MS_OK && ms_eagle_len(e) == 0, "truncate 0");
    for (int i = 0; i < 4; i++) CHECK(ms_eagle_forward(e, tok, feat, 10, NULL, NULL, 0) == MS_OK, "fill");
    CHECK(ms_eagle_forward(e, tok, feat, 1, NULL, NULL, 0) == MS_ERR_RANGE, "cache full at 40");
    CHECK(ms_eagle_len(e) == 40, "len full");
    float lo[50];
    CHECK(ms_eagle_logits(e, 0, 1, NULL) == MS_ERR_INVALID, "logits NULL");
    CHECK(ms_eagle_logits(e, -1, 1, lo) == MS_ERR_RANGE, "logits first < 0");
    CHECK(ms_eagle_logits(e, 9, 1, lo) == MS_OK, "logits last row");
    ms_eagle_free(&e);
    ms_eagle_free(&e); /* NULL-safe */
}

/* The config parser on the fuzz seeds (real-shaped configs). */
static void run_config(void) {
    static const struct {
        const char *file;
        ms_status want;
        bool fc_bias, qkv_bias, llama3;
        int64_t kv, hd;
    } cfgs[] = {
        {"llama3_8b.json", MS_OK, false, false, false, 8, 128},
        {"qwen2_qkv.json", MS_OK, true, true, false, 2, 16},
        {"noarch_llama3rope.json", MS_OK, true, false, true, 4, 8},
        {"bad_layers.json", MS_ERR_UNSUPPORTED, 0, 0, 0, 0, 0},
        {"bad_bias.json", MS_ERR_FORMAT, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/fuzz_eagle_config/%s", MS_SOURCE_DIR, cfgs[i].file);
        char *text = NULL;
        size_t len = 0;
        if (ms_read_file(path, &text, &len) != MS_OK) {
            CHECK(false, "cannot read %s", path);
            continue;
        }
        ms_eagle_config c;
        ms_status st = ms_eagle_config_parse(text, len, path, &c);
        free(text);
        CHECK(st == cfgs[i].want, "%s: %s", cfgs[i].file, ms_status_str(st));
        if (st != MS_OK || cfgs[i].want != MS_OK) continue;
        CHECK(c.fc_bias == cfgs[i].fc_bias && c.qkv_bias == cfgs[i].qkv_bias &&
                  (c.base.rope_scaling.type == MS_ROPE_LLAMA3) == cfgs[i].llama3 && c.base.n_kv_heads == cfgs[i].kv &&
                  c.base.head_dim == cfgs[i].hd && c.base.n_layers == 1,
              "%s: parsed fields", cfgs[i].file);
    }
}

int main(void) {
    /* The bad-input checks log errors by design: quiet unless asked. */
    ms_log_set_level(getenv("EAGLE_VERBOSE") ? MS_LOG_DEBUG : MS_LOG_OFF);
    if (access(MKEAGLE, X_OK) != 0) {
        fprintf(stderr, "%s not built\n", MKEAGLE);
        return 1;
    }
    char root[256];
    if (!ms_test_tmpdir("ms-model-test", root, sizeof root)) {
        fprintf(stderr, "cannot make a temporary folder\n");
        return 1;
    }
    run_config();
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) run_case(root, &CASES[i], (int)i);
    run_negative(root);
    ms_test_rmtree(root);
    if (g_fail) {
        fprintf(stderr, "test_eagle: %d check(s) failed\n", g_fail);
        return 1;
    }
    printf("test_eagle: all checks passed\n");
    return 0;
}
