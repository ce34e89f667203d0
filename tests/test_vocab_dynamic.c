/* test_vocab_dynamic.c — the MicroSpec dynamic window (docs/architecture.md §5) against
 * its definition, recomputed naively here: keep the whole stream S, take its
 * last W_max entries, the set of distinct ids. Checked after every append batch
 * on random skewed streams (ids repeat and leave), for several W_max and V:
 * set equality, |I| ≤ W_max, slot/id maps inverse to each other, every packed
 * row byte-equal to W's row for its id, and the entering list replaying onto a
 * copy. S_init and the per-round additions against naive versions of their
 * rules. Seeded, deterministic.
 */
#include "ms_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

/* Stop a property loop after the first failures so the log stays readable. */
#define BAIL()                          \
    do {                                \
        if (g_fail > 20) goto bail;     \
    } while (0)

/* ---- the naive reference -------------------------------------------------- */

typedef struct {
    int32_t *s;
    int64_t n, cap;
} stream;

static void stream_push(stream *st, int32_t id) {
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 1024;
        st->s = realloc(st->s, (size_t)st->cap * sizeof(int32_t));
    }
    st->s[st->n++] = id;
}

/* Unique(Suffix(S, w_max)) as flags in_win[V] (cleared by the caller via
 * naive_clear); returns the number of distinct ids. */
static int64_t naive_window(const stream *st, int64_t w_max, uint8_t *in_win) {
    int64_t from = st->n > w_max ? st->n - w_max : 0, m = 0;
    for (int64_t i = from; i < st->n; i++)
        if (!in_win[st->s[i]]) {
            in_win[st->s[i]] = 1;
            m++;
        }
    return m;
}

static void naive_clear(const stream *st, int64_t w_max, uint8_t *in_win) {
    int64_t from = st->n > w_max ? st->n - w_max : 0;
    for (int64_t i = from; i < st->n; i++) in_win[st->s[i]] = 0;
}

/* S_init written from its definition: prompt ids, then the union of the
 * top-K_pre lists position by position (linear search, no cleverness). */
static void naive_init(stream *st, const int32_t *prompt, int64_t n_prompt, const int32_t *topk, int64_t k_pre) {
    for (int64_t i = 0; i < n_prompt; i++) stream_push(st, prompt[i]);
    int32_t *uni = malloc((size_t)(n_prompt * k_pre + 1) * sizeof(int32_t));
    int64_t nu = 0;
    for (int64_t i = 0; i < n_prompt * k_pre; i++) {
        bool dup = false;
        for (int64_t j = 0; j < nu; j++) dup |= uni[j] == topk[i];
        if (!dup) {
            uni[nu++] = topk[i];
            stream_push(st, topk[i]);
        }
    }
    free(uni);
}

/* Distinct elements of a[n] in first-occurrence order, appended to st. */
static void naive_distinct(stream *st, const int32_t *a, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        bool dup = false;
        for (int64_t j = 0; j < i; j++) dup |= a[j] == a[i];
        if (!dup) stream_push(st, a[i]);
    }
}

/* ---- shared fixtures -------------------------------------------------------- */

static float *make_W(int64_t V, int64_t d, uint64_t seed) {
    ms_rng r;
    ms_rng_seed(&r, seed);
    float *W = malloc((size_t)V * (size_t)d * sizeof(float));
    for (int64_t i = 0; i < V * d; i++) W[i] = ms_rng_normal(&r);
    return W;
}

/* Skewed ids: a hot band that drifts over time (so ids leave the window),
 * cubic skew inside it (so ids repeat), and some uniform noise. */
static int32_t skewed_id(ms_rng *r, int64_t V, int64_t t) {
    double u = ms_rng_uniform(r);
    if (ms_rng_uniform(r) < 0.1) return (int32_t)(ms_rng_u64(r) % (uint64_t)V);
    int64_t band = V < 64 ? V : V / 8 + 1;
    int64_t base = (t / 500) * (band / 3 + 1);
    return (int32_t)((base + (int64_t)(u * u * u * (double)band)) % V);
}

/* Everything the window must satisfy against the naive one. `shadow` [w_max, d]
 * is a copy kept up to date only through ms_vocab_take_entering. */
static void check_window(const ms_vocab *v, const stream *st, int64_t w_max, const float *W, int64_t V, int64_t d,
                         uint8_t *in_win, const char *ctx) {
    int64_t want = naive_window(st, w_max, in_win);
    const float *rows;
    const int32_t *id_of;
    int64_t n;
    ms_vocab_rows(v, &rows, &n, &id_of);
    CHECK(n == want, "%s: |I| = %lld, naive %lld (stream %lld)", ctx, (long long)n, (long long)want,
          (long long)st->n);
    CHECK(n == ms_vocab_size(v), "%s: rows n vs size", ctx);
    CHECK(n <= w_max, "%s: |I| = %lld > W_max %lld", ctx, (long long)n, (long long)w_max);
    for (int64_t s = 0; s < n; s++) {
        int32_t id = id_of[s];
        if (id < 0 || id >= V) {
            CHECK(false, "%s: slot %lld holds id %d out of range", ctx, (long long)s, id);
            continue;
        }
        CHECK(in_win[id] == 1, "%s: slot %lld id %d not in the naive window (or twice)", ctx, (long long)s, id);
        if (in_win[id] == 1) in_win[id] = 2; /* a second slot with the same id fails the check above */
        CHECK(ms_vocab_slot_of(v, id) == s, "%s: slot_of[%d] = %lld, expected %lld", ctx, id,
              (long long)ms_vocab_slot_of(v, id), (long long)s);
        CHECK(ms_vocab_id_at(v, s) == id, "%s: id_at(%lld)", ctx, (long long)s);
        if (W)
            CHECK(memcmp(rows + s * d, W + (int64_t)id * d, (size_t)d * sizeof(float)) == 0,
                  "%s: packed row %lld differs from W row %d", ctx, (long long)s, id);
    }
    /* Every naive id was seen in a slot (flag 2) and contains() agrees. */
    int64_t from = st->n > w_max ? st->n - w_max : 0;
    for (int64_t i = from; i < st->n; i++) {
        int32_t id = st->s[i];
        if (in_win[id] == 0) continue;
        CHECK(in_win[id] == 2, "%s: naive id %d has no slot", ctx, id);
        CHECK(ms_vocab_contains(v, id), "%s: contains(%d) false", ctx, id);
        in_win[id] = 0;
    }
    naive_clear(st, w_max, in_win);
    CHECK(!ms_vocab_contains(v, -1) && !ms_vocab_contains(v, (int32_t)V), "%s: out-of-range contains", ctx);
}

/* Random ids not in the naive window must not be contained. */
static void check_absent(const ms_vocab *v, const stream *st, int64_t w_max, int64_t V, uint8_t *in_win, ms_rng *r,
                         const char *ctx) {
    naive_window(st, w_max, in_win);
    for (int i = 0; i < 32; i++) {
        int32_t id = (int32_t)(ms_rng_u64(r) % (uint64_t)V);
        CHECK(ms_vocab_contains(v, id) == (in_win[id] != 0), "%s: contains(%d) = %d, naive %d", ctx, id,
              ms_vocab_contains(v, id), in_win[id]);
    }
    naive_clear(st, w_max, in_win);
}

/* Apply the entering pairs to shadow and compare the live rows. */
static void check_replay(ms_vocab *v, float *shadow, const float *W, int64_t d, const char *ctx) {
    const int32_t *slots, *ids;
    int64_t m;
    ms_vocab_take_entering(v, &slots, &ids, &m);
    int64_t n = ms_vocab_size(v);
    CHECK(m <= n, "%s: %lld entering pairs for %lld slots", ctx, (long long)m, (long long)n);
    for (int64_t i = 0; i < m; i++) {
        CHECK(slots[i] >= 0 && slots[i] < n, "%s: entering slot %d", ctx, slots[i]);
        CHECK(ms_vocab_id_at(v, slots[i]) == ids[i], "%s: entering pair (%d, %d) stale", ctx, slots[i], ids[i]);
        for (int64_t j = 0; j < i; j++) CHECK(slots[j] != slots[i], "%s: slot %d listed twice", ctx, slots[i]);
        memcpy(shadow + (int64_t)slots[i] * d, W + (int64_t)ids[i] * d, (size_t)d * sizeof(float));
    }
    for (int64_t s = 0; s < n; s++)
        CHECK(memcmp(shadow + s * d, W + (int64_t)ms_vocab_id_at(v, s) * d, (size_t)d * sizeof(float)) == 0,
              "%s: replayed copy differs at slot %lld", ctx, (long long)s);
}

/* ---- the property run ------------------------------------------------------- */

static void run_property(int64_t V, int64_t w_max, int64_t rounds, uint64_t seed) {
    const int64_t d = 5;
    char ctx[128];
    float *W = make_W(V, d, seed);
    ms_vocab *v = NULL, *vn = NULL; /* vn: W == NULL, maps only */
    uint8_t *in_win = NULL;
    float *shadow = NULL;
    stream st = {0};
    CHECK(ms_vocab_new_dynamic(W, V, d, w_max, &v) == MS_OK, "new_dynamic V=%lld w=%lld", (long long)V,
          (long long)w_max);
    CHECK(ms_vocab_new_dynamic(NULL, V, d, w_max, &vn) == MS_OK, "new_dynamic without W");
    if (!v || !vn) goto bail;
    CHECK(ms_vocab_mode_of(v) == MS_VOCAB_DYNAMIC && ms_vocab_size(v) == 0, "fresh window");
    in_win = calloc((size_t)V, 1);
    shadow = calloc((size_t)(w_max * d), sizeof(float));
    int32_t batch[200];
    ms_rng r;
    ms_rng_seed(&r, seed ^ 0x5eed);
    int64_t t = 0;
    for (int64_t round = 0; round < rounds; round++) {
        int64_t n = (int64_t)(ms_rng_u64(&r) % 201); /* 0..200 */
        if (ms_rng_uniform(&r) < 0.3) n = (int64_t)(ms_rng_u64(&r) % 8); /* many short batches too */
        for (int64_t i = 0; i < n; i++) batch[i] = skewed_id(&r, V, t++);
        ms_vocab_counters c0 = ms_vocab_counters_get(v);
        CHECK(ms_vocab_append(v, batch, n) == MS_OK, "append");
        CHECK(ms_vocab_append(vn, batch, n) == MS_OK, "append (no W)");
        for (int64_t i = 0; i < n; i++) stream_push(&st, batch[i]);
        ms_vocab_counters c1 = ms_vocab_counters_get(v);
        CHECK(c1.appended - c0.appended == n, "appended counter");
        CHECK(c1.gathered - c0.gathered <= n && c1.moved - c0.moved <= n, "work bounded by the batch");
        snprintf(ctx, sizeof ctx, "V=%lld W_max=%lld round %lld", (long long)V, (long long)w_max, (long long)round);
        check_window(v, &st, w_max, W, V, d, in_win, ctx);
        check_window(vn, &st, w_max, NULL, V, d, in_win, ctx);
        check_replay(vn, shadow, W, d, ctx);
        if (round % 16 == 0) check_absent(v, &st, w_max, V, in_win, &r, ctx);
        /* Both vocabularies take the same decisions: identical slot layout. */
        const int32_t *a, *b;
        int64_t na, nb;
        ms_vocab_rows(v, NULL, &na, &a);
        ms_vocab_rows(vn, NULL, &nb, &b);
        CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0, "%s: W/no-W layouts differ", ctx);
        /* Now and then a reset: a new request starts an empty stream. */
        if (ms_rng_uniform(&r) < 0.01) {
            ms_vocab_reset(v);
            ms_vocab_reset(vn);
            st.n = 0;
            check_window(v, &st, w_max, W, V, d, in_win, ctx);
            CHECK(ms_vocab_size(v) == 0, "%s: reset left %lld ids", ctx, (long long)ms_vocab_size(v));
        }
        BAIL();
    }
    printf("  V=%-7lld W_max=%-5lld rounds=%lld entries=%lld final |I|=%lld counters: gathered %lld moved %lld\n",
           (long long)V, (long long)w_max, (long long)rounds, (long long)ms_vocab_counters_get(v).appended,
           (long long)ms_vocab_size(v), (long long)ms_vocab_counters_get(v).gathered,
           (long long)ms_vocab_counters_get(v).moved);
bail:
    free(st.s);
    free(in_win);
    free(shadow);
    ms_vocab_free(&v);
    ms_vocab_free(&vn);
    CHECK(v == NULL, "free nulls the pointer");
    free(W);
}

/* S_init and append_round against their naive rules, then more rounds. */
static void run_init_and_rounds(int64_t V, int64_t w_max, uint64_t seed) {
    const int64_t d = 3;
    char ctx[128];
    float *W = make_W(V, d, seed);
    ms_vocab *v = NULL, *v2 = NULL;
    uint8_t *in_win = NULL;
    stream st = {0};
    CHECK(ms_vocab_new_dynamic(W, V, d, w_max, &v) == MS_OK, "new_dynamic");
    CHECK(ms_vocab_new_dynamic(W, V, d, w_max, &v2) == MS_OK, "new_dynamic");
    if (!v || !v2) goto bail;
    in_win = calloc((size_t)V, 1);
    ms_rng r;
    ms_rng_seed(&r, seed);
    for (int req = 0; req < 40; req++) {
        /* Stale state from the previous request must not leak: init resets. */
        int64_t n_prompt = (int64_t)(ms_rng_u64(&r) % 300), k_pre = (int64_t)(ms_rng_u64(&r) % 5);
        int32_t *prompt = malloc((size_t)(n_prompt + 1) * sizeof(int32_t));
        int32_t *topk = malloc((size_t)(n_prompt * k_pre + 1) * sizeof(int32_t));
        for (int64_t i = 0; i < n_prompt; i++) prompt[i] = skewed_id(&r, V, i);
        for (int64_t i = 0; i < n_prompt * k_pre; i++) topk[i] = skewed_id(&r, V, i + 7);
        ms_vocab_counters c0 = ms_vocab_counters_get(v);
        CHECK(ms_vocab_init_stream(v, prompt, n_prompt, k_pre ? topk : NULL, k_pre) == MS_OK, "init_stream");
        CHECK(ms_vocab_init_stream(v2, prompt, n_prompt, k_pre ? topk : NULL, k_pre) == MS_OK, "init_stream v2");
        st.n = 0;
        naive_init(&st, prompt, n_prompt, topk, k_pre);
        CHECK(ms_vocab_counters_get(v).appended - c0.appended == st.n, "req %d: S_init length %lld, naive %lld", req,
              (long long)(ms_vocab_counters_get(v).appended - c0.appended), (long long)st.n);
        snprintf(ctx, sizeof ctx, "init V=%lld W_max=%lld req %d", (long long)V, (long long)w_max, req);
        check_window(v, &st, w_max, W, V, d, in_win, ctx);
        /* Rounds: a tree of ≤ 64 node ids (repeats), a path of ≤ 6 nodes with K_ver ids each. */
        for (int round = 0; round < 60; round++) {
            int32_t tree[64], ver[6 * 4];
            int64_t n_tree = 1 + (int64_t)(ms_rng_u64(&r) % 64), n_path = (int64_t)(ms_rng_u64(&r) % 7);
            int64_t k_ver = 1 + (int64_t)(ms_rng_u64(&r) % 4);
            for (int64_t i = 0; i < n_tree; i++) tree[i] = skewed_id(&r, V, req * 1000 + round);
            for (int64_t i = 0; i < n_path * k_ver; i++) ver[i] = skewed_id(&r, V, req * 1000 + round + 3);
            c0 = ms_vocab_counters_get(v);
            CHECK(ms_vocab_append_round(v, tree, n_tree, ver, n_path, k_ver) == MS_OK, "append_round");
            /* The same additions as two separate unions (the sync pipeline's order). */
            CHECK(ms_vocab_append_distinct(v2, tree, n_tree) == MS_OK &&
                      ms_vocab_append_distinct(v2, ver, n_path * k_ver) == MS_OK,
                  "append_distinct");
            int64_t before = st.n;
            naive_distinct(&st, tree, n_tree);
            naive_distinct(&st, ver, n_path * k_ver);
            CHECK(ms_vocab_counters_get(v).appended - c0.appended == st.n - before, "round %d: appended %lld, naive %lld",
                  round, (long long)(ms_vocab_counters_get(v).appended - c0.appended), (long long)(st.n - before));
            snprintf(ctx, sizeof ctx, "round V=%lld W_max=%lld req %d round %d", (long long)V, (long long)w_max, req,
                     round);
            check_window(v, &st, w_max, W, V, d, in_win, ctx);
            const int32_t *a, *b;
            int64_t na, nb;
            ms_vocab_rows(v, NULL, &na, &a);
            ms_vocab_rows(v2, NULL, &nb, &b);
            CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0, "%s: append_distinct ×2 differs", ctx);
            BAIL();
        }
        free(prompt);
        free(topk);
    }
bail:
    free(st.s);
    free(in_win);
    ms_vocab_free(&v);
    ms_vocab_free(&v2);
    free(W);
}

/* Invalid input: nothing appended, window unchanged; constructor errors. */
static void run_errors(void) {
    const int64_t V = 50, d = 4;
    float *W = make_W(V, d, 9);
    ms_vocab *v = NULL;
    CHECK(ms_vocab_new_dynamic(W, V, d, 0, &v) == MS_ERR_INVALID && v == NULL, "W_max 0 refused");
    CHECK(ms_vocab_new_dynamic(W, 0, d, 8, &v) == MS_ERR_INVALID && v == NULL, "V 0 refused");
    CHECK(ms_vocab_new_dynamic(W, V, 0, 8, &v) == MS_ERR_INVALID && v == NULL, "d 0 refused");
    CHECK(ms_vocab_new_dynamic(W, (int64_t)INT32_MAX + 1, d, 8, &v) == MS_ERR_INVALID, "V > INT32_MAX refused");
    CHECK(ms_vocab_new_dynamic(W, V, d, 8, &v) == MS_OK, "new");
    if (!v) goto bail;
    int32_t good[3] = {1, 2, 3}, bad1[3] = {1, 50, 2}, bad2[2] = {4, -1};
    CHECK(ms_vocab_append(v, good, 3) == MS_OK, "append");
    ms_vocab_counters c0 = ms_vocab_counters_get(v);
    CHECK(ms_vocab_append(v, bad1, 3) == MS_ERR_INVALID, "id == V refused");
    CHECK(ms_vocab_append(v, bad2, 2) == MS_ERR_INVALID, "id < 0 refused");
    CHECK(ms_vocab_append_round(v, good, 3, bad1, 1, 3) == MS_ERR_INVALID, "bad C_ver refused");
    CHECK(ms_vocab_append_round(v, bad2, 2, good, 1, 3) == MS_ERR_INVALID, "bad tree refused");
    CHECK(ms_vocab_init_stream(v, good, 3, bad1, 1) == MS_ERR_INVALID, "bad top-K_pre refused");
    CHECK(ms_vocab_init_stream(v, bad2, 2, NULL, 0) == MS_ERR_INVALID, "bad prompt refused");
    CHECK(ms_vocab_append(v, NULL, -1) == MS_ERR_INVALID, "negative n refused");
    ms_vocab_counters c1 = ms_vocab_counters_get(v);
    CHECK(c1.appended == c0.appended && c1.gathered == c0.gathered && c1.moved == c0.moved,
          "a refused call appended something");
    CHECK(ms_vocab_size(v) == 3 && ms_vocab_contains(v, 1) && ms_vocab_contains(v, 3) && !ms_vocab_contains(v, 4),
          "window changed by a refused call");
    CHECK(ms_vocab_append(v, NULL, 0) == MS_OK, "empty append is fine");
bail:
    ms_vocab_free(&v);
    ms_vocab_free(&v); /* second free is a no-op */
    free(W);
}

/* A hand-checked sequence: W_max = 3, stream 5 6 5 7 8 8 9. */
static void run_worked_example(void) {
    const int64_t V = 10, d = 2;
    float *W = make_W(V, d, 1);
    ms_vocab *v = NULL;
    CHECK(ms_vocab_new_dynamic(W, V, d, 3, &v) == MS_OK, "new");
    if (!v) goto bail;
    int32_t s[] = {5, 6, 5, 7, 8, 8, 9};
    /* after each entry: window (as a set), |I| */
    const char *want[] = {"5", "56", "56", "567", "578", "78", "89"};
    for (int i = 0; i < 7; i++) {
        CHECK(ms_vocab_append(v, &s[i], 1) == MS_OK, "append");
        char got[16] = {0};
        int m = 0;
        for (int32_t id = 0; id < V; id++)
            if (ms_vocab_contains(v, id)) got[m++] = (char)('0' + id);
        CHECK(strcmp(got, want[i]) == 0, "after %d entries: window {%s}, expected {%s}", i + 1, got, want[i]);
    }
    ms_vocab_counters c = ms_vocab_counters_get(v);
    /* Entering: 5 6 7 8 9 → 5 gathers; 6, 5 and 7 leave. */
    CHECK(c.appended == 7 && c.gathered == 5, "counters appended %lld gathered %lld", (long long)c.appended,
          (long long)c.gathered);
bail:
    ms_vocab_free(&v);
    free(W);
}

int main(void) {
    ms_log_set_level(MS_LOG_OFF); /* the error cases log by design */
    run_worked_example();
    run_errors();
    printf("property: incremental window == Unique(Suffix(S, W_max))\n");
    const int64_t w_maxes[] = {1, 2, 7, 64, 3072};
    const int64_t Vs[] = {1, 3, 100, 5000};
    uint64_t seed = 1;
    for (size_t i = 0; i < sizeof w_maxes / sizeof *w_maxes; i++)
        for (size_t j = 0; j < sizeof Vs / sizeof *Vs; j++)
            run_property(Vs[j], w_maxes[i], w_maxes[i] >= 3072 ? 1500 : 2500, seed++);
    run_property(151936, 3072, 1500, seed++);
    printf("S_init and rounds vs the naive rules\n");
    run_init_and_rounds(1000, 64, 77);
    run_init_and_rounds(1000, 3072, 78);
    run_init_and_rounds(20, 7, 79);
    run_init_and_rounds(151936, 3072, 80);
    if (g_fail) {
        fprintf(stderr, "test_vocab_dynamic: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_vocab_dynamic: ok\n");
    return 0;
}
