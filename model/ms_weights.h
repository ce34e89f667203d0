/* ms_weights.h — checkpoint tensors as f32 for the CPU runtimes (the target
 * model and the EAGLE head share this).
 *
 * A tensor the file holds as aligned F32 is used in place (it stays mmap'd);
 * F16/BF16 (or unaligned F32) is converted once into a buffer this store
 * owns. Other dtypes are refused naming the file and tensor.
 */
#ifndef MS_WEIGHTS_H
#define MS_WEIGHTS_H

#include "ms_hfconfig.h"
#include "ms_kernels.h"
#include "ms_safetensors.h"

typedef struct {
    float **owned; /* converted copies, freed by ms_weights_free */
    int64_t n, cap;
} ms_weights;

/* Required tensor `name` of exactly [d0] (ndim 1) or [d0, d1] (ndim 2). */
ms_status ms_weights_get(ms_weights *w, const ms_st_model *st, const char *name, int ndim, int64_t d0, int64_t d1,
                         const float **out);
/* Optional 1-d tensor: *out = NULL when absent, else as ms_weights_get. */
ms_status ms_weights_get_opt(ms_weights *w, const ms_st_model *st, const char *name, int64_t d0, const float **out);
/* Take ownership of a buffer the caller converted itself (freed on failure too). */
ms_status ms_weights_own(ms_weights *w, float *p);
void ms_weights_free(ms_weights *w);

/* Zeroed f32 buffer of a·b floats, overflow-checked. */
ms_status ms_alloc_f32(float **p, int64_t a, int64_t b);

/* RoPE parameters of a config (theta and llama3 scaling). */
ms_k_rope_params ms_rope_params_of(const ms_hfconfig *c);

#endif
