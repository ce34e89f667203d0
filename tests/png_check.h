/* png_check.h — the tests' PNG checker (header-only): is a file a real PNG,
 * and what are its dimensions. Used by test_coverage.c and png_info.c. */
#ifndef MS_TESTS_PNG_CHECK_H
#define MS_TESTS_PNG_CHECK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t ms_png_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint32_t ms_png_crc32(const uint8_t *p, size_t n) { /* ISO 3309 / PNG spec annex D */
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

/* A real PNG: signature, IHDR first (length 13, CRC ok, width/height > 0,
 * a valid bit depth / colour type), IEND last. Returns false with a reason. */
static inline bool png_ok(const uint8_t *b, size_t n, uint32_t *w, uint32_t *h, const char **why) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 8 + 25 + 12 || memcmp(b, sig, 8) != 0) return *why = "no PNG signature", false;
    if (ms_png_be32(b + 8) != 13 || memcmp(b + 12, "IHDR", 4) != 0) return *why = "first chunk is not a 13-byte IHDR", false;
    if (ms_png_crc32(b + 12, 17) != ms_png_be32(b + 29)) return *why = "IHDR CRC mismatch", false;
    *w = ms_png_be32(b + 16), *h = ms_png_be32(b + 20);
    if (*w == 0 || *h == 0 || *w > 100000 || *h > 100000) return *why = "bad width/height", false;
    uint8_t depth = b[24], colour = b[25];
    if (!(depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16) || colour > 6 || colour == 1 ||
        colour == 5)
        return *why = "bad bit depth / colour type", false;
    const uint8_t *e = b + n - 12;
    if (ms_png_be32(e) != 0 || memcmp(e + 4, "IEND", 4) != 0 || ms_png_be32(e + 8) != 0xae426082u)
        return *why = "no IEND chunk at the end", false;
    return true;
}

#endif
