/* test_vocab_plan.c — the stream plans of draft-node/ms_vocab (the feed of
 * the device window twin behind draft-node/ms_head.h): a twin vocabulary
 * that only replays the plans of begin_stream / stream_round (ms_vocab_
 * begin_plan / round_plan: reset, then plain or distinct appends) must hold
 * the same window and the same slot layout as the original after every call,
 * for seeded random sequences over the three window streams mixed with the
 * plain calls (append, append_distinct, append_round, reset — replayed as
 * the one call they are); a call rejected by validation plans nothing and
 * changes nothing; full / static vocabularies plan nothing. CPU only (the
 * CUDA twin is held to the C window by test_cuda_vocab and test_cuda_draft).
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

/* The twin applies a plan with the plain calls only. */
static void apply(replay *r, const ms_vocab_plan *p) {
    CHECK(p->n_steps >= 0 && p->n_steps <= 2, "plan of %d steps", p->n_steps);
    if (p->reset) {
        r->calls++;
        ms_vocab_reset(r->twin);
    }
    for (int i = 0; i < p->n_steps; i++) {
        const ms_vocab_step *st = &p->step[i];
        CHECK(st->n > 0 && st->ids, "empty step %d planned", i);
        r->calls++;
        r->entries += st->n;
        ms_status s = st->distinct ? ms_vocab_append_distinct(r->twin, st->ids, st->n)
                                   : ms_vocab_append(r->twin, st->ids, st->n);
        CHECK(s == MS_OK, "replay: %s", ms_status_str(s));
    }
}

/* The stream rule of docs/architecture.md §5 and ms_vocab.h written out with the plain
 * calls, independently of the plans: a third window fed by it must agree. */
static void rule_begin(ms_vocab *x, ms_vocab_stream st, const int32_t *prompt, int64_t n_prompt, const int32_t *pre,
                       int64_t k_pre) {
    ms_vocab_reset(x);
    if (st != MS_VOCAB_STREAM_EXTENSION) CHECK(ms_vocab_append(x, prompt, n_prompt) == MS_OK, "rule: prompt");
    if (st != MS_VOCAB_STREAM_CONTEXT) CHECK(ms_vocab_append_distinct(x, pre, n_prompt * k_pre) == MS_OK, "rule: pre");
}

static void rule_round(ms_vocab *x, ms_vocab_stream st, const int32_t *tree, int64_t n_tree, const int32_t *emit,
                       int64_t n_emit, const int32_t *ver, int64_t n_path, int64_t k_ver) {
    if (st == MS_VOCAB_STREAM_CONTEXT) {
        CHECK(ms_vocab_append(x, emit, n_emit) == MS_OK, "rule: emitted");
        return;
    }
    CHECK(ms_vocab_append_distinct(x, tree, n_tree) == MS_OK, "rule: C_draft");
    CHECK(ms_vocab_append_distinct(x, ver, n_path * k_ver) == MS_OK, "rule: C_ver");
}

/* A plain call on all three: the original, then (x = the twin, then the
 * rule's window) the same call. */
#define BOTH(call_v, call_x)                                   \
    do {                                                       \
        s = (call_v);                                          \
        if (s == MS_OK) {                                      \
            ms_vocab *x = t;                                   \
            (void)(call_x);                                    \
            x = u;                                             \
            (void)(call_x);                                    \
        }                                                      \
        r.calls++;                                             \
    } while (0)

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
    ms_vocab *v = NULL, *t = NULL, *u = NULL;
    if (ms_vocab_new_dynamic(NULL, V, 4, w_max, &v) != MS_OK || ms_vocab_new_dynamic(NULL, V, 4, w_max, &t) != MS_OK) {
        CHECK(0, "new dynamic");
        ms_vocab_free(&v);
        ms_vocab_free(&t);
        return;
    }
    if (ms_vocab_new_dynamic(NULL, V, 4, w_max, &u) != MS_OK) {
        CHECK(0, "new dynamic");
        ms_vocab_free(&v);
        ms_vocab_free(&t);
        return;
    }
    replay r = {.twin = t};
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
        ms_vocab_plan p;
        switch (op) {
        case 0:
            s = ms_vocab_begin_plan(v, st, a, n1 + 1, b, k, &p);
            if (s == MS_OK) s = ms_vocab_begin_stream(v, st, a, n1 + 1, b, k);
            if (s == MS_OK) apply(&r, &p);
            if (s == MS_OK) rule_begin(u, st, a, n1 + 1, b, k);
            break;
        case 1:
        case 2:
        case 3:
            s = ms_vocab_round_plan(v, st, a, n1, c, n2 + 1, b, n2, k, &p);
            if (s == MS_OK) s = ms_vocab_stream_round(v, st, a, n1, c, n2 + 1, b, n2, k);
            if (s == MS_OK) apply(&r, &p);
            if (s == MS_OK) rule_round(u, st, a, n1, c, n2 + 1, b, n2, k);
            break;
        case 4: BOTH(ms_vocab_append(v, a, n1), ms_vocab_append(x, a, n1)); break;
        case 5: BOTH(ms_vocab_append_distinct(v, a, n1), ms_vocab_append_distinct(x, a, n1)); break;
        case 6: BOTH(ms_vocab_append_round(v, a, n1, b, n2, k), ms_vocab_append_round(x, a, n1, b, n2, k)); break;
        case 7: {
            /* rejected calls plan nothing and change nothing */
            a[n1 / 2] = (int32_t)V;
            b[0] = -1; /* the extension stream reads only the top-K_pre ids */
            CHECK(ms_vocab_append(v, a, n1 + 1) == MS_ERR_INVALID, "bad id accepted");
            CHECK(ms_vocab_append_round(v, a, n1 + 1, b, n2, k) == MS_ERR_INVALID, "bad id accepted");
            p.n_steps = 99;
            CHECK(ms_vocab_begin_plan(v, st, a, n1 + 1, b, k + 1, &p) == MS_ERR_INVALID && p.n_steps == 0 && !p.reset,
                  "bad id planned (stream %s)", ms_vocab_stream_name(st));
            CHECK(ms_vocab_begin_stream(v, st, a, n1 + 1, b, k + 1) == MS_ERR_INVALID, "bad id accepted (stream %s)",
                  ms_vocab_stream_name(st));
            CHECK(ms_vocab_round_plan(v, st, a, n1 + 1, a, n1 + 1, b, n2 + 1, k + 1, &p) == MS_ERR_INVALID &&
                      p.n_steps == 0,
                  "bad id planned for a round (stream %s)", ms_vocab_stream_name(st));
            if (ms_rng_u64(&rng) % 4 == 0) BOTH((ms_vocab_reset(v), MS_OK), ms_vocab_reset(x));
            break;
        }
        }
        CHECK(s == MS_OK, "%s step %d op %d: %s", what, step, op, ms_status_str(s));
        same(v, t, V, what, step);
        same(v, u, V, "the rule's window", step);
    }
    CHECK(r.calls > 100 && r.entries > 1000, "%s: only %lld calls / %lld entries replayed", what, (long long)r.calls,
          (long long)r.entries);
    ms_vocab_free(&v);
    ms_vocab_free(&t);
    ms_vocab_free(&u);
}

int main(void) {
    ms_log_set_level(MS_LOG_OFF); /* the rejected calls log by design */
    run(50, 7, 1);     /* a small window: constant eviction and swap-remove */
    run(1000, 64, 2);  /* W_max ≥ most rounds */
    run(30, 3000, 3);  /* W_max > V */
    /* full / static: empty plans */
    ms_vocab *f = NULL, *s = NULL;
    const int32_t ids[3] = {4, 1, 7};
    if (ms_vocab_new_full(NULL, 10, 2, &f) == MS_OK && ms_vocab_new_static(NULL, 10, 2, ids, 3, &s) == MS_OK) {
        ms_vocab *both[2] = {f, s};
        for (int i = 0; i < 2; i++) {
            ms_vocab_plan p = {.reset = true, .n_steps = 2};
            CHECK(ms_vocab_begin_plan(both[i], MS_VOCAB_STREAM_BOTH, ids, 3, ids, 1, &p) == MS_OK && !p.reset &&
                      p.n_steps == 0,
                  "full/static planned a begin");
            p = (ms_vocab_plan){.reset = true, .n_steps = 2};
            CHECK(ms_vocab_round_plan(both[i], MS_VOCAB_STREAM_CONTEXT, ids, 3, ids, 3, ids, 1, 1, &p) == MS_OK &&
                      !p.reset && p.n_steps == 0,
                  "full/static planned a round");
        }
    } else {
        CHECK(0, "new full/static");
    }
    ms_vocab_free(&f);
    ms_vocab_free(&s);
    if (g_fail) {
        fprintf(stderr, "test_vocab_plan: %d check(s) FAILED\n", g_fail);
        return 1;
    }
    fprintf(stderr, "test_vocab_plan: OK\n");
    return 0;
}
