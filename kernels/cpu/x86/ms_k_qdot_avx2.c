/* ms_k_qdot_avx2.c — the quantized matmul on AVX2 + FMA + F16C (the
 * contract and the exact arithmetic: ms_qdot.h; the twin: ms_k_qdot_ref.c).
 *
 * The CPUs most users hold (AMD Zen 2/3, Intel client cores) have AVX2 and no
 * AVX-512. AVX2 has no byte dot product into 32-bit lanes (vpdpbusd); its
 * integer products are vpmaddubsw (unsigned byte × signed byte, adjacent
 * pairs summed into saturating int16) and vpmaddwd (int16 × int16, pairs into
 * int32). Every sum below is kept inside int16 where it is formed (the bound
 * is stated at each), so no saturation occurs and the block sums are the
 * twin's exact integers; the f32 steps are the twin's IEEE operations in the
 * twin's order (no fused multiply-add: GCC does not contract in ISO C mode,
 * clang is told in ms_k_qdot_int.h). So every output is the twin's bits, for
 * any n and thread split.
 *
 *   - Q4_K, Q6_K and Q5_0 over the tile layout (ms_qdot_pack): a 256-bit vector
 *     holds 8 weight rows (half of a tile of 16), so per x row a 4-byte quad
 *     of x is broadcast and one vpmaddubsw per quad forms the 8 rows' pair
 *     sums with no horizontal adds; each unpacked sub-block serves up to
 *     KQ2_NT (Q4_K) or KQ2_NT6 (Q6_K, Q5_0) x rows.
 *   - Q8_0, Q5_0, Q4_0, Q4_1, Q5_1 and Q5_K over the rows in place (also the
 *     rows variant that the MicroSpec window's draft head uses): a block's
 *     32 products in one
 *     vpmaddubsw + vpmaddwd, then 8 blocks' partial sums meet in one vector
 *     by three rounds of vphaddd (lane j = block j, the twin's lane), so no
 *     copy of the weights is needed.
 *   - the activation quantizer's twins (8 lanes a step; the same division,
 *     rounding add and clamp per element, so the same bytes).
 * F32, F16 and BF16 keep the twin (a block's f32 sum runs in element
 * order; no real model's matmuls read them).
 *
 * With Q2_VNNI = 1 (ms_k_qdot_avxvnni.c compiles this file again so) the
 * products use AVX-VNNI's 256-bit vpdpbusd (unsigned byte × signed byte,
 * quads summed into int32 lanes) and vpdpwssd (int16 pairs × int16 into
 * int32) where the CPU has them: one operation where vpmaddubsw, the int16
 * adds and vpmaddwd took two to three; the sums are the same integers
 * (bounds at each), so the bits are the same.
 */
#include "ms_k_qdot_int.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#ifndef Q2_VNNI
#define Q2_VNNI 0
#endif
#if Q2_VNNI
#define Q2 __attribute__((target("avx2,fma,f16c,avxvnni")))
#define Q2_FILL ms_qd_fill_avxvnni
#define Q2_PATH "avx2-vnni"
#else
#define Q2 __attribute__((target("avx2,fma,f16c")))
#define Q2_FILL ms_qd_fill_avx2
#define Q2_PATH "avx2"
#endif
#define Q2_INLINE static inline __attribute__((always_inline)) Q2

/* ---- the activation quantizer -------------------------------------------------- */

/* nearest-even(x/step) clamped to ±127, 8 lanes: q8_round's operations. */
Q2_INLINE __m256i q2_round8(__m256 x, float step) {
    __m256 v = _mm256_div_ps(x, _mm256_set1_ps(step));
    v = _mm256_sub_ps(_mm256_add_ps(v, _mm256_set1_ps(12582912.0f)), _mm256_set1_ps(12582912.0f));
    const __m256i q = _mm256_cvttps_epi32(v);
    return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
}

/* max|x| over 32 elements (exact: max is order-free); *finite &= all finite. */
Q2_INLINE float q2_amax32(const float *x, bool *finite) {
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)), inf = _mm256_set1_ps(INFINITY);
    __m256 a[4];
    int ok = 0xFF;
    for (int i = 0; i < 4; i++) {
        a[i] = _mm256_and_ps(_mm256_loadu_ps(x + 8 * i), absm);
        ok &= _mm256_movemask_ps(_mm256_cmp_ps(a[i], inf, _CMP_LT_OQ));
    }
    *finite = *finite && ok == 0xFF;
    const __m256 m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    return _mm_cvtss_f32(m4);
}

/* 32 elements at step (zero when !ok) to int8 at q; Σq. */
Q2_INLINE int32_t q2_put32(const float *x, float step, bool ok, int8_t *q) {
    __m256i v[4];
    for (int i = 0; i < 4; i++) v[i] = ok ? q2_round8(_mm256_loadu_ps(x + 8 * i), step) : _mm256_setzero_si256();
    /* |q| ≤ 127: the saturating packs are exact; they interleave 128-bit
     * lanes, which the dword permute puts back in element order */
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    return _mm_cvtsi128_si32(s4);
}

QD_QUANT_FNS(Q2, q2_quant_block, q2_quant_super, q2_amax32, q2_put32)

/* ---- helpers ---------------------------------------------------------------------- */

/* f16 in the low (hi = 0) or high half of each 32-bit lane, as f32. */
Q2_INLINE __m256 q2_f16_half(__m256i v, int hi) {
    v = hi ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08); /* exact: v ≤ 0xFFFF */
    return _mm256_cvtph_ps(_mm256_castsi256_si128(p));
}

/* Lanes l < n all ones (a mask for the last tile's rows). */
Q2_INLINE __m256i q2_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* x's 4-byte quad at p in every 32-bit lane. */
Q2_INLINE __m256i q2_quad(const int8_t *p) { return _mm256_set1_epi32((int)ld_u32((const uint8_t *)p)); }

#if Q2_VNNI
/* Σ_{q<4} W[q]·(x's quad q at xq) per 32-bit lane (vpdpbusd: u8 W, s8 x), exact in int32. */
Q2_INLINE __m256i q2_dot4(const __m256i *W, const int8_t *xq) {
    __m256i s = _mm256_setzero_si256();
    for (int q = 0; q < 4; q++) s = _mm256_dpbusd_avx_epi32(s, W[q], q2_quad(xq + 4 * q));
    return s;
}
#endif

/* lanes_reduce over 16 lanes held as lo (0-7) and hi (8-15): (l, l+8), then
 * (l, l+4), then (0+2) + (1+3). */
Q2_INLINE float q2_reduce16(__m256 lo, __m256 hi) {
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* y rows i0 .. i0 + nt − 1 at columns j0 .. j0 + mt − 1 (mt ≤ 8): the twin's
 * lane tree, per lane, over the 16 block accumulators acc[t] (+ bias). */
Q2_INLINE void q2_lanes_store(const qd_job *J, const __m256 (*acc)[GROUP], int64_t j0, int mt, int64_t i0, int nt) {
    const __m256i k = q2_lanes(mt);
    const __m256 bias = J->b ? _mm256_maskload_ps(J->b + j0, k) : _mm256_setzero_ps();
    for (int t = 0; t < nt; t++) {
        const __m256 *a = acc[t];
        __m256 s8[8], s4[4];
        for (int l = 0; l < 8; l++) s8[l] = _mm256_add_ps(a[l], a[l + 8]);
        for (int l = 0; l < 4; l++) s4[l] = _mm256_add_ps(s8[l], s8[l + 4]);
        __m256 v = _mm256_add_ps(_mm256_add_ps(s4[0], s4[2]), _mm256_add_ps(s4[1], s4[3]));
        if (J->b) v = _mm256_add_ps(v, bias);
        _mm256_maskstore_ps(J->y + (i0 + t) * J->ldy + j0, k, v);
    }
}

/* ---- Q4_K over the tile layout, 8 weight rows a vector ------------------------------
 *
 * Half hh of a tile: lane j = weight row 16t + 8hh + j, its words at byte
 * 32hh of each 64-byte slot. Per sub-block s of super-block S the 8 nibble
 * words are unpacked once; per x row, vpmaddubsw of word q with x's quad q
 * broadcast gives each row two int16 pair sums (|·| ≤ 2·15·127 = 3810), the
 * 8 quads added in int16 (≤ 30480 < 2^15), then one vpmaddwd by sc_s << e_s
 * (≤ 63·32 in both 16-bit halves of the lane) gives sc_s·sumi_s << e_s, the
 * twin's term of I, exactly; M += mn_s·sk_s (vpmulld). At the end of S the
 * twin's f32 term into acc[S mod 2]. */

/* x rows an unpack (build options): more rows spill I, M and the
 * accumulators to the stack, which costs less than unpacking again. One
 * thread on the Zen 4 VM, MS_ISA=avx2, ms per product (8960 x 1536): Q4_K
 * 8 rows 1.72 (4 an unpack) / 1.39 (8) / 1.41 (16), 16 rows 2.75 (8) / 2.42
 * (16), 6 rows 1.35 (4) / 1.15 (8); Q6_K 16 rows 3.60 (8) / 3.18 (16). */
#ifndef KQ2_NT
#define KQ2_NT 16
#endif
#ifndef KQ2_NT6
#define KQ2_NT6 16
#endif
enum { KQ4_WORDS2 = 36, KQ6_WORDS2 = 53 };
/* Software prefetch distance in the tile stream (bytes; 0: off), Q4_K and
 * Q6_K; build options. One thread on the Zen 4 VM, MS_ISA=avx2, a one-row
 * product from DRAM (GB/s of weights, 8960 x 1536 / 1536 x 8960): Q4_K off
 * 23.2-24.9 / 18.4-18.5, 4608 16.1-19.5 / 17.2; Q6_K 4608 20.2 / 19.7,
 * off 9.3 / 8.5, 2304 15.9 / 16.1, 9216 17.6 / 17.9. */
#ifndef KQ2_PF4
#define KQ2_PF4 0
#endif
#ifndef KQ2_PF4H
#define KQ2_PF4H 4608
#endif
#ifndef KQ2_PF6
#define KQ2_PF6 4608
#endif

/* Sub-block s's 6-bit scale (mn = 0) or min (mn = 1) of each lane's
 * super-block, from its scale words u0, u1, u2 (kq_scale_min, lane-wise). */
Q2_INLINE __m256i q2_kq4_scale(__m256i u0, __m256i u1, __m256i u2, int s, int mn) {
    const __m256i k63 = _mm256_set1_epi32(63), k15 = _mm256_set1_epi32(15), k3 = _mm256_set1_epi32(3);
    if (s < 4) return _mm256_and_si256(_mm256_srli_epi32(mn ? u1 : u0, 8 * s), k63);
    const int t = 8 * (s - 4);
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, t + 4 * mn), k15),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(mn ? u1 : u0, t + 6), k3), 4));
}

/* One half's super-block S (its words at u) against NT x rows from i0: the
 * twin's t_S of each row into acc[t][S mod 2]. pf: bytes ahead of u to
 * prefetch, spread over the sub-blocks (0: none). */
Q2_INLINE void kq4_super(const ms_q8_act *x, const uint8_t *u, int64_t S, int64_t i0, int NT, __m256 (*acc)[2],
                         int pf) {
    const int64_t g = ms_q8_groups(x->k);
    const size_t xs = (size_t)g * GROUP_Q;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i dd = _mm256_load_si256((const __m256i *)u);
    const __m256 d = q2_f16_half(dd, 0), dmin = q2_f16_half(dd, 1);
    const __m256i u0 = _mm256_load_si256((const __m256i *)(u + 64)), u1 = _mm256_load_si256((const __m256i *)(u + 128)),
                  u2 = _mm256_load_si256((const __m256i *)(u + 192));
    __m256i I[KQ2_NT], M[KQ2_NT];
    for (int t = 0; t < NT; t++) I[t] = M[t] = _mm256_setzero_si256();
    for (int sb = 0; sb < 8; sb++) {
        if (pf > 0) /* 36 lines a super-block, 5 a sub-block */
            for (int l = 0; l < 5; l++) _mm_prefetch((const char *)u + pf + 64 * (5 * sb + l), _MM_HINT_T0);
        /* qs[32p + l]: sub-block 2p in the low nibbles, 2p + 1 in the high */
        const uint8_t *wq = u + 64 * (size_t)(4 + 8 * (sb / 2));
        __m256i W[8];
        for (int q = 0; q < 8; q++) {
            const __m256i v = _mm256_load_si256((const __m256i *)(wq + 64 * q));
            W[q] = _mm256_and_si256(sb % 2 ? _mm256_srli_epi16(v, 4) : v, m4);
        }
        const __m256i sc = q2_kq4_scale(u0, u1, u2, sb, 0), mn = q2_kq4_scale(u0, u1, u2, sb, 1);
#if !Q2_VNNI
        const __m256i sc2 = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16)); /* sc in both 16-bit halves */
#endif
        for (int t = 0; t < NT; t++) {
            const int8_t *xq = x->qk + (size_t)(i0 + t) * xs + (size_t)(QK_K * S + QK * sb);
            const int64_t xb = (i0 + t) * g * GROUP + 8 * S + sb;
#if Q2_VNNI
            /* quads 0-3 and 4-7 apart, each |·| ≤ 16·15·127 = 30480 < 2^15: a lane's low 16 bits
             * hold it exactly, so vpdpwssd by sc << e_s in the low half (≤ 63·32; 0 in the high)
             * adds sc_s·sumi_s << e_s to I, the same integer */
            const __m256i scs = _mm256_sll_epi32(sc, _mm_cvtsi32_si128(x->ek[xb]));
            I[t] = _mm256_dpwssd_avx_epi32(_mm256_dpwssd_avx_epi32(I[t], q2_dot4(W, xq), scs), q2_dot4(W + 4, xq + 16),
                                           scs);
#else
            __m256i p[8];
            for (int q = 0; q < 8; q++) p[q] = _mm256_maddubs_epi16(W[q], q2_quad(xq + 4 * q));
            const __m256i s16 =
                _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3])),
                                 _mm256_add_epi16(_mm256_add_epi16(p[4], p[5]), _mm256_add_epi16(p[6], p[7])));
            const __m256i scs = _mm256_sll_epi32(sc2, _mm_cvtsi32_si128(x->ek[xb]));
            I[t] = _mm256_add_epi32(I[t], _mm256_madd_epi16(s16, scs));
#endif
            M[t] = _mm256_add_epi32(M[t], _mm256_mullo_epi32(mn, _mm256_set1_epi32(x->sk[xb])));
        }
    }
    for (int t = 0; t < NT; t++) {
        /* t_S = (d·uk)·(float)I − (dmin·uk)·(float)M */
        const __m256 dy = _mm256_set1_ps(x->uk[(i0 + t) * g * 2 + S]);
        const __m256 tI = _mm256_mul_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(I[t]));
        const __m256 tM = _mm256_mul_ps(_mm256_mul_ps(dmin, dy), _mm256_cvtepi32_ps(M[t]));
        acc[t][S % 2] = _mm256_add_ps(acc[t][S % 2], _mm256_sub_ps(tI, tM));
    }
}

/* y rows i0 .. i0 + nt − 1 at columns jc .. jc + mt8 − 1: acc[t][0] + acc[t][1] (+ bias). */
Q2_INLINE void kq4_store8(const qd_job *J, const __m256 (*acc)[2], int64_t jc, int mt8, int64_t i0, int NT) {
    const __m256i k = q2_lanes(mt8);
    const __m256 bias = J->b ? _mm256_maskload_ps(J->b + jc, k) : _mm256_setzero_ps();
    for (int t = 0; t < NT; t++) {
        __m256 v = _mm256_add_ps(acc[t][0], acc[t][1]);
        if (J->b) v = _mm256_add_ps(v, bias);
        _mm256_maskstore_ps(J->y + (i0 + t) * J->ldy + jc, k, v);
    }
}

/* NT x rows from i0 against the tile at pk (mt of its rows). One or two
 * rows (a one-row product streams the tile from memory): both halves a
 * super-block at a time, so the tile's lines come in once with all their
 * bytes used (a pass over each half in turn left the first bound by memory
 * at half the work a line). More rows, where the products bound the time:
 * each half over every super-block, its I and M in registers. NT is a
 * constant in each call, so the branch folds. n = 8 on the Zen 4 VM, one
 * thread, 8960 x 1536: 1.67 ms against 1.87 interleaved; n = 1 interleaved
 * 0.31-0.33 ms against 0.39-0.51. */
Q2_INLINE void kq4_tile(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    const ms_q8_act *x = J->x;
    const int64_t ns = x->k / QK_K;
    const size_t sb_bytes = (size_t)KQ4_WORDS2 * 64;
    const int nh = mt > 8 ? 2 : 1;
    __m256 acc[2][KQ2_NT][2];
    for (int hh = 0; hh < nh; hh++)
        for (int t = 0; t < NT; t++) acc[hh][t][0] = acc[hh][t][1] = _mm256_setzero_ps();
    if (NT <= 2) {
        for (int64_t S = 0; S < ns; S++)
            for (int hh = 0; hh < nh; hh++)
                kq4_super(x, pk + (size_t)S * sb_bytes + 32 * hh, S, i0, NT, acc[hh],
                          i0 == 0 && hh == 0 ? KQ2_PF4 : 0);
    } else {
        for (int hh = 0; hh < nh; hh++)
            for (int64_t S = 0; S < ns; S++)
                kq4_super(x, pk + (size_t)S * sb_bytes + 32 * hh, S, i0, NT, acc[hh],
                          i0 == 0 && hh == 0 ? KQ2_PF4H : 0);
    }
    for (int hh = 0; hh < nh; hh++)
        kq4_store8(J, (const __m256(*)[2])acc[hh], j0 + 8 * hh, mt - 8 * hh < 8 ? mt - 8 * hh : 8, i0, NT);
}

/* ---- Q6_K over the tile layout, 8 weight rows a vector ------------------------------
 *
 * Block (h, c) of a super-block (half h, c = 0..3) takes its quad q from ql
 * word 16h + 8(c % 2) + q (nibble c / 2) and qh word 32 + 8h + q (bits 2c):
 * unsigned q = 0..63, unpacked once for NT ≤ KQ2_NT6 x rows. Per x row:
 * vpmaddubsw per quad (|·| ≤ 2·63·127 = 16002), two quads added in int16
 * (≤ 32004 < 2^15), then vpmaddwd by sc₀ (quads 0-3) or sc₁ (4-7) in both
 * 16-bit halves: Σ_halves sc·Σ(q·x); the offset −32 enters as one vpmaddwd
 * of (sc₀, sc₁) with x's (−Σ_{e<16} x, −Σ_{e≥16} x) (the quantizer's h6p word,
 * one broadcast load), << 5. That is the twin's sumi = sc₀·lo + sc₁·hi exactly (< 2^24);
 * then term = (d·dx)·(float)sumi into accumulator b mod 16 (8·(S mod 2) + j),
 * the twin's order and tree. */

/* Int8 scale s (0..15) of each lane's super-block (byte s % 4 of its scale
 * word s / 4), sign-extended to int32. */
Q2_INLINE __m256i q2_kq6_scale(const __m256i sw[4], int s) {
    return _mm256_srai_epi32(_mm256_slli_epi32(sw[s / 4], 24 - 8 * (s % 4)), 24);
}

/* Q6_K's unsigned q (0..63) of block c (0..3) of a half, bytewise, from the
 * half's ql word of the quad (nibble c / 2) and its qh word (bits 2c). */
Q2_INLINE __m256i q2_q6_quad(__m256i ql, __m256i qh, int c) {
    const __m256i nib = c < 2 ? ql : _mm256_srli_epi16(ql, 4);
    const __m256i hb = c == 0   ? _mm256_slli_epi16(qh, 4)
                       : c == 1 ? _mm256_slli_epi16(qh, 2)
                       : c == 2 ? qh
                                : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(_mm256_and_si256(nib, _mm256_set1_epi8(0x0F)),
                           _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
}

/* NT x rows from i0 against the tile at pk (mt of its rows), both halves
 * per super-block (as kq4_tile for one or two rows). */
Q2_INLINE void kq6_tile2(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), ns = x->k / QK_K;
    const size_t xs = (size_t)g * GROUP_Q;
    const int nh = mt > 8 ? 2 : 1;
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    __m256 acc[2][KQ2_NT6][GROUP];
    for (int hh = 0; hh < nh; hh++)
        for (int t = 0; t < NT; t++)
            for (int l = 0; l < GROUP; l++) acc[hh][t][l] = _mm256_setzero_ps();
    for (int64_t S = 0; S < ns; S++) {
        for (int hh = 0; hh < nh; hh++) {
            const uint8_t *u = pk + (size_t)S * KQ6_WORDS2 * 64 + 32 * hh;
            const __m256 d = q2_f16_half(_mm256_load_si256((const __m256i *)(u + 64 * 52)), 1);
            __m256i sw[4];
            for (int w = 0; w < 4; w++) sw[w] = _mm256_load_si256((const __m256i *)(u + 64 * (48 + w)));
            for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    if (KQ2_PF6 > 0 && i0 == 0 && hh == 0) /* fetch ahead, spread (53 lines a super-block) */
                        for (int l = 0; l < 7; l++)
                            _mm_prefetch((const char *)pk + (size_t)S * KQ6_WORDS2 * 64 + KQ2_PF6 +
                                             64 * (7 * (4 * h + c) + l),
                                         _MM_HINT_T0);
                    __m256i W[8];
                    for (int q = 0; q < 8; q++)
                        W[q] = q2_q6_quad(_mm256_load_si256((const __m256i *)(u + 64 * (16 * h + 8 * (c % 2) + q))),
                                          _mm256_load_si256((const __m256i *)(u + 64 * (32 + 8 * h + q))), c);
                    const int j = 4 * h + c, lane = (int)(8 * (S % 2)) + j;
                    const __m256i sc0 = q2_kq6_scale(sw, 2 * j), sc1 = q2_kq6_scale(sw, 2 * j + 1);
#if !Q2_VNNI
                    const __m256i s0 = _mm256_or_si256(_mm256_and_si256(sc0, lo16), _mm256_slli_epi32(sc0, 16));
                    const __m256i s1 = _mm256_or_si256(_mm256_and_si256(sc1, lo16), _mm256_slli_epi32(sc1, 16));
#endif
                    const __m256i sp = _mm256_or_si256(_mm256_and_si256(sc0, lo16), _mm256_slli_epi32(sc1, 16));
                    for (int t = 0; t < NT; t++) {
                        const int64_t b = 8 * S + j, xb = (i0 + t) * g * GROUP + b;
                        const int8_t *xq = x->qp + (size_t)(i0 + t) * xs + (size_t)(QK * b);
#if Q2_VNNI
                        /* each half's Σ q·x by vpdpbusd (|·| ≤ 16·63·127 = 128016), times its
                         * scale by vpmulld: sc₀·lo + sc₁·hi, the same integer */
                        __m256i si = _mm256_add_epi32(_mm256_mullo_epi32(q2_dot4(W, xq), sc0),
                                                      _mm256_mullo_epi32(q2_dot4(W + 4, xq + 16), sc1));
#else
                        const __m256i la = _mm256_add_epi16(_mm256_maddubs_epi16(W[0], q2_quad(xq)),
                                                            _mm256_maddubs_epi16(W[1], q2_quad(xq + 4)));
                        const __m256i lb = _mm256_add_epi16(_mm256_maddubs_epi16(W[2], q2_quad(xq + 8)),
                                                            _mm256_maddubs_epi16(W[3], q2_quad(xq + 12)));
                        const __m256i ha = _mm256_add_epi16(_mm256_maddubs_epi16(W[4], q2_quad(xq + 16)),
                                                            _mm256_maddubs_epi16(W[5], q2_quad(xq + 20)));
                        const __m256i hb = _mm256_add_epi16(_mm256_maddubs_epi16(W[6], q2_quad(xq + 24)),
                                                            _mm256_maddubs_epi16(W[7], q2_quad(xq + 28)));
                        __m256i si = _mm256_add_epi32(
                            _mm256_add_epi32(_mm256_madd_epi16(la, s0), _mm256_madd_epi16(lb, s0)),
                            _mm256_add_epi32(_mm256_madd_epi16(ha, s1), _mm256_madd_epi16(hb, s1)));
#endif
                        /* −32·(sc₀·Σ_{e<16} x + sc₁·Σ_{e≥16} x) */
                        const __m256i off = _mm256_madd_epi16(sp, _mm256_set1_epi32(x->h6p[xb]));
                        si = _mm256_add_epi32(si, _mm256_slli_epi32(off, 5));
                        const __m256 term =
                            _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(x->d[xb])), _mm256_cvtepi32_ps(si));
                        acc[hh][t][lane] = _mm256_add_ps(acc[hh][t][lane], term);
                    }
                }
        }
    }
    for (int hh = 0; hh < nh; hh++)
        q2_lanes_store(J, (const __m256(*)[GROUP])acc[hh], j0 + 8 * hh, mt - 8 * hh < 8 ? mt - 8 * hh : 8, i0, NT);
}

QD_TILE_RANGE(Q2, kq4_range2, kq4_tile, KQ2_NT)
QD_TILE_RANGE(Q2, kq6_range2, kq6_tile2, KQ2_NT6)

/* ---- the 32-blocks over the rows in place -------------------------------------------
 *
 * Q8_0, Q5_0, Q4_0, Q4_1, Q5_1 and Q5_K (blocks of 32 by the twin's block
 * definition, ms_qdot.h). Per weight row and group of 16 blocks, each block's
 * 32 weights are unpacked once and applied to NT x rows (x in element order,
 * ms_q8_act.qp). Q8_0's signed weights: vpmaddubsw(|w|, sign(x, w)) (|·| ≤
 * 2·128·127 = 32512, no saturation); the others' unsigned q (≤ 31):
 * vpmaddubsw(q, x) (≤ 2·31·127), the offset of Q4_0 / Q5_0 (8, 16) taken off
 * as offset·s afterwards. vpmaddwd by ones then leaves 8 partial sums a
 * block, and three rounds of vphaddd put 8 blocks' exact sums in the lanes of
 * one vector (lane j = block 8h + j), where the twin's f32 term (its
 * multipliers a, m formed by the twin's own scalar products) and lane
 * accumulator follow. */

#ifndef Q2_PF
#define Q2_PF 2048
#endif

/* The 32 fifth bits of a block as bytes: 0x10 where bit e is set. */
Q2_INLINE __m256i q2_bits32(uint32_t h) {
    const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                         3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), sel); /* byte e: byte e / 8 of h */
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

/* 16 nibbles at qs as 32 bytes: low nibbles (elements 0-15), then high. */
Q2_INLINE __m256i q2_nibbles(const uint8_t *qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}

/* Bytes of one block in a row (Q5_K: of its super-block, 8 blocks). */
Q2_INLINE int q2_block_bytes(ms_dtype DT) {
    switch (DT) {
    case MS_DTYPE_Q8_0: return 34;
    case MS_DTYPE_Q5_0: return 22;
    case MS_DTYPE_Q4_0: return 18;
    case MS_DTYPE_Q4_1: return 20;
    case MS_DTYPE_Q5_1: return 24;
    default: return 176; /* Q5_K */
    }
}

/* Block b (< 16) of the group at base: its unsigned weight bytes (Q8_0:
 * its signed q); Q5_K also the twin's multipliers a (of sumi) and m (of the
 * x block sum), d·sc and dmin·mn by the twin's own scalar products (the
 * other formats' a and m are their f16 d and min, converted by F16C). */
Q2_INLINE __m256i q2_unpack(const uint8_t *base, int b, float *a, float *m, ms_dtype DT) {
    const int bb = q2_block_bytes(DT);
    if (DT == MS_DTYPE_Q5_K) { /* {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} */
        const uint8_t *p = base + (size_t)(b / 8) * 176;
        const int s = b % 8;
        int sc, mn;
        kq_scale_min(p + 4, s, &sc, &mn);
        *a = ld_f16(p) * (float)sc;
        *m = ld_f16(p + 2) * (float)mn;
        const __m256i q = _mm256_loadu_si256((const __m256i *)(p + 48 + 32 * (s / 2)));
        const __m256i nib = _mm256_and_si256(s % 2 ? _mm256_srli_epi16(q, 4) : q, _mm256_set1_epi8(0x0F));
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(p + 16)), s),
                                            _mm256_set1_epi8(1));
        return _mm256_or_si256(nib, _mm256_slli_epi16(hb, 4));
    }
    (void)a, (void)m;
    const uint8_t *p = base + (size_t)b * (size_t)bb;
    switch (DT) {
    case MS_DTYPE_Q5_0: return _mm256_or_si256(q2_nibbles(p + 6), q2_bits32(ld_u32(p + 2)));
    case MS_DTYPE_Q4_0: return q2_nibbles(p + 2);
    case MS_DTYPE_Q4_1: return q2_nibbles(p + 4);
    case MS_DTYPE_Q5_1: return _mm256_or_si256(q2_nibbles(p + 8), q2_bits32(ld_u32(p + 4)));
    default: return _mm256_loadu_si256((const __m256i *)(p + 2)); /* Q8_0: the signed q */
    }
}

/* The 8 block sums of v[0..7] (8 partial sums each), lane j = block j. */
Q2_INLINE __m256i q2_hsum8(const __m256i v[8]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    /* a's 128-bit lane L holds blocks 0-3's sums over lane L of each: add the lanes */
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* NT x rows from i0 against weight row wr (output column j). */
Q2_INLINE void q2_rows_tile(const qd_job *J, const uint8_t *wr, float bias, int64_t j, int64_t i0, int NT,
                            ms_dtype DT) {
    const ms_q8_act *x = J->x;
    const int64_t g = ms_q8_groups(x->k), nb = x->k / QK;
    const size_t gb = DT == MS_DTYPE_Q5_K ? 2 * 176 : (size_t)GROUP * (size_t)q2_block_bytes(DT);
    const bool with_min = DT == MS_DTYPE_Q4_1 || DT == MS_DTYPE_Q5_1 || DT == MS_DTYPE_Q5_K;
#if !Q2_VNNI
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    __m256 acc[TILE][2];
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    _Alignas(32) uint8_t wq[GROUP][32]; /* the group's blocks unpacked (Q8_0: read in place) */
    for (int64_t gi = 0; gi < g; gi++) {
        const int nv = (int)(nb - gi * GROUP < GROUP ? nb - gi * GROUP : GROUP);
        const uint8_t *base = wr + (size_t)gi * gb;
        if (Q2_PF > 0)
            for (size_t o = 0; o < gb; o += 64) _mm_prefetch((const char *)base + Q2_PF + o, _MM_HINT_T0);
        _Alignas(32) float av[GROUP] = {0}, mv[GROUP] = {0};
        if (DT != MS_DTYPE_Q5_K) { /* the f16 d (and min) of the group's blocks, lanes past nv zero */
            const int bb = q2_block_bytes(DT);
            _Alignas(16) uint16_t dh[GROUP] = {0}, mh[GROUP] = {0};
            for (int b = 0; b < nv; b++) dh[b] = ld_u16(base + (size_t)b * bb);
            for (int h = 0; h < 2; h++)
                _mm256_store_ps(av + 8 * h, _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dh + 8 * h))));
            if (with_min) {
                for (int b = 0; b < nv; b++) mh[b] = ld_u16(base + (size_t)b * bb + 2);
                for (int h = 0; h < 2; h++)
                    _mm256_store_ps(mv + 8 * h, _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(mh + 8 * h))));
            }
        }
        if (DT != MS_DTYPE_Q8_0)
            for (int b = 0; b < nv; b++)
                _mm256_store_si256((__m256i *)wq[b], q2_unpack(base, b, &av[b], &mv[b], DT));
        for (int t = 0; t < NT; t++) {
            const int64_t xr = (i0 + t) * g + gi;
            const int8_t *xq = x->qp + (size_t)xr * GROUP_Q;
            for (int h = 0; h < 2 && 8 * h < nv; h++) {
                __m256i v[8];
                for (int c = 0; c < 8; c++) {
                    const int b = 8 * h + c;
                    if (b >= nv) {
                        v[c] = _mm256_setzero_si256();
                        continue;
                    }
                    const __m256i X = _mm256_load_si256((const __m256i *)(xq + QK * b));
                    __m256i wu, xs8;
                    if (DT == MS_DTYPE_Q8_0) {
                        const __m256i w = _mm256_loadu_si256((const __m256i *)(base + (size_t)b * 34 + 2));
                        wu = _mm256_abs_epi8(w), xs8 = _mm256_sign_epi8(X, w);
                    } else {
                        wu = _mm256_load_si256((const __m256i *)wq[b]), xs8 = X;
                    }
#if Q2_VNNI
                    v[c] = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), wu, xs8);
#else
                    v[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(wu, xs8), ones);
#endif
                }
                __m256i sumi = q2_hsum8(v);
                const int64_t xi = xr * GROUP + 8 * h;
                const __m256i sx = _mm256_loadu_si256((const __m256i *)(x->s + xi));
                if (DT == MS_DTYPE_Q5_0) sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(sx, 4));
                if (DT == MS_DTYPE_Q4_0) sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(sx, 3));
                const __m256 dx = _mm256_loadu_ps(x->d + xi);
                __m256 term = _mm256_mul_ps(_mm256_mul_ps(_mm256_load_ps(av + 8 * h), dx), _mm256_cvtepi32_ps(sumi));
                if (with_min) {
                    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_load_ps(mv + 8 * h), dx), _mm256_cvtepi32_ps(sx));
                    term = DT == MS_DTYPE_Q5_K ? _mm256_sub_ps(term, u) : _mm256_add_ps(term, u);
                }
                acc[t][h] = _mm256_add_ps(acc[t][h], term);
            }
        }
    }
    for (int t = 0; t < NT; t++) {
        float v = q2_reduce16(acc[t][0], acc[t][1]);
        if (J->b) v += bias;
        J->y[(i0 + t) * J->ldy + j] = v;
    }
}

QD_ROWS_RANGE(Q2, q2_range_q8_0, q2_rows_tile, MS_DTYPE_Q8_0)
QD_ROWS_RANGE(Q2, q2_range_q5_0, q2_rows_tile, MS_DTYPE_Q5_0)
QD_ROWS_RANGE(Q2, q2_range_q4_0, q2_rows_tile, MS_DTYPE_Q4_0)
QD_ROWS_RANGE(Q2, q2_range_q4_1, q2_rows_tile, MS_DTYPE_Q4_1)
QD_ROWS_RANGE(Q2, q2_range_q5_1, q2_rows_tile, MS_DTYPE_Q5_1)
QD_ROWS_RANGE(Q2, q2_range_q5_k, q2_rows_tile, MS_DTYPE_Q5_K)

/* ---- Q5_0 and Q4_0 over the tile layout, 8 weight rows a vector -------------------
 *
 * The unit is a pair of blocks (2P, 2P + 1), 11 words for Q5_0 and 9 for
 * Q4_0 (ms_k_qdot_int.h): word 0 their two f16 d; per block h of Q5_0,
 * word 1 + 5h its fifth bits as 8 64-bit masks (mask q: bit 4j + i for row
 * j's byte i of quad q, so half hh is the 32 bits at byte 8q + 4hh:
 * q2_bits32 spreads them over the bytes), words 2 + 5h + q its qs bytes
 * 4q..4q + 3 (low nibbles: quad q, high: quad q + 4); Q4_0's qs words are
 * 1 + 4h + q. Per x row: vpmaddubsw per quad (Q5_0 ≤ 2·31·127 = 7874, four
 * quads added in int16 ≤ 31496, two vpmaddwd by ones; Q4_0 ≤ 2·15·127 =
 * 3810, all eight ≤ 30480, one), less 16·s (Q4_0: 8·s): the twin's sumi;
 * then (d·dx)·(float)sumi into accumulator b mod 16. Unpacking a block once
 * for 8 rows (Q5_0's fifth bits cost as much as its products) makes the
 * one-row product read at the memory's speed where the rows in place were
 * compute-bound (12-13 GB/s a thread). */

#ifndef KQ2_PF5
#define KQ2_PF5 0
#endif

/* NT x rows from i0 against the tile at pk (mt of its rows); DT Q5_0 or Q4_0. */
Q2_INLINE void kqp_tile2(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT, ms_dtype DT) {
    const ms_q8_act *x = J->x;
    const bool five = DT == MS_DTYPE_Q5_0;
    const int64_t g = ms_q8_groups(x->k), nb = x->k / QK;
    const size_t xs = (size_t)g * GROUP_Q;
    const int nh = mt > 8 ? 2 : 1, words = pack_words(DT), bw = pair_block_words(DT);
    const int32_t off = five ? 16 : 8;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
#if !Q2_VNNI
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    __m256 acc[2][KQ2_NT6][GROUP];
    for (int hh = 0; hh < nh; hh++)
        for (int t = 0; t < NT; t++)
            for (int l = 0; l < GROUP; l++) acc[hh][t][l] = _mm256_setzero_ps();
    for (int64_t P = 0; 2 * P < nb; P++) {
        const uint8_t *u = pk + (size_t)P * words * 64;
        if (KQ2_PF5 > 0 && i0 == 0)
            for (int l = 0; l < words; l++) _mm_prefetch((const char *)u + KQ2_PF5 + 64 * l, _MM_HINT_T0);
        for (int hh = 0; hh < nh; hh++) {
            const __m256i dd = _mm256_load_si256((const __m256i *)(u + 32 * hh));
            for (int h = 0; h < 2 && 2 * P + h < nb; h++) {
                const int64_t b = 2 * P + h;
                const __m256 d = q2_f16_half(dd, h);
                const uint8_t *wb = u + 64 * (size_t)(1 + bw * h), *qs = five ? wb + 64 : wb;
                __m256i W[8];
                for (int q = 0; q < 4; q++) {
                    const __m256i v = _mm256_load_si256((const __m256i *)(qs + 64 * q + 32 * hh));
                    W[q] = _mm256_and_si256(v, m4);
                    W[q + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if (five) {
                        W[q] = _mm256_or_si256(W[q], q2_bits32(ld_u32(wb + 8 * q + 4 * hh)));
                        W[q + 4] = _mm256_or_si256(W[q + 4], q2_bits32(ld_u32(wb + 8 * (q + 4) + 4 * hh)));
                    }
                }
                for (int t = 0; t < NT; t++) {
                    const int8_t *xq = x->qp + (size_t)(i0 + t) * xs + (size_t)(QK * b);
#if Q2_VNNI
                    const __m256i sum = _mm256_add_epi32(q2_dot4(W, xq), q2_dot4(W + 4, xq + 16));
#else
                    __m256i p[8];
                    for (int q = 0; q < 8; q++) p[q] = _mm256_maddubs_epi16(W[q], q2_quad(xq + 4 * q));
                    const __m256i s1 = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]));
                    const __m256i s2 = _mm256_add_epi16(_mm256_add_epi16(p[4], p[5]), _mm256_add_epi16(p[6], p[7]));
                    const __m256i sum = five ? _mm256_add_epi32(_mm256_madd_epi16(s1, ones), _mm256_madd_epi16(s2, ones))
                                             : _mm256_madd_epi16(_mm256_add_epi16(s1, s2), ones);
#endif
                    const int64_t xb = (i0 + t) * g * GROUP + b;
                    const __m256i sumi = _mm256_sub_epi32(sum, _mm256_set1_epi32(off * x->s[xb]));
                    const __m256 term =
                        _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(x->d[xb])), _mm256_cvtepi32_ps(sumi));
                    acc[hh][t][b % GROUP] = _mm256_add_ps(acc[hh][t][b % GROUP], term);
                }
            }
        }
    }
    for (int hh = 0; hh < nh; hh++)
        q2_lanes_store(J, (const __m256(*)[GROUP])acc[hh], j0 + 8 * hh, mt - 8 * hh < 8 ? mt - 8 * hh : 8, i0, NT);
}

Q2_INLINE void kq5_tile2(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    kqp_tile2(J, pk, j0, mt, i0, NT, MS_DTYPE_Q5_0);
}
Q2_INLINE void kq40_tile2(const qd_job *J, const uint8_t *pk, int64_t j0, int mt, int64_t i0, int NT) {
    kqp_tile2(J, pk, j0, mt, i0, NT, MS_DTYPE_Q4_0);
}

QD_TILE_RANGE(Q2, kq5_range2, kq5_tile2, KQ2_NT6)
QD_TILE_RANGE(Q2, kq40_range2, kq40_tile2, KQ2_NT6)

void Q2_FILL(qd_kernels *k) {
    k->quant_block = q2_quant_block;
    k->quant_super = q2_quant_super;
    k->t[MS_DTYPE_Q8_0].range = q2_range_q8_0;
    k->t[MS_DTYPE_Q5_0].range = q2_range_q5_0;
    k->t[MS_DTYPE_Q4_0].range = q2_range_q4_0;
    k->t[MS_DTYPE_Q4_1].range = q2_range_q4_1;
    k->t[MS_DTYPE_Q5_1].range = q2_range_q5_1;
    k->t[MS_DTYPE_Q5_K].range = q2_range_q5_k;
    k->t[MS_DTYPE_Q4_K].tile = kq4_range2;
    k->t[MS_DTYPE_Q6_K].tile = kq6_range2;
    k->t[MS_DTYPE_Q5_0].tile = kq5_range2;
    k->t[MS_DTYPE_Q4_0].tile = kq40_range2;
    static const ms_dtype mine[] = {MS_DTYPE_Q8_0, MS_DTYPE_Q5_0, MS_DTYPE_Q4_0, MS_DTYPE_Q4_1,
                                    MS_DTYPE_Q5_1, MS_DTYPE_Q5_K, MS_DTYPE_Q6_K, MS_DTYPE_Q4_K};
    for (int i = 0; i < 8; i++) k->t[mine[i]].path = Q2_PATH;
}

#elif Q2_VNNI
void ms_qd_fill_avxvnni(qd_kernels *k) { (void)k; }
#else
void ms_qd_fill_avx2(qd_kernels *k) { (void)k; }
#endif
