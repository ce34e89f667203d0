/* ms_draft.c — draft kinds and the per-round tree; the vocabulary mode is
 * the head's (ms_head.h, ms_vmode.h), called through its interface only. */
#include "ms_draft.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_eagle.h"
#include "ms_head.h"
#include "ms_k_backend.h"
#include "ms_model.h"
#include "ms_vmode.h"
#include "ms_wire.h" /* MS_WIRE_TOPK_MAX: the largest K_pre / K_ver a peer may send */

/* Overlap: the size classes of a sent tree whose verify times are kept apart (pre_bucket_of). */
enum { PRE_CLASSES = 6 };

struct ms_dft {
    ms_dft_opts o;
    ms_model *lm; /* lm and layerskip */
    ms_eagle *eg; /* eagle */
    ms_ngram *ng; /* o.ngram: the n-gram source merged into each tree */
    /* The LM head over the vocabulary mode, host or device, picked at
     * creation (ms_head.h): the window, the head rows, top-k. */
    ms_head *hd;
    const ms_k_backend *be; /* the backend of the draft model (CPU for eagle) */
    const ms_k_ops *mops;   /* the draft model's op table (its stream) */
    void *root_dev;         /* device head: [d] act, the last committed row's hidden state */
    int64_t V, d, max_ctx, max_batch;

    float *hid;      /* [MS_TREE_MAX, d] hidden state (lm) / output y (eagle) of each submitted tree row */
    float *root_hid; /* [d] the same for the last committed row */
    float *feat;     /* [MS_TREE_MAX, d] eagle: features of a level's rows */

    /* request state */
    uint64_t rid;
    bool active;
    int64_t round;     /* last round drafted */
    int32_t root;
    int64_t committed; /* draft KV rows committed */
    int64_t n_sub;     /* tree rows submitted this round */
    int32_t sub_tok[MS_TREE_MAX], sub_par[MS_TREE_MAX]; /* their tokens and parent rows (−1: the root) */
    int64_t kv_chain;  /* lm, host: leading chain rows of the last tree kept in the KV after `committed` */
    ms_ids pending;    /* tokens still to commit (eagle: the shifted tokens of pend_feat's rows) */
    float *pend_feat;  /* eagle: [pending.n, d] */
    int64_t pend_cap;
    ms_tree tree;      /* the last tree drafted */
    bool skip_next;    /* the last verdict asked for a tree without the model (ms_msg_verify.skip_model) */
    bool skipped;      /* the last tree was made so: its verdict's tokens join `pending` */
    bool lagging;      /* `pending` holds tokens of rounds made without the model (see CATCHUP_MAX) */
    int64_t len;       /* adaptive depth: draft tokens along the deepest path of the next tree (ms_draft.h) */
    double len_ema;    /* adaptive depth: EMA of accepted draft tokens per round */
    ms_draft_stats next_stats; /* coverage and vocab time to report with the next tree */

    /* overlap pre-draft of round `round` + 1 (docs/architecture.md §6) */
    bool pre_active;
    int32_t pre_path[MS_TREE_MAX]; /* assumed accepted path (node indices of `tree`) */
    int64_t pre_n_path;
    int32_t pre_bonus, pre_root;   /* assumed bonus; the root before the pre-draft */
    int64_t pre_committed;         /* draft KV rows before the speculative commit */
    ms_msg_tree pre_tree;          /* round + 1's tree, stats of the pre-draft work */
    int64_t pre_hits, pre_misses;
    /* Its time: a pre-draft that outlasts the verify keeps the target
     * waiting for the verdict's answer (see pre_time). */
    uint64_t pre_t0, pre_t1;  /* this round's pre-draft: start (its tree just sent), end; 0: none */
    int pre_bucket;           /* the sent tree's size class (pre_bucket_of) */
    double pre_budget_ns[PRE_CLASSES]; /* per class: tree sent to verdict come, as measured (0: not yet) */
    double step_ns;           /* one tree pass (a level's forward and head), running mean */
    int64_t pre_refused;      /* rounds in a row the budget refused a bet (see PRE_EXPLORE) */

    int64_t win_calls, win_syncs; /* ms_dft_window_syncs */
    ms_dft_level_fn level_fn;
    void *level_ctx;

    /* A mode that reads the parents' hidden states (ms_vmode_i.needs_prev:
     * the per-step selectors) gets them tracked here. */
    float *prev;       /* [MS_TREE_MAX_K, d] each level row's parent hidden state */
    float *root_prev;  /* [d] the root's predecessor's hidden state (zeros at position 0) */
    float *pre_save;   /* [2, d] root_hid and root_prev before a pre-draft */
};

ms_dft_opts ms_dft_opts_default(void) {
    return (ms_dft_opts){.kind = MS_DRAFT_LM, .layers = 1, .vocab = MS_VOCAB_DYNAMIC, .w_max = 3072,
                         .tree = ms_tree_params_default(), .ngram_p = ms_ngram_params_default(),
                         .specvocab_k = 1024, .budget_decay = 1.0, .dynaspec_decay = 1.0, .prompt_max = 128};
}

const char *ms_draft_kind_name(ms_draft_kind k) {
    switch (k) {
    case MS_DRAFT_LM: return "lm";
    case MS_DRAFT_EAGLE: return "eagle";
    case MS_DRAFT_LAYERSKIP: return "layerskip";
    case MS_DRAFT_NGRAM: return "ngram";
    }
    return "?";
}

bool ms_draft_kind_parse(const char *s, ms_draft_kind *out) {
    for (int k = MS_DRAFT_LM; k <= MS_DRAFT_NGRAM; k++)
        if (!strcmp(s, ms_draft_kind_name((ms_draft_kind)k))) {
            *out = (ms_draft_kind)k;
            return true;
        }
    return false;
}

bool ms_dft_kind_parse(const char *s, ms_draft_kind *kind, bool *ngram) {
    static const char plus[] = "+ngram";
    const size_t n = strlen(s), np = sizeof plus - 1;
    *ngram = false;
    if (n > np && !strcmp(s + n - np, plus)) {
        char base[32];
        if (n - np >= sizeof base) return false;
        memcpy(base, s, n - np);
        base[n - np] = 0;
        if (!ms_draft_kind_parse(base, kind) || *kind == MS_DRAFT_NGRAM) return false;
        *ngram = true;
        return true;
    }
    return ms_draft_kind_parse(s, kind);
}

const char *ms_dft_head_name(ms_dft_head h) {
    switch (h) {
    case MS_DFT_HEAD_GATHERED: return "gathered";
    case MS_DFT_HEAD_INDEXED: return "indexed";
    }
    return "?";
}

bool ms_dft_head_parse(const char *s, ms_dft_head *out) {
    for (int k = MS_DFT_HEAD_GATHERED; k <= MS_DFT_HEAD_INDEXED; k++)
        if (!strcmp(s, ms_dft_head_name((ms_dft_head)k))) {
            *out = (ms_dft_head)k;
            return true;
        }
    return false;
}

int64_t ms_dft_vocab(const ms_dft *d) { return d->V; }
int64_t ms_dft_draft_len(const ms_dft *d) { return d->o.adaptive ? d->len : d->o.tree.depth + 1; }
int64_t ms_dft_hidden(const ms_dft *d) { return d->d; }
const ms_vocab *ms_dft_vocabulary(const ms_dft *d) { return ms_head_vocab(d->hd); }
bool ms_dft_head_on_device(const ms_dft *d) { return ms_head_on_device(d->hd); }

void ms_dft_window_syncs(const ms_dft *d, int64_t *calls, int64_t *syncs) {
    *calls = d->win_calls;
    *syncs = d->win_syncs;
}

struct ms_k_cuda_vocab *ms_dft_cuda_window(ms_dft *d) { return ms_head_device_window(d->hd); }

void ms_dft_set_level_hook(ms_dft *d, ms_dft_level_fn fn, void *ctx) {
    d->level_fn = fn;
    d->level_ctx = ctx;
}

/* A device forward synchronised the model's stream: the head's staging is free again. */
static void dev_synced(ms_dft *d) { ms_head_synced(d->hd); }

/* ---- the parents' hidden states (ms_vmode_i.needs_prev) ------------------ */

static ms_status prev_new(ms_dft *d) {
    d->prev = ms_malloc((size_t)(MS_TREE_MAX_K * d->d) * sizeof(float));
    d->root_prev = ms_calloc((size_t)d->d, sizeof(float));
    d->pre_save = ms_malloc((size_t)(2 * d->d) * sizeof(float));
    return d->prev && d->root_prev && d->pre_save ? MS_OK : MS_ERR_NOMEM;
}

/* After a committed chunk of c rows (host path, selector modes): the root's
 * hidden state and its predecessor's. */
static void track_root_prev(ms_dft *d, int64_t c) {
    const float *h = d->eg ? ms_eagle_out(d->eg) : ms_model_hidden(d->lm);
    const size_t row = (size_t)d->d * sizeof(float);
    memcpy(d->root_prev, c >= 2 ? h + (c - 2) * d->d : d->root_hid, row);
    memcpy(d->root_hid, h + (c - 1) * d->d, row);
}

/* A pre-draft commits rows speculatively; its rollback needs the root state back. */
static void save_root_state(ms_dft *d, bool save) {
    const size_t row = (size_t)d->d * sizeof(float);
    if (save) {
        memcpy(d->pre_save, d->root_hid, row);
        memcpy(d->pre_save + d->d, d->root_prev, row);
    } else {
        memcpy(d->root_hid, d->pre_save, row);
        memcpy(d->root_prev, d->pre_save + d->d, row);
    }
}

void ms_dft_free(ms_dft **pd) {
    ms_dft *d = *pd;
    if (!d) return;
    ms_head_free(&d->hd); /* before the model: the head reads the model's rows */
    if (d->be) d->be->buf_free(&d->root_dev);
    ms_model_free(&d->lm);
    ms_eagle_free(&d->eg);
    ms_ngram_free(&d->ng);
    free(d->prev);
    free(d->root_prev);
    free(d->pre_save);
    free(d->hid);
    free(d->root_hid);
    free(d->feat);
    ms_ids_free(&d->pending);
    free(d->pend_feat);
    free(d);
    *pd = NULL;
}

/* What a draft refuses before anything loads; *vm: its vocabulary mode. */
static ms_status check_opts(const ms_dft_opts *o, int *cuda_dev, const ms_vmode_i **vm) {
    MS_TRY(ms_tree_params_check(&o->tree));
    if (o->kind == MS_DRAFT_NGRAM)
        MS_FAIL(MS_ERR_INVALID, "draft kind ngram has no model: it is ms_ngd (ms_ngram.h), not ms_dft");
    if (o->ngram) MS_TRY(ms_ngram_params_check(&o->ngram_p));
    if (!o->model_dir) MS_FAIL(MS_ERR_INVALID, "draft: no model directory given");
    if (o->kind == MS_DRAFT_EAGLE && !o->target_dir)
        MS_FAIL(MS_ERR_INVALID, "draft kind eagle needs the target directory (its embedding and LM head)");
    MS_TRY(ms_model_device_parse(o->device, cuda_dev));
    if (o->kind == MS_DRAFT_EAGLE && *cuda_dev >= 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "draft kind eagle runs on the CPU only (device \"%s\" requested); "
                                    "use lm or layerskip on a GPU", o->device);
    *vm = ms_vmode_for(o);
    if (!*vm)
        MS_FAIL(MS_ERR_INVALID, "draft: unknown vocabulary mode %s (vocabulary %d, selector %d)",
                o->vocab_mode ? o->vocab_mode : "", (int)o->vocab, (int)o->vsel);
    if ((*vm)->check) MS_TRY((*vm)->check(o));
    if ((unsigned)o->stream > MS_VOCAB_STREAM_EXTENSION || (unsigned)o->lm_head > MS_DFT_HEAD_INDEXED)
        MS_FAIL(MS_ERR_INVALID, "draft: unknown window stream %d or LM head %d", (int)o->stream, (int)o->lm_head);
    if (!(o->budget_decay >= 0.0 && o->budget_decay <= 1.0) || o->budget_min < 0 || o->specvocab_k < 0)
        MS_FAIL(MS_ERR_INVALID, "draft: budget decay %g must be in [0, 1], budget min %lld and specvocab k %lld ≥ 0",
                o->budget_decay, (long long)o->budget_min, (long long)o->specvocab_k);
    if (o->stream != MS_VOCAB_STREAM_BOTH && !(*vm)->window)
        MS_FAIL(MS_ERR_INVALID, "window stream %s only applies to a vocabulary mode with a window (got %s)",
                ms_vocab_stream_name(o->stream), ms_vmode_name(*vm));
    return MS_OK;
}

/* The draft model (eagle head, or lm / layerskip) and where its LM head's
 * rows are: *W f32 on the host, *hq typed on the host, or *on_dev. */
static ms_status load_model(ms_dft *d, int cuda_dev, const float **W, const ms_qweight **hq, bool *on_dev) {
    const ms_dft_opts *o = &d->o;
    if (o->kind == MS_DRAFT_EAGLE) {
        /* The draft keeps a tree's rows past the target's context, plus the
         * emitted token the target has not forwarded yet: the target drafts
         * until its own room runs out, so the draft never may first. */
        ms_eagle_opts eo = {.max_ctx = (o->max_ctx > 0 ? o->max_ctx : 4096) + MS_TREE_MAX + 1};
        MS_TRY(ms_eagle_load(o->model_dir, o->target_dir, &eo, &d->eg));
        d->V = ms_eagle_vocab(d->eg);
        d->d = ms_eagle_hidden(d->eg);
        d->max_ctx = ms_eagle_max_ctx(d->eg);
        d->max_batch = ms_eagle_max_batch(d->eg);
        *W = ms_eagle_lm_head(d->eg);
        return MS_OK;
    }
    ms_model_opts mo = {.max_ctx = o->max_ctx,
                        .extra_ctx = MS_TREE_MAX + 1, /* as for eagle above */
                        .n_layers = o->kind == MS_DRAFT_LAYERSKIP ? o->layers : 0,
                        .device = o->device,
                        .act = o->act,
                        /* GGUF: a draft's rounding only moves acceptance, never the
                         * output: take the fast 8-bit-activation matmuls */
                        .q8_matmul = !o->f32_matmul};
    if (o->kind == MS_DRAFT_LAYERSKIP && o->layers <= 0)
        MS_FAIL(MS_ERR_INVALID, "layerskip draft: layers must be ≥ 1, got %lld", (long long)o->layers);
    MS_TRY(ms_model_load(o->model_dir, &mo, &d->lm));
    d->V = ms_model_vocab(d->lm);
    d->d = ms_model_config(d->lm)->hidden_size;
    d->max_ctx = ms_model_max_ctx(d->lm);
    d->max_batch = ms_model_max_batch(d->lm);
    MS_TRY(ms_k_backend_for(cuda_dev, "draft", &d->be));
    d->mops = ms_model_ops(d->lm);
    /* the head on the device unless asked otherwise: then no host copy of it */
    *on_dev = d->be->head.head_new && !o->host_head && ms_model_lm_head_dev(d->lm) != NULL;
    /* GGUF: rows stay in the stored blocks; the f32 copy is never made */
    *hq = cuda_dev < 0 ? ms_model_lm_head_q(d->lm) : NULL;
    if (!*hq && !*on_dev) *W = ms_model_lm_head(d->lm); /* device model, host head: a host f32 copy */
    return *W || *on_dev || *hq ? MS_OK : MS_ERR_NOMEM;
}

/* The draft's embedding table, for a mode that routes by it (dynaspec):
 * eagle reads the target's. */
static ms_status draft_embed(void *ctx, ms_qweight *out) {
    ms_dft *d = ctx;
    if (!d->eg) return ms_model_embed_table(d->lm, out);
    *out = ms_qweight_view(MS_DTYPE_F32, ms_eagle_embed(d->eg), d->V, d->d);
    return MS_OK;
}

/* The LM head over the vocabulary mode vm, on the device or the host. */
static ms_status new_head(ms_dft *d, const ms_vmode_i *vm, int cuda_dev, const float *W, const ms_qweight *hq,
                          bool on_dev) {
    const ms_dft_opts *o = &d->o;
    ms_head_opts ho = {.vmode = vm,
                       .dft = o,
                       /* the model whose head a selector's artefact approximates: eagle reads the target's */
                       .head_model = o->kind == MS_DRAFT_EAGLE ? o->target_dir : o->model_dir,
                       .embed = draft_embed,
                       .embed_ctx = d,
                       .indexed = o->lm_head == MS_DFT_HEAD_INDEXED,
                       .V = d->V,
                       .d = d->d,
                       .w_max = o->w_max,
                       .max_rows = MS_TREE_MAX_K,
                       .max_k = MS_TREE_MAX_K,
                       .W = W,
                       .Wq = hq,
                       .q8 = hq && ms_model_q8_matmul(d->lm)};
    if (on_dev) {
        ho.be = d->be;
        ho.dev = cuda_dev;
        ho.ops = d->mops;
        ho.stream = ms_model_stream(d->lm);
        ho.act = o->act;
        ho.W_dev = ms_model_lm_head_dev(d->lm);
        /* The largest single stream change: a prompt's top-K_pre union
         * (n_prompt < max_ctx, K_pre ≤ MS_WIRE_TOPK_MAX), or a round's C_ver. */
        ho.max_append = d->max_ctx * MS_WIRE_TOPK_MAX;
        if (ho.max_append < (int64_t)MS_TREE_MAX * (MS_WIRE_TOPK_MAX + 1))
            ho.max_append = (int64_t)MS_TREE_MAX * (MS_WIRE_TOPK_MAX + 1);
        /* the root's hidden row stays on the device (the tree forwards overwrite the model's) */
        MS_TRY(d->be->buf_alloc(&d->root_dev, (size_t)d->d * ms_dtype_size(d->mops->act)));
    }
    return ms_head_new(&ho, &d->hd);
}

static void log_draft(const ms_dft *d, int cuda_dev, bool on_dev) {
    const ms_dft_opts *o = &d->o;
    char where[96];
    if (!on_dev && cuda_dev >= 0)
        snprintf(where, sizeof where, "on the host (model on cuda:%d, %s)", cuda_dev,
                 o->host_head ? "host head requested" : "no device head");
    else ms_head_describe(d->hd, where, sizeof where);
    MS_LOG_INFO("draft: kind %s%s%s, vocabulary %s (%lld of %lld rows, stream %s, head %s %s), tree %s k=%lld "
                "depth=%lld total=%lld p_min=%g%s",
                ms_draft_kind_name(o->kind), o->kind == MS_DRAFT_LAYERSKIP ? " (first layers)" : "",
                o->ngram ? " + ngram" : "", ms_vmode_name(ms_head_mode(d->hd)),
                (long long)ms_vocab_w_max(ms_head_rows(d->hd)), (long long)d->V, ms_vocab_stream_name(o->stream),
                ms_dft_head_name(o->lm_head), where, o->tree.chain ? "chain" : "eagle2", (long long)o->tree.top_k,
                (long long)o->tree.depth, (long long)o->tree.total, (double)o->tree.p_min,
                o->adaptive ? " adaptive" : "");
}

/* Load the model, then the head over the vocabulary mode, then the buffers. */
static ms_status dft_build(ms_dft *d, const ms_vmode_i *vm, int cuda_dev) {
    const ms_dft_opts *o = &d->o;
    const float *W = NULL;
    const ms_qweight *hq = NULL;
    bool on_dev = false;
    MS_TRY(load_model(d, cuda_dev, &W, &hq, &on_dev));
    if (d->V < o->tree.top_k)
        MS_FAIL(MS_ERR_INVALID, "draft vocabulary of %lld ids is smaller than top_k %lld", (long long)d->V,
                (long long)o->tree.top_k);
    if (!vm->device && cuda_dev >= 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "vocabulary mode %s runs on a host head only (draft device %s)",
                ms_vmode_name(vm), o->device);
    if (vm->needs_prev) MS_TRY(prev_new(d));
    MS_TRY(new_head(d, vm, cuda_dev, W, hq, on_dev));
    d->hid = ms_malloc((size_t)(MS_TREE_MAX * d->d) * sizeof(float));
    d->root_hid = ms_malloc((size_t)d->d * sizeof(float));
    d->feat = ms_malloc((size_t)(MS_TREE_MAX * d->d) * sizeof(float));
    if (!d->hid || !d->root_hid || !d->feat) return MS_ERR_NOMEM;
    if (o->ngram) MS_TRY(ms_ngram_new(&o->ngram_p, &d->ng));
    log_draft(d, cuda_dev, on_dev);
    return MS_OK;
}

ms_status ms_dft_new(const ms_dft_opts *o, ms_dft **out) {
    *out = NULL;
    int cuda_dev;
    const ms_vmode_i *vm;
    MS_TRY(check_opts(o, &cuda_dev, &vm));
    ms_dft *d = ms_calloc(1, sizeof *d);
    if (!d) return MS_ERR_NOMEM;
    d->o = *o;
    d->be = ms_k_backend_cpu();
    ms_status s = dft_build(d, vm, cuda_dev);
    if (s < 0) {
        ms_dft_free(&d);
        return s;
    }
    *out = d;
    return MS_OK;
}

/* ---- the draft's LM head over the active vocabulary ---------------------- */

/* One head evaluation at draft depth `depth` (0: the root's step): n rows
 * (host hid [n, d] on the host path, device hid_dev on the device path) whose
 * tokens are tokens [n] and whose parents' hidden states are prev [n, d] (read
 * by a per-step selector only). */
static ms_status head_topk(ms_dft *d, const float *hid, const void *hid_dev, const float *prev, const int32_t *tokens,
                           int64_t n, int64_t depth, int64_t k, int32_t *ids, float *logp) {
    MS_TRY(ms_head_plan(d->hd, &(ms_vmode_step){.hid = hid, .prev = prev, .tok = tokens, .n = n, .depth = depth,
                                                 .vocab_ns = &d->next_stats.vocab_ns}));
    uint64_t t0 = ms_now_ns();
    /* the root pads a level whose vocabulary has fewer than k rows (an empty window) */
    MS_TRY(ms_head_topk(d->hd, hid, hid_dev, n, k, d->root, ids, logp));
    d->next_stats.head_ns += ms_now_ns() - t0;
    if (d->level_fn) d->level_fn(d->level_ctx, tokens, n, k, ids, logp);
    return MS_OK;
}

/* ---- committing accepted rows -------------------------------------------- */

static ms_status pend_reserve(ms_dft *d, int64_t rows) {
    MS_TRY(ms_ids_reserve(&d->pending, rows));
    if (d->eg && rows > d->pend_cap) {
        float *f = ms_realloc(d->pend_feat, (size_t)(rows * d->d) * sizeof(float));
        if (!f) return MS_ERR_NOMEM;
        d->pend_feat = f;
        d->pend_cap = rows;
    }
    return MS_OK;
}

/* Forward the first n pending rows (n ≤ pending.n) into the draft KV; the
 * rest stay pending; root_hid = the last committed row's output. */
static ms_status commit_pending(ms_dft *d, int64_t n) {
    if (n == 0) return MS_OK;
    if (d->kv_chain > 0) { /* a tree's rows that no verdict kept */
        MS_TRY(ms_model_truncate(d->lm, d->committed));
        d->kv_chain = 0;
    }
    if (d->committed + n + MS_TREE_MAX > d->max_ctx)
        MS_FAIL(MS_ERR_RANGE, "draft KV full: %lld + %lld rows (+ tree) > %lld", (long long)d->committed,
                (long long)n, (long long)d->max_ctx);
    const float *last = NULL;
    int64_t last_c = 0;
    for (int64_t at = 0; at < n; at += d->max_batch) {
        int64_t c = n - at < d->max_batch ? n - at : d->max_batch;
        if (d->eg) {
            MS_TRY(ms_eagle_forward(d->eg, d->pending.v + at, d->pend_feat + at * d->d, c, NULL, NULL, 0));
            last = ms_eagle_out(d->eg) + (c - 1) * d->d;
        } else {
            MS_TRY(ms_model_forward(d->lm, d->pending.v + at, c, NULL, NULL, MS_LOGITS_NONE, NULL));
            dev_synced(d); /* every CUDA forward ends with a synchronisation */
        }
        last_c = c;
        if (d->root_prev) track_root_prev(d, c);
    }
    if (d->root_dev) {
        /* the root's hidden row stays on the device (the tree forwards overwrite the model's) */
        const size_t row = (size_t)d->d * ms_dtype_size(d->mops->act);
        const char *hd = ms_model_hidden_dev(d->lm);
        MS_TRY(d->be->copy_async(d->mops, d->root_dev, hd + (size_t)(last_c - 1) * row, row));
    } else {
        if (!d->eg) last = ms_model_hidden(d->lm) + (last_c - 1) * d->d;
        memcpy(d->root_hid, last, (size_t)d->d * sizeof(float));
    }
    d->committed += n;
    d->pending.n -= n;
    memmove(d->pending.v, d->pending.v + n, (size_t)d->pending.n * sizeof *d->pending.v);
    if (d->eg) memmove(d->pend_feat, d->pend_feat + n * d->d, (size_t)(d->pending.n * d->d) * sizeof(float));
    return MS_OK;
}

/* ---- the tree-level callback -------------------------------------------- */

static ms_status expand(void *ctx, const int32_t *tokens, const int32_t *depth, const int32_t *parent_row,
                        const uint64_t *mask, int64_t n_rows, int64_t k, int32_t *out_ids, float *out_logp) {
    ms_dft *d = ctx;
    int32_t pos[MS_TREE_MAX];
    /* A node at depth δ continues the committed rows after the root: the root
     * sits at the last committed row, so its position is committed − 1 + δ. */
    for (int64_t r = 0; r < n_rows; r++) {
        pos[r] = (int32_t)(d->committed - 1 + depth[r]);
        d->sub_tok[d->n_sub + r] = tokens[r];
        d->sub_par[d->n_sub + r] = parent_row[r];
    }
    uint64_t t0 = ms_now_ns();
    const float *out;
    if (d->eg) {
        /* EAGLE: a tree row's feature is its parent's draft output y. */
        for (int64_t r = 0; r < n_rows; r++) {
            const float *src = parent_row[r] < 0 ? d->root_hid : d->hid + (int64_t)parent_row[r] * d->d;
            memcpy(d->feat + r * d->d, src, (size_t)d->d * sizeof(float));
        }
        MS_TRY(ms_eagle_forward(d->eg, tokens, d->feat, n_rows, pos, mask, d->n_sub));
        out = ms_eagle_out(d->eg);
    } else {
        MS_TRY(ms_model_forward_masked(d->lm, tokens, n_rows, pos, mask, d->n_sub, MS_LOGITS_NONE, NULL));
        dev_synced(d);
        out = d->root_dev ? NULL : ms_model_hidden(d->lm); /* device head: the rows never come down */
    }
    float *dst = d->hid + d->n_sub * d->d;
    if (out) memcpy(dst, out, (size_t)(n_rows * d->d) * sizeof(float));
    d->next_stats.backbone_ns += ms_now_ns() - t0;
    if (d->prev) /* each row's parent's hidden state, for a per-step selector */
        for (int64_t r = 0; r < n_rows; r++)
            memcpy(d->prev + r * d->d, parent_row[r] < 0 ? d->root_hid : d->hid + (int64_t)parent_row[r] * d->d,
                   (size_t)d->d * sizeof(float));
    MS_TRY(head_topk(d, dst, d->root_dev ? ms_model_hidden_dev(d->lm) : NULL, d->prev, tokens, n_rows, depth[0], k,
                     out_ids, out_logp));
    const double pass_ns = (double)(ms_now_ns() - t0);
    d->step_ns = d->step_ns > 0.0 ? d->step_ns + (pass_ns - d->step_ns) / 8.0 : pass_ns;
    d->n_sub += n_rows;
    return MS_OK;
}

/* ---- the port ------------------------------------------------------------ */

/* begin: the prompt rows an lm draft commits are the last o.prompt_max (128 by
 * default). Its prefill is paid before the first tree and on a CPU costs
 * about a third of a draft decode step per row (~7 ms a row for the 0.5B on
 * AVX2, a 1.5B target step every 5 rows): a 700-token RAG or summarisation
 * prompt cost 5-8 s, more than the whole answer's speculation could win.
 * Drafting a continuation needs the recent context; copies from further back
 * are the n-gram source's job and every prompt id still feeds the MicroSpec
 * window. Eagle pairs each row with a target feature and keeps them all. */
static ms_status begin_impl(void *ctx, const ms_msg_begin *m) {
    ms_dft *d = ctx;
    d->active = false;
    if (m->n_prompt <= 0) MS_FAIL(MS_ERR_INVALID, "draft begin: empty prompt");
    if (m->k_pre < 0 || (m->k_pre > 0 && !m->topk_pre)) MS_FAIL(MS_ERR_INVALID, "draft begin: bad top-K_pre");
    if (m->root < 0 || m->root >= d->V) MS_FAIL(MS_ERR_INVALID, "draft begin: root %d outside [0, %lld)", m->root, (long long)d->V);
    for (int64_t i = 0; i < m->n_prompt; i++)
        if (m->prompt[i] < 0 || m->prompt[i] >= d->V)
            MS_FAIL(MS_ERR_INVALID, "draft begin: prompt id %d at %lld outside [0, %lld)", m->prompt[i], (long long)i,
                    (long long)d->V);
    if (d->eg && (!m->features || m->feat_dim != d->d))
        MS_FAIL(MS_ERR_INVALID, "draft begin: eagle needs target features of width %lld (got %lld)", (long long)d->d,
                (long long)m->feat_dim);

    uint64_t t0 = ms_now_ns();
    MS_TRY(ms_head_begin(d->hd, d->o.stream, m->prompt, m->n_prompt, m->topk_pre, m->k_pre));
    uint64_t vocab_ns = ms_now_ns() - t0;

    if (d->eg) MS_TRY(ms_eagle_truncate(d->eg, 0));
    else ms_model_reset(d->lm);
    d->committed = 0;
    d->kv_chain = 0;
    d->pending.n = 0;
    if (d->root_prev) memset(d->root_hid, 0, (size_t)d->d * sizeof(float)); /* position 0 has no predecessor */
    MS_TRY(pend_reserve(d, m->n_prompt + 1));
    if (d->eg) {
        /* Row p pairs the target feature f_p with the next token (notes §1.3). */
        for (int64_t i = 0; i < m->n_prompt; i++)
            d->pending.v[i] = i + 1 < m->n_prompt ? m->prompt[i + 1] : m->root;
        memcpy(d->pend_feat, m->features, (size_t)(m->n_prompt * d->d) * sizeof(float));
        d->pending.n = m->n_prompt;
    } else {
        const int64_t pm = d->o.prompt_max; /* a long prompt: the model reads its last pm tokens only */
        const int64_t from = pm > 0 && m->n_prompt > pm ? m->n_prompt - pm : 0;
        memcpy(d->pending.v, m->prompt + from, (size_t)(m->n_prompt - from) * sizeof(int32_t));
        d->pending.v[m->n_prompt - from] = m->root;
        d->pending.n = m->n_prompt - from + 1;
    }
    d->rid = m->request_id;
    d->root = m->root;
    d->round = 0;
    d->tree.n = 0;
    d->len = d->o.tree.depth + 1;
    d->len_ema = (double)d->len;
    d->pre_active = false;
    d->pre_t0 = d->pre_t1 = 0;
    d->skip_next = m->skip_model;
    d->skipped = d->lagging = false;
    if (d->ng) {
        ms_ngram_begin(d->ng, m->prompt, m->n_prompt, m->root);
    }
    memset(&d->next_stats, 0, sizeof d->next_stats);
    d->next_stats.vocab_ns = vocab_ns;
    d->active = true;
    return MS_OK;
}

/* Round `round`'s message: d->tree with the statistics gathered since the
 * last tree (which start again from zero). */
static void send_tree(ms_dft *d, uint64_t rid, int64_t round, ms_msg_tree *out) {
    memset(out, 0, sizeof *out);
    out->request_id = rid;
    out->round = round;
    out->tree = d->tree;
    out->stats = d->next_stats;
    out->stats.vocab_size = ms_vocab_size(ms_head_rows(d->hd));
    memset(&d->next_stats, 0, sizeof d->next_stats);
    d->round = round;
}

/* Commit what is pending, take the level-1 top-K after the root, build the
 * tree level by level (depth_cap passes at most; −1: the tree's own depth),
 * drop the tree rows from the KV. */
static ms_status draft_round(ms_dft *d, uint64_t rid, int64_t round, int64_t depth_cap, ms_msg_tree *out) {
    MS_TRY(ms_head_ready(d->hd));
    uint64_t t0 = ms_now_ns();
    MS_TRY(commit_pending(d, d->pending.n));
    d->next_stats.backbone_ns += ms_now_ns() - t0;

    int32_t root_ids[MS_TREE_MAX_K];
    float root_logp[MS_TREE_MAX_K];
    const int64_t K = d->o.tree.chain ? 1 : d->o.tree.top_k;
    MS_TRY(head_topk(d, d->root_hid, d->root_dev, d->root_prev, &d->root, 1, 0, K, root_ids, root_logp));
    d->n_sub = 0;
    ms_tree_params tp = d->o.tree;
    if (d->o.adaptive) tp.depth = d->len - 1;
    if (depth_cap >= 0 && tp.depth > depth_cap) tp.depth = depth_cap;
    ms_status s = ms_tree_build(&tp, d->root, root_ids, root_logp, expand, d, &d->tree);
    /* The tree rows leave the draft KV but a leading chain (row r the child
     * of row r − 1, row 0 the root's): where the verdict accepts its tokens,
     * those rows are what committing them would compute (the same tokens at
     * the same positions over the same visible rows; bitwise where the
     * matmuls are batch-invariant, as on the q8 GGUF path), so they stay
     * (set_pending). A chain draft's rows are all such a chain. */
    d->kv_chain = 0;
    if (!d->eg && !d->root_dev)
        while (d->kv_chain < d->n_sub && d->sub_par[d->kv_chain] == d->kv_chain - 1) d->kv_chain++;
    ms_status s2 = d->eg ? ms_eagle_truncate(d->eg, d->committed)
                         : ms_model_truncate(d->lm, d->committed + d->kv_chain);
    MS_TRY(s);
    MS_TRY(s2);

    send_tree(d, rid, round, out);
    return MS_OK;
}

/* Rounds made without the model leave their tokens pending; when the model
 * runs again it commits them first. More than CATCHUP_MAX of them would cost
 * the probe round more than the target's gate saves by skipping (a 64-row
 * forward of a 0.5B draft is ~13 decode steps of a 1.5B target on AVX2), so
 * the draft then restarts its KV from the last CATCHUP_MAX tokens: a shorter
 * context for the draft (lower acceptance, never other output). */
#define CATCHUP_MAX 16

static ms_status catch_up(ms_dft *d) {
    d->lagging = false;
    if (d->pending.n <= CATCHUP_MAX) return MS_OK;
    const int64_t drop = d->pending.n - CATCHUP_MAX;
    memmove(d->pending.v, d->pending.v + drop, (size_t)CATCHUP_MAX * sizeof *d->pending.v);
    d->pending.n = CATCHUP_MAX;
    ms_model_reset(d->lm);
    d->committed = 0;
    d->kv_chain = 0;
    if (d->root_prev) memset(d->root_hid, 0, (size_t)d->d * sizeof(float)); /* as begin: position 0 has no predecessor */
    return MS_OK;
}

/* The n-gram source's continuation under the root grafted into d->tree,
 * sharing the nodes the draft already proposed (it never displaces them,
 * but marks them as the n-gram's too); whether it proposed anything. */
static bool ngram_graft(ms_dft *d) {
    if (!d->ng) return false;
    int32_t ids[MS_TREE_MAX];
    float logp[MS_TREE_MAX];
    const int64_t n = ms_ngram_propose(d->ng, ids, logp);
    ms_ngram_graft(&d->tree, ids, logp, n, MS_TREE_MAX);
    return n > 0;
}

/* The n-gram source first: a round whose n-gram proposal is expected to
 * yield at least NGRAM_FIRST_E accepted tokens (Σ_i Π_{j≤i} p_j over its
 * tokens' acceptance estimates, ms_ngram.h) goes without the model, as a
 * round the target's gate skips (its tokens wait for the next model round).
 * Where the answer copies the prompt or itself, the model's draft steps
 * there add little to a free draft that is already accepted; the model runs
 * where the free source has nothing confident. 10 HumanEval chats, 192
 * tokens, 2 passes, alternating (Zen 4 VM, 2 threads;
 * results/gguf/attention-2026-11-28.md, last section): the defaults
 * 41.40 -> 43.27 tok/s on the AVX2 path, 50.42 -> 55.22 on AVX-512, texts
 * identical. Not in a pre-draft (overlap: the model's rows are drafted
 * before the verdict that would name the root). */
#define NGRAM_FIRST_E 1.0

static double ngram_expect(const float *logp, int64_t n) {
    double e = 0.0, c = 0.0;
    for (int64_t i = 0; i < n; i++) {
        c += (double)logp[i];
        e += exp(c);
    }
    return e;
}

static ms_status draft_impl(void *ctx, uint64_t rid, int64_t round, ms_msg_tree *out) {
    ms_dft *d = ctx;
    if (!d->active || rid != d->rid)
        MS_FAIL(MS_ERR_INVALID, "draft: request %llu is not the active one", (unsigned long long)rid);
    if (round != d->round + 1 || (d->round > 0 && d->tree.n == 0) || d->pre_active)
        MS_FAIL(MS_ERR_INVALID, "draft: round %lld out of order (last drafted %lld)", (long long)round,
                (long long)d->round);
    /* The target's cost policy found the model's nodes not worth their time:
     * a tree of the root (and the n-gram part) without running the model;
     * what is pending waits for the next round that runs it. Not for eagle
     * (its pending rows pair each token with a feature of its own round). */
    int32_t ids[MS_TREE_MAX];
    float logp[MS_TREE_MAX];
    const int64_t ng_n = d->ng ? ms_ngram_propose(d->ng, ids, logp) : 0;
    d->skipped = (d->skip_next || (ng_n > 0 && ngram_expect(logp, ng_n) >= NGRAM_FIRST_E)) && !d->eg;
    if (!d->skipped && d->lagging) MS_TRY(catch_up(d));
    if (d->skipped) {
        ms_tree_root(&d->tree, d->root);
        d->n_sub = 0;
        d->kv_chain = 0;
        send_tree(d, rid, round, out);
    } else {
        MS_TRY(draft_round(d, rid, round, -1, out));
    }
    if (ng_n > 0) { /* new nodes, or only the marks of shared ones */
        ms_ngram_graft(&d->tree, ids, logp, ng_n, MS_TREE_MAX);
        out->tree = d->tree;
    }
    return MS_OK;
}

/* The target's verdict must answer the last tree: same request and round, a
 * path of parent→child steps from the root, ids in range. */
static ms_status check_verdict(const ms_dft *d, const ms_msg_verify *m) {
    if (!d->active || m->request_id != d->rid || m->round != d->round || d->tree.n == 0)
        MS_FAIL(MS_ERR_INVALID, "draft accept: request %llu round %lld does not match the last tree (%llu, %lld)",
                (unsigned long long)m->request_id, (long long)m->round, (unsigned long long)d->rid,
                (long long)d->round);
    MS_TRY(ms_tree_path_check(&d->tree, m->path, m->n_path, "draft accept"));
    if (m->bonus < 0 || m->bonus >= d->V) MS_FAIL(MS_ERR_INVALID, "draft accept: bonus %d outside vocabulary", m->bonus);
    if (m->k_ver < 0 || (m->k_ver > 0 && !m->ver_topk)) MS_FAIL(MS_ERR_INVALID, "draft accept: bad top-K_ver");
    if (d->eg && (!m->features || m->feat_dim != d->d))
        MS_FAIL(MS_ERR_INVALID, "draft accept: eagle needs path features of width %lld", (long long)d->d);
    return MS_OK;
}

/* Adaptive depth after a verdict on d->tree (the rule in ms_draft.h). */
static void adapt_len(ms_dft *d, const ms_msg_verify *m) {
    if (!d->o.adaptive) return;
    const int64_t l_max = d->o.tree.depth + 1, a = m->n_path - 1;
    int64_t deepest = 0;
    for (int64_t i = 1; i < d->tree.n; i++)
        if (d->tree.depth[i] > deepest) deepest = d->tree.depth[i];
    d->len_ema = 0.5 * (d->len_ema + (double)a);
    if (a == deepest && deepest >= d->len) {
        if (d->len < l_max) d->len++;
    } else if (a < deepest) {
        int64_t want = (int64_t)floor(d->len_ema) + 1;
        if (want < d->len) d->len = want < 1 ? 1 : want;
    }
}

/* Tokens the verdict emits: the accepted path's tokens, then the bonus. */
static int64_t emitted_tokens(const ms_dft *d, const ms_msg_verify *m, int32_t *out) {
    return ms_tree_path_tokens(&d->tree, m->path, m->n_path, m->bonus, out);
}

/* Coverage of the emitted tokens against the vocabulary the tree was drafted
 * from, then the stream additions: C_draft and C_ver (docs/architecture.md §5), or the
 * emitted tokens for the context-only stream. */
static ms_status apply_vocab(ms_dft *d, const ms_msg_verify *m, ms_draft_stats *into) {
    int32_t emitted[MS_TREE_MAX + 1];
    int64_t n_emit = emitted_tokens(d, m, emitted);
    const ms_vocab *voc = ms_head_vocab(d->hd);
    for (int64_t i = 0; i < n_emit; i++) into->covered += ms_vocab_contains(voc, emitted[i]);
    into->emitted += n_emit;
    uint64_t t0 = ms_now_ns();
    int32_t c_draft[MS_TREE_MAX];
    int64_t n_draft = ms_tree_distinct_ids(&d->tree, c_draft);
    MS_TRY(ms_head_append_round(d->hd, d->o.stream, c_draft, n_draft, emitted, n_emit, m->ver_topk, m->n_path,
                                m->k_ver));
    into->vocab_ns += ms_now_ns() - t0;
    return MS_OK;
}

/* The n-gram history grows by what the verdict emits. */
static void ngram_accept(ms_dft *d, const ms_msg_verify *m) {
    if (!d->ng) return;
    int32_t emitted[MS_TREE_MAX + 1];
    ms_ngram_commit(d->ng, emitted, emitted_tokens(d, m, emitted));
}

/* Rows to commit next round: lm — the accepted tokens and the bonus;
 * eagle — each path node's feature paired with the token after it. */
static ms_status set_pending(ms_dft *d, const ms_msg_verify *m) {
    if (d->skipped) { /* nothing of this tree ran: the emitted tokens queue behind what waits */
        int32_t emitted[MS_TREE_MAX + 1];
        const int64_t n = emitted_tokens(d, m, emitted);
        MS_TRY(pend_reserve(d, d->pending.n + n));
        memcpy(d->pending.v + d->pending.n, emitted, (size_t)n * sizeof *emitted);
        d->pending.n += n;
        d->root = m->bonus;
        d->lagging = true;
        return MS_OK;
    }
    MS_TRY(pend_reserve(d, m->n_path + 1));
    d->pending.n = 0;
    if (d->eg) {
        for (int64_t k = 0; k < m->n_path; k++) {
            d->pending.v[k] = k + 1 < m->n_path ? d->tree.token[m->path[k + 1]] : m->bonus;
            memcpy(d->pend_feat + k * d->d, m->features + k * d->d, (size_t)d->d * sizeof(float));
        }
        d->pending.n = m->n_path;
    } else {
        /* the accepted tokens whose rows the tree left in the KV stay committed */
        int64_t kept = 0;
        while (kept < d->kv_chain && kept + 1 < m->n_path && d->sub_tok[kept] == d->tree.token[m->path[kept + 1]])
            kept++;
        MS_TRY(ms_model_truncate(d->lm, d->committed + kept));
        d->kv_chain = 0;
        if (kept > 0) {
            memcpy(d->root_hid, d->hid + (kept - 1) * d->d, (size_t)d->d * sizeof(float));
            d->committed += kept;
        }
        int32_t emitted[MS_TREE_MAX + 1];
        const int64_t n = emitted_tokens(d, m, emitted);
        memcpy(d->pending.v, emitted + kept, (size_t)(n - kept) * sizeof(int32_t));
        d->pending.n = n - kept;
    }
    d->root = m->bonus;
    return MS_OK;
}

/* Undo a pre-draft: its KV rows, its root; the tree of round `round` stays. */
static ms_status rollback_predraft(ms_dft *d) {
    if (!d->pre_active) return MS_OK;
    d->pre_active = false;
    d->committed = d->pre_committed;
    d->root = d->pre_root;
    d->pending.n = 0;
    d->kv_chain = 0;
    if (d->pre_save) save_root_state(d, false);
    return d->eg ? ms_eagle_truncate(d->eg, d->committed) : ms_model_truncate(d->lm, d->committed);
}

static ms_status accept_impl(void *ctx, const ms_msg_verify *m) {
    ms_dft *d = ctx;
    MS_TRY(check_verdict(d, m));
    MS_TRY(rollback_predraft(d));
    adapt_len(d, m);
    ngram_accept(d, m);
    d->skip_next = m->skip_model;
    MS_TRY(apply_vocab(d, m, &d->next_stats));
    return set_pending(d, m);
}

/* ---- overlap ------------------------------------------------------------------- */

/* Rows of what waits that a pre-draft commits at most in one round (a
 * 0.5B draft on one core: ~16 rows in one 1.5B verify step). */
#define PRE_CATCHUP 16
/* A verdict that came this long after the pre-draft ended found the draft
 * idle: the time from the tree to it is a clean measure of the verify. */
#define PRE_IDLE_NS 300000.0
/* After this many rounds in a row without a bet for want of time, one is
 * made anyway: the budget is learnt from the rounds it allows, and a draft
 * as slow as the verify would otherwise never bet again. */
#define PRE_EXPLORE 8

/* A tree's size class (PRE_CLASSES of them): 1, 2, 3-4, 5-8, 9-16, 17+
 * nodes (a verify's time grows with the rows it runs). */
static int pre_bucket_of(int64_t n) {
    int b = 0;
    while (b < PRE_CLASSES - 1 && n > ((int64_t)1 << b)) b++;
    return b;
}

/* At a verdict: what the round's pre-draft says of the time a verify of
 * its tree's class leaves. Finished early (the draft then waited): the
 * tree-to-verdict time is measured, and the budget follows it; finished
 * late (the verdict was already there) after real work: the budget drops
 * below what the pre-draft took. */
static void pre_time(ms_dft *d) {
    if (d->pre_t0 && d->pre_t1) {
        double *b = &d->pre_budget_ns[d->pre_bucket];
        const double now = (double)ms_now_ns(), t0 = (double)d->pre_t0, t1 = (double)d->pre_t1;
        if (now - t1 > PRE_IDLE_NS) {
            const double v = now - t0;
            *b = *b > 0.0 ? *b + (v - *b) / 4.0 : v;
        } else if (t1 - t0 > PRE_IDLE_NS) {
            const double took = t1 - t0;
            *b = 0.9 * (*b > 0.0 && *b < took ? *b : took);
        }
    }
    d->pre_t0 = d->pre_t1 = 0;
}

/* Time left before the verdict is expected (+inf: not known yet). */
static double pre_left(const ms_dft *d) {
    if (d->o.pre_unbudgeted) return INFINITY;
    const double b = d->pre_budget_ns[d->pre_bucket];
    return b > 0.0 ? b - (double)(ms_now_ns() - d->pre_t0) : INFINITY;
}

/* What committing c rows is expected to take: a batched forward of c rows
 * costs about a step and a quarter step for each further row. */
static double commit_est(const ms_dft *d, int64_t c) {
    return c <= 0 ? 0.0 : d->step_ns * (1.0 + (double)(c - 1) / 4.0);
}

/* The pre-draft's passes that fit before its verdict is expected, after
 * the bet's own row (−1: no budget known, the tree's own depth); at least
 * 0: one drafted token. */
static int64_t pre_depth_cap(const ms_dft *d) {
    const double left = pre_left(d) - d->step_ns;
    if (isinf(left) || !(d->step_ns > 0.0)) return -1;
    return left > 0.0 ? (int64_t)(left / d->step_ns) : 0;
}

static ms_status predraft_impl(ms_dft *d) {
    if (d->eg) MS_FAIL(MS_ERR_UNSUPPORTED, "overlap pre-drafting needs the target's features: not for eagle drafts");
    if (!d->active || d->tree.n < 1 || d->pre_active)
        MS_FAIL(MS_ERR_INVALID, "pre-draft: no tree of round %lld waiting for its verdict", (long long)d->round);
    d->pre_t0 = ms_now_ns(); /* pre_t1: ms_dft_predraft, at its end */
    d->pre_bucket = pre_bucket_of(d->tree.n);
    /* A tree made without the model (the gate, or a confident n-gram copy)
     * left the tokens of its rounds pending: the model catches up on them
     * here, while the target verifies, as many rows as the verify leaves
     * time for (PRE_CATCHUP at most: a long prompt's rows take several
     * rounds), and bets once nothing is pending. */
    if (d->skipped && d->pending.n > 0) {
        int64_t c = d->pending.n < PRE_CATCHUP ? d->pending.n : PRE_CATCHUP;
        while (c > 1 && commit_est(d, c) > pre_left(d)) c--; /* one row at least: it catches up */
        ms_status s = commit_pending(d, c);
        if (s < 0 || d->pending.n > 0) return s;
        d->lagging = false;
    }
    if (d->pending.n != 0)
        MS_FAIL(MS_ERR_INTERNAL, "pre-draft: %lld rows of round %lld not committed", (long long)d->pending.n,
                (long long)d->round);
    const ms_tree *t = &d->tree;
    /* The deepest node; among equals the highest cumulative draft log-prob.
     * (The leaf of highest score instead confirmed 0 of 38 bets where this
     * confirmed 21 of 140, one run each: results/twohosts/README.md.) */
    int32_t leaf = 0;
    for (int32_t i = 1; i < t->n; i++)
        if (t->depth[i] > t->depth[leaf] || (t->depth[i] == t->depth[leaf] && t->score[i] > t->score[leaf])) leaf = i;
    int64_t n = t->depth[leaf] + 1;
    /* no time for the path's rows, the bet's row and its head: no bet (but see PRE_EXPLORE) */
    if (d->pre_refused < PRE_EXPLORE && commit_est(d, n - 1) + 1.5 * d->step_ns > pre_left(d)) {
        d->pre_refused++;
        return MS_OK;
    }
    d->pre_refused = 0;
    for (int32_t v = leaf, k = (int32_t)n - 1; k >= 0; v = t->parent[v], k--) d->pre_path[k] = v;
    d->pre_n_path = n;
    d->pre_committed = d->committed;
    d->pre_root = d->root;
    d->pre_active = true;
    if (d->pre_save) save_root_state(d, true);

    /* Commit the assumed path's tokens; the draft's top-1 after them is the bonus it bets on. */
    ms_draft_stats saved = d->next_stats;
    memset(&d->next_stats, 0, sizeof d->next_stats);
    ms_status s = pend_reserve(d, n + 1);
    for (int64_t k = 1; k < n && s >= 0; k++) d->pending.v[k - 1] = t->token[d->pre_path[k]];
    d->pending.n = n - 1;
    uint64_t t0 = ms_now_ns();
    if (s >= 0 && d->pending.n > 0) s = commit_pending(d, d->pending.n);
    d->next_stats.backbone_ns += ms_now_ns() - t0;
    int32_t id = 0;
    float lp;
    if (s >= 0) {
        /* root_hid is the draft's state after the path's last token (or
         * after the root when the path is the root alone) */
        s = head_topk(d, d->root_hid, d->root_dev, d->root_prev, &d->root, 1, 0, 1, &id, &lp);
    }
    if (s >= 0) {
        d->pre_bonus = id;
        d->pending.v[0] = id;
        d->pending.n = 1;
        d->root = id;
        ms_tree kept = d->tree;
        int64_t round = d->round;
        s = draft_round(d, d->rid, round + 1, pre_depth_cap(d), &d->pre_tree);
        /* No tree rows stay under overlap: the verdict may refer to either tree. */
        if (s >= 0 && d->kv_chain > 0) s = ms_model_truncate(d->lm, d->committed);
        d->kv_chain = 0;
        d->tree = kept; /* the verdict still refers to round `round`'s tree */
        d->round = round;
    }
    d->next_stats = saved;
    if (s < 0) {
        if (rollback_predraft(d) < 0) MS_LOG_WARN("pre-draft rollback failed");
        return s;
    }
    return MS_OK;
}

static ms_status accept_overlap_impl(ms_dft *d, const ms_msg_verify *m, bool *hit, ms_msg_tree *tree) {
    *hit = false;
    MS_TRY(check_verdict(d, m));
    pre_time(d);
    adapt_len(d, m); /* on a hit, round + 1 was pre-drafted at the length before this verdict */
    ngram_accept(d, m);
    bool same = d->pre_active && m->n_path == d->pre_n_path && m->bonus == d->pre_bonus &&
                !memcmp(m->path, d->pre_path, (size_t)m->n_path * sizeof *m->path);
    d->skip_next = m->skip_model;
    if (!same) {
        if (d->pre_active) d->pre_misses++;
        MS_TRY(rollback_predraft(d));
        MS_TRY(apply_vocab(d, m, &d->next_stats));
        return set_pending(d, m);
    }
    /* Confirmed: the rows are already committed, round + 1's tree is ready.
     * Its stats carry the pre-draft work and this verdict's coverage. */
    d->pre_hits++;
    d->pre_active = false;
    d->skipped = d->lagging = false; /* the model caught up and drafted round + 1 */
    ms_draft_stats v = d->next_stats;
    memset(&d->next_stats, 0, sizeof d->next_stats);
    MS_TRY(apply_vocab(d, m, &v));
    d->tree = d->pre_tree.tree;
    d->round = d->pre_tree.round;
    /* the n-gram part, as draft_impl adds it: its history now ends with this
     * verdict's bonus, the pre-drafted tree's root */
    if (ngram_graft(d)) d->pre_tree.tree = d->tree;
    *tree = d->pre_tree;
    tree->stats.covered += v.covered;
    tree->stats.emitted += v.emitted;
    tree->stats.vocab_ns += v.vocab_ns;
    tree->stats.vocab_size = ms_vocab_size(ms_head_rows(d->hd));
    *hit = true;
    return MS_OK;
}

/* ---- window host synchronisations per call (ms_dft_window_syncs) ---------- */

static int64_t win_syncs_now(const ms_dft *d) { return ms_head_window_syncs(d->hd); }

static void win_count(ms_dft *d, int64_t s0) {
    if (!ms_head_on_device(d->hd)) return;
    d->win_calls++;
    d->win_syncs += win_syncs_now(d) - s0;
}

static ms_status port_begin(void *ctx, const ms_msg_begin *m) {
    const int64_t s0 = win_syncs_now(ctx);
    ms_status s = begin_impl(ctx, m);
    win_count(ctx, s0);
    return s;
}

static ms_status port_draft(void *ctx, uint64_t rid, int64_t round, ms_msg_tree *out) {
    const int64_t s0 = win_syncs_now(ctx);
    ms_status s = draft_impl(ctx, rid, round, out);
    win_count(ctx, s0);
    return s;
}

static ms_status port_accept(void *ctx, const ms_msg_verify *m) {
    const int64_t s0 = win_syncs_now(ctx);
    ms_status s = accept_impl(ctx, m);
    win_count(ctx, s0);
    return s;
}

ms_status ms_dft_predraft(ms_dft *d) {
    const int64_t s0 = win_syncs_now(d);
    ms_status s = predraft_impl(d);
    d->pre_t1 = ms_now_ns();
    win_count(d, s0);
    return s;
}

ms_status ms_dft_accept_overlap(ms_dft *d, const ms_msg_verify *m, bool *hit, ms_msg_tree *tree) {
    const int64_t s0 = win_syncs_now(d);
    ms_status s = accept_overlap_impl(d, m, hit, tree);
    win_count(d, s0);
    return s;
}

void ms_dft_overlap_counts(const ms_dft *d, int64_t *hits, int64_t *misses) {
    *hits = d->pre_hits;
    *misses = d->pre_misses;
}

static void port_end(void *ctx, uint64_t rid) {
    ms_dft *d = ctx;
    if (d->rid == rid) {
        d->active = false;
        d->pre_active = false;
    }
}

ms_draft_port ms_dft_port(ms_dft *d) {
    return (ms_draft_port){.ctx = d,
                           .wants_features = d->eg != NULL,
                           .free_part = d->ng != NULL,
                           .no_topk_pre = !ms_head_mode(d->hd)->window,
                           .begin = port_begin,
                           .draft = port_draft,
                           .accept = port_accept,
                           .end = port_end};
}
