/* microspec-mkmodel — seeded random Hugging Face model folders for tests.
 *
 *   microspec-mkmodel --out DIR --arch llama|qwen2|qwen3 [options]   (--help lists them)
 *
 * Writes DIR/config.json and DIR/model.safetensors (or N shards
 * model-0000i-of-0000N.safetensors + model.safetensors.index.json with
 * --shards N), optionally copying a tokenizer.json (and tokenizer_config.json
 * from the same folder). Weights are drawn from one ms_rng stream in tensor
 * order, so the same arguments give byte-identical files on every machine:
 *   matrices   N(0,1) / sqrt(fan_in)     (fan_in = columns)
 *   embeddings N(0,1) · 0.5
 *   norms      1 + 0.1 · N(0,1)          (incl. Qwen3 q_norm / k_norm [head_dim])
 *   biases     0.1 · N(0,1)              (Qwen2: q/k/v; Llama/Qwen3 with --attention-bias 1:
 *                                         q/k/v and o_proj, as transformers builds them)
 */
#include "ms_hfconfig.h"
#include "ms_safetensors.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

typedef enum { INIT_MATRIX, INIT_EMBED, INIT_NORM, INIT_BIAS } init_kind;

typedef struct {
    int64_t n, cap;
    char **names;
    ms_tensor *t;
} tensor_list;

static void usage(FILE *f) {
    fprintf(f,
            "usage: microspec-mkmodel --out DIR --arch llama|qwen2|qwen3 [options]\n"
            "Writes a seeded random Hugging Face model folder (config.json + safetensors) for tests.\n"
            "  --vocab N            vocabulary size (default 512)\n"
            "  --hidden N           hidden size (default 64)\n"
            "  --layers N           decoder layers (default 2)\n"
            "  --heads N            attention heads (default 4)\n"
            "  --kv-heads N         key/value heads (default = heads)\n"
            "  --head-dim N         head dimension (default hidden / heads)\n"
            "  --ffn N              MLP intermediate size (default 2 * hidden)\n"
            "  --tie 0|1            tie lm_head to the embedding (default 0)\n"
            "  --attention-bias 0|1 llama/qwen3: q/k/v/o_proj biases (default 0); qwen2 always has q/k/v biases\n"
            "  --theta F            rope_theta (default 10000)\n"
            "  --rope-llama3        llama3 rope scaling: factor 8, low 1, high 4, original 8192\n"
            "  --rope-factor F, --rope-low F, --rope-high F, --rope-orig N   (each implies llama3)\n"
            "  --max-pos N          max_position_embeddings (default 2048)\n"
            "  --eps F              rms_norm_eps (default 1e-5 llama, 1e-6 qwen)\n"
            "  --dtype f32|bf16|f16 weight dtype (default f32)\n"
            "  --seed N             random seed (default 1)\n"
            "  --shards N           split tensors over N files with an index (default 1)\n"
            "  --tokenizer PATH     copy this tokenizer.json (and tokenizer_config.json beside it)\n"
            "  --bos ID             bos_token_id (default 1; -1 for none)\n"
            "  --eos ID             eos_token_id (default 2; repeat for a list)\n");
}

/* ---- tensors ---------------------------------------------------------------- */

static void list_free(tensor_list *l) {
    for (int64_t i = 0; i < l->n; i++) {
        free(l->names[i]);
        free(l->t[i].data);
    }
    free(l->names);
    free(l->t);
    memset(l, 0, sizeof *l);
}

static ms_status add_tensor(tensor_list *l, ms_rng *rng, ms_dtype dt, init_kind kind, int ndim, int64_t rows,
                            int64_t cols, const char *fmt, int layer) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        char **nn = ms_realloc(l->names, (size_t)cap * sizeof *nn);
        if (!nn) return MS_ERR_NOMEM;
        l->names = nn;
        ms_tensor *nt = ms_realloc(l->t, (size_t)cap * sizeof *nt);
        if (!nt) return MS_ERR_NOMEM;
        l->t = nt;
        l->cap = cap;
    }
    int64_t n = rows * cols;
    float *f = ms_malloc((size_t)n * sizeof *f);
    void *buf = ms_malloc((size_t)n * ms_dtype_size(dt));
    char name[256];
    snprintf(name, sizeof name, fmt, layer);
    char *nm = strdup(name);
    if (!f || !buf || !nm) {
        free(f);
        free(buf);
        free(nm);
        return MS_ERR_NOMEM;
    }
    float scale = kind == INIT_MATRIX ? (float)(1.0 / sqrt((double)cols)) : kind == INIT_EMBED ? 0.5f : 0.1f;
    for (int64_t i = 0; i < n; i++) f[i] = (kind == INIT_NORM ? 1.0f : 0.0f) + scale * ms_rng_normal(rng);
    ms_convert_from_f32(buf, dt, f, n);
    free(f);
    int64_t shape[2] = {rows, cols};
    l->names[l->n] = nm;
    l->t[l->n] = ndim == 1 ? ms_tensor_view(buf, dt, 1, &cols) : ms_tensor_view(buf, dt, 2, shape);
    l->n++;
    return MS_OK;
}

static ms_status build_tensors(const ms_hfconfig *c, ms_dtype dt, uint64_t seed, tensor_list *l) {
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    int64_t d = c->hidden_size, f = c->intermediate_size, hd = c->head_dim;
    int64_t q = c->n_heads * hd, kv = c->n_kv_heads * hd;
    MS_TRY(add_tensor(l, &rng, dt, INIT_EMBED, 2, c->vocab_size, d, "model.embed_tokens.weight", 0));
    for (int i = 0; i < (int)c->n_layers; i++) {
        MS_TRY(add_tensor(l, &rng, dt, INIT_NORM, 1, 1, d, "model.layers.%d.input_layernorm.weight", i));
        MS_TRY(add_tensor(l, &rng, dt, INIT_MATRIX, 2, q, d, "model.layers.%d.self_attn.q_proj.weight", i));
        MS_TRY(add_tensor(l, &rng, dt, INIT_MATRIX, 2, kv, d, "model.layers.%d.self_attn.k_proj.weight", i));
        MS_TRY(add_tensor(l, &rng, dt, INIT_MATRIX, 2, kv, d, "model.layers.%d.self_attn.v_proj.weight", i));
        if (c->attention_bias) {
            MS_TRY(add_tensor(l, &rng, dt, INIT_BIAS, 1, 1, q, "model.layers.%d.self_attn.q_proj.bias", i));
            MS_TRY(add_tensor(l, &rng, dt, INIT_BIAS, 1, 1, kv, "model.layers.%d.self_attn.k_proj.bias", i));
            MS_TRY(add_tensor(l, &rng, dt, INIT_BIAS, 1, 1, kv, "model.layers.%d.self_attn.v_proj.bias", i));
        }
        MS_TRY(add_tensor(l, &rng, dt, INIT_MATRIX, 2, d, q, "model.layers.%d.self_attn.o_proj.weight", i));
        /* transformers: LlamaAttention / Qwen3Attention build o_proj with
         * bias=config.attention_bias; Qwen2 biases q/k/v only. */
        if (c->attention_bias && c->arch != MS_ARCH_QWEN2)
            MS_TRY(add_tensor(l, &rng, dt, INIT_BIAS, 1, 1, d, "model.layers.%d.self_attn.o_proj.bias", i));
        if (c->qk_norm) {
            MS_TRY(add_tensor(l, &rng, dt, INIT_NORM, 1, 1, hd, "model.layers.%d.self_attn.q_norm.weight", i));
            MS_TRY(add_tensor(l, &rng, dt, INIT_NORM, 1, 1, hd, "model.layers.%d.self_attn.k_norm.weight", i));
        }
        MS_TRY(add_tensor(l, &rng, dt, INIT_NORM, 1, 1, d, "model.layers.%d.post_attention_layernorm.weight", i));
        MS_TRY(add_tensor(l, &rng, dt, INIT_MATRIX, 2, f, d, "model.layers.%d.mlp.gate_proj.weight", i));
        MS_TRY(add_tensor(l, &rng, dt, INIT_MATRIX, 2, f, d, "model.layers.%d.mlp.up_proj.weight", i));
        MS_TRY(add_tensor(l, &rng, dt, INIT_MATRIX, 2, d, f, "model.layers.%d.mlp.down_proj.weight", i));
    }
    MS_TRY(add_tensor(l, &rng, dt, INIT_NORM, 1, 1, d, "model.norm.weight", 0));
    if (!c->tie_word_embeddings)
        MS_TRY(add_tensor(l, &rng, dt, INIT_MATRIX, 2, c->vocab_size, d, "lm_head.weight", 0));
    return MS_OK;
}

/* ---- files ------------------------------------------------------------------ */

static ms_status copy_file(const char *src, const char *dst) {
    char *data;
    size_t len;
    MS_TRY(ms_read_file(src, &data, &len));
    ms_status st = ms_write_file_atomic(dst, data, len);
    free(data);
    return st;
}

static ms_status copy_tokenizer(const char *tok_json, const char *out_dir) {
    char *dst = ms_path_join(out_dir, "tokenizer.json");
    if (!dst) return MS_ERR_NOMEM;
    ms_status st = copy_file(tok_json, dst);
    free(dst);
    if (st < 0) return st;
    /* tokenizer_config.json from the same folder, if there is one. */
    const char *slash = strrchr(tok_json, '/');
    size_t dlen = slash ? (size_t)(slash - tok_json) : 1;
    char *dir = ms_malloc(dlen + 1);
    if (!dir) return MS_ERR_NOMEM;
    memcpy(dir, slash ? tok_json : ".", dlen);
    dir[dlen] = 0;
    char *src = ms_path_join(dir, "tokenizer_config.json");
    dst = ms_path_join(out_dir, "tokenizer_config.json");
    if (!src || !dst) st = MS_ERR_NOMEM;
    else if (ms_file_exists(src)) st = copy_file(src, dst);
    free(dir);
    free(src);
    free(dst);
    return st;
}

static ms_status write_weights(const char *out_dir, const tensor_list *l, int shards) {
    const char *meta[] = {"format", "pt"};
    char *single = ms_path_join(out_dir, "model.safetensors");
    char *index = ms_path_join(out_dir, "model.safetensors.index.json");
    ms_status st = MS_OK;
    json_t *root = NULL;
    if (!single || !index) {
        st = MS_ERR_NOMEM;
        goto done;
    }
    if (shards <= 1) {
        unlink(index); /* a stale index would shadow the single file */
        st = ms_st_write(single, l->n, (const char *const *)l->names, l->t, 1, meta);
        goto done;
    }
    unlink(single);
    /* Shard s holds tensors [s·n/N, (s+1)·n/N): every shard non-empty. */
    root = json_object();
    json_t *md = json_object(), *wm = json_object();
    json_object_set_new(root, "metadata", md);
    json_object_set_new(root, "weight_map", wm);
    size_t total = 0;
    for (int s = 0; s < shards && st == MS_OK; s++) {
        int64_t a = s * l->n / shards, b = (s + 1) * l->n / shards;
        char fname[64];
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, shards);
        char *path = ms_path_join(out_dir, fname);
        if (!path) {
            st = MS_ERR_NOMEM;
            break;
        }
        st = ms_st_write(path, b - a, (const char *const *)l->names + a, l->t + a, 1, meta);
        free(path);
        for (int64_t i = a; i < b; i++) {
            json_object_set_new(wm, l->names[i], json_string(fname));
            total += ms_tensor_nbytes(&l->t[i]);
        }
    }
    if (st < 0) goto done;
    json_object_set_new(md, "total_size", json_integer((json_int_t)total));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) {
        st = MS_ERR_NOMEM;
        goto done;
    }
    st = ms_write_file_atomic(index, text, strlen(text));
    free(text);
done:
    json_decref(root);
    free(single);
    free(index);
    return st;
}

/* ---- arguments -------------------------------------------------------------- */

typedef struct {
    const char *out, *arch, *tokenizer;
    int64_t vocab, hidden, layers, heads, kv_heads, head_dim, ffn, tie, attn_bias, max_pos, seed, shards, bos, orig;
    int64_t eos[MS_MAX_EOS];
    int n_eos;
    double theta, eps, factor, low, high;
    bool llama3;
    ms_dtype dt;
} mk_args;

typedef enum { ARG_STR, ARG_I64, ARG_F64, ARG_DTYPE, ARG_EOS } arg_kind;

/* The options that take a value: where it goes and, for integers, its range.
 * The --rope-* values imply --rope-llama3. */
static const struct {
    const char *name;
    arg_kind kind;
    size_t off;
    int64_t lo, hi;
    bool llama3;
} ARGS[] = {
#define I64(n, f) {n, ARG_I64, offsetof(mk_args, f), INT64_MIN, INT64_MAX, false}
    {"--out", ARG_STR, offsetof(mk_args, out), 0, 0, false},
    {"--arch", ARG_STR, offsetof(mk_args, arch), 0, 0, false},
    {"--tokenizer", ARG_STR, offsetof(mk_args, tokenizer), 0, 0, false},
    I64("--vocab", vocab),
    I64("--hidden", hidden),
    I64("--layers", layers),
    I64("--heads", heads),
    I64("--kv-heads", kv_heads),
    I64("--head-dim", head_dim),
    I64("--ffn", ffn),
    {"--tie", ARG_I64, offsetof(mk_args, tie), 0, 1, false},
    {"--attention-bias", ARG_I64, offsetof(mk_args, attn_bias), 0, 1, false},
    {"--theta", ARG_F64, offsetof(mk_args, theta), 0, 0, false},
    {"--eps", ARG_F64, offsetof(mk_args, eps), 0, 0, false},
    I64("--max-pos", max_pos),
    I64("--seed", seed),
    {"--shards", ARG_I64, offsetof(mk_args, shards), 1, 99999, false},
    I64("--bos", bos),
    {"--eos", ARG_EOS, offsetof(mk_args, eos), 0, 0, false},
    {"--rope-factor", ARG_F64, offsetof(mk_args, factor), 0, 0, true},
    {"--rope-low", ARG_F64, offsetof(mk_args, low), 0, 0, true},
    {"--rope-high", ARG_F64, offsetof(mk_args, high), 0, 0, true},
    {"--rope-orig", ARG_I64, offsetof(mk_args, orig), INT64_MIN, INT64_MAX, true},
    {"--dtype", ARG_DTYPE, offsetof(mk_args, dt), 0, 0, false},
#undef I64
};

/* Option `name` with value v into *a: 1 ok, 0 a bad value, -1 no such option. */
static int apply_arg(mk_args *a, const char *name, const char *v) {
    for (size_t k = 0; k < sizeof ARGS / sizeof *ARGS; k++) {
        if (strcmp(name, ARGS[k].name) != 0) continue;
        void *field = (char *)a + ARGS[k].off;
        if (ARGS[k].llama3) a->llama3 = true;
        switch (ARGS[k].kind) {
        case ARG_STR: *(const char **)field = v; return 1;
        case ARG_I64: return ms_parse_i64(v, ARGS[k].lo, ARGS[k].hi, field);
        case ARG_F64: return ms_parse_f64(v, -HUGE_VAL, HUGE_VAL, field);
        case ARG_DTYPE: return ms_dtype_parse_float(v, field);
        case ARG_EOS: return a->n_eos < MS_MAX_EOS && ms_parse_i64(v, INT64_MIN, INT64_MAX, &a->eos[a->n_eos++]);
        }
    }
    return -1;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, mk_args *a) {
    *a = (mk_args){.vocab = 512, .hidden = 64, .layers = 2, .heads = 4, .max_pos = 2048, .seed = 1, .shards = 1,
                   .bos = 1, .orig = 8192, .theta = 10000.0, .factor = 8, .low = 1, .high = 4, .dt = MS_DTYPE_F32};
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i];
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(name, "--rope-llama3")) {
            a->llama3 = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "microspec-mkmodel: %s needs a value (see --help)\n", name);
            return 2;
        }
        const char *v = argv[++i];
        int ok = apply_arg(a, name, v);
        if (ok < 0) {
            fprintf(stderr, "microspec-mkmodel: unknown option '%s' (see --help)\n", name);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "microspec-mkmodel: bad value '%s' for %s\n", v, name);
            return 2;
        }
    }
    if (!a->out || !a->arch) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* The model's config.json from the arguments; returns 0, or 2 after a message. */
static int build_config(mk_args *a, ms_hfconfig *c) {
    memset(c, 0, sizeof *c);
    if (!strcmp(a->arch, "llama")) c->arch = MS_ARCH_LLAMA;
    else if (!strcmp(a->arch, "qwen2")) c->arch = MS_ARCH_QWEN2;
    else if (!strcmp(a->arch, "qwen3")) c->arch = MS_ARCH_QWEN3;
    else {
        fprintf(stderr, "microspec-mkmodel: --arch must be llama, qwen2 or qwen3, not '%s'\n", a->arch);
        return 2;
    }
    static const char *arch_names[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"};
    snprintf(c->arch_name, sizeof c->arch_name, "%s", arch_names[c->arch]);
    c->vocab_size = a->vocab;
    c->hidden_size = a->hidden;
    c->n_layers = a->layers;
    c->n_heads = a->heads;
    c->n_kv_heads = a->kv_heads > 0 ? a->kv_heads : a->heads;
    c->head_dim = a->head_dim > 0 ? a->head_dim : a->heads > 0 ? a->hidden / a->heads : 0;
    c->intermediate_size = a->ffn > 0 ? a->ffn : 2 * a->hidden;
    c->max_position_embeddings = a->max_pos;
    c->rms_norm_eps = a->eps > 0 ? a->eps : c->arch == MS_ARCH_LLAMA ? 1e-5 : 1e-6;
    c->rope_theta = a->theta;
    c->tie_word_embeddings = a->tie != 0;
    c->attention_bias = c->arch == MS_ARCH_QWEN2 || a->attn_bias != 0;
    c->qk_norm = c->arch == MS_ARCH_QWEN3;
    if (a->llama3) {
        c->rope_scaling.type = MS_ROPE_LLAMA3;
        c->rope_scaling.factor = a->factor;
        c->rope_scaling.low_freq_factor = a->low;
        c->rope_scaling.high_freq_factor = a->high;
        c->rope_scaling.original_max_position_embeddings = a->orig;
    }
    c->bos_token_id = (int32_t)(a->bos < 0 ? -1 : a->bos);
    if (a->n_eos == 0) a->eos[a->n_eos++] = 2;
    c->n_eos = a->n_eos;
    for (int i = 0; i < a->n_eos; i++) c->eos_token_ids[i] = (int32_t)a->eos[i];
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s",
             a->dt == MS_DTYPE_BF16 ? "bfloat16" : a->dt == MS_DTYPE_F16 ? "float16" : "float32");
    if (a->bos > INT32_MAX || a->vocab > INT32_MAX) {
        fprintf(stderr, "microspec-mkmodel: --vocab / --bos out of range\n");
        return 2;
    }
    for (int i = 0; i < a->n_eos; i++)
        if (a->eos[i] < 0 || a->eos[i] > INT32_MAX) {
            fprintf(stderr, "microspec-mkmodel: --eos %lld out of range\n", (long long)a->eos[i]);
            return 2;
        }
    return 0;
}

int main(int argc, char **argv) {
    ms_log_set_role("mkmodel");
    mk_args a;
    int code = parse_args(argc, argv, &a);
    if (code >= 0) return code;
    ms_hfconfig c;
    if (build_config(&a, &c) != 0) return 2;

    if (mkdir(a.out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "microspec-mkmodel: cannot create %s: %s\n", a.out, strerror(errno));
        return 1;
    }
    char *cfg_path = ms_path_join(a.out, "config.json");
    if (!cfg_path) return 1;
    tensor_list l = {0};
    /* config.json first: ms_hfcfg_write validates (through the loader) before writing. */
    ms_status st = ms_hfcfg_write(cfg_path, &c);
    if (st == MS_OK) st = build_tensors(&c, a.dt, (uint64_t)a.seed, &l);
    if (st == MS_OK && a.shards > l.n) {
        MS_LOG_ERROR("--shards %lld is more than the %lld tensors", (long long)a.shards, (long long)l.n);
        st = MS_ERR_INVALID;
    }
    if (st == MS_OK) st = write_weights(a.out, &l, (int)a.shards);
    if (st == MS_OK && a.tokenizer) st = copy_tokenizer(a.tokenizer, a.out);
    if (st == MS_OK)
        printf("wrote %s: %s vocab %lld, hidden %lld, layers %lld, heads %lld/%lld, head_dim %lld, ffn %lld, "
               "%lld tensors in %lld file(s), %s, seed %lld\n",
               a.out, c.arch_name, (long long)c.vocab_size, (long long)c.hidden_size, (long long)c.n_layers,
               (long long)c.n_heads, (long long)c.n_kv_heads, (long long)c.head_dim, (long long)c.intermediate_size,
               (long long)l.n, (long long)a.shards, ms_dtype_name(a.dt), (long long)a.seed);
    list_free(&l);
    free(cfg_path);
    return st == MS_OK ? 0 : 1;
}
