/* test_vocab_union.c — vocabulary mode static+window (ms_vmode_static_window.c)
 * through the head interface, against a separate reference.
 *
 * The reference is a plain ms_vocab window fed the same begin / rounds and
 * the static list as an array; for seeded random requests (each window
 * stream) and rounds:
 *  - the head's rows (ms_head_rows) and its coverage set (ms_head_vocab) are
 *    exactly list ∪ window: same size, same membership of every id;
 *  - the head's top-k over them equals a naive top-k: double dot products with
 *    W[id] for every id of the union, log-softmax, sorted;
 *  - the window does move (ids outside the list enter and leave), so the union
 *    is not the list alone;
 *  - the name is in the table (no (vocab, vsel) pair), and a draft refuses the
 *    mode without a list file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"
#include "ms_draft.h"
#include "ms_head.h"
#include "ms_vmode.h"

enum { V = 613, D = 24, K = 40, W_MAX = 37, ROWS = 3, TOPK = 8, ROUNDS = 40, PROMPT = 30, K_PRE = 2, K_VER = 3 };

static uint64_t rng = 0x0badcafeULL;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float rndf(void) { return (float)(rnd() % 20001) / 10000.0f - 1.0f; }
static int32_t rid(void) { return (int32_t)(rnd() % V); }

static float W[V * D];
static int32_t list[K];

/* The union the head must read: in[id]. */
static int64_t want_set(const ms_vocab *window, bool *in) {
    memset(in, 0, V * sizeof *in);
    for (int64_t i = 0; i < K; i++) in[list[i]] = true;
    for (int64_t s = 0; s < ms_vocab_size(window); s++) in[ms_vocab_id_at(window, s)] = true;
    int64_t n = 0;
    for (int64_t id = 0; id < V; id++) n += in[id];
    return n;
}

static void same_set(const char *what, const ms_vocab *v, const bool *in, int64_t n) {
    CHECK(ms_vocab_size(v) == n, "%s: %lld ids, want %lld", what, (long long)ms_vocab_size(v), (long long)n);
    for (int64_t id = 0; id < V; id++)
        CHECK(ms_vocab_contains(v, (int32_t)id) == in[id], "%s: id %lld %s", what, (long long)id,
              in[id] ? "missing" : "not in list ∪ window");
}

/* Naive top-k over the ids of in[], compared with the head's. */
static void same_topk(ms_head *h, const bool *in, int64_t n) {
    float hid[ROWS * D];
    for (int64_t i = 0; i < ROWS * D; i++) hid[i] = rndf();
    int32_t ids[ROWS * TOPK];
    float logp[ROWS * TOPK];
    CHECK(ms_head_topk(h, hid, NULL, ROWS, TOPK, 0, ids, logp) == MS_OK, "head top-k");
    double *lg = malloc(V * sizeof *lg);
    for (int64_t r = 0; r < ROWS; r++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t id = 0; id < V; id++) {
            lg[id] = -INFINITY;
            if (!in[id]) continue;
            double acc = 0;
            for (int64_t j = 0; j < D; j++) acc += (double)hid[r * D + j] * W[id * D + j];
            lg[id] = acc;
            if (acc > mx) mx = acc;
        }
        for (int64_t id = 0; id < V; id++)
            if (in[id]) sum += exp(lg[id] - mx);
        const double lse = mx + log(sum);
        for (int64_t j = 0; j < TOPK && j < n; j++) {
            /* the j-th best of the reference, found by removal (the head's ids must carry the same values) */
            int64_t best = -1;
            for (int64_t id = 0; id < V; id++)
                if (in[id] && lg[id] > -INFINITY && (best < 0 || lg[id] > lg[best])) best = id;
            const int32_t got = ids[r * TOPK + j];
            CHECK(got >= 0 && got < V && in[got], "row %lld top %lld: id %d outside the union", (long long)r,
                  (long long)j, got);
            CHECK(fabs((double)logp[r * TOPK + j] - (lg[best] - lse)) < 1e-4, "row %lld top %lld: logp %g, want %g",
                  (long long)r, (long long)j, (double)logp[r * TOPK + j], lg[best] - lse);
            lg[best] = -INFINITY;
        }
    }
    free(lg);
}

static void random_ids(int32_t *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) v[i] = rnd() % 4 == 0 ? list[rnd() % K] : rid();
}

static void request(ms_head *h, ms_vocab *ref, ms_vocab_stream stream, int64_t *outside) {
    int32_t prompt[PROMPT], pre[PROMPT * K_PRE];
    random_ids(prompt, PROMPT);
    random_ids(pre, PROMPT * K_PRE);
    CHECK(ms_head_begin(h, stream, prompt, PROMPT, pre, K_PRE) == MS_OK, "begin");
    CHECK(ms_vocab_begin_stream(ref, stream, prompt, PROMPT, pre, K_PRE) == MS_OK, "reference begin");
    static bool in[V];
    for (int64_t round = 0; round <= ROUNDS; round++) {
        const int64_t n = want_set(ref, in);
        *outside += n - K;
        same_set(ms_vocab_stream_name(stream), ms_head_rows(h), in, n);
        same_set("coverage", ms_head_vocab(h), in, n);
        if (round % 8 == 0) same_topk(h, in, n);
        int32_t tree[12], emit[4], ver[4 * K_VER];
        const int64_t n_tree = 1 + rnd() % 12, n_path = 1 + rnd() % 4;
        random_ids(tree, n_tree);
        random_ids(emit, n_path);
        random_ids(ver, n_path * K_VER);
        CHECK(ms_head_append_round(h, stream, tree, n_tree, emit, n_path, ver, n_path, K_VER) == MS_OK, "round");
        CHECK(ms_vocab_stream_round(ref, stream, tree, n_tree, emit, n_path, ver, n_path, K_VER) == MS_OK,
              "reference round");
    }
}

int main(void) {
    for (int64_t i = 0; i < V * D; i++) W[i] = rndf();
    int32_t perm[V];
    for (int32_t i = 0; i < V; i++) perm[i] = i;
    for (int32_t i = V - 1; i > 0; i--) {
        int32_t j = (int32_t)(rnd() % (uint32_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    memcpy(list, perm, sizeof list);

    const ms_vmode_i *m = ms_vmode_find("static+window");
    CHECK(m && !strcmp(ms_vmode_name(m), "static+window"), "static+window is in the names table");
    ms_vocab_mode vm;
    ms_dft_vsel vs;
    CHECK(!ms_dft_vocab_parse("static+window", &vm, &vs), "static+window has no (vocab, vsel) pair");

    ms_head_opts o = {.vmode = m, .V = V, .d = D, .w_max = W_MAX, .static_ids = list, .k_static = K,
                      .max_rows = ROWS, .max_k = TOPK, .W = W};
    ms_head *h = NULL;
    ms_vocab *ref = NULL;
    if (ms_head_new(&o, &h) != MS_OK || ms_vocab_new_dynamic(NULL, V, D, W_MAX, &ref) != MS_OK) {
        CHECK(false, "head / reference window");
        return 1;
    }
    int64_t outside = 0;
    for (int s = MS_VOCAB_STREAM_BOTH; s <= MS_VOCAB_STREAM_EXTENSION; s++)
        request(h, ref, (ms_vocab_stream)s, &outside);
    CHECK(outside > 0, "the window never added an id outside the list");
    ms_head_free(&h);
    ms_vocab_free(&ref);

    ms_dft_opts d = ms_dft_opts_default();
    d.model_dir = "/nonexistent";
    d.vocab_mode = "static+window";
    ms_dft *dft = NULL;
    CHECK(ms_dft_new(&d, &dft) == MS_ERR_INVALID && !dft, "static+window without a list file is refused");
    d.vocab_mode = "no-such-mode";
    CHECK(ms_dft_new(&d, &dft) == MS_ERR_INVALID && !dft, "an unknown mode name is refused");

    if (!g_fail) printf("test_vocab_union: ok\n");
    return g_fail ? 1 : 0;
}
