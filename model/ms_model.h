/* ms_model.h — the model runtime used by both nodes (and the generate CLI).
 *
 * A decoder-only transformer (Llama / Qwen2 / Qwen3) loaded from a Hugging Face
 * directory. The KV cache and every activation buffer are sized at load time
 * (max_ctx rows, max_batch rows per forward); nothing is allocated per token.
 *
 * KV discipline: `len` rows are committed. ms_model_forward writes the batch
 * at rows [len, len + n) and advances len by n. A speculative caller then
 * either keeps them, truncates (ms_model_truncate) or keeps a path of them
 * (ms_model_compact: rows base + rows[k] → base + k).
 */
#ifndef MS_MODEL_H
#define MS_MODEL_H

#include "ms_hfconfig.h"
#include "ms_kernels.h"
#include "ms_qweight.h"

typedef struct ms_model ms_model;

typedef struct {
    int64_t max_ctx;    /* KV rows; 0 → min(max_position_embeddings, 4096) */
    int64_t max_batch;  /* rows per forward; 0 → 256 */
    int64_t n_layers;   /* 0 → all; N → the first N layers only (layerskip) */
    int64_t extra_ctx;  /* KV rows beyond max_ctx (resolved): a draft's room for its tree at the end of a context */
    const char *device; /* NULL / "" / "cpu": CPU, f32; "cuda" / "cuda:N": CUDA device N */
    ms_dtype act;       /* CUDA activation and weight dtype: 0 → MS_DTYPE_BF16; MS_DTYPE_F16 */
    int no_graphs;      /* CUDA only: 1 = run the ops eagerly instead of through CUDA graphs */
    /* GGUF on the CPU: 0 (default) = f32 activations against the dequantized
     * blocks (exact up to f32 rounding); 1 = activations quantized to 8-bit
     * blocks and integer dot products (the backend's act_quantize, as llama.cpp
     * does: several times faster, log-probs ~0.1 from exact, so greedy text
     * parts from the exact path's at margins up to ~0.6 on Gemma 3). */
    int q8_matmul;
} ms_model_opts;

/* "cpu" / NULL / "" → *cuda_dev = -1; "cuda" → 0; "cuda:N" (N in 0..255) → N.
 * Anything else is MS_ERR_INVALID, logged naming the string. Syntax only:
 * loading a CUDA model on a build without CUDA fails in ms_model_load. */
ms_status ms_model_device_parse(const char *s, int *cuda_dev);

typedef enum {
    MS_LOGITS_NONE = 0, /* no logits (e.g. prefill chunks before the last) */
    MS_LOGITS_LAST,     /* logits of the last row only: [1, V] */
    MS_LOGITS_ALL,      /* logits of every row: [n, V] */
} ms_logits_mode;

/* On CUDA (opts->device "cuda[:N]") the weights are converted to the act
 * dtype on the host chunk by chunk and uploaded once; the KV cache,
 * activations, f32 logits [max_batch, V] and small pinned staging buffers are
 * allocated here, with a compute stream of the model's own. Nothing is
 * allocated by a forward. The host-facing API below is the same on every
 * device: host tokens / positions / masks in, host f32 logits out. */
ms_status ms_model_load(const char *dir, const ms_model_opts *opts, ms_model **out);
/* A model of architecture `cfg` with seeded random weights (no checkpoint,
 * no tokenizer): every [a, b] matrix has deviation 1/sqrt(b) (fan-in), norm
 * weights 1 ± 0.05, biases deviation 0.02 (ms_k_random.h). On CUDA the
 * weights are generated on the device (no host copy; a Llama-3-8B shape is
 * 16 GB in bf16); on the CPU on the host. The CPU and the CUDA model of the
 * same (cfg, seed) have the same weights up to rounding to act. */
ms_status ms_model_new_random(const ms_hfconfig *cfg, uint64_t seed, const ms_model_opts *opts, ms_model **out);
void ms_model_free(ms_model **m);

const ms_hfconfig *ms_model_config(const ms_model *m);
int64_t ms_model_vocab(const ms_model *m);
int64_t ms_model_len(const ms_model *m);
int64_t ms_model_max_ctx(const ms_model *m);
int64_t ms_model_max_batch(const ms_model *m);

/* Forward n ≤ max_batch tokens at KV rows [len, len + n); len += n.
 * pos: NULL → len + i; mask: NULL → causal inside the batch, else (n ≤ 64)
 * mask[i] bit j = row i sees batch row j; committed rows are always visible.
 * logits: [1 or n, V] as `mode` says (may be NULL with MS_LOGITS_NONE).
 * Fails with MS_ERR_RANGE (nothing written) if the cache would overflow. */
ms_status ms_model_forward(ms_model *m, const int32_t *tokens, int64_t n, const int32_t *pos,
                           const uint64_t *mask, ms_logits_mode mode, float *logits);
/* The same with a mask that also reaches back over the last `mask_back` rows
 * already in the cache (rows [len − mask_back, len + n); bit j ↔ row
 * len − mask_back + j; mask_back + n ≤ 64). A draft drafting a tree one level
 * per call uses it so each node sees exactly its ancestors among the rows of
 * earlier levels. mask_back = 0 is ms_model_forward. */
ms_status ms_model_forward_masked(ms_model *m, const int32_t *tokens, int64_t n, const int32_t *pos,
                                  const uint64_t *mask, int64_t mask_back, ms_logits_mode mode, float *logits);
/* The LM head [V, d] f32 (the embedding when tied): the draft vocabulary packs rows of it.
 * CUDA: a host f32 copy made on the first call and kept (V·d·4 bytes of host
 * memory, 2.1 GB for Llama-3-8B); NULL (logged) if that fails. GGUF: NULL
 * (logged): use ms_model_lm_head_q. */
const float *ms_model_lm_head(const ms_model *m);
/* GGUF (CPU): the LM head in its stored block format (the embedding when
 * tied), a view into the mapped file valid while m lives; NULL for every
 * other model. A draft packs window rows from it block for block, so no f32
 * copy of the head is ever made (one would be 671 MB for
 * Gemma 3 270M). */
const ms_qweight *ms_model_lm_head_q(const ms_model *m);
/* The token embedding [V, d] in its stored form, a view valid while m lives
 * (raw rows: Gemma's sqrt(d) scale is not applied): GGUF, the block format;
 * a CPU safetensors model, its f32 table. A model on a device has no host
 * table: MS_ERR_UNSUPPORTED (logged). */
ms_status ms_model_embed_table(const ms_model *m, ms_qweight *out);
/* True when the model's matmuls take 8-bit activations (a GGUF model loaded
 * with ms_model_opts.q8_matmul); false otherwise. */
bool ms_model_q8_matmul(const ms_model *m);
/* Prefill any number of tokens in max_batch chunks; logits of the last row
 * into last_logits [V] (may be NULL). */
ms_status ms_model_prefill(ms_model *m, const int32_t *tokens, int64_t n, float *last_logits);
/* Final-norm hidden states of the last forward's rows: [n, d] (f32).
 * CUDA: downloaded (and widened to f32) into a host buffer sized at load on
 * the first call after a forward; later calls reuse it. */
const float *ms_model_hidden(const ms_model *m);

/* ---- device access (NULL on CPU) ---- */
/* The op table the model runs on (the CPU table on CPU). */
const ms_k_ops *ms_model_ops(const ms_model *m);
/* The model's compute stream (a cudaStream_t); NULL on CPU. */
void *ms_model_stream(const ms_model *m);
/* Device [n, d] act final-norm hidden states of the last forward. */
const void *ms_model_hidden_dev(const ms_model *m);
/* Device [V, d] act LM head (the embedding when tied). */
const void *ms_model_lm_head_dev(const ms_model *m);
/* CUDA-graph executables instantiated and updated in place so far (0 on CPU
 * or with no_graphs). Any pointer may be NULL. */
void ms_model_graph_counts(const ms_model *m, int64_t *inst, int64_t *upd);
/* The CUDA device index, or -1 on CPU. */
int ms_model_device(const ms_model *m);

ms_status ms_model_truncate(ms_model *m, int64_t len);
/* Keep rows base + rows[k] at base + k for k < n (rows strictly increasing,
 * rows[k] ≥ k, base + rows[n-1] < len); len = base + n. */
ms_status ms_model_compact(ms_model *m, int64_t base, const int64_t *rows, int64_t n);
void ms_model_reset(ms_model *m); /* len = 0 */

#endif
