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

/* MS_ARCH_GEMMA3 comes from GGUF only (ms_hfcfg_from_gguf). */
typedef enum { MS_ARCH_LLAMA = 0, MS_ARCH_QWEN2, MS_ARCH_QWEN3, MS_ARCH_GEMMA3 } ms_arch;

/* FFN activation of the gated MLP: silu(gate)·up, or GELU(tanh)(gate)·up (Gemma). */
typedef enum { MS_ACT_SILU = 0, MS_ACT_GELU_TANH } ms_act;

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
    bool qk_norm;              /* Qwen3, Gemma 3 */
    /* Gemma 3 (zero / false for the others) */
    ms_act act;                /* MS_ACT_SILU unless Gemma */
    bool embed_scale;          /* embeddings × sqrt(hidden_size) */
    bool post_norms;           /* RMSNorm on the attention and FFN outputs before each residual add */
    int64_t sliding_window;    /* keys at distance ≥ this are invisible on local layers; 0: none */
    int64_t sliding_period;    /* layer l is global iff (l + 1) % period == 0; local otherwise */
    double rope_local_theta;   /* RoPE base of local (sliding-window) layers */
    double attn_scale;         /* 0: 1/sqrt(head_dim) */
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
/* From a GGUF file's metadata (architectures qwen2, llama, gemma3): hyper-
 * parameters, the vocabulary size (rows of token_embd.weight), tie (no
 * output.weight), BOS/EOS ids. Keys that change the maths and are not
 * implemented (rope scaling, logit softcapping, experts, ...) are refused by
 * name, as is any other architecture. Defined in ms_hfconfig_gguf.c. */
struct ms_gguf;
ms_status ms_hfcfg_from_gguf(const struct ms_gguf *g, ms_hfconfig *out);
/* True if layer l of c uses the sliding window (Gemma 3 local layers). */
bool ms_hfcfg_layer_is_local(const ms_hfconfig *c, int64_t l);

/* Log the configuration at info level, one line. */
void ms_hfcfg_log(const ms_hfconfig *c);

#endif
