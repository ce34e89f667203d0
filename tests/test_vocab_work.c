/* test_vocab_work.c — the dynamic window's work does not depend on V.
 *
 * The same id stream (ids < 1000, rounds shaped like docs/architecture.md §4: S_init, then
 * C_draft ⊕ C_ver per round) drives two windows, V = 151,936 and V = 1,000.
 * Per round: the work counters (entries appended, rows gathered, rows moved)
 * are bounded by the round's appended entries and are identical for both V,
 * and so are the slot layouts (the same decisions, whatever V). The counters
 * cannot see a hidden O(V) loop; the code review and the printed time per
 * round (information only, never asserted) cover that.
 */
#include "ms_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

enum { N_SMALL = 1000, N_BIG = 151936, D = 64, ROUNDS = 3000 };

static float *make_W(int64_t V, int64_t d) {
    ms_rng r;
    ms_rng_seed(&r, 4242);
    float *W = malloc((size_t)V * (size_t)d * sizeof(float));
    for (int64_t i = 0; i < V * d; i++) W[i] = ms_rng_normal(&r);
    return W;
}

/* Zipf-ish ids < 1000 around a topic that drifts every 200 rounds. */
static int32_t topic_id(ms_rng *r, int64_t round) {
    double u = ms_rng_uniform(r);
    int64_t id = (round / 200) * 97 + (int64_t)(u * u * u * 400.0);
    return (int32_t)(id % N_SMALL);
}

static void run(int64_t w_max) {
    float *Wb = make_W(N_BIG, D), *Ws = make_W(N_SMALL, D);
    ms_vocab *big = NULL, *small = NULL;
    CHECK(ms_vocab_new_dynamic(Wb, N_BIG, D, w_max, &big) == MS_OK, "new big");
    CHECK(ms_vocab_new_dynamic(Ws, N_SMALL, D, w_max, &small) == MS_OK, "new small");
    if (!big || !small) goto bail;
    ms_rng r;
    ms_rng_seed(&r, (uint64_t)w_max);
    double t_big = 0.0;
    int64_t max_round_entries = 0;
    for (int req = 0; req < 3; req++) {
        int32_t prompt[500], pre[500 * 3];
        for (int i = 0; i < 500; i++) prompt[i] = topic_id(&r, req * 1000);
        for (int i = 0; i < 1500; i++) pre[i] = topic_id(&r, req * 1000 + 1);
        CHECK(ms_vocab_init_stream(big, prompt, 500, pre, 3) == MS_OK, "init big");
        CHECK(ms_vocab_init_stream(small, prompt, 500, pre, 3) == MS_OK, "init small");
        for (int64_t round = 0; round < ROUNDS; round++) {
            int32_t tree[60], ver[6 * 3];
            int64_t n_path = 1 + (int64_t)(ms_rng_u64(&r) % 6);
            for (int i = 0; i < 60; i++) tree[i] = topic_id(&r, round);
            for (int i = 0; i < n_path * 3; i++) ver[i] = topic_id(&r, round + 50);
            ms_vocab_counters b0 = ms_vocab_counters_get(big), s0 = ms_vocab_counters_get(small);
            double t0 = ms_now_s();
            CHECK(ms_vocab_append_round(big, tree, 60, ver, n_path, 3) == MS_OK, "round big");
            t_big += ms_now_s() - t0;
            CHECK(ms_vocab_append_round(small, tree, 60, ver, n_path, 3) == MS_OK, "round small");
            ms_vocab_counters b1 = ms_vocab_counters_get(big), s1 = ms_vocab_counters_get(small);
            int64_t app = b1.appended - b0.appended;
            if (app > max_round_entries) max_round_entries = app;
            CHECK(app <= 60 + n_path * 3, "round appended %lld entries", (long long)app);
            CHECK(b1.gathered - b0.gathered <= app, "round %lld: gathered %lld > appended %lld", (long long)round,
                  (long long)(b1.gathered - b0.gathered), (long long)app);
            CHECK(b1.moved - b0.moved <= app, "round %lld: moved %lld > appended %lld", (long long)round,
                  (long long)(b1.moved - b0.moved), (long long)app);
            CHECK(b1.appended - b0.appended == s1.appended - s0.appended &&
                      b1.gathered - b0.gathered == s1.gathered - s0.gathered &&
                      b1.moved - b0.moved == s1.moved - s0.moved,
                  "round %lld: V=%d did (%lld, %lld, %lld), V=%d did (%lld, %lld, %lld)", (long long)round, N_BIG,
                  (long long)(b1.appended - b0.appended), (long long)(b1.gathered - b0.gathered),
                  (long long)(b1.moved - b0.moved), N_SMALL, (long long)(s1.appended - s0.appended),
                  (long long)(s1.gathered - s0.gathered), (long long)(s1.moved - s0.moved));
            const int32_t *ib, *is;
            int64_t nb, ns;
            ms_vocab_rows(big, NULL, &nb, &ib);
            ms_vocab_rows(small, NULL, &ns, &is);
            CHECK(nb == ns && memcmp(ib, is, (size_t)nb * sizeof(int32_t)) == 0, "round %lld: slot layouts differ",
                  (long long)round);
            if (g_fail > 10) goto bail;
        }
    }
    ms_vocab_counters c = ms_vocab_counters_get(big);
    printf("W_max=%-5lld V=%d: %d rounds, |I|=%lld, per round ≤ %lld entries; totals appended %lld gathered %lld "
           "moved %lld; %.2f us/round (info only)\n",
           (long long)w_max, N_BIG, 3 * ROUNDS, (long long)ms_vocab_size(big), (long long)max_round_entries,
           (long long)c.appended, (long long)c.gathered, (long long)c.moved, 1e6 * t_big / (3.0 * ROUNDS));
bail:
    ms_vocab_free(&big);
    ms_vocab_free(&small);
    free(Wb);
    free(Ws);
}

int main(void) {
    run(3072);
    run(256);
    run(7);
    if (g_fail) {
        fprintf(stderr, "test_vocab_work: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_vocab_work: ok\n");
    return 0;
}
