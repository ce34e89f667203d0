/* test_vocab_mirror.c — the mirror hook of draft-node/ms_vocab (the feed of
 * the device window in ms_draft): a twin vocabulary that only replays the
 * reported RESET / APPEND / APPEND_DISTINCT calls must hold the same window
 * and the same slot layout as the original after every call, for seeded
 * random sequences of begin_stream / stream_round over the three window
 * streams and of the plain calls (init_stream, append_round, append,
 * append_distinct, reset); a call rejected by validation reports nothing;
 * full / static vocabularies never report. CPU only.
 */
#include "ms_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

typedef struct {
    ms_vocab *twin;
    int64_t calls, entries;
} replay;

static void on_mirror(void *ctx, ms_vocab_mirror_op op, const int32_t *ids, int64_t n) {
    replay *r = ctx;
    r->calls++;
    r->entries += n;
    ms_status s = MS_OK;
    switch (op) {
    case MS_VOCAB_MIRROR_RESET:
        CHECK(ids == NULL && n == 0, "reset with %lld ids", (long long)n);
        ms_vocab_reset(r->twin);
        break;
    case MS_VOCAB_MIRROR_APPEND: s = ms_vocab_append(r->twin, ids, n); break;
    case MS_VOCAB_MIRROR_APPEND_DISTINCT: s = ms_vocab_append_distinct(r->twin, ids, n); break;
    }
    CHECK(n > 0 || op == MS_VOCAB_MIRROR_RESET, "empty call reported (op %d)", (int)op);
    CHECK(s == MS_OK, "replay: %s", ms_status_str(s));
}

static void same(const ms_vocab *a, const ms_vocab *b, int64_t V, const char *what, int step) {
    const int64_t n = ms_vocab_size(a);
    CHECK(ms_vocab_size(b) == n, "%s step %d: |I| %lld vs twin %lld", what, step, (long long)n,
          (long long)ms_vocab_size(b));
    int64_t bad = 0;
    for (int64_t s = 0; s < n; s++) bad += ms_vocab_id_at(a, s) != ms_vocab_id_at(b, s);
    for (int64_t id = 0; id < V; id++) bad += ms_vocab_slot_of(a, (int32_t)id) != ms_vocab_slot_of(b, (int32_t)id);
    CHECK(bad == 0, "%s step %d: %lld slot / id differences", what, step, (long long)bad);
}

static int32_t draw(ms_rng *r, int64_t V) {
    double u = ms_rng_uniform(r);
    int64_t id = (int64_t)((double)V * u * u); /* skewed: repeats are common */
    return (int32_t)(id < V ? id : V - 1);
}

static void run(int64_t V, int64_t w_max, uint64_t seed) {
    ms_vocab *v = NULL, *t = NULL;
    if (ms_vocab_new_dynamic(NULL, V, 4, w_max, &v) != MS_OK || ms_vocab_new_dynamic(NULL, V, 4, w_max, &t) != MS_OK) {
        CHECK(0, "new dynamic");
        ms_vocab_free(&v);
        ms_vocab_free(&t);
        return;
    }
    replay r = {.twin = t};
    ms_vocab_set_mirror(v, on_mirror, &r);
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    int32_t a[600], b[600], c[80];
    char what[64];
    snprintf(what, sizeof what, "V=%lld W=%lld", (long long)V, (long long)w_max);
    for (int step = 0; step < 400; step++) {
        const int op = (int)(ms_rng_u64(&rng) % 8);
        const ms_vocab_stream st = (ms_vocab_stream)(ms_rng_u64(&rng) % 3);
        const int64_t n1 = (int64_t)(ms_rng_u64(&rng) % 60), k = (int64_t)(ms_rng_u64(&rng) % 4);
        const int64_t n2 = (int64_t)(ms_rng_u64(&rng) % 10);
        for (int64_t i = 0; i < 600; i++) a[i] = draw(&rng, V), b[i] = draw(&rng, V);
        for (int64_t i = 0; i < 80; i++) c[i] = draw(&rng, V);
        ms_status s = MS_OK;
        switch (op) {
        case 0: s = ms_vocab_begin_stream(v, st, a, n1 + 1, b, k); break;
        case 1:
        case 2:
        case 3: s = ms_vocab_stream_round(v, st, a, n1, c, n2 + 1, b, n2, k); break;
        case 4: s = ms_vocab_append(v, a, n1); break;
        case 5: s = ms_vocab_append_distinct(v, a, n1); break;
        case 6: s = ms_vocab_append_round(v, a, n1, b, n2, k); break;
        case 7: {
            /* rejected calls report nothing and change nothing */
            const int64_t before = r.calls;
            a[n1 / 2] = (int32_t)V;
            b[0] = -1; /* the extension stream reads only the top-K_pre ids */
            CHECK(ms_vocab_append(v, a, n1 + 1) == MS_ERR_INVALID, "bad id accepted");
            CHECK(ms_vocab_append_round(v, a, n1 + 1, b, n2, k) == MS_ERR_INVALID, "bad id accepted");
            CHECK(ms_vocab_begin_stream(v, st, a, n1 + 1, b, k + 1) == MS_ERR_INVALID, "bad id accepted (stream %s)",
                  ms_vocab_stream_name(st));
            CHECK(r.calls == before, "%lld calls reported for rejected input", (long long)(r.calls - before));
            if (ms_rng_u64(&rng) % 4 == 0) ms_vocab_reset(v);
            break;
        }
        }
        CHECK(s == MS_OK, "%s step %d op %d: %s", what, step, op, ms_status_str(s));
        same(v, t, V, what, step);
    }
    CHECK(r.calls > 100 && r.entries > 1000, "%s: only %lld calls / %lld entries mirrored", what, (long long)r.calls,
          (long long)r.entries);
    ms_vocab_free(&v);
    ms_vocab_free(&t);
}

int main(void) {
    ms_log_set_level(MS_LOG_OFF); /* the rejected calls log by design */
    run(50, 7, 1);     /* a small window: constant eviction and swap-remove */
    run(1000, 64, 2);  /* W_max ≥ most rounds */
    run(30, 3000, 3);  /* W_max > V */
    /* full / static: never reported */
    ms_vocab *f = NULL, *s = NULL;
    const int32_t ids[3] = {4, 1, 7};
    replay r = {0};
    if (ms_vocab_new_full(NULL, 10, 2, &f) == MS_OK && ms_vocab_new_static(NULL, 10, 2, ids, 3, &s) == MS_OK) {
        ms_vocab_set_mirror(f, on_mirror, &r);
        ms_vocab_set_mirror(s, on_mirror, &r);
        ms_vocab *both[2] = {f, s};
        for (int i = 0; i < 2; i++) {
            ms_vocab_reset(both[i]);
            CHECK(ms_vocab_append(both[i], ids, 3) == MS_OK, "append");
            CHECK(ms_vocab_begin_stream(both[i], MS_VOCAB_STREAM_BOTH, ids, 3, NULL, 0) == MS_OK, "begin");
        }
        CHECK(r.calls == 0, "full/static reported %lld calls", (long long)r.calls);
    } else {
        CHECK(0, "new full/static");
    }
    ms_vocab_free(&f);
    ms_vocab_free(&s);
    if (g_fail) {
        fprintf(stderr, "test_vocab_mirror: %d check(s) FAILED\n", g_fail);
        return 1;
    }
    fprintf(stderr, "test_vocab_mirror: OK\n");
    return 0;
}
