/* ms_dynaspec.c — DynaSpec artefact loader, router forward and per-step pick
 * (ms_dynaspec.h). */
#include "ms_dynaspec.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_gguf.h"
#include "ms_kernels.h"
#include "ms_qweight.h"

struct ms_dynaspec {
    int64_t V, d, M, H, max_rows;
    ms_dynaspec_budget budget;
    int32_t *cluster_of; /* [V] */
    int64_t *start;      /* [M + 1] CSR offsets into members */
    int32_t *members;    /* [V] ids grouped by cluster, ascending within one */
    float *w1, *b1;      /* [H, 2d], [H] */
    float *w2, *b2;      /* [M, H], [M] */
    ms_qweight embd;     /* the draft's token embedding [V, d]: the caller's view (ms_dynaspec_load) */
    /* scratch, sized at load for max_rows rows */
    float *z;       /* [max_rows, 2d] router inputs */
    float *hidden;  /* [max_rows, H] */
    float *scores;  /* [max_rows, M] */
    int32_t *top;   /* [M] */
    float *topv;    /* [M] */
    uint8_t *taken; /* [M] */
    int64_t max_ids;
};

/* A required f32 tensor of the artefact, copied out (the artefact is closed after load). */
static ms_status take_f32(const ms_gguf *g, const char *name, int ndim, const int64_t *shape, float **out) {
    static const ms_dtype f32[] = {MS_DTYPE_F32};
    const ms_gguf_tensor_info *ti;
    MS_TRY(ms_gguf_get_tensor(g, name, ndim, shape, f32, 1, &ti));
    *out = ms_malloc(ti->nbytes);
    if (!*out) return MS_ERR_NOMEM;
    memcpy(*out, ti->data, ti->nbytes);
    return MS_OK;
}

static ms_status get_pos(const ms_gguf *g, const char *key, int64_t hi, int64_t *out) {
    ms_status s = ms_gguf_get_i64(g, key, out);
    if (s == MS_ERR_NOT_FOUND) MS_FAIL(s, "%s: no key %s (not a dynaspec artefact?)", ms_gguf_path(g), key);
    MS_TRY(s);
    if (*out < 1 || *out > hi)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s = %lld outside [1, %lld]", ms_gguf_path(g), key, (long long)*out,
                (long long)hi);
    return MS_OK;
}

/* The artefact's own keys and tensors (ms_vsel_artifact_open checked kind,
 * model hash and sizes); CSR of the clusters. */
static ms_status load_artifact(ms_dynaspec *ds, const ms_gguf *a, const char *artifact) {
    const int64_t V = ds->V, d = ds->d; /* the artefact's, checked by ms_vsel_artifact_open */
    int64_t M, H;
    MS_TRY(get_pos(a, "dynaspec.n_clusters", V, &M));
    MS_TRY(get_pos(a, "dynaspec.router_hidden", 1 << 20, &H));
    ds->M = M;
    ds->H = H;

    static const ms_dtype i32[] = {MS_DTYPE_I32};
    const ms_gguf_tensor_info *ti;
    MS_TRY(ms_gguf_get_tensor(a, "dynaspec.cluster_of", 1, (int64_t[]){V}, i32, 1, &ti));
    ds->cluster_of = ms_malloc((size_t)V * sizeof(int32_t));
    ds->start = ms_calloc((size_t)M + 1, sizeof(int64_t));
    ds->members = ms_malloc((size_t)V * sizeof(int32_t));
    if (!ds->cluster_of || !ds->start || !ds->members) return MS_ERR_NOMEM;
    memcpy(ds->cluster_of, ti->data, (size_t)V * sizeof(int32_t));
    for (int64_t i = 0; i < V; i++) {
        int32_t c = ds->cluster_of[i];
        if (c < 0 || c >= M)
            MS_FAIL(MS_ERR_FORMAT, "%s: dynaspec.cluster_of[%lld] = %d outside [0, %lld)", artifact, (long long)i, c,
                    (long long)M);
        ds->start[c + 1]++;
    }
    for (int64_t c = 0; c < M; c++) ds->start[c + 1] += ds->start[c];
    for (int64_t i = 0; i < V; i++) { /* ascending i: each cluster's ids ascending; start[c] runs to its end */
        int32_t c = ds->cluster_of[i];
        ds->members[ds->start[c]++] = (int32_t)i;
    }
    for (int64_t c = M; c > 0; c--) ds->start[c] = ds->start[c - 1];
    ds->start[0] = 0;

    MS_TRY(take_f32(a, "dynaspec.w1", 2, (int64_t[]){H, 2 * d}, &ds->w1));
    MS_TRY(take_f32(a, "dynaspec.b1", 1, (int64_t[]){H}, &ds->b1));
    MS_TRY(take_f32(a, "dynaspec.w2", 2, (int64_t[]){M, H}, &ds->w2));
    MS_TRY(take_f32(a, "dynaspec.b2", 1, (int64_t[]){M}, &ds->b2));
    return MS_OK;
}

static int cmp_desc_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a < b) - (a > b);
}

/* The most ids one pick can return: the sum of the min(M, max_rows·k_max) largest clusters. */
static ms_status bound_ids(ms_dynaspec *ds) {
    int64_t *sizes = ms_malloc((size_t)ds->M * sizeof(int64_t));
    if (!sizes) return MS_ERR_NOMEM;
    for (int64_t c = 0; c < ds->M; c++) sizes[c] = ds->start[c + 1] - ds->start[c];
    qsort(sizes, (size_t)ds->M, sizeof *sizes, cmp_desc_i64);
    int64_t k_max = ms_dynaspec_k(ds, 0), n = ds->max_rows * k_max;
    if (n > ds->M || n / ds->max_rows != k_max) n = ds->M;
    ds->max_ids = 0;
    for (int64_t c = 0; c < n; c++) ds->max_ids += sizes[c];
    free(sizes);
    return MS_OK;
}

ms_status ms_dynaspec_load(const char *artifact, const char *model_path, const ms_qweight *embd,
                           const ms_dynaspec_budget *budget, int64_t max_rows, ms_dynaspec **out) {
    *out = NULL;
    if (budget->k_c0 < 0 || budget->k_min < 1 || !(budget->decay > 0.0 && budget->decay <= 1.0))
        MS_FAIL(MS_ERR_INVALID, "dynaspec budget: clusters %lld (≥ 0), min %lld (≥ 1), decay %g (in (0, 1])",
                (long long)budget->k_c0, (long long)budget->k_min, budget->decay);
    if (max_rows < 1) MS_FAIL(MS_ERR_INVALID, "dynaspec: max_rows %lld < 1", (long long)max_rows);
    ms_dynaspec *ds = ms_calloc(1, sizeof *ds);
    if (!ds) return MS_ERR_NOMEM;
    ds->budget = *budget;
    ds->max_rows = max_rows;
    ms_gguf *a = NULL;
    ms_status st = MS_OK;
    if (!embd || embd->m < 1 || embd->k < 1 || !ms_q_supported(embd->dtype)) {
        MS_LOG_ERROR("dynaspec: the draft model %s gives no embedding table the router can read", model_path);
        st = MS_ERR_UNSUPPORTED;
    }
    if (st == MS_OK) {
        ds->V = embd->m;
        ds->d = embd->k;
        ds->embd = *embd;
        st = ms_vsel_artifact_open(artifact, "dynaspec", model_path, ds->V, ds->d, &a);
    }
    if (st == MS_OK) st = load_artifact(ds, a, artifact);
    /* default budget: 1/64 of the clusters (M = 1,024 on Qwen's 151,936 ids:
     * 16 clusters, about 2,400 ids, near MicroSpec's W_max) */
    if (st == MS_OK && ds->budget.k_c0 == 0) ds->budget.k_c0 = ds->M / 64 > 1 ? ds->M / 64 : 1;
    ms_gguf_close(&a);
    if (st == MS_OK) {
        ds->z = ms_malloc((size_t)max_rows * 2 * (size_t)ds->d * sizeof(float));
        ds->hidden = ms_malloc((size_t)max_rows * (size_t)ds->H * sizeof(float));
        ds->scores = ms_malloc((size_t)max_rows * (size_t)ds->M * sizeof(float));
        ds->top = ms_malloc((size_t)ds->M * sizeof(int32_t));
        ds->topv = ms_malloc((size_t)ds->M * sizeof(float));
        ds->taken = ms_malloc((size_t)ds->M);
        if (!ds->z || !ds->hidden || !ds->scores || !ds->top || !ds->topv || !ds->taken) st = MS_ERR_NOMEM;
    }
    if (st == MS_OK) st = bound_ids(ds);
    if (st < 0) {
        ms_dynaspec_free(&ds);
        return st;
    }
    MS_LOG_INFO("dynaspec: %s: %lld clusters over %lld ids, router 2·%lld → %lld → %lld; budget k_c0 %lld, decay %g, "
                "min %lld; at most %lld ids a pick",
                artifact, (long long)ds->M, (long long)ds->V, (long long)ds->d, (long long)ds->H, (long long)ds->M,
                (long long)ds->budget.k_c0, ds->budget.decay, (long long)ds->budget.k_min, (long long)ds->max_ids);
    *out = ds;
    return MS_OK;
}

void ms_dynaspec_free(ms_dynaspec **pds) {
    ms_dynaspec *ds = *pds;
    if (!ds) return;
    free(ds->cluster_of);
    free(ds->start);
    free(ds->members);
    free(ds->w1);
    free(ds->b1);
    free(ds->w2);
    free(ds->b2);
    free(ds->z);
    free(ds->hidden);
    free(ds->scores);
    free(ds->top);
    free(ds->topv);
    free(ds->taken);
    free(ds);
    *pds = NULL;
}

int64_t ms_dynaspec_vocab(const ms_dynaspec *ds) { return ds->V; }
int64_t ms_dynaspec_hidden(const ms_dynaspec *ds) { return ds->d; }
int64_t ms_dynaspec_clusters(const ms_dynaspec *ds) { return ds->M; }

int32_t ms_dynaspec_cluster_of(const ms_dynaspec *ds, int32_t id) {
    MS_ASSERT(id >= 0 && id < ds->V);
    return ds->cluster_of[id];
}

const int32_t *ms_dynaspec_members(const ms_dynaspec *ds, int32_t c, int64_t *n) {
    MS_ASSERT(c >= 0 && c < ds->M);
    *n = ds->start[c + 1] - ds->start[c];
    return ds->members + ds->start[c];
}

int64_t ms_dynaspec_k(const ms_dynaspec *ds, int64_t depth) {
    MS_ASSERT(depth >= 0);
    double k = floor((double)ds->budget.k_c0 * pow(ds->budget.decay, (double)depth));
    int64_t kc = k < (double)ds->budget.k_min ? ds->budget.k_min : (int64_t)k;
    return kc > ds->M ? ds->M : kc;
}

void ms_dynaspec_forward(ms_dynaspec *ds, const float *z, int64_t n, float *scores) {
    MS_ASSERT(n >= 0 && n <= ds->max_rows);
    if (n == 0) return;
    const int64_t H = ds->H, M = ds->M, k = 2 * ds->d;
    /* hidden [n, H] = relu(z [n, 2d] · W1ᵀ + b1) */
    for (int64_t i = 0; i < n; i++) memcpy(ds->hidden + i * H, ds->b1, (size_t)H * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)H, (blasint)k, 1.0f, z, (blasint)k,
                ds->w1, (blasint)k, 1.0f, ds->hidden, (blasint)H);
    for (int64_t i = 0; i < n * H; i++) ds->hidden[i] = ds->hidden[i] > 0.0f ? ds->hidden[i] : 0.0f;
    /* scores [n, M] = hidden · W2ᵀ + b2 */
    for (int64_t i = 0; i < n; i++) memcpy(scores + i * M, ds->b2, (size_t)M * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)M, (blasint)H, 1.0f, ds->hidden,
                (blasint)H, ds->w2, (blasint)H, 1.0f, scores, (blasint)M);
}

ms_status ms_dynaspec_pick(void *ctx, const float *hid, const float *prev, const int32_t *tok, int64_t n,
                           int64_t depth, int32_t *ids, int64_t cap, int64_t *n_ids) {
    (void)hid; /* the router reads the row's token and its parent's state (ms_dynaspec.h) */
    ms_dynaspec *ds = ctx;
    const int64_t d = ds->d, M = ds->M;
    *n_ids = 0;
    if (n < 1 || n > ds->max_rows)
        MS_FAIL(MS_ERR_RANGE, "dynaspec pick: %lld rows, loaded for 1..%lld", (long long)n, (long long)ds->max_rows);
    for (int64_t i = 0; i < n; i++) {
        if (tok[i] < 0 || tok[i] >= ds->V)
            MS_FAIL(MS_ERR_INVALID, "dynaspec pick: token %d outside [0, %lld)", tok[i], (long long)ds->V);
        ms_q_row(&ds->embd, tok[i], ds->z + i * 2 * d); /* e(x): the raw table row (no sqrt(d) scale) */
        memcpy(ds->z + i * 2 * d + d, prev + i * d, (size_t)d * sizeof(float));
    }
    ms_dynaspec_forward(ds, ds->z, n, ds->scores);
    int64_t k = ms_dynaspec_k(ds, depth);
    memset(ds->taken, 0, (size_t)M);
    for (int64_t i = 0; i < n; i++) {
        ms_k_topk(ds->scores + i * M, M, k, ds->top, ds->topv);
        for (int64_t j = 0; j < k; j++) ds->taken[ds->top[j]] = 1;
    }
    int64_t total = 0;
    for (int64_t c = 0; c < M; c++) {
        if (!ds->taken[c]) continue;
        int64_t len = ds->start[c + 1] - ds->start[c];
        if (total + len > cap)
            MS_FAIL(MS_ERR_RANGE, "dynaspec pick: the union of clusters exceeds the capacity %lld ids", (long long)cap);
        memcpy(ids + total, ds->members + ds->start[c], (size_t)len * sizeof(int32_t));
        total += len;
    }
    *n_ids = total;
    return MS_OK;
}

static void vsel_free(void *ctx) {
    ms_dynaspec *ds = ctx;
    ms_dynaspec_free(&ds);
}

void ms_dynaspec_vsel(ms_dynaspec *ds, ms_vsel *vs) {
    vs->name = "dynaspec";
    vs->ctx = ds;
    vs->pick = ms_dynaspec_pick;
    vs->max_ids = ds->max_ids;
    vs->free = vsel_free;
}
