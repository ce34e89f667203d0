/* test_vocab_freqlist.c — the microspec-freqlist tool end to end.
 *
 * Runs the real binary on tinyshakespeare with the Qwen3 tokenizer and on
 * small synthetic corpora, then checks its output against counts made here
 * (the corpus encoded whole, in one call) and the ranking rule written as a
 * property: exactly K distinct ids; forced ids (--eos, the tokenizer's EOS)
 * first; the rest in descending count, ties by lower id; and no id left out
 * ranks above the last one taken (which also makes small corpora fill with
 * the lowest unused ids). Determinism: two runs (different chunking, dir vs
 * tokenizer.json) give byte-identical files. Bad invocations fail cleanly.
 * Skips (77) without the shared tokenizer/corpus.
 */
#include "ms_tokenizer.h"
#include "ms_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ms_check.h"

static char g_dir[256];
static const char *TOOL_PATH = MS_BUILD_DIR "/tools/microspec-freqlist";
static const char *TOK_DIR = MS_SHARED_DIR "/tokenizers/qwen3";
static const char *CORPUS = MS_SHARED_DIR "/corpus/tinyshakespeare.txt";

/* Run the tool with `args` (stderr to a log file); returns its exit status. */
static int run_tool(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>>'%s/tool.log'", TOOL_PATH, args, g_dir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *tmp_path(const char *name) {
    static char bufs[8][512];
    static int i;
    char *p = bufs[i++ % 8];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}

/* Counts of the corpus encoded whole, in one call (no chunking). */
static int64_t *count_corpus(const ms_tok *tok, const char *path, int64_t V) {
    char *text;
    size_t len;
    if (ms_read_file(path, &text, &len) < 0) return NULL;
    ms_ids ids = {0};
    int64_t *counts = calloc((size_t)V, sizeof(int64_t));
    if (ms_tok_encode(tok, text, len, false, &ids) < 0) {
        free(counts);
        counts = NULL;
    } else {
        for (int64_t i = 0; i < ids.n; i++) counts[ids.v[i]]++;
    }
    ms_ids_free(&ids);
    free(text);
    return counts;
}

/* The ranking rule as a property of the written list. forced[n_forced] may
 * repeat ids. */
static void check_list(const char *path, const int64_t *counts, int64_t V, int64_t k, const int32_t *forced,
                       int n_forced, const char *ctx) {
    int32_t *ids = NULL;
    int64_t n = 0;
    CHECK(ms_vocab_load_list(path, V, &ids, &n) == MS_OK, "%s: the loader refuses the tool's output", ctx);
    if (!ids) return;
    CHECK(n == k, "%s: %lld ids, expected %lld", ctx, (long long)n, (long long)k);
    uint8_t *in = calloc((size_t)V, 1), *is_forced = calloc((size_t)V, 1);
    int64_t m = 0; /* distinct forced ids, expected first, in order */
    for (int i = 0; i < n_forced; i++) {
        if (is_forced[forced[i]]) continue;
        is_forced[forced[i]] = 1;
        CHECK(m < n && ids[m] == forced[i], "%s: forced id %d not at position %lld", ctx, forced[i], (long long)m);
        m++;
    }
    for (int64_t i = 0; i < n; i++) in[ids[i]] = 1; /* the loader checked distinctness */
    for (int64_t i = m + 1; i < n; i++) {
        int64_t a = counts[ids[i - 1]], b = counts[ids[i]];
        CHECK(a > b || (a == b && ids[i - 1] < ids[i]), "%s: positions %lld/%lld: id %d (count %lld) before id %d "
              "(count %lld)", ctx, (long long)i - 1, (long long)i, ids[i - 1], (long long)a, ids[i], (long long)b);
        if (g_fail > 20) break;
    }
    if (n > m) {
        int32_t last = ids[n - 1];
        for (int64_t id = 0; id < V; id++) {
            if (in[id]) continue;
            bool below = counts[id] < counts[last] || (counts[id] == counts[last] && id > last);
            CHECK(below, "%s: id %lld (count %lld) left out but ranks above the last id %d (count %lld)", ctx,
                  (long long)id, (long long)counts[id], last, (long long)counts[last]);
            if (!below) break;
        }
    }
    free(in);
    free(is_forced);
    free(ids);
}

static bool same_file(const char *a, const char *b) {
    char *ta = NULL, *tb = NULL;
    size_t la = 0, lb = 0;
    bool same = ms_read_file(a, &ta, &la) == MS_OK && ms_read_file(b, &tb, &lb) == MS_OK && la == lb &&
                memcmp(ta, tb, la) == 0;
    free(ta);
    free(tb);
    return same;
}

int main(void) {
    if (access(TOK_DIR, R_OK) != 0 || access(CORPUS, R_OK) != 0) {
        printf("skipped: %s or %s missing\n", TOK_DIR, CORPUS);
        return 77;
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/test_vocab_freqlist.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    ms_tok *tok = NULL;
    if (ms_tok_load_dir(TOK_DIR, &tok) < 0) {
        fprintf(stderr, "FAIL: cannot load %s\n", TOK_DIR);
        return 1;
    }
    int64_t V = ms_tok_vocab_size(tok);
    const int32_t *eos;
    int n_eos = ms_tok_eos(tok, &eos);
    CHECK(n_eos >= 1, "the Qwen3 tokenizer has EOS ids");
    char args[2048];

    /* 1. tinyshakespeare, K = 4096: determinism and the ranking rule. */
    int64_t *counts = count_corpus(tok, CORPUS, V);
    CHECK(counts != NULL, "count the corpus");
    snprintf(args, sizeof args, "--tokenizer '%s' --k 4096 --out '%s' '%s'", TOK_DIR, tmp_path("a.vocab"), CORPUS);
    CHECK(run_tool(args) == 0, "tool run 1");
    snprintf(args, sizeof args, "-t '%s/tokenizer.json' -k 4096 -o '%s' --chunk-bytes 3000 '%s'", TOK_DIR,
             tmp_path("b.vocab"), CORPUS);
    CHECK(run_tool(args) == 0, "tool run 2");
    CHECK(same_file(tmp_path("a.vocab"), tmp_path("b.vocab")), "two runs differ (chunking or dir vs json)");
    if (counts) check_list(tmp_path("a.vocab"), counts, V, 4096, eos, n_eos, "tinyshakespeare");
    free(counts);

    /* 2. A synthetic corpus with ties and few distinct ids: K = 64 fills. An
     * extra --eos id (rare: 7) and a repeated one are forced in. */
    const char *syn = tmp_path("syn.txt");
    write_text(syn, "cat dog\ncat dog\ncat dog\nbird\nbird\nfish fish fish fish\n");
    counts = count_corpus(tok, syn, V);
    CHECK(counts != NULL, "count the synthetic corpus");
    snprintf(args, sizeof args, "-t '%s' -k 64 -o '%s' --eos 7 --eos %d '%s'", TOK_DIR, tmp_path("syn.vocab"),
             eos[0], syn);
    CHECK(run_tool(args) == 0, "tool on the synthetic corpus");
    int32_t forced[16];
    int nf = 0;
    forced[nf++] = 7;
    forced[nf++] = eos[0];
    for (int i = 0; i < n_eos && nf < 16; i++) forced[nf++] = eos[i];
    if (counts) {
        check_list(tmp_path("syn.vocab"), counts, V, 64, forced, nf, "synthetic");
        /* Make the fill explicit: after the corpus ids, the lowest unused ids in order. */
        int32_t *ids = NULL;
        int64_t n = 0;
        if (ms_vocab_load_list(tmp_path("syn.vocab"), V, &ids, &n) == MS_OK) {
            int64_t m = 0; /* distinct forced ids lead the list */
            for (int a = 0; a < nf; a++) {
                bool dup = false;
                for (int b = 0; b < a; b++) dup |= forced[b] == forced[a];
                m += !dup;
            }
            int64_t i = m;
            while (i < n && counts[ids[i]] > 0) i++;
            CHECK(n - i > 40, "the synthetic corpus should leave most of K to the fill (%lld left)", (long long)(n - i));
            int32_t expect = 0;
            for (; i < n; i++) {
                while (counts[expect] > 0 || expect == 7 || ms_tok_is_eos(tok, expect)) expect++;
                CHECK(ids[i] == expect, "fill at %lld: %d, expected %d", (long long)i, ids[i], expect);
                expect++;
            }
        }
        free(ids);
    }
    free(counts);

    /* 3. --vocab-size past the tokenizer: ids up to V' − 1 are valid fill. */
    snprintf(args, sizeof args, "-t '%s' -k %lld --vocab-size %lld -o '%s' '%s'", TOK_DIR, (long long)(V + 5),
             (long long)(V + 5), tmp_path("all.vocab"), syn);
    CHECK(run_tool(args) == 0, "K = V' with --vocab-size");
    int32_t *all = NULL;
    int64_t n_all = 0;
    CHECK(ms_vocab_load_list(tmp_path("all.vocab"), V + 5, &all, &n_all) == MS_OK && n_all == V + 5,
          "every id once");
    free(all);

    /* 4. Bad invocations: non-zero exit, no output file. */
    snprintf(args, sizeof args, "-t '%s' -o '%s' '%s'", TOK_DIR, tmp_path("x1.vocab"), syn);
    CHECK(run_tool(args) == 2, "missing --k");
    snprintf(args, sizeof args, "-t '%s' -k %lld -o '%s' '%s'", TOK_DIR, (long long)V + 1, tmp_path("x2.vocab"), syn);
    CHECK(run_tool(args) == 1, "K > V");
    snprintf(args, sizeof args, "-t '%s' -k 10 -o '%s' '%s/none.txt'", TOK_DIR, tmp_path("x3.vocab"), g_dir);
    CHECK(run_tool(args) == 1, "missing corpus");
    snprintf(args, sizeof args, "-t '%s' -k 1 --eos 3 -o '%s' '%s'", TOK_DIR, tmp_path("x4.vocab"), syn);
    CHECK(run_tool(args) == 1, "more forced ids than K");
    snprintf(args, sizeof args, "-t '%s' -k 10 --eos %lld -o '%s' '%s'", TOK_DIR, (long long)V, tmp_path("x5.vocab"),
             syn);
    CHECK(run_tool(args) == 1, "--eos out of range");
    snprintf(args, sizeof args, "-t '%s/nothere' -k 10 -o '%s' '%s'", g_dir, tmp_path("x6.vocab"), syn);
    CHECK(run_tool(args) == 1, "missing tokenizer");
    for (int i = 1; i <= 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d.vocab", i);
        CHECK(access(tmp_path(name), F_OK) != 0, "%s written by a failing run", name);
    }
    CHECK(run_tool("--help >/dev/null") == 0, "--help");

    ms_tok_free(&tok);
    if (g_fail) {
        fprintf(stderr, "test_vocab_freqlist: %d failure(s); tool log in %s/tool.log\n", g_fail, g_dir);
        return 1;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    printf("test_vocab_freqlist: ok\n");
    return 0;
}
