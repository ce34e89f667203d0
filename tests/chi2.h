/* chi2.h — Pearson chi-square goodness of fit, shared by the sampling tests
 * (test_spec_sampling on random models, test_gguf_sampling on a real one). */
#ifndef MS_TEST_CHI2_H
#define MS_TEST_CHI2_H

#include <stdint.h>

typedef struct {
    double stat, p;
    int64_t df, impossible; /* samples in cells of probability 0 */
} chi2_result;

/* Regularised upper incomplete gamma Q(a, x) (series / continued fraction). */
double chi2_gamma_q(double a, double x);
/* counts[n] against probs[n] (sum 1) for N samples; cells with expected < 5
 * pooled (the pool joins the smallest cell if it is itself below 5); samples
 * in cells of probability 0 make p = 0. */
chi2_result chi2_test(const int64_t *counts, const double *probs, int64_t n, int64_t N);

#endif
