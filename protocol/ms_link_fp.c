/* ms_link_fp.c — fingerprints of GGUF models for the hello (ms_link.h).
 *
 * Tokenizer: target and draft must hold identical token lists, so the
 * fingerprint covers what decides the ids — tokenizer.ggml.model and .pre,
 * every token string with its type, every merge, the BOS/EOS ids and add_bos —
 * and not the weights: the Qwen2.5-Coder 0.5B and 1.5B files agree on it.
 * Model: the file's header (metadata and tensor table, up to the data block),
 * which names the architecture, shapes and tensor layout without reading the
 * weights.
 */
#include <stdio.h>
#include <string.h>

#include "ms_gguf.h"
#include "ms_link.h"

typedef struct {
    uint64_t h;
} fnv;

static void fnv_bytes(fnv *f, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        f->h ^= b[i];
        f->h *= 1099511628211ull;
    }
}

static void fnv_u64(fnv *f, uint64_t v) { fnv_bytes(f, &v, sizeof v); }

/* A key's value into the hash: tag, then the value (absent: a marker). */
static void fnv_key(fnv *f, const ms_gguf *g, const char *key) {
    fnv_bytes(f, key, strlen(key) + 1);
    const char *s;
    size_t len;
    int64_t i;
    bool b;
    /* by the key's own type: a getter of another type logs an error (the
     * demo's target log read "type bool, expected an integer" at start) */
    const int64_t at = ms_gguf_find(g, key);
    const ms_gguf_vtype t = at >= 0 ? ms_gguf_kv_type(g, at) : MS_GGUF_ARRAY;
    const bool is_int = t <= MS_GGUF_I32 || t == MS_GGUF_U64 || t == MS_GGUF_I64;
    if (t == MS_GGUF_STRING && ms_gguf_get_str(g, key, &s, &len) == MS_OK) fnv_bytes(f, s, len);
    else if (is_int && ms_gguf_get_i64(g, key, &i) == MS_OK) fnv_u64(f, (uint64_t)i);
    else if (t == MS_GGUF_BOOL && ms_gguf_get_bool(g, key, &b) == MS_OK) fnv_u64(f, b ? 1u : 0u);
    else fnv_u64(f, 0xA85E47ull);
}

/* Every element of a string array, each with its length. */
static ms_status fnv_str_array(fnv *f, const ms_gguf *g, const char *key) {
    ms_gguf_vtype et;
    int64_t n;
    const void *data;
    ms_status st = ms_gguf_get_arr(g, key, &et, &n, &data);
    if (st == MS_ERR_NOT_FOUND) return MS_OK;
    MS_TRY(st);
    fnv_u64(f, (uint64_t)n);
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        MS_TRY(ms_gguf_arr_str(g, key, i, &s, &len));
        fnv_u64(f, len);
        fnv_bytes(f, s, len);
    }
    return MS_OK;
}

static void hex(const fnv *f, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)f->h); }

ms_status ms_link_fingerprint_gguf_tokens(const char *path, char out[17]) {
    ms_gguf *g;
    MS_TRY(ms_gguf_open(path, &g));
    fnv f = {1469598103934665603ull};
    static const char *const keys[] = {"tokenizer.ggml.model",        "tokenizer.ggml.pre",
                                       "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) fnv_key(&f, g, keys[i]);
    ms_status st = fnv_str_array(&f, g, "tokenizer.ggml.tokens");
    if (st == MS_OK) st = fnv_str_array(&f, g, "tokenizer.ggml.merges");
    if (st == MS_OK) {
        ms_gguf_vtype et;
        int64_t n;
        const void *data;
        if (ms_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n, &data) == MS_OK && et == MS_GGUF_I32)
            fnv_bytes(&f, data, (size_t)n * 4);
    }
    ms_gguf_close(&g);
    MS_TRY(st);
    hex(&f, out);
    return MS_OK;
}

ms_status ms_link_fingerprint_gguf_model(const char *path, char out[17]) {
    ms_gguf *g;
    MS_TRY(ms_gguf_open(path, &g));
    fnv f = {1469598103934665603ull};
    /* the header: every key's name and type, every tensor's name, type, shape and offset */
    for (int64_t i = 0; i < ms_gguf_n_kv(g); i++) {
        const char *k = ms_gguf_kv_key(g, i);
        fnv_bytes(&f, k, strlen(k) + 1);
        fnv_u64(&f, (uint64_t)ms_gguf_kv_type(g, i));
    }
    for (int64_t i = 0; i < ms_gguf_n_tensors(g); i++) {
        const ms_gguf_tensor_info *t = ms_gguf_tensor_at(g, i);
        fnv_bytes(&f, t->name, strlen(t->name) + 1);
        fnv_u64(&f, t->ggml_type);
        for (int d = 0; d < t->ndim; d++) fnv_u64(&f, (uint64_t)t->ne[d]);
        fnv_u64(&f, t->offset);
    }
    ms_gguf_close(&g);
    hex(&f, out);
    return MS_OK;
}
