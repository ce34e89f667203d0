/* ms_k_qdot_avx512.c — the quantized matmul on AVX-512 VNNI and AMX (the
 * contract and the exact arithmetic: ms_qdot.h; the twin: ms_k_qdot_ref.c).
 *
 *   - AVX-512 VNNI (for Q6_K, Q5_0, Q8_0 in place): a group of 16 weight
 *     blocks is unpacked once to unsigned bytes, transposed so lane j holds
 *     block j (the activation layout), and applied to up to 8 x rows: per
 *     row, 8 vpdpbusd give the 16 block sums exactly, then the same f32 term
 *     and the same lane accumulator as the twin. Integer sums are exact, so
 *     only the float steps must match, and they are the same IEEE operations
 *     in the same order (no fused multiply-add: GCC does not contract in ISO
 *     C mode, clang is told in ms_k_qdot_int.h).
 *   - AVX-512 VNNI for Q4_K (its per-super-block definition), Q5_0, Q4_0 and Q6_K
 *     over the tile layout: lane j = weight row j of a tile of 16, every x
 *     row (decode included) — see "Q4_K on VNNI" below;
 *   - AMX for Q4_K at n ≥ AMX_MIN_ROWS_Q4K: its sub-block sums from tile
 *     products over zero-padded A rows, combined exactly in 16-bit lanes
 *     (see "Q4_K on AMX" below);
 *   - AMX (Q8_0 and unpacked Q6_K at n ≥ AMX_MIN_ROWS, packed Q6_K at
 *     n ≥ AMX_MIN_ROWS_Q6K): the block sums from tile products, 16 weight
 *     rows at a time, the same f32 steps vectorised over the 16 weight rows
 *     (see "AMX" below). One row (decode) stays on VNNI with a software
 *     prefetch (QD_PF): an AMX GEMV over 16 strided weight rows measured
 *     12-15 % slower on Gemma 3's Q8_0 head (results/gguf/ops-2026-11-24b.md).
 */
#include "ms_k_qdot_int.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* Software prefetch distance (bytes ahead of the weight group being read)
 * for the one-row VNNI path; 0: the hardware prefetchers alone. A build
 * option (-DQD_PF=N; 0: off). 2048 measured best of 0 / 1k / 2k / 4k / 8k on
 * the 1.5B and Gemma 3 at 2 threads (results/gguf/ops-2026-11-24b.md). */
#ifndef QD_PF
#define QD_PF 2048
#endif

/* AVX-512 twins of quantize_block and quantize_super: the same IEEE
 * operations per element (a division, the rounding add, a clamp), so the
 * same bytes (test_qdot checks both against the definition). */
#define QD_QUANT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

QD_QUANT_AVX512 static inline __m512i quant_round16(__m512 x, float step) {
    __m512 v = _mm512_div_ps(x, _mm512_set1_ps(step));
    v = _mm512_sub_ps(_mm512_add_ps(v, _mm512_set1_ps(12582912.0f)), _mm512_set1_ps(12582912.0f));
    const __m512i q = _mm512_cvttps_epi32(v);
    return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
}

/* max|x| over 32 elements; *finite &= all of them finite. */
QD_QUANT_AVX512 static inline float quant_amax32(const float *x, bool *finite) {
    const __m512 a0 = _mm512_abs_ps(_mm512_loadu_ps(x)), a1 = _mm512_abs_ps(_mm512_loadu_ps(x + 16));
    const __m512 inf = _mm512_set1_ps(INFINITY);
    *finite = *finite && (_mm512_cmp_ps_mask(a0, inf, _CMP_LT_OQ) & _mm512_cmp_ps_mask(a1, inf, _CMP_LT_OQ)) == 0xFFFF;
    return _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
}

/* 32 elements at step (zero when !ok) to int8 at q; Σq. */
QD_QUANT_AVX512 static inline int32_t quant_put32(const float *x, float step, bool ok, int8_t *q) {
    __m512i q0 = _mm512_setzero_si512(), q1 = _mm512_setzero_si512();
    if (ok) q0 = quant_round16(_mm512_loadu_ps(x), step), q1 = quant_round16(_mm512_loadu_ps(x + 16), step);
    _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(q1));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

QD_QUANT_FNS(QD_QUANT_AVX512, quantize_block_v, quantize_super_v, quant_amax32, quant_put32)

/* ---- AVX-512 VNNI ------------------------------------------------------------ */

#define QD_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define QD_INLINE static inline __attribute__((always_inline)) QD_AVX512

/* One group of 16 weight blocks, unpacked: t[q] lane j = the 4 unsigned
 * weight bytes of quad q of block j; a, m the per-block multipliers;
 * sc0, sc1 the Q6_K half scales. */
typedef struct {
    __m512i t[8];
    __m512 a, m;
    __m512i sc0, sc1;
} wgroup;

/* A[i] = [block lo_i quads 0-7 | block lo_i + 4 quads 0-7] (dword lanes
 * 0-7 | 8-15), lo_i = i for i < 4, 8 + (i-4) above. Out: T[q] lane j = quad
 * q of block j. Three rounds of 8 shuffles: 32-bit unpacks, 64-bit unpacks
 * (then 128-bit lane L of V[q'] holds quad q' (L even) or q'+4 (L odd) of
 * blocks A0..A3's first (L < 2) or second half), 128-bit lane selects. */
QD_INLINE void transpose_16x8(const __m512i A[8], __m512i T[8]) {
    __m512i U[8], V[8];
    for (int p = 0; p < 4; p++) {
        U[2 * p] = _mm512_unpacklo_epi32(A[2 * p], A[2 * p + 1]);
        U[2 * p + 1] = _mm512_unpackhi_epi32(A[2 * p], A[2 * p + 1]);
    }
    for (int h = 0; h < 2; h++) { /* h: A0..A3 or A4..A7 */
        __m512i *u = U + 4 * h, *v = V + 4 * h;
        v[0] = _mm512_unpacklo_epi64(u[0], u[2]);
        v[1] = _mm512_unpackhi_epi64(u[0], u[2]);
        v[2] = _mm512_unpacklo_epi64(u[1], u[3]);
        v[3] = _mm512_unpackhi_epi64(u[1], u[3]);
    }
    for (int q = 0; q < 4; q++) {
        T[q] = _mm512_shuffle_i32x4(V[q], V[4 + q], 0x88);     /* lanes 0, 2 of each */
        T[q + 4] = _mm512_shuffle_i32x4(V[q], V[4 + q], 0xDD); /* lanes 1, 3 */
    }
}

/* A row's short tail, nv <= 4 blocks (k = 640 leaves 4 after a whole group:
 * Gemma 3's q, k, v, gate, up and head): A[i]'s first half holds block i
 * (the a_block layout; second halves are not read). T[q] lane j = quad q
 * of block j for j < 4, zero above: two inserts and 8 two-source lane
 * permutes instead of the 16-block transpose's 24 shuffles on data a
 * quarter full. Same unsigned bytes in the same lanes as transpose_16x8. */
QD_INLINE void transpose_tail4(const __m512i A[4], __m512i T[8]) {
    const __m512i P0 = _mm512_inserti64x4(A[0], _mm512_castsi512_si256(A[1]), 1); /* [block 0 | block 1] */
    const __m512i P1 = _mm512_inserti64x4(A[2], _mm512_castsi512_si256(A[3]), 1); /* [block 2 | block 3] */
    for (int q = 0; q < 8; q++) {
        const __m512i idx = _mm512_setr_epi32(q, 8 + q, 16 + q, 24 + q, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        T[q] = _mm512_maskz_permutex2var_epi32((__mmask16)0x000F, P0, idx, P1);
    }
}

/* Block of A[i]'s first half (second: + 4). */
static inline int a_block(int i) { return i < 4 ? i : i + 4; }

/* The f16 at byte `off` of the first nv blocks of a group (stride bb), lanes
 * j >= nv zero; as f32. Scalar loads and one vector load: measured faster
 * on this VM than a masked 32-bit gather. */
QD_INLINE __m512 load_f16_n(const uint8_t *base, int bb, int off, int nv) {
    uint16_t d[GROUP] = {0};
    for (int j = 0; j < nv; j++) d[j] = ld_u16(base + (size_t)j * (size_t)bb + (size_t)off);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const void *)d));
}

/* Q8_0 {f16 d; i8 qs[32]}: unsigned u = q + 128 (offset 128). Lanes of
 * blocks past nv hold 128, which meets the zero padding of x (q = 0, s = 0)
 * and a zero scale. */
QD_INLINE void load_q8_0(const uint8_t *base, int nv, __m512i A[8]) {
    const __m512i off = _mm512_set1_epi8((char)0x80);
    if (nv <= 4) { /* A[0..3]'s first halves only */
        for (int i = 0; i < 4; i++) {
            A[i] = _mm512_xor_si512(
                _mm512_castsi256_si512(_mm256_maskz_loadu_epi8(i < nv ? ~0u : 0u, base + (size_t)i * 34 + 2)), off);
            A[i + 4] = _mm512_setzero_si512();
        }
    } else if (nv == GROUP) { /* a whole group (all but a row's tail): plain loads */
        for (int i = 0; i < 8; i++) {
            const int b0 = a_block(i);
            const __m256i lo = _mm256_loadu_si256((const void *)(base + (size_t)b0 * 34 + 2));
            const __m256i hi = _mm256_loadu_si256((const void *)(base + (size_t)(b0 + 4) * 34 + 2));
            A[i] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), off);
        }
    } else {
        for (int i = 0; i < 8; i++) {
            const int b0 = a_block(i), b1 = b0 + 4;
            __m256i lo = _mm256_maskz_loadu_epi8(b0 < nv ? ~0u : 0u, base + (size_t)b0 * 34 + 2);
            __m256i hi = _mm256_maskz_loadu_epi8(b1 < nv ? ~0u : 0u, base + (size_t)b1 * 34 + 2);
            A[i] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), off);
        }
    }
}

/* A group as loaded (load_q8_0, load_q5_0) into W: lane j = block j, and
 * the f16 scales at byte 0 of its nv blocks (block stride bb). */
QD_INLINE void unpack_loaded(const __m512i A[8], const uint8_t *base, int bb, int nv, wgroup *W) {
    if (nv <= 4) transpose_tail4(A, W->t);
    else transpose_16x8(A, W->t);
    W->a = load_f16_n(base, bb, 0, nv);
}

QD_INLINE void unpack_q8_0(const uint8_t *base, int nv, wgroup *W) {
    __m512i A[8];
    load_q8_0(base, nv, A);
    unpack_loaded(A, base, 34, nv, W);
}

/* Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}: unsigned q (offset 16). Element e of a
 * block sits at byte e of its 32-byte half: qs low nibbles, then high.
 * A[i] = [block b0 | block b1], a block past nv zero. */
QD_INLINE __m512i q5_0_pair(const uint8_t *base, int b0, int b1, int nv) {
    const __m512i shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                             0x0004000400040004LL, 0x0004000400040004LL);
    const uint8_t *p0 = base + (size_t)b0 * 22, *p1 = base + (size_t)b1 * 22;
    __m128i q0 = _mm_maskz_loadu_epi8(b0 < nv ? 0xFFFF : 0, p0 + 6);
    __m128i q1 = _mm_maskz_loadu_epi8(b1 < nv ? 0xFFFF : 0, p1 + 6);
    uint64_t h0 = b0 < nv ? ld_u32(p0 + 2) : 0, h1 = b1 < nv ? ld_u32(p1 + 2) : 0;
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(q0)),
                                   _mm256_broadcastsi128_si256(q1), 1);
    z = _mm512_and_si512(_mm512_srlv_epi16(z, shifts), _mm512_set1_epi8(0x0F));
    return _mm512_mask_add_epi8(z, _cvtu64_mask64(h0 | (h1 << 32)), z, _mm512_set1_epi8(0x10));
}

QD_INLINE void load_q5_0(const uint8_t *base, int nv, __m512i A[8]) {
    if (nv <= 4) /* A[0..3] only; their second halves: none */
        for (int i = 0; i < 4; i++) A[i] = q5_0_pair(base, i, GROUP, nv), A[i + 4] = _mm512_setzero_si512();
    else
        for (int i = 0; i < 8; i++) A[i] = q5_0_pair(base, a_block(i), a_block(i) + 4, nv);
}

QD_INLINE void unpack_q5_0(const uint8_t *base, int nv, wgroup *W) {
    __m512i A[8];
    load_q5_0(base, nv, A);
    unpack_loaded(A, base, 22, nv, W);
}

/* One x row's 16 block sums of a Q8_0 / Q5_0 group without the weight
 * transpose (the one-row path): A[i] = [block a_block(i) | a_block(i) + 4]
 * as loaded, xa the x row's group in the same pair layout (qa), so
 * V[i] = vpdpbusd(A[i], xa[i]) holds 8 partial sums of each of the two
 * blocks; three rounds of unpack-and-add (14 shuffles, 7 adds, against the
 * transpose's 24 shuffles) leave lane j = the exact sum of block j, the
 * same integer the transposed path forms. nv <= 4: A[4..7] (zero) are not
 * multiplied (blocks 8-15 are padding, x = 0 there), and A[0..3]'s second
 * halves meet x's zero padding. */
QD_INLINE __m512i pair_sums(const __m512i A[8], const int8_t *xa, int nv) {
    __m512i V[8];
    for (int i = 0; i < 8; i++)
        V[i] = i < 4 || nv > 4 ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), A[i],
                                                     _mm512_load_si512((const void *)(xa + 64 * i)))
                               : _mm512_setzero_si512();
    __m512i S[4], T[2];
    for (int k = 0; k < 4; k++)
        S[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(V[2 * k], V[2 * k + 1]),
                                _mm512_unpackhi_epi32(V[2 * k], V[2 * k + 1]));
    for (int m = 0; m < 2; m++)
        T[m] = _mm512_add_epi32(_mm512_unpacklo_epi64(S[2 * m], S[2 * m + 1]),
                                _mm512_unpackhi_epi64(S[2 * m], S[2 * m + 1]));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(T[0], T[1], 0x88), _mm512_shuffle_i32x4(T[0], T[1], 0xDD));
}

/* Two 256-bit loads as one 512-bit vector, zero when !ok. */
QD_INLINE __m512i ld_2x256(const uint8_t *lo, const uint8_t *hi, bool ok) {
    if (!ok) return _mm512_setzero_si512();
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const void *)lo)),
                              _mm256_loadu_si256((const void *)hi), 1);
}

/* d (and dmin) f16 of the group's two super-blocks as lanes 0-7 | 8-15. */
QD_INLINE void kq_d(uint16_t d0, uint16_t d1, uint16_t m0, uint16_t m1, __m512 *dv, __m512 *mv) {
    const uint64_t h = (uint64_t)d0 | ((uint64_t)m0 << 16) | ((uint64_t)d1 << 32) | ((uint64_t)m1 << 48);
    const __m512 f = _mm512_cvtph_ps(_mm256_zextsi128_si256(_mm_cvtsi64_si128((long long)h)));
    *dv = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), f);
    *mv = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), f);
}

/* Q6_K's unsigned q (0..63) of block c (0..3) of a half, bytewise, from the
 * half's ql word of the quad (nibble c / 2) and its qh word (bits 2c). */
QD_INLINE __m512i q6_quad(__m512i ql, __m512i qh, int c) {
    const __m512i nib = c < 2 ? ql : _mm512_srli_epi16(ql, 4);
    const __m512i hb = c == 0   ? _mm512_slli_epi16(qh, 4)
                       : c == 1 ? _mm512_slli_epi16(qh, 2)
                       : c == 2 ? qh
                                : _mm512_srli_epi16(qh, 2);
    return _mm512_or_si512(_mm512_and_si512(nib, _mm512_set1_epi8(0x0F)), _mm512_and_si512(hb, _mm512_set1_epi8(0x30)));
}

/* Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: block j = super-block
 * j/8, half h = (j%8)/4, c = j%4: low nibble c/2 of ql[64h + 32·(c%2) + l],
 * top bits 2c of qh[32h + l]. [ql 0-31 | 64-95] holds c = 0 (low) and 2
 * (high) of both halves, [ql 32-63 | 96-127] c = 1 and 3, qh[0..63] the top
 * bits of both halves: A[i] directly. Unsigned q (offset 32). */
QD_INLINE void unpack_q6_k(const uint8_t *base, int nv, wgroup *W) {
    __m512i A[8], sv[2];
    uint16_t d[2] = {0, 0};
    for (int S = 0; S < 2; S++) {
        const bool ok = 8 * S < nv;
        const uint8_t *p = base + (size_t)S * 210;
        const __m512i La = ld_2x256(p, p + 64, ok), Lb = ld_2x256(p + 32, p + 96, ok);
        const __m512i H = ok ? _mm512_loadu_si512((const void *)(p + 128)) : _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) A[4 * S + c] = q6_quad(c % 2 ? Lb : La, H, c);
        sv[S] = ok ? _mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)(p + 192))) : _mm512_setzero_si512();
        d[S] = ok ? ld_u16(p + 208) : 0;
    }
    transpose_16x8(A, W->t);
    /* block j's scales are scales[2·(j%8)] and [2·(j%8) + 1] of its super-block */
    W->sc0 = _mm512_permutex2var_epi32(
        sv[0], _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), sv[1]);
    W->sc1 = _mm512_permutex2var_epi32(
        sv[0], _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), sv[1]);
    __m512 unused;
    kq_d(d[0], d[1], 0, 0, &W->a, &unused);
}

/* The twin's block_term from the unsigned-weight block sums (lane j =
 * block j): the offset of Q8_0 / Q5_0 removed, then the f32 steps. */
QD_INLINE __m512 sums_terms(__m512 a, __m512 m, __m512i sumi, const float *xd, __m512i sx, ms_dtype DT) {
    if (DT == MS_DTYPE_Q8_0) sumi = _mm512_sub_epi32(sumi, _mm512_slli_epi32(sx, 7));
    if (DT == MS_DTYPE_Q5_0) sumi = _mm512_sub_epi32(sumi, _mm512_slli_epi32(sx, 4));
    const __m512 dx = _mm512_loadu_ps(xd);
    const __m512 t = _mm512_mul_ps(_mm512_mul_ps(a, dx), _mm512_cvtepi32_ps(sumi));
    (void)m;
    return t;
}

/* The 16 terms of one x row's group (xg: its 512 q bytes, xd/xs: its 16
 * scales and sums), lane j = block j: the twin's block_term. */
QD_INLINE __m512 group_terms(const wgroup *W, const int8_t *xg, const float *xd, const int32_t *xs, ms_dtype DT) {
    __m512i X[8];
    for (int q = 0; q < 8; q++) X[q] = _mm512_loadu_si512((const void *)(xg + 64 * q));
    const __m512i sx = _mm512_loadu_si512((const void *)xs);
    __m512i sumi;
    if (DT == MS_DTYPE_Q6_K) {
        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512(), slo = _mm512_setzero_si512();
        for (int q = 0; q < 4; q++) {
            lo = _mm512_dpbusd_epi32(lo, W->t[q], X[q]);
            hi = _mm512_dpbusd_epi32(hi, W->t[q + 4], X[q + 4]);
            slo = _mm512_dpbusd_epi32(slo, _mm512_set1_epi8(1), X[q]);
        }
        const __m512i shi = _mm512_sub_epi32(sx, slo);
        lo = _mm512_sub_epi32(lo, _mm512_slli_epi32(slo, 5));
        hi = _mm512_sub_epi32(hi, _mm512_slli_epi32(shi, 5));
        sumi = _mm512_add_epi32(_mm512_mullo_epi32(W->sc0, lo), _mm512_mullo_epi32(W->sc1, hi));
    } else {
        __m512i r0 = _mm512_setzero_si512(), r1 = _mm512_setzero_si512();
        for (int q = 0; q < 8; q += 2) {
            r0 = _mm512_dpbusd_epi32(r0, W->t[q], X[q]);
            r1 = _mm512_dpbusd_epi32(r1, W->t[q + 1], X[q + 1]);
        }
        sumi = _mm512_add_epi32(r0, r1);
    }
    return sums_terms(W->a, W->m, sumi, xd, sx, DT);
}

/* lanes_reduce on a vector: (l, l+8), then (l, l+4), then (0+2) + (1+3). */
QD_INLINE float vec_reduce(__m512 a) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a),
                                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4)); /* [s4_0 + s4_2, s4_1 + s4_3] */
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* Bytes of one group of 16 weight blocks, a constant for each path (the
 * out-of-line ms_dtype_block_bytes showed at ~1 % of a decode, called once
 * a weight row). */
QD_INLINE size_t group_bytes(ms_dtype DT) {
    switch (DT) {
    case MS_DTYPE_Q8_0: return 16 * 34;
    case MS_DTYPE_Q5_0: return 16 * 22;
    case MS_DTYPE_Q6_K: return 2 * 210;
    default: return (size_t)GROUP * ms_dtype_block_bytes(DT) / (size_t)(ms_dtype_block(DT) / QK);
    }
}

/* NT x rows from i0 against weight row wr (output column j). */
QD_INLINE void simd_tile(const qd_job *J, const uint8_t *wr, float bias, int64_t j, int64_t i0, int NT,
                         ms_dtype DT) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), nb = x->k / QK;
    const size_t gb = group_bytes(DT);
    __m512 acc[TILE];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < g; gi++) {
        const int nv = (int)(nb - gi * GROUP < GROUP ? nb - gi * GROUP : GROUP);
        const uint8_t *base = wr + (size_t)gi * gb;
        if (QD_PF > 0)
            for (size_t o = 0; o < gb; o += 64) _mm_prefetch((const char *)base + QD_PF + o, _MM_HINT_T0);
        if (NT == 1 && (DT == MS_DTYPE_Q8_0 || DT == MS_DTYPE_Q5_0)) { /* one row: no weight transpose */
            __m512i A[8];
            if (DT == MS_DTYPE_Q8_0) load_q8_0(base, nv, A);
            else load_q5_0(base, nv, A);
            const __m512 a = load_f16_n(base, (int)(gb / GROUP), 0, nv); /* block stride: 34 or 22 bytes */
            const int64_t xr = i0 * g + gi;
            const __m512i sumi = pair_sums(A, x->qa + (size_t)xr * GROUP_Q, nv);
            acc[0] = _mm512_add_ps(acc[0], sums_terms(a, a, sumi, x->d + xr * GROUP,
                                                      _mm512_loadu_si512((const void *)(x->s + xr * GROUP)), DT));
            continue;
        }
        wgroup W;
        if (DT == MS_DTYPE_Q8_0) unpack_q8_0(base, nv, &W);
        if (DT == MS_DTYPE_Q5_0) unpack_q5_0(base, nv, &W);
        if (DT == MS_DTYPE_Q6_K) unpack_q6_k(base, nv, &W);
        for (int t = 0; t < NT; t++) {
            const int64_t xr = (i0 + t) * g + gi;
            acc[t] = _mm512_add_ps(acc[t], group_terms(&W, x->q + (size_t)xr * GROUP_Q, x->d + xr * GROUP,
                                                       x->s + xr * GROUP, DT));
        }
    }
    for (int t = 0; t < NT; t++) {
        float v = vec_reduce(acc[t]);
        if (J->b) v += bias;
        J->y[(i0 + t) * J->ldy + j] = v;
    }
}

QD_ROWS_RANGE(QD_AVX512, simd_range_q8_0, simd_tile, MS_DTYPE_Q8_0)
QD_ROWS_RANGE(QD_AVX512, simd_range_q5_0, simd_tile, MS_DTYPE_Q5_0)
QD_ROWS_RANGE(QD_AVX512, simd_range_q6_k, simd_tile, MS_DTYPE_Q6_K)

/* ---- Q4_K on VNNI, 16 weight rows a vector --------------------------------
 *
 * The per-super-block definition (ms_qdot.h) over the tile layout of
 * ms_qdot_pack: lane j = weight row 16t + j. For sub-block s of super-block
 * S, the 8 words of its nibbles (64 bytes each: word q of the 16 rows) are
 * unpacked once and applied to NT ≤ KQ_NT (8) x rows; per x row, 8 vpdpbusd with
 * x's quad q broadcast give the 16 rows' sub-block sums exactly, one
 * vpmulld by sc_s adds them into I, one exact f32 multiply-add puts
 * mn_s · sk into M; at the end of S, one f32 term per row. The twin's
 * operations on the same integers in the same order: the same bits, for
 * any NT and thread split. */

/* x rows an unpack (Q4_K, Q5_0, Q4_0): 8 against 6 (8 rows in one pass, not
 * 6 + 2, though I and M spill). The 1.5B's 8-row forward on the Zen 4 VM, 2
 * threads: 63.9-66.3 -> 59.3-59.9 ms (best of 12, three alternating pairs),
 * median of four bench-ops passes 69.8 -> 67.4 ms; 16 rows unchanged
 * (results/gguf/attention-2026-11-28.md, end). */
enum { KQ_NT = 8, KQ4_WORDS = 36 };
/* Software prefetch distance in the tile stream (bytes; 0: off). */
#ifndef KQ4_PF
#define KQ4_PF 4608
#endif
#ifndef KQ4_PF_MIN
#define KQ4_PF_MIN 1
#endif

/* Sub-block s's 6-bit scale (mn = 0) or min (mn = 1) of each lane's
 * super-block, from its scale words u0, u1, u2 (kq_scale_min, lane-wise). */
QD_INLINE __m512i kq4_scale(__m512i u0, __m512i u1, __m512i u2, int s, int mn) {
    const __m512i k63 = _mm512_set1_epi32(63), k15 = _mm512_set1_epi32(15), k3 = _mm512_set1_epi32(3);
    if (s < 4) return _mm512_and_si512(_mm512_srli_epi32(mn ? u1 : u0, 8 * s), k63);
    const int t = 8 * (s - 4);
    return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, t + 4 * mn), k15),
                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(mn ? u1 : u0, t + 6), k3), 4));
}

/* f16 in the low (hi = 0) or high half of each 32-bit lane, as f32. */
QD_INLINE __m512 f16_half(__m512i v, int hi) {
    if (hi) v = _mm512_srli_epi32(v, 16);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

/* The f16 d (low half) and dmin (high half) of each lane's super-block, as f32. */
QD_INLINE void kq4_d(const uint8_t *u, __m512 *d, __m512 *dmin) {
    const __m512i dd = _mm512_load_si512((const void *)u);
    *d = f16_half(dd, 0);
    *dmin = f16_half(dd, 1);
}

/* A super-block's term t_S = (d·uk)·(float)I − (dmin·uk)·(float)M (ms_qdot.h). */
QD_INLINE __m512 kq4_term(__m512 d, __m512 dmin, float uk, __m512i I, __m512i M) {
    const __m512 dy = _mm512_set1_ps(uk);
    const __m512 tI = _mm512_mul_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(I));
    const __m512 tM = _mm512_mul_ps(_mm512_mul_ps(dmin, dy), _mm512_cvtepi32_ps(M));
    return _mm512_sub_ps(tI, tM);
}

/* y rows i0 .. i0 + nt − 1, the tile's mt columns from j0: acc[t][0] + acc[t][1] (+ bias). */
QD_INLINE void kq4_store(const qd_job *J, const __m512 (*acc)[2], int64_t j0, int mt, int64_t i0, int nt) {
    const __mmask16 k = (__mmask16)((1u << mt) - 1u);
    const __m512 bias = J->b ? _mm512_maskz_loadu_ps(k, J->b + j0) : _mm512_setzero_ps();
    for (int t = 0; t < nt; t++) {
        __m512 v = _mm512_add_ps(acc[t][0], acc[t][1]);
        if (J->b) v = _mm512_add_ps(v, bias);
        _mm512_mask_storeu_ps(J->y + (i0 + t) * J->ldy + j0, k, v);
    }
}

/* NT x rows from i0 against the tile at pk (its rows j0.., mt of them). */
QD_INLINE void kq4_tile(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), ns = x->k / QK_K;
    const size_t xs = (size_t)g * GROUP_Q;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[KQ_NT][2];
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    for (int64_t S = 0; S < ns; S++) {
        const uint8_t *u = pk + (size_t)S * KQ4_WORDS * 64;
        __m512 d, dmin;
        kq4_d(u, &d, &dmin);
        const __m512i u0 = _mm512_load_si512((const void *)(u + 64)), u1 = _mm512_load_si512((const void *)(u + 128)),
                      u2 = _mm512_load_si512((const void *)(u + 192));
        __m512i I[KQ_NT], M[KQ_NT];
        for (int t = 0; t < NT; t++) I[t] = M[t] = _mm512_setzero_si512();
        for (int sb = 0; sb < 8; sb++) {
            if (KQ4_PF > 0 && i0 == 0 && x->n >= KQ4_PF_MIN) /* the first pass streams the tile: fetch ahead (36 lines a super-block) */
                for (int l = 0; l < 5; l++)
                    _mm_prefetch((const char *)u + KQ4_PF + 64 * (5 * sb + l), _MM_HINT_T0);
            /* qs[32p + l]: sub-block 2p in the low nibbles, 2p + 1 in the high */
            const uint8_t *wq = u + 64 * (size_t)(4 + 8 * (sb / 2));
            __m512i W[8];
            for (int q = 0; q < 8; q++) {
                const __m512i v = _mm512_load_si512((const void *)(wq + 64 * q));
                W[q] = _mm512_and_si512(sb % 2 ? _mm512_srli_epi16(v, 4) : v, m4);
            }
            const __m512i sc = kq4_scale(u0, u1, u2, sb, 0), mn = kq4_scale(u0, u1, u2, sb, 1);
            for (int t = 0; t < NT; t++) {
                const int8_t *xq = x->qk + (size_t)(i0 + t) * xs + (size_t)(QK_K * S + QK * sb);
                __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
                for (int q = 0; q < 8; q += 2) {
                    a = _mm512_dpbusd_epi32(a, W[q], _mm512_set1_epi32((int)ld_u32((const uint8_t *)xq + 4 * q)));
                    b = _mm512_dpbusd_epi32(b, W[q + 1],
                                            _mm512_set1_epi32((int)ld_u32((const uint8_t *)xq + 4 * q + 4)));
                }
                const int64_t xb = (i0 + t) * g * GROUP + 8 * S + sb;
                I[t] = _mm512_add_epi32(I[t], _mm512_sllv_epi32(_mm512_mullo_epi32(_mm512_add_epi32(a, b), sc),
                                                                _mm512_set1_epi32(x->ek[xb])));
                M[t] = _mm512_add_epi32(M[t], _mm512_mullo_epi32(mn, _mm512_set1_epi32(x->sk[xb])));
            }
        }
        for (int t = 0; t < NT; t++)
            acc[t][S % 2] = _mm512_add_ps(acc[t][S % 2], kq4_term(d, dmin, x->uk[(i0 + t) * g * 2 + S], I[t], M[t]));
    }
    kq4_store(J, (const __m512(*)[2])acc, j0, mt, i0, NT);
}

QD_TILE_RANGE(QD_AVX512, kq4_range, kq4_tile, KQ_NT)

/* ---- Q5_0 on VNNI, 16 weight rows a vector ---------------------------------
 *
 * The one-row (draft decode) path of the block-by-block definition over
 * Q5_0's tile layout (above): lane j = weight row 16t + j, so a block's 16
 * sums come out of 8 vpdpbusd with x's quads broadcast — no transpose and
 * no horizontal sums, which made the row-major path compute-bound below the
 * read bandwidth. Per block: four loads of qs words give the low and high
 * nibbles (AND, shift + AND), the fifth bits enter as byte masks loaded
 * straight from the layout (masked add of 16); then per x row the unsigned
 * sum less 16·s (x's block sum) is the twin's exact sumi, and term = (d·dx)
 * · (float)sumi goes into accumulator b mod 16 of each lane, the twin's f32
 * steps in the twin's order, reduced by its tree at the end: the same bits
 * for any NT and thread split. */

#ifndef KQ5_PF
#define KQ5_PF 4096
#endif

/* y rows i0 .. i0 + nt − 1, the tile's mt columns from j0: per lane, the
 * twin's tree (lanes_reduce) over the 16 block accumulators acc[t] (+ bias). */
QD_INLINE void kq_lanes_store(const qd_job *J, const __m512 (*acc)[GROUP], int64_t j0, int mt, int64_t i0, int nt) {
    const __mmask16 k = (__mmask16)((1u << mt) - 1u);
    const __m512 bias = J->b ? _mm512_maskz_loadu_ps(k, J->b + j0) : _mm512_setzero_ps();
    for (int t = 0; t < nt; t++) {
        const __m512 *a = acc[t];
        __m512 s8[8], s4[4];
        for (int l = 0; l < 8; l++) s8[l] = _mm512_add_ps(a[l], a[l + 8]);
        for (int l = 0; l < 4; l++) s4[l] = _mm512_add_ps(s8[l], s8[l + 4]);
        __m512 v = _mm512_add_ps(_mm512_add_ps(s4[0], s4[2]), _mm512_add_ps(s4[1], s4[3]));
        if (J->b) v = _mm512_add_ps(v, bias);
        _mm512_mask_storeu_ps(J->y + (i0 + t) * J->ldy + j0, k, v);
    }
}

/* NT x rows from i0 against the tile at pk (its rows j0.., mt of them); DT
 * Q5_0 or Q4_0 (no fifth bits: its qs words follow d and each other, 4 a
 * block, and the offset is 8). */
QD_INLINE void kqp_tile(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT, ms_dtype DT) {
    const ms_q8_act *x = J->x;
    const bool five = DT == MS_DTYPE_Q5_0;
    const int64_t g = ms_q8_groups(x->k), nb = x->k / QK;
    const size_t xs = (size_t)g * GROUP_Q;
    const int words = pack_words(DT), bw = pair_block_words(DT);
    const int32_t off = five ? 16 : 8;
    const __m512i m4 = _mm512_set1_epi8(0x0F), k16 = _mm512_set1_epi8(0x10);
    __m512 acc[KQ_NT][GROUP];
    for (int t = 0; t < NT; t++)
        for (int l = 0; l < GROUP; l++) acc[t][l] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < g; gi++) {
#pragma GCC unroll 8
        for (int P = 0; P < GROUP / 2; P++) {
            const int64_t b0 = gi * GROUP + 2 * P;
            if (b0 >= nb) break;
            const uint8_t *u = pk + (size_t)(b0 / 2) * words * 64;
            if (KQ5_PF > 0 && i0 == 0) /* the first pass streams the tile: fetch ahead */
                for (int l = 0; l < words; l++) _mm_prefetch((const char *)u + KQ5_PF + 64 * l, _MM_HINT_T0);
            const __m512i dd = _mm512_load_si512((const void *)u);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                if (b0 + h >= nb) break;
                const __m512 d = f16_half(dd, h);
                const uint8_t *wb = u + 64 * (size_t)(1 + bw * h), *qs = five ? wb + 64 : wb;
                __m512i W[8];
                for (int q = 0; q < 4; q++) {
                    const __m512i v = _mm512_load_si512((const void *)(qs + 64 * q));
                    const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    if (five) {
                        uint64_t ml, mh;
                        memcpy(&ml, wb + 8 * q, 8);
                        memcpy(&mh, wb + 8 * (q + 4), 8);
                        W[q] = _mm512_mask_add_epi8(lo, _cvtu64_mask64(ml), lo, k16);
                        W[q + 4] = _mm512_mask_add_epi8(hi, _cvtu64_mask64(mh), hi, k16);
                    } else {
                        W[q] = lo;
                        W[q + 4] = hi;
                    }
                }
                for (int t = 0; t < NT; t++) {
                    const uint8_t *xq = (const uint8_t *)x->qp + (size_t)(i0 + t) * xs + (size_t)(QK * (b0 + h));
                    __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
                    for (int q = 0; q < 8; q += 2) {
                        a = _mm512_dpbusd_epi32(a, W[q], _mm512_set1_epi32((int)ld_u32(xq + 4 * q)));
                        b = _mm512_dpbusd_epi32(b, W[q + 1], _mm512_set1_epi32((int)ld_u32(xq + 4 * q + 4)));
                    }
                    const int64_t xb = (i0 + t) * g * GROUP + b0 + h;
                    const __m512i sumi = _mm512_sub_epi32(_mm512_add_epi32(a, b), _mm512_set1_epi32(off * x->s[xb]));
                    const __m512 term = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(x->d[xb])), _mm512_cvtepi32_ps(sumi));
                    acc[t][2 * P + h] = _mm512_add_ps(acc[t][2 * P + h], term);
                }
            }
        }
    }
    kq_lanes_store(J, (const __m512(*)[GROUP])acc, j0, mt, i0, NT);
}

QD_INLINE void kq5_tile(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    kqp_tile(J, pk, j0, mt, i0, NT, MS_DTYPE_Q5_0);
}
QD_INLINE void kq40_tile(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    kqp_tile(J, pk, j0, mt, i0, NT, MS_DTYPE_Q4_0);
}

QD_TILE_RANGE(QD_AVX512, kq5_range, kq5_tile, KQ_NT)
QD_TILE_RANGE(QD_AVX512, kq40_range, kq40_tile, KQ_NT)

/* ---- Q6_K on VNNI, 16 weight rows a vector ---------------------------------
 *
 * Q6_K products below the AMX path's rows (decode, small verifies) over the
 * tile layout (ms_qdot_pack; the same words the AMX prep reads): lane j =
 * weight row 16t + j. Block (h, c) of a super-block (h = half, c = 0..3)
 * takes its quad q from ql word 16h + 8(c % 2) + q (nibble c / 2) and qh word
 * 32 + 8h + q (bits 2c), unsigned q = 0..63, unpacked once for NT ≤ KQ6_NT x
 * rows; per x row, 4 + 4 vpdpbusd give the two 16-element halves' sums,
 * less 32·(x's half sum) the twin's exact lo and hi; sc₀·lo + sc₁·hi in f32
 * is exact (ms_qdot.h bounds, as on AMX) and so equals the twin's
 * (float)sumi; then term = (d·dx)·that into accumulator b mod 16, the twin's
 * order and tree: the same bits for any NT and thread split. */

/* x rows an unpack: Q6_K's accumulators live in memory (16 a row), so
 * more rows cost no registers; 8 against 6 (8 rows: 6 + 2), 32768 x 1536
 * on the Intel VM, min of 6 alternating runs: 2 threads 2.26 -> 1.94 ms,
 * 1 thread 4.54 -> 3.96; 16 against 8 (16 rows: 8 + 8), min of 6: 2
 * threads 4.69 -> 4.24, 1 thread 7.48 -> 6.63. */
enum { KQ6_WORDS = 53, KQ6_NT = 16 };

/* Int8 scale s (0..15) of each lane's super-block (byte s % 4 of its scale
 * word s / 4, sw[4]), as f32. */
QD_INLINE __m512 kq6_scale(const __m512i sw[4], int s) {
    return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(sw[s / 4], 24 - 8 * (s % 4)), 24));
}

/* NT x rows from i0 against the tile at pk (its rows j0.., mt of them). */
QD_INLINE void kq6_tile(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), ns = x->k / QK_K;
    const size_t xs = (size_t)g * GROUP_Q;
    __m512 acc[KQ6_NT][GROUP];
    for (int t = 0; t < NT; t++)
        for (int l = 0; l < GROUP; l++) acc[t][l] = _mm512_setzero_ps();
    for (int64_t S2 = 0; S2 < ns; S2 += 2)
#pragma GCC unroll 2
        for (int s2 = 0; s2 < 2; s2++) {
            const int64_t S = S2 + s2;
            if (S >= ns) break;
            const uint8_t *u = pk + (size_t)S * KQ6_WORDS * 64;
            const __m512 d = f16_half(_mm512_load_si512((const void *)(u + 64 * 52)), 1);
            __m512i sw[4];
            for (int w = 0; w < 4; w++) sw[w] = _mm512_load_si512((const void *)(u + 64 * (48 + w)));
            for (int h = 0; h < 2; h++) {
                __m512i qh[8];
                for (int q = 0; q < 8; q++) qh[q] = _mm512_load_si512((const void *)(u + 64 * (32 + 8 * h + q)));
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    if (KQ4_PF > 0 && i0 == 0) /* the first pass streams the tile: fetch ahead (53 lines a super-block) */
                        for (int l = 0; l < 7; l++)
                            _mm_prefetch((const char *)u + KQ4_PF + 64 * (7 * (4 * h + c) + l), _MM_HINT_T0);
                    __m512i W[8];
                    for (int q = 0; q < 8; q++)
                        W[q] = q6_quad(_mm512_load_si512((const void *)(u + 64 * (16 * h + 8 * (c % 2) + q))), qh[q], c);
                    const int j = 4 * h + c, lane = (int)(8 * (S % 2)) + j;
                    const __m512 sc0 = kq6_scale(sw, 2 * j), sc1 = kq6_scale(sw, 2 * j + 1);
                    for (int t = 0; t < NT; t++) {
                        const int64_t b = 8 * S + j, xb = (i0 + t) * g * GROUP + b;
                        const uint8_t *xq = (const uint8_t *)x->qp + (size_t)(i0 + t) * xs + (size_t)(QK * b);
                        /* the sums start at −32·(x's half sums): the same exact integers */
                        __m512i lo = _mm512_set1_epi32(x->h6[2 * xb]), hi = _mm512_set1_epi32(x->h6[2 * xb + 1]);
                        for (int q = 0; q < 4; q++) {
                            lo = _mm512_dpbusd_epi32(lo, W[q], _mm512_set1_epi32((int)ld_u32(xq + 4 * q)));
                            hi = _mm512_dpbusd_epi32(hi, W[q + 4], _mm512_set1_epi32((int)ld_u32(xq + 4 * q + 16)));
                        }
                        /* exact products and sum (< 2^24): one rounding-free FMA */
                        const __m512 sf = _mm512_fmadd_ps(sc0, _mm512_cvtepi32_ps(lo),
                                                          _mm512_mul_ps(sc1, _mm512_cvtepi32_ps(hi)));
                        const __m512 term = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(x->d[xb])), sf);
                        acc[t][lane] = _mm512_add_ps(acc[t][lane], term);
                    }
                }
            }
        }
    kq_lanes_store(J, (const __m512(*)[GROUP])acc, j0, mt, i0, NT);
}

QD_TILE_RANGE(QD_AVX512, kq6_range, kq6_tile, KQ6_NT)

/* ---- AMX (n ≥ AMX_MIN rows; Q6_K, Q8_0) ---------------------------------------
 *
 * The same definition with the integer block sums from AMX tiles. Work unit:
 * 16 weight rows (a j-tile) × all n x rows. For each 32-element block b:
 *     C[r][j] = Σ_e x_r[32b + e] · w_j[32b + e]      (TDPBSUD / TDPBSSD, exact int32)
 * with A = 16 x rows of block b in element order (ms_q8_act.qp, rows past n
 * are read and ignored), B = the 16 weight rows' block b in the VNNI tile
 * layout B[q][4j + i] = w_j[32b + 4q + i], built from each row's quad q:
 * one aligned 64-byte load per tile row when the weight is packed
 * (ms_qdot_pack: the words already in this order), else a 32-bit gather
 * (the nibble formats give two or four blocks per load). Q4_K's B holds the unsigned nibble q (its min
 * enters through the x block sum, as in the twin); Q6_K's and Q8_0's the
 * signed q (q − 32, q), whose products sum to the twin's sumi exactly; Q6_K
 * takes its two 16-element halves as two K = 16 products (sc₀·lo + sc₁·hi).
 * Then per x row r, with the 16 weight rows in the lanes of one vector:
 *     term = (a_j·dx)·sumi [− (m_j·dx)·s]     acc[r][b mod 16] += term
 * and at the end the twin's lane tree, per lane j — each (r, j) sees the
 * twin's IEEE operations in the twin's order, so the results are bitwise
 * those of the twin and of the VNNI path, for any n and thread count. */

#define QD_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")))
#define QD_AMX_INLINE static inline __attribute__((always_inline)) QD_AMX

enum { AMX_ROWS = 16, AMX_MAXN = 64 };

/* <immintrin.h>'s tile load names no memory operand: the compiler could
 * keep the B stores below in registers past it. These tell it. */
#define QD_TILE_LOAD(t, base, stride)                                                              \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *)(base)), "r"((long)(stride)) \
                     : "memory")
#define QD_TILE_STORE(t, base, stride)                                                             \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"((void *)(base)), "r"((long)(stride)) \
                     : "memory")
#define QD_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define QD_TILE_DPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

/* The 64-byte tile configuration (palette 1). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) amx_cfg;

/* Per thread: B tiles of up to 8 blocks, the C tile(s), the accumulators
 * acc[r][lane][j] (n ≤ 64 rows, then the call loops over x row chunks). */
typedef struct { /* one super-block (Q8_0: one block, slot 0) of the tile's weight rows */
    _Alignas(64) uint8_t b[8][512];
    _Alignas(64) float a[8][16];
    _Alignas(64) float sc0[8][16], sc1[8][16]; /* Q6_K half scales, as f32 (exact) */
} amx_wbuf;
typedef struct {
    amx_wbuf w[2]; /* the super-block in use and the next (prepared ahead) */
    _Alignas(64) int32_t c[2][AMX_ROWS * 16];
    _Alignas(64) float acc[AMX_MAXN][GROUP][16];
} amx_scratch;
static _Thread_local amx_scratch amx_s;

/* Tiles (A and C of `rows` x rows): 0 C, 1 A, 2 B (8 rows, K = 32) and 3-5 alike; Q6_K: 0/3 C lo/hi, 1/4 A lo/hi, 2/5 B lo/hi (K = 16). */
QD_AMX_INLINE void amx_config(ms_dtype DT, int rows) {
    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    const int kb = DT == MS_DTYPE_Q6_K ? 16 : 32;
    cfg.rows[0] = (uint8_t)rows, cfg.colsb[0] = 64;
    cfg.rows[1] = (uint8_t)rows, cfg.colsb[1] = (uint16_t)kb;
    cfg.rows[2] = (uint8_t)(kb / 4), cfg.colsb[2] = 64;
    cfg.rows[3] = (uint8_t)rows, cfg.colsb[3] = 64;
    cfg.rows[4] = (uint8_t)rows, cfg.colsb[4] = (uint16_t)kb;
    cfg.rows[5] = (uint8_t)(kb / 4), cfg.colsb[5] = 64;
    _tile_loadconfig(&cfg);
}

/* The 32-bit word at byte `off` of each of the tile's weight rows (lanes
 * ≥ mt: 0). */
QD_AMX_INLINE __m512i amx_gather(const uint8_t *base, __m512i idx, __mmask16 k, size_t off) {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, base + off, 1);
}

/* Where the prep below reads a unit's words: 16-lane gathers from the
 * tile's rows in place (w: the unit in the tile's first row, idx: the
 * rows' byte offsets, k: the rows that exist), or, when the weight is
 * packed (ms_qdot_pack), one aligned load of the unit's word slot. */
typedef struct {
    const uint8_t *w, *pk;
    __m512i idx;
    __mmask16 k;
} amx_src;

QD_AMX_INLINE __m512i amx_word(const amx_src *s, size_t off, ms_dtype DT) {
    if (s->pk) return _mm512_load_si512((const void *)(s->pk + 64 * (size_t)pack_slot(DT, off)));
    return amx_gather(s->w, s->idx, s->k, off);
}

/* A Q6_K super-block of the tile's rows: B tiles of q − 32 (signed), a = d, sc0/sc1. */
QD_AMX_INLINE void amx_prep_q6_k(amx_wbuf *X, const amx_src *S) {
    const ms_dtype DT = MS_DTYPE_Q6_K;
    const __m512 d = f16_half(amx_word(S, 206, DT), 1); /* bytes 208-209, inside the block */
    __m512i sv[4];
    for (int i = 0; i < 4; i++) sv[i] = amx_word(S, 192 + 4 * (size_t)i, DT);
    for (int c = 0; c < 8; c++) {
        _mm512_store_ps(X->a[c], d);
        _mm512_store_ps(X->sc0[c], kq6_scale(sv, 2 * c));
        _mm512_store_ps(X->sc1[c], kq6_scale(sv, 2 * c + 1));
    }
    const __m512i k32 = _mm512_set1_epi8(32);
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 8; q++) {
            const __m512i qh = amx_word(S, 128 + 32 * (size_t)h + 4 * (size_t)q, DT);
            for (int cp = 0; cp < 2; cp++) {
                const __m512i ql = amx_word(S, 64 * (size_t)h + 32 * (size_t)cp + 4 * (size_t)q, DT);
                for (int hb = 0; hb < 2; hb++) {
                    const int cc = cp + 2 * hb;
                    _mm512_store_si512((void *)(X->b[4 * h + cc] + 64 * q), _mm512_sub_epi8(q6_quad(ql, qh, cc), k32));
                }
            }
        }
}

/* A Q8_0 block of the tile's rows (into slot 0): B tile of q, a = d. */
QD_AMX_INLINE void amx_prep_q8_0(amx_wbuf *X, const amx_src *S) {
    const ms_dtype DT = MS_DTYPE_Q8_0;
    _mm512_store_ps(X->a[0], f16_half(amx_word(S, 0, DT), 0));
    for (int q = 0; q < 8; q++)
        _mm512_store_si512((void *)(X->b[0] + 64 * q), amx_word(S, 2 + 4 * (size_t)q, DT));
}

/* The work of one j-tile and one chunk of ≤ 64 x rows is a sequence of
 * items: (block b, x tile of 16 rows, Q6_K: half h). Item i runs on tile
 * set i mod 2 (C, A, B = tiles 0-2 or 3-5), and the products of item i + 1
 * are issued before item i's C is stored and turned into terms, so the
 * tiles' latency hides behind the f32 work (tiles are not renamed). Q6_K's
 * halves are consecutive items: lo on set 0, hi on set 1; its terms are
 * formed at the hi item. */
typedef struct { /* all 64-bit: GCC tested two adjacent 32-bit fields with one 8-byte load of a 4-byte store (no forwarding) */
    int64_t b, t0; /* block, first x row of the tile (relative to r0) */
    int64_t h, set; /* Q6_K half; tile set */
} amx_item;

QD_AMX_INLINE amx_item amx_item_at(int64_t i, int64_t nxt, ms_dtype DT) {
    const int nh = DT == MS_DTYPE_Q6_K ? 2 : 1;
    amx_item it;
    it.h = (int)(i % nh);
    it.set = (int)(i & 1);
    it.t0 = (i / nh) % nxt * AMX_ROWS;
    it.b = i / nh / nxt;
    return it;
}

/* The weight buffer of block b: Q8_0 one block per buffer, the K-quants
 * one super-block. */
QD_AMX_INLINE amx_wbuf *amx_wb(amx_scratch *X, int64_t b, int *slot, ms_dtype DT) {
    if (DT == MS_DTYPE_Q8_0) {
        *slot = 0;
        return &X->w[b & 1];
    }
    *slot = (int)(b % 8);
    return &X->w[(b / 8) & 1];
}

/* The tile's weights: its 16 rows in place (w0, idx, k) and, when packed,
 * its units' words (pk); the next tile's bytes to prefetch (pf, pf_span;
 * 0: none), pf_step a block. */
typedef struct {
    const uint8_t *w0, *pk, *pf;
    size_t unit_bytes;       /* of a unit (the dtype's block) in a row */
    size_t pf_span, pf_step; /* pf_step: the bytes of it prefetched a block, whole lines */
    __m512i idx;
    __mmask16 k;
} amx_tile;

QD_AMX_INLINE void amx_issue(amx_scratch *X, const ms_q8_act *x, const amx_tile *T, int64_t r0, amx_item it,
                             ms_dtype DT) {
    int c;
    amx_wbuf *wb = amx_wb(X, it.b, &c, DT);
    if (it.t0 == 0 && it.h == 0 && T->pf_span) {
        /* Bring in the next j-tile's weights, a share per block, while
         * this one computes: in place, the gathers touch 16 rows at once,
         * which the hardware prefetchers follow poorly, and a burst of
         * prefetches stalls on full fill buffers. */
        const size_t lo = T->pf_step * (size_t)it.b, hi = lo + T->pf_step < T->pf_span ? lo + T->pf_step : T->pf_span;
        for (size_t o = lo; o < hi; o += 64) _mm_prefetch((const char *)(T->pf + o), _MM_HINT_T0);
    }
    if (it.t0 == 0 && it.h == 0 && (DT == MS_DTYPE_Q8_0 || c == 0)) { /* first use: unpack */
        const int64_t u = DT == MS_DTYPE_Q8_0 ? it.b : it.b / 8;
        const amx_src S = {.w = T->w0 + (size_t)u * T->unit_bytes,
                           .pk = T->pk ? T->pk + (size_t)u * 64 * (size_t)pack_words(DT) : NULL,
                           .idx = T->idx,
                           .k = T->k};
        if (DT == MS_DTYPE_Q8_0) amx_prep_q8_0(wb, &S);
        if (DT == MS_DTYPE_Q6_K) amx_prep_q6_k(wb, &S);
    }
    const int64_t xs = ms_q8_groups(x->k) * GROUP_Q; /* bytes between x rows */
    const int8_t *xa = x->qp + (size_t)((r0 + it.t0) * xs) + (size_t)it.b * QK + 16 * (size_t)it.h;
    const uint8_t *bt = wb->b[c] + 256 * (size_t)it.h;
    if (it.set == 0) {
        QD_TILE_LOAD(2, bt, 64);
        QD_TILE_ZERO(0);
        QD_TILE_LOAD(1, xa, xs);
        QD_TILE_DPBSSD(0, 1, 2);
    } else {
        QD_TILE_LOAD(5, bt, 64);
        QD_TILE_ZERO(3);
        QD_TILE_LOAD(4, xa, xs);
        QD_TILE_DPBSSD(3, 4, 5);
    }
}

/* Store item it's C, and (but for a Q6_K lo half) add its block's terms
 * for x rows r0 + t0 ... (< r0 + nr) into acc. */
QD_AMX_INLINE void amx_finish(amx_scratch *X, const ms_q8_act *x, int64_t r0, int64_t nr, amx_item it, ms_dtype DT) {
    if (it.set == 0) QD_TILE_STORE(0, X->c[0], 64);
    else QD_TILE_STORE(3, X->c[1], 64);
    if (DT == MS_DTYPE_Q6_K && it.h == 0) return;
    int c;
    const amx_wbuf *wb = amx_wb(X, it.b, &c, DT);
    const int64_t g = ms_q8_groups(x->k), b = it.b;
    const int lane = (int)(b % GROUP);
    const int32_t *cs = X->c[DT == MS_DTYPE_Q6_K ? 0 : it.set];
    const __m512 av = _mm512_load_ps(wb->a[c]);
    const int64_t tn = nr - it.t0 < AMX_ROWS ? nr - it.t0 : AMX_ROWS;
    for (int64_t i = 0; i < tn; i++) {
        const int64_t xi = (r0 + it.t0 + i) * g * GROUP + b;
        /* (float)sumi; Q6_K: sc₀·lo + sc₁·hi in f32 is exact (|each| ≤ 128·16·32·127 < 2^23,
         * the sum < 2^24), so it equals the twin's int32 sum converted. */
        __m512 sf = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(cs + 16 * i)));
        if (DT == MS_DTYPE_Q6_K) /* exact products and sum: one rounding-free FMA, as on VNNI */
            sf = _mm512_fmadd_ps(_mm512_load_ps(wb->sc1[c]),
                                 _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(X->c[1] + 16 * i))),
                                 _mm512_mul_ps(_mm512_load_ps(wb->sc0[c]), sf));
        const __m512 dx = _mm512_set1_ps(x->d[xi]);
        __m512 t = _mm512_mul_ps(_mm512_mul_ps(av, dx), sf);
        float *acc = X->acc[it.t0 + i][lane];
        _mm512_store_ps(acc, _mm512_add_ps(_mm512_load_ps(acc), t));
    }
}

/* Weight rows [16·t0, 16·t1) (the last tile may be short) against all x rows. */
QD_AMX_INLINE void amx_range(void *arg, int64_t t0, int64_t t1, ms_dtype DT) {
    const qd_job *J = arg;
    const ms_q8_act *x = J->x;
    const ms_qweight *W = J->w;
    amx_scratch *X = &amx_s;
    const int64_t nb = x->k / QK, n = x->n;
    amx_config(DT, n < AMX_ROWS ? (int)n : AMX_ROWS); /* fewer x rows: shorter A and C tiles */
    const size_t tile_bytes = pack_tile_bytes(W), unit_bytes = ms_dtype_block_bytes(DT);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t j0 = t * AMX_ROWS, mt = W->m - j0 < AMX_ROWS ? W->m - j0 : AMX_ROWS;
        amx_tile T = {.w0 = (const uint8_t *)W->data + (size_t)j0 * W->row_bytes,
                      .unit_bytes = unit_bytes,
                      .k = (__mmask16)((1u << mt) - 1u)};
        T.idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                   _mm512_set1_epi32((int32_t)W->row_bytes));
        const bool next = t + 1 < t1 && (t + 2) * AMX_ROWS <= W->m; /* this thread's, never past the tensor */
        if (W->tiles) {
            T.pk = (const uint8_t *)W->tiles + (size_t)t * tile_bytes;
            T.pf = T.pk + tile_bytes, T.pf_span = next ? tile_bytes : 0;
        } else {
            T.pf = T.w0 + AMX_ROWS * W->row_bytes, T.pf_span = next ? AMX_ROWS * W->row_bytes : 0;
        }
        T.pf_step = ((T.pf_span + (size_t)nb - 1) / (size_t)nb + 63) & ~(size_t)63;
        for (int64_t r0 = 0; r0 < n; r0 += AMX_MAXN) {
            const int64_t nr = n - r0 < AMX_MAXN ? n - r0 : AMX_MAXN, nxt = (nr + AMX_ROWS - 1) / AMX_ROWS;
            const int64_t ni = nb * nxt * (DT == MS_DTYPE_Q6_K ? 2 : 1);
            memset(X->acc, 0, (size_t)nr * sizeof(X->acc[0]));
#ifdef QD_NOPIPE
            for (int64_t i = 0; i < ni; i++) {
                const amx_item cur = amx_item_at(i, nxt, DT);
                amx_issue(X, x, &T, r0, cur, DT);
                amx_finish(X, x, r0, nr, cur, DT);
            }
#else
            amx_item cur = amx_item_at(0, nxt, DT);
            amx_issue(X, x, &T, r0, cur, DT);
            for (int64_t i = 0; i < ni; i++) {
                const amx_item nx = amx_item_at(i + 1, nxt, DT);
                if (i + 1 < ni) amx_issue(X, x, &T, r0, nx, DT);
                amx_finish(X, x, r0, nr, cur, DT);
                cur = nx;
            }
#endif
            /* lanes_reduce per j, then + bias: the twin's order */
            const __m512 bias = J->b ? _mm512_maskz_loadu_ps(T.k, J->b + j0) : _mm512_setzero_ps();
            for (int64_t i = 0; i < nr; i++) {
                const float(*a)[16] = X->acc[i];
                __m512 s8[8], s4[4];
                for (int l = 0; l < 8; l++) s8[l] = _mm512_add_ps(_mm512_load_ps(a[l]), _mm512_load_ps(a[l + 8]));
                for (int l = 0; l < 4; l++) s4[l] = _mm512_add_ps(s8[l], s8[l + 4]);
                __m512 v = _mm512_add_ps(_mm512_add_ps(s4[0], s4[2]), _mm512_add_ps(s4[1], s4[3]));
                if (J->b) v = _mm512_add_ps(v, bias);
                _mm512_mask_storeu_ps(J->y + (r0 + i) * J->ldy + j0, T.k, v);
            }
        }
    }
    _tile_release();
}

QD_AMX static void amx_range_q6_k(void *arg, int64_t t0, int64_t t1) { amx_range(arg, t0, t1, MS_DTYPE_Q6_K); }
QD_AMX static void amx_range_q8_0(void *arg, int64_t t0, int64_t t1) { amx_range(arg, t0, t1, MS_DTYPE_Q8_0); }

/* ---- Q4_K on AMX (n ≥ AMX_MIN_ROWS_Q4K) ------------------------------------------
 *
 * Q4_K's per-super-block definition needs the sum of each 32-block on its
 * own (sc_s multiplies it per weight row, e_s shifts it per x row), and a
 * tile product sums over all of its K. So the A tile holds two rows per x
 * row, one per 32-block of a pair (K = 64 = blocks 2P and 2P + 1): row
 * (r, 0) = [qk of block 2P | 0], row (r, 1) = [0 | qk of block 2P + 1]
 * (ms_q8_act.qz, made at quantize), and B = the 16 weight rows' 64
 * elements of the pair — from the tile layout of ms_qdot_pack one AND
 * (block 2P: tile rows 0-7) or shift + AND (block 2P + 1: tile rows 8-15)
 * per packed word, since word q's low nibbles are elements 4q..4q+3 of
 * block 2P and its high nibbles those of block 2P + 1. TDPBSUD (signed qk
 * × unsigned nibble) then gives C[(r, h)][j] = Σ_{e ∈ block 2P + h} q·qk,
 * exactly the VNNI path's sub-block sums; half the multiplications are by
 * zero, which the tile unit can afford and VNNI could not. Then per x row
 * the pair's two sums enter I and M two blocks an instruction, in 16-bit
 * lanes (kq4a_chunk), the same integers as VNNI's I += (C·sc_s) << e_s,
 * M += mn_s·sk_s; at the end of a super-block the same f32 term. The
 * integers are exact and the f32 steps the twin's, so the bits are those
 * of the twin and of the VNNI path, for any n and thread split. An A tile
 * holds 8 x rows (16 tile rows); a chunk of up to 16 x rows puts two A
 * tiles against each B, so a pair is unpacked once for 16 rows; the pairs
 * run as a software pipeline on two tile sets (see kq4a_chunk). */

/* x rows an A tile (two tile rows each); a chunk takes up to two A tiles
 * against one B, so a 16-row verify unpacks each pair once, not twice. */
enum { KQ4A_X = 8, KQ4A_CHUNK = 2 * KQ4A_X };

typedef struct {
    _Alignas(64) uint8_t b[2][16 * 64];
    _Alignas(64) int32_t c[2][2 * 16 * 16]; /* per set: the C of A tile 0, then of A tile 1 */
} kq4a_scratch;
static _Thread_local kq4a_scratch kq4a_s;

#define QD_TILE_DPBSUD(c, a, b) __asm__ volatile("tdpbsud %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

/* Tiles: set 0 = A 0, B 1, C 2 (second A tile's C: 6); set 1 = A 3, B 4,
 * C 5 (7). A and C: `rows` rows. */
QD_AMX_INLINE void kq4a_config(int rows) {
    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int s = 0; s < 2; s++) {
        cfg.rows[3 * s] = (uint8_t)rows, cfg.colsb[3 * s] = 64;
        cfg.rows[3 * s + 1] = 16, cfg.colsb[3 * s + 1] = 64;
        cfg.rows[3 * s + 2] = (uint8_t)rows, cfg.colsb[3 * s + 2] = 64;
        cfg.rows[6 + s] = (uint8_t)rows, cfg.colsb[6 + s] = 64;
    }
    _tile_loadconfig(&cfg);
}

/* B of pair p of the super-block at u (packed words) into scratch buffer
 * `buf`. pf: 9 lines to prefetch (NULL: none; a prefetch never faults). */
QD_AMX_INLINE void kq4a_prep(kq4a_scratch *X, const uint8_t *u, int p, int buf, const uint8_t *pf) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const uint8_t *wq = u + 64 * (size_t)(4 + 8 * p);
    if (pf)
        for (int l = 0; l < 9; l++) _mm_prefetch((const char *)pf + 64 * l, _MM_HINT_T0);
    uint8_t *b = X->b[buf];
    for (int q = 0; q < 8; q++) {
        const __m512i v = _mm512_load_si512((const void *)(wq + 64 * q));
        _mm512_store_si512((void *)(b + 64 * q), _mm512_and_si512(v, m4));
        _mm512_store_si512((void *)(b + 64 * (8 + q)), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
    }
}

/* Pair i of the tile at pk (super-block i / 4, pair i mod 4) into buffer
 * i mod 2; pf: fetch the pair's lines KQ4_PF bytes ahead. */
QD_AMX_INLINE void kq4a_prep_at(kq4a_scratch *X, const uint8_t *pk, int64_t i, bool pf) {
    const uint8_t *u = pk + (size_t)(i / 4) * KQ4_WORDS * 64;
    kq4a_prep(X, u, (int)(i % 4), (int)(i & 1), pf ? pk + (size_t)i * 9 * 64 + KQ4_PF : NULL);
}

/* Stage st of the product of buffer `set`'s B and the A rows at za into
 * tile set `set`'s C (left in the tile for kq4a_store): 0 loads B and the
 * A tile of the first 8 x rows, 1 multiplies them into C; with two A
 * tiles, 2 loads the next 8 rows' A tile (za + 8 · 128) into the same
 * tile (after 1 has read it) and 3 multiplies it into the set's second C.
 * The stages go in apart, between x rows of the vector work (kq4a_chunk). */
QD_AMX_INLINE void kq4a_stage(const kq4a_scratch *X, const int8_t *za, int set, int st) {
    const int8_t *zb = za + KQ4A_X * 128;
    if (set == 0) {
        if (st == 0) { QD_TILE_LOAD(1, X->b[0], 64); QD_TILE_LOAD(0, za, 64); }
        if (st == 1) { QD_TILE_ZERO(2); QD_TILE_DPBSUD(2, 0, 1); }
        if (st == 2) QD_TILE_LOAD(0, zb, 64);
        if (st == 3) { QD_TILE_ZERO(6); QD_TILE_DPBSUD(6, 0, 1); }
    } else {
        if (st == 0) { QD_TILE_LOAD(4, X->b[1], 64); QD_TILE_LOAD(3, za, 64); }
        if (st == 1) { QD_TILE_ZERO(5); QD_TILE_DPBSUD(5, 3, 4); }
        if (st == 2) QD_TILE_LOAD(3, zb, 64);
        if (st == 3) { QD_TILE_ZERO(7); QD_TILE_DPBSUD(7, 3, 4); }
    }
}

QD_AMX_INLINE void kq4a_store(kq4a_scratch *X, int set, bool two) {
    if (set == 0) {
        QD_TILE_STORE(2, X->c[0], 64);
        if (two) QD_TILE_STORE(6, X->c[0] + 256, 64);
    } else {
        QD_TILE_STORE(5, X->c[1], 64);
        if (two) QD_TILE_STORE(7, X->c[1] + 256, 64);
    }
}

/* x rows [c0, c0 + nc) against the 16-row tile at pk (rows j0.., mt).
 *
 * Per x row and pair, the tile product's sums P_b (b = 2P, 2P + 1) go in
 * 16-bit lanes: with q' = q − 8, P'_b = Σ q'·qk = P_b − 8·Q_b fits 16 bits
 * (|P'| ≤ 32·8·127), and the low halves of P_b less 8·Q_b give it exactly
 * (mod 2^16). Then with w_b = sc_b << e_b (≤ 63·32, 16 bits):
 *     I  += w_b·P'_b + w_b·8Q_b   (= (sc_b·P_b) << e_b, the definition)
 *     M8 += (mn_b << e_b)·8Q_b    (= 8·mn_b·sk_b; M = M8 >> 3 at the end)
 * two blocks an instruction (vpdpwssd), all exact int32 (|partial sums| ≤
 * 8·2016·32512·2 < 2^31; |M8| < 2^30), so I and M are the twin's integers.
 * The pair word carries 2^e_b and 8·Q_b: a 16-bit multiply instead of a
 * variable shift, no shift for 8·Q. */
QD_AMX_INLINE void kq4a_chunk(const qd_job *J, kq4a_scratch *X, const uint8_t *pk, int64_t j0, int mt, int64_t c0,
                              int nc) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), ns = x->k / QK_K, ni = 4 * ns, np = x->k / 64;
    const size_t zs = (size_t)x->nz * 128; /* bytes between pairs in qz */
    const int8_t *z0 = x->qz + (size_t)c0 * 128;
    __m512 acc[KQ4A_CHUNK][2];
    __m512i I[KQ4A_CHUNK], M[KQ4A_CHUNK];
    const bool two = nc > KQ4A_X;
    for (int t = 0; t < nc; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps(), I[t] = M[t] = _mm512_setzero_si512();
    const size_t sb_bytes = (size_t)KQ4_WORDS * 64;
    /* the first chunk streams the tile (and on into the next) from memory:
     * fetch ahead, 9 lines a pair = a super-block's 36 */
    const bool pf = KQ4_PF > 0 && c0 == 0;
    /* a software pipeline over pairs i (set and buffer i mod 2): B is
     * prepared two pairs ahead and C stored one pair after its product (tiles
     * are not renamed). The tile unit's work does not overlap the vector
     * work issued after it beyond a few dozen operations, so the next pair's
     * tile instructions go in apart: its loads before this pair's rows, its
     * product (each product, and the second A tile's load) between rows, at
     * the row counts below. 8960 x 1536, 1 thread, min of 6-8 alternating:
     * 8 rows (unrolled, kq4a_range), loads and product before the rows 0.585
     * ms -> product before row 2, 4, 5, 6: 0.522, 0.518, 0.512, 0.505; 16
     * rows, all four stages before row 8 (the previous order) 1.145 -> loads
     * at 0, the rest before rows 4, 8, 12: 1.036, unrolled 0.975
     * (results/gguf/ops-2026-11-27d.md) */
    const int at1 = two ? nc / 4 : 5 * nc / 8, at2 = nc / 2, at3 = 3 * nc / 4;
    kq4a_prep_at(X, pk, 0, pf);
    if (ni > 1) kq4a_prep_at(X, pk, 1, pf);
    for (int st = 0; st < (two ? 4 : 2); st++) kq4a_stage(X, z0, 0, st);
    for (int64_t i = 0; i < ni; i++) {
        const int64_t S = i / 4;
        const int p = (int)(i % 4), set = (int)(i & 1), next = (int)((i + 1) & 1);
        const int8_t *zn = z0 + (size_t)(i + 1) * zs;
        kq4a_store(X, set, two);
        if (i + 1 < ni) kq4a_stage(X, zn, next, 0);
        if (i + 2 < ni) kq4a_prep_at(X, pk, i + 2, pf);
        const uint8_t *u = pk + (size_t)S * sb_bytes;
        const __m512i u0 = _mm512_load_si512((const void *)(u + 64)), u1 = _mm512_load_si512((const void *)(u + 128)),
                      u2 = _mm512_load_si512((const void *)(u + 192));
        /* lane j: block 2p's scale (min) in the low half, 2p + 1's in the high */
        const __m512i sc = _mm512_or_si512(kq4_scale(u0, u1, u2, 2 * p, 0),
                                           _mm512_slli_epi32(kq4_scale(u0, u1, u2, 2 * p + 1, 0), 16));
        const __m512i mn = _mm512_or_si512(kq4_scale(u0, u1, u2, 2 * p, 1),
                                           _mm512_slli_epi32(kq4_scale(u0, u1, u2, 2 * p + 1, 1), 16));
        const int32_t *cs = X->c[set];
        for (int t = 0; t < nc; t++) {
            if (i + 1 < ni) {
                if (t == at1) kq4a_stage(X, zn, next, 1);
                if (two && t == at2) kq4a_stage(X, zn, next, 2);
                if (two && t == at3) kq4a_stage(X, zn, next, 3);
            }
            const int32_t *zw = x->zw + ((size_t)(c0 + t) * (size_t)np + (size_t)i) * 2;
            const __m512i e2 = _mm512_set1_epi32(zw[0]), q8 = _mm512_set1_epi32(zw[1]); /* 2^e, 8·Q */
            /* lane j: low half of C[(t, 0)][j] | low half of C[(t, 1)][j]: the second from a load
             * 2 bytes early (each lane's high half then holds its own low half), blended by 16-bit lane */
            const __m512i c01 =
                _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_load_si512((const void *)(cs + 32 * t)),
                                        _mm512_loadu_si512((const void *)((const char *)(cs + 32 * t + 16) - 2)));
            const __m512i P = _mm512_sub_epi16(c01, q8);
            /* sc_b << e_b as sc_b · 2^e_b (≤ 2016: the low 16 bits are the product) */
            const __m512i w = _mm512_mullo_epi16(sc, e2);
            I[t] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(I[t], P, w), q8, w);
            M[t] = _mm512_dpwssd_epi32(M[t], q8, _mm512_mullo_epi16(mn, e2)); /* 8·M */
        }
        if (p == 3) { /* the super-block's f32 terms, as kq4_tile */
            __m512 d, dmin;
            kq4_d(u, &d, &dmin);
            for (int t = 0; t < nc; t++) {
                const float uk = x->uk[(c0 + t) * g * 2 + S];
                acc[t][S % 2] =
                    _mm512_add_ps(acc[t][S % 2], kq4_term(d, dmin, uk, I[t], _mm512_srai_epi32(M[t], 3)));
                I[t] = M[t] = _mm512_setzero_si512();
            }
        }
    }
    kq4_store(J, (const __m512(*)[2])acc, j0, mt, c0, nc);
}

/* Tiles [t0, t1) of 16 weight rows against all x rows (x->has_z). */
QD_AMX static void kq4a_range(void *arg, int64_t t0, int64_t t1) {
    const qd_job *J = arg;
    const ms_qweight *W = J->w;
    const ms_q8_act *x = J->x;
    const int64_t n = x->n;
    MS_ASSERT(x->has_z && W->tiles);
    kq4a_scratch *X = &kq4a_s;
    kq4a_config(2 * (int)(n < KQ4A_X ? n : KQ4A_X));
    /* 9-16 rows: one chunk (two A tiles); more: chunks of 16, the last of
     * 1-16 (its second A tile's rows past n are qz's zero rows) */
    const size_t tile_bytes = (size_t)(W->k / QK_K) * KQ4_WORDS * 64;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t j0 = 16 * t;
        const int mt = (int)(W->m - j0 < 16 ? W->m - j0 : 16);
        const uint8_t *pk = (const uint8_t *)W->tiles + (size_t)t * tile_bytes;
        for (int64_t c0 = 0; c0 < n; c0 += KQ4A_CHUNK) {
            const int nc = (int)(n - c0 < KQ4A_CHUNK ? n - c0 : KQ4A_CHUNK);
            /* 8 and 16 rows (the verifies) as constants: the row loop unrolled, I and M in registers */
            if (nc == KQ4A_X)
                kq4a_chunk(J, X, pk, j0, mt, c0, KQ4A_X);
            else if (nc == KQ4A_CHUNK)
                kq4a_chunk(J, X, pk, j0, mt, c0, KQ4A_CHUNK);
            else
                kq4a_chunk(J, X, pk, j0, mt, c0, nc);
        }
    }
    _tile_release();
}


void ms_qd_fill_avx512(qd_kernels *k) {
    k->quant_block = quantize_block_v;
    k->quant_super = quantize_super_v;
    k->t[MS_DTYPE_Q8_0].range = simd_range_q8_0;
    k->t[MS_DTYPE_Q5_0].range = simd_range_q5_0;
    k->t[MS_DTYPE_Q6_K].range = simd_range_q6_k;
    k->t[MS_DTYPE_Q4_K].tile = kq4_range;
    k->t[MS_DTYPE_Q5_0].tile = kq5_range;
    k->t[MS_DTYPE_Q4_0].tile = kq40_range;
    k->t[MS_DTYPE_Q6_K].tile = kq6_range;
    static const ms_dtype mine[] = {MS_DTYPE_Q8_0, MS_DTYPE_Q5_0, MS_DTYPE_Q6_K, MS_DTYPE_Q4_K, MS_DTYPE_Q4_0};
    for (int i = 0; i < 5; i++) k->t[mine[i]].path = "avx512vnni";
}

void ms_qd_fill_amx(qd_kernels *k) {
    k->t[MS_DTYPE_Q8_0].amx = amx_range_q8_0;
    k->t[MS_DTYPE_Q8_0].amx_min = k->t[MS_DTYPE_Q8_0].amx_min_unpacked = AMX_MIN_ROWS;
    k->t[MS_DTYPE_Q6_K].amx = amx_range_q6_k;
    k->t[MS_DTYPE_Q6_K].amx_min = AMX_MIN_ROWS_Q6K;
    k->t[MS_DTYPE_Q6_K].amx_min_unpacked = AMX_MIN_ROWS;
    k->t[MS_DTYPE_Q4_K].amx = kq4a_range;
    k->t[MS_DTYPE_Q4_K].amx_min = AMX_MIN_ROWS_Q4K;
    k->t[MS_DTYPE_Q4_K].amx_z = true;
    k->t[MS_DTYPE_Q8_0].path = k->t[MS_DTYPE_Q6_K].path = k->t[MS_DTYPE_Q4_K].path = "avx512vnni+amx";
}

#else
void ms_qd_fill_avx512(qd_kernels *k) { (void)k; }
void ms_qd_fill_amx(qd_kernels *k) { (void)k; }
#endif
