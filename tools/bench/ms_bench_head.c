/* ms_bench_head.c — the draft LM head at real shapes (ms_bench_head.h).
 *
 * One draft step = what ms_draft.c's head_host does for one head call on a
 * GGUF model: quantize the n hidden rows (ms_q8_quantize) and run
 * ms_qdot_linear over an ms_qweight view of the vocabulary's rows
 * (ms_vocab_logits_q). The rows are the head's own blocks:
 *
 *  - full:    the head as stored (V rows, no copy);
 *  - static:  32,768 rows packed once (FR-Spec list size); random distinct ids;
 *  - dynamic: a MicroSpec window of W_max rows. Each timed step first applies
 *    one whole round's stream update (ms_vocab_append_round, docs/architecture.md §5): the
 *    distinct ids of a 60-node tree (the default EAGLE-2 total) then C_ver of
 *    a 5-node accepted path × K_ver = 3, all drawn at random from [0, V) so
 *    nearly every one is new: ~75 rows gathered (row_bytes each, copied as
 *    stored) and ~75 leavers swap-removed. A real round runs depth + 1 head
 *    calls per update, so charging a whole update to every step overstates
 *    the gather several times over.
 *
 * The hidden rows are the model's own final-norm states of 4 tokens. Each
 * configuration runs 3 untimed steps, then `reps` timed ones; the table gives
 * the median. */
#include "ms_bench_head.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_kernels.h"
#include "ms_model.h"
#include "ms_pool.h"
#include "ms_qdot.h"
#include "ms_vocab.h"

enum {
    STATIC_K = 32768,
    TREE_N = 60,   /* tree nodes a round (ms_tree_params_default total) */
    PATH_N = 5,    /* accepted path length */
    K_VER = 3,     /* docs/architecture.md §5 default */
    ROUND_IDS = TREE_N + PATH_N * K_VER,
    WARMUP = 3,
    MAX_ROWS = 4,
};
static const int64_t k_windows[] = {1024, 2048, 3072, 4096};
enum { N_WIN = sizeof k_windows / sizeof *k_windows };

typedef struct {
    const char *name;
    int64_t rows;      /* |rows| at the end */
    double gathered;   /* rows gathered per step (dynamic) */
    double ms[2];      /* median ms per step, 1 and 4 hidden rows */
    double upd_ms[2];  /* median ms of the window update inside the step */
} result;

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double median_ms(uint64_t *ns, int n) {
    qsort(ns, (size_t)n, sizeof *ns, cmp_u64);
    const uint64_t m = n % 2 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2;
    return (double)m / 1e6;
}

typedef struct {
    const float *hid; /* [MAX_ROWS, d] */
    int64_t d;
    ms_q8_act xq;
    float *logits;    /* [MAX_ROWS, V] */
    int reps;
    uint64_t *t_step, *t_upd; /* [reps] */
    int32_t *round_ids;       /* [(WARMUP + reps) · 2 · ROUND_IDS] pre-drawn dynamic rounds */
} bench;

/* One draft step: the window update of `round` (dynamic; round < 0: none),
 * then the head over the rows for n hidden rows. Returns ns of the update. */
static uint64_t step(bench *b, ms_vocab *v, int round, int64_t n, uint64_t *total_ns) {
    const uint64_t t0 = ms_now_ns();
    if (round >= 0) {
        const int32_t *r = b->round_ids + (size_t)round * ROUND_IDS;
        ms_status s = ms_vocab_append_round(v, r, TREE_N, r + TREE_N, PATH_N, K_VER);
        MS_ASSERT(s == MS_OK); /* ids drawn in [0, V) here */
    }
    const uint64_t t1 = ms_now_ns();
    ms_q8_quantize(&b->xq, b->hid, n, b->d);
    ms_vocab_logits_q(v, NULL, &b->xq, n, b->logits);
    *total_ns = ms_now_ns() - t0;
    return t1 - t0;
}

/* Time `b->reps` steps for 1 and 4 rows; dynamic windows take a fresh round
 * each step (2 · (WARMUP + reps) rounds pre-drawn). */
static void run(bench *b, ms_vocab *v, bool dynamic, const char *name, result *res) {
    int round = 0;
    const ms_vocab_counters c0 = ms_vocab_counters_get(v);
    for (int p = 0; p < 2; p++) {
        const int64_t n = p ? MAX_ROWS : 1;
        uint64_t tot;
        for (int i = 0; i < WARMUP; i++) step(b, v, dynamic ? round++ : -1, n, &tot);
        for (int i = 0; i < b->reps; i++) {
            b->t_upd[i] = step(b, v, dynamic ? round++ : -1, n, &tot);
            b->t_step[i] = tot;
        }
        res->ms[p] = median_ms(b->t_step, b->reps);
        res->upd_ms[p] = median_ms(b->t_upd, b->reps);
    }
    const ms_vocab_counters c1 = ms_vocab_counters_get(v);
    res->name = name;
    res->rows = ms_vocab_size(v);
    res->gathered = dynamic && round > 0 ? (double)(c1.gathered - c0.gathered) / round : 0.0;
}

/* Distinct random ids in [0, V) (a partial Fisher–Yates over a scratch [V]). */
static ms_status distinct_ids(ms_rng *r, int64_t V, int64_t k, int32_t *out) {
    int32_t *perm = ms_malloc((size_t)V * sizeof *perm);
    if (!perm) return MS_ERR_NOMEM;
    for (int64_t i = 0; i < V; i++) perm[i] = (int32_t)i;
    for (int64_t i = 0; i < k; i++) {
        const int64_t j = i + (int64_t)(ms_rng_u64(r) % (uint64_t)(V - i));
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        out[i] = perm[i];
    }
    free(perm);
    return MS_OK;
}

ms_status ms_bench_head(const char *gguf_path, int threads, int reps, FILE *out) {
    if (threads < 1 || reps < 1)
        MS_FAIL(MS_ERR_INVALID, "bench head: threads %d and reps %d must be ≥ 1", threads, reps);
    ms_k_cpu_set_threads(threads);
    usleep(200000); /* let new pool workers start before the first job (see tests/test_qdot.c) */
    ms_model *m = NULL;
    ms_vocab *v = NULL;
    bench b = {.reps = reps};
    int32_t *ids = NULL;
    float *fwd = NULL;
    result res[2 + N_WIN];
    int n_res = 0;
    ms_status s = MS_OK;
    const ms_model_opts mo = {.max_ctx = 64, .max_batch = 8, .q8_matmul = 1}; /* as a draft loads */
    MS_TRY_GOTO(s, ms_model_load(gguf_path, &mo, &m), done);
    const ms_qweight *W = ms_model_lm_head_q(m);
    if (!W) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "bench head: %s is not a GGUF model (no typed head)", gguf_path);
        s = MS_ERR_INVALID;
        goto done;
    }
    const int64_t V = W->m, d = W->k;
    b.d = d;
    if (V < STATIC_K + 4096 || d % MS_Q8_BLOCK != 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__,
                   "bench head: head [%lld, %lld] too small or d not a multiple of 32", (long long)V, (long long)d);
        s = MS_ERR_INVALID;
        goto done;
    }
    /* the model's own hidden states of 4 tokens */
    const int32_t toks[MAX_ROWS] = {2, (int32_t)(1000 % V), (int32_t)(4242 % V), (int32_t)(31337 % V)};
    fwd = ms_malloc((size_t)(MAX_ROWS * V) * sizeof(float));
    b.logits = ms_malloc((size_t)(MAX_ROWS * V) * sizeof(float));
    b.t_step = ms_malloc((size_t)reps * sizeof(uint64_t));
    b.t_upd = ms_malloc((size_t)reps * sizeof(uint64_t));
    const size_t n_round_ids = (size_t)(2 * (WARMUP + reps)) * ROUND_IDS;
    b.round_ids = ms_malloc(n_round_ids * sizeof(int32_t));
    ids = ms_malloc((size_t)STATIC_K * sizeof(int32_t));
    if (!fwd || !b.logits || !b.t_step || !b.t_upd || !b.round_ids || !ids) {
        s = MS_ERR_NOMEM;
        goto done;
    }
    MS_TRY_GOTO(s, ms_model_forward(m, toks, MAX_ROWS, NULL, NULL, MS_LOGITS_ALL, fwd), done);
    b.hid = ms_model_hidden(m);
    MS_TRY_GOTO(s, ms_q8_act_alloc(&b.xq, MAX_ROWS, d), done);
    ms_rng r;
    ms_rng_seed(&r, 13);
    for (size_t i = 0; i < n_round_ids; i++) b.round_ids[i] = (int32_t)(ms_rng_u64(&r) % (uint64_t)V);

    MS_TRY_GOTO(s, ms_vocab_new_full_q(W, &v), done);
    run(&b, v, false, "full", &res[n_res++]);
    ms_vocab_free(&v);

    MS_TRY_GOTO(s, distinct_ids(&r, V, STATIC_K, ids), done);
    MS_TRY_GOTO(s, ms_vocab_new_static_q(W, ids, STATIC_K, &v), done);
    run(&b, v, false, "static", &res[n_res++]);
    ms_vocab_free(&v);

    for (int w = 0; w < N_WIN; w++) {
        MS_TRY_GOTO(s, ms_vocab_new_dynamic_q(W, k_windows[w], &v), done);
        /* a full window to start: W_max distinct ids */
        MS_TRY_GOTO(s, distinct_ids(&r, V, k_windows[w], ids), done);
        MS_TRY_GOTO(s, ms_vocab_append(v, ids, k_windows[w]), done);
        run(&b, v, true, "dynamic", &res[n_res++]);
        ms_vocab_free(&v);
    }

    fprintf(out, "\n### Draft LM head per step: %s\n\n", gguf_path);
    fprintf(out, "Head %lld x %lld %s (%zu bytes a row), 8-bit activations (qdot path %s), %d thread%s, "
                 "median of %d steps.\n",
            (long long)V, (long long)d, ms_dtype_name(W->dtype), W->row_bytes, ms_qdot_path(W->dtype), threads,
            threads == 1 ? "" : "s", reps);
    fprintf(out, "Dynamic steps include one round's window update (gather + swap-remove; `update` column).\n\n");
    fprintf(out, "| head | rows | rows gathered / step | 1 row: ms / step | speedup | update ms | "
                 "4 rows: ms / step | speedup | update ms |\n");
    fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n_res; i++) {
        const result *x = &res[i];
        fprintf(out, "| %s | %lld | %.1f | %.3f | %.1fx | %.4f | %.3f | %.1fx | %.4f |\n", x->name, (long long)x->rows,
                x->gathered, x->ms[0], res[0].ms[0] / x->ms[0], x->upd_ms[0], x->ms[1], res[0].ms[1] / x->ms[1],
                x->upd_ms[1]);
    }
    fflush(out);
done:
    ms_vocab_free(&v);
    ms_q8_act_free(&b.xq);
    free(b.logits);
    free(b.t_step);
    free(b.t_upd);
    free(b.round_ids);
    free(ids);
    free(fwd);
    ms_model_free(&m);
    return s;
}
