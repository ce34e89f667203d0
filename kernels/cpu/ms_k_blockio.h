/* ms_k_blockio.h — little-endian loads from ggml block bytes, which sit at any
 * byte offset of a mapped file, and the K-quants' packed scales (ms_k_quant.c
 * and the ms_k_qdot files read them). */
#ifndef MS_K_BLOCKIO_H
#define MS_K_BLOCKIO_H

#include <stdint.h>
#include <string.h>

#include "ms_tensor.h"

static inline uint16_t ld_u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static inline uint32_t ld_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline float ld_f16(const uint8_t *p) { return ms_f16_to_f32(ld_u16(p)); }

/* K-quant 6-bit scale and min of sub-block s (0..7) from scales[12]
 * (gguf Q4_K.get_scale_min): bytes 0-3 low 6 bits of sc[0..3], bytes 4-7 of
 * mn[0..3]; bytes 8-11 low/high nibbles are sc/mn[4..7] low 4 bits, whose
 * top 2 bits are the top bits of bytes 0-3 / 4-7. Q4_K and Q5_K. */
static inline void kq_scale_min(const uint8_t *sc12, int s, int *sc, int *mn) {
    if (s < 4) {
        *sc = sc12[s] & 63;
        *mn = sc12[s + 4] & 63;
    } else {
        *sc = (sc12[s + 4] & 0x0F) | ((sc12[s - 4] >> 2) & 0x30);
        *mn = (sc12[s + 4] >> 4) | ((sc12[s] >> 2) & 0x30);
    }
}

#endif
