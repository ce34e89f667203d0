/* microspec-bench-ops — forward cost of the CPU engine on GGUF models: decode
 * speed against the memory-read floor, and the cost of an n-row forward (a
 * speculative verify) as a multiple of one decode step, beside llama.cpp.
 *
 *   microspec-bench-ops --model FILE.gguf [--model FILE ...] [options]   (--help lists them)
 *
 * Per model: one load (max_batch 64), a 16-token context prefilled, then R
 * rounds of, for n = 1, 2, 4, ..., 64: 8 one-row forwards (logits of the
 * row) each truncated back to the context (a decode step's time), then one
 * forward of n rows (logits of every row, as a verify needs), truncated
 * back; its cost is reported over the decode steps timed just before it. With
 * --llama-bench DIR, each round also runs `llama-bench -r 1` on the same
 * file and thread count (tg 16 and pp n), so the two engines alternate under
 * the same background load. Medians over the rounds are reported.
 *
 * Read bandwidth: a sum over 1 GiB (AVX-512 loads where the CPU has them)
 * split over the pool's threads, best of 3; the share reported is
 * (weight bytes a step reads / step time) / bandwidth, where a step reads
 * every tensor except the input embedding (one row), unless it is also the
 * tied output head.
 *
 * Integer-dot peak (8-bit matmuls only): what the active kernels' u8·s8
 * product instructions sustain with nothing else in the loop (AVX2: the
 * Q4_K tile kernel's 8 vpmaddubsw summed in int16, then one vpmaddwd and
 * vpaddd per 256 products, two independent rows; AVX-512: vpdpbusd, six
 * independent accumulators), registers only, on every
 * thread of the pool, best of 3. Each n-row forward's products (rows x the
 * matmul weights' elements; attention and norms not counted) over its time
 * are printed against it on stderr: how far a compute-bound verify is from
 * the instruction's ceiling on this CPU.
 */
#include "ms_common.h"
#include "ms_gguf.h"
#include "ms_kernels.h"
#include "ms_model.h"
#include "ms_pool.h"
#include "ms_isa.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BO_X86 1
#else
#define BO_X86 0
#endif

enum { MAX_MODELS = 8, N_SIZES = 7, CTX = 16, DECODE_STEPS = 8, MAX_ROUNDS = 64 };
static const int64_t SIZES[N_SIZES] = {1, 2, 4, 8, 16, 32, 64};

static void usage(FILE *f) {
    fprintf(f,
            "usage: microspec-bench-ops --model FILE.gguf [--model FILE ...] [options]\n"
            "Decode tokens/s (one row at a %d-token context) with its share of the measured read\n"
            "bandwidth, and the cost of forwards over 1, 2, 4, ..., 64 rows as multiples of one decode\n"
            "step; a Markdown table on stdout. With 8-bit matmuls, also the integer-dot peak of the\n"
            "active kernels (their product instructions alone) and each forward's matmul products per\n"
            "second as a share of it (stderr).\n"
            "  --model FILE       a GGUF model (repeatable, up to %d)\n"
            "  --threads N        CPU threads (default: the number of cores)\n"
            "  --reps R           rounds; medians are reported (default 3)\n"
            "  --q8               8-bit activation matmuls (default)\n"
            "  --f32              exact f32 matmuls\n"
            "  --llama-bench DIR  also run DIR/llama-bench on the same file and threads, alternating\n"
            "  --llama-repack R   llama-bench's --repack for both its runs (default 1, its own default)\n"
            "The kernels' instruction set is the CPU's best unless MS_ISA caps it (MS_ISA=avx2 times the\n"
            "AVX2 path on an AVX-512 CPU, MS_ISA=avxvnni the same with AVX-VNNI; build llama.cpp with\n"
            "tools/build-llamacpp.sh --isa avx2 or --isa avxvnni to match).\n"
            "  -h, --help         this text\n",
            CTX, MAX_MODELS);
}

/* ---- read bandwidth --------------------------------------------------------- */

typedef struct {
    const uint64_t *p;
    int64_t words_per_item;
    uint64_t sums[64];
} bw_job;

#if BO_X86
__attribute__((target("avx512f"))) static uint64_t sum_avx512(const uint64_t *p, int64_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 32) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 8)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 16)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 24)));
    }
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}
#endif

static uint64_t sum_plain(const uint64_t *p, int64_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t i = 0; i < n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

static bool have_avx512(void) {
#if BO_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

static void bw_range(void *arg, int64_t b, int64_t e) {
    bw_job *J = arg;
    const uint64_t *p = J->p + b * J->words_per_item;
    const int64_t n = (e - b) * J->words_per_item;
    uint64_t s;
#if BO_X86
    s = have_avx512() ? sum_avx512(p, n) : sum_plain(p, n);
#else
    s = sum_plain(p, n);
#endif
    J->sums[b * 64 / 4096] += s; /* keeps the loop from being optimised out */
}

/* Seconds of the fastest of `passes` pool rounds of fn over [0, items), the first `warm` not counted. */
static double pool_best_s(ms_pool_fn fn, void *arg, int64_t items, int passes, int warm) {
    double best = 1e30;
    for (int r = 0; r < passes; r++) {
        const double t0 = ms_now_s();
        ms_pool_run(fn, arg, items, 1);
        const double t = ms_now_s() - t0;
        if (r >= warm && t < best) best = t;
    }
    return best;
}

/* GB/s (1e9 bytes) of a read over 1 GiB with the pool's threads; 0 on failure. */
static double measure_bandwidth(void) {
    const size_t bytes = (size_t)1 << 30;
    uint64_t *p = aligned_alloc(64, bytes);
    if (!p) return 0.0;
    for (size_t i = 0; i < bytes / 8; i++) p[i] = i;
    bw_job J = {.p = p, .words_per_item = (int64_t)(bytes / 8 / 4096)};
    const double best = pool_best_s(bw_range, &J, 4096, 4, 1); /* the first pass warms the pages */
    uint64_t all = 0;
    for (int i = 0; i < 64; i++) all += J.sums[i];
    free(p);
    if (all == 1) fputs("", stderr);
    return (double)bytes / best / 1e9;
}

/* ---- integer-dot peak ------------------------------------------------------- */

enum { PEAK_ITERS = 40000000 };

#if BO_X86
/* 2 x 256 products an iteration, the AVX2 Q4_K tile kernel's mix for one x row and 8 weight
 * rows: 8 vpmaddubsw (one per broadcast x quad) summed in int16 by 7 vpaddw, one vpmaddwd by the
 * sub-block scale, one vpaddd; two x rows, so two independent chains. The empty asm makes x new
 * each time, so nothing is hoisted. (The Q6_K kernel issues 5 vpmaddwd per 8 vpmaddubsw and the
 * rows-in-place formats 8: this is the ceiling of the cheapest mix, not of every kernel.) */
#define PK_SUM8(W, X)                                                                                              \
    _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(W[0], X), _mm256_maddubs_epi16(W[1], X)), \
                                      _mm256_add_epi16(_mm256_maddubs_epi16(W[2], X), _mm256_maddubs_epi16(W[3], X))), \
                     _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(W[4], X), _mm256_maddubs_epi16(W[5], X)), \
                                      _mm256_add_epi16(_mm256_maddubs_epi16(W[6], X), _mm256_maddubs_epi16(W[7], X))))
__attribute__((target("avx2"))) static uint64_t peak_avx2(int64_t iters) {
    __m256i x0 = _mm256_set1_epi8(3), x1 = _mm256_set1_epi8(2);
    const __m256i s = _mm256_set1_epi16(5);
    const __m256i w[8] = {_mm256_set1_epi8(1), _mm256_set1_epi8(2), _mm256_set1_epi8(3), _mm256_set1_epi8(4),
                          _mm256_set1_epi8(5), _mm256_set1_epi8(6), _mm256_set1_epi8(7), _mm256_set1_epi8(8)};
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (int64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(x0), "+x"(x1));
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(PK_SUM8(w, x0), s));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(PK_SUM8(w, x1), s));
    }
    return (uint64_t)(uint32_t)_mm256_extract_epi32(_mm256_add_epi32(a0, a1), 0);
}
#undef PK_SUM8

/* The same 2 x 256 products with AVX-VNNI, the avx2-vnni Q4_K tile kernel's mix: per x row two
 * chains of 4 vpdpbusd, each added into the row's sum by one vpdpwssd by the scale. */
#define PK_DOT4(W, X)                                                                                              \
    _mm256_dpbusd_avx_epi32(                                                                                       \
        _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), W[0], X),  \
                                                        W[1], X),                                                  \
                                W[2], X),                                                                          \
        W[3], X)
__attribute__((target("avx2,avxvnni"))) static uint64_t peak_avxvnni(int64_t iters) {
    __m256i x0 = _mm256_set1_epi8(3), x1 = _mm256_set1_epi8(2);
    const __m256i s = _mm256_set1_epi32(5);
    const __m256i w[8] = {_mm256_set1_epi8(1), _mm256_set1_epi8(2), _mm256_set1_epi8(3), _mm256_set1_epi8(4),
                          _mm256_set1_epi8(5), _mm256_set1_epi8(6), _mm256_set1_epi8(7), _mm256_set1_epi8(8)};
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (int64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(x0), "+x"(x1));
        a0 = _mm256_dpwssd_avx_epi32(_mm256_dpwssd_avx_epi32(a0, PK_DOT4(w, x0), s), PK_DOT4((w + 4), x0), s);
        a1 = _mm256_dpwssd_avx_epi32(_mm256_dpwssd_avx_epi32(a1, PK_DOT4(w, x1), s), PK_DOT4((w + 4), x1), s);
    }
    return (uint64_t)(uint32_t)_mm256_extract_epi32(_mm256_add_epi32(a0, a1), 0);
}
#undef PK_DOT4

/* 6 x 64 products an iteration. */
__attribute__((target("avx512f,avx512vnni"))) static uint64_t peak_vnni(int64_t iters) {
    __m512i x = _mm512_set1_epi8(3);
    const __m512i w0 = _mm512_set1_epi8(1), w1 = _mm512_set1_epi8(2), w2 = _mm512_set1_epi8(3),
                  w3 = _mm512_set1_epi8(4), w4 = _mm512_set1_epi8(5), w5 = _mm512_set1_epi8(6);
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
    for (int64_t i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(x));
        a0 = _mm512_dpbusd_epi32(a0, w0, x);
        a1 = _mm512_dpbusd_epi32(a1, w1, x);
        a2 = _mm512_dpbusd_epi32(a2, w2, x);
        a3 = _mm512_dpbusd_epi32(a3, w3, x);
        a4 = _mm512_dpbusd_epi32(a4, w4, x);
        a5 = _mm512_dpbusd_epi32(a5, w5, x);
    }
    return (uint64_t)(uint32_t)_mm512_reduce_add_epi32(
        _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                         _mm512_add_epi32(a4, a5)));
}
#endif

/* The loop that stands for a kernel level's products: its instructions' name, products an
 * iteration, and the loop; fn NULL where this file has none for the level (scalar, ARM). */
typedef struct {
    const char *name;
    int64_t per_iter;
    uint64_t (*fn)(int64_t iters);
} peak_loop;

static peak_loop peak_loop_for(ms_isa isa) {
#if BO_X86
    if (isa == MS_ISA_AVX2) return (peak_loop){"8 vpmaddubsw + 1 vpmaddwd a 256, the Q4_K tile mix", 2 * 256, peak_avx2};
    if (isa == MS_ISA_AVXVNNI)
        return (peak_loop){"8 vpdpbusd + 2 vpdpwssd a 256, the Q4_K tile mix", 2 * 256, peak_avxvnni};
    if (isa == MS_ISA_AVX512 || isa == MS_ISA_AMX) return (peak_loop){"vpdpbusd", 6 * 64, peak_vnni};
#endif
    (void)isa;
    return (peak_loop){NULL, 0, NULL};
}

typedef struct {
    peak_loop loop;
    uint64_t sink[64];
} peak_job;

static void peak_range(void *arg, int64_t b, int64_t e) {
    peak_job *J = arg;
    for (int64_t i = b; i < e; i++) J->sink[i % 64] += J->loop.fn(PEAK_ITERS);
}

/* Products a second (1e9) of the active level's loop over the pool's threads; 0 where it has none. */
static double measure_int8_peak(int threads) {
    const peak_loop L = peak_loop_for(ms_isa_active());
    if (!L.fn) return 0.0;
    peak_job J = {.loop = L};
    const double best = pool_best_s(peak_range, &J, threads, 3, 0);
    uint64_t all = 0;
    for (int i = 0; i < 64; i++) all += J.sink[i];
    if (all == 1) fputs("", stderr);
    return (double)L.per_iter * PEAK_ITERS * threads / best / 1e9;
}

/* ---- our forward ------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Bytes a decode step reads: every tensor but the input embedding, which is
 * read whole only when it is also the output head (tied). */
static ms_status weight_bytes(const char *path, double *out, double *macs_per_row) {
    ms_gguf *g = NULL;
    MS_TRY(ms_gguf_open(path, &g));
    const bool tied = ms_gguf_find_tensor(g, "output.weight") == NULL;
    double b = 0.0, macs = 0.0;
    for (int64_t i = 0; i < ms_gguf_n_tensors(g); i++) {
        const ms_gguf_tensor_info *t = ms_gguf_tensor_at(g, i);
        if (strcmp(t->name, "token_embd.weight") != 0 || tied) {
            b += (double)t->nbytes;
            if (t->ndim == 2) macs += (double)t->ne[0] * (double)t->ne[1]; /* a matmul: one product per weight */
        }
    }
    ms_gguf_close(&g);
    *out = b;
    *macs_per_row = macs;
    return MS_OK;
}

typedef struct {
    ms_model *m;
    int32_t *tokens; /* [64 + CTX] */
    float *logits;   /* [64, vocab] */
} ours;

/* Seconds of one decode step (the mean of DECODE_STEPS). */
static ms_status time_decode(ours *o, double *sec) {
    double t0 = ms_now_s();
    for (int i = 0; i < DECODE_STEPS; i++) {
        MS_TRY(ms_model_forward(o->m, o->tokens + CTX + (i % 8), 1, NULL, NULL, MS_LOGITS_LAST, o->logits));
        MS_TRY(ms_model_truncate(o->m, CTX));
    }
    *sec = (ms_now_s() - t0) / DECODE_STEPS;
    return MS_OK;
}

static ms_status time_rows(ours *o, int64_t n, double *sec) {
    double t0 = ms_now_s();
    MS_TRY(ms_model_forward(o->m, o->tokens + CTX, n, NULL, NULL, MS_LOGITS_ALL, o->logits));
    *sec = ms_now_s() - t0;
    return ms_model_truncate(o->m, CTX);
}

/* ---- llama-bench ------------------------------------------------------------ */

/* Parse llama-bench jsonl lines from f into tg (n_gen > 0) and pp[i]
 * (n_prompt = SIZES[i], n_gen = 0), tokens/s; the pclose status. */
static int read_llama(FILE *f, double *tg, double pp[N_SIZES]) {
    char line[16384];
    while (fgets(line, sizeof line, f)) {
        const char *np = strstr(line, "\"n_prompt\":"), *ng = strstr(line, "\"n_gen\":");
        const char *ts = strstr(line, "\"avg_ts\":");
        if (!np || !ng || !ts) continue;
        long p = strtol(np + 11, NULL, 10), gn = strtol(ng + 8, NULL, 10);
        double v = strtod(ts + 9, NULL);
        if (gn > 0 && p == 0) *tg = v;
        for (int i = 0; i < N_SIZES; i++)
            if (gn == 0 && p == SIZES[i]) pp[i] = v;
    }
    return pclose(f);
}

/* Two `llama-bench -r 1` runs with one --repack setting (its default is 1;
 * on an Intel AMX VM its repacked multi-row path died with SIGILL, AMX
 * tiles it never asks the kernel for, so --llama-repack 0 exists): tg 16,
 * and pp n for each SIZES[i]. tokens/s; false when tg failed (pp sizes that
 * failed stay NaN, and the table says so). */
static bool run_llama(const char *dir, const char *model, int threads, int repack, double *tg, double pp[N_SIZES]) {
    char cmd[4096];
    *tg = NAN;
    for (int i = 0; i < N_SIZES; i++) pp[i] = NAN;
    snprintf(cmd, sizeof cmd, "'%s/llama-bench' -m '%s' -t %d -r 1 -p 0 -n 16 --repack %d -o jsonl 2>/dev/null", dir,
             model, threads, repack);
    FILE *f = popen(cmd, "r");
    if (!f || read_llama(f, tg, pp) != 0) return false;
    snprintf(cmd, sizeof cmd,
             "'%s/llama-bench' -m '%s' -t %d -r 1 -p 1,2,4,8,16,32,64 -n 0 --repack %d -o jsonl 2>/dev/null", dir,
             model, threads, repack);
    f = popen(cmd, "r");
    if (f && read_llama(f, tg, pp) != 0)
        fprintf(stderr, "microspec-bench-ops: llama-bench's n-row run failed on %s (--repack %d)\n", model, repack);
    return isfinite(*tg);
}

/* ---- one model -------------------------------------------------------------- */

static ms_status bench_model(const char *path, int threads, int reps, bool q8, const char *llama, int repack,
                             double bw, double peak) {
    double wbytes = 0.0, macs_row = 0.0;
    MS_TRY(weight_bytes(path, &wbytes, &macs_row));
    ms_model_opts mo = {.max_ctx = 256, .max_batch = 64, .q8_matmul = q8 ? 1 : 0};
    ours o = {0};
    ms_status st = ms_model_load(path, &mo, &o.m);
    if (st < 0) return st;
    const int64_t vocab = ms_model_vocab(o.m);
    o.tokens = malloc((CTX + 64) * sizeof *o.tokens);
    o.logits = malloc((size_t)(64 * vocab) * sizeof *o.logits);
    if (!o.tokens || !o.logits) {
        st = MS_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < CTX + 64; i++) o.tokens[i] = (int32_t)((1000 + 37 * i) % vocab);
    if ((st = ms_model_prefill(o.m, o.tokens, CTX, o.logits)) < 0) goto done;
    double warm;
    if ((st = time_decode(&o, &warm)) < 0) goto done; /* warm-up: pages, caches, pool */

    /* Each n-row forward is timed right after decode steps of its own, and
     * the ratio taken pairwise: background load on a shared machine moves
     * both alike. */
    double dec[MAX_ROUNDS * N_SIZES], ratio[N_SIZES][MAX_ROUNDS], ms[N_SIZES][MAX_ROUNDS];
    double ltg[MAX_ROUNDS], lpp[N_SIZES][MAX_ROUNDS];
    int nd = 0, nl = 0;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < N_SIZES; i++) {
            double d, t;
            if ((st = time_decode(&o, &d)) < 0 || (st = time_rows(&o, SIZES[i], &t)) < 0) goto done;
            dec[nd++] = d;
            ratio[i][r] = t / d;
            ms[i][r] = 1e3 * t;
        }
        if (llama) {
            double tg, pp[N_SIZES];
            if (run_llama(llama, path, threads, repack, &tg, pp)) {
                ltg[nl] = 1.0 / tg;
                for (int i = 0; i < N_SIZES; i++) lpp[i][nl] = (double)SIZES[i] / pp[i] * tg;
                nl++;
            } else {
                fprintf(stderr, "microspec-bench-ops: llama-bench failed on %s\n", path);
            }
        }
    }
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const double step = median(dec, nd);
    printf("| %s | %d | ours %s %s | %.1f | %.0f %% |", name, threads, q8 ? "q8" : "f32", ms_isa_name(ms_isa_active()), 1.0 / step,
           100.0 * wbytes / step / (bw * 1e9));
    for (int i = 0; i < N_SIZES; i++) printf(" %.2f |", median(ratio[i], reps));
    printf("\n");
    /* the absolute times beside the ratios (stderr: the table stays a table) */
    fprintf(stderr, "microspec-bench-ops: %s, %d threads: decode %.2f ms; n-row forwards (ms):", name, threads,
            1e3 * step);
    for (int i = 0; i < N_SIZES; i++) fprintf(stderr, " %lld: %.2f", (long long)SIZES[i], median(ms[i], reps));
    fprintf(stderr, "\n");
    if (q8 && peak > 0) {
        fprintf(stderr, "microspec-bench-ops: %s: matmul products of an n-row forward, GMAC/s (share of the %.1f "
                        "GMAC/s integer-dot peak):", name, peak);
        for (int i = 0; i < N_SIZES; i++) {
            const double r = macs_row * (double)SIZES[i] / (median(ms[i], reps) * 1e-3) / 1e9;
            fprintf(stderr, " %lld: %.1f (%.0f %%)", (long long)SIZES[i], r, 100.0 * r / peak);
        }
        fprintf(stderr, "\n");
    }
    if (nl > 0) {
        const double lstep = median(ltg, nl);
        printf("| %s | %d | llama.cpp repack %d | %.1f | %.0f %% |", name, threads, repack, 1.0 / lstep,
               100.0 * wbytes / lstep / (bw * 1e9));
        for (int i = 0; i < N_SIZES; i++) printf(" %.2f |", median(lpp[i], nl));
        printf("\n");
    }
    fflush(stdout);
done:
    free(o.tokens);
    free(o.logits);
    ms_model_free(&o.m);
    return st;
}

int main(int argc, char **argv) {
    const char *models[MAX_MODELS];
    int n_models = 0, reps = 3, threads = 0, repack = 1;
    bool q8 = true;
    const char *llama = NULL;
    enum { O_MODEL = 256, O_THREADS, O_REPS, O_Q8, O_F32, O_LLAMA, O_REPACK };
    static const struct option opts[] = {{"model", required_argument, 0, O_MODEL},
                                         {"threads", required_argument, 0, O_THREADS},
                                         {"reps", required_argument, 0, O_REPS},
                                         {"q8", no_argument, 0, O_Q8},
                                         {"f32", no_argument, 0, O_F32},
                                         {"llama-bench", required_argument, 0, O_LLAMA},
                                         {"llama-repack", required_argument, 0, O_REPACK},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL:
            if (n_models == MAX_MODELS) {
                fprintf(stderr, "microspec-bench-ops: at most %d models\n", MAX_MODELS);
                return 2;
            }
            models[n_models++] = optarg;
            break;
        case O_THREADS:
            threads = (int)strtol(optarg, &end, 10);
            if (*end || threads < 1 || threads > 64) {
                fprintf(stderr, "microspec-bench-ops: --threads %s: want 1..64\n", optarg);
                return 2;
            }
            break;
        case O_REPS:
            reps = (int)strtol(optarg, &end, 10);
            if (*end || reps < 1 || reps > MAX_ROUNDS) {
                fprintf(stderr, "microspec-bench-ops: --reps %s: want 1..%d\n", optarg, MAX_ROUNDS);
                return 2;
            }
            break;
        case O_Q8: q8 = true; break;
        case O_F32: q8 = false; break;
        case O_LLAMA: llama = optarg; break;
        case O_REPACK:
            if (strcmp(optarg, "0") != 0 && strcmp(optarg, "1") != 0) {
                fprintf(stderr, "microspec-bench-ops: --llama-repack %s: want 0 or 1\n", optarg);
                return 2;
            }
            repack = optarg[0] - '0';
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || n_models == 0) {
        fprintf(stderr, "microspec-bench-ops: %s\n", n_models == 0 ? "no --model given" : "unexpected argument");
        usage(stderr);
        return 2;
    }
    if (threads == 0) threads = ms_pool_cores();
    ms_k_cpu_set_threads(threads);
    const double bw = measure_bandwidth();
    const double peak = q8 ? measure_int8_peak(threads) : 0.0;
    printf("Kernels: %s (MS_ISA caps them). ", ms_isa_name(ms_isa_active()));
    if (peak > 0)
        printf("Integer-dot peak (%s, %d threads, nothing else in the loop): %.1f GMAC/s. ",
               peak_loop_for(ms_isa_active()).name, threads, peak);
    printf("Read bandwidth (1 GiB sum, %d threads): %.1f GB/s. Columns 1..64: an n-row forward (logits of every "
           "row) over one decode step; llama.cpp: pp-n time over tg time.\n\n",
           threads, bw);
    printf("| model | threads | engine | decode tok/s | share of read bw |");
    for (int i = 0; i < N_SIZES; i++) printf(" %lld |", (long long)SIZES[i]);
    printf("\n|---|---|---|---|---|");
    for (int i = 0; i < N_SIZES; i++) printf("---|");
    printf("\n");
    fflush(stdout);
    int rc = 0;
    for (int i = 0; i < n_models; i++)
        if (bench_model(models[i], threads, reps, q8, llama, repack, bw, peak) < 0) rc = 1;
    return rc;
}
