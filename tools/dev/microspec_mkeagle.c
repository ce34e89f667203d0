/* microspec-mkeagle — a seeded random EAGLE-1/2 draft head for a target model folder (tests).
 *
 *   microspec-mkeagle --target DIR --out DIR [options]   (--help lists them)
 *
 * Reads the target's config.json for hidden size, vocabulary, eps, heads and
 * RoPE, and writes OUT/config.json (LlamaForCausalLM-style, one layer, EAGLE's
 * "bias" / "qkv_bias") and OUT/model.safetensors with the tensor names of
 * eagle2-frspec-notes §1.2. Weights come from one ms_rng stream in tensor order
 * (same arguments → byte-identical files):
 *   matrices N(0,1) / sqrt(fan_in), norm 1 + 0.1·N(0,1), biases 0.1·N(0,1).
 */
#include "ms_hfconfig.h"
#include "ms_safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#define MAX_TENSORS 16

typedef enum { INIT_MATRIX, INIT_NORM, INIT_BIAS } init_kind;

typedef struct {
    int64_t n;
    const char *names[MAX_TENSORS];
    ms_tensor t[MAX_TENSORS];
} tensor_list;

static void usage(FILE *f) {
    fprintf(f,
            "usage: microspec-mkeagle --target DIR --out DIR [options]\n"
            "Writes a seeded random EAGLE-1/2 draft head (config.json + model.safetensors) matching the\n"
            "target model's hidden size and vocabulary, for tests.\n"
            "  --seed N             random seed (default 1)\n"
            "  --dtype f32|bf16|f16 weight dtype (default f32)\n"
            "  --ffn N              MLP intermediate size (default: the target's)\n"
            "  --heads N            attention heads (default: the target's; must divide the hidden size)\n"
            "  --kv-heads N         key/value heads (default: the target's; with --heads: = heads)\n"
            "  --fc-bias 0|1        write fc.bias and \"bias\": true (default 1)\n"
            "  --qkv-bias 0|1       write q/k/v_proj biases and \"qkv_bias\": true (default 0)\n"
            "  --theta F            rope_theta (default: the target's; its llama3 rope_scaling is copied)\n");
}

static void list_free(tensor_list *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->t[i].data);
    l->n = 0;
}

/* Append `name`: a [rows, cols] matrix, or a [cols] vector when vec. */
static ms_status add(tensor_list *l, ms_rng *rng, ms_dtype dt, init_kind kind, bool vec, int64_t rows, int64_t cols,
                     const char *name) {
    MS_ASSERT(l->n < MAX_TENSORS);
    if (vec) rows = 1;
    int64_t n = rows * cols;
    float *f = ms_malloc((size_t)n * sizeof *f);
    void *buf = ms_malloc((size_t)n * ms_dtype_size(dt));
    if (!f || !buf) {
        free(f);
        free(buf);
        return MS_ERR_NOMEM;
    }
    float scale = kind == INIT_MATRIX ? (float)(1.0 / sqrt((double)cols)) : 0.1f;
    for (int64_t i = 0; i < n; i++) f[i] = (kind == INIT_NORM ? 1.0f : 0.0f) + scale * ms_rng_normal(rng);
    ms_convert_from_f32(buf, dt, f, n);
    free(f);
    int64_t shape[2] = {rows, cols};
    l->names[l->n] = name;
    l->t[l->n] = vec ? ms_tensor_view(buf, dt, 1, &cols) : ms_tensor_view(buf, dt, 2, shape);
    l->n++;
    return MS_OK;
}

typedef struct {
    int64_t d, ffn, heads, kv_heads, vocab;
    bool fc_bias, qkv_bias;
} head_shape;

static ms_status build_tensors(const head_shape *h, ms_dtype dt, uint64_t seed, tensor_list *l) {
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    int64_t d = h->d, hd = h->d / h->heads, kv = h->kv_heads * hd;
    MS_TRY(add(l, &rng, dt, INIT_MATRIX, false, d, 2 * d, "fc.weight"));
    if (h->fc_bias) MS_TRY(add(l, &rng, dt, INIT_BIAS, true, 1, d, "fc.bias"));
    MS_TRY(add(l, &rng, dt, INIT_MATRIX, false, d, d, "layers.0.self_attn.q_proj.weight"));
    MS_TRY(add(l, &rng, dt, INIT_MATRIX, false, kv, d, "layers.0.self_attn.k_proj.weight"));
    MS_TRY(add(l, &rng, dt, INIT_MATRIX, false, kv, d, "layers.0.self_attn.v_proj.weight"));
    if (h->qkv_bias) {
        MS_TRY(add(l, &rng, dt, INIT_BIAS, true, 1, d, "layers.0.self_attn.q_proj.bias"));
        MS_TRY(add(l, &rng, dt, INIT_BIAS, true, 1, kv, "layers.0.self_attn.k_proj.bias"));
        MS_TRY(add(l, &rng, dt, INIT_BIAS, true, 1, kv, "layers.0.self_attn.v_proj.bias"));
    }
    MS_TRY(add(l, &rng, dt, INIT_MATRIX, false, d, d, "layers.0.self_attn.o_proj.weight"));
    MS_TRY(add(l, &rng, dt, INIT_NORM, true, 1, d, "layers.0.post_attention_layernorm.weight"));
    MS_TRY(add(l, &rng, dt, INIT_MATRIX, false, h->ffn, d, "layers.0.mlp.gate_proj.weight"));
    MS_TRY(add(l, &rng, dt, INIT_MATRIX, false, h->ffn, d, "layers.0.mlp.up_proj.weight"));
    MS_TRY(add(l, &rng, dt, INIT_MATRIX, false, d, h->ffn, "layers.0.mlp.down_proj.weight"));
    return MS_OK;
}

static ms_status write_config(const char *path, const ms_hfconfig *t, const head_shape *h, double theta,
                              ms_dtype dt) {
    json_t *o = json_object();
    if (!o) return MS_ERR_NOMEM;
    json_t *archs = json_array();
    json_array_append_new(archs, json_string("LlamaForCausalLM"));
    json_object_set_new(o, "architectures", archs);
    json_object_set_new(o, "model_type", json_string("llama"));
    json_object_set_new(o, "hidden_size", json_integer(h->d));
    json_object_set_new(o, "intermediate_size", json_integer(h->ffn));
    json_object_set_new(o, "num_attention_heads", json_integer(h->heads));
    json_object_set_new(o, "num_key_value_heads", json_integer(h->kv_heads));
    json_object_set_new(o, "num_hidden_layers", json_integer(1));
    json_object_set_new(o, "rms_norm_eps", json_real(t->rms_norm_eps));
    json_object_set_new(o, "rope_theta", json_real(theta));
    json_object_set_new(o, "vocab_size", json_integer(h->vocab));
    json_object_set_new(o, "max_position_embeddings", json_integer(t->max_position_embeddings));
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "tie_word_embeddings", json_false());
    json_object_set_new(o, "bias", json_boolean(h->fc_bias));
    json_object_set_new(o, "qkv_bias", json_boolean(h->qkv_bias));
    json_object_set_new(o, "torch_dtype",
                        json_string(dt == MS_DTYPE_BF16 ? "bfloat16" : dt == MS_DTYPE_F16 ? "float16" : "float32"));
    if (t->rope_scaling.type == MS_ROPE_LLAMA3) {
        json_t *rs = json_object();
        json_object_set_new(rs, "rope_type", json_string("llama3"));
        json_object_set_new(rs, "factor", json_real(t->rope_scaling.factor));
        json_object_set_new(rs, "low_freq_factor", json_real(t->rope_scaling.low_freq_factor));
        json_object_set_new(rs, "high_freq_factor", json_real(t->rope_scaling.high_freq_factor));
        json_object_set_new(rs, "original_max_position_embeddings",
                            json_integer(t->rope_scaling.original_max_position_embeddings));
        json_object_set_new(o, "rope_scaling", rs);
    }
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text) return MS_ERR_NOMEM;
    ms_status st = ms_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

static bool parse_i64(const char *s, int64_t *out) { return ms_parse_i64(s, INT64_MIN, INT64_MAX, out); }

static bool parse_f64(const char *s, double *out) { return ms_parse_f64(s, -HUGE_VAL, HUGE_VAL, out); }

int main(int argc, char **argv) {
    ms_log_set_role("mkeagle");
    const char *out = NULL, *target = NULL;
    int64_t seed = 1, ffn = 0, heads = 0, kv_heads = 0, fc_bias = 1, qkv_bias = 0;
    double theta = 0;
    ms_dtype dt = MS_DTYPE_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "microspec-mkeagle: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--target")) target = v;
        else if (!strcmp(a, "--seed")) ok = parse_i64(v, &seed);
        else if (!strcmp(a, "--ffn")) ok = parse_i64(v, &ffn) && ffn > 0 && ffn <= (1 << 20);
        else if (!strcmp(a, "--heads")) ok = parse_i64(v, &heads) && heads > 0 && heads <= 1024;
        else if (!strcmp(a, "--kv-heads")) ok = parse_i64(v, &kv_heads) && kv_heads > 0 && kv_heads <= 1024;
        else if (!strcmp(a, "--fc-bias")) ok = parse_i64(v, &fc_bias) && (fc_bias == 0 || fc_bias == 1);
        else if (!strcmp(a, "--qkv-bias")) ok = parse_i64(v, &qkv_bias) && (qkv_bias == 0 || qkv_bias == 1);
        else if (!strcmp(a, "--theta")) ok = parse_f64(v, &theta) && theta > 0;
        else if (!strcmp(a, "--dtype")) ok = ms_dtype_parse_float(v, &dt);
        else {
            fprintf(stderr, "microspec-mkeagle: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "microspec-mkeagle: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!out || !target) {
        usage(stderr);
        return 2;
    }

    char *tcfg_path = ms_path_join(target, "config.json");
    if (!tcfg_path) return 1;
    ms_hfconfig t;
    ms_status st = ms_hfcfg_load(tcfg_path, &t);
    free(tcfg_path);
    if (st < 0) return 1;

    head_shape h = {.d = t.hidden_size,
                    .ffn = ffn > 0 ? ffn : t.intermediate_size,
                    .heads = heads > 0 ? heads : t.n_heads,
                    .vocab = t.vocab_size,
                    .fc_bias = fc_bias != 0,
                    .qkv_bias = qkv_bias != 0};
    h.kv_heads = kv_heads > 0 ? kv_heads : heads > 0 ? heads : t.n_kv_heads;
    if (h.d % h.heads != 0 || (h.d / h.heads) % 2 != 0) {
        fprintf(stderr, "microspec-mkeagle: %lld heads must divide the hidden size %lld into an even head_dim\n",
                (long long)h.heads, (long long)h.d);
        return 2;
    }
    if (h.kv_heads > h.heads || h.heads % h.kv_heads != 0) {
        fprintf(stderr, "microspec-mkeagle: --kv-heads %lld must divide --heads %lld\n", (long long)h.kv_heads,
                (long long)h.heads);
        return 2;
    }
    if (theta <= 0) theta = t.rope_theta;

    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "microspec-mkeagle: cannot create %s: %s\n", out, strerror(errno));
        return 1;
    }
    char *cfg_path = ms_path_join(out, "config.json"), *st_path = ms_path_join(out, "model.safetensors");
    tensor_list l = {0};
    if (!cfg_path || !st_path) st = MS_ERR_NOMEM;
    if (st == MS_OK) st = write_config(cfg_path, &t, &h, theta, dt);
    if (st == MS_OK) st = build_tensors(&h, dt, (uint64_t)seed, &l);
    const char *meta[] = {"format", "pt"};
    if (st == MS_OK) st = ms_st_write(st_path, l.n, l.names, l.t, 1, meta);
    if (st == MS_OK)
        printf("wrote %s: EAGLE head for %s: hidden %lld, heads %lld/%lld, ffn %lld, vocab %lld, fc.bias %d, "
               "qkv bias %d, theta %g, %lld tensors, %s, seed %lld\n",
               out, target, (long long)h.d, (long long)h.heads, (long long)h.kv_heads, (long long)h.ffn,
               (long long)h.vocab, h.fc_bias, h.qkv_bias, theta, (long long)l.n, ms_dtype_name(dt), (long long)seed);
    list_free(&l);
    free(cfg_path);
    free(st_path);
    return st == MS_OK ? 0 : 1;
}
