/* test_coverage — microspec-coverage (tools/dev/microspec_coverage.c) and
 * tools/dev/coverage_report.sh.
 *
 *   test_coverage hand  a hand-made 20-token case in ids mode: exact dynamic
 *                       coverage and mean |I| for W_max ∈ {2, 4, 32} and exact
 *                       static coverage for seven K, worked out by hand below
 *                       (and re-derived by a naive window here); bad input.
 *   test_coverage data  the report script on a reduced real set (3 cases per
 *                       category, two W_max and two K): consistency, not
 *                       numbers — coverage ∈ [0,1], monotone in W_max and K,
 *                       counts add up — and the PNGs are real PNG files.
 *                       Skips (77) without ../shared.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ms_common.h"
#include "png_check.h"

#include "ms_check.h"

#define TOOL_BIN MS_BUILD_DIR "/tools/microspec-coverage"

/* ---- CSV rows ------------------------------------------------------------ */

typedef struct {
    char tok[64], cat[32], method[16];
    int64_t size, prompts, prompt_tokens, tokens, covered, max_window;
    double coverage, mean_window;
} row;

static int read_csv(const char *path, row **rows) {
    char *data = NULL;
    size_t len = 0;
    *rows = NULL;
    if (ms_read_file(path, &data, &len) < 0) return -1;
    int n = 0, cap = 0, line = 0;
    for (char *save = NULL, *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (line++ == 0) {
            CHECK(strcmp(l, "tokenizer,category,method,size,prompts,prompt_tokens,ref_tokens,covered,coverage,"
                            "mean_window,max_window") == 0,
                  "CSV header '%s'", l);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            *rows = realloc(*rows, (size_t)cap * sizeof **rows);
            MS_ASSERT(*rows);
        }
        row *r = &(*rows)[n];
        long long size, prompts, ptok, tokens, covered, maxw;
        int got = sscanf(l, "%63[^,],%31[^,],%15[^,],%lld,%lld,%lld,%lld,%lld,%lf,%lf,%lld", r->tok, r->cat, r->method,
                         &size, &prompts, &ptok, &tokens, &covered, &r->coverage, &r->mean_window, &maxw);
        CHECK(got == 11, "CSV line %d has %d fields: %s", line, got, l);
        if (got != 11) continue;
        r->size = size, r->prompts = prompts, r->prompt_tokens = ptok, r->tokens = tokens, r->covered = covered,
        r->max_window = maxw;
        n++;
    }
    free(data);
    return n;
}

static const row *find(const row *rows, int n, const char *tok, const char *cat, const char *method, int64_t size) {
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].tok, tok) == 0 && strcmp(rows[i].cat, cat) == 0 && strcmp(rows[i].method, method) == 0 &&
            rows[i].size == size)
            return &rows[i];
    return NULL;
}

static int run(const char *cmd) {
    fprintf(stderr, "+ %s\n", cmd);
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void write_text(const char *path, const char *text) {
    MS_ASSERT(ms_write_file_atomic(path, text, strlen(text)) == MS_OK);
}

/* ---- the hand-made case -------------------------------------------------- */

/* V = 10. Case 1 ("mt_bench"): prompt 1 2 3 1 2, reference (15 tokens)
 *   i:  0 1 2 3 4 5 6 7 8 9 10 11 12 13 14
 *   t:  3 4 1 4 4 5 2 3 1 6  6  7  1  2  3
 * a 20-entry stream. Window before t_i = distinct ids of the last W entries
 * of (prompt, t_0..t_{i-1}).
 *  W = 2:  windows {1,2} {2,3} {3,4} {4,1} {1,4} {4} {4,5} {5,2} {2,3} {3,1}
 *          {1,6} {6} {6,7} {7,1} {1,2}: hits at i = 3, 4, 10 → 3 of 15;
 *          sizes 2×13 + 1×2 = 28.
 *  W = 4:  windows {2,3,1} {3,1,2} {1,2,3,4} {2,3,4,1} {3,4,1} {4,1} {1,4,5}
 *          {4,5,2} {4,5,2,3} {5,2,3,1} {2,3,1,6} {3,1,6} {1,6,7} {6,7,1}
 *          {6,7,1,2}: hits at i = 0, 2, 3, 4, 10, 12 → 6 of 15;
 *          sizes 3+3+4+4+3+2+3+3+4+4+4+3+3+3+4 = 50.
 *  W = 32: everything seen so far: misses only at the first 4, 5, 6, 7
 *          → 11 of 15; sizes 3+3+4+4+4+4+5+5+5+5+6+6+7+7+7 = 75.
 * Case 2 ("qa"): prompt 0, reference 0 0 5: windows {0} {0} {0} for every W
 *   ≥ 1 → 2 of 3, sizes 3.
 * Static: corpus ids 4×4, 1×3, 9×3, 2×2, 3×1, forced id 7. Rank: 7 (forced),
 *   4, 1, 9 (tie with 1: lower id first), 2, 3, then unseen ids by id: 0, 5,
 *   6, 8. Reference occurrences (case 1 | case 2): 7:1|0 4:3|0 1:3|0 9:0|0
 *   2:2|0 3:3|0 0:0|2 5:1|1 6:2|0.
 *   K=1 {7}: 1|0.  K=2 +4: 4|0.  K=3 +1: 7|0.  K=5 +9,2: 9|0.  K=6 +3: 12|0.
 *   K=8 +0,5: 13|3.  K=9 +6: 15|3. */
static const char *HAND_CASES = "# category<TAB>prompt<TAB>reference\n"
                                "mt_bench\t1 2 3 1 2\t3 4 1 4 4 5 2 3 1 6 6 7 1 2 3\n"
                                "\n"
                                "qa\t0\t0 0 5\n";
static const char *HAND_CORPUS = "4 4 9 1\n4 2 9 1 3\n2 1 4 9\n";

/* The naive window: distinct ids among stream[from, to). */
static void naive_dynamic(const int32_t *prompt, int np, const int32_t *ref, int nr, int w, int64_t *hits,
                          int64_t *size_sum) {
    int32_t stream[64];
    int n = 0;
    for (int i = 0; i < np; i++) stream[n++] = prompt[i];
    *hits = 0, *size_sum = 0;
    for (int i = 0; i < nr; i++) {
        bool seen[10] = {0}, hit = false;
        int distinct = 0;
        for (int j = n > w ? n - w : 0; j < n; j++) {
            if (!seen[stream[j]]) seen[stream[j]] = true, distinct++;
            hit |= stream[j] == ref[i];
        }
        *hits += hit;
        *size_sum += distinct;
        stream[n++] = ref[i];
    }
}

static void test_hand(const char *dir) {
    char cases[512], corpus[512], csv[512], cmd[2048];
    snprintf(cases, sizeof cases, "%s/cases.txt", dir);
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    snprintf(csv, sizeof csv, "%s/hand.csv", dir);
    write_text(cases, HAND_CASES);
    write_text(corpus, HAND_CORPUS);

    /* the hand numbers, re-derived naively (guards the comment above) */
    const int32_t p1[] = {1, 2, 3, 1, 2}, r1[] = {3, 4, 1, 4, 4, 5, 2, 3, 1, 6, 6, 7, 1, 2, 3};
    const int ws[] = {2, 4, 32};
    const int64_t hand_hits[] = {3, 6, 11}, hand_sizes[] = {28, 50, 75};
    for (int i = 0; i < 3; i++) {
        int64_t hits, sizes;
        naive_dynamic(p1, 5, r1, 15, ws[i], &hits, &sizes);
        CHECK(hits == hand_hits[i] && sizes == hand_sizes[i], "naive W=%d: %lld hits, %lld sizes", ws[i],
              (long long)hits, (long long)sizes);
    }

    snprintf(cmd, sizeof cmd,
             "%s --cases %s --corpus-ids %s --vocab-size 10 --eos 7 --w-max 2,4,32 --k 1,2,3,5,6,8,9 --csv %s --md "
             "%s/hand.md",
             TOOL_BIN, cases, corpus, csv, dir);
    CHECK(run(cmd) == 0, "tool failed on the hand case");
    row *rows = NULL;
    int n = read_csv(csv, &rows);
    CHECK(n == 3 * 10, "%d CSV rows, expected 30 (mt_bench, qa, overall × 10 methods)", n);

    for (int i = 0; i < 3; i++) {
        const row *a = find(rows, n, "ids", "mt_bench", "dynamic", ws[i]);
        const row *b = find(rows, n, "ids", "qa", "dynamic", ws[i]);
        const row *o = find(rows, n, "ids", "overall", "dynamic", ws[i]);
        CHECK(a && b && o, "W=%d rows missing", ws[i]);
        if (!a || !b || !o) continue;
        CHECK(a->tokens == 15 && a->covered == hand_hits[i], "W=%d mt_bench: %lld of %lld", ws[i],
              (long long)a->covered, (long long)a->tokens);
        CHECK(fabs(a->mean_window - (double)hand_sizes[i] / 15.0) < 1e-3, "W=%d mean |I| %.4f", ws[i],
              a->mean_window);
        CHECK(a->max_window == (ws[i] == 32 ? 7 : ws[i]), "W=%d max |I| %lld", ws[i], (long long)a->max_window);
        CHECK(b->tokens == 3 && b->covered == 2 && fabs(b->mean_window - 1.0) < 1e-9 && b->max_window == 1,
              "W=%d qa: %lld of %lld, mean %.3f", ws[i], (long long)b->covered, (long long)b->tokens, b->mean_window);
        CHECK(o->tokens == 18 && o->covered == hand_hits[i] + 2 && o->prompts == 2 && o->prompt_tokens == 6,
              "W=%d overall: %lld of %lld", ws[i], (long long)o->covered, (long long)o->tokens);
        CHECK(fabs(o->coverage - (double)(hand_hits[i] + 2) / 18.0) < 1e-6, "W=%d overall coverage %.6f", ws[i],
              o->coverage);
        CHECK(fabs(o->mean_window - (double)(hand_sizes[i] + 3) / 18.0) < 1e-3, "W=%d overall mean |I| %.4f", ws[i],
              o->mean_window);
    }
    const int64_t ks[] = {1, 2, 3, 5, 6, 8, 9};
    const int64_t k_hits1[] = {1, 4, 7, 9, 12, 13, 15}, k_hits2[] = {0, 0, 0, 0, 0, 3, 3};
    for (int i = 0; i < 7; i++) {
        const row *a = find(rows, n, "ids", "mt_bench", "static", ks[i]);
        const row *b = find(rows, n, "ids", "qa", "static", ks[i]);
        const row *o = find(rows, n, "ids", "overall", "static", ks[i]);
        CHECK(a && b && o, "K=%lld rows missing", (long long)ks[i]);
        if (!a || !b || !o) continue;
        CHECK(a->covered == k_hits1[i] && b->covered == k_hits2[i] && o->covered == k_hits1[i] + k_hits2[i],
              "K=%lld: %lld, %lld, %lld covered", (long long)ks[i], (long long)a->covered, (long long)b->covered,
              (long long)o->covered);
        CHECK(a->mean_window == (double)ks[i] && o->max_window == ks[i], "K=%lld size", (long long)ks[i]);
    }
    free(rows);

    /* bad input is answered with an error, not a crash or a number */
    snprintf(cmd, sizeof cmd, "%s/bad.txt", dir);
    write_text(cmd, "qa\t1 2\t3 10\n"); /* id 10 out of [0, 10) */
    snprintf(cmd, sizeof cmd, "%s --cases %s/bad.txt --vocab-size 10 --csv %s/bad.csv 2>/dev/null", TOOL_BIN, dir, dir);
    CHECK(run(cmd) == 1, "an id out of range must fail");
    snprintf(cmd, sizeof cmd, "%s/bad.txt", dir);
    write_text(cmd, "qa 1 2 3\n"); /* no tabs */
    snprintf(cmd, sizeof cmd, "%s --cases %s/bad.txt --vocab-size 10 --csv %s/bad.csv 2>/dev/null", TOOL_BIN, dir, dir);
    CHECK(run(cmd) == 1, "a line without tabs must fail");
    snprintf(cmd, sizeof cmd, "%s --cases %s --vocab-size 10 --w-max 4,0 2>/dev/null", TOOL_BIN, cases);
    CHECK(run(cmd) == 2, "--w-max 0 must be refused");
    snprintf(cmd, sizeof cmd, "%s --cases %s --vocab-size 10 --k 11 --csv %s/bad.csv 2>/dev/null", TOOL_BIN, cases,
             dir);
    CHECK(run(cmd) == 1, "K > V must fail");
}

/* ---- PNG ------------------------------------------------------------------ */

/* png_ok(): tests/png_check.h */

static void check_png(const char *path) {
    char *data = NULL;
    size_t len = 0;
    CHECK(ms_read_file(path, &data, &len) == MS_OK, "%s unreadable", path);
    if (!data) return;
    uint32_t w = 0, h = 0;
    const char *why = "";
    CHECK(png_ok((const uint8_t *)data, len, &w, &h, &why), "%s: %s", path, why);
    fprintf(stderr, "%s: PNG %ux%u, %zu bytes\n", path, w, h, len);
    /* the checker rejects a damaged header (it can fail) */
    data[18] ^= 0x01; /* a width byte: the IHDR CRC no longer matches */
    CHECK(!png_ok((const uint8_t *)data, len, &w, &h, &why), "%s: a damaged IHDR passed", path);
    data[18] ^= 0x01;
    data[1] = 'X';
    CHECK(!png_ok((const uint8_t *)data, len, &w, &h, &why), "%s: a bad signature passed", path);
    free(data);
}

/* ---- the reduced real study ------------------------------------------------ */

static const char *CATS[] = {"mt_bench", "translation", "summarization", "math_reasoning", "rag", "humaneval"};
#define N_CATS (int)(sizeof CATS / sizeof *CATS)

static void check_study(const row *rows, int n, const char *tok) {
    const int64_t sizes[] = {1024, 4096};
    const char *methods[] = {"static", "dynamic"};
    int64_t sum[2][2][4] = {{{0}}}; /* [method][size][prompts, prompt_tokens, tokens, covered] */
    for (int c = 0; c < N_CATS; c++) {
        const row *first = NULL;
        for (int m = 0; m < 2; m++) {
            const row *prev = NULL;
            for (int s = 0; s < 2; s++) {
                const row *r = find(rows, n, tok, CATS[c], methods[m], sizes[s]);
                CHECK(r, "%s %s %s %lld missing", tok, CATS[c], methods[m], (long long)sizes[s]);
                if (!r) continue;
                CHECK(r->prompts == 3, "%s %s: %lld cases, expected 3", tok, CATS[c], (long long)r->prompts);
                CHECK(r->tokens > 0 && r->covered >= 0 && r->covered <= r->tokens, "%s %s: %lld of %lld", tok,
                      CATS[c], (long long)r->covered, (long long)r->tokens);
                CHECK(r->coverage >= 0.0 && r->coverage <= 1.0 &&
                          fabs(r->coverage - (double)r->covered / (double)r->tokens) < 1e-6,
                      "%s %s: coverage %.6f", tok, CATS[c], r->coverage);
                CHECK(r->mean_window <= (double)r->size + 1e-9 && r->max_window <= r->size,
                      "%s %s %s: |I| above the size", tok, CATS[c], r->method);
                if (m == 1) CHECK(r->mean_window >= 1.0, "%s %s: empty dynamic window", tok, CATS[c]);
                if (first)
                    CHECK(r->tokens == first->tokens && r->prompts == first->prompts &&
                              r->prompt_tokens == first->prompt_tokens,
                          "%s %s: methods see different cases", tok, CATS[c]);
                first = first ? first : r;
                if (prev) /* a larger W_max window / a longer top-K list holds a superset */
                    CHECK(r->covered >= prev->covered, "%s %s %s: coverage falls from size %lld to %lld", tok,
                          CATS[c], methods[m], (long long)prev->size, (long long)r->size);
                prev = r;
                int64_t add[4] = {r->prompts, r->prompt_tokens, r->tokens, r->covered};
                for (int q = 0; q < 4; q++) sum[m][s][q] += add[q];
            }
        }
    }
    CHECK(!find(rows, n, tok, "qa", "static", 1024), "%s: qa has no references, so no rows", tok);
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 2; s++) {
            const row *o = find(rows, n, tok, "overall", methods[m], sizes[s]);
            CHECK(o, "%s overall %s %lld missing", tok, methods[m], (long long)sizes[s]);
            if (!o) continue;
            CHECK(o->prompts == sum[m][s][0] && o->prompt_tokens == sum[m][s][1] && o->tokens == sum[m][s][2] &&
                      o->covered == sum[m][s][3],
                  "%s overall %s %lld is not the sum of the categories", tok, methods[m], (long long)sizes[s]);
        }
}

static void test_data(const char *dir) {
    char cmd[4096], path[600];
    snprintf(cmd, sizeof cmd,
             "MS_BUILD_DIR='%s' MS_SHARED_DIR='%s' bash '%s/tools/dev/coverage_report.sh' '%s/out' "
             "--max-per-category 3 --w-max 1024,4096 --k 1024,4096",
             MS_BUILD_DIR, MS_SHARED_DIR, MS_SOURCE_DIR, dir);
    CHECK(run(cmd) == 0, "coverage_report.sh failed");
    snprintf(path, sizeof path, "%s/out/coverage.csv", dir);
    row *rows = NULL;
    int n = read_csv(path, &rows);
    CHECK(n == 2 * (N_CATS + 1) * 4, "%d CSV rows, expected %d", n, 2 * (N_CATS + 1) * 4);
    check_study(rows, n, "qwen3");
    check_study(rows, n, "llama3");
    free(rows);

    snprintf(path, sizeof path, "%s/out/coverage.md", dir);
    char *md = NULL;
    size_t len = 0;
    CHECK(ms_read_file(path, &md, &len) == MS_OK, "no coverage.md");
    const char *needles[] = {"## Definitions", "## qwen3", "## llama3", "- Commit: ", "- Machine: ", "- Date: ",
                             "| static K=1024 |", "| dynamic W_max=4096 |", "--max-per-category 3"};
    for (size_t i = 0; md && i < sizeof needles / sizeof *needles; i++)
        CHECK(strstr(md, needles[i]), "coverage.md lacks '%s'", needles[i]);
    free(md);

    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "gnuplot not installed: PNG sub-check skipped\n");
        return;
    }
    snprintf(path, sizeof path, "%s/out/coverage_qwen3.png", dir);
    check_png(path);
    snprintf(path, sizeof path, "%s/out/coverage_llama3.png", dir);
    check_png(path);
}

int main(int argc, char **argv) {
    bool data = argc > 1 && strcmp(argv[1], "data") == 0;
    if (!ms_file_exists(TOOL_BIN)) {
        fprintf(stderr, "%s not built\n", TOOL_BIN);
        return 1;
    }
    if (data && !ms_file_exists(MS_SHARED_DIR "/tokenizers/qwen3/tokenizer.json")) {
        fprintf(stderr, "SKIP: %s not available\n", MS_SHARED_DIR);
        return 77;
    }
    char dir[] = MS_BUILD_DIR "/test_coverage_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    if (data)
        test_data(dir);
    else
        test_hand(dir);
    char cmd[sizeof dir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (g_fail == 0 && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (g_fail) fprintf(stderr, "%d check(s) failed; files kept in %s\n", g_fail, dir);
    else fprintf(stderr, "test_coverage %s: all checks passed\n", data ? "data" : "hand");
    return g_fail ? 1 : 0;
}
