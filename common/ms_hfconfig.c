/* ms_hfconfig.c — Hugging Face config.json for Llama / Qwen2 / Qwen3.
 *
 * Field names and defaults follow transformers' LlamaConfig, Qwen2Config and
 * Qwen3Config. A missing required field is MS_ERR_NOT_FOUND, a field of the
 * wrong JSON type or an inconsistent value MS_ERR_FORMAT, a value past our
 * sanity bounds MS_ERR_RANGE, an architecture / rope type / activation we do
 * not implement MS_ERR_UNSUPPORTED. Every message names the file and field.
 */
#include "ms_hfconfig.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sanity bounds: far above any supported model, low enough that products of
 * them (vocab · hidden, layers · kv · head_dim · ctx) cannot overflow int64. */
#define CFG_MAX_VOCAB ((int64_t)1 << 24)
#define CFG_MAX_HIDDEN 65536
#define CFG_MAX_FFN ((int64_t)1 << 20)
#define CFG_MAX_LAYERS 1024
#define CFG_MAX_HEADS 1024
#define CFG_MAX_HEAD_DIM 1024
#define CFG_MAX_POS ((int64_t)1 << 26)

static const struct {
    const char *arch;
    const char *model_type;
    ms_arch id;
} arch_table[] = {
    {"LlamaForCausalLM", "llama", MS_ARCH_LLAMA},
    {"Qwen2ForCausalLM", "qwen2", MS_ARCH_QWEN2},
    {"Qwen3ForCausalLM", "qwen3", MS_ARCH_QWEN3},
};
#define N_ARCH ((int)(sizeof arch_table / sizeof *arch_table))

/* ---- typed field readers: absent (or null) → *present = false ------------ */

/* Integer field in [1, max]. Required fields fail with NOT_FOUND when absent. */
static ms_status get_pos_int(const json_t *root, const char *name, const char *key, int64_t max, bool required,
                             bool *present, int64_t *out) {
    const json_t *v = json_object_get(root, key);
    if (present) *present = false;
    if (!v || json_is_null(v)) {
        if (required) MS_FAIL(MS_ERR_NOT_FOUND, "%s: required field '%s' missing", name, key);
        return MS_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        MS_FAIL(MS_ERR_FORMAT, "%s: field '%s' must be a positive integer", name, key);
    if (json_integer_value(v) > max)
        MS_FAIL(MS_ERR_RANGE, "%s: field '%s' = %lld is over the limit %lld", name, key,
                (long long)json_integer_value(v), (long long)max);
    *out = (int64_t)json_integer_value(v);
    if (present) *present = true;
    return MS_OK;
}

/* Finite number > 0 (an integer literal is accepted: "rope_theta": 10000). */
static ms_status get_pos_real(const json_t *obj, const char *name, const char *key, bool required, double *out) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) MS_FAIL(MS_ERR_NOT_FOUND, "%s: required field '%s' missing", name, key);
        return MS_OK;
    }
    if (!json_is_number(v)) MS_FAIL(MS_ERR_FORMAT, "%s: field '%s' must be a number", name, key);
    double x = json_number_value(v);
    if (!isfinite(x) || x <= 0) MS_FAIL(MS_ERR_FORMAT, "%s: field '%s' must be a positive number", name, key);
    *out = x;
    return MS_OK;
}

static ms_status get_bool(const json_t *root, const char *name, const char *key, bool *out) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return MS_OK;
    if (!json_is_boolean(v)) MS_FAIL(MS_ERR_FORMAT, "%s: field '%s' must be true or false", name, key);
    *out = json_is_true(v);
    return MS_OK;
}

/* A token id: integer in [0, vocab). */
static ms_status token_id(const json_t *v, const char *name, const char *key, int64_t vocab, int32_t *out) {
    if (!json_is_integer(v)) MS_FAIL(MS_ERR_FORMAT, "%s: field '%s' must be a token id (integer)", name, key);
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= vocab)
        MS_FAIL(MS_ERR_RANGE, "%s: field '%s' = %lld outside the vocabulary [0, %lld)", name, key, (long long)x,
                (long long)vocab);
    *out = (int32_t)x;
    return MS_OK;
}

/* ---- sections -------------------------------------------------------------- */

static ms_status parse_arch(const json_t *root, const char *name, ms_hfconfig *c) {
    const json_t *a = json_object_get(root, "architectures");
    const char *arch = NULL;
    if (a && !json_is_null(a)) {
        if (!json_is_array(a) || json_array_size(a) < 1 || !json_is_string(json_array_get(a, 0)))
            MS_FAIL(MS_ERR_FORMAT, "%s: field 'architectures' must be a non-empty list of strings", name);
        arch = json_string_value(json_array_get(a, 0));
        for (int i = 0; i < N_ARCH; i++) {
            if (!strcmp(arch, arch_table[i].arch)) {
                c->arch = arch_table[i].id;
                snprintf(c->arch_name, sizeof c->arch_name, "%s", arch);
                return MS_OK;
            }
        }
        MS_FAIL(MS_ERR_UNSUPPORTED,
                "%s: architecture '%s' is not supported (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)",
                name, arch);
    }
    /* No "architectures": fall back on model_type, as transformers' Auto classes do. */
    const json_t *mt = json_object_get(root, "model_type");
    if (!mt) MS_FAIL(MS_ERR_NOT_FOUND, "%s: required field 'architectures' missing", name);
    if (!json_is_string(mt)) MS_FAIL(MS_ERR_FORMAT, "%s: field 'model_type' must be a string", name);
    for (int i = 0; i < N_ARCH; i++) {
        if (!strcmp(json_string_value(mt), arch_table[i].model_type)) {
            c->arch = arch_table[i].id;
            snprintf(c->arch_name, sizeof c->arch_name, "%s", arch_table[i].arch);
            return MS_OK;
        }
    }
    MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model_type '%s' is not supported (llama, qwen2, qwen3)", name,
            json_string_value(mt));
}

static ms_status parse_rope_scaling(const json_t *root, const char *name, ms_hfconfig *c) {
    const json_t *rs = json_object_get(root, "rope_scaling");
    c->rope_scaling.type = MS_ROPE_DEFAULT;
    if (!rs || json_is_null(rs)) return MS_OK;
    if (!json_is_object(rs)) MS_FAIL(MS_ERR_FORMAT, "%s: field 'rope_scaling' must be an object or null", name);
    const json_t *t = json_object_get(rs, "rope_type");
    if (!t) t = json_object_get(rs, "type");
    if (!json_is_string(t)) MS_FAIL(MS_ERR_FORMAT, "%s: field 'rope_scaling.rope_type' must be a string", name);
    const char *type = json_string_value(t);
    if (!strcmp(type, "default")) return MS_OK;
    if (strcmp(type, "llama3"))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: rope_scaling type '%s' is not supported (default, llama3)", name, type);
    c->rope_scaling.type = MS_ROPE_LLAMA3;
    MS_TRY(get_pos_real(rs, name, "factor", true, &c->rope_scaling.factor));
    MS_TRY(get_pos_real(rs, name, "low_freq_factor", true, &c->rope_scaling.low_freq_factor));
    MS_TRY(get_pos_real(rs, name, "high_freq_factor", true, &c->rope_scaling.high_freq_factor));
    MS_TRY(get_pos_int(rs, name, "original_max_position_embeddings", CFG_MAX_POS, true, NULL,
                       &c->rope_scaling.original_max_position_embeddings));
    /* Llama 3 smooths between the two wavelengths: needs high > low. */
    if (!(c->rope_scaling.high_freq_factor > c->rope_scaling.low_freq_factor))
        MS_FAIL(MS_ERR_FORMAT, "%s: rope_scaling: high_freq_factor (%g) must be above low_freq_factor (%g)", name,
                c->rope_scaling.high_freq_factor, c->rope_scaling.low_freq_factor);
    return MS_OK;
}

static ms_status parse_tokens(const json_t *root, const char *name, ms_hfconfig *c) {
    c->bos_token_id = -1;
    c->n_eos = 0;
    const json_t *b = json_object_get(root, "bos_token_id");
    if (b && !json_is_null(b)) MS_TRY(token_id(b, name, "bos_token_id", c->vocab_size, &c->bos_token_id));
    const json_t *e = json_object_get(root, "eos_token_id");
    if (!e || json_is_null(e)) return MS_OK;
    if (json_is_array(e)) {
        size_t n = json_array_size(e);
        if (n > MS_MAX_EOS)
            MS_FAIL(MS_ERR_RANGE, "%s: field 'eos_token_id' lists %zu ids (at most %d)", name, n, MS_MAX_EOS);
        for (size_t i = 0; i < n; i++)
            MS_TRY(token_id(json_array_get(e, i), name, "eos_token_id", c->vocab_size, &c->eos_token_ids[i]));
        c->n_eos = (int)n;
        return MS_OK;
    }
    MS_TRY(token_id(e, name, "eos_token_id", c->vocab_size, &c->eos_token_ids[0]));
    c->n_eos = 1;
    return MS_OK;
}

static ms_status parse_root(const json_t *root, const char *name, ms_hfconfig *c) {
    if (!json_is_object(root)) MS_FAIL(MS_ERR_FORMAT, "%s: not a JSON object", name);
    MS_TRY(parse_arch(root, name, c));

    MS_TRY(get_pos_int(root, name, "vocab_size", CFG_MAX_VOCAB, true, NULL, &c->vocab_size));
    MS_TRY(get_pos_int(root, name, "hidden_size", CFG_MAX_HIDDEN, true, NULL, &c->hidden_size));
    MS_TRY(get_pos_int(root, name, "intermediate_size", CFG_MAX_FFN, true, NULL, &c->intermediate_size));
    MS_TRY(get_pos_int(root, name, "num_hidden_layers", CFG_MAX_LAYERS, true, NULL, &c->n_layers));
    MS_TRY(get_pos_int(root, name, "num_attention_heads", CFG_MAX_HEADS, true, NULL, &c->n_heads));
    MS_TRY(get_pos_real(root, name, "rms_norm_eps", true, &c->rms_norm_eps));
    if (c->rms_norm_eps >= 1) MS_FAIL(MS_ERR_RANGE, "%s: field 'rms_norm_eps' = %g must be below 1", name, c->rms_norm_eps);

    bool have;
    c->n_kv_heads = c->n_heads;
    MS_TRY(get_pos_int(root, name, "num_key_value_heads", CFG_MAX_HEADS, false, NULL, &c->n_kv_heads));
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0)
        MS_FAIL(MS_ERR_FORMAT, "%s: num_attention_heads (%lld) must be a multiple of num_key_value_heads (%lld)", name,
                (long long)c->n_heads, (long long)c->n_kv_heads);
    MS_TRY(get_pos_int(root, name, "head_dim", CFG_MAX_HEAD_DIM, false, &have, &c->head_dim));
    if (!have) {
        if (c->hidden_size % c->n_heads != 0)
            MS_FAIL(MS_ERR_FORMAT, "%s: hidden_size (%lld) must be a multiple of num_attention_heads (%lld) "
                    "when head_dim is absent", name, (long long)c->hidden_size, (long long)c->n_heads);
        c->head_dim = c->hidden_size / c->n_heads;
        if (c->head_dim > CFG_MAX_HEAD_DIM)
            MS_FAIL(MS_ERR_RANGE, "%s: head_dim %lld (hidden_size / num_attention_heads) over the limit %d", name,
                    (long long)c->head_dim, CFG_MAX_HEAD_DIM);
    }
    if (c->head_dim % 2 != 0) MS_FAIL(MS_ERR_FORMAT, "%s: head_dim %lld must be even (RoPE)", name, (long long)c->head_dim);

    c->max_position_embeddings = 2048;
    MS_TRY(get_pos_int(root, name, "max_position_embeddings", CFG_MAX_POS, false, NULL, &c->max_position_embeddings));
    c->rope_theta = 10000.0;
    MS_TRY(get_pos_real(root, name, "rope_theta", false, &c->rope_theta));
    c->tie_word_embeddings = false;
    MS_TRY(get_bool(root, name, "tie_word_embeddings", &c->tie_word_embeddings));
    c->attention_bias = false;
    MS_TRY(get_bool(root, name, "attention_bias", &c->attention_bias));
    if (c->arch == MS_ARCH_QWEN2) c->attention_bias = true; /* Qwen2Attention: q/k/v always biased */
    c->qk_norm = c->arch == MS_ARCH_QWEN3;

    const json_t *act = json_object_get(root, "hidden_act");
    if (act && !json_is_null(act)) {
        if (!json_is_string(act)) MS_FAIL(MS_ERR_FORMAT, "%s: field 'hidden_act' must be a string", name);
        if (strcmp(json_string_value(act), "silu"))
            MS_FAIL(MS_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported (silu)", name, json_string_value(act));
    }
    /* transformers ≥ 4.56 writes "dtype"; older ones "torch_dtype". */
    const char *dkey = "torch_dtype";
    const json_t *dt = json_object_get(root, dkey);
    if (!dt || json_is_null(dt)) dt = json_object_get(root, dkey = "dtype");
    if (dt && !json_is_null(dt)) {
        if (!json_is_string(dt) || json_string_length(dt) >= sizeof c->torch_dtype)
            MS_FAIL(MS_ERR_FORMAT, "%s: field '%s' must be a dtype name such as \"bfloat16\"", name, dkey);
        snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", json_string_value(dt));
    }
    MS_TRY(parse_rope_scaling(root, name, c));
    MS_TRY(parse_tokens(root, name, c));
    return MS_OK;
}

ms_status ms_hfcfg_parse(const char *json, size_t len, const char *name, ms_hfconfig *out) {
    memset(out, 0, sizeof *out);
    if (!name) name = "config.json";
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (!root) MS_FAIL(MS_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", name, jerr.text, jerr.line,
                       jerr.column);
    ms_hfconfig c;
    memset(&c, 0, sizeof c);
    ms_status st = parse_root(root, name, &c);
    json_decref(root);
    if (st == MS_OK) *out = c;
    return st;
}

ms_status ms_hfcfg_load(const char *path, ms_hfconfig *out) {
    char *text;
    size_t len;
    memset(out, 0, sizeof *out);
    MS_TRY(ms_read_file(path, &text, &len));
    ms_status st = ms_hfcfg_parse(text, len, path, out);
    free(text);
    return st;
}

/* ---- writer ----------------------------------------------------------------- */

/* Fewest significant digits (≤ 17) that print x so it reads back exactly. */
static int round_trip_digits(double x) {
    /* At least every integer digit, so 10000 prints "10000.0", not "1e4". */
    int p0 = 1;
    for (double a = fabs(x); a >= 10 && p0 < 16; a /= 10) p0++;
    for (int p = p0; p < 17; p++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.*g", p, x);
        if (strtod(buf, NULL) == x) return p;
    }
    return 17;
}

static void put_real(json_t *obj, const char *key, double x, int *digits) {
    int d = round_trip_digits(x);
    if (d > *digits) *digits = d;
    json_object_set_new(obj, key, json_real(x));
}

ms_status ms_hfcfg_write(const char *path, const ms_hfconfig *c) {
    int ai = -1;
    for (int i = 0; i < N_ARCH; i++)
        if (arch_table[i].id == c->arch) ai = i;
    if (ai < 0) MS_FAIL(MS_ERR_INVALID, "%s: unknown architecture id %d", path, (int)c->arch);
    if (c->n_eos < 0 || c->n_eos > MS_MAX_EOS) MS_FAIL(MS_ERR_INVALID, "%s: n_eos %d out of range", path, c->n_eos);

    int digits = 1;
    json_t *o = json_object();
    json_t *archs = json_array();
    json_array_append_new(archs, json_string(arch_table[ai].arch));
    json_object_set_new(o, "architectures", archs);
    json_object_set_new(o, "model_type", json_string(arch_table[ai].model_type));
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
    json_object_set_new(o, "hidden_size", json_integer(c->hidden_size));
    json_object_set_new(o, "intermediate_size", json_integer(c->intermediate_size));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->n_layers));
    json_object_set_new(o, "num_attention_heads", json_integer(c->n_heads));
    json_object_set_new(o, "num_key_value_heads", json_integer(c->n_kv_heads));
    json_object_set_new(o, "head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "max_position_embeddings", json_integer(c->max_position_embeddings));
    put_real(o, "rms_norm_eps", c->rms_norm_eps, &digits);
    put_real(o, "rope_theta", c->rope_theta, &digits);
    if (c->rope_scaling.type == MS_ROPE_LLAMA3) {
        json_t *rs = json_object();
        json_object_set_new(rs, "rope_type", json_string("llama3"));
        put_real(rs, "factor", c->rope_scaling.factor, &digits);
        put_real(rs, "low_freq_factor", c->rope_scaling.low_freq_factor, &digits);
        put_real(rs, "high_freq_factor", c->rope_scaling.high_freq_factor, &digits);
        json_object_set_new(rs, "original_max_position_embeddings",
                            json_integer(c->rope_scaling.original_max_position_embeddings));
        json_object_set_new(o, "rope_scaling", rs);
    } else {
        json_object_set_new(o, "rope_scaling", json_null());
    }
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
    if (c->arch != MS_ARCH_QWEN2) json_object_set_new(o, "attention_bias", json_boolean(c->attention_bias));
    if (c->arch == MS_ARCH_QWEN2) json_object_set_new(o, "use_sliding_window", json_false());
    put_real(o, "attention_dropout", 0.0, &digits);
    put_real(o, "initializer_range", 0.02, &digits);
    json_object_set_new(o, "use_cache", json_true());
    if (c->bos_token_id >= 0) json_object_set_new(o, "bos_token_id", json_integer(c->bos_token_id));
    if (c->n_eos == 1) {
        json_object_set_new(o, "eos_token_id", json_integer(c->eos_token_ids[0]));
    } else if (c->n_eos > 1) {
        json_t *e = json_array();
        for (int i = 0; i < c->n_eos; i++) json_array_append_new(e, json_integer(c->eos_token_ids[i]));
        json_object_set_new(o, "eos_token_id", e);
    }
    if (c->torch_dtype[0]) json_object_set_new(o, "torch_dtype", json_string(c->torch_dtype));

    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(digits));
    json_decref(o);
    if (!text) MS_FAIL(MS_ERR_NOMEM, "%s: cannot serialise the configuration", path);
    size_t len = strlen(text);
    /* Never write a config the loader would refuse. */
    ms_hfconfig check;
    ms_status st = ms_hfcfg_parse(text, len, path, &check);
    if (st < 0) {
        free(text);
        return st;
    }
    char *buf = ms_malloc(len + 2);
    if (!buf) {
        free(text);
        return MS_ERR_NOMEM;
    }
    memcpy(buf, text, len);
    buf[len] = '\n';
    free(text);
    st = ms_write_file_atomic(path, buf, len + 1);
    free(buf);
    return st;
}

void ms_hfcfg_log(const ms_hfconfig *c) {
    char eos[128] = "";
    size_t k = 0;
    for (int i = 0; i < c->n_eos && k < sizeof eos; i++)
        k += (size_t)snprintf(eos + k, sizeof eos - k, "%s%d", i ? "," : "", (int)c->eos_token_ids[i]);
    char rope[160] = "";
    if (c->rope_scaling.type == MS_ROPE_LLAMA3)
        snprintf(rope, sizeof rope, " rope=llama3(factor %g, low %g, high %g, orig %lld)", c->rope_scaling.factor,
                 c->rope_scaling.low_freq_factor, c->rope_scaling.high_freq_factor,
                 (long long)c->rope_scaling.original_max_position_embeddings);
    MS_LOG_INFO("%s: vocab %lld, d %lld, ffn %lld, layers %lld, heads %lld/%lld kv, head_dim %lld, max_pos %lld, "
                "eps %g, theta %g%s%s%s%s, bos %d, eos [%s]%s%s",
                c->arch_name, (long long)c->vocab_size, (long long)c->hidden_size, (long long)c->intermediate_size,
                (long long)c->n_layers, (long long)c->n_heads, (long long)c->n_kv_heads, (long long)c->head_dim,
                (long long)c->max_position_embeddings, c->rms_norm_eps, c->rope_theta, rope,
                c->tie_word_embeddings ? ", tied" : "", c->attention_bias ? ", qkv bias" : "",
                c->qk_norm ? ", qk norm" : "", (int)c->bos_token_id, eos, c->torch_dtype[0] ? ", " : "",
                c->torch_dtype);
}
