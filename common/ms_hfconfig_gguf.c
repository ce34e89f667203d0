/* ms_hfconfig_gguf.c — the model configuration from GGUF metadata.
 *
 * Keys as llama.cpp's converter writes them ("<arch>.embedding_length", ...).
 * Facts a Gemma 3 file does not state and llama.cpp assumes (llama-model.cpp,
 * LLM_ARCH_GEMMA3 hparams; checked against the numpy reference in
 * tests/ref/gguf_ref_forward.py):
 *   - layer l is global iff (l + 1) % 6 == 0, the others use the sliding window
 *     (`<arch>.attention.sliding_window`, a key at distance ≥ window is hidden);
 *   - local layers use RoPE base 10,000; global ones `<arch>.rope.freq_base`;
 *   - the attention scale is 1/sqrt(key_length) (query_pre_attn_scalar =
 *     head_dim for every size but 27B, which this project does not run);
 *   - embeddings are scaled by sqrt(embedding_length);
 *   - RMSNorm weights are stored with the +1 of Gemma's (1 + w) already added by
 *     the converter: they are used as stored.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ms_gguf.h"
#include "ms_hfconfig.h"

#define GG_MAX_HIDDEN 65536
#define GG_MAX_FFN ((int64_t)1 << 20)
#define GG_MAX_LAYERS 1024
#define GG_MAX_HEADS 1024
#define GG_MAX_HEAD_DIM 1024
#define GG_MAX_VOCAB ((int64_t)1 << 24)
#define GG_MAX_POS ((int64_t)1 << 26)
#define GEMMA3_PERIOD 6
#define GEMMA3_LOCAL_THETA 10000.0

/* "<arch>.<suffix>" into buf. */
static const char *akey(char *buf, size_t cap, const char *arch, const char *suffix) {
    snprintf(buf, cap, "%s.%s", arch, suffix);
    return buf;
}

/* Required integer key in [lo, hi]. */
static ms_status req_int(const ms_gguf *g, const char *arch, const char *suffix, int64_t lo, int64_t hi,
                         int64_t *out) {
    char k[160];
    akey(k, sizeof k, arch, suffix);
    ms_status st = ms_gguf_get_i64(g, k, out);
    if (st == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_NOT_FOUND, "%s: required key '%s' missing", ms_gguf_path(g), k);
    MS_TRY(st);
    if (*out < lo || *out > hi)
        MS_FAIL(MS_ERR_RANGE, "%s: key '%s' = %lld outside [%lld, %lld]", ms_gguf_path(g), k, (long long)*out,
                (long long)lo, (long long)hi);
    return MS_OK;
}

/* Optional integer key; *out unchanged when absent. */
static ms_status opt_int(const ms_gguf *g, const char *arch, const char *suffix, int64_t lo, int64_t hi,
                         int64_t *out) {
    char k[160];
    int64_t v;
    ms_status st = ms_gguf_get_i64(g, akey(k, sizeof k, arch, suffix), &v);
    if (st == MS_ERR_NOT_FOUND) return MS_OK;
    MS_TRY(st);
    if (v < lo || v > hi)
        MS_FAIL(MS_ERR_RANGE, "%s: key '%s' = %lld outside [%lld, %lld]", ms_gguf_path(g), k, (long long)v,
                (long long)lo, (long long)hi);
    *out = v;
    return MS_OK;
}

/* Optional finite positive real; *out unchanged when absent. */
static ms_status opt_real(const ms_gguf *g, const char *arch, const char *suffix, double *out) {
    char k[160];
    double v;
    ms_status st = ms_gguf_get_f64(g, akey(k, sizeof k, arch, suffix), &v);
    if (st == MS_ERR_NOT_FOUND) return MS_OK;
    MS_TRY(st);
    if (!isfinite(v) || v <= 0) MS_FAIL(MS_ERR_RANGE, "%s: key '%s' = %g must be finite and > 0", ms_gguf_path(g), k, v);
    *out = v;
    return MS_OK;
}

/* Keys that change the maths and are not implemented: present → refused by
 * name (a "none" rope scaling and a zero expert count are harmless). */
static ms_status refuse_unimplemented(const ms_gguf *g, const char *arch) {
    static const char *const refused[] = {
        "attn_logit_softcapping", "final_logit_softcapping", "rope.scaling.factor", "attention.layer_norm_epsilon",
        "attention.clamp_kqv",    "attention.max_alibi_bias", "rope.scaling.attn_factor",
    };
    char k[160];
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        akey(k, sizeof k, arch, refused[i]);
        if (ms_gguf_find(g, k) < 0) continue;
        if (!strcmp(refused[i], "rope.scaling.factor")) {
            double f = 1.0;
            if (ms_gguf_get_f64(g, k, &f) == MS_OK && f == 1.0) continue;
        }
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: key '%s' is present: not implemented by this engine", ms_gguf_path(g), k);
    }
    const char *s;
    if (ms_gguf_get_str(g, akey(k, sizeof k, arch, "rope.scaling.type"), &s, NULL) == MS_OK && strcmp(s, "none"))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: key '%s' = \"%.40s\": RoPE scaling is not implemented", ms_gguf_path(g), k, s);
    int64_t experts = 0;
    MS_TRY(opt_int(g, arch, "expert_count", 0, INT32_MAX, &experts));
    if (experts > 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: key '%s.expert_count' = %lld: mixture-of-experts models are not supported",
                ms_gguf_path(g), arch, (long long)experts);
    if (ms_gguf_find_tensor(g, "rope_freqs.weight"))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: tensor 'rope_freqs.weight' (RoPE frequency factors) is not implemented",
                ms_gguf_path(g));
    return MS_OK;
}

/* A token id key in [0, vocab): -1 when absent. */
static ms_status token_key(const ms_gguf *g, const char *key, int64_t vocab, int32_t *out) {
    int64_t v;
    *out = -1;
    ms_status st = ms_gguf_get_i64(g, key, &v);
    if (st == MS_ERR_NOT_FOUND) return MS_OK;
    MS_TRY(st);
    if (v < 0 || v >= vocab)
        MS_FAIL(MS_ERR_RANGE, "%s: key '%s' = %lld outside the vocabulary [0, %lld)", ms_gguf_path(g), key,
                (long long)v, (long long)vocab);
    *out = (int32_t)v;
    return MS_OK;
}

ms_status ms_hfcfg_from_gguf(const ms_gguf *g, ms_hfconfig *out) {
    memset(out, 0, sizeof *out);
    ms_hfconfig *c = out;
    const char *arch;
    ms_status st = ms_gguf_get_str(g, "general.architecture", &arch, NULL);
    if (st == MS_ERR_NOT_FOUND)
        MS_FAIL(MS_ERR_NOT_FOUND, "%s: required key 'general.architecture' missing", ms_gguf_path(g));
    MS_TRY(st);
    if (!strcmp(arch, "qwen2")) c->arch = MS_ARCH_QWEN2;
    else if (!strcmp(arch, "llama")) c->arch = MS_ARCH_LLAMA;
    else if (!strcmp(arch, "gemma3")) c->arch = MS_ARCH_GEMMA3;
    else
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: general.architecture '%.40s' is not supported (qwen2, llama, gemma3)",
                ms_gguf_path(g), arch);
    snprintf(c->arch_name, sizeof c->arch_name, "gguf:%s", arch);
    MS_TRY(refuse_unimplemented(g, arch));

    MS_TRY(req_int(g, arch, "embedding_length", 1, GG_MAX_HIDDEN, &c->hidden_size));
    MS_TRY(req_int(g, arch, "feed_forward_length", 1, GG_MAX_FFN, &c->intermediate_size));
    MS_TRY(req_int(g, arch, "block_count", 1, GG_MAX_LAYERS, &c->n_layers));
    MS_TRY(req_int(g, arch, "attention.head_count", 1, GG_MAX_HEADS, &c->n_heads));
    c->n_kv_heads = c->n_heads;
    MS_TRY(opt_int(g, arch, "attention.head_count_kv", 1, GG_MAX_HEADS, &c->n_kv_heads));
    if (c->n_heads % c->n_kv_heads != 0)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s.attention.head_count %lld is not a multiple of head_count_kv %lld",
                ms_gguf_path(g), arch, (long long)c->n_heads, (long long)c->n_kv_heads);
    c->head_dim = c->hidden_size / c->n_heads;
    MS_TRY(opt_int(g, arch, "attention.key_length", 2, GG_MAX_HEAD_DIM, &c->head_dim));
    int64_t vlen = c->head_dim, rope_dim = c->head_dim;
    MS_TRY(opt_int(g, arch, "attention.value_length", 2, GG_MAX_HEAD_DIM, &vlen));
    MS_TRY(opt_int(g, arch, "rope.dimension_count", 2, GG_MAX_HEAD_DIM, &rope_dim));
    if (vlen != c->head_dim || rope_dim != c->head_dim || c->head_dim % 2)
        MS_FAIL(MS_ERR_UNSUPPORTED,
                "%s: head sizes key %lld / value %lld / rope %lld: only equal, even sizes are implemented",
                ms_gguf_path(g), (long long)c->head_dim, (long long)vlen, (long long)rope_dim);
    c->max_position_embeddings = 4096;
    MS_TRY(opt_int(g, arch, "context_length", 1, GG_MAX_POS, &c->max_position_embeddings));
    c->rms_norm_eps = 1e-6;
    MS_TRY(opt_real(g, arch, "attention.layer_norm_rms_epsilon", &c->rms_norm_eps));
    c->rope_theta = 10000.0;
    MS_TRY(opt_real(g, arch, "rope.freq_base", &c->rope_theta));

    /* Vocabulary: rows of the embedding; the tokenizer's size is checked
     * against it by the model loader. */
    const ms_gguf_tensor_info *emb = ms_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) MS_FAIL(MS_ERR_NOT_FOUND, "%s: tensor 'token_embd.weight' missing", ms_gguf_path(g));
    if (emb->ndim != 2 || emb->shape[1] != c->hidden_size || emb->shape[0] < 1 || emb->shape[0] > GG_MAX_VOCAB)
        MS_FAIL(MS_ERR_FORMAT, "%s: tensor 'token_embd.weight': shape [%lld, %lld], expected [vocab, %lld]",
                ms_gguf_path(g), (long long)emb->shape[0], (long long)(emb->ndim > 1 ? emb->shape[1] : 0),
                (long long)c->hidden_size);
    c->vocab_size = emb->shape[0];
    c->tie_word_embeddings = ms_gguf_find_tensor(g, "output.weight") == NULL;
    c->attention_bias = c->arch == MS_ARCH_QWEN2;
    c->act = MS_ACT_SILU;

    if (c->arch == MS_ARCH_GEMMA3) {
        c->qk_norm = true;
        c->act = MS_ACT_GELU_TANH;
        c->embed_scale = true;
        c->post_norms = true;
        c->sliding_period = GEMMA3_PERIOD;
        c->rope_local_theta = GEMMA3_LOCAL_THETA;
        MS_TRY(req_int(g, arch, "attention.sliding_window", 64, GG_MAX_POS, &c->sliding_window));
        c->attn_scale = 1.0 / sqrt((double)c->head_dim);
    }

    MS_TRY(token_key(g, "tokenizer.ggml.bos_token_id", c->vocab_size, &c->bos_token_id));
    int32_t eos;
    MS_TRY(token_key(g, "tokenizer.ggml.eos_token_id", c->vocab_size, &eos));
    if (eos >= 0) c->eos_token_ids[c->n_eos++] = eos;
    return MS_OK;
}

bool ms_hfcfg_layer_is_local(const ms_hfconfig *c, int64_t l) {
    return c->sliding_window > 0 && c->sliding_period > 0 && (l + 1) % c->sliding_period != 0;
}
