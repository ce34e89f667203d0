/* ms_weights.c — f32 views of checkpoint tensors, owned conversions. */
#include "ms_weights.h"

#include <stdlib.h>
#include <string.h>

ms_status ms_weights_own(ms_weights *w, float *p) {
    if (w->n == w->cap) {
        int64_t c = w->cap ? 2 * w->cap : 64;
        float **o = ms_realloc(w->owned, (size_t)c * sizeof *o);
        if (!o) {
            free(p);
            return MS_ERR_NOMEM;
        }
        w->owned = o;
        w->cap = c;
    }
    w->owned[w->n++] = p;
    return MS_OK;
}

ms_status ms_weights_get(ms_weights *w, const ms_st_model *st, const char *name, int ndim, int64_t d0, int64_t d1,
                         const float **out) {
    int64_t shape[2] = {d0, d1};
    ms_tensor t;
    MS_TRY(ms_st_get_shaped(st, name, ndim, shape, &t));
    if (t.dtype != MS_DTYPE_F32 && t.dtype != MS_DTYPE_F16 && t.dtype != MS_DTYPE_BF16)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16",
                ms_st_file_of(st, name), name, ms_dtype_name(t.dtype));
    if (t.dtype == MS_DTYPE_F32 && ((uintptr_t)t.data % sizeof(float)) == 0) {
        *out = t.data;
        return MS_OK;
    }
    int64_t n = ms_tensor_nelem(&t);
    float *p = ms_malloc((size_t)n * sizeof *p);
    if (!p) return MS_ERR_NOMEM;
    ms_convert_to_f32(p, t.data, t.dtype, n); /* memmove for unaligned F32 */
    MS_TRY(ms_weights_own(w, p));
    *out = p;
    return MS_OK;
}

ms_status ms_weights_get_opt(ms_weights *w, const ms_st_model *st, const char *name, int64_t d0, const float **out) {
    *out = NULL;
    if (!ms_st_find(st, name, NULL)) {
        MS_LOG_DEBUG("optional tensor %s absent", name);
        return MS_OK;
    }
    return ms_weights_get(w, st, name, 1, d0, 0, out);
}

void ms_weights_free(ms_weights *w) {
    for (int64_t i = 0; i < w->n; i++) free(w->owned[i]);
    free(w->owned);
    w->owned = NULL;
    w->n = w->cap = 0;
}

ms_status ms_alloc_f32(float **p, int64_t a, int64_t b) {
    size_t n;
    if (a < 0 || b < 0 || !ms_mul_size((size_t)a, (size_t)b, &n) || !ms_mul_size(n, sizeof(float), &n))
        MS_FAIL(MS_ERR_RANGE, "buffer of %lld x %lld floats overflows", (long long)a, (long long)b);
    *p = ms_calloc(1, n);
    return *p ? MS_OK : MS_ERR_NOMEM;
}

ms_k_rope_params ms_rope_params_of(const ms_hfconfig *c) {
    return (ms_k_rope_params){.theta = c->rope_theta,
                              .llama3 = c->rope_scaling.type == MS_ROPE_LLAMA3,
                              .factor = c->rope_scaling.factor,
                              .low_freq_factor = c->rope_scaling.low_freq_factor,
                              .high_freq_factor = c->rope_scaling.high_freq_factor,
                              .original_max_pos = c->rope_scaling.original_max_position_embeddings};
}
