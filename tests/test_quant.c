/* test_quant.c — block formats (kernels/ms_qweight.h, kernels/cpu/ms_quant.h) against independent data.
 *
 *  1. golden: seeded random blocks of every type, dequantized by
 *     ms_q_dequant_ref, equal bit for bit to the `gguf` package's numpy
 *     dequantization (tests/quant_ref.py);
 *  2. ms_q_dequant == ms_q_dequant_ref bitwise (unaligned source; every f16
 *     bit pattern);
 *  3. ms_q_linear vs a naive double-precision dot over ms_q_dequant_ref
 *     weights, within a rounding bound, on odd m, n (and odd k for scalar
 *     dtypes), with guard values after y;
 *  4. batch invariance: row r of an n-row ms_q_linear == the 1-row result
 *     bitwise for n = 1..64;
 *  5. ms_q_linear_rows == the matching columns of ms_q_linear bitwise.
 *
 * Without python3 + gguf, part 1 is skipped: the test exits 77 when the
 * rest passed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"
#include "ms_quant.h"
#include "test_fs.h"

static const ms_dtype k_types[] = {MS_DTYPE_F32,  MS_DTYPE_F16,  MS_DTYPE_BF16, MS_DTYPE_Q4_0,
                                   MS_DTYPE_Q4_1, MS_DTYPE_Q5_0, MS_DTYPE_Q5_1, MS_DTYPE_Q8_0,
                                   MS_DTYPE_Q4_K, MS_DTYPE_Q5_K, MS_DTYPE_Q6_K};
enum { N_TYPES = sizeof(k_types) / sizeof(k_types[0]) };

/* Byte offsets of the f16 scale fields in one block (ggml-common.h), -1 ends. */
static void f16_fields(ms_dtype t, int off[3]) {
    off[0] = off[1] = off[2] = -1;
    switch (t) {
    case MS_DTYPE_Q4_0:
    case MS_DTYPE_Q5_0:
    case MS_DTYPE_Q8_0: off[0] = 0; break;
    case MS_DTYPE_Q4_1:
    case MS_DTYPE_Q5_1:
    case MS_DTYPE_Q4_K:
    case MS_DTYPE_Q5_K: off[0] = 0, off[1] = 2; break;
    case MS_DTYPE_Q6_K: off[0] = 208; break;
    default: break;
    }
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* A random finite f16: any sign, exponent 0..30 (subnormals included). */
static uint16_t rand_f16_finite(ms_rng *r) {
    uint16_t h = (uint16_t)ms_rng_u64(r);
    if (((h >> 10) & 0x1f) == 0x1f) h = (uint16_t)(h & ~(1u << 14)); /* exponent 31 → 15 */
    return h;
}

static void put_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* n elements of dtype t as random bytes. `wide`: f16 scales and scalar
 * values over their whole finite range; otherwise scales of moderate size
 * (|d| < 0.05) for the linear tests. */
static uint8_t *make_data(ms_rng *r, ms_dtype t, int64_t n, bool wide, size_t *nbytes) {
    size_t bytes;
    MS_ASSERT(ms_dtype_row_bytes(t, n, &bytes));
    uint8_t *p = malloc(bytes + 1);
    MS_ASSERT(p);
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)ms_rng_u64(r);
    if (t == MS_DTYPE_F32) {
        for (int64_t i = 0; i < n; i++) {
            float f = wide ? 0.0f : (float)(ms_rng_uniform(r) * 2 - 1);
            uint32_t u = (uint32_t)ms_rng_u64(r);
            if (wide) {
                if (((u >> 23) & 0xff) == 0xff) u &= ~(1u << 30); /* finite */
                memcpy(&f, &u, 4);
            }
            memcpy(p + 4 * i, &f, 4);
        }
    } else if (t == MS_DTYPE_F16 || t == MS_DTYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float f = (float)(ms_rng_uniform(r) * 2 - 1);
            uint16_t h;
            if (t == MS_DTYPE_F16) {
                h = wide ? rand_f16_finite(r) : ms_f32_to_f16(f);
            } else {
                h = (uint16_t)ms_rng_u64(r);
                if (((h >> 7) & 0xff) == 0xff) h = (uint16_t)(h & ~(1u << 14));
                if (!wide) h = ms_f32_to_bf16(f);
            }
            put_u16(p + 2 * i, h);
        }
    } else {
        int off[3];
        f16_fields(t, off);
        size_t bb = ms_dtype_block_bytes(t);
        for (size_t blk = 0; blk < bytes / bb; blk++)
            for (int j = 0; j < 3 && off[j] >= 0; j++) {
                float f = (float)((ms_rng_uniform(r) * 2 - 1) * 0.05);
                put_u16(p + blk * bb + (size_t)off[j], wide ? rand_f16_finite(r) : ms_f32_to_f16(f));
            }
    }
    *nbytes = bytes;
    return p;
}

static int64_t n_elems(ms_dtype t) { return ms_dtype_block(t) == 1 ? 1024 : 64 * ms_dtype_block(t); }

static bool write_bin(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static bool read_bin(const char *path, void *p, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    bool ok = fread(p, 1, n, f) == n && fgetc(f) == EOF;
    fclose(f);
    return ok;
}

/* 1 + 2: golden vs gguf, and fast == ref. Returns false if python/gguf is missing. */
static bool test_dequant(void) {
    char dir[512], path[1024], cmd[2048];
    MS_ASSERT(ms_test_tmpdir("ms-quant", dir, sizeof(dir)));
    ms_rng r;
    ms_rng_seed(&r, 20240601);
    float *ref[N_TYPES];
    int len = snprintf(cmd, sizeof(cmd), "python3 '%s/tests/quant_ref.py' '%s'", MS_SOURCE_DIR, dir);
    for (int ti = 0; ti < N_TYPES; ti++) {
        ms_dtype t = k_types[ti];
        int64_t n = n_elems(t);
        size_t bytes;
        uint8_t *src = make_data(&r, t, n, true, &bytes);
        ref[ti] = malloc((size_t)n * sizeof(float));
        float *fast = malloc((size_t)n * sizeof(float));
        uint8_t *unal = malloc(bytes + 1);
        MS_ASSERT(ref[ti] && fast && unal);
        ms_q_dequant_ref(t, src, ref[ti], n);
        /* the fast path, reading from an odd address */
        memcpy(unal + 1, src, bytes);
        ms_q_dequant(t, unal + 1, fast, n);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++)
            if (f32_bits(fast[i]) != f32_bits(ref[ti][i])) bad++, first = first < 0 ? i : first;
        CHECK(bad == 0, "%s: ms_q_dequant != ms_q_dequant_ref at %lld elements (first %lld)", ms_dtype_name(t),
              (long long)bad, (long long)first);
        if (ms_dtype_block(t) == 1) { /* scalar dtypes: a length that is not a multiple of 32 (the tail path) */
            float *odd = malloc(77 * sizeof(float));
            MS_ASSERT(odd);
            ms_q_dequant(t, unal + 1, odd, 77);
            CHECK(memcmp(odd, ref[ti], 77 * sizeof(float)) == 0, "%s: ms_q_dequant of 77 elements != ref",
                  ms_dtype_name(t));
            free(odd);
        }
        snprintf(path, sizeof(path), "%s/%s.bin", dir, ms_dtype_name(t));
        CHECK(write_bin(path, src, bytes), "write %s", path);
        len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, " %s", ms_dtype_name(t));
        free(src), free(fast), free(unal);
    }

    /* Every f16 bit pattern (NaN payloads included) through both paths. */
    uint16_t *all = malloc(65536 * 2);
    float *a = malloc(65536 * 4), *b = malloc(65536 * 4);
    MS_ASSERT(all && a && b);
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    ms_q_dequant_ref(MS_DTYPE_F16, all, a, 65536);
    ms_q_dequant(MS_DTYPE_F16, all, b, 65536);
    int bad16 = 0;
    for (int i = 0; i < 65536; i++) bad16 += f32_bits(a[i]) != f32_bits(b[i]);
    CHECK(bad16 == 0, "F16: fast != ref on %d of 65536 bit patterns", bad16);
    free(all), free(a), free(b);

    bool have_py = system("python3 -c 'import gguf, numpy' >/dev/null 2>&1") == 0;
    if (!have_py) {
        fprintf(stderr, "python3 with the gguf package is missing: golden comparison skipped\n");
    } else {
        int rc = system(cmd);
        CHECK(rc == 0, "%s failed (%d)", cmd, rc);
        for (int ti = 0; rc == 0 && ti < N_TYPES; ti++) {
            ms_dtype t = k_types[ti];
            int64_t n = n_elems(t);
            float *py = malloc((size_t)n * sizeof(float));
            MS_ASSERT(py);
            snprintf(path, sizeof(path), "%s/%s.f32", dir, ms_dtype_name(t));
            bool ok = read_bin(path, py, (size_t)n * sizeof(float));
            CHECK(ok, "read %s (%lld floats)", path, (long long)n);
            int64_t bad = 0, first = -1;
            for (int64_t i = 0; ok && i < n; i++)
                if (f32_bits(py[i]) != f32_bits(ref[ti][i])) bad++, first = first < 0 ? i : first;
            CHECK(bad == 0, "%s: ms_q_dequant_ref != gguf at %lld of %lld elements (first %lld: %a vs %a)",
                  ms_dtype_name(t), (long long)bad, (long long)n, (long long)first,
                  first >= 0 ? (double)ref[ti][first] : 0.0, first >= 0 ? (double)py[first] : 0.0);
            if (bad == 0 && ok) printf("%-5s %6lld elements: bitwise equal to gguf\n", ms_dtype_name(t), (long long)n);
            free(py);
        }
    }
    for (int ti = 0; ti < N_TYPES; ti++) free(ref[ti]);
    ms_test_rmtree(dir);
    return have_py;
}

static void rand_vec(ms_rng *r, float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) v[i] = ms_rng_normal(r);
}

/* 3, 4, 5 for one dtype. */
static void test_linear(ms_dtype t) {
    ms_rng r;
    ms_rng_seed(&r, 777 + (uint64_t)t);
    const int64_t qk = ms_dtype_block(t);
    const int64_t m = 37, k = qk == 1 ? 77 : (qk == 32 ? 7 * 32 : 2 * 256), nmax = 64, guard = 16;
    size_t wbytes;
    uint8_t *wd = make_data(&r, t, m * k, false, &wbytes);
    ms_qweight w = ms_qweight_view(t, wd, m, k);
    float *wf = malloc((size_t)(m * k) * sizeof(float));
    float *x = malloc((size_t)(nmax * k) * sizeof(float));
    float *bias = malloc((size_t)m * sizeof(float));
    float *y = malloc((size_t)(nmax * m + guard) * sizeof(float));
    float *y1 = malloc((size_t)(nmax * m) * sizeof(float));
    MS_ASSERT(wf && x && bias && y && y1);
    ms_q_dequant_ref(t, wd, wf, m * k);
    rand_vec(&r, x, nmax * k);
    rand_vec(&r, bias, m);

    /* 3: against a double-precision dot. Each output is the f32 sum of k
     * products in 16 lanes of k/16 terms, a 4-level tree and the bias: its
     * rounding error is at most (k/16 + 6)·u·(Σ|x·w| + |b|), u = 2^-24. */
    const int64_t n = 5;
    const float sentinel = -12345.678f;
    for (int64_t i = 0; i < nmax * m + guard; i++) y[i] = sentinel;
    ms_q_linear(y, x, &w, bias, n);
    double worst = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double s = bias[j], mag = fabs(bias[j]);
            for (int64_t c = 0; c < k; c++) {
                double p = (double)x[i * k + c] * (double)wf[j * k + c];
                s += p, mag += fabs(p);
            }
            double tol = (double)(k / 16 + 6) * 0x1.0p-24 * mag;
            double err = fabs((double)y[i * m + j] - s);
            ms_check_worst(&worst, err / (tol > 0 ? tol : 1));
            CHECK(err <= tol, "%s linear y[%lld,%lld] = %.9g, double ref %.9g, |err| %.3g > bound %.3g",
                  ms_dtype_name(t), (long long)i, (long long)j, (double)y[i * m + j], s, err, tol);
        }
    for (int64_t i = n * m; i < n * m + guard; i++)
        CHECK(y[i] == sentinel, "%s linear wrote past y[%lld, %lld]", ms_dtype_name(t), (long long)n, (long long)m);

    /* 4: batch invariance, bias on and off. */
    for (int with_b = 0; with_b < 2; with_b++) {
        const float *bb = with_b ? bias : NULL;
        for (int64_t i = 0; i < nmax; i++) ms_q_linear(y1 + i * m, x + i * k, &w, bb, 1);
        int64_t bad = 0, first_n = -1;
        for (int64_t nn = 1; nn <= nmax; nn++) {
            ms_q_linear(y, x, &w, bb, nn);
            for (int64_t i = 0; i < nn * m; i++)
                if (f32_bits(y[i]) != f32_bits(y1[i])) bad++, first_n = first_n < 0 ? nn : first_n;
        }
        CHECK(bad == 0, "%s (bias %d): %lld outputs differ from the 1-row result (first at n = %lld)",
              ms_dtype_name(t), with_b, (long long)bad, (long long)first_n);
    }

    /* 5: a row subset (out of order, one repeated) == those columns. */
    const int32_t rows[] = {36, 0, 5, 5, 17, 1, 35};
    const int64_t nr = (int64_t)(sizeof(rows) / sizeof(rows[0])), nx = 9;
    float *yr = malloc((size_t)(nx * nr) * sizeof(float));
    MS_ASSERT(yr);
    ms_q_linear(y, x, &w, NULL, nx);
    ms_q_linear_rows(yr, x, &w, rows, nr, nx);
    int64_t bad = 0;
    for (int64_t i = 0; i < nx; i++)
        for (int64_t j = 0; j < nr; j++) bad += f32_bits(yr[i * nr + j]) != f32_bits(y[i * m + rows[j]]);
    CHECK(bad == 0, "%s: ms_q_linear_rows differs from ms_q_linear in %lld outputs", ms_dtype_name(t),
          (long long)bad);

    printf("%-5s linear: k %lld, worst error %.3f of the bound; batch invariant n = 1..%lld\n", ms_dtype_name(t),
           (long long)k, worst, (long long)nmax);
    free(wd), free(wf), free(x), free(bias), free(y), free(y1), free(yr);
}

int main(void) {
    for (int ti = 0; ti < N_TYPES; ti++) CHECK(ms_q_supported(k_types[ti]), "%s", ms_dtype_name(k_types[ti]));
    CHECK(!ms_q_supported(MS_DTYPE_I32), "I32 must not be supported");
    bool have_py = test_dequant();
    for (int ti = 0; ti < N_TYPES; ti++) test_linear(k_types[ti]);
    if (g_fail) {
        fprintf(stderr, "test_quant: %d failures\n", g_fail);
        return 1;
    }
    if (!have_py) return 77;
    printf("test_quant: ok\n");
    return 0;
}
