/* ms_vmode_static_window.c — vocabulary mode static+window: the head reads
 * the union of FR-Spec's static list (the K ids of o.vocab_list) and the
 * MicroSpec window I = Unique(Suffix(S, W_max)) fed by its stream as in
 * mode dynamic. The list keeps the frequent ids always present; the window
 * adds this request's own. The union is a step vocabulary (ms_vocab_new_step)
 * refreshed after each stream change: ids entering gathered, leaving
 * swap-removed, so a round moves O(|C_draft| + |C_ver|) rows, not K.
 * Host heads only. */
#include "ms_vmode.h"

#include <stdlib.h>

typedef struct {
    ms_vocab *list;   /* the static list, maps only */
    ms_vocab *window; /* the window, maps only */
    ms_vocab *rows;   /* list ∪ window: the rows the head reads */
    int32_t *ids;     /* [K + W_max] scratch */
} sw_mode;

static void sw_free(void *st) {
    sw_mode *m = st;
    if (!m) return;
    ms_vocab_free(&m->list);
    ms_vocab_free(&m->window);
    ms_vocab_free(&m->rows);
    free(m->ids);
    free(m);
}

/* rows = the list's ids, then the window's (set_active drops the repeats) */
static ms_status sw_union(sw_mode *m) {
    int64_t n = 0;
    for (int64_t s = 0; s < ms_vocab_size(m->list); s++) m->ids[n++] = ms_vocab_id_at(m->list, s);
    for (int64_t s = 0; s < ms_vocab_size(m->window); s++) m->ids[n++] = ms_vocab_id_at(m->window, s);
    return ms_vocab_set_active(m->rows, m->ids, n);
}

static ms_status sw_build(sw_mode *m, const ms_head_opts *o) {
    const int32_t *ids;
    int64_t k;
    int32_t *owned;
    MS_TRY(ms_vmode_static_list(o, &ids, &k, &owned));
    ms_status s = ms_vmode_vocab_static(o, ids, k, true, &m->list);
    free(owned);
    MS_TRY(s);
    MS_TRY(ms_vmode_vocab_window(o, true, &m->window));
    const int64_t cap = k + o->w_max;
    m->ids = ms_malloc((size_t)cap * sizeof(int32_t));
    if (!m->ids) return MS_ERR_NOMEM;
    MS_TRY(ms_vmode_vocab_step(o, cap < o->V ? cap : o->V, &m->rows));
    return sw_union(m);
}

static ms_status sw_create(const ms_head_opts *o, void **st) {
    sw_mode *m = ms_calloc(1, sizeof *m);
    if (!m) return MS_ERR_NOMEM;
    ms_status s = sw_build(m, o);
    if (s < 0) {
        sw_free(m);
        return s;
    }
    *st = m;
    return MS_OK;
}

static ms_status sw_begin(void *st, const ms_vmode_begin_in *in, ms_vocab_plan *p) {
    sw_mode *m = st;
    MS_TRY(ms_vmode_stream_begin(m->window, in, p));
    return sw_union(m);
}

static ms_status sw_update(void *st, const ms_vmode_round_in *in, ms_vocab_plan *p) {
    sw_mode *m = st;
    MS_TRY(ms_vmode_stream_round(m->window, in, p));
    return sw_union(m);
}

static const ms_vocab *sw_rows(const void *st) { return ((const sw_mode *)st)->rows; }

const ms_vmode_i ms_vmode_static_window = {
    .window = true,
    .check = ms_vmode_check_list,
    .create = sw_create,
    .free = sw_free,
    .begin = sw_begin,
    .update = sw_update,
    .rows = sw_rows,
    .coverage = sw_rows,
};
