/* ms_vocab.h — the draft's vocabulary modes (docs/architecture.md §5): which rows of the
 * LM head W [V, d] the draft's LM-head GEMM runs over, and how result slots map
 * back to token ids.
 *
 *  - full:    all V rows; rows = W itself, slot == id.
 *  - static:  FR-Spec (eagle2-frspec-notes.md §3): a fixed list of K distinct
 *             ids; their rows are packed once into an owned [K, d] buffer,
 *             slot r = the r-th id of the list.
 *  - step:    a per-step vocabulary (issue 16): the caller names the active
 *             set before each head evaluation (ms_vocab_set_active). Kept
 *             like the dynamic window's rows: an id entering gets slot |I| and
 *             its row gathered, an id leaving is swap-removed; ids that stay
 *             keep their rows (no copy). Work per call O(n + |I_old|) + O(row)
 *             per row gathered or moved.
 *  - dynamic: MicroSpec. A stream S of token ids; the window
 *             I = Unique(Suffix(S, W_max)), the distinct ids among the last
 *             W_max entries. Kept incrementally: a ring of the last W_max
 *             entries, a per-id count of its occurrences in the ring
 *             (id ∈ I ⇔ count > 0), slot_of[V] / id_of[W_max] and a packed
 *             [W_max, d] row buffer whose first |I| rows are the window's rows.
 *             An id entering gets slot |I| and its row gathered from W; an id
 *             leaving has its slot refilled from the last active slot
 *             (swap-remove), so rows stay dense. Work per appended entry is
 *             O(1) + O(d) per row moved, never O(V); reset is O(W_max + |I|).
 *
 * Typed heads (the *_q constructors): W is an ms_qweight in a GGUF block
 * format (ms_qweight.h). Packed rows stay in W's format — gathering a row
 * copies its row_bytes bytes, nothing is dequantized — and the head runs on
 * an ms_qweight view of them (ms_vocab_rows_q, ms_vocab_logits_q); full mode
 * reads W itself (no copy). ms_vocab_rows gives no f32 rows for them.
 *
 * Ownership: the vocabulary never owns W (W must outlive it); it owns its
 * packed rows, maps and ring. W may be NULL for static/dynamic: then only the
 * maps are kept, ms_vocab_rows gives rows = NULL, and a device backend gathers
 * rows itself from ms_vocab_take_entering. Nothing is allocated after
 * creation (append, reset, init_stream and append_round never allocate).
 * Not thread-safe; one vocabulary per draft request stream.
 */
#ifndef MS_VOCAB_H
#define MS_VOCAB_H

#include "ms_common.h"
#include "ms_k_backend.h" /* ms_qweight, ms_k_act */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MS_VOCAB_FULL = 0, MS_VOCAB_STATIC, MS_VOCAB_DYNAMIC } ms_vocab_mode;
/* The mode of a per-step vocabulary (ms_vocab_new_step*). Not an enumerator:
 * a draft is never configured with it (its selector modes are ms_dft_opts.vsel),
 * so switches over the configured modes stay complete. */
#define MS_VOCAB_STEP ((ms_vocab_mode)3)

typedef struct ms_vocab ms_vocab;

/* Create a vocabulary over W [V, d] (f32, row i = token id i).
 * V in [1, INT32_MAX], d ≥ 1. Errors: MS_ERR_INVALID (bad argument, logged),
 * MS_ERR_NOMEM. */
ms_status ms_vocab_new_full(const float *W, int64_t V, int64_t d, ms_vocab **out);
/* ids [k]: distinct, 0 ≤ id < V, 1 ≤ k ≤ V. The list is copied. */
ms_status ms_vocab_new_static(const float *W, int64_t V, int64_t d, const int32_t *ids, int64_t k, ms_vocab **out);
/* w_max in [1, INT32_MAX]. Allocates the O(V) maps and the [w_max, d] rows once. */
ms_status ms_vocab_new_dynamic(const float *W, int64_t V, int64_t d, int64_t w_max, ms_vocab **out);
/* The same over a typed head W [V = W->m, d = W->k] (any ms_q_supported
 * dtype; W->data must be given, and *W is copied, not its data). Packed rows
 * take W->row_bytes bytes each: static packs its K rows once, dynamic
 * allocates [w_max] rows once, full keeps none. */
ms_status ms_vocab_new_full_q(const ms_qweight *W, ms_vocab **out);
ms_status ms_vocab_new_static_q(const ms_qweight *W, const int32_t *ids, int64_t k, ms_vocab **out);
ms_status ms_vocab_new_dynamic_q(const ms_qweight *W, int64_t w_max, ms_vocab **out);
/* Per-step vocabulary of at most cap active rows (1 ≤ cap ≤ V), empty at
 * creation. Allocates the O(V) maps and the [cap] rows once (W NULL: maps
 * only). The stream functions (append, init_stream, …) are no-ops on it. */
ms_status ms_vocab_new_step(const float *W, int64_t V, int64_t d, int64_t cap, ms_vocab **out);
ms_status ms_vocab_new_step_q(const ms_qweight *W, int64_t cap, ms_vocab **out);
/* Step: make the active set exactly the distinct ids of ids [n] (duplicates
 * count once). Ids that leave are swap-removed (the last active slot refills
 * theirs), ids that enter are appended and only their rows gathered from W;
 * ids present before and after keep their slots unless a swap-remove moves
 * them. MS_ERR_INVALID (nothing changed) for an id outside [0, V) or more
 * than cap distinct ids. Other modes: MS_ERR_INVALID. Never allocates. */
ms_status ms_vocab_set_active(ms_vocab *v, const int32_t *ids, int64_t n);
/* Static: the head reads only the first m rows of the list (rows are packed in
 * rank order, so no copy): ms_vocab_rows / ms_vocab_rows_q report
 * min(m, K) rows and ms_vocab_logits_* compute those columns; ms_vocab_size,
 * contains and slot_of still describe the whole list. m ≤ 0 or ≥ K: the
 * whole list (the default). Other modes: no-op. */
void ms_vocab_set_head_limit(ms_vocab *v, int64_t m);
/* Position-aware budget (issue 16): K(depth) = max(k_min, ⌊k·r^depth⌋),
 * capped at k and floored at 1; r ≥ 1 (or depth 0) gives k. */
int64_t ms_vocab_budget(int64_t k, double r, int64_t k_min, int64_t depth);
/* Frees and sets *v = NULL. NULL and *v == NULL are no-ops. */
void ms_vocab_free(ms_vocab **v);

ms_vocab_mode ms_vocab_mode_of(const ms_vocab *v);
const char *ms_vocab_mode_name(ms_vocab_mode mode); /* "full" / "static" / "dynamic" / "step" */
int64_t ms_vocab_vocab_size(const ms_vocab *v);     /* V */
int64_t ms_vocab_dim(const ms_vocab *v);            /* d */
int64_t ms_vocab_w_max(const ms_vocab *v);          /* dynamic: W_max; static: K; full: V; step: cap */

/* Dynamic: empty the stream (and the window) in O(W_max + |I|); the work
 * counters are kept, the entering list is emptied. Full/static: no-op. */
void ms_vocab_reset(ms_vocab *v);

/* Dynamic: append stream entries in order. All ids are validated first
 * (0 ≤ id < V, else MS_ERR_INVALID and nothing is appended).
 * Full/static: no-op returning MS_OK. */
ms_status ms_vocab_append(ms_vocab *v, const int32_t *ids, int64_t n);

/* Dynamic: reset, then append S_init (docs/architecture.md §5): the prompt ids in order (not
 * deduplicated), then for each prompt position in order its top-K_pre ids
 * (topk_pre [n_prompt, k_pre], row-major, best first) as a union: an id this
 * union has already appended is not appended again. topk_pre may be NULL when
 * k_pre == 0. Validated first as ms_vocab_append. Full/static: no-op. */
ms_status ms_vocab_init_stream(ms_vocab *v, const int32_t *prompt, int64_t n_prompt, const int32_t *topk_pre,
                               int64_t k_pre);

/* Dynamic: the stream additions of one round (docs/architecture.md §4/§5): C_draft = the
 * distinct ids of tree_ids [n_tree] in node order, then C_ver = the top-K_ver
 * target ids at each node of the accepted path (ver_topk [n_path, k_ver],
 * row-major, in path order), deduplicated within C_ver (not against C_draft).
 * Validated first as ms_vocab_append. Full/static: no-op. */
ms_status ms_vocab_append_round(ms_vocab *v, const int32_t *tree_ids, int64_t n_tree, const int32_t *ver_topk,
                                int64_t n_path, int64_t k_ver);

/* Dynamic: append the distinct ids of ids [n] in first-occurrence order (one
 * union; ms_vocab_append_round is two of them). For the `sync` pipeline
 * (docs/architecture.md §6), which appends C_draft when it drafts and C_ver when the verify
 * result arrives. Validated first. Full/static: no-op. */
ms_status ms_vocab_append_distinct(ms_vocab *v, const int32_t *ids, int64_t n);

/* ---- window-stream ablation (which stream feeds the dynamic window) ---- */

/* MS_VOCAB_STREAM_BOTH: the paper's definition (docs/architecture.md §5): S_init = prompt
 *   ids ⊕ top-K_pre union; each round C_draft ⊕ C_ver.
 * MS_VOCAB_STREAM_CONTEXT: S_init = the prompt ids; each round the tokens
 *   the target emitted (accepted path tokens then the bonus, in order, not
 *   deduplicated, like the prompt). No top-K_pre, C_draft or C_ver.
 * MS_VOCAB_STREAM_EXTENSION: S_init = the top-K_pre union only (no prompt
 *   ids); each round C_draft ⊕ C_ver. With K_pre = 0 the window starts empty.
 * The window is always Unique(Suffix(S, W_max)); only S differs. */
typedef enum { MS_VOCAB_STREAM_BOTH = 0, MS_VOCAB_STREAM_CONTEXT, MS_VOCAB_STREAM_EXTENSION } ms_vocab_stream;

const char *ms_vocab_stream_name(ms_vocab_stream s); /* "both" / "context" / "extension" */
bool ms_vocab_stream_parse(const char *s, ms_vocab_stream *out);

/* Dynamic: reset, then S_init of `stream` (above). BOTH is exactly
 * ms_vocab_init_stream. Validated first. Full/static: no-op. */
ms_status ms_vocab_begin_stream(ms_vocab *v, ms_vocab_stream stream, const int32_t *prompt, int64_t n_prompt,
                                const int32_t *topk_pre, int64_t k_pre);
/* Dynamic: one round's stream additions of `stream`: BOTH / EXTENSION are
 * exactly ms_vocab_append_round(tree_ids, ver_topk); CONTEXT appends
 * emitted [n_emit] (path tokens then bonus) as ms_vocab_append. The inputs a
 * stream does not use are not read. Full/static: no-op. */
ms_status ms_vocab_stream_round(ms_vocab *v, ms_vocab_stream stream, const int32_t *tree_ids, int64_t n_tree,
                                const int32_t *emitted, int64_t n_emit, const int32_t *ver_topk, int64_t n_path,
                                int64_t k_ver);

/* Packed rows of the current vocabulary: *rows [*n, d] (NULL when created
 * with W == NULL or by a *_q constructor), *id_of [*n] maps slot → id (NULL
 * for full: identity). Pointers are valid until the next append/reset/free.
 * Any output may be NULL. */
void ms_vocab_rows(const ms_vocab *v, const float **rows, int64_t *n, const int32_t **id_of);
/* The packed rows as a weight view: *rows = {W's dtype (F32 for the float
 * constructors), the packed buffer (full: W), m = size, k = d, row_bytes};
 * *id_of as ms_vocab_rows (may be NULL). False (rows untouched) when the
 * vocabulary has no rows (created with W == NULL). Valid until the next
 * append/reset/free. */
bool ms_vocab_rows_q(const ms_vocab *v, ms_qweight *rows, const int32_t **id_of);
int64_t ms_vocab_size(const ms_vocab *v);            /* |I| (dynamic, step), K (static), V (full) */
bool ms_vocab_contains(const ms_vocab *v, int32_t id); /* O(1); false for ids out of range */
int64_t ms_vocab_slot_of(const ms_vocab *v, int32_t id); /* O(1); −1 if absent */
int32_t ms_vocab_id_at(const ms_vocab *v, int64_t slot); /* 0 ≤ slot < size, else −1 */

/* Rows whose content changed since the previous call (dynamic): every slot
 * < |I| that an entering id took or that swap-remove refilled, each listed
 * once with its current id. Applying rows[slot] = W[id] for each pair brings a
 * copy of the packed rows taken at the previous call up to date. Arrays are
 * owned by the vocabulary, valid until the next append/reset/take. O(pairs).
 * Full/static: *n = 0. */
void ms_vocab_take_entering(ms_vocab *v, const int32_t **slots, const int32_t **ids, int64_t *n);

/* Indexed LM head (the ablation's naive variant, no packed buffer): for
 * each active slot s < ms_vocab_size, out[r, s] = hid[r] · W[id_at(s)]
 * (full: id = s), reading the row of the full head W [V, d] by id.
 * hid [n, d], out [n, |I|] row-major. Works whether or not the vocabulary
 * was created with W (create it with W = NULL to skip all row copies). The
 * dot products accumulate in float, in 8 interleaved partial sums. */
void ms_vocab_logits_indexed(const ms_vocab *v, const float *W, const float *hid, int64_t n, float *out);

/* The LM head over the packed rows with the CPU backend's block-format
 * linear: out[r, s] = x_r · rows[s] for s < size, out [n, size] row-major.
 * Exactly one of x [n, d] (f32 activations) and xq (the n rows quantized by
 * the CPU table's act_quantize) is given. Both kernels are batch invariant,
 * so out[r, s] is bitwise the full-head product's [r, id_at(s)]. The
 * vocabulary must have rows (ms_vocab_rows_q). */
void ms_vocab_logits_q(const ms_vocab *v, const float *x, const ms_k_act *xq, int64_t n, float *out);
/* The indexed head over a typed W [V, d] read in place by id (the
 * vocabulary may be maps only): the backend's linear_rows with the active
 * ids (full: linear over the whole of W). Same x / xq rule and bitwise result. */
void ms_vocab_logits_indexed_q(const ms_vocab *v, const ms_qweight *W, const float *x, const ms_k_act *xq, int64_t n,
                               float *out);

/* ---- stream plans (the feed of a device twin of the window) -------------- */

/* The changes one begin_stream / stream_round makes to a dynamic window's
 * stream, as data: an optional reset, then ≤ 2 steps in order, each plain
 * entries (as ms_vocab_append) or the union of ids [n] in first-occurrence
 * order (as ms_vocab_append_distinct); steps with n == 0 are left out. The
 * plan functions validate exactly as the calls they describe (a rejected
 * call plans nothing) and never change v; begin_stream / stream_round are
 * their plan applied to this window. A twin of the window (the device one
 * in kernels/cuda/ms_k_cuda_vocab.cu) applying the same plans holds the same
 * window and slot layout. ids point into the caller's arrays. Full/static:
 * an empty plan. */
typedef struct {
    bool distinct;
    const int32_t *ids;
    int64_t n;
} ms_vocab_step;
typedef struct {
    bool reset;
    int n_steps;
    ms_vocab_step step[2];
} ms_vocab_plan;
ms_status ms_vocab_begin_plan(const ms_vocab *v, ms_vocab_stream stream, const int32_t *prompt, int64_t n_prompt,
                              const int32_t *topk_pre, int64_t k_pre, ms_vocab_plan *p);
ms_status ms_vocab_round_plan(const ms_vocab *v, ms_vocab_stream stream, const int32_t *tree_ids, int64_t n_tree,
                              const int32_t *emitted, int64_t n_emit, const int32_t *ver_topk, int64_t n_path,
                              int64_t k_ver, ms_vocab_plan *p);

/* Work counters (tests, stats): stream entries appended, rows gathered from W
 * (ids entering), rows moved by swap-remove. Cumulative since creation. */
typedef struct {
    int64_t appended, gathered, moved;
} ms_vocab_counters;
ms_vocab_counters ms_vocab_counters_get(const ms_vocab *v);

/* ---- static lists (FR-Spec): build, save, load -------------------------- */

/* Rank a frequency table into exactly k distinct ids (out [k]): the forced ids
 * first (eos [n_eos], in order, duplicates dropped), then the other ids by
 * descending count, ties by lower id; ids with count 0 come last in id order,
 * which fills a small corpus with the lowest unused ids. counts [V].
 * MS_ERR_INVALID if k ∉ [1, V], a forced id is out of range, or there are more
 * distinct forced ids than k. Allocates O(V) scratch. */
ms_status ms_vocab_rank_counts(const int64_t *counts, int64_t V, const int32_t *eos, int64_t n_eos, int64_t k,
                               int32_t *out);

/* File format (text): first line "# microspec-vocab v1 k=K", then K lines of
 * one decimal id each (order = slot order). Written atomically. */
ms_status ms_vocab_save_list(const char *path, const int32_t *ids, int64_t k);
/* Load and validate (header, count, 0 ≤ id < V, distinct); errors are
 * MS_ERR_FORMAT naming file:line (MS_ERR_IO if unreadable). *ids is malloc'd,
 * the caller frees it. */
ms_status ms_vocab_load_list(const char *path, int64_t V, int32_t **ids, int64_t *k);
/* Same from memory (`name` is used in messages; fuzz target). */
ms_status ms_vocab_parse_list(const char *text, size_t len, const char *name, int64_t V, int32_t **ids, int64_t *k);

#ifdef __cplusplus
}
#endif

#endif
