/* ms_policy.h — the cost-aware verify policy (issue 32): verify only the part
 * of a draft tree that pays on this machine.
 *
 * A verify forward of n rows costs c(n) (seconds; on a CPU c(2) ≈ 1.1-1.2
 * c(1) and each further row 0.1-0.4 c(1), depending on the instruction set
 * and the model). A node v of the tree is accepted with probability about
 * P(v) = exp(score(v)) (the draft's cumulative log-probability; the n-gram
 * source scores its tokens by their measured acceptance, ms_ngram.h), capped
 * by its parent's (a node is accepted only after its parent). Verifying a
 * prefix-closed set S of nodes yields 1 + Σ_{v∈S} P(v) tokens on average, so
 * the policy keeps the k nodes of highest P (parents first) for the k that
 * maximises (1 + Σ P) / c(k + 1); k = 0, the root alone, is a plain decode
 * step, so a round is never expected to be slower than AR. Pruning only
 * removes candidates: greedy output is the target's own and sampling stays
 * exact (ms_tgt_verify_tree tests the kept children in the same order).
 *
 * The cost table is measured on this machine: ms_tgt calibrates it once
 * (forwards of 1, 2, 4, 8 rows) and every verify forward updates it
 * (an exponential average, so it follows the context's growth); unmeasured
 * sizes are interpolated linearly between measured neighbours, and past the
 * largest measured size extrapolated with the slope of the last two.
 */
#ifndef MS_POLICY_H
#define MS_POLICY_H

#include "ms_msg.h"

typedef struct {
    double c[MS_TREE_MAX + 1]; /* c[n]: seconds for a forward of n rows; 0 = not measured */
} ms_cost;

void ms_cost_init(ms_cost *c);
/* A forward of n rows (1..MS_TREE_MAX) took s seconds. The first measure
 * sets c[n], later ones move it by 1/8 of the difference. */
void ms_cost_observe(ms_cost *c, int64_t n, double s);
/* True when c[1] and some c[n > 1] are measured. */
bool ms_cost_ready(const ms_cost *c);
/* The cost of n rows: measured, interpolated or extrapolated (see above). */
double ms_cost_at(const ms_cost *c, int64_t n);
/* The calibration kept between processes (one file per model, kernel level,
 * threads and matmul path; the caller names it): a line
 * "microspec-verify-cost 1 C1 C2 C4 C8" (seconds for 1, 2, 4, 8 rows).
 * ms_cost_load fills c from it and returns true only when the file holds
 * exactly that with every cost finite, positive, below 60 s, none below
 * half the one before (measured tables can dip a little: 2 rows at 0.99x of
 * 1) and none above 2.5 times it (measured under load); anything else:
 * false, c untouched; the caller measures again. ms_cost_save writes c's c[1], c[2], c[4], c[8] (a temporary file
 * renamed over path, so a reader never sees half of it). */
bool ms_cost_load(ms_cost *c, const char *path);
/* Whether c's costs at 1, 2, 4, 8 rows pass ms_cost_load's checks. */
bool ms_cost_plausible(const ms_cost *c);
ms_status ms_cost_save(const ms_cost *c, const char *path);

/* The subtree of `in` worth verifying (above) into *out, nodes in their
 * original order; map[i] = out's node i in `in`. Without a ready cost table
 * the whole tree is kept. Returns out->n; *expected (may be NULL) gets the
 * estimate of accepted draft tokens Σ P over the kept nodes. */
int64_t ms_policy_prune(const ms_tree *in, const ms_cost *c, ms_tree *out, int32_t *map, double *expected);

/* ---- whether to run the draft model at all ----
 *
 * Pruning saves verify rows, not the draft model's time. The gate weighs
 * the rounds drafted with the model against those without it (the n-gram
 * part alone, or a plain step): tokens emitted per second of draft port
 * time + verify, each a decayed sum (weight 0.9 per round of its kind).
 * When the model's rate falls below 0.95 of the other's (after 5 model rounds; with
 * no round without it yet, against a plain step, 1 / c(1)), the next
 * `backoff` rounds go without the model (ms_msg_verify.skip_model), then 3
 * rounds probe it again; a probe that still loses doubles the backoff (32 up
 * to 512 rounds), one that wins resets it. A model-free draft (ms_draft_port
 * .model_free) is not gated. The gate outlives a request (ms_tgt
 * keeps it): a request starts as the last one ended, so where the model does
 * not pay a new request does not prefill it (ms_msg_begin.skip_model). The
 * first model round of a request and a probe also commit what waited (the
 * prompt, the skipped rounds' tokens): the gate charges them the draft time
 * of an ordinary model round instead (none known yet: not counted), so a
 * catch-up is not held against the model. */
typedef struct {
    double m_tok, m_s; /* rounds with the model: tokens, seconds */
    double p_tok, p_s; /* rounds without it */
    double d_s;        /* draft time of an ordinary model round (decayed mean); < 0 unknown */
    int64_t m_rounds;
    int64_t skip_left, backoff, probe_left;
    bool prev_skipped;
    bool next;         /* the last decision of ms_gate_next */
    bool started;      /* a round was observed (or the gate was started closed) */
} ms_gate;

void ms_gate_init(ms_gate *g);
/* A draft with a part that costs nothing (the n-gram source) starts with the
 * model off: before any round was observed, the first GATE_BACKOFF_MIN rounds
 * go without it, then it is probed as after any run without it. So a process
 * that serves short requests pays neither the model's prompt prefill nor its
 * warm-up until the model has shown it pays (a probe catches up from the last
 * 16 tokens only). No effect once rounds were observed. */
void ms_gate_start_closed(ms_gate *g);
/* A verified round: drafted without the model (skipped) or with it; catchup:
 * a model round that first committed a prompt or the tokens of skipped
 * rounds (the first of a request or of a probe); tokens emitted, the draft
 * port's time and the verify forward's. */
void ms_gate_observe(ms_gate *g, bool skipped, bool catchup, int64_t tokens, double draft_s, double verify_s);
/* Whether the next round goes without the model; c1 = the cost of a plain
 * step (ms_cost_at(c, 1); ≤ 0: unknown, never skip). */
bool ms_gate_next(ms_gate *g, double c1);

#endif
