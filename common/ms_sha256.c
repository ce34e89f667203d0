/* ms_sha256.c — SHA-256 of a file (ms_common.h), for artefacts that name the
 * model they belong to. libsodium's crypto_hash_sha256, fed in chunks so a
 * multi-GB model never sits in memory. */
#include "ms_common.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ms_status ms_sha256_file(const char *path, char hex[65]) {
    enum { CHUNK = 1 << 20 };
    FILE *f = fopen(path, "rb");
    if (!f) MS_FAIL(MS_ERR_IO, "sha256: cannot open %s: %s", path, strerror(errno));
    unsigned char *buf = ms_malloc(CHUNK);
    if (!buf) {
        fclose(f);
        return MS_ERR_NOMEM;
    }
    if (sodium_init() < 0) { /* idempotent; needed once for the CPU-feature picks */
        fclose(f);
        free(buf);
        MS_FAIL(MS_ERR_INTERNAL, "sha256: libsodium failed to initialise");
    }
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    size_t got;
    while ((got = fread(buf, 1, CHUNK, f)) > 0) crypto_hash_sha256_update(&st, buf, got);
    const bool bad = ferror(f) != 0;
    fclose(f);
    free(buf);
    if (bad) MS_FAIL(MS_ERR_IO, "sha256: read error in %s", path);
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    for (int i = 0; i < (int)sizeof h; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
    return MS_OK;
}
