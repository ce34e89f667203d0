/* png_info FILE [MIN_WIDTH MIN_HEIGHT] — checks that FILE is a real PNG
 * (tests/png_check.h: signature, IHDR with its CRC, IEND) at least
 * MIN_WIDTH × MIN_HEIGHT, and that the checker rejects damaged copies of it;
 * prints "WIDTHxHEIGHT BYTES". Exit 0 ok, 1 not a valid PNG, 2 usage. For the
 * shell-script tests (tests/test_bench.sh). */
#include <stdio.h>
#include <stdlib.h>

#include "ms_common.h"
#include "png_check.h"

int main(int argc, char **argv) {
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: png_info FILE [MIN_WIDTH MIN_HEIGHT]\n");
        return 2;
    }
    char *data = NULL;
    size_t len = 0;
    if (ms_read_file(argv[1], &data, &len) < 0) return 1;
    uint8_t *b = (uint8_t *)data;
    uint32_t w = 0, h = 0, w2, h2;
    const char *why = "";
    int rc = 0;
    if (!png_ok(b, len, &w, &h, &why)) {
        fprintf(stderr, "%s: %s\n", argv[1], why);
        rc = 1;
    } else if (argc == 4 && (w < (uint32_t)atol(argv[2]) || h < (uint32_t)atol(argv[3]))) {
        fprintf(stderr, "%s: %ux%u, smaller than %sx%s\n", argv[1], w, h, argv[2], argv[3]);
        rc = 1;
    } else {
        b[18] ^= 0x01; /* a width byte: the IHDR CRC no longer matches */
        bool damaged_ok = png_ok(b, len, &w2, &h2, &why);
        b[18] ^= 0x01;
        b[1] = 'X';
        bool sig_ok = png_ok(b, len, &w2, &h2, &why);
        if (damaged_ok || sig_ok) {
            fprintf(stderr, "%s: the checker accepted a damaged copy\n", argv[1]);
            rc = 1;
        } else {
            printf("%ux%u %zu\n", w, h, len);
        }
    }
    free(data);
    return rc;
}
