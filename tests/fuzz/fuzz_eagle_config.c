/* fuzz_eagle_config — ms_eagle_config_parse on arbitrary bytes; an accepted
 * config must satisfy the invariants ms_eagle_load relies on. */
#include "ms_eagle.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ms_log_set_level(MS_LOG_OFF);
    ms_eagle_config c;
    if (ms_eagle_config_parse((const char *)data, size, "fuzz/config.json", &c) != MS_OK) return 0;
    const ms_hfconfig *b = &c.base;
    MS_ASSERT(b->n_layers == 1 && b->hidden_size > 0 && b->intermediate_size > 0 && b->vocab_size > 0);
    MS_ASSERT(b->n_heads > 0 && b->n_kv_heads > 0 && b->n_heads % b->n_kv_heads == 0);
    MS_ASSERT(b->head_dim * b->n_heads == b->hidden_size && b->head_dim % 2 == 0);
    MS_ASSERT(b->rms_norm_eps > 0 && b->rope_theta > 0);
    return 0;
}
