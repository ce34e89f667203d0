/* convert-llama2c — a llama2.c checkpoint (legacy v0 format) + its
 * tokenizer.bin → a Hugging Face Llama folder (config.json,
 * model.safetensors, tokenizer.bin).
 *
 *   convert-llama2c CHECKPOINT.bin TOKENIZER.bin OUT_DIR [--dtype f32|bf16|f16]
 *
 * Checkpoint layout (llama2.c run.c, read_checkpoint): 7 int32 header
 *   dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (< 0: separate
 *   classifier), seq_len
 * then f32 arrays token_embedding [V, d], rms_att [L, d], wq [L, d, d],
 * wk [L, kv, d], wv [L, kv, d], wo [L, d, d], rms_ffn [L, d], w1 [L, f, d],
 * w2 [L, d, f], w3 [L, f, d], rms_final [d], two unused RoPE tables of
 * seq_len · head_size / 2 floats each, then wcls [V, d] when not shared.
 *
 * RoPE: llama2.c rotates interleaved pairs (2i, 2i+1) of each head, HF
 * rotates halves (i, i + hd/2), so the rows of wq and wk are permuted per head
 * (the inverse of transformers' convert_llama_weights_to_hf permute):
 *   HF row i of a head = llama2.c row 2i (i < hd/2), 2(i − hd/2) + 1 (i ≥ hd/2).
 * Every file is written to a temporary name and renamed, so an interrupted
 * run never leaves a half-written file under its final name.
 */
#include "ms_hfconfig.h"
#include "ms_safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
} l2c_header;

typedef struct {
    l2c_header h;
    bool shared;      /* classifier = token embedding */
    int64_t vocab, head_dim, kv_dim;
    const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
} l2c_model;

/* Output tensors: names and owned buffers in the target dtype. */
typedef struct {
    int64_t n, cap;
    char **names;
    ms_tensor *t;
} out_list;

static void usage(FILE *f) {
    fprintf(f,
            "usage: convert-llama2c CHECKPOINT.bin TOKENIZER.bin OUT_DIR [--dtype f32|bf16|f16]\n"
            "Converts a llama2.c checkpoint (legacy v0) and its tokenizer.bin to a Hugging Face\n"
            "Llama folder: OUT_DIR/config.json, OUT_DIR/model.safetensors, OUT_DIR/tokenizer.bin.\n"
            "  --dtype   weight dtype in model.safetensors (default f32)\n");
}

/* Section sizes in floats, checked against overflow; total bytes of the file. */
static ms_status l2c_layout(const char *path, const l2c_header *h, size_t file_size, l2c_model *m) {
    const char *names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    const int32_t vals[] = {h->dim, h->hidden_dim, h->n_layers, h->n_heads, h->n_kv_heads, h->vocab_size, h->seq_len};
    for (int i = 0; i < 7; i++)
        if (vals[i] == 0 || (vals[i] < 0 && i != 5) || vals[i] == INT32_MIN)
            MS_FAIL(MS_ERR_FORMAT, "%s: header field %s = %d must be positive", path, names[i], vals[i]);
    m->h = *h;
    m->shared = h->vocab_size > 0;
    m->vocab = m->shared ? h->vocab_size : -(int64_t)h->vocab_size;
    if (h->dim % h->n_heads != 0)
        MS_FAIL(MS_ERR_FORMAT, "%s: dim %d is not a multiple of n_heads %d", path, h->dim, h->n_heads);
    if (h->n_kv_heads > h->n_heads || h->n_heads % h->n_kv_heads != 0)
        MS_FAIL(MS_ERR_FORMAT, "%s: n_heads %d is not a multiple of n_kv_heads %d", path, h->n_heads, h->n_kv_heads);
    m->head_dim = h->dim / h->n_heads;
    if (m->head_dim % 2 != 0) MS_FAIL(MS_ERR_FORMAT, "%s: head size %lld is odd", path, (long long)m->head_dim);
    m->kv_dim = m->head_dim * h->n_kv_heads;
    /* Each field < 2^31, so every product below fits in int64 (≤ 2^93 would
     * not: bound the big ones against the file size instead). */
    int64_t d = h->dim, f = h->hidden_dim, L = h->n_layers, V = m->vocab, kv = m->kv_dim;
    if (d > 65536 || f > (1 << 20) || L > 1024 || V > (1 << 24))
        MS_FAIL(MS_ERR_RANGE, "%s: header dim %lld, hidden_dim %lld, n_layers %lld, vocab %lld past the limits", path,
                (long long)d, (long long)f, (long long)L, (long long)V);
    int64_t per_layer = d + d * d + 2 * kv * d + d * d + d + 3 * f * d;
    int64_t floats = V * d + L * per_layer + d + (int64_t)h->seq_len * m->head_dim + (m->shared ? 0 : V * d);
    int64_t want = 28 + 4 * floats;
    if ((uint64_t)want != (uint64_t)file_size)
        MS_FAIL(MS_ERR_FORMAT,
                "%s: %zu bytes, but the header (dim %d, hidden_dim %d, n_layers %d, n_heads %d, n_kv_heads %d, "
                "vocab_size %d, seq_len %d, %s classifier) needs exactly %lld",
                path, file_size, h->dim, h->hidden_dim, h->n_layers, h->n_heads, h->n_kv_heads, h->vocab_size,
                h->seq_len, m->shared ? "shared" : "separate", (long long)want);
    return MS_OK;
}

static void l2c_pointers(l2c_model *m, const float *p) {
    int64_t d = m->h.dim, f = m->h.hidden_dim, L = m->h.n_layers, kv = m->kv_dim;
    m->emb = p, p += m->vocab * d;
    m->rms_att = p, p += L * d;
    m->wq = p, p += L * d * d;
    m->wk = p, p += L * kv * d;
    m->wv = p, p += L * kv * d;
    m->wo = p, p += L * d * d;
    m->rms_ffn = p, p += L * d;
    m->w1 = p, p += L * f * d;
    m->w2 = p, p += L * d * f;
    m->w3 = p, p += L * f * d;
    m->rms_final = p, p += d;
    p += (int64_t)m->h.seq_len * m->head_dim; /* freq_cis_real, freq_cis_imag: unused */
    m->wcls = m->shared ? m->emb : p;
}

static void out_free(out_list *o) {
    for (int64_t i = 0; i < o->n; i++) {
        free(o->names[i]);
        free(o->t[i].data);
    }
    free(o->names);
    free(o->t);
    memset(o, 0, sizeof *o);
}

/* Append name (printf format) with `rows` × `cols` floats from src, optionally
 * permuting rows per head for RoPE (n_heads > 0), converted to dtype. */
static ms_status out_add(out_list *o, ms_dtype dtype, const float *src, int64_t rows, int64_t cols, int ndim,
                         int64_t rope_heads, const char *fmt, int layer) {
    if (o->n == o->cap) {
        int64_t cap = o->cap ? 2 * o->cap : 64;
        char **nn = ms_realloc(o->names, (size_t)cap * sizeof *nn);
        if (!nn) return MS_ERR_NOMEM;
        o->names = nn;
        ms_tensor *nt = ms_realloc(o->t, (size_t)cap * sizeof *nt);
        if (!nt) return MS_ERR_NOMEM;
        o->t = nt;
        o->cap = cap;
    }
    char name[256];
    snprintf(name, sizeof name, fmt, layer);
    size_t n = (size_t)(rows * cols);
    void *buf = ms_malloc(n * ms_dtype_size(dtype));
    char *nm = strdup(name);
    if (!buf || !nm) {
        free(buf);
        free(nm);
        return MS_ERR_NOMEM;
    }
    if (rope_heads > 0) {
        int64_t hd = rows / rope_heads, half = hd / 2;
        for (int64_t h = 0; h < rope_heads; h++) {
            for (int64_t i = 0; i < hd; i++) {
                int64_t src_row = i < half ? 2 * i : 2 * (i - half) + 1;
                ms_convert_from_f32((char *)buf + (size_t)((h * hd + i) * cols) * ms_dtype_size(dtype), dtype,
                                    src + (h * hd + src_row) * cols, cols);
            }
        }
    } else {
        ms_convert_from_f32(buf, dtype, src, (int64_t)n);
    }
    int64_t shape[2] = {rows, cols};
    o->names[o->n] = nm;
    o->t[o->n] = ndim == 1 ? ms_tensor_view(buf, dtype, 1, &cols) : ms_tensor_view(buf, dtype, 2, shape);
    o->n++;
    return MS_OK;
}

static ms_status build_tensors(const l2c_model *m, ms_dtype dt, out_list *o) {
    int64_t d = m->h.dim, f = m->h.hidden_dim, kv = m->kv_dim;
    MS_TRY(out_add(o, dt, m->emb, m->vocab, d, 2, 0, "model.embed_tokens.weight", 0));
    for (int l = 0; l < m->h.n_layers; l++) {
        MS_TRY(out_add(o, dt, m->rms_att + l * d, 1, d, 1, 0, "model.layers.%d.input_layernorm.weight", l));
        MS_TRY(out_add(o, dt, m->wq + l * d * d, d, d, 2, m->h.n_heads, "model.layers.%d.self_attn.q_proj.weight", l));
        MS_TRY(out_add(o, dt, m->wk + l * kv * d, kv, d, 2, m->h.n_kv_heads, "model.layers.%d.self_attn.k_proj.weight",
                       l));
        MS_TRY(out_add(o, dt, m->wv + l * kv * d, kv, d, 2, 0, "model.layers.%d.self_attn.v_proj.weight", l));
        MS_TRY(out_add(o, dt, m->wo + l * d * d, d, d, 2, 0, "model.layers.%d.self_attn.o_proj.weight", l));
        MS_TRY(out_add(o, dt, m->rms_ffn + l * d, 1, d, 1, 0, "model.layers.%d.post_attention_layernorm.weight", l));
        MS_TRY(out_add(o, dt, m->w1 + l * f * d, f, d, 2, 0, "model.layers.%d.mlp.gate_proj.weight", l));
        MS_TRY(out_add(o, dt, m->w3 + l * f * d, f, d, 2, 0, "model.layers.%d.mlp.up_proj.weight", l));
        MS_TRY(out_add(o, dt, m->w2 + l * d * f, d, f, 2, 0, "model.layers.%d.mlp.down_proj.weight", l));
    }
    MS_TRY(out_add(o, dt, m->rms_final, 1, d, 1, 0, "model.norm.weight", 0));
    if (!m->shared) MS_TRY(out_add(o, dt, m->wcls, m->vocab, d, 2, 0, "lm_head.weight", 0));
    return MS_OK;
}

/* llama2.c tokenizer.bin: int32 max_token_length, then per token f32 score,
 * int32 len, len bytes. Checked to hold exactly `vocab` tokens. */
static ms_status check_tokenizer(const char *path, const char *data, size_t len, int64_t vocab) {
    size_t off = 4;
    if (len < 4) MS_FAIL(MS_ERR_FORMAT, "%s: %zu bytes, too short for a llama2.c tokenizer", path, len);
    int32_t max_len;
    memcpy(&max_len, data, 4);
    for (int64_t i = 0; i < vocab; i++) {
        int32_t n;
        if (len - off < 8) MS_FAIL(MS_ERR_FORMAT, "%s: ends inside token %lld (expected %lld tokens)", path,
                                   (long long)i, (long long)vocab);
        memcpy(&n, data + off + 4, 4);
        off += 8;
        if (n < 0 || n > max_len)
            MS_FAIL(MS_ERR_FORMAT, "%s: token %lld has bad length %d (max_token_length %d)", path, (long long)i, n,
                    max_len);
        if ((size_t)n > len - off)
            MS_FAIL(MS_ERR_FORMAT, "%s: ends inside token %lld (expected %lld tokens)", path, (long long)i,
                    (long long)vocab);
        off += (size_t)n;
    }
    if (off != len)
        MS_FAIL(MS_ERR_FORMAT, "%s: %zu bytes left after %lld tokens (the checkpoint's vocab_size)", path, len - off,
                (long long)vocab);
    return MS_OK;
}

static ms_status convert(const char *ckpt, const char *tok, const char *out_dir, ms_dtype dt) {
    int fd = open(ckpt, O_RDONLY);
    if (fd < 0) MS_FAIL(MS_ERR_IO, "%s: cannot open: %s", ckpt, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        MS_FAIL(MS_ERR_IO, "%s: not a regular file", ckpt);
    }
    size_t size = (size_t)sb.st_size;
    if (size < 28) {
        close(fd);
        MS_FAIL(MS_ERR_FORMAT, "%s: %zu bytes, too short for the 28-byte llama2.c header", ckpt, size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) MS_FAIL(MS_ERR_IO, "%s: mmap failed: %s", ckpt, strerror(errno));

    l2c_header h;
    memcpy(&h, map, sizeof h);
    l2c_model m;
    memset(&m, 0, sizeof m);
    ms_status st = l2c_layout(ckpt, &h, size, &m);
    char *tok_data = NULL;
    size_t tok_len = 0;
    out_list o = {0};
    char *p_model = NULL, *p_cfg = NULL, *p_tok = NULL, *p_index = NULL;
    if (st < 0) goto done;
    l2c_pointers(&m, (const float *)((const char *)map + 28)); /* 28 = 7·4: float-aligned in the mapping */
    MS_TRY_GOTO(st, ms_read_file(tok, &tok_data, &tok_len), done);
    MS_TRY_GOTO(st, check_tokenizer(tok, tok_data, tok_len, m.vocab), done);

    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: cannot create: %s", out_dir, strerror(errno));
        st = MS_ERR_IO;
        goto done;
    }
    p_model = ms_path_join(out_dir, "model.safetensors");
    p_cfg = ms_path_join(out_dir, "config.json");
    p_tok = ms_path_join(out_dir, "tokenizer.bin");
    p_index = ms_path_join(out_dir, "model.safetensors.index.json");
    if (!p_model || !p_cfg || !p_tok || !p_index) {
        st = MS_ERR_NOMEM;
        goto done;
    }
    MS_TRY_GOTO(st, build_tensors(&m, dt, &o), done);
    const char *meta[] = {"format", "pt"};
    /* A stale index would shadow the new single file in ms_st_open_dir. */
    unlink(p_index);
    MS_TRY_GOTO(st, ms_st_write(p_model, o.n, (const char *const *)o.names, o.t, 1, meta), done);
    MS_TRY_GOTO(st, ms_write_file_atomic(p_tok, tok_data, tok_len), done);

    ms_hfconfig c;
    memset(&c, 0, sizeof c);
    c.arch = MS_ARCH_LLAMA;
    snprintf(c.arch_name, sizeof c.arch_name, "LlamaForCausalLM");
    c.vocab_size = m.vocab;
    c.hidden_size = h.dim;
    c.intermediate_size = h.hidden_dim;
    c.n_layers = h.n_layers;
    c.n_heads = h.n_heads;
    c.n_kv_heads = h.n_kv_heads;
    c.head_dim = m.head_dim;
    c.max_position_embeddings = h.seq_len;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 10000.0;
    c.tie_word_embeddings = m.shared;
    c.bos_token_id = 1;
    c.eos_token_ids[0] = 2;
    c.n_eos = m.vocab > 2 ? 1 : 0;
    snprintf(c.torch_dtype, sizeof c.torch_dtype, "%s",
             dt == MS_DTYPE_BF16 ? "bfloat16" : dt == MS_DTYPE_F16 ? "float16" : "float32");
    if (m.vocab <= 1) c.bos_token_id = -1;
    MS_TRY_GOTO(st, ms_hfcfg_write(p_cfg, &c), done);
    printf("converted %s: dim %d, hidden %d, layers %d, heads %d/%d kv, vocab %lld (%s classifier), seq_len %d "
           "-> %s (%lld tensors, %s)\n",
           ckpt, h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, (long long)m.vocab,
           m.shared ? "shared" : "separate", h.seq_len, out_dir, (long long)o.n, ms_dtype_name(dt));
done:
    out_free(&o);
    free(tok_data);
    free(p_model);
    free(p_cfg);
    free(p_tok);
    free(p_index);
    munmap(map, size);
    return st;
}

int main(int argc, char **argv) {
    ms_log_set_role("convert");
    const char *pos[3];
    int npos = 0;
    ms_dtype dt = MS_DTYPE_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!ms_dtype_parse_float(v, &dt)) {
                fprintf(stderr, "convert-llama2c: --dtype must be f32, bf16 or f16, not '%s'\n", v);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "convert-llama2c: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        } else {
            fprintf(stderr, "convert-llama2c: too many arguments\n");
            usage(stderr);
            return 2;
        }
    }
    if (npos != 3) {
        usage(stderr);
        return 2;
    }
    return convert(pos[0], pos[1], pos[2], dt) == MS_OK ? 0 : 1;
}
