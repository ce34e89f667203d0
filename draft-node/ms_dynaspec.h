/* ms_dynaspec.h — DynaSpec per-step draft vocabulary (issue 16): a router
 * picks the top-k_c of M token clusters for each draft step, and the draft's
 * head runs over the union of their tokens.
 *
 * Offline (tools/vocab/dynaspec_cluster.py, tools/microspec-record,
 * tools/vocab/dynaspec_train.py): the vocabulary is partitioned by spherical
 * k-means on the L2-normalised LM-head rows; a two-layer MLP
 *     z = [e(x_t), h_{t-1}]                     [2d]
 *     s = W2 · relu(W1 · z + b1) + b2           [M]
 * (e = the RAW token_embd row of x_t: no sqrt(d) scale even for Gemma;
 * h_{t-1} = the draft's final-norm hidden state of the previous position)
 * is trained with binary cross-entropy on multi-hot targets: the clusters
 * holding the full head's top-L tokens at step t.
 *
 * Artefact (a GGUF file): KV microspec.artifact = "dynaspec",
 * microspec.model_sha256 (hex), microspec.vocab_size V, microspec.hidden_size
 * d, dynaspec.n_clusters M, dynaspec.router_hidden H; tensors
 * dynaspec.cluster_of i32 [V], dynaspec.w1 f32 [H, 2d], dynaspec.b1 [H],
 * dynaspec.w2 [M, H], dynaspec.b2 [M].
 *
 * Position-aware budget: at draft depth l the pick takes
 *     k_c(l) = clamp(max(k_min, floor(k_c0 · r^l)), 1, M)
 * clusters (r = 1: fixed). For a level of n rows the ids are the union of
 * every row's top-k_c(l) clusters' members.
 */
#ifndef MS_DYNASPEC_H
#define MS_DYNASPEC_H

#include "ms_common.h"

#include "ms_qweight.h"
#include "ms_vsel.h"

typedef struct ms_dynaspec ms_dynaspec;

/* Budget of the pick (the contract's --dynaspec-clusters / -decay / -min). */
typedef struct {
    int64_t k_c0;  /* clusters at depth 0 (≥ 1; 0: M / 64, at least 1) */
    double decay;  /* r in (0, 1]; 1 = the same k_c at every depth */
    int64_t k_min; /* floor of the decayed budget (≥ 1) */
} ms_dynaspec_budget;

/* Load `artifact` for the draft model `model_path` (a GGUF file or a
 * Hugging Face folder: the sha256 of the file, or of the folder's
 * model.safetensors, must equal the artefact's microspec.model_sha256, else
 * MS_ERR_INVALID logged naming the artefact, both hashes and the model path).
 * embd: that model's token embedding [V, d] in its stored format (the
 * router's e(x_t), one row dequantized a pick), a view the caller keeps
 * alive while ds lives: the draft passes its own model's table, so nothing
 * is mapped twice. Checks every size against it (V, d), cluster_of in
 * [0, M), the budget, and sizes every scratch buffer for up to max_rows rows
 * a pick. */
ms_status ms_dynaspec_load(const char *artifact, const char *model_path, const ms_qweight *embd,
                           const ms_dynaspec_budget *budget, int64_t max_rows, ms_dynaspec **out);
void ms_dynaspec_free(ms_dynaspec **ds);

int64_t ms_dynaspec_vocab(const ms_dynaspec *ds);
int64_t ms_dynaspec_hidden(const ms_dynaspec *ds);
int64_t ms_dynaspec_clusters(const ms_dynaspec *ds);
/* Cluster of token id (MS_ASSERTs 0 ≤ id < V). */
int32_t ms_dynaspec_cluster_of(const ms_dynaspec *ds, int32_t id);
/* Members of cluster c in ascending id order: a view of *n ids, valid while ds lives. */
const int32_t *ms_dynaspec_members(const ms_dynaspec *ds, int32_t c, int64_t *n);
/* k_c(depth) of the budget above. */
int64_t ms_dynaspec_k(const ms_dynaspec *ds, int64_t depth);

/* The router's scores s [n, M] for inputs z [n, 2d] (rows [e(x_t), h_{t-1}]);
 * n ≤ max_rows. Pure f32 (cblas sgemm), no allocation. */
void ms_dynaspec_forward(ms_dynaspec *ds, const float *z, int64_t n, float *scores);

/* The ms_vsel_pick_fn of DynaSpec (ctx = the ms_dynaspec): hid unused; row
 * i's router input is [e(tok[i]), prev[i]]; each row's top-k_c(depth)
 * clusters (ties to the lower cluster) are united; the ids come out grouped
 * by cluster, in ascending cluster order, each cluster's in ascending id
 * order. MS_ERR_RANGE (logged) if n > max_rows or the union exceeds cap,
 * MS_ERR_INVALID for a token outside [0, V). Never allocates. */
ms_status ms_dynaspec_pick(void *ctx, const float *hid, const float *prev, const int32_t *tok, int64_t n,
                           int64_t depth, int32_t *ids, int64_t cap, int64_t *n_ids);

/* Fill *vs with name "dynaspec", ctx = ds, pick = ms_dynaspec_pick, max_ids =
 * the largest union any pick can return (the sum of the k_c0 ≥ k_c(l)
 * largest cluster sizes, bounded by V) and free = ms_dynaspec_free; the
 * ms_vsel then owns ds (its free releases it). */
void ms_dynaspec_vsel(ms_dynaspec *ds, ms_vsel *vs);



#endif
