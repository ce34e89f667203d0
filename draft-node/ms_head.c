/* ms_head.c — the draft's LM head on the host (ms_vocab) or on the device
 * (the backend's draft head), ms_head.h, over the rows its vocabulary
 * mode names (ms_vmode.h). */
#include "ms_head.h"

#include "ms_vmode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ms_head {
    ms_head_opts o;
    const ms_vmode_i *vm; /* the vocabulary mode and its state: the rows of each step */
    void *vst;
    ms_k_head *dev;       /* the device head; NULL: the host head */
    ms_status lost;       /* device: first failure to follow the stream since the last begin */
    /* host head */
    const ms_k_backend *cpu; /* the CPU tables (the linear over the packed rows) */
    const ms_k_ops *cpu_ops;
    ms_qweight Wq;        /* typed rows (GGUF) */
    bool typed;
    ms_k_act *xq;         /* [max_rows, d] when typed and q8 */
    float *logits;        /* [max_rows, V] */
    int32_t *top_slot;    /* [max_k] */
    float *top_val;
};

/* The device head over the rows the mode names (ms_vmode_i.device). */
static ms_status new_device(ms_head *h) {
    const ms_head_opts *o = &h->o;
    if (!h->vm->device)
        MS_FAIL(MS_ERR_UNSUPPORTED, "draft head: vocabulary mode %s runs on a host head only", ms_vmode_name(h->vm));
    ms_k_head_opts ko = {.dev = o->dev,
                         .ops = o->ops,
                         .stream = o->stream,
                         .act = o->act,
                         .W = o->W_dev,
                         .V = o->V,
                         .d = o->d,
                         .indexed = o->indexed,
                         .max_append = o->max_append,
                         .max_rows = o->max_rows,
                         .max_k = o->max_k};
    MS_TRY(h->vm->device(h->vst, &ko));
    return o->be->head.head_new(&ko, &h->dev);
}

void ms_head_free(ms_head **ph) {
    ms_head *h = *ph;
    if (!h) return;
    if (h->dev) h->o.be->head.head_free(&h->dev);
    if (h->vst) h->vm->free(h->vst);
    h->cpu->act_free(&h->xq);
    free(h->logits);
    free(h->top_slot);
    free(h->top_val);
    free(h);
    *ph = NULL;
}

/* Host: the typed rows' activations, the logits and top-k scratch. */
static ms_status new_host(ms_head *h) {
    const ms_head_opts *o = &h->o;
    if (o->Wq) {
        h->typed = true;
        h->Wq = *o->Wq;
        if (o->q8) MS_TRY(h->cpu->act_new(o->max_rows, o->d, &h->xq));
    }
    h->logits = ms_malloc((size_t)(o->max_rows * o->V) * sizeof(float));
    h->top_slot = ms_malloc((size_t)o->max_k * sizeof(int32_t));
    h->top_val = ms_malloc((size_t)o->max_k * sizeof(float));
    return h->logits && h->top_slot && h->top_val ? MS_OK : MS_ERR_NOMEM;
}

ms_status ms_head_new(const ms_head_opts *o, ms_head **out) {
    *out = NULL;
    const bool on_dev = o->W_dev != NULL;
    if (on_dev ? !o->be || !o->be->head.head_new : !o->W == !o->Wq)
        MS_FAIL(MS_ERR_INVALID, "draft head: %s", on_dev ? "this backend has no device head" : "give W or Wq");
    const ms_vmode_i *vm = o->vmode ? o->vmode : ms_vmode_of(o->mode, MS_DFT_VSEL_NONE);
    if (!vm) MS_FAIL(MS_ERR_INVALID, "draft head: unknown vocabulary mode %d", (int)o->mode);
    ms_head *h = ms_calloc(1, sizeof *h);
    if (!h) return MS_ERR_NOMEM;
    h->o = *o;
    h->vm = vm;
    h->cpu = ms_k_backend_cpu();
    h->cpu_ops = ms_k_cpu_ops();
    ms_status s = MS_OK;
    MS_TRY_GOTO(s, vm->create(&h->o, &h->vst), fail);
    MS_TRY_GOTO(s, on_dev ? new_device(h) : new_host(h), fail);
    h->o.static_ids = NULL; /* read at creation only */
    h->o.dft = NULL;
    *out = h;
    return MS_OK;
fail:
    ms_head_free(&h);
    return s;
}

/* ---- the stream ------------------------------------------------------------ */

/* The device twin replays the plan the C window just applied, then (last:
 * the end of one begin / round) starts the gather; a failure sticks until
 * the next begin (the twins are out of step). */
static ms_status replay(ms_head *h, const ms_vocab_plan *p, bool last) {
    if (!h->dev || h->lost != MS_OK) return h->lost;
    const ms_k_head_table *t = &h->o.be->head;
    ms_status s = p->reset ? t->head_reset(h->dev) : MS_OK;
    for (int i = 0; i < p->n_steps && s >= 0; i++) s = t->head_append(h->dev, p->step[i].ids, p->step[i].n, p->step[i].distinct);
    /* start the gather of the entering rows now, so it overlaps the next
     * backbone forward (the head waits for it) */
    if (s >= 0 && last) s = t->head_appended(h->dev);
    if (s < 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "draft: the device window could not follow the stream: %s",
                   ms_status_str(s));
        h->lost = s;
    }
    return s;
}

ms_status ms_head_begin(ms_head *h, ms_vocab_stream stream, const int32_t *prompt, int64_t n_prompt,
                        const int32_t *topk_pre, int64_t k_pre) {
    h->lost = MS_OK; /* the resets below bring the device window back in step */
    ms_vocab_plan p;
    const ms_vmode_begin_in in = {stream, prompt, n_prompt, topk_pre, k_pre};
    ms_status s = h->vm->begin(h->vst, &in, &p);
    if (s < 0) { /* the mode may have emptied its window: the device's no longer matches */
        if (h->dev) h->lost = s;
        return s;
    }
    if (h->dev) MS_TRY(replay(h, &(ms_vocab_plan){.reset = p.reset}, false));
    return replay(h, &p, true);
}

ms_status ms_head_append_round(ms_head *h, ms_vocab_stream stream, const int32_t *tree_ids, int64_t n_tree,
                               const int32_t *emitted, int64_t n_emit, const int32_t *ver_topk, int64_t n_path,
                               int64_t k_ver) {
    ms_vocab_plan p;
    const ms_vmode_round_in in = {.stream = stream, .tree_ids = tree_ids, .n_tree = n_tree, .emitted = emitted,
                                  .n_emit = n_emit, .ver_topk = ver_topk, .n_path = n_path, .k_ver = k_ver};
    MS_TRY(h->vm->update(h->vst, &in, &p));
    return replay(h, &p, true);
}

/* ---- the head -------------------------------------------------------------- */

/* Host: logits over the active rows of hv (the mode's rows now) for hid [n, d]. */
static void host_logits(ms_head *h, const ms_vocab *hv, const float *hid, int64_t n, int64_t n_act, const float *rows) {
    if (n_act == 0) return;
    if (h->typed) {
        /* block-format head: quantize the n rows once for the one product */
        const ms_k_act *xq = NULL;
        if (h->o.q8) {
            h->cpu->act_quantize(h->xq, hid, n, h->o.d, NULL, 0); /* every form */
            xq = h->xq;
        }
        if (h->o.indexed) ms_vocab_logits_indexed_q(hv, &h->Wq, xq ? NULL : hid, xq, n, h->logits);
        else ms_vocab_logits_q(hv, xq ? NULL : hid, xq, n, h->logits);
    } else if (h->o.indexed) {
        ms_vocab_logits_indexed(hv, h->o.W, hid, n, h->logits);
    } else {
        h->cpu->linear(h->cpu_ops, h->logits, hid, rows, NULL, NULL, NULL, n, h->o.d, n_act);
    }
}

static void host_topk(ms_head *h, const float *hid, int64_t n, int64_t k, int32_t pad, int32_t *ids, float *logp) {
    const float *rows;
    const int32_t *id_of;
    int64_t n_act;
    const ms_vocab *hv = h->vm->rows(h->vst);
    ms_vocab_rows(hv, &rows, &n_act, &id_of);
    host_logits(h, hv, hid, n, n_act, rows);
    int64_t kk = k < n_act ? k : n_act;
    for (int64_t r = 0; r < n; r++) {
        float *row = h->logits + r * n_act;
        if (kk > 0) {
            ms_k_log_softmax(row, row, n_act);
            ms_k_topk(row, n_act, kk, h->top_slot, h->top_val);
        }
        for (int64_t j = 0; j < k; j++) {
            if (kk == 0) {
                ids[r * k + j] = pad;
                logp[r * k + j] = -INFINITY;
                continue;
            }
            int64_t src = j < kk ? j : kk - 1;
            int32_t slot = h->top_slot[src];
            ids[r * k + j] = id_of ? id_of[slot] : slot;
            logp[r * k + j] = j < kk ? h->top_val[j] : -INFINITY;
        }
    }
}

ms_status ms_head_ready(const ms_head *h) {
    if (h->lost != MS_OK) MS_FAIL(h->lost, "draft: the device window lost the stream; begin a new request");
    return MS_OK;
}

/* Device: [n, kk] ids and log-probs from the backend's head; padding as the
 * host's: a −1 id (a masked slot) becomes the previous entry's id (pad for
 * the first) at −inf. */
static ms_status dev_topk(ms_head *h, const void *hid, int64_t n, int64_t k, int32_t pad, int32_t *ids, float *logp) {
    MS_TRY(ms_head_ready(h));
    const int32_t *hi;
    const float *hv;
    int64_t kk;
    MS_TRY(h->o.be->head.head_topk(h->dev, hid, n, k, &hi, &hv, &kk));
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < k; j++) {
            const int32_t id = j < kk ? hi[r * kk + j] : -1;
            if (id >= 0 && id < h->o.V) {
                ids[r * k + j] = id;
                logp[r * k + j] = hv[r * kk + j];
            } else {
                ids[r * k + j] = j > 0 ? ids[r * k + j - 1] : pad;
                logp[r * k + j] = -INFINITY;
            }
        }
    return MS_OK;
}

ms_status ms_head_topk(ms_head *h, const float *hid, const void *hid_dev, int64_t n, int64_t k, int32_t pad,
                       int32_t *ids, float *logp) {
    if (h->dev) return dev_topk(h, hid_dev, n, k, pad, ids, logp);
    if (n < 1 || n > h->o.max_rows || k < 1 || k > h->o.max_k)
        MS_FAIL(MS_ERR_RANGE, "draft head: %lld rows × top-%lld outside [1, %lld] × [1, %lld]", (long long)n,
                (long long)k, (long long)h->o.max_rows, (long long)h->o.max_k);
    host_topk(h, hid, n, k, pad, ids, logp);
    return MS_OK;
}

void ms_head_synced(ms_head *h) {
    if (h->dev) h->o.be->head.head_synced(h->dev);
}

const ms_vocab *ms_head_vocab(const ms_head *h) { return h->vm->coverage(h->vst); }
const ms_vocab *ms_head_rows(const ms_head *h) { return h->vm->rows(h->vst); }
const ms_vmode_i *ms_head_mode(const ms_head *h) { return h->vm; }

ms_status ms_head_plan(ms_head *h, const ms_vmode_step *s) { return h->vm->step ? h->vm->step(h->vst, s) : MS_OK; }

bool ms_head_on_device(const ms_head *h) { return h->dev != NULL; }
void *ms_head_device_window(ms_head *h) { return h->dev ? h->o.be->head.head_window(h->dev) : NULL; }
int64_t ms_head_window_syncs(const ms_head *h) { return h->dev ? h->o.be->head.head_window_syncs() : 0; }

void ms_head_describe(const ms_head *h, char *buf, size_t cap) {
    if (h->dev) snprintf(buf, cap, "on %s:%d", h->o.be->name, h->o.dev);
    else if (h->typed)
        snprintf(buf, cap, "on the host, %s rows, %s", ms_dtype_name(h->Wq.dtype),
                 h->o.q8 ? "8-bit activations" : "f32 activations");
    else snprintf(buf, cap, "on the host");
}
