/* ms_vmode.c — the vocabulary modes' names (one table) and the helpers
 * the implementations share (ms_vmode.h). */
#include "ms_vmode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The implementations, one file each (ms_vmode_<name>.c). */
extern const ms_vmode_i ms_vmode_full, ms_vmode_static, ms_vmode_window;
extern const ms_vmode_i ms_vmode_specvocab, ms_vmode_dynaspec, ms_vmode_specvocab_window, ms_vmode_dynaspec_window;
extern const ms_vmode_i ms_vmode_static_window;

/* name → implementation. pair: the mode is also reachable as a (vocab,
 * vsel) pair of ms_dft_opts (ms_dft_vocab_parse). */
#define VMODE_COUNT 8
static const struct {
    const char *name;
    const ms_vmode_i *impl;
    bool pair;
    ms_vocab_mode vocab;
    ms_dft_vsel vsel;
} k_vmodes[] = {
    {"full", &ms_vmode_full, true, MS_VOCAB_FULL, MS_DFT_VSEL_NONE},
    {"static", &ms_vmode_static, true, MS_VOCAB_STATIC, MS_DFT_VSEL_NONE},
    {"dynamic", &ms_vmode_window, true, MS_VOCAB_DYNAMIC, MS_DFT_VSEL_NONE},
    {"specvocab", &ms_vmode_specvocab, true, MS_VOCAB_FULL, MS_DFT_VSEL_SPECVOCAB},
    {"dynaspec", &ms_vmode_dynaspec, true, MS_VOCAB_FULL, MS_DFT_VSEL_DYNASPEC},
    {"specvocab+window", &ms_vmode_specvocab_window, true, MS_VOCAB_DYNAMIC, MS_DFT_VSEL_SPECVOCAB},
    {"dynaspec+window", &ms_vmode_dynaspec_window, true, MS_VOCAB_DYNAMIC, MS_DFT_VSEL_DYNASPEC},
    {.name = "static+window", .impl = &ms_vmode_static_window}, /* no pair: o.vocab_mode */
};
_Static_assert(sizeof k_vmodes / sizeof k_vmodes[0] == VMODE_COUNT, "k_vmodes: one row per vocabulary mode");
#define N_VMODES ((int)(sizeof k_vmodes / sizeof k_vmodes[0]))

const ms_vmode_i *ms_vmode_find(const char *s) {
    for (int i = 0; i < N_VMODES; i++)
        if (!strcmp(s, k_vmodes[i].name)) return k_vmodes[i].impl;
    return NULL;
}

const char *ms_vmode_name(const ms_vmode_i *m) {
    for (int i = 0; i < N_VMODES; i++)
        if (k_vmodes[i].impl == m) return k_vmodes[i].name;
    return "?";
}

const ms_vmode_i *ms_vmode_of(ms_vocab_mode mode, ms_dft_vsel vsel) {
    for (int i = 0; i < N_VMODES; i++)
        if (k_vmodes[i].pair && k_vmodes[i].vocab == mode && k_vmodes[i].vsel == vsel) return k_vmodes[i].impl;
    return NULL;
}

const ms_vmode_i *ms_vmode_for(const ms_dft_opts *o) {
    return o->vocab_mode ? ms_vmode_find(o->vocab_mode) : ms_vmode_of(o->vocab, o->vsel);
}

bool ms_dft_vocab_parse(const char *s, ms_vocab_mode *mode, ms_dft_vsel *vsel) {
    for (int i = 0; i < N_VMODES; i++)
        if (k_vmodes[i].pair && !strcmp(s, k_vmodes[i].name)) {
            *mode = k_vmodes[i].vocab;
            *vsel = k_vmodes[i].vsel;
            return true;
        }
    return false;
}

bool ms_dft_vocab_set(ms_dft_opts *o, const char *s) {
    if (ms_dft_vocab_parse(s, &o->vocab, &o->vsel)) {
        o->vocab_mode = NULL;
        return true;
    }
    if (!ms_vmode_find(s)) return false;
    o->vocab_mode = s;
    return true;
}

const char *ms_dft_vocab_names(void) {
    static char names[256];
    if (!names[0])
        for (int i = 0; i < N_VMODES; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", k_vmodes[i].name);
        }
    return names;
}

const char *ms_dft_vocab_name(ms_vocab_mode mode, ms_dft_vsel vsel) {
    const ms_vmode_i *m = ms_vmode_of(mode, vsel);
    return m ? ms_vmode_name(m) : "?";
}

bool ms_vocab_mode_parse(const char *s, ms_vocab_mode *out) {
    for (int k = MS_VOCAB_FULL; k <= MS_VOCAB_DYNAMIC; k++)
        if (!strcmp(s, ms_vocab_mode_name((ms_vocab_mode)k))) {
            *out = (ms_vocab_mode)k;
            return true;
        }
    return false;
}

/* ---- vocabularies over the head's rows ------------------------------------ */

/* Packed rows: not beside a step, not on the indexed or the device head. */
static bool packs(const ms_head_opts *o, bool maps_only) { return !maps_only && !o->indexed && !o->W_dev; }

ms_status ms_vmode_vocab_full(const ms_head_opts *o, bool maps_only, ms_vocab **out) {
    /* full: the rows are W itself, never copied */
    if (o->Wq && !maps_only) return ms_vocab_new_full_q(o->Wq, out);
    return ms_vocab_new_full(maps_only ? NULL : o->W, o->V, o->d, out);
}

ms_status ms_vmode_vocab_static(const ms_head_opts *o, const int32_t *ids, int64_t k, bool maps_only, ms_vocab **out) {
    const bool rows = packs(o, maps_only);
    if (rows && o->Wq) return ms_vocab_new_static_q(o->Wq, ids, k, out);
    return ms_vocab_new_static(rows ? o->W : NULL, o->V, o->d, ids, k, out);
}

ms_status ms_vmode_vocab_window(const ms_head_opts *o, bool maps_only, ms_vocab **out) {
    const bool rows = packs(o, maps_only);
    if (rows && o->Wq) return ms_vocab_new_dynamic_q(o->Wq, o->w_max, out);
    return ms_vocab_new_dynamic(rows ? o->W : NULL, o->V, o->d, o->w_max, out);
}

ms_status ms_vmode_vocab_step(const ms_head_opts *o, int64_t cap, ms_vocab **out) {
    if (o->W_dev) MS_FAIL(MS_ERR_INVALID, "draft head: a step vocabulary goes with a host head");
    if (o->Wq && !o->indexed) return ms_vocab_new_step_q(o->Wq, cap, out);
    return ms_vocab_new_step(o->indexed ? NULL : o->W, o->V, o->d, cap, out);
}

ms_status ms_vmode_check_list(const ms_dft_opts *o) {
    if (!o->vocab_list)
        MS_FAIL(MS_ERR_INVALID, "vocabulary mode static needs a list file (build one with microspec-freqlist)");
    return MS_OK;
}

ms_status ms_vmode_static_list(const ms_head_opts *o, const int32_t **ids, int64_t *k, int32_t **owned) {
    *owned = NULL;
    if (o->static_ids) {
        *ids = o->static_ids;
        *k = o->k_static;
        return MS_OK;
    }
    if (!o->dft || !o->dft->vocab_list)
        MS_FAIL(MS_ERR_INVALID, "vocabulary mode static needs a list file (build one with microspec-freqlist)");
    MS_TRY(ms_vocab_load_list(o->dft->vocab_list, o->V, owned, k));
    *ids = *owned;
    return MS_OK;
}

/* ---- the stream ------------------------------------------------------ */

ms_status ms_vmode_stream_begin(ms_vocab *v, const ms_vmode_begin_in *in, ms_vocab_plan *p) {
    ms_vocab_reset(v);
    MS_TRY(ms_vocab_begin_plan(v, in->stream, in->prompt, in->n_prompt, in->topk_pre, in->k_pre, p));
    return ms_vocab_begin_stream(v, in->stream, in->prompt, in->n_prompt, in->topk_pre, in->k_pre);
}

ms_status ms_vmode_stream_round(ms_vocab *v, const ms_vmode_round_in *in, ms_vocab_plan *p) {
    MS_TRY(ms_vocab_round_plan(v, in->stream, in->tree_ids, in->n_tree, in->emitted, in->n_emit, in->ver_topk,
                               in->n_path, in->k_ver, p));
    return ms_vocab_stream_round(v, in->stream, in->tree_ids, in->n_tree, in->emitted, in->n_emit, in->ver_topk,
                                 in->n_path, in->k_ver);
}

void ms_vmode_vocab_free(void *st) {
    ms_vocab *v = st;
    ms_vocab_free(&v);
}
ms_status ms_vmode_vocab_begin(void *st, const ms_vmode_begin_in *in, ms_vocab_plan *p) {
    return ms_vmode_stream_begin(st, in, p);
}
ms_status ms_vmode_vocab_update(void *st, const ms_vmode_round_in *in, ms_vocab_plan *p) {
    return ms_vmode_stream_round(st, in, p);
}
const ms_vocab *ms_vmode_vocab_rows(const void *st) { return st; }
