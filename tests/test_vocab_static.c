/* test_vocab_static.c — FR-Spec static lists and the full/static modes.
 *
 * ms_vocab_rank_counts against a naive selection written here (K passes of
 * "pick the unpicked id with the highest count, lowest id on ties" after the
 * forced ids) on random tables full of ties; hand-made cases for EOS forcing,
 * ties and filling; the list file: save/load round trip, exact text, and the
 * loader refusing bad files with MS_ERR_FORMAT; full and static vocabularies.
 */
#include "ms_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_check.h"

static void naive_rank(const int64_t *counts, int64_t V, const int32_t *eos, int64_t n_eos, int64_t k, int32_t *out) {
    uint8_t *used = calloc((size_t)V, 1);
    int64_t m = 0;
    for (int64_t i = 0; i < n_eos; i++)
        if (!used[eos[i]]) {
            used[eos[i]] = 1;
            out[m++] = eos[i];
        }
    while (m < k) {
        int64_t best = -1;
        for (int64_t id = 0; id < V; id++)
            if (!used[id] && (best < 0 || counts[id] > counts[best])) best = id; /* strict >: lowest id wins ties */
        used[best] = 1;
        out[m++] = (int32_t)best;
    }
    free(used);
}

static void test_rank_random(void) {
    ms_rng r;
    ms_rng_seed(&r, 11);
    for (int trial = 0; trial < 300; trial++) {
        int64_t V = 1 + (int64_t)(ms_rng_u64(&r) % 700);
        int64_t *counts = malloc((size_t)V * sizeof(int64_t));
        int64_t zero_frac = (int64_t)(ms_rng_u64(&r) % 4); /* 0..3 quarters of the ids never occur */
        for (int64_t i = 0; i < V; i++)
            counts[i] = (int64_t)(ms_rng_u64(&r) % 4) < zero_frac ? 0 : (int64_t)(ms_rng_u64(&r) % 6);
        int32_t eos[4];
        int64_t n_eos = (int64_t)(ms_rng_u64(&r) % 5);
        for (int64_t i = 0; i < n_eos; i++) eos[i] = (int32_t)(ms_rng_u64(&r) % (uint64_t)V);
        int64_t distinct_eos = 0;
        for (int64_t i = 0; i < n_eos; i++) {
            bool dup = false;
            for (int64_t j = 0; j < i; j++) dup |= eos[j] == eos[i];
            distinct_eos += !dup;
        }
        int64_t k = 1 + (int64_t)(ms_rng_u64(&r) % (uint64_t)V);
        int32_t *got = malloc((size_t)k * sizeof(int32_t)), *want = malloc((size_t)k * sizeof(int32_t));
        ms_status st = ms_vocab_rank_counts(counts, V, eos, n_eos, k, got);
        if (distinct_eos > k) {
            CHECK(st == MS_ERR_INVALID, "trial %d: %lld forced ids > K=%lld accepted", trial, (long long)distinct_eos,
                  (long long)k);
        } else {
            CHECK(st == MS_OK, "trial %d: rank failed", trial);
            naive_rank(counts, V, eos, n_eos, k, want);
            CHECK(memcmp(got, want, (size_t)k * sizeof(int32_t)) == 0, "trial %d (V=%lld K=%lld): differs from naive",
                  trial, (long long)V, (long long)k);
        }
        free(counts);
        free(got);
        free(want);
    }
}

static void test_rank_cases(void) {
    /* id:      0  1  2  3  4  5  6  7 */
    int64_t c[] = {5, 3, 5, 0, 1, 3, 0, 9};
    int32_t out[8], eos4[] = {4}, eos36[] = {3, 6, 3};
    CHECK(ms_vocab_rank_counts(c, 8, NULL, 0, 4, out) == MS_OK, "rank");
    int32_t w1[] = {7, 0, 2, 1}; /* ties 0/2 and 1/5 broken by lower id */
    CHECK(memcmp(out, w1, sizeof w1) == 0, "ties by lower id: got %d %d %d %d", out[0], out[1], out[2], out[3]);
    CHECK(ms_vocab_rank_counts(c, 8, eos4, 1, 3, out) == MS_OK, "rank eos");
    int32_t w2[] = {4, 7, 0}; /* EOS forced in even though rare */
    CHECK(memcmp(out, w2, sizeof w2) == 0, "EOS forced: got %d %d %d", out[0], out[1], out[2]);
    CHECK(ms_vocab_rank_counts(c, 8, eos36, 3, 8, out) == MS_OK, "rank all");
    int32_t w3[] = {3, 6, 7, 0, 2, 1, 5, 4};
    CHECK(memcmp(out, w3, sizeof w3) == 0, "duplicated EOS dropped, K = V");
    /* A tiny corpus: only id 5 occurs; the rest is filled with the lowest unused ids. */
    int64_t c2[8] = {0, 0, 0, 0, 0, 2, 0, 0};
    CHECK(ms_vocab_rank_counts(c2, 8, NULL, 0, 4, out) == MS_OK, "rank fill");
    int32_t w4[] = {5, 0, 1, 2};
    CHECK(memcmp(out, w4, sizeof w4) == 0, "fill: got %d %d %d %d", out[0], out[1], out[2], out[3]);
    int32_t bad[] = {8}, two[] = {1, 2};
    CHECK(ms_vocab_rank_counts(c, 8, NULL, 0, 0, out) == MS_ERR_INVALID, "K 0");
    CHECK(ms_vocab_rank_counts(c, 8, NULL, 0, 9, out) == MS_ERR_INVALID, "K > V");
    CHECK(ms_vocab_rank_counts(c, 8, bad, 1, 3, out) == MS_ERR_INVALID, "EOS out of range");
    CHECK(ms_vocab_rank_counts(c, 8, two, 2, 1, out) == MS_ERR_INVALID, "2 EOS > K = 1");
}

static char g_dir[256];

static const char *write_tmp(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, strlen(text), f);
    fclose(f);
    return path;
}

static void test_list_files(void) {
    int32_t ids[] = {17, 0, 3, 99};
    char path[512];
    snprintf(path, sizeof path, "%s/ok.vocab", g_dir);
    CHECK(ms_vocab_save_list(path, ids, 4) == MS_OK, "save");
    char *text = NULL;
    size_t len = 0;
    CHECK(ms_read_file(path, &text, &len) == MS_OK, "read back");
    CHECK(text && strcmp(text, "# microspec-vocab v1 k=4\n17\n0\n3\n99\n") == 0, "saved text: %s", text);
    free(text);
    int32_t *got = NULL;
    int64_t k = 0;
    CHECK(ms_vocab_load_list(path, 100, &got, &k) == MS_OK && k == 4 && memcmp(got, ids, sizeof ids) == 0,
          "round trip");
    free(got);
    CHECK(ms_vocab_load_list(path, 99, &got, &k) == MS_ERR_FORMAT && got == NULL, "id 99 with V = 99");
    /* No final newline is fine. */
    CHECK(ms_vocab_load_list(write_tmp("nonl", "# microspec-vocab v1 k=2\n5\n6"), 10, &got, &k) == MS_OK && k == 2,
          "no final newline");
    free(got);
    got = NULL;
    CHECK(ms_vocab_load_list("/nonexistent/dir/x.vocab", 10, &got, &k) == MS_ERR_IO, "missing file → IO");
    static const struct {
        const char *name, *text;
    } bad[] = {
        {"empty", ""},
        {"header-v2", "# microspec-vocab v2 k=2\n1\n2\n"},
        {"no-header", "1\n2\n"},
        {"header-only", "# microspec-vocab v1 k=2"},
        {"k-zero", "# microspec-vocab v1 k=0\n"},
        {"k-word", "# microspec-vocab v1 k=two\n1\n2\n"},
        {"k-space", "# microspec-vocab v1 k=2 \n1\n2\n"},
        {"k-over-V", "# microspec-vocab v1 k=11\n1\n2\n"},
        {"k-huge", "# microspec-vocab v1 k=99999999999999999999999\n1\n"},
        {"dup", "# microspec-vocab v1 k=3\n1\n2\n1\n"},
        {"range", "# microspec-vocab v1 k=2\n1\n10\n"},
        {"negative", "# microspec-vocab v1 k=2\n1\n-2\n"},
        {"plus", "# microspec-vocab v1 k=2\n1\n+2\n"},
        {"too-few", "# microspec-vocab v1 k=3\n1\n2\n"},
        {"too-many", "# microspec-vocab v1 k=2\n1\n2\n3\n"},
        {"blank-line", "# microspec-vocab v1 k=2\n1\n\n2\n"},
        {"trailing-blank", "# microspec-vocab v1 k=2\n1\n2\n\n"},
        {"crlf", "# microspec-vocab v1 k=2\r\n1\r\n2\r\n"},
        {"space", "# microspec-vocab v1 k=2\n1\n 2\n"},
        {"hex", "# microspec-vocab v1 k=2\n1\n0x2\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        got = NULL;
        ms_status st = ms_vocab_load_list(write_tmp(bad[i].name, bad[i].text), 10, &got, &k);
        CHECK(st == MS_ERR_FORMAT && got == NULL, "bad file '%s' gave %s", bad[i].name, ms_status_str(st));
        free(got);
    }
    /* The parser stops at len: bytes past it (and an embedded NUL) are not read as ids. */
    const char mem[] = "# microspec-vocab v1 k=1\n7\n8\n";
    CHECK(ms_vocab_parse_list(mem, sizeof mem - 3, "mem", 10, &got, &k) == MS_OK && k == 1 && got[0] == 7,
          "parse bounded by len");
    free(got);
    const char nul[] = "# microspec-vocab v1 k=1\n7\0";
    CHECK(ms_vocab_parse_list(nul, sizeof nul - 1, "nul", 10, &got, &k) == MS_ERR_FORMAT, "embedded NUL");
}

static void test_modes(void) {
    const int64_t V = 300, d = 7;
    float *W = malloc((size_t)(V * d) * sizeof(float));
    for (int64_t i = 0; i < V * d; i++) W[i] = (float)i * 0.25f - 3.0f;
    ms_vocab *f = NULL, *s = NULL, *bad = NULL;
    CHECK(ms_vocab_new_full(W, V, d, &f) == MS_OK, "full");
    int32_t ids[] = {299, 0, 150, 7, 8};
    CHECK(ms_vocab_new_static(W, V, d, ids, 5, &s) == MS_OK, "static");
    if (!f || !s) goto bail;
    const float *rows;
    const int32_t *id_of;
    int64_t n;
    ms_vocab_rows(f, &rows, &n, &id_of);
    CHECK(rows == W && n == V && id_of == NULL && ms_vocab_size(f) == V, "full rows are W");
    CHECK(ms_vocab_contains(f, 0) && ms_vocab_contains(f, 299) && !ms_vocab_contains(f, 300) &&
              !ms_vocab_contains(f, -1) && ms_vocab_slot_of(f, 42) == 42 && ms_vocab_id_at(f, 42) == 42,
          "full membership");
    ms_vocab_rows(s, &rows, &n, &id_of);
    CHECK(n == 5 && ms_vocab_size(s) == 5 && rows != W, "static size");
    for (int64_t r = 0; r < 5; r++) {
        CHECK(id_of[r] == ids[r] && ms_vocab_slot_of(s, ids[r]) == r, "static maps at %lld", (long long)r);
        CHECK(memcmp(rows + r * d, W + (int64_t)ids[r] * d, (size_t)d * sizeof(float)) == 0, "static row %lld",
              (long long)r);
    }
    CHECK(!ms_vocab_contains(s, 1) && ms_vocab_contains(s, 150) && ms_vocab_slot_of(s, 1) == -1, "static contains");
    /* Appends, rounds and resets are no-ops outside dynamic mode. */
    int32_t some[] = {1, 2, 1000000};
    CHECK(ms_vocab_append(s, some, 3) == MS_OK && ms_vocab_append(f, some, 3) == MS_OK, "append no-op");
    CHECK(ms_vocab_append_round(s, some, 3, some, 1, 3) == MS_OK, "round no-op");
    CHECK(ms_vocab_init_stream(s, some, 3, NULL, 0) == MS_OK, "init no-op");
    ms_vocab_reset(s);
    ms_vocab_reset(f);
    CHECK(ms_vocab_size(s) == 5 && !ms_vocab_contains(s, 1) && ms_vocab_counters_get(s).appended == 0,
          "static unchanged");
    const int32_t *ts, *ti;
    int64_t tn = -1;
    ms_vocab_take_entering(s, &ts, &ti, &tn);
    CHECK(tn == 0, "static has no entering rows");
    CHECK(ms_vocab_mode_of(f) == MS_VOCAB_FULL && ms_vocab_mode_of(s) == MS_VOCAB_STATIC, "modes");
    CHECK(strcmp(ms_vocab_mode_name(MS_VOCAB_DYNAMIC), "dynamic") == 0, "mode name");
    int32_t dup[] = {1, 2, 1}, range[] = {1, 300};
    CHECK(ms_vocab_new_static(W, V, d, dup, 3, &bad) == MS_ERR_INVALID && !bad, "static dup refused");
    CHECK(ms_vocab_new_static(W, V, d, range, 2, &bad) == MS_ERR_INVALID && !bad, "static range refused");
    CHECK(ms_vocab_new_static(W, V, d, ids, 0, &bad) == MS_ERR_INVALID && !bad, "static K 0 refused");
    /* Without W: maps only. */
    CHECK(ms_vocab_new_static(NULL, V, d, ids, 5, &bad) == MS_OK, "static without W");
    if (bad) {
        ms_vocab_rows(bad, &rows, &n, &id_of);
        CHECK(rows == NULL && n == 5 && id_of[2] == 150, "static without W: maps, no rows");
    }
bail:
    ms_vocab_free(&f);
    ms_vocab_free(&s);
    ms_vocab_free(&bad);
    free(W);
}

int main(void) {
    ms_log_set_level(MS_LOG_OFF); /* the bad-input cases log by design */
    snprintf(g_dir, sizeof g_dir, "/tmp/test_vocab_static.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_rank_random();
    test_rank_cases();
    test_list_files();
    test_modes();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    if (g_fail) {
        fprintf(stderr, "test_vocab_static: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_vocab_static: ok\n");
    return 0;
}
