/* fuzz_safetensors — ms_st_open_memory on arbitrary bytes. When the image is
 * accepted, every byte of every tensor view is read, so ASan reports any view
 * that reaches past the image. */
#include "ms_safetensors.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ms_log_set_level(MS_LOG_OFF);
    ms_st_model *m = NULL;
    if (ms_st_open_memory(data, size, "fuzz", &m) != MS_OK) {
        MS_ASSERT(m == NULL);
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < ms_st_count(m); i++) {
        const char *name = ms_st_name(m, i);
        ms_tensor t;
        MS_ASSERT(ms_st_find(m, name, &t));
        MS_ASSERT(ms_st_file_of(m, name) != NULL);
        size_t n = ms_tensor_nbytes(&t);
        const uint8_t *p = t.data;
        /* The view must lie inside the image. */
        MS_ASSERT(n == 0 || (p >= data && p + n <= data + size));
        uint8_t acc = 0;
        for (size_t b = 0; b < n; b++) acc ^= p[b];
        sink ^= acc;
        if (i > 0) MS_ASSERT(strcmp(ms_st_name(m, i - 1), name) < 0);
    }
    (void)sink;
    ms_st_close(&m);
    return 0;
}
