/* ms_target.h — the target side of speculative decoding (docs/architecture.md §4).
 *
 * Prefill, tree verification over the full vocabulary, acceptance, KV
 * compaction, and the request loop that drives a draft through an
 * ms_draft_port. Without a draft (or once it fails) the same loop runs with
 * a one-node tree, which is plain autoregressive decoding: the output is the
 * target's own either way (greedy: token for token; sampling: the same
 * distribution).
 */
#ifndef MS_TARGET_H
#define MS_TARGET_H

#include <stdio.h>

#include "ms_model.h"
#include "ms_msg.h"

typedef struct ms_tgt ms_tgt;

#define MS_MAX_STOP 16
#define MS_GEN_LINK_SAMPLES 1024 /* per-round link-cost samples kept per request */

typedef struct {
    int64_t max_new_tokens;  /* default 256 */
    ms_k_sampling sampling;  /* temperature 0 → greedy */
    uint64_t seed;
    int64_t k_pre;           /* top-K_pre target ids per prompt position for S_init (default 3) */
    int64_t k_ver;           /* top-K_ver target ids per accepted node for C_ver (default 3) */
    int32_t stop_ids[MS_MAX_STOP]; /* generation ends at the first of these (not emitted) */
    int64_t n_stop;
    int32_t ban_ids[MS_MAX_STOP];  /* never generated: their logits are −inf in every row sampled or verified
                                      (llama.cpp's --ignore-eos bans the end-of-generation ids so) */
    int64_t n_ban;
    bool cost_policy;        /* verify only the part of each tree that pays (ms_policy.h; default true) */
} ms_gen_params;

ms_gen_params ms_gen_params_default(void);

/* Per-request statistics (docs/architecture.md §8). */
typedef struct {
    int64_t prompt_tokens;
    int64_t new_tokens;           /* tokens emitted (stop token excluded) */
    int64_t rounds;               /* target forwards after the prefill */
    int64_t spec_rounds;          /* rounds verified against a draft tree */
    int64_t accepted_ge[MS_TREE_MAX + 1]; /* rounds whose accepted draft path had ≥ d tokens (d ≥ 1) */
    int64_t accepted_ngram;       /* accepted draft tokens the n-gram source proposed (the model may have too);
                                     the rest of Σ_d accepted_ge[d] came from the model alone */
    int64_t max_depth;            /* deepest d with accepted_ge[d] counted */
    int64_t drafted;              /* draft tokens verified (tree nodes − root) summed over spec rounds */
    int64_t drafted_max;          /* the most draft tokens in one spec round's tree */
    int64_t pruned;               /* draft tokens the cost policy left unverified, summed over spec rounds */
    int64_t plain_rounds;         /* spec rounds the cost policy verified as a plain decode step (root only) */
    int64_t skipped_rounds;       /* rounds drafted without the model: the cost policy's or the draft's own (n-gram first) */
    int64_t vocab_sum, vocab_max; /* active draft vocabulary over spec rounds */
    int64_t covered, emitted;     /* coverage numerator / denominator (from the draft) */
    double prefill_s, draft_backbone_s, draft_head_s, vocab_s, verify_s, accept_s, total_s;
    bool draft_failed;            /* the draft failed mid-request; the rest ran alone */
    /* Link cost per speculative round: time inside the draft port's calls
     * (accept of the previous round + draft of this one) minus the work the
     * draft reports for them (backbone + head + vocabulary), in µs. In
     * process it is call overhead; across a link it is transport, encoding
     * and waiting. The first MS_GEN_LINK_SAMPLES rounds are kept. */
    float link_us[MS_GEN_LINK_SAMPLES];
    int64_t n_link;
    const char *stop_reason;      /* "stop token", "max tokens", "context full", "cancelled" */
    int32_t stop_id;              /* the stop token that ended generation (not emitted); −1 otherwise */
} ms_gen_stats;

/* Mean accepted length: tokens emitted per target forward after the prefill
 * (accepted drafts + bonus per round, averaged over rounds, before any stop or
 * max-tokens cut; the prefill's first token is not counted; AR = 1.00). */
double ms_gen_stats_mean_accepted(const ms_gen_stats *s);
/* Draft tokens accepted over the request: Σ_d accepted_ge[d] (of which accepted_ngram from the n-gram source). */
int64_t ms_gen_stats_accepted(const ms_gen_stats *s);
/* Share of spec rounds whose accepted path reached depth d (d ≥ 1). */
double ms_gen_stats_accept_rate(const ms_gen_stats *s, int64_t d);
double ms_gen_stats_coverage(const ms_gen_stats *s); /* covered / emitted, 1 when nothing measured */
/* Median and 99th percentile of n samples (sorted copy; 0 when n = 0). */
void ms_quantiles(const float *v, int64_t n, double *median, double *p99);
/* One line per statistic, human readable, to f. */
void ms_gen_stats_print(const ms_gen_stats *s, FILE *f);

/* Called with each batch of emitted tokens, in order; return false to cancel. */
typedef bool (*ms_token_cb)(void *ctx, const int32_t *ids, int64_t n);

/* The target takes a loaded model (not owned). Buffers sized at creation.
 * With a draft and p->cost_policy, the first request measures the cost of
 * verify forwards of 1..64 rows once (ms_policy.h; tens of forwards, logged),
 * and every forward keeps the measure current. */
ms_status ms_tgt_new(ms_model *model, ms_tgt **out);
/* Keep the cost policy's calibration between processes (ms_cost_load /
 * ms_cost_save): in ${XDG_CACHE_HOME:-~/.cache}/microspec/verify-cost/, one
 * file per model file (its name and size), kernel level, threads, matmul
 * path (q8_matmul) and device. A valid file there spares the
 * ~10 decode steps of measuring at the first speculative request; the
 * measures go on updating the table as before, and it is saved again after
 * each request that speculated. Off when MS_VERIFY_COST_CACHE=0
 * or no home is known; any failure only logs and measures as before. */
void ms_tgt_cost_cache(ms_tgt *t, const char *model_path, int threads, bool q8_matmul, const char *device);
/* Measure the cost table now, over an empty context, unless it is known
 * (measured, or read by ms_tgt_cost_cache); the KV cache is left empty. A
 * server calls it at start, before it listens, so that no request pays the
 * ~10 decode steps; the forwards of every request keep the table current. */
ms_status ms_tgt_warm_up(ms_tgt *t);
void ms_tgt_free(ms_tgt **t);
ms_model *ms_tgt_model(ms_tgt *t);

/* Generate a continuation of prompt[n]. draft may be NULL (autoregressive).
 * The KV cache is reset first. */
ms_status ms_tgt_generate(ms_tgt *t, ms_draft_port *draft, uint64_t request_id, const int32_t *prompt, int64_t n,
                          const ms_gen_params *p, ms_token_cb cb, void *cb_ctx, ms_gen_stats *stats);

/* Verification of one tree from its target logits (exposed for tests).
 * logits: [tree->n, V] rows in node order. Greedy when sampling temperature
 * is 0: the longest path whose every token is the target's argmax after its
 * parent, bonus = argmax after the path. Sampling: at each node its children
 * are tested in node order — child x accepted with probability p(x), else
 * p(x) ← 0 and p renormalised — and the bonus is drawn from what remains
 * (exact for deterministic draft candidates). `probs` is scratch of V floats.
 * Writes path (node indices, path[0] = 0) and returns its length. */
int64_t ms_tgt_verify_tree(const ms_tree *tree, const float *logits, int64_t V, const ms_k_sampling *s, ms_rng *rng,
                           float *probs, int32_t *path, int32_t *bonus);

#endif
