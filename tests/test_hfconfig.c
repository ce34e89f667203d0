/* test_hfconfig — config.json parsing for Llama / Qwen2 / Qwen3 (real
 * configurations as published on the Hub), defaults, malformed variants with
 * their specific status, and write → load round trips. */
#include "ms_hfconfig.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_fail;
#define CHECK(c)                                                          \
    do {                                                                  \
        if (!(c)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);  \
            g_fail++;                                                     \
        }                                                                 \
    } while (0)

static ms_status parse(const char *json, ms_hfconfig *c) { return ms_hfcfg_parse(json, strlen(json), "config.json", c); }

static void expect(const char *what, const char *json, ms_status want) {
    ms_hfconfig c;
    ms_status s = parse(json, &c);
    if (s != want) {
        fprintf(stderr, "FAIL config '%s': %s, want %s\n", what, ms_status_str(s), ms_status_str(want));
        g_fail++;
    }
}

/* meta-llama/Llama-3.2-1B config.json. */
static const char *LLAMA32 =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], \"head_dim\": 64,"
    " \"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 8192,"
    " \"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\","
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8,"
    " \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0,"
    " \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192,"
    " \"rope_type\": \"llama3\"}, \"rope_theta\": 500000.0, \"tie_word_embeddings\": true,"
    " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.45.0.dev0\", \"use_cache\": true,"
    " \"vocab_size\": 128256}";

/* Qwen/Qwen2.5-0.5B-Instruct config.json. */
static const char *QWEN25 =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643,"
    " \"eos_token_id\": 151645, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 4864, \"max_position_embeddings\": 32768, \"max_window_layers\": 21,"
    " \"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24,"
    " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.43.1\","
    " \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}";

/* Qwen/Qwen3-0.6B config.json (head_dim 128 ≠ hidden / heads = 64). */
static const char *QWEN3 =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 151643, \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\","
    " \"hidden_size\": 1024, \"initializer_range\": 0.02, \"intermediate_size\": 3072,"
    " \"max_position_embeddings\": 40960, \"max_window_layers\": 28, \"model_type\": \"qwen3\","
    " \"num_attention_heads\": 16, \"num_hidden_layers\": 28, \"num_key_value_heads\": 8,"
    " \"rms_norm_eps\": 1e-06, \"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": null,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.51.0\","
    " \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}";

/* Smallest Llama config: every optional field absent. */
#define MIN_LLAMA_FIELDS                                                                                       \
    "\"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, "        \
    "\"num_attention_heads\": 4, \"rms_norm_eps\": 1e-5"

static void test_real_configs(void) {
    ms_hfconfig c;
    CHECK(parse(LLAMA32, &c) == MS_OK);
    CHECK(c.arch == MS_ARCH_LLAMA && !strcmp(c.arch_name, "LlamaForCausalLM"));
    CHECK(c.vocab_size == 128256 && c.hidden_size == 2048 && c.intermediate_size == 8192);
    CHECK(c.n_layers == 16 && c.n_heads == 32 && c.n_kv_heads == 8 && c.head_dim == 64);
    CHECK(c.max_position_embeddings == 131072 && c.rms_norm_eps == 1e-5 && c.rope_theta == 500000.0);
    CHECK(c.tie_word_embeddings && !c.attention_bias && !c.qk_norm);
    CHECK(c.rope_scaling.type == MS_ROPE_LLAMA3 && c.rope_scaling.factor == 32.0);
    CHECK(c.rope_scaling.low_freq_factor == 1.0 && c.rope_scaling.high_freq_factor == 4.0);
    CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
    CHECK(c.bos_token_id == 128000 && c.n_eos == 3);
    CHECK(c.eos_token_ids[0] == 128001 && c.eos_token_ids[1] == 128008 && c.eos_token_ids[2] == 128009);
    CHECK(!strcmp(c.torch_dtype, "bfloat16"));
    ms_hfcfg_log(&c);

    CHECK(parse(QWEN25, &c) == MS_OK);
    CHECK(c.arch == MS_ARCH_QWEN2 && c.attention_bias && !c.qk_norm);
    CHECK(c.head_dim == 64 && c.n_kv_heads == 2 && c.rope_theta == 1e6);
    CHECK(c.rope_scaling.type == MS_ROPE_DEFAULT);
    CHECK(c.n_eos == 1 && c.eos_token_ids[0] == 151645 && c.bos_token_id == 151643);

    CHECK(parse(QWEN3, &c) == MS_OK);
    CHECK(c.arch == MS_ARCH_QWEN3 && c.qk_norm && !c.attention_bias);
    CHECK(c.head_dim == 128 && c.hidden_size == 1024 && c.n_heads == 16);
    CHECK(c.rope_theta == 1e6 && c.rope_scaling.type == MS_ROPE_DEFAULT);
}

static void test_defaults_and_variants(void) {
    ms_hfconfig c;
    CHECK(parse("{\"architectures\": [\"LlamaForCausalLM\"], " MIN_LLAMA_FIELDS "}", &c) == MS_OK);
    CHECK(c.n_kv_heads == 4 && c.head_dim == 16 && c.max_position_embeddings == 2048);
    CHECK(c.rope_theta == 10000.0 && !c.tie_word_embeddings && !c.attention_bias && !c.qk_norm);
    CHECK(c.bos_token_id == -1 && c.n_eos == 0 && c.torch_dtype[0] == 0);
    CHECK(c.rope_scaling.type == MS_ROPE_DEFAULT);

    /* Llama with attention_bias, the legacy "type" key, "dtype" instead of torch_dtype. */
    CHECK(parse("{\"architectures\": [\"LlamaForCausalLM\"], " MIN_LLAMA_FIELDS ", \"attention_bias\": true,"
                " \"rope_scaling\": {\"type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1,"
                " \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}, \"dtype\": \"float16\"}",
                &c) == MS_OK);
    CHECK(c.attention_bias && c.rope_scaling.type == MS_ROPE_LLAMA3 && c.rope_scaling.factor == 8.0);
    CHECK(!strcmp(c.torch_dtype, "float16"));
    CHECK(parse("{\"architectures\": [\"LlamaForCausalLM\"], " MIN_LLAMA_FIELDS
                ", \"rope_scaling\": {\"rope_type\": \"default\"}, \"eos_token_id\": [7], \"bos_token_id\": null}",
                &c) == MS_OK);
    CHECK(c.rope_scaling.type == MS_ROPE_DEFAULT && c.n_eos == 1 && c.eos_token_ids[0] == 7 && c.bos_token_id == -1);
    /* No "architectures": model_type decides. Qwen2 ignores attention_bias: false. */
    CHECK(parse("{\"model_type\": \"qwen2\", \"attention_bias\": false, " MIN_LLAMA_FIELDS "}", &c) == MS_OK);
    CHECK(c.arch == MS_ARCH_QWEN2 && c.attention_bias && !strcmp(c.arch_name, "Qwen2ForCausalLM"));
    CHECK(parse("{\"architectures\": [\"Qwen3ForCausalLM\"], \"head_dim\": 24, " MIN_LLAMA_FIELDS "}", &c) == MS_OK);
    CHECK(c.qk_norm && c.head_dim == 24);
}

static void test_malformed(void) {
    const char *A = "{\"architectures\": [\"LlamaForCausalLM\"], ";
    char buf[2048];
#define WITH(extra) (snprintf(buf, sizeof buf, "%s" MIN_LLAMA_FIELDS "%s}", A, extra), buf)
    expect("not JSON", "{\"architectures\": [", MS_ERR_FORMAT);
    expect("not an object", "[1, 2]", MS_ERR_FORMAT);
    expect("empty", "", MS_ERR_FORMAT);
    expect("unknown architecture",
           "{\"architectures\": [\"MistralForCausalLM\"], " MIN_LLAMA_FIELDS "}", MS_ERR_UNSUPPORTED);
    expect("unknown model_type", "{\"model_type\": \"gpt2\", " MIN_LLAMA_FIELDS "}", MS_ERR_UNSUPPORTED);
    expect("no architecture at all", "{" MIN_LLAMA_FIELDS "}", MS_ERR_NOT_FOUND);
    expect("architectures not a list", "{\"architectures\": \"LlamaForCausalLM\", " MIN_LLAMA_FIELDS "}",
           MS_ERR_FORMAT);
    expect("architectures empty", "{\"architectures\": [], " MIN_LLAMA_FIELDS "}", MS_ERR_FORMAT);
    expect("missing hidden_size",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, \"intermediate_size\": 128,"
           " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"rms_norm_eps\": 1e-5}",
           MS_ERR_NOT_FOUND);
    expect("missing rms_norm_eps",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, \"intermediate_size\": 128,"
           " \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
           MS_ERR_NOT_FOUND);
    expect("string where int expected",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, \"hidden_size\": \"64\","
           " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"rms_norm_eps\": 1e-5}",
           MS_ERR_FORMAT);
    expect("float where int expected",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100.0, \"hidden_size\": 64,"
           " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"rms_norm_eps\": 1e-5}",
           MS_ERR_FORMAT);
    expect("zero layers",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, \"hidden_size\": 64,"
           " \"intermediate_size\": 128, \"num_hidden_layers\": 0, \"num_attention_heads\": 4, \"rms_norm_eps\": 1e-5}",
           MS_ERR_FORMAT);
    expect("vocab too big",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 33554432, \"hidden_size\": 64,"
           " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"rms_norm_eps\": 1e-5}",
           MS_ERR_RANGE);
    expect("eps zero",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, \"hidden_size\": 64,"
           " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"rms_norm_eps\": 0}",
           MS_ERR_FORMAT);
    expect("eps string",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, \"hidden_size\": 64,"
           " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"rms_norm_eps\": \"x\"}",
           MS_ERR_FORMAT);
    expect("heads not divisible by kv heads", WITH(", \"num_key_value_heads\": 3"), MS_ERR_FORMAT);
    expect("kv heads > heads", WITH(", \"num_key_value_heads\": 8"), MS_ERR_FORMAT);
    expect("hidden not divisible by heads",
           "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, \"hidden_size\": 66,"
           " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"rms_norm_eps\": 1e-5}",
           MS_ERR_FORMAT);
    expect("odd head_dim", WITH(", \"head_dim\": 15"), MS_ERR_FORMAT);
    expect("unknown rope type", WITH(", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}"),
           MS_ERR_UNSUPPORTED);
    expect("rope_scaling not object", WITH(", \"rope_scaling\": 8"), MS_ERR_FORMAT);
    expect("rope type not string", WITH(", \"rope_scaling\": {\"rope_type\": 3}"), MS_ERR_FORMAT);
    expect("llama3 without factor",
           WITH(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1, \"high_freq_factor\": 4,"
                " \"original_max_position_embeddings\": 8192}"),
           MS_ERR_NOT_FOUND);
    expect("llama3 high <= low",
           WITH(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4,"
                " \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}"),
           MS_ERR_FORMAT);
    expect("rope_theta negative", WITH(", \"rope_theta\": -1"), MS_ERR_FORMAT);
    expect("tie not bool", WITH(", \"tie_word_embeddings\": 1"), MS_ERR_FORMAT);
    expect("eos list too long", WITH(", \"eos_token_id\": [1,2,3,4,5,6,7,8,9]"), MS_ERR_RANGE);
    expect("eos outside vocab", WITH(", \"eos_token_id\": 100"), MS_ERR_RANGE);
    expect("eos negative", WITH(", \"eos_token_id\": [-1]"), MS_ERR_RANGE);
    expect("eos string", WITH(", \"eos_token_id\": \"</s>\""), MS_ERR_FORMAT);
    expect("eos list of strings", WITH(", \"eos_token_id\": [\"a\"]"), MS_ERR_FORMAT);
    expect("bos float", WITH(", \"bos_token_id\": 1.5"), MS_ERR_FORMAT);
    expect("gelu", WITH(", \"hidden_act\": \"gelu\""), MS_ERR_UNSUPPORTED);
    expect("torch_dtype too long", WITH(", \"torch_dtype\": \"a_very_long_dtype_name\""), MS_ERR_FORMAT);
    expect("max_pos string", WITH(", \"max_position_embeddings\": \"2048\""), MS_ERR_FORMAT);
#undef WITH
    ms_hfconfig c;
    CHECK(ms_hfcfg_load("/nonexistent/config.json", &c) == MS_ERR_IO);
}

static bool cfg_equal(const ms_hfconfig *a, const ms_hfconfig *b) {
    bool eq = a->arch == b->arch && !strcmp(a->arch_name, b->arch_name) && a->vocab_size == b->vocab_size &&
              a->hidden_size == b->hidden_size && a->intermediate_size == b->intermediate_size &&
              a->n_layers == b->n_layers && a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads &&
              a->head_dim == b->head_dim && a->max_position_embeddings == b->max_position_embeddings &&
              a->rms_norm_eps == b->rms_norm_eps && a->rope_theta == b->rope_theta &&
              a->tie_word_embeddings == b->tie_word_embeddings && a->attention_bias == b->attention_bias &&
              a->qk_norm == b->qk_norm && a->rope_scaling.type == b->rope_scaling.type &&
              a->bos_token_id == b->bos_token_id && a->n_eos == b->n_eos && !strcmp(a->torch_dtype, b->torch_dtype);
    if (eq && a->rope_scaling.type == MS_ROPE_LLAMA3)
        eq = a->rope_scaling.factor == b->rope_scaling.factor &&
             a->rope_scaling.low_freq_factor == b->rope_scaling.low_freq_factor &&
             a->rope_scaling.high_freq_factor == b->rope_scaling.high_freq_factor &&
             a->rope_scaling.original_max_position_embeddings == b->rope_scaling.original_max_position_embeddings;
    for (int i = 0; eq && i < a->n_eos; i++) eq = a->eos_token_ids[i] == b->eos_token_ids[i];
    return eq;
}

static void test_round_trip(void) {
    char dir[] = "/tmp/ms_hfcfg_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        g_fail++;
        return;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *srcs[] = {LLAMA32, QWEN25, QWEN3};
    for (int i = 0; i < 3; i++) {
        ms_hfconfig a, b;
        CHECK(parse(srcs[i], &a) == MS_OK);
        if (i == 2) a.rms_norm_eps = 1.0 / 3.0e6; /* a value that needs all 17 digits */
        CHECK(ms_hfcfg_write(path, &a) == MS_OK);
        CHECK(ms_hfcfg_load(path, &b) == MS_OK);
        CHECK(cfg_equal(&a, &b));
    }
    /* The writer spells the fields transformers expects. */
    char *text;
    size_t len;
    CHECK(ms_read_file(path, &text, &len) == MS_OK);
    if (text) {
        CHECK(strstr(text, "\"model_type\": \"qwen3\""));
        CHECK(strstr(text, "\"hidden_act\": \"silu\""));
        CHECK(strstr(text, "\"rope_theta\": 1000000.0"));
        CHECK(strstr(text, "\"torch_dtype\": \"bfloat16\""));
        free(text);
    }
    /* Refuses to write an inconsistent configuration. */
    ms_hfconfig bad;
    CHECK(parse(LLAMA32, &bad) == MS_OK);
    bad.n_kv_heads = 5;
    unlink(path);
    CHECK(ms_hfcfg_write(path, &bad) == MS_ERR_FORMAT);
    CHECK(!ms_file_exists(path));
    rmdir(dir);
}

int main(void) {
    test_real_configs();
    test_defaults_and_variants();
    test_malformed();
    test_round_trip();
    if (g_fail) {
        fprintf(stderr, "test_hfconfig: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_hfconfig: all checks passed\n");
    return 0;
}
