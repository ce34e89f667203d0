/* ms_specvocab.h — SpecVocab, vocabulary speculation (issue 16): approximate
 * logits over the whole vocabulary from a reduced hidden state,
 *     s = W_vocab · (W_down · h),  W_down [d', d] f32, W_vocab [V, d'],
 * d' ≪ d; the top-k ids of s per row, united over a step's rows, are the
 * candidates whose exact logits the draft's head computes (ms_vsel.h).
 * The artefact (tools/vocab/specvocab_build.py) is a GGUF with microspec.artifact =
 * "specvocab", the common KVs, specvocab.rank = d' and the tensors
 * specvocab.w_down (F32 [d', d]) and specvocab.w_vocab ([V, d'], F32 or Q8_0).
 */
#ifndef MS_SPECVOCAB_H
#define MS_SPECVOCAB_H

#include "ms_vsel.h"

typedef struct {
    const char *artifact;   /* the artefact file */
    const char *model_path; /* the model whose head it approximates (its sha256 is checked) */
    int64_t V, d;           /* the draft head's shape */
    int64_t k;              /* top-k per row at depth 0 (default 1024) */
    double decay;           /* position-aware budget: k(l) = max(k_min, ⌊k·decay^l⌋) (ms_vocab_budget); 1 = off */
    int64_t k_min;
    int64_t max_rows;       /* the most rows of one step */
} ms_specvocab_opts;

/* Load and check the artefact (ms_vsel_artifact_open), allocate the scratch
 * once ([max_rows, V] scores), and fill *out (max_ids = min(V, max_rows·k)).
 * The selector owns the open artefact; ms_vsel_release frees it. */
ms_status ms_specvocab_vsel(const ms_specvocab_opts *o, ms_vsel *out);

#endif
