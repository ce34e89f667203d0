/* test_specvocab.c — SpecVocab's C side (draft-node/ms_specvocab.c,
 * ms_vsel.c) and the artefact checks (issue 16).
 *
 *  1. ms_sha256_file against the FIPS 180-2 vector ("abc") and against the
 *     hash Python's hashlib wrote into an artefact (microspec.model_sha256).
 *  2. The pick against a naive re-computation written here: artefacts built by
 *     tools/vocab/specvocab_build.py for a seeded random model (rank 8, F32 w_vocab,
 *     and rank 32, Q8_0 w_vocab, dequantized with the reference
 *     ms_q_dequant_ref), s = W_vocab·(W_down·h) in double, top-k(depth) per row
 *     (k(l) = max(k_min, ⌊k·R^l⌋) written out here), union over the rows: the
 *     same id set, for 1..4 rows and depths 0..3.
 *  3. Refusals, with the logged text checked: the artefact for another model
 *     (both hashes and the model path named), the wrong artefact kind, the
 *     wrong vocabulary size, a missing artefact file.
 *  4. ms_vsel_step: the step vocabulary's active set is picks ∪ window.
 *  5. The draft: mode names round-trip; dynaspec given a SpecVocab artefact refused, naming the kinds,
 *     a selector over static refused, a draft of another model refusing the
 *     artefact, no artefact, a budget decay > 1; specvocab+window accepted.
 */
#include "spec_util.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_gguf.h"
#include "ms_quant.h"
#include "ms_specvocab.h"

enum { V = 300, D = 64, MAXR = 4 };

/* Run fn with stderr captured into buf (the log lines it wrote). */
static ms_status captured(ms_status (*fn)(void *), void *arg, char *buf, size_t cap) {
    fflush(stderr);
    char path[] = "/tmp/ms-svlog-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    dup2(fd, 2);
    ms_status s = fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return s;
}

static ms_status open_sel(void *arg) {
    const ms_specvocab_opts *o = arg;
    ms_vsel s;
    ms_status st = ms_specvocab_vsel(o, &s);
    if (st >= 0) ms_vsel_release(&s);
    return st;
}

static void test_sha256(const char *tmp, const char *model, const char *art) {
    char p[1200], hex[65];
    snprintf(p, sizeof p, "%s/abc.txt", tmp);
    SPEC_CHECK(ms_write_file_atomic(p, "abc", 3) == MS_OK, "write");
    SPEC_CHECK(ms_sha256_file(p, hex) == MS_OK &&
                   !strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
               "sha256(abc) = %s", hex);
    ms_gguf *g = NULL;
    const char *want = "";
    SPEC_CHECK(ms_gguf_open(art, &g) == MS_OK && ms_gguf_get_str(g, "microspec.model_sha256", &want, NULL) == MS_OK,
               "artefact KV");
    snprintf(p, sizeof p, "%s/model.safetensors", model);
    SPEC_CHECK(ms_sha256_file(p, hex) == MS_OK && !strcmp(hex, want), "sha256 %s vs hashlib's %s", hex, want);
    ms_gguf_close(&g);
    SPEC_CHECK(ms_sha256_file("/nonexistent/x", hex) == MS_ERR_IO, "missing file");
}

/* The artefact's matrices as double: wd [r, d], wv [V, r]. */
static int64_t read_art(const char *art, double **wd, double **wv) {
    ms_gguf *g = NULL;
    if (ms_gguf_open(art, &g) != MS_OK) return 0;
    const ms_gguf_tensor_info *td = ms_gguf_find_tensor(g, "specvocab.w_down");
    const ms_gguf_tensor_info *tv = ms_gguf_find_tensor(g, "specvocab.w_vocab");
    int64_t r = td ? td->shape[0] : 0;
    if (!td || !tv || td->dtype != MS_DTYPE_F32) {
        ms_gguf_close(&g);
        return 0;
    }
    *wd = malloc((size_t)(r * D) * sizeof(double));
    *wv = malloc((size_t)(V * r) * sizeof(double));
    float *row = malloc((size_t)r * sizeof(float));
    for (int64_t i = 0; i < r * D; i++) {
        float x;
        memcpy(&x, (const char *)td->data + i * 4, 4);
        (*wd)[i] = x;
    }
    size_t rb;
    ms_dtype_row_bytes(tv->dtype, r, &rb);
    for (int64_t v = 0; v < V; v++) {
        ms_q_dequant_ref(tv->dtype, (const char *)tv->data + (size_t)v * rb, row, r);
        for (int64_t j = 0; j < r; j++) (*wv)[v * r + j] = row[j];
    }
    free(row);
    ms_gguf_close(&g);
    return r;
}

static void test_pick(const char *model, const char *art, const char *what) {
    double *wd = NULL, *wv = NULL;
    const int64_t r = read_art(art, &wd, &wv);
    SPEC_CHECK(r > 0, "%s: read artefact", what);
    if (r <= 0) return;
    const int64_t k = 20, k_min = 6;
    const double R = 0.6;
    ms_specvocab_opts o = {.artifact = art, .model_path = model, .V = V, .d = D, .k = k, .decay = R, .k_min = k_min,
                           .max_rows = MAXR};
    ms_vsel sel;
    ms_status s = ms_specvocab_vsel(&o, &sel);
    SPEC_CHECK(s == MS_OK && sel.max_ids == MAXR * k && !strcmp(sel.name, "specvocab"), "%s: open", what);
    if (s != MS_OK) return;
    ms_rng rng;
    ms_rng_seed(&rng, 77);
    float hid[MAXR * D], prev[MAXR * D] = {0};
    int32_t tok[MAXR] = {0}, ids[MAXR * 20];
    double z[64], sc[V];
    int64_t checked = 0;
    for (int64_t n = 1; n <= MAXR; n++)
        for (int64_t depth = 0; depth < 4; depth++) {
            for (int64_t i = 0; i < n * D; i++) hid[i] = (float)(ms_rng_uniform(&rng) * 4.0 - 2.0);
            int64_t n_ids = -1;
            s = sel.pick(sel.ctx, hid, prev, tok, n, depth, ids, sel.max_ids, &n_ids);
            SPEC_CHECK(s == MS_OK, "%s: pick", what);
            /* naive: k(l) = max(k_min, floor(k R^l)), at most k */
            int64_t kl = depth == 0 ? k : (int64_t)floor((double)k * pow(R, (double)depth));
            if (kl < k_min) kl = k_min;
            bool want[V] = {0}, got[V] = {0};
            for (int64_t row = 0; row < n; row++) {
                for (int64_t j = 0; j < r; j++) {
                    z[j] = 0;
                    for (int64_t c = 0; c < D; c++) z[j] += wd[j * D + c] * hid[row * D + c];
                }
                for (int64_t v = 0; v < V; v++) {
                    sc[v] = 0;
                    for (int64_t j = 0; j < r; j++) sc[v] += wv[v * r + j] * z[j];
                }
                for (int64_t t = 0; t < kl; t++) { /* selection sort: the best left, ties → lower id */
                    int64_t best = 0;
                    for (int64_t v = 1; v < V; v++)
                        if (sc[v] > sc[best]) best = v;
                    want[best] = true;
                    sc[best] = -INFINITY;
                }
            }
            int64_t n_want = 0;
            for (int64_t v = 0; v < V; v++) n_want += want[v];
            bool dup = false;
            for (int64_t i = 0; i < n_ids; i++) {
                if (ids[i] < 0 || ids[i] >= V) {
                    dup = true;
                    continue;
                }
                dup |= got[ids[i]];
                got[ids[i]] = true;
            }
            SPEC_CHECK(!dup, "%s n=%lld depth=%lld: a repeated or out-of-range id", what, (long long)n, (long long)depth);
            SPEC_CHECK(n_ids == n_want && !memcmp(got, want, sizeof got),
                       "%s n=%lld depth=%lld: %lld ids picked, the naive union has %lld (or other ids)", what,
                       (long long)n, (long long)depth, (long long)n_ids, (long long)n_want);
            checked++;
        }
    fprintf(stderr, "%s: rank %lld, %lld picks equal to the naive union\n", what, (long long)r, (long long)checked);
    ms_vsel_release(&sel);
    free(wd);
    free(wv);
}

static void test_refusals(const char *model_a, const char *model_b, const char *art_a, const char *tmp) {
    char log[8192], want_a[65] = "", want_b[65] = "", p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors", model_a);
    ms_sha256_file(p, want_a);
    snprintf(p, sizeof p, "%s/model.safetensors", model_b);
    ms_sha256_file(p, want_b);
    ms_specvocab_opts o = {.artifact = art_a, .model_path = model_b, .V = V, .d = D, .k = 8, .decay = 1.0,
                           .max_rows = 2};
    ms_status s = captured(open_sel, &o, log, sizeof log);
    SPEC_CHECK(s == MS_ERR_INVALID, "another model's artefact: status %s", ms_status_str(s));
    SPEC_CHECK(strstr(log, art_a) && strstr(log, want_a) && strstr(log, want_b) && strstr(log, model_b) &&
                   strstr(log, "was made for the model with sha256"),
               "the refusal names the artefact, both hashes and the model: %s", log);
    o.model_path = model_a;
    o.V = V + 1;
    s = captured(open_sel, &o, log, sizeof log);
    SPEC_CHECK(s == MS_ERR_INVALID && strstr(log, "microspec.vocab_size = 300"), "wrong V: %s", log);
    o.V = V;
    ms_gguf *g = NULL;
    s = ms_vsel_artifact_open(art_a, "dynaspec", model_a, V, D, &g);
    SPEC_CHECK(s == MS_ERR_INVALID && !g, "a specvocab artefact is not a dynaspec one");
    snprintf(p, sizeof p, "%s/none.gguf", tmp);
    o.artifact = p;
    s = captured(open_sel, &o, log, sizeof log);
    SPEC_CHECK(s < 0 && strstr(log, p), "missing artefact named: %s", log);
}

static ms_status new_draft(void *arg) {
    ms_dft *d = NULL;
    ms_status st = ms_dft_new(arg, &d);
    ms_dft_free(&d);
    return st;
}

/* The draft's own refusals and the mode names. */
static void test_draft(const char *model_a, const char *model_b, const char *art_a) {
    static const char *names[] = {"full", "static", "dynamic", "specvocab", "dynaspec", "specvocab+window",
                                  "dynaspec+window"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ms_vocab_mode m;
        ms_dft_vsel v;
        SPEC_CHECK(ms_dft_vocab_parse(names[i], &m, &v) && !strcmp(ms_dft_vocab_name(m, v), names[i]), "name %s",
                   names[i]);
    }
    ms_vocab_mode m;
    ms_dft_vsel v;
    SPEC_CHECK(!ms_dft_vocab_parse("specvocab+static", &m, &v), "bad name refused");
    char log[8192];
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LM;
    o.model_dir = model_a;
    o.vocab = MS_VOCAB_FULL;
    o.vsel = MS_DFT_VSEL_DYNASPEC;
    o.vocab_artifact = art_a;
    ms_status s = captured(new_draft, &o, log, sizeof log);
    /* DynaSpec runs over a Hugging Face folder too (the draft's own f32 embedding), but not with a SpecVocab artefact */
    SPEC_CHECK(s == MS_ERR_INVALID && strstr(log, "not \"dynaspec\""), "dynaspec given a specvocab artefact: %s", log);
    o.vsel = MS_DFT_VSEL_SPECVOCAB;
    o.vocab = MS_VOCAB_STATIC;
    SPEC_CHECK(captured(new_draft, &o, log, sizeof log) == MS_ERR_INVALID, "specvocab over static refused");
    o.vocab = MS_VOCAB_DYNAMIC;
    o.model_dir = model_b;
    s = captured(new_draft, &o, log, sizeof log);
    SPEC_CHECK(s == MS_ERR_INVALID && strstr(log, "was made for the model with sha256") && strstr(log, model_b),
               "a draft of model b refuses model a's artefact: %s", log);
    o.model_dir = model_a;
    o.vocab_artifact = NULL;
    s = captured(new_draft, &o, log, sizeof log);
    SPEC_CHECK(s == MS_ERR_INVALID && strstr(log, "--vocab-artifact"), "no artefact: %s", log);
    o.vocab_artifact = art_a;
    o.budget_decay = 1.5;
    SPEC_CHECK(captured(new_draft, &o, log, sizeof log) == MS_ERR_INVALID, "budget decay 1.5 refused");
    o.budget_decay = 1.0;
    SPEC_CHECK(captured(new_draft, &o, log, sizeof log) == MS_OK, "specvocab+window over model a: %s", log);
}

static ms_status fixed_pick(void *ctx, const float *hid, const float *prev, const int32_t *tok, int64_t n,
                            int64_t depth, int32_t *ids, int64_t cap, int64_t *n_ids) {
    (void)ctx, (void)hid, (void)prev, (void)tok, (void)n;
    static const int32_t P[] = {5, 9, 5, 200};
    int64_t m = depth == 0 ? 4 : 2;
    if (m > cap) return MS_ERR_RANGE;
    memcpy(ids, P, (size_t)m * sizeof *ids);
    *n_ids = m;
    return MS_OK;
}

static void test_step(void) {
    ms_vocab *step = NULL, *win = NULL;
    SPEC_CHECK(ms_vocab_new_step(NULL, V, D, 20, &step) == MS_OK && ms_vocab_new_dynamic(NULL, V, D, 8, &win) == MS_OK,
               "vocabs");
    if (!step || !win) return;
    const int32_t stream[] = {7, 9, 11, 7};
    SPEC_CHECK(ms_vocab_append(win, stream, 4) == MS_OK, "window");
    ms_vsel sel = {.name = "fixed", .pick = fixed_pick, .max_ids = 4};
    int32_t scratch[12];
    float h[D] = {0};
    int32_t t = 0;
    SPEC_CHECK(ms_vsel_step(&sel, step, win, h, h, &t, 1, 0, scratch, 12) == MS_OK, "step");
    const int32_t want[] = {5, 9, 200, 7, 11};
    SPEC_CHECK(ms_vocab_size(step) == 5, "picks ∪ window has 5 ids, got %lld", (long long)ms_vocab_size(step));
    for (int i = 0; i < 5; i++) SPEC_CHECK(ms_vocab_contains(step, want[i]), "id %d", want[i]);
    SPEC_CHECK(ms_vsel_step(&sel, step, NULL, h, h, &t, 1, 1, scratch, 12) == MS_OK && ms_vocab_size(step) == 2 &&
                   ms_vocab_contains(step, 9) && !ms_vocab_contains(step, 7),
               "depth 1, no window: {5, 9}");
    SPEC_CHECK(ms_vsel_step(&sel, step, win, h, h, &t, 1, 0, scratch, 5) == MS_ERR_INVALID, "scratch too small refused");
    ms_vocab_free(&step);
    ms_vocab_free(&win);
}

int main(void) {
    char tmp[512];
    if (!ms_test_tmpdir("ms-specvocab", tmp, sizeof tmp)) return 1;
    char a[600], b[600], art8[700], art32[700];
    ms_status s = spec_mkmodel(tmp, "a", "--arch llama --vocab 300 --hidden 64 --layers 1 --heads 4 --kv-heads 2 --seed 5",
                               a, sizeof a);
    if (s >= 0)
        s = spec_mkmodel(tmp, "b", "--arch llama --vocab 300 --hidden 64 --layers 1 --heads 4 --kv-heads 2 --seed 6", b,
                         sizeof b);
    snprintf(art8, sizeof art8, "%s/a8.gguf", tmp);
    snprintf(art32, sizeof art32, "%s/a32.gguf", tmp);
    if (s >= 0) s = spec_specvocab_build(a, art8, 8);
    if (s >= 0) s = spec_specvocab_build(a, art32, 32);
    SPEC_CHECK(s >= 0, "models and artefacts");
    if (s >= 0) {
        test_sha256(tmp, a, art8);
        test_pick(a, art8, "rank 8 f32");
        test_pick(a, art32, "rank 32 q8_0");
        test_refusals(a, b, art8, tmp);
        test_step();
        test_draft(a, b, art8);
    }
    ms_test_rmtree(tmp);
    if (spec_failures) fprintf(stderr, "test_specvocab: %d failure(s)\n", spec_failures);
    else printf("test_specvocab: ok\n");
    return spec_failures ? 1 : 0;
}
