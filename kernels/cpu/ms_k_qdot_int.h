/* ms_k_qdot_int.h — what the quantized-matmul files share (ms_qdot.h is the
 * contract): block constants, the scalar helpers of the activation
 * quantizer, one product's job, the tile layout of ms_qdot_pack, and the
 * kernel table each instruction set fills.
 *
 * Files: ms_k_qdot.c (activations, packing, dispatch), ms_k_qdot_ref.c (the
 * scalar twins: the specification), x86/ms_k_qdot_avx2.c, x86/ms_k_qdot_avx512.c
 * (AVX-512 VNNI and AMX), arm/ms_k_qdot_neon.c. Adding an instruction set is
 * a file with a fill function and a line in ms_k_qdot.c's table of them.
 */
#ifndef MS_K_QDOT_INT_H
#define MS_K_QDOT_INT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ms_isa.h"
#include "ms_k_blockio.h"
#include "ms_pool.h"
#include "ms_qdot.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

enum { QK = 32, QK_K = 256, GROUP = MS_Q8_GROUP, GROUP_Q = 32 * MS_Q8_GROUP, TILE = 8, GRAIN = 32 };
/* From this many x rows on, Q6_K and Q8_0 take the AMX path where the
 * CPU has it (below: the VNNI path, faster there: an AMX tile product costs
 * the same for 1 row as for 16, and each block's C tile goes through memory;
 * the results are the same either way). Measured on the 1.5B at 2 threads
 * when Q4_K took it too
 * (forward cost in decode steps, VNNI / AMX): 4 rows 1.12 / 1.28, 8 rows
 * 1.57 / 1.57, 16 rows 3.0 / 2.45 (results/gguf/ops-2026-11-24b.md). */
#ifndef AMX_MIN_ROWS
#define AMX_MIN_ROWS 8
#endif
/* From this many x rows on, Q4_K takes its AMX path (below: "Q4_K on
 * AMX") where the CPU has it; fewer rows stay on its VNNI path, which
 * unpacks a weight tile once for 4 rows. A 1536 x 8960 / 8960 x 1536
 * product at 2 threads on the Intel VM (ms, AMX / VNNI): 4 rows 0.42-0.44 /
 * 0.37-0.39, 5 rows 0.47-0.49 / 0.51-0.55, 8 rows 0.59-0.61 / 0.74-0.78. */
#ifndef AMX_MIN_ROWS_Q4K
#define AMX_MIN_ROWS_Q4K 5
#endif
/* A packed Q6_K weight stays on its VNNI path (6 x rows an unpack) below
 * this many rows: its AMX path's products have K = 16, and a 32768 x 1536
 * product at 2 threads on the Intel VM (ms, min of 6-8 alternating runs,
 * VNNI / AMX) measured 8 rows 2.30 / 2.69, 12 rows 3.46 / 4.25, 13 rows
 * 4.44 / 4.51, 14 rows 4.51 / 3.86, 16 rows 5.43 / 4.79; again with 8
 * rows an unpack (KQ6_NT): 9 rows 3.13 / 3.59, 12 rows 3.22 / 3.65, 13
 * rows 3.63 / 3.50, 16 rows 5.17 / 4.59. With the VNNI path's half sums
 * started by broadcast loads (h6) and the AMX finish's FMA (1 thread, min of
 * 8 alternating rounds; 2 threads alike): 16 rows 7.41 / 8.15 (2 threads
 * 4.21 / 5.10), 32 rows 15.8 / 16.0 (8.02 / 10.8), 64 rows (2 threads)
 * 18.6 / 19.6, 128 rows 48.0 / 39.8: VNNI up to a 64-row batch, AMX beyond.
 * Unpacked Q6_K (no VNNI tile path) keeps AMX_MIN_ROWS. */
#ifndef AMX_MIN_ROWS_Q6K
#define AMX_MIN_ROWS_Q6K 65
#endif

/* Where block j of a group starts in the pair layout (ms_qdot.h: qa). */
static inline int pair_offset(int j) { return 64 * (j % 4 + 4 * (j / 8)) + 32 * ((j / 4) % 2); }

/* nearest-even(x/step) clamped to ±127 (the 1.5·2^23 add rounds in f32 for
 * |v| < 2^22); 0 where !ok. */
static inline int q8_round(float x, float step, bool ok) {
    if (!ok) return 0;
    float v = x / step;
    v = (v + 12582912.0f) - 12582912.0f;
    const int q = (int)v;
    return q > 127 ? 127 : q < -127 ? -127 : q;
}

/* j of a 32-block (ms_qdot.h): the largest j ≤ 5 with bmax·2^j ≤ amax
 * (the products by powers of two are exact). */
static inline int super_j(float bmax, float amax) {
    int j = 0;
    while (j < 5 && bmax * (float)(2 << j) <= amax) j++;
    return j;
}

/* The fixed tree over the 16 lane accumulators (as in ms_q_linear). */
static inline float lanes_reduce(const float *a) {
    float s8[8], s4[4];
    for (int l = 0; l < 8; l++) s8[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) s4[l] = s8[l] + s8[l + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* One call's work: output columns [0, m_out), column j = weight row rows[j]
 * (rows == NULL: row j), y row stride ldy. */
typedef struct {
    float *y;
    int64_t ldy;
    const ms_q8_act *x;
    const ms_qweight *w;
    const float *b;
    const int32_t *rows;
} qd_job;

static inline const uint8_t *job_wrow(const qd_job *J, int64_t j, int64_t *r_out) {
    const int64_t r = J->rows ? J->rows[j] : j;
    MS_ASSERT(r >= 0 && r < J->w->m);
    *r_out = r;
    return (const uint8_t *)J->w->data + (size_t)r * J->w->row_bytes;
}

/* ---- the tile layout (ms_qdot.h: ms_qdot_pack) --------------------------
 *
 * The 32-bit words of a unit the AMX prep reads, in slot order: Q4_K all 36
 * of its 144 bytes (slot = offset/4); Q6_K the 52 at offsets 0..204 and, in
 * slot 52, the one at 206 (its d in the high half); Q8_0 the one at 0 (d in
 * the low half) and the 8 quads at 2 + 4q (slots 1..8).
 *
 * Q5_0's unit is a pair of blocks (2P, 2P + 1; a missing last block of an
 * odd count is zeros), 11 slots (kq5_tile reads them): slot 0 lane j = the
 * two f16 d, block 2P's in the low half; then per block h, slot 1 + 5h holds
 * its fifth bits as eight 64-bit masks (mask q: bit 4j + i = the high bit of
 * row j's element 4q + i for q < 4, of 16 + 4(q − 4) + i above — the bytes
 * of the unpacked vector it completes), slots 2 + 5h + q lane j = its qs
 * bytes 4q..4q + 3 — 22 bytes a row and block, as stored. Q4_0's unit is
 * the same without the masks: 9 slots, slot 0 the two d, slots 1 + 4h + q
 * block h's qs bytes 4q..4q + 3 (18 bytes a row and block). */

enum { KQ5_WORDS = 11, KQ40_WORDS = 9 };

static inline int pack_words(ms_dtype dt) {
    switch (dt) {
    case MS_DTYPE_Q4_K: return 36;
    case MS_DTYPE_Q6_K: return 53;
    case MS_DTYPE_Q8_0: return 9;
    case MS_DTYPE_Q5_0: return KQ5_WORDS;
    case MS_DTYPE_Q4_0: return KQ40_WORDS;
    default: return 0;
    }
}
/* Slots of one block of a pair-of-blocks unit: its masks (Q5_0) and qs. */
static inline int pair_block_words(ms_dtype dt) { return dt == MS_DTYPE_Q5_0 ? 5 : 4; }
/* Elements of one unit: the dtype's block, two of them for Q5_0 and Q4_0. */
static inline int64_t pack_unit(ms_dtype dt) {
    return dt == MS_DTYPE_Q5_0 || dt == MS_DTYPE_Q4_0 ? 2 * QK : ms_dtype_block(dt);
}
static inline int pack_slot(ms_dtype dt, size_t off) {
    if (dt == MS_DTYPE_Q8_0) return off == 0 ? 0 : (int)((off - 2) / 4) + 1;
    if (dt == MS_DTYPE_Q6_K && off == 206) return 52;
    return (int)(off / 4);
}
static inline size_t pack_off(ms_dtype dt, int slot) {
    if (dt == MS_DTYPE_Q8_0) return slot == 0 ? 0 : 2 + 4 * (size_t)(slot - 1);
    if (dt == MS_DTYPE_Q6_K && slot == 52) return 206;
    return 4 * (size_t)slot;
}
/* Bytes of one tile of 16 rows in the packed layout. */
static inline size_t pack_tile_bytes(const ms_qweight *w) {
    const int64_t e = pack_unit(w->dtype);
    return (size_t)((w->k + e - 1) / e) * (size_t)pack_words(w->dtype) * 64;
}

/* ---- the activation quantizer over a level's two primitives -------------------
 *
 * QD_QUANT_FNS defines BLOCK and SUPER with the contracts of the twins'
 * quantize_block and quantize_super (ms_k_qdot_ref.c) from a level's
 * AMAX32(x, &finite) (max|x| of 32 elements, finite &= all finite) and
 * PUT32(x, step, ok, q) (the 32 q = nearest-even(x/step) clamped to ±127 at
 * q, zeros when !ok; returns Σq, the twin's per-element operations): the
 * rest (scales, step exponents, the layouts' copies) is the twin's own
 * arithmetic, written once here. ATTR: the level's target attribute. */
#define QD_QUANT_FNS(ATTR, BLOCK, SUPER, AMAX32, PUT32)                                               \
    ATTR static void BLOCK(const float *xb, int8_t *qg, int8_t *qag, int j, int8_t *qp, float *d, int32_t *s) { \
        bool finite = true;                                                                           \
        const float amax = AMAX32(xb, &finite);                                                       \
        const float dd = finite ? amax / 127.0f : NAN;                                                \
        *s = PUT32(xb, dd, finite && dd > 0.0f, qp);                                                  \
        memcpy(qag + pair_offset(j), qp, QK);                                                         \
        for (int t = 0; t < 8; t++) memcpy(qg + 64 * t + 4 * j, qp + 4 * t, 4);                      \
        *d = dd;                                                                                      \
    }                                                                                                 \
    ATTR static void SUPER(const float *xs, int8_t *qk, float *uk, int32_t *ek, int32_t *sk) {        \
        float amax = 0.0f, bmax[QK_K / QK];                                                           \
        bool finite = true;                                                                           \
        for (int b = 0; b < QK_K / QK; b++) {                                                         \
            bmax[b] = AMAX32(xs + QK * b, &finite);                                                   \
            amax = bmax[b] > amax ? bmax[b] : amax;                                                   \
        }                                                                                             \
        const float dd = finite ? amax / 127.0f : NAN;                                                \
        *uk = dd / 32.0f;                                                                             \
        for (int b = 0; b < QK_K / QK; b++) {                                                         \
            const int jb = super_j(bmax[b], amax);                                                    \
            const float step = dd * (1.0f / (float)(1 << jb)); /* = uk·2^(5 − j), exact */            \
            const int32_t sum = PUT32(xs + QK * b, step, finite && step > 0.0f, qk + QK * b);         \
            ek[b] = finite ? 5 - jb : 0;                                                              \
            sk[b] = sum * (1 << ek[b]);                                                               \
        }                                                                                             \
    }

/* ---- range functions a path file instantiates -------------------------------
 *
 * QD_TILE_RANGE: tiles [t0, t1) of 16 weight rows (the tile layout) against
 * all x rows in passes of NTMAX, then one of 8 where 8 or more are left, then
 * the rest; TILE(J, pk, j0, mt, i0, nt) is the path's tile kernel, nt a
 * constant in each call. QD_ROWS_RANGE: output columns [j0, j1) (weight rows
 * in place, J->rows honoured) against x rows in passes of up to TILE (8);
 * ROW(J, wr, bias, j, i0, nt, DT) the path's kernel. ATTR: the path's target
 * attribute. */
#define QD_TILE_CASE(k, TILE, NTMAX) \
    case k: TILE(J, pk, j0, mt, i0, (k) < (NTMAX) ? (k) : (NTMAX)); break;
#define QD_TILE_RANGE(ATTR, NAME, TILE, NTMAX)                                         \
    ATTR static void NAME(void *arg, int64_t t0, int64_t t1) {                         \
        const qd_job *J = arg;                                                         \
        const ms_qweight *W = J->w;                                                    \
        const int64_t n = J->x->n;                                                     \
        const size_t tile_bytes = pack_tile_bytes(W);                                  \
        for (int64_t t = t0; t < t1; t++) {                                            \
            const int64_t j0 = 16 * t;                                                 \
            const int mt = (int)(W->m - j0 < 16 ? W->m - j0 : 16);                    \
            const uint8_t *pk = (const uint8_t *)W->tiles + (size_t)t * tile_bytes;    \
            for (int64_t i0 = 0; i0 < n;) {                                            \
                const int64_t rem = n - i0;                                            \
                const int nt = (int)(rem >= (NTMAX) ? (NTMAX) : rem >= 8 ? 8 : rem);   \
                switch (nt) {                                                          \
                    QD_TILE_CASE(1, TILE, NTMAX)                                       \
                    QD_TILE_CASE(2, TILE, NTMAX)                                       \
                    QD_TILE_CASE(3, TILE, NTMAX)                                       \
                    QD_TILE_CASE(4, TILE, NTMAX)                                       \
                    QD_TILE_CASE(5, TILE, NTMAX)                                       \
                    QD_TILE_CASE(6, TILE, NTMAX)                                       \
                    QD_TILE_CASE(7, TILE, NTMAX)                                       \
                    QD_TILE_CASE(8, TILE, NTMAX)                                       \
                default: TILE(J, pk, j0, mt, i0, (NTMAX)); break;                      \
                }                                                                      \
                i0 += nt;                                                              \
            }                                                                          \
        }                                                                              \
    }
#define QD_ROWS_RANGE(ATTR, NAME, ROW, DT)                                             \
    ATTR static void NAME(void *arg, int64_t j0, int64_t j1) {                         \
        const qd_job *J = arg;                                                         \
        const int64_t n = J->x->n;                                                     \
        for (int64_t j = j0; j < j1; j++) {                                            \
            int64_t r;                                                                 \
            const uint8_t *wr = job_wrow(J, j, &r);                                    \
            const float bias = J->b ? J->b[r] : 0.0f;                                  \
            for (int64_t i0 = 0; i0 < n; i0 += TILE) {                                 \
                switch (n - i0 < TILE ? n - i0 : TILE) {                               \
                case 1: ROW(J, wr, bias, j, i0, 1, DT); break;                         \
                case 2: ROW(J, wr, bias, j, i0, 2, DT); break;                         \
                case 3: ROW(J, wr, bias, j, i0, 3, DT); break;                         \
                case 4: ROW(J, wr, bias, j, i0, 4, DT); break;                         \
                case 5: ROW(J, wr, bias, j, i0, 5, DT); break;                         \
                case 6: ROW(J, wr, bias, j, i0, 6, DT); break;                         \
                case 7: ROW(J, wr, bias, j, i0, 7, DT); break;                         \
                default: ROW(J, wr, bias, j, i0, 8, DT); break;                        \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }

/* ---- the kernel table -------------------------------------------------------
 *
 * One row per dtype of what an instruction set provides; ms_k_qdot.c starts
 * from the scalar twins and lets each level the active ISA includes fill in
 * its rows, lowest first, so a higher level overrides only what it does
 * better. The quantizer's functions write the same bytes at every level. */

/* One 32-element activation block (quantize_block's contract, ms_k_qdot_ref.c). */
typedef void (*qd_quant_block_fn)(const float *xb, int8_t *qg, int8_t *qag, int j, int8_t *qp, float *d, int32_t *s);
/* One super-block into the per-super-block form (quantize_super's contract). */
typedef void (*qd_quant_super_fn)(const float *xs, int8_t *qk, float *uk, int32_t *ek, int32_t *sk);

typedef struct {
    ms_pool_fn range;         /* over weight rows in place (items: output columns; the rows variant too) */
    ms_pool_fn tile;          /* over the tile layout (items: tiles of 16 weight rows), any n; NULL: none */
    ms_pool_fn amx;           /* AMX over tiles of 16 weight rows; NULL: none */
    int64_t amx_min;          /* amx runs from this many x rows on a packed weight ... */
    int64_t amx_min_unpacked; /* ... and on one in place (0: never) */
    bool amx_z;               /* amx reads the activations' qz (made at quantize from amx_min rows) */
    const char *path;         /* what ms_qdot_path reports ("avx2", "avx512vnni+amx", ...); NULL: "scalar" */
} qd_paths;

typedef struct {
    qd_quant_block_fn quant_block;
    qd_quant_super_fn quant_super;
    qd_paths t[MS_DTYPE_COUNT];
} qd_kernels;

/* The scalar twins (ms_k_qdot_ref.c). */
void ms_qd_ref_quant_block(const float *xb, int8_t *qg, int8_t *qag, int j, int8_t *qp, float *d, int32_t *s);
void ms_qd_ref_quant_super(const float *xs, int8_t *qk, float *uk, int32_t *ek, int32_t *sk);
void ms_qd_ref_range(void *arg, int64_t j0, int64_t j1);
/* MS_ASSERTs that the twin reads dtype. */
void ms_qd_ref_check(ms_dtype dt);

/* Each instruction set's rows (a file each; a no-op where not compiled). */
void ms_qd_fill_avx2(qd_kernels *k);
void ms_qd_fill_avxvnni(qd_kernels *k);
void ms_qd_fill_avx512(qd_kernels *k);
void ms_qd_fill_amx(qd_kernels *k);
void ms_qd_fill_neon(qd_kernels *k, ms_isa level);

#endif
