/* ms_k_qdot_ref.c — the scalar twins of the quantized matmul: the
 * specification every SIMD path equals bit for bit (ms_qdot.h).
 *
 * The activation quantizer (one block of 32; one super-block of 256 for
 * Q4_K's form) and the product: each 32-element weight block decoded from
 * the ggml layout with index formulas (common/ms_tensor.c, ms_k_quant.c),
 * one exact int32 block sum per (x row, block), then the f32 term, every
 * product and sum rounded on its own (no fused multiply-add: GCC does not
 * contract in ISO C mode, clang is told in ms_k_qdot_int.h). */
#include <stdlib.h>

#include "ms_k_qdot_int.h"

/* One block of 32: d = max|x|/127, q = nearest-even(x/d) (the 1.5·2^23 add
 * rounds in f32 for |v| < 2^22), written quad by quad into lane j of its
 * group (q_group + 64·t + 4·j), in element order into qp and into qa's
 * group at pair_offset(j). */
static void quantize_block(const float *xb, int8_t *qg, int8_t *qag, int j, int8_t *qp, float *d, int32_t *s) {
    float amax = 0.0f;
    bool finite = true;
    for (int e = 0; e < QK; e++) {
        float v = fabsf(xb[e]);
        finite = finite && isfinite(v);
        amax = v > amax ? v : amax;
    }
    const float dd = finite ? amax / 127.0f : NAN;
    int32_t sum = 0;
    for (int e = 0; e < QK; e++) {
        const int q = q8_round(xb[e], dd, finite && dd > 0.0f);
        qg[64 * (e / 4) + 4 * j + (e % 4)] = (int8_t)q;
        qag[pair_offset(j) + e] = (int8_t)q;
        qp[e] = (int8_t)q;
        sum += q;
    }
    *d = dd;
    *s = sum;
}

void ms_qd_ref_quant_block(const float *xb, int8_t *qg, int8_t *qag, int j, int8_t *qp, float *d, int32_t *s) {
    quantize_block(xb, qg, qag, j, qp, d, s);
}

/* Super-block S (256 elements at xs) of a row into the per-super-block
 * form (ms_qdot.h): the unit uk = (max|x|/127)/32; sub-block b's step
 * uk·2^e_b, e_b = 5 − j_b with j_b the largest j ≤ 5 such that
 * max_b|x|·2^j ≤ max|x| (a sub-block of small values beside an outlier keeps
 * up to 32x finer steps); qk = nearest-even(x/step) clamped to ±127; the
 * sums Σqk << e_b. NaN unit and zero q for a non-finite super-block. */
static void quantize_super(const float *xs, int8_t *qk, float *uk, int32_t *ek, int32_t *sk) {
    float amax = 0.0f, bmax[QK_K / QK] = {0};
    bool finite = true;
    for (int e = 0; e < QK_K; e++) {
        const float v = fabsf(xs[e]);
        finite = finite && isfinite(v);
        bmax[e / QK] = v > bmax[e / QK] ? v : bmax[e / QK];
    }
    for (int b = 0; b < QK_K / QK; b++) amax = bmax[b] > amax ? bmax[b] : amax;
    const float dd = finite ? amax / 127.0f : NAN;
    *uk = dd / 32.0f;
    for (int b = 0; b < QK_K / QK; b++) {
        const int j = super_j(bmax[b], amax);
        const float step = dd * (1.0f / (float)(1 << j)); /* = uk·2^(5 − j), exact */
        int32_t sum = 0;
        for (int e = QK * b; e < QK * (b + 1); e++) {
            qk[e] = (int8_t)q8_round(xs[e], step, finite && step > 0.0f);
            sum += qk[e];
        }
        ek[b] = finite ? 5 - j : 0;
        sk[b] = sum * (1 << ek[b]);
    }
}

void ms_qd_ref_quant_super(const float *xs, int8_t *qk, float *uk, int32_t *ek, int32_t *sk) {
    quantize_super(xs, qk, uk, ek, sk);
}

/* How a block's term is formed (ms_qdot.h). */
typedef enum { T_PLAIN, T_PLUS_MIN, T_MINUS_MIN, T_FLOAT } term_kind;

/* One 32-element weight block decoded: integers with the offset removed,
 * the Q6_K half scales (1, 1 elsewhere), the multipliers a (of sumi) and m
 * (of the x block sum), or the f32 values for the scalar dtypes. */
typedef struct {
    int8_t q[QK];
    int32_t sc0, sc1;
    float a, m;
    float f[QK];
} wblk;

static term_kind kind_of(ms_dtype dt) {
    switch (dt) {
    case MS_DTYPE_Q4_0:
    case MS_DTYPE_Q5_0:
    case MS_DTYPE_Q8_0:
    case MS_DTYPE_Q6_K: return T_PLAIN;
    case MS_DTYPE_Q4_1:
    case MS_DTYPE_Q5_1: return T_PLUS_MIN;
    case MS_DTYPE_Q4_K:
    case MS_DTYPE_Q5_K: return T_MINUS_MIN;
    case MS_DTYPE_F32:
    case MS_DTYPE_F16:
    case MS_DTYPE_BF16: return T_FLOAT;
    default: MS_ASSERT(!"ms_qdot: unsupported dtype");
    }
    return T_PLAIN;
}

/* Nibble e of a 32-element block's qs[16]: low nibbles are elements 0-15. */
static inline int nib32(const uint8_t *qs, int e) { return e < 16 ? (qs[e] & 0x0F) : (qs[e - 16] >> 4); }

/* Block b (32 elements) of weight row wr. */
static void decode_block(ms_dtype dt, const uint8_t *wr, int64_t b, wblk *o) {
    o->sc0 = o->sc1 = 1;
    o->m = 0.0f;
    switch (dt) {
    case MS_DTYPE_Q8_0: {
        const uint8_t *p = wr + (size_t)b * 34;
        o->a = ld_f16(p);
        for (int e = 0; e < QK; e++) o->q[e] = (int8_t)p[2 + e];
        return;
    }
    case MS_DTYPE_Q4_0: {
        const uint8_t *p = wr + (size_t)b * 18;
        o->a = ld_f16(p);
        for (int e = 0; e < QK; e++) o->q[e] = (int8_t)(nib32(p + 2, e) - 8);
        return;
    }
    case MS_DTYPE_Q4_1: {
        const uint8_t *p = wr + (size_t)b * 20;
        o->a = ld_f16(p);
        o->m = ld_f16(p + 2);
        for (int e = 0; e < QK; e++) o->q[e] = (int8_t)nib32(p + 4, e);
        return;
    }
    case MS_DTYPE_Q5_0: {
        const uint8_t *p = wr + (size_t)b * 22;
        const uint32_t qh = ld_u32(p + 2);
        o->a = ld_f16(p);
        for (int e = 0; e < QK; e++) o->q[e] = (int8_t)((nib32(p + 6, e) | (int)(((qh >> e) & 1u) << 4)) - 16);
        return;
    }
    case MS_DTYPE_Q5_1: {
        const uint8_t *p = wr + (size_t)b * 24;
        const uint32_t qh = ld_u32(p + 4);
        o->a = ld_f16(p);
        o->m = ld_f16(p + 2);
        for (int e = 0; e < QK; e++) o->q[e] = (int8_t)(nib32(p + 8, e) | (int)(((qh >> e) & 1u) << 4));
        return;
    }
    case MS_DTYPE_Q4_K:
    case MS_DTYPE_Q5_K: {
        const bool five = dt == MS_DTYPE_Q5_K;
        const uint8_t *p = wr + (size_t)(b / 8) * (five ? 176 : 144);
        const int s = (int)(b % 8);
        const uint8_t *qh = p + 16, *qs = p + (five ? 48 : 16);
        int sc, mn;
        kq_scale_min(p + 4, s, &sc, &mn);
        o->a = ld_f16(p) * (float)sc;
        o->m = ld_f16(p + 2) * (float)mn;
        for (int l = 0; l < QK; l++) {
            int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0F;
            if (five) q |= ((qh[l] >> s) & 1) << 4;
            o->q[l] = (int8_t)q;
        }
        return;
    }
    case MS_DTYPE_Q6_K: {
        /* Element e of the super-block: half h = e/128, r = e%128; low 4 bits
         * from ql[64h + r%64] (nibble r/64), top 2 from qh[32h + r%32] at bit
         * 2·(r/32); scale scales[e/16]. */
        const uint8_t *p = wr + (size_t)(b / 8) * 210;
        const uint8_t *ql = p, *qh = p + 128;
        const int8_t *scales = (const int8_t *)(p + 192);
        const int e0 = 32 * (int)(b % 8);
        o->a = ld_f16(p + 208);
        o->sc0 = scales[e0 / 16];
        o->sc1 = scales[e0 / 16 + 1];
        for (int l = 0; l < QK; l++) {
            const int e = e0 + l, h = e / 128, r = e % 128;
            const int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
            const int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            o->q[l] = (int8_t)((lo | (hi << 4)) - 32);
        }
        return;
    }
    case MS_DTYPE_F32:
    case MS_DTYPE_F16:
    case MS_DTYPE_BF16:
        ms_q_dequant_ref(dt, wr + (size_t)b * QK * ms_dtype_size(dt), o->f, QK);
        o->a = 1.0f;
        return;
    default: MS_ASSERT(!"ms_qdot: unsupported dtype");
    }
}

/* term_b of ms_qdot.h for one x block (xg: its group, j: its lane). */
static inline float block_term(term_kind kind, const wblk *w, const int8_t *xg, int j, float dx, int32_t sx) {
    if (kind == T_FLOAT) {
        float sumf = 0.0f;
        for (int e = 0; e < QK; e++) sumf += w->f[e] * (float)xg[64 * (e / 4) + 4 * j + (e % 4)];
        return dx * sumf;
    }
    int32_t lo = 0, hi = 0;
    for (int e = 0; e < 16; e++) lo += (int32_t)w->q[e] * xg[64 * (e / 4) + 4 * j + (e % 4)];
    for (int e = 16; e < QK; e++) hi += (int32_t)w->q[e] * xg[64 * (e / 4) + 4 * j + (e % 4)];
    const int32_t sumi = w->sc0 * lo + w->sc1 * hi;
    const float ad = w->a * dx;
    const float t = ad * (float)sumi;
    if (kind == T_PLAIN) return t;
    const float md = w->m * dx;
    const float u = md * (float)sx;
    return kind == T_PLUS_MIN ? t + u : t - u;
}

/* Q4_K, scalar: columns [j0, j1) by the per-super-block definition
 * (ms_qdot.h). */
static void ref_q4k_range(void *arg, int64_t j0, int64_t j1) {
    const qd_job *J = arg;
    const ms_q8_act *x = J->x;
    MS_ASSERT(x->has_k);
    const int64_t g = ms_q8_groups(x->k), ns = x->k / QK_K;
    for (int64_t j = j0; j < j1; j++) {
        int64_t r;
        const uint8_t *wr = job_wrow(J, j, &r);
        for (int64_t i = 0; i < x->n; i++) {
            const int8_t *xq = x->qk + (size_t)(i * g) * GROUP_Q;
            float acc[2] = {0.0f, 0.0f};
            for (int64_t S = 0; S < ns; S++) {
                const uint8_t *p = wr + (size_t)S * 144, *qs = p + 16;
                int32_t I = 0, M = 0;
                for (int sb = 0; sb < 8; sb++) {
                    int sc, mn;
                    kq_scale_min(p + 4, sb, &sc, &mn);
                    int32_t sumi = 0;
                    for (int l = 0; l < QK; l++)
                        sumi += ((qs[32 * (sb / 2) + l] >> (4 * (sb % 2))) & 0x0F) * xq[QK_K * S + QK * sb + l];
                    I += sc * sumi * (1 << x->ek[i * g * GROUP + 8 * S + sb]);
                    M += mn * x->sk[i * g * GROUP + 8 * S + sb];
                }
                const float dy = x->uk[i * g * 2 + S];
                const float t = (ld_f16(p) * dy) * (float)I - (ld_f16(p + 2) * dy) * (float)M;
                acc[S % 2] += t;
            }
            float v = acc[0] + acc[1];
            if (J->b) v += J->b[r];
            J->y[i * J->ldy + j] = v;
        }
    }
}

/* Scalar: columns [j0, j1), x rows in tiles of TILE so a decoded weight
 * block serves TILE rows. */
static void ref_range(void *arg, int64_t j0, int64_t j1) {
    const qd_job *J = arg;
    const ms_q8_act *x = J->x;
    const ms_dtype dt = J->w->dtype;
    if (dt == MS_DTYPE_Q4_K) {
        ref_q4k_range(arg, j0, j1);
        return;
    }
    const term_kind kind = kind_of(dt);
    const int64_t g = ms_q8_groups(x->k), nb = x->k / QK, n = x->n;
    for (int64_t j = j0; j < j1; j++) {
        int64_t r;
        const uint8_t *wr = job_wrow(J, j, &r);
        for (int64_t i0 = 0; i0 < n; i0 += TILE) {
            const int nt = (int)(n - i0 < TILE ? n - i0 : TILE);
            float acc[TILE][GROUP];
            memset(acc, 0, sizeof(acc));
            for (int64_t b = 0; b < nb; b++) {
                wblk wb;
                decode_block(dt, wr, b, &wb);
                for (int t = 0; t < nt; t++) {
                    const int64_t xi = (i0 + t) * g * GROUP + b; /* index into d, s */
                    const int8_t *xg = x->q + (size_t)((i0 + t) * g + b / GROUP) * GROUP_Q;
                    acc[t][b % GROUP] += block_term(kind, &wb, xg, (int)(b % GROUP), x->d[xi], x->s[xi]);
                }
            }
            for (int t = 0; t < nt; t++) {
                float v = lanes_reduce(acc[t]);
                if (J->b) v += J->b[r];
                J->y[(i0 + t) * J->ldy + j] = v;
            }
        }
    }
}

void ms_qd_ref_range(void *arg, int64_t j0, int64_t j1) { ref_range(arg, j0, j1); }

void ms_qd_ref_check(ms_dtype dt) { (void)kind_of(dt); }
