/* ms_vsel.h — per-step vocabulary selectors (issue 16): a selector names the
 * candidate ids of one draft step; the draft runs its exact LM head over those
 * rows only (a per-step ms_vocab, ms_vocab_set_active), optionally ∪ the
 * MicroSpec window (the hybrid modes). The target verifies over the full
 * vocabulary, so what a selector picks changes acceptance, never the output.
 *
 * Selectors: SpecVocab (ms_specvocab.h: a low-rank approximation of the head
 * ranks the whole vocabulary) and DynaSpec (built elsewhere). Their artefacts
 * are GGUF files with KVs microspec.artifact, microspec.model_sha256,
 * microspec.vocab_size, microspec.hidden_size (ms_vsel_artifact_open).
 */
#ifndef MS_VSEL_H
#define MS_VSEL_H

#include "ms_common.h"
#include "ms_gguf.h"
#include "ms_vocab.h"

/* Candidates for one draft step over n rows at draft depth `depth` (0: the root's step, which gives tree
 * level 1; depth l gives level l+1). hid [n, d]: the rows' final-norm hidden states (the LM head's input);
 * prev [n, d]: each row's parent's hidden state (the root: its predecessor's; zeros at position 0);
 * tok [n]: each row's own token. Writes up to cap distinct ids in [0, V) to ids, their count to *n_ids.
 * Never allocates. */
typedef ms_status (*ms_vsel_pick_fn)(void *ctx, const float *hid, const float *prev, const int32_t *tok,
                                     int64_t n, int64_t depth, int32_t *ids, int64_t cap, int64_t *n_ids);
typedef struct { const char *name; void *ctx; ms_vsel_pick_fn pick; int64_t max_ids; /* ≥ any *n_ids */
                 void (*free)(void *ctx); } ms_vsel;

/* Frees the selector's context (s->free(s->ctx)) and zeroes *s. NULL / an
 * empty selector: no-op. */
void ms_vsel_release(ms_vsel *s);

/* One draft step: ids = pick(...) ∪ (window: its active ids), then the step
 * vocabulary's active set = those ids (rows entering gathered, leaving rows
 * swap-removed). ids [cap] is scratch: cap ≥ sel->max_ids (+ the window's
 * W_max when a window is given). MS_ERR_INVALID if the selector wrote more
 * than it may or an id outside [0, V) (logged with the selector's name). */
ms_status ms_vsel_step(const ms_vsel *sel, ms_vocab *step, const ms_vocab *window, const float *hid,
                       const float *prev, const int32_t *tok, int64_t n, int64_t depth, int32_t *ids, int64_t cap);

/* The file whose sha256 identifies a model path: the path itself when it is a
 * regular file (a GGUF), else path/model.safetensors (a Hugging Face folder).
 * The offline tools (tools/vocab/specvocab_build.py) use the same rule. */
ms_status ms_vsel_model_file(const char *model_path, char *out, size_t cap);

/* Open an artefact and check that it belongs here: microspec.artifact ==
 * kind, microspec.vocab_size == V, microspec.hidden_size == d, and
 * microspec.model_sha256 == the sha256 of ms_vsel_model_file(model_path).
 * A mismatch is MS_ERR_INVALID with a log line naming the artefact, both
 * hashes (or values) and the model path; a missing KV is MS_ERR_FORMAT. On
 * success *out is open (the caller closes it). */
ms_status ms_vsel_artifact_open(const char *path, const char *kind, const char *model_path, int64_t V, int64_t d,
                                ms_gguf **out);

#endif
