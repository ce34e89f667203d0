/* fuzz_hfconfig — ms_hfcfg_parse on arbitrary bytes; an accepted config must
 * satisfy the invariants the model loader relies on. */
#include "ms_hfconfig.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ms_log_set_level(MS_LOG_OFF);
    ms_hfconfig c;
    if (ms_hfcfg_parse((const char *)data, size, "fuzz/config.json", &c) != MS_OK) return 0;
    MS_ASSERT(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.n_layers > 0);
    MS_ASSERT(c.n_heads > 0 && c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0);
    MS_ASSERT(c.head_dim > 0 && c.head_dim % 2 == 0 && c.rms_norm_eps > 0 && c.rope_theta > 0);
    MS_ASSERT(c.n_eos >= 0 && c.n_eos <= MS_MAX_EOS);
    for (int i = 0; i < c.n_eos; i++) MS_ASSERT(c.eos_token_ids[i] >= 0 && c.eos_token_ids[i] < c.vocab_size);
    MS_ASSERT(c.bos_token_id >= -1 && c.bos_token_id < c.vocab_size);
    return 0;
}
