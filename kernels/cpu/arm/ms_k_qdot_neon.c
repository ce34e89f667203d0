/* ms_k_qdot_neon.c — the quantized matmul on ARM NEON (the contract and the
 * exact arithmetic: ms_qdot.h; the twin: ms_k_qdot_ref.c; the x86 example
 * this follows: x86/ms_k_qdot_avx512.c).
 *
 * Three levels (ms_isa.h), each a row set of the kernel table
 * (ms_qd_fill_neon), differing only in how the exact integer sums are made:
 *   neon     SMULL/SMLAL into int16 lanes (at most four products a lane,
 *            bounded where used), then pairwise widening adds;
 *   dotprod  SDOT (vdotq_s32, vdotq_laneq_s32);
 *   i8mm     SMMLA (vmmlaq_s32: a 2x8 by 8x2 int8 product, 2 x rows × 2
 *            weight rows an instruction, no horizontal sums) for products
 *            of 2 or more x rows; one row (decode) and an odd last row take
 *            SDOT.
 * The paths, the same at every level:
 *   - Q8_0, Q5_0, Q6_K, Q4_K over weight rows in place (`range`, also
 *     ms_qdot_linear_rows): a weight row's blocks are unpacked four at a
 *     time to the twin's signed integers (q − offset) and applied to up to
 *     QN_RT x rows; per x row the four block sums come out of two rounds of
 *     pairwise adds, one f32 vector of four terms goes into the accumulators
 *     of lanes b mod 16. Q4_K forms I_S and M_S (ms_qdot.h) from its eight
 *     sub-block sums. i8mm: Q8_0 and Q5_0 take two weight rows at a time.
 *   - Q4_K and Q6_K over the tile layout of ms_qdot_pack (`tile`): 4 weight
 *     rows of a tile of 16 in the lanes of a vector (a 64-byte slot is four
 *     vectors), every x row against the same unpacked words (QN_KT at a
 *     time), so a sub-block's 4 row sums need no horizontal add.
 *   - the activation quantizer's twins (qn_quant_block, qn_quant_super): the
 *     same IEEE operations per element (a division, the 1.5·2^23 add and
 *     subtract, the clamp), so the same bytes.
 * Integer sums are exact, and every f32 step is the twin's IEEE operation in
 * the twin's order (the 16 lane accumulators of ms_qdot.h, the twin's tree;
 * Q4_K's two accumulators): the same bits at every level, for any n and
 * thread split. No fused multiply-add: ISO C mode (-std=c11) makes GCC's
 * default -ffp-contract=off, and ms_k_qdot_int.h tells clang.
 *
 * GCC compiles the levels above plain NEON under a target pragma (below),
 * so the file builds with the default -march=armv8-a and the CPU's level is
 * picked at run time. clang (14 here) declares the SDOT / SMMLA intrinsics
 * only where the command line targets them: its build has the levels the
 * -march names (the neon level alone by default).
 *
 * Speed: written for correctness; never timed on ARM hardware (tools/
 * test-arm.sh runs the tests under qemu, which says nothing about speed).
 *
 * The kernels of each level are one body compiled three times: this file
 * includes itself with QN_PASS = 1 (neon), 2 (dotprod), 3 (i8mm), names
 * suffixed by QN(). */
#ifndef QN_PASS
#include "ms_k_qdot_int.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#if defined(__clang__) /* the levels the whole translation unit targets */
#if defined(__ARM_FEATURE_DOTPROD)
#define QN_HAVE_DOT 1
#else
#define QN_HAVE_DOT 0
#endif
#if defined(__ARM_FEATURE_DOTPROD) && defined(__ARM_FEATURE_MATMUL_INT8)
#define QN_HAVE_MM 1
#else
#define QN_HAVE_MM 0
#endif
#elif defined(__GNUC__)
#define QN_HAVE_DOT (__GNUC__ >= 8)
#define QN_HAVE_MM (__GNUC__ >= 10)
#else
#define QN_HAVE_DOT 0
#define QN_HAVE_MM 0
#endif

#define QN_INLINE static inline __attribute__((always_inline))

/* ---- the activation quantizer ------------------------------------------------ */

/* q8_round on 4 lanes: nearest-even(x/step) by the 1.5·2^23 add, clamped to ±127. */
QN_INLINE int32x4_t qn_round4(float32x4_t x, float32x4_t step) {
    const float32x4_t magic = vdupq_n_f32(12582912.0f);
    float32x4_t v = vdivq_f32(x, step);
    v = vsubq_f32(vaddq_f32(v, magic), magic);
    const int32x4_t q = vcvtq_s32_f32(v); /* v is a whole number: truncation is exact */
    return vmaxq_s32(vminq_s32(q, vdupq_n_s32(127)), vdupq_n_s32(-127));
}

/* max|x| over 32 elements; *finite &= all of them finite (|x| < inf is false
 * for NaN). Only used where finite: then the order of the maxima is free. */
QN_INLINE float qn_amax32(const float *x, bool *finite) {
    const float32x4_t inf = vdupq_n_f32(INFINITY);
    float32x4_t m = vdupq_n_f32(0.0f);
    uint32x4_t ok = vdupq_n_u32(~0u);
    for (int i = 0; i < 8; i++) {
        const float32x4_t a = vabsq_f32(vld1q_f32(x + 4 * i));
        ok = vandq_u32(ok, vcltq_f32(a, inf));
        m = vmaxq_f32(m, a);
    }
    *finite = *finite && vminvq_u32(ok) != 0;
    return vmaxvq_f32(m);
}

/* 32 elements at step (zeros when !ok) to int8 at q; returns Σq. */
QN_INLINE int32_t qn_put32(const float *x, float step, bool ok, int8_t *q) {
    int32x4_t v[8];
    for (int i = 0; i < 8; i++) v[i] = ok ? qn_round4(vld1q_f32(x + 4 * i), vdupq_n_f32(step)) : vdupq_n_s32(0);
    int32x4_t sum = vdupq_n_s32(0);
    for (int i = 0; i < 8; i++) sum = vaddq_s32(sum, v[i]);
    for (int h = 0; h < 2; h++) {
        const int16x8_t a = vcombine_s16(vmovn_s32(v[4 * h]), vmovn_s32(v[4 * h + 1]));
        const int16x8_t b = vcombine_s16(vmovn_s32(v[4 * h + 2]), vmovn_s32(v[4 * h + 3]));
        vst1q_s8(q + 16 * h, vcombine_s8(vmovn_s16(a), vmovn_s16(b)));
    }
    return vaddvq_s32(sum);
}

/* quantize_block's and quantize_super's contracts (ms_k_qdot_ref.c) */
QD_QUANT_FNS(, qn_quant_block, qn_quant_super, qn_amax32, qn_put32)

/* ---- what every level's kernels share ---- */

/* 1 << (i % 8): a test against it spreads two bytes of bits over 16 byte
 * masks (Q5_0's fifth bits). */
static const uint8_t k_bit8[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};

/* Four consecutive blocks b0 .. b0 + 3 of a weight row: w[i] block b0 + i,
 * a their f32 multipliers (d), sc0/sc1 Q6_K's half scales. Blocks past the
 * row's end (nv < 4) are zeros with a = 0: with x's padding (d = 0) their
 * term is (0·0)·0 = +0, which leaves an accumulator as it is (one that starts
 * at +0 never holds −0). */
typedef struct {
    int8x16_t w[4][2];
    float32x4_t a;
    int32x4_t sc0, sc1;
} qn_chunk;

/* ---- the kernels of each level ------------------------------------------------ */

enum {
    QN_RT = 4, /* x rows an unpack, rows in place */
    QN_KT = 4, /* x rows an unpack, tile layout */
    QN_PT = 4, /* x row pairs an unpack, i8mm rows in place */
    QN_KQ4_WORDS = 36,
    QN_KQ6_WORDS = 53
};

#define QN_PASS 1
#define QN(name) name##_neon
#include "ms_k_qdot_neon.c"
#undef QN
#undef QN_PASS

/* The dotprod and i8mm passes' target flags (GCC; clang: the command line's,
 * above). Where the command line enables a feature already, nothing; else a
 * pragma adds it. GCC 12's arm_neon.h declares vdotq_* for "arch=armv8.2-a+
 * dotprod" and vmmlaq_s32 for "arch=armv8.2-a+i8mm" and inlines them only
 * into functions whose flags include those: so "arch=armv8.2-a+..." over a
 * command line below that (the default -march=armv8-a), "+i8mm" on top of
 * one with dotprod (an ARMv8.2 feature). */
#if QN_HAVE_DOT
#if !defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
#define QN_DOT_PRAGMA 1
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif
#define QN_PASS 2
#define QN(name) name##_dot
#include "ms_k_qdot_neon.c"
#undef QN
#undef QN_PASS
#ifdef QN_DOT_PRAGMA
#pragma GCC pop_options
#endif
#endif

#if QN_HAVE_MM
#if !defined(__clang__) && !(defined(__ARM_FEATURE_MATMUL_INT8) && defined(__ARM_FEATURE_DOTPROD))
#define QN_MM_PRAGMA 1
#pragma GCC push_options
#if defined(__ARM_FEATURE_DOTPROD)
#pragma GCC target("+i8mm")
#else
#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#endif
#endif
#define QN_PASS 3
#define QN(name) name##_mm
#include "ms_k_qdot_neon.c"
#undef QN
#undef QN_PASS
#ifdef QN_MM_PRAGMA
#pragma GCC pop_options
#endif
#endif

void ms_qd_fill_neon(qd_kernels *k, ms_isa level) {
    if (!ms_isa_includes(level, MS_ISA_NEON)) return;
    qd_paths *q8 = &k->t[MS_DTYPE_Q8_0], *q5 = &k->t[MS_DTYPE_Q5_0], *q6 = &k->t[MS_DTYPE_Q6_K],
             *q4 = &k->t[MS_DTYPE_Q4_K];
    k->quant_block = qn_quant_block;
    k->quant_super = qn_quant_super;
    q8->range = range_q8_0_neon;
    q5->range = range_q5_0_neon;
    q6->range = range_q6_k_neon;
    q4->range = range_q4_k_neon;
    q6->tile = tile_q6_k_neon;
    q4->tile = tile_q4_k_neon;
    const char *path = "neon";
#if QN_HAVE_DOT
    if (ms_isa_includes(level, MS_ISA_DOTPROD)) {
        q8->range = range_q8_0_dot;
        q5->range = range_q5_0_dot;
        q6->range = range_q6_k_dot;
        q4->range = range_q4_k_dot;
        q6->tile = tile_q6_k_dot;
        q4->tile = tile_q4_k_dot;
        path = "neon-dotprod";
    }
#endif
#if QN_HAVE_MM
    if (ms_isa_includes(level, MS_ISA_I8MM)) { /* Q6_K and Q4_K in place: dotprod's */
        q8->range = range_q8_0_mm;
        q5->range = range_q5_0_mm;
        q6->tile = tile_q6_k_mm;
        q4->tile = tile_q4_k_mm;
        path = "neon-i8mm";
    }
#endif
    q8->path = q5->path = q6->path = q4->path = path;
}

#else
void ms_qd_fill_neon(qd_kernels *k, ms_isa level) {
    (void)k;
    (void)level;
}
#endif /* __aarch64__ */

#else /* QN_PASS: the kernels of one level (1 neon, 2 dotprod, 3 i8mm) ------------- */

/* ---- helpers ----
 *
 * Each level has its own copy, compiled with its own target flags: GCC
 * inlines an always_inline function only into one whose flags include the
 * callee's, and a copy made for the command line's -march (say, +crypto)
 * would not fit a level's "arch=armv8.2-a+dotprod". */

/* [Σ a, Σ b, Σ c, Σ d] of four vectors (exact int32 adds). */
QN_INLINE int32x4_t QN(qn_sum4)(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

/* lanes_reduce on 16 lanes held as 4 vectors (lanes 0-3, 4-7, 8-11, 12-15):
 * (l, l+8), then (l, l+4), then (0+2) + (1+3) — the twin's tree. */
QN_INLINE float QN(qn_lanes_reduce)(const float32x4_t a[4]) {
    const float32x4_t s4 = vaddq_f32(vaddq_f32(a[0], a[2]), vaddq_f32(a[1], a[3]));
    const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4)); /* [s4_0 + s4_2, s4_1 + s4_3] */
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

/* The same tree lane-wise over 16 accumulator vectors a[l] (lane = one output). */
QN_INLINE float32x4_t QN(qn_tree16)(const float32x4_t a[GROUP]) {
    float32x4_t s8[8], s4[4];
    for (int l = 0; l < 8; l++) s8[l] = vaddq_f32(a[l], a[l + 8]);
    for (int l = 0; l < 4; l++) s4[l] = vaddq_f32(s8[l], s8[l + 4]);
    return vaddq_f32(vaddq_f32(s4[0], s4[2]), vaddq_f32(s4[1], s4[3]));
}

QN_INLINE float32x4_t QN(qn_f16x4)(uint16x4_t h) { return vcvt_f32_f16(vreinterpret_f16_u16(h)); }

/* Four lanes (rows j0 + 4·rq ..) of a tile's outputs into y row yr: + bias
 * where the product has one, only the lanes below mt (the tile's real rows). */
QN_INLINE void QN(qn_store4)(const qd_job *J, float32x4_t v, int64_t j0, int mt, int rq, float *yr) {
    const int base = 4 * rq, nl = mt - base < 4 ? mt - base : 4;
    if (nl <= 0) return;
    float o[4];
    if (J->b) {
        float bb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int l = 0; l < nl; l++) bb[l] = J->b[j0 + base + l];
        v = vaddq_f32(v, vld1q_f32(bb));
    }
    vst1q_f32(o, v);
    for (int l = 0; l < nl; l++) yr[j0 + base + l] = o[l];
}

/* ---- weight blocks, rows in place -------------------------------------------------
 *
 * A block as the twin's signed integers: w[0] = elements 0-15, w[1] = 16-31. */

/* Q8_0 {f16 d; i8 qs[32]}: q as stored. */
QN_INLINE void QN(qn_block_q8_0)(const uint8_t *p, int8x16_t w[2]) {
    w[0] = vld1q_s8((const int8_t *)p + 2);
    w[1] = vld1q_s8((const int8_t *)p + 18);
}

/* Q5_0's 16 elements from their nibbles and fifth bits (bit e of bits16 for
 * element e): q − 16. The bits become bytes by a test against 1, 2, ..., 128. */
QN_INLINE int8x16_t QN(qn_q5_half)(uint8x16_t nib, uint32_t bits16) {
    const uint8x16_t hb = vcombine_u8(vdup_n_u8((uint8_t)bits16), vdup_n_u8((uint8_t)(bits16 >> 8)));
    const uint8x16_t five = vandq_u8(vtstq_u8(hb, vld1q_u8(k_bit8)), vdupq_n_u8(0x10));
    return vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(nib, five), vdupq_n_u8(16)));
}

/* Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}: element e = nibble (qs[e] low for e < 16,
 * qs[e − 16] high above) | bit e of qh << 4, minus 16. */
QN_INLINE void QN(qn_block_q5_0)(const uint8_t *p, int8x16_t w[2]) {
    const uint32_t qh = ld_u32(p + 2);
    const uint8x16_t qs = vld1q_u8(p + 6);
    w[0] = QN(qn_q5_half)(vandq_u8(qs, vdupq_n_u8(0x0F)), qh & 0xFFFFu);
    w[1] = QN(qn_q5_half)(vshrq_n_u8(qs, 4), qh >> 16);
}

/* Q8_0 or Q5_0 blocks b0 .. b0 + 3 of a weight row into C (qn_chunk; nv of
 * them in the row). */
QN_INLINE void QN(qn_chunk_05_08)(const uint8_t *wr, int64_t b0, int nv, ms_dtype DT, qn_chunk *C) {
    const size_t bb = DT == MS_DTYPE_Q8_0 ? 34 : 22;
    uint16_t h[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        if (i >= nv) {
            C->w[i][0] = C->w[i][1] = vdupq_n_s8(0);
            continue;
        }
        const uint8_t *p = wr + (size_t)(b0 + i) * bb;
        h[i] = ld_u16(p);
        if (DT == MS_DTYPE_Q8_0) QN(qn_block_q8_0)(p, C->w[i]);
        else QN(qn_block_q5_0)(p, C->w[i]);
    }
    C->a = QN(qn_f16x4)(vld1_u16(h));
}

/* Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}, blocks b0 .. b0 + 3
 * (b0 a multiple of 4: half h = (b0 % 8) / 4 of super-block b0 / 8): block
 * c's element l = nibble c/2 of ql[64h + 32(c % 2) + l] | bits 2c of
 * qh[32h + l] << 4, minus 32; its scales scales[8h + 2c], [8h + 2c + 1]. */
QN_INLINE void QN(qn_chunk_q6_k)(const uint8_t *wr, int64_t b0, qn_chunk *C) {
    const uint8_t *p = wr + (size_t)(b0 / 8) * 210;
    const int h = (int)(b0 % 8) / 4;
    const uint8_t *ql = p + 64 * h, *qh = p + 128 + 32 * h;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30), k32 = vdupq_n_u8(32);
    for (int e = 0; e < 2; e++) {
        const uint8x16_t l0 = vld1q_u8(ql + 16 * e), l1 = vld1q_u8(ql + 32 + 16 * e), hh = vld1q_u8(qh + 16 * e);
        for (int c = 0; c < 4; c++) {
            const uint8x16_t l = c % 2 ? l1 : l0;
            const uint8x16_t nib = c / 2 ? vshrq_n_u8(l, 4) : vandq_u8(l, m4);
            const uint8x16_t top = vandq_u8(vshlq_u8(hh, vdupq_n_s8((int8_t)(4 - 2 * c))), m30);
            C->w[c][e] = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(nib, top), k32));
        }
    }
    C->a = QN(qn_f16x4)(vdup_n_u16(ld_u16(p + 208)));
    const int16x8_t s = vmovl_s8(vld1_s8((const int8_t *)p + 192 + 8 * h));
    C->sc0 = vmovl_s16(vget_low_s16(vuzp1q_s16(s, s))); /* scales 8h + 0, 2, 4, 6 */
    C->sc1 = vmovl_s16(vget_low_s16(vuzp2q_s16(s, s))); /* 8h + 1, 3, 5, 7 */
}

/* Q4_K's eight 6-bit sub-block scales and mins from scales[12]
 * (kq_scale_min of the twin): sc[0] = sub-blocks 0-3, sc[1] = 4-7. */
QN_INLINE void QN(qn_q4k_scales)(const uint8_t *s12, int32x4_t sc[2], int32x4_t mn[2]) {
    int32_t a[8], m[8];
    for (int s = 0; s < 8; s++) kq_scale_min(s12, s, &a[s], &m[s]);
    sc[0] = vld1q_s32(a), sc[1] = vld1q_s32(a + 4);
    mn[0] = vld1q_s32(m), mn[1] = vld1q_s32(m + 4);
}

/* ---- the tile layout ------------------------------------------------------------
 *
 * A 64-byte slot of a tile holds one 32-bit word of each of its 16 weight
 * rows (row j at 4j): vector rq of a slot (16 bytes at 16·rq) is rows
 * 4rq .. 4rq + 3. */

/* Q4_K sub-block s's 6-bit scale (mn = 0) or min (mn = 1) of 4 rows, from
 * their scale words u0, u1, u2 (bytes 4-7, 8-11, 12-15 of the super-block):
 * kq_scale_min lane-wise (variable shifts: a negative count shifts right). */
QN_INLINE int32x4_t QN(qn_kq4_scale)(uint32x4_t u0, uint32x4_t u1, uint32x4_t u2, int s, int mn) {
    const uint32x4_t a = mn ? u1 : u0;
    if (s < 4) return vreinterpretq_s32_u32(vandq_u32(vshlq_u32(a, vdupq_n_s32(-8 * s)), vdupq_n_u32(63)));
    const int t = 8 * (s - 4);
    const uint32x4_t lo = vandq_u32(vshlq_u32(u2, vdupq_n_s32(-(t + 4 * mn))), vdupq_n_u32(15));
    const uint32x4_t hi = vandq_u32(vshlq_u32(a, vdupq_n_s32(-(t + 6))), vdupq_n_u32(3));
    return vreinterpretq_s32_u32(vorrq_u32(lo, vshlq_n_u32(hi, 4)));
}

/* Q6_K's int8 scale s (0..15) of 4 rows from their scale words sw[4] (byte
 * s % 4 of word s / 4), as int32. */
QN_INLINE int32x4_t QN(qn_kq6_scale)(const int32x4_t sw[4], int s) {
    return vshrq_n_s32(vshlq_s32(sw[s / 4], vdupq_n_s32(24 - 8 * (s % 4))), 24);
}

/* Q6_K block (h, c) of 4 rows, unsigned q (0..63): W[q] (q = 0..7) lane r =
 * row r's elements 4q .. 4q + 3, from ql words 16h + 8(c % 2) + q (nibble
 * c / 2) and qh words 32 + 8h + q (bits 2c). u: the super-block's 53 slots. */
QN_INLINE void QN(qn_kq6_unpack)(const uint8_t *u, int rq, int h, int c, int8x16_t W[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    const int8x16_t sh = vdupq_n_s8((int8_t)(4 - 2 * c));
    for (int q = 0; q < 8; q++) {
        const uint8x16_t l = vld1q_u8(u + 64 * (16 * h + 8 * (c % 2) + q) + 16 * rq);
        const uint8x16_t hh = vld1q_u8(u + 64 * (32 + 8 * h + q) + 16 * rq);
        const uint8x16_t nib = c / 2 ? vshrq_n_u8(l, 4) : vandq_u8(l, m4);
        W[q] = vreinterpretq_s8_u8(vorrq_u8(nib, vandq_u8(vshlq_u8(hh, sh), m30)));
    }
}

/* ---- integer sums ---- */

/* Σ of the lanes = Σ_e w_e·x_e over 16 elements. neon: two products an
 * int16 lane, |w| ≤ 128, |x| ≤ 127: ≤ 32512. */
QN_INLINE int32x4_t QN(dot16)(int8x16_t w, int8x16_t x) {
#if QN_PASS == 1
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x));
#else
    return vdotq_s32(vdupq_n_s32(0), w, x);
#endif
}

/* The same over 32 elements (w0 · x0 + w1 · x1). */
QN_INLINE int32x4_t QN(dot32)(int8x16_t w0, int8x16_t x0, int8x16_t w1, int8x16_t x1) {
#if QN_PASS == 1
    return vpadalq_s16(QN(dot16)(w0, x0), vmlal_high_s8(vmull_s8(vget_low_s8(w1), vget_low_s8(x1)), w1, x1));
#else
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
#endif
}

/* 4 weight rows over 16 elements: W[q] lane r = row r's elements 4q .. 4q+3
 * (unsigned ≤ 63: Q4_K, Q6_K), x the 16 x elements; lane r of acc +=
 * Σ_q Σ_i W[q]_{4r+i} · x_{4q+i}. neon: x's quad q broadcast, four products
 * an int16 lane (≤ 4·63·127 = 32004), rows 0-1 in lo, 2-3 in hi. */
QN_INLINE int32x4_t QN(rows4)(int32x4_t acc, const int8x16_t W[4], int8x16_t x) {
#if QN_PASS == 1
    const int32x4_t x32 = vreinterpretq_s32_s8(x);
    const int8x16_t x0 = vreinterpretq_s8_s32(vdupq_laneq_s32(x32, 0));
    const int8x16_t x1 = vreinterpretq_s8_s32(vdupq_laneq_s32(x32, 1));
    const int8x16_t x2 = vreinterpretq_s8_s32(vdupq_laneq_s32(x32, 2));
    const int8x16_t x3 = vreinterpretq_s8_s32(vdupq_laneq_s32(x32, 3));
    int16x8_t lo = vmull_s8(vget_low_s8(W[0]), vget_low_s8(x0)), hi = vmull_high_s8(W[0], x0);
    lo = vmlal_s8(lo, vget_low_s8(W[1]), vget_low_s8(x1)), hi = vmlal_high_s8(hi, W[1], x1);
    lo = vmlal_s8(lo, vget_low_s8(W[2]), vget_low_s8(x2)), hi = vmlal_high_s8(hi, W[2], x2);
    lo = vmlal_s8(lo, vget_low_s8(W[3]), vget_low_s8(x3)), hi = vmlal_high_s8(hi, W[3], x3);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
#else
    acc = vdotq_laneq_s32(acc, W[0], x, 0);
    acc = vdotq_laneq_s32(acc, W[1], x, 1);
    acc = vdotq_laneq_s32(acc, W[2], x, 2);
    return vdotq_laneq_s32(acc, W[3], x, 3);
#endif
}

#if QN_PASS == 3
/* i8mm: the 8-element halves of two x rows' 16 bytes, as SMMLA's A operand:
 * [row t elements 0-7 | row u 0-7] (lo) and [t 8-15 | u 8-15] (hi). */
QN_INLINE int8x16_t qn_zlo(int8x16_t t, int8x16_t u) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(t), vreinterpretq_s64_s8(u)));
}
QN_INLINE int8x16_t qn_zhi(int8x16_t t, int8x16_t u) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(t), vreinterpretq_s64_s8(u)));
}

/* Tile words q, q + 1 of 4 rows (lane r = row r's 4 bytes) as SMMLA's B
 * operands: rows 0, 1 (*b01) and rows 2, 3 (*b23), 8 elements each. */
QN_INLINE void qn_zw(int8x16_t wq, int8x16_t wq1, int8x16_t *b01, int8x16_t *b23) {
    *b01 = vreinterpretq_s8_s32(vzip1q_s32(vreinterpretq_s32_s8(wq), vreinterpretq_s32_s8(wq1)));
    *b23 = vreinterpretq_s8_s32(vzip2q_s32(vreinterpretq_s32_s8(wq), vreinterpretq_s32_s8(wq1)));
}

/* SMMLA results [t·r0, t·r1, u·r0, u·r1] and [t·r2, t·r3, u·r2, u·r3] as
 * x row t's and u's 4-row vectors. */
QN_INLINE void qn_unzip_rows(int32x4_t c01, int32x4_t c23, int32x4_t *st, int32x4_t *su) {
    *st = vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(c01), vreinterpretq_s64_s32(c23)));
    *su = vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(c01), vreinterpretq_s64_s32(c23)));
}
#endif

/* ---- rows in place: Q8_0, Q5_0, Q6_K ---- */

/* NT x rows from i0 against weight row wr (output column j), four blocks at
 * a time: per x row the four block sums (exact), then term = (a·dx)·sumi
 * into the accumulators of lanes b0 % 16 .. + 3 — the twin's block_term and
 * order. */
QN_INLINE void QN(row_pass)(const qd_job *J, const uint8_t *wr, float bias, int64_t j, int64_t i0, int NT,
                            ms_dtype DT) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), nb = x->k / QK;
    float32x4_t acc[QN_RT][4];
    for (int t = 0; t < NT; t++)
        for (int l = 0; l < 4; l++) acc[t][l] = vdupq_n_f32(0.0f);
    for (int64_t b0 = 0; b0 < nb; b0 += 4) {
        const int nv = (int)(nb - b0 < 4 ? nb - b0 : 4);
        qn_chunk C;
        if (DT == MS_DTYPE_Q6_K) QN(qn_chunk_q6_k)(wr, b0, &C);
        else QN(qn_chunk_05_08)(wr, b0, nv, DT, &C);
        for (int t = 0; t < NT; t++) {
            const int64_t xr = (i0 + t) * g; /* x row i0 + t's first group */
            /* 128 bytes from block b0: within the row's groups (x padded with zeros) */
            const int8_t *xq = x->qp + (size_t)xr * GROUP_Q + (size_t)b0 * QK;
            int32x4_t sumi;
            if (DT == MS_DTYPE_Q6_K) { /* sc₀·Σ(e<16) + sc₁·Σ(e≥16), exact */
                int32x4_t lo[4], hi[4];
                for (int i = 0; i < 4; i++) {
                    lo[i] = QN(dot16)(C.w[i][0], vld1q_s8(xq + QK * i));
                    hi[i] = QN(dot16)(C.w[i][1], vld1q_s8(xq + QK * i + 16));
                }
                sumi = vmlaq_s32(vmulq_s32(C.sc0, QN(qn_sum4)(lo[0], lo[1], lo[2], lo[3])), C.sc1,
                                 QN(qn_sum4)(hi[0], hi[1], hi[2], hi[3]));
            } else {
                int32x4_t s[4];
                for (int i = 0; i < 4; i++)
                    s[i] = QN(dot32)(C.w[i][0], vld1q_s8(xq + QK * i), C.w[i][1], vld1q_s8(xq + QK * i + 16));
                sumi = QN(qn_sum4)(s[0], s[1], s[2], s[3]);
            }
            const float32x4_t dx = vld1q_f32(x->d + xr * GROUP + b0);
            const float32x4_t term = vmulq_f32(vmulq_f32(C.a, dx), vcvtq_f32_s32(sumi));
            float32x4_t *a = &acc[t][(b0 % GROUP) / 4];
            *a = vaddq_f32(*a, term);
        }
    }
    for (int t = 0; t < NT; t++) {
        float v = QN(qn_lanes_reduce)(acc[t]);
        if (J->b) v += bias;
        J->y[(i0 + t) * J->ldy + j] = v;
    }
}

/* ---- rows in place: Q4_K (its per-super-block definition, ms_qdot.h) ---- */

/* NT x rows from i0 against weight row wr: per super-block S the eight
 * sub-block sums Σ q·qk (exact), I_S = Σ (sc_s·sum_s) << e_s and M_S = Σ
 * mn_s·sk_s (int32, exact), then the twin's t_S into acc[S % 2]. */
QN_INLINE void QN(row_pass_q4k)(const qd_job *J, const uint8_t *wr, float bias, int64_t j, int64_t i0, int NT) {
    const ms_q8_act *x = J->x;
    MS_ASSERT(x->has_k);
    const int64_t g = ms_q8_groups(x->k), ns = x->k / QK_K;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float acc[QN_RT][2];
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = 0.0f;
    for (int64_t S = 0; S < ns; S++) {
        const uint8_t *p = wr + (size_t)S * 144;
        const float d = ld_f16(p), dmin = ld_f16(p + 2);
        int32x4_t sc[2], mn[2];
        QN(qn_q4k_scales)(p + 4, sc, mn);
        /* qs[32P + l]: sub-block 2P in the low nibbles, 2P + 1 in the high */
        int8x16_t W[8][2];
        for (int P = 0; P < 4; P++)
            for (int e = 0; e < 2; e++) {
                const uint8x16_t v = vld1q_u8(p + 16 + 32 * P + 16 * e);
                W[2 * P][e] = vreinterpretq_s8_u8(vandq_u8(v, m4));
                W[2 * P + 1][e] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
            }
        for (int t = 0; t < NT; t++) {
            const int64_t xr = i0 + t, xb = xr * g * GROUP + 8 * S;
            const int8_t *xq = x->qk + (size_t)(xr * g) * GROUP_Q + (size_t)(QK_K * S);
            int32x4_t s[8];
            for (int sb = 0; sb < 8; sb++)
                s[sb] = QN(dot32)(W[sb][0], vld1q_s8(xq + QK * sb), W[sb][1], vld1q_s8(xq + QK * sb + 16));
            const int32x4_t s03 = QN(qn_sum4)(s[0], s[1], s[2], s[3]), s47 = QN(qn_sum4)(s[4], s[5], s[6], s[7]);
            const int32x4_t I4 = vaddq_s32(vshlq_s32(vmulq_s32(s03, sc[0]), vld1q_s32(x->ek + xb)),
                                           vshlq_s32(vmulq_s32(s47, sc[1]), vld1q_s32(x->ek + xb + 4)));
            const int32x4_t M4 = vmlaq_s32(vmulq_s32(mn[0], vld1q_s32(x->sk + xb)), mn[1], vld1q_s32(x->sk + xb + 4));
            const int32_t I = vaddvq_s32(I4), M = vaddvq_s32(M4);
            const float dy = x->uk[xr * g * 2 + S];
            const float tS = (d * dy) * (float)I - (dmin * dy) * (float)M;
            acc[t][S % 2] += tS;
        }
    }
    for (int t = 0; t < NT; t++) {
        float v = acc[t][0] + acc[t][1];
        if (J->b) v += bias;
        J->y[(i0 + t) * J->ldy + j] = v;
    }
}

/* Columns [j0, j1) against every x row, QN_RT x rows an unpack (a switch, so
 * each count is compiled with its own constant). */
QN_INLINE void QN(rows_range)(void *arg, int64_t j0, int64_t j1, ms_dtype DT) {
    const qd_job *J = arg;
    const int64_t n = J->x->n;
    for (int64_t j = j0; j < j1; j++) {
        int64_t r;
        const uint8_t *wr = job_wrow(J, j, &r);
        const float bias = J->b ? J->b[r] : 0.0f;
        for (int64_t i0 = 0; i0 < n; i0 += QN_RT) {
            const int nt = (int)(n - i0 < QN_RT ? n - i0 : QN_RT);
            if (DT == MS_DTYPE_Q4_K) {
                switch (nt) {
                case 1: QN(row_pass_q4k)(J, wr, bias, j, i0, 1); break;
                case 2: QN(row_pass_q4k)(J, wr, bias, j, i0, 2); break;
                case 3: QN(row_pass_q4k)(J, wr, bias, j, i0, 3); break;
                default: QN(row_pass_q4k)(J, wr, bias, j, i0, 4); break;
                }
                continue;
            }
            switch (nt) {
            case 1: QN(row_pass)(J, wr, bias, j, i0, 1, DT); break;
            case 2: QN(row_pass)(J, wr, bias, j, i0, 2, DT); break;
            case 3: QN(row_pass)(J, wr, bias, j, i0, 3, DT); break;
            default: QN(row_pass)(J, wr, bias, j, i0, 4, DT); break;
            }
        }
    }
}

#if QN_PASS == 3
/* ---- i8mm, rows in place: Q8_0, Q5_0, two weight rows at a time ----
 *
 * Block b of weight rows w0, w1 against x row pairs (t, u): four SMMLA over
 * its 8-element quarters give [t·w0, t·w1, u·w0, u·w1], each an exact block
 * sum, so one f32 vector holds four outputs' terms (a·dx)·sumi; accumulator
 * l of pair p is acc[p][l], per lane the twin's order and tree. */
QN_INLINE void QN(mm_pass)(const qd_job *J, const uint8_t *wr0, const uint8_t *wr1, const float bias[2], int64_t j,
                           int64_t i0, int NP, ms_dtype DT) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), nb = x->k / QK;
    const size_t bb = DT == MS_DTYPE_Q8_0 ? 34 : 22;
    float32x4_t acc[QN_PT][GROUP];
    for (int p = 0; p < NP; p++)
        for (int l = 0; l < GROUP; l++) acc[p][l] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p0 = wr0 + (size_t)b * bb, *p1 = wr1 + (size_t)b * bb;
        int8x16_t w0[2], w1[2];
        if (DT == MS_DTYPE_Q8_0) QN(qn_block_q8_0)(p0, w0), QN(qn_block_q8_0)(p1, w1);
        else QN(qn_block_q5_0)(p0, w0), QN(qn_block_q5_0)(p1, w1);
        const int8x16_t B[4] = {qn_zlo(w0[0], w1[0]), qn_zhi(w0[0], w1[0]), qn_zlo(w0[1], w1[1]), qn_zhi(w0[1], w1[1])};
        const float a0 = ld_f16(p0), a1 = ld_f16(p1);
        const float av[4] = {a0, a1, a0, a1};
        const float32x4_t a = vld1q_f32(av);
        for (int p = 0; p < NP; p++) {
            const int64_t rt = (i0 + 2 * p) * g, ru = rt + g; /* x rows t, u = t + 1: first groups */
            const int8_t *xt = x->qp + (size_t)rt * GROUP_Q + (size_t)b * QK;
            const int8_t *xu = x->qp + (size_t)ru * GROUP_Q + (size_t)b * QK;
            const int8x16_t t0 = vld1q_s8(xt), t1 = vld1q_s8(xt + 16), u0 = vld1q_s8(xu), u1 = vld1q_s8(xu + 16);
            int32x4_t c = vmmlaq_s32(vdupq_n_s32(0), qn_zlo(t0, u0), B[0]);
            c = vmmlaq_s32(c, qn_zhi(t0, u0), B[1]);
            c = vmmlaq_s32(c, qn_zlo(t1, u1), B[2]);
            c = vmmlaq_s32(c, qn_zhi(t1, u1), B[3]);
            const float dt = x->d[rt * GROUP + b], du = x->d[ru * GROUP + b];
            const float dv[4] = {dt, dt, du, du};
            const float32x4_t term = vmulq_f32(vmulq_f32(a, vld1q_f32(dv)), vcvtq_f32_s32(c));
            acc[p][b % GROUP] = vaddq_f32(acc[p][b % GROUP], term);
        }
    }
    for (int p = 0; p < NP; p++) {
        float o[4];
        float32x4_t v = QN(qn_tree16)(acc[p]);
        if (J->b) {
            const float bv[4] = {bias[0], bias[1], bias[0], bias[1]};
            v = vaddq_f32(v, vld1q_f32(bv));
        }
        vst1q_f32(o, v);
        float *yt = J->y + (i0 + 2 * p) * J->ldy + j, *yu = yt + J->ldy;
        yt[0] = o[0], yt[1] = o[1], yu[0] = o[2], yu[1] = o[3];
    }
}

/* Columns in pairs, x rows in pairs (QN_PT pairs an unpack); one x row
 * (decode), an odd last x row and an odd last column take SDOT. */
QN_INLINE void QN(mm_range)(void *arg, int64_t j0, int64_t j1, ms_dtype DT) {
    const qd_job *J = arg;
    const int64_t n = J->x->n;
    if (n < 2) {
        QN(rows_range)(arg, j0, j1, DT);
        return;
    }
    int64_t j = j0;
    for (; j + 1 < j1; j += 2) {
        int64_t r0, r1;
        const uint8_t *wr0 = job_wrow(J, j, &r0), *wr1 = job_wrow(J, j + 1, &r1);
        const float bias[2] = {J->b ? J->b[r0] : 0.0f, J->b ? J->b[r1] : 0.0f};
        int64_t i0 = 0;
        while (n - i0 >= 2) {
            const int np = (int)((n - i0) / 2 < QN_PT ? (n - i0) / 2 : QN_PT);
            switch (np) {
            case 1: QN(mm_pass)(J, wr0, wr1, bias, j, i0, 1, DT); break;
            case 2: QN(mm_pass)(J, wr0, wr1, bias, j, i0, 2, DT); break;
            case 3: QN(mm_pass)(J, wr0, wr1, bias, j, i0, 3, DT); break;
            default: QN(mm_pass)(J, wr0, wr1, bias, j, i0, 4, DT); break;
            }
            i0 += 2 * np;
        }
        if (i0 < n) {
            QN(row_pass)(J, wr0, bias[0], j, i0, 1, DT);
            QN(row_pass)(J, wr1, bias[1], j + 1, i0, 1, DT);
        }
    }
    if (j < j1) QN(rows_range)(arg, j, j1, DT);
}

static void QN(range_q8_0)(void *arg, int64_t j0, int64_t j1) { QN(mm_range)(arg, j0, j1, MS_DTYPE_Q8_0); }
static void QN(range_q5_0)(void *arg, int64_t j0, int64_t j1) { QN(mm_range)(arg, j0, j1, MS_DTYPE_Q5_0); }
#else
static void QN(range_q8_0)(void *arg, int64_t j0, int64_t j1) { QN(rows_range)(arg, j0, j1, MS_DTYPE_Q8_0); }
static void QN(range_q5_0)(void *arg, int64_t j0, int64_t j1) { QN(rows_range)(arg, j0, j1, MS_DTYPE_Q5_0); }
static void QN(range_q6_k)(void *arg, int64_t j0, int64_t j1) { QN(rows_range)(arg, j0, j1, MS_DTYPE_Q6_K); }
static void QN(range_q4_k)(void *arg, int64_t j0, int64_t j1) { QN(rows_range)(arg, j0, j1, MS_DTYPE_Q4_K); }
#endif

/* ---- tile layout: Q4_K ----
 *
 * Per super-block S and 4-row vector rq of a tile: d, dmin and the scale
 * words of the 4 rows; per sub-block its 8 nibble words, unpacked once for
 * NT x rows; per x row the 4 rows' sub-block sums (exact), I += (sum·sc) <<
 * e, M += mn·sk; at the end of S the twin's t_S into acc[t][S % 2][rq]. */
QN_INLINE void QN(kq4_tile)(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    const ms_q8_act *x = J->x;
    MS_ASSERT(x->has_k);
    const int64_t g = ms_q8_groups(x->k), ns = x->k / QK_K;
    const size_t xs = (size_t)g * GROUP_Q;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc[QN_KT][2][4];
    for (int t = 0; t < NT; t++)
        for (int l = 0; l < 8; l++) acc[t][l / 4][l % 4] = vdupq_n_f32(0.0f);
    for (int64_t S = 0; S < ns; S++) {
        const uint8_t *u = pk + (size_t)S * QN_KQ4_WORDS * 64;
        for (int rq = 0; rq < 4; rq++) {
            const uint32x4_t dd = vld1q_u32((const uint32_t *)(const void *)(u + 16 * rq));
            const float32x4_t d = QN(qn_f16x4)(vmovn_u32(dd)), dmin = QN(qn_f16x4)(vshrn_n_u32(dd, 16));
            const uint32x4_t u0 = vld1q_u32((const uint32_t *)(const void *)(u + 64 + 16 * rq));
            const uint32x4_t u1 = vld1q_u32((const uint32_t *)(const void *)(u + 128 + 16 * rq));
            const uint32x4_t u2 = vld1q_u32((const uint32_t *)(const void *)(u + 192 + 16 * rq));
            int32x4_t I[QN_KT], M[QN_KT];
            for (int t = 0; t < NT; t++) I[t] = M[t] = vdupq_n_s32(0);
            for (int sb = 0; sb < 8; sb++) {
                /* qs word q of sub-block pair sb / 2 is slot 4 + 8(sb / 2) + q; nibble sb % 2 */
                const uint8_t *wq = u + 64 * (4 + 8 * (sb / 2)) + 16 * rq;
                int8x16_t W[8];
                for (int q = 0; q < 8; q++) {
                    const uint8x16_t v = vld1q_u8(wq + 64 * q);
                    W[q] = vreinterpretq_s8_u8(sb % 2 ? vshrq_n_u8(v, 4) : vandq_u8(v, m4));
                }
                const int32x4_t sc = QN(qn_kq4_scale)(u0, u1, u2, sb, 0), mn = QN(qn_kq4_scale)(u0, u1, u2, sb, 1);
                int t = 0;
#if QN_PASS == 3
                int8x16_t B01[4], B23[4];
                for (int P = 0; P < 4; P++) qn_zw(W[2 * P], W[2 * P + 1], &B01[P], &B23[P]);
                for (; t + 1 < NT; t += 2) {
                    const int8_t *xt = x->qk + (size_t)(i0 + t) * xs + (size_t)(QK_K * S + QK * sb), *xu = xt + xs;
                    const int8x16_t t0 = vld1q_s8(xt), t1 = vld1q_s8(xt + 16);
                    const int8x16_t u0x = vld1q_s8(xu), u1x = vld1q_s8(xu + 16);
                    const int8x16_t A[4] = {qn_zlo(t0, u0x), qn_zhi(t0, u0x), qn_zlo(t1, u1x), qn_zhi(t1, u1x)};
                    int32x4_t c01 = vdupq_n_s32(0), c23 = vdupq_n_s32(0), st, su;
                    for (int P = 0; P < 4; P++) {
                        c01 = vmmlaq_s32(c01, A[P], B01[P]);
                        c23 = vmmlaq_s32(c23, A[P], B23[P]);
                    }
                    qn_unzip_rows(c01, c23, &st, &su);
                    for (int h = 0; h < 2; h++) {
                        const int64_t xb = (i0 + t + h) * g * GROUP + 8 * S + sb;
                        I[t + h] = vaddq_s32(I[t + h], vshlq_s32(vmulq_s32(h ? su : st, sc), vdupq_n_s32(x->ek[xb])));
                        M[t + h] = vmlaq_n_s32(M[t + h], mn, x->sk[xb]);
                    }
                }
#endif
                for (; t < NT; t++) {
                    const int8_t *xq = x->qk + (size_t)(i0 + t) * xs + (size_t)(QK_K * S + QK * sb);
                    const int32x4_t s = QN(rows4)(QN(rows4)(vdupq_n_s32(0), W, vld1q_s8(xq)), W + 4, vld1q_s8(xq + 16));
                    const int64_t xb = (i0 + t) * g * GROUP + 8 * S + sb;
                    I[t] = vaddq_s32(I[t], vshlq_s32(vmulq_s32(s, sc), vdupq_n_s32(x->ek[xb])));
                    M[t] = vmlaq_n_s32(M[t], mn, x->sk[xb]);
                }
            }
            for (int t = 0; t < NT; t++) { /* (d·uk)·(float)I − (dmin·uk)·(float)M */
                const float32x4_t dy = vdupq_n_f32(x->uk[(i0 + t) * g * 2 + S]);
                const float32x4_t tS = vsubq_f32(vmulq_f32(vmulq_f32(d, dy), vcvtq_f32_s32(I[t])),
                                                 vmulq_f32(vmulq_f32(dmin, dy), vcvtq_f32_s32(M[t])));
                acc[t][S % 2][rq] = vaddq_f32(acc[t][S % 2][rq], tS);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int rq = 0; rq < 4; rq++)
            QN(qn_store4)(J, vaddq_f32(acc[t][0][rq], acc[t][1][rq]), j0, mt, rq, J->y + (i0 + t) * J->ldy);
}

/* ---- tile layout: Q6_K ----
 *
 * Per super-block S, 4-row vector rq and block (h, c): the 8 words of its
 * unsigned q unpacked once for NT x rows; per x row the two 16-element
 * halves' sums start at −32·(x's half sums) (h6), so they are the twin's
 * exact lo and hi; sumi = sc₀·lo + sc₁·hi (int32, exact), then term =
 * (d·dx)·sumi into accumulator 8(S % 2) + 4h + c of the 4 rows. */
QN_INLINE void QN(kq6_tile)(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), ns = x->k / QK_K;
    const size_t xs = (size_t)g * GROUP_Q;
    float32x4_t acc[QN_KT][GROUP][4];
    for (int t = 0; t < NT; t++)
        for (int l = 0; l < GROUP * 4; l++) acc[t][l / 4][l % 4] = vdupq_n_f32(0.0f);
    for (int64_t S = 0; S < ns; S++) {
        const uint8_t *u = pk + (size_t)S * QN_KQ6_WORDS * 64;
        for (int rq = 0; rq < 4; rq++) {
            /* slot 52 holds bytes 206-209: d in the high half */
            const uint32x4_t w52 = vld1q_u32((const uint32_t *)(const void *)(u + 64 * 52 + 16 * rq));
            const float32x4_t d = QN(qn_f16x4)(vshrn_n_u32(w52, 16));
            int32x4_t sw[4];
            for (int w = 0; w < 4; w++) sw[w] = vld1q_s32((const int32_t *)(const void *)(u + 64 * (48 + w) + 16 * rq));
            for (int jb = 0; jb < 8; jb++) { /* block jb = 4h + c of the super-block */
                int8x16_t W[8];
                QN(qn_kq6_unpack)(u, rq, jb / 4, jb % 4, W);
                const int32x4_t sc0 = QN(qn_kq6_scale)(sw, 2 * jb), sc1 = QN(qn_kq6_scale)(sw, 2 * jb + 1);
                const int lane = (int)(8 * (S % 2)) + jb;
                const int64_t b = 8 * S + jb;
                int32x4_t lo[QN_KT], hi[QN_KT];
                int t = 0;
#if QN_PASS == 3
                int8x16_t B01[4], B23[4];
                for (int P = 0; P < 4; P++) qn_zw(W[2 * P], W[2 * P + 1], &B01[P], &B23[P]);
                for (; t + 1 < NT; t += 2) {
                    const int64_t xt = (i0 + t) * g * GROUP + b, xu = xt + g * GROUP;
                    const int8_t *qt = x->qp + (size_t)(i0 + t) * xs + (size_t)(QK * b), *qu = qt + xs;
                    const int8x16_t t0 = vld1q_s8(qt), t1 = vld1q_s8(qt + 16);
                    const int8x16_t u0 = vld1q_s8(qu), u1 = vld1q_s8(qu + 16);
                    /* start: [h_t, h_t, h_u, h_u], the layout of the SMMLA result */
                    const int32x4_t slo = vcombine_s32(vdup_n_s32(x->h6[2 * xt]), vdup_n_s32(x->h6[2 * xu]));
                    const int32x4_t shi = vcombine_s32(vdup_n_s32(x->h6[2 * xt + 1]), vdup_n_s32(x->h6[2 * xu + 1]));
                    const int8x16_t A0 = qn_zlo(t0, u0), A1 = qn_zhi(t0, u0), A2 = qn_zlo(t1, u1), A3 = qn_zhi(t1, u1);
                    const int32x4_t l01 = vmmlaq_s32(vmmlaq_s32(slo, A0, B01[0]), A1, B01[1]);
                    const int32x4_t l23 = vmmlaq_s32(vmmlaq_s32(slo, A0, B23[0]), A1, B23[1]);
                    const int32x4_t h01 = vmmlaq_s32(vmmlaq_s32(shi, A2, B01[2]), A3, B01[3]);
                    const int32x4_t h23 = vmmlaq_s32(vmmlaq_s32(shi, A2, B23[2]), A3, B23[3]);
                    qn_unzip_rows(l01, l23, &lo[t], &lo[t + 1]);
                    qn_unzip_rows(h01, h23, &hi[t], &hi[t + 1]);
                }
#endif
                for (; t < NT; t++) {
                    const int64_t xb = (i0 + t) * g * GROUP + b;
                    const int8_t *xq = x->qp + (size_t)(i0 + t) * xs + (size_t)(QK * b);
                    lo[t] = QN(rows4)(vdupq_n_s32(x->h6[2 * xb]), W, vld1q_s8(xq));
                    hi[t] = QN(rows4)(vdupq_n_s32(x->h6[2 * xb + 1]), W + 4, vld1q_s8(xq + 16));
                }
                for (t = 0; t < NT; t++) {
                    const int32x4_t sumi = vmlaq_s32(vmulq_s32(sc0, lo[t]), sc1, hi[t]);
                    const float32x4_t dx = vdupq_n_f32(x->d[(i0 + t) * g * GROUP + b]);
                    const float32x4_t term = vmulq_f32(vmulq_f32(d, dx), vcvtq_f32_s32(sumi));
                    acc[t][lane][rq] = vaddq_f32(acc[t][lane][rq], term);
                }
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int rq = 0; rq < 4; rq++) {
            float32x4_t a[GROUP];
            for (int l = 0; l < GROUP; l++) a[l] = acc[t][l][rq];
            QN(qn_store4)(J, QN(qn_tree16)(a), j0, mt, rq, J->y + (i0 + t) * J->ldy);
        }
}

/* Tiles [t0, t1) of 16 weight rows against every x row, QN_KT at a time. */
QN_INLINE void QN(tiles)(void *arg, int64_t t0, int64_t t1, ms_dtype DT) {
    const qd_job *J = arg;
    const ms_qweight *W = J->w;
    const int64_t n = J->x->n;
    const size_t tile_bytes = pack_tile_bytes(W);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t j0 = 16 * t;
        const int mt = (int)(W->m - j0 < 16 ? W->m - j0 : 16);
        const uint8_t *pk = (const uint8_t *)W->tiles + (size_t)t * tile_bytes;
        for (int64_t i0 = 0; i0 < n; i0 += QN_KT) {
            const int nt = (int)(n - i0 < QN_KT ? n - i0 : QN_KT);
            if (DT == MS_DTYPE_Q4_K) {
                switch (nt) {
                case 1: QN(kq4_tile)(J, pk, j0, mt, i0, 1); break;
                case 2: QN(kq4_tile)(J, pk, j0, mt, i0, 2); break;
                case 3: QN(kq4_tile)(J, pk, j0, mt, i0, 3); break;
                default: QN(kq4_tile)(J, pk, j0, mt, i0, 4); break;
                }
            } else {
                switch (nt) {
                case 1: QN(kq6_tile)(J, pk, j0, mt, i0, 1); break;
                case 2: QN(kq6_tile)(J, pk, j0, mt, i0, 2); break;
                case 3: QN(kq6_tile)(J, pk, j0, mt, i0, 3); break;
                default: QN(kq6_tile)(J, pk, j0, mt, i0, 4); break;
                }
            }
        }
    }
}

static void QN(tile_q4_k)(void *arg, int64_t t0, int64_t t1) { QN(tiles)(arg, t0, t1, MS_DTYPE_Q4_K); }
static void QN(tile_q6_k)(void *arg, int64_t t0, int64_t t1) { QN(tiles)(arg, t0, t1, MS_DTYPE_Q6_K); }

#endif /* QN_PASS */
