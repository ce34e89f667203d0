/* ms_k_random.h — the seeded weight generator of ms_model_new_random,
 * shared by the host (model/ms_model.c, CPU models) and the device
 * (ms_k_cuda_runtime.cu, CUDA models) so both make the same weights.
 *
 * Element i of a tensor with seed s: four 24-bit uniforms u_j ∈ [0, 1) from
 * splitmix64(s ⊕ golden·(4i + j)); their sum minus 2 is an Irwin–Hall(4)
 * variate with mean 0 and variance 1/3, so
 *     w_i = offset + scale · √3 · (u_0 + u_1 + u_2 + u_3 − 2)
 * has mean `offset` and standard deviation `scale` ("normal-ish", bounded by
 * ±2√3·scale). Every step is exact in integers or in f32 with one rounding
 * per operation, in this order, on both sides (no contraction: the device
 * side uses __fmul_rn/__fadd_rn), so host and device agree bit for bit in f32.
 * Plain C and CUDA; no CUDA header needed. */
#ifndef MS_K_RANDOM_H
#define MS_K_RANDOM_H

#include <stdint.h>

#ifdef __CUDACC__
#define MS_K_RANDOM_FN __host__ __device__ static inline
#else
#define MS_K_RANDOM_FN static inline
#endif

MS_K_RANDOM_FN uint64_t ms_k_random_mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

MS_K_RANDOM_FN float ms_k_random_value(uint64_t seed, int64_t i, float scale, float offset) {
    float s = 0.0f;
    for (int j = 0; j < 4; j++) {
        uint64_t h = ms_k_random_mix(seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(4 * i + j)));
        float u = (float)(uint32_t)(h >> 40) * (1.0f / 16777216.0f); /* exact: 24 bits × 2^-24 */
#ifdef __CUDA_ARCH__
        s = __fadd_rn(s, u);
#else
        s = s + u;
#endif
    }
#ifdef __CUDA_ARCH__
    return __fadd_rn(offset, __fmul_rn(__fmul_rn(scale, 1.7320508f), __fadd_rn(s, -2.0f)));
#else
    /* separate statements: clang contracts a*b + c inside one expression */
    const float a = scale * 1.7320508f;
    const float c = s + -2.0f;
    const float p = a * c;
    return offset + p;
#endif
}

#endif
