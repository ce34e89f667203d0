/* test_spec_policy.c — the draft policies of issue 14: the confidence stop
 * (ms_tree_params.p_min, ms_tree.h) and adaptive depth (ms_dft_opts.adaptive,
 * ms_draft.h).
 *
 *  1. Greedy speculative output == autoregressive output, token for token and
 *     with the same stop reason, for p_min ∈ {0, 0.3, 0.9, 1.01} × adaptive
 *     off / on × chain depth 4, chain depth 6 and a 4/3/16 tree, on
 *     stories260K (layerskip 1 and 2 drafts, the model as its own lm draft;
 *     text prompts) and on a seeded
 *     random qwen3 target (a random 1-layer lm draft: poor acceptance; the
 *     target as its own lm draft: near-total acceptance).
 *  2. What the engine reports (ms_gen_stats.drafted / drafted_max /
 *     spec_rounds), never time: p_min 0 without adaptation drafts the full
 *     chain every round; p_min 1.01 drafts exactly the level-1 candidates (a
 *     chain: one token) every round; on stories a high p_min cuts some rounds
 *     short; adaptive depth drafts less per round behind a poor draft and
 *     stays near the maximum behind the target itself.
 *  3. The adaptation rule: the draft port driven by hand with seeded verdicts;
 *     every tree's length must be what a separate copy of the rule predicts.
 *  4. The draft's kept KV rows: after seeded verdicts, each tree equals a
 *     fresh draft's on the same history (tokens and shape; scores within
 *     KV_TOL, kv_part).
 *  5. The catch-up after rounds without the model (the target's gate): each
 *     model round's tree equals a fresh draft's on the tokens the rule keeps
 *     (catchup_part).
 */
#include "spec_util.h"

#include "ms_check.h"

#include "ms_tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROMPTS 8

typedef struct {
    const char *label;
    ms_tgt *tgt;
    int64_t V;
    int64_t n_prompts;
    ms_ids prompts[MAX_PROMPTS];
    ms_gen_params params[MAX_PROMPTS];
    ms_ids ar[MAX_PROMPTS];
    const char *ar_reason[MAX_PROMPTS];
} group;

typedef struct {
    const char *name;
    ms_draft_kind kind;
    const char *model_dir, *target_dir;
    int64_t layers;
} draft_spec;

static const struct {
    const char *name;
    ms_tree_params tree;
} SHAPES[] = {
    {"chain4", {.top_k = 1, .depth = 4, .total = 2, .chain = true}},
    {"chain6", {.top_k = 1, .depth = 6, .total = 2, .chain = true}},
    {"tree4/3/16", {.top_k = 4, .depth = 3, .total = 16, .chain = false}},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };
static const float P_MINS[] = {0.0f, 0.3f, 0.9f, 1.01f};
enum { N_PMINS = sizeof P_MINS / sizeof P_MINS[0] };

static int64_t g_runs;

/* What one policy drafted over all prompts of a group. */
typedef struct {
    int64_t spec_rounds, drafted, drafted_max, accepted;
} tally;

static void group_reference(group *g, int64_t max_new, const int32_t *eos, int64_t n_eos) {
    spec_sink sink = {0};
    ms_gen_stats st;
    for (int64_t i = 0; i < g->n_prompts; i++) {
        ms_gen_params p = ms_gen_params_default();
        p.cost_policy = false; /* these checks are about what the draft proposes: verify all of it */
        p.max_new_tokens = max_new;
        for (int64_t e = 0; e < n_eos && p.n_stop < MS_MAX_STOP; e++) p.stop_ids[p.n_stop++] = eos[e];
        ms_status s = spec_generate(g->tgt, NULL, g->prompts[i].v, g->prompts[i].n, &p, &sink, &st);
        SPEC_CHECK(s >= 0 && st.spec_rounds == 0, "%s prompt %lld: AR reference", g->label, (long long)i);
        g->params[i] = p;
        g->ar_reason[i] = st.stop_reason;
        g->ar[i].n = 0;
        for (int64_t k = 0; k < sink.ids.n && s >= 0; k++) s = ms_ids_push(&g->ar[i], sink.ids.v[k]);
    }
    ms_ids_free(&sink.ids);
}

/* One draft × shape × policy over every prompt: output == AR; returns the tally. */
static tally run_policy(group *g, const draft_spec *ds, int shape, float p_min, bool adaptive) {
    tally t = {0};
    char name[256];
    snprintf(name, sizeof name, "%s/%s/%s/p_min=%.2f/%s", g->label, ds->name, SHAPES[shape].name, (double)p_min,
             adaptive ? "adaptive" : "fixed");
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = ds->kind;
    o.model_dir = ds->model_dir;
    o.target_dir = ds->target_dir;
    o.layers = ds->layers;
    o.vocab = MS_VOCAB_FULL;
    o.tree = SHAPES[shape].tree;
    o.tree.p_min = p_min;
    o.adaptive = adaptive;
    ms_dft *d = NULL;
    ms_status s = ms_dft_new(&o, &d);
    SPEC_CHECK(s >= 0, "%s: ms_dft_new %s", name, ms_status_str(s));
    if (s < 0) return t;
    ms_draft_port port = ms_dft_port(d);
    spec_sink sink = {0};
    ms_gen_stats st;
    for (int64_t i = 0; i < g->n_prompts; i++) {
        s = spec_generate(g->tgt, &port, g->prompts[i].v, g->prompts[i].n, &g->params[i], &sink, &st);
        g_runs++;
        SPEC_CHECK(s >= 0 && !st.draft_failed, "%s prompt %lld: generate %s", name, (long long)i, ms_status_str(s));
        if (s < 0) continue;
        if (!spec_ids_equal(sink.ids.v, sink.ids.n, g->ar[i].v, g->ar[i].n)) {
            int64_t at = spec_first_diff(sink.ids.v, sink.ids.n, g->ar[i].v, g->ar[i].n);
            SPEC_CHECK(false, "%s prompt %lld: differs from AR at token %lld of %lld/%lld", name, (long long)i,
                       (long long)at, (long long)sink.ids.n, (long long)g->ar[i].n);
        }
        SPEC_CHECK(!strcmp(st.stop_reason, g->ar_reason[i]), "%s prompt %lld: stop '%s', AR '%s'", name, (long long)i,
                   st.stop_reason, g->ar_reason[i]);
        t.spec_rounds += st.spec_rounds;
        t.drafted += st.drafted;
        if (st.drafted_max > t.drafted_max) t.drafted_max = st.drafted_max;
        for (int64_t k = 1; k <= st.max_depth; k++) t.accepted += st.accepted_ge[k];
    }
    ms_ids_free(&sink.ids);
    ms_dft_free(&d);
    fprintf(stderr, "  %-52s rounds %4lld, drafted/round %.2f (max %lld), accepted/round %.2f\n", name,
            (long long)t.spec_rounds, t.spec_rounds ? (double)t.drafted / (double)t.spec_rounds : 0.0,
            (long long)t.drafted_max, t.spec_rounds ? (double)t.accepted / (double)t.spec_rounds : 0.0);
    return t;
}

/* Every shape × p_min × adaptive for one draft, with the count checks that
 * hold for any draft. res[shape][p][adaptive]. */
static void run_draft(group *g, const draft_spec *ds, tally res[N_SHAPES][N_PMINS][2]) {
    for (int sh = 0; sh < N_SHAPES; sh++)
        for (int pi = 0; pi < N_PMINS; pi++)
            for (int ad = 0; ad < 2; ad++) {
                tally t = run_policy(g, ds, sh, P_MINS[pi], ad == 1);
                res[sh][pi][ad] = t;
                const ms_tree_params *tp = &SHAPES[sh].tree;
                const int64_t level1 = tp->chain ? 1 : (tp->total - 1 < tp->top_k ? tp->total - 1 : tp->top_k);
                const int64_t full = tp->chain ? tp->depth + 1 : tp->total - 1;
                SPEC_CHECK(t.spec_rounds > 0, "%s %s p_min %.2f: no speculative round", g->label, ds->name,
                           (double)P_MINS[pi]);
                SPEC_CHECK(t.drafted_max <= full, "%s %s %s: drafted %lld > %lld in a round", g->label, ds->name,
                           SHAPES[sh].name, (long long)t.drafted_max, (long long)full);
                SPEC_CHECK(t.drafted >= level1 * t.spec_rounds, "%s %s %s: fewer than the level-1 nodes drafted",
                           g->label, ds->name, SHAPES[sh].name);
                /* no stop, no adaptation: every round the full chain */
                if (tp->chain && P_MINS[pi] == 0.0f && ad == 0)
                    SPEC_CHECK(t.drafted == full * t.spec_rounds, "%s %s %s p_min 0: drafted %lld over %lld rounds",
                               g->label, ds->name, SHAPES[sh].name, (long long)t.drafted, (long long)t.spec_rounds);
                /* p_min > 1: no draft pass at all, the level-1 candidates only */
                if (P_MINS[pi] > 1.0f)
                    SPEC_CHECK(t.drafted == level1 * t.spec_rounds && t.drafted_max == level1,
                               "%s %s %s p_min 1.01: drafted %lld (max %lld) over %lld rounds", g->label, ds->name,
                               SHAPES[sh].name, (long long)t.drafted, (long long)t.drafted_max,
                               (long long)t.spec_rounds);
            }
}

static double per_round(const tally *t) { return t->spec_rounds ? (double)t->drafted / (double)t->spec_rounds : 0.0; }

static void stories_part(const char *tmp, bool small) {
    char dir[512];
    ms_status s = spec_convert_stories(tmp, dir, sizeof dir);
    if (s == MS_ERR_NOT_FOUND) {
        fprintf(stderr, "SKIP stories260K part: %s/models/stories260k absent\n", MS_SHARED_DIR);
        return;
    }
    SPEC_CHECK(s >= 0, "convert stories260K");
    if (s < 0) return;
    static const char *const texts[] = {"Once upon a time", "The little dog ran to the park and",
                                        "Lily wanted to play with her friend Tom, but", "One day, a big bird",
                                        "Mom said"};
    ms_tok *tok = NULL;
    ms_model *model = NULL;
    group g = {.label = "stories260K"};
    ms_model_opts mo = {0};
    s = ms_tok_load_dir(dir, &tok);
    if (s >= 0) s = ms_model_load(dir, &mo, &model);
    if (s >= 0) s = ms_tgt_new(model, &g.tgt);
    SPEC_CHECK(s >= 0, "stories model");
    g.n_prompts = small ? 2 : 5;
    for (int64_t i = 0; i < g.n_prompts && s >= 0; i++) {
        s = ms_ids_push(&g.prompts[i], ms_tok_bos(tok));
        if (s >= 0) s = ms_tok_encode(tok, texts[i], strlen(texts[i]), false, &g.prompts[i]);
    }
    if (s >= 0) {
        const int32_t *eos;
        int n_eos = ms_tok_eos(tok, &eos);
        group_reference(&g, small ? 24 : 64, eos, n_eos);
        tally res[N_SHAPES][N_PMINS][2];
        /* layerskip drafts accept little; the model as its own lm draft accepts
         * everything, so the stop and the adaptation also meet long paths */
        const draft_spec drafts[] = {{"layerskip1", MS_DRAFT_LAYERSKIP, dir, dir, 1},
                                     {"layerskip2", MS_DRAFT_LAYERSKIP, dir, dir, 2},
                                     {"lm-self", MS_DRAFT_LM, dir, dir, 1}};
        for (size_t k = 0; k < sizeof drafts / sizeof drafts[0]; k++) {
            const draft_spec ds = drafts[k];
            run_draft(&g, &ds, res);
            /* The story model is confident at some steps and not at others: a
             * high p_min cuts some chains short, and stops more than a low one. */
            for (int sh = 0; sh < 2; sh++) {
                double full = (double)(SHAPES[sh].tree.depth + 1);
                SPEC_CHECK(per_round(&res[sh][2][0]) < full, "%s %s: p_min 0.9 never stopped (%.2f per round)",
                           ds.name, SHAPES[sh].name, per_round(&res[sh][2][0]));
                SPEC_CHECK(per_round(&res[sh][2][0]) < per_round(&res[sh][0][0]),
                           "%s %s: p_min 0.9 drafts %.2f per round, p_min 0 %.2f", ds.name, SHAPES[sh].name,
                           per_round(&res[sh][2][0]), per_round(&res[sh][0][0]));
            }
        }
    }
    for (int64_t i = 0; i < MAX_PROMPTS; i++) {
        ms_ids_free(&g.prompts[i]);
        ms_ids_free(&g.ar[i]);
    }
    ms_tgt_free(&g.tgt);
    ms_model_free(&model);
    ms_tok_free(&tok);
}

static void random_part(const char *tmp, const char *tdir, const char *ldir, bool small) {
    (void)tmp;
    ms_model *model = NULL;
    group g = {.label = "qwen3-random"};
    ms_model_opts mo = {0};
    ms_status s = ms_model_load(tdir, &mo, &model);
    if (s >= 0) s = ms_tgt_new(model, &g.tgt);
    SPEC_CHECK(s >= 0, "random target");
    if (s < 0) return;
    g.V = ms_model_vocab(model);
    g.n_prompts = small ? 2 : 4;
    ms_rng rng;
    ms_rng_seed(&rng, 1414);
    for (int64_t i = 0; i < g.n_prompts && s >= 0; i++) {
        int64_t n = 4 + (int64_t)(ms_rng_u64(&rng) % 20);
        for (int64_t k = 0; k < n && s >= 0; k++) s = ms_ids_push(&g.prompts[i], (int32_t)(ms_rng_u64(&rng) % 300));
    }
    group_reference(&g, small ? 20 : 40, NULL, 0);
    tally poor[N_SHAPES][N_PMINS][2], self[N_SHAPES][N_PMINS][2];
    draft_spec lm = {"lm-random", MS_DRAFT_LM, ldir, tdir, 1};
    draft_spec me = {"lm-self", MS_DRAFT_LM, tdir, tdir, 1};
    run_draft(&g, &lm, poor);
    run_draft(&g, &me, self);
    /* Adaptive depth: behind a poor draft the chain shrinks (the full chain is
     * rarely accepted); behind the target itself it stays near the top. */
    for (int sh = 0; sh < 2; sh++) {
        double full = (double)(SHAPES[sh].tree.depth + 1);
        SPEC_CHECK(per_round(&poor[sh][0][1]) < 0.6 * full, "lm-random %s adaptive: %.2f drafted per round of %.0f",
                   SHAPES[sh].name, per_round(&poor[sh][0][1]), full);
        SPEC_CHECK(per_round(&self[sh][0][1]) > full - 1.0, "lm-self %s adaptive: %.2f drafted per round of %.0f",
                   SHAPES[sh].name, per_round(&self[sh][0][1]), full);
    }
    for (int64_t i = 0; i < MAX_PROMPTS; i++) {
        ms_ids_free(&g.prompts[i]);
        ms_ids_free(&g.ar[i]);
    }
    ms_tgt_free(&g.tgt);
    ms_model_free(&model);
}

/* ---- the adaptation rule against a separate copy of it -------------------- */

/* ms_draft.h's rule, written out again: L in [1, l_max], e the EMA. */
typedef struct {
    int64_t L, l_max;
    double e;
} ref_rule;

static void ref_update(ref_rule *r, int64_t accepted, int64_t deepest) {
    r->e = (r->e + (double)accepted) / 2.0;
    if (accepted == deepest && deepest >= r->L) r->L = r->L + 1 > r->l_max ? r->l_max : r->L + 1;
    else if (accepted < deepest) {
        int64_t want = (int64_t)floor(r->e) + 1;
        if (want < 1) want = 1;
        if (want < r->L) r->L = want;
    }
}

/* A verdict accepting the path from the root to `node`, with a random bonus. */
static ms_msg_verify verdict_to(const ms_tree *t, int32_t node, uint64_t rid, int64_t round, ms_rng *rng) {
    ms_msg_verify v = {.request_id = rid, .round = round, .bonus = (int32_t)(ms_rng_u64(rng) % 300)};
    int32_t rev[MS_TREE_MAX];
    int64_t n = 0;
    for (int32_t x = node; x >= 0; x = t->parent[x]) rev[n++] = x;
    for (int64_t k = 0; k < n; k++) v.path[k] = rev[n - 1 - k];
    v.n_path = n;
    return v;
}

static void rule_part(const char *tdir, int64_t depth, bool tree, uint64_t seed) {
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LM;
    o.model_dir = tdir;
    o.vocab = MS_VOCAB_FULL;
    /* total 64 keeps the whole history (3 + 9·(depth − 1) nodes): the deepest level is always in */
    o.tree = tree ? (ms_tree_params){.top_k = 3, .depth = depth, .total = MS_TREE_MAX}
                  : (ms_tree_params){.top_k = 1, .depth = depth, .total = 2, .chain = true};
    o.adaptive = true;
    ms_dft *d = NULL;
    ms_status s = ms_dft_new(&o, &d);
    SPEC_CHECK(s >= 0, "rule: ms_dft_new");
    if (s < 0) return;
    ms_draft_port port = ms_dft_port(d);
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    int32_t prompt[6] = {5, 17, 33, 2, 99, 41};
    ms_msg_begin b = {.request_id = 7, .prompt = prompt, .n_prompt = 6, .root = 12};
    s = port.begin(port.ctx, &b);
    SPEC_CHECK(s >= 0, "rule: begin");
    ref_rule r = {.L = depth + 1, .l_max = depth + 1, .e = (double)(depth + 1)};
    int64_t grew = 0, shrank = 0;
    for (int64_t round = 1; round <= 80 && s >= 0; round++) {
        SPEC_CHECK(ms_dft_draft_len(d) == r.L, "rule round %lld: length %lld, reference %lld", (long long)round,
                   (long long)ms_dft_draft_len(d), (long long)r.L);
        ms_msg_tree tm;
        s = port.draft(port.ctx, 7, round, &tm);
        SPEC_CHECK(s >= 0, "rule round %lld: draft", (long long)round);
        if (s < 0) break;
        int64_t deepest = 0;
        int32_t leaf = 0;
        for (int32_t i = 1; i < tm.tree.n; i++)
            if (tm.tree.depth[i] > deepest) deepest = tm.tree.depth[leaf = i];
        SPEC_CHECK(deepest == r.L, "rule round %lld (%s): deepest node %lld, reference length %lld", (long long)round,
                   tree ? "tree" : "chain", (long long)deepest, (long long)r.L);
        /* A verdict: the path to a random node, the deepest one in a third of the rounds. */
        int32_t node = ms_rng_u64(&rng) % 3 == 0 ? leaf : (int32_t)(ms_rng_u64(&rng) % (uint64_t)tm.tree.n);
        ms_msg_verify v = verdict_to(&tm.tree, node, 7, round, &rng);
        const int64_t n = v.n_path;
        int64_t before = r.L;
        ref_update(&r, n - 1, deepest);
        grew += r.L > before;
        shrank += r.L < before;
        s = port.accept(port.ctx, &v);
        SPEC_CHECK(s >= 0, "rule round %lld: accept", (long long)round);
    }
    SPEC_CHECK(grew > 3 && shrank > 3, "rule (%s): the length grew %lld and shrank %lld times", tree ? "tree" : "chain",
               (long long)grew, (long long)shrank);
    port.end(port.ctx, 7);
    ms_dft_free(&d);
}

/* ---- the draft's kept KV rows (ms_draft.c, draft_round / set_pending) ------
 *
 * A tree's leading chain of rows stays in the draft KV and the verdict keeps
 * the accepted part of it instead of forwarding those tokens again. The
 * property: after any verdict, the next tree is the tree a fresh draft gives
 * when begun on the same history (every token committed by one prompt
 * forward): the same tokens and shape, scores within KV_TOL (this random
 * model's f32 matmuls go through OpenBLAS, whose one-row and n-row products
 * round differently: ~1e-6 here; a stale or missing row moves them by
 * 1e-2 and more). Verdicts are seeded paths: none, part or all of a chain,
 * any node of a tree. */
#define KV_TOL 1e-4

static double tree_diff(const ms_tree *a, const ms_tree *b) {
    if (a->n != b->n) return INFINITY;
    double worst = 0.0;
    for (int64_t i = 0; i < a->n; i++) {
        if (a->token[i] != b->token[i] || a->parent[i] != b->parent[i]) return INFINITY;
        const double e = fabs((double)a->score[i] - (double)b->score[i]);
        ms_check_worst(&worst, e);
    }
    return worst;
}

/* The draft under test and its fresh reference: lm drafts of the model at
 * tdir with the given tree, reading every prompt row (prompt_max 0), so a
 * fresh draft begun on a history commits exactly that history. */
static ms_status draft_pair(const char *tdir, ms_tree_params shape, ms_dft **d, ms_dft **fresh) {
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LM;
    o.model_dir = tdir;
    o.vocab = MS_VOCAB_FULL;
    o.tree = shape;
    o.prompt_max = 0;
    ms_status s = ms_dft_new(&o, d);
    if (s >= 0) s = ms_dft_new(&o, fresh);
    return s;
}

/* tree_diff of t from the first tree of the fresh draft `ref` begun on the n
 * tokens of hist with `root`; INFINITY when the reference fails. */
static double fresh_diff(ms_draft_port ref, const int32_t *hist, int64_t n, int32_t root, const ms_tree *t) {
    ms_msg_begin rb = {.request_id = 99, .prompt = hist, .n_prompt = n, .root = root};
    ms_msg_tree tr;
    ms_status s = ref.begin(ref.ctx, &rb);
    if (s >= 0) s = ref.draft(ref.ctx, 99, 1, &tr);
    ref.end(ref.ctx, 99);
    return s < 0 ? INFINITY : tree_diff(t, &tr.tree);
}

static void kv_part(const char *tdir, ms_tree_params shape, uint64_t seed) {
    ms_dft *d = NULL, *fresh = NULL;
    ms_status s = draft_pair(tdir, shape, &d, &fresh);
    SPEC_CHECK(s >= 0, "kv: ms_dft_new");
    if (s < 0) goto out;
    ms_draft_port port = ms_dft_port(d), ref = ms_dft_port(fresh);
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    ms_ids hist = {0}; /* committed history: prompt, then each round's root and accepted tokens */
    const int32_t prompt[6] = {5, 17, 33, 2, 99, 41};
    for (int i = 0; i < 6; i++) ms_ids_push(&hist, prompt[i]);
    ms_msg_begin b = {.request_id = 9, .prompt = prompt, .n_prompt = 6, .root = 12};
    s = port.begin(port.ctx, &b);
    SPEC_CHECK(s >= 0, "kv: begin");
    int32_t root = 12;
    int64_t kept_any = 0;
    double worst = 0.0;
    for (int64_t round = 1; round <= 40 && s >= 0; round++) {
        ms_msg_tree tm;
        s = port.draft(port.ctx, 9, round, &tm);
        SPEC_CHECK(s >= 0, "kv round %lld: draft", (long long)round);
        if (s < 0) break;
        if (round > 1) { /* the reference: a fresh draft begun on the history */
            const double e = fresh_diff(ref, hist.v, hist.n, root, &tm.tree);
            ms_check_worst(&worst, e);
            SPEC_CHECK(e <= KV_TOL,
                       "kv round %lld (%s): the tree is %g from a fresh draft's on the same %lld tokens",
                       (long long)round, shape.chain ? "chain" : "tree", e, (long long)hist.n + 1);
        }
        ms_msg_verify v = verdict_to(&tm.tree, (int32_t)(ms_rng_u64(&rng) % (uint64_t)tm.tree.n), 9, round, &rng);
        const int64_t n = v.n_path;
        kept_any += n > 1;
        ms_ids_push(&hist, root);
        for (int64_t k = 1; k < n; k++) ms_ids_push(&hist, tm.tree.token[v.path[k]]);
        root = v.bonus;
        s = port.accept(port.ctx, &v);
        SPEC_CHECK(s >= 0, "kv round %lld: accept", (long long)round);
    }
    SPEC_CHECK(kept_any > 10, "kv: only %lld verdicts accepted a draft token", (long long)kept_any);
    fprintf(stderr, "kv (%s): %lld verdicts kept draft tokens; trees within %.3g of a fresh draft's\n",
            shape.chain ? "chain" : "tree", (long long)kept_any, worst);
    port.end(port.ctx, 9);
    ms_ids_free(&hist);
out:
    ms_dft_free(&d);
    ms_dft_free(&fresh);
}

/* ---- catch-up after rounds without the model (ms_draft.c, catch_up) --------
 *
 * Rounds the target's gate makes without the model (ms_msg_verify.skip_model;
 * a request begun so: ms_msg_begin.skip_model) queue their tokens; the next
 * model round commits them after what the KV holds, or, when more than
 * CU_RECENT wait, starts the KV again from the last CU_RECENT of them. The
 * property: every model round's tree is the tree a fresh draft gives when
 * begun on exactly the tokens this separate copy of the rule keeps. Verdicts
 * that lead into a round without the model accept no token (a kept chain row
 * is committed already, so which tokens wait would depend on the tree's
 * shape); the others accept seeded paths. */
#define CU_RECENT 16 /* ms_draft.c: CATCHUP_MAX */
#define CU_NPROMPT 40

static void catchup_part(const char *tdir, uint64_t seed) {
    ms_dft *d = NULL, *fresh = NULL;
    ms_ids eff = {0}, pend = {0}; /* the reference: tokens in the KV; tokens waiting, the root last */
    ms_status s = draft_pair(tdir, (ms_tree_params){.top_k = 3, .depth = 3, .total = 16}, &d, &fresh);
    SPEC_CHECK(s >= 0, "catch-up: ms_dft_new");
    if (s < 0) goto out;
    ms_draft_port port = ms_dft_port(d), ref = ms_dft_port(fresh);
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    int32_t prompt[CU_NPROMPT];
    for (int i = 0; i < CU_NPROMPT; i++) {
        prompt[i] = (int32_t)(ms_rng_u64(&rng) % 300);
        ms_ids_push(&pend, prompt[i]);
    }
    ms_ids_push(&pend, 12);
    ms_msg_begin b = {.request_id = 11, .prompt = prompt, .n_prompt = CU_NPROMPT, .root = 12, .skip_model = true};
    s = port.begin(port.ctx, &b);
    SPEC_CHECK(s >= 0, "catch-up: begin");
    bool skip = true, lagging = false;
    int64_t compared = 0, restarts = 0, appended = 0, run_left = 20;
    double worst = 0.0;
    for (int64_t round = 1; round <= 300 && s >= 0; round++) {
        ms_msg_tree tm;
        s = port.draft(port.ctx, 11, round, &tm);
        SPEC_CHECK(s >= 0, "catch-up round %lld: draft", (long long)round);
        if (s < 0) break;
        if (skip) {
            SPEC_CHECK(tm.tree.n == 1, "catch-up round %lld: a round without the model drafted %lld nodes",
                       (long long)round, (long long)tm.tree.n - 1);
        } else {
            if (lagging && pend.n > CU_RECENT) { /* the rule: the KV starts again from the last CU_RECENT */
                eff.n = 0;
                memmove(pend.v, pend.v + pend.n - CU_RECENT, CU_RECENT * sizeof *pend.v);
                pend.n = CU_RECENT;
                restarts++;
            } else if (lagging) {
                appended++;
            }
            for (int64_t i = 0; i < pend.n; i++) ms_ids_push(&eff, pend.v[i]);
            pend.n = 0;
            const double e = fresh_diff(ref, eff.v, eff.n - 1, eff.v[eff.n - 1], &tm.tree);
            ms_check_worst(&worst, e);
            SPEC_CHECK(e <= KV_TOL, "catch-up round %lld: the tree is %g from a fresh draft's on the %lld kept tokens",
                       (long long)round, e, (long long)eff.n);
            compared++;
        }
        /* runs without the model of 1-30 rounds (about half pass CU_RECENT), after one model round in three */
        if (run_left == 0 && !skip && ms_rng_u64(&rng) % 3 == 0) run_left = 1 + (int64_t)(ms_rng_u64(&rng) % 30);
        const bool next_skip = run_left > 0;
        run_left -= run_left > 0;
        const int32_t node = skip || next_skip ? 0 : (int32_t)(ms_rng_u64(&rng) % (uint64_t)tm.tree.n);
        ms_msg_verify v = verdict_to(&tm.tree, node, 11, round, &rng);
        v.skip_model = next_skip;
        /* what waits next: a model round's accepted tokens and bonus; after a round without it, the bonus too */
        for (int64_t k = 1; k < v.n_path; k++) ms_ids_push(&pend, tm.tree.token[v.path[k]]);
        ms_ids_push(&pend, v.bonus);
        lagging = skip;
        s = port.accept(port.ctx, &v);
        SPEC_CHECK(s >= 0, "catch-up round %lld: accept", (long long)round);
        skip = next_skip;
    }
    SPEC_CHECK(restarts > 3 && appended > 3, "catch-up: %lld restarts, %lld catch-ups after the KV", (long long)restarts,
               (long long)appended);
    fprintf(stderr, "catch-up: %lld model rounds compared (%lld restarts, %lld appended); trees within %.3g of a "
            "fresh draft's\n", (long long)compared, (long long)restarts, (long long)appended, worst);
    port.end(port.ctx, 11);
out:
    ms_ids_free(&eff);
    ms_ids_free(&pend);
    ms_dft_free(&d);
    ms_dft_free(&fresh);
}

int main(void) {
    ms_log_set_level(MS_LOG_WARN);
    const bool small = spec_small();
    char tmp[256], tdir[512], ldir[512];
    if (!ms_test_tmpdir("ms-spec-policy", tmp, sizeof tmp)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = ms_now_s();
    stories_part(tmp, small);
    ms_status s = spec_mkmodel(tmp, "target",
                               "--arch qwen3 --vocab 300 --hidden 48 --layers 3 --heads 4 --kv-heads 2 --seed 71",
                               tdir, sizeof tdir);
    if (s >= 0)
        s = spec_mkmodel(tmp, "lm", "--arch qwen3 --vocab 300 --hidden 32 --layers 1 --heads 2 --kv-heads 1 --seed 72",
                         ldir, sizeof ldir);
    SPEC_CHECK(s >= 0, "random models");
    if (s >= 0) {
        random_part(tmp, tdir, ldir, small);
        rule_part(tdir, 5, false, 31);
        rule_part(tdir, 4, true, 32);
        kv_part(tdir, (ms_tree_params){.top_k = 1, .depth = 5, .total = 2, .chain = true}, 41);
        kv_part(tdir, (ms_tree_params){.top_k = 3, .depth = 3, .total = 16}, 42);
        catchup_part(tdir, 43);
    }
    ms_test_rmtree(tmp);
    fprintf(stderr, "%lld speculative runs; %.1f s\n", (long long)g_runs, ms_now_s() - t0);
    if (spec_failures) {
        fprintf(stderr, "test_spec_policy: %d check(s) FAILED\n", spec_failures);
        return 1;
    }
    fprintf(stderr, "test_spec_policy: OK\n");
    return 0;
}
