/* ms_check.h — the CHECK macro the tests share. A failed condition is reported
 * with file:line, the expression and a printf-style message, counted in
 * g_fail (defined in test_fs.c, which every test links), and the test goes on,
 * so one run lists every failure (the first 50 are printed). A test ends with
 * `return g_fail ? 1 : 0;` or its own summary. */
#ifndef MS_CHECK_H
#define MS_CHECK_H

#include <math.h>
#include <stdio.h>

extern int g_fail;

/* *worst = max(*worst, e), where a NaN e makes *worst NaN for good, so that
 * `CHECK(worst <= tol)` fails on it: fmax() and `if (e > worst)` both drop a
 * NaN and report the largest finite error instead. */
static inline void ms_check_worst(double *worst, double e) {
    if (isnan(*worst)) return;
    if (isnan(e) || e > *worst) *worst = e;
}

/* Write a condition so that a NaN fails it: `err <= tol`, not `!(err > tol)`. */
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            if (g_fail < 50) {                                                  \
                fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
                fprintf(stderr, __VA_ARGS__);                                   \
                fprintf(stderr, "\n");                                          \
            }                                                                   \
            g_fail++;                                                           \
        }                                                                       \
    } while (0)

#endif
