/* ms_vmode_vsel.c — the per-step selector modes (issue 16, ms_vsel.h):
 * before every head evaluation a selector names the step's candidates and
 * the head reads exactly those rows (a step vocabulary: rows entering
 * gathered, leaving swap-removed):
 *   specvocab, dynaspec                 the candidates alone
 *   specvocab+window, dynaspec+window   the candidates ∪ the MicroSpec window,
 *                                       the window fed by its stream as usual
 * One composition: a selector (ms_specvocab.h / ms_dynaspec.h) and a base
 * vocabulary without rows (full, or the window). Host heads only. */
#include "ms_vmode.h"

#include <stdlib.h>

#include "ms_dynaspec.h"
#include "ms_specvocab.h"

typedef struct {
    ms_vsel sel;
    ms_vocab *step;  /* the rows the head reads */
    ms_vocab *base;  /* full or the window, maps only: coverage, and the window's ids */
    bool hybrid;
    int32_t *ids;    /* [cap] candidate scratch */
    int64_t cap;
} vsel_mode;

typedef ms_status (*vsel_make_fn)(const ms_head_opts *o, ms_vsel *out);

static ms_status make_specvocab(const ms_head_opts *o, ms_vsel *out) {
    const ms_dft_opts *d = o->dft;
    const ms_specvocab_opts so = {.artifact = d->vocab_artifact, .model_path = o->head_model, .V = o->V, .d = o->d,
                                  .k = d->specvocab_k > 0 ? d->specvocab_k : 1024, .decay = d->budget_decay,
                                  .k_min = d->budget_min, .max_rows = o->max_rows};
    return ms_specvocab_vsel(&so, out);
}

static ms_status make_dynaspec(const ms_head_opts *o, ms_vsel *out) {
    const ms_dft_opts *d = o->dft;
    /* k_c0 0: the selector's default (ms_dynaspec_load); K_min defaults to 1 */
    ms_dynaspec_budget b = {.k_c0 = d->dynaspec_clusters, .decay = d->dynaspec_decay > 0 ? d->dynaspec_decay : 1.0,
                            .k_min = d->dynaspec_min > 0 ? d->dynaspec_min : 1};
    /* the router's e(x_t): the draft's own embedding table (eagle: the target's, which it reads) */
    if (!o->embed) MS_FAIL(MS_ERR_INVALID, "draft head: dynaspec needs the draft's embedding table");
    ms_qweight emb;
    MS_TRY(o->embed(o->embed_ctx, &emb));
    ms_dynaspec *ds;
    MS_TRY(ms_dynaspec_load(d->vocab_artifact, o->head_model, &emb, &b, o->max_rows, &ds));
    ms_dynaspec_vsel(ds, out);
    return MS_OK;
}

static void vsel_free(void *st) {
    vsel_mode *m = st;
    if (!m) return;
    ms_vsel_release(&m->sel);
    ms_vocab_free(&m->step);
    ms_vocab_free(&m->base);
    free(m->ids);
    free(m);
}

static ms_status vsel_build(vsel_mode *m, const ms_head_opts *o, vsel_make_fn make) {
    if (!o->dft) MS_FAIL(MS_ERR_INVALID, "draft head: a selector mode needs the draft's options");
    MS_TRY(make(o, &m->sel));
    m->cap = m->sel.max_ids + (m->hybrid ? o->w_max : 0);
    m->ids = ms_malloc((size_t)m->cap * sizeof(int32_t));
    if (!m->ids) return MS_ERR_NOMEM;
    MS_TRY(ms_vmode_vocab_step(o, m->cap < o->V ? m->cap : o->V, &m->step));
    return m->hybrid ? ms_vmode_vocab_window(o, true, &m->base) : ms_vmode_vocab_full(o, true, &m->base);
}

static ms_status vsel_create(const ms_head_opts *o, bool hybrid, vsel_make_fn make, void **st) {
    vsel_mode *m = ms_calloc(1, sizeof *m);
    if (!m) return MS_ERR_NOMEM;
    m->hybrid = hybrid;
    ms_status s = vsel_build(m, o, make);
    if (s < 0) {
        vsel_free(m);
        return s;
    }
    *st = m;
    return MS_OK;
}

static ms_status specvocab_create(const ms_head_opts *o, void **st) { return vsel_create(o, false, make_specvocab, st); }
static ms_status dynaspec_create(const ms_head_opts *o, void **st) { return vsel_create(o, false, make_dynaspec, st); }
static ms_status specvocab_window_create(const ms_head_opts *o, void **st) {
    return vsel_create(o, true, make_specvocab, st);
}
static ms_status dynaspec_window_create(const ms_head_opts *o, void **st) {
    return vsel_create(o, true, make_dynaspec, st);
}

static ms_status vsel_begin(void *st, const ms_vmode_begin_in *in, ms_vocab_plan *p) {
    return ms_vmode_stream_begin(((vsel_mode *)st)->base, in, p);
}
static ms_status vsel_update(void *st, const ms_vmode_round_in *in, ms_vocab_plan *p) {
    return ms_vmode_stream_round(((vsel_mode *)st)->base, in, p);
}

/* ids = pick(...) ∪ (hybrid: the window's ids) → the step's active set */
static ms_status vsel_step(void *st, const ms_vmode_step *s) {
    vsel_mode *m = st;
    uint64_t t0 = ms_now_ns();
    ms_status r = ms_vsel_step(&m->sel, m->step, m->hybrid ? m->base : NULL, s->hid, s->prev, s->tok, s->n,
                               s->depth, m->ids, m->cap);
    *s->vocab_ns += ms_now_ns() - t0;
    return r;
}

static const ms_vocab *vsel_rows(const void *st) { return ((const vsel_mode *)st)->step; }
static const ms_vocab *vsel_coverage(const void *st) { return ((const vsel_mode *)st)->base; }

#define VSEL_MODE(create_fn, is_window)                                                                           \
    {.window = is_window, .needs_prev = true, .create = create_fn, .free = vsel_free, .begin = vsel_begin,      \
     .update = vsel_update, .step = vsel_step, .rows = vsel_rows, .coverage = vsel_coverage}

const ms_vmode_i ms_vmode_specvocab = VSEL_MODE(specvocab_create, false);
const ms_vmode_i ms_vmode_dynaspec = VSEL_MODE(dynaspec_create, false);
const ms_vmode_i ms_vmode_specvocab_window = VSEL_MODE(specvocab_window_create, true);
const ms_vmode_i ms_vmode_dynaspec_window = VSEL_MODE(dynaspec_window_create, true);
