/* ms_ngram.h — the n-gram draft source (docs/architecture.md §3, draft kind `ngram`).
 *
 * Prompt-lookup drafting: the request's own tokens (prompt, then everything
 * emitted) are the corpus. The draft after the root is the continuation of
 * the most recent earlier occurrence of the history's longest suffix of
 * n_max .. n_min tokens: when the answer copies a span of the prompt or of
 * itself (code edits, summaries, multi-turn chat, a function re-quoted), the
 * span is proposed at no model cost. No training, no model; the ids are the
 * request's own, so they are in the MicroSpec window's context by
 * construction.
 *
 * The index: one open-addressing table of (end position, n) entries, an
 * entry per (n-gram, n) holding its latest occurrence that has a next token;
 * entries are compared token by token, so a hash collision only costs a
 * probe. Everything is sized at creation: the history keeps at most
 * max_history tokens; when full it keeps the newer half and re-indexes it
 * (amortised O(n_max − n_min + 1) per token, no allocation).
 *
 * Two uses:
 *   - merged into another draft's tree (ms_dft with o.ngram; "lm+ngram"):
 *     ms_ngram_graft puts the continuation under the root, sharing the nodes
 *     whose tokens the tree already has;
 *   - alone (`--draft-kind ngram`): ms_ngd is a draft port with no model, a
 *     chain of the continuation per round (just the root when nothing
 *     matches: a plain decode step).
 * Either way the target verifies the candidates like any deterministic draft
 * (a point-mass proposal), so greedy output stays the target's and sampling
 * stays exact (ms_tgt_verify_tree).
 */
#ifndef MS_NGRAM_H
#define MS_NGRAM_H

#include "ms_msg.h"

typedef struct {
    int64_t n_min;       /* shortest suffix matched (default 2; ≥ 1) */
    int64_t n_max;       /* longest (default 4; n_min ≤ n_max ≤ MS_NGRAM_N_MAX) */
    int64_t max_len;     /* tokens a continuation drafts at most (default 16; 1 .. MS_TREE_MAX − 1);
                            one whose match shares ≥ 16 tokens of context: 4x that, ≤ MS_TREE_MAX − 1 */
    int64_t max_history; /* tokens kept per request (default 32768; ≥ 2·n_max + 2) */
} ms_ngram_params;

#define MS_NGRAM_N_MAX 8

typedef struct ms_ngram ms_ngram;

ms_ngram_params ms_ngram_params_default(void);
/* MS_OK, or MS_ERR_INVALID naming the field. */
ms_status ms_ngram_params_check(const ms_ngram_params *p);

/* Owns the history and the index, sized from p; free with ms_ngram_free. */
ms_status ms_ngram_new(const ms_ngram_params *p, ms_ngram **out);
void ms_ngram_free(ms_ngram **g);
/* Empties the history (a new request); the acceptance record is kept. */
void ms_ngram_reset(ms_ngram *g);
/* Appends ids[n] to the history (ids ≥ 0). */
void ms_ngram_append(ms_ngram *g, const int32_t *ids, int64_t n);
/* The history kept: *n tokens, oldest first (valid until the next append). */
const int32_t *ms_ngram_history(const ms_ngram *g, int64_t *n);

/* The continuation of the history's longest suffix (n from n_max down to
 * n_min) that occurred before with a next token: the ≤ max tokens that
 * followed its most recent occurrence, into out. Returns the count (0: no
 * match); *n_match (may be NULL) gets the suffix length matched. */
int64_t ms_ngram_lookup(const ms_ngram *g, int64_t max, int32_t *out, int64_t *n_match);

/* ---- a request's rounds ----
 *
 * The tree's node scores are log-estimates of acceptance (the target's cost
 * policy prunes by them, ms_policy.h). A continuation's i-th token is scored
 * log p(i | context): the running share of rounds in which it matched what
 * the target emitted when the one before it did, per position and per the
 * match's context — the suffix matched, extended backwards while the tokens
 * before the earlier occurrence agree with the history's (1, 2, 3, 4, 5-7,
 * 8-15, 16-31, 32+ tokens): a span copied with a long shared context is
 * accepted far more often than a 2-token coincidence (counts with a prior
 * rate from 1 in 2 for 1-2 tokens to 0.97 for 32+, 2 tries, decayed so that
 * the recent verdicts dominate; kept across requests). Every proposal is fed back by the next
 * commit. */

/* A new request: the history becomes prompt[n] + root. */
void ms_ngram_begin(ms_ngram *g, const int32_t *prompt, int64_t n, int32_t root);
/* The continuation after the history (≤ max_len tokens, or more after a long shared context: see max_len) into ids, each
 * token's log p into logp; remembered until the next commit. Returns the
 * count (0: nothing matched). */
int64_t ms_ngram_propose(ms_ngram *g, int32_t *ids, float *logp);
/* A verdict: emitted[n] = the accepted draft tokens then the bonus. The last
 * proposal (if any since the last commit) is scored against emitted, the
 * bonus included (what the target chose, whether or not the proposal was
 * verified); then the history grows by emitted. */
void ms_ngram_commit(ms_ngram *g, const int32_t *emitted, int64_t n);
/* Tokens proposed, and accepted on a verified path, since creation (statistics). */
void ms_ngram_counts(const ms_ngram *g, int64_t *proposed, int64_t *accepted);

/* Puts the chain ids[n] under t's root: the longest prefix already in the
 * tree (the same token under the same parent) is shared (its score kept),
 * the rest appended as new nodes with score = the parent's + logp[i] (logp
 * NULL: + 0, a point mass), while t->n < max_nodes (≤ MS_TREE_MAX); every
 * node of the chain in t, shared or new, gets its bit in t->ngram. Returns
 * the nodes added. t stays valid (ms_tree_validate): parents before
 * children, masks and depths consistent. */
int64_t ms_ngram_graft(ms_tree *t, const int32_t *ids, const float *logp, int64_t n, int64_t max_nodes);

/* ---- the draft kind `ngram`: a port with no model ---- */

typedef struct ms_ngd ms_ngd;

ms_status ms_ngd_new(const ms_ngram_params *p, ms_ngd **out);
void ms_ngd_free(ms_ngd **d);
/* The port the target drives; valid while d lives. Trees are chains of the
 * lookup's continuation (ms_tree_validate holds); verdicts are checked
 * against the last tree as ms_dft checks them. */
ms_draft_port ms_ngd_port(ms_ngd *d);

#endif
