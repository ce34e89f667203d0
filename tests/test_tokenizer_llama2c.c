/* llama2.c tokenizer.bin (tok512): encode against a naive transcription of
 * run.c encode() written here (linear-search lookups, O(n²) merge loop),
 * decode round trip, streaming decode of byte-fallback characters, bad and
 * truncated files, and ms_tok_load_dir with tokenizer.bin + config.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ms_tokenizer.h"

#include "ms_check.h"

/* ---- the reference: run.c as written, over a vocab read here -------------- */

typedef struct {
    int n;
    char **piece; /* NUL-terminated */
    float *score;
} ref_vocab;

static int ref_load(const char *path, int n, ref_vocab *v) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int max_len;
    if (fread(&max_len, 4, 1, f) != 1) return -1;
    v->n = n;
    v->piece = calloc((size_t)n, sizeof *v->piece);
    v->score = calloc((size_t)n, sizeof *v->score);
    for (int i = 0; i < n; i++) {
        int len;
        if (fread(&v->score[i], 4, 1, f) != 1 || fread(&len, 4, 1, f) != 1) return -1;
        v->piece[i] = calloc((size_t)len + 1, 1);
        if (fread(v->piece[i], 1, (size_t)len, f) != (size_t)len) return -1;
    }
    fclose(f);
    return 0;
}

static void ref_free(ref_vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->piece[i]);
    free(v->piece);
    free(v->score);
}

static int ref_lookup(const ref_vocab *v, const char *s) {
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->piece[i], s) == 0) return i;
    return -1;
}

/* run.c encode(text, bos=0, eos=0); tokens has room for strlen(text)+2 */
static int ref_encode(const ref_vocab *v, const char *text, int *tokens) {
    int n = 0;
    char buf[64];
    size_t str_len = 0;
    if (text[0] != '\0') tokens[n++] = ref_lookup(v, " ");
    for (const char *c = text; *c != '\0'; c++) {
        if ((*c & 0xC0) != 0x80) str_len = 0;
        buf[str_len++] = *c;
        buf[str_len] = '\0';
        if ((*(c + 1) & 0xC0) == 0x80 && str_len < 4) continue;
        int id = ref_lookup(v, buf);
        if (id != -1) {
            tokens[n++] = id;
        } else {
            for (size_t i = 0; i < str_len; i++) tokens[n++] = (unsigned char)buf[i] + 3;
        }
        str_len = 0;
    }
    char *cat = malloc(4096);
    while (1) {
        float best_score = -1e10f;
        int best_id = -1, best_idx = -1;
        for (int i = 0; i < n - 1; i++) {
            snprintf(cat, 4096, "%s%s", v->piece[tokens[i]], v->piece[tokens[i + 1]]);
            int id = ref_lookup(v, cat);
            if (id != -1 && v->score[id] > best_score) {
                best_score = v->score[id];
                best_id = id;
                best_idx = i;
            }
        }
        if (best_idx == -1) break;
        tokens[best_idx] = best_id;
        for (int i = best_idx + 1; i < n - 1; i++) tokens[i] = tokens[i + 1];
        n--;
    }
    free(cat);
    return n;
}

/* ---- tests ------------------------------------------------------------------ */

static void check_string(const ms_tok *t, const ref_vocab *v, const char *s) {
    size_t len = strlen(s);
    int *want = malloc((len + 2) * sizeof *want);
    int n_want = ref_encode(v, s, want);
    ms_ids got = {0};
    ms_status st = ms_tok_encode(t, s, len, false, &got);
    bool same = st == MS_OK && got.n == n_want;
    for (int i = 0; same && i < n_want; i++) same = got.v[i] == want[i];
    if (!same) {
        fprintf(stderr, "FAIL encode \"%s\"\n  expected:", s);
        for (int i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n  actual:  ");
        for (int64_t i = 0; i < got.n; i++) fprintf(stderr, " %d", got.v[i]);
        fprintf(stderr, "\n");
        g_fail++;
    }
    /* decode([BOS] + ids) drops the dummy-prefix space after BOS */
    ms_ids with_bos = {0};
    ms_ids_push(&with_bos, ms_tok_bos(t));
    for (int64_t i = 0; i < got.n; i++) ms_ids_push(&with_bos, got.v[i]);
    char *back = NULL;
    st = ms_tok_decode_all(t, with_bos.v, with_bos.n, true, &back);
    CHECK(st == MS_OK && back && strcmp(back, s) == 0, "decode(BOS + encode(\"%s\")) = \"%s\"", s,
          back ? back : "(null)");
    free(back);
    ms_ids_free(&with_bos);
    ms_ids_free(&got);
    free(want);
}

static void test_truncated(const char *path, const char *dir) {
    char *data;
    size_t len;
    if (ms_read_file(path, &data, &len) < 0) {
        CHECK(0, "read %s", path);
        return;
    }
    char *p = ms_path_join(dir, "truncated.bin");
    const size_t cuts[] = {0, 2, 4, 7, 11, 12, 100, len / 2, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        ms_write_file_atomic(p, data, cuts[i]);
        ms_tok *t = NULL;
        ms_status st = ms_tok_load_llama2c(p, 512, &t);
        CHECK(st == MS_ERR_FORMAT && t == NULL, "truncated at %zu: status %d", cuts[i], st);
        ms_tok_free(&t);
    }
    /* more tokens asked than the file holds */
    ms_tok *t = NULL;
    CHECK(ms_tok_load_llama2c(path, 513, &t) == MS_ERR_FORMAT && !t, "vocab_size 513 must fail");
    CHECK(ms_tok_load_llama2c(path, 10, &t) == MS_ERR_RANGE && !t, "vocab_size 10 must fail (no byte tokens)");
    /* a negative token length, and one past max_token_length */
    int32_t bad = -5;
    memcpy(data + 8, &bad, 4);
    ms_write_file_atomic(p, data, len);
    CHECK(ms_tok_load_llama2c(p, 512, &t) == MS_ERR_FORMAT && !t, "negative length must fail");
    bad = 1000;
    memcpy(data + 8, &bad, 4);
    ms_write_file_atomic(p, data, len);
    CHECK(ms_tok_load_llama2c(p, 512, &t) == MS_ERR_FORMAT && !t, "length > max_token_length must fail");
    CHECK(ms_tok_load_llama2c("/nonexistent/tok.bin", 512, &t) == MS_ERR_IO && !t, "missing file must fail with IO");
    remove(p);
    free(p);
    free(data);
}

static void test_load_dir(const char *path, const char *dir) {
    char *md = ms_path_join(dir, "tok-llama2c-model");
    mkdir(md, 0755);
    char *tb = ms_path_join(md, "tokenizer.bin"), *cj = ms_path_join(md, "config.json");
    char *data;
    size_t len;
    ms_read_file(path, &data, &len);
    ms_write_file_atomic(tb, data, len);
    free(data);
    const char *cfg =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 512, \"max\": 1000000000000000019884624838656}";
    ms_write_file_atomic(cj, cfg, strlen(cfg));
    ms_tok *t = NULL;
    CHECK(ms_tok_load_dir(md, &t) == MS_OK && t, "load_dir with tokenizer.bin");
    if (t) {
        CHECK(ms_tok_vocab_size(t) == 512, "vocab size %lld", (long long)ms_tok_vocab_size(t));
        /* BOS ends generation too, as in run.c (`if (next == 1) break`) */
        CHECK(ms_tok_bos(t) == 1 && ms_tok_is_eos(t, 2) && ms_tok_is_eos(t, 1) && !ms_tok_is_eos(t, 0), "bos/eos");
        CHECK(ms_tok_chat_kind(t) == MS_CHAT_NONE, "no chat template");
    }
    ms_tok_free(&t);
    const char *cfg2 = "{\"hidden_size\": 64}";
    ms_write_file_atomic(cj, cfg2, strlen(cfg2));
    CHECK(ms_tok_load_dir(md, &t) == MS_ERR_NOT_FOUND && !t, "config.json without vocab_size");
    remove(tb);
    remove(cj);
    CHECK(ms_tok_load_dir(md, &t) == MS_ERR_NOT_FOUND && !t, "empty dir");
    rmdir(md);
    free(tb);
    free(cj);
    free(md);
}

/* "世" is not a tok512 piece: it falls back to three <0xXX> tokens, and a
 * streaming decoder must hold the first two back and emit it once, whole. */
static void test_stream(const ms_tok *t) {
    const char *s = "héllo 世界 🙂!";
    ms_ids ids = {0};
    ms_tok_encode(t, s, strlen(s), false, &ids);
    ms_tok_decoder d;
    ms_tok_decoder_init(&d);
    char out[4096];
    size_t n = 0, got;
    int silent = 0;
    for (int64_t i = 0; i < ids.n; i++) {
        CHECK(ms_tok_decode_next(t, &d, ids.v[i], true, out + n, sizeof out - n, &got) == MS_OK, "decode_next");
        if (got == 0) silent++;
        /* what has come out so far is a prefix of " " + s ending on a whole character */
        CHECK(n + got <= strlen(s) + 1 && memcmp(out, " ", 1) == 0 && memcmp(out + 1, s, n + got - 1) == 0,
              "stream prefix after token %lld", (long long)i);
        n += got;
    }
    CHECK(ms_tok_decode_flush(&d, out + n, sizeof out - n, &got) == MS_OK && got == 0, "nothing left to flush");
    CHECK(n == strlen(s) + 1 && memcmp(out + 1, s, strlen(s)) == 0, "streamed text");
    CHECK(silent >= 2, "byte-fallback tokens held back (%d silent steps)", silent);
    ms_ids_free(&ids);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260k/tok512.bin", MS_SHARED_DIR);
    if (!ms_file_exists(path)) {
        fprintf(stderr, "skip: %s not found\n", path);
        return 77;
    }
    ref_vocab v;
    if (ref_load(path, 512, &v) < 0) {
        fprintf(stderr, "FAIL: reference cannot read %s\n", path);
        return 1;
    }
    ms_tok *t = NULL;
    if (ms_tok_load_llama2c(path, 512, &t) < 0) return 1;
    CHECK(ms_tok_vocab_size(t) == 512, "vocab size");
    CHECK(ms_tok_find(t, " ") == 410 && ms_tok_find(t, "<0x41>") == 65 + 3, "find");

    const char *fixed[] = {"Once upon a time",
                           "Once upon a time, there was a little girl named Lily.",
                           "hello",
                           " leading space",
                           "  two spaces",
                           "a",
                           "The end.\nThe beginning!",
                           "Ünïcödé 世界 🙂 emoji",
                           "tab\tand\nnewline",
                           "x",
                           "\x01\x7f odd bytes",
                           "She said: \"Mom, I'm hungry.\"",
                           "aaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) check_string(t, &v, fixed[i]);
    ms_ids ids = {0};
    CHECK(ms_tok_encode(t, "", 0, false, &ids) == MS_OK && ids.n == 0, "empty text → no ids (no dummy prefix)");
    ms_ids_free(&ids);

    /* seeded random strings over a small alphabet of ASCII and multi-byte characters */
    static const char *alphabet[] = {"a", "b", "e",  "t", "h",  " ",    " ", "o", "n",
                                     ".", ",", "\n", "é", "世", "🙂", "s", "d"};
    ms_rng rng;
    ms_rng_seed(&rng, 1234);
    for (int k = 0; k < 200; k++) {
        char s[256] = "";
        int n = 1 + (int)(ms_rng_u64(&rng) % 40);
        for (int i = 0; i < n; i++) strcat(s, alphabet[ms_rng_u64(&rng) % (sizeof alphabet / sizeof alphabet[0])]);
        check_string(t, &v, s);
    }
    test_stream(t);
    test_truncated(path, MS_BUILD_DIR);
    test_load_dir(path, MS_BUILD_DIR);
    ms_tok_free(&t);
    ref_free(&v);
    if (g_fail)
        fprintf(stderr, "%d g_fail\n", g_fail);
    else
        fprintf(stderr, "all passed\n");
    return g_fail ? 1 : 0;
}
