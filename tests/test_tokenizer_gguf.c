/* GGUF tokenizers (ms_tok_load_gguf / ms_tok_load_path) against llama.cpp:
 *  - golden ids from llama-tokenize (tests/golden/tokenize, made by make.sh
 *    there) for gemma3-270m ("llama", SentencePiece-style), qwen2.5-coder
 *    0.5b and 1.5b ("gpt2", pre qwen2): the 46 vocab test strings in full,
 *    Spec-Bench and HumanEval prompts as (count, sha256 of the id line);
 *  - ggml-vocab-qwen2.gguf.out (Hugging Face tokenizers' ids) with the
 *    Qwen2.5 GGUF;
 *  - decode(encode(x)) == x for every text on every model; add_bos, BOS,
 *    EOS sets and chat kinds as the files say;
 *  - microspec-tokenize's output line against the same golden data;
 *  - tiny GGUF images built here: hand-worked encodings (positive controls)
 *    and bad metadata refused with the right status.
 * Gemma's own tokenizer.json (tokenizers/gemma3) is not compared: it is a
 * SentencePiece-style BPE (byte_fallback, Replace normalizer, no ByteLevel)
 * that ms_tok_load_hf refuses; the test checks that refusal and relies on
 * the llama.cpp golden for Gemma.
 *
 *   test_tokenizer_gguf                  run (models missing → those parts skipped; all missing → 77)
 *   test_tokenizer_gguf --write-corpus D write the tiny valid images as fuzz seeds into D
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "ms_check.h"
#include "ms_gguf.h"
#include "ms_tokenizer.h"
#include "test_fs.h"

#define SEP "\n__ggml_vocab_test__\n"

/* ---- SHA-256 of the golden id lines (libsodium) ---------------------------------------- */

static void sha256_hex(const void *data, size_t n, char out[65]) {
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, data, n);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* ---- helpers ---------------------------------------------------------------------------- */

/* llama-tokenize --ids line (without the newline), malloc'd */
static char *ids_line(const int32_t *v, int64_t n) {
    size_t cap = 16 + (size_t)n * 13, o = 0;
    char *s = malloc(cap);
    o += (size_t)snprintf(s + o, cap - o, "[");
    for (int64_t i = 0; i < n; i++) o += (size_t)snprintf(s + o, cap - o, i ? ", %d" : "%d", v[i]);
    snprintf(s + o, cap - o, "]");
    return s;
}

/* noinline: gcc 12 otherwise reports a false dangling pointer into its local */
__attribute__((noinline)) static char *read_all(const char *path, size_t *len) {
    char *d = NULL;
    size_t l = 0;
    if (ms_read_file(path, &d, &l) < 0) return NULL;
    if (len) *len = l;
    return d;
}

typedef struct {
    char *text;
    size_t len;
    char key[32]; /* the golden file's index: "r.k" or "r" */
} text_item;

typedef struct {
    text_item *v;
    int64_t n;
} text_set;

static void set_add(text_set *s, const char *text, size_t len, const char *key) {
    s->v = realloc(s->v, (size_t)(s->n + 1) * sizeof *s->v);
    text_item *it = &s->v[s->n++];
    it->text = malloc(len + 1);
    memcpy(it->text, text, len);
    it->text[len] = '\0';
    it->len = len;
    snprintf(it->key, sizeof it->key, "%s", key);
}

static void set_free(text_set *s) {
    for (int64_t i = 0; i < s->n; i++) free(s->v[i].text);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static bool load_vectors(text_set *s) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/vectors/ggml-vocab-qwen2.gguf.inp", MS_SHARED_DIR);
    size_t len;
    char *d = read_all(path, &len);
    if (!d) return false;
    size_t a = 0, sl = strlen(SEP);
    for (int i = 0; a < len; i++) {
        char *e = strstr(d + a, SEP);
        size_t b = e ? (size_t)(e - d) : len;
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        set_add(s, d + a, b - a, key);
        a = b + (e ? sl : 0);
    }
    free(d);
    return true;
}

/* spec_bench: turns[0..1] keyed "r.k"; human_eval: "prompt" keyed "r" */
static bool load_jsonl(const char *rel, bool spec_bench, text_set *s) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", MS_SHARED_DIR, rel);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char *line = NULL;
    size_t cap = 0;
    int r = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        CHECK(j != NULL, "%s line %d: not JSON", rel, r + 1);
        if (!j) break;
        char key[32];
        if (spec_bench) {
            json_t *turns = json_object_get(j, "turns");
            for (size_t k = 0; k < json_array_size(turns) && k < 2; k++) {
                json_t *t = json_array_get(turns, k);
                snprintf(key, sizeof key, "%d.%zu", r, k);
                set_add(s, json_string_value(t), json_string_length(t), key);
            }
        } else {
            json_t *p = json_object_get(j, "prompt");
            snprintf(key, sizeof key, "%d", r);
            set_add(s, json_string_value(p), json_string_length(p), key);
        }
        json_decref(j);
        r++;
    }
    free(line);
    fclose(f);
    return true;
}

static void print_text(const char *what, const text_item *it) {
    fprintf(stderr, "    %s text %s (%zu bytes): \"%.200s%s\"\n", what, it->key, it->len, it->text,
            it->len > 200 ? "..." : "");
}

/* ---- golden comparisons ------------------------------------------------------------------- */

static void check_vectors_golden(const char *name, const ms_tok *t, const text_set *vec) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/tokenize/%s.vectors.txt", MS_SOURCE_DIR, name);
    char *d = read_all(path, NULL);
    CHECK(d != NULL, "%s: missing golden file", path);
    if (!d) return;
    int64_t lines = 0, bad = 0;
    for (char *ln = strtok(d, "\n"); ln; ln = strtok(NULL, "\n"), lines++) {
        int idx;
        char *tab = strchr(ln, '\t');
        CHECK(tab && sscanf(ln, "%d", &idx) == 1 && idx >= 0 && idx < vec->n, "%s: bad line '%s'", path, ln);
        if (!tab || sscanf(ln, "%d", &idx) != 1 || idx < 0 || idx >= vec->n) continue;
        ms_ids ids = {0};
        CHECK(ms_tok_encode(t, vec->v[idx].text, vec->v[idx].len, false, &ids) == MS_OK, "%s: encode", name);
        char *got = ids_line(ids.v, ids.n);
        if (strcmp(got, tab + 1) != 0) {
            if (bad++ == 0) {
                print_text(name, &vec->v[idx]);
                fprintf(stderr, "    want %s\n    got  %s\n", tab + 1, got);
            }
        }
        free(got);
        ms_ids_free(&ids);
    }
    CHECK(lines == vec->n, "%s: %lld golden lines for %lld strings", path, (long long)lines, (long long)vec->n);
    CHECK(bad == 0, "%s: %lld of %lld vector strings differ from llama.cpp", name, (long long)bad, (long long)lines);
    free(d);
}

/* "key count sha256" lines, in the order of the set */
static void check_hashed_golden(const char *name, const char *set_name, const ms_tok *t, const text_set *s) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/tokenize/%s.%s.txt", MS_SOURCE_DIR, name, set_name);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s: missing golden file", path);
    if (!f) return;
    char key[64], hex[80];
    long long cnt;
    int64_t i = 0, bad = 0;
    while (fscanf(f, "%63s %lld %79s", key, &cnt, hex) == 3) {
        CHECK(i < s->n && strcmp(key, s->v[i].key) == 0, "%s: line %lld is text '%s', expected '%s'", path,
              (long long)i + 1, key, i < s->n ? s->v[i].key : "(none)");
        if (i >= s->n || strcmp(key, s->v[i].key) != 0) break;
        ms_ids ids = {0};
        CHECK(ms_tok_encode(t, s->v[i].text, s->v[i].len, false, &ids) == MS_OK, "%s: encode", name);
        char *line = ids_line(ids.v, ids.n);
        char got[65];
        sha256_hex(line, strlen(line), got);
        if (ids.n != cnt || strcmp(got, hex) != 0) {
            if (bad++ == 0) {
                print_text(name, &s->v[i]);
                fprintf(stderr, "    want %lld ids (sha256 %s)\n    got  %lld ids (sha256 %s): %.600s\n", cnt, hex,
                        (long long)ids.n, got, line);
            }
        }
        free(line);
        ms_ids_free(&ids);
        i++;
    }
    fclose(f);
    CHECK(i == s->n, "%s: %lld golden lines for %lld texts", path, (long long)i, (long long)s->n);
    CHECK(bad == 0, "%s: %lld of %lld %s texts differ from llama.cpp", name, (long long)bad, (long long)i, set_name);
    fprintf(stderr, "%s: %s: %lld texts, %lld differ\n", name, set_name, (long long)i, (long long)bad);
}

static void check_roundtrip(const char *name, const ms_tok *t, const text_set *s) {
    int64_t bad = 0;
    for (int64_t i = 0; i < s->n; i++) {
        ms_ids ids = {0};
        char *back = NULL;
        bool ok = ms_tok_encode(t, s->v[i].text, s->v[i].len, false, &ids) == MS_OK &&
                  ms_tok_decode_all(t, ids.v, ids.n, false, &back) == MS_OK;
        if (!ok || strlen(back) != s->v[i].len || memcmp(back, s->v[i].text, s->v[i].len) != 0) {
            if (bad++ == 0) {
                print_text(name, &s->v[i]);
                fprintf(stderr, "    decoded: \"%.200s\"\n", back ? back : "(error)");
            }
        }
        free(back);
        ms_ids_free(&ids);
    }
    CHECK(bad == 0, "%s: decode(encode(x)) != x for %lld of %lld texts", name, (long long)bad, (long long)s->n);
}

/* Hugging Face tokenizers' ids (one " id id ..." line per string) with the Qwen2.5 GGUF, no BOS */
static void check_hf_vectors(const ms_tok *t, const text_set *vec) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/vectors/ggml-vocab-qwen2.gguf.out", MS_SHARED_DIR);
    char *d = read_all(path, NULL);
    CHECK(d != NULL, "%s: missing", path);
    if (!d) return;
    char *save = NULL, *ln = d;
    int64_t i = 0, bad = 0;
    for (; i < vec->n; i++) {
        char *nl = strchr(ln, '\n');
        if (!nl) break;
        *nl = '\0';
        ms_ids want = {0}, got = {0};
        for (char *tok = strtok_r(ln, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
            ms_ids_push(&want, (int32_t)atoi(tok));
        ms_tok_encode(t, vec->v[i].text, vec->v[i].len, false, &got);
        if (got.n != want.n || (got.n > 0 && memcmp(got.v, want.v, (size_t)got.n * sizeof *got.v) != 0)) {
            if (bad++ == 0) {
                print_text("qwen2 .out", &vec->v[i]);
                char *a = ids_line(want.v, want.n), *b = ids_line(got.v, got.n);
                fprintf(stderr, "    want %s\n    got  %s\n", a, b);
                free(a);
                free(b);
            }
        }
        ms_ids_free(&want);
        ms_ids_free(&got);
        ln = nl + 1;
    }
    CHECK(i == vec->n, "%s: %lld lines for %lld strings", path, (long long)i, (long long)vec->n);
    CHECK(bad == 0, "ggml-vocab-qwen2.gguf.out: %lld of %lld strings differ", (long long)bad, (long long)i);
    free(d);
}

/* BOS rule: the golden "Hello" line made without --no-bos */
static void check_bos_golden(const char *name, const ms_tok *t) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/tokenize/%s.bos.txt", MS_SOURCE_DIR, name);
    char *want = read_all(path, NULL);
    CHECK(want != NULL, "%s: missing golden file", path);
    if (!want) return;
    want[strcspn(want, "\n")] = '\0';
    ms_ids ids = {0};
    if (ms_tok_add_bos(t)) ms_ids_push(&ids, ms_tok_bos(t));
    ms_tok_encode(t, "Hello", 5, false, &ids);
    char *got = ids_line(ids.v, ids.n);
    CHECK(strcmp(got, want) == 0, "%s: \"Hello\" with the BOS rule: got %s, llama.cpp %s", name, got, want);
    free(got);
    free(want);
    ms_ids_free(&ids);
}

/* microspec-tokenize on vector string `idx` against the golden line */
static void check_tool(const char *name, const char *model, const text_set *vec) {
    char exe[1024], in[1024], cmd[4096];
    snprintf(exe, sizeof exe, "%s/tools/microspec-tokenize", MS_BUILD_DIR);
    struct stat st;
    if (stat(exe, &st) != 0) {
        fprintf(stderr, "%s: %s not built, tool check skipped\n", name, exe);
        return;
    }
    char dir[512];
    if (!ms_test_tmpdir("tokgguf", dir, sizeof dir)) return;
    int idx = 45; /* the long mixed-script string */
    snprintf(in, sizeof in, "%s/in.txt", dir);
    FILE *f = fopen(in, "wb");
    fwrite(vec->v[idx].text, 1, vec->v[idx].len, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' --model '%s' --no-special --no-bos < '%s'", exe, model, in);
    FILE *p = popen(cmd, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = p ? getline(&line, &cap, p) : -1;
    int rc = p ? pclose(p) : -1;
    CHECK(rc == 0 && n > 0, "%s: '%s' failed (status %d)", name, cmd, rc);
    char gpath[1024];
    snprintf(gpath, sizeof gpath, "%s/tests/golden/tokenize/%s.vectors.txt", MS_SOURCE_DIR, name);
    char *g = read_all(gpath, NULL);
    if (g && line) {
        char pre[16];
        snprintf(pre, sizeof pre, "\n%d\t", idx);
        const char *hit = strstr(g, pre);
        CHECK(hit != NULL, "%s: no golden line %d", gpath, idx);
        if (hit) {
            size_t off = (size_t)(hit - g) + strlen(pre);
            size_t l = strcspn(g + off, "\n");
            line[strcspn(line, "\n")] = '\0';
            CHECK(strlen(line) == l && memcmp(line, g + off, l) == 0, "%s: microspec-tokenize printed %.300s", name,
                  line);
        }
    }
    /* with the BOS rule, on "Hello" */
    f = fopen(in, "wb");
    fputs("Hello", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' --model '%s' --no-special < '%s'", exe, model, in);
    p = popen(cmd, "r");
    n = p ? getline(&line, &cap, p) : -1;
    rc = p ? pclose(p) : -1;
    snprintf(gpath, sizeof gpath, "%s/tests/golden/tokenize/%s.bos.txt", MS_SOURCE_DIR, name);
    char *b = read_all(gpath, NULL);
    CHECK(rc == 0 && n > 0 && b && strcmp(line, b) == 0, "%s: microspec-tokenize \"Hello\": %s, llama.cpp %s", name,
          n > 0 ? line : "(nothing)", b ? b : "(no golden)");
    free(b);
    free(g);
    free(line);
    ms_test_rmtree(dir);
}

/* ---- tiny GGUF images (a writer of our own: v3, no tensors) ------------------------------- */

typedef struct {
    uint8_t *b;
    size_t n, cap;
    uint64_t n_kv;
} gw;

static void gw_put(gw *w, const void *p, size_t n) {
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 256;
        w->b = realloc(w->b, w->cap);
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void gw_u32(gw *w, uint32_t v) { gw_put(w, &v, 4); } /* little-endian hosts */
static void gw_u64(gw *w, uint64_t v) { gw_put(w, &v, 8); }
static void gw_str(gw *w, const char *s) {
    gw_u64(w, strlen(s));
    gw_put(w, s, strlen(s));
}
static void gw_key(gw *w, const char *key, uint32_t type) {
    gw_str(w, key);
    gw_u32(w, type);
    w->n_kv++;
}
static void gw_kv_str(gw *w, const char *key, const char *v) {
    gw_key(w, key, MS_GGUF_STRING);
    gw_str(w, v);
}
static void gw_kv_u32(gw *w, const char *key, uint32_t v) {
    gw_key(w, key, MS_GGUF_U32);
    gw_u32(w, v);
}
static void gw_kv_bool(gw *w, const char *key, bool v) {
    gw_key(w, key, MS_GGUF_BOOL);
    uint8_t b = v;
    gw_put(w, &b, 1);
}
static void gw_kv_strs(gw *w, const char *key, const char *const *v, int n) {
    gw_key(w, key, MS_GGUF_ARRAY);
    gw_u32(w, MS_GGUF_STRING);
    gw_u64(w, (uint64_t)n);
    for (int i = 0; i < n; i++) gw_str(w, v[i]);
}
static void gw_kv_i32s(gw *w, const char *key, const int32_t *v, int n) {
    gw_key(w, key, MS_GGUF_ARRAY);
    gw_u32(w, MS_GGUF_I32);
    gw_u64(w, (uint64_t)n);
    gw_put(w, v, (size_t)n * 4);
}
static void gw_kv_f32s(gw *w, const char *key, const float *v, int n) {
    gw_key(w, key, MS_GGUF_ARRAY);
    gw_u32(w, MS_GGUF_F32);
    gw_u64(w, (uint64_t)n);
    gw_put(w, v, (size_t)n * 4);
}
/* header + the key/values written so far; caller frees */
static uint8_t *gw_image(const gw *w, size_t *len) {
    gw h = {0};
    gw_put(&h, "GGUF", 4);
    gw_u32(&h, 3);
    gw_u64(&h, 0);
    gw_u64(&h, w->n_kv);
    gw_put(&h, w->b, w->n);
    *len = h.n;
    return h.b;
}

/* Variations of the two tiny tokenizers, one defect each. */
enum {
    BAD_NONE = 0,
    BAD_TYPES_LEN,
    BAD_SCORES_LEN,
    BAD_MERGE_UNKNOWN,
    BAD_MERGE_NO_SPACE,
    BAD_BOS_RANGE,
    BAD_MODEL,
    BAD_PRE,
    BAD_NO_PRE,
    BAD_DUP_TOKEN,
    BAD_BYTE_PIECE,
    BAD_TYPE_VALUE,
    BAD_NO_TOKENS,
    BAD_NO_MERGES,
    BAD_TOKENS_NOT_STRINGS,
};

/* gpt2 (pre qwen2): a b c ab abc <|end|> (control) <x> (user-defined);
 * merges "a b" (rank 0), "ab c" (rank 1). */
static uint8_t *tiny_gpt2(int bad, size_t *len) {
    gw w = {0};
    const char *toks[] = {"a", "b", "c", "ab", "abc", "<|end|>", "<x>", bad == BAD_DUP_TOKEN ? "ab" : "Ġ"};
    int32_t types[] = {1, 1, 1, 1, 1, 3, 4, bad == BAD_TYPE_VALUE ? 9 : 1};
    const char *merges[] = {"a b", bad == BAD_MERGE_UNKNOWN ? "ab zz" : bad == BAD_MERGE_NO_SPACE ? "abc" : "ab c"};
    gw_kv_str(&w, "general.architecture", "qwen2");
    gw_kv_str(&w, "tokenizer.ggml.model", bad == BAD_MODEL ? "bert" : "gpt2");
    if (bad != BAD_NO_PRE) gw_kv_str(&w, "tokenizer.ggml.pre", bad == BAD_PRE ? "not-a-pre" : "qwen2");
    if (bad == BAD_TOKENS_NOT_STRINGS)
        gw_kv_i32s(&w, "tokenizer.ggml.tokens", types, 8);
    else if (bad != BAD_NO_TOKENS)
        gw_kv_strs(&w, "tokenizer.ggml.tokens", toks, 8);
    gw_kv_i32s(&w, "tokenizer.ggml.token_type", types, bad == BAD_TYPES_LEN ? 7 : 8);
    if (bad != BAD_NO_MERGES) gw_kv_strs(&w, "tokenizer.ggml.merges", merges, 2);
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", bad == BAD_BOS_RANGE ? 8 : 5);
    gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 5);
    gw_kv_str(&w, "tokenizer.chat_template", "{{ '<|im_start|>' }}");
    uint8_t *img = gw_image(&w, len);
    free(w.b);
    return img;
}

/* llama: <unk> <s> </s> ▁ a b ▁a ab ▁ab <0x63> <ctl> "\n\n"(user) ; scores favour ▁ab > ▁a > ab */
static uint8_t *tiny_llama(int bad, bool space_prefix, size_t *len) {
    gw w = {0};
    const char *toks[] = {"<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab",
                          bad == BAD_BYTE_PIECE ? "<0xZZ>" : "<0x63>", "<ctl>", "\n\n"};
    int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 3, 4};
    float scores[13] = {0, 0, 0, -3, -4, -4, -1, -2, -0.5f, 0, 0, 0}; /* [12] only for BAD_SCORES_LEN */
    gw_kv_str(&w, "tokenizer.ggml.model", "llama");
    gw_kv_str(&w, "tokenizer.ggml.pre", "default");
    gw_kv_strs(&w, "tokenizer.ggml.tokens", toks, 12);
    gw_kv_f32s(&w, "tokenizer.ggml.scores", scores, bad == BAD_SCORES_LEN ? 13 : 12);
    gw_kv_i32s(&w, "tokenizer.ggml.token_type", types, 12);
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    gw_kv_bool(&w, "tokenizer.ggml.add_space_prefix", space_prefix);
    uint8_t *img = gw_image(&w, len);
    free(w.b);
    return img;
}

static ms_status load_image(const uint8_t *img, size_t len, ms_tok **t) {
    ms_gguf *g = NULL;
    *t = NULL;
    MS_TRY(ms_gguf_open_memory(img, len, "tiny.gguf", &g));
    ms_status st = ms_tok_load_gguf(g, t);
    ms_gguf_close(&g);
    return st;
}

static void expect_ids(const ms_tok *t, const char *what, const char *text, bool special, const int32_t *want,
                       int64_t n) {
    ms_ids ids = {0};
    ms_status st = ms_tok_encode(t, text, strlen(text), special, &ids);
    char *a = ids_line(want, n), *b = ids_line(ids.v, ids.n);
    CHECK(st == MS_OK && strcmp(a, b) == 0, "%s: \"%s\" → %s, want %s", what, text, b, a);
    char *back = NULL;
    if (st == MS_OK && ms_tok_decode_all(t, ids.v, ids.n, false, &back) == MS_OK)
        CHECK(strcmp(back, text) == 0, "%s: decode(encode(\"%s\")) = \"%s\"", what, text, back);
    free(back);
    free(a);
    free(b);
    ms_ids_free(&ids);
}

static void check_tiny(void) {
    size_t len;
    ms_tok *t;
    /* gpt2: hand-worked merges */
    uint8_t *img = tiny_gpt2(BAD_NONE, &len);
    CHECK(load_image(img, len, &t) == MS_OK, "tiny gpt2 does not load");
    free(img);
    if (t) {
        expect_ids(t, "gpt2", "abc", false, (int32_t[]){4}, 1);
        expect_ids(t, "gpt2", "abcab", false, (int32_t[]){4, 3}, 2);
        expect_ids(t, "gpt2", "ab<|end|>c", true, (int32_t[]){3, 5, 2}, 3);
        expect_ids(t, "gpt2", "a<x>b", false, (int32_t[]){0, 6, 1}, 3); /* user-defined: always cut out */
        CHECK(ms_tok_vocab_size(t) == 8, "gpt2 vocab %lld", (long long)ms_tok_vocab_size(t));
        CHECK(!ms_tok_add_bos(t), "gpt2 without add_bos_token must not add BOS");
        CHECK(ms_tok_bos(t) == 5 && ms_tok_is_eos(t, 5), "gpt2 bos/eos");
        CHECK(ms_tok_chat_kind(t) == MS_CHAT_CHATML, "gpt2 chat kind %d", ms_tok_chat_kind(t));
        ms_tok_free(&t);
    }
    /* llama, no space prefix: "ab ab" → a b ▁ a b; ▁a (−1) first, then ▁ab (−0.5), then ab (−2) */
    img = tiny_llama(BAD_NONE, false, &len);
    CHECK(load_image(img, len, &t) == MS_OK, "tiny llama does not load");
    free(img);
    if (t) {
        expect_ids(t, "llama", "ab ab", false, (int32_t[]){7, 8}, 2);
        expect_ids(t, "llama", "ac", false, (int32_t[]){4, 9}, 2);            /* c: byte fallback <0x63> */
        expect_ids(t, "llama", "a\n\nb", false, (int32_t[]){4, 11, 5}, 3);    /* user-defined "\n\n" */
        expect_ids(t, "llama", "a<ctl>b", true, (int32_t[]){4, 10, 5}, 3);   /* control, parse_special */
        CHECK(ms_tok_add_bos(t) && ms_tok_bos(t) == 1, "llama: add_bos defaults to true, bos 1");
        CHECK(ms_tok_chat_kind(t) == MS_CHAT_NONE, "llama: no chat template");
        ms_tok_free(&t);
    }
    /* llama with the space prefix (at the start and after a special) */
    img = tiny_llama(BAD_NONE, true, &len);
    CHECK(load_image(img, len, &t) == MS_OK, "tiny llama (prefix) does not load");
    free(img);
    if (t) {
        ms_ids ids = {0};
        ms_tok_encode(t, "ab", 2, false, &ids);
        CHECK(ids.n == 1 && ids.v[0] == 8, "llama prefix: \"ab\" → ▁ab (8), got %lld ids, first %d", (long long)ids.n,
              ids.n ? ids.v[0] : -1);
        ids.n = 0;
        ms_tok_encode(t, "a\n\nb", 4, false, &ids);
        CHECK(ids.n == 4 && ids.v[0] == 6 && ids.v[1] == 11 && ids.v[2] == 3 && ids.v[3] == 5,
              "llama prefix: \"a\\n\\nb\" → ▁a \\n\\n ▁ b, got %lld ids", (long long)ids.n);
        ms_ids_free(&ids);
        ms_tok_free(&t);
    }
    /* bad metadata: refused with the status for its kind of defect */
    static const struct {
        int bad;
        bool llama;
        ms_status want;
        const char *what;
    } cases[] = {
        {BAD_TYPES_LEN, false, MS_ERR_FORMAT, "token_type shorter than tokens"},
        {BAD_SCORES_LEN, true, MS_ERR_FORMAT, "scores longer than tokens"},
        {BAD_MERGE_UNKNOWN, false, MS_ERR_FORMAT, "merge naming an unknown token"},
        {BAD_MERGE_NO_SPACE, false, MS_ERR_FORMAT, "merge without a space"},
        {BAD_BOS_RANGE, false, MS_ERR_RANGE, "bos id out of range"},
        {BAD_MODEL, false, MS_ERR_UNSUPPORTED, "unknown tokenizer model"},
        {BAD_PRE, false, MS_ERR_UNSUPPORTED, "unknown pre-tokenizer"},
        {BAD_NO_PRE, false, MS_ERR_UNSUPPORTED, "missing pre-tokenizer"},
        {BAD_DUP_TOKEN, false, MS_ERR_FORMAT, "duplicate token"},
        {BAD_BYTE_PIECE, true, MS_ERR_FORMAT, "byte token that is not <0xXX>"},
        {BAD_TYPE_VALUE, false, MS_ERR_FORMAT, "token type 9"},
        {BAD_NO_TOKENS, false, MS_ERR_NOT_FOUND, "no tokens"},
        {BAD_NO_MERGES, false, MS_ERR_NOT_FOUND, "no merges"},
        {BAD_TOKENS_NOT_STRINGS, false, MS_ERR_FORMAT, "tokens not strings"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        img = cases[i].llama ? tiny_llama(cases[i].bad, false, &len) : tiny_gpt2(cases[i].bad, &len);
        fprintf(stderr, "bad input (%s), expecting %s:\n", cases[i].what, ms_status_str(cases[i].want));
        ms_status st = load_image(img, len, &t);
        CHECK(st == cases[i].want && t == NULL, "%s: status %s, want %s", cases[i].what, ms_status_str(st),
              ms_status_str(cases[i].want));
        ms_tok_free(&t);
        free(img);
    }
}

static int write_corpus(const char *dir) {
    size_t len;
    uint8_t *imgs[3];
    size_t lens[3];
    imgs[0] = tiny_gpt2(BAD_NONE, &lens[0]);
    imgs[1] = tiny_llama(BAD_NONE, false, &lens[1]);
    imgs[2] = tiny_llama(BAD_NONE, true, &lens[2]);
    const char *names[] = {"tiny_gpt2.gguf", "tiny_llama.gguf", "tiny_llama_prefix.gguf"};
    for (int i = 0; i < 3; i++) {
        char *p = ms_path_join(dir, names[i]);
        if (ms_write_file_atomic(p, imgs[i], lens[i]) < 0) return 1;
        free(p);
        free(imgs[i]);
    }
    (void)len;
    return 0;
}

/* ---- real models ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    bool add_bos;
    int32_t bos;
    ms_chat_kind chat;
    const char *eog[3]; /* texts that must be end-of-generation ids */
} model_spec;

static char *model_path(const char *name) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/tools/install-models.sh' --path %s 2>/dev/null", MS_SOURCE_DIR, name);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    char buf[1024] = {0};
    char *ok = fgets(buf, sizeof buf, p);
    pclose(p);
    if (!ok) return NULL;
    buf[strcspn(buf, "\n")] = '\0';
    struct stat st;
    if (stat(buf, &st) != 0) return NULL;
    return strdup(buf);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    {
        char h[65];
        sha256_hex("abc", 3, h); /* FIPS 180-4 example */
        CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "sha256: %s", h);
        sha256_hex("", 0, h);
        CHECK(strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "sha256: %s", h);
    }
    check_tiny();

    ms_tok *t = NULL;
    CHECK(ms_tok_load_path("/nonexistent/model.gguf", &t) == MS_ERR_NOT_FOUND && !t, "missing path");

    text_set vec = {0}, sb = {0}, he = {0};
    bool have_data = load_vectors(&vec) && load_jsonl("data/spec_bench/question.jsonl", true, &sb) &&
                     load_jsonl("data/human_eval/question.jsonl", false, &he);
    if (!have_data) {
        fprintf(stderr, "SKIP real-model parts: %s (vectors, spec_bench, human_eval) missing\n", MS_SHARED_DIR);
        return g_fail ? 1 : 77;
    }
    CHECK(vec.n == 46, "%lld vector strings, want 46", (long long)vec.n);

    /* Gemma's HF tokenizer.json is SentencePiece-style BPE: refused (see the top comment) */
    {
        char j[1024], c[1024];
        snprintf(j, sizeof j, "%s/tokenizers/gemma3/tokenizer.json", MS_SHARED_DIR);
        snprintf(c, sizeof c, "%s/tokenizers/gemma3/tokenizer_config.json", MS_SHARED_DIR);
        struct stat st;
        if (stat(j, &st) == 0) {
            fprintf(stderr, "gemma3 tokenizer.json, expecting a refusal:\n");
            ms_status s = ms_tok_load_hf(j, c, &t);
            CHECK(s == MS_ERR_UNSUPPORTED, "gemma3 tokenizer.json: status %s (if it loads now, compare it here)",
                  ms_status_str(s));
            ms_tok_free(&t);
        }
    }

    static const model_spec models[] = {
        {"gemma3-270m", true, 2, MS_CHAT_NONE, {"<end_of_turn>", "<eos>", NULL}},
        {"qwen2.5-coder-0.5b", false, 151643, MS_CHAT_CHATML, {"<|im_end|>", "<|endoftext|>", NULL}},
        {"qwen2.5-coder-1.5b", false, 151643, MS_CHAT_CHATML, {"<|im_end|>", "<|endoftext|>", NULL}},
    };
    int n_models = 0;
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        const model_spec *ms = &models[m];
        char *path = model_path(ms->name);
        if (!path) {
            fprintf(stderr, "SKIP %s: model file not installed (tools/install-models.sh %s)\n", ms->name, ms->name);
            continue;
        }
        n_models++;
        double t0 = ms_now_s();
        ms_status st = ms_tok_load_path(path, &t);
        CHECK(st == MS_OK, "%s: cannot load %s", ms->name, path);
        if (st != MS_OK) {
            free(path);
            continue;
        }
        fprintf(stderr, "%s: loaded in %.3f s, %lld ids\n", ms->name, ms_now_s() - t0,
                (long long)ms_tok_vocab_size(t));
        CHECK(ms_tok_add_bos(t) == ms->add_bos, "%s: add_bos %d", ms->name, ms_tok_add_bos(t));
        CHECK(ms_tok_bos(t) == ms->bos, "%s: bos %d, want %d", ms->name, ms_tok_bos(t), ms->bos);
        CHECK(ms_tok_chat_kind(t) == ms->chat, "%s: chat kind %d, want %d", ms->name, ms_tok_chat_kind(t), ms->chat);
        for (int e = 0; e < 3 && ms->eog[e]; e++) {
            int32_t id = ms_tok_find(t, ms->eog[e]);
            CHECK(id >= 0 && ms_tok_is_eos(t, id), "%s: %s (id %d) is not end-of-generation", ms->name, ms->eog[e],
                  id);
        }
        check_vectors_golden(ms->name, t, &vec);
        check_hashed_golden(ms->name, "spec_bench", t, &sb);
        check_hashed_golden(ms->name, "human_eval", t, &he);
        check_bos_golden(ms->name, t);
        check_roundtrip(ms->name, t, &vec);
        check_roundtrip(ms->name, t, &sb);
        check_roundtrip(ms->name, t, &he);
        if (strncmp(ms->name, "qwen", 4) == 0) check_hf_vectors(t, &vec);
        check_tool(ms->name, path, &vec);
        ms_tok_free(&t);
        free(path);
    }
    set_free(&vec);
    set_free(&sb);
    set_free(&he);
    if (n_models == 0) {
        fprintf(stderr, "SKIP: no GGUF model installed\n");
        return g_fail ? 1 : 77;
    }
    fprintf(stderr, "%s: %d failure(s)\n", argv[0], g_fail);
    return g_fail ? 1 : 0;
}
