/* test_gguf_sampling.c — speculative sampling stays lossless on a real model.
 *
 * Gemma 3 270M (V = 262,144) with a layer-skip draft (its first 12 of 18 layers) over
 * each vocabulary mode (full, static, dynamic window). A fixed prompt and root;
 * the draft's real tree for it; the target's tree-masked logits over that tree.
 * ms_tgt_verify_tree is then run N times with different random draws, and the
 * first two tokens after the root (path tokens, then the bonus, then — when the
 * verdict stopped at the root — one ordinary target step) are compared by a
 * chi-square test with the exact p(x1 | r) · p(x2 | r, x1), computed one token
 * at a time with ordinary forwards (temperature 1, top_p 0.8, so the support is
 * a few dozen cells). A verifier that accepts every drafted child without the
 * rejection step must fail the same test by a wide margin, which shows the
 * test can reject a wrong distribution.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chi2.h"
#include "ms_check.h"
#include "ms_draft.h"
#include "ms_target.h"
#include "ms_tokenizer.h"
#include "ms_vocab.h"
#include "test_fs.h"

#define P_FAIL 1e-6
#define TOP_P 0.8f
#define MAX_S1 256

typedef struct {
    ms_tree tree;
    float *tree_logits; /* [tree.n, V] */
    /* support of p(x1 | r) and, per x1, of p(x2 | r, x1), with the exact joint */
    int64_t n1;
    int32_t x1[MAX_S1];
    float *step_logits;   /* [n1, V]: after prompt + root + x1 */
    int64_t off[MAX_S1 + 1];
    int32_t *x2;          /* [off[n1]] sorted ids per x1 */
    double *joint;        /* [off[n1]] */
} depth_case;

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Ids with nonzero probability under s, ascending; their probabilities. */
static int64_t support(const float *logits, int64_t V, const ms_k_sampling *s, float *scratch, int32_t *ids,
                       double *p, int64_t cap) {
    ms_k_sampling_probs(logits, V, s, scratch);
    int64_t n = 0;
    for (int64_t i = 0; i < V && n < cap; i++)
        if (scratch[i] > 0.0f) {
            ids[n] = (int32_t)i;
            p[n++] = scratch[i];
        }
    return n;
}

static ms_status make_case(ms_model *m, ms_dft *d, const int32_t *prompt, int64_t np, int32_t root,
                           const ms_k_sampling *s, depth_case *dc) {
    const int64_t V = ms_model_vocab(m);
    ms_draft_port port = ms_dft_port(d);
    /* S_init as the target node gives it: the target's top-K_pre ids at each prompt position */
    enum { K_PRE = 3 };
    float *all = malloc((size_t)np * (size_t)V * sizeof(float));
    int32_t *topk = malloc((size_t)np * K_PRE * sizeof(int32_t));
    float val[K_PRE];
    if (!all || !topk) return MS_ERR_NOMEM;
    ms_model_reset(m);
    MS_TRY(ms_model_forward(m, prompt, np, NULL, NULL, MS_LOGITS_ALL, all));
    for (int64_t i = 0; i < np; i++) ms_k_topk(all + i * V, V, K_PRE, topk + i * K_PRE, val);
    free(all);
    ms_msg_begin b = {.request_id = 7, .prompt = prompt, .n_prompt = np, .topk_pre = topk, .k_pre = K_PRE, .root = root};
    MS_TRY(port.begin(port.ctx, &b));
    ms_msg_tree tm;
    ms_status st = port.draft(port.ctx, 7, 1, &tm);
    port.end(port.ctx, 7);
    free(topk);
    MS_TRY(st);
    MS_TRY(ms_tree_validate(&tm.tree));
    dc->tree = tm.tree;
    ms_model_reset(m);
    MS_TRY(ms_model_prefill(m, prompt, np, NULL));
    int32_t pos[MS_TREE_MAX];
    for (int64_t i = 0; i < dc->tree.n; i++) pos[i] = (int32_t)(np + dc->tree.depth[i]);
    MS_TRY(ms_model_forward(m, dc->tree.token, dc->tree.n, pos, dc->tree.mask, MS_LOGITS_ALL, dc->tree_logits));
    /* exact reference: p(x1 | r), then p(x2 | r, x1) for each x1 in its support */
    float *lg = malloc((size_t)V * sizeof(float)), *scratch = malloc((size_t)V * sizeof(float));
    double *p1 = malloc(MAX_S1 * sizeof(double)), *p2 = malloc((size_t)V * sizeof(double));
    int32_t *ids2 = malloc((size_t)V * sizeof(int32_t));
    if (!lg || !scratch || !p1 || !p2 || !ids2) return MS_ERR_NOMEM;
    MS_TRY(ms_model_truncate(m, np));
    MS_TRY(ms_model_forward(m, &root, 1, NULL, NULL, MS_LOGITS_LAST, lg));
    dc->n1 = support(lg, V, s, scratch, dc->x1, p1, MAX_S1);
    dc->off[0] = 0;
    for (int64_t a = 0; a < dc->n1 && st == MS_OK; a++) {
        st = ms_model_truncate(m, np + 1);
        if (st == MS_OK) st = ms_model_forward(m, &dc->x1[a], 1, NULL, NULL, MS_LOGITS_LAST, dc->step_logits + a * V);
        if (st != MS_OK) break;
        int64_t n2 = support(dc->step_logits + a * V, V, s, scratch, ids2, p2, V);
        int32_t *nx = realloc(dc->x2, (size_t)(dc->off[a] + n2) * sizeof(int32_t));
        double *nj = realloc(dc->joint, (size_t)(dc->off[a] + n2) * sizeof(double));
        if (!nx || !nj) return MS_ERR_NOMEM;
        dc->x2 = nx;
        dc->joint = nj;
        for (int64_t j = 0; j < n2; j++) {
            dc->x2[dc->off[a] + j] = ids2[j];
            dc->joint[dc->off[a] + j] = p1[a] * p2[j];
        }
        dc->off[a + 1] = dc->off[a] + n2;
    }
    free(lg);
    free(scratch);
    free(p1);
    free(p2);
    free(ids2);
    return st;
}

/* The deliberately broken verifier: every drafted child of the path is
 * accepted (the first child of each node), the bonus is the target's sample. */
static int64_t verify_accept_all(const ms_tree *tree, const float *logits, int64_t V, const ms_k_sampling *s,
                                 ms_rng *rng, float *probs, int32_t *path, int32_t *bonus) {
    int64_t n = 1, cur = 0;
    path[0] = 0;
    for (;;) {
        int64_t child = -1;
        for (int64_t i = cur + 1; i < tree->n; i++)
            if (tree->parent[i] == cur) {
                child = i;
                break;
            }
        if (child < 0) break;
        path[n++] = (int32_t)child;
        cur = child;
    }
    *bonus = ms_k_sample(logits + cur * V, V, s, rng, probs);
    return n;
}

typedef int64_t (*verify_fn)(const ms_tree *, const float *, int64_t, const ms_k_sampling *, ms_rng *, float *,
                             int32_t *, int32_t *);

static chi2_result sample_case(const depth_case *dc, int64_t V, verify_fn fn, const ms_k_sampling *s, int64_t N,
                               uint64_t seed, double *mean_path) {
    int64_t *counts = calloc((size_t)dc->off[dc->n1] + 1, sizeof(int64_t));
    float *probs = malloc((size_t)V * sizeof(float));
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    int32_t path[MS_TREE_MAX], bonus;
    int64_t path_sum = 0, impossible = 0;
    for (int64_t i = 0; i < N; i++) {
        int64_t np = fn(&dc->tree, dc->tree_logits, V, s, &rng, probs, path, &bonus);
        path_sum += np - 1;
        int32_t x1, x2 = -1;
        if (np >= 3) {
            x1 = dc->tree.token[path[1]];
            x2 = dc->tree.token[path[2]];
        } else if (np == 2) {
            x1 = dc->tree.token[path[1]];
            x2 = bonus;
        } else {
            x1 = bonus;
        }
        const int32_t *f1 = bsearch(&x1, dc->x1, (size_t)dc->n1, sizeof(int32_t), cmp_i32);
        if (!f1) {
            impossible++;
            continue;
        }
        const int64_t a = f1 - dc->x1;
        if (np < 2) x2 = ms_k_sample(dc->step_logits + a * V, V, s, &rng, probs);
        const int32_t *f2 =
            bsearch(&x2, dc->x2 + dc->off[a], (size_t)(dc->off[a + 1] - dc->off[a]), sizeof(int32_t), cmp_i32);
        if (!f2) {
            impossible++;
            continue;
        }
        counts[f2 - dc->x2]++;
    }
    *mean_path = (double)path_sum / (double)N;
    chi2_result r = chi2_test(counts, dc->joint, dc->off[dc->n1], N - impossible);
    if (impossible) {
        r.impossible += impossible;
        r.p = 0.0;
    }
    free(counts);
    free(probs);
    return r;
}

int main(void) {
    ms_log_set_level(MS_LOG_WARN);
    char path[1024], tmp[256];
    int model_rc = ms_test_gguf_model("gemma3-270m", path, sizeof path);
    if (model_rc != 0) return model_rc;
    if (!ms_test_tmpdir("ms-gguf-sampling", tmp, sizeof tmp)) return 1;
    ms_tok *tok = NULL;
    ms_model *m = NULL;
    ms_model_opts mo = {.max_ctx = 128};
    if (ms_tok_load_path(path, &tok) < 0 || ms_model_load(path, &mo, &m) < 0) return 1;
    const int64_t V = ms_model_vocab(m);
    ms_ids prompt = {0};
    static const char TEXT[] = "My favourite colour is";
    if (ms_tok_add_bos(tok)) ms_ids_push(&prompt, ms_tok_bos(tok));
    if (ms_tok_encode(tok, TEXT, strlen(TEXT), false, &prompt) < 0) return 1;
    /* the root: the target's greedy token after the prompt */
    float *lg = malloc((size_t)V * sizeof(float));
    if (!lg || ms_model_prefill(m, prompt.v, prompt.n, lg) < 0) return 1;
    const int32_t root = ms_k_argmax(lg, V);
    free(lg);

    char list[512];
    snprintf(list, sizeof list, "%s/static.list", tmp);
    int32_t *ids = malloc(32768 * sizeof(int32_t));
    for (int32_t i = 0; i < 32768; i++) ids[i] = i * 8; /* any list: losslessness cannot depend on it */
    CHECK(ms_vocab_save_list(list, ids, 32768) == MS_OK, "static list");
    free(ids);

    static const struct {
        const char *name;
        ms_vocab_mode vocab;
        ms_tree_params tree;
    } CASES[] = {
        {"layerskip12/dynamic/tree 4/3/16", MS_VOCAB_DYNAMIC, {.top_k = 4, .depth = 3, .total = 16}},
        {"layerskip12/static/chain 4", MS_VOCAB_STATIC, {.top_k = 1, .depth = 4, .total = 2, .chain = true}},
        {"layerskip12/full/tree 3/2/8", MS_VOCAB_FULL, {.top_k = 3, .depth = 2, .total = 8}},
    };
    const ms_k_sampling s = {.temperature = 1.0f, .top_p = TOP_P};
    const int64_t N = 6000; /* each draw runs softmaxes over 262,144 ids per visited node */
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        ms_dft_opts o = ms_dft_opts_default();
        o.kind = MS_DRAFT_LAYERSKIP;
        o.model_dir = path;
        o.layers = 12; /* the first 6 of 18 layers never agree with the target (measured: accepted length 1.00) */
        o.vocab = CASES[c].vocab;
        o.vocab_list = list;
        o.tree = CASES[c].tree;
        o.max_ctx = 128;
        ms_dft *d = NULL;
        depth_case dc = {0};
        dc.tree_logits = malloc((size_t)MS_TREE_MAX * (size_t)V * sizeof(float));
        dc.step_logits = malloc((size_t)MAX_S1 * (size_t)V * sizeof(float));
        ms_status rc = dc.tree_logits && dc.step_logits ? ms_dft_new(&o, &d) : MS_ERR_NOMEM;
        if (rc >= 0) rc = make_case(m, d, prompt.v, prompt.n, root, &s, &dc);
        ms_dft_free(&d);
        CHECK(rc >= 0, "%s: setting up", CASES[c].name);
        if (rc >= 0) {
            double mp;
            chi2_result r = sample_case(&dc, V, ms_tgt_verify_tree, &s, N, 77 + c, &mp);
            fprintf(stderr, "  %-34s %lld nodes, %lld x1 ids, %lld cells: chi2 %.1f df %lld p %.3g, mean accepted %.2f\n",
                    CASES[c].name, (long long)dc.tree.n, (long long)dc.n1, (long long)dc.off[dc.n1], r.stat,
                    (long long)r.df, r.p, mp);
            CHECK(r.p > P_FAIL, "%s: the first two tokens are not the target's distribution (chi2 %.1f, df %lld, p %.3g)",
                  CASES[c].name, r.stat, (long long)r.df, r.p);
            r = sample_case(&dc, V, verify_accept_all, &s, N, 77 + c, &mp);
            fprintf(stderr, "  BROKEN accept-all: %-16s chi2 %.1f df %lld p %.3g\n", CASES[c].name, r.stat,
                    (long long)r.df, r.p);
            CHECK(r.p < 1e-12, "%s: the test did not catch a verifier that accepts every draft (p %.3g)",
                  CASES[c].name, r.p);
        }
        free(dc.tree_logits);
        free(dc.step_logits);
        free(dc.x2);
        free(dc.joint);
    }
    ms_ids_free(&prompt);
    ms_model_free(&m);
    ms_tok_free(&tok);
    ms_test_rmtree(tmp);
    return g_fail ? 1 : 0;
}
