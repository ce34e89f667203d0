/* ms_kernels.h — the op table.
 *
 * Every op has a C reference (kernels/cpu, the specification) and, from the
 * CUDA issue on, a CUDA twin with the same signature shape (kernels/cuda).
 * Device, dtype and stream are chosen once, when the table is made; callers
 * only ever go through the table. Buffers are dense row-major; activations are
 * in the table's act dtype (f32 on CPU), logits are always f32. What else
 * differs per device (buffers, copies, sync, the linear over a typed weight,
 * recorded forwards, the draft head) is the backend table, ms_k_backend.h.
 *
 * Shapes use: n = rows (tokens), d = hidden, k/m = GEMM in/out, hd = head_dim.
 */
#ifndef MS_KERNELS_H
#define MS_KERNELS_H

#include "ms_common.h"
#include "ms_tensor.h"

/* RoPE table: cos/sin of pos·inv_freq[i] for pos < max_pos, i < hd/2,
 * computed once in double precision (llama3 frequency scaling applied to
 * inv_freq when configured). Rotate-half pairing (i, i + hd/2) as in HF. */
typedef struct {
    int64_t max_pos, half; /* half = hd / 2 */
    float *cos, *sin;      /* [max_pos, half], owned */
} ms_k_rope;

typedef struct {
    double theta;
    int llama3; /* 1: apply llama3 scaling with the fields below */
    double factor, low_freq_factor, high_freq_factor;
    int64_t original_max_pos;
} ms_k_rope_params;

ms_status ms_k_rope_build(ms_k_rope *r, int64_t max_pos, int64_t head_dim, const ms_k_rope_params *p);
void ms_k_rope_free(ms_k_rope *r);
/* inv_freq[i] for i < hd/2 (double), exposed so tests can check the scaling. */
void ms_k_rope_inv_freq(double *inv_freq, int64_t head_dim, const ms_k_rope_params *p);

/* CPU attention: the most pool parts a forward's attention is split into. */
enum { MS_K_ATTN_PARTS = 8 };

/* Attention shapes. The KV cache of one layer holds rows [0, max_ctx) of
 * n_kv_heads·hd values each, for K and V separately. A call attends n_q query
 * rows that sit at cache rows [ctx, ctx + n_q).
 * Without a mask: query i sees rows [0, ctx + i] (causal).
 * With a mask (tree attention over the last ≤ 64 rows): the masked region is
 * rows [b, ctx + n_q) with b = ctx − mask_back; query i sees every row < b and
 * row b + j of the region iff mask[i] >> j & 1; mask_back + n_q ≤ 64. A draft
 * tree drafted level by level uses mask_back so a node sees its ancestors among
 * rows written by earlier passes; a one-shot verify uses mask_back = 0. */
typedef struct {
    int64_t n_q;        /* query rows */
    int64_t ctx;        /* committed rows before the batch */
    int64_t n_heads;    /* query heads */
    int64_t n_kv_heads; /* GQA: query head h uses kv head h / (n_heads / n_kv_heads) */
    int64_t head_dim;
    float scale;        /* usually 1/sqrt(hd) */
    int64_t mask_back;  /* masked rows before the batch (0: the mask covers the batch only) */
    /* Sliding window (Gemma 3 local layers): 0 = none. Else query i at
     * position q_pos[i] does not see committed rows t with q_pos[i] − t ≥
     * window (a committed row's position is its row index). Rows of the batch
     * and of the masked region are always within 64 of the query, so a window
     * ≥ 64 never hides them. CPU only for now (the CUDA table refuses it). */
    int64_t window;
    const int32_t *q_pos; /* [n_q] positions of the query rows (needed when window > 0) */
    /* CPU: 0 or 1, the scratch holds ctx + n_q floats and one thread runs the
     * op; P > 1, it holds P·(ctx + n_q) and the (row, head) pairs are split
     * over up to P pool threads (the same bits). Other backends ignore it. */
    int64_t scratch_parts;
} ms_k_attn_shape;

typedef struct ms_k_ops ms_k_ops;
struct ms_k_ops {
    const char *name; /* "cpu-f32" */
    ms_dtype act;     /* activation dtype */
    ms_dtype weight;  /* weight storage dtype the table expects */
    void *ctx;        /* backend state; NULL on CPU */

    /* y[n,m] = x[n,k] · W[m,k]^T (+ b[m] when b != NULL): the dense GEMM in
     * the table's dtype. Callers multiply through the backend's linear
     * (ms_k_backend.h), which is built on it; tests twin-test it directly. */
    void (*gemm)(void *ctx, void *y, const void *x, const void *w, const void *b, int64_t n, int64_t k,
                 int64_t m);
    /* y[n,d] = x / sqrt(mean(x²) + eps) · w   (x, y may alias). */
    void (*rmsnorm)(void *ctx, void *y, const void *x, const void *w, int64_t n, int64_t d, float eps);
    /* y[i] += x[i], i < n (residual). */
    void (*add)(void *ctx, void *y, const void *x, int64_t n);
    /* In place on x[n, n_heads, hd]: rotate-half RoPE at positions pos[n]. */
    void (*rope)(void *ctx, void *x, int64_t n, int64_t n_heads, int64_t hd, const int32_t *pos,
                 const ms_k_rope *table);
    /* out[n_q, n_heads·hd] = softmax(q·Kᵀ·scale + mask)·V over cache rows
     * [0, ctx + n_q) as described above. q is [n_q, n_heads·hd]; kc/vc point at
     * row 0 of the layer's cache. `scratch` holds ≥ ctx + n_q floats
     * (times s->scratch_parts when that is above 1). */
    void (*attention)(void *ctx, void *out, const void *q, const void *kc, const void *vc,
                      const ms_k_attn_shape *s, const uint64_t *mask, float *scratch);
    /* y[i] = silu(gate[i]) · up[i], i < n. */
    void (*silu_glu)(void *ctx, void *y, const void *gate, const void *up, int64_t n);
    /* y[i] = gelu_tanh(gate[i]) · up[i], i < n (Gemma); NULL where not implemented. */
    void (*gelu_glu)(void *ctx, void *y, const void *gate, const void *up, int64_t n);
    /* y[i] *= s, i < n (Gemma's sqrt(d) embedding scale); NULL where not implemented. */
    void (*scale)(void *ctx, void *y, float s, int64_t n);
    /* y[i, :] = table[ids[i], :] converted to act, i < n; table in `table_dtype`. */
    void (*embed)(void *ctx, void *y, const void *table, ms_dtype table_dtype, const int32_t *ids, int64_t n,
                  int64_t d);
    /* Copy cache rows src[i] → dst[i] (row = row_elems act values), i < n,
     * correct for overlapping moves in ascending order (compaction: dst ≤ src). */
    void (*move_rows)(void *ctx, void *cache, int64_t row_elems, const int64_t *src, const int64_t *dst, int64_t n);
};

/* The CPU table (f32 activations and weights, OpenBLAS GEMM). */
const ms_k_ops *ms_k_cpu_ops(void);

/* Row-wise ops on f32 logits, shared by every backend's host side. */
void ms_k_softmax(float *y, const float *x, int64_t n);     /* y may alias x */
void ms_k_log_softmax(float *y, const float *x, int64_t n); /* y may alias x */
int32_t ms_k_argmax(const float *x, int64_t n);            /* first max; NaN never wins */
/* The k largest values of x[n], descending; ties go to the lower index. */
void ms_k_topk(const float *x, int64_t n, int64_t k, int32_t *idx, float *val);

/* Sampling: temperature T (> 0), nucleus top_p ∈ (0,1] over the softmax of
 * x/T; T == 0 means greedy argmax. `probs` is scratch of n floats; returns the
 * id. The same rng state gives the same draw on every machine. */
typedef struct {
    float temperature;
    float top_p;
} ms_k_sampling;
int32_t ms_k_sample(const float *logits, int64_t n, const ms_k_sampling *s, ms_rng *rng, float *probs);
/* The distribution ms_k_sample draws from (temperature + top-p applied,
 * renormalised) into probs[n]; used by the sampling verifier and tests. */
void ms_k_sampling_probs(const float *logits, int64_t n, const ms_k_sampling *s, float *probs);

/* Threads for the CPU ops: OpenBLAS GEMM and the thread pool of the
 * quantized matmuls (cpu/ms_pool.h); 1 by default. */
void ms_k_cpu_set_threads(int n);
/* The number of online cores, capped at the pool's most threads (the
 * default for --threads). */
int ms_k_cpu_cores(void);

/* OpenBLAS chooses its kernels in a library constructor, before main. On CPU
 * models it does not know (e.g. virtualised "Intel Xeon Processor") it falls
 * back to its generic SSE3 "Prescott" kernels, several times slower. Called
 * first thing in main: if that happened on a CPU with AVX2 / AVX-512 and the
 * user set no OPENBLAS_CORETYPE, set the matching core type and re-exec the
 * program once (argv unchanged). Returns normally otherwise. */
void ms_k_cpu_fix_blas_core(char **argv);

#endif
