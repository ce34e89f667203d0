/* fuzz_wire — ms_wire_decode on arbitrary frames. Input: byte 0 = (tensor
 * bytes / 4) << 1 | has_tensor; the tensor frame is the last (byte0 >> 1)·4
 * bytes, frame 0 the bytes between. A message that decodes must encode again
 * (the decoder accepts nothing the encoder refuses), decode to the same fields,
 * and re-encode to the same bytes (the encoding is canonical). */
#include "ms_wire.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ms_wire_arena *a1, *a2;
    static ms_wire_buf b1, b2;
    if (!a1) {
        ms_log_set_level(MS_LOG_OFF);
        MS_ASSERT(ms_wire_arena_new(1 << 16, &a1) == MS_OK && ms_wire_arena_new(1 << 16, &a2) == MS_OK);
    }
    if (size < 1) return 0;
    bool has_tensor = data[0] & 1;
    size_t tlen = (size_t)(data[0] >> 1) * 4;
    if (tlen > size - 1) tlen = size - 1;
    size_t clen = size - 1 - tlen;
    const uint8_t *ctrl = data + 1, *tensor = data + 1 + clen;

    ms_wire_msg m1, m2;
    if (ms_wire_decode(ctrl, clen, has_tensor ? tensor : NULL, has_tensor ? tlen : 0, has_tensor, a1, &m1) != MS_OK)
        return 0;
    const void *tp = NULL;
    size_t tb = 0;
    MS_ASSERT(ms_wire_encode(&m1, &b1, &tp, &tb) == MS_OK);
    MS_ASSERT(ms_wire_decode(b1.data, b1.len, tp, tb, tp != NULL, a2, &m2) == MS_OK);
    char why[128];
    if (!ms_wire_msg_equal(&m1, &m2, why, sizeof(why))) {
        ms_log_set_level(MS_LOG_ERROR);
        MS_LOG_ERROR("fuzz_wire: round trip changed %s", why);
        MS_ASSERT(!"round trip changed a field");
    }
    MS_ASSERT(ms_wire_encode(&m2, &b2, &tp, &tb) == MS_OK);
    MS_ASSERT(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);
    return 0;
}
