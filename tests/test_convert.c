/* test_convert — convert-llama2c checked against the checkpoint itself.
 *
 * The test reads the llama2.c .bin floats directly (its own offset arithmetic)
 * and compares them with the safetensors the tool wrote, including wq / wk
 * whose rows the tool permutes for HF's rotate-half RoPE. The permutation is
 * written here the way transformers' conversion script writes its inverse:
 * w.view(n_h, hd/2, 2, dim).transpose(1, 2) — HF row h·hd + t·hd/2 + j holds
 * llama2.c row h·hd + 2j + t. Also: a synthetic checkpoint with a separate
 * classifier, bf16 output, and truncated / inconsistent checkpoints refused. */
#define _XOPEN_SOURCE 700
#include "ms_hfconfig.h"
#include "ms_safetensors.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_fail;
#define CHECK(c)                                                          \
    do {                                                                  \
        if (!(c)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);  \
            g_fail++;                                                     \
        }                                                                 \
    } while (0)

#define TOOL MS_BUILD_DIR "/tools/convert-llama2c"
static char g_tmp[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

static int run(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int convert(const char *ckpt, const char *tok, const char *out, const char *extra) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s %s %s >/dev/null", TOOL, ckpt, tok, out, extra);
    return run(cmd);
}

/* Element (r, c) of a row-major [rows, cols] tensor as f32, whatever its dtype
 * (read with memcpy: safetensors views may be unaligned). */
static float at(const ms_tensor *t, int64_t r, int64_t c) {
    int64_t cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
    int64_t i = r * cols + c;
    if (t->dtype == MS_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)t->data + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)t->data + 2 * i, 2);
    return t->dtype == MS_DTYPE_BF16 ? ms_bf16_to_f32(h) : ms_f16_to_f32(h);
}

typedef struct {
    int32_t dim, hidden, layers, heads, kv_heads, vocab, seq;
} hdr;

/* Float offset (after the 28-byte header) of each llama2.c section. */
typedef struct {
    int64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;
} sections;

static sections layout(const hdr *h) {
    int64_t V = h->vocab < 0 ? -(int64_t)h->vocab : h->vocab, d = h->dim, f = h->hidden, L = h->layers;
    int64_t kv = d / h->heads * h->kv_heads;
    sections s;
    s.emb = 0;
    s.rms_att = s.emb + V * d;
    s.wq = s.rms_att + L * d;
    s.wk = s.wq + L * d * d;
    s.wv = s.wk + L * kv * d;
    s.wo = s.wv + L * kv * d;
    s.rms_ffn = s.wo + L * d * d;
    s.w1 = s.rms_ffn + L * d;
    s.w2 = s.w1 + L * f * d;
    s.w3 = s.w2 + L * d * f;
    s.rms_final = s.w3 + L * f * d;
    s.wcls = h->vocab > 0 ? s.emb : s.rms_final + d + 2 * (int64_t)h->seq * (d / h->heads) / 2;
    return s;
}

/* Compare tensor `name` [rows, cols] with the checkpoint floats at `off`
 * (row-major), optionally with the RoPE row permutation over `rope_heads`. */
static int compare(const ms_st_model *m, const char *name, const float *w, int64_t off, int64_t rows, int64_t cols,
                   int64_t rope_heads, float tol) {
    ms_tensor t;
    if (ms_st_get(m, name, &t) < 0) return 1;
    int64_t shape2[2] = {rows, cols};
    bool ok_shape = rows == 1 ? ms_tensor_has_shape(&t, 1, &cols) : ms_tensor_has_shape(&t, 2, shape2);
    if (!ok_shape) {
        fprintf(stderr, "FAIL %s: wrong shape\n", name);
        return 1;
    }
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t src = r;
        if (rope_heads > 0) {
            int64_t hd = rows / rope_heads, half = hd / 2;
            int64_t h = r / hd, t2 = (r % hd) / half, j = (r % hd) % half;
            src = h * hd + 2 * j + t2;
        }
        for (int64_t c = 0; c < cols; c++) {
            float want = w[off + src * cols + c], got = at(&t, r, c);
            if (!(fabsf(got - want) <= tol * fabsf(want))) {
                if (bad++ < 3)
                    fprintf(stderr, "FAIL %s[%lld, %lld] = %g, checkpoint %g\n", name, (long long)r, (long long)c,
                            (double)got, (double)want);
            }
        }
    }
    return bad != 0;
}

static int compare_layer(const ms_st_model *m, const hdr *h, const float *w, int l, float tol) {
    sections s = layout(h);
    int64_t d = h->dim, f = h->hidden, kv = d / h->heads * h->kv_heads;
    char n[128];
    int bad = 0;
#define NAME(fmt) (snprintf(n, sizeof n, fmt, l), n)
    bad += compare(m, NAME("model.layers.%d.input_layernorm.weight"), w, s.rms_att + l * d, 1, d, 0, tol);
    bad += compare(m, NAME("model.layers.%d.self_attn.q_proj.weight"), w, s.wq + l * d * d, d, d, h->heads, tol);
    bad += compare(m, NAME("model.layers.%d.self_attn.k_proj.weight"), w, s.wk + l * kv * d, kv, d, h->kv_heads, tol);
    bad += compare(m, NAME("model.layers.%d.self_attn.v_proj.weight"), w, s.wv + l * kv * d, kv, d, 0, tol);
    bad += compare(m, NAME("model.layers.%d.self_attn.o_proj.weight"), w, s.wo + l * d * d, d, d, 0, tol);
    bad += compare(m, NAME("model.layers.%d.post_attention_layernorm.weight"), w, s.rms_ffn + l * d, 1, d, 0, tol);
    bad += compare(m, NAME("model.layers.%d.mlp.gate_proj.weight"), w, s.w1 + l * f * d, f, d, 0, tol);
    bad += compare(m, NAME("model.layers.%d.mlp.down_proj.weight"), w, s.w2 + l * d * f, d, f, 0, tol);
    bad += compare(m, NAME("model.layers.%d.mlp.up_proj.weight"), w, s.w3 + l * f * d, f, d, 0, tol);
#undef NAME
    return bad;
}

/* Whole check of an output folder against the checkpoint bytes. */
static void check_output(const char *out, const char *ckpt_path, const char *tok_path, float tol,
                         const char *torch_dtype) {
    char *raw;
    size_t len;
    if (ms_read_file(ckpt_path, &raw, &len) < 0) {
        g_fail++;
        return;
    }
    hdr h;
    memcpy(&h, raw, sizeof h);
    float *w = malloc(len - 28);
    memcpy(w, raw + 28, len - 28);
    free(raw);
    sections s = layout(&h);
    int64_t V = h.vocab < 0 ? -(int64_t)h.vocab : h.vocab;

    ms_hfconfig c;
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", out);
    CHECK(ms_hfcfg_load(p, &c) == MS_OK);
    CHECK(c.arch == MS_ARCH_LLAMA && c.vocab_size == V && c.hidden_size == h.dim);
    CHECK(c.intermediate_size == h.hidden && c.n_layers == h.layers && c.n_heads == h.heads);
    CHECK(c.n_kv_heads == h.kv_heads && c.head_dim == h.dim / h.heads && c.max_position_embeddings == h.seq);
    CHECK(c.tie_word_embeddings == (h.vocab > 0) && c.rms_norm_eps == 1e-5 && c.rope_theta == 10000.0);
    CHECK(c.bos_token_id == 1 && c.n_eos == 1 && c.eos_token_ids[0] == 2);
    CHECK(!strcmp(c.torch_dtype, torch_dtype));

    ms_st_model *m = NULL;
    CHECK(ms_st_open_dir(out, &m) == MS_OK);
    if (m) {
        CHECK(ms_st_count(m) == 2 + 9 * (int64_t)h.layers + (h.vocab < 0));
        CHECK(compare(m, "model.embed_tokens.weight", w, s.emb, V, h.dim, 0, tol) == 0);
        CHECK(compare(m, "model.norm.weight", w, s.rms_final, 1, h.dim, 0, tol) == 0);
        for (int l = 0; l < h.layers; l++) CHECK(compare_layer(m, &h, w, l, tol) == 0);
        ms_tensor t;
        if (h.vocab > 0) CHECK(!ms_st_find(m, "lm_head.weight", &t));
        else CHECK(compare(m, "lm_head.weight", w, s.wcls, V, h.dim, 0, tol) == 0);
        ms_st_close(&m);
    }
    /* tokenizer.bin copied byte for byte. */
    char *a, *b;
    size_t na, nb;
    snprintf(p, sizeof p, "%s/tokenizer.bin", out);
    if (ms_read_file(p, &a, &na) == MS_OK && ms_read_file(tok_path, &b, &nb) == MS_OK) {
        CHECK(na == nb && memcmp(a, b, na) == 0);
        free(a);
        free(b);
    } else {
        g_fail++;
    }
    free(w);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    MS_ASSERT(f);
    if (n) MS_ASSERT(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* A tiny checkpoint with a separate classifier (negative vocab_size) and a
 * matching 10-token tokenizer. Weights are distinct values (index-based), so
 * any misplaced row or column shows. */
static void test_synthetic(void) {
    hdr h = {.dim = 8, .hidden = 12, .layers = 2, .heads = 2, .kv_heads = 1, .vocab = -10, .seq = 16};
    sections s = layout(&h);
    int64_t n = s.wcls + 10 * 8;
    float *w = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) w[i] = (float)(i + 1) * 0.25f;
    char ckpt[128], tok[128], out[128];
    snprintf(ckpt, sizeof ckpt, "%s/tiny.bin", g_tmp);
    snprintf(tok, sizeof tok, "%s/tiny_tok.bin", g_tmp);
    snprintf(out, sizeof out, "%s/tiny_out", g_tmp);
    FILE *f = fopen(ckpt, "wb");
    fwrite(&h, 4, 7, f);
    fwrite(w, 4, (size_t)n, f);
    fclose(f);
    f = fopen(tok, "wb");
    int32_t maxlen = 3;
    fwrite(&maxlen, 4, 1, f);
    for (int i = 0; i < 10; i++) {
        float score = (float)-i;
        int32_t l = 1 + i % 3;
        fwrite(&score, 4, 1, f);
        fwrite(&l, 4, 1, f);
        fwrite("abc", 1, (size_t)l, f);
    }
    fclose(f);
    CHECK(convert(ckpt, tok, out, "") == 0);
    check_output(out, ckpt, tok, 0.0f, "float32");
    /* f16 output: each value within f16 rounding (2^-11 relative). */
    snprintf(out, sizeof out, "%s/tiny_f16", g_tmp);
    CHECK(convert(ckpt, tok, out, "--dtype f16") == 0);
    check_output(out, ckpt, tok, 1.0f / 2048, "float16");

    /* Refusals: truncated by 4 bytes, one float too many, bad header fields,
     * a tokenizer with the wrong number of tokens. Nothing written. */
    char bad[128], bad_out[128];
    snprintf(bad, sizeof bad, "%s/bad.bin", g_tmp);
    snprintf(bad_out, sizeof bad_out, "%s/bad_out", g_tmp);
    char *raw;
    size_t len;
    CHECK(ms_read_file(ckpt, &raw, &len) == MS_OK);
    write_bytes(bad, raw, len - 4);
    CHECK(convert(bad, tok, bad_out, "") == 1);
    raw = realloc(raw, len + 4);
    memset(raw + len, 0, 4);
    write_bytes(bad, raw, len + 4);
    CHECK(convert(bad, tok, bad_out, "") == 1);
    write_bytes(bad, raw, 20);
    CHECK(convert(bad, tok, bad_out, "") == 1);
    hdr hb = h;
    hb.heads = 3; /* dim 8 not divisible */
    memcpy(raw, &hb, sizeof hb);
    write_bytes(bad, raw, len);
    CHECK(convert(bad, tok, bad_out, "") == 1);
    hb = h;
    hb.kv_heads = 0;
    memcpy(raw, &hb, sizeof hb);
    write_bytes(bad, raw, len);
    CHECK(convert(bad, tok, bad_out, "") == 1);
    hb = h;
    hb.vocab = 10; /* claims shared: the extra classifier makes the size wrong */
    memcpy(raw, &hb, sizeof hb);
    write_bytes(bad, raw, len);
    CHECK(convert(bad, tok, bad_out, "") == 1);
    char *traw;
    size_t tlen;
    CHECK(ms_read_file(tok, &traw, &tlen) == MS_OK);
    write_bytes(bad, traw, tlen - 1);
    CHECK(convert(ckpt, bad, bad_out, "") == 1);
    free(traw);
    char p[256];
    snprintf(p, sizeof p, "%s/model.safetensors", bad_out);
    CHECK(!ms_file_exists(p));
    CHECK(convert(ckpt, tok, bad_out, "--dtype f64") == 2);
    CHECK(convert(ckpt, tok, "", "") != 0);
    free(raw);
    free(w);
}

static void test_stories260k(void) {
    const char *ckpt = MS_SHARED_DIR "/models/stories260k/stories260K.bin";
    const char *tok = MS_SHARED_DIR "/models/stories260k/tok512.bin";
    char out[128];
    snprintf(out, sizeof out, "%s/stories", g_tmp);
    CHECK(convert(ckpt, tok, out, "") == 0);
    check_output(out, ckpt, tok, 0.0f, "float32");
    snprintf(out, sizeof out, "%s/stories_bf16", g_tmp);
    CHECK(convert(ckpt, tok, out, "--dtype bf16") == 0);
    check_output(out, ckpt, tok, 1.0f / 256, "bfloat16");
}

int main(void) {
    if (access(TOOL, X_OK) != 0) {
        fprintf(stderr, "FAIL: %s not built\n", TOOL);
        return 1;
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/ms_convert_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_synthetic();
    bool have_real = access(MS_SHARED_DIR "/models/stories260k/stories260K.bin", R_OK) == 0;
    if (have_real) test_stories260k();
    nftw(g_tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (g_fail) {
        fprintf(stderr, "test_convert: %d failure(s)\n", g_fail);
        return 1;
    }
    if (!have_real) {
        printf("test_convert: synthetic checks passed; %s absent, skipping the real model\n", MS_SHARED_DIR);
        return 77;
    }
    printf("test_convert: all checks passed\n");
    return 0;
}
