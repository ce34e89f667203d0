/* test_gguf — the GGUF reader (common/ms_gguf.c).
 *
 *   test_gguf                    unit + bad-input tests on files written here
 *   test_gguf --golden           every installed real model: this reader's dump
 *                                == tests/gguf_meta_dump.py (ggml's PyPI `gguf`)
 *   test_gguf --dump FILE        print the dump (same format as the Python script)
 *   test_gguf --write-seeds DIR  write the fuzz seed corpus (tests/fuzz/corpus/fuzz_gguf)
 *
 * The writer below is written from the format description (ggml docs/gguf.md),
 * not from the reader; expected byte sizes of tensors are hand-computed
 * constants (block bytes × blocks), not ms_dtype_row_bytes.
 */
#include "ms_check.h"
#include "ms_gguf.h"
#include "test_fs.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a byte-buffer GGUF writer ---------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *src, size_t k) {
    if (b->n + k > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + k) cap *= 2;
        b->p = realloc(b->p, cap);
        MS_ASSERT(b->p);
        b->cap = cap;
    }
    if (k) memcpy(b->p + b->n, src, k);
    b->n += k;
}
static void b_u8(buf *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u32(buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, 8); }
/* A GGUF string with an explicit byte count (may hold NULs). */
static void b_strn(buf *b, const char *s, size_t n) {
    b_u64(b, n);
    b_put(b, s, n);
}
static void b_str(buf *b, const char *s) { b_strn(b, s, strlen(s)); }
static void b_pad(buf *b, size_t align) {
    while (b->n % align) b_u8(b, 0);
}
static void b_header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b_put(b, "GGUF", 4);
    b_u32(b, version);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
static void b_kv_scalar(buf *b, const char *key, uint32_t type, const void *v, size_t k) {
    b_str(b, key);
    b_u32(b, type);
    b_put(b, v, k);
}
static void b_kv_u32(buf *b, const char *key, uint32_t v) { b_kv_scalar(b, key, MS_GGUF_U32, &v, 4); }
static void b_tensor(buf *b, const char *name, uint32_t ndim, const uint64_t *ne, uint32_t type, uint64_t offset) {
    b_str(b, name);
    b_u32(b, ndim);
    for (uint32_t i = 0; i < ndim; i++) b_u64(b, ne[i]);
    b_u32(b, type);
    b_u64(b, offset);
}

/* ---- the full test file: every value type, arrays, several tensor types ---- */

/* Scalar values, one per type (bytes as written). */
static const uint8_t v_u8 = 200;
static const int8_t v_i8 = -100;
static const uint16_t v_u16 = 60000;
static const int16_t v_i16 = -30000;
static const uint32_t v_u32 = 4000000000u;
static const int32_t v_i32 = -2000000000;
static const float v_f32 = 1.5f;
static const uint8_t v_bool = 1;
static const uint64_t v_u64 = UINT64_MAX;
static const int64_t v_i64 = INT64_MIN;
static const double v_f64 = 0.1;

/* Array elements (4 each). */
static const uint8_t a_u8[] = {1, 2, 3, 255};
static const int8_t a_i8[] = {-1, 2, -128, 127};
static const uint16_t a_u16[] = {1, 65535, 3, 4};
static const int16_t a_i16[] = {-1, -32768, 32767, 0};
static const uint32_t a_u32[] = {7, 0, 4294967295u, 9};
static const int32_t a_i32[] = {-7, 0, INT32_MIN, INT32_MAX};
static const float a_f32[] = {0.5f, -2.25f, 1e30f, -0.0f};
static const uint8_t a_bool[] = {1, 0, 0, 1};
static const uint64_t a_u64[] = {1, UINT64_MAX, 3, 1ull << 40};
static const int64_t a_i64[] = {INT64_MIN, -1, 0, INT64_MAX};
static const double a_f64[] = {0.1, -1e300, 3.0, DBL_MIN};

static const struct {
    const char *key;
    uint32_t type;
    const void *v;
    size_t size;
    const void *arr;
} scalars[] = {
    {"t.u8", MS_GGUF_U8, &v_u8, 1, a_u8},       {"t.i8", MS_GGUF_I8, &v_i8, 1, a_i8},
    {"t.u16", MS_GGUF_U16, &v_u16, 2, a_u16},   {"t.i16", MS_GGUF_I16, &v_i16, 2, a_i16},
    {"t.u32", MS_GGUF_U32, &v_u32, 4, a_u32},   {"t.i32", MS_GGUF_I32, &v_i32, 4, a_i32},
    {"t.f32", MS_GGUF_F32, &v_f32, 4, a_f32},   {"t.bool", MS_GGUF_BOOL, &v_bool, 1, a_bool},
    {"t.u64", MS_GGUF_U64, &v_u64, 8, a_u64},   {"t.i64", MS_GGUF_I64, &v_i64, 8, a_i64},
    {"t.f64", MS_GGUF_F64, &v_f64, 8, a_f64},
};
#define N_SCALARS (int)(sizeof scalars / sizeof *scalars)

static const char *const a_str[] = {"x", "", "yz\xff"};

/* Tensors: ggml type id, ne as stored, and byte sizes worked out by hand from
 * ggml's block sizes (F32 4, F16 2, BF16 2, I32 4; Q8_0 34 B/32, Q5_0 22 B/32,
 * Q4_K 144 B/256, Q6_K 210 B/256). */
static const struct {
    const char *name;
    uint32_t ggml;
    ms_dtype dtype;
    uint32_t ndim;
    uint64_t ne[4];
    size_t nbytes;
} tensors[] = {
    {"tok.f32", 0, MS_DTYPE_F32, 1, {3}, 12},
    {"w.f16", 1, MS_DTYPE_F16, 2, {5, 2}, 20},
    {"w.q8_0", 8, MS_DTYPE_Q8_0, 2, {64, 3}, 204},
    {"w.q4_k", 12, MS_DTYPE_Q4_K, 2, {256, 2}, 288},
    {"w.q6_k", 14, MS_DTYPE_Q6_K, 3, {256, 1, 1}, 210},
    {"w.bf16", 30, MS_DTYPE_BF16, 4, {2, 3, 2, 2}, 48},
    {"w.q5_0", 6, MS_DTYPE_Q5_0, 1, {32}, 22},
    {"w.i32", 26, MS_DTYPE_I32, 1, {4}, 16},
};
#define N_TENSORS (int)(sizeof tensors / sizeof *tensors)

/* Data byte j of tensor i: a pattern that differs between tensors. */
static uint8_t pattern(int i, size_t j) { return (uint8_t)(i * 37 + j * 11 + 5); }

typedef struct {
    size_t data_start;         /* where the writer put the data block */
    uint64_t offsets[N_TENSORS];
} full_layout;

/* Writes the full file. align 0: no general.alignment key (default 32). */
static void make_full(buf *b, uint32_t version, uint32_t align, full_layout *lay) {
    uint64_t n_kv = (uint64_t)N_SCALARS * 2 + 4 + (align ? 1 : 0);
    b_header(b, version, N_TENSORS, n_kv);
    if (align) b_kv_u32(b, "general.alignment", align);
    for (int i = 0; i < N_SCALARS; i++) {
        b_kv_scalar(b, scalars[i].key, scalars[i].type, scalars[i].v, scalars[i].size);
        char key[32];
        snprintf(key, sizeof key, "a.%s", scalars[i].key + 2);
        b_str(b, key);
        b_u32(b, MS_GGUF_ARRAY);
        b_u32(b, scalars[i].type);
        b_u64(b, 4);
        b_put(b, scalars[i].arr, 4 * scalars[i].size);
    }
    b_str(b, "t.str");
    b_u32(b, MS_GGUF_STRING);
    b_str(b, "hello gguf");
    b_str(b, "t.str_nul");
    b_u32(b, MS_GGUF_STRING);
    b_strn(b, "a\0b", 3);
    b_str(b, "a.str");
    b_u32(b, MS_GGUF_ARRAY);
    b_u32(b, MS_GGUF_STRING);
    b_u64(b, 3);
    for (int i = 0; i < 3; i++) b_str(b, a_str[i]);
    b_str(b, "a.empty");
    b_u32(b, MS_GGUF_ARRAY);
    b_u32(b, MS_GGUF_U32);
    b_u64(b, 0);

    size_t a = align ? align : 32;
    uint64_t off = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        lay->offsets[i] = off;
        b_tensor(b, tensors[i].name, tensors[i].ndim, tensors[i].ne, tensors[i].ggml, off);
        off += tensors[i].nbytes;
        off = (off + a - 1) / a * a;
    }
    b_pad(b, a);
    lay->data_start = b->n;
    for (int i = 0; i < N_TENSORS; i++) {
        while (b->n < lay->data_start + lay->offsets[i]) b_u8(b, 0);
        for (size_t j = 0; j < tensors[i].nbytes; j++) b_u8(b, pattern(i, j));
    }
}

/* ---- checks on the full file --------------------------------------------------- */

static void check_getters(const ms_gguf *g) {
    int64_t i64;
    uint32_t u32;
    uint64_t u64;
    double f64;
    bool bl;
    const char *s;
    size_t len;
    ms_log_level lv = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF); /* the wrong-type calls below log by design */

    CHECK(ms_gguf_get_i64(g, "t.u8", &i64) == MS_OK && i64 == 200, "u8");
    CHECK(ms_gguf_get_i64(g, "t.i8", &i64) == MS_OK && i64 == -100, "i8");
    CHECK(ms_gguf_get_u32(g, "t.i8", &u32) == MS_ERR_FORMAT, "negative i8 as u32");
    CHECK(ms_gguf_get_i64(g, "t.u16", &i64) == MS_OK && i64 == 60000, "u16");
    CHECK(ms_gguf_get_i64(g, "t.i16", &i64) == MS_OK && i64 == -30000, "i16");
    CHECK(ms_gguf_get_u32(g, "t.u32", &u32) == MS_OK && u32 == 4000000000u, "u32");
    CHECK(ms_gguf_get_i64(g, "t.i32", &i64) == MS_OK && i64 == -2000000000, "i32");
    CHECK(ms_gguf_get_u64(g, "t.i32", &u64) == MS_ERR_FORMAT, "negative i32 as u64");
    CHECK(ms_gguf_get_u64(g, "t.u64", &u64) == MS_OK && u64 == UINT64_MAX, "u64");
    CHECK(ms_gguf_get_i64(g, "t.u64", &i64) == MS_ERR_FORMAT, "u64 max as i64");
    CHECK(ms_gguf_get_u32(g, "t.u64", &u32) == MS_ERR_FORMAT, "u64 max as u32");
    CHECK(ms_gguf_get_i64(g, "t.i64", &i64) == MS_OK && i64 == INT64_MIN, "i64");
    CHECK(ms_gguf_get_u32(g, "t.i64", &u32) == MS_ERR_FORMAT, "i64 min as u32");
    CHECK(ms_gguf_get_u64(g, "t.u8", &u64) == MS_OK && u64 == 200, "u8 as u64");
    CHECK(ms_gguf_get_f64(g, "t.f32", &f64) == MS_OK && f64 == 1.5, "f32");
    CHECK(ms_gguf_get_f64(g, "t.f64", &f64) == MS_OK && f64 == 0.1, "f64");
    CHECK(ms_gguf_get_f64(g, "t.i32", &f64) == MS_OK && f64 == -2e9, "i32 as f64");
    CHECK(ms_gguf_get_f64(g, "t.i64", &f64) == MS_OK && f64 == -9223372036854775808.0, "i64 as f64");
    CHECK(ms_gguf_get_f64(g, "t.str", &f64) == MS_ERR_FORMAT, "string as f64");
    CHECK(ms_gguf_get_i64(g, "t.f32", &i64) == MS_ERR_FORMAT, "f32 as i64");
    CHECK(ms_gguf_get_i64(g, "t.bool", &i64) == MS_ERR_FORMAT, "bool as i64");
    CHECK(ms_gguf_get_bool(g, "t.bool", &bl) == MS_OK && bl, "bool");
    CHECK(ms_gguf_get_bool(g, "t.u8", &bl) == MS_ERR_FORMAT, "u8 as bool");
    CHECK(ms_gguf_get_str(g, "t.str", &s, &len) == MS_OK && len == 10 && !strcmp(s, "hello gguf"), "str");
    CHECK(ms_gguf_get_str(g, "t.str", &s, NULL) == MS_OK, "str, len NULL");
    CHECK(ms_gguf_get_str(g, "t.str_nul", &s, &len) == MS_ERR_FORMAT, "string holding NUL");
    CHECK(ms_gguf_get_str(g, "t.u8", &s, &len) == MS_ERR_FORMAT, "u8 as str");
    CHECK(ms_gguf_get_str(g, "a.str", &s, &len) == MS_ERR_FORMAT, "array as str");
    CHECK(ms_gguf_get_i64(g, "absent", &i64) == MS_ERR_NOT_FOUND, "absent key");
    CHECK(ms_gguf_get_str(g, "t.st", &s, &len) == MS_ERR_NOT_FOUND, "absent key (prefix)");

    /* Arrays of every scalar element type: bytes as written. */
    for (int i = 0; i < N_SCALARS; i++) {
        char key[32];
        snprintf(key, sizeof key, "a.%s", scalars[i].key + 2);
        ms_gguf_vtype et;
        int64_t n;
        const void *data;
        CHECK(ms_gguf_get_arr(g, key, &et, &n, &data) == MS_OK, "%s", key);
        CHECK(et == (ms_gguf_vtype)scalars[i].type && n == 4, "%s: etype %d n %lld", key, (int)et, (long long)n);
        CHECK(data && !memcmp(data, scalars[i].arr, 4 * scalars[i].size), "%s: elements", key);
        CHECK(ms_gguf_get_arr(g, scalars[i].key, &et, &n, &data) == MS_ERR_FORMAT, "%s as array", scalars[i].key);
    }
    ms_gguf_vtype et;
    int64_t n;
    const void *data = &n;
    CHECK(ms_gguf_get_arr(g, "a.str", &et, &n, &data) == MS_OK && et == MS_GGUF_STRING && n == 3 && !data,
          "string array");
    for (int i = 0; i < 3; i++) {
        CHECK(ms_gguf_arr_str(g, "a.str", i, &s, &len) == MS_OK && len == strlen(a_str[i]) &&
                  !memcmp(s, a_str[i], len),
              "a.str[%d]", i);
    }
    CHECK(ms_gguf_arr_str(g, "a.str", 3, &s, &len) == MS_ERR_RANGE, "a.str[3]");
    CHECK(ms_gguf_arr_str(g, "a.str", -1, &s, &len) == MS_ERR_RANGE, "a.str[-1]");
    CHECK(ms_gguf_arr_str(g, "a.u8", 0, &s, &len) == MS_ERR_FORMAT, "u8 array as strings");
    CHECK(ms_gguf_arr_str(g, "t.str", 0, &s, &len) == MS_ERR_FORMAT, "string as string array");
    CHECK(ms_gguf_get_arr(g, "a.empty", &et, &n, &data) == MS_OK && et == MS_GGUF_U32 && n == 0, "empty array");
    CHECK(ms_gguf_get_arr(g, "nope", &et, &n, &data) == MS_ERR_NOT_FOUND, "absent array");
    ms_log_set_level(lv);
}

/* Keys in file order, their types and find(). */
static void check_kv_table(const ms_gguf *g, bool with_align) {
    int64_t base = with_align ? 1 : 0;
    CHECK(ms_gguf_n_kv(g) == (int64_t)N_SCALARS * 2 + 4 + base, "n_kv %lld", (long long)ms_gguf_n_kv(g));
    if (with_align) CHECK(!strcmp(ms_gguf_kv_key(g, 0), "general.alignment"), "kv 0");
    for (int i = 0; i < N_SCALARS; i++) {
        int64_t k = base + 2 * i;
        CHECK(!strcmp(ms_gguf_kv_key(g, k), scalars[i].key), "kv %lld: %s", (long long)k, ms_gguf_kv_key(g, k));
        CHECK(ms_gguf_kv_type(g, k) == (ms_gguf_vtype)scalars[i].type, "kv %lld type", (long long)k);
        CHECK(ms_gguf_kv_type(g, k + 1) == MS_GGUF_ARRAY, "kv %lld type", (long long)k + 1);
        CHECK(ms_gguf_find(g, scalars[i].key) == k, "find %s", scalars[i].key);
    }
    int64_t k = base + 2 * N_SCALARS;
    CHECK(ms_gguf_kv_type(g, k) == MS_GGUF_STRING && !strcmp(ms_gguf_kv_key(g, k), "t.str"), "t.str");
    CHECK(ms_gguf_find(g, "a.empty") == k + 3, "find a.empty");
    CHECK(ms_gguf_find(g, "") == -1 && ms_gguf_find(g, "t.u8x") == -1, "find absent");
}

static void check_tensors(const ms_gguf *g, const buf *b, const full_layout *lay) {
    CHECK(ms_gguf_n_tensors(g) == N_TENSORS, "n_tensors %lld", (long long)ms_gguf_n_tensors(g));
    CHECK(ms_gguf_data_start(g) == lay->data_start, "data_start %llu, expected %zu",
          (unsigned long long)ms_gguf_data_start(g), lay->data_start);
    for (int i = 0; i < N_TENSORS && i < ms_gguf_n_tensors(g); i++) {
        const ms_gguf_tensor_info *ti = ms_gguf_tensor_at(g, i);
        CHECK(!strcmp(ti->name, tensors[i].name), "tensor %d name %s", i, ti->name);
        CHECK(ms_gguf_find_tensor(g, tensors[i].name) == ti, "find %s", tensors[i].name);
        CHECK(ti->ggml_type == tensors[i].ggml && ti->dtype == tensors[i].dtype, "%s type", ti->name);
        CHECK(ti->ndim == (int)tensors[i].ndim, "%s ndim %d", ti->name, ti->ndim);
        for (int d = 0; d < 4; d++) {
            int64_t want = d < (int)tensors[i].ndim ? (int64_t)tensors[i].ne[d] : 1;
            CHECK(ti->ne[d] == want, "%s ne[%d] %lld", ti->name, d, (long long)ti->ne[d]);
            if (d < (int)tensors[i].ndim)
                CHECK(ti->shape[d] == (int64_t)tensors[i].ne[tensors[i].ndim - 1 - d], "%s shape[%d]", ti->name, d);
        }
        CHECK(ti->offset == lay->offsets[i], "%s offset %llu", ti->name, (unsigned long long)ti->offset);
        CHECK(ti->nbytes == tensors[i].nbytes, "%s nbytes %zu, expected %zu", ti->name, ti->nbytes,
              tensors[i].nbytes);
        const uint8_t *p = ti->data;
        bool same = p == b->p + lay->data_start + lay->offsets[i] || ms_gguf_path(g)[0] == '/';
        CHECK(same, "%s data pointer", ti->name);
        for (size_t j = 0; j < tensors[i].nbytes; j++)
            if (p[j] != pattern(i, j)) {
                CHECK(false, "%s data byte %zu", ti->name, j);
                break;
            }
    }
    CHECK(ms_gguf_find_tensor(g, "w.q8") == NULL && ms_gguf_find_tensor(g, "zzz") == NULL, "absent tensor");

    /* get_tensor: shape in row-major order, dtype lists. */
    const ms_gguf_tensor_info *ti = NULL;
    ms_dtype q[] = {MS_DTYPE_Q4_0, MS_DTYPE_Q8_0};
    CHECK(ms_gguf_get_tensor(g, "w.q8_0", 2, (const int64_t[]){3, 64}, q, 2, &ti) == MS_OK && ti &&
              ti->dtype == MS_DTYPE_Q8_0,
          "get_tensor w.q8_0");
    CHECK(ms_gguf_get_tensor(g, "w.bf16", 0, NULL, NULL, 0, &ti) == MS_OK && ti && ti->shape[0] == 2 &&
              ti->shape[1] == 2 && ti->shape[2] == 3 && ti->shape[3] == 2,
          "get_tensor w.bf16");
    ms_log_level lv = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    CHECK(ms_gguf_get_tensor(g, "w.q8_0", 2, (const int64_t[]){64, 3}, NULL, 0, &ti) == MS_ERR_FORMAT && !ti,
          "transposed shape");
    CHECK(ms_gguf_get_tensor(g, "w.q8_0", 1, (const int64_t[]){3}, NULL, 0, &ti) == MS_ERR_FORMAT, "ndim");
    CHECK(ms_gguf_get_tensor(g, "w.f16", 0, NULL, q, 2, &ti) == MS_ERR_FORMAT, "dtype not allowed");
    CHECK(ms_gguf_get_tensor(g, "absent", 0, NULL, NULL, 0, &ti) == MS_ERR_NOT_FOUND, "absent");
    ms_log_set_level(lv);
}

static void test_full(void) {
    const uint32_t aligns[] = {0, 1, 8, 32, 64, 256};
    for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++) {
        for (uint32_t version = 2; version <= 3; version++) {
            buf b = {0};
            full_layout lay;
            make_full(&b, version, aligns[a], &lay);
            ms_gguf *g = NULL;
            ms_status st = ms_gguf_open_memory(b.p, b.n, "full.gguf", &g);
            CHECK(st == MS_OK && g, "align %u v%u: open %s", aligns[a], version, ms_status_str(st));
            if (g) {
                CHECK(ms_gguf_version(g) == version, "version");
                CHECK(ms_gguf_alignment(g) == (aligns[a] ? aligns[a] : 32), "alignment %llu",
                      (unsigned long long)ms_gguf_alignment(g));
                CHECK(!strcmp(ms_gguf_path(g), "full.gguf"), "path");
                check_kv_table(g, aligns[a] != 0);
                check_getters(g);
                check_tensors(g, &b, &lay);
                ms_gguf_close(&g);
                CHECK(g == NULL, "close nulls the pointer");
            }
            free(b.p);
        }
    }
}

/* The same file through ms_gguf_open (mmap), ms_gguf_is_gguf, and open errors. */
static void test_file_io(void) {
    char dir[256];
    if (!ms_test_tmpdir("gguf", dir, sizeof dir)) {
        CHECK(false, "tmpdir");
        return;
    }
    buf b = {0};
    full_layout lay;
    make_full(&b, 3, 64, &lay);
    char path[512], txt[512];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    snprintf(txt, sizeof txt, "%s/m.txt", dir);
    CHECK(ms_write_file_atomic(path, b.p, b.n) == MS_OK, "write");
    CHECK(ms_write_file_atomic(txt, "hello world, this is not gguf", 29) == MS_OK, "write");
    CHECK(ms_gguf_is_gguf(path), "is_gguf");
    CHECK(!ms_gguf_is_gguf(txt), "text is not gguf");
    CHECK(!ms_gguf_is_gguf("/nonexistent/x.gguf"), "missing is not gguf");
    ms_gguf *g = NULL;
    CHECK(ms_gguf_open(path, &g) == MS_OK && g, "open file");
    if (g) {
        CHECK(!strcmp(ms_gguf_path(g), path), "path");
        check_kv_table(g, true);
        check_getters(g);
        check_tensors(g, &b, &lay);
        ms_gguf_close(&g);
    }
    ms_gguf_close(&g); /* closing NULL is a no-op */
    ms_log_level lv = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    CHECK(ms_gguf_open("/nonexistent/x.gguf", &g) == MS_ERR_IO && !g, "missing file");
    CHECK(ms_gguf_open(dir, &g) == MS_ERR_IO && !g, "a folder");
    CHECK(ms_gguf_open(txt, &g) == MS_ERR_FORMAT && !g, "text file");
    ms_log_set_level(lv);
    free(b.p);
    ms_test_rmtree(dir);
}

/* ---- bad input ------------------------------------------------------------------- */

/* Knobs on a small valid file: kvs "k.a" (u32 7) and "k.arr" (["p", "q"]);
 * tensors t0 (F32, ne {8}, 32 B at 0) and t1 (Q8_0, ne {32, 2}, 68 B at 32).
 * Zero fields mean "as in the valid file". */
typedef struct {
    const char *magic;
    uint32_t version;
    uint64_t n_kv_add, n_tensors_add;
    uint64_t key_len_add;   /* first key's length field */
    uint64_t elem_len_add;  /* first string array element's length field */
    uint64_t arr_count_add;
    bool set_vtype;
    uint32_t vtype;         /* type of k.a */
    bool set_etype;
    uint32_t etype;         /* element type of k.arr (its elements stay strings) */
    bool dup_key, dup_tensor, empty_key, nul_key;
    bool bool_kv;
    uint8_t bool_byte;
    bool set_t1_type;
    uint32_t t1_type;
    bool set_t1_ndim;
    uint32_t t1_ndim;
    bool set_ne;
    uint64_t ne[4];
    uint64_t t1_offset_add;
    bool set_align;
    uint32_t align;
    bool align_u64;
    size_t cut;             /* drop this many bytes from the end */
} knobs;

static void make_small(buf *b, const knobs *k) {
    uint64_t n_kv = 2 + (uint64_t)k->dup_key + (uint64_t)k->bool_kv + (uint64_t)k->set_align;
    b_put(b, k->magic ? k->magic : "GGUF", 4);
    b_u32(b, k->version ? k->version : 3);
    b_u64(b, 2 + k->n_tensors_add);
    b_u64(b, n_kv + k->n_kv_add);
    const char *key0 = k->empty_key ? "" : "k.a";
    if (k->nul_key) {
        b_u64(b, 3);
        b_put(b, "k\0a", 3);
    } else {
        b_u64(b, strlen(key0) + k->key_len_add);
        b_put(b, key0, strlen(key0));
    }
    b_u32(b, k->set_vtype ? k->vtype : MS_GGUF_U32);
    b_u32(b, 7);
    b_str(b, "k.arr");
    b_u32(b, MS_GGUF_ARRAY);
    b_u32(b, k->set_etype ? k->etype : MS_GGUF_STRING);
    b_u64(b, 2 + k->arr_count_add);
    b_u64(b, 1 + k->elem_len_add);
    b_put(b, "p", 1);
    b_str(b, "q");
    if (k->dup_key) b_kv_u32(b, "k.a", 8);
    if (k->bool_kv) b_kv_scalar(b, "k.b", MS_GGUF_BOOL, &k->bool_byte, 1);
    if (k->set_align) {
        if (k->align_u64) {
            uint64_t a = k->align;
            b_kv_scalar(b, "general.alignment", MS_GGUF_U64, &a, 8);
        } else {
            b_kv_u32(b, "general.alignment", k->align);
        }
    }
    b_tensor(b, "t0", 1, (const uint64_t[]){8}, 0, 0);
    uint64_t ne1[5] = {32, 2, 1, 1, 1}; /* 5: room for the n_dims 5 case */
    if (k->set_ne) memcpy(ne1, k->ne, sizeof k->ne);
    b_tensor(b, k->dup_tensor ? "t0" : "t1", k->set_t1_ndim ? k->t1_ndim : 2, ne1,
             k->set_t1_type ? k->t1_type : 8, 32 + k->t1_offset_add);
    b_pad(b, 32);
    for (int i = 0; i < 100; i++) b_u8(b, (uint8_t)i);
    b->n -= k->cut;
}

/* Open an image with stderr captured into log; returns the status. */
static ms_status open_captured(const uint8_t *p, size_t n, char *log, size_t cap, ms_gguf **g) {
    fflush(stderr);
    FILE *tmp = tmpfile();
    MS_ASSERT(tmp);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    /* An exact-size copy, so an over-read is caught by ASan. */
    uint8_t *copy = malloc(n ? n : 1);
    MS_ASSERT(copy);
    memcpy(copy, p, n);
    ms_status st = ms_gguf_open_memory(copy, n, "bad.gguf", g);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t k = fread(log, 1, cap - 1, tmp);
    log[k] = 0;
    fclose(tmp);
    ms_gguf_close(g);
    free(copy);
    return st;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Each case must fail with MS_ERR_FORMAT and log exactly one line holding
 * every one of the given fragments (which name the file, key/tensor, field). */
static void expect_bad(const char *what, const knobs *k, const char *frag1, const char *frag2) {
    buf b = {0};
    make_small(&b, k);
    char log[4096];
    ms_gguf *g = NULL;
    ms_status st = open_captured(b.p, b.n, log, sizeof log, &g);
    CHECK(st == MS_ERR_FORMAT, "%s: status %s", what, ms_status_str(st));
    CHECK(count_lines(log) == 1, "%s: %d log lines: %s", what, count_lines(log), log);
    CHECK(strstr(log, "bad.gguf: ") != NULL, "%s: file not named: %s", what, log);
    CHECK(strstr(log, frag1) != NULL, "%s: '%s' not in: %s", what, frag1, log);
    CHECK(!frag2 || strstr(log, frag2) != NULL, "%s: '%s' not in: %s", what, frag2, log);
    printf("  %-28s %s", what, strstr(log, "bad.gguf") ? strstr(log, "bad.gguf") : log);
    free(b.p);
}

static void test_bad(void) {
    /* The valid baseline opens (else every case below would pass vacuously). */
    {
        buf b = {0};
        knobs k = {0};
        make_small(&b, &k);
        ms_gguf *g = NULL;
        CHECK(ms_gguf_open_memory(b.p, b.n, "small.gguf", &g) == MS_OK, "small baseline");
        ms_gguf_close(&g);
        free(b.p);
        b = (buf){0};
        k.set_align = true;
        k.align = 32;
        k.bool_kv = true;
        k.bool_byte = 1;
        make_small(&b, &k);
        CHECK(ms_gguf_open_memory(b.p, b.n, "small.gguf", &g) == MS_OK, "small baseline with bool, alignment");
        ms_gguf_close(&g);
        free(b.p);
    }
    printf("bad inputs:\n");
    expect_bad("magic", &(knobs){.magic = "GGUX"}, "not a GGUF file", NULL);
    expect_bad("version 1", &(knobs){.version = 1}, "version 1", NULL);
    expect_bad("version 4", &(knobs){.version = 4}, "version: 4", NULL);
    expect_bad("big-endian version", &(knobs){.version = 3u << 24}, "big-endian", NULL);
    expect_bad("n_kv huge", &(knobs){.n_kv_add = 1ull << 40}, "n_kv", NULL);
    expect_bad("n_kv max", &(knobs){.n_kv_add = UINT64_MAX - 2}, "n_kv", NULL);
    expect_bad("n_tensors huge", &(knobs){.n_tensors_add = 1ull << 50}, "n_tensors", NULL);
    expect_bad("key length past end", &(knobs){.key_len_add = 1ull << 40}, "key #0", "string length");
    expect_bad("key length max", &(knobs){.key_len_add = UINT64_MAX - 3}, "key #0", "string length");
    expect_bad("element length past end", &(knobs){.elem_len_add = 4000}, "key 'k.arr'", "string length");
    expect_bad("array count past end", &(knobs){.arr_count_add = 1ull << 40}, "key 'k.arr'", "array count");
    expect_bad("array count max", &(knobs){.arr_count_add = UINT64_MAX - 2}, "key 'k.arr'", "array count");
    expect_bad("nested array", &(knobs){.set_etype = true, .etype = MS_GGUF_ARRAY}, "key 'k.arr'", "nested");
    expect_bad("unknown element type", &(knobs){.set_etype = true, .etype = 13}, "key 'k.arr'",
               "unknown value type 13");
    expect_bad("unknown value type", &(knobs){.set_vtype = true, .vtype = 99}, "key 'k.a'", "unknown value type 99");
    expect_bad("duplicate key", &(knobs){.dup_key = true}, "key 'k.a'", "twice");
    expect_bad("empty key", &(knobs){.empty_key = true}, "key #0", "empty");
    expect_bad("key holding NUL", &(knobs){.nul_key = true}, "key #0", "NUL");
    expect_bad("bool byte 2", &(knobs){.bool_kv = true, .bool_byte = 2}, "key 'k.b'", "bool");
    expect_bad("duplicate tensor", &(knobs){.dup_tensor = true}, "tensor 't0'", "twice");
    expect_bad("unknown ggml type", &(knobs){.set_t1_type = true, .t1_type = 99}, "tensor 't1'",
               "unknown ggml type id 99");
    expect_bad("unsupported ggml type", &(knobs){.set_t1_type = true, .t1_type = 10}, "tensor 't1'", "10 (Q2_K)");
    expect_bad("ne0 not whole blocks", &(knobs){.set_ne = true, .ne = {48, 2, 1, 1}}, "tensor 't1'",
               "ne[0]: 48 is not a whole number of Q8_0 blocks");
    expect_bad("ne1 zero", &(knobs){.set_ne = true, .ne = {32, 0, 1, 1}}, "tensor 't1'", "ne[1]: 0");
    expect_bad("ne past int64", &(knobs){.set_ne = true, .ne = {32, 1ull << 63, 1, 1}}, "tensor 't1'", "ne[1]");
    expect_bad("ne product overflow",
               &(knobs){.set_t1_ndim = true, .t1_ndim = 4, .set_ne = true, .ne = {32, 1u << 31, 1u << 31, 1u << 31}},
               "tensor 't1'", "overflow");
    expect_bad("n_dims 0", &(knobs){.set_t1_ndim = true, .t1_ndim = 0}, "tensor 't1'", "n_dims: 0");
    expect_bad("n_dims 5", &(knobs){.set_t1_ndim = true, .t1_ndim = 5}, "tensor 't1'", "n_dims: 5");
    expect_bad("offset misaligned", &(knobs){.t1_offset_add = 4}, "tensor 't1'", "not a multiple of the alignment");
    expect_bad("offset past end", &(knobs){.t1_offset_add = 4096}, "tensor 't1'", "past the end of the data block");
    expect_bad("offset max", &(knobs){.t1_offset_add = UINT64_MAX - 63}, "tensor 't1'", "past the end");
    expect_bad("data cut short", &(knobs){.cut = 1}, "tensor 't1'", "past the end of the data block");
    expect_bad("alignment 24", &(knobs){.set_align = true, .align = 24}, "key 'general.alignment'",
               "not a power of two");
    expect_bad("alignment 0", &(knobs){.set_align = true, .align = 0}, "key 'general.alignment'",
               "not a power of two");
    expect_bad("alignment as u64", &(knobs){.set_align = true, .align = 32, .align_u64 = true},
               "key 'general.alignment'", "expected u32");
    /* Alignment 64: t1 at offset 32 is no longer aligned. */
    expect_bad("offset vs alignment 64", &(knobs){.set_align = true, .align = 64}, "tensor 't1'",
               "alignment 64");
}

/* Every proper prefix of a valid file must be refused (the last tensor ends
 * at the end of the file), cleanly: status FORMAT, no reader. */
static void test_truncated(void) {
    buf b = {0};
    full_layout lay;
    make_full(&b, 3, 32, &lay);
    ms_log_level lv = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
        memcpy(copy, b.p, n);
        ms_gguf *g = NULL;
        ms_status st = ms_gguf_open_memory(copy, n, "cut.gguf", &g);
        if (st != MS_ERR_FORMAT || g) {
            if (bad++ < 5) CHECK(false, "prefix of %zu / %zu bytes: %s", n, b.n, ms_status_str(st));
        }
        ms_gguf_close(&g);
        free(copy);
    }
    ms_gguf *g = NULL;
    CHECK(ms_gguf_open_memory(b.p, b.n, "whole.gguf", &g) == MS_OK, "whole file");
    ms_gguf_close(&g);
    ms_log_set_level(lv);
    printf("truncation: %zu prefixes, %d accepted or wrong status\n", b.n, bad);
    free(b.p);
}

/* ---- dump (golden comparison with tests/gguf_meta_dump.py) ---------------------- */

static const char *vtype_str(ms_gguf_vtype t) {
    static const char *n[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                              "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < sizeof n / sizeof *n ? n[t] : "?";
}

static void esc(FILE *out, const char *s, size_t n) {
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') fputc(c, out);
        else fprintf(out, "\\x%02x", c);
    }
    fputc('"', out);
}

/* One numeric element at p (unaligned) in the Python script's format. */
static void elem(FILE *out, ms_gguf_vtype t, const uint8_t *p) {
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        uint64_t u64;
        int64_t i64;
        double f64;
    } v;
    static const size_t size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    memcpy(&v, p, size[t]);
    switch (t) {
    case MS_GGUF_U8: fprintf(out, "%u", v.u8); break;
    case MS_GGUF_I8: fprintf(out, "%d", v.i8); break;
    case MS_GGUF_U16: fprintf(out, "%u", v.u16); break;
    case MS_GGUF_I16: fprintf(out, "%d", v.i16); break;
    case MS_GGUF_U32: fprintf(out, "%u", v.u32); break;
    case MS_GGUF_I32: fprintf(out, "%d", v.i32); break;
    case MS_GGUF_F32: fprintf(out, "%.9g", (double)v.f32); break;
    case MS_GGUF_BOOL: fprintf(out, "%s", v.u8 ? "true" : "false"); break;
    case MS_GGUF_U64: fprintf(out, "%llu", (unsigned long long)v.u64); break;
    case MS_GGUF_I64: fprintf(out, "%lld", (long long)v.i64); break;
    case MS_GGUF_F64: fprintf(out, "%.17g", v.f64); break;
    default: MS_ASSERT(!"not a numeric type");
    }
}

static size_t vsize(ms_gguf_vtype t) {
    static const size_t size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return size[t];
}

static void dump_arr_elem(FILE *out, const ms_gguf *g, const char *key, ms_gguf_vtype et, const void *data,
                          int64_t i) {
    if (et == MS_GGUF_STRING) {
        const char *s;
        size_t len;
        MS_ASSERT(ms_gguf_arr_str(g, key, i, &s, &len) == MS_OK);
        esc(out, s, len);
    } else {
        elem(out, et, (const uint8_t *)data + (size_t)i * vsize(et));
    }
}

static void dump(FILE *out, const ms_gguf *g) {
    fprintf(out, "version %u\nalignment %llu\ndata_start %llu\nn_kv %lld\n", ms_gguf_version(g),
            (unsigned long long)ms_gguf_alignment(g), (unsigned long long)ms_gguf_data_start(g),
            (long long)ms_gguf_n_kv(g));
    for (int64_t i = 0; i < ms_gguf_n_kv(g); i++) {
        const char *key = ms_gguf_kv_key(g, i);
        ms_gguf_vtype t = ms_gguf_kv_type(g, i);
        fprintf(out, "kv %s %s ", key, vtype_str(t));
        if (t == MS_GGUF_ARRAY) {
            ms_gguf_vtype et;
            int64_t n;
            const void *data;
            MS_ASSERT(ms_gguf_get_arr(g, key, &et, &n, &data) == MS_OK);
            fprintf(out, "%s %lld [", vtype_str(et), (long long)n);
            for (int64_t j = 0; j < n && j < 3; j++) {
                if (j) fprintf(out, ", ");
                dump_arr_elem(out, g, key, et, data, j);
            }
            fprintf(out, "] [");
            for (int64_t j = n > 3 ? n - 3 : 0; j < n; j++) {
                if (j > (n > 3 ? n - 3 : 0)) fprintf(out, ", ");
                dump_arr_elem(out, g, key, et, data, j);
            }
            fprintf(out, "]");
        } else if (t == MS_GGUF_STRING) {
            const char *s;
            size_t len;
            if (ms_gguf_get_str(g, key, &s, &len) == MS_OK) esc(out, s, len);
            else fprintf(out, "<string with NUL>");
        } else if (t == MS_GGUF_F32 || t == MS_GGUF_F64) {
            double v;
            MS_ASSERT(ms_gguf_get_f64(g, key, &v) == MS_OK);
            fprintf(out, t == MS_GGUF_F32 ? "%.9g" : "%.17g", v);
        } else if (t == MS_GGUF_BOOL) {
            bool v;
            MS_ASSERT(ms_gguf_get_bool(g, key, &v) == MS_OK);
            fprintf(out, "%s", v ? "true" : "false");
        } else {
            int64_t v;
            uint64_t u;
            if (ms_gguf_get_i64(g, key, &v) == MS_OK) fprintf(out, "%lld", (long long)v);
            else if (ms_gguf_get_u64(g, key, &u) == MS_OK) fprintf(out, "%llu", (unsigned long long)u);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "n_tensors %lld\n", (long long)ms_gguf_n_tensors(g));
    for (int64_t i = 0; i < ms_gguf_n_tensors(g); i++) {
        const ms_gguf_tensor_info *ti = ms_gguf_tensor_at(g, i);
        fprintf(out, "tensor %s %u ne=", ti->name, ti->ggml_type);
        for (int d = 0; d < ti->ndim; d++) fprintf(out, "%s%lld", d ? "," : "", (long long)ti->ne[d]);
        fprintf(out, " offset=%llu nbytes=%zu\n", (unsigned long long)ti->offset, ti->nbytes);
    }
}

/* popen(cmd) output into a malloc'd string; NULL and *rc on failure. */
static char *run_capture(const char *cmd, int *rc) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    buf b = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, p)) > 0) b_put(&b, chunk, k);
    b_u8(&b, 0);
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return (char *)b.p;
}

/* Compare two dumps line by line; report the first difference. */
static bool same_dump(const char *model, const char *want, const char *got) {
    int line = 1;
    const char *a = want, *b = got;
    while (*a || *b) {
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        if (la != lb || memcmp(a, b, la)) {
            CHECK(false, "%s: line %d differs:\n  python: %.*s\n  ms_gguf: %.*s", model, line,
                  (int)(la > 300 ? 300 : la), a, (int)(lb > 300 ? 300 : lb), b);
            return false;
        }
        a += la + (ea ? 1 : 0);
        b += lb + (eb ? 1 : 0);
        line++;
    }
    printf("%s: %d lines identical\n", model, line - 1);
    return true;
}

static int golden(void) {
    int rc = 0;
    char *out = run_capture("python3 -c 'import gguf, numpy' 2>&1", &rc);
    free(out);
    if (rc != 0) {
        printf("SKIP: python3 cannot import gguf (pip install gguf)\n");
        return 77;
    }
    static const char *models[] = {"gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"};
    int compared = 0;
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s/tools/install-models.sh --path %s", MS_SOURCE_DIR, models[m]);
        char *path = run_capture(cmd, &rc);
        if (!path || rc != 0) {
            free(path);
            printf("%s: no path (install-models.sh rc %d)\n", models[m], rc);
            continue;
        }
        path[strcspn(path, "\n")] = 0;
        if (access(path, R_OK) != 0) {
            printf("%s: %s not installed, skipped\n", models[m], path);
            free(path);
            continue;
        }
        snprintf(cmd, sizeof cmd, "python3 %s/tests/gguf_meta_dump.py '%s'", MS_SOURCE_DIR, path);
        char *want = run_capture(cmd, &rc);
        CHECK(want && rc == 0 && strlen(want) > 100, "%s: python dump failed (rc %d)", models[m], rc);
        ms_gguf *g = NULL;
        CHECK(ms_gguf_open(path, &g) == MS_OK, "%s: open", models[m]);
        if (want && rc == 0 && g) {
            char *got = NULL;
            size_t got_len = 0;
            FILE *f = open_memstream(&got, &got_len);
            dump(f, g);
            fclose(f);
            same_dump(models[m], want, got);
            free(got);
            compared++;
        }
        ms_gguf_close(&g);
        free(want);
        free(path);
    }
    if (compared == 0 && g_fail == 0) {
        printf("SKIP: no real model installed (tools/install-models.sh)\n");
        return 77;
    }
    return g_fail ? 1 : 0;
}

/* ---- seeds for fuzz_gguf ---------------------------------------------------------- */

static int write_seeds(const char *dir) {
    struct {
        const char *name;
        uint32_t version, align;
    } full[] = {{"full_v3_a32.gguf", 3, 0}, {"full_v2_a8.gguf", 2, 8}};
    for (size_t i = 0; i < sizeof full / sizeof *full; i++) {
        buf b = {0};
        full_layout lay;
        make_full(&b, full[i].version, full[i].align, &lay);
        char *p = ms_path_join(dir, full[i].name);
        CHECK(ms_write_file_atomic(p, b.p, b.n) == MS_OK, "%s", p);
        printf("%s: %zu bytes\n", p, b.n);
        free(p);
        free(b.p);
    }
    buf b = {0};
    knobs k = {.set_align = true, .align = 32, .bool_kv = true, .bool_byte = 0};
    make_small(&b, &k);
    char *p = ms_path_join(dir, "small.gguf");
    CHECK(ms_write_file_atomic(p, b.p, b.n) == MS_OK, "%s", p);
    printf("%s: %zu bytes\n", p, b.n);
    free(p);
    free(b.p);
    /* Header only: no keys, no tensors. */
    buf h = {0};
    b_header(&h, 3, 0, 0);
    p = ms_path_join(dir, "empty.gguf");
    CHECK(ms_write_file_atomic(p, h.p, h.n) == MS_OK, "%s", p);
    free(p);
    free(h.p);
    return g_fail ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dump")) {
        ms_gguf *g;
        if (ms_gguf_open(argv[2], &g) != MS_OK) return 1;
        dump(stdout, g);
        ms_gguf_close(&g);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) return write_seeds(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "--golden")) return golden();
    if (argc != 1) {
        fprintf(stderr, "usage: test_gguf [--golden | --dump FILE | --write-seeds DIR]\n");
        return 2;
    }
    test_full();
    test_file_io();
    test_bad();
    test_truncated();
    {
        /* A header with no keys and no tensors is a valid (empty) file. */
        buf h = {0};
        b_header(&h, 2, 0, 0);
        ms_gguf *g = NULL;
        CHECK(ms_gguf_open_memory(h.p, h.n, "empty.gguf", &g) == MS_OK && g && ms_gguf_n_kv(g) == 0 &&
                  ms_gguf_n_tensors(g) == 0 && ms_gguf_find(g, "x") == -1 && !ms_gguf_find_tensor(g, "x"),
              "empty file");
        ms_gguf_close(&g);
        free(h.p);
    }
    printf("test_gguf: %s (%d failures)\n", g_fail ? "FAIL" : "ok", g_fail);
    return g_fail ? 1 : 0;
}
