/* test_kernels_ref.c — the f32 helpers and the CPU op table against naive
 * double-precision loops written here, separately from kernels/.
 *
 * Every comparison prints the max abs difference it found; every check can
 * fail (the sampling chi-square test also shows it rejects a wrong
 * distribution). Seeded, deterministic.
 */
#include "ms_isa.h"
#include "ms_kernels.h"
#include "ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

#define GUARD 8
static const float SENTINEL = -12345.678f;

static void fill_normal(ms_rng *r, float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = ms_rng_normal(r) * scale;
}

/* max |a - b| / (1 + |b|) */
static double max_rel_diff(const float *a, const double *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));
        if (isnan(e)) return INFINITY;
        if (e > m) m = e;
    }
    return m;
}

/* An output buffer with GUARD sentinel floats on each side. */
static float *guarded(int64_t n) {
    float *b = malloc((size_t)(n + 2 * GUARD) * sizeof(float));
    for (int64_t i = 0; i < n + 2 * GUARD; i++) b[i] = SENTINEL;
    return b + GUARD;
}

static bool guards_ok(const float *y, int64_t n) {
    for (int64_t i = 1; i <= GUARD; i++)
        if (y[-i] != SENTINEL || y[n - 1 + i] != SENTINEL) return false;
    return true;
}

static void guarded_free(float *y) { free(y - GUARD); }

/* ---- softmax / log_softmax ------------------------------------------------ */

static void naive_softmax(double *p, const float *x, int64_t n) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (p[i] = exp((double)x[i] - mx));
    for (int64_t i = 0; i < n; i++) p[i] /= s;
}

static void naive_log_softmax(double *p, const float *x, int64_t n) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    double lse = mx + log(s);
    for (int64_t i = 0; i < n; i++) p[i] = (double)x[i] - lse;
}

static void test_softmax(ms_rng *r) {
    const int64_t sizes[] = {1, 2, 7, 100, 1001};
    double worst_sm = 0, worst_lsm = 0;
    for (int variant = 0; variant < 4; variant++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            float *x = malloc((size_t)n * sizeof(float));
            double *ref = malloc((size_t)n * sizeof(double));
            float *y = guarded(n);
            /* 0: N(0,3); 1: large magnitudes around 1e4 (naive exp overflows);
             * 2: some -inf entries (never the only one); 3: very negative. */
            fill_normal(r, x, n, 3.0f);
            if (variant == 1)
                for (int64_t i = 0; i < n; i++) x[i] = 1e4f + x[i] * 10.0f;
            if (variant == 2)
                for (int64_t i = 1; i < n; i += 3) x[i] = -INFINITY;
            if (variant == 3)
                for (int64_t i = 0; i < n; i++) x[i] = -3e4f + x[i];

            naive_softmax(ref, x, n);
            ms_k_softmax(y, x, n);
            double e = ref_max_abs_diff(y, ref, n);
            ms_check_worst(&worst_sm, e);
            CHECK(e <= 2e-6, "softmax variant %d n %lld: max abs diff %g", variant, (long long)n, e);
            CHECK(guards_ok(y, n), "softmax wrote outside [0, n)");
            double sum = 0;
            for (int64_t i = 0; i < n; i++) sum += y[i];
            CHECK(fabs(sum - 1.0) <= 1e-5, "softmax sums to %.9f", sum);
            for (int64_t i = 0; i < n; i++)
                if (isinf(x[i])) CHECK(y[i] == 0.0f, "softmax of -inf is %g", y[i]);

            naive_log_softmax(ref, x, n);
            ms_k_log_softmax(y, x, n);
            double el = 0;
            for (int64_t i = 0; i < n; i++) {
                if (isinf(ref[i])) {
                    CHECK(isinf(y[i]) && y[i] < 0, "log_softmax of -inf is %g", y[i]);
                    continue;
                }
                double d = fabs((double)y[i] - ref[i]) / (1.0 + fabs(ref[i]));
                if (!(d <= el)) el = d;
            }
            ms_check_worst(&worst_lsm, el);
            CHECK(el <= 2e-6, "log_softmax variant %d n %lld: max rel diff %g", variant, (long long)n, el);
            CHECK(guards_ok(y, n), "log_softmax wrote outside [0, n)");

            /* In place (y aliases x). */
            float *z = malloc((size_t)n * sizeof(float));
            memcpy(z, x, (size_t)n * sizeof(float));
            ms_k_softmax(z, z, n);
            naive_softmax(ref, x, n);
            CHECK(ref_max_abs_diff(z, ref, n) <= 2e-6, "softmax in place differs");
            memcpy(z, x, (size_t)n * sizeof(float));
            ms_k_log_softmax(z, z, n);
            naive_log_softmax(ref, x, n);
            double ez = 0;
            for (int64_t i = 0; i < n; i++) {
                if (isinf(ref[i]))
                    ez = fmax(ez, isinf(z[i]) ? 0.0 : INFINITY);
                else
                    ez = fmax(ez, fabs((double)z[i] - ref[i]) / (1.0 + fabs(ref[i])));
            }
            CHECK(ez <= 2e-6, "log_softmax in place, variant %d n %lld: max rel diff %g", variant, (long long)n, ez);
            free(z);
            free(x);
            free(ref);
            guarded_free(y);
        }
    }
    printf("softmax: max abs diff %.3g; log_softmax: max rel diff %.3g\n", worst_sm, worst_lsm);
}

/* ---- argmax / topk --------------------------------------------------------- */

static void test_argmax(ms_rng *r) {
    for (int t = 0; t < 200; t++) {
        int64_t n = 1 + (int64_t)(ms_rng_u64(r) % 50);
        float x[64];
        /* Small integer values so ties are common. */
        for (int64_t i = 0; i < n; i++) x[i] = (float)(ms_rng_u64(r) % 5);
        int32_t want = 0;
        for (int64_t i = 1; i < n; i++)
            if (x[i] > x[want]) want = (int32_t)i;
        int32_t got = ms_k_argmax(x, n);
        CHECK(got == want, "argmax n %lld: got %d want %d (first max)", (long long)n, got, want);
    }
    /* Long rows (the vector path, its tail) with NaN, -inf and signed zeros. */
    static float y[1000];
    for (int t = 0; t < 200; t++) {
        int64_t n = 1 + (int64_t)(ms_rng_u64(r) % 1000);
        for (int64_t i = 0; i < n; i++) {
            uint64_t u = ms_rng_u64(r) % 16;
            y[i] = u == 0 ? NAN : u == 1 ? -INFINITY : u == 2 ? -0.0f : u == 3 ? 0.0f : (float)(u % 7) - 9.0f;
        }
        if (t % 3 == 0) y[ms_rng_u64(r) % n] = 1.0f + (float)(t % 2); /* a unique or a tied positive max */
        int32_t want = -1;
        for (int64_t i = 0; i < n; i++)
            if (!isnan(y[i]) && (want < 0 || y[i] > y[want])) want = (int32_t)i;
        if (want < 0) want = 0;
        int32_t got = ms_k_argmax(y, n);
        CHECK(got == want, "argmax n %lld: got %d want %d (first max, NaN skipped)", (long long)n, got, want);
    }
    float a[] = {NAN, 1.0f, 3.0f, NAN, 3.0f, 2.0f};
    CHECK(ms_k_argmax(a, 6) == 2, "argmax with NaN: got %d want 2 (NaN never wins, first max)", ms_k_argmax(a, 6));
    float b[] = {-INFINITY, NAN, -INFINITY, -5.0f};
    CHECK(ms_k_argmax(b, 4) == 3, "argmax with -inf/NaN: got %d want 3", ms_k_argmax(b, 4));
    float c[] = {NAN, NAN, NAN};
    int32_t g = ms_k_argmax(c, 3);
    CHECK(g >= 0 && g < 3, "argmax of all-NaN out of range: %d", g);
    printf("argmax: ok (all-NaN input → %d)\n", g);
}

static void test_topk(ms_rng *r) {
    int n_cases = 0;
    for (int t = 0; t < 100; t++) {
        int64_t n = 1 + (int64_t)(ms_rng_u64(r) % 40);
        float x[64];
        for (int64_t i = 0; i < n; i++) x[i] = (t & 1) ? (float)(ms_rng_u64(r) % 4) : ms_rng_normal(r);
        int64_t ks[3] = {1, n, 1 + (int64_t)(ms_rng_u64(r) % (uint64_t)n)};
        for (int ki = 0; ki < 3; ki++) {
            int64_t k = ks[ki];
            /* Naive: repeatedly take the first largest not yet taken. */
            bool taken[64] = {0};
            int32_t want[64];
            for (int64_t j = 0; j < k; j++) {
                int64_t best = -1;
                for (int64_t i = 0; i < n; i++)
                    if (!taken[i] && (best < 0 || x[i] > x[best])) best = i;
                taken[best] = true;
                want[j] = (int32_t)best;
            }
            int32_t idx[64];
            float val[64];
            ms_k_topk(x, n, k, idx, val);
            for (int64_t j = 0; j < k; j++) {
                CHECK(idx[j] == want[j], "topk n %lld k %lld rank %lld: idx %d want %d", (long long)n, (long long)k,
                      (long long)j, idx[j], want[j]);
                CHECK(val[j] == x[want[j]], "topk value rank %lld: %g want %g", (long long)j, val[j], x[want[j]]);
            }
            n_cases++;
        }
    }
    printf("topk: %d cases ok (ties → lower index, k = 1, k = n)\n", n_cases);
}

/* ---- RoPE frequencies and table -------------------------------------------- */

static void test_rope(ms_rng *r) {
    /* Llama 3.1 settings (hd 128) and a tiny case whose small original context
     * puts frequencies in all three llama3 bands. */
    struct {
        int64_t hd;
        ms_k_rope_params p;
    } cases[] = {
        {64, {.theta = 10000.0}},
        {128, {.theta = 500000.0, .llama3 = 1, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
               .original_max_pos = 8192}},
        {16, {.theta = 500000.0, .llama3 = 1, .factor = 4, .low_freq_factor = 1, .high_freq_factor = 4,
              .original_max_pos = 64}},
        {10, {.theta = 1000000.0}},
    };
    double worst = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t hd = cases[c].hd, half = hd / 2;
        const ms_k_rope_params *p = &cases[c].p;
        double got[64], want[64], plain[64];
        ms_k_rope_inv_freq(got, hd, p);
        ref_rope_inv_freq(want, hd, p->theta, p->llama3, p->factor, p->low_freq_factor, p->high_freq_factor,
                          (double)p->original_max_pos);
        ref_rope_inv_freq(plain, hd, p->theta, false, 0, 0, 0, 0);
        int kept = 0, divided = 0, smoothed = 0;
        for (int64_t i = 0; i < half; i++) {
            double e = fabs(got[i] - want[i]) / want[i];
            ms_check_worst(&worst, e);
            CHECK(e <= 1e-12, "inv_freq case %zu i %lld: %.17g want %.17g", c, (long long)i, got[i], want[i]);
            if (want[i] == plain[i])
                kept++;
            else if (fabs(want[i] - plain[i] / p->factor) <= 1e-15 * plain[i])
                divided++;
            else
                smoothed++;
        }
        if (p->llama3) {
            /* The scaling must actually be exercised (else the comparison proves little). */
            CHECK(kept > 0 && divided > 0 && smoothed > 0, "llama3 case %zu: bands kept %d divided %d smoothed %d",
                  c, kept, divided, smoothed);
        }

        /* The table: cos/sin of pos·inv_freq (computed in double, stored f32). */
        int64_t max_pos = 300;
        ms_k_rope tab = {0};
        CHECK(ms_k_rope_build(&tab, max_pos, hd, p) == MS_OK, "rope_build failed");
        if (tab.cos && tab.sin) {
            CHECK(tab.half == half && tab.max_pos == max_pos, "rope table shape %lld/%lld", (long long)tab.max_pos,
                  (long long)tab.half);
            double e = 0;
            for (int64_t pos = 0; pos < max_pos; pos++)
                for (int64_t i = 0; i < half; i++) {
                    double a = (double)pos * want[i];
                    e = fmax(e, fabs(tab.cos[pos * half + i] - cos(a)));
                    e = fmax(e, fabs(tab.sin[pos * half + i] - sin(a)));
                }
            CHECK(e <= 1e-6, "rope table case %zu: max abs diff %g", c, e);
        }
        ms_k_rope_free(&tab);
    }
    (void)r;
    printf("rope inv_freq: max rel diff %.3g (llama3 bands all exercised)\n", worst);
}

/* ---- sampling ---------------------------------------------------------------- */

/* Naive temperature + top-p. Tie rule assumed: tokens are ranked by
 * descending probability, equal probabilities by ascending index (as topk);
 * the kept set is the shortest prefix of that ranking whose mass ≥ top_p.
 * T == 0: one-hot at the argmax (first max). */
static void naive_sampling_probs(double *q, const float *x, int64_t n, float T, float top_p) {
    if (T == 0.0f) {
        int64_t a = 0;
        for (int64_t i = 1; i < n; i++)
            if (x[i] > x[a]) a = i;
        for (int64_t i = 0; i < n; i++) q[i] = i == a;
        return;
    }
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, (double)x[i] / T);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (q[i] = exp((double)x[i] / T - mx));
    for (int64_t i = 0; i < n; i++) q[i] /= s;
    if (top_p >= 1.0f) return;
    bool *kept = calloc((size_t)n, 1);
    double mass = 0;
    while (mass < (double)top_p) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++)
            if (!kept[i] && (best < 0 || q[i] > q[best])) best = i;
        if (best < 0) break;
        kept[best] = true;
        mass += q[best];
    }
    for (int64_t i = 0; i < n; i++) q[i] = kept[i] ? q[i] / mass : 0.0;
    free(kept);
}

/* Distance of top_p from every prefix mass of the ranking: a test vector
 * whose cut is closer than float rounding would test rounding, not the rule. */
static double cut_margin(const float *x, int64_t n, float T, float top_p) {
    double *q = malloc((size_t)n * sizeof(double));
    naive_sampling_probs(q, x, n, T, 1.0f);
    bool *kept = calloc((size_t)n, 1);
    double mass = 0, margin = INFINITY;
    for (int64_t j = 0; j < n; j++) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++)
            if (!kept[i] && (best < 0 || q[i] > q[best])) best = i;
        kept[best] = true;
        mass += q[best];
        margin = fmin(margin, fabs(mass - (double)top_p));
        if (mass > (double)top_p) break; /* prefix masses only grow from here */
    }
    free(q);
    free(kept);
    return margin;
}

static void test_sampling_probs(ms_rng *r) {
    const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
    const float tops[] = {1.0f, 0.95f, 0.9f, 0.5f, 0.1f};
    double worst = 0;
    int cases = 0;
    for (int t = 0; t < 60; t++) {
        int64_t n = 2 + (int64_t)(ms_rng_u64(r) % 60);
        float x[64], probs[64];
        double want[64];
        fill_normal(r, x, n, 2.0f);
        for (size_t ti = 0; ti < 4; ti++)
            for (size_t pi = 0; pi < 5; pi++) {
                ms_k_sampling s = {temps[ti], tops[pi]};
                if (s.top_p < 1.0f && cut_margin(x, n, s.temperature, s.top_p) < 1e-4) continue;
                naive_sampling_probs(want, x, n, s.temperature, s.top_p);
                ms_k_sampling_probs(x, n, &s, probs);
                double e = ref_max_abs_diff(probs, want, n);
                ms_check_worst(&worst, e);
                CHECK(e <= 2e-6, "sampling_probs n %lld T %g p %g: max abs diff %g", (long long)n, s.temperature,
                      s.top_p, e);
                for (int64_t i = 0; i < n; i++)
                    CHECK((want[i] == 0.0) == (probs[i] == 0.0f),
                          "sampling_probs T %g p %g: token %lld kept %d, expected %d", s.temperature, s.top_p,
                          (long long)i, probs[i] != 0.0f, want[i] != 0.0);
                cases++;
            }
    }
    /* Large vocabularies (the kept set found from a threshold, not a full
     * sort): the same kept set and values as the naive full ranking. */
    for (int t = 0; t < 4; t++) {
        const int64_t n = t < 2 ? 5000 : 262144;
        float *x = malloc((size_t)n * sizeof *x), *probs = malloc((size_t)n * sizeof *probs);
        double *want = malloc((size_t)n * sizeof *want);
        if (!x || !probs || !want) abort();
        /* wide logits on the big vocabulary keep the naive O(n · kept) ranking cheap */
        fill_normal(r, x, n, t == 0 ? 2.0f : 6.0f);
        ms_k_sampling s = {1.0f, t % 2 ? 0.8f : 0.95f};
        if (cut_margin(x, n, s.temperature, s.top_p) >= 1e-6) {
            naive_sampling_probs(want, x, n, s.temperature, s.top_p);
            ms_k_sampling_probs(x, n, &s, probs);
            int64_t kept = 0, wrong = 0;
            for (int64_t i = 0; i < n; i++) {
                kept += probs[i] != 0.0f;
                wrong += (want[i] == 0.0) != (probs[i] == 0.0f);
            }
            double e = ref_max_abs_diff(probs, want, n);
            CHECK(wrong == 0 && e <= 2e-6, "sampling_probs n %lld p %g: %lld ids kept wrongly, max abs diff %g",
                  (long long)n, s.top_p, (long long)wrong, e);
            printf("sampling_probs n %lld top_p %.2f: %lld ids kept, max abs diff %.2g\n", (long long)n, s.top_p,
                   (long long)kept, e);
            cases++;
        }
        free(x);
        free(probs);
        free(want);
    }
    /* Ties at the cut: four equal logits, top_p inside their mass. Under the
     * assumed rule the lower indices are kept first. */
    {
        float x[6] = {0.0f, 3.0f, 1.0f, 3.0f, 3.0f, 3.0f};
        ms_k_sampling s = {1.0f, 0.5f};
        float probs[6];
        double want[6];
        naive_sampling_probs(want, x, 6, s.temperature, s.top_p);
        ms_k_sampling_probs(x, 6, &s, probs);
        printf("sampling_probs ties at the cut: got");
        for (int i = 0; i < 6; i++) printf(" %.4f", probs[i]);
        printf("  want");
        for (int i = 0; i < 6; i++) printf(" %.4f", want[i]);
        printf("\n");
        CHECK(ref_max_abs_diff(probs, want, 6) <= 2e-6, "tie rule at the top-p cut differs (see line above)");
    }
    /* T == 0: greedy (one-hot at the first max) for both calls. */
    {
        float x[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f}, probs[5];
        ms_k_sampling s = {0.0f, 0.9f};
        ms_k_sampling_probs(x, 5, &s, probs);
        double want[5];
        naive_sampling_probs(want, x, 5, 0.0f, 0.9f);
        CHECK(ref_max_abs_diff(probs, want, 5) == 0.0, "sampling_probs T=0 is not one-hot at the first max");
        ms_rng g;
        ms_rng_seed(&g, 7);
        for (int i = 0; i < 20; i++) CHECK(ms_k_sample(x, 5, &s, &g, probs) == 1, "sample T=0 is not argmax");
    }
    printf("sampling_probs: %d cases, max abs diff %.3g\n", cases, worst);
}

/* chi-square critical values at a 1e-9 false-positive rate, df = 1..9. */
static const double CHI2_1E9[10] = {0, 37.32, 41.45, 44.84, 47.88, 50.69, 53.34, 55.87, 58.31, 60.66};

/* Pearson statistic of counts against expected probabilities p (tokens
 * with p == 0 excluded; *df = kept − 1). */
static double chi2_stat(const int64_t *counts, const double *p, int64_t n, int64_t draws, int *df) {
    double st = 0;
    int k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (p[i] <= 0) continue;
        double e = p[i] * (double)draws;
        st += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
        k++;
    }
    *df = k - 1;
    return st;
}

static void test_sample_chi2(void) {
    float x[8] = {1.0f, 0.2f, -0.5f, 2.0f, 0.9f, -1.5f, 0.0f, 1.4f}, probs[8], scratch[8];
    ms_k_sampling s = {0.9f, 0.9f};
    ms_k_sampling_probs(x, 8, &s, probs);
    int64_t counts[8] = {0};
    const int64_t draws = 200000;
    ms_rng g;
    ms_rng_seed(&g, 20240607);
    for (int64_t i = 0; i < draws; i++) {
        int32_t id = ms_k_sample(x, 8, &s, &g, scratch);
        CHECK(id >= 0 && id < 8, "sample returned %d", id);
        if (id >= 0 && id < 8) counts[id]++;
    }
    double p[8], shifted[8], hotter[8];
    int zeros = 0;
    for (int i = 0; i < 8; i++) {
        p[i] = probs[i];
        if (probs[i] == 0.0f) {
            zeros++;
            CHECK(counts[i] == 0, "token %d outside top-p drawn %lld times", i, (long long)counts[i]);
        }
    }
    CHECK(zeros > 0, "top-p 0.9 should exclude a token of this vocabulary");
    int df = 0;
    double stat = chi2_stat(counts, p, 8, draws, &df);
    double crit = (df >= 1 && df <= 9) ? CHI2_1E9[df] : 0;
    printf("sample chi-square: %lld draws, stat %.2f, df %d, threshold %.2f (FPR 1e-9)\n", (long long)draws, stat,
           df, crit);
    CHECK(stat < crit, "ms_k_sample does not draw from ms_k_sampling_probs: chi2 %.2f ≥ %.2f", stat, crit);

    /* The comparator must reject wrong distributions: the kept probabilities
     * rotated by one kept slot, and the distribution at a 10% hotter T. */
    int kept[8], nk = 0;
    for (int i = 0; i < 8; i++)
        if (p[i] > 0) kept[nk++] = i;
    memset(shifted, 0, sizeof shifted);
    for (int j = 0; j < nk; j++) shifted[kept[(j + 1) % nk]] = p[kept[j]];
    int df2;
    double bad1 = chi2_stat(counts, shifted, 8, draws, &df2);
    naive_sampling_probs(hotter, x, 8, s.temperature * 1.1f, 1.0f);
    for (int i = 0; i < 8; i++) hotter[i] = p[i] > 0 ? hotter[i] : 0; /* same support */
    double m = 0;
    for (int i = 0; i < 8; i++) m += hotter[i];
    for (int i = 0; i < 8; i++) hotter[i] /= m;
    double bad2 = chi2_stat(counts, hotter, 8, draws, &df2);
    printf("  vs rotated distribution: stat %.1f; vs T×1.1: stat %.1f (both must exceed %.2f)\n", bad1, bad2, crit);
    CHECK(bad1 > crit && bad2 > crit, "chi-square test cannot tell a wrong distribution");

    /* Same seed → same draws. */
    ms_rng a, b;
    ms_rng_seed(&a, 99);
    ms_rng_seed(&b, 99);
    for (int i = 0; i < 100; i++)
        CHECK(ms_k_sample(x, 8, &s, &a, scratch) == ms_k_sample(x, 8, &s, &b, scratch), "sample not deterministic");
}

/* ---- the CPU op table ------------------------------------------------------- */

static void test_linear(const ms_k_ops *ops, ms_rng *r) {
    const int64_t shapes[][3] = {{1, 1, 1}, {1, 37, 23}, {5, 37, 23}, {7, 64, 3}, {3, 5, 130}, {17, 129, 33}};
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si][0], k = shapes[si][1], m = shapes[si][2];
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            float *x = malloc((size_t)(n * k) * sizeof(float)), *w = malloc((size_t)(m * k) * sizeof(float));
            float *b = malloc((size_t)m * sizeof(float)), *y = guarded(n * m);
            double *want = malloc((size_t)(n * m) * sizeof(double));
            fill_normal(r, x, n * k, 1.0f);
            fill_normal(r, w, m * k, 0.5f);
            fill_normal(r, b, m, 1.0f);
            double scale = 1.0;
            for (int64_t i = 0; i < n; i++)
                for (int64_t o = 0; o < m; o++) {
                    double s = with_bias ? b[o] : 0.0, a = 0.0;
                    for (int64_t j = 0; j < k; j++) {
                        s += (double)x[i * k + j] * w[o * k + j];
                        a += fabs((double)x[i * k + j] * w[o * k + j]);
                    }
                    want[i * m + o] = s;
                    scale = fmax(scale, a);
                }
            ops->gemm(ops->ctx, y, x, w, with_bias ? b : NULL, n, k, m);
            double e = ref_max_abs_diff(y, want, n * m) / scale;
            ms_check_worst(&worst, e);
            CHECK(e <= 1e-6, "linear %lldx%lldx%lld bias %d: max diff / scale %g", (long long)n, (long long)k,
                  (long long)m, with_bias, e);
            CHECK(guards_ok(y, n * m), "linear wrote outside its output");
            free(x), free(w), free(b), free(want);
            guarded_free(y);
        }
    }
    printf("linear: max abs diff / Σ|x·w| %.3g\n", worst);
}

static void test_rmsnorm_add_silu(const ms_k_ops *ops, ms_rng *r) {
    int64_t n = 3, d = 37;
    float x[3 * 37], w[37], *y = guarded(n * d);
    double want[3 * 37];
    fill_normal(r, x, n * d, 2.0f);
    fill_normal(r, w, d, 1.0f);
    float eps = 1e-5f;
    for (int64_t i = 0; i < n; i++) {
        double ss = 0;
        for (int64_t j = 0; j < d; j++) ss += (double)x[i * d + j] * x[i * d + j];
        double inv = 1.0 / sqrt(ss / (double)d + (double)eps);
        for (int64_t j = 0; j < d; j++) want[i * d + j] = x[i * d + j] * inv * w[j];
    }
    ops->rmsnorm(ops->ctx, y, x, w, n, d, eps);
    double e1 = max_rel_diff(y, want, n * d);
    CHECK(e1 <= 1e-6, "rmsnorm: max rel diff %g", e1);
    CHECK(guards_ok(y, n * d), "rmsnorm wrote outside its output");
    ops->rmsnorm(ops->ctx, x, x, w, n, d, eps); /* aliasing allowed */
    CHECK(max_rel_diff(x, want, n * d) <= 1e-6, "rmsnorm in place differs");
    guarded_free(y);

    int64_t m = 101;
    float g[101], u[101], *z = guarded(m), acc[101];
    double wz[101], wacc[101];
    fill_normal(r, g, m, 3.0f);
    fill_normal(r, u, m, 1.0f);
    for (int64_t i = 0; i < m; i++) {
        wz[i] = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        acc[i] = g[i];
        wacc[i] = (double)g[i] + (double)u[i];
    }
    ops->silu_glu(ops->ctx, z, g, u, m);
    double e2 = max_rel_diff(z, wz, m);
    CHECK(e2 <= 1e-6, "silu_glu: max rel diff %g", e2);
    CHECK(guards_ok(z, m), "silu_glu wrote outside its output");
    ops->add(ops->ctx, acc, u, m);
    double e3 = max_rel_diff(acc, wacc, m);
    CHECK(e3 <= 1e-7, "add: max rel diff %g", e3);
    guarded_free(z);
    printf("rmsnorm %.3g, silu_glu %.3g, add %.3g (max rel diff)\n", e1, e2, e3);
}

static void test_rope_op(const ms_k_ops *ops, ms_rng *r) {
    int64_t n = 5, heads = 3, hd = 10, half = 5;
    ms_k_rope_params p = {.theta = 500000.0, .llama3 = 1, .factor = 4, .low_freq_factor = 1, .high_freq_factor = 4,
                          .original_max_pos = 32};
    ms_k_rope tab = {0};
    CHECK(ms_k_rope_build(&tab, 128, hd, &p) == MS_OK, "rope_build");
    double inv[8];
    ref_rope_inv_freq(inv, hd, p.theta, true, p.factor, p.low_freq_factor, p.high_freq_factor, 32);
    int32_t pos[5] = {0, 1, 17, 63, 127};
    float x[5 * 3 * 10];
    double want[5 * 3 * 10];
    fill_normal(r, x, n * heads * hd, 1.0f);
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < heads; h++) {
            const float *v = x + (i * heads + h) * hd;
            double *o = want + (i * heads + h) * hd;
            for (int64_t j = 0; j < half; j++) {
                double a = pos[i] * inv[j];
                o[j] = v[j] * cos(a) - v[j + half] * sin(a);
                o[j + half] = v[j + half] * cos(a) + v[j] * sin(a);
            }
        }
    if (tab.cos) ops->rope(ops->ctx, x, n, heads, hd, pos, &tab);
    double e = ref_max_abs_diff(x, want, n * heads * hd);
    CHECK(e <= 2e-6, "rope op: max abs diff %g", e);
    ms_k_rope_free(&tab);
    printf("rope op: max abs diff %.3g\n", e);
}

/* Naive attention in double over cache rows [0, ctx + n_q). Without a mask,
 * query i sees rows ≤ ctx + i. With one, the masked region starts at
 * b = ctx − mask_back: rows < b always visible, row b + j iff mask bit j. */
static void naive_attention(double *out, const float *q, const float *kc, const float *vc, const ms_k_attn_shape *s,
                            const uint64_t *mask) {
    int64_t H = s->n_heads, KV = s->n_kv_heads, hd = s->head_dim, group = H / KV, rows = s->ctx + s->n_q;
    double *p = malloc((size_t)rows * sizeof(double));
    for (int64_t i = 0; i < s->n_q; i++)
        for (int64_t h = 0; h < H; h++) {
            const float *qh = q + (i * H + h) * hd;
            int64_t kh = h / group;
            double mx = -INFINITY;
            int64_t b = mask ? s->ctx - s->mask_back : s->ctx;
            for (int64_t j = 0; j < rows; j++) {
                int64_t bj = j - b;
                bool vis = bj < 0 || (mask ? (mask[i] >> bj & 1) : bj <= i);
                if (!vis) {
                    p[j] = -INFINITY;
                    continue;
                }
                double d = 0;
                for (int64_t e = 0; e < hd; e++) d += (double)qh[e] * kc[(j * KV + kh) * hd + e];
                p[j] = d * (double)s->scale;
                mx = fmax(mx, p[j]);
            }
            double sum = 0;
            for (int64_t j = 0; j < rows; j++) sum += (p[j] = isinf(p[j]) ? 0.0 : exp(p[j] - mx));
            double *o = out + (i * H + h) * hd;
            for (int64_t e = 0; e < hd; e++) o[e] = 0;
            for (int64_t j = 0; j < rows; j++)
                for (int64_t e = 0; e < hd; e++) o[e] += p[j] / sum * vc[(j * KV + kh) * hd + e];
        }
    free(p);
}

/* A tree node's attention is the bits of the same query decoded causally
 * after its visible rows: each query row of a random ancestor-only mask
 * (itself and a subset of the rows before it, over the committed rows and,
 * with mask_back, rows of earlier passes) against one causal query over a
 * cache holding just the rows it sees, in order. Spec == AR needs exactly
 * this at near-ties (a node off the tree's first chain once summed other
 * lanes). */
static void test_attention_tree(const ms_k_ops *ops, ms_rng *r) {
    const int64_t shapes[][5] = {{6, 5, 4, 2, 16}, {12, 40, 2, 1, 64}, {33, 3, 3, 3, 20}, {20, 130, 4, 4, 128}};
    int64_t nodes = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int back = 0; back < 2; back++) {
            ms_k_attn_shape s = {.n_q = shapes[si][0], .ctx = shapes[si][1], .n_heads = shapes[si][2],
                                 .n_kv_heads = shapes[si][3], .head_dim = shapes[si][4]};
            s.scale = (float)(1.0 / sqrt((double)s.head_dim));
            s.mask_back = back ? (s.ctx < 64 - s.n_q ? s.ctx : 64 - s.n_q) / 2 : 0;
            const int64_t hd = s.head_dim, kvd = s.n_kv_heads * hd, rows = s.ctx + s.n_q, qd = s.n_heads * hd;
            const int64_t base = s.ctx - s.mask_back, region = s.mask_back + s.n_q;
            float *q = malloc((size_t)(s.n_q * qd) * sizeof(float)), *kc = malloc((size_t)(rows * kvd) * sizeof(float));
            float *vc = malloc((size_t)(rows * kvd) * sizeof(float)), *out = malloc((size_t)(s.n_q * qd) * sizeof(float));
            float *k1 = malloc((size_t)(rows * kvd) * sizeof(float)), *v1 = malloc((size_t)(rows * kvd) * sizeof(float));
            float *o1 = malloc((size_t)qd * sizeof(float)), *scratch = malloc((size_t)(rows * MS_K_ATTN_PARTS) * sizeof(float));
            fill_normal(r, q, s.n_q * qd, 1.5f);
            fill_normal(r, kc, rows * kvd, 1.5f);
            fill_normal(r, vc, rows * kvd, 1.0f);
            uint64_t mask[64];
            for (int64_t i = 0; i < s.n_q; i++) {
                mask[i] = (uint64_t)1 << (s.mask_back + i);
                for (int64_t j = 0; j < s.mask_back + i; j++)
                    if (ms_rng_u64(r) % 3 == 0) mask[i] |= (uint64_t)1 << j;
            }
            ops->attention(ops->ctx, out, q, kc, vc, &s, mask, scratch);
            for (int64_t i = 0; i < s.n_q; i++) {
                int64_t n1 = base;
                memcpy(k1, kc, (size_t)(base * kvd) * sizeof(float));
                memcpy(v1, vc, (size_t)(base * kvd) * sizeof(float));
                for (int64_t j = 0; j < region; j++)
                    if (mask[i] >> j & 1) {
                        memcpy(k1 + n1 * kvd, kc + (base + j) * kvd, (size_t)kvd * sizeof(float));
                        memcpy(v1 + n1 * kvd, vc + (base + j) * kvd, (size_t)kvd * sizeof(float));
                        n1++;
                    }
                ms_k_attn_shape c = s;
                c.n_q = 1;
                c.ctx = n1 - 1; /* the node itself is the last row it sees */
                c.mask_back = 0;
                ops->attention(ops->ctx, o1, q + i * qd, k1, v1, &c, NULL, scratch);
                CHECK(!memcmp(o1, out + i * qd, (size_t)qd * sizeof(float)),
                      "tree attention shape %zu back %d row %lld (sees %lld rows): not the causal query's bits", si,
                      back, (long long)i, (long long)n1);
                nodes++;
            }
            free(q), free(kc), free(vc), free(out), free(k1), free(v1), free(o1), free(scratch);
        }
    printf("attention: %lld tree nodes bitwise equal to causal queries over their visible rows\n", (long long)nodes);
}

static void test_attention(const ms_k_ops *ops, ms_rng *r) {
    /* n_q, ctx, H, KV, hd */
    const int64_t shapes[][5] = {{1, 0, 1, 1, 4},  {5, 7, 6, 2, 12},  {4, 0, 3, 3, 8},   {3, 11, 5, 1, 6},
                                 {64, 3, 2, 1, 4}, {9, 20, 4, 2, 16}, {1, 33, 7, 7, 10}, {13, 1, 6, 3, 2}};
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        ms_k_attn_shape s = {.n_q = shapes[si][0], .ctx = shapes[si][1], .n_heads = shapes[si][2],
                             .n_kv_heads = shapes[si][3], .head_dim = shapes[si][4]};
        s.scale = (float)(1.0 / sqrt((double)s.head_dim));
        int64_t rows = s.ctx + s.n_q, qn = s.n_q * s.n_heads * s.head_dim, kn = rows * s.n_kv_heads * s.head_dim;
        float *q = malloc((size_t)qn * sizeof(float)), *kc = malloc((size_t)kn * sizeof(float));
        float *vc = malloc((size_t)kn * sizeof(float)), *out = guarded(qn);
        float *scratch = malloc((size_t)(rows * MS_K_ATTN_PARTS) * sizeof(float));
        float *one = malloc((size_t)qn * sizeof(float));
        double *want = malloc((size_t)qn * sizeof(double));
        fill_normal(r, q, qn, 1.5f);
        fill_normal(r, kc, kn, 1.5f);
        fill_normal(r, vc, kn, 1.0f);
        for (int with_mask = 0; with_mask < 3; with_mask++) {
            uint64_t mask[64];
            /* A random tree mask: each row sees itself and a random subset of
             * the region (need not be causal-closed for the op). Pass 2
             * reaches back over up to 64 − n_q committed rows (mask_back). */
            s.mask_back = with_mask == 2 ? (int64_t)(ms_rng_u64(r) % (uint64_t)(s.ctx + 1)) : 0;
            if (s.mask_back + s.n_q > 64) s.mask_back = 64 - s.n_q;
            int64_t region = s.mask_back + s.n_q;
            for (int64_t i = 0; i < s.n_q; i++) {
                mask[i] = (uint64_t)1 << (s.mask_back + i);
                for (int64_t j = 0; j < region; j++)
                    if (j != s.mask_back + i && (ms_rng_u64(r) & 1)) mask[i] |= (uint64_t)1 << j;
            }
            for (int64_t i = 0; i < qn; i++) out[i] = SENTINEL;
            naive_attention(want, q, kc, vc, &s, with_mask ? mask : NULL);
            ops->attention(ops->ctx, out, q, kc, vc, &s, with_mask ? mask : NULL, scratch);
            double e = ref_max_abs_diff(out, want, qn);
            ms_check_worst(&worst, e);
            CHECK(e <= 1e-5, "attention n_q %lld ctx %lld H %lld KV %lld hd %lld mask %d: max abs diff %g",
                  (long long)s.n_q, (long long)s.ctx, (long long)s.n_heads, (long long)s.n_kv_heads,
                  (long long)s.head_dim, with_mask, e);
            CHECK(guards_ok(out, qn), "attention wrote outside its output");
            /* split over the pool (2 threads, a scratch row each): the same bits as one thread */
            memcpy(one, out, (size_t)qn * sizeof(float));
            ms_k_cpu_set_threads(2);
            s.scratch_parts = MS_K_ATTN_PARTS;
            for (int64_t i = 0; i < qn; i++) out[i] = SENTINEL;
            ops->attention(ops->ctx, out, q, kc, vc, &s, with_mask ? mask : NULL, scratch);
            s.scratch_parts = 0;
            ms_k_cpu_set_threads(1);
            int differ = 0;
            for (int64_t i = 0; i < qn; i++) differ += memcmp(&out[i], &one[i], sizeof(float)) != 0;
            CHECK(differ == 0 && guards_ok(out, qn), "attention over 2 threads: %d outputs differ from 1 thread",
                  differ);
        }
        free(q), free(kc), free(vc), free(scratch), free(want), free(one);
        guarded_free(out);
    }
    printf("attention: max abs diff %.3g\n", worst);
}

/* The attention op's copies per instruction-set level (ms_k_hot.h) give
 * the scalar copy's bits: every level this CPU has against MS_ISA=scalar,
 * decode and tree shapes at real head sizes (Qwen 128, Gemma 256) and
 * contexts with tails of every length, 1 and 2 threads. */
static void test_attention_isa(const ms_k_ops *ops, ms_rng *r) {
    const ms_isa cpu = ms_isa_cpu(), was = ms_isa_active();
    /* n_q, ctx, H, KV, hd */
    const int64_t shapes[][5] = {{1, 350, 12, 2, 128}, {8, 301, 12, 2, 128}, {1, 77, 4, 1, 256},
                                 {5, 19, 6, 3, 20},    {1, 0, 2, 1, 8},      {3, 133, 3, 1, 72}};
    int levels = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        ms_k_attn_shape s = {.n_q = shapes[si][0], .ctx = shapes[si][1], .n_heads = shapes[si][2],
                             .n_kv_heads = shapes[si][3], .head_dim = shapes[si][4]};
        s.scale = (float)(1.0 / sqrt((double)s.head_dim));
        const int64_t rows = s.ctx + s.n_q, qn = s.n_q * s.n_heads * s.head_dim, kn = rows * s.n_kv_heads * s.head_dim;
        float *q = malloc((size_t)qn * sizeof(float)), *kc = malloc((size_t)kn * sizeof(float));
        float *vc = malloc((size_t)kn * sizeof(float)), *want = malloc((size_t)qn * sizeof(float));
        float *out = malloc((size_t)qn * sizeof(float));
        float *scratch = malloc((size_t)(rows * MS_K_ATTN_PARTS) * sizeof(float));
        fill_normal(r, q, qn, 1.5f);
        fill_normal(r, kc, kn, 1.5f);
        fill_normal(r, vc, kn, 1.0f);
        uint64_t mask[64];
        s.mask_back = s.n_q > 1 ? 7 : 0;
        for (int64_t i = 0; i < s.n_q; i++) {
            mask[i] = (uint64_t)1 << (s.mask_back + i);
            for (int64_t j = 0; j < s.mask_back + i; j++)
                if (ms_rng_u64(r) & 1) mask[i] |= (uint64_t)1 << j;
        }
        for (int with_mask = 0; with_mask < (s.n_q > 1 ? 2 : 1); with_mask++) {
            const uint64_t *m = with_mask ? mask : NULL;
            MS_ASSERT(ms_isa_set(MS_ISA_SCALAR));
            ops->attention(ops->ctx, want, q, kc, vc, &s, m, scratch);
            for (int l = 1; l < MS_ISA_COUNT; l++) {
                if (!ms_isa_includes(cpu, (ms_isa)l) || !ms_isa_set((ms_isa)l)) continue;
                for (int threads = 1; threads <= 2; threads++) {
                    ms_k_cpu_set_threads(threads);
                    s.scratch_parts = threads > 1 ? MS_K_ATTN_PARTS : 0;
                    ops->attention(ops->ctx, out, q, kc, vc, &s, m, scratch);
                    int differ = 0;
                    for (int64_t i = 0; i < qn; i++) differ += memcmp(&out[i], &want[i], sizeof(float)) != 0;
                    CHECK(differ == 0, "attention on %s, %d thread(s), n_q %lld ctx %lld hd %lld mask %d: %d outputs "
                          "differ from the scalar copy", ms_isa_name((ms_isa)l), threads, (long long)s.n_q,
                          (long long)s.ctx, (long long)s.head_dim, with_mask, differ);
                    levels++;
                }
                s.scratch_parts = 0;
                ms_k_cpu_set_threads(1);
            }
        }
        free(q), free(kc), free(vc), free(want), free(out), free(scratch);
    }
    MS_ASSERT(ms_isa_set(was));
    printf("attention: %d runs on the SIMD levels of this CPU bitwise equal to the scalar copy\n", levels);
}

static void test_embed(const ms_k_ops *ops, ms_rng *r) {
    int64_t V = 29, d = 13, n = 7;
    const ms_dtype dts[] = {MS_DTYPE_F32, MS_DTYPE_F16, MS_DTYPE_BF16};
    float tab[29 * 13];
    fill_normal(r, tab, V * d, 1.0f);
    int32_t ids[7] = {0, 28, 5, 5, 17, 1, 27};
    for (int t = 0; t < 3; t++) {
        uint8_t store[29 * 13 * 4];
        ms_convert_from_f32(store, dts[t], tab, V * d);
        float widened[29 * 13];
        ms_convert_to_f32(widened, store, dts[t], V * d);
        float *y = guarded(n * d);
        ops->embed(ops->ctx, y, store, dts[t], ids, n, d);
        int bad = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < d; j++) bad += y[i * d + j] != widened[ids[i] * d + j];
        CHECK(bad == 0, "embed %s: %d values differ", ms_dtype_name(dts[t]), bad);
        CHECK(guards_ok(y, n * d), "embed wrote outside its output");
        guarded_free(y);
    }
    printf("embed: f32/f16/bf16 exact\n");
}

static void test_move_rows(const ms_k_ops *ops, ms_rng *r) {
    int64_t R = 12, E = 7;
    const int64_t src[][5] = {{3, 5, 6, 9, 11}, {0, 1, 2, 3, 4}, {4, 6, 7, 8, 10}};
    const int64_t dst[][5] = {{3, 4, 5, 6, 7}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5}};
    for (int t = 0; t < 3; t++) {
        float cache[12 * 7], orig[12 * 7];
        fill_normal(r, cache, R * E, 1.0f);
        memcpy(orig, cache, sizeof cache);
        ops->move_rows(ops->ctx, cache, E, src[t], dst[t], 5);
        float want[12 * 7];
        memcpy(want, orig, sizeof orig);
        for (int i = 0; i < 5; i++) memcpy(want + dst[t][i] * E, orig + src[t][i] * E, (size_t)E * sizeof(float));
        CHECK(!memcmp(cache, want, sizeof want), "move_rows case %d differs from a gather of the original rows", t);
    }
    printf("move_rows: ok\n");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep reports and failures in order */
    ms_rng r;
    ms_rng_seed(&r, 12345);
    test_softmax(&r);
    test_argmax(&r);
    test_topk(&r);
    test_rope(&r);
    test_sampling_probs(&r);
    test_sample_chi2();
    const ms_k_ops *ops = ms_k_cpu_ops();
    CHECK(ops != NULL, "no CPU op table");
    if (ops) {
        test_linear(ops, &r);
        test_rmsnorm_add_silu(ops, &r);
        test_rope_op(ops, &r);
        test_attention(ops, &r);
        test_attention_tree(ops, &r);
        test_attention_isa(ops, &r);
        test_embed(ops, &r);
        test_move_rows(ops, &r);
    }
    if (g_fail) {
        fprintf(stderr, "%d check(s) failed\n", g_fail);
        return 1;
    }
    printf("all kernel reference checks passed\n");
    return 0;
}
