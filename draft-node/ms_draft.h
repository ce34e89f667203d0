/* ms_draft.h — the draft side of speculative decoding (docs/architecture.md §3–§5).
 *
 * One object per draft node: a draft model of one kind (lm / eagle /
 * layerskip), a vocabulary mode over its LM head (full / static / dynamic /
 * the per-step selectors / …: one implementation each of ms_vmode_i,
 * draft-node/ms_vmode.h, named in one table), and the EAGLE-2 tree builder. It serves the target through an
 * ms_draft_port (protocol/ms_msg.h): begin a request, draft a tree per round,
 * accept the target's verdict.
 *
 * Per round (docs/architecture.md §4): commit the tokens accepted since the last round
 * (their KV, plus for eagle the target features), take the level-1 top-K
 * after the root, build the tree level by level with tree-masked forwards,
 * then drop the tree rows from the draft KV. On accept: measure coverage,
 * append C_draft then C_ver to the vocabulary stream.
 */
#ifndef MS_DRAFT_H
#define MS_DRAFT_H

#include "ms_msg.h"
#include "ms_ngram.h"
#include "ms_tensor.h"
#include "ms_tree.h"
#include "ms_vocab.h"

/* MS_DRAFT_NGRAM is the model-free kind (ms_ngram.h: ms_ngd, not ms_dft);
 * the model kinds can merge it into their trees (o.ngram, "lm+ngram"). */
typedef enum { MS_DRAFT_LM = 0, MS_DRAFT_EAGLE, MS_DRAFT_LAYERSKIP, MS_DRAFT_NGRAM } ms_draft_kind;

/* How the draft's LM head reads the active rows (the LM-head ablation):
 * gathered — one GEMM over the packed [|I|, d] rows kept by the vocabulary
 * (rows copied in when an id enters); indexed — a dot product per active slot
 * with W[id] read in place from the full head: no packed buffer, no row copies
 * (the window bookkeeping still runs). Same logits up to float rounding.
 * A GGUF lm / layerskip draft on the CPU keeps the rows in the head's own
 * block format (ms_vocab_new_*_q; no f32 copy of the head is made) and runs
 * the backend's block-format linear over them (8-bit activations, unless
 * f32_matmul); indexed then reads the typed head in place by id (linear_rows). */
typedef enum { MS_DFT_HEAD_GATHERED = 0, MS_DFT_HEAD_INDEXED } ms_dft_head;

/* Per-step vocabulary selectors (issue 16, ms_vsel.h). With vsel set, every
 * head evaluation (the root's step, each tree level, the pre-draft's bonus)
 * first asks the selector for candidates and runs the exact head over them
 * only (a per-step ms_vocab: rows entering gathered, leaving swap-removed).
 * vocab = full: the candidates alone ("specvocab" / "dynaspec"); vocab =
 * dynamic: candidates ∪ the MicroSpec window ("specvocab+window" /
 * "dynaspec+window"), the window fed by its stream as usual. The draft's q is
 * the softmax over the step's set, so sampling stays exact. CPU heads only
 * (a device head refuses them). */
typedef enum { MS_DFT_VSEL_NONE = 0, MS_DFT_VSEL_SPECVOCAB, MS_DFT_VSEL_DYNASPEC } ms_dft_vsel;

typedef struct {
    ms_draft_kind kind;
    const char *model_dir;  /* lm: the draft model; eagle: the EAGLE head; layerskip: the target */
    const char *target_dir; /* eagle: the target (its embedding and LM head) */
    int64_t layers;         /* layerskip: the target's first N layers (default 1) */
    ms_vocab_mode vocab;    /* default dynamic */
    const char *vocab_mode; /* a mode of the table by name (ms_vmode.h; any mode, also those without a
                               (vocab, vsel) pair); set: vocab and vsel are not read */
    const char *vocab_list; /* static: a microspec-freqlist file */
    int64_t w_max;          /* dynamic: window size W_max (default 3072) */
    ms_tree_params tree;    /* default EAGLE-2 10/5/60; tree.p_min: the confidence stop (ms_tree.h) */
    bool adaptive;          /* adaptive depth per request (see below); default false: always tree.depth */
    bool pre_unbudgeted;    /* overlap: pre-draft without the verify's measured time as a bound (for verdicts
                               that come at once, as a scripted test's do); default false */
    int64_t prompt_max;     /* lm / layerskip: the prompt rows the model reads, the last ones (default 128;
                               ≤ 0: all). Fewer: a cheaper draft prefill, lower acceptance, same output */
    bool ngram;             /* merge the n-gram source's continuation into every tree ("lm+ngram";
                               ms_ngram.h); into an overlap pre-draft's tree when its verdict confirms it */
    ms_ngram_params ngram_p; /* its parameters (ms_ngram_params_default) */
    int64_t max_ctx;        /* draft KV rows (0: the model's default) */
    const char *device;     /* lm / layerskip: "cpu" (NULL) | "cuda" | "cuda:N" (ms_model_opts.device);
                               eagle heads run on the CPU only: a CUDA device is refused */
    ms_dtype act;           /* CUDA activation dtype (0: BF16) */
    ms_vocab_stream stream; /* dynamic: which stream feeds the window (default both = the paper's) */
    ms_dft_head lm_head;    /* default gathered */
    ms_dft_vsel vsel;       /* per-step selector (above); default none */
    const char *vocab_artifact; /* specvocab / dynaspec: the selector's artefact (made for this draft's model) */
    int64_t specvocab_k;    /* specvocab: top-k per row at depth 0 (default 1024; 0: 1024) */
    double budget_decay;    /* position-aware budget R (ms_vocab_budget): static uses the first
                               max(budget_min, ⌊K·R^l⌋) ids of its list at depth l, specvocab that many
                               per row; 1 (default) or 0 = off */
    int64_t budget_min;     /* K_min of the budget (default 0: at least one row) */
    int64_t dynaspec_clusters; /* dynaspec: K_C0 clusters at depth 0 (0: the selector's default) */
    double dynaspec_decay;  /* dynaspec: per-depth decay of the cluster budget (default 1) */
    int64_t dynaspec_min;   /* dynaspec: K_min clusters */
    bool f32_matmul;        /* GGUF drafts: exact f32 matmuls (default false: 8-bit activations,
                               faster; a draft's rounding changes acceptance only) */
    bool host_head;         /* CUDA draft: keep the LM head on the host anyway (downloaded hidden
                               rows, host f32 head copy, CPU window): tests and the ablation.
                               Default false: a CUDA lm / layerskip draft runs its head, top-k and
                               (dynamic) window on the device, see ms_dft_head_on_device */
} ms_dft_opts;

/* Adaptive depth (o.adaptive). Each request starts at the configured
 * length L_max = tree.depth + 1 draft tokens along the deepest path (chain:
 * its length; tree: its levels) and moves the length L in [1, L_max] after
 * every verdict, from a = accepted draft tokens and D = the deepest node of
 * the tree just verified:
 *   e ← (e + a) / 2                         (EMA of a, e₀ = L_max)
 *   a = D and D ≥ L (all of a full-length path accepted): L ← min(L + 1, L_max)
 *   a < D (the target cut the path short):             L ← max(1, min(L, ⌊e⌋ + 1))
 *   otherwise (a shorter path, stopped by p_min, accepted whole): L unchanged.
 * So the draft runs one token beyond what recent rounds accepted, grows back
 * one level per fully accepted round, and the round's tree uses depth L − 1.
 * Deterministic: a function of the verdicts only, so greedy output stays the
 * target's own whatever the policy (it only changes what is drafted). */
typedef struct ms_dft ms_dft;

ms_dft_opts ms_dft_opts_default(void);
const char *ms_draft_kind_name(ms_draft_kind k);
bool ms_draft_kind_parse(const char *s, ms_draft_kind *out);
/* A draft kind as the tools and config take it: lm | eagle | layerskip |
 * ngram, or a model kind + "+ngram" (*ngram = true: o.ngram). */
bool ms_dft_kind_parse(const char *s, ms_draft_kind *kind, bool *ngram);
bool ms_vocab_mode_parse(const char *s, ms_vocab_mode *out);
/* The draft's vocabulary mode names (the table in ms_vmode.c): full /
 * static / dynamic (as ms_vocab_mode_parse, vsel none), specvocab / dynaspec
 * (vocab full + vsel), specvocab+window / dynaspec+window (vocab dynamic +
 * vsel). A mode with no such pair parses false here: name it by
 * o.vocab_mode. */
bool ms_dft_vocab_parse(const char *s, ms_vocab_mode *mode, ms_dft_vsel *vsel);
const char *ms_dft_vocab_name(ms_vocab_mode mode, ms_dft_vsel vsel);
/* Name a mode of the table in o: its (vocab, vsel) pair where it has one,
 * else o->vocab_mode = s (s must outlive o). False for an unknown name. */
bool ms_dft_vocab_set(ms_dft_opts *o, const char *s);
/* Every mode's name, comma-separated, in the table's order (for messages). */
const char *ms_dft_vocab_names(void);
const char *ms_dft_head_name(ms_dft_head h); /* "gathered" / "indexed" */
bool ms_dft_head_parse(const char *s, ms_dft_head *out);

ms_status ms_dft_new(const ms_dft_opts *o, ms_dft **out);
void ms_dft_free(ms_dft **d);
/* The port the target drives; valid while d lives. */
ms_draft_port ms_dft_port(ms_dft *d);
/* Overlap pipelining (docs/architecture.md §6). After the tree of round r went out and
 * while the target verifies it, pre-draft round r+1 assuming the target
 * accepts the tree's deepest path (its deepest node of highest score) and
 * then emits the draft's own top-1 after it as the bonus. Its KV rows are
 * committed speculatively. After a tree made without the model (the gate,
 * a confident n-gram copy) the model first commits what those rounds left
 * pending (up to 16 rows a round) and bets once nothing is. All of it
 * within the time the verify is expected to leave (measured per tree size
 * at the verdicts): what does not fit waits for the next round, and a bet
 * that does not fit is not made. Not for eagle drafts (they need the
 * target's features of the path): returns MS_ERR_UNSUPPORTED. */
ms_status ms_dft_predraft(ms_dft *d);
/* The target's verdict on round r with a pre-draft pending: when it is
 * exactly the assumed one, *hit = true and *tree is round r+1's tree, ready to
 * send (the vocabulary is updated as accept does). Otherwise the speculative
 * rows are rolled back, the verdict is accepted as usual and *hit = false:
 * draft round r+1 normally. Without a pre-draft this is accept. */
ms_status ms_dft_accept_overlap(ms_dft *d, const ms_msg_verify *m, bool *hit, ms_msg_tree *tree);
/* The adaptive length L of the request in progress (draft tokens along the
 * deepest path of the next tree); tree.depth + 1 when not adaptive. */
int64_t ms_dft_draft_len(const ms_dft *d);
/* Pre-drafts that were confirmed / dropped since creation. */
void ms_dft_overlap_counts(const ms_dft *d, int64_t *hits, int64_t *misses);

/* ---- the LM head on the device (CUDA lm / layerskip drafts) ----
 *
 * Unless o.host_head, a draft whose model runs on CUDA computes each tree
 * level's head on the model's stream: the hidden rows stay on the device;
 * full = dense over the model's head [V, d]; static = dense over the K rows
 * gathered once (indexed: read by id in place); dynamic = a ms_k_cuda_vocab
 * window (packed rows gathered on a second stream, overlapping the next
 * backbone forward; indexed: read by id). Then log-softmax over the active
 * columns, top-k, slots → ids on the device, and only [n, k] ids and
 * log-probs come down: one host synchronisation per level. The CPU ms_vocab
 * still keeps the window's bookkeeping (coverage, |I|) without rows, and
 * both windows are fed the same stream plans in order (draft-node/ms_head.h,
 * the one head interface; the device half is the backend table's draft head,
 * kernels/ms_k_backend.h). Nothing is allocated per round. */
bool ms_dft_head_on_device(const ms_dft *d);
/* Host synchronisations made by the device window module
 * (ms_k_cuda_vocab_host_syncs) inside this draft's begin / draft / accept /
 * predraft calls since creation, and the number of such calls. 0 on the
 * host path. Tests assert *syncs == 0. */
void ms_dft_window_syncs(const ms_dft *d, int64_t *calls, int64_t *syncs);
/* The device window (dynamic mode with the head on the device), else NULL:
 * for tests (ms_k_cuda_vocab_download_state). Owned by the draft. */
struct ms_k_cuda_vocab *ms_dft_cuda_window(ms_dft *d);
/* Test hook: called once per head evaluation (the root's level-1 top-K, each
 * tree level, the pre-draft's bonus) with the rows' tokens [n] (the root for
 * the first), and the [n, k] ids and log-probs the tree builder gets. fn NULL
 * removes it. Arrays are valid only during the call. */
typedef void (*ms_dft_level_fn)(void *ctx, const int32_t *tokens, int64_t n, int64_t k, const int32_t *ids,
                                const float *logp);
void ms_dft_set_level_hook(ms_dft *d, ms_dft_level_fn fn, void *ctx);

int64_t ms_dft_vocab(const ms_dft *d);  /* V of the draft's LM head */
int64_t ms_dft_hidden(const ms_dft *d); /* d of the draft's hidden state (eagle: the target's) */
const ms_vocab *ms_dft_vocabulary(const ms_dft *d);

#endif
