/* test_cuda_ops.c — every CUDA op against its C twin (kernels/cpu, the
 * specification), ggml test-backend-ops style.
 *
 * For each act dtype (BF16, F16) and each op: seeded, odd-sized inputs are
 * rounded to the act dtype, uploaded, and the CPU twin runs in f32 on exactly
 * those rounded values. Every device output buffer sits between GUARD
 * elements of a sentinel byte pattern (checked intact after the op) and its
 * interior is poisoned with 0xFF bytes (NaN in every float type, −1 as an
 * index) so an unwritten element fails. NaN / Inf never pass a comparison.
 *
 * Tolerances, per element, with u the act dtype's unit spacing at 1
 * (BF16 u = 2^-8, F16 u = 2^-11) and r the CPU result:
 *     |gpu − r| ≤ tol · (|r| + rms(r))
 * Every CUDA op computes in f32 and rounds its result to act once (error ≤
 * u/2 · |r|); what remains is f32 reassociation (≈ 1e-6 relative to rms(r),
 * which the rms term absorbs where outputs cancel to ≈ 0).
 *   - element-wise ops, rmsnorm, rope, embed: tol = 2u (4× the rounding
 *     bound; BF16 7.8e-3, F16 9.8e-4);
 *   - linear (cuBLAS, fp32 accumulation over k ≤ 1000, tensor-core order)
 *     and attention (online softmax in chunks vs the CPU's two passes):
 *     tol = 4u (BF16 1.6e-2, F16 2.0e-3);
 *   - move_rows, embed from a table already in act: bit-exact (copies);
 *   - top-k: indices and values exact (it selects, never computes);
 *   - log_softmax (f32 in, f32 out, sums in double on both sides):
 *     |gpu − r| ≤ 1e-5 · (1 + |r|).
 * A wrong index, a missed row or a wrong mask bit moves outputs by O(rms),
 * ≥ 30× these bounds, so each comparison can fail.
 *
 * Without a CUDA device the test runs its host-only checks, prints
 * "SKIPPED: no CUDA device" and exits 77 (ctest: skipped, never passed).
 */
#include "ms_k_cuda.h"
#include "ms_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

/* A device call that must succeed; the test cannot go on without it. */
static void need(ms_status s, const char *what) {
    if (s != MS_OK) {
        fprintf(stderr, "FAIL: %s: %s\n", what, ms_status_str(s));
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

/* ---- the table under test ------------------------------------------------------ */

typedef struct {
    const ms_k_ops *ops;
    const ms_k_ops *cpu;
    ms_dtype act;
    double u; /* spacing of the act dtype at 1 */
    ms_rng rng;
} env;

/* ---- guarded device buffers ------------------------------------------------------- */

#define GUARD 64 /* elements on each side */
#define GUARD_BYTE 0xA5
#define POISON_BYTE 0xFF

typedef struct {
    char *dev; /* base, guards included */
    int64_t n;
    size_t es;
} dbuf;

static void *dptr(const dbuf *b) { return b->dev + GUARD * b->es; }

/* n elements of es bytes, from `init` (host) or poisoned when NULL. */
static dbuf dbuf_make(int64_t n, size_t es, const void *init) {
    dbuf b = {NULL, n, es};
    size_t bytes = (size_t)(n + 2 * GUARD) * es;
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

/* Downloads the interior into out (may be NULL) and checks both guards. */
static void dbuf_read(const char *what, const dbuf *b, void *out) {
    size_t bytes = (size_t)(b->n + 2 * GUARD) * b->es;
    unsigned char *h = xmalloc(bytes);
    need(ms_k_cuda_download(NULL, h, b->dev, bytes), "cuda download");
    int64_t bad = 0;
    for (size_t i = 0; i < GUARD * b->es; i++) {
        bad += h[i] != GUARD_BYTE;
        bad += h[bytes - 1 - i] != GUARD_BYTE;
    }
    CHECK(bad == 0, "%s: %lld guard bytes overwritten", what, (long long)bad);
    if (out) memcpy(out, h + GUARD * b->es, (size_t)b->n * b->es);
    free(h);
}

static void dbuf_free(dbuf *b) { ms_k_cuda_free((void **)&b->dev); }

/* Rounds x[n] in place to the act dtype (the values the GPU will see) and
 * uploads them. */
static dbuf act_upload(const env *e, float *x, int64_t n) {
    uint16_t *h = xmalloc((size_t)n * 2);
    ms_convert_from_f32(h, e->act, x, n);
    ms_convert_to_f32(x, h, e->act, n);
    dbuf b = dbuf_make(n, 2, h);
    free(h);
    return b;
}

static dbuf act_poisoned(int64_t n) { return dbuf_make(n, 2, NULL); }

static void act_read(const env *e, const char *what, const dbuf *b, float *out) {
    uint16_t *h = xmalloc((size_t)b->n * 2);
    dbuf_read(what, b, h);
    ms_convert_to_f32(out, h, e->act, b->n);
    free(h);
}

static float *randn(env *e, int64_t n, float scale, float offset) {
    float *x = xmalloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = offset + scale * ms_rng_normal(&e->rng);
    return x;
}

static void sync_ok(const env *e, const char *what) {
    ms_status s = ms_k_cuda_sync(e->ops);
    CHECK(s == MS_OK, "%s: ms_k_cuda_sync -> %s", what, ms_status_str(s));
}

/* |g − r| ≤ tol·(|r| + rms(r)) everywhere; NaN/Inf in g fail. */
static void check_close(const env *e, const char *what, const float *g, const float *r, int64_t n, double tol) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)r[i] * r[i];
    const double rms = n ? sqrt(ss / (double)n) : 0.0;
    double worst = 0.0;
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        const double err = fabs((double)g[i] - r[i]), lim = tol * (fabs(r[i]) + rms);
        const bool ok = isfinite(g[i]) && err <= lim;
        if (!ok && first < 0) first = i;
        bad += !ok;
        if (isfinite(g[i]) && lim > 0 && err / lim > worst) worst = err / lim;
    }
    printf("  %-8s %-34s n=%-7lld worst err/tol %.3f\n", ms_dtype_name(e->act), what, (long long)n, worst);
    CHECK(bad == 0, "%s (%s): %lld of %lld elements outside tol %.3g, first [%lld] gpu %.8g cpu %.8g", what,
          ms_dtype_name(e->act), (long long)bad, (long long)n, tol, (long long)first,
          first >= 0 ? (double)g[first] : 0.0, first >= 0 ? (double)r[first] : 0.0);
}

static void check_exact(const env *e, const char *what, const float *g, const float *r, int64_t n) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&g[i], &r[i], sizeof(float)) != 0 || isnan(g[i])) {
            if (first < 0) first = i;
            bad++;
        }
    printf("  %-8s %-34s n=%-7lld %s\n", ms_dtype_name(e->act), what, (long long)n, bad ? "MISMATCH" : "exact");
    CHECK(bad == 0, "%s (%s): %lld of %lld differ, first [%lld] gpu %.8g cpu %.8g", what, ms_dtype_name(e->act),
          (long long)bad, (long long)n, (long long)first, first >= 0 ? (double)g[first] : 0.0,
          first >= 0 ? (double)r[first] : 0.0);
}

/* ---- linear ------------------------------------------------------------------------- */

static void test_linear(env *e, int64_t n, int64_t k, int64_t m, bool bias) {
    float *x = randn(e, n * k, 1.0f, 0.0f), *w = randn(e, m * k, 1.0f / sqrtf((float)k), 0.0f);
    float *b = bias ? randn(e, m, 0.5f, 0.0f) : NULL;
    float *ref = xmalloc((size_t)(n * m) * sizeof *ref), *got = xmalloc((size_t)(n * m) * sizeof *got);
    dbuf dx = act_upload(e, x, n * k), dw = act_upload(e, w, m * k), db = {0}, dy = act_poisoned(n * m);
    if (bias) db = act_upload(e, b, m);
    e->cpu->gemm(NULL, ref, x, w, b, n, k, m);
    e->ops->gemm(e->ops->ctx, dptr(&dy), dptr(&dx), dptr(&dw), bias ? dptr(&db) : NULL, n, k, m);
    sync_ok(e, "linear");
    char what[96];
    snprintf(what, sizeof what, "linear %lldx%lldx%lld%s", (long long)n, (long long)k, (long long)m,
             bias ? " +bias" : "");
    act_read(e, what, &dy, got);
    check_close(e, what, got, ref, n * m, 4 * e->u);
    dbuf_free(&dx), dbuf_free(&dw), dbuf_free(&dy);
    if (bias) dbuf_free(&db);
    free(x), free(w), free(b), free(ref), free(got);
}

/* ---- rmsnorm (separate output, and in place) ------------------------------------------ */

static void test_rmsnorm(env *e, int64_t n, int64_t d, bool in_place) {
    float *x = randn(e, n * d, 2.0f, 0.3f), *w = randn(e, d, 0.1f, 1.0f);
    float *ref = xmalloc((size_t)(n * d) * sizeof *ref), *got = xmalloc((size_t)(n * d) * sizeof *got);
    dbuf dx = act_upload(e, x, n * d), dw = act_upload(e, w, d), dy = {0};
    if (!in_place) dy = act_poisoned(n * d);
    e->cpu->rmsnorm(NULL, ref, x, w, n, d, 1e-5f);
    void *y = in_place ? dptr(&dx) : dptr(&dy);
    e->ops->rmsnorm(e->ops->ctx, y, dptr(&dx), dptr(&dw), n, d, 1e-5f);
    sync_ok(e, "rmsnorm");
    char what[96];
    snprintf(what, sizeof what, "rmsnorm %lldx%lld%s", (long long)n, (long long)d, in_place ? " in place" : "");
    act_read(e, what, in_place ? &dx : &dy, got);
    check_close(e, what, got, ref, n * d, 2 * e->u);
    dbuf_free(&dx), dbuf_free(&dw);
    if (!in_place) dbuf_free(&dy);
    free(x), free(w), free(ref), free(got);
}

/* ---- add, silu_glu ---------------------------------------------------------------------- */

static void test_add(env *e, int64_t n) {
    float *y = randn(e, n, 1.0f, 0.0f), *x = randn(e, n, 1.0f, 0.0f), *got = xmalloc((size_t)n * sizeof *got);
    dbuf dy = act_upload(e, y, n), dx = act_upload(e, x, n);
    e->cpu->add(NULL, y, x, n);
    e->ops->add(e->ops->ctx, dptr(&dy), dptr(&dx), n);
    sync_ok(e, "add");
    act_read(e, "add", &dy, got);
    check_close(e, "add", got, y, n, 2 * e->u);
    dbuf_free(&dy), dbuf_free(&dx);
    free(y), free(x), free(got);
}

static void test_silu_glu(env *e, int64_t n) {
    float *g = randn(e, n, 4.0f, 0.0f), *u = randn(e, n, 1.0f, 0.0f);
    float *ref = xmalloc((size_t)n * sizeof *ref), *got = xmalloc((size_t)n * sizeof *got);
    dbuf dg = act_upload(e, g, n), du = act_upload(e, u, n), dy = act_poisoned(n);
    e->cpu->silu_glu(NULL, ref, g, u, n);
    e->ops->silu_glu(e->ops->ctx, dptr(&dy), dptr(&dg), dptr(&du), n);
    sync_ok(e, "silu_glu");
    act_read(e, "silu_glu", &dy, got);
    check_close(e, "silu_glu", got, ref, n, 2 * e->u);
    dbuf_free(&dg), dbuf_free(&du), dbuf_free(&dy);
    free(g), free(u), free(ref), free(got);
}

/* ---- rope ------------------------------------------------------------------------------------ */

static void test_rope(env *e, int64_t n, int64_t n_heads, int64_t hd, int64_t max_pos) {
    ms_k_rope host, dev;
    ms_k_rope_params p = {.theta = 500000.0, .llama3 = 1, .factor = 8.0, .low_freq_factor = 1.0,
                          .high_freq_factor = 4.0, .original_max_pos = 8192};
    need(ms_k_rope_build(&host, max_pos, hd, &p), "rope build");
    need(ms_k_cuda_rope_upload(&host, &dev), "rope upload");
    int32_t *pos = xmalloc((size_t)n * sizeof *pos);
    for (int64_t i = 0; i < n; i++) pos[i] = (int32_t)(ms_rng_u64(&e->rng) % (uint64_t)max_pos);
    pos[0] = (int32_t)(max_pos - 1);
    float *x = randn(e, n * n_heads * hd, 1.0f, 0.0f), *got = xmalloc((size_t)(n * n_heads * hd) * sizeof *got);
    dbuf dx = act_upload(e, x, n * n_heads * hd), dpos = dbuf_make(n, sizeof(int32_t), pos);
    e->cpu->rope(NULL, x, n, n_heads, hd, pos, &host);
    e->ops->rope(e->ops->ctx, dptr(&dx), n, n_heads, hd, dptr(&dpos), &dev);
    sync_ok(e, "rope");
    char what[96];
    snprintf(what, sizeof what, "rope n%lld h%lld hd%lld", (long long)n, (long long)n_heads, (long long)hd);
    act_read(e, what, &dx, got);
    check_close(e, what, got, x, n * n_heads * hd, 2 * e->u);

    /* A position past the table is reported by ms_k_cuda_sync, not written. */
    fprintf(stderr, "  (the next error line is expected: a rope position past the table)\n");
    pos[0] = (int32_t)max_pos;
    need(ms_k_cuda_upload(NULL, dptr(&dpos), pos, sizeof *pos), "upload pos");
    e->ops->rope(e->ops->ctx, dptr(&dx), n, n_heads, hd, dptr(&dpos), &dev);
    ms_status s = ms_k_cuda_sync(e->ops);
    CHECK(s == MS_ERR_RANGE, "rope with pos == max_pos: sync gave %s, want MS_ERR_RANGE", ms_status_str(s));
    s = ms_k_cuda_sync(e->ops);
    CHECK(s == MS_OK, "sync after a reported error should be clear, got %s", ms_status_str(s));

    dbuf_free(&dx), dbuf_free(&dpos);
    ms_k_cuda_rope_free(&dev);
    ms_k_rope_free(&host);
    free(pos), free(x), free(got);
}

/* ---- embed ------------------------------------------------------------------------------------- */

static void test_embed(env *e, ms_dtype table_dtype, int64_t vocab, int64_t n, int64_t d) {
    float *tf = randn(e, vocab * d, 1.0f, 0.0f);
    size_t es = ms_dtype_size(table_dtype);
    void *table = xmalloc((size_t)(vocab * d) * es);
    ms_convert_from_f32(table, table_dtype, tf, vocab * d);
    int32_t *ids = xmalloc((size_t)n * sizeof *ids);
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(ms_rng_u64(&e->rng) % (uint64_t)vocab);
    ids[0] = 0;
    ids[n - 1] = (int32_t)(vocab - 1);
    float *ref = xmalloc((size_t)(n * d) * sizeof *ref), *got = xmalloc((size_t)(n * d) * sizeof *got);
    dbuf dt = dbuf_make(vocab * d, es, table), dids = dbuf_make(n, sizeof(int32_t), ids), dy = act_poisoned(n * d);
    e->cpu->embed(NULL, ref, table, table_dtype, ids, n, d);
    e->ops->embed(e->ops->ctx, dptr(&dy), dptr(&dt), table_dtype, dptr(&dids), n, d);
    sync_ok(e, "embed");
    char what[96];
    snprintf(what, sizeof what, "embed from %s", ms_dtype_name(table_dtype));
    act_read(e, what, &dy, got);
    if (table_dtype == e->act)
        check_exact(e, what, got, ref, n * d);
    else
        check_close(e, what, got, ref, n * d, 2 * e->u);
    dbuf_free(&dt), dbuf_free(&dids), dbuf_free(&dy);
    free(tf), free(table), free(ids), free(ref), free(got);
}

/* ---- move_rows ------------------------------------------------------------------------------------ */

/* Compaction with overlapping chains (a row is read after an earlier move
 * wrote it) and a no-op move; the result must be bit-identical. */
static void test_move_rows(env *e, int64_t rows, int64_t row_elems) {
    static const int64_t src[] = {11, 12, 13, 15, 16, 19, 24}, dst[] = {10, 11, 12, 13, 16, 17, 18};
    const int64_t nm = (int64_t)(sizeof src / sizeof src[0]);
    float *c = randn(e, rows * row_elems, 1.0f, 0.0f), *got = xmalloc((size_t)(rows * row_elems) * sizeof *got);
    dbuf dc = act_upload(e, c, rows * row_elems), ds = dbuf_make(nm, sizeof(int64_t), src),
         dd = dbuf_make(nm, sizeof(int64_t), dst);
    e->cpu->move_rows(NULL, c, row_elems, src, dst, nm);
    e->ops->move_rows(e->ops->ctx, dptr(&dc), row_elems, dptr(&ds), dptr(&dd), nm);
    sync_ok(e, "move_rows");
    char what[96];
    snprintf(what, sizeof what, "move_rows row_elems %lld", (long long)row_elems);
    act_read(e, what, &dc, got);
    check_exact(e, what, got, c, rows * row_elems);
    dbuf_free(&dc), dbuf_free(&ds), dbuf_free(&dd);
    free(c), free(got);
}

/* ---- attention ----------------------------------------------------------------------------------- */

typedef enum { MASK_NONE, MASK_TREE, MASK_TREE_WITH_EMPTY } mask_kind;

static void test_attention(env *e, int64_t n_q, int64_t ctx, int64_t n_heads, int64_t n_kv, int64_t hd,
                           int64_t mask_back, mask_kind mk) {
    ms_k_attn_shape s = {.n_q = n_q, .ctx = ctx, .n_heads = n_heads, .n_kv_heads = n_kv, .head_dim = hd,
                         .scale = 1.0f / sqrtf((float)hd), .mask_back = mk == MASK_NONE ? 0 : mask_back};
    /* Three spare cache rows past ctx + n_q hold NaN: reading them poisons the output. */
    const int64_t rows = ctx + n_q + 3, kv_dim = n_kv * hd, q_dim = n_heads * hd;
    float *q = randn(e, n_q * q_dim, 3.0f, 0.0f), *k = randn(e, rows * kv_dim, 1.0f, 0.0f);
    float *v = randn(e, rows * kv_dim, 1.0f, 0.0f);
    for (int64_t i = (ctx + n_q) * kv_dim; i < rows * kv_dim; i++) k[i] = v[i] = NAN;
    uint64_t *mask = NULL;
    if (mk != MASK_NONE) {
        /* A node sees itself, a random subset of earlier batch rows and of
         * the mask_back rows before the batch. */
        mask = xmalloc((size_t)n_q * sizeof *mask);
        for (int64_t i = 0; i < n_q; i++) {
            uint64_t m = (uint64_t)1 << (mask_back + i);
            uint64_t r = ms_rng_u64(&e->rng);
            for (int64_t j = 0; j < mask_back + i; j++)
                if ((r >> j) & 1) m |= (uint64_t)1 << j;
            mask[i] = m;
        }
        if (mk == MASK_TREE_WITH_EMPTY) mask[n_q / 2] = 0; /* sees no row of the region */
    }
    float *ref = xmalloc((size_t)(n_q * q_dim) * sizeof *ref), *got = xmalloc((size_t)(n_q * q_dim) * sizeof *got);
    float *scratch = xmalloc((size_t)(ctx + n_q + 64) * sizeof *scratch);
    dbuf dq = act_upload(e, q, n_q * q_dim), dk = act_upload(e, k, rows * kv_dim), dv = act_upload(e, v, rows * kv_dim);
    dbuf dm = {0}, dout = act_poisoned(n_q * q_dim);
    if (mask) dm = dbuf_make(n_q, sizeof(uint64_t), mask);
    e->cpu->attention(NULL, ref, q, k, v, &s, mask, scratch);
    e->ops->attention(e->ops->ctx, dptr(&dout), dptr(&dq), dptr(&dk), dptr(&dv), &s, mask ? dptr(&dm) : NULL, NULL);
    sync_ok(e, "attention");
    char what[96];
    snprintf(what, sizeof what, "attn q%lld ctx%lld h%lld/%lld hd%lld %s", (long long)n_q, (long long)ctx,
             (long long)n_heads, (long long)n_kv, (long long)hd,
             mk == MASK_NONE ? "causal" : mk == MASK_TREE ? "tree" : "tree+empty");
    act_read(e, what, &dout, got);
    check_close(e, what, got, ref, n_q * q_dim, 4 * e->u);
    dbuf_free(&dq), dbuf_free(&dk), dbuf_free(&dv), dbuf_free(&dout);
    if (mask) dbuf_free(&dm);
    free(q), free(k), free(v), free(mask), free(ref), free(got), free(scratch);
}

/* ---- log_softmax rows ------------------------------------------------------------------------------ */

static void test_log_softmax(env *e, int64_t rows, int64_t n, int64_t ld, bool in_place) {
    const float PAD = 1234.5f; /* columns ≥ n must come back untouched */
    float *x = randn(e, rows * ld, 4.0f, 0.0f);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = n; j < ld; j++) x[r * ld + j] = PAD;
    for (int64_t j = 0; j < n; j++) x[2 * ld + j] = -INFINITY;       /* row 2: all −inf */
    for (int64_t j = 0; j < n; j += 7) x[3 * ld + j] = -INFINITY;    /* row 3: some −inf */
    float *ref = xmalloc((size_t)(rows * ld) * sizeof *ref), *got = xmalloc((size_t)(rows * ld) * sizeof *got);
    memcpy(ref, x, (size_t)(rows * ld) * sizeof *ref);
    for (int64_t r = 0; r < rows; r++) ms_k_log_softmax(ref + r * ld, x + r * ld, n);
    dbuf dx = dbuf_make(rows * ld, sizeof(float), x), dy = dbuf_make(rows * ld, sizeof(float), x);
    if (!in_place) {
        dbuf_free(&dy);
        /* poison the interior but keep the padding columns as in x */
        float *init = xmalloc((size_t)(rows * ld) * sizeof *init);
        memset(init, POISON_BYTE, (size_t)(rows * ld) * sizeof *init);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = n; j < ld; j++) init[r * ld + j] = PAD;
        dy = dbuf_make(rows * ld, sizeof(float), init);
        free(init);
    }
    float *y = in_place ? dptr(&dx) : dptr(&dy);
    ms_status s = ms_k_cuda_log_softmax_rows(e->ops, y, dptr(&dx), rows, n, ld);
    CHECK(s == MS_OK, "log_softmax_rows: %s", ms_status_str(s));
    sync_ok(e, "log_softmax_rows");
    dbuf_read("log_softmax_rows", in_place ? &dx : &dy, got);
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < rows * ld; i++) {
        /* −inf entries (row 3) must come back −inf; NaN never passes */
        if (isinf(ref[i])) {
            if (got[i] != ref[i]) bad++;
            continue;
        }
        const double err = fabs((double)got[i] - ref[i]), lim = 1e-5 * (1.0 + fabs(ref[i]));
        if (!isfinite(got[i]) || !(err <= lim)) bad++;
        else if (err / lim > worst) worst = err / lim;
    }
    printf("  %-8s %-34s n=%-7lld worst err/tol %.3f\n", "F32", in_place ? "log_softmax_rows in place" : "log_softmax_rows",
           (long long)(rows * n), worst);
    CHECK(bad == 0, "log_softmax_rows: %lld elements off (padding included)", (long long)bad);
    dbuf_free(&dx), dbuf_free(&dy);
    free(x), free(ref), free(got);
}

/* ---- top-k rows ------------------------------------------------------------------------------------- */

static void test_topk(env *e, int64_t n, int64_t ld, int64_t k) {
    const int64_t rows = 6;
    float *x = randn(e, rows * ld, 1.0f, 0.0f);
    for (int64_t j = 0; j < n; j++) {
        x[1 * ld + j] = floorf(x[1 * ld + j] * 2.0f) / 2.0f; /* row 1: many ties */
        x[2 * ld + j] = 1.0f;                                 /* row 2: all equal */
        if (j % 5 == 0) x[3 * ld + j] = NAN;                  /* row 3: NaN and −inf */
        if (j % 5 == 1) x[3 * ld + j] = -INFINITY;
        if (j >= 3) x[4 * ld + j] = NAN;                      /* row 4: 3 numbers, then NaN */
        x[5 * ld + j] = j == n / 2 ? 0.0f : -INFINITY;        /* row 5: one finite value */
    }
    int32_t *ri = xmalloc((size_t)(rows * k) * sizeof *ri), *gi = xmalloc((size_t)(rows * k) * sizeof *gi);
    float *rv = xmalloc((size_t)(rows * k) * sizeof *rv), *gv = xmalloc((size_t)(rows * k) * sizeof *gv);
    for (int64_t r = 0; r < rows; r++) ms_k_topk(x + r * ld, n, k, ri + r * k, rv + r * k);
    dbuf dx = dbuf_make(rows * ld, sizeof(float), x), di = dbuf_make(rows * k, sizeof(int32_t), NULL),
         dv = dbuf_make(rows * k, sizeof(float), NULL);
    ms_status s = ms_k_cuda_topk_rows(e->ops, dptr(&di), dptr(&dv), dptr(&dx), rows, n, ld, k);
    CHECK(s == MS_OK, "topk_rows: %s", ms_status_str(s));
    sync_ok(e, "topk_rows");
    dbuf_read("topk idx", &di, gi);
    dbuf_read("topk val", &dv, gv);
    int64_t bad = 0;
    for (int64_t i = 0; i < rows * k; i++) {
        const bool same_v = (isnan(gv[i]) && isnan(rv[i])) || memcmp(&gv[i], &rv[i], sizeof(float)) == 0;
        if (gi[i] != ri[i] || !same_v) {
            if (!bad)
                fprintf(stderr, "  topk row %lld rank %lld: gpu (%d, %g) cpu (%d, %g)\n", (long long)(i / k),
                        (long long)(i % k), gi[i], (double)gv[i], ri[i], (double)rv[i]);
            bad++;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "topk_rows n%lld k%lld", (long long)n, (long long)k);
    printf("  %-8s %-34s n=%-7lld %s\n", "F32", what, (long long)(rows * n), bad ? "MISMATCH" : "exact");
    CHECK(bad == 0, "%s: %lld of %lld (idx, val) pairs differ", what, (long long)bad, (long long)(rows * k));
    dbuf_free(&dx), dbuf_free(&di), dbuf_free(&dv);
    free(x), free(ri), free(gi), free(rv), free(gv);
}

/* Argument errors come back as MS_ERR_INVALID before any launch. */
static void test_bad_args(env *e) {
    float *dummy = NULL;
    need(ms_k_cuda_malloc((void **)&dummy, 64 * sizeof(float)), "malloc");
    int32_t *di = (int32_t *)dummy;
    CHECK(ms_k_cuda_topk_rows(e->ops, di, dummy, dummy, 1, 32, 32, MS_K_CUDA_TOPK_MAX + 1) == MS_ERR_INVALID,
          "topk k > max");
    CHECK(ms_k_cuda_topk_rows(e->ops, di, dummy, dummy, 1, 4, 4, 5) == MS_ERR_INVALID, "topk k > n");
    CHECK(ms_k_cuda_topk_rows(e->ops, di, dummy, dummy, 1, 8, 4, 2) == MS_ERR_INVALID, "topk ld < n");
    CHECK(ms_k_cuda_log_softmax_rows(e->ops, dummy, dummy, 1, 8, 4) == MS_ERR_INVALID, "log_softmax ld < n");
    CHECK(ms_k_cuda_log_softmax_rows(e->ops, dummy, dummy, 1, 0, 4) == MS_ERR_INVALID, "log_softmax n = 0");
    ms_k_cuda_free((void **)&dummy);
    CHECK(dummy == NULL, "ms_k_cuda_free nulls the pointer");
    sync_ok(e, "bad args");
}

static void run_all(ms_dtype act) {
    env e = {.act = act, .u = act == MS_DTYPE_BF16 ? ldexp(1.0, -8) : ldexp(1.0, -11), .cpu = ms_k_cpu_ops()};
    ms_rng_seed(&e.rng, act == MS_DTYPE_BF16 ? 20260501u : 20260502u);
    e.ops = ms_k_cuda_ops(act, NULL);
    CHECK(e.ops != NULL, "ms_k_cuda_ops(%s)", ms_dtype_name(act));
    if (!e.ops) return;
    CHECK(e.ops->act == act && e.ops->weight == act, "table dtypes");

    test_linear(&e, 7, 129, 67, true);
    test_linear(&e, 1, 1000, 513, false);
    test_linear(&e, 13, 64, 1, true);
    test_rmsnorm(&e, 7, 129, false);
    test_rmsnorm(&e, 3, 1000, true);
    test_add(&e, 1001);
    test_silu_glu(&e, 1003);
    test_rope(&e, 7, 5, 24, 100);
    test_rope(&e, 2, 3, 128, 4096);
    test_embed(&e, MS_DTYPE_F32, 50, 7, 129);
    test_embed(&e, MS_DTYPE_F16, 50, 7, 129);
    test_embed(&e, MS_DTYPE_BF16, 50, 7, 129);
    test_move_rows(&e, 30, 72);  /* 16-byte path */
    test_move_rows(&e, 30, 129); /* 2-byte path */
    test_attention(&e, 7, 0, 5, 1, 24, 0, MASK_NONE);        /* prefill, GQA 5:1 */
    /* With 132 SMs (H100): the next three take the split-KV path (2, 4 and 2
     * splits), the one after them a single block per pair over two chunks. */
    test_attention(&e, 3, 1500, 6, 2, 64, 0, MASK_NONE);     /* causal, rows per query differ */
    test_attention(&e, 1, 2100, 4, 4, 128, 0, MASK_NONE);    /* decode, long KV */
    test_attention(&e, 11, 37, 5, 1, 24, 5, MASK_TREE);      /* draft level with mask_back */
    test_attention(&e, 6, 0, 3, 3, 150, 0, MASK_TREE_WITH_EMPTY); /* hd > threads; an all-masked row */
    test_attention(&e, 20, 1100, 4, 2, 64, 44, MASK_TREE);   /* mask_back + n_q = 64, masked rows in split 2 */
    test_attention(&e, 9, 1100, 32, 8, 64, 0, MASK_NONE);    /* no split: rows span two score chunks */
    test_attention(&e, 5, 1200, 2, 1, 32, 10, MASK_TREE_WITH_EMPTY); /* split path, an empty mask row */
    test_log_softmax(&e, 4, 32003, 32008, false);
    test_log_softmax(&e, 4, 1001, 1001, true);
    test_topk(&e, 5000, 5003, 1);
    test_topk(&e, 5000, 5003, 7);
    test_topk(&e, 5000, 5003, MS_K_CUDA_TOPK_MAX);
    test_topk(&e, 16, 16, 16);
    test_bad_args(&e);
    ms_k_cuda_ops_destroy(&e.ops);
    CHECK(e.ops == NULL, "destroy nulls the table");
}

int main(void) {
    /* Host-only checks first: they need no device. */
    const ms_log_level lvl = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    CHECK(ms_k_cuda_ops(MS_DTYPE_F32, NULL) == NULL, "an f32 CUDA table is refused");
    ms_log_set_level(lvl);
    if (g_fail) return 1;

    int ndev = ms_k_cuda_device_count();
    if (ndev == 0) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    char info[256];
    need(ms_k_cuda_device_info(0, info, sizeof info), "device info");
    printf("device 0: %s\n", info);
    run_all(MS_DTYPE_BF16);
    run_all(MS_DTYPE_F16);
    if (g_fail) {
        fprintf(stderr, "test_cuda_ops: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_cuda_ops: all ops match their C twins\n");
    return 0;
}
