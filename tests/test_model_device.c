/* test_model_device.c — the device-independent parts of the backend choice,
 * runnable without a GPU:
 *   - ms_model_device_parse accepts exactly "cpu" / NULL / "" / "cuda" /
 *     "cuda:N" (N in 0..255) and refuses everything else;
 *   - asking for a CUDA model where none can be made fails cleanly (built
 *     without CUDA: MS_ERR_UNSUPPORTED; with CUDA but no device: an error),
 *     and never crashes or returns a model;
 *   - ms_model_new_random on the CPU: deterministic per seed, another seed
 *     gives other logits, finite logits of the configured scale, tied and
 *     untied heads, a bad configuration refused; the device accessors are
 *     NULL on the CPU.
 */
#include "ms_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

static void check_parse(void) {
    static const struct {
        const char *s;
        int dev; /* -2: refused */
    } CASES[] = {
        {NULL, -1},       {"", -1},         {"cpu", -1},      {"cuda", 0},     {"cuda:0", 0},
        {"cuda:3", 3},    {"cuda:255", 255}, {"cuda:256", -2}, {"cuda:-1", -2}, {"cuda:", -2},
        {"cuda:1x", -2},  {"cuda:+1", -2},  {"gpu", -2},      {"CPU", -2},     {"cuda0", -2},
        {"cpu:0", -2},    {" cuda", -2},    {"cuda:1 ", -2},  {"cuda:99999999999999999999", -2},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        int dev = 1234;
        ms_status s = ms_model_device_parse(CASES[i].s, &dev);
        if (CASES[i].dev == -2) {
            CHECK(s == MS_ERR_INVALID, "\"%s\" accepted as device %d", CASES[i].s, dev);
        } else {
            CHECK(s == MS_OK && dev == CASES[i].dev, "\"%s\": status %d, device %d (want %d)",
                  CASES[i].s ? CASES[i].s : "(null)", s, dev, CASES[i].dev);
        }
    }
}

static ms_hfconfig small_cfg(ms_arch arch, bool tie) {
    ms_hfconfig c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.vocab_size = 97;
    c.hidden_size = 32;
    c.intermediate_size = 48;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.max_position_embeddings = 128;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 10000;
    c.tie_word_embeddings = tie;
    c.attention_bias = arch == MS_ARCH_QWEN2;
    c.qk_norm = arch == MS_ARCH_QWEN3;
    c.bos_token_id = -1;
    return c;
}

/* Logits of a fixed 12-token prompt, every row: [12, V]. */
static ms_status run_prompt(ms_model *m, float *lg) {
    int32_t toks[12];
    for (int i = 0; i < 12; i++) toks[i] = (int32_t)((i * 37 + 5) % ms_model_vocab(m));
    ms_model_reset(m);
    return ms_model_forward(m, toks, 12, NULL, NULL, MS_LOGITS_ALL, lg);
}

static void check_random_cpu(void) {
    static const struct {
        ms_arch arch;
        bool tie;
    } ARCHS[] = {{MS_ARCH_LLAMA, false}, {MS_ARCH_QWEN2, true}, {MS_ARCH_QWEN3, false}};
    for (size_t a = 0; a < sizeof ARCHS / sizeof ARCHS[0]; a++) {
        ms_hfconfig c = small_cfg(ARCHS[a].arch, ARCHS[a].tie);
        ms_model *m1 = NULL, *m2 = NULL, *m3 = NULL;
        ms_model_opts o = {.max_ctx = 64};
        CHECK(ms_model_new_random(&c, 7, &o, &m1) == MS_OK && m1, "random model arch %d", (int)c.arch);
        CHECK(ms_model_new_random(&c, 7, &o, &m2) == MS_OK && m2, "random model again");
        CHECK(ms_model_new_random(&c, 8, &o, &m3) == MS_OK && m3, "random model seed 8");
        if (!m1 || !m2 || !m3) goto next;
        const int64_t V = c.vocab_size, n = 12 * V;
        float *l1 = malloc((size_t)n * sizeof(float)), *l2 = malloc((size_t)n * sizeof(float)),
              *l3 = malloc((size_t)n * sizeof(float));
        if (l1 && l2 && l3 && run_prompt(m1, l1) == MS_OK && run_prompt(m2, l2) == MS_OK &&
            run_prompt(m3, l3) == MS_OK) {
            CHECK(!memcmp(l1, l2, (size_t)n * sizeof(float)), "the same seed gives other logits");
            double diff = 0, rms = 0;
            bool finite = true;
            for (int64_t i = 0; i < n; i++) {
                finite = finite && isfinite(l1[i]);
                diff = fmax(diff, fabs((double)l1[i] - l3[i]));
                rms += (double)l1[i] * l1[i];
            }
            rms = sqrt(rms / (double)n);
            printf("random arch %d tie %d: logit rms %.3f, max diff to seed 8 %.3f\n", (int)c.arch, (int)c.tie_word_embeddings,
                   rms, diff);
            CHECK(finite, "non-finite logits");
            /* head rows have deviation 1/sqrt(d), hidden rows rms ≈ 1: logits ≈ 1 */
            CHECK(rms > 0.2 && rms < 5, "logit rms %g outside the configured scale", rms);
            CHECK(diff > 0.1 * rms, "another seed gives the same logits (diff %g)", diff);
        } else {
            CHECK(0, "forward of the random models");
        }
        const float *head = ms_model_lm_head(m1);
        CHECK(head != NULL, "lm_head on the CPU");
        CHECK(ms_model_hidden_dev(m1) == NULL && ms_model_lm_head_dev(m1) == NULL && ms_model_stream(m1) == NULL,
              "device accessors must be NULL on the CPU");
        CHECK(ms_model_device(m1) == -1 && ms_model_ops(m1) == ms_k_cpu_ops(), "CPU model reports a device");
        int64_t inst = -1, upd = -1;
        ms_model_graph_counts(m1, &inst, &upd);
        CHECK(inst == 0 && upd == 0, "graph counts on the CPU: %lld %lld", (long long)inst, (long long)upd);
        free(l1);
        free(l2);
        free(l3);
    next:
        ms_model_free(&m1);
        ms_model_free(&m2);
        ms_model_free(&m3);
    }
    ms_hfconfig bad = small_cfg(MS_ARCH_LLAMA, false);
    bad.n_kv_heads = 3; /* 4 heads do not split into 3 groups */
    ms_model *m = NULL;
    CHECK(ms_model_new_random(&bad, 1, NULL, &m) == MS_ERR_INVALID && !m, "a bad config was accepted");
    bad = small_cfg(MS_ARCH_LLAMA, false);
    bad.head_dim = 7;
    CHECK(ms_model_new_random(&bad, 1, NULL, &m) == MS_ERR_INVALID && !m, "an odd head_dim was accepted");
    bad = small_cfg(MS_ARCH_LLAMA, false);
    ms_model_opts o = {.device = "tpu"};
    CHECK(ms_model_new_random(&bad, 1, &o, &m) == MS_ERR_INVALID && !m, "device \"tpu\" accepted");
}

/* Where no CUDA model can be made (this build or this machine), asking for
 * one must fail with an error and no model. */
static void check_cuda_refused(void) {
    ms_hfconfig c = small_cfg(MS_ARCH_LLAMA, false);
    ms_model_opts o = {.max_ctx = 32, .device = "cuda:0"};
    ms_model *m = NULL;
    ms_status s = ms_model_new_random(&c, 1, &o, &m);
#ifdef MS_HAVE_CUDA
    printf("built with CUDA: cuda:0 random model → %s\n", ms_status_str(s));
    if (s == MS_OK) { /* a GPU is present: that is test_cuda_model's business */
        ms_model_free(&m);
        return;
    }
    CHECK(s < 0 && !m, "no CUDA device, yet a model was made");
#else
    printf("built without CUDA: cuda:0 random model → %s\n", ms_status_str(s));
    CHECK(s == MS_ERR_UNSUPPORTED && !m, "built without CUDA: status %s", ms_status_str(s));
#endif
    o.device = "cuda:255"; /* never present */
    s = ms_model_new_random(&c, 1, &o, &m);
    CHECK(s < 0 && !m, "cuda:255 gave a model");
}

int main(void) {
    ms_log_set_level(MS_LOG_OFF);
    check_parse();
    check_random_cpu();
    check_cuda_refused();
    if (g_fail) {
        fprintf(stderr, "test_model_device: %d check(s) FAILED\n", g_fail);
        return 1;
    }
    printf("test_model_device: OK\n");
    return 0;
}
