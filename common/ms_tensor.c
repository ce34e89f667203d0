/* ms_tensor.c — dtypes, views, f16/bf16 conversion. */
#include "ms_tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* One row per dtype: name, bytes per element (0: block format), elements
 * per block, bytes per block, ggml type id (-1: none). Block layouts as in
 * ggml-common.h: Q4_0 {f16 d; u8 qs[16]}, Q4_1 {f16 d, m; u8 qs[16]}, Q5_0
 * {f16 d; u8 qh[4]; u8 qs[16]}, Q5_1 {f16 d, m; u8 qh[4]; u8 qs[16]}, Q8_0
 * {f16 d; i8 qs[32]}, Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]}, Q5_K
 * {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}, Q6_K {u8 ql[128];
 * u8 qh[64]; i8 scales[16]; f16 d}. */
static const struct {
    const char *name;
    size_t size;
    int64_t block;
    size_t block_bytes;
    int ggml;
} dtype_info[MS_DTYPE_COUNT] = {
    [MS_DTYPE_F32] = {"F32", 4, 1, 4, 0},     [MS_DTYPE_F16] = {"F16", 2, 1, 2, 1},
    [MS_DTYPE_BF16] = {"BF16", 2, 1, 2, 30},  [MS_DTYPE_I32] = {"I32", 4, 1, 4, 26},
    [MS_DTYPE_I64] = {"I64", 8, 1, 8, 27},    [MS_DTYPE_U8] = {"U8", 1, 1, 1, -1},
    [MS_DTYPE_Q4_0] = {"Q4_0", 0, 32, 18, 2}, [MS_DTYPE_Q4_1] = {"Q4_1", 0, 32, 20, 3},
    [MS_DTYPE_Q5_0] = {"Q5_0", 0, 32, 22, 6}, [MS_DTYPE_Q5_1] = {"Q5_1", 0, 32, 24, 7},
    [MS_DTYPE_Q8_0] = {"Q8_0", 0, 32, 34, 8}, [MS_DTYPE_Q4_K] = {"Q4_K", 0, 256, 144, 12},
    [MS_DTYPE_Q5_K] = {"Q5_K", 0, 256, 176, 13}, [MS_DTYPE_Q6_K] = {"Q6_K", 0, 256, 210, 14},
};

size_t ms_dtype_size(ms_dtype t) {
    MS_ASSERT(t >= 0 && t < MS_DTYPE_COUNT);
    return dtype_info[t].size;
}

int64_t ms_dtype_block(ms_dtype t) {
    MS_ASSERT(t >= 0 && t < MS_DTYPE_COUNT);
    return dtype_info[t].block;
}

size_t ms_dtype_block_bytes(ms_dtype t) {
    MS_ASSERT(t >= 0 && t < MS_DTYPE_COUNT);
    return dtype_info[t].block_bytes;
}

bool ms_dtype_is_quant(ms_dtype t) { return t >= 0 && t < MS_DTYPE_COUNT && dtype_info[t].size == 0; }

bool ms_dtype_row_bytes(ms_dtype t, int64_t n, size_t *bytes) {
    MS_ASSERT(t >= 0 && t < MS_DTYPE_COUNT);
    if (n < 0 || n % dtype_info[t].block != 0) return false;
    return ms_mul_size((size_t)(n / dtype_info[t].block), dtype_info[t].block_bytes, bytes);
}

bool ms_dtype_from_ggml(uint32_t ggml_type, ms_dtype *out) {
    for (int i = 0; i < MS_DTYPE_COUNT; i++) {
        if (dtype_info[i].ggml >= 0 && (uint32_t)dtype_info[i].ggml == ggml_type) {
            *out = (ms_dtype)i;
            return true;
        }
    }
    return false;
}

uint32_t ms_dtype_to_ggml(ms_dtype t) {
    MS_ASSERT(t >= 0 && t < MS_DTYPE_COUNT && dtype_info[t].ggml >= 0);
    return (uint32_t)dtype_info[t].ggml;
}

const char *ms_dtype_name(ms_dtype t) { return (t >= 0 && t < MS_DTYPE_COUNT) ? dtype_info[t].name : "?"; }

bool ms_dtype_parse(const char *name, ms_dtype *out) {
    for (int i = 0; i < MS_DTYPE_COUNT; i++) { /* safetensors holds scalar dtypes only */
        if (dtype_info[i].size && !strcmp(name, dtype_info[i].name)) {
            *out = (ms_dtype)i;
            return true;
        }
    }
    return false;
}

bool ms_dtype_parse_float(const char *name, ms_dtype *out) {
    if (!strcmp(name, "f32")) *out = MS_DTYPE_F32;
    else if (!strcmp(name, "bf16")) *out = MS_DTYPE_BF16;
    else if (!strcmp(name, "f16")) *out = MS_DTYPE_F16;
    else return false;
    return true;
}

int64_t ms_tensor_nelem(const ms_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t ms_tensor_nbytes(const ms_tensor *t) {
    if (!ms_dtype_is_quant(t->dtype)) return (size_t)ms_tensor_nelem(t) * ms_dtype_size(t->dtype);
    const int64_t row = t->ndim ? t->shape[t->ndim - 1] : 1;
    size_t rb = 0;
    MS_ASSERT(ms_dtype_row_bytes(t->dtype, row, &rb));
    return (size_t)(ms_tensor_nelem(t) / (row ? row : 1)) * rb;
}

ms_tensor ms_tensor_view(void *data, ms_dtype dtype, int ndim, const int64_t *shape) {
    MS_ASSERT(ndim >= 0 && ndim <= MS_TENSOR_MAX_DIMS);
    ms_tensor t = {.data = data, .dtype = dtype, .ndim = ndim};
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    return t;
}

bool ms_tensor_has_shape(const ms_tensor *t, int ndim, const int64_t *shape) {
    if (t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return false;
    return true;
}

const char *ms_tensor_shape_str(const ms_tensor *t, char *buf, size_t cap) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int i = 0; i < t->ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

/* ---- scalar conversions (IEEE 754 binary16 / bfloat16) ------------------- */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float ms_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t ms_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                            /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float ms_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: value = man · 2^-24 */
        float v = (float)man * 0x1.0p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t ms_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;          /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u;         /* ≥ 65520 rounds to Inf */
    if (a < 0x38800000u) {                               /* below 2^-14: subnormal or zero */
        /* round-to-nearest-even of |f| / 2^-24 */
        float v = bits_f32(a) * 0x1.0p24f;
        float r = nearbyintf(v);
        return sign | (uint16_t)r;
    }
    uint32_t exp = (a >> 23) - 112u;
    uint32_t man = a & 0x7fffffu;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return sign | (uint16_t)h;
}

void ms_convert_to_f32(float *dst, const void *src, ms_dtype src_dtype, int64_t n) {
    switch (src_dtype) {
    case MS_DTYPE_F32: memmove(dst, src, (size_t)n * 4); break;
    case MS_DTYPE_F16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = ms_f16_to_f32(s[i]);
        break;
    }
    case MS_DTYPE_BF16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = ms_bf16_to_f32(s[i]);
        break;
    }
    default: MS_ASSERT(!"ms_convert_to_f32: not a floating dtype");
    }
}

void ms_convert_from_f32(void *dst, ms_dtype dst_dtype, const float *src, int64_t n) {
    switch (dst_dtype) {
    case MS_DTYPE_F32: memmove(dst, src, (size_t)n * 4); break;
    case MS_DTYPE_F16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = ms_f32_to_f16(src[i]);
        break;
    }
    case MS_DTYPE_BF16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = ms_f32_to_bf16(src[i]);
        break;
    }
    default: MS_ASSERT(!"ms_convert_from_f32: not a floating dtype");
    }
}
