/* A fuzz target with a crash that fuzzing itself will not find in seconds:
 * the input whose FNV-1a hash is K (planted, as if found once by a run). */
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 1099511628211ull;
    if (n == 12 && h == 0x9b52ae7f39a0675aull) __builtin_trap();
    return 0;
}
