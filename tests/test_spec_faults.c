/* test_spec_faults.c — a wrong or failing draft never changes the output.
 *
 * The real draft (ms_dft_port: lm / eagle / layerskip) is wrapped by a port
 * (spec_util.c) that
 *   - corrupts every tree it returns (tokens replaced by random ids, structure
 *     kept valid; all of them, or 30 %),
 *   - returns the root alone (nothing to verify),
 *   - once, at a given round: a structurally invalid tree (parent not before
 *     the node, wrong depth, mask without the root bit, n = 0, n > 64, a
 *     negative token), a tree for another round / request, a wrong root, a
 *     token ≥ V, an error from draft(), an error from accept(), or an error
 *     from begin();
 *   - or replaces the draft by an oracle that knows the greedy continuation and
 *     hides it among decoy siblings (plus traps: the right next token under a
 *     wrong parent).
 * Greedy output and stop reason must equal the target alone; draft_failed is
 * set exactly for the failing variants, the speculative round count stops
 * where the fault hit, end() is called once per request, and the same draft
 * object serves a clean request right after a failed one. The oracle must be
 * accepted deep (mean accepted length well above 1), and a context that fills
 * up mid-request must end the same way ("context full") with and without it.
 */
#include "spec_util.h"

#include <stdlib.h>
#include <string.h>

#define N_PROMPTS 6
#define MAX_NEW 24

typedef struct {
    ms_tgt *tgt;
    ms_model *model;
    int64_t V;
    ms_ids prompts[N_PROMPTS];
    ms_ids ar[N_PROMPTS];
    const char *ar_reason[N_PROMPTS];
    int64_t ar_rounds[N_PROMPTS];
    ms_gen_params p;
} fixture;

static ms_status make_reference(fixture *f) {
    spec_sink sink = {0};
    ms_gen_stats st;
    for (int i = 0; i < N_PROMPTS; i++) {
        MS_TRY(spec_generate(f->tgt, NULL, f->prompts[i].v, f->prompts[i].n, &f->p, &sink, &st));
        f->ar[i].n = 0;
        for (int64_t k = 0; k < sink.ids.n; k++) MS_TRY(ms_ids_push(&f->ar[i], sink.ids.v[k]));
        f->ar_reason[i] = st.stop_reason;
        f->ar_rounds[i] = st.rounds;
    }
    ms_ids_free(&sink.ids);
    return MS_OK;
}

typedef struct {
    const char *name;
    spec_fault fault;
    int64_t round;
    int structure_kind;
    double corrupt_p;
} variant;

static const variant VARIANTS[] = {
    {"corrupt-all", SPEC_FAULT_CORRUPT, 0, 0, 1.0},
    {"corrupt-30%", SPEC_FAULT_CORRUPT, 0, 0, 0.3},
    {"root-only", SPEC_FAULT_ROOT_ONLY, 0, 0, 0},
    {"parent-not-before", SPEC_FAULT_STRUCTURE, 2, 0, 0},
    {"bad-depth", SPEC_FAULT_STRUCTURE, 2, 1, 0},
    {"mask-no-root", SPEC_FAULT_STRUCTURE, 3, 2, 0},
    {"n=0", SPEC_FAULT_STRUCTURE, 1, 3, 0},
    {"n>64", SPEC_FAULT_STRUCTURE, 2, 4, 0},
    {"negative-token", SPEC_FAULT_STRUCTURE, 3, 5, 0},
    {"wrong-round", SPEC_FAULT_WRONG_ROUND, 2, 0, 0},
    {"wrong-request", SPEC_FAULT_WRONG_REQUEST, 3, 0, 0},
    {"wrong-root", SPEC_FAULT_WRONG_ROOT, 2, 0, 0},
    {"token>=V", SPEC_FAULT_TOKEN_RANGE, 1, 0, 0},
    {"draft-error-r1", SPEC_FAULT_DRAFT_STATUS, 1, 0, 0},
    {"draft-error-r3", SPEC_FAULT_DRAFT_STATUS, 3, 0, 0},
    {"accept-error-r2", SPEC_FAULT_ACCEPT_STATUS, 2, 0, 0},
    {"begin-error", SPEC_FAULT_BEGIN_STATUS, 0, 0, 0},
};
enum { N_VARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };

static bool variant_fails(const variant *v) {
    return v->fault != SPEC_FAULT_NONE && v->fault != SPEC_FAULT_CORRUPT && v->fault != SPEC_FAULT_ROOT_ONLY &&
           v->fault != SPEC_FAULT_ORACLE;
}

static bool same_as_ar(const fixture *f, int i, const spec_sink *s, const ms_gen_stats *st) {
    return spec_ids_equal(s->ids.v, s->ids.n, f->ar[i].v, f->ar[i].n) && !strcmp(st->stop_reason, f->ar_reason[i]);
}

static void run_variants(fixture *f, const char *draft_name, ms_dft *d, int64_t prompts) {
    ms_draft_port inner = ms_dft_port(d);
    spec_sink sink = {0};
    ms_gen_stats st;
    int64_t before = spec_failures;
    for (int v = 0; v < N_VARIANTS; v++) {
        const variant *va = &VARIANTS[v];
        spec_wrap w = {.inner = inner, .fault = va->fault, .fault_round = va->round,
                       .structure_kind = va->structure_kind, .corrupt_p = va->corrupt_p, .V = f->V};
        ms_draft_port port = spec_wrap_port(&w, inner.wants_features);
        for (int i = 0; i < prompts; i++) {
            spec_wrap_reset(&w, 100 + (uint64_t)(v * 31 + i));
            ms_status s = spec_generate(f->tgt, &port, f->prompts[i].v, f->prompts[i].n, &f->p, &sink, &st);
            SPEC_CHECK(s >= 0, "%s/%s prompt %d: generate failed: %s (a draft fault must not fail the request)",
                       draft_name, va->name, i, ms_status_str(s));
            SPEC_CHECK(same_as_ar(f, i, &sink, &st), "%s/%s prompt %d: output differs from AR (%lld vs %lld tokens, %s vs %s)",
                       draft_name, va->name, i, (long long)sink.ids.n, (long long)f->ar[i].n, st.stop_reason,
                       f->ar_reason[i]);
            SPEC_CHECK(st.draft_failed == variant_fails(va), "%s/%s prompt %d: draft_failed %d", draft_name, va->name,
                       i, st.draft_failed);
            SPEC_CHECK(w.n_begin == 1 && w.n_end == 1 && w.order_ok,
                       "%s/%s prompt %d: begin %lld, end %lld, order %d", draft_name, va->name, i,
                       (long long)w.n_begin, (long long)w.n_end, w.order_ok);
            int64_t want_spec = -1; /* −1: not predicted exactly */
            switch (va->fault) {
            case SPEC_FAULT_BEGIN_STATUS: want_spec = 0; break;
            case SPEC_FAULT_ROOT_ONLY: want_spec = 0; break;
            case SPEC_FAULT_ACCEPT_STATUS: want_spec = va->round; break;
            case SPEC_FAULT_CORRUPT: want_spec = st.rounds; break;
            default:
                if (variant_fails(va)) want_spec = va->round - 1;
            }
            if (want_spec >= 0)
                SPEC_CHECK(st.spec_rounds == want_spec, "%s/%s prompt %d: %lld speculative rounds, expected %lld",
                           draft_name, va->name, i, (long long)st.spec_rounds, (long long)want_spec);
            if (va->fault == SPEC_FAULT_ROOT_ONLY || va->fault == SPEC_FAULT_BEGIN_STATUS)
                SPEC_CHECK(st.rounds == f->ar_rounds[i], "%s/%s: %lld rounds, AR %lld", draft_name, va->name,
                           (long long)st.rounds, (long long)f->ar_rounds[i]);
            if (va->fault == SPEC_FAULT_BEGIN_STATUS)
                SPEC_CHECK(w.n_draft == 0, "%s: draft() called after begin() failed", draft_name);
            else if (variant_fails(va) && va->fault != SPEC_FAULT_ACCEPT_STATUS)
                SPEC_CHECK(w.n_draft == va->round, "%s/%s: draft() called %lld times after failing at round %lld",
                           draft_name, va->name, (long long)w.n_draft, (long long)va->round);

            /* The same draft object right after: a clean request. */
            if (variant_fails(va)) {
                spec_wrap clean = {.inner = inner, .fault = SPEC_FAULT_NONE, .V = f->V};
                spec_wrap_reset(&clean, 1);
                ms_draft_port cp = spec_wrap_port(&clean, inner.wants_features);
                s = spec_generate(f->tgt, &cp, f->prompts[i].v, f->prompts[i].n, &f->p, &sink, &st);
                SPEC_CHECK(s >= 0 && same_as_ar(f, i, &sink, &st) && !st.draft_failed &&
                               st.spec_rounds == st.rounds,
                           "%s: a clean request after %s: status %d, failed %d, %lld/%lld spec rounds", draft_name,
                           va->name, s, st.draft_failed, (long long)st.spec_rounds, (long long)st.rounds);
            }
        }
    }
    fprintf(stderr, "%s: %d fault variants × %lld prompts: %s\n", draft_name, N_VARIANTS, (long long)prompts,
            spec_failures == before ? "output == AR, failures flagged" : "FAILED");
    ms_ids_free(&sink.ids);
}

static void run_oracle(fixture *f, int64_t width, int64_t depth) {
    spec_sink sink = {0};
    ms_gen_stats st;
    double acc_sum = 0.0;
    for (int i = 0; i < N_PROMPTS; i++) {
        spec_wrap w = {.fault = SPEC_FAULT_ORACLE, .V = f->V, .oracle = f->ar[i].v, .n_oracle = f->ar[i].n,
                       .oracle_width = width, .oracle_depth = depth};
        spec_wrap_reset(&w, 500 + (uint64_t)i);
        ms_draft_port port = spec_wrap_port(&w, false);
        ms_status s = spec_generate(f->tgt, &port, f->prompts[i].v, f->prompts[i].n, &f->p, &sink, &st);
        SPEC_CHECK(s >= 0 && same_as_ar(f, i, &sink, &st) && !st.draft_failed,
                   "oracle %lldx%lld prompt %d: output differs from AR or failed", (long long)width, (long long)depth,
                   i);
        SPEC_CHECK(w.order_ok, "oracle prompt %d: the verdict's bonus is not the next AR token", i);
        /* Every round accepts the whole right path that the tree holds, unless
         * the request ends first: rounds ≤ ceil((new − 1) / (depth' + 1)). */
        int64_t per_round = depth + 1;
        if (width * depth + depth + 1 > MS_TREE_MAX) per_round = (MS_TREE_MAX - 1) / (width + 1) + 1;
        int64_t want_max = (f->ar[i].n - 1 + per_round - 1) / per_round;
        if (!strcmp(f->ar_reason[i], "stop token")) want_max++; /* the stop token itself is a verified token */
        SPEC_CHECK(st.rounds <= want_max, "oracle %lldx%lld prompt %d: %lld rounds, expected ≤ %lld (mean accepted %.2f)",
                   (long long)width, (long long)depth, i, (long long)st.rounds, (long long)want_max,
                   ms_gen_stats_mean_accepted(&st));
        acc_sum += ms_gen_stats_mean_accepted(&st);
    }
    fprintf(stderr, "oracle width %lld depth %lld: mean accepted length %.2f, output == AR\n", (long long)width,
            (long long)depth, acc_sum / N_PROMPTS);
    ms_ids_free(&sink.ids);
}

/* A context that fills mid-request: AR and speculative stop at the same token. */
static void context_edge(const char *tdir, const char *lm_dir) {
    ms_model *m = NULL;
    ms_tgt *t = NULL;
    ms_dft *d = NULL;
    ms_model_opts mo = {.max_ctx = 40};
    ms_status s = ms_model_load(tdir, &mo, &m);
    if (s >= 0) s = ms_tgt_new(m, &t);
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LM;
    o.model_dir = lm_dir;
    o.vocab = MS_VOCAB_FULL;
    if (s >= 0) s = ms_dft_new(&o, &d);
    SPEC_CHECK(s >= 0, "context edge setup");
    if (s < 0) goto done;
    ms_draft_port port = ms_dft_port(d);
    spec_sink ar = {0}, sp = {0};
    ms_gen_stats st_ar, st_sp;
    ms_gen_params p = ms_gen_params_default();
    p.cost_policy = false; /* these checks are about what the draft proposes: verify all of it */
    p.max_new_tokens = 100;
    for (int64_t n = 5; n <= 35; n += 6) {
        int32_t prompt[40];
        for (int64_t k = 0; k < n; k++) prompt[k] = (int32_t)((k * 37 + n) % 300);
        s = spec_generate(t, NULL, prompt, n, &p, &ar, &st_ar);
        SPEC_CHECK(s >= 0 && !strcmp(st_ar.stop_reason, "context full") && st_ar.new_tokens == 1 + 40 - n,
                   "context edge AR prompt %lld: %s, %lld tokens (want %lld)", (long long)n, st_ar.stop_reason,
                   (long long)st_ar.new_tokens, (long long)(1 + 40 - n));
        s = spec_generate(t, &port, prompt, n, &p, &sp, &st_sp);
        bool same = s >= 0 && spec_ids_equal(sp.ids.v, sp.ids.n, ar.ids.v, ar.ids.n) &&
                    !strcmp(st_sp.stop_reason, st_ar.stop_reason);
        SPEC_CHECK(same, "context edge prompt %lld: speculative %lld tokens (%s), AR %lld (%s)", (long long)n,
                   (long long)sp.ids.n, st_sp.stop_reason, (long long)ar.ids.n, st_ar.stop_reason);
        SPEC_CHECK(!st_sp.draft_failed, "context edge: draft failed");
    }
    fprintf(stderr, "context edge (max_ctx 40): AR and speculative both end at 'context full' identically\n");
    ms_ids_free(&ar.ids);
    ms_ids_free(&sp.ids);
done:
    ms_dft_free(&d);
    ms_tgt_free(&t);
    ms_model_free(&m);
}

/* A real draft whose own KV runs out (max_ctx 80 rows, the tree needs 64 of
 * them): it fails at begin-commit for long prompts, mid-request for others;
 * the target finishes alone with the same output. */
static void draft_out_of_room(fixture *f, const char *tdir) {
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LAYERSKIP;
    o.model_dir = tdir;
    o.layers = 2;
    o.max_ctx = 80 - MS_TREE_MAX - 1; /* the draft adds a tree's room + 1: 80 rows in all */
    ms_dft *d = NULL;
    ms_status s = ms_dft_new(&o, &d);
    SPEC_CHECK(s >= 0, "draft with 80 rows");
    if (s < 0) return;
    ms_draft_port port = ms_dft_port(d);
    spec_sink sink = {0};
    ms_gen_stats st;
    int64_t failed = 0;
    for (int i = 0; i < N_PROMPTS; i++) {
        s = spec_generate(f->tgt, &port, f->prompts[i].v, f->prompts[i].n, &f->p, &sink, &st);
        SPEC_CHECK(s >= 0 && same_as_ar(f, i, &sink, &st), "small draft KV prompt %d: output differs from AR", i);
        /* the first commit is the prompt + root, and a tree needs MS_TREE_MAX more rows */
        if (f->prompts[i].n + 1 + MS_TREE_MAX > 80)
            SPEC_CHECK(st.draft_failed && st.spec_rounds == 0, "small draft KV prompt %d (%lld tokens): failed %d, %lld "
                       "spec rounds", i, (long long)f->prompts[i].n, st.draft_failed, (long long)st.spec_rounds);
        failed += st.draft_failed;
    }
    SPEC_CHECK(failed == N_PROMPTS, "small draft KV: %lld of %d requests flagged the draft as failed (every request "
               "outgrows 80 - 64 rows)", (long long)failed, N_PROMPTS);
    fprintf(stderr, "draft KV of 80 rows: %lld/%d requests lost the draft, output == AR\n", (long long)failed, N_PROMPTS);
    ms_ids_free(&sink.ids);
    ms_dft_free(&d);
}

int main(void) {
    ms_log_set_level(MS_LOG_OFF); /* the faults log warnings by design */
    const bool small = spec_small();
    char tmp[256], tdir[512], edir[512];
    if (!ms_test_tmpdir("ms-spec-test", tmp, sizeof tmp)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = ms_now_s();
    fixture f = {0};
    ms_dft *lm_self = NULL, *eagle = NULL, *skip = NULL;
    ms_status s = spec_mkmodel(tmp, "target",
                               "--arch llama --vocab 300 --hidden 48 --layers 3 --heads 6 --kv-heads 3 --seed 21",
                               tdir, sizeof tdir);
    if (s >= 0) s = spec_mkeagle(tmp, "eagle", tdir, "--seed 22", edir, sizeof edir);
    ms_model_opts mo = {0};
    if (s >= 0) s = ms_model_load(tdir, &mo, &f.model);
    if (s >= 0) s = ms_tgt_new(f.model, &f.tgt);
    SPEC_CHECK(s >= 0, "setup");
    if (s < 0) goto done;
    f.V = ms_model_vocab(f.model);
    ms_rng rng;
    ms_rng_seed(&rng, 77);
    for (int i = 0; i < N_PROMPTS && s >= 0; i++) {
        int64_t len = 2 + (int64_t)(ms_rng_u64(&rng) % 30);
        for (int64_t k = 0; k < len && s >= 0; k++) s = ms_ids_push(&f.prompts[i], (int32_t)(ms_rng_u64(&rng) % 300));
    }
    f.p = ms_gen_params_default();
    f.p.cost_policy = false; /* the checks count what the draft proposes: verify all of it */
    f.p.max_new_tokens = MAX_NEW;
    if (s >= 0) s = make_reference(&f);
    SPEC_CHECK(s >= 0, "AR reference");
    if (s < 0) goto done;
    for (int i = 0; i < N_PROMPTS; i++)
        SPEC_CHECK(f.ar[i].n == MAX_NEW, "prompt %d: AR gave %lld tokens", i, (long long)f.ar[i].n);

    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LM; /* the target as its own draft: trees that would be accepted */
    o.model_dir = tdir;
    o.vocab = MS_VOCAB_FULL;
    s = ms_dft_new(&o, &lm_self);
    o = ms_dft_opts_default();
    o.kind = MS_DRAFT_EAGLE;
    o.model_dir = edir;
    o.target_dir = tdir;
    o.w_max = 40;
    if (s >= 0) s = ms_dft_new(&o, &eagle);
    o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LAYERSKIP;
    o.model_dir = tdir;
    o.layers = 2;
    o.tree.chain = true;
    o.tree.depth = 4;
    if (s >= 0) s = ms_dft_new(&o, &skip);
    SPEC_CHECK(s >= 0, "drafts");
    if (s < 0) goto done;

    int64_t np = small ? 1 : N_PROMPTS;
    run_variants(&f, "lm-self/full/tree", lm_self, np);
    run_variants(&f, "eagle/dynamic/tree", eagle, np);
    run_variants(&f, "layerskip2/dynamic/chain", skip, np);
    run_oracle(&f, 4, 8);
    run_oracle(&f, 1, 12);
    run_oracle(&f, 3, 30);
    context_edge(tdir, tdir);
    draft_out_of_room(&f, tdir);

done:
    ms_dft_free(&lm_self);
    ms_dft_free(&eagle);
    ms_dft_free(&skip);
    for (int i = 0; i < N_PROMPTS; i++) {
        ms_ids_free(&f.prompts[i]);
        ms_ids_free(&f.ar[i]);
    }
    ms_tgt_free(&f.tgt);
    ms_model_free(&f.model);
    ms_test_rmtree(tmp);
    fprintf(stderr, "%.1f s\n", ms_now_s() - t0);
    if (spec_failures) {
        fprintf(stderr, "test_spec_faults: %d check(s) FAILED\n", spec_failures);
        return 1;
    }
    fprintf(stderr, "test_spec_faults: OK\n");
    return 0;
}
