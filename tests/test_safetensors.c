/* test_safetensors — writer/reader round trip, sharded models made by
 * microspec-mkmodel, and every kind of malformed file answered with its
 * specific status and no crash. The file layout is checked independently of
 * the reader (raw bytes: header length, 8-byte padding, contiguous offsets). */
#define _XOPEN_SOURCE 700
#include "ms_hfconfig.h"
#include "ms_safetensors.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_fail;
#define CHECK(c)                                                          \
    do {                                                                  \
        if (!(c)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);  \
            g_fail++;                                                     \
        }                                                                 \
    } while (0)
#define CHECK_ST(expr, want)                                                                             \
    do {                                                                                                 \
        ms_status s_ = (expr);                                                                           \
        if (s_ != (want)) {                                                                              \
            fprintf(stderr, "FAIL %s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #expr, ms_status_str(s_), \
                    ms_status_str(want));                                                                \
            g_fail++;                                                                                    \
        }                                                                                                \
    } while (0)

static char g_tmp[64];

static char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", g_tmp, name);
    return p;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    MS_ASSERT(f);
    if (n) MS_ASSERT(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* A safetensors image: u64 LE header length, header, then `data_len` data bytes (pattern). */
static uint8_t *make_image(const char *header, uint64_t hlen_field, size_t data_len, size_t *len) {
    size_t h = strlen(header);
    *len = 8 + h + data_len;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hlen_field >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)(i * 7 + 1);
    return b;
}

/* Check a header both through a file and from memory; both must give `want`. */
static void expect_header(const char *what, const char *header, size_t data_len, ms_status want) {
    size_t len;
    uint8_t *img = make_image(header, strlen(header), data_len, &len);
    ms_st_model *m = (ms_st_model *)1;
    ms_status s = ms_st_open_memory(img, len, what, &m);
    if (s != want) {
        fprintf(stderr, "FAIL bad-input '%s' (memory): %s, want %s\n", what, ms_status_str(s), ms_status_str(want));
        g_fail++;
    }
    if (s < 0) CHECK(m == NULL);
    ms_st_close(&m);
    write_bytes(tpath("bad.safetensors"), img, len);
    s = ms_st_open_file(tpath("bad.safetensors"), &m);
    if (s != want) {
        fprintf(stderr, "FAIL bad-input '%s' (file): %s, want %s\n", what, ms_status_str(s), ms_status_str(want));
        g_fail++;
    }
    ms_st_close(&m);
    free(img);
}

/* ---- round trip --------------------------------------------------------------- */

static void test_round_trip(void) {
    enum { N = 8 };
    const char *names[N] = {"w.f32", "v.f16", "cube.bf16", "empty.i32", "zero_rows", "pairs.i64", "bytes.u8",
                            "scalar"};
    ms_dtype dts[N] = {MS_DTYPE_F32, MS_DTYPE_F16, MS_DTYPE_BF16, MS_DTYPE_I32,
                       MS_DTYPE_F32, MS_DTYPE_I64, MS_DTYPE_U8,   MS_DTYPE_F32};
    int nd[N] = {2, 1, 3, 1, 2, 2, 1, 0};
    int64_t shapes[N][4] = {{3, 5}, {7}, {2, 3, 4}, {0}, {4, 0}, {2, 2}, {3}, {0}};
    ms_tensor t[N];
    uint8_t *bufs[N];
    size_t total = 0;
    for (int i = 0; i < N; i++) {
        t[i] = ms_tensor_view(NULL, dts[i], nd[i], shapes[i]);
        size_t nb = ms_tensor_nbytes(&t[i]);
        bufs[i] = malloc(nb ? nb : 1);
        for (size_t b = 0; b < nb; b++) bufs[i][b] = (uint8_t)(31 * i + 7 * b + 3);
        t[i].data = bufs[i];
        total += nb;
    }
    const char *meta[] = {"format", "pt", "note", "round trip"};
    CHECK_ST(ms_st_write(tpath("rt.safetensors"), N, names, t, 2, meta), MS_OK);

    /* Layout, read raw: header length multiple of 8, space padding, entries in
     * the given order, file size = 8 + N + data. */
    char *raw;
    size_t rlen;
    CHECK_ST(ms_read_file(tpath("rt.safetensors"), &raw, &rlen), MS_OK);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (uint8_t)raw[i];
    CHECK(hl % 8 == 0);
    CHECK(rlen == 8 + hl + total);
    char *hdr = strndup(raw + 8, hl);
    CHECK(strncmp(hdr, "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"round trip\"}", 51) == 0);
    const char *prev = hdr;
    for (int i = 0; i < N; i++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\":", names[i]);
        const char *at = strstr(hdr, key);
        CHECK(at && at > prev);
        if (at) prev = at;
    }
    CHECK(strstr(hdr, "\"w.f32\":{\"dtype\":\"F32\",\"shape\":[3,5],\"data_offsets\":[0,60]}"));
    CHECK(strstr(hdr, "\"v.f16\":{\"dtype\":\"F16\",\"shape\":[7],\"data_offsets\":[60,74]}"));
    CHECK(strstr(hdr, "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[157,161]}"));
    free(hdr);

    for (int pass = 0; pass < 2; pass++) {
        ms_st_model *m = NULL;
        if (pass == 0) CHECK_ST(ms_st_open_file(tpath("rt.safetensors"), &m), MS_OK);
        else CHECK_ST(ms_st_open_memory(raw, rlen, "rt-memory", &m), MS_OK);
        if (!m) continue;
        CHECK(ms_st_count(m) == N);
        for (int64_t i = 1; i < ms_st_count(m); i++) CHECK(strcmp(ms_st_name(m, i - 1), ms_st_name(m, i)) < 0);
        for (int i = 0; i < N; i++) {
            ms_tensor got;
            CHECK(ms_st_find(m, names[i], &got));
            CHECK(got.dtype == dts[i]);
            CHECK(ms_tensor_has_shape(&got, nd[i], shapes[i]));
            size_t nb = ms_tensor_nbytes(&t[i]);
            CHECK(nb == 0 || memcmp(got.data, bufs[i], nb) == 0);
            CHECK(!strcmp(ms_st_file_of(m, names[i]), pass == 0 ? tpath("rt.safetensors") : "rt-memory"));
        }
        ms_tensor x;
        CHECK(!ms_st_find(m, "absent", &x));
        CHECK(ms_st_file_of(m, "absent") == NULL);
        CHECK_ST(ms_st_get(m, "absent", &x), MS_ERR_NOT_FOUND);
        int64_t want[2] = {3, 5}, wrong[2] = {5, 3};
        CHECK_ST(ms_st_get_shaped(m, "w.f32", 2, want, &x), MS_OK);
        CHECK_ST(ms_st_get_shaped(m, "w.f32", 2, wrong, &x), MS_ERR_FORMAT);
        CHECK_ST(ms_st_get_shaped(m, "w.f32", 1, want, &x), MS_ERR_FORMAT);
        CHECK_ST(ms_st_get_shaped(m, "absent", 2, want, &x), MS_ERR_NOT_FOUND);
        ms_st_close(&m);
        CHECK(m == NULL);
    }
    free(raw);

    /* open_dir: model.safetensors picked up; an empty folder is a clear error. */
    mkdir(tpath("single"), 0755);
    CHECK_ST(ms_st_write(tpath("single/model.safetensors"), N, names, t, 0, NULL), MS_OK);
    ms_st_model *m = NULL;
    CHECK_ST(ms_st_open_dir(tpath("single"), &m), MS_OK);
    CHECK(m && ms_st_count(m) == N);
    ms_st_close(&m);
    mkdir(tpath("empty"), 0755);
    CHECK_ST(ms_st_open_dir(tpath("empty"), &m), MS_ERR_NOT_FOUND);
    CHECK_ST(ms_st_open_file(tpath("no-such-file"), &m), MS_ERR_NOT_FOUND);

    /* Writer refuses duplicate names and leaves no file behind. */
    const char *dup[2] = {"a", "a"};
    CHECK_ST(ms_st_write(tpath("dup.safetensors"), 2, dup, t, 0, NULL), MS_ERR_INVALID);
    CHECK(!ms_file_exists(tpath("dup.safetensors")));
    /* An empty file (no tensors) is valid. */
    CHECK_ST(ms_st_write(tpath("none.safetensors"), 0, names, t, 0, NULL), MS_OK);
    CHECK_ST(ms_st_open_file(tpath("none.safetensors"), &m), MS_OK);
    CHECK(m && ms_st_count(m) == 0);
    ms_st_close(&m);
    for (int i = 0; i < N; i++) free(bufs[i]);
}

/* ---- malformed files ------------------------------------------------------------ */

static void test_bad_inputs(void) {
    ms_st_model *m = NULL;
    /* Shorter than 8 bytes. */
    write_bytes(tpath("short.safetensors"), "\x05\0\0\0\0", 5);
    CHECK_ST(ms_st_open_file(tpath("short.safetensors"), &m), MS_ERR_FORMAT);
    CHECK_ST(ms_st_open_memory("\x05\0\0\0\0", 5, "short", &m), MS_ERR_FORMAT);
    CHECK_ST(ms_st_open_memory("", 0, "empty", &m), MS_ERR_FORMAT);
    write_bytes(tpath("zero.safetensors"), "", 0);
    CHECK_ST(ms_st_open_file(tpath("zero.safetensors"), &m), MS_ERR_FORMAT);

    /* Header length past the end of the file. */
    size_t len;
    uint8_t *img = make_image("{}", 1000, 0, &len);
    CHECK_ST(ms_st_open_memory(img, len, "past-eof", &m), MS_ERR_FORMAT);
    free(img);
    img = make_image("{}", UINT64_MAX, 0, &len);
    CHECK_ST(ms_st_open_memory(img, len, "huge-len", &m), MS_ERR_FORMAT);
    free(img);
    /* Header over 100 MB (an untouched anonymous mapping: no memory used). */
    size_t big = (size_t)101 << 20;
    uint8_t *map = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map != MAP_FAILED) {
        uint64_t hl = (uint64_t)100 * 1000 * 1000 + 8;
        for (int i = 0; i < 8; i++) map[i] = (uint8_t)(hl >> (8 * i));
        CHECK_ST(ms_st_open_memory(map, big, "big-header", &m), MS_ERR_RANGE);
        munmap(map, big);
    }

    expect_header("empty header", "", 0, MS_ERR_FORMAT);
    expect_header("not json", "{\"a\": {\"dtype\": ", 0, MS_ERR_FORMAT);
    expect_header("trailing junk", "{} x", 0, MS_ERR_FORMAT);
    expect_header("not an object", "[1, 2, 3]", 0, MS_ERR_FORMAT);
    expect_header("entry not an object", "{\"a\": 5}", 0, MS_ERR_FORMAT);
    expect_header("dtype F64", "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
                  MS_ERR_UNSUPPORTED);
    expect_header("dtype BOOL", "{\"a\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  MS_ERR_UNSUPPORTED);
    expect_header("dtype unknown", "{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  MS_ERR_UNSUPPORTED);
    expect_header("dtype not a string", "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                  MS_ERR_FORMAT);
    expect_header("dtype missing", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, MS_ERR_FORMAT);
    expect_header("shape not array", "{\"a\":{\"dtype\":\"F32\",\"shape\":\"[1]\",\"data_offsets\":[0,4]}}", 4,
                  MS_ERR_FORMAT);
    expect_header("negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                  MS_ERR_FORMAT);
    expect_header("fractional dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
                  MS_ERR_FORMAT);
    expect_header("5 dims", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
                  MS_ERR_UNSUPPORTED);
    expect_header("shape overflow",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}", 4,
                  MS_ERR_FORMAT);
    expect_header("offsets missing", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, MS_ERR_FORMAT);
    expect_header("offsets 3 items", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                  MS_ERR_FORMAT);
    expect_header("offsets negative", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
                  MS_ERR_FORMAT);
    expect_header("begin > end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
                  MS_ERR_FORMAT);
    expect_header("offsets past data", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 8,
                  MS_ERR_FORMAT);
    expect_header("size mismatch", "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[0,100]}}",
                  256, MS_ERR_FORMAT);
    expect_header("overlap",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                  12, MS_ERR_FORMAT);
    expect_header("same range twice",
                  "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                  4, MS_ERR_FORMAT);
    expect_header("duplicate key",
                  "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                  8, MS_ERR_FORMAT);
    expect_header("metadata not object", "{\"__metadata__\": [1]}", 0, MS_ERR_FORMAT);
    expect_header("metadata value not string", "{\"__metadata__\": {\"format\": 1}}", 0, MS_ERR_FORMAT);
    /* Valid edge cases: gaps, empty tensors anywhere, unaligned offsets. */
    expect_header("gap and empty",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[1,5]},"
                  "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[2,2]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]}}",
                  8, MS_OK);
}

/* ---- sharded ------------------------------------------------------------------- */

static int run(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static bool same_file(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    if (ms_read_file(a, &x, &nx) < 0) return false;
    if (ms_read_file(b, &y, &ny) < 0) {
        free(x);
        return false;
    }
    bool same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

static void write_index(const char *dir, const char *json) {
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    write_bytes(p, json, strlen(json));
}

static void test_sharded(void) {
    const char *tool = MS_BUILD_DIR "/tools/microspec-mkmodel";
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "FAIL: %s not built\n", tool);
        g_fail++;
        return;
    }
    char cmd[2048];
    const char *args = "--arch qwen3 --layers 3 --hidden 48 --heads 4 --kv-heads 2 --head-dim 16 --vocab 300 --seed 7";
    snprintf(cmd, sizeof cmd, "%s --out %s %s --shards 3 >/dev/null", tool, tpath("sh3"), args);
    CHECK(run(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s --out %s %s >/dev/null", tool, tpath("sh1"), args);
    CHECK(run(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s --out %s %s >/dev/null", tool, tpath("sh1b"), args);
    CHECK(run(cmd) == 0);
    CHECK(ms_file_exists(tpath("sh3/model-00003-of-00003.safetensors")));
    CHECK(!ms_file_exists(tpath("sh3/model.safetensors")));
    /* Deterministic: same arguments → byte-identical files. */
    CHECK(same_file(tpath("sh1/model.safetensors"), tpath("sh1b/model.safetensors")));
    CHECK(same_file(tpath("sh1/config.json"), tpath("sh1b/config.json")));
    CHECK(same_file(tpath("sh1/config.json"), tpath("sh3/config.json")));

    /* Sharding changes where tensors live, never what they hold. */
    ms_st_model *a = NULL, *b = NULL;
    CHECK_ST(ms_st_open_dir(tpath("sh3"), &a), MS_OK);
    CHECK_ST(ms_st_open_dir(tpath("sh1"), &b), MS_OK);
    if (a && b) {
        /* embed + norm + lm_head + 3 layers × (2 norms + 4 attn + 2 qk norms + 3 mlp) */
        CHECK(ms_st_count(a) == 3 + 3 * 11);
        CHECK(ms_st_count(a) == ms_st_count(b));
        int files_seen[3] = {0};
        for (int64_t i = 0; i < ms_st_count(b); i++) {
            const char *n = ms_st_name(b, i);
            ms_tensor x, y;
            CHECK(!strcmp(ms_st_name(a, i), n));
            CHECK(ms_st_find(a, n, &x) && ms_st_find(b, n, &y));
            CHECK(x.dtype == y.dtype && ms_tensor_has_shape(&x, y.ndim, y.shape));
            CHECK(memcmp(x.data, y.data, ms_tensor_nbytes(&y)) == 0);
            const char *f = ms_st_file_of(a, n);
            for (int s = 0; s < 3; s++) {
                char want[64];
                snprintf(want, sizeof want, "model-%05d-of-00003.safetensors", s + 1);
                if (f && strstr(f, want)) files_seen[s]++;
            }
        }
        CHECK(files_seen[0] > 0 && files_seen[1] > 0 && files_seen[2] > 0);
        int64_t qn[1] = {16};
        ms_tensor t;
        CHECK_ST(ms_st_get_shaped(a, "model.layers.2.self_attn.q_norm.weight", 1, qn, &t), MS_OK);
        CHECK(ms_st_find(a, "lm_head.weight", &t)); /* --tie 0: lm_head present */
    }
    ms_st_close(&a);
    ms_st_close(&b);
    /* A different seed gives different weights. */
    snprintf(cmd, sizeof cmd, "%s --out %s --arch qwen3 --layers 3 --hidden 48 --heads 4 --kv-heads 2 --head-dim 16 "
             "--vocab 300 --seed 8 >/dev/null", tool, tpath("sh1c"));
    CHECK(run(cmd) == 0);
    CHECK(!same_file(tpath("sh1/model.safetensors"), tpath("sh1c/model.safetensors")));

    /* Broken indexes. Two hand-made shards: s1 {a, b}, s2 {c}. */
    mkdir(tpath("idx"), 0755);
    uint8_t d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t sh[1] = {4};
    ms_tensor t4 = ms_tensor_view(d, MS_DTYPE_U8, 1, sh);
    ms_tensor two[2] = {t4, t4};
    const char *ab[2] = {"a", "b"}, *c[1] = {"c"}, *ac[2] = {"a", "c"};
    CHECK_ST(ms_st_write(tpath("idx/s1.safetensors"), 2, ab, two, 0, NULL), MS_OK);
    CHECK_ST(ms_st_write(tpath("idx/s2.safetensors"), 1, c, two, 0, NULL), MS_OK);
    CHECK_ST(ms_st_write(tpath("idx/s3.safetensors"), 2, ac, two, 0, NULL), MS_OK);
    const char *dir = tpath("idx");
    ms_st_model *m = NULL;
    write_index(dir, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\",\"c\":\"s2.safetensors\"}}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_OK);
    CHECK(m && ms_st_count(m) == 3);
    if (m) CHECK(strstr(ms_st_file_of(m, "c"), "s2.safetensors") != NULL);
    ms_st_close(&m);
    write_index(dir, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"c\":\"missing.safetensors\"}}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_NOT_FOUND);
    write_index(dir, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"c\":\"s1.safetensors\"}}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_NOT_FOUND);
    write_index(dir, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"z\":\"s2.safetensors\"}}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_NOT_FOUND);
    write_index(dir, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"c\":\"s3.safetensors\"}}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_FORMAT); /* 'a' in s1 and s3 */
    write_index(dir, "{\"weight_map\":{\"a\":\"../s1.safetensors\"}}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_FORMAT);
    write_index(dir, "{\"weight_map\":[\"s1.safetensors\"]}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_FORMAT);
    write_index(dir, "{\"weight_map\":{\"a\":1}}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_FORMAT);
    write_index(dir, "{\"weight_map\":{}}");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_FORMAT);
    write_index(dir, "not json");
    CHECK_ST(ms_st_open_dir(dir, &m), MS_ERR_FORMAT);
    CHECK(m == NULL);
}

/* ---- microspec-mkmodel: tensor set and config follow the flags ------------------ */

static bool has(const ms_st_model *m, const char *name) { return ms_st_find(m, name, NULL); }

static void test_mkmodel_variants(void) {
    const char *tool = MS_BUILD_DIR "/tools/microspec-mkmodel";
    char cmd[2048], cfgp[600];
    ms_st_model *m = NULL;
    ms_hfconfig c;

    /* Qwen2: q/k/v biases, no o_proj bias, tied, bf16, eos list, tokenizer copied when present. */
    const char *tok = MS_SHARED_DIR "/tokenizers/qwen3/tokenizer.json";
    bool have_tok = access(tok, R_OK) == 0;
    snprintf(cmd, sizeof cmd, "%s --out %s --arch qwen2 --tie 1 --dtype bf16 --eos 3 --eos 4 --theta 1e6 %s%s >/dev/null",
             tool, tpath("q2"), have_tok ? "--tokenizer " : "", have_tok ? tok : "");
    CHECK(run(cmd) == 0);
    CHECK_ST(ms_st_open_dir(tpath("q2"), &m), MS_OK);
    if (m) {
        ms_tensor t;
        CHECK(has(m, "model.layers.1.self_attn.q_proj.bias") && has(m, "model.layers.1.self_attn.v_proj.bias"));
        CHECK(!has(m, "model.layers.1.self_attn.o_proj.bias") && !has(m, "lm_head.weight"));
        CHECK(!has(m, "model.layers.0.self_attn.q_norm.weight"));
        CHECK(ms_st_find(m, "model.embed_tokens.weight", &t) && t.dtype == MS_DTYPE_BF16);
        int64_t kb[1] = {64}; /* kv heads = heads = 4, head_dim 16 */
        CHECK_ST(ms_st_get_shaped(m, "model.layers.0.self_attn.k_proj.bias", 1, kb, &t), MS_OK);
        ms_st_close(&m);
    }
    snprintf(cfgp, sizeof cfgp, "%s/config.json", tpath("q2"));
    CHECK_ST(ms_hfcfg_load(cfgp, &c), MS_OK);
    CHECK(c.arch == MS_ARCH_QWEN2 && c.tie_word_embeddings && c.attention_bias && c.rope_theta == 1e6);
    CHECK(c.n_eos == 2 && c.eos_token_ids[0] == 3 && c.eos_token_ids[1] == 4 && !strcmp(c.torch_dtype, "bfloat16"));
    if (have_tok) {
        CHECK(same_file(tok, tpath("q2/tokenizer.json")));
        CHECK(same_file(MS_SHARED_DIR "/tokenizers/qwen3/tokenizer_config.json", tpath("q2/tokenizer_config.json")));
    }

    /* Llama with attention_bias: q/k/v and o_proj biases (transformers), llama3 RoPE. */
    snprintf(cmd, sizeof cmd, "%s --out %s --arch llama --attention-bias 1 --rope-llama3 --rope-factor 32 --hidden 32 "
             "--heads 2 --ffn 40 --vocab 99 --layers 1 --max-pos 4096 >/dev/null", tool, tpath("lb"));
    CHECK(run(cmd) == 0);
    CHECK_ST(ms_st_open_dir(tpath("lb"), &m), MS_OK);
    if (m) {
        int64_t ob[1] = {32}, up[2] = {40, 32}, lm[2] = {99, 32};
        ms_tensor t;
        CHECK_ST(ms_st_get_shaped(m, "model.layers.0.self_attn.o_proj.bias", 1, ob, &t), MS_OK);
        CHECK_ST(ms_st_get_shaped(m, "model.layers.0.mlp.up_proj.weight", 2, up, &t), MS_OK);
        CHECK_ST(ms_st_get_shaped(m, "lm_head.weight", 2, lm, &t), MS_OK);
        CHECK(ms_st_count(m) == 3 + 13);
        /* Norm weights are 1 + 0.1·N(0,1): mean near 1; matrices scaled by 1/sqrt(fan_in). */
        CHECK(ms_st_find(m, "model.norm.weight", &t) && t.dtype == MS_DTYPE_F32);
        float v[32];
        memcpy(v, t.data, sizeof v);
        double mean = 0;
        for (int i = 0; i < 32; i++) mean += v[i] / 32.0;
        CHECK(mean > 0.9 && mean < 1.1);
        ms_st_close(&m);
    }
    snprintf(cfgp, sizeof cfgp, "%s/config.json", tpath("lb"));
    CHECK_ST(ms_hfcfg_load(cfgp, &c), MS_OK);
    CHECK(c.attention_bias && c.rope_scaling.type == MS_ROPE_LLAMA3 && c.rope_scaling.factor == 32.0);
    CHECK(c.rope_scaling.low_freq_factor == 1.0 && c.rope_scaling.high_freq_factor == 4.0);
    CHECK(c.rope_scaling.original_max_position_embeddings == 8192 && c.max_position_embeddings == 4096);

    /* Refusals: unknown option / arch → 2; a config the loader refuses → 1. */
    snprintf(cmd, sizeof cmd, "%s --out %s --arch gpt2 2>/dev/null", tool, tpath("x"));
    CHECK(run(cmd) == 2);
    snprintf(cmd, sizeof cmd, "%s --out %s --arch llama --bogus 1 2>/dev/null", tool, tpath("x"));
    CHECK(run(cmd) == 2);
    snprintf(cmd, sizeof cmd, "%s --out %s --arch llama --heads 4 --kv-heads 3 2>/dev/null", tool, tpath("x"));
    CHECK(run(cmd) == 1);
    snprintf(cmd, sizeof cmd, "%s --help >/dev/null", tool);
    CHECK(run(cmd) == 0);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/ms_st_test_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_bad_inputs();
    test_sharded();
    test_mkmodel_variants();
    nftw(g_tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (g_fail) {
        fprintf(stderr, "test_safetensors: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_safetensors: all checks passed\n");
    return 0;
}
