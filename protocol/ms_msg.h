/* ms_msg.h — what crosses between the target and the draft (docs/architecture.md §4, §6).
 *
 * Every message is defined once, here, as a plain C struct. The single-process
 * driver passes them by direct call through an ms_draft_port; the two-node
 * link encodes the same structs with MessagePack (protocol issue). Pointers in
 * a message are borrowed: valid for the duration of the call only.
 */
#ifndef MS_MSG_H
#define MS_MSG_H

#include "ms_common.h"

#define MS_PROTO_VERSION 1
#define MS_TREE_MAX 64 /* nodes incl. the root; also the most draft rows per round */

/* A draft token tree, node 0 = root. */
typedef struct {
    int64_t n;                  /* nodes incl. root (node 0 = root) */
    int32_t token[MS_TREE_MAX]; /* node 0 = the root token (the last accepted/bonus token) */
    int32_t parent[MS_TREE_MAX]; /* −1 for the root; parent index < own index (topological) */
    int32_t depth[MS_TREE_MAX];  /* root 0 */
    uint64_t mask[MS_TREE_MAX];  /* bit j set ⇔ node j is an ancestor-or-self (bit 0 always set) */
    float score[MS_TREE_MAX];    /* cumulative draft log-prob s (root 0) */
    uint64_t ngram;              /* bit j set ⇔ the n-gram source proposed node j (whether or not the model
                                    did too; never the root): the accepted tokens' split by source */
} ms_tree;

/* Distinct token ids of the tree excluding the root, in node order of first
 * occurrence (C_draft of docs/architecture.md §5). out holds ≥ t->n - 1 ids; returns the count. */
int64_t ms_tree_distinct_ids(const ms_tree *t, int32_t *out);

/* Structural check of a tree from elsewhere (e.g. a peer): 1 ≤ n ≤ MS_TREE_MAX,
 * node 0 is a root (parent −1, depth 0, mask 1), every other node has
 * 0 ≤ parent < own index, depth = parent depth + 1, mask = parent mask | own
 * bit, token ≥ 0. MS_OK or MS_ERR_FORMAT naming the node and field. Scores are
 * not checked. */
ms_status ms_tree_validate(const ms_tree *t);
/* t->ngram names only nodes 1..n−1 (part of ms_tree_validate). */
bool ms_tree_ngram_valid(const ms_tree *t);

/* *t = the one-node tree of root (a plain decode step; scores 0). */
void ms_tree_root(ms_tree *t, int32_t root);

/* A verdict's path against the tree it answers: 1 ≤ n_path ≤ t->n,
 * path[0] = 0, each later node a child of the one before. MS_OK or
 * MS_ERR_INVALID, the message led by `who` ("draft accept"). */
ms_status ms_tree_path_check(const ms_tree *t, const int32_t *path, int64_t n_path, const char *who);

/* The tokens a verdict emits: the path's tokens after the root, then the
 * bonus, into out (≥ n_path entries); returns their count, n_path. */
int64_t ms_tree_path_tokens(const ms_tree *t, const int32_t *path, int64_t n_path, int32_t bonus, int32_t *out);


/* Start of a request: the target has prefilled the prompt. */
typedef struct {
    uint64_t request_id;
    const int32_t *prompt;   /* [n_prompt] prompt ids as the target saw them */
    int64_t n_prompt;
    const int32_t *topk_pre; /* [n_prompt, k_pre] target's top-K_pre ids per prompt position (S_init) */
    int64_t k_pre;
    int32_t root;            /* first token the target emitted (root of round 1's tree) */
    const float *features;   /* eagle drafts: target final-norm hidden states [n_prompt, feat_dim]; else NULL */
    int64_t feat_dim;
    bool skip_model;         /* round 1 goes without the draft model (ms_msg_verify.skip_model): the target's
                                cost policy found it not paying on the last request. Only on the wire when true. */
} ms_msg_begin;

/* Draft side statistics of one round, reported with the tree. */
typedef struct {
    uint64_t backbone_ns;  /* draft forwards (commit + tree levels), LM head excluded */
    uint64_t head_ns;      /* draft LM head GEMMs + log-softmax/top-k over the active rows */
    uint64_t vocab_ns;     /* vocabulary bookkeeping and row gathers */
    int64_t vocab_size;    /* active draft vocabulary rows used for this tree */
    int64_t covered;       /* of the tokens emitted last round, how many were in that round's vocabulary */
    int64_t emitted;       /* tokens emitted last round (accepted + bonus) */
} ms_draft_stats;

/* One round's tree. */
typedef struct {
    uint64_t request_id;
    int64_t round;
    ms_tree tree;
    ms_draft_stats stats;
} ms_msg_tree;

/* The target's verdict on a round's tree. */
typedef struct {
    uint64_t request_id;
    int64_t round;
    int64_t n_path;              /* accepted path nodes incl. the root, 1..tree.n */
    int32_t path[MS_TREE_MAX];   /* node indices, path[0] = 0 */
    int32_t bonus;               /* the target's token after the path: next round's root */
    const int32_t *ver_topk;     /* [n_path, k_ver] target's top-K_ver ids at each path node (C_ver) */
    int64_t k_ver;
    const float *features;       /* eagle: target final-norm hidden states of the path nodes [n_path, feat_dim] */
    int64_t feat_dim;
    bool skip_model;             /* the target's cost policy: make the next tree without running the draft
                                    model (its n-gram part only; the tokens are committed when the model runs
                                    again). false = draft as configured. Only on the wire when true. */
} ms_msg_verify;

/* How the target drives a draft: in process (draft-node's ms_dft_port) or
 * across the link (protocol's client). Each call returns an ms_status; any
 * failure makes the target finish the request alone. */
typedef struct {
    void *ctx;
    bool wants_features; /* eagle drafts need target hidden states in begin/verify */
    bool model_free;     /* no draft model to run (the n-gram draft): the cost policy's gate does not apply */
    bool free_part;      /* proposes without its model too (an n-gram source merged): the gate starts closed */
    bool no_topk_pre;    /* ignores the prompt's top-K_pre (no MicroSpec window: the n-gram draft, a vocabulary
                            mode other than dynamic): the prefill computes the last row's logits only */
    ms_status (*begin)(void *ctx, const ms_msg_begin *m);
    ms_status (*draft)(void *ctx, uint64_t request_id, int64_t round, ms_msg_tree *out);
    ms_status (*accept)(void *ctx, const ms_msg_verify *m);
    void (*end)(void *ctx, uint64_t request_id); /* request over (finished or cancelled) */
} ms_draft_port;

#endif
