/* test_spec_stats.c — the per-request statistics (ms_gen_stats, docs/architecture.md §8)
 * agree with what actually crossed the draft port and the token callback.
 *
 * Every run goes through a recording port (spec_util.c) around the real draft,
 * so the test knows each round's accepted path length (ms_msg_verify.n_path)
 * and each callback batch. Checked for AR, lm (random and the target itself),
 * eagle and layerskip drafts over full / static / dynamic vocabularies, tree
 * and chain, greedy and sampled, with stops at max tokens, stop ids, a cancel,
 * and a context that fills up:
 *   - Σ over rounds of emitted tokens (n_path = accepted + bonus) equals
 *     rounds + Σ_d accepted_ge[d]; new_tokens = 1 (prefill) + the rounds
 *     before the last + the part of the last round kept by the stop/max cut;
 *     callback batches are exactly the rounds' emissions, in order;
 *   - accept_rate(d) non-increasing in d, 0 past max_depth, ≤ 1;
 *     max_depth ≤ the tree's depth; mean accepted length = (rounds + Σ
 *     accepted) / rounds, exactly 1.00 for AR;
 *   - coverage ∈ [0, 1], == 1 for full; covered / emitted are the emitted
 *     tokens of all rounds reported back to the draft;
 *   - spec_rounds == rounds for a healthy draft, 0 for AR;
 *   - vocabulary: full → V every round, static → K, dynamic → 1..W_max;
 *   - times non-negative and nested (prefill + verify + accept ≤ total);
 *   - max_new_tokens 0 and 1.
 */
#include "spec_util.h"

#include <stdlib.h>
#include <string.h>

#define V_T 300

typedef struct {
    const char *name;
    ms_draft_kind kind;
    int model;           /* 0 target itself, 1 random lm, 2 eagle */
    ms_vocab_mode vocab;
    ms_tree_params tree;
    int64_t w_max;
    int64_t layers;
} stat_config;

static int64_t g_checked_runs;

static bool contains(const int32_t *v, int64_t n, int32_t x) {
    for (int64_t i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

/* All checks of one run; cf == NULL (and w == NULL) for AR. */
static void check_run(const char *name, const ms_gen_stats *st, const spec_sink *sink, const spec_wrap *w,
                      const ms_gen_params *p, int64_t n_prompt, const stat_config *cf, int64_t list_k) {
    g_checked_runs++;
    const bool spec = cf != NULL;
    SPEC_CHECK(st->prompt_tokens == n_prompt, "%s: prompt_tokens %lld", name, (long long)st->prompt_tokens);
    SPEC_CHECK(st->new_tokens == sink->ids.n, "%s: new_tokens %lld, callback saw %lld", name, (long long)st->new_tokens,
               (long long)sink->ids.n);
    SPEC_CHECK(!st->draft_failed, "%s: draft failed", name);
    for (int64_t i = 0; i < sink->ids.n; i++)
        SPEC_CHECK(!contains(p->stop_ids, p->n_stop, sink->ids.v[i]), "%s: stop id %d emitted at %lld", name,
                   sink->ids.v[i], (long long)i);
    const char *why = st->stop_reason ? st->stop_reason : "(null)";
    const bool by_max = !strcmp(why, "max tokens"), by_stop = !strcmp(why, "stop token"),
               by_cancel = !strcmp(why, "cancelled"), by_ctx = !strcmp(why, "context full");
    SPEC_CHECK(by_max || by_stop || by_cancel || by_ctx, "%s: stop reason '%s'", name, why);
    if (by_max) SPEC_CHECK(st->new_tokens == p->max_new_tokens, "%s: max tokens at %lld", name, (long long)st->new_tokens);
    else SPEC_CHECK(st->new_tokens < p->max_new_tokens, "%s: %s after %lld tokens", name, why, (long long)st->new_tokens);

    /* ---- rounds and emitted tokens ---- */
    int64_t acc = 0;
    for (int64_t d = 1; d <= MS_TREE_MAX; d++) acc += st->accepted_ge[d];
    const int64_t produced = st->rounds + acc; /* Σ over rounds of n_path */
    SPEC_CHECK(st->spec_rounds == (spec ? st->rounds : 0), "%s: %lld speculative rounds of %lld", name,
               (long long)st->spec_rounds, (long long)st->rounds);
    SPEC_CHECK(st->accepted_ge[0] == 0, "%s: accepted_ge[0] = %lld", name, (long long)st->accepted_ge[0]);
    if (!spec) {
        SPEC_CHECK(acc == 0 && st->max_depth == 0, "%s: AR accepted %lld", name, (long long)acc);
        SPEC_CHECK(ms_gen_stats_mean_accepted(st) == 1.0, "%s: AR mean accepted %.6f", name,
                   ms_gen_stats_mean_accepted(st));
        SPEC_CHECK(st->vocab_sum == 0 && st->vocab_max == 0 && st->emitted == 0, "%s: AR vocabulary stats", name);
        SPEC_CHECK(ms_gen_stats_coverage(st) == 1.0, "%s: AR coverage", name);
    }
    if (st->new_tokens > 0) {
        /* rounds whose verdict reached the draft: all but the last, or all when the context filled */
        int64_t told = spec ? w->n_accept : (by_ctx ? st->rounds : (st->rounds > 0 ? st->rounds - 1 : 0));
        int64_t told_sum = spec ? w->sum_path : told;
        SPEC_CHECK(told == (by_ctx ? st->rounds : (st->rounds > 0 ? st->rounds - 1 : 0)),
                   "%s: %lld verdicts for %lld rounds (%s)", name, (long long)told, (long long)st->rounds, why);
        int64_t last = produced - told_sum; /* n_path of the last round (0 if none ran after the last verdict) */
        int64_t kept = st->new_tokens - 1 - told_sum;
        SPEC_CHECK(last >= (by_ctx || st->rounds == 0 ? 0 : 1) && last <= MS_TREE_MAX,
                   "%s: last round emitted %lld (produced %lld, told %lld)", name, (long long)last, (long long)produced,
                   (long long)told_sum);
        SPEC_CHECK(kept >= 0 && kept <= last, "%s: the last round kept %lld of %lld tokens", name, (long long)kept,
                   (long long)last);
        if (by_stop) SPEC_CHECK(kept < last, "%s: stop token but the whole last round was kept", name);
        if (by_ctx) SPEC_CHECK(kept == 0, "%s: context full with %lld tokens after the last verdict", name, (long long)kept);
        /* callback batches: the prefill token, then one per round */
        int64_t want_batches = 1 + told + (kept > 0 ? 1 : 0);
        SPEC_CHECK(sink->batches == want_batches, "%s: %lld callback batches, expected %lld", name,
                   (long long)sink->batches, (long long)want_batches);
        SPEC_CHECK(sink->batch_n[0] == 1, "%s: first batch of %lld", name, (long long)sink->batch_n[0]);
        if (spec)
            for (int64_t r = 0; r < told && r + 1 < sink->batches && r < 512; r++)
                SPEC_CHECK(sink->batch_n[r + 1] == w->paths[r], "%s: round %lld emitted %lld, its verdict had %lld",
                           name, (long long)(r + 1), (long long)sink->batch_n[r + 1], (long long)w->paths[r]);
    } else {
        SPEC_CHECK(st->rounds == 0 && sink->batches == 0, "%s: nothing emitted but %lld rounds", name,
                   (long long)st->rounds);
    }

    /* ---- acceptance by depth ---- */
    int64_t tree_depth = cf ? cf->tree.depth + 1 : 0;
    SPEC_CHECK(st->max_depth <= tree_depth, "%s: max_depth %lld > tree depth %lld", name, (long long)st->max_depth,
               (long long)tree_depth);
    SPEC_CHECK(st->max_depth == 0 || st->accepted_ge[st->max_depth] > 0, "%s: accepted_ge[max_depth] = 0", name);
    double prev = 1.0;
    for (int64_t d = 1; d <= MS_TREE_MAX; d++) {
        double r = ms_gen_stats_accept_rate(st, d);
        SPEC_CHECK(r >= 0.0 && r <= prev, "%s: accept_rate(%lld) = %.4f after %.4f", name, (long long)d, r, prev);
        if (d > st->max_depth) SPEC_CHECK(r == 0.0 && st->accepted_ge[d] == 0, "%s: depth %lld past max", name, (long long)d);
        prev = r;
    }
    SPEC_CHECK(ms_gen_stats_accept_rate(st, 0) == 0.0, "%s: accept_rate(0)", name);
    if (st->rounds > 0) {
        double want = (double)produced / (double)st->rounds, got = ms_gen_stats_mean_accepted(st);
        SPEC_CHECK(got == want && got >= 1.0 && got <= 1.0 + (double)tree_depth, "%s: mean accepted %.4f, want %.4f",
                   name, got, want);
    }

    /* ---- coverage and vocabulary ---- */
    double cov = ms_gen_stats_coverage(st);
    SPEC_CHECK(cov >= 0.0 && cov <= 1.0 && st->covered <= st->emitted, "%s: coverage %.4f (%lld/%lld)", name, cov,
               (long long)st->covered, (long long)st->emitted);
    if (spec) {
        /* the draft reports round r's coverage with round r + 1's tree */
        int64_t want_emitted = w->sum_path - (by_ctx && w->n_accept > 0 ? w->last_path : 0);
        SPEC_CHECK(st->emitted == want_emitted, "%s: emitted %lld, verdicts carried %lld", name,
                   (long long)st->emitted, (long long)want_emitted);
        if (cf->vocab == MS_VOCAB_FULL)
            SPEC_CHECK(cov == 1.0 && st->vocab_max == (st->spec_rounds ? V_T : 0) && st->vocab_sum == V_T * st->spec_rounds,
                       "%s: full vocabulary: coverage %.4f, max %lld, sum %lld", name, cov, (long long)st->vocab_max,
                       (long long)st->vocab_sum);
        if (cf->vocab == MS_VOCAB_STATIC)
            SPEC_CHECK(st->vocab_max == (st->spec_rounds ? list_k : 0) && st->vocab_sum == list_k * st->spec_rounds,
                       "%s: static vocabulary: max %lld, sum %lld, K %lld", name, (long long)st->vocab_max,
                       (long long)st->vocab_sum, (long long)list_k);
        if (cf->vocab == MS_VOCAB_DYNAMIC)
            SPEC_CHECK(st->spec_rounds == 0 || (st->vocab_max >= 1 && st->vocab_max <= cf->w_max &&
                                                st->vocab_sum >= st->spec_rounds &&
                                                st->vocab_sum <= st->vocab_max * st->spec_rounds),
                       "%s: dynamic vocabulary: max %lld (W_max %lld), sum %lld over %lld rounds", name,
                       (long long)st->vocab_max, (long long)cf->w_max, (long long)st->vocab_sum,
                       (long long)st->spec_rounds);
    }

    /* ---- times ---- */
    SPEC_CHECK(st->prefill_s >= 0 && st->draft_backbone_s >= 0 && st->draft_head_s >= 0 && st->vocab_s >= 0 &&
                   st->verify_s >= 0 && st->accept_s >= 0 && st->total_s >= 0,
               "%s: negative time", name);
    SPEC_CHECK(st->prefill_s + st->verify_s + st->accept_s <= st->total_s * (1 + 1e-9) + 1e-9,
               "%s: prefill %.6f + verify %.6f + accept %.6f > total %.6f", name, st->prefill_s, st->verify_s,
               st->accept_s, st->total_s);
}

int main(void) {
    ms_log_set_level(MS_LOG_WARN);
    const bool small = spec_small();
    char tmp[256], tdir[512], ldir[512], edir[512], list[512];
    if (!ms_test_tmpdir("ms-spec-test", tmp, sizeof tmp)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = ms_now_s();
    ms_model *model = NULL, *small_ctx = NULL;
    ms_tgt *tgt = NULL, *tgt_ctx = NULL;
    ms_status s = spec_mkmodel(tmp, "target",
                               "--arch qwen3 --vocab 300 --hidden 48 --layers 3 --heads 4 --kv-heads 2 --seed 51",
                               tdir, sizeof tdir);
    if (s >= 0)
        s = spec_mkmodel(tmp, "lm", "--arch qwen3 --vocab 300 --hidden 32 --layers 1 --heads 2 --kv-heads 1 --seed 52",
                         ldir, sizeof ldir);
    if (s >= 0) s = spec_mkeagle(tmp, "eagle", tdir, "--seed 53", edir, sizeof edir);
    ms_model_opts mo = {0}, mo_ctx = {.max_ctx = 48};
    if (s >= 0) s = ms_model_load(tdir, &mo, &model);
    if (s >= 0) s = ms_tgt_new(model, &tgt);
    if (s >= 0) s = ms_model_load(tdir, &mo_ctx, &small_ctx);
    if (s >= 0) s = ms_tgt_new(small_ctx, &tgt_ctx);
    const int64_t list_k = 75;
    snprintf(list, sizeof list, "%s/static.list", tmp);
    {
        int64_t counts[V_T] = {0};
        for (int i = 0; i < V_T; i++) counts[i] = (i * 7919) % 101; /* an arbitrary ranking */
        if (s >= 0) s = spec_save_ranked_list(list, counts, V_T, list_k);
    }
    SPEC_CHECK(s >= 0, "setup");
    if (s < 0) goto done;

    const stat_config CONFIGS[] = {
        {"AR", MS_DRAFT_LM, -1, MS_VOCAB_FULL, {0}, 0, 0},
        {"lm-self/full/chain4", MS_DRAFT_LM, 0, MS_VOCAB_FULL, {.top_k = 1, .depth = 4, .total = 2, .chain = true}, 0, 0},
        {"lm-self/dynamic(W=3072)/tree", MS_DRAFT_LM, 0, MS_VOCAB_DYNAMIC, {.top_k = 10, .depth = 5, .total = 60}, 3072, 0},
        {"lm/full/tree", MS_DRAFT_LM, 1, MS_VOCAB_FULL, {.top_k = 10, .depth = 5, .total = 60}, 0, 0},
        {"layerskip2/dynamic(W=32)/tree4/3/16", MS_DRAFT_LAYERSKIP, 0, MS_VOCAB_DYNAMIC,
         {.top_k = 4, .depth = 3, .total = 16}, 32, 2},
        {"eagle/static(K=75)/tree", MS_DRAFT_EAGLE, 2, MS_VOCAB_STATIC, {.top_k = 8, .depth = 4, .total = 40}, 0, 0},
        {"layerskip1/static(K=75)/chain6", MS_DRAFT_LAYERSKIP, 0, MS_VOCAB_STATIC,
         {.top_k = 1, .depth = 6, .total = 2, .chain = true}, 0, 1},
    };
    const int n_prompts = small ? 2 : 6;
    spec_sink sink = {0};
    ms_gen_stats st;
    for (size_t c = 0; c < sizeof CONFIGS / sizeof CONFIGS[0]; c++) {
        const stat_config *cf = &CONFIGS[c];
        ms_dft *d = NULL;
        if (cf->model >= 0) {
            ms_dft_opts o = ms_dft_opts_default();
            o.kind = cf->kind;
            o.model_dir = cf->model == 0 ? tdir : cf->model == 1 ? ldir : edir;
            o.target_dir = tdir;
            o.vocab = cf->vocab;
            o.vocab_list = list;
            o.w_max = cf->w_max ? cf->w_max : 3072;
            o.tree = cf->tree;
            o.layers = cf->layers ? cf->layers : 1;
            s = ms_dft_new(&o, &d);
            SPEC_CHECK(s >= 0, "%s: ms_dft_new", cf->name);
            if (s < 0) continue;
        }
        spec_wrap w = {.fault = SPEC_FAULT_NONE, .V = V_T};
        if (d) w.inner = ms_dft_port(d);
        ms_draft_port port = spec_wrap_port(&w, d ? w.inner.wants_features : false);
        double mean_acc_greedy = 0.0;
        int64_t n_greedy = 0;
        ms_rng rng;
        ms_rng_seed(&rng, 600 + c);
        for (int i = 0; i < n_prompts; i++) {
            int32_t prompt[40];
            int64_t n = 3 + (int64_t)(ms_rng_u64(&rng) % 30);
            for (int64_t k = 0; k < n; k++) prompt[k] = (int32_t)(ms_rng_u64(&rng) % V_T);
            /* variants: greedy max, greedy with a stop id, sampled, cancelled, context full */
            for (int v = 0; v < 5; v++) {
                ms_gen_params p = ms_gen_params_default();
                p.cost_policy = false; /* these checks are about what the draft proposes: verify all of it */
                p.max_new_tokens = 40;
                ms_tgt *t = tgt;
                sink.cancel_after = 0;
                if (v == 1) {
                    /* a stop id from a greedy run: the token at 5 + i */
                    spec_wrap_reset(&w, 1);
                    s = spec_generate(tgt, d ? &port : NULL, prompt, n, &p, &sink, &st);
                    if (s >= 0 && sink.ids.n > 5 + i) p.stop_ids[p.n_stop++] = sink.ids.v[5 + i];
                }
                if (v == 2) {
                    p.sampling = (ms_k_sampling){.temperature = 0.8f, .top_p = 0.95f};
                    p.seed = 9000 + (uint64_t)i;
                }
                if (v == 3) sink.cancel_after = 7 + i;
                if (v == 4) {
                    t = tgt_ctx; /* 48 rows: fills before 40 new tokens for most prompts */
                    p.max_new_tokens = 100;
                }
                spec_wrap_reset(&w, 1);
                s = spec_generate(t, d ? &port : NULL, prompt, n, &p, &sink, &st);
                char name[256];
                snprintf(name, sizeof name, "%s prompt %d variant %d", cf->name, i, v);
                SPEC_CHECK(s >= 0, "%s: generate %s", name, ms_status_str(s));
                if (s < 0) continue;
                if (v == 3) SPEC_CHECK(!strcmp(st.stop_reason, "cancelled") && sink.ids.n >= 7 + i,
                                       "%s: cancel gave '%s' after %lld", name, st.stop_reason, (long long)sink.ids.n);
                if (v == 4) SPEC_CHECK(!strcmp(st.stop_reason, "context full") && st.new_tokens == 1 + 48 - n,
                                       "%s: '%s' after %lld tokens (want context full after %lld)", name,
                                       st.stop_reason, (long long)st.new_tokens, (long long)(1 + 48 - n));
                if (v == 1) SPEC_CHECK(p.n_stop == 1 && !strcmp(st.stop_reason, "stop token"), "%s: stop '%s'", name,
                                       st.stop_reason);
                /* a tree that would not fit the context falls back to one node: not speculative */
                if (v == 4 && d) {
                    SPEC_CHECK(st.spec_rounds <= st.rounds, "%s: spec rounds", name);
                    continue;
                }
                check_run(name, &st, &sink, d ? &w : NULL, &p, n, d ? cf : NULL, list_k);
                if (v == 0) {
                    mean_acc_greedy += ms_gen_stats_mean_accepted(&st);
                    n_greedy++;
                }
            }
        }
        mean_acc_greedy /= (double)(n_greedy ? n_greedy : 1);
        fprintf(stderr, "  %-40s greedy mean accepted length %.2f\n", cf->name, mean_acc_greedy);
        /* The target drafting for itself in a chain of 5: every draft token is the
         * target's own argmax, so nearly all rounds accept the whole chain. */
        if (c == 1)
            SPEC_CHECK(mean_acc_greedy >= 5.0, "%s: mean accepted %.2f, expected ≥ 5 of 6", cf->name, mean_acc_greedy);
        if (c == 0) SPEC_CHECK(mean_acc_greedy == 1.0, "AR mean accepted %.3f", mean_acc_greedy);
        ms_dft_free(&d);
    }

    /* max_new_tokens 0 and 1 */
    {
        ms_dft_opts o = ms_dft_opts_default();
        o.kind = MS_DRAFT_LAYERSKIP;
        o.model_dir = tdir;
        ms_dft *d = NULL;
        s = ms_dft_new(&o, &d);
        SPEC_CHECK(s >= 0, "layerskip draft");
        if (s >= 0) {
            ms_draft_port port = ms_dft_port(d);
            const int32_t prompt[] = {5, 6, 7};
            for (int64_t mx = 0; mx <= 1; mx++) {
                ms_gen_params p = ms_gen_params_default();
                p.cost_policy = false; /* these checks are about what the draft proposes: verify all of it */
                p.max_new_tokens = mx;
                s = spec_generate(tgt, &port, prompt, 3, &p, &sink, &st);
                SPEC_CHECK(s >= 0 && st.new_tokens == mx && sink.ids.n == mx && st.rounds == 0 &&
                               st.spec_rounds == 0 && !strcmp(st.stop_reason, "max tokens"),
                           "max_new_tokens %lld: %lld tokens, %lld rounds, '%s'", (long long)mx,
                           (long long)st.new_tokens, (long long)st.rounds, st.stop_reason);
            }
            FILE *devnull = fopen("/dev/null", "w");
            if (devnull) {
                ms_gen_stats_print(&st, devnull);
                fclose(devnull);
            }
        }
        ms_dft_free(&d);
    }
    /* A draft whose context is the target's own (48 rows) drafts up to the end:
     * it keeps room for a tree past the target's context, so it never fails
     * first (it did: "draft KV full" near the end of every long generation). */
    {
        ms_dft_opts o = ms_dft_opts_default();
        o.kind = MS_DRAFT_LAYERSKIP;
        o.model_dir = tdir;
        o.max_ctx = 48;
        o.tree = (ms_tree_params){.top_k = 4, .depth = 3, .total = 16};
        ms_dft *d = NULL;
        s = ms_dft_new(&o, &d);
        SPEC_CHECK(s >= 0, "layerskip draft, max_ctx 48");
        ms_ids ar = {0};
        for (int i = 0; s >= 0 && i < 4; i++) {
            ms_draft_port port = ms_dft_port(d);
            const int32_t prompt[] = {5 + i, 6, 7, 8 + i};
            ms_gen_params p = ms_gen_params_default();
            p.cost_policy = false; /* these checks are about what the draft proposes: verify all of it */
            p.max_new_tokens = 100;
            s = spec_generate(tgt_ctx, NULL, prompt, 4, &p, &sink, &st);
            ar.n = 0;
            for (int64_t k = 0; s >= 0 && k < sink.ids.n; k++) (void)ms_ids_push(&ar, sink.ids.v[k]);
            if (s >= 0) s = spec_generate(tgt_ctx, &port, prompt, 4, &p, &sink, &st);
            SPEC_CHECK(s >= 0 && !st.draft_failed && st.spec_rounds > 0 && !strcmp(st.stop_reason, "context full"),
                       "ctx-end prompt %d: %s, draft_failed %d, %lld spec rounds, '%s'", i, ms_status_str(s),
                       (int)st.draft_failed, (long long)st.spec_rounds, st.stop_reason);
            SPEC_CHECK(sink.ids.n == ar.n && (ar.n == 0 || !memcmp(sink.ids.v, ar.v, (size_t)ar.n * sizeof(int32_t))),
                       "ctx-end prompt %d: speculative output differs from AR", i);
        }
        /* a prompt that leaves one row: the draft is still asked for a tree */
        if (s >= 0) {
            ms_draft_port port = ms_dft_port(d);
            int32_t prompt[47];
            for (int k = 0; k < 47; k++) prompt[k] = (int32_t)(3 + (k * 37) % (V_T - 3));
            ms_gen_params p = ms_gen_params_default();
            p.cost_policy = false; /* these checks are about what the draft proposes: verify all of it */
            p.max_new_tokens = 10;
            s = spec_generate(tgt_ctx, &port, prompt, 47, &p, &sink, &st);
            SPEC_CHECK(s >= 0 && !st.draft_failed && !strcmp(st.stop_reason, "context full"),
                       "47-token prompt in 48 rows: %s, draft_failed %d, '%s'", ms_status_str(s),
                       (int)st.draft_failed, st.stop_reason);
        }
        ms_ids_free(&ar);
        ms_dft_free(&d);
    }
    ms_ids_free(&sink.ids);

done:
    ms_tgt_free(&tgt);
    ms_tgt_free(&tgt_ctx);
    ms_model_free(&model);
    ms_model_free(&small_ctx);
    ms_test_rmtree(tmp);
    fprintf(stderr, "%lld runs checked, %.1f s\n", (long long)g_checked_runs, ms_now_s() - t0);
    if (spec_failures) {
        fprintf(stderr, "test_spec_stats: %d check(s) FAILED\n", spec_failures);
        return 1;
    }
    fprintf(stderr, "test_spec_stats: OK\n");
    return 0;
}
