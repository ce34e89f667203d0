/* ms_k_qdot_avxvnni.c — the AVX2 kernels (ms_k_qdot_avx2.c) compiled again
 * with AVX-VNNI's vpdpbusd and vpdpwssd for their integer products (Intel
 * client cores since Alder Lake, Xeons since Sapphire Rapids, AMD Zen 5):
 * the same layouts, the same integer sums, the twin's bits; chosen where the
 * active level includes avxvnni (ms_isa.h). */
#define Q2_VNNI 1
#include "ms_k_qdot_avx2.c"
