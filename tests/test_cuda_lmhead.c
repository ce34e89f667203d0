/* test_cuda_lmhead.c — the device draft LM head (kernels/cuda/ms_k_cuda_lmhead.cu)
 * against a plain C reference in double, for every vocabulary mode.
 *
 * For BF16 and F16 and two row widths (d = 67: the 2-byte load path; d = 136:
 * the 16-byte path of the indexed kernel), a seeded head W [V = 1001, d] and
 * query rows h [n, d] (n = 1, 4, 11, and 16 for the indexed kernel's limit)
 * are rounded to the act dtype, and:
 *   - full:    logits over all V rows;
 *   - static:  K = 97 distinct ids; the setup gather must equal W[ids[j]] byte
 *              for byte; logits over the K rows; slots → ids through the list;
 *   - dynamic: a ms_k_cuda_vocab window (W_max = 97) fed real appends (plain
 *              and distinct, skewed ids) next to the CPU twin ms_vocab. After
 *              each round: `packed` (the gathered rows) and `indexed` logits;
 *              slot s < |I| must equal h · W[CPU id_at(s)], slots in [|I|,
 *              W_max) must be −∞; packed and indexed must agree; top-k slots
 *              (k = 8, some rounds with |I| < k) and values equal ms_k_topk
 *              over the same downloaded logits (ties to the lower slot) and
 *              slots_to_ids equals the CPU window's ids (−1 past |I|). The
 *              round functions and the heads add no host sync of the window.
 * Every output sits between guard bytes and is NaN-poisoned (0xFF) first;
 * the columns between m and the row stride ld must keep the poison (never
 * written). Tolerance: products of two act values are exact in f32, so
 * only the f32 summation order differs from the double reference:
 *     |gpu − ref| ≤ 1e-5 · Σ_k |h_k · w_k| + 1e-30
 * (d ≤ 136 terms, f32 eps 6e-8: ≥ 10× margin). A wrong row, column or id
 * moves a logit by O(rms · sqrt(d)), far above it. NaN never passes.
 *
 * Without a CUDA device the host-only argument checks run, then
 * "SKIPPED: no CUDA device" and exit 77 (ctest: skipped, never passed).
 */
#include "ms_k_cuda.h"
#include "ms_k_cuda_lmhead.h"
#include "ms_kernels.h"
#include "ms_vocab.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

static void need(ms_status s, const char *what) {
    if (s != MS_OK) {
        fprintf(stderr, "FAIL: %s: %s\n", what, ms_status_str(s));
        exit(1);
    }
}

static void need_cuda(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "FAIL: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "FAIL: out of host memory\n");
        exit(1);
    }
    return p;
}

/* ---- guarded, poisoned device buffers ------------------------------------------ */

#define GUARD 64 /* elements each side */
#define GUARD_BYTE 0xA5
#define POISON_BYTE 0xFF

typedef struct {
    unsigned char *dev;
    int64_t n;
    size_t es;
} dbuf;

static void *dptr(const dbuf *b) { return b->dev + GUARD * b->es; }

static dbuf dbuf_make(int64_t n, size_t es, const void *init) {
    dbuf b = {NULL, n, es};
    const size_t bytes = (size_t)(n + 2 * GUARD) * es;
    unsigned char *h = xmalloc(bytes);
    memset(h, GUARD_BYTE, bytes);
    if (init)
        memcpy(h + GUARD * es, init, (size_t)n * es);
    else
        memset(h + GUARD * es, POISON_BYTE, (size_t)n * es);
    need(ms_k_cuda_malloc((void **)&b.dev, bytes), "cuda malloc");
    need(ms_k_cuda_upload(NULL, b.dev, h, bytes), "cuda upload");
    free(h);
    return b;
}

/* Re-poison the interior (keeps the guards). */
static void dbuf_poison(const dbuf *b) {
    const size_t bytes = (size_t)b->n * b->es;
    unsigned char *h = xmalloc(bytes);
    memset(h, POISON_BYTE, bytes);
    need(ms_k_cuda_upload(NULL, dptr(b), h, bytes), "cuda upload");
    free(h);
}

/* Interior into out; both guards must be intact. */
static void dbuf_read(const char *what, const dbuf *b, void *out) {
    const size_t bytes = (size_t)(b->n + 2 * GUARD) * b->es;
    unsigned char *h = xmalloc(bytes);
    need(ms_k_cuda_download(NULL, h, b->dev, bytes), "cuda download");
    int64_t bad = 0;
    for (size_t i = 0; i < GUARD * b->es; i++) bad += (h[i] != GUARD_BYTE) + (h[bytes - 1 - i] != GUARD_BYTE);
    CHECK(bad == 0, "%s: %lld guard bytes overwritten", what, (long long)bad);
    memcpy(out, h + GUARD * b->es, (size_t)b->n * b->es);
    free(h);
}

static void dbuf_free(dbuf *b) { ms_k_cuda_free((void **)&b->dev); }

static bool is_poison(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u == 0xFFFFFFFFu;
}

/* ---- reference ------------------------------------------------------------------------ */

typedef struct {
    ms_dtype act;
    int64_t V, d;
    float *W;      /* host [V, d], values already rounded to act */
    uint16_t *Wa;  /* the act bits */
    void *dW;      /* device [V, d] act */
    const ms_k_ops *ops;
    void *compute, *copy;
    ms_rng rng;
} env;

/* Checks logits [n, ld] against h · W[id_of(j)] for j < m (id −1: −∞),
 * columns [m, ld) still poisoned. */
static void check_logits(const char *what, const env *e, const float *got, int64_t ld, const float *h, int64_t n,
                         int64_t m, const int32_t *ids) {
    int64_t bad = 0, bad_inf = 0, bad_pad = 0;
    double worst = 0;
    for (int64_t r = 0; r < n; r++) {
        for (int64_t j = 0; j < m; j++) {
            const float g = got[r * ld + j];
            const int32_t id = ids[j];
            if (id < 0) {
                bad_inf += !(isinf(g) && g < 0);
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < e->d; k++) {
                const double p = (double)h[r * e->d + k] * (double)e->W[(int64_t)id * e->d + k];
                ref += p;
                mag += fabs(p);
            }
            const double err = fabs((double)g - ref), tol = 1e-5 * mag + 1e-30;
            if (!(err <= tol)) { /* NaN fails */
                if (bad < 3)
                    fprintf(stderr, "  %s: row %lld col %lld (id %d): gpu %.9g ref %.9g\n", what, (long long)r,
                            (long long)j, id, (double)g, ref);
                bad++;
            }
            if (mag > 0 && err / mag > worst) worst = err / mag;
        }
        for (int64_t j = m; j < ld; j++) bad_pad += !is_poison(got[r * ld + j]);
    }
    CHECK(bad == 0, "%s: %lld of %lld logits off (worst rel %.3g)", what, (long long)bad, (long long)(n * m), worst);
    CHECK(bad_inf == 0, "%s: %lld masked logits not -inf", what, (long long)bad_inf);
    CHECK(bad_pad == 0, "%s: %lld padding columns written", what, (long long)bad_pad);
}

/* Random act-rounded values in [-1, 1). */
static void fill_act(env *e, float *x, uint16_t *bits, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(2.0 * ms_rng_uniform(&e->rng) - 1.0);
    ms_convert_from_f32(bits, e->act, x, n);
    ms_convert_to_f32(x, bits, e->act, n);
}

/* Top-k of the downloaded logits rows on the CPU vs the device's. */
static void check_topk(const char *what, const env *e, const float *logits, int64_t ld, int64_t n, int64_t m,
                       int64_t k, const dbuf *d_idx, const dbuf *d_val) {
    int32_t *gi = xmalloc((size_t)(n * k) * sizeof(int32_t)), ci[MS_K_CUDA_TOPK_MAX];
    float *gv = xmalloc((size_t)(n * k) * sizeof(float)), cv[MS_K_CUDA_TOPK_MAX];
    dbuf_read(what, d_idx, gi);
    dbuf_read(what, d_val, gv);
    int64_t bad = 0;
    for (int64_t r = 0; r < n; r++) {
        ms_k_topk(logits + r * ld, m, k, ci, cv);
        for (int64_t j = 0; j < k; j++)
            bad += gi[r * k + j] != ci[j] || memcmp(&gv[r * k + j], &cv[j], sizeof(float)) != 0;
    }
    CHECK(bad == 0, "%s: %lld top-k entries differ from ms_k_topk", what, (long long)bad);
    (void)e;
    free(gi);
    free(gv);
}

/* ---- full and static ---------------------------------------------------------------------- */

static void test_full_static(env *e, const float *h, const dbuf *dh, int64_t n) {
    char what[96];
    /* full: every row of W, a row stride with padding */
    const int64_t ld = e->V + 3;
    dbuf lg = dbuf_make(n * ld, sizeof(float), NULL);
    float *got = xmalloc((size_t)(n * ld) * sizeof(float));
    int32_t *ids = xmalloc((size_t)e->V * sizeof(int32_t));
    for (int64_t j = 0; j < e->V; j++) ids[j] = (int32_t)j;
    need(ms_k_cuda_lmhead_dense(e->ops, dptr(&lg), ld, dptr(dh), e->dW, n, e->V, e->d), "dense full");
    need(ms_k_cuda_sync(e->ops), "sync");
    snprintf(what, sizeof what, "full %s d=%lld n=%lld", ms_dtype_name(e->act), (long long)e->d, (long long)n);
    dbuf_read(what, &lg, got);
    check_logits(what, e, got, ld, h, n, e->V, ids);

    /* top-k over the full row and the identity slot map */
    const int64_t k = 8;
    dbuf d_idx = dbuf_make(n * k, sizeof(int32_t), NULL), d_val = dbuf_make(n * k, sizeof(float), NULL);
    dbuf d_tok = dbuf_make(n * k, sizeof(int32_t), NULL);
    need(ms_k_cuda_topk_rows(e->ops, dptr(&d_idx), dptr(&d_val), dptr(&lg), n, e->V, ld, k), "topk");
    need(ms_k_cuda_slots_to_ids(e->ops, dptr(&d_tok), dptr(&d_idx), n * k, NULL, e->V, NULL), "slots to ids");
    need(ms_k_cuda_sync(e->ops), "sync");
    check_topk(what, e, got, ld, n, e->V, k, &d_idx, &d_val);
    {
        int32_t *a = xmalloc((size_t)(n * k) * sizeof(int32_t)), *b = xmalloc((size_t)(n * k) * sizeof(int32_t));
        dbuf_read(what, &d_idx, a);
        dbuf_read(what, &d_tok, b);
        CHECK(memcmp(a, b, (size_t)(n * k) * sizeof(int32_t)) == 0, "%s: identity slot map changed ids", what);
        free(a);
        free(b);
    }
    dbuf_free(&d_tok);
    dbuf_free(&lg);
    free(got);

    /* static: K distinct ids (a seeded permutation prefix) */
    const int64_t K = 97, lds = K + 1;
    for (int64_t j = e->V - 1; j > 0; j--) {
        const int64_t o = (int64_t)(ms_rng_u64(&e->rng) % (uint64_t)(j + 1));
        const int32_t t = ids[j];
        ids[j] = ids[o];
        ids[o] = t;
    }
    void *rows = NULL;
    int32_t *d_ids = NULL;
    need(ms_k_cuda_static_rows_new(e->ops, e->dW, e->V, e->d, ids, K, &rows, &d_ids), "static rows");
    uint16_t *hr = xmalloc((size_t)(K * e->d) * 2);
    need(ms_k_cuda_download(e->ops, hr, rows, (size_t)(K * e->d) * 2), "download rows");
    int64_t bad_rows = 0;
    for (int64_t j = 0; j < K; j++)
        bad_rows += memcmp(hr + j * e->d, e->Wa + (int64_t)ids[j] * e->d, (size_t)e->d * 2) != 0;
    CHECK(bad_rows == 0, "static rows: %lld of %lld rows differ from W[id]", (long long)bad_rows, (long long)K);
    free(hr);
    lg = dbuf_make(n * lds, sizeof(float), NULL);
    got = xmalloc((size_t)(n * lds) * sizeof(float));
    need(ms_k_cuda_lmhead_dense(e->ops, dptr(&lg), lds, dptr(dh), rows, n, K, e->d), "dense static");
    d_tok = dbuf_make(n * k, sizeof(int32_t), NULL);
    need(ms_k_cuda_topk_rows(e->ops, dptr(&d_idx), dptr(&d_val), dptr(&lg), n, K, lds, k), "topk");
    need(ms_k_cuda_slots_to_ids(e->ops, dptr(&d_tok), dptr(&d_idx), n * k, d_ids, K, NULL), "slots to ids");
    need(ms_k_cuda_sync(e->ops), "sync");
    snprintf(what, sizeof what, "static %s d=%lld n=%lld", ms_dtype_name(e->act), (long long)e->d, (long long)n);
    dbuf_read(what, &lg, got);
    check_logits(what, e, got, lds, h, n, K, ids);
    check_topk(what, e, got, lds, n, K, k, &d_idx, &d_val);
    {
        int32_t *sl = xmalloc((size_t)(n * k) * sizeof(int32_t)), *tk = xmalloc((size_t)(n * k) * sizeof(int32_t));
        dbuf_read(what, &d_idx, sl);
        dbuf_read(what, &d_tok, tk);
        int64_t bad = 0;
        for (int64_t i = 0; i < n * k; i++) bad += tk[i] != ids[sl[i]];
        CHECK(bad == 0, "%s: %lld top-k ids differ from the list's", what, (long long)bad);
        free(sl);
        free(tk);
    }
    ms_k_cuda_free(&rows);
    ms_k_cuda_free((void **)&d_ids);
    dbuf_free(&lg);
    dbuf_free(&d_idx);
    dbuf_free(&d_val);
    dbuf_free(&d_tok);
    free(got);
    free(ids);
}

/* ---- dynamic ------------------------------------------------------------------------------- */

static int32_t draw_id(ms_rng *r, int64_t V) {
    const double u = ms_rng_uniform(r);
    const int64_t id = ms_rng_uniform(r) < 0.8 ? (int64_t)((double)V * u * u * u) : (int64_t)((double)V * u);
    return (int32_t)(id < V ? id : V - 1);
}

static void test_dynamic(env *e, const float *h, const dbuf *dh, int64_t n) {
    const int64_t w_max = 97, ld = w_max + 5, k = 8, rounds = 14;
    char what[128];
    ms_k_cuda_vocab *gv = NULL;
    ms_vocab *cv = NULL;
    need(ms_k_cuda_vocab_new(e->V, w_max, e->d, e->act, e->dW, e->compute, e->copy, &gv), "cuda vocab");
    need(ms_vocab_new_dynamic(NULL, e->V, e->d, w_max, &cv), "cpu vocab");
    const void *rows;
    const int32_t *n_active, *id_of;
    ms_k_cuda_vocab_rows(gv, &rows, &n_active, &id_of);

    dbuf lg_p = dbuf_make(n * ld, sizeof(float), NULL), lg_i = dbuf_make(n * ld, sizeof(float), NULL);
    dbuf d_idx = dbuf_make(n * k, sizeof(int32_t), NULL), d_val = dbuf_make(n * k, sizeof(float), NULL);
    dbuf d_tok = dbuf_make(n * k, sizeof(int32_t), NULL);
    float *gp = xmalloc((size_t)(n * ld) * sizeof(float)), *gi = xmalloc((size_t)(n * ld) * sizeof(float));
    int32_t *ids = xmalloc((size_t)w_max * sizeof(int32_t)), *sl = xmalloc((size_t)(n * k) * sizeof(int32_t)),
            *tk = xmalloc((size_t)(n * k) * sizeof(int32_t));
    const int64_t cap = 3 * w_max;
    int32_t *app = xmalloc((size_t)cap * sizeof(int32_t)), *d_app;
    need(ms_k_cuda_malloc((void **)&d_app, (size_t)cap * sizeof(int32_t)), "malloc ids");

    for (int64_t round = 0; round < rounds && !g_fail; round++) {
        /* Round 0 appends a handful of ids (|I| < k: masked slots reach the
         * top-k); later ones ~60 tree ids + ~12 verify ids, some rounds more
         * than W_max (eviction and swap-remove). */
        const int64_t cnt = round == 0 ? 5 : round % 5 == 4 ? cap : 40 + (int64_t)(ms_rng_u64(&e->rng) % 40);
        const bool distinct = round % 2 == 1;
        for (int64_t i = 0; i < cnt; i++) app[i] = draw_id(&e->rng, e->V);
        need(ms_k_cuda_upload(NULL, d_app, app, (size_t)cnt * sizeof(int32_t)), "upload ids");
        need(distinct ? ms_vocab_append_distinct(cv, app, cnt) : ms_vocab_append(cv, app, cnt), "cpu append");

        dbuf_poison(&lg_p);
        dbuf_poison(&lg_i);
        need(ms_k_cuda_sync(e->ops), "sync"); /* the uploads above ran on the legacy stream */
        const int64_t syncs0 = ms_k_cuda_vocab_host_syncs();
        need(distinct ? ms_k_cuda_vocab_append_distinct(gv, d_app, cnt) : ms_k_cuda_vocab_append(gv, d_app, cnt),
             "append");
        need(ms_k_cuda_vocab_gather(gv), "gather");
        need(ms_k_cuda_lmhead_indexed(e->ops, dptr(&lg_i), ld, dptr(dh), e->dW, e->V, id_of, n_active, n, w_max,
                                      e->d),
             "indexed");
        need(ms_k_cuda_vocab_wait(gv, e->compute), "wait");
        need(ms_k_cuda_lmhead_packed(e->ops, dptr(&lg_p), ld, dptr(dh), rows, n_active, n, w_max, e->d), "packed");
        need(ms_k_cuda_topk_rows(e->ops, dptr(&d_idx), dptr(&d_val), dptr(&lg_p), n, w_max, ld, k), "topk");
        need(ms_k_cuda_slots_to_ids(e->ops, dptr(&d_tok), dptr(&d_idx), n * k, id_of, w_max, n_active),
             "slots to ids");
        CHECK(ms_k_cuda_vocab_host_syncs() == syncs0, "round %lld: %lld host syncs in the round", (long long)round,
              (long long)(ms_k_cuda_vocab_host_syncs() - syncs0));
        need(ms_k_cuda_sync(e->ops), "sync");

        const int64_t na = ms_vocab_size(cv);
        for (int64_t s = 0; s < w_max; s++) ids[s] = s < na ? ms_vocab_id_at(cv, s) : -1;
        snprintf(what, sizeof what, "dynamic %s d=%lld n=%lld round %lld |I|=%lld", ms_dtype_name(e->act),
                 (long long)e->d, (long long)n, (long long)round, (long long)na);
        dbuf_read(what, &lg_p, gp);
        dbuf_read(what, &lg_i, gi);
        check_logits("packed", e, gp, ld, h, n, w_max, ids);
        check_logits("indexed", e, gi, ld, h, n, w_max, ids);
        int64_t bad_pi = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t s = 0; s < na; s++) {
                const float a = gp[r * ld + s], b = gi[r * ld + s];
                bad_pi += !(fabsf(a - b) <= 2e-5f * (fabsf(a) + fabsf(b)) + 1e-4f);
            }
        CHECK(bad_pi == 0, "%s: %lld packed vs indexed logits differ", what, (long long)bad_pi);
        check_topk(what, e, gp, ld, n, w_max, k, &d_idx, &d_val);
        dbuf_read(what, &d_idx, sl);
        dbuf_read(what, &d_tok, tk);
        int64_t bad_tok = 0, masked = 0;
        for (int64_t i = 0; i < n * k; i++) {
            const int32_t want = sl[i] >= 0 && sl[i] < na ? ids[sl[i]] : -1;
            bad_tok += tk[i] != want;
            masked += sl[i] >= na;
        }
        CHECK(bad_tok == 0, "%s: %lld top-k ids differ from the CPU window's", what, (long long)bad_tok);
        CHECK((na < k) == (masked > 0), "%s: %lld masked slots in the top-%lld", what, (long long)masked, (long long)k);
        if (g_fail) fprintf(stderr, "  at %s\n", what);
    }
    ms_k_cuda_vocab_free(&gv);
    ms_vocab_free(&cv);
    ms_k_cuda_free((void **)&d_app);
    dbuf_free(&lg_p);
    dbuf_free(&lg_i);
    dbuf_free(&d_idx);
    dbuf_free(&d_val);
    dbuf_free(&d_tok);
    free(gp);
    free(gi);
    free(ids);
    free(sl);
    free(tk);
    free(app);
}

/* A slot whose id_of entry is out of range: −∞ and a device flag (MS_ERR_RANGE). */
static void test_indexed_bad_id(env *e, const dbuf *dh) {
    const int64_t w_max = 5, ld = 5;
    const int32_t id_of[5] = {3, (int32_t)e->V, 7, -2, 1}, na = 4;
    dbuf d_id = dbuf_make(5, sizeof(int32_t), id_of), d_na = dbuf_make(1, sizeof(int32_t), &na);
    dbuf lg = dbuf_make(ld, sizeof(float), NULL);
    need(ms_k_cuda_lmhead_indexed(e->ops, dptr(&lg), ld, dptr(dh), e->dW, e->V, dptr(&d_id), dptr(&d_na), 1, w_max,
                                  e->d),
         "indexed");
    const ms_log_level lvl = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    const ms_status st = ms_k_cuda_sync(e->ops);
    ms_log_set_level(lvl);
    CHECK(st == MS_ERR_RANGE, "bad id_of entry not reported (%s)", ms_status_str(st));
    need(ms_k_cuda_sync(e->ops), "flags cleared");
    float got[5];
    dbuf_read("indexed bad id", &lg, got);
    CHECK(isinf(got[1]) && got[1] < 0 && isinf(got[3]) && got[3] < 0 && isinf(got[4]) && got[4] < 0,
          "bad / inactive slots not -inf: %g %g %g", (double)got[1], (double)got[3], (double)got[4]);
    CHECK(isfinite(got[0]) && isfinite(got[2]), "good slots not finite: %g %g", (double)got[0], (double)got[2]);
    dbuf_free(&d_id);
    dbuf_free(&d_na);
    dbuf_free(&lg);
}

static void run_env(ms_dtype act, int64_t d, uint64_t seed) {
    env e = {.act = act, .V = 1001, .d = d};
    ms_rng_seed(&e.rng, seed);
    printf("%s d=%lld V=%lld\n", ms_dtype_name(act), (long long)d, (long long)e.V);
    need_cuda(cudaStreamCreateWithFlags((cudaStream_t *)&e.compute, cudaStreamNonBlocking), "stream");
    need_cuda(cudaStreamCreateWithFlags((cudaStream_t *)&e.copy, cudaStreamNonBlocking), "stream");
    e.ops = ms_k_cuda_ops(act, e.compute);
    if (!e.ops) {
        fprintf(stderr, "FAIL: cuda ops\n");
        exit(1);
    }
    const int64_t wn = e.V * d;
    e.W = xmalloc((size_t)wn * sizeof(float));
    e.Wa = xmalloc((size_t)wn * 2);
    fill_act(&e, e.W, e.Wa, wn);
    need(ms_k_cuda_malloc(&e.dW, (size_t)wn * 2), "malloc W");
    need(ms_k_cuda_upload(NULL, e.dW, e.Wa, (size_t)wn * 2), "upload W");

    static const int64_t ns[] = {1, 4, 11, 16};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0] && !g_fail; i++) {
        const int64_t n = ns[i];
        float *h = xmalloc((size_t)(n * d) * sizeof(float));
        uint16_t *ha = xmalloc((size_t)(n * d) * 2);
        fill_act(&e, h, ha, n * d);
        dbuf dh = dbuf_make(n * d, 2, ha);
        if (n <= 11) test_full_static(&e, h, &dh, n);
        test_dynamic(&e, h, &dh, n);
        if (n == 1) test_indexed_bad_id(&e, &dh);
        dbuf_free(&dh);
        free(h);
        free(ha);
    }
    ms_k_cuda_free(&e.dW);
    ms_k_cuda_ops_destroy(&e.ops);
    need_cuda(cudaStreamDestroy((cudaStream_t)e.compute), "stream destroy");
    need_cuda(cudaStreamDestroy((cudaStream_t)e.copy), "stream destroy");
    free(e.W);
    free(e.Wa);
}

/* Argument checks that fail before the table or any CUDA call is touched. */
static void test_bad_args(void) {
    const ms_log_level lvl = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    float lg[4];
    int32_t i4[4] = {0, 1, 2, 3};
    int dummy;
    CHECK(ms_k_cuda_lmhead_dense(NULL, lg, 3, &dummy, &dummy, 1, 4, 2) == MS_ERR_INVALID, "ld < m");
    CHECK(ms_k_cuda_lmhead_dense(NULL, lg, 4, &dummy, &dummy, 1, 4, 0) == MS_ERR_INVALID, "d = 0");
    CHECK(ms_k_cuda_lmhead_dense(NULL, lg, 4, NULL, &dummy, 1, 4, 2) == MS_ERR_INVALID, "no h");
    CHECK(ms_k_cuda_lmhead_dense(NULL, NULL, 4, NULL, NULL, 0, 4, 2) == MS_OK, "n = 0 is a no-op");
    CHECK(ms_k_cuda_lmhead_mask(NULL, lg, 4, 1, 4, NULL) == MS_ERR_INVALID, "mask without a count");
    CHECK(ms_k_cuda_lmhead_indexed(NULL, lg, 4, &dummy, &dummy, 8, i4, i4, 17, 4, 2) == MS_ERR_INVALID, "n > 16");
    CHECK(ms_k_cuda_lmhead_indexed(NULL, lg, 4, &dummy, &dummy, 8, i4, i4, 0, 4, 2) == MS_ERR_INVALID, "n = 0");
    CHECK(ms_k_cuda_lmhead_indexed(NULL, lg, 3, &dummy, &dummy, 8, i4, i4, 1, 4, 2) == MS_ERR_INVALID, "ld < W_max");
    void *rows = &dummy;
    int32_t *dids = i4;
    const int32_t bad[2] = {1, 9};
    CHECK(ms_k_cuda_static_rows_new(NULL, &dummy, 8, 2, bad, 2, &rows, &dids) == MS_ERR_INVALID && !rows && !dids,
          "static id out of range");
    CHECK(ms_k_cuda_static_rows_new(NULL, &dummy, 8, 2, i4, 9, &rows, NULL) == MS_ERR_INVALID, "K > V");
    CHECK(ms_k_cuda_slots_to_ids(NULL, i4, i4, 4, NULL, 0, NULL) == MS_ERR_INVALID, "no slots");
    ms_log_set_level(lvl);
}

int main(void) {
    test_bad_args(); /* host-only */
    if (g_fail) return 1;
    if (ms_k_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    char info[256];
    need(ms_k_cuda_device_info(0, info, sizeof info), "device info");
    printf("device 0: %s\n", info);
    run_env(MS_DTYPE_BF16, 67, 0x1e4d);
    if (!g_fail) run_env(MS_DTYPE_F16, 67, 0x1e4e);
    if (!g_fail) run_env(MS_DTYPE_BF16, 136, 0x1e4f);
    if (!g_fail) run_env(MS_DTYPE_F16, 136, 0x1e50);
    if (g_fail) {
        fprintf(stderr, "test_cuda_lmhead: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_cuda_lmhead: every head variant matches the reference\n");
    return 0;
}
