/* ms_k_blockio.h — little-endian loads from ggml block bytes, which sit at any
 * byte offset of a mapped file (ms_k_quant.c and ms_k_qdot.c read them). */
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

#endif
