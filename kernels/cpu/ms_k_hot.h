/* ms_k_hot.h — hot f32 loops compiled for AVX-512, AVX2 and the baseline,
 * picked per call by the active instruction-set level (ms_isa.h), so that
 * MS_ISA caps them as it caps the quantized kernels (target_clones would
 * follow the CPU alone). The arithmetic per element is the same in every
 * copy (no contraction in ISO C, lanes independent).
 *
 *   MS_HOT_IMPL(name)(params) { body }          the body, always inlined
 *   MS_HOT_CLONES(name, (params), (args))       static void name(params)
 *
 * Helpers the body calls should be always_inline too, so each copy gets them
 * for its target. Under AddressSanitizer one plain copy. */
#ifndef MS_K_HOT_H
#define MS_K_HOT_H

#include "ms_isa.h"

#define MS_HOT_IMPL(name) static inline __attribute__((always_inline)) void name##_impl

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && (defined(__GNUC__) || defined(__clang__))
#define MS_HOT_CLONES(name, params, args)                                                                   \
    __attribute__((target("avx512f"))) static void name##_avx512 params { name##_impl args; }               \
    __attribute__((target("avx2"))) static void name##_avx2 params { name##_impl args; }                    \
    static void name params {                                                                               \
        const ms_isa l_ = ms_isa_active();                                                                  \
        if (ms_isa_includes(l_, MS_ISA_AVX512)) name##_avx512 args;                                         \
        else if (ms_isa_includes(l_, MS_ISA_AVX2)) name##_avx2 args;                                        \
        else name##_impl args;                                                                              \
    }
#else
#define MS_HOT_CLONES(name, params, args)                                                                   \
    static void name params { name##_impl args; }
#endif

#endif
