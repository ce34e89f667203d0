/* ms_tensor.h — dtypes, tensor views and dtype conversion.
 *
 * A tensor is a view: it never owns memory. Data is dense row-major; shape[0]
 * is the slowest axis. Views into mmap'd safetensors stay valid while the file
 * stays open.
 */
#ifndef MS_TENSOR_H
#define MS_TENSOR_H

#include "ms_common.h"

typedef enum {
    MS_DTYPE_F32 = 0,
    MS_DTYPE_F16,
    MS_DTYPE_BF16,
    MS_DTYPE_I32,
    MS_DTYPE_I64,
    MS_DTYPE_U8,
    /* ggml block formats (GGUF weights): a row of n elements is n / block
     * blocks of block_bytes each; ms_dtype_size() is 0 for them. Layouts and
     * dequantization: kernels/ms_qweight.h (the scalar C twin is the spec). */
    MS_DTYPE_Q4_0,
    MS_DTYPE_Q4_1,
    MS_DTYPE_Q5_0,
    MS_DTYPE_Q5_1,
    MS_DTYPE_Q8_0,
    MS_DTYPE_Q4_K,
    MS_DTYPE_Q5_K,
    MS_DTYPE_Q6_K,
    MS_DTYPE_COUNT
} ms_dtype;

#define MS_TENSOR_MAX_DIMS 4

typedef struct {
    void *data;
    ms_dtype dtype;
    int ndim;
    int64_t shape[MS_TENSOR_MAX_DIMS];
} ms_tensor;

/* Bytes per element of a scalar dtype; 0 for a block format. */
size_t ms_dtype_size(ms_dtype t);
/* Elements per block (1 for scalar dtypes, 32 or 256 for block formats) and
 * bytes per block (= ms_dtype_size for scalar dtypes). */
int64_t ms_dtype_block(ms_dtype t);
size_t ms_dtype_block_bytes(ms_dtype t);
bool ms_dtype_is_quant(ms_dtype t);
/* Bytes of a row of n elements; false if n is not a whole number of blocks
 * or the size overflows. */
bool ms_dtype_row_bytes(ms_dtype t, int64_t n, size_t *bytes);
/* ggml's type id (GGUF tensor_info type) ↔ dtype; false for ids this
 * project does not read. */
bool ms_dtype_from_ggml(uint32_t ggml_type, ms_dtype *out);
uint32_t ms_dtype_to_ggml(ms_dtype t); /* MS_ASSERTs t has a ggml id */
const char *ms_dtype_name(ms_dtype t); /* "F32", "F16", "BF16", ... (safetensors spelling) */
/* Parse a safetensors dtype name; false if unknown. */
bool ms_dtype_parse(const char *name, ms_dtype *out);
/* Parse a command-line weight dtype: "f32" | "bf16" | "f16"; false otherwise. */
bool ms_dtype_parse_float(const char *name, ms_dtype *out);

int64_t ms_tensor_nelem(const ms_tensor *t);
/* Bytes of the whole tensor; block formats: rows of shape[ndim-1] elements. */
size_t ms_tensor_nbytes(const ms_tensor *t);
/* Make a view. ndim ≤ MS_TENSOR_MAX_DIMS. */
ms_tensor ms_tensor_view(void *data, ms_dtype dtype, int ndim, const int64_t *shape);
/* True if t has exactly this shape (ndim and every extent). */
bool ms_tensor_has_shape(const ms_tensor *t, int ndim, const int64_t *shape);
/* "[4096, 128256]" into buf. */
const char *ms_tensor_shape_str(const ms_tensor *t, char *buf, size_t cap);

/* Scalar conversions. f32→f16/bf16 round to nearest even; NaN stays NaN. */
float ms_f16_to_f32(uint16_t h);
uint16_t ms_f32_to_f16(float f);
float ms_bf16_to_f32(uint16_t b);
uint16_t ms_f32_to_bf16(float f);

/* Convert n floating elements (F32/F16/BF16) of `src` to f32. Other dtypes
 * are a programmer error. */
void ms_convert_to_f32(float *dst, const void *src, ms_dtype src_dtype, int64_t n);
/* Convert n f32 values to F32/F16/BF16 storage. */
void ms_convert_from_f32(void *dst, ms_dtype dst_dtype, const float *src, int64_t n);

#endif
