/* ms_safetensors.c — safetensors reader (mmap, one file or sharded) and writer.
 *
 * File layout (https://github.com/huggingface/safetensors):
 *   [u64 LE N][N bytes of JSON header][data block]
 * Each header entry {"dtype", "shape", "data_offsets": [begin, end]} places a
 * tensor at data + begin. Everything is validated before a view is handed out:
 * header length vs file size, JSON shape of every entry, known dtype, rank,
 * offsets inside the data block, end - begin == nelem * dtype size (overflow
 * checked), no two tensors overlapping, no name twice.
 *
 * Alignment: offsets are byte offsets and need not be a multiple of the dtype
 * size (the format does not promise it), so views may be unaligned. Callers
 * read them with memcpy-safe code (ms_convert_to_f32 does) or copy them out.
 * The writer pads the header to 8 bytes, so files it writes are aligned.
 */
#include "ms_safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000) /* the Python library's own bound */
#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

typedef struct {
    char *name;             /* path (or caller's name) for error messages */
    const uint8_t *base;    /* the whole image */
    size_t size;
    bool mapped;            /* munmap(base, size) on close */
    const uint8_t *data;    /* data block: base + 8 + N */
    size_t data_size;
} st_file;

typedef struct {
    char *name;
    int file;               /* index into model->files */
    size_t begin, end;      /* data_offsets, relative to the file's data block */
    ms_tensor t;            /* view into the image */
} st_entry;

struct ms_st_model {
    st_file *files;
    int n_files;
    st_entry *entries;      /* sorted by name after open */
    int64_t n, cap;
};

/* ---- model bookkeeping --------------------------------------------------- */

static ms_status model_new(ms_st_model **out) {
    *out = ms_calloc(1, sizeof **out);
    return *out ? MS_OK : MS_ERR_NOMEM;
}

void ms_st_close(ms_st_model **pm) {
    if (!pm || !*pm) return;
    ms_st_model *m = *pm;
    for (int64_t i = 0; i < m->n; i++) free(m->entries[i].name);
    free(m->entries);
    for (int i = 0; i < m->n_files; i++) {
        if (m->files[i].mapped && m->files[i].size > 0) munmap((void *)m->files[i].base, m->files[i].size);
        free(m->files[i].name);
    }
    free(m->files);
    free(m);
    *pm = NULL;
}

static ms_status model_add_file(ms_st_model *m, const char *name, const void *base, size_t size, bool mapped,
                                int *index) {
    st_file *f = ms_realloc(m->files, (size_t)(m->n_files + 1) * sizeof *f);
    if (!f) return MS_ERR_NOMEM;
    m->files = f;
    st_file *nf = &m->files[m->n_files];
    memset(nf, 0, sizeof *nf);
    nf->name = strdup(name);
    if (!nf->name) {
        if (mapped && size > 0) munmap((void *)base, size);
        MS_FAIL(MS_ERR_NOMEM, "out of memory");
    }
    nf->base = base;
    nf->size = size;
    nf->mapped = mapped;
    *index = m->n_files++;
    return MS_OK;
}

static ms_status model_push_entry(ms_st_model *m, const st_entry *e) {
    if (m->n == m->cap) {
        int64_t cap = m->cap ? m->cap * 2 : 64;
        st_entry *v = ms_realloc(m->entries, (size_t)cap * sizeof *v);
        if (!v) return MS_ERR_NOMEM;
        m->entries = v;
        m->cap = cap;
    }
    m->entries[m->n++] = *e;
    return MS_OK;
}

/* ---- header parsing ------------------------------------------------------- */

/* A JSON integer in [0, max]. */
static bool json_uint(const json_t *v, uint64_t max, uint64_t *out) {
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x > max) return false;
    *out = (uint64_t)x;
    return true;
}

/* Safetensors dtypes we know of but do not load: refused as unsupported
 * rather than malformed. Any other string is unsupported too; the list only
 * makes the message clearer. */
static bool dtype_is_known_other(const char *s) {
    static const char *other[] = {"F64", "I8", "I16", "U16", "U32", "U64", "BOOL", "F8_E4M3", "F8_E5M2"};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++)
        if (!strcmp(s, other[i])) return true;
    return false;
}

static ms_status parse_entry(const st_file *f, int file_index, const char *key, const json_t *v, st_entry *e) {
    const char *fn = f->name;
    if (!json_is_object(v)) MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", fn, key);

    const json_t *jd = json_object_get(v, "dtype");
    if (!json_is_string(jd)) MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': 'dtype' missing or not a string", fn, key);
    ms_dtype dt;
    const char *ds = json_string_value(jd);
    if (!ms_dtype_parse(ds, &dt))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is %s (supported: F32 F16 BF16 I32 I64 U8)", fn, key,
                ds, dtype_is_known_other(ds) ? "not supported" : "unknown");

    const json_t *js = json_object_get(v, "shape");
    if (!json_is_array(js)) MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': 'shape' missing or not an array", fn, key);
    size_t ndim = json_array_size(js);
    if (ndim > MS_TENSOR_MAX_DIMS)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: tensor '%s': %zu dimensions (at most %d supported)", fn, key, ndim,
                MS_TENSOR_MAX_DIMS);
    int64_t shape[MS_TENSOR_MAX_DIMS] = {0};
    size_t nelem = 1;
    bool overflow = false;
    for (size_t i = 0; i < ndim; i++) {
        uint64_t d;
        if (!json_uint(json_array_get(js, i), (uint64_t)INT64_MAX, &d))
            MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer", fn, key, i);
        shape[i] = (int64_t)d;
        if (d > SIZE_MAX || !ms_mul_size(nelem, (size_t)d, &nelem)) overflow = true;
    }
    size_t nbytes = 0;
    if (overflow || !ms_mul_size(nelem, ms_dtype_size(dt), &nbytes))
        MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': shape overflows the address space", fn, key);
    *e = (st_entry){.file = file_index};
    e->t = ms_tensor_view(NULL, dt, (int)ndim, shape);
    char sbuf[128];
    ms_tensor_shape_str(&e->t, sbuf, sizeof sbuf);

    const json_t *jo = json_object_get(v, "data_offsets");
    uint64_t begin, end;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_uint(json_array_get(jo, 0), UINT64_MAX, &begin) ||
        !json_uint(json_array_get(jo, 1), UINT64_MAX, &end))
        MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': 'data_offsets' must be [begin, end] non-negative integers", fn, key);
    if (begin > end)
        MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] has begin > end", fn, key,
                (unsigned long long)begin, (unsigned long long)end);
    if (end > f->data_size)
        MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] past the data block (%zu bytes)", fn, key,
                (unsigned long long)begin, (unsigned long long)end, f->data_size);
    if (end - begin != nbytes)
        MS_FAIL(MS_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] need %zu bytes (%s %s)", fn, key,
                (unsigned long long)begin, (unsigned long long)end, nbytes, ms_dtype_name(dt), sbuf);
    e->begin = (size_t)begin;
    e->end = (size_t)end;
    e->t.data = (void *)(f->data + begin);
    e->name = strdup(key);
    if (!e->name) MS_FAIL(MS_ERR_NOMEM, "out of memory");
    return MS_OK;
}

static int cmp_by_offset(const void *a, const void *b) {
    const st_entry *x = *(st_entry *const *)a, *y = *(st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* No two non-empty tensors of one file may share a byte. Entries [first, n). */
static ms_status check_overlap(const ms_st_model *m, int64_t first) {
    int64_t n = m->n - first;
    if (n < 2) return MS_OK;
    st_entry **v = ms_malloc((size_t)n * sizeof *v);
    if (!v) return MS_ERR_NOMEM;
    int64_t k = 0;
    for (int64_t i = first; i < m->n; i++)
        if (m->entries[i].end > m->entries[i].begin) v[k++] = &m->entries[i];
    qsort(v, (size_t)k, sizeof *v, cmp_by_offset);
    for (int64_t i = 1; i < k; i++) {
        if (v[i]->begin < v[i - 1]->end) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__,
                       "%s: tensors '%s' [%zu, %zu] and '%s' [%zu, %zu] overlap", m->files[v[i]->file].name,
                       v[i - 1]->name, v[i - 1]->begin, v[i - 1]->end, v[i]->name, v[i]->begin, v[i]->end);
            free(v);
            return MS_ERR_FORMAT;
        }
    }
    free(v);
    return MS_OK;
}

/* Parse file `fi` of m (its image already set) and append its tensors. */
static ms_status parse_file(ms_st_model *m, int fi) {
    st_file *f = &m->files[fi];
    const char *fn = f->name;
    if (f->size < 8) MS_FAIL(MS_ERR_FORMAT, "%s: %zu bytes, too short for a safetensors file (need >= 8)", fn, f->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | f->base[i];
    if (hlen > f->size - 8)
        MS_FAIL(MS_ERR_FORMAT, "%s: header length %llu past the end of the file (%zu bytes)", fn,
                (unsigned long long)hlen, f->size);
    if (hlen > ST_MAX_HEADER)
        MS_FAIL(MS_ERR_RANGE, "%s: header length %llu over the %llu byte limit", fn, (unsigned long long)hlen,
                (unsigned long long)ST_MAX_HEADER);
    f->data = f->base + 8 + hlen;
    f->data_size = f->size - 8 - (size_t)hlen;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)f->base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) MS_FAIL(MS_ERR_FORMAT, "%s: header is not valid JSON: %s (byte %d)", fn, jerr.text, jerr.position);
    ms_status st = MS_OK;
    if (!json_is_object(root)) {
        json_decref(root);
        MS_FAIL(MS_ERR_FORMAT, "%s: header is not a JSON object", fn);
    }
    int64_t first = m->n;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) {
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: '__metadata__' is not an object", fn);
                st = MS_ERR_FORMAT;
                break;
            }
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: __metadata__ '%s' is not a string", fn, mk);
                    st = MS_ERR_FORMAT;
                    break;
                }
            }
            if (st < 0) break;
            continue;
        }
        st_entry e;
        MS_TRY_GOTO(st, parse_entry(f, fi, key, v, &e), done);
        st = model_push_entry(m, &e);
        if (st < 0) {
            free(e.name);
            break;
        }
    }
    if (st == MS_OK) st = check_overlap(m, first);
done:
    json_decref(root);
    return st;
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/* Sort the index by name and refuse a name seen twice (in one file through
 * names that differ after an embedded NUL, or in two shards). */
static ms_status finish_index(ms_st_model *m) {
    if (m->n > 1) qsort(m->entries, (size_t)m->n, sizeof *m->entries, cmp_by_name);
    for (int64_t i = 1; i < m->n; i++) {
        const st_entry *a = &m->entries[i - 1], *b = &m->entries[i];
        if (!strcmp(a->name, b->name))
            MS_FAIL(MS_ERR_FORMAT, "tensor '%s' appears twice: in %s and in %s", a->name, m->files[a->file].name,
                    m->files[b->file].name);
    }
    return MS_OK;
}

/* ---- opening -------------------------------------------------------------- */

static ms_status map_file(const char *path, const void **base, size_t *size) {
    *base = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) MS_FAIL(errno == ENOENT ? MS_ERR_NOT_FOUND : MS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        MS_FAIL(MS_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        MS_FAIL(MS_ERR_FORMAT, "%s: %lld bytes, too short for a safetensors file (need >= 8)", path,
                (long long)sb.st_size);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) MS_FAIL(MS_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    *base = p;
    *size = (size_t)sb.st_size;
    return MS_OK;
}

/* Map and parse one file into m (no final sort). */
static ms_status add_mapped_file(ms_st_model *m, const char *path, int *index) {
    const void *base;
    size_t size;
    MS_TRY(map_file(path, &base, &size));
    MS_TRY(model_add_file(m, path, base, size, true, index));
    return parse_file(m, *index);
}

ms_status ms_st_open_file(const char *path, ms_st_model **out) {
    *out = NULL;
    ms_st_model *m;
    MS_TRY(model_new(&m));
    int fi;
    ms_status st = add_mapped_file(m, path, &fi);
    if (st == MS_OK) st = finish_index(m);
    if (st < 0) {
        ms_st_close(&m);
        return st;
    }
    *out = m;
    return MS_OK;
}

ms_status ms_st_open_memory(const void *data, size_t len, const char *name, ms_st_model **out) {
    *out = NULL;
    ms_st_model *m;
    MS_TRY(model_new(&m));
    int fi;
    ms_status st = model_add_file(m, name ? name : "<memory>", data, len, false, &fi);
    if (st == MS_OK) st = parse_file(m, fi);
    if (st == MS_OK) st = finish_index(m);
    if (st < 0) {
        ms_st_close(&m);
        return st;
    }
    *out = m;
    return MS_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A shard name from an index: a plain file name inside the model folder. */
static bool shard_name_ok(const char *s) {
    return s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* Sharded model: open every distinct file named by weight_map once, then
 * check that each listed tensor is in the file the map names. */
static ms_status open_index(ms_st_model *m, const char *dir, const char *index_path) {
    char *text;
    size_t len;
    MS_TRY(ms_read_file(index_path, &text, &len));
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!root) MS_FAIL(MS_ERR_FORMAT, "%s: not valid JSON: %s (line %d)", index_path, jerr.text, jerr.line);
    ms_status st = MS_OK;
    const char **names = NULL;
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(wm)) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: 'weight_map' missing or not an object", index_path);
        st = MS_ERR_FORMAT;
        goto done;
    }
    size_t nmap = json_object_size(wm);
    names = ms_calloc(nmap ? nmap : 1, sizeof *names);
    if (!names) {
        st = MS_ERR_NOMEM;
        goto done;
    }
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v) {
        if (!json_is_string(v) || !shard_name_ok(json_string_value(v))) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__,
                       "%s: weight_map['%s'] must be a file name in the model folder", index_path, key);
            st = MS_ERR_FORMAT;
            goto done;
        }
        names[k++] = json_string_value(v);
    }
    if (k == 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: weight_map is empty", index_path);
        st = MS_ERR_FORMAT;
        goto done;
    }
    qsort(names, k, sizeof *names, cmp_str);
    for (size_t i = 0; i < k; i++) {
        if (i > 0 && !strcmp(names[i], names[i - 1])) continue;
        char *path = ms_path_join(dir, names[i]);
        if (!path) {
            st = MS_ERR_NOMEM;
            goto done;
        }
        if (!ms_file_exists(path)) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: names shard %s, which does not exist", index_path, path);
            free(path);
            st = MS_ERR_NOT_FOUND;
            goto done;
        }
        int fi;
        st = add_mapped_file(m, path, &fi);
        free(path);
        if (st < 0) goto done;
    }
    MS_TRY_GOTO(st, finish_index(m), done);
    json_object_foreach(wm, key, v) {
        const char *want = json_string_value(v);
        ms_tensor t;
        const char *got = ms_st_find(m, key, &t) ? ms_st_file_of(m, key) : NULL;
        const char *base = got ? strrchr(got, '/') : NULL;
        base = base ? base + 1 : got;
        if (!got || strcmp(base, want)) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: tensor '%s' should be in %s but is %s%s", index_path,
                       key, want, got ? "in " : "not in any shard", got ? got : "");
            st = MS_ERR_NOT_FOUND;
            goto done;
        }
    }
done:
    free(names);
    json_decref(root);
    return st;
}

ms_status ms_st_open_dir(const char *dir, ms_st_model **out) {
    *out = NULL;
    char *index = ms_path_join(dir, ST_INDEX_NAME);
    char *single = ms_path_join(dir, ST_SINGLE_NAME);
    ms_status st = MS_OK;
    if (!index || !single) {
        st = MS_ERR_NOMEM;
    } else if (ms_file_exists(index)) {
        ms_st_model *m;
        st = model_new(&m);
        if (st == MS_OK) {
            st = open_index(m, dir, index);
            if (st < 0) ms_st_close(&m);
            *out = m;
        }
    } else if (ms_file_exists(single)) {
        st = ms_st_open_file(single, out);
    } else {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: no %s or %s in this folder", dir, ST_INDEX_NAME,
                   ST_SINGLE_NAME);
        st = MS_ERR_NOT_FOUND;
    }
    free(index);
    free(single);
    return st;
}

/* ---- lookup --------------------------------------------------------------- */

int64_t ms_st_count(const ms_st_model *m) { return m->n; }

const char *ms_st_name(const ms_st_model *m, int64_t i) {
    MS_ASSERT(i >= 0 && i < m->n);
    return m->entries[i].name;
}

static const st_entry *lookup(const ms_st_model *m, const char *name) {
    st_entry key = {.name = (char *)name};
    if (m->n == 0) return NULL;
    return bsearch(&key, m->entries, (size_t)m->n, sizeof *m->entries, cmp_by_name);
}

bool ms_st_find(const ms_st_model *m, const char *name, ms_tensor *out) {
    const st_entry *e = lookup(m, name);
    if (!e) return false;
    if (out) *out = e->t;
    return true;
}

static const char *model_label(const ms_st_model *m) {
    return m->n_files == 1 ? m->files[0].name : m->n_files > 1 ? "sharded model" : "model";
}

ms_status ms_st_get(const ms_st_model *m, const char *name, ms_tensor *out) {
    if (!ms_st_find(m, name, out)) MS_FAIL(MS_ERR_NOT_FOUND, "%s: tensor %s missing", model_label(m), name);
    return MS_OK;
}

ms_status ms_st_get_shaped(const ms_st_model *m, const char *name, int ndim, const int64_t *shape, ms_tensor *out) {
    ms_tensor t;
    MS_TRY(ms_st_get(m, name, &t));
    if (!ms_tensor_has_shape(&t, ndim, shape)) {
        char want[128], got[128];
        ms_tensor want_t = {.ndim = ndim > MS_TENSOR_MAX_DIMS ? MS_TENSOR_MAX_DIMS : ndim};
        for (int i = 0; i < want_t.ndim; i++) want_t.shape[i] = shape[i];
        MS_FAIL(MS_ERR_FORMAT, "%s: tensor %s has shape %s, expected %s", ms_st_file_of(m, name), name,
                ms_tensor_shape_str(&t, got, sizeof got), ms_tensor_shape_str(&want_t, want, sizeof want));
    }
    if (out) *out = t;
    return MS_OK;
}

const char *ms_st_file_of(const ms_st_model *m, const char *name) {
    const st_entry *e = lookup(m, name);
    return e ? m->files[e->file].name : NULL;
}

/* ---- writer ----------------------------------------------------------------- */

static ms_status write_all(int fd, const void *p, size_t n, const char *path) {
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) MS_FAIL(MS_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        b += w;
        n -= (size_t)w;
    }
    return MS_OK;
}

/* Names must be distinct: checked on a sorted copy. */
static ms_status check_names(int64_t n, const char *const *names, const char *path) {
    const char **v = ms_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return MS_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) {
        if (!names[i]) {
            free(v);
            MS_FAIL(MS_ERR_INVALID, "%s: tensor %lld has no name", path, (long long)i);
        }
        v[i] = names[i];
    }
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    ms_status st = MS_OK;
    for (int64_t i = 1; i < n; i++) {
        if (!strcmp(v[i], v[i - 1])) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: tensor name '%s' given twice", path, v[i]);
            st = MS_ERR_INVALID;
            break;
        }
    }
    free(v);
    return st;
}

/* Build the header: {"__metadata__": {...}, name: {dtype, shape, data_offsets}, ...}
 * in the caller's order, offsets contiguous, padded with spaces to 8 bytes. */
static ms_status build_header(const char *path, int64_t n, const char *const *names, const ms_tensor *tensors,
                              int64_t n_meta, const char *const *meta_kv, char **out, size_t *out_len) {
    *out = NULL;
    json_t *root = json_object();
    if (!root) return MS_ERR_NOMEM;
    ms_status st = MS_OK;
    if (n_meta > 0) {
        json_t *meta = json_object();
        json_object_set_new(root, "__metadata__", meta);
        for (int64_t i = 0; i < n_meta; i++) {
            const char *k = meta_kv[2 * i], *v = meta_kv[2 * i + 1];
            if (!k || !v || json_object_set_new(meta, k, json_string(v)) != 0) {
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: metadata %lld is not a pair of UTF-8 strings",
                           path, (long long)i);
                st = MS_ERR_INVALID;
                goto fail;
            }
        }
    }
    size_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        const ms_tensor *t = &tensors[i];
        if (!names[i] || !strcmp(names[i], "__metadata__") || t->dtype < 0 || t->dtype >= MS_DTYPE_COUNT ||
            t->ndim < 0 || t->ndim > MS_TENSOR_MAX_DIMS) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: tensor %lld ('%s'): bad name, dtype or rank", path,
                       (long long)i, names[i] ? names[i] : "(null)");
            st = MS_ERR_INVALID;
            goto fail;
        }
        json_t *shape = json_array();
        size_t nbytes = ms_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || !ms_mul_size(nbytes, (size_t)t->shape[d], &nbytes)) {
                json_decref(shape);
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: tensor '%s': bad shape", path, names[i]);
                st = MS_ERR_INVALID;
                goto fail;
            }
            json_array_append_new(shape, json_integer(t->shape[d]));
        }
        if (nbytes > 0 && !t->data) {
            json_decref(shape);
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: tensor '%s' has no data", path, names[i]);
            st = MS_ERR_INVALID;
            goto fail;
        }
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(ms_dtype_name(t->dtype)));
        json_object_set_new(e, "shape", shape);
        json_t *offs = json_array();
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + nbytes)));
        json_object_set_new(e, "data_offsets", offs);
        if (json_object_set_new(root, names[i], e) != 0) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: tensor name '%s' is not valid UTF-8", path, names[i]);
            st = MS_ERR_INVALID;
            goto fail;
        }
        off += nbytes;
    }
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) {
        st = MS_ERR_NOMEM;
        goto fail;
    }
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    char *buf = ms_malloc(8 + padded);
    if (!buf) {
        free(text);
        st = MS_ERR_NOMEM;
        goto fail;
    }
    for (int i = 0; i < 8; i++) buf[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
    memcpy(buf + 8, text, len);
    memset(buf + 8 + len, ' ', padded - len);
    free(text);
    *out = buf;
    *out_len = 8 + padded;
fail:
    json_decref(root);
    return st;
}

ms_status ms_st_write(const char *path, int64_t n, const char *const *names, const ms_tensor *tensors,
                      int64_t n_meta, const char *const *meta_kv) {
    MS_ASSERT(n >= 0 && n_meta >= 0);
    MS_TRY(check_names(n, names, path));
    char *header;
    size_t hlen;
    MS_TRY(build_header(path, n, names, tensors, n_meta, meta_kv, &header, &hlen));

    /* Streamed: header, then each tensor straight from its view, into a
     * temporary file that is fsync'd and renamed over `path`. */
    size_t plen = strlen(path);
    char *tmp = ms_malloc(plen + 32);
    if (!tmp) {
        free(header);
        return MS_ERR_NOMEM;
    }
    snprintf(tmp, plen + 32, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: cannot create: %s", tmp, strerror(errno));
        free(header);
        free(tmp);
        return MS_ERR_IO;
    }
    ms_status st = write_all(fd, header, hlen, tmp);
    free(header);
    for (int64_t i = 0; i < n && st == MS_OK; i++) st = write_all(fd, tensors[i].data, ms_tensor_nbytes(&tensors[i]), tmp);
    if (st == MS_OK && fsync(fd) != 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: fsync failed: %s", tmp, strerror(errno));
        st = MS_ERR_IO;
    }
    if (close(fd) != 0 && st == MS_OK) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: close failed: %s", tmp, strerror(errno));
        st = MS_ERR_IO;
    }
    if (st == MS_OK && rename(tmp, path) != 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: rename to %s failed: %s", tmp, path, strerror(errno));
        st = MS_ERR_IO;
    }
    if (st < 0) unlink(tmp);
    free(tmp);
    return st;
}
