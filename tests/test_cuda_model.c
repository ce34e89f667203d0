/* test_cuda_model.c — the model runtime on CUDA (BF16 and F16) against the
 * CPU model (f32, itself checked against the double-precision reference by
 * test_model_ref) and against its own properties.
 *
 * Models: seeded random tiny checkpoints written by microspec-mkmodel (GQA,
 * tied / untied, Llama q/k/v/o bias, Qwen2 bias, Qwen3 q/k norm with
 * head_dim ≠ hidden/heads, F32 / BF16 weights), and ms_model_new_random.
 *
 * Comparator: for a logits row g (CUDA) against r (reference),
 *     err = max_j |g_j − r_j| / max(1, max_j |r_j|)
 * ("relative to the logit scale"); NaN / Inf anywhere fail. The CUDA model
 * rounds every activation to act once per op (unit u: BF16 2^-8, F16 2^-11)
 * and its weights to act once; through 2–3 layers of ~12 ops, each adding
 * ≲ u/2 relative error in a random walk, the logits move by a few u relative
 * to their scale. Tolerances: BF16 TOL = 12u ≈ 0.047, F16 TOL = 12u ≈ 0.0059.
 * A wrong op (a dropped bias, a wrong mask bit, a stale KV row, a missing
 * layer) moves logits by O(their scale) ≫ TOL: the comparator is shown to
 * reject a model of another seed and a perturbed final norm.
 *
 * Checks, per case and act dtype:
 *   1. prefill (every row) + decode steps vs the CPU model;
 *   2. tree-masked forward vs each node's path forwarded alone (on CUDA);
 *   3. compaction of a tree path vs recomputing the path (on CUDA);
 *   4. the same call sequence through CUDA graphs and eagerly (no_graphs):
 *      bit-identical logits and hidden states; a shape key runs eagerly
 *      once, is then instantiated, then updated in place (counts checked);
 *   5. chunked prefill (max_batch 5) vs one shot;
 *   6. the host LM-head copy equals the CPU head rounded to act exactly;
 *      ms_model_hidden matches the CPU hidden states;
 *   7. ms_model_new_random on CUDA vs the CPU random model of the same seed.
 *
 * Without a CUDA device: "SKIPPED: no CUDA device", exit 77.
 */
#include "ms_k_cuda.h"
#include "ms_model.h"
#include "ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "FAIL: out of host memory\n");
        exit(1);
    }
    return p;
}

typedef struct {
    ms_dtype act;
    double tol;
    double u;
} act_case;

static const act_case ACTS[] = {
    {MS_DTYPE_BF16, 12.0 / 256.0, 1.0 / 256.0},
    {MS_DTYPE_F16, 12.0 / 2048.0, 1.0 / 2048.0},
};

static const struct {
    const char *name, *args;
} CASES[] = {
    {"llama-gqa-untied-f32",
     "--arch llama --vocab 211 --hidden 64 --layers 2 --heads 8 --kv-heads 2 --ffn 96 --tie 0 --dtype f32 --seed 21"},
    {"llama-bias-bf16",
     "--arch llama --vocab 131 --hidden 48 --layers 2 --heads 6 --kv-heads 3 --ffn 80 --attention-bias 1 "
     "--dtype bf16 --seed 22"},
    {"qwen2-tied-bf16",
     "--arch qwen2 --vocab 157 --hidden 32 --layers 3 --heads 4 --kv-heads 2 --ffn 64 --tie 1 --dtype bf16 --seed 23"},
    {"qwen3-hd24-f32",
     "--arch qwen3 --vocab 173 --hidden 40 --layers 2 --heads 4 --kv-heads 1 --head-dim 24 --ffn 72 --tie 0 "
     "--dtype f32 --seed 24"},
};

/* Comparator of the header; +inf on any non-finite value. */
static double row_err(const float *g, const float *r, int64_t V) {
    double mx = 1.0, e = 0.0;
    for (int64_t j = 0; j < V; j++) {
        if (!isfinite(g[j]) || !isfinite(r[j])) return INFINITY;
        mx = fmax(mx, fabs((double)r[j]));
    }
    for (int64_t j = 0; j < V; j++) e = fmax(e, fabs((double)g[j] - r[j]));
    return e / mx;
}

static double rows_err(const float *g, const float *r, int64_t rows, int64_t V) {
    double e = 0.0;
    for (int64_t i = 0; i < rows; i++) e = fmax(e, row_err(g + i * V, r + i * V, V));
    return e;
}

static ms_model *load(const char *dir, const char *device, ms_dtype act, int no_graphs, int64_t max_batch) {
    ms_model_opts o = {.max_ctx = 256, .max_batch = max_batch, .device = device, .act = act, .no_graphs = no_graphs};
    ms_model *m = NULL;
    ms_status s = ms_model_load(dir, &o, &m);
    CHECK(s == MS_OK && m, "load %s on %s (%s): %s", dir, device ? device : "cpu", ms_dtype_name(act),
          ms_status_str(s));
    return s == MS_OK ? m : NULL;
}

/* ---- 1: prefill + decode vs the CPU model ------------------------------------------- */

static double prefill_decode_err(ms_model *g, ms_model *c, const int32_t *toks, int64_t n_prompt, int64_t n_dec) {
    const int64_t V = ms_model_vocab(c);
    float *lg = xmalloc((size_t)(n_prompt * V) * sizeof(float)), *lc = xmalloc((size_t)(n_prompt * V) * sizeof(float));
    double worst = INFINITY;
    ms_model_reset(g);
    ms_model_reset(c);
    if (ms_model_forward(g, toks, n_prompt, NULL, NULL, MS_LOGITS_ALL, lg) != MS_OK ||
        ms_model_forward(c, toks, n_prompt, NULL, NULL, MS_LOGITS_ALL, lc) != MS_OK)
        goto done;
    worst = rows_err(lg, lc, n_prompt, V);
    for (int64_t t = 0; t < n_dec; t++) {
        if (ms_model_forward(g, toks + n_prompt + t, 1, NULL, NULL, MS_LOGITS_LAST, lg) != MS_OK ||
            ms_model_forward(c, toks + n_prompt + t, 1, NULL, NULL, MS_LOGITS_LAST, lc) != MS_OK) {
            worst = INFINITY;
            goto done;
        }
        worst = fmax(worst, row_err(lg, lc, V));
    }
done:
    free(lg);
    free(lc);
    return worst;
}

/* ---- 2, 3: tree forward vs paths; compaction vs recompute ------------------------------ */

/* A random tree of n nodes: parent[i] < i (−1 for the roots' parent), depth. */
static void random_tree(ms_rng *r, int64_t n, int32_t *parent, int32_t *depth, uint64_t *mask) {
    for (int64_t i = 0; i < n; i++) {
        parent[i] = i == 0 ? -1 : (int32_t)(ms_rng_u64(r) % (uint64_t)i);
        depth[i] = i == 0 ? 0 : depth[parent[i]] + 1;
        mask[i] = (1ull << i) | (i == 0 ? 0 : mask[parent[i]]);
    }
}

/* Nodes of the path root → i in order into path[]; returns its length. */
static int64_t path_of(const int32_t *parent, int64_t i, int64_t *path) {
    int64_t tmp[64], n = 0;
    for (int64_t k = i; k >= 0; k = parent[k]) tmp[n++] = k;
    for (int64_t k = 0; k < n; k++) path[k] = tmp[n - 1 - k];
    return n;
}

static void check_tree_and_compact(ms_model *g, ms_model *c, const int32_t *prompt, int64_t P, double tol,
                                   const char *label) {
    const int64_t V = ms_model_vocab(g), n = 13;
    ms_rng r;
    ms_rng_seed(&r, 99);
    int32_t parent[64], depth[64], toks[64], pos[64];
    uint64_t mask[64];
    random_tree(&r, n, parent, depth, mask);
    for (int64_t i = 0; i < n; i++) {
        toks[i] = (int32_t)(ms_rng_u64(&r) % (uint64_t)V);
        pos[i] = (int32_t)(P + depth[i]);
    }
    float *tree = xmalloc((size_t)(n * V) * sizeof(float)), *tree_c = xmalloc((size_t)(n * V) * sizeof(float));
    float *one = xmalloc((size_t)V * sizeof(float)), *two = xmalloc((size_t)V * sizeof(float));
    ms_model_reset(g);
    ms_model_reset(c);
    bool ok = ms_model_prefill(g, prompt, P, NULL) == MS_OK && ms_model_prefill(c, prompt, P, NULL) == MS_OK &&
              ms_model_forward(g, toks, n, pos, mask, MS_LOGITS_ALL, tree) == MS_OK &&
              ms_model_forward(c, toks, n, pos, mask, MS_LOGITS_ALL, tree_c) == MS_OK;
    CHECK(ok, "%s: tree forward", label);
    if (!ok) goto done;
    double e_cpu = rows_err(tree, tree_c, n, V);
    printf("  %s: tree of %lld vs CPU tree: err %.3g\n", label, (long long)n, e_cpu);
    CHECK(e_cpu <= tol, "%s: CUDA tree vs CPU tree err %g > %g", label, e_cpu, tol);

    /* each node vs its path forwarded as a plain causal batch after the prompt */
    double e_path = 0.0;
    for (int64_t i = 0; i < n && ok; i++) {
        int64_t path[64];
        int32_t ptoks[64];
        int64_t len = path_of(parent, i, path);
        for (int64_t k = 0; k < len; k++) ptoks[k] = toks[path[k]];
        ok = ms_model_truncate(g, P) == MS_OK &&
             ms_model_forward(g, ptoks, len, NULL, NULL, MS_LOGITS_LAST, one) == MS_OK;
        if (ok) e_path = fmax(e_path, row_err(tree + i * V, one, V));
    }
    CHECK(ok, "%s: path forwards", label);
    printf("  %s: tree rows vs paths alone: err %.3g\n", label, e_path);
    CHECK(e_path <= tol, "%s: tree vs path-by-path err %g > %g", label, e_path, tol);

    /* compaction: keep the path of the last node, then one more token; vs the
     * path prefilled from scratch and the same token */
    int64_t path[64], rows[64];
    int64_t len = path_of(parent, n - 1, path);
    for (int64_t k = 0; k < len; k++) rows[k] = path[k];
    int32_t next = (int32_t)(ms_rng_u64(&r) % (uint64_t)V);
    ok = ms_model_truncate(g, P) == MS_OK &&
         ms_model_forward(g, toks, n, pos, mask, MS_LOGITS_NONE, NULL) == MS_OK &&
         ms_model_compact(g, P, rows, len) == MS_OK && ms_model_len(g) == P + len &&
         ms_model_forward(g, &next, 1, NULL, NULL, MS_LOGITS_LAST, one) == MS_OK;
    CHECK(ok, "%s: compaction", label);
    int32_t seq[128];
    memcpy(seq, prompt, (size_t)P * sizeof(int32_t));
    for (int64_t k = 0; k < len; k++) seq[P + k] = toks[path[k]];
    seq[P + len] = next;
    ms_model_reset(g);
    ok = ok && ms_model_prefill(g, seq, P + len + 1, two) == MS_OK;
    CHECK(ok, "%s: recompute", label);
    if (ok) {
        double e = row_err(one, two, V);
        printf("  %s: compaction of a %lld-node path vs recompute: err %.3g\n", label, (long long)len, e);
        CHECK(e <= tol, "%s: compaction vs recompute err %g > %g", label, e, tol);
    }
done:
    free(tree);
    free(tree_c);
    free(one);
    free(two);
}

/* ---- 4: graphs vs eager ------------------------------------------------------------------- */

/* One fixed call sequence; every logits row and the last hidden rows go into
 * out (concatenated). Returns the number of floats written, −1 on error. */
static int64_t call_sequence(ms_model *m, const int32_t *prompt, int64_t P, float *out) {
    const int64_t V = ms_model_vocab(m), d = ms_model_config(m)->hidden_size;
    int64_t at = 0;
    ms_model_reset(m);
    if (ms_model_forward(m, prompt, P, NULL, NULL, MS_LOGITS_ALL, out + at) != MS_OK) return -1;
    at += P * V;
    for (int t = 0; t < 6; t++) { /* same shape key each step: updates */
        int32_t tok = (int32_t)((t * 31 + 7) % V);
        if (ms_model_forward(m, &tok, 1, NULL, NULL, MS_LOGITS_LAST, out + at) != MS_OK) return -1;
        at += V;
    }
    const int32_t tt[4] = {3, 5, 7, 11};
    const int32_t pos[4] = {(int32_t)ms_model_len(m), (int32_t)ms_model_len(m), (int32_t)ms_model_len(m) + 1,
                            (int32_t)ms_model_len(m) + 1};
    const uint64_t mask[4] = {1, 2, 5, 10};
    for (int rep = 0; rep < 2; rep++) {
        int64_t base = ms_model_len(m);
        if (ms_model_forward(m, tt, 4, pos, mask, MS_LOGITS_ALL, out + at) != MS_OK) return -1;
        at += 4 * V;
        const float *h = ms_model_hidden(m);
        memcpy(out + at, h, (size_t)(4 * d) * sizeof(float));
        at += 4 * d;
        const int64_t rows[2] = {1, 3};
        if (ms_model_compact(m, base, rows, 2) != MS_OK) return -1;
    }
    if (ms_model_forward(m, tt, 3, NULL, NULL, MS_LOGITS_NONE, NULL) != MS_OK) return -1;
    memcpy(out + at, ms_model_hidden(m), (size_t)(3 * d) * sizeof(float));
    at += 3 * d;
    return at;
}

static void check_graphs(const char *dir, const act_case *a, const int32_t *prompt, int64_t P, const char *label) {
    ms_model *gm = load(dir, "cuda", a->act, 0, 0), *em = load(dir, "cuda", a->act, 1, 0);
    if (!gm || !em) goto done;
    const int64_t V = ms_model_vocab(gm), d = ms_model_config(gm)->hidden_size;
    const int64_t cap = P * V + 6 * V + 2 * 4 * (V + d) + 3 * d;
    float *x = xmalloc((size_t)cap * sizeof(float)), *y = xmalloc((size_t)cap * sizeof(float));
    int64_t nx = call_sequence(gm, prompt, P, x);
    int64_t ny = call_sequence(em, prompt, P, y);
    CHECK(nx > 0 && nx == ny, "%s: call sequences (%lld, %lld)", label, (long long)nx, (long long)ny);
    if (nx > 0 && nx == ny) {
        int64_t diff = 0;
        for (int64_t i = 0; i < nx; i++) diff += memcmp(&x[i], &y[i], sizeof(float)) != 0;
        printf("  %s: graphs vs eager: %lld of %lld values differ\n", label, (long long)diff, (long long)nx);
        CHECK(diff == 0, "%s: graphs and eager differ in %lld values", label, (long long)diff);
    }
    int64_t inst, upd, inst_e, upd_e;
    ms_model_graph_counts(gm, &inst, &upd);
    ms_model_graph_counts(em, &inst_e, &upd_e);
    /* 10 forwards over 4 keys: (P, all), (1, last) ×6, (4, all, masked) ×2,
     * (3, none). A key's first call runs eagerly, its second instantiates,
     * later ones update in place (or re-instantiate if the update is
     * refused): 6 graph events, at least the (1, last) and masked keys
     * instantiated, and the decode steps updated. */
    printf("  %s: graphs instantiated %lld, updated %lld\n", label, (long long)inst, (long long)upd);
    CHECK(inst >= 2 && upd >= 1, "%s: graph counts inst %lld upd %lld", label, (long long)inst, (long long)upd);
    CHECK(inst + upd == 10 - 4, "%s: %lld graph events for 10 forwards over 4 keys", label, (long long)(inst + upd));
    CHECK(inst_e == 0 && upd_e == 0, "%s: no_graphs made graphs", label);
    free(x);
    free(y);
done:
    ms_model_free(&gm);
    ms_model_free(&em);
}

/* ---- 5: chunked prefill --------------------------------------------------------------------- */

static void check_chunked(const char *dir, const act_case *a, const int32_t *toks, int64_t n, const char *label) {
    ms_model *one = load(dir, "cuda", a->act, 0, 0), *ch = load(dir, "cuda", a->act, 0, 5);
    if (!one || !ch) goto done;
    const int64_t V = ms_model_vocab(one);
    float *l1 = xmalloc((size_t)V * sizeof(float)), *l2 = xmalloc((size_t)V * sizeof(float));
    bool ok = ms_model_prefill(one, toks, n, l1) == MS_OK && ms_model_prefill(ch, toks, n, l2) == MS_OK &&
              ms_model_len(ch) == n;
    CHECK(ok, "%s: chunked prefill", label);
    if (ok) {
        double e = row_err(l2, l1, V);
        printf("  %s: prefill in chunks of 5 vs one shot: err %.3g\n", label, e);
        CHECK(e <= a->tol, "%s: chunked prefill err %g > %g", label, e, a->tol);
    }
    free(l1);
    free(l2);
done:
    ms_model_free(&one);
    ms_model_free(&ch);
}

/* ---- 6: host copies ------------------------------------------------------------------------- */

static void check_host_copies(ms_model *g, ms_model *c, const act_case *a, const int32_t *toks, int64_t P,
                              const char *label) {
    const ms_hfconfig *cfg = ms_model_config(c);
    const int64_t V = cfg->vocab_size, d = cfg->hidden_size;
    const float *hg = ms_model_lm_head(g), *hc = ms_model_lm_head(c);
    CHECK(hg && hc, "%s: lm_head copies", label);
    if (hg && hc) {
        int64_t bad = 0;
        for (int64_t i = 0; i < V * d; i++) {
            float want = a->act == MS_DTYPE_BF16 ? ms_bf16_to_f32(ms_f32_to_bf16(hc[i])) : ms_f16_to_f32(ms_f32_to_f16(hc[i]));
            bad += memcmp(&want, &hg[i], sizeof(float)) != 0;
        }
        CHECK(bad == 0, "%s: %lld LM-head values differ from the CPU head rounded to act", label, (long long)bad);
        CHECK(ms_model_lm_head(g) == hg, "%s: the host head copy is not kept", label);
    }
    CHECK(ms_model_lm_head_dev(g) && ms_model_hidden_dev(g) && ms_model_stream(g) && ms_model_device(g) == 0,
          "%s: device accessors", label);
    ms_model_reset(g);
    ms_model_reset(c);
    bool ok = ms_model_forward(g, toks, P, NULL, NULL, MS_LOGITS_NONE, NULL) == MS_OK &&
              ms_model_forward(c, toks, P, NULL, NULL, MS_LOGITS_NONE, NULL) == MS_OK;
    CHECK(ok, "%s: forwards for hidden", label);
    if (!ok) return;
    const float *xg = ms_model_hidden(g), *xc = ms_model_hidden(c);
    /* final-norm rows have rms ≈ |norm weight|: the same comparator per row */
    double e = rows_err(xg, xc, P, d);
    printf("  %s: hidden vs CPU: err %.3g\n", label, e);
    CHECK(e <= a->tol, "%s: hidden err %g > %g", label, e, a->tol);
}

/* ---- 7: random models ----------------------------------------------------------------------- */

static void check_random(const act_case *a) {
    ms_hfconfig c;
    memset(&c, 0, sizeof c);
    c.arch = MS_ARCH_QWEN3;
    c.vocab_size = 301;
    c.hidden_size = 64;
    c.intermediate_size = 112;
    c.n_layers = 3;
    c.n_heads = 8;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 512;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1e6;
    c.qk_norm = true;
    c.attention_bias = true;
    c.bos_token_id = -1;
    ms_model_opts oc = {.max_ctx = 128};
    ms_model_opts og = {.max_ctx = 128, .device = "cuda", .act = a->act};
    ms_model *mc = NULL, *mg = NULL, *mo = NULL;
    CHECK(ms_model_new_random(&c, 5, &oc, &mc) == MS_OK, "random CPU model");
    CHECK(ms_model_new_random(&c, 5, &og, &mg) == MS_OK, "random CUDA model");
    CHECK(ms_model_new_random(&c, 6, &og, &mo) == MS_OK, "random CUDA model seed 6");
    if (!mc || !mg || !mo) goto done;
    const int64_t V = c.vocab_size, n = 20;
    int32_t toks[20];
    for (int i = 0; i < n; i++) toks[i] = (int32_t)((i * 53 + 1) % V);
    float *lc = xmalloc((size_t)(n * V) * sizeof(float)), *lg = xmalloc((size_t)(n * V) * sizeof(float)),
          *lo = xmalloc((size_t)(n * V) * sizeof(float));
    bool ok = ms_model_forward(mc, toks, n, NULL, NULL, MS_LOGITS_ALL, lc) == MS_OK &&
              ms_model_forward(mg, toks, n, NULL, NULL, MS_LOGITS_ALL, lg) == MS_OK &&
              ms_model_forward(mo, toks, n, NULL, NULL, MS_LOGITS_ALL, lo) == MS_OK;
    CHECK(ok, "random model forwards");
    if (ok) {
        double e = rows_err(lg, lc, n, V), e_other = rows_err(lo, lc, n, V);
        printf("random %s: CUDA vs CPU random model err %.3g; another seed %.3g\n", ms_dtype_name(a->act), e, e_other);
        CHECK(e <= a->tol, "random model err %g > %g", e, a->tol);
        CHECK(e_other > 10 * a->tol, "another seed not told apart (%g)", e_other);
    }
    /* the weights are the same values: the head copy equals the CPU's rounded */
    const float *hg = ms_model_lm_head(mg), *hc = ms_model_lm_head(mc);
    if (hg && hc) {
        int64_t bad = 0;
        for (int64_t i = 0; i < V * c.hidden_size; i++) {
            float want = a->act == MS_DTYPE_BF16 ? ms_bf16_to_f32(ms_f32_to_bf16(hc[i])) : ms_f16_to_f32(ms_f32_to_f16(hc[i]));
            bad += memcmp(&want, &hg[i], sizeof(float)) != 0;
        }
        CHECK(bad == 0, "random model: %lld head values differ between the host and the device generator",
              (long long)bad);
    } else {
        CHECK(0, "random model head copies");
    }
    free(lc);
    free(lg);
    free(lo);
done:
    ms_model_free(&mc);
    ms_model_free(&mg);
    ms_model_free(&mo);
}

/* ---- driver --------------------------------------------------------------------------------- */

static void run_case(const char *root, int ci) {
    char dir[512], other[512], pert[600];
    if (ref_make_model(root, CASES[ci].name, CASES[ci].args, dir, sizeof dir) != MS_OK) {
        CHECK(0, "%s: cannot make the model", CASES[ci].name);
        return;
    }
    ms_model *c = load(dir, NULL, 0, 0, 0);
    if (!c) return;
    const int64_t V = ms_model_vocab(c), P = 23, n_dec = 5;
    int32_t toks[64];
    ms_rng r;
    ms_rng_seed(&r, 1000 + (uint64_t)ci);
    ref_random_tokens(&r, toks, P + n_dec, V);
    for (size_t ai = 0; ai < sizeof ACTS / sizeof ACTS[0]; ai++) {
        const act_case *a = &ACTS[ai];
        char label[160];
        snprintf(label, sizeof label, "%s/%s", CASES[ci].name, ms_dtype_name(a->act));
        printf("%s (tol %.3g)\n", label, a->tol);
        ms_model *g = load(dir, "cuda:0", a->act, 0, 0);
        if (!g) continue;
        double e = prefill_decode_err(g, c, toks, P, n_dec);
        printf("  %s: prefill + decode vs CPU: err %.3g\n", label, e);
        CHECK(e <= a->tol, "%s: CUDA vs CPU err %g > %g", label, e, a->tol);
        check_tree_and_compact(g, c, toks, P, a->tol, label);
        check_host_copies(g, c, a, toks, P, label);
        ms_model_free(&g);
        check_graphs(dir, a, toks, P, label);
        check_chunked(dir, a, toks, P + n_dec, label);
    }
    /* comparator power (BF16, the looser tolerance): another seed, a perturbed norm */
    char args2[600];
    snprintf(args2, sizeof args2, "%s --seed 4242", CASES[ci].args);
    snprintf(other, sizeof other, "%s-other", CASES[ci].name);
    char odir[512];
    snprintf(pert, sizeof pert, "%s/%s-perturbed", root, CASES[ci].name);
    if (ref_make_model(root, other, args2, odir, sizeof odir) == MS_OK &&
        ref_copy_perturbed(dir, pert, "model.norm.weight", 1, 0.5) == MS_OK) {
        ms_model *go = load(odir, "cuda", MS_DTYPE_BF16, 0, 0), *gp = load(pert, "cuda", MS_DTYPE_BF16, 0, 0);
        if (go && gp) {
            double e1 = prefill_decode_err(go, c, toks, P, 1), e2 = prefill_decode_err(gp, c, toks, P, 1);
            printf("  %s: negative: other seed err %.3g, perturbed norm err %.3g (must be > %.3g)\n",
                   CASES[ci].name, e1, e2, ACTS[0].tol);
            CHECK(e1 > ACTS[0].tol && e2 > ACTS[0].tol, "%s: comparator accepts a wrong model (%g, %g)",
                  CASES[ci].name, e1, e2);
        }
        ms_model_free(&go);
        ms_model_free(&gp);
    } else {
        CHECK(0, "%s: cannot make the negative models", CASES[ci].name);
    }
    ms_model_free(&c);
}

int main(void) {
    ms_log_set_level(MS_LOG_WARN);
    if (ms_k_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    char info[256];
    if (ms_k_cuda_device_info(0, info, sizeof info) == MS_OK) printf("device: %s\n", info);
    char root[256];
    if (!ms_test_tmpdir("ms-cuda-model", root, sizeof root)) {
        perror("mkdtemp");
        return 1;
    }
    for (int ci = 0; ci < (int)(sizeof CASES / sizeof CASES[0]); ci++) run_case(root, ci);
    for (size_t ai = 0; ai < sizeof ACTS / sizeof ACTS[0]; ai++) check_random(&ACTS[ai]);
    ms_test_rmtree(root);
    if (g_fail) {
        fprintf(stderr, "test_cuda_model: %d check(s) FAILED\n", g_fail);
        return 1;
    }
    printf("test_cuda_model: OK\n");
    return 0;
}
