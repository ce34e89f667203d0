/* ms_k_quant.c — GGUF block formats: dequantization and the batch-invariant
 * linear that reads quantized weights in place (contract: ms_quant.h).
 *
 * Two dequantizations per type:
 *   - ref_*: the specification. One element at a time, its value computed
 *     from index formulas that follow the `gguf` package (gguf/quants.py)
 *     step by step, so the f32 result equals numpy's bit for bit: f16 scales
 *     are widened to f32 first, and every product/sum is rounded to f32 in
 *     numpy's order (Q4_0: d·(q−8); Q4_1: (d·q)+m; Q4_K: (d·sc)·q − (dmin·m)).
 *   - blk_*: one whole block, loops shaped for the vectoriser (no division,
 *     no per-element branch), the same arithmetic; tested bitwise against ref_*.
 *
 * Bit-exactness also needs every multiply and add rounded on its own: no
 * fused multiply-add. GCC does not contract in ISO C mode (-std=c11, which the
 * build uses); clang contracts within an expression unless told not to.
 */
#include "ms_quant.h"
#include "ms_pool.h"
#include "ms_k_blockio.h"
#include "ms_k_hot.h"

#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Hot loops are compiled for AVX-512 / AVX2 / baseline and picked per call by
 * the active ISA level (ms_k_hot.h). The arithmetic per output element is the
 * same in every copy (no contraction, lanes independent), so results do not
 * depend on the CPU. */

enum { QK = 32, QK_K = 256 };


/* ---- the specification: one element of block b at index e ---------------- */

/* Q4_0 {f16 d; u8 qs[16]}: e < 16 low nibble of qs[e], else high nibble of qs[e-16]. */
static float ref_q4_0(const uint8_t *b, int e) {
    float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    int q = e < 16 ? (qs[e] & 0x0F) : (qs[e - 16] >> 4);
    return d * (float)(q - 8);
}

/* Q4_1 {f16 d, m; u8 qs[16]}. */
static float ref_q4_1(const uint8_t *b, int e) {
    float d = ld_f16(b), m = ld_f16(b + 2);
    const uint8_t *qs = b + 4;
    int q = e < 16 ? (qs[e] & 0x0F) : (qs[e - 16] >> 4);
    return d * (float)q + m;
}

/* Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}: bit e of the u32 qh is bit 4 of element e. */
static float ref_q5_0(const uint8_t *b, int e) {
    float d = ld_f16(b);
    uint32_t qh = ld_u32(b + 2);
    const uint8_t *qs = b + 6;
    int lo = e < 16 ? (qs[e] & 0x0F) : (qs[e - 16] >> 4);
    int q = lo | (int)(((qh >> e) & 1u) << 4);
    return d * (float)(q - 16);
}

/* Q5_1 {f16 d, m; u8 qh[4]; u8 qs[16]}. */
static float ref_q5_1(const uint8_t *b, int e) {
    float d = ld_f16(b), m = ld_f16(b + 2);
    uint32_t qh = ld_u32(b + 4);
    const uint8_t *qs = b + 8;
    int lo = e < 16 ? (qs[e] & 0x0F) : (qs[e - 16] >> 4);
    int q = lo | (int)(((qh >> e) & 1u) << 4);
    return d * (float)q + m;
}

/* Q8_0 {f16 d; i8 qs[32]}. */
static float ref_q8_0(const uint8_t *b, int e) {
    float d = ld_f16(b);
    return (float)(int8_t)b[2 + e] * d;
}

/* Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]}: 8 sub-blocks of 32; sub-block
 * s reads nibble s%2 of qs[32·(s/2) + l]. */
static float ref_q4_k(const uint8_t *b, int e) {
    float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *qs = b + 16;
    int s = e / 32, l = e % 32;
    int sc, mn;
    kq_scale_min(b + 4, s, &sc, &mn);
    int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0F;
    return (d * (float)sc) * (float)q - (dmin * (float)mn);
}

/* Q5_K {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: as Q4_K, bit 4
 * of element l of sub-block s is bit s of qh[l]. */
static float ref_q5_k(const uint8_t *b, int e) {
    float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *qh = b + 16, *qs = b + 48;
    int s = e / 32, l = e % 32;
    int sc, mn;
    kq_scale_min(b + 4, s, &sc, &mn);
    int q = ((qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0F) | (((qh[l] >> s) & 1) << 4);
    return (d * (float)sc) * (float)q - (dmin * (float)mn);
}

/* Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: two halves of 128; in
 * half h, element r takes its low 4 bits from ql[64h + r%64] (low nibble for
 * r < 64, high otherwise) and its top 2 bits from qh[32h + r%32] at bit
 * 2·(r/32); scale of element e is scales[e/16]. */
static float ref_q6_k(const uint8_t *b, int e) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = ld_f16(b + 208);
    int h = e / 128, r = e % 128;
    int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
    int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
    int q = (lo | (hi << 4)) - 32;
    return (d * (float)scales[e / 16]) * (float)q;
}

void ms_q_dequant_ref(ms_dtype dtype, const void *src, float *dst, int64_t n) {
    const int64_t qk = ms_dtype_block(dtype);
    const size_t bb = ms_dtype_block_bytes(dtype);
    MS_ASSERT(ms_q_supported(dtype) && n >= 0 && n % qk == 0);
    const uint8_t *s = src;
    if (dtype == MS_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    if (dtype == MS_DTYPE_F16 || dtype == MS_DTYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = ld_u16(s + 2 * (size_t)i);
            dst[i] = dtype == MS_DTYPE_F16 ? ms_f16_to_f32(h) : ms_bf16_to_f32(h);
        }
        return;
    }
    float (*elem)(const uint8_t *, int) = NULL;
    switch (dtype) {
    case MS_DTYPE_Q4_0: elem = ref_q4_0; break;
    case MS_DTYPE_Q4_1: elem = ref_q4_1; break;
    case MS_DTYPE_Q5_0: elem = ref_q5_0; break;
    case MS_DTYPE_Q5_1: elem = ref_q5_1; break;
    case MS_DTYPE_Q8_0: elem = ref_q8_0; break;
    case MS_DTYPE_Q4_K: elem = ref_q4_k; break;
    case MS_DTYPE_Q5_K: elem = ref_q5_k; break;
    case MS_DTYPE_Q6_K: elem = ref_q6_k; break;
    default: MS_ASSERT(!"ms_q_dequant_ref: unsupported dtype");
    }
    for (int64_t blk = 0; blk < n / qk; blk++) {
        const uint8_t *b = s + (size_t)blk * bb;
        for (int e = 0; e < (int)qk; e++) dst[blk * qk + e] = elem(b, e);
    }
}

/* ---- the fast path: one whole block into y[QK or QK_K] ---------------------- */

typedef void (*deq_block_fn)(const uint8_t *restrict b, float *restrict y);

static inline void blk_q4_0(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((qs[j] & 0x0F) - 8);
        y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
}

static inline void blk_q4_1(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b), m = ld_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 0x0F) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

static inline void blk_q5_0(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b);
    const uint32_t qh = ld_u32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
        y[j] = d * (float)(((qs[j] & 0x0F) | h0) - 16);
        y[j + 16] = d * (float)(((qs[j] >> 4) | h1) - 16);
    }
}

static inline void blk_q5_1(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b), m = ld_f16(b + 2);
    const uint32_t qh = ld_u32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
        y[j] = d * (float)((qs[j] & 0x0F) | h0) + m;
        y[j + 16] = d * (float)((qs[j] >> 4) | h1) + m;
    }
}

static inline void blk_q8_0(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < QK; j++) y[j] = (float)qs[j] * d;
}

/* Per-sub-block d·sc and dmin·m of a Q4_K/Q5_K block, rounded to f32 once. */
static inline void kq_dm(const uint8_t *b, float *ds, float *ms) {
    const float d = ld_f16(b), dmin = ld_f16(b + 2);
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        kq_scale_min(b + 4, s, &sc, &mn);
        ds[s] = d * (float)sc;
        ms[s] = dmin * (float)mn;
    }
}

static inline void blk_q4_k(const uint8_t *restrict b, float *restrict y) {
    float ds[8], ms[8];
    kq_dm(b, ds, ms);
    const uint8_t *qs = b + 16;
    for (int g = 0; g < 4; g++) {
        const float d1 = ds[2 * g], m1 = ms[2 * g], d2 = ds[2 * g + 1], m2 = ms[2 * g + 1];
        const uint8_t *q = qs + 32 * g;
        float *yg = y + 64 * g;
        for (int l = 0; l < 32; l++) {
            yg[l] = d1 * (float)(q[l] & 0x0F) - m1;
            yg[l + 32] = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static inline void blk_q5_k(const uint8_t *restrict b, float *restrict y) {
    float ds[8], ms[8];
    kq_dm(b, ds, ms);
    const uint8_t *qh = b + 16, *qs = b + 48;
    for (int g = 0; g < 4; g++) {
        const float d1 = ds[2 * g], m1 = ms[2 * g], d2 = ds[2 * g + 1], m2 = ms[2 * g + 1];
        const int s1 = 2 * g, s2 = 2 * g + 1;
        const uint8_t *q = qs + 32 * g;
        float *yg = y + 64 * g;
        for (int l = 0; l < 32; l++) {
            int h1 = ((qh[l] >> s1) & 1) << 4, h2 = ((qh[l] >> s2) & 1) << 4;
            yg[l] = d1 * (float)((q[l] & 0x0F) | h1) - m1;
            yg[l + 32] = d2 * (float)((q[l] >> 4) | h2) - m2;
        }
    }
}

static inline void blk_q6_k(const uint8_t *restrict b, float *restrict y) {
    const float d = ld_f16(b + 208);
    const int8_t *sc = (const int8_t *)(b + 192);
    float ds[16];
    for (int i = 0; i < 16; i++) ds[i] = d * (float)sc[i];
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const float *dh = ds + 8 * h;
        float *yh = y + 128 * h;
        /* Quarter j (32 elements) of the half takes its scale from ds[2j]
         * for l < 16 and ds[2j + 1] above: two loops of 16, scales fixed. */
        for (int is = 0; is < 2; is++) {
            const float s1 = dh[is], s2 = dh[is + 2], s3 = dh[is + 4], s4 = dh[is + 6];
            for (int l = 16 * is; l < 16 * is + 16; l++) {
                int q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                yh[l] = s1 * (float)q1;
                yh[l + 32] = s2 * (float)q2;
                yh[l + 64] = s3 * (float)q3;
                yh[l + 96] = s4 * (float)q4;
            }
        }
    }
}

/* Scalar dtypes as 32-element "blocks" for the linear (k need not be a
 * multiple of 32; the tail is converted separately). f16 is widened with the
 * same bit arithmetic as ms_f16_to_f32, inline. */
static inline float f16_inline(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    float f;
    if (exp == 0) {
        f = (float)man * 0x1.0p-24f;
        return sign ? -f : f;
    }
    u = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112u) << 23) | (man << 13));
    memcpy(&f, &u, 4);
    return f;
}

static inline void cvt_scalar(ms_dtype dt, const uint8_t *restrict b, float *restrict y, int cnt) {
    if (dt == MS_DTYPE_F32) {
        memcpy(y, b, (size_t)cnt * sizeof(float));
    } else if (dt == MS_DTYPE_F16) {
        for (int j = 0; j < cnt; j++) y[j] = f16_inline(ld_u16(b + 2 * j));
    } else {
        for (int j = 0; j < cnt; j++) {
            uint32_t u = (uint32_t)ld_u16(b + 2 * j) << 16;
            memcpy(&y[j], &u, 4);
        }
    }
}
static inline void blk_f32(const uint8_t *restrict b, float *restrict y) { memcpy(y, b, QK * sizeof(float)); }
static inline void blk_f16(const uint8_t *restrict b, float *restrict y) { cvt_scalar(MS_DTYPE_F16, b, y, QK); }
static inline void blk_bf16(const uint8_t *restrict b, float *restrict y) { cvt_scalar(MS_DTYPE_BF16, b, y, QK); }

/* The block function, elements per block and bytes per block the linear and
 * ms_q_dequant use for `dt` (scalar dtypes: 32-element chunks). */
static void block_traits(ms_dtype dt, deq_block_fn *fn, int64_t *qk, size_t *bb) {
    switch (dt) {
    case MS_DTYPE_F32: *fn = blk_f32, *qk = QK, *bb = QK * 4; return;
    case MS_DTYPE_F16: *fn = blk_f16, *qk = QK, *bb = QK * 2; return;
    case MS_DTYPE_BF16: *fn = blk_bf16, *qk = QK, *bb = QK * 2; return;
    case MS_DTYPE_Q4_0: *fn = blk_q4_0; break;
    case MS_DTYPE_Q4_1: *fn = blk_q4_1; break;
    case MS_DTYPE_Q5_0: *fn = blk_q5_0; break;
    case MS_DTYPE_Q5_1: *fn = blk_q5_1; break;
    case MS_DTYPE_Q8_0: *fn = blk_q8_0; break;
    case MS_DTYPE_Q4_K: *fn = blk_q4_k; break;
    case MS_DTYPE_Q5_K: *fn = blk_q5_k; break;
    case MS_DTYPE_Q6_K: *fn = blk_q6_k; break;
    default: MS_ASSERT(!"ms_quant: unsupported dtype");
    }
    *qk = ms_dtype_block(dt);
    *bb = ms_dtype_block_bytes(dt);
}

bool ms_q_supported(ms_dtype dtype) {
    switch (dtype) {
    case MS_DTYPE_F32:
    case MS_DTYPE_F16:
    case MS_DTYPE_BF16:
    case MS_DTYPE_Q4_0:
    case MS_DTYPE_Q4_1:
    case MS_DTYPE_Q5_0:
    case MS_DTYPE_Q5_1:
    case MS_DTYPE_Q8_0:
    case MS_DTYPE_Q4_K:
    case MS_DTYPE_Q5_K:
    case MS_DTYPE_Q6_K: return true;
    default: return false;
    }
}

ms_qweight ms_qweight_view(ms_dtype dtype, const void *data, int64_t m, int64_t k) {
    MS_ASSERT(ms_q_supported(dtype));
    MS_ASSERT(m >= 0 && k >= 0);
    ms_qweight w = {.dtype = dtype, .data = data, .m = m, .k = k, .row_bytes = 0};
    bool whole_blocks = ms_dtype_row_bytes(dtype, k, &w.row_bytes);
    MS_ASSERT(whole_blocks);
    return w;
}

void ms_q_dequant(ms_dtype dtype, const void *src, float *dst, int64_t n) {
    MS_ASSERT(ms_q_supported(dtype) && n >= 0 && n % ms_dtype_block(dtype) == 0);
    deq_block_fn fn;
    int64_t qk;
    size_t bb;
    block_traits(dtype, &fn, &qk, &bb);
    const uint8_t *s = src;
    int64_t nb = n / qk;
    for (int64_t blk = 0; blk < nb; blk++) fn(s + (size_t)blk * bb, dst + blk * qk);
    if (n % qk) cvt_scalar(dtype, s + (size_t)nb * bb, dst + nb * qk, (int)(n % qk));
}

void ms_q_row(const ms_qweight *w, int64_t r, float *dst) {
    MS_ASSERT(r >= 0 && r < w->m);
    ms_q_dequant(w->dtype, (const uint8_t *)w->data + (size_t)r * w->row_bytes, dst, w->k);
}

/* ---- the linear ----------------------------------------------------------- */

/* x rows that share one unpacked weight block; lanes of each dot product. */
enum { TILE = 8, LANES = 16 };

/* The fixed accumulation order of one (x row, weight row) dot product:
 * element e of the row goes to lane e mod 16, lanes run over the row in
 * order, then a fixed pairwise tree. Independent of n and of the tiling. */
static inline float lanes_reduce(const float *a) {
    float s8[8], s4[4];
    for (int l = 0; l < 8; l++) s8[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) s4[l] = s8[l] + s8[l + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* acc[nt][LANES] += x rows (stride k, from column c0) · wb[0..cnt). cnt is a
 * multiple of LANES except for a scalar-dtype tail, whose element j still
 * lands in lane j mod 16 (c0 is a multiple of 16). */
static inline __attribute__((always_inline)) void acc_block(float (*restrict acc)[LANES], const float *restrict x,
                                                            int64_t k, int64_t c0, const float *restrict wb,
                                                            int64_t cnt, int nt) {
    for (int t = 0; t < nt; t++) {
        const float *restrict xr = x + t * k + c0;
        float a[LANES];
        for (int l = 0; l < LANES; l++) a[l] = acc[t][l];
        int64_t e = 0;
        for (; e + LANES <= cnt; e += LANES)
            for (int l = 0; l < LANES; l++) a[l] += xr[e + l] * wb[e + l];
        for (int l = 0; e + l < cnt; l++) a[l] += xr[e + l] * wb[e + l];
        for (int l = 0; l < LANES; l++) acc[t][l] = a[l];
    }
}

/* y[i, j] (row stride ldy) for x rows [0, n) and output columns [0, m_out),
 * column j being weight row rows[j] (rows == NULL: row j). Specialised per
 * block function (always_inline with a constant fn). */
static inline __attribute__((always_inline)) void linear_core(float *restrict y, int64_t ldy,
                                                              const float *restrict x, const ms_qweight *w,
                                                              const float *b, const int32_t *rows, int64_t r0,
                                                              int64_t m_out, int64_t n, deq_block_fn fn, int64_t qk,
                                                              size_t bb) {
    const int64_t k = w->k, nb = k / qk, tail = k % qk;
    float wb[QK_K] __attribute__((aligned(64)));
    for (int64_t i0 = 0; i0 < n; i0 += TILE) {
        const int nt = (int)(n - i0 < TILE ? n - i0 : TILE);
        const float *xt = x + i0 * k;
        for (int64_t j = 0; j < m_out; j++) {
            const int64_t r = rows ? rows[j] : r0 + j;
            MS_ASSERT(r >= 0 && r < w->m);
            const uint8_t *wr = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
            float acc[TILE][LANES];
            memset(acc, 0, sizeof(acc));
            for (int64_t blk = 0; blk < nb; blk++) {
                fn(wr + (size_t)blk * bb, wb);
                acc_block(acc, xt, k, blk * qk, wb, qk, nt);
            }
            if (tail) {
                cvt_scalar(w->dtype, wr + (size_t)nb * bb, wb, (int)tail);
                acc_block(acc, xt, k, nb * qk, wb, tail, nt);
            }
            for (int t = 0; t < nt; t++) {
                float v = lanes_reduce(acc[t]);
                if (b) v += b[r];
                y[(i0 + t) * ldy + j] = v;
            }
        }
    }
}

#define LINEAR_CASE(DT, FN) \
    case DT: linear_core(y, ldy, x, w, b, rows, r0, m_out, n, FN, qk, bb); break

MS_HOT_IMPL(linear_dispatch)(float *y, int64_t ldy, const float *x, const ms_qweight *w, const float *b,
                                     const int32_t *rows, int64_t r0, int64_t m_out, int64_t n) {
    deq_block_fn fn;
    int64_t qk;
    size_t bb;
    block_traits(w->dtype, &fn, &qk, &bb);
    switch (w->dtype) {
        LINEAR_CASE(MS_DTYPE_F32, blk_f32);
        LINEAR_CASE(MS_DTYPE_F16, blk_f16);
        LINEAR_CASE(MS_DTYPE_BF16, blk_bf16);
        LINEAR_CASE(MS_DTYPE_Q4_0, blk_q4_0);
        LINEAR_CASE(MS_DTYPE_Q4_1, blk_q4_1);
        LINEAR_CASE(MS_DTYPE_Q5_0, blk_q5_0);
        LINEAR_CASE(MS_DTYPE_Q5_1, blk_q5_1);
        LINEAR_CASE(MS_DTYPE_Q8_0, blk_q8_0);
        LINEAR_CASE(MS_DTYPE_Q4_K, blk_q4_k);
        LINEAR_CASE(MS_DTYPE_Q5_K, blk_q5_k);
        LINEAR_CASE(MS_DTYPE_Q6_K, blk_q6_k);
    default: MS_ASSERT(!"ms_q_linear: unsupported dtype");
    }
}
MS_HOT_CLONES(linear_dispatch, (float *y, int64_t ldy, const float *x, const ms_qweight *w, const float *b, const int32_t *rows, int64_t r0, int64_t m_out, int64_t n), (y, ldy, x, w, b, rows, r0, m_out, n))

/* The pool splits output columns (weight rows) into contiguous chunks: each
 * output element is still computed by one thread from one x row and one
 * weight row, so results do not depend on the thread count. */
typedef struct {
    float *y;
    int64_t ldy;
    const float *x;
    const ms_qweight *w;
    const float *b;
    const int32_t *rows;
    int64_t n;
} linear_task;

static void linear_part(void *arg, int64_t j0, int64_t j1) {
    const linear_task *t = arg;
    linear_dispatch(t->y + j0, t->ldy, t->x, t->w, t->b, t->rows ? t->rows + j0 : NULL, j0, j1 - j0, t->n);
}

/* Weight rows per thread below which splitting costs more than it saves. */
#define LINEAR_GRAIN 32

void ms_q_linear(float *y, const float *x, const ms_qweight *w, const float *b, int64_t n) {
    MS_ASSERT(y && x && w && n >= 0);
    MS_ASSERT((const float *)y != x);
    linear_task t = {y, w->m, x, w, b, NULL, n};
    ms_pool_run(linear_part, &t, w->m, LINEAR_GRAIN);
}

void ms_q_linear_rows(float *y, const float *x, const ms_qweight *w, const int32_t *rows, int64_t n_rows,
                      int64_t n) {
    MS_ASSERT(y && x && w && rows && n_rows >= 0 && n >= 0);
    MS_ASSERT((const float *)y != x);
    linear_task t = {y, n_rows, x, w, NULL, rows, n};
    ms_pool_run(linear_part, &t, n_rows, LINEAR_GRAIN);
}
