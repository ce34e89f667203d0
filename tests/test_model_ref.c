/* test_model_ref.c — the model runtime against the double-precision reference
 * (tests/ref_model.c) on seeded random tiny models of every supported shape:
 * Llama (GQA, tied/untied, llama3 RoPE scaling, q/k/v bias), Qwen2 (bias),
 * Qwen3 (q/k norm, head_dim ≠ hidden/heads), F32/BF16/F16 weights, sharded
 * files, and a 151,936-token vocabulary.
 *
 * Each case prefills a random prompt (every row's logits compared), decodes a
 * few tokens one by one (each step compared against a from-scratch reference
 * of the whole sequence), and prefills again with ms_model_prefill.
 * Comparator: max|engine − ref| / max(1, max|ref|) ≤ TOL. The comparator is
 * shown to reject a perturbed weight, a model of another seed, a missing
 * llama3 scaling and a layer count mismatch.
 */
#include "ms_model.h"
#include "ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The engine computes in f32 from the same (f32-widened) weights; the
 * reference in double. Measured errors are ~1e-6; a wrong op is ≫ 1e-2. */
#define TOL 1e-4

#include "ms_check.h"

typedef struct {
    const char *name;
    const char *args;
    int64_t n_prompt, n_decode;
} model_case;

static const model_case CASES[] = {
    {"llama-f32-gqa-untied",
     "--arch llama --vocab 101 --hidden 48 --layers 2 --heads 6 --kv-heads 2 --ffn 72 --tie 0 --dtype f32 --seed 11",
     20, 4},
    {"llama-bf16-tied-mha",
     "--arch llama --vocab 101 --hidden 32 --layers 2 --heads 4 --ffn 64 --tie 1 --dtype bf16 --seed 12", 20, 4},
    /* hd 16, theta 5e5, original 64: inv_freq falls in all three llama3 bands. */
    {"llama3-rope-f32",
     "--arch llama --vocab 64 --hidden 32 --layers 2 --heads 2 --kv-heads 1 --ffn 48 --theta 500000 "
     "--rope-factor 4 --rope-low 1 --rope-high 4 --rope-orig 64 --max-pos 256 --dtype f32 --seed 13",
     24, 4},
    {"llama-f32-qkv-bias",
     "--arch llama --vocab 77 --hidden 24 --layers 2 --heads 3 --kv-heads 1 --ffn 40 --attention-bias 1 --seed 14", 20,
     3},
    {"qwen2-f32-gqa-bias",
     "--arch qwen2 --vocab 97 --hidden 40 --layers 2 --heads 5 --kv-heads 1 --ffn 56 --tie 0 --dtype f32 --seed 15",
     20, 4},
    {"qwen2-bf16-tied",
     "--arch qwen2 --vocab 97 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --ffn 48 --tie 1 --dtype bf16 --seed 16",
     20, 4},
    {"qwen3-f32-hd24-tied",
     "--arch qwen3 --vocab 89 --hidden 32 --layers 2 --heads 4 --kv-heads 2 --head-dim 24 --ffn 64 --tie 1 "
     "--dtype f32 --seed 17",
     20, 4},
    {"qwen3-bf16-hd12-untied",
     "--arch qwen3 --vocab 89 --hidden 40 --layers 3 --heads 3 --kv-heads 1 --head-dim 12 --ffn 64 --tie 0 "
     "--dtype bf16 --seed 18",
     20, 4},
    {"llama-f16-3-shards",
     "--arch llama --vocab 71 --hidden 32 --layers 3 --heads 4 --kv-heads 2 --ffn 48 --dtype f16 --shards 3 --seed 19",
     20, 3},
    {"qwen2-vocab151936",
     "--arch qwen2 --vocab 151936 --hidden 16 --layers 1 --heads 2 --kv-heads 1 --ffn 32 --tie 1 --dtype bf16 "
     "--seed 20",
     8, 2},
};

/* Engine on `engine_dir` vs reference `ref` over prompt + decode. Returns
 * the largest comparator value seen (all prompt rows, every decode step, and
 * a second pass through ms_model_prefill); < 0 on an engine/reference error. */
static double compare_engine(const char *engine_dir, const ms_model_opts *opts, const ref_model *ref,
                             const int32_t *tokens, int64_t n_prompt, int64_t n_decode) {
    ms_model *m = NULL;
    if (ms_model_load(engine_dir, opts, &m) != MS_OK) return -1;
    int64_t V = ms_model_vocab(m), n_all = n_prompt + n_decode;
    float *lg = malloc((size_t)(n_prompt * V) * sizeof(float));
    double *want = malloc((size_t)(n_all * V) * sizeof(double));
    double worst = -1;
    if (!lg || !want || V != ref_model_config(ref)->vocab_size) goto done;

    if (ms_model_forward(m, tokens, n_prompt, NULL, NULL, MS_LOGITS_ALL, lg) != MS_OK) goto done;
    if (ref_forward(ref, tokens, n_prompt, true, want) != MS_OK) goto done;
    worst = 0;
    for (int64_t i = 0; i < n_prompt; i++) worst = fmax(worst, ref_logits_err(lg + i * V, want + i * V, V));

    for (int64_t t = 0; t < n_decode; t++) {
        int64_t len = n_prompt + t;
        if (ms_model_len(m) != len || ms_model_forward(m, tokens + len, 1, NULL, NULL, MS_LOGITS_LAST, lg) != MS_OK ||
            ref_forward(ref, tokens, len + 1, false, want) != MS_OK) {
            worst = -1;
            goto done;
        }
        worst = fmax(worst, ref_logits_err(lg, want, V));
    }

    ms_model_reset(m);
    if (ms_model_prefill(m, tokens, n_all, lg) != MS_OK || ref_forward(ref, tokens, n_all, false, want) != MS_OK) {
        worst = -1;
        goto done;
    }
    worst = fmax(worst, ref_logits_err(lg, want, V));
done:
    free(lg);
    free(want);
    ms_model_free(&m);
    return worst;
}

/* The llama3 case must really scale: at least one inv_freq differs from the
 * unscaled one (in fact all three bands are hit). */
static void check_llama3_exercised(const ms_hfconfig *c) {
    int64_t half = c->head_dim / 2;
    double scaled[256], plain[256];
    CHECK(c->rope_scaling.type == MS_ROPE_LLAMA3 && half <= 256, "llama3 case has no llama3 scaling in its config");
    if (half > 256) return;
    ref_rope_inv_freq(scaled, c->head_dim, c->rope_theta, true, c->rope_scaling.factor, c->rope_scaling.low_freq_factor,
                      c->rope_scaling.high_freq_factor, (double)c->rope_scaling.original_max_position_embeddings);
    ref_rope_inv_freq(plain, c->head_dim, c->rope_theta, false, 0, 0, 0, 0);
    int kept = 0, divided = 0, smoothed = 0;
    for (int64_t i = 0; i < half; i++) {
        if (scaled[i] == plain[i])
            kept++;
        else if (fabs(scaled[i] * c->rope_scaling.factor - plain[i]) <= 1e-15 * plain[i])
            divided++;
        else
            smoothed++;
    }
    printf("  llama3 bands: %d kept, %d divided, %d smoothed of %lld\n", kept, divided, smoothed, (long long)half);
    CHECK(divided + smoothed > 0, "llama3 scaling changes no frequency");
    CHECK(kept > 0 && divided > 0 && smoothed > 0, "llama3 case does not hit every band");
}

/* Comparator power: each of these engines must be rejected against `ref`. */
static void negative_checks(const char *root, const char *dir, const char *args, const ref_model *ref,
                            const int32_t *tokens, int64_t n_prompt) {
    ms_model_opts opts = {.max_ctx = 64};
    char pert[512], other[512];

    /* One weight value changed: the final norm's 4th element + 0.5. */
    snprintf(pert, sizeof pert, "%s/perturbed", root);
    CHECK(ref_copy_perturbed(dir, pert, "model.norm.weight", 3, 0.5) == MS_OK, "cannot write the perturbed copy");
    double e1 = compare_engine(pert, &opts, ref, tokens, n_prompt, 1);
    printf("  negative: one perturbed weight → err %.3g (must be > %g)\n", e1, TOL);
    CHECK(e1 > 10 * TOL, "a perturbed weight was not detected (err %g)", e1);

    /* A perturbed element of a layer-0 matrix deep inside attention. */
    snprintf(pert, sizeof pert, "%s/perturbed2", root);
    CHECK(ref_copy_perturbed(dir, pert, "model.layers.0.self_attn.v_proj.weight", 7, 0.25) == MS_OK,
          "cannot write the second perturbed copy");
    double e2 = compare_engine(pert, &opts, ref, tokens, n_prompt, 1);
    printf("  negative: one perturbed v_proj value → err %.3g (must be > %g)\n", e2, TOL);
    CHECK(e2 > TOL, "a perturbed v_proj value was not detected (err %g)", e2);

    /* The same shapes from another seed. */
    char args2[512];
    snprintf(args2, sizeof args2, "%s --seed 4242", args);
    if (ref_make_model(root, "other-seed", args2, other, sizeof other) == MS_OK) {
        double e3 = compare_engine(other, &opts, ref, tokens, n_prompt, 1);
        printf("  negative: model of another seed → err %.3g\n", e3);
        CHECK(e3 > 10 * TOL, "a model of another seed was not detected (err %g)", e3);
    } else {
        CHECK(0, "cannot make the other-seed model");
    }
}

/* HF semantics: LlamaAttention and Qwen3Attention build o_proj with
 * bias=config.attention_bias (Qwen2 never has one). A checkpoint that carries
 * self_attn.o_proj.bias must have it applied: here the maker's o_proj biases
 * are replaced by other values, and the engine must follow the reference of
 * the copy, not of the original. */
static void check_o_proj_bias(const char *root, const char *name, const char *args) {
    char base[512], with[600];
    if (ref_make_model(root, name, args, base, sizeof base) != MS_OK) {
        CHECK(0, "%s: cannot make the model", name);
        return;
    }
    ref_model *plain = NULL;
    if (ref_model_load(base, &plain) != MS_OK) {
        CHECK(0, "%s: reference cannot load", name);
        return;
    }
    const ms_hfconfig *c = ref_model_config(plain);
    int64_t L = c->n_layers, d = c->hidden_size;
    char (*names)[96] = calloc((size_t)L, sizeof *names);
    const char **np = calloc((size_t)L, sizeof *np);
    ms_tensor *ts = calloc((size_t)L, sizeof *ts);
    float *vals = malloc((size_t)(L * d) * sizeof(float));
    ms_rng r;
    ms_rng_seed(&r, 5);
    for (int64_t i = 0; i < L * d; i++) vals[i] = 0.3f * ms_rng_normal(&r);
    for (int64_t l = 0; l < L; l++) {
        snprintf(names[l], sizeof names[l], "model.layers.%lld.self_attn.o_proj.bias", (long long)l);
        np[l] = names[l];
        ts[l] = ms_tensor_view(vals + l * d, MS_DTYPE_F32, 1, &d);
    }
    snprintf(with, sizeof with, "%s-o-bias", base);
    ref_model *ref = NULL;
    if (ref_copy_model(base, with, NULL, 0, 0, L, np, ts) == MS_OK && ref_model_load(with, &ref) == MS_OK) {
        int32_t tokens[12];
        ms_rng_seed(&r, 6);
        ref_random_tokens(&r, tokens, 12, c->vocab_size);
        ms_model_opts opts = {.max_ctx = 32};
        double e = compare_engine(with, &opts, ref, tokens, 10, 2);
        double e0 = compare_engine(with, &opts, plain, tokens, 10, 2);
        printf("%s + o_proj.bias:\n  engine vs reference with the bias: err %.3g (tol %g); without it: %.3g\n",
               name, e, TOL, e0);
        CHECK(e >= 0 && e <= TOL, "%s: self_attn.o_proj.bias present in the checkpoint is not applied (err %g)", name,
              e);
    } else {
        CHECK(0, "%s: cannot write or load the copy with o_proj biases", name);
    }
    ref_model_free(&ref);
    ref_model_free(&plain);
    free(names);
    free(np);
    free(ts);
    free(vals);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    char root[256];
    if (!ms_test_tmpdir("ms-model-test", root, sizeof root)) {
        fprintf(stderr, "cannot make a temporary folder\n");
        return 1;
    }
    ms_rng rng;
    ms_rng_seed(&rng, 777);
    double worst_all = 0;
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
        const model_case *mc = &CASES[ci];
        char dir[512];
        ref_model *ref = NULL;
        if (ref_make_model(root, mc->name, mc->args, dir, sizeof dir) != MS_OK ||
            ref_model_load(dir, &ref) != MS_OK) {
            CHECK(0, "case %s: cannot make or load the model", mc->name);
            continue;
        }
        const ms_hfconfig *c = ref_model_config(ref);
        int64_t n_all = mc->n_prompt + mc->n_decode;
        int32_t tokens[64];
        ref_random_tokens(&rng, tokens, n_all, c->vocab_size);
        tokens[0] = (int32_t)(c->vocab_size - 1); /* the last embedding row is used */

        printf("%s:\n", mc->name);
        if (c->rope_scaling.type == MS_ROPE_LLAMA3) check_llama3_exercised(c);
        ms_model_opts opts = {.max_ctx = 64};
        double e = compare_engine(dir, &opts, ref, tokens, mc->n_prompt, mc->n_decode);
        printf("  engine vs reference: %lld prompt rows + %lld decode steps + prefill, err %.3g (tol %g)\n",
               (long long)mc->n_prompt, (long long)mc->n_decode, e, TOL);
        CHECK(e >= 0 && e <= TOL, "case %s: engine differs from the reference (err %g)", mc->name, e);
        worst_all = fmax(worst_all, e);

        /* Layer skip: the first layer only equals the reference's first layer only. */
        if (c->n_layers > 1) {
            ms_model_opts one = {.max_ctx = 64, .n_layers = 1};
            ref_model_set_layers(ref, 1);
            double e1 = compare_engine(dir, &one, ref, tokens, mc->n_prompt, 1);
            ref_model_set_layers(ref, 0);
            double e2 = compare_engine(dir, &one, ref, tokens, mc->n_prompt, 1);
            printf("  n_layers = 1: err %.3g vs 1-layer reference, %.3g vs full reference (must be > %g)\n", e1, e2,
                   TOL);
            CHECK(e1 >= 0 && e1 <= TOL, "case %s: n_layers 1 differs from the 1-layer reference (%g)", mc->name, e1);
            CHECK(e2 > TOL, "case %s: n_layers 1 indistinguishable from all layers (%g)", mc->name, e2);
        }

        if (c->rope_scaling.type == MS_ROPE_LLAMA3) {
            /* The same weights without the scaling must be told apart. */
            char plain[512];
            snprintf(plain, sizeof plain, "%s/%s-noscale", root, mc->name);
            ref_model *ref_plain = NULL;
            if (ref_copy_perturbed(dir, plain, "model.norm.weight", 0, 0.0) == MS_OK &&
                ref_set_rope_llama3(plain, 0, 0, 0, 0) == MS_OK && ref_model_load(plain, &ref_plain) == MS_OK) {
                double e3 = compare_engine(dir, &opts, ref_plain, tokens, mc->n_prompt, mc->n_decode);
                printf("  negative: reference without llama3 scaling → err %.3g\n", e3);
                CHECK(e3 > TOL, "llama3 scaling makes no detectable difference (%g)", e3);
            } else {
                CHECK(0, "cannot make the unscaled copy");
            }
            ref_model_free(&ref_plain);
        }
        if (ci == 0) negative_checks(root, dir, mc->args, ref, tokens, mc->n_prompt);
        ref_model_free(&ref);
    }

    check_o_proj_bias(root, "llama-attention-bias-o",
                      "--arch llama --vocab 53 --hidden 24 --layers 2 --heads 3 --ffn 40 --attention-bias 1 --seed 61");
    check_o_proj_bias(root, "qwen3-attention-bias-o",
                      "--arch qwen3 --vocab 53 --hidden 24 --layers 2 --heads 2 --head-dim 16 --ffn 40 "
                      "--attention-bias 1 --seed 62");

    /* Input errors are answered, not crashed on; the KV length is untouched. */
    {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", root, CASES[0].name);
        ms_model *m = NULL;
        ms_model_opts opts = {.max_ctx = 16, .max_batch = 8};
        CHECK(ms_model_load(dir, &opts, &m) == MS_OK, "reload");
        if (m) {
            int32_t toks[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
            CHECK(ms_model_forward(m, toks, 5, NULL, NULL, MS_LOGITS_NONE, NULL) == MS_OK, "forward 5");
            CHECK(ms_model_forward(m, toks, 9, NULL, NULL, MS_LOGITS_NONE, NULL) < 0, "n > max_batch accepted");
            CHECK(ms_model_forward(m, toks, 8, NULL, NULL, MS_LOGITS_NONE, NULL) == MS_OK, "forward 8");
            CHECK(ms_model_forward(m, toks, 4, NULL, NULL, MS_LOGITS_NONE, NULL) == MS_ERR_RANGE,
                  "cache overflow not MS_ERR_RANGE");
            int32_t bad = (int32_t)ms_model_vocab(m);
            CHECK(ms_model_forward(m, &bad, 1, NULL, NULL, MS_LOGITS_NONE, NULL) < 0, "token = vocab accepted");
            bad = -1;
            CHECK(ms_model_forward(m, &bad, 1, NULL, NULL, MS_LOGITS_NONE, NULL) < 0, "token -1 accepted");
            CHECK(ms_model_len(m) == 13, "len %lld after refused forwards, want 13", (long long)ms_model_len(m));
            CHECK(ms_model_truncate(m, 14) < 0, "truncate past len accepted");
            ms_model_free(&m);
            CHECK(m == NULL, "ms_model_free does not null the pointer");
        }
        ms_model *none = NULL;
        CHECK(ms_model_load(root, &opts, &none) < 0 && none == NULL, "a folder without a model loaded");
    }

    ms_test_rmtree(root);
    printf("worst engine-vs-reference error over all cases: %.3g (tol %g)\n", worst_all, TOL);
    if (g_fail) {
        fprintf(stderr, "%d check(s) failed\n", g_fail);
        return 1;
    }
    return 0;
}
