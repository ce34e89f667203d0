/* ms_eagle.h — the EAGLE-1/2 draft head (draft kind `eagle`,
 * eagle2-frspec-notes §1).
 *
 * One decoder layer fed by the target:
 *   x = fc(concat(Embed_target(token), f)) (+ fc.bias)       fc: [d, 2d]
 *   h = x + Wo · Attn(RoPE(Wq·x + bq), RoPE(Wk·x + bk), Wv·x + bv)   (no input_layernorm)
 *   y = h + Wdown · (silu(Wgate · n(h)) ⊙ Wup · n(h))         n = post_attention_layernorm
 *   logits = lm_head_target · y                              (no final norm)
 * Row inputs are shifted by one (notes §1.3): the row at position p takes the
 * target feature f_p (final-norm hidden state) and the token at p + 1; deeper
 * tree rows take their parent's y as the feature.
 *
 * Files: eagle_dir/config.json (LlamaForCausalLM-style, num_hidden_layers 1,
 * optional "bias" / "qkv_bias") + model.safetensors (fc.weight, optional
 * fc.bias, layers.0.*; embed_tokens.weight is ignored). The embedding and LM
 * head come from target_dir (model.embed_tokens.weight, lm_head.weight or the
 * tied embedding). Weights become f32 at load (aligned F32 used in place).
 *
 * KV discipline as ms_model: `len` rows are kept; a forward writes rows
 * [len, len + n) and advances len; a caller drops tree rows with
 * ms_eagle_truncate (notes §1.4: no compaction is needed, the next committed
 * pass overwrites them). Every buffer is sized at load; nothing is allocated
 * per forward.
 */
#ifndef MS_EAGLE_H
#define MS_EAGLE_H

#include "ms_hfconfig.h"

typedef struct ms_eagle ms_eagle;

typedef struct {
    int64_t max_ctx;   /* KV rows and RoPE positions; 0 → 4096 */
    int64_t max_batch; /* rows per forward; 0 → 256 (clamped to max_ctx) */
} ms_eagle_opts;

/* Load the draft head and the target's embedding / LM head. o may be NULL.
 * Errors name the file and field/tensor: MS_ERR_NOT_FOUND (missing file,
 * field or tensor), MS_ERR_FORMAT (wrong shape, hidden sizes that differ
 * between the two configs), MS_ERR_UNSUPPORTED (num_hidden_layers ≠ 1, a
 * head_dim other than hidden/heads, rope type, weight dtype). *out is owned by
 * the caller (ms_eagle_free). */
/* What ms_eagle_load reads from the head's config.json. */
typedef struct {
    ms_hfconfig base; /* LlamaConfig fields; "architectures" is ignored (llama, or qwen2 by model_type) */
    bool fc_bias;     /* "bias" (default true); fc.bias is used whenever the file has it */
    bool qkv_bias;    /* q/k/v biases required: "qkv_bias", "attention_bias" or qwen2 */
} ms_eagle_config;

/* Parse an EAGLE config.json text (`name` in messages; for tests and the fuzz
 * target): ms_hfcfg_parse's checks plus num_hidden_layers == 1 and
 * head_dim == hidden_size / heads (MS_ERR_UNSUPPORTED otherwise). */
ms_status ms_eagle_config_parse(const char *json, size_t len, const char *name, ms_eagle_config *out);

ms_status ms_eagle_load(const char *eagle_dir, const char *target_dir, const ms_eagle_opts *o, ms_eagle **out);
/* Free and null *e (NULL-safe). */
void ms_eagle_free(ms_eagle **e);

int64_t ms_eagle_hidden(const ms_eagle *e); /* d */
int64_t ms_eagle_vocab(const ms_eagle *e);  /* V of the target */
int64_t ms_eagle_len(const ms_eagle *e);
int64_t ms_eagle_max_ctx(const ms_eagle *e);
int64_t ms_eagle_max_batch(const ms_eagle *e);
/* Keep the first len rows (0 ≤ len ≤ current len; MS_ERR_RANGE otherwise). */
ms_status ms_eagle_truncate(ms_eagle *e, int64_t len);

/* Forward n rows at KV rows [len, len + n) (len += n): row r consumes token
 * tokens[r] (embedded with the target's table) and feature feat[r] ([n, d],
 * f32; a target final-norm hidden state for committed rows, the parent's draft
 * output y for tree rows), at RoPE position pos[r] (NULL → len + r).
 * mask / mask_back as ms_model_forward_masked: NULL → causal; else bit j of
 * mask[r] ↔ row len − mask_back + j (a row must set its own bit to see
 * itself), every row before len − mask_back is visible, mask_back + n ≤ 64.
 * feat may point into ms_eagle_out's buffer (a level's features read from the
 * previous level's outputs in place).
 * Fails without writing anything: MS_ERR_RANGE (n outside 1..max_batch, cache
 * full, position outside [0, max_ctx), bad mask_back), MS_ERR_INVALID (NULL
 * tokens/feat, token outside [0, V)). */
ms_status ms_eagle_forward(ms_eagle *e, const int32_t *tokens, const float *feat, int64_t n, const int32_t *pos,
                           const uint64_t *mask, int64_t mask_back);
/* y of the last forward's rows: [n, d], valid until the next forward. */
const float *ms_eagle_out(const ms_eagle *e);
/* The target's LM head [V, d] (f32; the embedding when tied). */
/* The target's token embedding [V, d] f32 (host), as the draft reads it. */
const float *ms_eagle_embed(const ms_eagle *e);
const float *ms_eagle_lm_head(const ms_eagle *e);
/* logits[n, V] = lm_head · y for rows [first, first + n) of the last forward
 * (MS_ERR_RANGE outside it). */
ms_status ms_eagle_logits(ms_eagle *e, int64_t first, int64_t n, float *logits);

#endif
