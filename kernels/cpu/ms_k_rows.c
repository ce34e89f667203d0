/* ms_k_rows.c — row-wise ops on f32 logits (every backend's host side) and
 * the RoPE table. */
#include "ms_isa.h"
#include "ms_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

/* ---- RoPE ---------------------------------------------------------------- */

/* inv_freq[i] = theta^(-2i/hd); with llama3 scaling (transformers
 * _compute_llama3_parameters): long wavelengths are divided by `factor`,
 * short ones kept, the band between interpolated smoothly. */
void ms_k_rope_inv_freq(double *inv_freq, int64_t head_dim, const ms_k_rope_params *p) {
    int64_t half = head_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        double f = 1.0 / pow(p->theta, (double)(2 * i) / (double)head_dim);
        if (p->llama3) {
            double low_wavelen = (double)p->original_max_pos / p->low_freq_factor;
            double high_wavelen = (double)p->original_max_pos / p->high_freq_factor;
            double wavelen = 2.0 * M_PI / f;
            if (wavelen > low_wavelen) {
                f = f / p->factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = ((double)p->original_max_pos / wavelen - p->low_freq_factor) /
                                (p->high_freq_factor - p->low_freq_factor);
                f = (1.0 - smooth) * f / p->factor + smooth * f;
            }
        }
        inv_freq[i] = f;
    }
}

ms_status ms_k_rope_build(ms_k_rope *r, int64_t max_pos, int64_t head_dim, const ms_k_rope_params *p) {
    memset(r, 0, sizeof *r);
    if (head_dim <= 0 || head_dim % 2 || max_pos <= 0)
        MS_FAIL(MS_ERR_INVALID, "rope: bad head_dim %lld / max_pos %lld", (long long)head_dim, (long long)max_pos);
    int64_t half = head_dim / 2;
    double *inv = ms_malloc((size_t)half * sizeof *inv);
    r->cos = ms_malloc((size_t)(max_pos * half) * sizeof(float));
    r->sin = ms_malloc((size_t)(max_pos * half) * sizeof(float));
    if (!inv || !r->cos || !r->sin) {
        free(inv);
        ms_k_rope_free(r);
        return MS_ERR_NOMEM;
    }
    ms_k_rope_inv_freq(inv, head_dim, p);
    for (int64_t pos = 0; pos < max_pos; pos++)
        for (int64_t i = 0; i < half; i++) {
            double a = (double)pos * inv[i];
            r->cos[pos * half + i] = (float)cos(a);
            r->sin[pos * half + i] = (float)sin(a);
        }
    free(inv);
    r->max_pos = max_pos;
    r->half = half;
    return MS_OK;
}

void ms_k_rope_free(ms_k_rope *r) {
    free(r->cos);
    free(r->sin);
    r->cos = r->sin = NULL;
    r->max_pos = r->half = 0;
}

/* ---- softmax family ------------------------------------------------------- */

/* A row of all -inf (or empty of finite values) gives a uniform distribution. */
void ms_k_softmax(float *y, const float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    if (mx == -INFINITY) {
        for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (float)n;
        return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - mx);
        sum += y[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

void ms_k_log_softmax(float *y, const float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    if (mx == -INFINITY) {
        for (int64_t i = 0; i < n; i++) y[i] = -logf((float)n);
        return;
    }
    /* Subtract max and log-sum in double: rounding lse = mx + log(sum) to
     * f32 at the logits' magnitude would cost ulp(|mx|)/2 on every output. */
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    double ls = log(sum);
    for (int64_t i = 0; i < n; i++) y[i] = (float)(((double)x[i] - mx) - ls);
}

/* The loop that defines ms_k_argmax: the first index of the largest
 * non-NaN value (0 when there is none). */
static int32_t argmax_scalar(const float *x, int64_t n) {
    int32_t best = 0;
    float bv = -INFINITY;
    bool found = false;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i])) continue;
        if (!found || x[i] > bv) {
            bv = x[i];
            best = (int32_t)i;
            found = true;
        }
    }
    return best;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The same answer in two vector passes (greedy decoding runs this over the
 * whole vocabulary every token: 262,144 ids on Gemma 3, ~3 % of a decode
 * step as the scalar loop). Pass 1: the largest non-NaN value (vmaxps
 * returns its second operand when the first is NaN). Pass 2: the first
 * index holding it (NaN never compares equal; -0 == +0 as in the loop). */
__attribute__((target("avx512f"))) static int32_t argmax_avx512(const float *x, int64_t n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
    float bv = _mm512_reduce_max_ps(m);
    bool found = bv > -INFINITY;
    for (; i < n; i++)
        if (!isnan(x[i]) && (!found || x[i] > bv)) bv = x[i], found = true;
    if (!found) return argmax_scalar(x, n); /* every value NaN or -inf: rare, and the loop's answer */
    const __m512 b = _mm512_set1_ps(bv);
    for (i = 0; i + 16 <= n; i += 16) {
        const __mmask16 k = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), b, _CMP_EQ_OQ);
        if (k) return (int32_t)(i + __builtin_ctz((unsigned)k));
    }
    for (; i < n; i++)
        if (x[i] == bv) return (int32_t)i;
    return 0; /* not reached: bv came from x */
}
#endif

int32_t ms_k_argmax(const float *x, int64_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (ms_isa_includes(ms_isa_active(), MS_ISA_AVX512)) return argmax_avx512(x, n);
#endif
    return argmax_scalar(x, n);
}

/* "a ranks above b": larger value, ties to the lower index; NaN ranks last. */
static inline bool ranks_above(float va, int32_t ia, float vb, int32_t ib) {
    if (isnan(vb)) return !isnan(va) || ia < ib;
    if (isnan(va)) return false;
    return va > vb || (va == vb && ia < ib);
}

/* Min-heap of the k best seen so far (root = the worst of them). O(n log k). */
static void heap_sift_down(int32_t *idx, float *val, int64_t k, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < k && ranks_above(val[w], idx[w], val[l], idx[l])) w = l;
        if (r < k && ranks_above(val[w], idx[w], val[r], idx[r])) w = r;
        if (w == i) return;
        float tv = val[i];
        int32_t ti = idx[i];
        val[i] = val[w];
        idx[i] = idx[w];
        val[w] = tv;
        idx[w] = ti;
        i = w;
    }
}

void ms_k_topk(const float *x, int64_t n, int64_t k, int32_t *idx, float *val) {
    MS_ASSERT(k >= 0 && k <= n);
    if (k == 0) return;
    for (int64_t i = 0; i < k; i++) {
        idx[i] = (int32_t)i;
        val[i] = x[i];
    }
    for (int64_t i = k / 2 - 1; i >= 0; i--) heap_sift_down(idx, val, k, i);
    for (int64_t i = k; i < n; i++) {
        if (ranks_above(x[i], (int32_t)i, val[0], idx[0])) {
            val[0] = x[i];
            idx[0] = (int32_t)i;
            heap_sift_down(idx, val, k, 0);
        }
    }
    /* Heap-sort into descending rank order: pop the worst to the back. */
    for (int64_t end = k - 1; end > 0; end--) {
        float tv = val[0];
        int32_t ti = idx[0];
        val[0] = val[end];
        idx[0] = idx[end];
        val[end] = tv;
        idx[end] = ti;
        heap_sift_down(idx, val, end, 0);
    }
}

/* ---- sampling -------------------------------------------------------------- */

typedef struct {
    float p;
    int32_t i;
} prob_idx;

static int cmp_prob_desc(const void *a, const void *b) {
    const prob_idx *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

/* probs = softmax(logits / T), then top-p: keep the smallest prefix of ids in
 * descending probability (ties: lower id first) whose mass reaches top_p,
 * renormalise, zero the rest. T == 0 puts all mass on the argmax. */
void ms_k_sampling_probs(const float *logits, int64_t n, const ms_k_sampling *s, float *probs) {
    if (s->temperature <= 0.0f) {
        memset(probs, 0, (size_t)n * sizeof *probs);
        probs[ms_k_argmax(logits, n)] = 1.0f;
        return;
    }
    float inv_t = 1.0f / s->temperature;
    for (int64_t i = 0; i < n; i++) probs[i] = logits[i] * inv_t;
    ms_k_softmax(probs, probs, n);
    if (s->top_p <= 0.0f || s->top_p >= 1.0f) return;
    /* Only ids above a threshold t can be in the kept prefix when the ids
     * with p ≥ t already hold top_p of the mass: halve t from the largest
     * probability until they do, then sort just those. The kept prefix and its
     * summed mass are exactly those of sorting all n ids (every id below t
     * comes after every id at or above it), at a fraction of the cost on a
     * 262,144-id vocabulary. */
    float pmax = 0.0f;
    for (int64_t i = 0; i < n; i++) pmax = probs[i] > pmax ? probs[i] : pmax;
    float t = pmax;
    int64_t m = 0;
    for (;;) {
        double above = 0.0;
        m = 0;
        for (int64_t i = 0; i < n; i++)
            if (probs[i] >= t) {
                above += probs[i];
                m++;
            }
        if (above >= (double)s->top_p || t == 0.0f || m == n) break;
        t = t * 0.5f < 1e-30f ? 0.0f : t * 0.5f;
    }
    prob_idx *order = malloc((size_t)m * sizeof *order);
    MS_ASSERT(order != NULL);
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++)
        if (probs[i] >= t) order[c++] = (prob_idx){probs[i], (int32_t)i};
    qsort(order, (size_t)m, sizeof *order, cmp_prob_desc);
    double mass = 0.0;
    int64_t keep = 0;
    while (keep < m && mass < (double)s->top_p) mass += order[keep++].p;
    float inv = (float)(1.0 / mass);
    /* everything not kept is zeroed: ids below t, and candidates past the prefix */
    for (int64_t i = 0; i < n; i++)
        if (probs[i] < t) probs[i] = 0.0f;
    for (int64_t i = keep; i < m; i++) probs[order[i].i] = 0.0f;
    for (int64_t i = 0; i < keep; i++) probs[order[i].i] *= inv;
    free(order);
}

/* Inverse-CDF draw in id order from ms_k_sampling_probs. */
int32_t ms_k_sample(const float *logits, int64_t n, const ms_k_sampling *s, ms_rng *rng, float *probs) {
    if (s->temperature <= 0.0f) return ms_k_argmax(logits, n);
    ms_k_sampling_probs(logits, n, s, probs);
    double u = ms_rng_uniform(rng), c = 0.0;
    int32_t last = 0;
    for (int64_t i = 0; i < n; i++) {
        if (probs[i] <= 0.0f) continue;
        c += probs[i];
        last = (int32_t)i;
        if (u < c) return (int32_t)i;
    }
    return last; /* rounding: u landed past the summed mass */
}
