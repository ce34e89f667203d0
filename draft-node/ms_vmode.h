/* ms_vmode.h — the draft's vocabulary modes behind one interface
 * (docs/architecture.md §5, issue 33), shaped as llama.cpp's llama_sampler_i: a struct of
 * functions, one file per implementation, the user-facing names in one
 * table (ms_vmode.c).
 *
 *   full       ms_vmode_full.c    all V rows
 *   static     ms_vmode_static.c  FR-Spec: a fixed list, position-aware prefix
 *   dynamic    ms_vmode_window.c  MicroSpec: I = Unique(Suffix(S, W_max))
 *   specvocab, dynaspec, specvocab+window, dynaspec+window
 *              ms_vmode_vsel.c    a per-step selector (ms_vsel.h), ∪ the window
 *
 * A mode owns its ms_vocab objects (the window data structure stays in
 * ms_vocab.c, the specification of the MicroSpec rule) and decides which
 * rows the head reads at each step; the head (ms_head.c) runs the logits
 * over them on the host, or on the device when the mode has a device form
 * (`device`: the backend's draft head, whose window twin replays the plans
 * `begin` / `update` return). ms_head.c and ms_draft.c call only this
 * interface: a new mode is one file and one row of the table (ms_vmode.c,
 * where the implementations are declared).
 */
#ifndef MS_VMODE_H
#define MS_VMODE_H

#include "ms_head.h"

struct ms_vmode_i {
    bool window;   /* a window fed by a stream: top-K_pre is read and o.stream applies */
    bool needs_prev; /* step reads the parents' hidden states (the draft tracks them) */
    /* The draft's options alone, before anything loads (NULL: nothing to check). */
    ms_status (*check)(const ms_dft_opts *o);
    /* The mode's state over the head's rows (o: shapes, row source, the
     * draft's options); *st is freed by free. */
    ms_status (*create)(const ms_head_opts *o, void **st);
    void (*free)(void *st);
    /* The device head's rows (ko->rows, static ids, w_max); NULL: the mode
     * runs on a host head only (refused when the draft model is on a device). */
    ms_status (*device)(void *st, ms_k_head_opts *ko);
    /* A new request: S_init, validated first; *p: what the window's device
     * twin replays (empty without a window). */
    ms_status (*begin)(void *st, const ms_vmode_begin_in *in, ms_vocab_plan *p);
    /* After a verdict: the stream additions (C_draft, C_ver or the emitted tokens). */
    ms_status (*update)(void *st, const ms_vmode_round_in *in, ms_vocab_plan *p);
    /* Before a head evaluation: make `rows` the step's rows (NULL: no-op). */
    ms_status (*step)(void *st, const ms_vmode_step *s);
    /* The vocabulary whose rows the head reads now (stats: its size). */
    const ms_vocab *(*rows)(const void *st);
    /* The vocabulary coverage is measured against (ms_dft_vocabulary). */
    const ms_vocab *(*coverage)(const void *st);
};

/* The mode's name in the table ("?" for one not in it). */
const char *ms_vmode_name(const ms_vmode_i *m);
/* The mode named s in the table, else NULL. */
const ms_vmode_i *ms_vmode_find(const char *s);
/* The mode of a (vocab, vsel) pair of ms_dft_opts, else NULL. */
const ms_vmode_i *ms_vmode_of(ms_vocab_mode mode, ms_dft_vsel vsel);
/* The mode a draft's options name: o->vocab_mode when set, else (vocab, vsel). */
const ms_vmode_i *ms_vmode_for(const ms_dft_opts *o);

/* ---- helpers for the implementations ---- */

/* Vocabularies over the head's rows (o->W f32, o->Wq typed, neither on a
 * device head). maps_only: no packed rows (a step vocabulary reads them);
 * the indexed and device heads keep none either. */
ms_status ms_vmode_vocab_full(const ms_head_opts *o, bool maps_only, ms_vocab **out);
ms_status ms_vmode_vocab_static(const ms_head_opts *o, const int32_t *ids, int64_t k, bool maps_only, ms_vocab **out);
ms_status ms_vmode_vocab_window(const ms_head_opts *o, bool maps_only, ms_vocab **out);
ms_status ms_vmode_vocab_step(const ms_head_opts *o, int64_t cap, ms_vocab **out);
/* check: the draft names a static list file (o->vocab_list). */
ms_status ms_vmode_check_list(const ms_dft_opts *o);
/* The static list: o->static_ids, else loaded from o->dft->vocab_list (*owned: free it). */
ms_status ms_vmode_static_list(const ms_head_opts *o, const int32_t **ids, int64_t *k, int32_t **owned);
/* The stream of a vocabulary (a window; full / static: validated, an empty
 * plan): begin / round as plans, applied. */
ms_status ms_vmode_stream_begin(ms_vocab *v, const ms_vmode_begin_in *in, ms_vocab_plan *p);
ms_status ms_vmode_stream_round(ms_vocab *v, const ms_vmode_round_in *in, ms_vocab_plan *p);
/* The functions of a mode whose state is one ms_vocab (full, window). */
void ms_vmode_vocab_free(void *st);
ms_status ms_vmode_vocab_begin(void *st, const ms_vmode_begin_in *in, ms_vocab_plan *p);
ms_status ms_vmode_vocab_update(void *st, const ms_vmode_round_in *in, ms_vocab_plan *p);
const ms_vocab *ms_vmode_vocab_rows(const void *st);

#endif
