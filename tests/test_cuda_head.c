/* test_cuda_head.c — the draft head interface (draft-node/ms_head.h) on the
 * device against the same interface on the host: the device window twin
 * (kernels/cuda/ms_k_cuda_vocab.cu, fed through the backend table's draft
 * head) and the C window (draft-node/ms_vocab.c, the specification) must
 * hold the same window and slot layout after every begin / append_round of a
 * seeded, skewed stream, for the three window streams; and the top-k of
 * both heads over the same hidden rows must name the same ids with the same
 * log-probs (up to f32 GEMM rounding: a swap is allowed only between
 * log-probs within the tolerance), for full / static / dynamic × gathered /
 * indexed. The head rows and hidden rows are BF16 values, so both sides
 * read the same numbers.
 *
 * Host-only first: the CPU backend has no device head, and asking for one
 * is refused. Then without a CUDA device it prints "SKIPPED: no CUDA device"
 * and exits 77 (ctest: skipped, never passed).
 */
#include "ms_head.h"
#include "ms_k_cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

enum { V = 3000, D = 64, W_MAX = 96, ROWS = 4, K = 6, PROMPT = 40, ROUNDS = 30 };

static void need(ms_status s, const char *what) {
    if (s != MS_OK) {
        fprintf(stderr, "FAIL: %s: %s\n", what, ms_status_str(s));
        exit(1);
    }
}

/* Values that BF16 holds exactly, so host f32 and device BF16 agree. */
static void bf16_values(ms_rng *r, float *f, uint16_t *b, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) f[i] = scale * (float)(ms_rng_uniform(r) * 2.0 - 1.0);
    ms_convert_from_f32(b, MS_DTYPE_BF16, f, n);
    ms_convert_to_f32(f, b, MS_DTYPE_BF16, n);
}

static int32_t draw(ms_rng *r) {
    double u = ms_rng_uniform(r);
    return (int32_t)((double)V * u * u); /* skewed: repeats are common */
}

static void host_only(void) {
    const ms_k_backend *cpu = ms_k_backend_cpu();
    CHECK(cpu && !cpu->head.head_new, "the CPU backend offers a device head");
    float w[4] = {0};
    ms_head_opts o = {.mode = MS_VOCAB_FULL, .V = 2, .d = 2, .max_rows = 1, .max_k = 1, .be = cpu, .W_dev = w};
    ms_head *h = NULL;
    ms_log_level lvl = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    CHECK(ms_head_new(&o, &h) == MS_ERR_INVALID && !h, "a device head on the CPU backend was made");
    ms_log_set_level(lvl);
}

typedef struct {
    ms_vocab_mode mode;
    bool indexed;
    ms_vocab_stream stream;
} head_case;

static void same_window(ms_head *dev, ms_head *host, const char *name, int step) {
    void *win = ms_head_device_window(dev);
    CHECK(win != NULL, "%s: no device window", name);
    if (!win) return;
    static int32_t counts[V], slot_of[V], ring[W_MAX], id_of[W_MAX];
    ms_k_cuda_vocab_state st = {.counts = counts, .slot_of = slot_of, .ring = ring, .id_of = id_of};
    CHECK(ms_k_cuda_vocab_download_state(win, &st) == MS_OK, "%s step %d: download_state", name, step);
    const ms_vocab *cv = ms_head_vocab(host);
    const int64_t n = ms_vocab_size(cv);
    CHECK(st.n_active == n, "%s step %d: device |I| %d, C window %lld", name, step, st.n_active, (long long)n);
    int64_t bad = 0;
    for (int64_t s = 0; s < n && s < W_MAX; s++) bad += id_of[s] != ms_vocab_id_at(cv, s);
    for (int64_t id = 0; id < V; id++) bad += slot_of[id] != ms_vocab_slot_of(cv, (int32_t)id);
    CHECK(bad == 0, "%s step %d: %lld slot / id differences", name, step, (long long)bad);
}

static void same_topk(ms_head *dev, ms_head *host, const float *hid, const void *d_hid, const char *name, int step) {
    int32_t ia[ROWS * K], ib[ROWS * K];
    float la[ROWS * K], lb[ROWS * K];
    CHECK(ms_head_topk(dev, NULL, d_hid, ROWS, K, 7, ia, la) == MS_OK, "%s step %d: device top-k", name, step);
    CHECK(ms_head_topk(host, hid, NULL, ROWS, K, 7, ib, lb) == MS_OK, "%s step %d: host top-k", name, step);
    for (int i = 0; i < ROWS * K; i++) {
        const bool inf_a = isinf(la[i]), inf_b = isinf(lb[i]);
        CHECK(inf_a == inf_b, "%s step %d [%d]: log-prob %g on the device, %g on the host", name, step, i, la[i], lb[i]);
        if (inf_a || inf_b) continue;
        const float tol = 2e-3f + 2e-3f * fabsf(lb[i]);
        CHECK(fabsf(la[i] - lb[i]) <= tol, "%s step %d [%d]: log-prob %g vs %g", name, step, i, la[i], lb[i]);
        /* a different id only as a near tie: the host's log-prob of the
         * device's id must sit within the tolerance at the same rank */
        if (ia[i] != ib[i]) {
            bool tie = false;
            for (int j = (i / K) * K; j < (i / K + 1) * K; j++) tie |= ib[j] == ia[i] && fabsf(lb[j] - lb[i]) <= tol;
            CHECK(tie, "%s step %d [%d]: id %d on the device, %d on the host", name, step, i, ia[i], ib[i]);
        }
    }
}

static void run_case(const head_case *c, const ms_k_ops *ops, void *stream, const float *W, const void *d_W,
                     const float *hid, const void *d_hid, uint64_t seed) {
    char name[96];
    snprintf(name, sizeof name, "%s/%s/%s", ms_vocab_mode_name(c->mode), c->indexed ? "indexed" : "gathered",
             ms_vocab_stream_name(c->stream));
    int32_t static_ids[W_MAX];
    for (int i = 0; i < W_MAX; i++) static_ids[i] = (int32_t)((i * 37 + 11) % V); /* distinct: 37 ⟂ V */
    ms_head_opts o = {.mode = c->mode,
                      .indexed = c->indexed,
                      .V = V,
                      .d = D,
                      .w_max = W_MAX,
                      .static_ids = static_ids,
                      .k_static = W_MAX,
                      .max_rows = ROWS,
                      .max_k = K,
                      .W = W};
    ms_head *host = NULL, *dev = NULL;
    need(ms_head_new(&o, &host), "host head");
    o.W = NULL;
    o.be = ms_k_backend_cuda();
    o.dev = 0;
    o.ops = ops;
    o.stream = stream;
    o.act = MS_DTYPE_BF16;
    o.W_dev = d_W;
    o.max_append = 4096;
    need(ms_head_new(&o, &dev), "device head");
    CHECK(ms_head_on_device(dev) && !ms_head_on_device(host), "%s: head placement", name);
    ms_rng r;
    ms_rng_seed(&r, seed);
    int32_t prompt[PROMPT], pre[PROMPT * 3], tree[60], emit[12], ver[12 * 4];
    for (int begin = 0; begin < 2; begin++) {
        for (int i = 0; i < PROMPT; i++) prompt[i] = draw(&r);
        for (int i = 0; i < PROMPT * 3; i++) pre[i] = draw(&r);
        const int64_t k_pre = (int64_t)(ms_rng_u64(&r) % 4);
        need(ms_head_begin(host, c->stream, prompt, PROMPT, pre, k_pre), "host begin");
        need(ms_head_begin(dev, c->stream, prompt, PROMPT, pre, k_pre), "device begin");
        for (int step = 0; step < ROUNDS && !g_fail; step++) {
            if (c->mode == MS_VOCAB_DYNAMIC) same_window(dev, host, name, step);
            same_topk(dev, host, hid, d_hid, name, step);
            const int64_t n_tree = (int64_t)(ms_rng_u64(&r) % 60), n_emit = 1 + (int64_t)(ms_rng_u64(&r) % 12);
            const int64_t n_path = (int64_t)(ms_rng_u64(&r) % 13), k_ver = (int64_t)(ms_rng_u64(&r) % 5);
            for (int64_t i = 0; i < n_tree; i++) tree[i] = draw(&r);
            for (int64_t i = 0; i < n_emit; i++) emit[i] = draw(&r);
            for (int64_t i = 0; i < n_path * k_ver; i++) ver[i] = draw(&r);
            need(ms_head_append_round(host, c->stream, tree, n_tree, emit, n_emit, ver, n_path, k_ver), "host round");
            need(ms_head_append_round(dev, c->stream, tree, n_tree, emit, n_emit, ver, n_path, k_ver), "device round");
        }
    }
    ms_head_free(&dev);
    ms_head_free(&host);
}

int main(void) {
    host_only();
    if (g_fail) return 1;
    if (ms_k_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    need(ms_k_cuda_set_device(0), "set device");
    ms_rng r;
    ms_rng_seed(&r, 0x4ead);
    float *W = malloc((size_t)V * D * sizeof(float)), hid[ROWS * D];
    uint16_t *Wb = malloc((size_t)V * D * sizeof(uint16_t)), hidb[ROWS * D];
    if (!W || !Wb) need(MS_ERR_NOMEM, "host memory");
    bf16_values(&r, W, Wb, (int64_t)V * D, 0.5f);
    bf16_values(&r, hid, hidb, ROWS * D, 1.0f);
    void *stream = NULL, *d_W = NULL, *d_hid = NULL;
    need(ms_k_cuda_stream_new(&stream), "stream");
    const ms_k_ops *ops = ms_k_cuda_ops(MS_DTYPE_BF16, stream);
    if (!ops) need(MS_ERR_INTERNAL, "op table");
    need(ms_k_cuda_malloc(&d_W, (size_t)V * D * sizeof(uint16_t)), "W");
    need(ms_k_cuda_malloc(&d_hid, sizeof hidb), "hid");
    need(ms_k_cuda_upload(ops, d_W, Wb, (size_t)V * D * sizeof(uint16_t)), "W upload");
    need(ms_k_cuda_upload(ops, d_hid, hidb, sizeof hidb), "hid upload");
    static const head_case cases[] = {
        {MS_VOCAB_DYNAMIC, false, MS_VOCAB_STREAM_BOTH},   {MS_VOCAB_DYNAMIC, true, MS_VOCAB_STREAM_BOTH},
        {MS_VOCAB_DYNAMIC, false, MS_VOCAB_STREAM_CONTEXT}, {MS_VOCAB_DYNAMIC, false, MS_VOCAB_STREAM_EXTENSION},
        {MS_VOCAB_STATIC, false, MS_VOCAB_STREAM_BOTH},    {MS_VOCAB_STATIC, true, MS_VOCAB_STREAM_BOTH},
        {MS_VOCAB_FULL, false, MS_VOCAB_STREAM_BOTH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !g_fail; i++)
        run_case(&cases[i], ops, stream, W, d_W, hid, d_hid, 0x5eed + i);
    ms_k_cuda_free(&d_hid);
    ms_k_cuda_free(&d_W);
    ms_k_cuda_ops_destroy(&ops);
    ms_k_cuda_stream_free(&stream);
    free(W);
    free(Wb);
    if (g_fail) {
        fprintf(stderr, "test_cuda_head: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_cuda_head: the device head and window match the host's\n");
    return 0;
}
