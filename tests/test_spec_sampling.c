/* test_spec_sampling.c — speculative sampling is lossless.
 *
 * A random 16-id target (so every cell of the joint distribution is well
 * populated) samples at temperature 1 (and once with top_p 0.9).
 *
 * Part 1, end to end: ms_tgt_generate with max_new_tokens = 2 and a different
 * seed per run, for every vocabulary mode (full / static / dynamic), tree and
 * chain, lm / eagle / layerskip drafts. The empirical joint distribution of
 * the first two emitted tokens is compared with the target's exact one —
 * p(t1) from the prefill logits, p(t2 | t1) from a forward of t1, both through
 * ms_k_sampling_probs — by a chi-square test (cells with expected count < 5
 * merged; fail below p = 1e-6; fixed seeds, so deterministic).
 *
 * Issue 32 joins part 1: the n-gram source merged into an lm tree, and a
 * chain under the cost policy (trees pruned by measured costs, the model
 * skipped by the gate: which rounds speculate varies, the distribution must
 * not).
 *
 * Issue 16's modes join part 1: SpecVocab (k = 3 of the 16 ids per row, so
 * most steps draft from a strict subset; artefacts of rank 4 / 8 built at test
 * time) alone and ∪ a W = 5 window, and a K = 6 static list under a budget
 * decaying to 2 ids: the draft's q is the softmax over the step's set. So
 * does DynaSpec with a seeded random router over 4 clusters of 4 ids
 * (tests/dynaspec_random.py: losslessness may not depend on the router's
 * quality), 2 clusters a step, alone, ∪ the window, and under k_c decaying.
 *
 * Part 2, the verifier at depth: a fixed root, the draft's real tree for it
 * and the target's tree-masked logits; the first two tokens after the root
 * are taken from the verdict (path tokens, then the bonus, then — when the
 * verdict stopped at the root — one ordinary target step). ms_tgt_verify_tree
 * must pass the same chi-square against p(x1 | r) p(x2 | r, x1); two verifiers
 * written here with deliberate residual bugs (a rejected candidate neither
 * removed nor renormalised; the bonus drawn from the unmodified p) must fail
 * it by a wide margin — which shows the test can catch a broken residual step.
 */
#include "chi2.h"
#include "spec_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define V_T 16
#define P_FAIL 1e-6

/* ---- fixture ------------------------------------------------------------ */

static const int32_t PROMPT[] = {3, 7, 1, 12, 5, 9};
enum { N_PROMPT = sizeof PROMPT / sizeof PROMPT[0] };

typedef struct {
    ms_model *model;
    ms_tgt *tgt;
    char tdir[512], ldir[512], edir[512], list[512];
    char art_l[600], art_t[600]; /* SpecVocab artefacts of the lm draft and of the target */
    char dart_l[600], dart_t[600]; /* DynaSpec artefacts (random routers, 4 clusters) of the same */
} fixture;

/* Exact joint of the first two tokens after `prefix` (the first from the
 * prefix's last row): joint[a * V + b] = p(a) p(b | a). */
static ms_status exact_joint(ms_model *m, const int32_t *prefix, int64_t n, const ms_k_sampling *s, double *joint) {
    float logits[V_T], pa[V_T], pb[V_T];
    ms_model_reset(m);
    MS_TRY(ms_model_prefill(m, prefix, n, logits));
    ms_k_sampling_probs(logits, V_T, s, pa);
    for (int32_t a = 0; a < V_T; a++) {
        MS_TRY(ms_model_truncate(m, n));
        MS_TRY(ms_model_forward(m, &a, 1, NULL, NULL, MS_LOGITS_LAST, logits));
        ms_k_sampling_probs(logits, V_T, s, pb);
        for (int32_t b = 0; b < V_T; b++) joint[a * V_T + b] = (double)pa[a] * (double)pb[b];
    }
    return MS_OK;
}

static void report(const char *name, chi2_result r, int64_t N) {
    fprintf(stderr, "  %-44s N=%-6lld chi2 %9.1f df %3lld p %.3g%s\n", name, (long long)N, r.stat, (long long)r.df,
            r.p, r.impossible ? " (samples in impossible cells)" : "");
}

/* ---- part 1: end to end ---------------------------------------------------- */

typedef struct {
    const char *name;
    ms_draft_kind kind;
    int which_model; /* 0 random lm, 1 target (lm-self / layerskip), 2 eagle */
    ms_vocab_mode vocab;
    int shape;       /* 0 10/5/60, 1 4/3/16, 2 chain depth 4 */
    float top_p;
    ms_dft_vsel vsel;    /* issue 16: a per-step selector (its artefact: art_l / art_t) */
    double budget_decay; /* issue 16: position-aware budget (0: off) */
    bool ngram;          /* issue 32: the n-gram source merged into the tree */
    bool cost;           /* issue 32: the target's cost policy (pruning by measured costs, the model gate) */
} e2e_config;

static void end_to_end(fixture *f, int64_t N) {
    static const e2e_config C[] = {
        {"lm/full/tree10/5/60", MS_DRAFT_LM, 0, MS_VOCAB_FULL, 0, 1.0f, MS_DFT_VSEL_NONE, 0, false, false},
        {"lm/static(K=6)/tree10/5/60", MS_DRAFT_LM, 0, MS_VOCAB_STATIC, 0, 1.0f, MS_DFT_VSEL_NONE, 0, false, false},
        {"lm/dynamic(W=5)/tree10/5/60", MS_DRAFT_LM, 0, MS_VOCAB_DYNAMIC, 0, 1.0f, MS_DFT_VSEL_NONE, 0, false, false},
        {"lm-self/dynamic(W=5)/chain4", MS_DRAFT_LM, 1, MS_VOCAB_DYNAMIC, 2, 1.0f, MS_DFT_VSEL_NONE, 0, false, false},
        {"layerskip1/static(K=6)/chain4", MS_DRAFT_LAYERSKIP, 1, MS_VOCAB_STATIC, 2, 1.0f, MS_DFT_VSEL_NONE, 0, false, false},
        {"eagle/full/tree4/3/16", MS_DRAFT_EAGLE, 2, MS_VOCAB_FULL, 1, 1.0f, MS_DFT_VSEL_NONE, 0, false, false},
        {"lm-self/full/tree10/5/60 top_p 0.9", MS_DRAFT_LM, 1, MS_VOCAB_FULL, 0, 0.9f, MS_DFT_VSEL_NONE, 0, false, false},
        {"lm/specvocab(k=3)/tree10/5/60", MS_DRAFT_LM, 0, MS_VOCAB_FULL, 0, 1.0f, MS_DFT_VSEL_SPECVOCAB, 0, false, false},
        {"lm-self/specvocab(k=3)+window(W=5)/chain4", MS_DRAFT_LM, 1, MS_VOCAB_DYNAMIC, 2, 1.0f, MS_DFT_VSEL_SPECVOCAB, 0, false, false},
        {"eagle/specvocab(k=3)/tree4/3/16", MS_DRAFT_EAGLE, 2, MS_VOCAB_FULL, 1, 1.0f, MS_DFT_VSEL_SPECVOCAB, 0, false, false},
        {"layerskip1/static(K=6,R=0.5,min 2)/tree4/3/16", MS_DRAFT_LAYERSKIP, 1, MS_VOCAB_STATIC, 1, 1.0f,
         MS_DFT_VSEL_NONE, 0.5, false, false},
        {"lm/dynaspec(M=4,k_c=2)/tree10/5/60", MS_DRAFT_LM, 0, MS_VOCAB_FULL, 0, 1.0f, MS_DFT_VSEL_DYNASPEC, 0, false, false},
        {"lm-self/dynaspec(k_c=2)+window(W=5)/chain4", MS_DRAFT_LM, 1, MS_VOCAB_DYNAMIC, 2, 1.0f, MS_DFT_VSEL_DYNASPEC, 0, false, false},
        {"eagle/dynaspec(k_c=2,R=0.5,min 1)/tree4/3/16", MS_DRAFT_EAGLE, 2, MS_VOCAB_FULL, 1, 1.0f, MS_DFT_VSEL_DYNASPEC,
         0.5, false, false},
        {"lm+ngram/dynamic(W=5)/tree4/3/16", MS_DRAFT_LM, 0, MS_VOCAB_DYNAMIC, 1, 1.0f, MS_DFT_VSEL_NONE, 0, true, false},
        {"lm-self+ngram/full/chain4, cost policy", MS_DRAFT_LM, 1, MS_VOCAB_FULL, 2, 1.0f, MS_DFT_VSEL_NONE, 0, true, true},
    };
    double joint[V_T * V_T];
    int64_t counts[V_T * V_T];
    spec_sink sink = {0};
    ms_gen_stats st;
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
        const e2e_config *cf = &C[c];
        ms_k_sampling s = {.temperature = 1.0f, .top_p = cf->top_p};
        ms_status rc = exact_joint(f->model, PROMPT, N_PROMPT, &s, joint);
        SPEC_CHECK(rc >= 0, "exact joint");
        ms_dft_opts o = ms_dft_opts_default();
        o.kind = cf->kind;
        o.model_dir = cf->which_model == 0 ? f->ldir : cf->which_model == 1 ? f->tdir : f->edir;
        o.target_dir = f->tdir;
        o.vocab = cf->vocab;
        o.vocab_list = f->list;
        o.w_max = 5;
        o.vsel = cf->vsel;
        o.vocab_artifact = cf->which_model == 0 ? f->art_l : f->art_t; /* eagle reads the target's head */
        o.specvocab_k = 3;
        if (cf->vsel == MS_DFT_VSEL_DYNASPEC) {
            o.vocab_artifact = cf->which_model == 0 ? f->dart_l : f->dart_t;
            o.dynaspec_clusters = 2;
            if (cf->budget_decay > 0) o.dynaspec_decay = cf->budget_decay, o.dynaspec_min = 1;
        } else if (cf->budget_decay > 0) {
            o.budget_decay = cf->budget_decay;
            o.budget_min = 2;
        }
        if (cf->shape == 1) o.tree = (ms_tree_params){.top_k = 4, .depth = 3, .total = 16};
        if (cf->shape == 2) o.tree = (ms_tree_params){.top_k = 1, .depth = 4, .total = 2, .chain = true};
        o.ngram = cf->ngram;
        ms_dft *d = NULL;
        rc = ms_dft_new(&o, &d);
        SPEC_CHECK(rc >= 0, "%s: ms_dft_new", cf->name);
        if (rc < 0) continue;
        ms_draft_port port = ms_dft_port(d);
        memset(counts, 0, sizeof counts);
        int64_t spec_rounds = 0, n_ok = 0;
        ms_gen_params p = ms_gen_params_default();
        p.max_new_tokens = 2;
        p.sampling = s;
        p.cost_policy = cf->cost; /* off: every round speculative, checked below */
        for (int64_t i = 0; i < N; i++) {
            p.seed = 0x5eed0000ull + (uint64_t)c * 1000003ull + (uint64_t)i;
            rc = spec_generate(f->tgt, &port, PROMPT, N_PROMPT, &p, &sink, &st);
            if (rc < 0 || sink.ids.n != 2 || st.draft_failed) {
                SPEC_CHECK(false, "%s run %lld: status %d, %lld tokens, failed %d", cf->name, (long long)i, rc,
                           (long long)sink.ids.n, st.draft_failed);
                break;
            }
            counts[sink.ids.v[0] * V_T + sink.ids.v[1]]++;
            spec_rounds += st.spec_rounds;
            n_ok++;
        }
        chi2_result r = chi2_test(counts, joint, V_T * V_T, n_ok);
        report(cf->name, r, n_ok);
        SPEC_CHECK(r.p > P_FAIL, "%s: the speculative joint distribution differs from the target's (chi2 %.1f, df %lld, "
                                 "p %.3g)", cf->name, r.stat, (long long)r.df, r.p);
        SPEC_CHECK(cf->cost ? spec_rounds <= n_ok : spec_rounds == n_ok, "%s: %lld speculative rounds over %lld runs",
                   cf->name, (long long)spec_rounds, (long long)n_ok);
        ms_dft_free(&d);
    }
    ms_ids_free(&sink.ids);
}

/* ---- part 2: the verifier at depth, and broken ones ------------------------ */

typedef int64_t (*verify_fn)(const ms_tree *tree, const float *logits, int64_t V, const ms_k_sampling *s, ms_rng *rng,
                             float *probs, int32_t *path, int32_t *bonus);

/* Broken on purpose: a rejected candidate keeps its probability and the
 * remaining mass is not renormalised; the bonus comes from the full p. */
static int64_t verify_no_residual(const ms_tree *tree, const float *logits, int64_t V, const ms_k_sampling *s,
                                  ms_rng *rng, float *probs, int32_t *path, int32_t *bonus) {
    int64_t n_path = 1;
    int32_t cur = 0;
    path[0] = 0;
    for (;;) {
        ms_k_sampling_probs(logits + (int64_t)cur * V, V, s, probs);
        int32_t next = -1;
        for (int32_t c = cur + 1; c < tree->n && next < 0; c++)
            if (tree->parent[c] == cur && ms_rng_uniform(rng) < probs[tree->token[c]]) next = c;
        if (next < 0) {
            *bonus = ms_k_sample(logits + (int64_t)cur * V, V, s, rng, probs);
            return n_path;
        }
        path[n_path++] = next;
        cur = next;
    }
}

/* Broken on purpose: the acceptance tests are right (p(x) / remaining mass),
 * but the bonus is drawn from the unmodified p, so a rejected candidate can
 * come back as the bonus. */
static int64_t verify_bonus_unmodified(const ms_tree *tree, const float *logits, int64_t V, const ms_k_sampling *s,
                                       ms_rng *rng, float *probs, int32_t *path, int32_t *bonus) {
    int64_t n_path = 1;
    int32_t cur = 0;
    path[0] = 0;
    for (;;) {
        ms_k_sampling_probs(logits + (int64_t)cur * V, V, s, probs);
        int32_t next = -1;
        double mass = 1.0;
        for (int32_t c = cur + 1; c < tree->n && next < 0; c++) {
            if (tree->parent[c] != cur) continue;
            double px = probs[tree->token[c]];
            if (px <= 0.0) continue;
            if (ms_rng_uniform(rng) * mass < px) next = c;
            else mass -= px;
        }
        if (next < 0) {
            *bonus = ms_k_sample(logits + (int64_t)cur * V, V, s, rng, probs);
            return n_path;
        }
        path[n_path++] = next;
        cur = next;
    }
}

typedef struct {
    ms_tree tree;
    float tree_logits[MS_TREE_MAX * V_T];
    float step_logits[V_T * V_T]; /* after prompt + root + x1, for each x1 */
    double joint[V_T * V_T];      /* exact p(x1 | r) p(x2 | r, x1) */
} depth_case;

static ms_status make_depth_case(fixture *f, ms_dft *d, int32_t root, const ms_k_sampling *s, depth_case *dc) {
    ms_draft_port port = ms_dft_port(d);
    ms_msg_begin b = {.request_id = 99, .prompt = PROMPT, .n_prompt = N_PROMPT, .k_pre = 0, .root = root};
    MS_TRY(port.begin(port.ctx, &b));
    ms_msg_tree tm;
    ms_status st = port.draft(port.ctx, 99, 1, &tm);
    port.end(port.ctx, 99);
    MS_TRY(st);
    MS_TRY(ms_tree_validate(&tm.tree));
    dc->tree = tm.tree;
    ms_model *m = f->model;
    ms_model_reset(m);
    MS_TRY(ms_model_prefill(m, PROMPT, N_PROMPT, NULL));
    int32_t pos[MS_TREE_MAX];
    for (int64_t i = 0; i < dc->tree.n; i++) pos[i] = (int32_t)(N_PROMPT + dc->tree.depth[i]);
    MS_TRY(ms_model_forward(m, dc->tree.token, dc->tree.n, pos, dc->tree.mask, MS_LOGITS_ALL, dc->tree_logits));
    /* the exact reference, one token at a time */
    int32_t prefix[N_PROMPT + 1];
    memcpy(prefix, PROMPT, sizeof PROMPT);
    prefix[N_PROMPT] = root;
    MS_TRY(exact_joint(m, prefix, N_PROMPT + 1, s, dc->joint));
    for (int32_t a = 0; a < V_T; a++) {
        MS_TRY(ms_model_truncate(m, N_PROMPT + 1));
        MS_TRY(ms_model_forward(m, &a, 1, NULL, NULL, MS_LOGITS_LAST, dc->step_logits + a * V_T));
    }
    return MS_OK;
}

static chi2_result sample_depth(const depth_case *dc, verify_fn fn, const ms_k_sampling *s, int64_t N, uint64_t seed,
                                double *mean_path) {
    int64_t counts[V_T * V_T] = {0};
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    float probs[V_T];
    int32_t path[MS_TREE_MAX], bonus;
    int64_t path_sum = 0;
    for (int64_t i = 0; i < N; i++) {
        int64_t np = fn(&dc->tree, dc->tree_logits, V_T, s, &rng, probs, path, &bonus);
        path_sum += np - 1;
        int32_t x1, x2;
        if (np >= 3) {
            x1 = dc->tree.token[path[1]];
            x2 = dc->tree.token[path[2]];
        } else if (np == 2) {
            x1 = dc->tree.token[path[1]];
            x2 = bonus;
        } else {
            x1 = bonus;
            x2 = ms_k_sample(dc->step_logits + x1 * V_T, V_T, s, &rng, probs);
        }
        counts[x1 * V_T + x2]++;
    }
    *mean_path = (double)path_sum / (double)N;
    return chi2_test(counts, dc->joint, V_T * V_T, N);
}

static void verifier_at_depth(fixture *f, int64_t N) {
    static const struct {
        const char *name;
        bool self;
        float top_p;
        ms_tree_params tree;
    } CASES[] = {
        {"lm-self tree 10/5/60", true, 1.0f, {.top_k = 10, .depth = 5, .total = 60}},
        {"lm-random tree 4/3/16", false, 1.0f, {.top_k = 4, .depth = 3, .total = 16}},
        {"lm-self chain 4, top_p 0.9", true, 0.9f, {.top_k = 1, .depth = 4, .total = 2, .chain = true}},
    };
    depth_case *dc = ms_calloc(1, sizeof *dc);
    if (!dc) return;
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        ms_dft_opts o = ms_dft_opts_default();
        o.kind = MS_DRAFT_LM;
        o.model_dir = CASES[c].self ? f->tdir : f->ldir;
        o.vocab = MS_VOCAB_FULL;
        o.tree = CASES[c].tree;
        ms_dft *d = NULL;
        ms_k_sampling s = {.temperature = 1.0f, .top_p = CASES[c].top_p};
        ms_status rc = ms_dft_new(&o, &d);
        if (rc >= 0) rc = make_depth_case(f, d, (int32_t)(c * 5 + 2) % V_T, &s, dc);
        ms_dft_free(&d);
        SPEC_CHECK(rc >= 0, "%s: setting up the depth case", CASES[c].name);
        if (rc < 0) continue;
        double mp;
        char name[128];
        chi2_result r = sample_depth(dc, ms_tgt_verify_tree, &s, N, 1234 + c, &mp);
        snprintf(name, sizeof name, "verify %s (%lld nodes)", CASES[c].name, (long long)dc->tree.n);
        report(name, r, N);
        fprintf(stderr, "    mean accepted draft tokens %.2f\n", mp);
        SPEC_CHECK(r.p > P_FAIL, "%s: ms_tgt_verify_tree's first two tokens are not the target's distribution (chi2 %.1f, "
                                 "df %lld, p %.3g)", CASES[c].name, r.stat, (long long)r.df, r.p);
        /* The broken verifiers must be caught, by far. */
        r = sample_depth(dc, verify_no_residual, &s, N, 1234 + c, &mp);
        snprintf(name, sizeof name, "BROKEN no residual: %s", CASES[c].name);
        report(name, r, N);
        SPEC_CHECK(r.p < 1e-12, "%s: the chi-square test did not catch a verifier without the residual (p %.3g)",
                   CASES[c].name, r.p);
        if (!CASES[c].tree.chain) { /* chain trees have one candidate per node: the bug below needs ≥ 2 */
            r = sample_depth(dc, verify_bonus_unmodified, &s, N, 1234 + c, &mp);
            snprintf(name, sizeof name, "BROKEN bonus from unmodified p: %s", CASES[c].name);
            report(name, r, N);
            SPEC_CHECK(r.p < 1e-12, "%s: the chi-square test did not catch a bonus drawn from the unmodified p (p %.3g)",
                       CASES[c].name, r.p);
        }
    }
    free(dc);
}

/* The comparator itself: exact samples pass, a slightly wrong distribution fails. */
static void chi2_self_check(void) {
    double probs[8] = {0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.04, 0.01};
    int64_t counts[8] = {0}, skew[8] = {0};
    ms_rng rng;
    ms_rng_seed(&rng, 5);
    const int64_t N = 50000;
    for (int64_t i = 0; i < N; i++) {
        double u = ms_rng_uniform(&rng), c = 0.0;
        int k = 0;
        for (; k < 7; k++) {
            c += probs[k];
            if (u < c) break;
        }
        counts[k]++;
        skew[k == 6 && ms_rng_uniform(&rng) < 0.2 ? 7 : k]++; /* 20 % of id 6 moved to id 7 */
    }
    chi2_result a = chi2_test(counts, probs, 8, N), b = chi2_test(skew, probs, 8, N);
    SPEC_CHECK(a.p > 1e-3 && a.df == 7, "chi2 self check: exact samples p %.3g df %lld", a.p, (long long)a.df);
    SPEC_CHECK(b.p < 1e-6, "chi2 self check: skewed samples p %.3g", b.p);
    SPEC_CHECK(fabs(chi2_gamma_q(1.0, 2.0) - exp(-2.0)) < 1e-12 && fabs(chi2_gamma_q(3.0, 40.0) - exp(-40.0) * (1 + 40 + 800)) < 1e-25,
               "gamma_q closed forms");
}

int main(void) {
    ms_log_set_level(MS_LOG_WARN);
    const bool small = spec_small();
    char tmp[256];
    if (!ms_test_tmpdir("ms-spec-test", tmp, sizeof tmp)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = ms_now_s();
    chi2_self_check();
    fixture f = {0};
    ms_status s = spec_mkmodel(tmp, "target",
                               "--arch llama --vocab 16 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --seed 41",
                               f.tdir, sizeof f.tdir);
    if (s >= 0)
        s = spec_mkmodel(tmp, "lm", "--arch llama --vocab 16 --hidden 16 --layers 1 --heads 2 --kv-heads 1 --seed 42",
                         f.ldir, sizeof f.ldir);
    if (s >= 0) s = spec_mkeagle(tmp, "eagle", f.tdir, "--seed 43", f.edir, sizeof f.edir);
    ms_model_opts mo = {0};
    if (s >= 0) s = ms_model_load(f.tdir, &mo, &f.model);
    if (s >= 0) s = ms_tgt_new(f.model, &f.tgt);
    snprintf(f.list, sizeof f.list, "%s/static.list", tmp);
    static const int32_t LIST[] = {0, 3, 5, 8, 11, 14}; /* K = 6 < top_k: the draft pads with −inf candidates */
    if (s >= 0) s = ms_vocab_save_list(f.list, LIST, 6);
    snprintf(f.art_l, sizeof f.art_l, "%s/lm.sv.gguf", tmp);
    snprintf(f.art_t, sizeof f.art_t, "%s/target.sv.gguf", tmp);
    if (s >= 0) s = spec_specvocab_build(f.ldir, f.art_l, 4);
    if (s >= 0) s = spec_specvocab_build(f.tdir, f.art_t, 8);
    snprintf(f.dart_l, sizeof f.dart_l, "%s/lm.ds.gguf", tmp);
    snprintf(f.dart_t, sizeof f.dart_t, "%s/target.ds.gguf", tmp);
    if (s >= 0) s = spec_dynaspec_random(f.ldir, f.dart_l, 4, 7);
    if (s >= 0) s = spec_dynaspec_random(f.tdir, f.dart_t, 4, 8);
    SPEC_CHECK(s >= 0, "setup");
    if (s >= 0) {
        fprintf(stderr, "part 1: first two tokens of ms_tgt_generate vs the exact joint (temperature 1)\n");
        end_to_end(&f, small ? 800 : 5000);
        fprintf(stderr, "part 2: first two tokens after a fixed root through the verifier (and broken ones)\n");
        verifier_at_depth(&f, small ? 20000 : 100000);
    }
    ms_tgt_free(&f.tgt);
    ms_model_free(&f.model);
    ms_test_rmtree(tmp);
    fprintf(stderr, "%.1f s\n", ms_now_s() - t0);
    if (spec_failures) {
        fprintf(stderr, "test_spec_sampling: %d check(s) FAILED\n", spec_failures);
        return 1;
    }
    fprintf(stderr, "test_spec_sampling: OK\n");
    return 0;
}
