/* ms_tree.h — the EAGLE-2 dynamic draft tree (docs/architecture.md §4, eagle2-frspec-notes §2.2-2.3).
 *
 * Pure algorithm: the builder does not know the model. The caller runs the
 * draft once on the committed context and hands over the level-1 candidates
 * (the K best of the draft distribution after the root); deeper levels are
 * drafted through a callback that runs the draft on one batch of tree rows.
 *
 * Tree mode (EAGLE-2):
 *   level 1 = the K root candidates, s = logp (history slots [0, K));
 *   pass i = 1..depth: the beam (K nodes of level i) is submitted as K rows;
 *     each row returns its K best children → K² candidates of level i+1 with
 *     s_child = s_parent + logp, all appended to the history (slot
 *     K + (i-1)K² + r·K + j = j-th child of beam row r); the next beam is the
 *     top-K of those K² by s (ties → lower history slot), in that rank order;
 *   rerank: the top (total-1) history slots by s (ties → lower slot), or all of
 *     them when there are fewer. Because log-probs are ≤ 0, s_child ≤ s_parent
 *     and a parent's slot is lower, so every selected node's parent is selected;
 *   flatten: selected slots in ascending order (= by depth, beam row, rank),
 *     node 0 = the root, mask = parent mask | own bit, depth = parent depth + 1.
 * Chain mode: depth+1 tokens, each the top-1 child of the previous one (tree
 *   mode with K = 1 and total = depth + 2; the callback gets k = 1, one row
 *   per pass; top_k and total are not used).
 * Confidence stop (p_min > 0, llama.cpp's --draft-p-min): before pass i the
 *   builder looks at the nodes it would submit. Chain: the level-i token's own
 *   draft probability exp(logp) (the top-1 of that step, not the product
 *   along the chain); tree: the beam's best cumulative probability exp(s).
 *   Below p_min, drafting stops: no more passes, the tree is what the history
 *   holds (rerank and flatten as usual). The low-confidence token itself is
 *   KEPT: it came out of the previous pass (or the root's head) for free and
 *   costs only one verify row, which on a weight-bound target is nearly free,
 *   while its draft forward — the cost p_min exists to avoid — is skipped.
 *   (llama.cpp drops it; there the token's verify row is what it saves.) So a
 *   round always drafts ≥ 1 token, and p_min > 1 drafts exactly the level-1
 *   candidates with no pass at all. The expand callback runs ≤ depth times.
 *
 * Rows per round: tree K·depth (defaults 50), chain depth; always ≤ 64 so that
 * a row's attention mask fits a uint64. Nothing is allocated: the builder
 * works in fixed stack buffers sized by MS_TREE_MAX and MS_TREE_MAX_K (about
 * 28 KB: the history holds ≤ K·(1 + MS_TREE_MAX) = 1040 slots).
 * Candidates with log-prob −inf are kept like any other (they rank last).
 */
#ifndef MS_TREE_H
#define MS_TREE_H

#include "ms_common.h"
#include "ms_msg.h" /* ms_tree, MS_TREE_MAX, ms_tree_validate */

#define MS_TREE_MAX_K 16 /* children per node / beam width */

typedef struct {
    int64_t top_k; /* K: children per node and beam width (default 10, 1..MS_TREE_MAX_K) */
    int64_t depth; /* expansion passes after the first (default 5) → max node depth depth+1 */
    int64_t total; /* nodes incl. the root (default 60, 2..MS_TREE_MAX) */
    bool chain;    /* chain mode: a single path of depth+1 tokens (top-1 each step) */
    float p_min;   /* confidence stop (see above): 0 = off (default), in [0, 1] stops below p_min, > 1
                      never expands */
} ms_tree_params;


/* Runs the draft on n_rows new tree rows (one pass = one tree level). Row r is
 * a node with token tokens[r] at node depth depth[r]; it may attend to the rows
 * given by mask[r] over all rows submitted in this round so far (bit =
 * submission index, rows numbered in submission order across passes, itself
 * included) plus the committed context. parent_row[r] is the submission index
 * of its parent row (−1: the parent is the root, i.e. the committed context's
 * last position). Rows of one pass have the same depth (RoPE position c +
 * depth - 1, notes §2.4).
 * The callee writes for each row the k best (id, log-prob) pairs of its draft
 * distribution, descending (ties → lower id): out_ids/out_logp [n_rows, k].
 * Ids must be ≥ 0, log-probs ≤ 0 (−inf allowed, NaN not) and non-increasing
 * per row; anything else fails the build with MS_ERR_INVALID. A negative
 * status is returned unchanged by ms_tree_build (the callee logs it). */
typedef ms_status (*ms_tree_expand_fn)(void *ctx, const int32_t *tokens, const int32_t *depth,
                                       const int32_t *parent_row, const uint64_t *mask, int64_t n_rows,
                                       int64_t k, int32_t *out_ids, float *out_logp);

/* EAGLE-2 defaults: top_k 10, depth 5, total 60, tree mode, p_min 0. */
ms_tree_params ms_tree_params_default(void);

/* MS_OK, or MS_ERR_INVALID with a message naming the field: top_k in
 * [1, MS_TREE_MAX_K], depth ≥ 0, and in tree mode total in [2, MS_TREE_MAX] and
 * top_k·depth ≤ MS_TREE_MAX rows; in chain mode depth + 2 ≤ MS_TREE_MAX;
 * p_min finite and ≥ 0. */
ms_status ms_tree_params_check(const ms_tree_params *p);

/* Builds the tree into *out (out->n = 0 on any failure).
 * root_ids/root_logp: the K best of the draft's distribution after the root
 * (level 1), descending; K = p->top_k entries (chain mode reads entry 0 only).
 * expand may be NULL only when p->depth == 0. It is called depth times, or
 * fewer when p->p_min stops the round early. */
ms_status ms_tree_build(const ms_tree_params *p, int32_t root_token, const int32_t *root_ids,
                        const float *root_logp, ms_tree_expand_fn expand, void *ctx, ms_tree *out);

#endif
