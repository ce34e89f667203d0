/* test_vocab_step.c — the per-step vocabulary (ms_vocab_new_step*,
 * ms_vocab_set_active; issue 16) against a naive reference.
 *
 * The reference keeps only a boolean set `in[V]` and the previous set. For
 * seeded random sequences of id lists (with duplicates, overlapping the
 * previous set by a random share, sometimes empty, sometimes exactly cap):
 *  - the active set is exactly the distinct ids given: size, contains(),
 *    slot_of/id_at mutual inverses, every slot < size holds an id of the set;
 *  - every packed row is the head's row of its id, byte for byte (f32 head and
 *    a Q8_0 typed head);
 *  - the gather counter grows by exactly |new \ old| (only entering rows are
 *    copied) and the move counter by at most |old \ new|;
 *  - ms_vocab_logits_q over the rows equals the full product's columns;
 *  - bad input (id out of range, more than cap distinct ids, a non-step
 *    vocabulary) is refused and changes nothing.
 * The static head limit and the budget schedule are checked against their
 * definitions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"
#include "ms_qdot.h"
#include "ms_vocab.h"

enum { V = 1031, D = 64, CAP = 97, ROUNDS = 300 };

static uint64_t rng = 0x5eed5eedULL;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Same set and rows as the reference; the counters moved as only a
 * difference of sets allows. */
static void check_state(const char *what, const ms_vocab *v, const bool *in, const uint8_t *W, size_t row_bytes,
                        bool typed) {
    int64_t want = 0;
    for (int64_t id = 0; id < V; id++) {
        want += in[id];
        CHECK(ms_vocab_contains(v, (int32_t)id) == in[id], "%s: id %lld membership", what, (long long)id);
    }
    CHECK(ms_vocab_size(v) == want, "%s: size %lld, want %lld", what, (long long)ms_vocab_size(v), (long long)want);
    ms_qweight rows;
    const int32_t *id_of = NULL;
    bool have = ms_vocab_rows_q(v, &rows, &id_of);
    CHECK(have && rows.m == want, "%s: rows view", what);
    for (int64_t s = 0; s < ms_vocab_size(v); s++) {
        int32_t id = ms_vocab_id_at(v, s);
        CHECK(id >= 0 && id < V && in[id] && ms_vocab_slot_of(v, id) == s && id_of[s] == id, "%s: slot %lld", what,
              (long long)s);
        if (id < 0 || id >= V) continue;
        CHECK(!memcmp((const uint8_t *)rows.data + (size_t)s * row_bytes, W + (size_t)id * row_bytes, row_bytes),
              "%s: packed row of slot %lld is not W[%d]", what, (long long)s, id);
    }
    (void)typed;
}

static void run(bool typed) {
    const char *what = typed ? "q8_0" : "f32";
    float *Wf = malloc((size_t)V * D * sizeof(float));
    for (int64_t i = 0; i < (int64_t)V * D; i++) Wf[i] = (float)((int32_t)(rnd() % 2001) - 1000) / 997.0f;
    size_t row_bytes = typed ? (size_t)D / 32 * 34 : (size_t)D * sizeof(float);
    uint8_t *Wq = malloc((size_t)V * row_bytes);
    ms_qweight qw = {0};
    ms_vocab *v = NULL;
    if (typed) {
        /* Q8_0 blocks: f16 scale + 32 int8 (contents arbitrary: the test compares bytes) */
        for (size_t i = 0; i < (size_t)V * row_bytes; i++) Wq[i] = (uint8_t)rnd();
        for (int64_t r = 0; r < V; r++)
            for (int64_t b = 0; b < D / 32; b++) {
                uint16_t h = (uint16_t)(0x2000 + rnd() % 0x1000); /* a small normal f16 */
                memcpy(Wq + (size_t)r * row_bytes + (size_t)b * 34, &h, 2);
            }
        qw = (ms_qweight){.dtype = MS_DTYPE_Q8_0, .data = Wq, .m = V, .k = D, .row_bytes = row_bytes};
        CHECK(ms_vocab_new_step_q(&qw, CAP, &v) == MS_OK, "new_step_q");
    } else {
        memcpy(Wq, Wf, (size_t)V * row_bytes);
        qw = (ms_qweight){.dtype = MS_DTYPE_F32, .data = Wq, .m = V, .k = D, .row_bytes = row_bytes};
        CHECK(ms_vocab_new_step(Wf, V, D, CAP, &v) == MS_OK, "new_step");
    }
    if (!v) return;
    CHECK(ms_vocab_mode_of(v) == MS_VOCAB_STEP && !strcmp(ms_vocab_mode_name(MS_VOCAB_STEP), "step"), "mode");
    CHECK(ms_vocab_size(v) == 0 && ms_vocab_w_max(v) == CAP, "fresh");
    bool in[V] = {0}, old[V];
    int32_t ids[3 * CAP];
    float x[2 * D], full[2 * V], got[2 * CAP];
    for (int64_t i = 0; i < 2 * D; i++) x[i] = (float)((int32_t)(rnd() % 200) - 100) / 50.0f;
    ms_q_linear(full, x, &qw, NULL, 2);
    int64_t total_enter = 0;
    for (int r = 0; r < ROUNDS; r++) {
        memcpy(old, in, sizeof in);
        /* a new list: part kept from the current set, part new, some duplicates */
        int64_t want = r % 17 == 0 ? 0 : r % 13 == 0 ? CAP : 1 + rnd() % CAP;
        int64_t n = 0, distinct = 0;
        bool pick[V] = {0};
        int64_t cur = ms_vocab_size(v);
        while (distinct < want) {
            int32_t id = (cur > 0 && rnd() % 2) ? ms_vocab_id_at(v, rnd() % cur) : (int32_t)(rnd() % V);
            ids[n++] = id;
            if (!pick[id]) pick[id] = true, distinct++;
            if (rnd() % 5 == 0 && n < 3 * CAP - 1) ids[n++] = id; /* a duplicate */
            if (n >= 3 * CAP - 1) break;
        }
        int64_t enter = 0, leave = 0;
        for (int64_t id = 0; id < V; id++) {
            enter += pick[id] && !old[id];
            leave += !pick[id] && old[id];
            in[id] = pick[id];
        }
        ms_vocab_counters c0 = ms_vocab_counters_get(v);
        CHECK(ms_vocab_set_active(v, ids, n) == MS_OK, "%s round %d: set_active", what, r);
        ms_vocab_counters c1 = ms_vocab_counters_get(v);
        CHECK(c1.gathered - c0.gathered == enter, "%s round %d: gathered %lld rows, %lld entered", what, r,
              (long long)(c1.gathered - c0.gathered), (long long)enter);
        CHECK(c1.moved - c0.moved <= leave, "%s round %d: moved %lld rows, only %lld left", what, r,
              (long long)(c1.moved - c0.moved), (long long)leave);
        total_enter += enter;
        char w[64];
        snprintf(w, sizeof w, "%s round %d", what, r);
        check_state(w, v, in, Wq, row_bytes, typed);
        if (r % 7 == 0 && ms_vocab_size(v) > 0) {
            ms_vocab_logits_q(v, x, NULL, 2, got);
            int64_t m = ms_vocab_size(v);
            for (int64_t t = 0; t < 2; t++)
                for (int64_t s = 0; s < m; s++)
                    CHECK(got[t * m + s] == full[t * V + ms_vocab_id_at(v, s)], "%s: logit [%lld, %lld]", w,
                          (long long)t, (long long)s);
        }
    }
    CHECK(total_enter > 3 * CAP, "%s: the rounds moved the set (%lld entries)", what, (long long)total_enter);
    /* refusals leave the set alone */
    memcpy(old, in, sizeof in);
    int32_t bad[2] = {5, V};
    CHECK(ms_vocab_set_active(v, bad, 2) == MS_ERR_INVALID, "%s: id V refused", what);
    for (int64_t i = 0; i < CAP + 1; i++) ids[i] = (int32_t)i;
    CHECK(ms_vocab_set_active(v, ids, CAP + 1) == MS_ERR_INVALID, "%s: cap + 1 ids refused", what);
    check_state("after refusals", v, in, Wq, row_bytes, typed);
    CHECK(ms_vocab_set_active(v, ids, CAP) == MS_OK && ms_vocab_size(v) == CAP, "%s: exactly cap", what);
    ms_vocab_free(&v);
    CHECK(v == NULL, "free nulls");
    free(Wf);
    free(Wq);
}

static void static_limit(void) {
    enum { K = 40 };
    float *W = malloc((size_t)V * 8 * sizeof(float));
    for (int64_t i = 0; i < V * 8; i++) W[i] = (float)(i % 101) - 50.0f;
    int32_t ids[K];
    for (int i = 0; i < K; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
    ms_vocab *s = NULL;
    CHECK(ms_vocab_new_static(W, V, 8, ids, K, &s) == MS_OK, "static");
    if (!s) return;
    ms_vocab_set_head_limit(s, 7);
    const float *rows;
    int64_t n;
    const int32_t *id_of;
    ms_vocab_rows(s, &rows, &n, &id_of);
    CHECK(n == 7 && ms_vocab_size(s) == K && ms_vocab_contains(s, ids[K - 1]), "limit 7: rows %lld", (long long)n);
    for (int64_t r = 0; r < n; r++) CHECK(!memcmp(rows + r * 8, W + (size_t)ids[r] * 8, 8 * sizeof(float)), "row %lld", (long long)r);
    float h[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[K];
    for (int i = 0; i < K; i++) out[i] = -7.0f;
    ms_vocab_logits_indexed(s, W, h, 1, out);
    CHECK(out[7] == -7.0f && out[6] != -7.0f, "indexed head reads 7 columns");
    ms_vocab_set_head_limit(s, 0);
    ms_vocab_rows(s, NULL, &n, NULL);
    CHECK(n == K, "limit off");
    ms_vocab_set_head_limit(s, K + 5);
    ms_vocab_rows(s, NULL, &n, NULL);
    CHECK(n == K, "limit above K");
    CHECK(ms_vocab_set_active(s, ids, 1) == MS_ERR_INVALID, "set_active on static refused");
    ms_vocab_free(&s);
    free(W);
    /* the schedule, against its definition max(k_min, floor(k r^l)) capped at k */
    for (int64_t l = 0; l < 8; l++) {
        double r = 0.7;
        int64_t want = l == 0 ? 1000 : (int64_t)floor(1000.0 * pow(r, (double)l));
        if (want < 200) want = 200;
        CHECK(ms_vocab_budget(1000, r, 200, l) == want, "budget depth %lld: %lld want %lld", (long long)l,
              (long long)ms_vocab_budget(1000, r, 200, l), (long long)want);
    }
    CHECK(ms_vocab_budget(1000, 1.0, 0, 5) == 1000 && ms_vocab_budget(1000, 0.0, 0, 3) == 1 &&
              ms_vocab_budget(100, 0.5, 500, 2) == 100,
          "budget edges");
}

int main(void) {
    run(false);
    run(true);
    static_limit();
    if (!g_fail) printf("test_vocab_step: ok\n");
    return g_fail ? 1 : 0;
}
