/* test_cuda_vocab.c — the device dynamic vocabulary window
 * (kernels/cuda/ms_k_cuda_vocab.cu) against its CPU twin (draft-node/ms_vocab.c,
 * the specification) and an independent model of the stream.
 *
 * For several shapes (V = 151,936 and small V; W_max 7 / 64 / 3072, one W_max
 * larger than V; row widths on the 16-byte and the 2-byte copy paths; BF16 and
 * F16) a seeded, skewed random stream is appended in batches, plain and
 * distinct, with occasional resets and a batch holding an out-of-range id.
 * After every group of rounds (one round for most shapes, several issued back
 * to back with no host sync for the pipelined shapes) the device state is
 * downloaded and compared:
 *   - |I|, id_of[0..|I|) and slot_of[0..V) equal the CPU twin's (same window
 *     set and same slot layout);
 *   - inverse property: slot_of[id_of[s]] = s, exactly |I| ids have a slot;
 *   - the ring (oldest first) equals the last min(len, W_max) entries of the
 *     stream kept by this test, and counts[] equals the histogram of those
 *     entries (count > 0 ⇔ slot ≥ 0);
 *   - every packed row s < |I| equals W[id_of[s]] byte for byte.
 * The round functions (append, append_distinct, reset, gather, wait, rows)
 * must not synchronise with the host: ms_k_cuda_vocab_host_syncs() — bumped
 * by the module's only sync helper — must not move across them.
 *
 * Without a CUDA device the test runs its host-only checks, prints
 * "SKIPPED: no CUDA device" and exits 77 (ctest: skipped, never passed).
 */
#include "ms_k_cuda.h"
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

/* ---- the independent stream model: every entry actually appended ---------- */

typedef struct {
    int32_t *e;
    int64_t n, cap;
} stream;

static void stream_push(stream *s, int32_t id) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        int32_t *p = realloc(s->e, (size_t)s->cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "FAIL: out of host memory\n");
            exit(1);
        }
        s->e = p;
    }
    s->e[s->n++] = id;
}

/* ---- one shape ------------------------------------------------------------------- */

typedef struct {
    int64_t V, w_max, d;
    ms_dtype act;
    int steps, group; /* compare after every `group` rounds */
} shape;

/* Skewed ids: 80% from V·u^4 (a hot head), 20% uniform; both in [0, V). */
static int32_t draw_id(ms_rng *r, int64_t V) {
    double u = ms_rng_uniform(r);
    int64_t id = ms_rng_uniform(r) < 0.8 ? (int64_t)((double)V * u * u * u * u) : (int64_t)((double)V * u);
    return (int32_t)(id < V ? id : V - 1);
}

typedef struct {
    const shape *sh;
    ms_k_cuda_vocab *gv;
    ms_vocab *cv;
    stream s;
    const uint8_t *W; /* host [V, d] act bytes */
    size_t row_bytes;
    ms_k_cuda_vocab_state h;
    int32_t *hist; /* [V] */
} run;

static void compare(run *r, int step) {
    const shape *sh = r->sh;
    ms_status st = ms_k_cuda_vocab_download_state(r->gv, &r->h);
    CHECK(st == MS_OK, "step %d: download_state: %s", step, ms_status_str(st));
    const int64_t n = ms_vocab_size(r->cv);
    CHECK(r->h.n_active == n, "step %d: |I| %d, CPU %lld", step, r->h.n_active, (long long)n);
    if (r->h.n_active != n) return;
    int64_t bad_id = 0, bad_inv = 0, bad_row = 0, bad_slot = 0, with_slot = 0, bad_count = 0;
    for (int64_t s = 0; s < n; s++) {
        int32_t id = r->h.id_of[s];
        bad_id += id != ms_vocab_id_at(r->cv, s);
        if (id < 0 || id >= sh->V) continue;
        bad_inv += r->h.slot_of[id] != s;
        bad_row += memcmp((const uint8_t *)r->h.rows + (size_t)s * r->row_bytes, r->W + (size_t)id * r->row_bytes,
                          r->row_bytes) != 0;
    }
    /* The ring: the last min(len, W_max) entries, oldest first. */
    const int64_t want_n = r->s.n < sh->w_max ? r->s.n : sh->w_max;
    CHECK(r->h.ring_n == want_n, "step %d: ring holds %d entries, want %lld", step, r->h.ring_n, (long long)want_n);
    int64_t bad_ring = 0;
    memset(r->hist, 0, (size_t)sh->V * sizeof(int32_t));
    for (int64_t i = 0; i < want_n; i++) {
        int32_t want = r->s.e[r->s.n - want_n + i];
        r->hist[want]++;
        if (r->h.ring_n == want_n) bad_ring += r->h.ring[(r->h.head + i) % sh->w_max] != want;
    }
    for (int64_t id = 0; id < sh->V; id++) {
        int32_t so = r->h.slot_of[id];
        bad_slot += so != ms_vocab_slot_of(r->cv, (int32_t)id);
        with_slot += so >= 0;
        bad_count += r->h.counts[id] != r->hist[id] || (r->h.counts[id] > 0) != (so >= 0);
    }
    CHECK(bad_id == 0, "step %d: %lld of %lld slots hold another id than the CPU's", step, (long long)bad_id,
          (long long)n);
    CHECK(bad_inv == 0, "step %d: slot_of[id_of[s]] != s at %lld slots", step, (long long)bad_inv);
    CHECK(bad_slot == 0, "step %d: slot_of differs from the CPU's at %lld ids", step, (long long)bad_slot);
    CHECK(with_slot == n, "step %d: %lld ids have a slot, |I| = %lld", step, (long long)with_slot, (long long)n);
    CHECK(bad_ring == 0, "step %d: %lld ring entries differ from the stream", step, (long long)bad_ring);
    CHECK(bad_count == 0, "step %d: %lld counts differ from the ring's histogram", step, (long long)bad_count);
    CHECK(bad_row == 0, "step %d: %lld packed rows differ from W[id]", step, (long long)bad_row);
}

static void run_shape(const shape *sh, uint64_t seed) {
    printf("shape V=%lld W_max=%lld d=%lld %s, %d steps in groups of %d\n", (long long)sh->V, (long long)sh->w_max,
           (long long)sh->d, ms_dtype_name(sh->act), sh->steps, sh->group);
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    run r = {.sh = sh, .row_bytes = (size_t)sh->d * 2};
    /* W: random bytes (any 16-bit pattern; rows are copied, never computed). */
    const size_t w_bytes = (size_t)sh->V * r.row_bytes;
    uint8_t *W = xmalloc(w_bytes);
    for (size_t i = 0; i < w_bytes; i++) W[i] = (uint8_t)(ms_rng_u64(&rng) >> 56);
    r.W = W;
    void *dW;
    need(ms_k_cuda_malloc(&dW, w_bytes), "malloc W");
    need(ms_k_cuda_upload(NULL, dW, W, w_bytes), "upload W");

    cudaStream_t compute, copy;
    need_cuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "stream");
    need_cuda(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking), "stream");
    need(ms_k_cuda_vocab_new(sh->V, sh->w_max, sh->d, sh->act, dW, compute, copy, &r.gv), "cuda vocab new");
    CHECK(ms_k_cuda_vocab_w_max(r.gv) == sh->w_max, "w_max");
    need(ms_vocab_new_dynamic(NULL, sh->V, sh->d, sh->w_max, &r.cv), "cpu vocab new");
    r.h.counts = xmalloc((size_t)sh->V * sizeof(int32_t));
    r.h.slot_of = xmalloc((size_t)sh->V * sizeof(int32_t));
    r.h.ring = xmalloc((size_t)sh->w_max * sizeof(int32_t));
    r.h.id_of = xmalloc((size_t)sh->w_max * sizeof(int32_t));
    r.h.rows = xmalloc((size_t)sh->w_max * r.row_bytes);
    r.hist = xmalloc((size_t)sh->V * sizeof(int32_t));

    /* Per round at most two appends of up to 2·W_max + 8 ids each. */
    const int64_t per_append = 2 * sh->w_max + 8;
    const int64_t cap = (int64_t)sh->group * 2 * per_append;
    int32_t *ids = xmalloc((size_t)cap * sizeof(int32_t));
    int32_t *d_ids;
    need(ms_k_cuda_malloc((void **)&d_ids, (size_t)cap * sizeof(int32_t)), "malloc ids");
    uint8_t *seen = xmalloc((size_t)sh->V);

    int64_t appended = 0;
    for (int step = 0; step < sh->steps; step += sh->group) {
        /* Plan the group's rounds on the host first: the ids upload must not
         * overlap the in-flight appends that read them. */
        typedef struct {
            int64_t off, n;
            bool distinct;
            bool reset_before, bad;
            bool explicit_gather;
        } op;
        op ops[64];
        int n_ops = 0;
        int64_t used = 0;
        for (int g = 0; g < sh->group && step + g < sh->steps; g++) {
            int k = 1 + (int)(ms_rng_u64(&rng) % 2);
            for (int j = 0; j < k; j++) {
                op o = {.off = used};
                double u = ms_rng_uniform(&rng);
                o.n = u < 0.05 ? 0 : u < 0.15 ? per_append : (int64_t)(ms_rng_u64(&rng) % (uint64_t)per_append);
                o.distinct = ms_rng_u64(&rng) % 2;
                o.reset_before = ms_rng_uniform(&rng) < 0.03;
                o.bad = sh->group == 1 && o.n > 0 && ms_rng_uniform(&rng) < 0.04;
                o.explicit_gather = j == k - 1 && ms_rng_u64(&rng) % 2;
                for (int64_t i = 0; i < o.n; i++) ids[used + i] = draw_id(&rng, sh->V);
                if (o.bad) ids[used + (int64_t)(ms_rng_u64(&rng) % (uint64_t)o.n)] = ms_rng_u64(&rng) % 2 ? -1 : (int32_t)sh->V;
                used += o.n;
                ops[n_ops++] = o;
            }
        }
        need(ms_k_cuda_upload(NULL, d_ids, ids, (size_t)used * sizeof(int32_t)), "upload ids");

        /* The device rounds: no host synchronisation allowed in here. */
        const int64_t syncs0 = ms_k_cuda_vocab_host_syncs();
        bool any_bad = false;
        for (int i = 0; i < n_ops; i++) {
            const op *o = &ops[i];
            if (o->reset_before) need(ms_k_cuda_vocab_reset(r.gv), "reset");
            const int32_t *p = d_ids + o->off;
            need(o->distinct ? ms_k_cuda_vocab_append_distinct(r.gv, p, o->n) : ms_k_cuda_vocab_append(r.gv, p, o->n),
                 "append");
            if (o->explicit_gather) need(ms_k_cuda_vocab_gather(r.gv), "gather");
            const void *rows;
            const int32_t *n_active, *id_of;
            ms_k_cuda_vocab_rows(r.gv, &rows, &n_active, &id_of);
            need(ms_k_cuda_vocab_wait(r.gv, compute), "wait");
            any_bad |= o->bad;
        }
        CHECK(ms_k_cuda_vocab_host_syncs() == syncs0, "step %d: the round functions synchronised with the host %lld times",
              step, (long long)(ms_k_cuda_vocab_host_syncs() - syncs0));

        /* The CPU twin and the stream model, same operations. */
        const ms_log_level lvl = ms_log_get_level();
        ms_log_set_level(MS_LOG_OFF);
        for (int i = 0; i < n_ops; i++) {
            const op *o = &ops[i];
            if (o->reset_before) {
                ms_vocab_reset(r.cv);
                r.s.n = 0;
            }
            const int32_t *p = ids + o->off;
            ms_status st = o->distinct ? ms_vocab_append_distinct(r.cv, p, o->n) : ms_vocab_append(r.cv, p, o->n);
            CHECK((st == MS_ERR_INVALID) == o->bad, "step %d: CPU append status %s", step, ms_status_str(st));
            if (o->bad) continue;
            memset(seen, 0, (size_t)sh->V);
            for (int64_t j = 0; j < o->n; j++) {
                if (o->distinct && seen[p[j]]) continue;
                seen[p[j]] = 1;
                stream_push(&r.s, p[j]);
                appended++;
            }
        }
        if (any_bad) {
            ms_status st = ms_k_cuda_vocab_download_state(r.gv, &r.h);
            CHECK(st == MS_ERR_INVALID, "step %d: an out-of-range id was not reported (%s)", step, ms_status_str(st));
        }
        ms_log_set_level(lvl);
        compare(&r, step);
        if (g_fail) break;
    }
    printf("  %lld entries appended, final |I| = %lld\n", (long long)appended, (long long)ms_vocab_size(r.cv));

    ms_k_cuda_vocab_free(&r.gv);
    CHECK(r.gv == NULL, "free nulls the window");
    ms_vocab_free(&r.cv);
    ms_k_cuda_free((void **)&d_ids);
    ms_k_cuda_free(&dW);
    need_cuda(cudaStreamDestroy(compute), "stream destroy");
    need_cuda(cudaStreamDestroy(copy), "stream destroy");
    free(r.h.counts);
    free(r.h.slot_of);
    free(r.h.ring);
    free(r.h.id_of);
    free(r.h.rows);
    free(r.hist);
    free(r.s.e);
    free(ids);
    free(seen);
    free(W);
}

/* Argument checks that fail before any CUDA call. */
static void test_bad_args(void) {
    const ms_log_level lvl = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    ms_k_cuda_vocab *v = (ms_k_cuda_vocab *)(uintptr_t)1; /* must be nulled (never dereferenced) */
    int dummy;
    CHECK(ms_k_cuda_vocab_new(0, 8, 4, MS_DTYPE_BF16, &dummy, NULL, NULL, &v) == MS_ERR_INVALID && !v, "V = 0");
    CHECK(ms_k_cuda_vocab_new(8, 0, 4, MS_DTYPE_BF16, &dummy, NULL, NULL, &v) == MS_ERR_INVALID, "W_max = 0");
    CHECK(ms_k_cuda_vocab_new(8, 8, 0, MS_DTYPE_BF16, &dummy, NULL, NULL, &v) == MS_ERR_INVALID, "d = 0");
    CHECK(ms_k_cuda_vocab_new(8, 8, 4, MS_DTYPE_F32, &dummy, NULL, NULL, &v) == MS_ERR_INVALID, "f32 rows");
    CHECK(ms_k_cuda_vocab_new(8, 8, 4, MS_DTYPE_F16, NULL, NULL, NULL, &v) == MS_ERR_INVALID, "no W");
    CHECK(ms_k_cuda_vocab_new((int64_t)INT32_MAX + 1, 8, 4, MS_DTYPE_F16, &dummy, NULL, NULL, &v) == MS_ERR_INVALID,
          "V past int32");
    ms_log_set_level(lvl);
    ms_k_cuda_vocab_free(NULL);
    v = NULL;
    ms_k_cuda_vocab_free(&v);
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
    static const shape shapes[] = {
        {151936, 3072, 64, MS_DTYPE_BF16, 40, 1},  /* the default window, 16-byte rows path */
        {151936, 64, 129, MS_DTYPE_F16, 80, 1},    /* 2-byte path (258-byte rows) */
        {1000, 7, 8, MS_DTYPE_BF16, 300, 1},       /* tiny window: constant churn */
        {50, 64, 3, MS_DTYPE_F16, 150, 1},         /* W_max > V */
        {5000, 64, 128, MS_DTYPE_BF16, 120, 3},    /* pipelined: rounds back to back, no host sync */
        {151936, 3072, 128, MS_DTYPE_F16, 24, 4},  /* pipelined, default window */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !g_fail; i++) run_shape(&shapes[i], 0x5eed + i);
    if (g_fail) {
        fprintf(stderr, "test_cuda_vocab: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_cuda_vocab: the device window matches the CPU twin\n");
    return 0;
}
