/* ms_gguf.c — GGUF reader (v2, v3): one pass over header, metadata and tensor
 * table, every count and offset checked against the image before it is used.
 *
 * Layout (ggml docs/gguf.md; all little-endian):
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv      × { str key; u32 vtype; value }
 *   n_tensors × { str name; u32 n_dims; u64 ne[n_dims]; u32 ggml_type; u64 offset }
 *   padding to general.alignment (default 32), then the data block.
 * str = u64 length + bytes; array value = u32 element type + u64 count + elements.
 *
 * Before any allocation sized by a count, the count is checked against the
 * bytes left in the image (each element takes at least a known number of
 * bytes), so a hostile header cannot make us allocate more than O(file size).
 * Keys and tensor names are kept in a sorted index: duplicate detection and
 * lookup are O(n log n) / O(log n) even for fuzzed files with 10^5 entries.
 */
#include "ms_gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ms_gguf.c reads little-endian fields with memcpy: little-endian hosts only"
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_HEADER_BYTES 24u /* magic, version, n_tensors, n_kv */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_ALIGNMENT_KEY "general.alignment"
/* Least bytes a kv can take: key length, (≥ 1 key byte), type, (≥ 1 value byte). */
#define GGUF_MIN_KV_BYTES 14u
/* Least bytes a tensor info can take: name length, (≥ 1 name byte), n_dims, ne[0], type, offset. */
#define GGUF_MIN_TENSOR_BYTES 33u
/* Names in messages are cut to this many bytes (a fuzzed key can be megabytes). */
#define GGUF_NAME_SHOWN 120

typedef struct {
    char *key;                /* NUL-terminated copy */
    ms_gguf_vtype type;
    const uint8_t *val;       /* scalar: its bytes; string: its bytes (after the length); array: element 0 */
    uint64_t len;             /* string: byte length; array: element count */
    ms_gguf_vtype etype;      /* array element type */
    char *str;                /* string value: NUL-terminated copy; NULL if it holds a NUL byte */
    const uint8_t **strs;     /* string array: [len] pointers to each element's u64 length prefix */
} gguf_kv;

struct ms_gguf {
    char *name;               /* path or caller's name, for messages */
    const uint8_t *base;      /* the whole image */
    size_t size;
    bool mapped;              /* munmap(base, size) on close */
    uint32_t version;
    uint64_t alignment;
    gguf_kv *kvs;             /* [n_kv] in file order */
    int64_t n_kv;
    int64_t *kv_sorted;       /* [n_kv] kv indices sorted by key */
    ms_gguf_tensor_info *tensors; /* [n_tensors] in file order */
    int64_t n_tensors;
    int64_t *t_sorted;        /* [n_tensors] tensor indices sorted by name */
    uint64_t data_start;      /* file offset of the data block (may equal or pass the end when there are no tensors) */
    const uint8_t *data;      /* data block: base + data_start, clamped to the end */
    size_t data_size;         /* bytes from the data block's start to the end of the image (0 if past it) */
};

/* ---- small tables ---------------------------------------------------------- */

static const char *vtype_name(uint32_t t) {
    static const char *names[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof *names ? names[t] : "unknown";
}

/* Bytes of a scalar value type; 0 for string, array and unknown ids. */
static size_t vtype_size(uint32_t t) {
    switch (t) {
    case MS_GGUF_U8: case MS_GGUF_I8: case MS_GGUF_BOOL: return 1;
    case MS_GGUF_U16: case MS_GGUF_I16: return 2;
    case MS_GGUF_U32: case MS_GGUF_I32: case MS_GGUF_F32: return 4;
    case MS_GGUF_U64: case MS_GGUF_I64: case MS_GGUF_F64: return 8;
    default: return 0;
    }
}

static bool vtype_is_int(ms_gguf_vtype t) {
    return t == MS_GGUF_U8 || t == MS_GGUF_I8 || t == MS_GGUF_U16 || t == MS_GGUF_I16 || t == MS_GGUF_U32 ||
           t == MS_GGUF_I32 || t == MS_GGUF_U64 || t == MS_GGUF_I64;
}

/* ggml type names (ggml.h enum ggml_type) for messages about types we do not read. */
static const char *ggml_type_name(uint32_t id) {
    static const char *names[] = {
        [0] = "F32",      [1] = "F16",      [2] = "Q4_0",     [3] = "Q4_1",    [6] = "Q5_0",   [7] = "Q5_1",
        [8] = "Q8_0",     [9] = "Q8_1",     [10] = "Q2_K",    [11] = "Q3_K",   [12] = "Q4_K",  [13] = "Q5_K",
        [14] = "Q6_K",    [15] = "Q8_K",    [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS",
        [19] = "IQ1_S",   [20] = "IQ4_NL",  [21] = "IQ3_S",   [22] = "IQ2_S",  [23] = "IQ4_XS", [24] = "I8",
        [25] = "I16",     [26] = "I32",     [27] = "I64",     [28] = "F64",    [29] = "IQ1_M", [30] = "BF16",
        [34] = "TQ1_0",   [35] = "TQ2_0",   [39] = "MXFP4",
    };
    return id < sizeof names / sizeof *names ? names[id] : NULL;
}

static uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- parse cursor ------------------------------------------------------------ */

typedef struct {
    const char *fn;       /* file name for messages */
    const uint8_t *base;
    size_t size, pos;
    char ctx[GGUF_NAME_SHOWN + 32]; /* "key 'x'" / "tensor 'y'" / "header" */
} cursor;

static void ctx_set_name(cursor *c, const char *what, const uint8_t *s, uint64_t len) {
    int shown = len > GGUF_NAME_SHOWN ? GGUF_NAME_SHOWN : (int)len;
    snprintf(c->ctx, sizeof c->ctx, "%s '%.*s%s'", what, shown, (const char *)s, len > GGUF_NAME_SHOWN ? "..." : "");
}

static ms_status need(const cursor *c, const char *field, uint64_t k) {
    if (k > c->size - c->pos)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: %s: %llu bytes at offset %zu run past the end of the file (%zu bytes)",
                c->fn, c->ctx, field, (unsigned long long)k, c->pos, c->size);
    return MS_OK;
}

static ms_status take_u32(cursor *c, const char *field, uint32_t *v) {
    MS_TRY(need(c, field, 4));
    *v = rd32(c->base + c->pos);
    c->pos += 4;
    return MS_OK;
}

static ms_status take_u64(cursor *c, const char *field, uint64_t *v) {
    MS_TRY(need(c, field, 8));
    *v = rd64(c->base + c->pos);
    c->pos += 8;
    return MS_OK;
}

/* A string: u64 length, then that many bytes (checked to lie in the image). */
static ms_status take_str(cursor *c, const char *field, const uint8_t **s, uint64_t *len) {
    MS_TRY(need(c, field, 8));
    uint64_t n = rd64(c->base + c->pos);
    if (n > c->size - c->pos - 8)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: %s: string length %llu at offset %zu runs past the end of the file (%zu bytes)",
                c->fn, c->ctx, field, (unsigned long long)n, c->pos, c->size);
    *s = c->base + c->pos + 8;
    *len = n;
    c->pos += 8 + (size_t)n;
    return MS_OK;
}

/* A key or tensor name: non-empty, no NUL byte; returned as a malloc'd C string. */
static ms_status take_name(cursor *c, const char *field, char **out) {
    const uint8_t *s;
    uint64_t n;
    MS_TRY(take_str(c, field, &s, &n));
    if (n == 0) MS_FAIL(MS_ERR_FORMAT, "%s: %s: %s: empty", c->fn, c->ctx, field);
    if (memchr(s, 0, (size_t)n))
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: %s: holds a NUL byte", c->fn, c->ctx, field);
    char *copy = ms_malloc((size_t)n + 1);
    if (!copy) return MS_ERR_NOMEM;
    memcpy(copy, s, (size_t)n);
    copy[n] = 0;
    *out = copy;
    return MS_OK;
}

/* ---- sorted name index ---------------------------------------------------- */

/* qsort has no context argument: each entry carries its own name pointer
 * (ties broken by index, so duplicates end up adjacent in file order). */
typedef struct {
    const char *name;
    int64_t i;
} name_ix;

static int cmp_name_ix(const void *a, const void *b) {
    const name_ix *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return (x->i > y->i) - (x->i < y->i);
}

/* Sort n names into out[] (indices); a name seen twice is an error naming it.
 * `names` is the address of entry 0's name field; entries are `stride` bytes
 * apart (kvs and tensor infos share this code). */
static ms_status sort_names(const char *fn, const char *what, const char *const *names, size_t stride, int64_t n,
                            int64_t **out) {
    *out = NULL;
    if (n == 0) return MS_OK;
    name_ix *v = ms_malloc((size_t)n * sizeof *v);
    int64_t *ix = ms_malloc((size_t)n * sizeof *ix);
    if (!v || !ix) {
        free(v);
        free(ix);
        return MS_ERR_NOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        v[i].name = *(const char *const *)((const char *)names + (size_t)i * stride);
        v[i].i = i;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_name_ix);
    for (int64_t i = 0; i < n; i++) {
        if (i > 0 && !strcmp(v[i - 1].name, v[i].name)) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: %s '%.*s': name: appears twice (entries %lld and %lld)",
                       fn, what, GGUF_NAME_SHOWN, v[i].name, (long long)v[i - 1].i, (long long)v[i].i);
            free(v);
            free(ix);
            return MS_ERR_FORMAT;
        }
        ix[i] = v[i].i;
    }
    free(v);
    *out = ix;
    return MS_OK;
}

/* Binary search of a sorted index; -1 if absent. */
static int64_t find_sorted(const int64_t *ix, int64_t n, const char *key, const char *const *names, size_t stride) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const char *s = *(const char *const *)((const char *)names + (size_t)ix[mid] * stride);
        int c = strcmp(s, key);
        if (c == 0) return ix[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* ---- metadata ------------------------------------------------------------------- */

static ms_status check_bools(const cursor *c, const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1)
            MS_FAIL(MS_ERR_FORMAT, "%s: %s: value: bool byte %u at offset %zu (must be 0 or 1)", c->fn, c->ctx,
                    p[i], (size_t)(p + i - c->base));
    return MS_OK;
}

static ms_status parse_kv(cursor *c, gguf_kv *kv) {
    MS_TRY(take_name(c, "key", &kv->key));
    ctx_set_name(c, "key", (const uint8_t *)kv->key, strlen(kv->key));
    uint32_t t;
    MS_TRY(take_u32(c, "type", &t));
    if (t > MS_GGUF_F64) MS_FAIL(MS_ERR_FORMAT, "%s: %s: type: unknown value type %u", c->fn, c->ctx, t);
    kv->type = (ms_gguf_vtype)t;
    if (t == MS_GGUF_STRING) {
        MS_TRY(take_str(c, "value", &kv->val, &kv->len));
        if (!memchr(kv->val, 0, (size_t)kv->len)) {
            kv->str = ms_malloc((size_t)kv->len + 1);
            if (!kv->str) return MS_ERR_NOMEM;
            memcpy(kv->str, kv->val, (size_t)kv->len);
            kv->str[kv->len] = 0;
        }
        return MS_OK;
    }
    if (t != MS_GGUF_ARRAY) {
        size_t k = vtype_size(t);
        MS_TRY(need(c, "value", k));
        kv->val = c->base + c->pos;
        kv->len = 1;
        if (t == MS_GGUF_BOOL) MS_TRY(check_bools(c, kv->val, 1));
        c->pos += k;
        return MS_OK;
    }
    uint32_t et;
    MS_TRY(take_u32(c, "array element type", &et));
    if (et == MS_GGUF_ARRAY)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: array element type: nested arrays are not supported", c->fn, c->ctx);
    if (et > MS_GGUF_F64)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: array element type: unknown value type %u", c->fn, c->ctx, et);
    kv->etype = (ms_gguf_vtype)et;
    uint64_t n;
    MS_TRY(take_u64(c, "array count", &n));
    size_t left = c->size - c->pos;
    /* Each element takes at least its scalar size (strings: their u64 length). */
    size_t min_elem = et == MS_GGUF_STRING ? 8 : vtype_size(et);
    if (n > left / min_elem)
        MS_FAIL(MS_ERR_FORMAT,
                "%s: %s: array count: %llu elements of %s cannot fit in the %zu bytes left at offset %zu", c->fn,
                c->ctx, (unsigned long long)n, vtype_name(et), left, c->pos);
    kv->len = n;
    kv->val = c->base + c->pos;
    if (et != MS_GGUF_STRING) {
        if (et == MS_GGUF_BOOL) MS_TRY(check_bools(c, kv->val, n));
        c->pos += (size_t)n * min_elem;
        return MS_OK;
    }
    kv->strs = ms_malloc(n ? (size_t)n * sizeof *kv->strs : 1);
    if (!kv->strs) return MS_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        kv->strs[i] = c->base + c->pos;
        const uint8_t *s;
        uint64_t len;
        MS_TRY(take_str(c, "array element", &s, &len));
    }
    return MS_OK;
}

/* general.alignment: u32, a power of two; absent → 32. */
static ms_status read_alignment(ms_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = ms_gguf_find(g, GGUF_ALIGNMENT_KEY);
    if (i < 0) return MS_OK;
    const gguf_kv *kv = &g->kvs[i];
    if (kv->type != MS_GGUF_U32)
        MS_FAIL(MS_ERR_FORMAT, "%s: key '%s': type %s, expected u32", g->name, GGUF_ALIGNMENT_KEY,
                vtype_name(kv->type));
    uint32_t a = rd32(kv->val);
    if (a == 0 || (a & (a - 1)) != 0)
        MS_FAIL(MS_ERR_FORMAT, "%s: key '%s': value %u is not a power of two", g->name, GGUF_ALIGNMENT_KEY, a);
    g->alignment = a;
    return MS_OK;
}

/* ---- tensor table -------------------------------------------------------------- */

static ms_status parse_tensor_info(cursor *c, ms_gguf_tensor_info *ti) {
    char *name;
    MS_TRY(take_name(c, "name", &name));
    ti->name = name;
    ctx_set_name(c, "tensor", (const uint8_t *)name, strlen(name));
    uint32_t nd;
    MS_TRY(take_u32(c, "n_dims", &nd));
    if (nd < 1 || nd > MS_TENSOR_MAX_DIMS)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: n_dims: %u (must be 1..%d)", c->fn, c->ctx, nd, MS_TENSOR_MAX_DIMS);
    ti->ndim = (int)nd;
    int64_t nelem = 1;
    for (int d = 0; d < MS_TENSOR_MAX_DIMS; d++) ti->ne[d] = ti->shape[d] = 1;
    for (int d = 0; d < ti->ndim; d++) {
        uint64_t v;
        char field[16];
        snprintf(field, sizeof field, "ne[%d]", d);
        MS_TRY(take_u64(c, field, &v));
        if (v == 0 || v > (uint64_t)INT64_MAX)
            MS_FAIL(MS_ERR_FORMAT, "%s: %s: %s: %llu (must be in 1..2^63-1)", c->fn, c->ctx, field,
                    (unsigned long long)v);
        if ((int64_t)v > INT64_MAX / nelem)
            MS_FAIL(MS_ERR_FORMAT, "%s: %s: %s: element count overflows int64", c->fn, c->ctx, field);
        nelem *= (int64_t)v;
        ti->ne[d] = (int64_t)v;
    }
    for (int d = 0; d < ti->ndim; d++) ti->shape[d] = ti->ne[ti->ndim - 1 - d];
    MS_TRY(take_u32(c, "type", &ti->ggml_type));
    if (!ms_dtype_from_ggml(ti->ggml_type, &ti->dtype)) {
        const char *tn = ggml_type_name(ti->ggml_type);
        if (tn)
            MS_FAIL(MS_ERR_FORMAT, "%s: %s: type: ggml type %u (%s) is not supported by this reader", c->fn, c->ctx,
                    ti->ggml_type, tn);
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: type: unknown ggml type id %u", c->fn, c->ctx, ti->ggml_type);
    }
    size_t row;
    if (!ms_dtype_row_bytes(ti->dtype, ti->ne[0], &row))
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: ne[0]: %lld is not a whole number of %s blocks (%lld elements each)", c->fn,
                c->ctx, (long long)ti->ne[0], ms_dtype_name(ti->dtype), (long long)ms_dtype_block(ti->dtype));
    if (!ms_mul_size(row, (size_t)(nelem / ti->ne[0]), &ti->nbytes))
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: ne: byte size overflows", c->fn, c->ctx);
    MS_TRY(take_u64(c, "offset", &ti->offset));
    return MS_OK;
}

/* Offsets against the data block, once its start is known. */
static ms_status place_tensors(ms_gguf *g) {
    for (int64_t i = 0; i < g->n_tensors; i++) {
        ms_gguf_tensor_info *ti = &g->tensors[i];
        if (ti->offset % g->alignment != 0)
            MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%.*s': offset: %llu is not a multiple of the alignment %llu", g->name,
                    GGUF_NAME_SHOWN, ti->name, (unsigned long long)ti->offset, (unsigned long long)g->alignment);
        if (ti->offset > g->data_size || ti->nbytes > g->data_size - ti->offset)
            MS_FAIL(MS_ERR_FORMAT,
                    "%s: tensor '%.*s': offset: data [%llu, +%zu) runs past the end of the data block (%zu bytes)",
                    g->name, GGUF_NAME_SHOWN, ti->name, (unsigned long long)ti->offset, ti->nbytes, g->data_size);
        ti->data = g->data + ti->offset;
    }
    return MS_OK;
}

/* ---- open / close ------------------------------------------------------------------ */

static ms_status parse(ms_gguf *g) {
    cursor c = {.fn = g->name, .base = g->base, .size = g->size, .pos = 0};
    snprintf(c.ctx, sizeof c.ctx, "header");
    if (g->size < 4 || memcmp(g->base, GGUF_MAGIC, 4) != 0) {
        if (g->size < 4) MS_FAIL(MS_ERR_FORMAT, "%s: %zu bytes, too short for a GGUF file", g->name, g->size);
        MS_FAIL(MS_ERR_FORMAT, "%s: not a GGUF file (magic %02x %02x %02x %02x, expected 'GGUF')", g->name,
                g->base[0], g->base[1], g->base[2], g->base[3]);
    }
    c.pos = 4;
    MS_TRY(take_u32(&c, "version", &g->version));
    if (g->version == 1)
        MS_FAIL(MS_ERR_FORMAT,
                "%s: header: version: GGUF version 1 is not supported (32-bit counts; only 2 and 3 are read)", g->name);
    if (g->version != 2 && g->version != 3) {
        bool swapped = (g->version & 0xffffu) == 0 && g->version != 0;
        MS_FAIL(MS_ERR_FORMAT, "%s: header: version: %u is not supported (only 2 and 3)%s", g->name, g->version,
                swapped ? "; a big-endian file?" : "");
    }
    uint64_t n_tensors, n_kv;
    MS_TRY(take_u64(&c, "n_tensors", &n_tensors));
    MS_TRY(take_u64(&c, "n_kv", &n_kv));
    size_t left = g->size - c.pos;
    if (n_kv > left / GGUF_MIN_KV_BYTES)
        MS_FAIL(MS_ERR_FORMAT, "%s: header: n_kv: %llu key/value pairs cannot fit in the %zu bytes left", g->name,
                (unsigned long long)n_kv, left);
    if (n_tensors > (left - (size_t)n_kv * GGUF_MIN_KV_BYTES) / GGUF_MIN_TENSOR_BYTES)
        MS_FAIL(MS_ERR_FORMAT, "%s: header: n_tensors: %llu tensor infos cannot fit in the %zu bytes left", g->name,
                (unsigned long long)n_tensors, left);

    if (n_kv > 0) {
        g->kvs = ms_calloc((size_t)n_kv, sizeof *g->kvs);
        if (!g->kvs) return MS_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        snprintf(c.ctx, sizeof c.ctx, "key #%llu", (unsigned long long)i);
        g->n_kv = (int64_t)i + 1; /* so close frees what parse_kv allocated */
        MS_TRY(parse_kv(&c, &g->kvs[i]));
    }
    if (g->n_kv > 0)
        MS_TRY(sort_names(g->name, "key", (const char *const *)&g->kvs[0].key, sizeof *g->kvs, g->n_kv, &g->kv_sorted));
    MS_TRY(read_alignment(g));

    left = g->size - c.pos;
    if (n_tensors > left / GGUF_MIN_TENSOR_BYTES)
        MS_FAIL(MS_ERR_FORMAT,
                "%s: header: n_tensors: %llu tensor infos cannot fit in the %zu bytes left at offset %zu", g->name,
                (unsigned long long)n_tensors, left, c.pos);
    if (n_tensors > 0) {
        g->tensors = ms_calloc((size_t)n_tensors, sizeof *g->tensors);
        if (!g->tensors) return MS_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        snprintf(c.ctx, sizeof c.ctx, "tensor #%llu", (unsigned long long)i);
        g->n_tensors = (int64_t)i + 1;
        MS_TRY(parse_tensor_info(&c, &g->tensors[i]));
    }
    if (g->n_tensors > 0)
        MS_TRY(sort_names(g->name, "tensor", (const char *const *)&g->tensors[0].name, sizeof *g->tensors,
                          g->n_tensors, &g->t_sorted));

    /* The data block starts at the next multiple of the alignment (the file
     * may end before it when there are no tensors). */
    size_t pad = (size_t)((g->alignment - c.pos % g->alignment) % g->alignment);
    g->data_start = (uint64_t)c.pos + pad;
    size_t start = c.pos + pad <= g->size ? c.pos + pad : g->size;
    g->data = g->base + start;
    g->data_size = c.pos + pad <= g->size ? g->size - start : 0;
    return place_tensors(g);
}

void ms_gguf_close(ms_gguf **pg) {
    if (!pg || !*pg) return;
    ms_gguf *g = *pg;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].str);
        free(g->kvs[i].strs);
    }
    free(g->kvs);
    free(g->kv_sorted);
    for (int64_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->tensors);
    free(g->t_sorted);
    if (g->mapped && g->size > 0) munmap((void *)g->base, g->size);
    free(g->name);
    free(g);
    *pg = NULL;
}

static ms_status gguf_new(const char *name, const void *base, size_t size, bool mapped, ms_gguf **out) {
    ms_gguf *g = ms_calloc(1, sizeof *g);
    char *nm = strdup(name);
    if (!g || !nm) {
        free(g);
        free(nm);
        if (mapped && size > 0) munmap((void *)base, size);
        MS_FAIL(MS_ERR_NOMEM, "%s: out of memory", name);
    }
    g->name = nm;
    g->base = base;
    g->size = size;
    g->mapped = mapped;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    *out = g;
    return MS_OK;
}

static ms_status finish_open(ms_gguf *g, ms_gguf **out) {
    ms_status st = parse(g);
    if (st < 0) {
        ms_gguf_close(&g);
        return st;
    }
    *out = g;
    return MS_OK;
}

ms_status ms_gguf_open_memory(const void *data, size_t len, const char *name, ms_gguf **out) {
    *out = NULL;
    static const uint8_t empty[1];
    ms_gguf *g;
    MS_TRY(gguf_new(name ? name : "<memory>", data ? data : empty, data ? len : 0, false, &g));
    return finish_open(g, out);
}

/* Open path and check it can hold a GGUF header; its size in *size. */
static ms_status open_checked(const char *path, int *fd_out, size_t *size) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) MS_FAIL(MS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        MS_FAIL(MS_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size < GGUF_HEADER_BYTES) {
        close(fd);
        MS_FAIL(MS_ERR_FORMAT, "%s: %lld bytes, too short for a GGUF file (need >= %u)", path, (long long)sb.st_size,
                GGUF_HEADER_BYTES);
    }
    *fd_out = fd;
    *size = (size_t)sb.st_size;
    return MS_OK;
}

ms_status ms_gguf_open(const char *path, ms_gguf **out) {
    *out = NULL;
    int fd;
    size_t size;
    MS_TRY(open_checked(path, &fd, &size));
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) MS_FAIL(MS_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    ms_gguf *g;
    MS_TRY(gguf_new(path, p, size, true, &g));
    return finish_open(g, out);
}

ms_status ms_gguf_open_resident(const char *path, ms_gguf **out) {
    const char *env = getenv("MS_GGUF_MMAP");
    if (env && strcmp(env, "1") == 0) return ms_gguf_open(path, out);
    *out = NULL;
    int fd;
    size_t size;
    MS_TRY(open_checked(path, &fd, &size));
    /* anonymous memory (munmap(base, size) frees it as it frees a mapping) */
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        MS_FAIL(MS_ERR_NOMEM, "%s: cannot allocate %zu bytes to read it into: %s (MS_GGUF_MMAP=1 maps it instead)",
                path, size, strerror(e));
    }
    (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: without it the copy still works */
    size_t off = 0;
    while (off < size) {
        ssize_t r = pread(fd, (char *)p + off, size - off, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            munmap(p, size);
            if (r == 0) MS_FAIL(MS_ERR_IO, "%s: the file ended at byte %zu of %zu while being read", path, off, size);
            MS_FAIL(MS_ERR_IO, "%s: read failed at byte %zu: %s", path, off, strerror(e));
        }
        off += (size_t)r;
    }
    close(fd);
    (void)mprotect(p, size, PROT_READ); /* weights are never written */
    ms_gguf *g;
    MS_TRY(gguf_new(path, p, size, true, &g));
    return finish_open(g, out);
}

bool ms_gguf_is_gguf(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return false;
    char m[4];
    ssize_t n = read(fd, m, 4);
    close(fd);
    return n == 4 && memcmp(m, GGUF_MAGIC, 4) == 0;
}

/* ---- accessors -------------------------------------------------------------------- */

const char *ms_gguf_path(const ms_gguf *g) { return g->name; }
uint32_t ms_gguf_version(const ms_gguf *g) { return g->version; }
uint64_t ms_gguf_alignment(const ms_gguf *g) { return g->alignment; }
uint64_t ms_gguf_data_start(const ms_gguf *g) { return g->data_start; }
int64_t ms_gguf_n_kv(const ms_gguf *g) { return g->n_kv; }

const char *ms_gguf_kv_key(const ms_gguf *g, int64_t i) {
    MS_ASSERT(i >= 0 && i < g->n_kv);
    return g->kvs[i].key;
}

ms_gguf_vtype ms_gguf_kv_type(const ms_gguf *g, int64_t i) {
    MS_ASSERT(i >= 0 && i < g->n_kv);
    return g->kvs[i].type;
}

int64_t ms_gguf_find(const ms_gguf *g, const char *key) {
    if (g->n_kv == 0) return -1;
    return find_sorted(g->kv_sorted, g->n_kv, key, (const char *const *)&g->kvs[0].key, sizeof *g->kvs);
}

/* The kv for `key`: MS_ERR_NOT_FOUND (silent) if absent. */
static ms_status kv_get(const ms_gguf *g, const char *key, const gguf_kv **kv) {
    int64_t i = ms_gguf_find(g, key);
    if (i < 0) return MS_ERR_NOT_FOUND;
    *kv = &g->kvs[i];
    return MS_OK;
}

/* An integer kv as a sign flag + magnitude pair, so every range check is exact. */
static void kv_int(const gguf_kv *kv, bool *neg, uint64_t *mag) {
    int64_t s = 0;
    uint64_t u = 0;
    bool is_signed = true;
    switch (kv->type) {
    case MS_GGUF_U8: u = kv->val[0]; is_signed = false; break;
    case MS_GGUF_U16: u = rd16(kv->val); is_signed = false; break;
    case MS_GGUF_U32: u = rd32(kv->val); is_signed = false; break;
    case MS_GGUF_U64: u = rd64(kv->val); is_signed = false; break;
    case MS_GGUF_I8: s = (int8_t)kv->val[0]; break;
    case MS_GGUF_I16: s = (int16_t)rd16(kv->val); break;
    case MS_GGUF_I32: s = (int32_t)rd32(kv->val); break;
    case MS_GGUF_I64: s = (int64_t)rd64(kv->val); break;
    default: MS_ASSERT(!"kv_int on a non-integer kv");
    }
    if (is_signed) {
        *neg = s < 0;
        *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    } else {
        *neg = false;
        *mag = u;
    }
}

static ms_status wrong_type(const ms_gguf *g, const char *key, const gguf_kv *kv, const char *expected) {
    MS_FAIL(MS_ERR_FORMAT, "%s: key '%s': type %s, expected %s", g->name, key, vtype_name(kv->type), expected);
}

ms_status ms_gguf_get_i64(const ms_gguf *g, const char *key, int64_t *out) {
    const gguf_kv *kv;
    MS_TRY(kv_get(g, key, &kv));
    if (!vtype_is_int(kv->type)) return wrong_type(g, key, kv, "an integer");
    bool neg;
    uint64_t mag;
    kv_int(kv, &neg, &mag);
    if (!neg && mag > (uint64_t)INT64_MAX)
        MS_FAIL(MS_ERR_FORMAT, "%s: key '%s': value %llu does not fit in i64", g->name, key, (unsigned long long)mag);
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return MS_OK;
}

ms_status ms_gguf_get_u32(const ms_gguf *g, const char *key, uint32_t *out) {
    const gguf_kv *kv;
    MS_TRY(kv_get(g, key, &kv));
    if (!vtype_is_int(kv->type)) return wrong_type(g, key, kv, "an integer");
    bool neg;
    uint64_t mag;
    kv_int(kv, &neg, &mag);
    if (neg || mag > UINT32_MAX)
        MS_FAIL(MS_ERR_FORMAT, "%s: key '%s': value %s%llu does not fit in u32", g->name, key, neg ? "-" : "",
                (unsigned long long)mag);
    *out = (uint32_t)mag;
    return MS_OK;
}

ms_status ms_gguf_get_u64(const ms_gguf *g, const char *key, uint64_t *out) {
    const gguf_kv *kv;
    MS_TRY(kv_get(g, key, &kv));
    if (!vtype_is_int(kv->type)) return wrong_type(g, key, kv, "an integer");
    bool neg;
    uint64_t mag;
    kv_int(kv, &neg, &mag);
    if (neg)
        MS_FAIL(MS_ERR_FORMAT, "%s: key '%s': value -%llu does not fit in u64", g->name, key, (unsigned long long)mag);
    *out = mag;
    return MS_OK;
}

ms_status ms_gguf_get_f64(const ms_gguf *g, const char *key, double *out) {
    const gguf_kv *kv;
    MS_TRY(kv_get(g, key, &kv));
    if (kv->type == MS_GGUF_F32) {
        float f;
        memcpy(&f, kv->val, 4);
        *out = f;
    } else if (kv->type == MS_GGUF_F64) {
        memcpy(out, kv->val, 8);
    } else if (vtype_is_int(kv->type)) {
        bool neg;
        uint64_t mag;
        kv_int(kv, &neg, &mag);
        *out = neg ? -(double)mag : (double)mag;
    } else {
        return wrong_type(g, key, kv, "a number");
    }
    return MS_OK;
}

ms_status ms_gguf_get_bool(const ms_gguf *g, const char *key, bool *out) {
    const gguf_kv *kv;
    MS_TRY(kv_get(g, key, &kv));
    if (kv->type != MS_GGUF_BOOL) return wrong_type(g, key, kv, "bool");
    *out = kv->val[0] != 0;
    return MS_OK;
}

ms_status ms_gguf_get_str(const ms_gguf *g, const char *key, const char **out, size_t *len) {
    const gguf_kv *kv;
    MS_TRY(kv_get(g, key, &kv));
    if (kv->type != MS_GGUF_STRING) return wrong_type(g, key, kv, "string");
    if (!kv->str) MS_FAIL(MS_ERR_FORMAT, "%s: key '%s': string value holds a NUL byte", g->name, key);
    *out = kv->str;
    if (len) *len = (size_t)kv->len;
    return MS_OK;
}

ms_status ms_gguf_get_arr(const ms_gguf *g, const char *key, ms_gguf_vtype *etype, int64_t *n, const void **data) {
    const gguf_kv *kv;
    MS_TRY(kv_get(g, key, &kv));
    if (kv->type != MS_GGUF_ARRAY) return wrong_type(g, key, kv, "array");
    *etype = kv->etype;
    *n = (int64_t)kv->len; /* ≤ file size: fits */
    *data = kv->etype == MS_GGUF_STRING ? NULL : (const void *)kv->val;
    return MS_OK;
}

ms_status ms_gguf_arr_str(const ms_gguf *g, const char *key, int64_t i, const char **s, size_t *len) {
    const gguf_kv *kv;
    MS_TRY(kv_get(g, key, &kv));
    if (kv->type != MS_GGUF_ARRAY || kv->etype != MS_GGUF_STRING)
        MS_FAIL(MS_ERR_FORMAT, "%s: key '%s': type %s%s%s, expected array of string", g->name, key,
                vtype_name(kv->type), kv->type == MS_GGUF_ARRAY ? " of " : "",
                kv->type == MS_GGUF_ARRAY ? vtype_name(kv->etype) : "");
    if (i < 0 || (uint64_t)i >= kv->len)
        MS_FAIL(MS_ERR_RANGE, "%s: key '%s': element %lld of %llu", g->name, key, (long long)i,
                (unsigned long long)kv->len);
    const uint8_t *p = kv->strs[i];
    *len = (size_t)rd64(p);
    *s = (const char *)(p + 8);
    return MS_OK;
}

int64_t ms_gguf_n_tensors(const ms_gguf *g) { return g->n_tensors; }

const ms_gguf_tensor_info *ms_gguf_tensor_at(const ms_gguf *g, int64_t i) {
    MS_ASSERT(i >= 0 && i < g->n_tensors);
    return &g->tensors[i];
}

const ms_gguf_tensor_info *ms_gguf_find_tensor(const ms_gguf *g, const char *name) {
    if (g->n_tensors == 0) return NULL;
    int64_t i = find_sorted(g->t_sorted, g->n_tensors, name, (const char *const *)&g->tensors[0].name,
                            sizeof *g->tensors);
    return i < 0 ? NULL : &g->tensors[i];
}

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

ms_status ms_gguf_get_tensor(const ms_gguf *g, const char *name, int ndim, const int64_t *shape,
                             const ms_dtype *allowed, int n_allowed, const ms_gguf_tensor_info **out) {
    *out = NULL;
    const ms_gguf_tensor_info *ti = ms_gguf_find_tensor(g, name);
    if (!ti) MS_FAIL(MS_ERR_NOT_FOUND, "%s: tensor '%s': not in the file", g->name, name);
    if (ndim > 0) {
        bool same = ti->ndim == ndim;
        for (int i = 0; same && i < ndim; i++) same = ti->shape[i] == shape[i];
        if (!same) {
            char want[96], got[96];
            shape_str(ndim, shape, want, sizeof want);
            shape_str(ti->ndim, ti->shape, got, sizeof got);
            MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': shape: %s, expected %s", g->name, name, got, want);
        }
    }
    if (n_allowed > 0) {
        bool ok = false;
        for (int i = 0; i < n_allowed && !ok; i++) ok = allowed[i] == ti->dtype;
        if (!ok) {
            char want[160];
            size_t k = 0;
            want[0] = 0;
            for (int i = 0; i < n_allowed && k < sizeof want; i++)
                k += (size_t)snprintf(want + k, sizeof want - k, "%s%s", i ? " " : "", ms_dtype_name(allowed[i]));
            MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': dtype: %s, expected one of %s", g->name, name,
                    ms_dtype_name(ti->dtype), want);
        }
    }
    *out = ti;
    return MS_OK;
}
