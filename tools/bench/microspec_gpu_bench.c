/* microspec-gpu-bench — what the device does with the CUDA op table and the
 * draft LM head (docs/architecture.md §5, §8), measured with CUDA events: the median of
 * --reps repetitions after warm-up, each batch queued behind a busy-wait
 * kernel so launch latency stays out of the numbers.
 *
 *  (a) device-to-device copy bandwidth (1 GiB cudaMemcpyAsync; bytes moved =
 *      read + write) and every op of the table at Llama-3-8B layer shapes:
 *      time, bytes moved, GB/s and % of the copy bandwidth;
 *  (b) the draft LM-head step (10 rows, one tree level: head GEMM [+ mask],
 *      log-softmax, top-10, slot → id) per vocabulary mode — full, static
 *      32,768, dynamic W_max 3,072 gathered (window update + gather included
 *      in the round), dynamic indexed — per step and per round (6 head steps
 *      + one window update), with speedups and the host synchronisations the
 *      timed dynamic rounds made (must be 0);
 *  (c) one speculative round with RANDOM WEIGHTS: an EAGLE-like 1-layer draft
 *      of the target's width run at 1,10,10,10,10,10 rows with tree masks +
 *      the head per mode, then the target's verify over 60 tree rows (full
 *      depth for Llama-3.2-1B, the first 8 layers for the 7B/8B shapes) +
 *      full-vocab f32 logits + argmax.
 * Outputs: a Markdown table on stdout, PREFIX.json and PREFIX.csv (atomic)
 * with --out; progress on stderr. Exit 2 when there is no CUDA device.
 */
#include <cuda_runtime_api.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_k_cuda.h"
#include "ms_k_cuda_lmhead.h"
#include "ms_kernels.h"

#define TOOL "microspec-gpu-bench"

#define CU(expr)                                                                                              \
    do {                                                                                                      \
        cudaError_t cu_e_ = (expr);                                                                           \
        if (cu_e_ != cudaSuccess) {                                                                           \
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: %s", #expr, cudaGetErrorString(cu_e_));         \
            return MS_ERR_INTERNAL;                                                                           \
        }                                                                                                     \
    } while (0)

/* ---- results --------------------------------------------------------------------- */

typedef struct {
    char section[8], model[24], item[96], shape[96], note[96];
    double us, bytes, gbs, pct, ratio; /* NaN: not applicable */
} row;

typedef struct {
    const ms_k_ops *ops;
    cudaStream_t stream, copy;
    ms_dtype act;
    int reps, warmup;
    double copy_gbs;
    char device[256];
    row *rows;
    int64_t n_rows, cap_rows;
    cudaEvent_t *ev; /* [2·reps] */
    float *times;    /* [reps] */
} bench;

static ms_status add_row(bench *b, const char *section, const char *model, const char *item, const char *shape,
                         double us, double bytes, double ratio, const char *note) {
    if (b->n_rows == b->cap_rows) {
        const int64_t cap = b->cap_rows ? 2 * b->cap_rows : 64;
        row *p = realloc(b->rows, (size_t)cap * sizeof *p);
        if (!p) MS_FAIL(MS_ERR_NOMEM, "results: out of memory");
        b->rows = p;
        b->cap_rows = cap;
    }
    row *r = &b->rows[b->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->section, sizeof r->section, "%s", section);
    snprintf(r->model, sizeof r->model, "%s", model);
    snprintf(r->item, sizeof r->item, "%s", item);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    snprintf(r->note, sizeof r->note, "%s", note ? note : "");
    r->us = us;
    r->bytes = bytes;
    r->gbs = us > 0 && bytes > 0 ? bytes / us / 1e3 : NAN;
    r->pct = isnan(r->gbs) || !(b->copy_gbs > 0) ? NAN : 100.0 * r->gbs / b->copy_gbs;
    r->ratio = ratio;
    fprintf(stderr, "  %-5s %-13s %-44s %10.2f us\n", section, model, item, us);
    return MS_OK;
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef ms_status (*work_fn)(bench *b, void *arg);

/* Median time (µs) of one call of fn over the reps, after warm-up. */
static ms_status time_median(bench *b, work_fn fn, void *arg, double *us) {
    for (int w = 0; w < b->warmup; w++) MS_TRY(fn(b, arg));
    MS_TRY(ms_k_cuda_sync(b->ops));
    MS_TRY(ms_k_cuda_busy_wait(b->ops, 20000.0));
    for (int r = 0; r < b->reps; r++) {
        CU(cudaEventRecord(b->ev[2 * r], b->stream));
        MS_TRY(fn(b, arg));
        CU(cudaEventRecord(b->ev[2 * r + 1], b->stream));
    }
    MS_TRY(ms_k_cuda_sync(b->ops));
    for (int r = 0; r < b->reps; r++) {
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, b->ev[2 * r], b->ev[2 * r + 1]));
        b->times[r] = ms * 1000.0f;
    }
    qsort(b->times, (size_t)b->reps, sizeof(float), cmp_float);
    *us = b->reps % 2 ? b->times[b->reps / 2] : 0.5 * (b->times[b->reps / 2 - 1] + b->times[b->reps / 2]);
    return MS_OK;
}

/* ---- device buffers ------------------------------------------------------------------ */

/* Every device buffer of a section, freed together. */
typedef struct {
    void *p[512];
    int n;
} pool;

/* Takes ownership of a device buffer; freed (and the error returned) when full. */
static ms_status pool_add(pool *pl, void *p) {
    if (pl->n == (int)(sizeof pl->p / sizeof pl->p[0])) {
        ms_k_cuda_free(&p);
        MS_FAIL(MS_ERR_INTERNAL, "bench: buffer pool full");
    }
    pl->p[pl->n++] = p;
    return MS_OK;
}

static ms_status dalloc(pool *pl, void **out, size_t bytes) {
    MS_TRY(ms_k_cuda_malloc(out, bytes));
    return pool_add(pl, *out);
}

static void pool_free(pool *pl) {
    for (int i = 0; i < pl->n; i++) ms_k_cuda_free(&pl->p[i]);
    pl->n = 0;
}

static uint64_t g_seed = 0x6d737065; /* "mspe": every fill gets the next seed */

/* n act values uniform in [lo, hi), seeded. */
static ms_status dalloc_act(bench *b, pool *pl, void **out, int64_t n, float lo, float hi) {
    MS_TRY(dalloc(pl, out, (size_t)n * 2));
    return ms_k_cuda_fill_uniform(b->ops, *out, n, g_seed++, lo, hi);
}

/* ---- model shapes -------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int64_t d, V, H, KV, hd, ff, layers, layers_used;
    bool bias; /* q/k/v bias (Qwen2) */
} model_shape;

static const model_shape MODELS[] = {
    {"Llama-3-8B", 4096, 128256, 32, 8, 128, 14336, 32, 8, false},
    {"Llama-3.2-1B", 2048, 128256, 32, 8, 64, 8192, 16, 16, false},
    {"Qwen2-7B", 3584, 152064, 28, 4, 128, 18944, 28, 8, true},
};

#define CTX 2048     /* committed rows before the round */
#define MAX_ROWS 64  /* rows a round may add to a KV cache */
#define TREE 60      /* verify rows */
#define HEAD_ROWS 10 /* draft rows per tree level */
#define TOPK 10
#define DRAFT_STEPS 6
#define STATIC_K 32768
#define W_MAX 3072

static ms_status rope_for(int64_t hd, ms_k_rope *dev) {
    ms_k_rope host;
    const ms_k_rope_params p = {.theta = 500000.0, .llama3 = 1, .factor = 8.0, .low_freq_factor = 1.0,
                                .high_freq_factor = 4.0, .original_max_pos = 8192};
    MS_TRY(ms_k_rope_build(&host, 4096, hd, &p));
    ms_status st = ms_k_cuda_rope_upload(&host, dev);
    ms_k_rope_free(&host);
    return st;
}

/* A random tree over n rows: parent before child, mask = ancestors + self. */
static void tree_masks(uint64_t *mask, int64_t n, ms_rng *rng) {
    for (int64_t i = 0; i < n; i++)
        mask[i] = (i ? mask[ms_rng_u64(rng) % (uint64_t)i] : 0) | (1ull << i);
}

/* ---- (a) copy bandwidth and the op table -------------------------------------------------- */

typedef enum { OP_COPY, OP_LINEAR, OP_RMSNORM, OP_ROPE, OP_ATTN, OP_SILU, OP_EMBED, OP_MOVE, OP_LSM, OP_TOPK } op_kind;

typedef struct {
    op_kind kind;
    void *y;
    const void *x, *w, *x2;
    int64_t n, k, m;
    size_t bytes;
    ms_k_attn_shape as;
    const uint64_t *mask;
    const int32_t *pos;
    const ms_k_rope *rope;
    const int64_t *src, *dst;
    int32_t *idx;
    float *val;
} opcase;

static ms_status run_op(bench *b, void *arg) {
    const opcase *o = arg;
    const ms_k_ops *k = b->ops;
    switch (o->kind) {
    case OP_COPY: CU(cudaMemcpyAsync(o->y, o->x, o->bytes, cudaMemcpyDeviceToDevice, b->stream)); break;
    case OP_LINEAR: k->gemm(k->ctx, o->y, o->x, o->w, NULL, o->n, o->k, o->m); break;
    case OP_RMSNORM: k->rmsnorm(k->ctx, o->y, o->x, o->w, o->n, o->k, 1e-5f); break;
    case OP_ROPE: k->rope(k->ctx, o->y, o->n, o->k, o->m, o->pos, o->rope); break;
    case OP_ATTN: k->attention(k->ctx, o->y, o->x, o->w, o->x2, &o->as, o->mask, NULL); break;
    case OP_SILU: k->silu_glu(k->ctx, o->y, o->x, o->x2, o->n); break;
    case OP_EMBED: k->embed(k->ctx, o->y, o->w, b->act, o->pos, o->n, o->k); break;
    case OP_MOVE: k->move_rows(k->ctx, o->y, o->k, o->src, o->dst, o->n); break;
    case OP_LSM: MS_TRY(ms_k_cuda_log_softmax_rows(k, o->y, o->x, o->n, o->k, o->k)); break;
    case OP_TOPK: MS_TRY(ms_k_cuda_topk_rows(k, o->idx, o->val, o->x, o->n, o->k, o->k, o->m)); break;
    }
    return MS_OK;
}

static ms_status bench_op(bench *b, const char *item, const char *shape, opcase *o, double bytes) {
    double us;
    MS_TRY(time_median(b, run_op, o, &us));
    return add_row(b, "ops", "Llama-3-8B", item, shape, us, bytes, NAN, NULL);
}

/* (a) 1 GiB device-to-device copy: the bandwidth the op rows are read against. */
static ms_status ops_copy(bench *b) {
    const size_t giB = (size_t)1 << 30;
    pool pl = {0};
    void *src, *dst;
    double us;
    ms_status st = dalloc(&pl, &src, giB);
    if (st == MS_OK) st = dalloc(&pl, &dst, giB);
    if (st == MS_OK && cudaMemsetAsync(src, 1, giB, b->stream) != cudaSuccess) st = MS_ERR_INTERNAL;
    if (st == MS_OK) {
        opcase o = {.kind = OP_COPY, .y = dst, .x = src, .bytes = giB};
        st = time_median(b, run_op, &o, &us);
    }
    if (st == MS_OK) {
        b->copy_gbs = 2.0 * (double)giB / us / 1e3;
        st = add_row(b, "copy", "-", "cudaMemcpyAsync D2D 1 GiB", "1 GiB read + 1 GiB write", us, 2.0 * (double)giB,
                     NAN, "reference for % copy BW");
    }
    pool_free(&pl);
    return st;
}

/* The op table's device buffers (Llama-3-8B shapes, a 60-node tree). */
typedef struct {
    void *W, *x, *y, *nw, *q, *kc, *vc, *att, *g, *u, *emb, *table;
    int32_t *pos, *ids;
    uint64_t *mask;
    int64_t *src, *dst;
    float *lg;
    int32_t *tidx;
    float *tval;
} ops_bufs;

static ms_status ops_alloc(bench *b, pool *pl, const model_shape *m, ops_bufs *o) {
    const int64_t d = m->d, qd = m->H * m->hd, kvd = m->KV * m->hd, ff = m->ff, V = m->V;
    MS_TRY(dalloc_act(b, pl, &o->W, ff * d, -0.02f, 0.02f));
    MS_TRY(dalloc_act(b, pl, &o->x, TREE * ff, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->y, TREE * ff, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->nw, d, 0.9f, 1.1f));
    MS_TRY(dalloc_act(b, pl, &o->q, TREE * qd, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->kc, (CTX + MAX_ROWS) * kvd, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->vc, (CTX + MAX_ROWS) * kvd, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->att, TREE * qd, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->g, TREE * ff, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->u, TREE * ff, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->emb, TREE * d, -1, 1));
    MS_TRY(dalloc_act(b, pl, &o->table, V * d, -0.05f, 0.05f));
    MS_TRY(dalloc(pl, (void **)&o->lg, (size_t)TREE * (size_t)V * sizeof(float)));
    MS_TRY(dalloc(pl, (void **)&o->tidx, (size_t)TREE * TOPK * sizeof(int32_t)));
    MS_TRY(dalloc(pl, (void **)&o->tval, (size_t)TREE * TOPK * sizeof(float)));
    MS_TRY(dalloc(pl, (void **)&o->pos, TREE * sizeof(int32_t)));
    MS_TRY(dalloc(pl, (void **)&o->ids, TREE * sizeof(int32_t)));
    MS_TRY(dalloc(pl, (void **)&o->mask, TREE * sizeof(uint64_t)));
    MS_TRY(dalloc(pl, (void **)&o->src, 6 * sizeof(int64_t)));
    MS_TRY(dalloc(pl, (void **)&o->dst, 6 * sizeof(int64_t)));
    return MS_OK;
}

/* Positions, token ids and tree masks of the 60 rows, and a 6-row KV compaction. */
static ms_status ops_upload(bench *b, const model_shape *m, const ops_bufs *o) {
    int32_t hp[TREE], hi[TREE];
    uint64_t hm[TREE];
    int64_t hs[6], hdst[6];
    ms_rng rng;
    ms_rng_seed(&rng, 7);
    for (int i = 0; i < TREE; i++) {
        hp[i] = CTX + i;
        hi[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)m->V);
    }
    tree_masks(hm, TREE, &rng);
    for (int i = 0; i < 6; i++) { /* an accepted path of 6 nodes compacted to the front */
        hs[i] = CTX + 7 * i + 3;
        hdst[i] = CTX + i;
    }
    MS_TRY(ms_k_cuda_upload(b->ops, o->pos, hp, sizeof hp));
    MS_TRY(ms_k_cuda_upload(b->ops, o->ids, hi, sizeof hi));
    MS_TRY(ms_k_cuda_upload(b->ops, o->mask, hm, sizeof hm));
    MS_TRY(ms_k_cuda_upload(b->ops, o->src, hs, sizeof hs));
    return ms_k_cuda_upload(b->ops, o->dst, hdst, sizeof hdst);
}

/* The linear rows: d → d and d → ff, for 1, 10 and 60 rows. */
static ms_status ops_linear(bench *b, const model_shape *m, const ops_bufs *bf) {
    const int64_t d = m->d, ff = m->ff;
    static const int64_t ns[] = {1, 10, 60};
    for (int mi = 0; mi < 2; mi++) {
        const int64_t mo = mi ? ff : d;
        for (int ni = 0; ni < 3; ni++) {
            const int64_t n = ns[ni];
            char item[96], shape[96];
            snprintf(item, sizeof item, "linear %lld->%lld n=%lld", (long long)d, (long long)mo, (long long)n);
            snprintf(shape, sizeof shape, "x[%lld,%lld] W[%lld,%lld]", (long long)n, (long long)d, (long long)mo,
                     (long long)d);
            opcase o = {.kind = OP_LINEAR, .y = bf->y, .x = bf->x, .w = bf->W, .n = n, .k = d, .m = mo};
            MS_TRY(bench_op(b, item, shape, &o, 2.0 * (double)(mo * d + n * d + n * mo)));
        }
    }
    return MS_OK;
}

/* The other ops of a decode step at 60 tree rows. */
static ms_status ops_table(bench *b, const model_shape *m, const ops_bufs *bf, const ms_k_rope *rope) {
    const int64_t d = m->d, qd = m->H * m->hd, kvd = m->KV * m->hd, ff = m->ff, V = m->V;
    opcase o = {.kind = OP_RMSNORM, .y = bf->y, .x = bf->x, .w = bf->nw, .n = TREE, .k = d};
    MS_TRY(bench_op(b, "rmsnorm n=60", "x[60,4096]", &o, 2.0 * (double)(2 * TREE * d + d)));
    o = (opcase){.kind = OP_ROPE, .y = bf->q, .n = TREE, .k = m->H, .m = m->hd, .pos = bf->pos, .rope = rope};
    MS_TRY(bench_op(b, "rope q n=60", "q[60,32,128]", &o, 2.0 * 2.0 * (double)(TREE * qd) + 8.0 * TREE * 64));
    const double kv_bytes = 2.0 * 2.0 * (double)kvd;
    o = (opcase){.kind = OP_ATTN, .y = bf->att, .x = bf->q, .w = bf->kc, .x2 = bf->vc,
                 .as = {.n_q = 1, .ctx = CTX, .n_heads = m->H, .n_kv_heads = m->KV, .head_dim = m->hd,
                        .scale = 1.0f / sqrtf((float)m->hd), .mask_back = 0}};
    MS_TRY(bench_op(b, "attention decode ctx=2048", "32 q heads, 8 kv, hd 128", &o,
                    kv_bytes * (CTX + 1) + 4.0 * (double)qd));
    o.as.n_q = TREE;
    o.mask = bf->mask;
    MS_TRY(bench_op(b, "attention tree 60 rows ctx=2048", "tree mask, mask_back 0", &o,
                    kv_bytes * (CTX + TREE) + 4.0 * (double)(TREE * qd)));
    o = (opcase){.kind = OP_SILU, .y = bf->g, .x = bf->g, .x2 = bf->u, .n = TREE * ff};
    MS_TRY(bench_op(b, "silu_glu n=60", "[60,14336]", &o, 3.0 * 2.0 * (double)(TREE * ff)));
    o = (opcase){.kind = OP_EMBED, .y = bf->emb, .w = bf->table, .pos = bf->ids, .n = TREE, .k = d};
    MS_TRY(bench_op(b, "embed n=60", "table[128256,4096]", &o, 2.0 * 2.0 * (double)(TREE * d)));
    o = (opcase){.kind = OP_MOVE, .y = bf->kc, .k = kvd, .src = bf->src, .dst = bf->dst, .n = 6};
    MS_TRY(bench_op(b, "move_rows 6 rows (KV compaction)", "rows of 8x128", &o, 2.0 * 2.0 * (double)(6 * kvd)));
    MS_TRY(ms_k_cuda_lmhead_dense(b->ops, bf->lg, V, bf->y, bf->table, TREE, V, d));
    o = (opcase){.kind = OP_LSM, .y = bf->lg, .x = bf->lg, .n = TREE, .k = V};
    MS_TRY(bench_op(b, "log_softmax 60 rows", "f32 [60,128256]", &o, 2.0 * 4.0 * (double)(TREE * V)));
    o = (opcase){.kind = OP_TOPK, .x = bf->lg, .idx = bf->tidx, .val = bf->tval, .n = HEAD_ROWS, .k = V, .m = TOPK};
    return bench_op(b, "top-10 10 rows", "f32 [10,128256]", &o, 4.0 * (double)(HEAD_ROWS * V));
}

static ms_status section_ops(bench *b) {
    fprintf(stderr, TOOL ": (a) copy bandwidth and the op table\n");
    const model_shape *m = &MODELS[0];
    MS_TRY(ops_copy(b));
    pool pl = {0};
    ms_k_rope rope = {0};
    ops_bufs bf;
    ms_status st = ops_alloc(b, &pl, m, &bf);
    if (st == MS_OK) st = ops_upload(b, m, &bf);
    if (st == MS_OK) st = rope_for(m->hd, &rope);
    if (st == MS_OK) st = ops_linear(b, m, &bf);
    if (st == MS_OK) st = ops_table(b, m, &bf, &rope);
    ms_k_cuda_rope_free(&rope);
    pool_free(&pl);
    return st;
}

/* ---- (b) the draft LM head ----------------------------------------------------------------- */

typedef enum { VM_FULL, VM_STATIC, VM_GATHERED, VM_INDEXED, VM_COUNT } vmode;
static const char *const VM_NAME[VM_COUNT] = {"full", "static 32768", "dynamic 3072 gathered",
                                              "dynamic 3072 indexed"};

#define ROUND_IDS 72 /* per round: 60 tree ids (C_draft) + 12 verify ids (C_ver) */
#define ROUND_TREE 60

typedef struct {
    const model_shape *m;
    void *W;                      /* [V, d] head (tied embedding table of (c)) */
    void *h;                      /* [TREE, d] draft rows */
    float *logits;                /* [TREE, V] f32 */
    int32_t *slots, *tok;         /* [TREE, TOPK] */
    float *vals;                  /* [TREE, TOPK] */
    void *srows;                  /* static [K, d] */
    int32_t *sids;                /* static ids [K] */
    ms_k_cuda_vocab *win;
    int32_t *round_ids;           /* device [n_rounds, ROUND_IDS] */
    int64_t n_rounds, next_round;
    vmode mode;
} head;

/* One head step over n rows: logits (+ mask), log-softmax, top-k, ids. */
static ms_status head_step(bench *b, head *hd, const void *h, int64_t n) {
    const ms_k_ops *ops = b->ops;
    const int64_t d = hd->m->d;
    int64_t m = hd->m->V;
    const int32_t *id_of = NULL, *n_active = NULL;
    switch (hd->mode) {
    case VM_FULL: MS_TRY(ms_k_cuda_lmhead_dense(ops, hd->logits, m, h, hd->W, n, m, d)); break;
    case VM_STATIC:
        m = STATIC_K;
        id_of = hd->sids;
        MS_TRY(ms_k_cuda_lmhead_dense(ops, hd->logits, m, h, hd->srows, n, m, d));
        break;
    case VM_GATHERED: {
        const void *rows;
        ms_k_cuda_vocab_rows(hd->win, &rows, &n_active, &id_of);
        m = W_MAX;
        MS_TRY(ms_k_cuda_vocab_wait(hd->win, b->stream));
        MS_TRY(ms_k_cuda_lmhead_packed(ops, hd->logits, m, h, rows, n_active, n, m, d));
        break;
    }
    case VM_INDEXED:
    default:
        ms_k_cuda_vocab_rows(hd->win, NULL, &n_active, &id_of);
        m = W_MAX;
        MS_TRY(ms_k_cuda_lmhead_indexed(ops, hd->logits, m, h, hd->W, hd->m->V, id_of, n_active, n, m, d));
        break;
    }
    MS_TRY(ms_k_cuda_log_softmax_rows(ops, hd->logits, hd->logits, n, m, m));
    MS_TRY(ms_k_cuda_topk_rows(ops, hd->slots, hd->vals, hd->logits, n, m, m, TOPK));
    if (id_of) MS_TRY(ms_k_cuda_slots_to_ids(ops, hd->tok, hd->slots, n * TOPK, id_of, m, n_active));
    return MS_OK;
}

/* The window update of one round: C_draft then C_ver (two unions), and the
 * gather of entering rows on the copy stream (gathered mode). */
static ms_status window_update(head *hd) {
    const int32_t *r = hd->round_ids + (hd->next_round++ % hd->n_rounds) * ROUND_IDS;
    MS_TRY(ms_k_cuda_vocab_append_distinct(hd->win, r, ROUND_TREE));
    MS_TRY(ms_k_cuda_vocab_append_distinct(hd->win, r + ROUND_TREE, ROUND_IDS - ROUND_TREE));
    if (hd->mode == VM_GATHERED) MS_TRY(ms_k_cuda_vocab_gather(hd->win));
    return MS_OK;
}

static ms_status work_head_step(bench *b, void *arg) {
    head *hd = arg;
    return head_step(b, hd, hd->h, HEAD_ROWS);
}

static ms_status work_head_round(bench *b, void *arg) {
    head *hd = arg;
    if (hd->mode >= VM_GATHERED) MS_TRY(window_update(hd));
    for (int s = 0; s < DRAFT_STEPS; s++) MS_TRY(head_step(b, hd, hd->h, HEAD_ROWS));
    return MS_OK;
}

/* Skewed ids: 80% from V·u^4 (a hot head), 20% uniform. */
static int32_t draw_id(ms_rng *r, int64_t V) {
    const double u = ms_rng_uniform(r);
    const int64_t id = ms_rng_uniform(r) < 0.8 ? (int64_t)((double)V * u * u * u * u) : (int64_t)((double)V * u);
    return (int32_t)(id < V ? id : V - 1);
}

/* Head state for one model: W, static rows, the window warmed with a stream
 * of W_max ids, and n_rounds of round ids: 60 tree ids drawn from the recent
 * stream (the draft only proposes window ids) and 12 verify ids of which 3
 * are fresh draws (a few new ids per round). */
static ms_status head_setup(bench *b, pool *pl, const model_shape *m, head *hd) {
    memset(hd, 0, sizeof *hd);
    hd->m = m;
    const int64_t V = m->V, d = m->d;
    MS_TRY(dalloc_act(b, pl, &hd->W, V * d, -0.05f, 0.05f));
    MS_TRY(dalloc_act(b, pl, &hd->h, TREE * d, -1, 1));
    MS_TRY(dalloc(pl, (void **)&hd->logits, (size_t)TREE * (size_t)V * sizeof(float)));
    MS_TRY(dalloc(pl, (void **)&hd->slots, TREE * TOPK * sizeof(int32_t)));
    MS_TRY(dalloc(pl, (void **)&hd->tok, TREE * TOPK * sizeof(int32_t)));
    MS_TRY(dalloc(pl, (void **)&hd->vals, TREE * TOPK * sizeof(float)));
    ms_rng rng;
    ms_rng_seed(&rng, 0x5ca1e + (uint64_t)V);
    int32_t *perm = malloc((size_t)V * sizeof(int32_t));
    hd->n_rounds = 4 * (b->warmup + b->reps) + 8;
    const int64_t n_ring = W_MAX, n_stream = n_ring + hd->n_rounds * ROUND_IDS;
    int32_t *stream = malloc((size_t)n_stream * sizeof(int32_t));
    if (!perm || !stream) {
        free(perm);
        free(stream);
        MS_FAIL(MS_ERR_NOMEM, "bench: out of host memory");
    }
    /* static list: the K first ids of a seeded permutation */
    for (int64_t i = 0; i < V; i++) perm[i] = (int32_t)i;
    for (int64_t i = V - 1; i > 0; i--) {
        const int64_t j = (int64_t)(ms_rng_u64(&rng) % (uint64_t)(i + 1));
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    ms_status st = ms_k_cuda_static_rows_new(b->ops, hd->W, V, d, perm, STATIC_K, &hd->srows, &hd->sids);
    if (st == MS_OK) st = pool_add(pl, hd->srows);
    if (st == MS_OK) st = pool_add(pl, hd->sids);
    /* the stream: a warm-up prefix, then the rounds */
    int64_t len = 0;
    for (; len < n_ring; len++) stream[len] = draw_id(&rng, V);
    for (int64_t r = 0; r < hd->n_rounds; r++) {
        const int64_t base = len;
        for (int i = 0; i < ROUND_IDS; i++) {
            const bool fresh = i >= ROUND_IDS - 3;
            stream[len++] = fresh ? draw_id(&rng, V) : stream[base - 1 - (int64_t)(ms_rng_u64(&rng) % (uint64_t)n_ring)];
        }
    }
    int32_t *d_stream = NULL;
    if (st == MS_OK) st = dalloc(pl, (void **)&d_stream, (size_t)n_stream * sizeof(int32_t));
    if (st == MS_OK) st = ms_k_cuda_upload(b->ops, d_stream, stream, (size_t)n_stream * sizeof(int32_t));
    if (st == MS_OK) st = ms_k_cuda_vocab_new(V, W_MAX, d, b->act, hd->W, b->stream, b->copy, &hd->win);
    if (st == MS_OK) st = ms_k_cuda_vocab_append(hd->win, d_stream, n_ring);
    if (st == MS_OK) st = ms_k_cuda_vocab_gather(hd->win);
    if (st == MS_OK) hd->round_ids = d_stream + n_ring;
    free(perm);
    free(stream);
    if (st == MS_OK) {
        ms_k_cuda_vocab_state s = {0};
        st = ms_k_cuda_vocab_download_state(hd->win, &s);
        if (st == MS_OK) fprintf(stderr, "  %s: window warmed, |I| = %d of W_max %d\n", m->name, s.n_active, W_MAX);
    }
    return st;
}

static ms_status section_head(bench *b, const model_shape *m, head *hd) {
    char shape[96];
    double step[VM_COUNT], round[VM_COUNT];
    int64_t syncs = 0;
    for (int v = 0; v < VM_COUNT; v++) {
        hd->mode = (vmode)v;
        const int64_t rows = v == VM_FULL ? m->V : v == VM_STATIC ? STATIC_K : W_MAX;
        MS_TRY(time_median(b, work_head_step, hd, &step[v]));
        const int64_t s0 = ms_k_cuda_vocab_host_syncs();
        MS_TRY(time_median(b, work_head_round, hd, &round[v]));
        if (v >= VM_GATHERED) syncs += ms_k_cuda_vocab_host_syncs() - s0;
        /* bytes of a step: head rows read + the f32 logits written, read and
         * rewritten by log-softmax, read by top-k */
        const double bytes = 2.0 * (double)(rows * m->d) + 4.0 * 4.0 * (double)(HEAD_ROWS * rows);
        char item[96];
        snprintf(shape, sizeof shape, "n=10 d=%lld V=%lld rows=%lld", (long long)m->d, (long long)m->V,
                 (long long)rows);
        snprintf(item, sizeof item, "head step %s", VM_NAME[v]);
        MS_TRY(add_row(b, "head", m->name, item, shape, step[v], bytes, NAN, "GEMM(+mask)+log-softmax+top-10+ids"));
        snprintf(item, sizeof item, "head round %s", VM_NAME[v]);
        MS_TRY(add_row(b, "head", m->name, item, "6 steps + window update", round[v], NAN, NAN,
                       v >= VM_GATHERED ? "append 60+12 ids, gather included" : "6 steps"));
    }
    MS_TRY(add_row(b, "head", m->name, "speedup step full/dynamic", "gathered", NAN, NAN,
                   step[VM_FULL] / step[VM_GATHERED], NULL));
    MS_TRY(add_row(b, "head", m->name, "speedup step static/dynamic", "gathered", NAN, NAN,
                   step[VM_STATIC] / step[VM_GATHERED], NULL));
    MS_TRY(add_row(b, "head", m->name, "speedup round full/dynamic", "gathered", NAN, NAN,
                   round[VM_FULL] / round[VM_GATHERED], NULL));
    MS_TRY(add_row(b, "head", m->name, "speedup round static/dynamic", "gathered", NAN, NAN,
                   round[VM_STATIC] / round[VM_GATHERED], NULL));
    MS_TRY(add_row(b, "head", m->name, "speedup round gathered/indexed", "indexed over gathered", NAN, NAN,
                   round[VM_INDEXED] / round[VM_GATHERED], NULL));
    char note[96];
    snprintf(note, sizeof note, "%lld host syncs in the timed dynamic rounds", (long long)syncs);
    MS_TRY(add_row(b, "head", m->name, "host syncs in dynamic rounds", "ms_k_cuda_vocab_host_syncs", NAN, NAN,
                   (double)syncs, note));
    fprintf(stderr, "  %s: %s\n", m->name, note);
    if (syncs != 0) MS_FAIL(MS_ERR_INTERNAL, "the dynamic round synchronised with the host %lld times", (long long)syncs);
    return MS_OK;
}

/* ---- (c) one round with random weights -------------------------------------------------------- */

typedef struct {
    void *wq, *wk, *wv, *wo, *wg, *wu, *wd, *n1, *n2, *bq, *bk, *bv;
    void *kc, *vc; /* [CTX + MAX_ROWS, KV·hd] */
} layer;

typedef struct {
    head *hd;
    const model_shape *m;
    layer *tl; /* target layers [layers_used] */
    layer dl;  /* the draft's one layer */
    void *fc_e, *fc_f, *fnorm;
    /* activations */
    void *x, *t, *q, *att, *o, *g, *u, *e, *feat;
    int32_t *ids, *pos;                         /* [TREE] */
    uint64_t *vmask;                            /* [TREE] verify tree */
    uint64_t *dmask;                            /* [DRAFT_STEPS, 16] draft passes */
    ms_k_rope rope;
} rnd;

static ms_status layer_new(bench *b, pool *pl, const model_shape *m, layer *L) {
    const int64_t d = m->d, qd = m->H * m->hd, kvd = m->KV * m->hd, ff = m->ff;
    const float ad = 1.0f / sqrtf((float)d), af = 1.0f / sqrtf((float)ff), aq = 1.0f / sqrtf((float)qd);
    memset(L, 0, sizeof *L);
    MS_TRY(dalloc_act(b, pl, &L->wq, qd * d, -ad, ad));
    MS_TRY(dalloc_act(b, pl, &L->wk, kvd * d, -ad, ad));
    MS_TRY(dalloc_act(b, pl, &L->wv, kvd * d, -ad, ad));
    MS_TRY(dalloc_act(b, pl, &L->wo, d * qd, -aq, aq));
    MS_TRY(dalloc_act(b, pl, &L->wg, ff * d, -ad, ad));
    MS_TRY(dalloc_act(b, pl, &L->wu, ff * d, -ad, ad));
    MS_TRY(dalloc_act(b, pl, &L->wd, d * ff, -af, af));
    MS_TRY(dalloc_act(b, pl, &L->n1, d, 0.9f, 1.1f));
    MS_TRY(dalloc_act(b, pl, &L->n2, d, 0.9f, 1.1f));
    if (m->bias) {
        MS_TRY(dalloc_act(b, pl, &L->bq, qd, -0.01f, 0.01f));
        MS_TRY(dalloc_act(b, pl, &L->bk, kvd, -0.01f, 0.01f));
        MS_TRY(dalloc_act(b, pl, &L->bv, kvd, -0.01f, 0.01f));
    }
    MS_TRY(dalloc_act(b, pl, &L->kc, (CTX + MAX_ROWS) * kvd, -1, 1));
    MS_TRY(dalloc_act(b, pl, &L->vc, (CTX + MAX_ROWS) * kvd, -1, 1));
    return MS_OK;
}

/* One pre-norm decoder layer on x [n, d] (in place): rows sit at cache rows
 * [ctx, ctx + n), attention with `mask` / mask_back (ms_kernels.h). */
static void layer_fwd(bench *b, rnd *R, const layer *L, int64_t n, int64_t ctx, int64_t mask_back,
                      const uint64_t *mask, const int32_t *pos) {
    const ms_k_ops *k = b->ops;
    void *c = k->ctx;
    const model_shape *m = R->m;
    const int64_t d = m->d, qd = m->H * m->hd, kvd = m->KV * m->hd, ff = m->ff;
    char *krow = (char *)L->kc + (size_t)(ctx * kvd) * 2, *vrow = (char *)L->vc + (size_t)(ctx * kvd) * 2;
    k->rmsnorm(c, R->t, R->x, L->n1, n, d, 1e-5f);
    k->gemm(c, R->q, R->t, L->wq, L->bq, n, d, qd);
    k->gemm(c, krow, R->t, L->wk, L->bk, n, d, kvd);
    k->gemm(c, vrow, R->t, L->wv, L->bv, n, d, kvd);
    k->rope(c, R->q, n, m->H, m->hd, pos, &R->rope);
    k->rope(c, krow, n, m->KV, m->hd, pos, &R->rope);
    const ms_k_attn_shape as = {.n_q = n, .ctx = ctx, .n_heads = m->H, .n_kv_heads = m->KV, .head_dim = m->hd,
                                .scale = 1.0f / sqrtf((float)m->hd), .mask_back = mask_back};
    k->attention(c, R->att, R->q, L->kc, L->vc, &as, mask, NULL);
    k->gemm(c, R->o, R->att, L->wo, NULL, n, qd, d);
    k->add(c, R->x, R->o, n * d);
    k->rmsnorm(c, R->t, R->x, L->n2, n, d, 1e-5f);
    k->gemm(c, R->g, R->t, L->wg, NULL, n, d, ff);
    k->gemm(c, R->u, R->t, L->wu, NULL, n, d, ff);
    k->silu_glu(c, R->g, R->g, R->u, n * ff);
    k->gemm(c, R->o, R->g, L->wd, NULL, n, ff, d);
    k->add(c, R->x, R->o, n * d);
}

/* The draft: EAGLE-like fc over [embedding | feature] (as two GEMMs and an
 * add), one layer, no final norm, the head in the current mode; 6 passes
 * at 1, 10, 10, 10, 10, 10 rows, each seeing its ancestors among the rows
 * of earlier passes (mask_back) and itself. */
static ms_status work_draft(bench *b, void *arg) {
    rnd *R = arg;
    const ms_k_ops *k = b->ops;
    const int64_t d = R->m->d;
    if (R->hd->mode >= VM_GATHERED) MS_TRY(window_update(R->hd));
    int64_t back = 0;
    for (int p = 0; p < DRAFT_STEPS; p++) {
        const int64_t n = p == 0 ? 1 : HEAD_ROWS;
        k->embed(k->ctx, R->e, R->hd->W, b->act, R->ids, n, d);
        k->gemm(k->ctx, R->x, R->e, R->fc_e, NULL, n, d, d);
        k->gemm(k->ctx, R->t, R->feat, R->fc_f, NULL, n, d, d);
        k->add(k->ctx, R->x, R->t, n * d);
        layer_fwd(b, R, &R->dl, n, CTX + back, back, R->dmask + p * 16, R->pos);
        MS_TRY(head_step(b, R->hd, R->x, n));
        back += n;
    }
    return MS_OK;
}

/* The verify: the target over 60 tree rows, final norm, full-vocab f32
 * logits, argmax (top-1). */
static ms_status work_verify(bench *b, void *arg) {
    rnd *R = arg;
    const ms_k_ops *k = b->ops;
    const model_shape *m = R->m;
    k->embed(k->ctx, R->x, R->hd->W, b->act, R->ids, TREE, m->d);
    for (int64_t l = 0; l < m->layers_used; l++) layer_fwd(b, R, &R->tl[l], TREE, CTX, 0, R->vmask, R->pos);
    k->rmsnorm(k->ctx, R->t, R->x, R->fnorm, TREE, m->d, 1e-5f);
    MS_TRY(ms_k_cuda_lmhead_dense(k, R->hd->logits, m->V, R->t, R->hd->W, TREE, m->V, m->d));
    return ms_k_cuda_topk_rows(k, R->hd->slots, R->hd->vals, R->hd->logits, TREE, m->V, m->V, 1);
}

static ms_status work_round(bench *b, void *arg) {
    MS_TRY(work_draft(b, arg));
    return work_verify(b, arg);
}

static ms_status section_round(bench *b, pool *pl, const model_shape *m, head *hd) {
    rnd R;
    memset(&R, 0, sizeof R);
    R.hd = hd;
    R.m = m;
    const int64_t d = m->d, qd = m->H * m->hd, ff = m->ff;
    R.tl = calloc((size_t)m->layers_used, sizeof(layer));
    if (!R.tl) MS_FAIL(MS_ERR_NOMEM, "bench: out of host memory");
    ms_status st = MS_OK;
    for (int64_t l = 0; l < m->layers_used && st == MS_OK; l++) st = layer_new(b, pl, m, &R.tl[l]);
    if (st == MS_OK) st = layer_new(b, pl, m, &R.dl);
    const float ad = 1.0f / sqrtf((float)d);
    if (st == MS_OK) st = dalloc_act(b, pl, &R.fc_e, d * d, -ad, ad);
    if (st == MS_OK) st = dalloc_act(b, pl, &R.fc_f, d * d, -ad, ad);
    if (st == MS_OK) st = dalloc_act(b, pl, &R.fnorm, d, 0.9f, 1.1f);
    void **acts[] = {&R.x, &R.t, &R.o, &R.e, &R.feat};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0] && st == MS_OK; i++)
        st = dalloc_act(b, pl, acts[i], TREE * d, -1, 1);
    if (st == MS_OK) st = dalloc_act(b, pl, &R.q, TREE * qd, -1, 1);
    if (st == MS_OK) st = dalloc_act(b, pl, &R.att, TREE * qd, -1, 1);
    if (st == MS_OK) st = dalloc_act(b, pl, &R.g, TREE * ff, -1, 1);
    if (st == MS_OK) st = dalloc_act(b, pl, &R.u, TREE * ff, -1, 1);
    if (st == MS_OK) st = dalloc(pl, (void **)&R.ids, TREE * sizeof(int32_t));
    if (st == MS_OK) st = dalloc(pl, (void **)&R.pos, TREE * sizeof(int32_t));
    if (st == MS_OK) st = dalloc(pl, (void **)&R.vmask, TREE * sizeof(uint64_t));
    if (st == MS_OK) st = dalloc(pl, (void **)&R.dmask, DRAFT_STEPS * 16 * sizeof(uint64_t));
    if (st == MS_OK) {
        int32_t hi[TREE], hp[TREE];
        uint64_t hv[TREE], hm[DRAFT_STEPS * 16];
        ms_rng rng;
        ms_rng_seed(&rng, 0x7ee + (uint64_t)d);
        for (int i = 0; i < TREE; i++) {
            hi[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)m->V);
            hp[i] = CTX + i;
        }
        tree_masks(hv, TREE, &rng);
        /* draft pass p ≥ 1, row i: the root (region bit 0), row i of every
         * earlier pass q ≥ 1 (bit 1 + 10(q−1) + i) and itself (bit back + i) */
        memset(hm, 0, sizeof hm);
        hm[0] = 1;
        for (int p = 1; p < DRAFT_STEPS; p++) {
            const int back = 1 + HEAD_ROWS * (p - 1);
            for (int i = 0; i < HEAD_ROWS; i++) {
                uint64_t mk = 1ull | (1ull << (back + i));
                for (int qq = 1; qq < p; qq++) mk |= 1ull << (1 + HEAD_ROWS * (qq - 1) + i);
                hm[p * 16 + i] = mk;
            }
        }
        st = ms_k_cuda_upload(b->ops, R.ids, hi, sizeof hi);
        if (st == MS_OK) st = ms_k_cuda_upload(b->ops, R.pos, hp, sizeof hp);
        if (st == MS_OK) st = ms_k_cuda_upload(b->ops, R.vmask, hv, sizeof hv);
        if (st == MS_OK) st = ms_k_cuda_upload(b->ops, R.dmask, hm, sizeof hm);
    }
    if (st == MS_OK) st = rope_for(m->hd, &R.rope);
    char depth[96];
    snprintf(depth, sizeof depth, "random weights; verify = %s %lld of %lld layers", m->name,
             (long long)m->layers_used, (long long)m->layers);
    double verify_us = 0;
    if (st == MS_OK) st = time_median(b, work_verify, &R, &verify_us);
    if (st == MS_OK)
        st = add_row(b, "round", m->name, "verify (random weights)", "60 tree rows + f32 logits + argmax", verify_us,
                     NAN, NAN, depth);
    for (int v = 0; v < VM_COUNT && st == MS_OK; v++) {
        hd->mode = (vmode)v;
        double draft_us = 0, round_us = 0;
        char item[96];
        st = time_median(b, work_draft, &R, &draft_us);
        if (st == MS_OK) st = time_median(b, work_round, &R, &round_us);
        if (st != MS_OK) break;
        snprintf(item, sizeof item, "draft %s (random weights)", VM_NAME[v]);
        st = add_row(b, "round", m->name, item, "1-layer EAGLE-like, rows 1,10x5 + head", draft_us, NAN, NAN,
                     "random weights");
        snprintf(item, sizeof item, "round %s (random weights)", VM_NAME[v]);
        if (st == MS_OK) st = add_row(b, "round", m->name, item, "draft + verify", round_us, NAN, NAN, depth);
    }
    ms_k_cuda_rope_free(&R.rope);
    free(R.tl);
    return st;
}

/* ---- output ------------------------------------------------------------------------------------- */

static void put_num(FILE *f, double v, const char *fmt) {
    if (isnan(v) || isinf(v))
        fputs("null", f);
    else
        fprintf(f, fmt, v);
}

static void put_cell(FILE *f, double v, const char *fmt) {
    if (isnan(v) || isinf(v))
        fputs(" |", f);
    else {
        fputc(' ', f);
        fprintf(f, fmt, v);
        fputs(" |", f);
    }
}

static void write_markdown(const bench *b, FILE *f) {
    static const char *const title[][2] = {{"copy", "(a) device copy bandwidth"},
                                           {"ops", "(a) the op table, Llama-3-8B layer shapes"},
                                           {"head", "(b) draft LM head, n = 10 rows (one tree level)"},
                                           {"round", "(c) one round, RANDOM WEIGHTS"}};
    fprintf(f, "# microspec-gpu-bench — %s, %s, median of %d reps\n\n", b->device, ms_dtype_name(b->act), b->reps);
    for (size_t s = 0; s < sizeof title / sizeof title[0]; s++) {
        bool any = false;
        for (int64_t i = 0; i < b->n_rows; i++) {
            const row *r = &b->rows[i];
            if (strcmp(r->section, title[s][0]) != 0) continue;
            if (!any) {
                fprintf(f, "## %s\n\n| model | item | shape | median µs | MB moved | GB/s | %% copy BW | ratio | note |\n"
                           "|---|---|---|---:|---:|---:|---:|---:|---|\n",
                        title[s][1]);
                any = true;
            }
            fprintf(f, "| %s | %s | %s |", r->model, r->item, r->shape);
            put_cell(f, r->us, "%.2f");
            put_cell(f, r->bytes / 1e6, "%.2f");
            put_cell(f, r->gbs, "%.1f");
            put_cell(f, r->pct, "%.1f");
            put_cell(f, r->ratio, "%.2f");
            fprintf(f, " %s |\n", r->note);
        }
        if (any) fputc('\n', f);
    }
}

/* JSON / CSV strings: ours hold no control characters; quotes are escaped. */
static void put_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void put_csv_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static ms_status write_file(const char *path, const bench *b, bool json) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) MS_FAIL(MS_ERR_NOMEM, "%s: open_memstream failed", path);
    if (json) {
        fputs("{\"tool\": \"" TOOL "\", \"device\": ", f);
        put_json_str(f, b->device);
        fprintf(f, ", \"dtype\": \"%s\", \"reps\": %d, \"warmup\": %d, \"copy_bandwidth_gbs\": ", ms_dtype_name(b->act),
                b->reps, b->warmup);
        put_num(f, b->copy_gbs, "%.3f");
        fputs(",\n \"note\": \"section round uses random weights\",\n \"rows\": [\n", f);
        for (int64_t i = 0; i < b->n_rows; i++) {
            const row *r = &b->rows[i];
            fputs("  {\"section\": ", f);
            put_json_str(f, r->section);
            fputs(", \"model\": ", f);
            put_json_str(f, r->model);
            fputs(", \"item\": ", f);
            put_json_str(f, r->item);
            fputs(", \"shape\": ", f);
            put_json_str(f, r->shape);
            fputs(", \"median_us\": ", f);
            put_num(f, r->us, "%.3f");
            fputs(", \"bytes\": ", f);
            put_num(f, r->bytes, "%.0f");
            fputs(", \"gb_per_s\": ", f);
            put_num(f, r->gbs, "%.3f");
            fputs(", \"pct_copy_bw\": ", f);
            put_num(f, r->pct, "%.2f");
            fputs(", \"ratio\": ", f);
            put_num(f, r->ratio, "%.4f");
            fputs(", \"note\": ", f);
            put_json_str(f, r->note);
            fputs(i + 1 < b->n_rows ? "},\n" : "}\n", f);
        }
        fputs(" ]\n}\n", f);
    } else {
        fputs("section,model,item,shape,median_us,bytes,gb_per_s,pct_copy_bw,ratio,note\n", f);
        for (int64_t i = 0; i < b->n_rows; i++) {
            const row *r = &b->rows[i];
            put_csv_str(f, r->section);
            fputc(',', f);
            put_csv_str(f, r->model);
            fputc(',', f);
            put_csv_str(f, r->item);
            fputc(',', f);
            put_csv_str(f, r->shape);
            const double v[5] = {r->us, r->bytes, r->gbs, r->pct, r->ratio};
            for (int j = 0; j < 5; j++) {
                fputc(',', f);
                if (!isnan(v[j]) && !isinf(v[j])) fprintf(f, "%.4f", v[j]);
            }
            fputc(',', f);
            put_csv_str(f, r->note);
            fputc('\n', f);
        }
    }
    if (fclose(f) != 0) {
        free(buf);
        MS_FAIL(MS_ERR_IO, "%s: formatting failed", path);
    }
    ms_status st = ms_write_file_atomic(path, buf, len);
    free(buf);
    return st;
}

/* ---- main ------------------------------------------------------------------------------------------ */

static void usage(FILE *f) {
    fprintf(f,
            "usage: " TOOL " [--out PREFIX] [--reps N] [--dtype bf16|f16] [--only a|b|c]\n"
            "\n"
            "Measures on CUDA device 0, with CUDA events (median of N reps after warm-up):\n"
            "  (a) device copy bandwidth and every op of the table at Llama-3-8B shapes;\n"
            "  (b) the draft LM head (full, static 32768, dynamic 3072 gathered / indexed)\n"
            "      at Llama-3-8B, Llama-3.2-1B and Qwen2-7B shapes, per step and per round;\n"
            "  (c) one speculative round with RANDOM WEIGHTS per vocabulary mode.\n"
            "Prints a Markdown table on stdout; progress on stderr.\n"
            "\n"
            "  -o, --out PREFIX   also write PREFIX.json and PREFIX.csv (atomically)\n"
            "  -r, --reps N       timed repetitions (default 20, 1..1000)\n"
            "  -t, --dtype T      activation/weight dtype: bf16 (default) or f16\n"
            "      --only S       run only section a, b or c ((c) includes (b)'s setup)\n"
            "  -h, --help         this text\n"
            "Exit status: 0 ok, 1 error, 2 no CUDA device.\n");
}

int main(int argc, char **argv) {
    ms_log_set_role(TOOL);
    static const struct option opts[] = {{"out", required_argument, 0, 'o'},  {"reps", required_argument, 0, 'r'},
                                         {"dtype", required_argument, 0, 't'}, {"only", required_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *out = NULL, *only = NULL;
    bench b;
    memset(&b, 0, sizeof b);
    b.reps = 20;
    b.warmup = 3;
    b.act = MS_DTYPE_BF16;
    b.copy_gbs = NAN;
    int c;
    while ((c = getopt_long(argc, argv, "o:r:t:h", opts, NULL)) != -1) {
        int64_t v;
        switch (c) {
        case 'o': out = optarg; break;
        case 'r':
            if (!ms_parse_i64(optarg, 1, 1000, &v)) {
                fprintf(stderr, TOOL ": --reps: '%s' is not in 1..1000\n", optarg);
                return 2; /* usage error */
            }
            b.reps = (int)v;
            break;
        case 't':
            if (strcmp(optarg, "bf16") == 0)
                b.act = MS_DTYPE_BF16;
            else if (strcmp(optarg, "f16") == 0)
                b.act = MS_DTYPE_F16;
            else {
                fprintf(stderr, TOOL ": --dtype: '%s' is not bf16 or f16\n", optarg);
                return 2; /* usage error */
            }
            break;
        case 's':
            if (strcmp(optarg, "a") != 0 && strcmp(optarg, "b") != 0 && strcmp(optarg, "c") != 0) {
                fprintf(stderr, TOOL ": --only: '%s' is not a, b or c\n", optarg);
                return 2; /* usage error */
            }
            only = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2; /* usage error */
        }
    }
    if (optind < argc) {
        fprintf(stderr, TOOL ": unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2; /* usage error */
    }
    if (ms_k_cuda_device_count() == 0) {
        fprintf(stderr, TOOL ": no CUDA device\n");
        return 2;
    }
    if (ms_k_cuda_device_info(0, b.device, sizeof b.device) != MS_OK) return 1;
    fprintf(stderr, TOOL ": %s, %s, %d reps after %d warm-up\n", b.device, ms_dtype_name(b.act), b.reps, b.warmup);
    ms_status st = MS_OK;
    if (cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&b.copy, cudaStreamNonBlocking) != cudaSuccess) {
        fprintf(stderr, TOOL ": cannot create streams\n");
        return 1;
    }
    b.ops = ms_k_cuda_ops(b.act, b.stream);
    b.ev = calloc((size_t)(2 * b.reps), sizeof(cudaEvent_t));
    b.times = calloc((size_t)b.reps, sizeof(float));
    if (!b.ops || !b.ev || !b.times) st = MS_ERR_NOMEM;
    for (int i = 0; i < 2 * b.reps && st == MS_OK; i++)
        if (cudaEventCreate(&b.ev[i]) != cudaSuccess) st = MS_ERR_INTERNAL;
    if (st == MS_OK && (!only || strcmp(only, "a") == 0)) st = section_ops(&b);
    for (size_t mi = 0; mi < sizeof MODELS / sizeof MODELS[0] && st == MS_OK && (!only || strcmp(only, "a") != 0);
         mi++) {
        const model_shape *m = &MODELS[mi];
        fprintf(stderr, TOOL ": (b/c) %s: d %lld, V %lld\n", m->name, (long long)m->d, (long long)m->V);
        pool pl = {0};
        head hd;
        st = head_setup(&b, &pl, m, &hd);
        if (st == MS_OK && (!only || strcmp(only, "b") == 0)) st = section_head(&b, m, &hd);
        if (st == MS_OK && (!only || strcmp(only, "c") == 0)) st = section_round(&b, &pl, m, &hd);
        if (st == MS_OK) st = ms_k_cuda_sync(b.ops);
        ms_k_cuda_vocab_free(&hd.win);
        pool_free(&pl);
    }
    if (st == MS_OK) {
        write_markdown(&b, stdout);
        fflush(stdout);
    }
    if (st == MS_OK && out) {
        char path[4096];
        snprintf(path, sizeof path, "%s.json", out);
        st = write_file(path, &b, true);
        if (st == MS_OK) {
            snprintf(path, sizeof path, "%s.csv", out);
            st = write_file(path, &b, false);
        }
        if (st == MS_OK) fprintf(stderr, TOOL ": wrote %s.json and %s.csv\n", out, out);
    }
    for (int i = 0; i < 2 * b.reps && b.ev; i++)
        if (b.ev[i]) cudaEventDestroy(b.ev[i]);
    ms_k_cuda_ops_destroy(&b.ops);
    cudaStreamDestroy(b.stream);
    cudaStreamDestroy(b.copy);
    free(b.ev);
    free(b.times);
    free(b.rows);
    if (st != MS_OK) fprintf(stderr, TOOL ": failed: %s\n", ms_status_str(st));
    return st == MS_OK ? 0 : 1;
}
