/* test_quant_models.c — every tensor of the real GGUF models, dequantized by
 * ms_q_dequant_ref, equals the `gguf` package's dequantization bit for bit.
 *
 * Both sides write one line per tensor, "<file> <name> <type> <elements>
 * <hash>", the hash being a position-dependent 64-bit sum over the f32 bit
 * patterns (defined in tests/quant_models_ref.py; each term is a bijection of
 * one element, so one changed bit changes it). The lines are compared one by
 * one and mismatches reported by tensor name. ms_q_dequant is also checked
 * equal to ms_q_dequant_ref on every tensor (memcmp, chunk by chunk).
 *
 * Reads the models through common/ms_gguf.h. Skips (77) when python3 with
 * gguf is missing or none of the model files is installed; models absent
 * are listed and left out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"
#include "ms_gguf.h"
#include "ms_quant.h"
#include "test_fs.h"

static const char *k_models[] = {"gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"};
enum { CHUNK = 1 << 20 };

/* Under AddressSanitizer (a -O0 Debug build) the 2.4e9 elements of all three
 * files take longer than the test's timeout: there only the smallest model
 * (gemma3-270m, which still holds Q8_0, Q5_0, Q4_K, Q6_K and F32) is checked. */
#if defined(__SANITIZE_ADDRESS__)
#define N_MODELS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define N_MODELS 1
#endif
#endif
#ifndef N_MODELS
#define N_MODELS 3
#endif

/* The hash of quant_models_ref.py over f32 values v[0..n), element i of the
 * tensor being v[i - first]. */
static uint64_t hash_f32(const float *v, int64_t n, uint64_t first) {
    const uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xBF58476D1CE4E5B9ull;
    uint64_t h = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], 4);
        uint64_t x = ((uint64_t)b ^ ((first + (uint64_t)i) * k1)) * k2;
        x ^= x >> 31;
        h += x;
    }
    return h;
}

/* The model's path from tools/install-models.sh --path into buf; false if
 * it cannot be found or is not installed. */
static bool model_path(const char *name, char *buf, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "'%s/tools/install-models.sh' --path '%s'", MS_SOURCE_DIR, name);
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    bool ok = fgets(buf, (int)cap, p) != NULL;
    if (pclose(p) != 0) ok = false;
    if (!ok) return false;
    buf[strcspn(buf, "\n")] = 0;
    return ms_file_exists(buf);
}

/* One line per tensor of `path` into f; false if the file cannot be read. */
static bool hash_model(const char *path, FILE *f) {
    ms_gguf *g = NULL;
    if (ms_gguf_open(path, &g) < 0) return false;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    float *ref = malloc(CHUNK * sizeof(float)), *fast = malloc(CHUNK * sizeof(float));
    MS_ASSERT(ref && fast);
    for (int64_t ti = 0; ti < ms_gguf_n_tensors(g); ti++) {
        const ms_gguf_tensor_info *t = ms_gguf_tensor_at(g, ti);
        int64_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= t->ne[d];
        if (!ms_q_supported(t->dtype)) {
            CHECK(false, "%s: %s has dtype %s, which ms_quant does not read", base, t->name, ms_dtype_name(t->dtype));
            continue;
        }
        const int64_t qk = ms_dtype_block(t->dtype), step = CHUNK / qk * qk;
        size_t bytes;
        CHECK(ms_dtype_row_bytes(t->dtype, n, &bytes) && bytes == t->nbytes, "%s: %s: %zu bytes for %lld elements",
              base, t->name, t->nbytes, (long long)n);
        uint64_t h = 0;
        int64_t fast_bad = 0;
        for (int64_t off = 0; off < n; off += step) {
            const int64_t cnt = n - off < step ? n - off : step;
            const uint8_t *src = (const uint8_t *)t->data + (size_t)(off / qk) * ms_dtype_block_bytes(t->dtype);
            ms_q_dequant_ref(t->dtype, src, ref, cnt);
            ms_q_dequant(t->dtype, src, fast, cnt);
            fast_bad += memcmp(ref, fast, (size_t)cnt * sizeof(float)) != 0;
            h += hash_f32(ref, cnt, (uint64_t)off);
        }
        CHECK(fast_bad == 0, "%s: %s: ms_q_dequant != ms_q_dequant_ref", base, t->name);
        fprintf(f, "%s %s %s %lld %016llx\n", base, t->name, ms_dtype_name(t->dtype), (long long)n,
                (unsigned long long)h);
    }
    free(ref), free(fast);
    ms_gguf_close(&g);
    return true;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines show up under ctest -V */
    if (system("python3 -c 'import gguf, numpy' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skipped: python3 with the gguf package is missing\n");
        return 77;
    }
    char dir[512], paths[N_MODELS][1024], c_out[1024], py_out[1024], cmd[8192];
    int have = 0;
    MS_ASSERT(ms_test_tmpdir("ms-quant-models", dir, sizeof(dir)));
    snprintf(c_out, sizeof(c_out), "%s/c.txt", dir);
    snprintf(py_out, sizeof(py_out), "%s/py.txt", dir);
    int len = snprintf(cmd, sizeof(cmd), "python3 '%s/tests/quant_models_ref.py' '%s'", MS_SOURCE_DIR, py_out);
    FILE *f = fopen(c_out, "w");
    MS_ASSERT(f);
    for (int i = 0; i < N_MODELS; i++) {
        if (!model_path(k_models[i], paths[i], sizeof(paths[i]))) {
            fprintf(stderr, "%s is not installed (tools/install-models.sh %s): left out\n", k_models[i], k_models[i]);
            continue;
        }
        have++;
        double t0 = ms_now_s();
        CHECK(hash_model(paths[i], f), "could not read %s", paths[i]);
        printf("%s: C side %.1f s\n", k_models[i], ms_now_s() - t0);
        len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, " '%s'", paths[i]);
    }
    CHECK(fclose(f) == 0, "write %s", c_out);
    if (have == 0) {
        fprintf(stderr, "skipped: no model file installed\n");
        ms_test_rmtree(dir);
        return 77;
    }
    double t0 = ms_now_s();
    int rc = system(cmd);
    CHECK(rc == 0, "%s failed (%d)", cmd, rc);
    printf("python side %.1f s\n", ms_now_s() - t0);

    FILE *fc = fopen(c_out, "r"), *fp = rc == 0 ? fopen(py_out, "r") : NULL;
    int64_t lines = 0, bad = 0;
    if (fc && fp) {
        char lc[1024], lp[1024];
        for (;;) {
            bool gc = fgets(lc, sizeof(lc), fc) != NULL, gp = fgets(lp, sizeof(lp), fp) != NULL;
            if (!gc && !gp) break;
            lines++;
            if (gc != gp || strcmp(lc, lp) != 0) {
                bad++;
                lc[strcspn(lc, "\n")] = 0, lp[strcspn(lp, "\n")] = 0;
                CHECK(false, "tensor %lld differs:\n  C:      %s\n  python: %s", (long long)lines, gc ? lc : "(end)",
                      gp ? lp : "(end)");
            }
        }
        printf("%lld tensors compared, %lld differ\n", (long long)lines, (long long)bad);
    }
    CHECK(lines > 0, "no tensor compared");
    if (fc) fclose(fc);
    if (fp) fclose(fp);
    if (g_fail == 0) ms_test_rmtree(dir);
    else fprintf(stderr, "outputs kept in %s\n", dir);
    return g_fail ? 1 : 0;
}
