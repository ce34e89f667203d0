/* ms_vmode_static.c — vocabulary mode static: FR-Spec's fixed list of K ids
 * (eagle2-frspec-notes.md §3), packed once; with a position-aware budget
 * (o.budget_decay R < 1) the head reads only its first max(K_min, ⌊K·R^l⌋)
 * rows at depth l (ms_vocab_budget). */
#include "ms_vmode.h"

#include <stdlib.h>

typedef struct {
    ms_vocab *list;
    double decay; /* in (0, 1): the budget is on */
    int64_t k_min;
} static_mode;

static void static_free(void *st) {
    static_mode *m = st;
    if (!m) return;
    ms_vocab_free(&m->list);
    free(m);
}

static ms_status static_create(const ms_head_opts *o, void **st) {
    static_mode *m = ms_calloc(1, sizeof *m);
    if (!m) return MS_ERR_NOMEM;
    const int32_t *ids;
    int64_t k;
    int32_t *owned;
    ms_status s = ms_vmode_static_list(o, &ids, &k, &owned);
    if (s >= 0) s = ms_vmode_vocab_static(o, ids, k, false, &m->list);
    free(owned);
    if (s < 0) {
        static_free(m);
        return s;
    }
    if (o->dft && o->dft->budget_decay > 0.0 && o->dft->budget_decay < 1.0) {
        m->decay = o->dft->budget_decay;
        m->k_min = o->dft->budget_min;
    }
    *st = m;
    return MS_OK;
}

static ms_status static_device(void *st, ms_k_head_opts *ko) {
    static_mode *m = st;
    if (m->decay > 0.0) MS_FAIL(MS_ERR_UNSUPPORTED, "the static budget decay runs on a host head only");
    const int32_t *id_of;
    ms_vocab_rows(m->list, NULL, NULL, &id_of);
    ko->rows = MS_K_HEAD_STATIC;
    ko->static_ids = id_of;
    ko->k_static = ms_vocab_size(m->list);
    return MS_OK;
}

/* the list never changes: the stream is validated, the plan empty */
static ms_status static_begin(void *st, const ms_vmode_begin_in *in, ms_vocab_plan *p) {
    return ms_vmode_stream_begin(((static_mode *)st)->list, in, p);
}
static ms_status static_update(void *st, const ms_vmode_round_in *in, ms_vocab_plan *p) {
    return ms_vmode_stream_round(((static_mode *)st)->list, in, p);
}

static ms_status static_step(void *st, const ms_vmode_step *s) {
    static_mode *m = st;
    if (m->decay > 0.0)
        ms_vocab_set_head_limit(m->list, ms_vocab_budget(ms_vocab_size(m->list), m->decay, m->k_min, s->depth));
    return MS_OK;
}

static const ms_vocab *static_rows(const void *st) { return ((const static_mode *)st)->list; }

const ms_vmode_i ms_vmode_static = {
    .check = ms_vmode_check_list,
    .create = static_create,
    .free = static_free,
    .device = static_device,
    .begin = static_begin,
    .update = static_update,
    .step = static_step,
    .rows = static_rows,
    .coverage = static_rows,
};
