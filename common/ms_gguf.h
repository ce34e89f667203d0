/* ms_gguf.h — GGUF reader (v2 and v3): header, typed metadata, tensor table, mmap.
 *
 * Format (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv; then
 * n_kv × {string key, u32 value type, value}; then n_tensors × {string name,
 * u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset}; then padding to
 * `general.alignment` (default 32); then the data block, tensor offsets being
 * relative to it. A string is u64 length + bytes (no NUL). An array is u32
 * element type + u64 count + elements (arrays of arrays are refused).
 *
 * Every count, length, offset, shape and type is checked against the file
 * before anything is handed out; errors name the file and the key or tensor
 * and the field. Views point into the mapping and stay valid until close.
 *
 * Shapes: GGUF stores ne[0] as the fastest axis (a [rows, cols] weight has
 * ne = {cols, rows}). ms_gguf_tensor_info gives both: ne as stored, and
 * `shape` in this project's row-major order (shape[0] slowest), so a 2-d
 * weight of m rows of k elements has shape {m, k}, like safetensors.
 */
#ifndef MS_GGUF_H
#define MS_GGUF_H

#include "ms_tensor.h"

typedef struct ms_gguf ms_gguf;

typedef enum {
    MS_GGUF_U8 = 0,
    MS_GGUF_I8 = 1,
    MS_GGUF_U16 = 2,
    MS_GGUF_I16 = 3,
    MS_GGUF_U32 = 4,
    MS_GGUF_I32 = 5,
    MS_GGUF_F32 = 6,
    MS_GGUF_BOOL = 7,
    MS_GGUF_STRING = 8,
    MS_GGUF_ARRAY = 9,
    MS_GGUF_U64 = 10,
    MS_GGUF_I64 = 11,
    MS_GGUF_F64 = 12,
} ms_gguf_vtype;

typedef struct {
    const char *name;   /* NUL-terminated copy owned by the reader */
    ms_dtype dtype;     /* from the ggml type id; unknown ids are refused at open */
    uint32_t ggml_type;
    int ndim;           /* 1..4 */
    int64_t ne[MS_TENSOR_MAX_DIMS];    /* as stored: ne[0] fastest; unused = 1 */
    int64_t shape[MS_TENSOR_MAX_DIMS]; /* row-major: shape[i] = ne[ndim-1-i] */
    uint64_t offset;    /* in the data block, aligned to the file's alignment */
    size_t nbytes;      /* exact bytes of the tensor's data */
    const void *data;   /* into the mapping */
} ms_gguf_tensor_info;

/* Open and mmap a file; validate the whole header and tensor table (incl.
 * every tensor's data lying inside the file, without overlap checks). */
ms_status ms_gguf_open(const char *path, ms_gguf **out);
/* The same with the file read into private memory (transparent huge pages
 * where the kernel grants them, read-only afterwards) instead of mapped: for
 * model weights, which are streamed every token. File-backed 4 KiB pages
 * held a one-thread GEMV ~17 % below it (Gemma 3's head: 13.3 vs 11.1 ms,
 * microspec-bench-head, results/gguf/ops-2026-11-24c.md). Costs a read of the
 * file at open and its size in resident memory. MS_GGUF_MMAP=1 in the
 * environment maps instead (ms_gguf_open). */
ms_status ms_gguf_open_resident(const char *path, ms_gguf **out);
/* Parse a file image already in memory (not copied; must outlive the
 * reader). `name` is used in errors. The fuzz target calls this. */
ms_status ms_gguf_open_memory(const void *data, size_t len, const char *name, ms_gguf **out);
void ms_gguf_close(ms_gguf **g);
/* True if the file at `path` starts with the GGUF magic (no error logged). */
bool ms_gguf_is_gguf(const char *path);

const char *ms_gguf_path(const ms_gguf *g); /* the name given at open */
uint32_t ms_gguf_version(const ms_gguf *g);
uint64_t ms_gguf_alignment(const ms_gguf *g);
/* Byte offset in the file where the data block starts (tensor offsets are
 * relative to it): the end of the tensor table rounded up to the alignment. */
uint64_t ms_gguf_data_start(const ms_gguf *g);

/* ---- metadata ---- */
int64_t ms_gguf_n_kv(const ms_gguf *g);
const char *ms_gguf_kv_key(const ms_gguf *g, int64_t i);
/* Index of `key`, or -1. */
int64_t ms_gguf_find(const ms_gguf *g, const char *key);
ms_gguf_vtype ms_gguf_kv_type(const ms_gguf *g, int64_t i);

/* Typed getters by key. Absent key → MS_ERR_NOT_FOUND (not logged: the
 * caller decides whether the key is optional); wrong type or out of range →
 * MS_ERR_FORMAT, logged with file, key, the type found and the one expected.
 * Integer getters accept any integer type whose value fits; f64 accepts F32,
 * F64 (and integers). */
ms_status ms_gguf_get_i64(const ms_gguf *g, const char *key, int64_t *out);
ms_status ms_gguf_get_u32(const ms_gguf *g, const char *key, uint32_t *out);
ms_status ms_gguf_get_u64(const ms_gguf *g, const char *key, uint64_t *out);
ms_status ms_gguf_get_f64(const ms_gguf *g, const char *key, double *out);
ms_status ms_gguf_get_bool(const ms_gguf *g, const char *key, bool *out);
/* String value: NUL-terminated copy owned by the reader (a string holding a
 * NUL byte is refused with MS_ERR_FORMAT); *len excludes the NUL (len may be NULL). */
ms_status ms_gguf_get_str(const ms_gguf *g, const char *key, const char **out, size_t *len);

/* Arrays. *etype = element type, *n = count. For numeric elements, *data
 * points at the packed little-endian elements in the mapping (may be
 * unaligned: read with memcpy). String arrays: *data = NULL; use
 * ms_gguf_arr_str, O(1) per element (the reader indexes them at open). */
ms_status ms_gguf_get_arr(const ms_gguf *g, const char *key, ms_gguf_vtype *etype, int64_t *n, const void **data);
/* Element i of a string array: pointer into the mapping (NOT NUL-terminated) and length. */
ms_status ms_gguf_arr_str(const ms_gguf *g, const char *key, int64_t i, const char **s, size_t *len);

/* ---- tensors ---- */
int64_t ms_gguf_n_tensors(const ms_gguf *g);
/* i-th tensor in file order. */
const ms_gguf_tensor_info *ms_gguf_tensor_at(const ms_gguf *g, int64_t i);
/* By name; NULL if absent (not logged). */
const ms_gguf_tensor_info *ms_gguf_find_tensor(const ms_gguf *g, const char *name);
/* Required tensor: MS_ERR_NOT_FOUND logged with file and name if absent;
 * with ndim > 0, the row-major shape must equal shape[0..ndim) and the dtype
 * must be one of `allowed` (n_allowed 0: any), else MS_ERR_FORMAT naming the
 * tensor, expected and found. */
ms_status ms_gguf_get_tensor(const ms_gguf *g, const char *name, int ndim, const int64_t *shape,
                             const ms_dtype *allowed, int n_allowed, const ms_gguf_tensor_info **out);

#endif
