/* ms_vocab.c — full / static (FR-Spec) / dynamic (MicroSpec) draft
 * vocabularies. See ms_vocab.h and docs/architecture.md §5 for the definitions. */
#include "ms_vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ms_vocab {
    ms_vocab_mode mode;
    /* The head W: V rows of row_bytes bytes each, row i at W + i·row_bytes,
     * in W's own format (dtype; F32 for the float constructors). Not owned;
     * may be NULL (static/dynamic, float constructors only). */
    const uint8_t *W;
    ms_dtype dtype;
    size_t row_bytes;
    bool typed; /* made by a *_q constructor: ms_vocab_rows gives no f32 rows */
    int64_t V, d;

    /* Packed rows (static, dynamic, step). cap = K (static), W_max (dynamic)
     * or the step cap; the first n rows are live: n = K (static) or |I|. */
    int64_t cap, n;
    int64_t lim; /* static: the head reads rows [0, lim) when 0 < lim < n (ms_vocab_set_head_limit) */
    uint8_t *rows;    /* [cap] rows of row_bytes, owned; NULL when W is NULL */
    int32_t *id_of;   /* [cap] slot → id */
    int32_t *slot_of; /* [V] id → slot, −1 if absent */

    /* Dynamic: the last W_max stream entries, oldest at ring[head]. */
    int32_t *ring; /* [cap] */
    int64_t head, ring_n;
    int32_t *count; /* [V] occurrences of each id in the ring */

    /* Dynamic, step: dedup stamps for the unions of init_stream / append_round
     * and for the new set of ms_vocab_set_active.
     * An id is "seen" in the current union iff mark[id] == epoch, so starting
     * a union costs O(1), not O(V). */
    uint32_t *mark; /* [V] */
    uint32_t epoch;

    /* Dynamic: slots whose row changed since the last take (each once). */
    uint8_t *dirty;       /* [cap] */
    int32_t *dirty_slots; /* [cap] */
    int64_t n_dirty;
    int32_t *take_slots, *take_ids; /* [cap], filled by ms_vocab_take_entering */

    ms_vocab_counters ctr;
};

/* The head a vocabulary reads rows from: V rows of d elements of dtype,
 * row_bytes each (W may be NULL: maps only). */
typedef struct {
    const void *W;
    ms_dtype dtype;
    int64_t V, d;
    size_t row_bytes;
    bool typed;
} head_desc;

static ms_status head_f32(const char *what, const float *W, int64_t V, int64_t d, head_desc *h) {
    if (V < 1 || V > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "%s: vocabulary size V=%lld out of [1, INT32_MAX]", what, (long long)V);
    if (d < 1) MS_FAIL(MS_ERR_INVALID, "%s: row width d=%lld must be ≥ 1", what, (long long)d);
    size_t row, bytes;
    if (!ms_mul_size((size_t)d, sizeof(float), &row) || !ms_mul_size((size_t)V, row, &bytes))
        MS_FAIL(MS_ERR_INVALID, "%s: V·d overflows", what);
    *h = (head_desc){.W = W, .dtype = MS_DTYPE_F32, .V = V, .d = d, .row_bytes = row, .typed = false};
    return MS_OK;
}

static ms_status head_typed(const char *what, const ms_qweight *W, head_desc *h) {
    if (!W || !W->data) MS_FAIL(MS_ERR_INVALID, "%s: no typed head given", what);
    if (!ms_q_supported(W->dtype)) MS_FAIL(MS_ERR_INVALID, "%s: head dtype %s is not readable", what, ms_dtype_name(W->dtype));
    if (W->m < 1 || W->m > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "%s: vocabulary size V=%lld out of [1, INT32_MAX]", what, (long long)W->m);
    size_t row, bytes;
    if (W->k < 1 || !ms_dtype_row_bytes(W->dtype, W->k, &row) || row != W->row_bytes)
        MS_FAIL(MS_ERR_INVALID, "%s: row of %lld elements does not match %zu bytes of %s", what, (long long)W->k,
                W->row_bytes, ms_dtype_name(W->dtype));
    if (!ms_mul_size((size_t)W->m, row, &bytes)) MS_FAIL(MS_ERR_INVALID, "%s: V·row bytes overflows", what);
    *h = (head_desc){.W = W->data, .dtype = W->dtype, .V = W->m, .d = W->k, .row_bytes = row, .typed = true};
    return MS_OK;
}

/* Allocate v->rows: cap rows of row_bytes (only when W is given). */
static ms_status alloc_rows(ms_vocab *v) {
    if (!v->W) return MS_OK;
    size_t bytes;
    if (!ms_mul_size((size_t)v->cap, v->row_bytes, &bytes))
        MS_FAIL(MS_ERR_INVALID, "vocab: %lld rows of %zu bytes overflow", (long long)v->cap, v->row_bytes);
    v->rows = ms_malloc(bytes);
    return v->rows ? MS_OK : MS_ERR_NOMEM;
}

/* The one place a row is copied from W into the packed buffer: rows[slot] =
 * W[id], its row_bytes bytes as stored (a block-format row stays in blocks:
 * no dequantization). (A CUDA backend replaces this with an asynchronous
 * gather on a copy stream, driven by ms_vocab_take_entering.) */
static void gather_row(ms_vocab *v, int64_t slot, int32_t id) {
    if (!v->rows) return;
    memcpy(v->rows + (size_t)slot * v->row_bytes, v->W + (size_t)id * v->row_bytes, v->row_bytes);
}

static void move_row(ms_vocab *v, int64_t dst, int64_t src) {
    if (!v->rows) return;
    memcpy(v->rows + (size_t)dst * v->row_bytes, v->rows + (size_t)src * v->row_bytes, v->row_bytes);
}

/* What every mode with packed rows keeps (v->cap set): id_of [cap],
 * slot_of [V] all −1, and the rows (when W is given). */
static ms_status alloc_slots(ms_vocab *v) {
    v->id_of = ms_malloc((size_t)v->cap * sizeof(int32_t));
    v->slot_of = ms_malloc((size_t)v->V * sizeof(int32_t));
    if (!v->id_of || !v->slot_of) return MS_ERR_NOMEM;
    memset(v->slot_of, 0xff, (size_t)v->V * sizeof(int32_t)); /* all −1 */
    return alloc_rows(v);
}

static ms_vocab *vocab_alloc(ms_vocab_mode mode, const head_desc *h) {
    ms_vocab *v = ms_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->mode = mode;
    v->W = h->W;
    v->dtype = h->dtype;
    v->row_bytes = h->row_bytes;
    v->typed = h->typed;
    v->V = h->V;
    v->d = h->d;
    return v;
}

static ms_status new_full(const head_desc *h, ms_vocab **out) {
    ms_vocab *v = vocab_alloc(MS_VOCAB_FULL, h);
    if (!v) return MS_ERR_NOMEM;
    v->cap = v->n = h->V;
    *out = v;
    return MS_OK;
}

ms_status ms_vocab_new_full(const float *W, int64_t V, int64_t d, ms_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    head_desc h;
    MS_TRY(head_f32("vocab full", W, V, d, &h));
    return new_full(&h, out);
}

ms_status ms_vocab_new_full_q(const ms_qweight *W, ms_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    head_desc h;
    MS_TRY(head_typed("vocab full", W, &h));
    return new_full(&h, out);
}

static ms_status new_static(const head_desc *h, const int32_t *ids, int64_t k, ms_vocab **out) {
    const int64_t V = h->V;
    if (k < 1 || k > V) MS_FAIL(MS_ERR_INVALID, "vocab static: K=%lld out of [1, V=%lld]", (long long)k, (long long)V);
    MS_ASSERT(ids);
    ms_vocab *v = vocab_alloc(MS_VOCAB_STATIC, h);
    if (!v) return MS_ERR_NOMEM;
    ms_status st = MS_ERR_NOMEM;
    v->cap = k;
    MS_TRY_GOTO(st, alloc_slots(v), fail);
    for (int64_t r = 0; r < k; r++) {
        int32_t id = ids[r];
        if (id < 0 || id >= V) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "vocab static: id %d at position %lld out of [0, %lld)", id,
                       (long long)r, (long long)V);
            st = MS_ERR_INVALID;
            goto fail;
        }
        if (v->slot_of[id] >= 0) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "vocab static: id %d repeated at positions %d and %lld", id,
                       v->slot_of[id], (long long)r);
            st = MS_ERR_INVALID;
            goto fail;
        }
        v->slot_of[id] = (int32_t)r;
        v->id_of[r] = id;
        gather_row(v, r, id); /* packed once, at creation */
    }
    v->n = k;
    *out = v;
    return MS_OK;
fail:
    ms_vocab_free(&v);
    return st;
}

ms_status ms_vocab_new_static(const float *W, int64_t V, int64_t d, const int32_t *ids, int64_t k, ms_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    head_desc h;
    MS_TRY(head_f32("vocab static", W, V, d, &h));
    return new_static(&h, ids, k, out);
}

ms_status ms_vocab_new_static_q(const ms_qweight *W, const int32_t *ids, int64_t k, ms_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    head_desc h;
    MS_TRY(head_typed("vocab static", W, &h));
    return new_static(&h, ids, k, out);
}

static ms_status new_dynamic(const head_desc *h, int64_t w_max, ms_vocab **out) {
    const int64_t V = h->V;
    if (w_max < 1 || w_max > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "vocab dynamic: W_max=%lld out of [1, INT32_MAX]", (long long)w_max);
    ms_vocab *v = vocab_alloc(MS_VOCAB_DYNAMIC, h);
    if (!v) return MS_ERR_NOMEM;
    ms_status st = MS_ERR_NOMEM;
    v->cap = w_max;
    size_t cap = (size_t)w_max, nv = (size_t)V;
    v->ring = ms_malloc(cap * sizeof(int32_t));
    v->dirty = ms_calloc(cap, 1);
    v->dirty_slots = ms_malloc(cap * sizeof(int32_t));
    v->take_slots = ms_malloc(cap * sizeof(int32_t));
    v->take_ids = ms_malloc(cap * sizeof(int32_t));
    v->count = ms_calloc(nv, sizeof(int32_t));
    v->mark = ms_calloc(nv, sizeof(uint32_t));
    if (!v->ring || !v->dirty || !v->dirty_slots || !v->take_slots || !v->take_ids || !v->count || !v->mark) goto fail;
    MS_TRY_GOTO(st, alloc_slots(v), fail);
    *out = v;
    return MS_OK;
fail:
    ms_vocab_free(&v);
    return st;
}

ms_status ms_vocab_new_dynamic(const float *W, int64_t V, int64_t d, int64_t w_max, ms_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    head_desc h;
    MS_TRY(head_f32("vocab dynamic", W, V, d, &h));
    return new_dynamic(&h, w_max, out);
}

ms_status ms_vocab_new_dynamic_q(const ms_qweight *W, int64_t w_max, ms_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    head_desc h;
    MS_TRY(head_typed("vocab dynamic", W, &h));
    return new_dynamic(&h, w_max, out);
}

static ms_status new_step(const head_desc *h, int64_t cap, ms_vocab **out) {
    if (cap < 1 || cap > h->V)
        MS_FAIL(MS_ERR_INVALID, "vocab step: cap=%lld out of [1, V=%lld]", (long long)cap, (long long)h->V);
    ms_vocab *v = vocab_alloc(MS_VOCAB_STEP, h);
    if (!v) return MS_ERR_NOMEM;
    ms_status st = MS_ERR_NOMEM;
    v->cap = cap;
    v->mark = ms_calloc((size_t)h->V, sizeof(uint32_t));
    if (!v->mark) goto fail;
    MS_TRY_GOTO(st, alloc_slots(v), fail);
    *out = v;
    return MS_OK;
fail:
    ms_vocab_free(&v);
    return st;
}

ms_status ms_vocab_new_step(const float *W, int64_t V, int64_t d, int64_t cap, ms_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    head_desc h;
    MS_TRY(head_f32("vocab step", W, V, d, &h));
    return new_step(&h, cap, out);
}

ms_status ms_vocab_new_step_q(const ms_qweight *W, int64_t cap, ms_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    head_desc h;
    MS_TRY(head_typed("vocab step", W, &h));
    return new_step(&h, cap, out);
}

void ms_vocab_free(ms_vocab **pv) {
    if (!pv || !*pv) return;
    ms_vocab *v = *pv;
    free(v->rows);
    free(v->id_of);
    free(v->slot_of);
    free(v->ring);
    free(v->count);
    free(v->mark);
    free(v->dirty);
    free(v->dirty_slots);
    free(v->take_slots);
    free(v->take_ids);
    free(v);
    *pv = NULL;
}

ms_vocab_mode ms_vocab_mode_of(const ms_vocab *v) { return v->mode; }

const char *ms_vocab_mode_name(ms_vocab_mode mode) {
    switch (mode) {
    case MS_VOCAB_FULL: return "full";
    case MS_VOCAB_STATIC: return "static";
    case MS_VOCAB_DYNAMIC: return "dynamic";
    }
    return mode == MS_VOCAB_STEP ? "step" : "?";
}

int64_t ms_vocab_vocab_size(const ms_vocab *v) { return v->V; }
int64_t ms_vocab_dim(const ms_vocab *v) { return v->d; }
int64_t ms_vocab_w_max(const ms_vocab *v) { return v->cap; }

/* ---- dynamic window ------------------------------------------------------ */

static void mark_dirty(ms_vocab *v, int64_t slot) {
    if (v->dirty[slot]) return;
    v->dirty[slot] = 1;
    v->dirty_slots[v->n_dirty++] = (int32_t)slot;
}

/* count 0 → 1: the id enters the window at slot |I|. */
static void window_enter(ms_vocab *v, int32_t id) {
    int64_t s = v->n++;
    v->slot_of[id] = (int32_t)s;
    v->id_of[s] = id;
    gather_row(v, s, id);
    mark_dirty(v, s);
    v->ctr.gathered++;
}

/* One occurrence of id leaves the ring; at count 0 the id leaves the window
 * and the last active slot refills its slot (swap-remove). */
static void window_release(ms_vocab *v, int32_t id) {
    if (--v->count[id] > 0) return;
    int64_t s = v->slot_of[id], last = v->n - 1;
    if (s != last) {
        int32_t moved = v->id_of[last];
        move_row(v, s, last);
        v->id_of[s] = moved;
        v->slot_of[moved] = (int32_t)s;
        mark_dirty(v, s);
        v->ctr.moved++;
    }
    v->slot_of[id] = -1;
    v->n--;
}

/* Append one validated entry: O(1) + O(d) per row gathered or moved. */
static void stream_push(ms_vocab *v, int32_t id) {
    v->ctr.appended++;
    if (v->ring_n == v->cap) {
        /* Full ring: the oldest entry leaves first, so |I| ≤ W_max holds
         * throughout. Replacing an id by itself changes nothing. */
        int32_t old = v->ring[v->head];
        v->ring[v->head] = id;
        if (++v->head == v->cap) v->head = 0;
        if (old == id) return;
        window_release(v, old);
    } else {
        int64_t pos = v->head + v->ring_n;
        if (pos >= v->cap) pos -= v->cap;
        v->ring[pos] = id;
        v->ring_n++;
    }
    if (v->count[id]++ == 0) window_enter(v, id);
}

static ms_status check_ids(const ms_vocab *v, const char *what, const int32_t *ids, int64_t n) {
    if (n < 0) MS_FAIL(MS_ERR_INVALID, "vocab %s: negative count %lld", what, (long long)n);
    if (n > 0 && !ids) MS_FAIL(MS_ERR_INVALID, "vocab %s: %lld ids but no array", what, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v->V)
            MS_FAIL(MS_ERR_INVALID, "vocab %s: id %d at index %lld out of [0, %lld)", what, ids[i], (long long)i,
                    (long long)v->V);
    return MS_OK;
}

/* Start a new dedup union: ids stamped with the new epoch are "seen". */
static void union_begin(ms_vocab *v) {
    if (++v->epoch == 0) { /* wrapped after 2^32 unions: clear once */
        memset(v->mark, 0, (size_t)v->V * sizeof(uint32_t));
        v->epoch = 1;
    }
}

/* Push id unless this union already pushed it. */
static void union_push(ms_vocab *v, int32_t id) {
    if (v->mark[id] == v->epoch) return;
    v->mark[id] = v->epoch;
    stream_push(v, id);
}

void ms_vocab_reset(ms_vocab *v) {
    if (v->mode != MS_VOCAB_DYNAMIC) return;
    /* O(W_max + |I|): walk the ring and the active slots, never V. */
    for (int64_t i = 0, pos = v->head; i < v->ring_n; i++) {
        v->count[v->ring[pos]] = 0;
        if (++pos == v->cap) pos = 0;
    }
    for (int64_t s = 0; s < v->n; s++) v->slot_of[v->id_of[s]] = -1;
    for (int64_t i = 0; i < v->n_dirty; i++) v->dirty[v->dirty_slots[i]] = 0;
    v->n_dirty = 0;
    v->n = v->ring_n = v->head = 0;
}

/* One validated step: plain entries, or their union in first-occurrence order. */
static void apply_step(ms_vocab *v, const ms_vocab_step *st) {
    if (!st->distinct) {
        for (int64_t i = 0; i < st->n; i++) stream_push(v, st->ids[i]);
        return;
    }
    union_begin(v);
    for (int64_t i = 0; i < st->n; i++) union_push(v, st->ids[i]);
}

static void apply_plan(ms_vocab *v, const ms_vocab_plan *p) {
    if (p->reset) ms_vocab_reset(v);
    for (int i = 0; i < p->n_steps; i++) apply_step(v, &p->step[i]);
}

static void plan_add(ms_vocab_plan *p, bool distinct, const int32_t *ids, int64_t n) {
    if (n > 0) p->step[p->n_steps++] = (ms_vocab_step){.distinct = distinct, .ids = ids, .n = n};
}

ms_status ms_vocab_append(ms_vocab *v, const int32_t *ids, int64_t n) {
    if (v->mode != MS_VOCAB_DYNAMIC) return MS_OK;
    MS_TRY(check_ids(v, "append", ids, n));
    for (int64_t i = 0; i < n; i++) stream_push(v, ids[i]);
    return MS_OK;
}

/* rows·k as a count of ids; MS_ERR_INVALID (logged by the caller's words) on overflow. */
static bool count_of(int64_t rows, int64_t k, int64_t *out) {
    size_t n;
    if (!ms_mul_size((size_t)rows, (size_t)k, &n) || n > INT64_MAX) return false;
    *out = (int64_t)n;
    return true;
}

static ms_status plan_init(const ms_vocab *v, const int32_t *prompt, int64_t n_prompt, const int32_t *topk_pre,
                           int64_t k_pre, ms_vocab_plan *p) {
    if (k_pre < 0) MS_FAIL(MS_ERR_INVALID, "vocab init_stream: negative K_pre %lld", (long long)k_pre);
    MS_TRY(check_ids(v, "init_stream prompt", prompt, n_prompt));
    int64_t n_pre;
    if (!count_of(n_prompt, k_pre, &n_pre)) MS_FAIL(MS_ERR_INVALID, "vocab init_stream: n_prompt·K_pre overflows");
    MS_TRY(check_ids(v, "init_stream top-K_pre", topk_pre, n_pre));
    p->reset = true;
    plan_add(p, false, prompt, n_prompt);
    plan_add(p, true, topk_pre, n_pre);
    return MS_OK;
}

static ms_status plan_round(const ms_vocab *v, const int32_t *tree_ids, int64_t n_tree, const int32_t *ver_topk,
                            int64_t n_path, int64_t k_ver, ms_vocab_plan *p) {
    if (n_path < 0 || k_ver < 0)
        MS_FAIL(MS_ERR_INVALID, "vocab append_round: negative path length %lld or K_ver %lld", (long long)n_path,
                (long long)k_ver);
    MS_TRY(check_ids(v, "append_round tree", tree_ids, n_tree));
    int64_t n_ver;
    if (!count_of(n_path, k_ver, &n_ver)) MS_FAIL(MS_ERR_INVALID, "vocab append_round: n_path·K_ver overflows");
    MS_TRY(check_ids(v, "append_round C_ver", ver_topk, n_ver));
    plan_add(p, true, tree_ids, n_tree); /* C_draft: distinct tree ids in node order */
    plan_add(p, true, ver_topk, n_ver);  /* C_ver: deduplicated within itself only */
    return MS_OK;
}

ms_status ms_vocab_init_stream(ms_vocab *v, const int32_t *prompt, int64_t n_prompt, const int32_t *topk_pre,
                               int64_t k_pre) {
    if (v->mode != MS_VOCAB_DYNAMIC) return MS_OK;
    ms_vocab_plan p = {0};
    MS_TRY(plan_init(v, prompt, n_prompt, topk_pre, k_pre, &p));
    apply_plan(v, &p);
    return MS_OK;
}

ms_status ms_vocab_append_round(ms_vocab *v, const int32_t *tree_ids, int64_t n_tree, const int32_t *ver_topk,
                                int64_t n_path, int64_t k_ver) {
    if (v->mode != MS_VOCAB_DYNAMIC) return MS_OK;
    ms_vocab_plan p = {0};
    MS_TRY(plan_round(v, tree_ids, n_tree, ver_topk, n_path, k_ver, &p));
    apply_plan(v, &p);
    return MS_OK;
}

ms_status ms_vocab_append_distinct(ms_vocab *v, const int32_t *ids, int64_t n) {
    if (v->mode != MS_VOCAB_DYNAMIC) return MS_OK;
    MS_TRY(check_ids(v, "append_distinct", ids, n));
    apply_step(v, &(ms_vocab_step){.distinct = true, .ids = ids, .n = n});
    return MS_OK;
}

/* ---- per-step vocabulary ------------------------------------------------------ */

/* Slot s's id leaves: the last active slot refills it (swap-remove). */
static void step_remove(ms_vocab *v, int64_t s) {
    int32_t id = v->id_of[s];
    int64_t last = v->n - 1;
    if (s != last) {
        int32_t moved = v->id_of[last];
        move_row(v, s, last);
        v->id_of[s] = moved;
        v->slot_of[moved] = (int32_t)s;
        v->ctr.moved++;
    }
    v->slot_of[id] = -1;
    v->n--;
}

ms_status ms_vocab_set_active(ms_vocab *v, const int32_t *ids, int64_t n) {
    if (v->mode != MS_VOCAB_STEP) MS_FAIL(MS_ERR_INVALID, "vocab set_active: mode %s is not step", ms_vocab_mode_name(v->mode));
    MS_TRY(check_ids(v, "set_active", ids, n));
    union_begin(v);
    int64_t distinct = 0;
    for (int64_t i = 0; i < n; i++)
        if (v->mark[ids[i]] != v->epoch) {
            v->mark[ids[i]] = v->epoch;
            distinct++;
        }
    if (distinct > v->cap) {
        union_begin(v); /* forget the marks: nothing changed */
        MS_FAIL(MS_ERR_INVALID, "vocab set_active: %lld distinct ids exceed the cap of %lld", (long long)distinct,
                (long long)v->cap);
    }
    /* Leaving ids first, from the top: the row a swap-remove moves down was
     * already looked at (and stays). */
    for (int64_t s = v->n - 1; s >= 0; s--)
        if (v->mark[v->id_of[s]] != v->epoch) step_remove(v, s);
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (v->slot_of[id] >= 0) continue; /* stays, or entered earlier in this call */
        int64_t s = v->n++;
        v->slot_of[id] = (int32_t)s;
        v->id_of[s] = id;
        gather_row(v, s, id);
        v->ctr.gathered++;
    }
    return MS_OK;
}

void ms_vocab_set_head_limit(ms_vocab *v, int64_t m) {
    if (v->mode == MS_VOCAB_STATIC) v->lim = m;
}

int64_t ms_vocab_budget(int64_t k, double r, int64_t k_min, int64_t depth) {
    if (k < 1) return 1;
    if (depth <= 0 || !(r < 1.0)) return k;
    double x = (double)k * pow(r > 0.0 ? r : 0.0, (double)depth);
    int64_t b = x >= (double)k ? k : (int64_t)floor(x);
    if (b < k_min) b = k_min;
    if (b > k) b = k;
    return b < 1 ? 1 : b;
}

/* Rows the head reads: all active rows, or a static list's first lim. */
static int64_t head_rows(const ms_vocab *v) {
    return v->mode == MS_VOCAB_STATIC && v->lim > 0 && v->lim < v->n ? v->lim : v->n;
}

/* ---- window-stream ablation ------------------------------------------------ */

const char *ms_vocab_stream_name(ms_vocab_stream s) {
    switch (s) {
    case MS_VOCAB_STREAM_BOTH: return "both";
    case MS_VOCAB_STREAM_CONTEXT: return "context";
    case MS_VOCAB_STREAM_EXTENSION: return "extension";
    }
    return "?";
}

bool ms_vocab_stream_parse(const char *s, ms_vocab_stream *out) {
    for (int k = MS_VOCAB_STREAM_BOTH; k <= MS_VOCAB_STREAM_EXTENSION; k++)
        if (!strcmp(s, ms_vocab_stream_name((ms_vocab_stream)k))) {
            *out = (ms_vocab_stream)k;
            return true;
        }
    return false;
}

ms_status ms_vocab_begin_plan(const ms_vocab *v, ms_vocab_stream stream, const int32_t *prompt, int64_t n_prompt,
                              const int32_t *topk_pre, int64_t k_pre, ms_vocab_plan *p) {
    memset(p, 0, sizeof *p);
    if ((unsigned)stream > MS_VOCAB_STREAM_EXTENSION)
        MS_FAIL(MS_ERR_INVALID, "vocab begin_stream: unknown stream %d", (int)stream);
    if (v->mode != MS_VOCAB_DYNAMIC) return MS_OK;
    switch (stream) {
    case MS_VOCAB_STREAM_BOTH: return plan_init(v, prompt, n_prompt, topk_pre, k_pre, p);
    case MS_VOCAB_STREAM_CONTEXT: return plan_init(v, prompt, n_prompt, NULL, 0, p);
    case MS_VOCAB_STREAM_EXTENSION: {
        /* the top-K_pre rows still come one per prompt position */
        if (n_prompt < 0 || k_pre < 0)
            MS_FAIL(MS_ERR_INVALID, "vocab begin_stream: negative prompt length %lld or K_pre %lld",
                    (long long)n_prompt, (long long)k_pre);
        int64_t n_pre;
        if (!count_of(n_prompt, k_pre, &n_pre)) MS_FAIL(MS_ERR_INVALID, "vocab begin_stream: n_prompt·K_pre overflows");
        MS_TRY(check_ids(v, "begin_stream top-K_pre", topk_pre, n_pre));
        p->reset = true;
        plan_add(p, true, topk_pre, n_pre);
        return MS_OK;
    }
    }
    MS_FAIL(MS_ERR_INVALID, "vocab begin_stream: unknown stream %d", (int)stream);
}

ms_status ms_vocab_round_plan(const ms_vocab *v, ms_vocab_stream stream, const int32_t *tree_ids, int64_t n_tree,
                              const int32_t *emitted, int64_t n_emit, const int32_t *ver_topk, int64_t n_path,
                              int64_t k_ver, ms_vocab_plan *p) {
    memset(p, 0, sizeof *p);
    if ((unsigned)stream > MS_VOCAB_STREAM_EXTENSION)
        MS_FAIL(MS_ERR_INVALID, "vocab stream_round: unknown stream %d", (int)stream);
    if (v->mode != MS_VOCAB_DYNAMIC) return MS_OK;
    switch (stream) {
    case MS_VOCAB_STREAM_BOTH:
    case MS_VOCAB_STREAM_EXTENSION: return plan_round(v, tree_ids, n_tree, ver_topk, n_path, k_ver, p);
    case MS_VOCAB_STREAM_CONTEXT:
        MS_TRY(check_ids(v, "append", emitted, n_emit));
        plan_add(p, false, emitted, n_emit);
        return MS_OK;
    }
    MS_FAIL(MS_ERR_INVALID, "vocab stream_round: unknown stream %d", (int)stream);
}

ms_status ms_vocab_begin_stream(ms_vocab *v, ms_vocab_stream stream, const int32_t *prompt, int64_t n_prompt,
                                const int32_t *topk_pre, int64_t k_pre) {
    ms_vocab_plan p;
    MS_TRY(ms_vocab_begin_plan(v, stream, prompt, n_prompt, topk_pre, k_pre, &p));
    apply_plan(v, &p);
    return MS_OK;
}

ms_status ms_vocab_stream_round(ms_vocab *v, ms_vocab_stream stream, const int32_t *tree_ids, int64_t n_tree,
                                const int32_t *emitted, int64_t n_emit, const int32_t *ver_topk, int64_t n_path,
                                int64_t k_ver) {
    ms_vocab_plan p;
    MS_TRY(ms_vocab_round_plan(v, stream, tree_ids, n_tree, emitted, n_emit, ver_topk, n_path, k_ver, &p));
    apply_plan(v, &p);
    return MS_OK;
}

/* ---- rows and maps ---------------------------------------------------------- */

void ms_vocab_rows(const ms_vocab *v, const float **rows, int64_t *n, const int32_t **id_of) {
    if (rows) *rows = v->typed ? NULL : (const float *)(const void *)(v->mode == MS_VOCAB_FULL ? v->W : v->rows);
    if (n) *n = head_rows(v);
    if (id_of) *id_of = v->mode == MS_VOCAB_FULL ? NULL : v->id_of;
}

bool ms_vocab_rows_q(const ms_vocab *v, ms_qweight *rows, const int32_t **id_of) {
    const void *p = v->mode == MS_VOCAB_FULL ? (const void *)v->W : (const void *)v->rows;
    if (id_of) *id_of = v->mode == MS_VOCAB_FULL ? NULL : v->id_of;
    if (!p) return false;
    /* by hand, not ms_qweight_view: m may be 0 (an empty window) */
    *rows = (ms_qweight){.dtype = v->dtype, .data = p, .m = head_rows(v), .k = v->d, .row_bytes = v->row_bytes};
    return true;
}

int64_t ms_vocab_size(const ms_vocab *v) { return v->n; }

int64_t ms_vocab_slot_of(const ms_vocab *v, int32_t id) {
    if (id < 0 || id >= v->V) return -1;
    return v->mode == MS_VOCAB_FULL ? id : v->slot_of[id];
}

bool ms_vocab_contains(const ms_vocab *v, int32_t id) { return ms_vocab_slot_of(v, id) >= 0; }

int32_t ms_vocab_id_at(const ms_vocab *v, int64_t slot) {
    if (slot < 0 || slot >= v->n) return -1;
    return v->mode == MS_VOCAB_FULL ? (int32_t)slot : v->id_of[slot];
}

void ms_vocab_take_entering(ms_vocab *v, const int32_t **slots, const int32_t **ids, int64_t *n) {
    int64_t m = 0;
    if (v->mode == MS_VOCAB_DYNAMIC) {
        for (int64_t i = 0; i < v->n_dirty; i++) {
            int32_t s = v->dirty_slots[i];
            v->dirty[s] = 0;
            if (s >= v->n) continue; /* vacated since: nothing to gather */
            v->take_slots[m] = s;
            v->take_ids[m] = v->id_of[s];
            m++;
        }
        v->n_dirty = 0;
    }
    if (slots) *slots = v->take_slots;
    if (ids) *ids = v->take_ids;
    if (n) *n = m;
}

/* Σ a[i]·b[i] over d floats in 8 interleaved partial sums (a fixed order,
 * so the result does not depend on the caller). */
static float dot_f32(const float *a, const float *b, int64_t d) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    for (; i < d; i++) acc[i & 7] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* One of x [n, d] (f32 path) and xq (8-bit path, n rows) is given; the
 * vocabulary lives on the host, so the CPU table multiplies. */
static void q_product(float *out, const float *x, const ms_k_act *xq, int64_t n, const ms_qweight *w,
                      const int32_t *ids, int64_t n_ids) {
    MS_ASSERT((x == NULL) != (xq == NULL));
    const ms_k_backend *be = ms_k_backend_cpu();
    if (ids) be->linear_rows(out, x, xq, w, ids, n_ids, n);
    else be->linear_f32out(ms_k_cpu_ops(), out, x, NULL, w, xq, n, w->k, w->m);
}

void ms_vocab_logits_q(const ms_vocab *v, const float *x, const ms_k_act *xq, int64_t n, float *out) {
    ms_qweight rows;
    const bool have = ms_vocab_rows_q(v, &rows, NULL);
    MS_ASSERT(have);
    if (rows.m == 0 || n == 0) return;
    q_product(out, x, xq, n, &rows, NULL, 0);
}

void ms_vocab_logits_indexed_q(const ms_vocab *v, const ms_qweight *W, const float *x, const ms_k_act *xq, int64_t n,
                               float *out) {
    MS_ASSERT(W && W->m == v->V && W->k == v->d);
    if (v->n == 0 || n == 0) return;
    q_product(out, x, xq, n, W, v->mode == MS_VOCAB_FULL ? NULL : v->id_of, head_rows(v));
}

void ms_vocab_logits_indexed(const ms_vocab *v, const float *W, const float *hid, int64_t n, float *out) {
    MS_ASSERT(W && (hid || n == 0) && (out || n == 0));
    const int64_t m = head_rows(v), d = v->d;
    /* slot-outer: each W row is read once for all n hidden rows */
    for (int64_t s = 0; s < m; s++) {
        int64_t id = v->mode == MS_VOCAB_FULL ? s : v->id_of[s];
        const float *w = W + (size_t)id * (size_t)d;
        for (int64_t r = 0; r < n; r++) out[(size_t)r * (size_t)m + (size_t)s] = dot_f32(hid + (size_t)r * (size_t)d, w, d);
    }
}

ms_vocab_counters ms_vocab_counters_get(const ms_vocab *v) { return v->ctr; }

/* ---- static lists --------------------------------------------------------- */

typedef struct {
    int64_t count;
    int32_t id;
} rank_entry;

/* Descending count, ties by lower id: a total order, so qsort's result is unique. */
static int rank_cmp(const void *pa, const void *pb) {
    const rank_entry *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

ms_status ms_vocab_rank_counts(const int64_t *counts, int64_t V, const int32_t *eos, int64_t n_eos, int64_t k,
                               int32_t *out) {
    if (V < 1 || V > INT32_MAX) MS_FAIL(MS_ERR_INVALID, "vocab rank: V=%lld out of [1, INT32_MAX]", (long long)V);
    if (k < 1 || k > V) MS_FAIL(MS_ERR_INVALID, "vocab rank: K=%lld out of [1, V=%lld]", (long long)k, (long long)V);
    if (n_eos < 0 || (n_eos > 0 && !eos)) MS_FAIL(MS_ERR_INVALID, "vocab rank: bad forced id list");
    for (int64_t i = 0; i < n_eos; i++)
        if (eos[i] < 0 || eos[i] >= V)
            MS_FAIL(MS_ERR_INVALID, "vocab rank: forced id %d out of [0, %lld)", eos[i], (long long)V);
    uint8_t *forced = ms_calloc((size_t)V, 1);
    rank_entry *e = ms_malloc((size_t)V * sizeof *e);
    if (!forced || !e) {
        free(forced);
        free(e);
        return MS_ERR_NOMEM;
    }
    int64_t m = 0;
    ms_status st = MS_OK;
    for (int64_t i = 0; i < n_eos; i++) {
        if (forced[eos[i]]) continue;
        if (m == k) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "vocab rank: more than K=%lld distinct forced ids",
                       (long long)k);
            st = MS_ERR_INVALID;
            goto done;
        }
        forced[eos[i]] = 1;
        out[m++] = eos[i];
    }
    int64_t ne = 0;
    for (int64_t id = 0; id < V; id++)
        if (!forced[id]) e[ne++] = (rank_entry){counts[id] > 0 ? counts[id] : 0, (int32_t)id};
    qsort(e, (size_t)ne, sizeof *e, rank_cmp);
    for (int64_t i = 0; m < k; i++) out[m++] = e[i].id; /* ne ≥ k − m since k ≤ V */
done:
    free(forced);
    free(e);
    return st;
}

#define LIST_MAGIC "# microspec-vocab v1 k="

ms_status ms_vocab_save_list(const char *path, const int32_t *ids, int64_t k) {
    if (k < 0 || (k > 0 && !ids)) MS_FAIL(MS_ERR_INVALID, "vocab save %s: bad list", path);
    size_t cap;
    if (!ms_mul_size((size_t)k + 1, 16, &cap)) MS_FAIL(MS_ERR_INVALID, "vocab save %s: list too long", path);
    cap += sizeof LIST_MAGIC + 32;
    char *buf = ms_malloc(cap);
    if (!buf) return MS_ERR_NOMEM;
    size_t len = (size_t)snprintf(buf, cap, LIST_MAGIC "%lld\n", (long long)k);
    for (int64_t i = 0; i < k; i++) len += (size_t)snprintf(buf + len, cap - len, "%d\n", ids[i]);
    ms_status st = ms_write_file_atomic(path, buf, len);
    free(buf);
    return st;
}

/* Parse a decimal in [0, limit) from [p, end); false on anything else. */
static bool parse_dec(const char *p, const char *end, int64_t limit, int64_t *val) {
    if (p == end || end - p > 18) return false; /* no overflow below */
    int64_t x = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return false;
        x = x * 10 + (*p - '0');
    }
    if (x >= limit) return false;
    *val = x;
    return true;
}

ms_status ms_vocab_parse_list(const char *text, size_t len, const char *name, int64_t V, int32_t **ids_out,
                              int64_t *k_out) {
    MS_ASSERT(ids_out && k_out);
    *ids_out = NULL;
    *k_out = 0;
    if (V < 1 || V > INT32_MAX) MS_FAIL(MS_ERR_INVALID, "%s: vocabulary size V=%lld out of range", name, (long long)V);
    const char *p = text, *end = text + len;
    const char *nl = memchr(p, '\n', len);
    const char *eol = nl ? nl : end;
    size_t magic = sizeof LIST_MAGIC - 1;
    int64_t k;
    if ((size_t)(eol - p) < magic || memcmp(p, LIST_MAGIC, magic) != 0)
        MS_FAIL(MS_ERR_FORMAT, "%s:1: header is not \"" LIST_MAGIC "K\"", name);
    if (!parse_dec(p + magic, eol, V + 1, &k) || k < 1)
        MS_FAIL(MS_ERR_FORMAT, "%s:1: k must be a decimal in [1, V=%lld]", name, (long long)V);
    if (!nl) MS_FAIL(MS_ERR_FORMAT, "%s:1: header has no line end", name);
    p = nl + 1;
    int32_t *ids = ms_malloc((size_t)k * sizeof(int32_t));
    uint8_t *seen = ms_calloc((size_t)(V + 7) / 8, 1);
    if (!ids || !seen) {
        free(ids);
        free(seen);
        return MS_ERR_NOMEM;
    }
    ms_status st = MS_ERR_FORMAT;
    for (int64_t i = 0; i < k; i++) {
        long long line = (long long)i + 2;
        if (p >= end) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: file ends after %lld ids, header says k=%lld",
                       name, line, (long long)i, (long long)k);
            goto fail;
        }
        nl = memchr(p, '\n', (size_t)(end - p));
        eol = nl ? nl : end;
        int64_t id;
        if (!parse_dec(p, eol, V, &id)) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: expected a token id in [0, %lld)", name, line,
                       (long long)V);
            goto fail;
        }
        if (seen[id >> 3] & (1u << (id & 7))) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: id %lld repeated", name, line, (long long)id);
            goto fail;
        }
        seen[id >> 3] |= (uint8_t)(1u << (id & 7));
        ids[i] = (int32_t)id;
        p = nl ? nl + 1 : end;
    }
    if (p < end) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: more lines than the header's k=%lld", name,
                   (long long)k + 2, (long long)k);
        goto fail;
    }
    free(seen);
    *ids_out = ids;
    *k_out = k;
    return MS_OK;
fail:
    free(ids);
    free(seen);
    return st;
}

ms_status ms_vocab_load_list(const char *path, int64_t V, int32_t **ids, int64_t *k) {
    char *text;
    size_t len;
    MS_TRY(ms_read_file(path, &text, &len));
    ms_status st = ms_vocab_parse_list(text, len, path, V, ids, k);
    free(text);
    return st;
}
