/* ref_model.h — a naive double-precision reference transformer, for tests.
 *
 * Written from the Hugging Face modeling code's semantics (LlamaForCausalLM,
 * Qwen2ForCausalLM, Qwen3ForCausalLM), not from the engine: every weight is
 * widened to double, there is no KV cache and no batching trick — each call
 * recomputes the whole sequence at positions 0..n-1 with a causal mask. It is
 * slow on purpose; it is the thing the engine's cache, tree attention and
 * compaction are compared against.
 *
 * Also the small helpers the model property tests share: temporary folders,
 * running microspec-mkmodel, copying a model with one weight perturbed, and
 * difference measures.
 */
#ifndef REF_MODEL_H
#define REF_MODEL_H

#include "test_fs.h"
#include "ms_hfconfig.h"
#include "ms_tensor.h"

typedef struct ref_model ref_model;

/* Load config.json (ms_hfcfg_load) and the weights (ms_st_open_dir) of `dir`,
 * converting F32/F16/BF16 to double. *out owned by the caller (ref_model_free). */
ms_status ref_model_load(const char *dir, ref_model **out);
void ref_model_free(ref_model **r);
const ms_hfconfig *ref_model_config(const ref_model *r);
/* Use only the first n layers (0 → all), as the engine's opts.n_layers. */
void ref_model_set_layers(ref_model *r, int64_t n);

/* Logits of tokens[0..n) at positions 0..n-1, causal. all_rows: logits is
 * [n, V]; else logits is [V] (the last row). Fails on an out-of-range token. */
ms_status ref_forward(const ref_model *r, const int32_t *tokens, int64_t n, bool all_rows, double *logits);

/* inv_freq[i] = theta^(-2i/hd), i < hd/2, then, when llama3 is set, the
 * scaling of transformers' _compute_llama3_parameters (written separately from
 * kernels/: this is what ms_k_rope_inv_freq is checked against). */
void ref_rope_inv_freq(double *inv_freq, int64_t head_dim, double theta, bool llama3, double factor,
                       double low_freq_factor, double high_freq_factor, double original_max_pos);

/* ---- test helpers ------------------------------------------------------- */

/* Run `tool --out dir <args split on spaces>`, stdout/stderr to /dev/null
 * unless verbose; returns the exit status (0 ok, <0 spawn failure). */
int ref_run_tool(const char *tool, const char *dir, const char *args);
/* Copy the model at src (config.json + all tensors) to dst as a single
 * model.safetensors, with element `index` of tensor `name` increased by delta
 * (in the tensor's own dtype). */
ms_status ref_copy_perturbed(const char *src, const char *dst, const char *name, int64_t index, double delta);
/* The general form: name may be NULL (no perturbation); n_extra tensors
 * (names and views, not copied) are added to the written file; one with the
 * name of a source tensor replaces it. */
ms_status ref_copy_model(const char *src, const char *dst, const char *name, int64_t index, double delta,
                         int64_t n_extra, const char *const *extra_names, const ms_tensor *extra);

/* max_i |a[i] - b[i]| and max_i |b[i]| (a NaN difference reads as +inf). */
double ref_max_abs_diff(const float *a, const double *b, int64_t n);
double ref_max_abs(const double *b, int64_t n);
/* The logits comparator: max|a - b| / max(1, max|b|). */
double ref_logits_err(const float *a, const double *b, int64_t n);
/* Same for two f32 rows (engine vs engine). */
double ref_logits_err_f(const float *a, const float *b, int64_t n);

/* The test model maker, built with the tools (MS_BUILD_DIR is defined for
 * every test target). */
#ifdef MS_BUILD_DIR
#define REF_MKMODEL MS_BUILD_DIR "/tools/microspec-mkmodel"
#endif

/* Make a test model: REF_MKMODEL --out root/name <args>; the folder into
 * dir[cap]. Logs and fails when the tool is missing or exits non-zero. */
ms_status ref_make_model(const char *root, const char *name, const char *args, char *dir, size_t cap);
/* Rewrite dir/config.json with llama3 RoPE scaling (factor, low, high,
 * original max) or, with factor 0, no scaling (ms_hfcfg_load/ms_hfcfg_write). */
ms_status ref_set_rope_llama3(const char *dir, double factor, double low, double high, int64_t original_max);
/* n random tokens in [0, vocab). */
void ref_random_tokens(ms_rng *r, int32_t *tokens, int64_t n, int64_t vocab);

#endif
