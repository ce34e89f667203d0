/* fuzz_gguf — ms_gguf_open_memory on arbitrary bytes. When the image is
 * accepted, every getter is called on every key (each must answer with a
 * status, never crash), every string-array element and every byte of every
 * tensor is read, so ASan reports any view that reaches past the image. */
#include "ms_gguf.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ms_log_set_level(MS_LOG_OFF);
    ms_gguf *g = NULL;
    if (ms_gguf_open_memory(data, size, "fuzz", &g) != MS_OK) {
        MS_ASSERT(g == NULL);
        return 0;
    }
    volatile uint8_t sink = 0;
    uint64_t align = ms_gguf_alignment(g);
    MS_ASSERT(align > 0 && (align & (align - 1)) == 0);
    MS_ASSERT(ms_gguf_version(g) == 2 || ms_gguf_version(g) == 3);
    for (int64_t i = 0; i < ms_gguf_n_kv(g); i++) {
        const char *key = ms_gguf_kv_key(g, i);
        MS_ASSERT(key[0] && ms_gguf_find(g, key) == i); /* keys are unique */
        int64_t i64;
        uint32_t u32;
        uint64_t u64;
        double f64;
        bool b;
        const char *s;
        size_t len;
        ms_gguf_vtype et;
        int64_t n;
        const void *arr;
        ms_gguf_vtype t = ms_gguf_kv_type(g, i);
        MS_ASSERT((ms_gguf_get_i64(g, key, &i64) == MS_OK) <= (t != MS_GGUF_STRING && t != MS_GGUF_ARRAY));
        (void)ms_gguf_get_u32(g, key, &u32);
        (void)ms_gguf_get_u64(g, key, &u64);
        (void)ms_gguf_get_f64(g, key, &f64);
        (void)ms_gguf_get_bool(g, key, &b);
        if (ms_gguf_get_str(g, key, &s, &len) == MS_OK) {
            MS_ASSERT(strlen(s) == len);
            sink ^= (uint8_t)(len ? s[len - 1] : 0);
        }
        if (ms_gguf_get_arr(g, key, &et, &n, &arr) == MS_OK) {
            MS_ASSERT(t == MS_GGUF_ARRAY && n >= 0 && et != MS_GGUF_ARRAY);
            if (et == MS_GGUF_STRING) {
                for (int64_t j = 0; j < n; j++) {
                    MS_ASSERT(ms_gguf_arr_str(g, key, j, &s, &len) == MS_OK);
                    MS_ASSERT((const uint8_t *)s >= data && (const uint8_t *)s + len <= data + size);
                    for (size_t c = 0; c < len; c++) sink ^= (uint8_t)s[c];
                }
                MS_ASSERT(ms_gguf_arr_str(g, key, n, &s, &len) == MS_ERR_RANGE);
            } else if (n > 0) {
                const uint8_t *p = arr;
                MS_ASSERT(p >= data && p < data + size);
                sink ^= p[0];
            }
        }
    }
    for (int64_t i = 0; i < ms_gguf_n_tensors(g); i++) {
        const ms_gguf_tensor_info *ti = ms_gguf_tensor_at(g, i);
        MS_ASSERT(ms_gguf_find_tensor(g, ti->name) == ti); /* names are unique */
        MS_ASSERT(ti->ndim >= 1 && ti->ndim <= MS_TENSOR_MAX_DIMS && ti->offset % align == 0);
        const ms_gguf_tensor_info *got;
        MS_ASSERT(ms_gguf_get_tensor(g, ti->name, ti->ndim, ti->shape, &ti->dtype, 1, &got) == MS_OK && got == ti);
        const uint8_t *p = ti->data;
        /* The view must lie inside the image. */
        MS_ASSERT(ti->nbytes > 0 && p >= data && p + ti->nbytes <= data + size);
        uint8_t acc = 0;
        for (size_t b = 0; b < ti->nbytes; b++) acc ^= p[b];
        sink ^= acc;
    }
    (void)sink;
    ms_gguf_close(&g);
    return 0;
}
