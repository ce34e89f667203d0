/* test_spec_equiv.c — greedy speculative decoding emits exactly what the
 * target emits alone (docs/architecture.md §4: "the vocabulary mode never changes what the
 * target emits").
 *
 * For every draft kind × vocabulary mode × tree shape (EAGLE-2 10/5/60, a
 * small 4/3/16 tree, a chain of depth 4), ms_tgt_generate with the draft must
 * give the same id sequence (from the token callback) and the same stop reason
 * as ms_tgt_generate without one. Model groups:
 *   - stories260K (shared; converted with convert-llama2c), layerskip drafts of
 *     1–4 layers, Spec-Bench prompts encoded raw (BOS + text);
 *   - seeded random llama / qwen2 / qwen3 targets (GQA, tied and untied), with a
 *     random 1-layer `lm` draft, the target itself as `lm` draft (near-total
 *     acceptance: long paths, KV compaction), a random `eagle` head and
 *     layerskip; prompts of random ids;
 *   - a qwen3 target with the real 151,936-id Qwen3 tokenizer at tiny width,
 *     W_max = 256, Spec-Bench prompts through the ChatML template.
 * The n-gram draft runs alone and merged (layerskip1+ngram, lm+ngram,
 * eagle+ngram; dynamic vocabulary, every tree shape). Every other
 * configuration verifies under the default cost policy (ms_policy.h), which
 * prunes trees by measured costs: what it keeps varies run to run, the
 * output must not; the rest verify whole trees.
 * Static lists are the K most frequent ids of the group's prompts and AR
 * outputs (ms_vocab_rank_counts → ms_vocab_save_list). Half the prompts also
 * carry a stop id planted from the AR output, so "stop token" is compared as
 * well as "max tokens".
 *
 * On a mismatch the test prints the first divergence and the top-2 logit gap
 * of the target at that point (a float near-tie between tree-batched and
 * one-by-one logits would show as a tiny gap) — and still fails.
 *
 * Issue 16's modes run after the plain ones in the stories260K and llama
 * groups (their first drafts, the 10/5/60 tree and the chain): SpecVocab
 * alone and ∪ the window (the artefact built at test time by
 * tools/vocab/specvocab_build.py for the draft's head model: rank 16 F32 for
 * stories, rank 32 Q8_0 for llama), and the static list under a
 * position-aware budget (R = 0.5, K_min = 8), and the static list ∪ the
 * window (mode static+window, named by o.vocab_mode).
 *
 * Under ASan (or SPEC_SMALL=1) fewer prompts per configuration and fewer new
 * tokens are run; every kind, mode and shape still runs.
 */
#include "spec_util.h"

#include "ms_tokenizer.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    ms_draft_kind kind;
    const char *model_dir;
    const char *target_dir;
    int64_t layers;
    bool ngram; /* merge the n-gram source (kind + "+ngram"); kind MS_DRAFT_NGRAM: the n-gram draft alone */
} draft_spec;

typedef struct {
    const char *label;
    const char *dir;
    ms_model *model;
    ms_tgt *tgt;
    int64_t V;
    int64_t n_prompts;
    ms_ids *prompts;
    ms_gen_params *params;
    ms_ids *ar;
    const char **ar_reason;
    int64_t per_config; /* prompts run per configuration (rotating) */
    uint32_t shapes;    /* bit s: run SHAPES[s] */
    int64_t w_max;      /* dynamic window */
    char list_path[512];
    int64_t list_k;
    int64_t sv_rank;    /* > 0: also run the issue-16 modes (EXTRA) with artefacts of this rank */
    int64_t n_extra_ds; /* over the first n drafts */
} group;

/* Issue 16's modes (see the top comment). */
typedef struct {
    const char *name;
    ms_vocab_mode vm;
    ms_dft_vsel vsel;
    int64_t k;
    double decay;
    int64_t k_min;
    const char *mode; /* a mode of the names table without a (vocab, vsel) pair (o.vocab_mode) */
} extra_mode;
static const extra_mode EXTRA[] = {
    {"specvocab", MS_VOCAB_FULL, MS_DFT_VSEL_SPECVOCAB, 12, 1.0, 0, NULL},
    {"specvocab+window", MS_VOCAB_DYNAMIC, MS_DFT_VSEL_SPECVOCAB, 6, 0.7, 2, NULL},
    {"static-decay", MS_VOCAB_STATIC, MS_DFT_VSEL_NONE, 0, 0.5, 8, NULL},
    {"static+window", MS_VOCAB_STATIC, MS_DFT_VSEL_NONE, 0, 1.0, 0, "static+window"},
};

static const struct {
    const char *name;
    ms_tree_params tree;
} SHAPES[] = {
    {"tree10/5/60", {.top_k = 10, .depth = 5, .total = 60, .chain = false}},
    {"tree4/3/16", {.top_k = 4, .depth = 3, .total = 16, .chain = false}},
    {"chain4", {.top_k = 1, .depth = 4, .total = 2, .chain = true}},
};
enum { N_SHAPES = sizeof SHAPES / sizeof SHAPES[0] };

static int64_t g_configs, g_runs, g_spec_rounds, g_accepted;

static void group_free(group *g) {
    for (int64_t i = 0; i < g->n_prompts; i++) {
        ms_ids_free(&g->prompts[i]);
        ms_ids_free(&g->ar[i]);
    }
    free(g->prompts);
    free(g->params);
    free(g->ar);
    free(g->ar_reason);
    ms_tgt_free(&g->tgt);
    ms_model_free(&g->model);
}

/* Load the target; prompts are filled by the caller afterwards. */
static ms_status group_open(group *g, const char *label, const char *dir, int64_t n_prompts) {
    memset(g, 0, sizeof *g);
    g->label = label;
    g->dir = dir;
    ms_model_opts mo = {0};
    MS_TRY(ms_model_load(dir, &mo, &g->model));
    MS_TRY(ms_tgt_new(g->model, &g->tgt));
    g->V = ms_model_vocab(g->model);
    g->n_prompts = n_prompts;
    g->shapes = (1u << N_SHAPES) - 1;
    g->prompts = ms_calloc((size_t)n_prompts, sizeof *g->prompts);
    g->params = ms_calloc((size_t)n_prompts, sizeof *g->params);
    g->ar = ms_calloc((size_t)n_prompts, sizeof *g->ar);
    g->ar_reason = ms_calloc((size_t)n_prompts, sizeof *g->ar_reason);
    if (!g->prompts || !g->params || !g->ar || !g->ar_reason) return MS_ERR_NOMEM;
    return MS_OK;
}

/* AR reference for every prompt: first without a planted stop, then (odd
 * prompts) with the id at a prompt-dependent place of that output as a stop
 * id. Writes the static list (K most frequent ids of prompts + outputs). */
static ms_status group_reference(group *g, int64_t max_new, const int32_t *eos, int64_t n_eos, const char *tmp,
                                 int64_t list_k) {
    spec_sink sink = {0};
    ms_gen_stats st;
    int64_t *counts = ms_calloc((size_t)g->V, sizeof *counts);
    if (!counts) return MS_ERR_NOMEM;
    ms_status s = MS_OK;
    for (int64_t i = 0; i < g->n_prompts && s >= 0; i++) {
        ms_gen_params p = ms_gen_params_default();
        p.max_new_tokens = max_new;
        for (int64_t e = 0; e < n_eos && p.n_stop < MS_MAX_STOP; e++) p.stop_ids[p.n_stop++] = eos[e];
        s = spec_generate(g->tgt, NULL, g->prompts[i].v, g->prompts[i].n, &p, &sink, &st);
        if (s < 0) break;
        int64_t at = 2 + i % 9;
        if (i % 2 == 1 && sink.ids.n > at && p.n_stop < MS_MAX_STOP) {
            p.stop_ids[p.n_stop++] = sink.ids.v[at];
            s = spec_generate(g->tgt, NULL, g->prompts[i].v, g->prompts[i].n, &p, &sink, &st);
            if (s < 0) break;
        }
        g->params[i] = p;
        g->ar_reason[i] = st.stop_reason;
        SPEC_CHECK(st.new_tokens == sink.ids.n, "%s prompt %lld: AR new_tokens %lld, callback %lld", g->label,
                   (long long)i, (long long)st.new_tokens, (long long)sink.ids.n);
        SPEC_CHECK(st.spec_rounds == 0 && !st.draft_failed, "%s: AR has spec rounds", g->label);
        for (int64_t k = 0; k < sink.ids.n && s >= 0; k++) s = ms_ids_push(&g->ar[i], sink.ids.v[k]);
        for (int64_t k = 0; k < sink.ids.n; k++) counts[sink.ids.v[k]] += 4;
        for (int64_t k = 0; k < g->prompts[i].n; k++) counts[g->prompts[i].v[k]]++;
    }
    int64_t stops = 0;
    for (int64_t i = 0; i < g->n_prompts; i++) stops += g->ar_reason[i] && !strcmp(g->ar_reason[i], "stop token");
    fprintf(stderr, "%s: %lld prompts, AR reference done (%lld end at a stop token)\n", g->label,
            (long long)g->n_prompts, (long long)stops);
    if (s >= 0) {
        g->list_k = list_k;
        snprintf(g->list_path, sizeof g->list_path, "%s/%s.list", tmp, g->label);
        s = spec_save_ranked_list(g->list_path, counts, g->V, list_k);
    }
    free(counts);
    ms_ids_free(&sink.ids);
    return s;
}

/* Print the first divergence and the target's top-2 gap there. */
static void explain_divergence(group *g, int64_t i, const ms_ids *got) {
    const ms_ids *ar = &g->ar[i];
    int64_t at = spec_first_diff(ar->v, ar->n, got->v, got->n);
    fprintf(stderr, "  first divergence at new token %lld: AR %d, spec %d (lengths %lld / %lld)\n", (long long)at,
            at < ar->n ? ar->v[at] : -1, at < got->n ? got->v[at] : -1, (long long)ar->n, (long long)got->n);
    ms_ids prefix = {0};
    float *logits = ms_malloc((size_t)g->V * sizeof *logits);
    bool ok = logits != NULL;
    for (int64_t k = 0; ok && k < g->prompts[i].n; k++) ok = ms_ids_push(&prefix, g->prompts[i].v[k]) >= 0;
    for (int64_t k = 0; ok && k < at && k < ar->n; k++) ok = ms_ids_push(&prefix, ar->v[k]) >= 0;
    if (ok) {
        ms_model_reset(g->model);
        if (ms_model_prefill(g->model, prefix.v, prefix.n, logits) >= 0) {
            int32_t b, s2;
            double gap = spec_top2_gap(logits, g->V, &b, &s2);
            fprintf(stderr, "  target after the common prefix: best %d, second %d, top-2 logit gap %.3g%s\n", b, s2,
                    gap, gap < 1e-4 ? " (NEAR-TIE)" : " (not a tie: a real divergence)");
        }
    }
    free(logits);
    ms_ids_free(&prefix);
}

/* One draft configuration over its share of the group's prompts. */
static void run_config(group *g, const draft_spec *ds, ms_vocab_mode vm, int64_t shape, int64_t c, const extra_mode *x) {
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = ds->kind;
    o.model_dir = ds->model_dir;
    o.target_dir = ds->target_dir;
    o.layers = ds->layers;
    o.vocab = vm;
    o.vocab_list = g->list_path;
    o.w_max = g->w_max;
    o.tree = SHAPES[shape].tree;
    o.ngram = ds->ngram;
    char art[1100];
    if (x) {
        o.vocab = x->vm;
        o.vsel = x->vsel;
        o.vocab_mode = x->mode;
        o.specvocab_k = x->k > 0 ? x->k : o.specvocab_k;
        o.budget_decay = x->decay;
        o.budget_min = x->k_min;
        /* the artefact of the model whose head the draft reads (eagle: the target's), built once */
        snprintf(art, sizeof art, "%s.sv%lld.gguf", ds->kind == MS_DRAFT_EAGLE ? ds->target_dir : ds->model_dir,
                 (long long)g->sv_rank);
        if (x->vsel != MS_DFT_VSEL_NONE && !ms_file_exists(art)) {
            ms_status bs = spec_specvocab_build(ds->kind == MS_DRAFT_EAGLE ? ds->target_dir : ds->model_dir, art,
                                                g->sv_rank);
            SPEC_CHECK(bs >= 0, "%s: building the SpecVocab artefact %s", g->label, art);
        }
        o.vocab_artifact = art;
    }
    char name[256];
    snprintf(name, sizeof name, "%s/%s/%s/%s", g->label, ds->name, x ? x->name : ms_vocab_mode_name(vm),
             SHAPES[shape].name);
    ms_dft *d = NULL;
    ms_ngd *ngd = NULL;
    ms_status s = ds->kind == MS_DRAFT_NGRAM ? ms_ngd_new(&o.ngram_p, &ngd) : ms_dft_new(&o, &d);
    SPEC_CHECK(s >= 0, "%s: ms_dft_new / ms_ngd_new: %s", name, ms_status_str(s));
    if (s < 0) return;
    g_configs++;
    ms_draft_port port = ngd ? ms_ngd_port(ngd) : ms_dft_port(d);
    spec_sink sink = {0};
    ms_gen_stats st;
    int64_t per = g->per_config < g->n_prompts ? g->per_config : g->n_prompts;
    int64_t rounds = 0, spec_rounds = 0, acc = 0, acc_ngram = 0, bad = 0;
    for (int64_t k = 0; k < per; k++) {
        int64_t i = (c * per + k) % g->n_prompts;
        ms_gen_params p = g->params[i];
        /* K_pre / K_ver only steer the dynamic window; vary them too. */
        p.k_pre = c % 4;
        p.k_ver = (c + 1) % 5;
        /* every other configuration verifies whole trees (long paths, KV compaction), the rest under the cost policy */
        p.cost_policy = c % 2 == 0;
        s = spec_generate(g->tgt, &port, g->prompts[i].v, g->prompts[i].n, &p, &sink, &st);
        g_runs++;
        SPEC_CHECK(s >= 0, "%s prompt %lld: generate: %s", name, (long long)i, ms_status_str(s));
        if (s < 0) continue;
        const ms_ids *ar = &g->ar[i];
        bool same = spec_ids_equal(sink.ids.v, sink.ids.n, ar->v, ar->n) && !strcmp(st.stop_reason, g->ar_reason[i]);
        SPEC_CHECK(same, "%s prompt %lld: speculative output differs from AR (stop '%s' vs '%s')", name, (long long)i,
                   st.stop_reason, g->ar_reason[i]);
        if (!same && bad++ < 2) explain_divergence(g, i, &sink.ids);
        SPEC_CHECK(st.new_tokens == sink.ids.n, "%s prompt %lld: new_tokens %lld, callback %lld", name, (long long)i,
                   (long long)st.new_tokens, (long long)sink.ids.n);
        SPEC_CHECK(!st.draft_failed, "%s prompt %lld: the draft failed", name, (long long)i);
        /* the n-gram draft alone proposes nothing where nothing matches, and the
         * cost policy's gate may skip the model: a plain step either way */
        SPEC_CHECK(ngd || p.cost_policy ? st.spec_rounds <= st.rounds : st.spec_rounds == st.rounds,
                   "%s prompt %lld: %lld of %lld rounds speculative", name, (long long)i, (long long)st.spec_rounds,
                   (long long)st.rounds);
        /* the accepted tokens' split by source: all the n-gram's alone, none without it */
        const int64_t a = ms_gen_stats_accepted(&st);
        SPEC_CHECK(ngd ? st.accepted_ngram == a : ds->ngram ? st.accepted_ngram >= 0 && st.accepted_ngram <= a
                                                             : st.accepted_ngram == 0,
                   "%s prompt %lld: %lld of %lld accepted tokens counted as the n-gram source's", name, (long long)i,
                   (long long)st.accepted_ngram, (long long)a);
        rounds += st.rounds;
        spec_rounds += st.spec_rounds;
        acc += a;
        acc_ngram += st.accepted_ngram;
    }
    g_spec_rounds += spec_rounds;
    g_accepted += acc;
    if (getenv("SPEC_VERBOSE"))
        fprintf(stderr, "  %-48s %lld prompts, %lld rounds, mean accepted %.2f (n-gram source %lld of %lld)\n", name,
                (long long)per, (long long)rounds, rounds ? 1.0 + (double)acc / (double)rounds : 1.0,
                (long long)acc_ngram, (long long)acc);
    ms_ids_free(&sink.ids);
    ms_dft_free(&d);
    ms_ngd_free(&ngd);
}

static void run_group(group *g, const draft_spec *ds, int64_t n_ds) {
    int64_t c = 0;
    double t0 = ms_now_s();
    int64_t before = spec_failures;
    for (int64_t k = 0; k < n_ds; k++) {
        if (ds[k].kind == MS_DRAFT_NGRAM) { /* no model: no vocabulary mode, no tree shape */
            run_config(g, &ds[k], MS_VOCAB_FULL, 0, c++, NULL);
            continue;
        }
        for (int vm = MS_VOCAB_FULL; vm <= MS_VOCAB_DYNAMIC; vm++)
            for (int64_t sh = 0; sh < N_SHAPES; sh++)
                if ((g->shapes & (1u << sh)) && (!ds[k].ngram || vm == MS_VOCAB_DYNAMIC))
                    run_config(g, &ds[k], (ms_vocab_mode)vm, sh, c++, NULL);
    }
    for (int64_t k = 0; g->sv_rank > 0 && k < n_ds && k < g->n_extra_ds; k++)
        for (size_t x = 0; x < sizeof EXTRA / sizeof EXTRA[0]; x++)
            for (int64_t sh = 0; sh < N_SHAPES; sh += 2) /* the 10/5/60 tree and the chain */
                run_config(g, &ds[k], EXTRA[x].vm, sh, c++, &EXTRA[x]);
    fprintf(stderr, "%s: %lld configurations, %s, %.1f s\n", g->label, (long long)c,
            spec_failures == before ? "all equal to AR" : "MISMATCHES", ms_now_s() - t0);
}

/* ---- groups ------------------------------------------------------------- */

/* The merged draft's n-gram-first rule (draft-node/ms_draft.c): a round
 * whose n-gram proposal is confident goes without the model (the tree's
 * backbone time is 0, the n-gram chain under the root), one without a
 * proposal runs it; the model's skipped rows are committed by the next
 * round that runs it. Scripted on the port, as the target drives it. */
static void ngram_first_check(const char *dir) {
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LAYERSKIP;
    o.model_dir = o.target_dir = dir;
    o.layers = 1;
    o.ngram = true;
    o.tree.depth = 3;
    o.pre_unbudgeted = true; /* the scripted verdicts come at once: no verify time to keep within */
    ms_dft *d = NULL;
    ms_status s = ms_dft_new(&o, &d);
    SPEC_CHECK(s >= 0, "n-gram first: ms_dft_new: %s", ms_status_str(s));
    if (s < 0) return;
    ms_draft_port port = ms_dft_port(d);
    /* 40 tokens, then their first 12 again and the 13th as the root: the suffix matches with 12 tokens of context */
    int32_t prompt[52];
    for (int i = 0; i < 40; i++) prompt[i] = 20 + (int32_t)((i * 37) % 400);
    for (int i = 0; i < 12; i++) prompt[40 + i] = prompt[i];
    ms_msg_begin b = {.request_id = 3, .prompt = prompt, .n_prompt = 52, .root = prompt[12]};
    ms_msg_tree tm;
    s = port.begin(port.ctx, &b);
    if (s >= 0) s = port.draft(port.ctx, 3, 1, &tm);
    SPEC_CHECK(s >= 0 && tm.stats.backbone_ns == 0 && tm.tree.n > 2 && tm.tree.token[1] == prompt[13] &&
                   tm.tree.token[2] == prompt[14],
               "n-gram first: a confident copy drafted without the model (backbone %llu ns, %lld nodes)",
               (unsigned long long)tm.stats.backbone_ns, (long long)tm.tree.n);
    SPEC_CHECK(s >= 0 && tm.tree.ngram == ((UINT64_C(1) << tm.tree.n) - 2),
               "n-gram first: every node of the copy marked the n-gram's (%#llx, %lld nodes)",
               (unsigned long long)tm.tree.ngram, (long long)tm.tree.n);
    /* overlap: after a tree made without the model the pre-draft commits 16 of the 53 pending rows (no bet yet) */
    int64_t hits = -1, misses = -1;
    bool hit = true;
    if (s >= 0) s = ms_dft_predraft(d);
    SPEC_CHECK(s >= 0, "overlap: a pre-draft after a model-free round catches up, not %s", ms_status_str(s));
    /* the target emits something else: no proposal now, the model runs (and commits the prompt first) */
    ms_msg_verify v = {.request_id = 3, .round = 1, .n_path = 1, .path = {0}, .bonus = 7};
    ms_msg_tree pre;
    if (s >= 0) s = ms_dft_accept_overlap(d, &v, &hit, &pre);
    ms_dft_overlap_counts(d, &hits, &misses);
    SPEC_CHECK(s >= 0 && !hit && hits == 0 && misses == 0, "overlap: no bet was counted (%s, hit %d, %lld/%lld)",
               ms_status_str(s), hit, (long long)hits, (long long)misses);
    if (s >= 0) s = port.draft(port.ctx, 3, 2, &tm);
    SPEC_CHECK(s >= 0 && tm.stats.backbone_ns > 0 && tm.tree.n > 1,
               "n-gram first: without a proposal the model drafts (backbone %llu ns, %lld nodes)",
               (unsigned long long)tm.stats.backbone_ns, (long long)tm.tree.n);
    SPEC_CHECK(s >= 0 && tm.tree.ngram == 0, "n-gram first: the model's tree has no n-gram marks (%#llx)",
               (unsigned long long)tm.tree.ngram);
    /* after a model round the bet is made; a verdict off its path drops it, and the next tree is drafted anew */
    if (s >= 0) s = ms_dft_predraft(d);
    ms_msg_verify v2 = {.request_id = 3, .round = 2, .n_path = 1, .path = {0}, .bonus = 11};
    if (s >= 0) s = ms_dft_accept_overlap(d, &v2, &hit, &pre);
    ms_dft_overlap_counts(d, &hits, &misses);
    SPEC_CHECK(s >= 0 && !hit && hits == 0 && misses == 1, "overlap: a bet made and dropped (%s, hit %d, %lld/%lld)",
               ms_status_str(s), hit, (long long)hits, (long long)misses);
    if (s >= 0) s = port.draft(port.ctx, 3, 3, &tm);
    SPEC_CHECK(s >= 0 && tm.tree.n >= 1 && tm.tree.token[0] == 11, "overlap: round 3 drafted after the drop (%s)",
               ms_status_str(s));
    port.end(port.ctx, 3);
    ms_dft_free(&d);
}

/* The first head evaluation after `armed` is set: the pre-draft's bet (its
 * bonus, the draft's top-1 after the assumed path). */
typedef struct {
    bool armed;
    int32_t bet;
} bet_probe;

static void probe_bet(void *ctx, const int32_t *tokens, int64_t n, int64_t k, const int32_t *ids, const float *logp) {
    bet_probe *b = ctx;
    (void)tokens, (void)logp;
    if (!b->armed || n != 1 || k != 1) return;
    b->bet = ids[0];
    b->armed = false;
}

/* Overlap after rounds the target's gate keeps without the model: the
 * pre-draft commits what those rounds left pending (PRE_CATCHUP rows a
 * round, ms_draft.c) while the target verifies, then bets; a verdict that
 * matches the bet gets the model's tree of the next round at once, one
 * that does not drops it (and the rows committed before the bet stay). */
static void overlap_catchup_check(const char *dir) {
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LAYERSKIP;
    o.model_dir = o.target_dir = dir;
    o.layers = 1;
    o.tree.chain = true;
    o.tree.depth = 2;
    o.pre_unbudgeted = true; /* as above */
    ms_dft *d = NULL;
    ms_status s = ms_dft_new(&o, &d);
    SPEC_CHECK(s >= 0, "overlap catch-up: ms_dft_new: %s", ms_status_str(s));
    if (s < 0) return;
    bet_probe bp = {0};
    ms_dft_set_level_hook(d, probe_bet, &bp);
    ms_draft_port port = ms_dft_port(d);
    int32_t prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = 30 + (int32_t)((i * 53) % 300);
    /* 20 prompt rows and the root pending: two pre-drafts catch up, the second bets */
    ms_msg_begin b = {.request_id = 5, .prompt = prompt, .n_prompt = 20, .root = 41, .skip_model = true};
    ms_msg_tree tm, pre = {0};
    bool hit = true;
    int64_t hits = -1, misses = -1;
    int32_t root = 41;
    s = port.begin(port.ctx, &b);
    for (int64_t round = 1; round <= 2 && s >= 0; round++) {
        s = port.draft(port.ctx, 5, round, &tm);
        SPEC_CHECK(s >= 0 && tm.tree.n == 1 && tm.stats.backbone_ns == 0,
                   "overlap catch-up: round %lld goes without the model (%s, %lld nodes)", (long long)round,
                   ms_status_str(s), (long long)tm.tree.n);
        bp.armed = true;
        if (s >= 0) s = ms_dft_predraft(d);
        SPEC_CHECK(s >= 0 && (round == 1) == bp.armed, "overlap catch-up: round %lld %s (%s)", (long long)round,
                   round == 1 ? "catches up without a bet" : "bets", ms_status_str(s));
        /* round 1: the target emits some token (no bet to match); round 2: the bet */
        root = round == 1 ? 77 : bp.bet;
        ms_msg_verify v = {.request_id = 5, .round = round, .n_path = 1, .path = {0}, .bonus = root,
                           .skip_model = true};
        if (s >= 0) s = ms_dft_accept_overlap(d, &v, &hit, &pre);
        ms_dft_overlap_counts(d, &hits, &misses);
        SPEC_CHECK(s >= 0 && hit == (round == 2) && hits == round - 1 && misses == 0,
                   "overlap catch-up: verdict %lld: %s, hit %d, %lld confirmed, %lld dropped", (long long)round,
                   ms_status_str(s), hit, (long long)hits, (long long)misses);
    }
    if (s >= 0)
        SPEC_CHECK(hit && pre.round == 3 && pre.tree.n >= 2 && pre.tree.token[0] == root && pre.stats.backbone_ns > 0,
                   "overlap catch-up: the confirmed bet is round 3's model tree (round %lld, %lld nodes, root %d)",
                   (long long)pre.round, (long long)pre.tree.n, pre.tree.token[0]);
    port.end(port.ctx, 5);
    ms_dft_free(&d);
}

static void stories_group(const char *tmp, bool small) {
    char dir[512];
    ms_status s = spec_convert_stories(tmp, dir, sizeof dir);
    if (s == MS_ERR_NOT_FOUND) {
        fprintf(stderr, "SKIP stories260K part: %s/models/stories260k absent\n", MS_SHARED_DIR);
        return;
    }
    SPEC_CHECK(s >= 0, "convert stories260K");
    if (s < 0) return;
    ngram_first_check(dir);
    overlap_catchup_check(dir);
    char **texts = NULL;
    int64_t n_texts = 0;
    s = spec_bench_prompts(24, &texts, &n_texts);
    if (s == MS_ERR_NOT_FOUND) {
        fprintf(stderr, "SKIP stories260K part: Spec-Bench questions absent\n");
        return;
    }
    SPEC_CHECK(s >= 0 && n_texts == 24, "Spec-Bench prompts: %lld", (long long)n_texts);
    ms_tok *tok = NULL;
    group g;
    s = ms_tok_load_dir(dir, &tok);
    SPEC_CHECK(s >= 0, "stories tokenizer");
    if (s >= 0) s = group_open(&g, "stories260K", dir, n_texts);
    SPEC_CHECK(s >= 0, "stories model");
    if (s >= 0) {
        for (int64_t i = 0; i < n_texts && s >= 0; i++) {
            s = ms_ids_push(&g.prompts[i], ms_tok_bos(tok));
            if (s >= 0) s = ms_tok_encode(tok, texts[i], strlen(texts[i]), false, &g.prompts[i]);
            if (g.prompts[i].n > 48) g.prompts[i].n = 48; /* attention cost grows with the context */
        }
        const int32_t *eos;
        int n_eos = ms_tok_eos(tok, &eos);
        g.per_config = small ? 1 : 6;
        g.w_max = 64;
        if (s >= 0) s = group_reference(&g, small ? 12 : 32, eos, n_eos, tmp, 128);
        SPEC_CHECK(s >= 0, "stories reference");
        if (s >= 0) {
            draft_spec ds[6];
            static const char *names[] = {"layerskip1", "layerskip2", "layerskip3", "layerskip4"};
            for (int k = 0; k < 4; k++) ds[k] = (draft_spec){names[k], MS_DRAFT_LAYERSKIP, dir, dir, k + 1, false};
            ds[4] = (draft_spec){"ngram", MS_DRAFT_NGRAM, NULL, dir, 0, false};
            ds[5] = (draft_spec){"layerskip1+ngram", MS_DRAFT_LAYERSKIP, dir, dir, 1, true};
            g.sv_rank = 16;
            g.n_extra_ds = 2;
            run_group(&g, ds, 6);
        }
        group_free(&g);
    }
    ms_tok_free(&tok);
    spec_free_strings(texts, n_texts);
}

typedef struct {
    const char *label, *arch, *target_args, *draft_args;
    int64_t V, layers;
} random_arch;

static void random_group(const char *tmp, const random_arch *ra, uint64_t seed, bool small) {
    char tdir[512], ddir[512], edir[512], name[128];
    snprintf(name, sizeof name, "%s-target", ra->label);
    ms_status s = spec_mkmodel(tmp, name, ra->target_args, tdir, sizeof tdir);
    snprintf(name, sizeof name, "%s-lm", ra->label);
    if (s >= 0) s = spec_mkmodel(tmp, name, ra->draft_args, ddir, sizeof ddir);
    snprintf(name, sizeof name, "%s-eagle", ra->label);
    if (s >= 0) s = spec_mkeagle(tmp, name, tdir, "--seed 9", edir, sizeof edir);
    SPEC_CHECK(s >= 0, "%s: making models", ra->label);
    if (s < 0) return;
    const int64_t n_prompts = 20;
    group g;
    s = group_open(&g, ra->label, tdir, n_prompts);
    SPEC_CHECK(s >= 0, "%s: loading the target", ra->label);
    if (s >= 0) {
        ms_rng rng;
        ms_rng_seed(&rng, seed);
        for (int64_t i = 0; i < n_prompts && s >= 0; i++) {
            /* every fifth longer than the 128 prompt rows an lm draft reads (ms_dft_opts.prompt_max) */
            int64_t len = i % 5 == 4 ? 129 + (int64_t)(ms_rng_u64(&rng) % 100) : 1 + (int64_t)(ms_rng_u64(&rng) % 40);
            for (int64_t k = 0; k < len && s >= 0; k++)
                s = ms_ids_push(&g.prompts[i], (int32_t)(ms_rng_u64(&rng) % (uint64_t)ra->V));
        }
        g.per_config = small ? 2 : 8;
        g.w_max = 48;
        const int32_t eos[] = {2};
        if (s >= 0) s = group_reference(&g, small ? 12 : 24, eos, 1, tmp, ra->V / 4);
        SPEC_CHECK(s >= 0, "%s: reference", ra->label);
        if (s >= 0) {
            draft_spec ds[] = {
                {"lm", MS_DRAFT_LM, ddir, tdir, 0, false},
                {"lm-self", MS_DRAFT_LM, tdir, tdir, 0, false},
                {"eagle", MS_DRAFT_EAGLE, edir, tdir, 0, false},
                {"layerskip1", MS_DRAFT_LAYERSKIP, tdir, tdir, 1, false},
                {"layerskip-all-but-1", MS_DRAFT_LAYERSKIP, tdir, tdir, ra->layers - 1, false},
                {"ngram", MS_DRAFT_NGRAM, NULL, tdir, 0, false},
                {"lm+ngram", MS_DRAFT_LM, ddir, tdir, 0, true},
                {"eagle+ngram", MS_DRAFT_EAGLE, edir, tdir, 0, true},
            };
            if (!strcmp(ra->label, "llama")) {
                g.sv_rank = 32; /* Q8_0 w_vocab; the lm draft's d is 32 */
                g.n_extra_ds = 3; /* lm, lm-self, eagle */
            }
            run_group(&g, ds, sizeof ds / sizeof ds[0]);
        }
    }
    group_free(&g);
}

static void qwen3_big_group(const char *tmp, bool small) {
    const char *tokjson = MS_SHARED_DIR "/tokenizers/qwen3/tokenizer.json";
    if (!ms_file_exists(tokjson)) {
        fprintf(stderr, "SKIP qwen3-151936 part: %s absent\n", tokjson);
        return;
    }
    char **texts = NULL;
    int64_t n_texts = 0;
    ms_status s = spec_bench_prompts(small ? 8 : 24, &texts, &n_texts);
    if (s == MS_ERR_NOT_FOUND) {
        fprintf(stderr, "SKIP qwen3-151936 part: Spec-Bench questions absent\n");
        return;
    }
    char tdir[512], ddir[512], edir[512], args[1024];
    snprintf(args, sizeof args,
             "--arch qwen3 --vocab 151936 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --ffn 48 --seed 31 "
             "--bos -1 --eos 151645 --eos 151643 --tokenizer %s",
             tokjson);
    s = spec_mkmodel(tmp, "q3big-target", args, tdir, sizeof tdir);
    if (s >= 0)
        s = spec_mkmodel(tmp, "q3big-lm",
                         "--arch qwen3 --vocab 151936 --hidden 16 --layers 1 --heads 2 --kv-heads 1 --ffn 32 "
                         "--seed 32 --bos -1 --eos 151645",
                         ddir, sizeof ddir);
    if (s >= 0) s = spec_mkeagle(tmp, "q3big-eagle", tdir, "--seed 33", edir, sizeof edir);
    SPEC_CHECK(s >= 0, "qwen3-151936: making models");
    ms_tok *tok = NULL;
    if (s >= 0) s = ms_tok_load_dir(tdir, &tok);
    SPEC_CHECK(s >= 0, "qwen3 tokenizer from the model folder");
    group g;
    if (s >= 0) s = group_open(&g, "qwen3-151936", tdir, n_texts);
    SPEC_CHECK(s >= 0, "qwen3-151936 model");
    if (s < 0) {
        ms_tok_free(&tok);
        spec_free_strings(texts, n_texts);
        return;
    }
    ms_chat_kind kind = ms_tok_chat_kind(tok);
    SPEC_CHECK(kind != MS_CHAT_NONE, "the Qwen3 tokenizer has a chat template");
    for (int64_t i = 0; i < n_texts && s >= 0; i++) {
        ms_chat_msg msg = {MS_ROLE_USER, texts[i]};
        char *r = NULL;
        s = ms_chat_render(kind, &msg, 1, true, &r);
        if (s >= 0) s = ms_tok_encode(tok, r, strlen(r), true, &g.prompts[i]);
        free(r);
    }
    SPEC_CHECK(s >= 0, "chat prompts");
    const int32_t *eos;
    int n_eos = ms_tok_eos(tok, &eos);
    /* The 151,936-row LM head dominates: the small tree and the chain only
     * (both tree and chain mode), 18 configurations × 2 prompts cover the 24. */
    g.shapes = 2u | 4u;
    g.per_config = small ? 1 : 2;
    g.w_max = 256;
    if (s >= 0) s = group_reference(&g, small ? 8 : 16, eos, n_eos, tmp, 2048);
    SPEC_CHECK(s >= 0, "qwen3-151936 reference");
    if (s >= 0) {
        draft_spec ds[] = {
            {"lm", MS_DRAFT_LM, ddir, tdir, 0, false},
            {"eagle", MS_DRAFT_EAGLE, edir, tdir, 0, false},
            {"layerskip1", MS_DRAFT_LAYERSKIP, tdir, tdir, 1, false},
            {"lm+ngram", MS_DRAFT_LM, ddir, tdir, 0, true},
        };
        run_group(&g, ds, 4);
    }
    group_free(&g);
    ms_tok_free(&tok);
    spec_free_strings(texts, n_texts);
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
    const char *only = getenv("SPEC_ONLY"); /* debugging: run one group */
    static const char *const groups[] = {"stories", "llama", "qwen2", "qwen3", "qwen3big"};
    bool known = !only;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) known = known || !strcmp(only, groups[i]);
    if (!known) { /* a mistyped name would run nothing and pass */
        fprintf(stderr, "test_spec_equiv: FAIL: SPEC_ONLY=%s names no group (stories llama qwen2 qwen3 qwen3big)\n",
                only);
        ms_test_rmtree(tmp);
        return 1;
    }

    if (!only || !strcmp(only, "stories")) stories_group(tmp, small);
    static const random_arch RA[] = {
        {"llama", "llama",
         "--arch llama --vocab 400 --hidden 48 --layers 3 --heads 6 --kv-heads 2 --ffn 96 --seed 11", 
         "--arch llama --vocab 400 --hidden 32 --layers 1 --heads 4 --kv-heads 4 --seed 111", 400, 3},
        {"qwen2", "qwen2",
         "--arch qwen2 --vocab 512 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --tie 1 --seed 12",
         "--arch qwen2 --vocab 512 --hidden 32 --layers 1 --heads 2 --kv-heads 1 --tie 1 --seed 112", 512, 2},
        {"qwen3", "qwen3",
         "--arch qwen3 --vocab 333 --hidden 64 --layers 3 --heads 4 --kv-heads 1 --seed 13",
         "--arch qwen3 --vocab 333 --hidden 32 --layers 1 --heads 4 --kv-heads 2 --seed 113", 333, 3},
    };
    for (int a = 0; a < 3; a++)
        if (!only || !strcmp(only, RA[a].label)) random_group(tmp, &RA[a], 1000 + (uint64_t)a, small);
    if (!only || !strcmp(only, "qwen3big")) qwen3_big_group(tmp, small);

    ms_test_rmtree(tmp);
    fprintf(stderr, "%lld configurations, %lld speculative runs, %lld speculative rounds, %.2f draft tokens "
                    "accepted per round; %.1f s\n",
            (long long)g_configs, (long long)g_runs, (long long)g_spec_rounds,
            g_spec_rounds ? (double)g_accepted / (double)g_spec_rounds : 0.0, ms_now_s() - t0);
    if (spec_failures) {
        fprintf(stderr, "test_spec_equiv: %d check(s) FAILED\n", spec_failures);
        return 1;
    }
    if (g_runs == 0) {
        fprintf(stderr, "test_spec_equiv: FAIL: no speculative run\n");
        return 1;
    }
    fprintf(stderr, "test_spec_equiv: OK\n");
    return 0;
}
