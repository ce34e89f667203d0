/* fuzz_vocab_list — ms_vocab_parse_list on arbitrary bytes. The first two
 * bytes pick V in [1, 65536]; an accepted list must hold 1 ≤ k ≤ V distinct
 * ids in [0, V), and its canonical text must parse back to the same list. */
#include "ms_vocab.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ms_log_set_level(MS_LOG_OFF);
    if (size < 2) return 0;
    int64_t V = 1 + (int64_t)(data[0] | (data[1] << 8));
    int32_t *ids = NULL;
    int64_t k = 0;
    if (ms_vocab_parse_list((const char *)data + 2, size - 2, "fuzz.vocab", V, &ids, &k) != MS_OK) {
        MS_ASSERT(ids == NULL);
        return 0;
    }
    MS_ASSERT(k >= 1 && k <= V);
    uint8_t *seen = calloc((size_t)V, 1);
    size_t cap = (size_t)k * 12 + 64, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text, cap, "# microspec-vocab v1 k=%lld\n", (long long)k);
    for (int64_t i = 0; i < k; i++) {
        MS_ASSERT(ids[i] >= 0 && ids[i] < V && !seen[ids[i]]);
        seen[ids[i]] = 1;
        len += (size_t)snprintf(text + len, cap - len, "%d\n", ids[i]);
    }
    int32_t *again = NULL;
    int64_t k2 = 0;
    MS_ASSERT(ms_vocab_parse_list(text, len, "canonical", V, &again, &k2) == MS_OK);
    MS_ASSERT(k2 == k && memcmp(again, ids, (size_t)k * sizeof(int32_t)) == 0);
    free(again);
    free(text);
    free(seen);
    free(ids);
    return 0;
}
