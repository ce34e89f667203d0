/* test_model_prefill.c — ms_model_prefill in max_batch chunks equals one
 * forward of the whole prompt, and the cache it leaves decodes the same.
 *
 * Engine A has max_batch 8 (prompts of 3, 8, 16, 29 and 61 tokens: below, at,
 * at a multiple of, and past the batch), engine B has max_batch 64 and does
 * the same prompt in one ms_model_forward. Both then decode two tokens. Every
 * logits row is compared with the other engine and with the double-precision
 * reference. The comparator is shown to reject a prompt that differs in one
 * token inside an early chunk.
 */
#include "ms_model.h"
#include "ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4 /* comparator: max|a − b| / max(1, max|b|) */

#include "ms_check.h"

static const struct {
    const char *name, *args;
} CASES[] = {
    {"llama-f32-gqa", "--arch llama --vocab 101 --hidden 48 --layers 2 --heads 6 --kv-heads 2 --ffn 72 --seed 51"},
    {"qwen3-bf16-hd24",
     "--arch qwen3 --vocab 89 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --head-dim 24 --ffn 64 --dtype bf16 "
     "--seed 52"},
    {"qwen2-f32-tied", "--arch qwen2 --vocab 97 --hidden 40 --layers 2 --heads 5 --kv-heads 1 --tie 1 --seed 53"},
};

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char root[256];
    if (!ms_test_tmpdir("ms-model-test", root, sizeof root)) {
        fprintf(stderr, "cannot make a temporary folder\n");
        return 1;
    }
    ms_rng rng;
    ms_rng_seed(&rng, 99);
    const int64_t lens[] = {3, 8, 16, 29, 61};
    double worst_ab = 0, worst_ref = 0;
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
        char dir[512];
        ref_model *ref = NULL;
        ms_model *a = NULL, *b = NULL;
        ms_model_opts oa = {.max_ctx = 80, .max_batch = 8}, ob = {.max_ctx = 80, .max_batch = 64};
        if (ref_make_model(root, CASES[ci].name, CASES[ci].args, dir, sizeof dir) != MS_OK ||
            ref_model_load(dir, &ref) != MS_OK || ms_model_load(dir, &oa, &a) != MS_OK ||
            ms_model_load(dir, &ob, &b) != MS_OK) {
            CHECK(0, "%s: cannot make or load the model", CASES[ci].name);
            ref_model_free(&ref);
            ms_model_free(&a);
            ms_model_free(&b);
            continue;
        }
        CHECK(ms_model_max_batch(a) == 8 && ms_model_max_ctx(a) == 80, "opts not applied: batch %lld ctx %lld",
              (long long)ms_model_max_batch(a), (long long)ms_model_max_ctx(a));
        int64_t V = ms_model_vocab(a);
        float *la = malloc((size_t)V * sizeof(float)), *lb = malloc((size_t)V * sizeof(float));
        double *want = malloc((size_t)V * sizeof(double));
        double case_ab = 0, case_ref = 0;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            int64_t n = lens[li];
            int32_t toks[64 + 2];
            ref_random_tokens(&rng, toks, n + 2, V);
            ms_model_reset(a);
            ms_model_reset(b);
            CHECK(ms_model_prefill(a, toks, n, la) == MS_OK, "chunked prefill of %lld", (long long)n);
            CHECK(ms_model_forward(b, toks, n, NULL, NULL, MS_LOGITS_LAST, lb) == MS_OK, "one-shot %lld",
                  (long long)n);
            CHECK(ms_model_len(a) == n && ms_model_len(b) == n, "len after prefill");
            CHECK(ref_forward(ref, toks, n, false, want) == MS_OK, "reference");
            case_ab = fmax(case_ab, ref_logits_err_f(la, lb, V));
            case_ref = fmax(case_ref, ref_logits_err(la, want, V));
            /* The cache the chunks left behind decodes like the one-shot one. */
            for (int64_t t = 0; t < 2; t++) {
                CHECK(ms_model_forward(a, &toks[n + t], 1, NULL, NULL, MS_LOGITS_LAST, la) == MS_OK, "decode A");
                CHECK(ms_model_forward(b, &toks[n + t], 1, NULL, NULL, MS_LOGITS_LAST, lb) == MS_OK, "decode B");
                CHECK(ref_forward(ref, toks, n + t + 1, false, want) == MS_OK, "reference");
                case_ab = fmax(case_ab, ref_logits_err_f(la, lb, V));
                case_ref = fmax(case_ref, ref_logits_err(la, want, V));
            }
        }
        printf("%s: chunked (max_batch 8) vs one-shot: err %.3g; vs reference: err %.3g (tol %g)\n",
               CASES[ci].name, case_ab, case_ref, TOL);
        CHECK(case_ab <= TOL, "%s: chunked prefill differs from one shot (%g)", CASES[ci].name, case_ab);
        CHECK(case_ref <= TOL, "%s: chunked prefill differs from the reference (%g)", CASES[ci].name, case_ref);
        worst_ab = fmax(worst_ab, case_ab);
        worst_ref = fmax(worst_ref, case_ref);

        /* Negative: one token changed in the first chunk must show in the
         * last row's logits (so the later chunks really attend to it). */
        {
            int32_t toks[29];
            ref_random_tokens(&rng, toks, 29, V);
            ms_model_reset(a);
            ms_model_reset(b);
            CHECK(ms_model_prefill(a, toks, 29, la) == MS_OK, "prefill");
            toks[2] = (int32_t)((toks[2] + 1) % V);
            CHECK(ms_model_forward(b, toks, 29, NULL, NULL, MS_LOGITS_LAST, lb) == MS_OK, "forward");
            double e = ref_logits_err_f(la, lb, V);
            printf("  negative: one token changed in chunk 1 of 4 → err %.3g (must be > %g)\n", e, TOL);
            CHECK(e > TOL, "%s: a change in the first chunk is invisible at the end", CASES[ci].name);
        }

        /* Prompts that do not fit are refused without touching the cache. */
        {
            int32_t toks[80] = {0};
            ms_model_reset(a);
            CHECK(ms_model_prefill(a, toks, 10, NULL) == MS_OK, "prefill 10");
            CHECK(ms_model_prefill(a, toks, 71, la) < 0, "prefill past max_ctx accepted");
            CHECK(ms_model_len(a) == 10, "refused prefill changed len to %lld", (long long)ms_model_len(a));
            CHECK(ms_model_forward(a, toks, 9, NULL, NULL, MS_LOGITS_NONE, NULL) < 0, "forward past max_batch");
            CHECK(ms_model_prefill(a, toks, 0, NULL) < 0, "empty prefill accepted");
            CHECK(ms_model_prefill(a, toks, 70, NULL) == MS_OK, "prefill to exactly max_ctx");
            CHECK(ms_model_len(a) == 80, "len %lld, want 80", (long long)ms_model_len(a));
        }
        free(la);
        free(lb);
        free(want);
        ms_model_free(&a);
        ms_model_free(&b);
        ref_model_free(&ref);
    }
    ms_test_rmtree(root);
    printf("worst: chunked vs one-shot %.3g, vs reference %.3g\n", worst_ab, worst_ref);
    if (g_fail) {
        fprintf(stderr, "%d check(s) failed\n", g_fail);
        return 1;
    }
    return 0;
}
