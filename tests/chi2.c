/* chi2.c — Pearson chi-square goodness of fit for the sampling tests (chi2.h). */
#include "chi2.h"

#include <math.h>

/* Regularised upper incomplete gamma Q(a, x) (series / continued fraction). */
double chi2_gamma_q(double a, double x) {
    if (x <= 0.0) return 1.0;
    double gln = lgamma(a);
    if (x < a + 1.0) {
        double ap = a, sum = 1.0 / a, del = sum;
        for (int n = 0; n < 100000; n++) {
            ap += 1.0;
            del *= x / ap;
            sum += del;
            if (fabs(del) < fabs(sum) * 1e-15) break;
        }
        return 1.0 - sum * exp(-x + a * log(x) - gln);
    }
    double b = x + 1.0 - a, c = 1.0 / 1e-300, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-15) break;
    }
    return exp(-x + a * log(x) - gln) * h;
}


/* Pearson chi-square of counts[n] against probs[n] (sum 1) for N samples;
 * cells with expected < 5 pooled (the pool joins the smallest cell if it is
 * itself below 5). */
chi2_result chi2_test(const int64_t *counts, const double *probs, int64_t n, int64_t N) {
    chi2_result r = {0};
    double pool_e = 0.0, pool_o = 0.0;
    int64_t small_i = -1;
    for (int64_t i = 0; i < n; i++) {
        double e = probs[i] * (double)N;
        if (probs[i] <= 0.0) {
            r.impossible += counts[i];
            continue;
        }
        if (e < 5.0) {
            pool_e += e;
            pool_o += (double)counts[i];
        } else if (small_i < 0 || e < probs[small_i] * (double)N) {
            small_i = i;
        }
    }
    int64_t cells = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = probs[i] * (double)N;
        if (probs[i] <= 0.0 || e < 5.0) continue;
        double o = (double)counts[i];
        if (i == small_i && pool_e > 0.0 && pool_e < 5.0) {
            e += pool_e;
            o += pool_o;
        }
        r.stat += (o - e) * (o - e) / e;
        cells++;
    }
    if (pool_e >= 5.0) {
        r.stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        cells++;
    }
    r.df = cells - 1;
    r.p = r.df > 0 ? chi2_gamma_q((double)r.df / 2.0, r.stat / 2.0) : 1.0;
    if (r.impossible > 0) r.p = 0.0;
    return r;
}

