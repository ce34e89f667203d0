/* test_gguf_logits.c — this engine's log-softmax on the real GGUF models
 * against a double-precision reference forward written separately in numpy
 * (tests/ref/gguf_ref_forward.py over the `gguf` package's dequantized
 * tensors; data in tests/golden/gguf/logsoftmax_<model>.json, made by
 * tests/ref/make_gguf_logsoftmax.py, see tests/golden/gguf/README.md).
 *
 * Per prompt: the first 16 positions forwarded as one 16-row batch (prefill
 * path) and again one row at a time (decode path). Per position the golden
 * file holds the reference's top-64 ids with log-probs, the log-probs of 64
 * fixed random ids and the logsumexp. Checked: |ours − ref| ≤ TOL on all 128
 * log-probs (f32 activations against f64: ~1e-3 is expected; TOL leaves room
 * for the long Gemma vocabulary sum), the top-1 id equal where the
 * reference's top-1/top-2 margin is above 2·TOL, and the batched rows bitwise
 * equal to the one-row ones (batch invariance, which keeps speculative output
 * token-identical to autoregressive decoding).
 *
 *   test_gguf_logits MODEL_NAME   (gemma3-270m | qwen2.5-coder-0.5b | qwen2.5-coder-1.5b)
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"
#include "ms_kernels.h"
#include "ms_model.h"
#include "test_fs.h"

#define TOL 0.02
#define N_POS 16

static int ids_of(const json_t *a, int32_t *out, int cap) {
    int n = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) {
        if (n < cap) out[n++] = (int32_t)json_integer_value(v);
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_gguf_logits MODEL_NAME\n");
        return 2;
    }
    char path[1024], golden[1024];
    snprintf(golden, sizeof golden, "%s/tests/golden/gguf/logsoftmax_%s.json", MS_SOURCE_DIR, argv[1]);
    json_error_t je;
    json_t *root = json_load_file(golden, 0, &je);
    if (!root) {
        fprintf(stderr, "FAIL: %s: %s (line %d)\n", golden, je.text, je.line);
        return 1;
    }
    if (!ms_test_gguf_model(argv[1], path, sizeof path)) {
        json_decref(root);
        return 77;
    }
    ms_model *m = NULL;
    ms_model_opts o = {.max_ctx = 64};
    if (ms_model_load(path, &o, &m) < 0) {
        fprintf(stderr, "FAIL: cannot load %s\n", path);
        return 1;
    }
    const int64_t V = ms_model_vocab(m);
    CHECK(V == json_integer_value(json_object_get(root, "n_vocab")), "vocabulary %lld vs golden %lld", (long long)V,
          (long long)json_integer_value(json_object_get(root, "n_vocab")));
    float *batch = malloc((size_t)N_POS * (size_t)V * sizeof(float));
    float *row = malloc((size_t)V * sizeof(float));
    if (!batch || !row) return 1;
    int32_t rand_ids[64];
    const int n_rand = ids_of(json_object_get(root, "rand_ids"), rand_ids, 64);
    double worst = 0.0;
    int n_top1 = 0, n_top1_ok = 0;

    size_t pi;
    const json_t *p;
    json_array_foreach(json_object_get(root, "prompts"), pi, p) {
        int32_t ids[256];
        const int n_ids = ids_of(json_object_get(p, "ids"), ids, 256);
        const json_t *pos = json_object_get(p, "positions");
        const int n_pos = (int)json_array_size(pos);
        CHECK(n_pos <= N_POS && n_pos <= n_ids, "prompt %zu: %d positions for %d ids", pi, n_pos, n_ids);
        if (n_pos > N_POS || n_pos > n_ids) continue;
        ms_model_reset(m);
        CHECK(ms_model_forward(m, ids, n_pos, NULL, NULL, MS_LOGITS_ALL, batch) == MS_OK, "batched forward");
        ms_model_reset(m);
        for (int t = 0; t < n_pos; t++) {
            CHECK(ms_model_forward(m, &ids[t], 1, NULL, NULL, MS_LOGITS_LAST, row) == MS_OK, "row forward %d", t);
            const float *b = batch + (size_t)t * (size_t)V;
            CHECK(!memcmp(b, row, (size_t)V * sizeof(float)),
                  "prompt %zu position %d: the batched row differs from the one-row forward (batch invariance)", pi,
                  t);
            ms_k_log_softmax(row, row, V);
            const json_t *e = json_array_get(pos, (size_t)t);
            int32_t top[64], dummy[64];
            const int n_top = ids_of(json_object_get(e, "top_ids"), top, 64);
            const json_t *tl = json_object_get(e, "top_logprobs"), *rl = json_object_get(e, "rand_logprobs");
            (void)dummy;
            double here = 0.0;
            for (int j = 0; j < n_top; j++) {
                double d = fabs(row[top[j]] - json_real_value(json_array_get(tl, (size_t)j)));
                if (d > here) here = d;
            }
            for (int j = 0; j < n_rand; j++) {
                double d = fabs(row[rand_ids[j]] - json_real_value(json_array_get(rl, (size_t)j)));
                if (d > here) here = d;
            }
            CHECK(here <= TOL, "prompt %zu position %d: max |log-prob − reference| %.4f > %.3f", pi, t, here, TOL);
            if (here > worst) worst = here;
            const double margin =
                json_real_value(json_array_get(tl, 0)) - json_real_value(json_array_get(tl, 1));
            if (margin > 2 * TOL) {
                n_top1++;
                int32_t am = ms_k_argmax(row, V);
                if (am == top[0]) n_top1_ok++;
                CHECK(am == top[0], "prompt %zu position %d: top-1 %d, reference %d (margin %.3f)", pi, t, am, top[0],
                      margin);
            }
        }
    }
    printf("%s: max |log-prob − f64 reference| = %.5f over top-64 + 64 random ids (bound %.3f); top-1 %d/%d\n",
           argv[1], worst, TOL, n_top1_ok, n_top1);
    free(batch);
    free(row);
    ms_model_free(&m);
    json_decref(root);
    return g_fail ? 1 : 0;
}
