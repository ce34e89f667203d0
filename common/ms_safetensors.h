/* ms_safetensors.h — safetensors reader (mmap, single file or sharded) and writer.
 *
 * Format: u64 little-endian header length N, then N bytes of JSON
 * {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {...}}, then the data block; offsets are relative to the
 * data block. Every length, offset, shape and dtype is checked against the file
 * before a view is handed out; errors name the file and the tensor.
 *
 * Views point straight into the mapping and may be unaligned for their dtype
 * (the format only promises byte offsets): read them with memcpy-safe code
 * such as ms_convert_to_f32, or copy them out. Files ms_st_write writes are
 * aligned (header padded to 8 bytes, tensors contiguous in the given order).
 */
#ifndef MS_SAFETENSORS_H
#define MS_SAFETENSORS_H

#include "ms_tensor.h"

typedef struct ms_st_model ms_st_model; /* one or more mmap'd files + a name index */

/* Open a model directory: `model.safetensors.index.json` (sharded) if present,
 * else `model.safetensors`. */
ms_status ms_st_open_dir(const char *dir, ms_st_model **out);
/* Open one .safetensors file. */
ms_status ms_st_open_file(const char *path, ms_st_model **out);
/* Parse a whole file image already in memory (not copied; must outlive the
 * model). `name` is used in error messages. This is what the fuzz target calls. */
ms_status ms_st_open_memory(const void *data, size_t len, const char *name, ms_st_model **out);
/* Unmap and free; nulls *m. Views obtained from it become invalid. */
void ms_st_close(ms_st_model **m);

int64_t ms_st_count(const ms_st_model *m);
/* Name of the i-th tensor (0 ≤ i < count), in a stable sorted order. */
const char *ms_st_name(const ms_st_model *m, int64_t i);
/* Look up a tensor; false if absent (no log: callers decide if it is optional). */
bool ms_st_find(const ms_st_model *m, const char *name, ms_tensor *out);
/* Look up a required tensor: logs "file: tensor NAME missing" and returns
 * MS_ERR_NOT_FOUND if absent. */
ms_status ms_st_get(const ms_st_model *m, const char *name, ms_tensor *out);
/* Required tensor with a required shape (ndim extents); logs expected vs actual. */
ms_status ms_st_get_shaped(const ms_st_model *m, const char *name, int ndim, const int64_t *shape,
                           ms_tensor *out);
/* The file a tensor came from (for error messages). */
const char *ms_st_file_of(const ms_st_model *m, const char *name);

/* Writer: write n named tensors (any supported dtype) to `path` atomically
 * (temp file + rename). Names must be distinct. Optional string metadata as
 * key/value pairs (n_meta may be 0). */
ms_status ms_st_write(const char *path, int64_t n, const char *const *names, const ms_tensor *tensors,
                      int64_t n_meta, const char *const *meta_kv);

#endif
