/* ms_hfconfig.h — Hugging Face config.json for the supported architectures.
 *
 * LlamaForCausalLM (incl. rope_scaling {"rope_type"|"type": "llama3"}),
 * Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (per-head q/k RMSNorm,
 * explicit head_dim). Anything else — or a missing/ill-typed required field —
 * is refused with a message naming the file and the field.
 */
#ifndef MS_HFCONFIG_H
#define MS_HFCONFIG_H

#include "ms_common.h"

typedef enum { MS_ARCH_LLAMA = 0, MS_ARCH_QWEN2, MS_ARCH_QWEN3 } ms_arch;

typedef enum { MS_ROPE_DEFAULT = 0, MS_ROPE_LLAMA3 } ms_rope_type;

#define MS_MAX_EOS 8

typedef struct {
    ms_arch arch;
    char arch_name[64];
    int64_t vocab_size;
    int64_t hidden_size;       /* d */
    int64_t intermediate_size; /* MLP width */
    int64_t n_layers;
    int64_t n_heads;
    int64_t n_kv_heads;        /* = n_heads when absent */
    int64_t head_dim;          /* explicit (Qwen3) or hidden_size / n_heads */
    int64_t max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;         /* default 10000 */
    bool tie_word_embeddings;  /* default false for Llama/Qwen2/Qwen3 as in transformers */
    bool attention_bias;       /* q/k/v bias: Qwen2 always; Llama if "attention_bias": true */
    bool qk_norm;              /* Qwen3 */
    struct {
        ms_rope_type type;
        double factor;
        double low_freq_factor;
        double high_freq_factor;
        int64_t original_max_position_embeddings;
    } rope_scaling;
    int32_t bos_token_id;      /* -1 if absent */
    int32_t eos_token_ids[MS_MAX_EOS]; /* "eos_token_id" may be an int or a list */
    int n_eos;
    char torch_dtype[16];      /* "bfloat16", ... or "" */
} ms_hfconfig;

/* Read and validate `path` (a config.json). */
ms_status ms_hfcfg_load(const char *path, ms_hfconfig *out);
/* Parse from memory (for tests and the fuzz target); `name` appears in errors. */
ms_status ms_hfcfg_parse(const char *json, size_t len, const char *name, ms_hfconfig *out);
/* Write a config.json for `c` (used by the converter and test model generators). */
ms_status ms_hfcfg_write(const char *path, const ms_hfconfig *c);
/* Log the configuration at info level, one line. */
void ms_hfcfg_log(const ms_hfconfig *c);

#endif
