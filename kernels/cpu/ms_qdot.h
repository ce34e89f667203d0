/* ms_qdot.h — quantized matmul with 8-bit activations (ggml's vec_dot with
 * q8 activations): y[n, m] = x[n, k] · Wᵀ with W in its stored block format
 * (ms_qweight.h) and x quantized once to int8 blocks of 32. Internal to
 * kernels/: callers reach it through the backend table (ms_k_backend.h:
 * ms_k_act is ms_q8_act, act_quantize, linear with xq, linear_multi,
 * linear_rows, pack).
 *
 * Activations. Each x row is cut into blocks of 32 elements; block b gets one
 * f32 scale d_b = max|x|/127 and int8 q = round(x/d_b) (|q| ≤ 127), and the
 * block sum s_b = Σq (used by the formats with mins or offsets). One layout
 * for every weight type — K-quant super-blocks of 256 are 8 blocks — so a row
 * is quantized once and read by every matmul on the same x.
 *
 * Layout of one row: blocks in groups of 16 (512 elements), the row padded
 * to whole groups with q = 0, d = 0, s = 0. Within group G the 8 four-byte
 * quads of the 16 blocks are stored transposed:
 *     q[row_q·r + 512·G + 64·t + 4·j + i] = q of element 32·(16G + j) + 4t + i
 * (t = quad 0..7, j = block in group 0..15, i = 0..3), so one 64-byte vector
 * holds quad t of 16 blocks, one block per 32-bit lane: a VNNI dot product
 * (vpdpbusd) then sums each block in its own lane with no horizontal add.
 * d and s are [n][16·groups], block order. qp holds the same q in plain
 * element order (row stride 512·groups), for the AMX path below; qa the
 * same q in pairs of blocks, for one-row products over Q8_0 / Q5_0: in
 * group G, 64-byte vector i holds [block a(i) | block a(i) + 4] with
 * a(i) = i (i < 4) or i + 4 (i ≥ 4), the order the weights load in.
 *
 * The result (the scalar twin ms_qdot_linear_ref is the specification; the
 * SIMD path equals it bit for bit). For x row r and weight row j:
 *     acc[16] = +0
 *     for each block b:  acc[b mod 16] += term_b          (f32, in order of b)
 *     y[r, j] = ((a0+a8)+(a4+a12) + (a2+a10)+(a6+a14)) + (odd lanes alike)
 *               — the pairwise tree of ms_q_linear — then + bias[j]
 * with sumi_b = Σ_e wq_e · q_e exact in int32 (wq the weight integers) and
 *     Q8_0, Q4_0, Q5_0:   term = (dw·dx)·sumi            (wq = q, q−8, q−16)
 *     Q4_1, Q5_1:         term = (dw·dx)·sumi + (mw·dx)·s  (wq = unsigned q)
 *     Q5_K:               term = (dsc·dx)·sumi − (dmn·dx)·s, dsc = d·sc, dmn = dmin·mn
 *     Q6_K:               term = (d·dx)·sumi, sumi = sc₀·Σ(e<16) + sc₁·Σ(e≥16), wq = q−32
 *     F32, F16, BF16:     term = dx·Σ_e w_e·q_e  (f32, e in order)
 * every product and sum rounded to f32 on its own (no fused multiply-add).
 * All int sums are below 2^24, so converting them to f32 is exact.
 *
 * Q4_K reads the activations scaled per super-block instead (as ggml's
 * Q8_K, with power-of-two steps per 32-block): where k is a multiple of
 * 256, each x row is also quantized per super-block S — unit uk_S =
 * (max|x|/127)/32; 32-block b gets the step uk_S·2^e_b, e_b = 5 − j_b, j_b
 * the largest j ≤ 5 with max_b|x|·2^j ≤ max|x| (beside an outlier a block
 * of small values keeps up to 32x finer steps), qk = round(x/step) (|qk| ≤
 * 127) and sk_b = (Σ_{e∈b} qk) << e_b. With q the unsigned nibbles and sc,
 * mn the 6-bit sub-block scales and mins of the weight's super-block S:
 *     I_S = Σ_{s<8} (sc_s · Σ_{e∈8S+s} q_e·qk_e) << e_s  (int32, exact, < 2^30)
 *     M_S = Σ_{s<8} mn_s · sk_{8S+s}                    (int32, exact, < 2^27)
 *     t_S = (d·uk_S)·(float)I_S − (dmin·uk_S)·(float)M_S
 *     acc[S mod 2] += t_S,    y[r, j] = acc[0] + acc[1] (+ bias[j])
 * ((float) rounds to nearest even). The sub-block scales multiply exact
 * integers, so a super-block costs one f32 term instead of eight: this is
 * what makes a product of several x rows cheap on VNNI (below).
 *
 * Batch and thread invariance: y[r, j] is a function of x row r and weight
 * row j only, in one fixed order, so a row's result is bitwise the same
 * alone or among n rows and for any pool thread count; the SIMD paths
 * apply each unpacked weight block to several x rows (up to 8 on the
 * row-major path; 6 for Q4_K and Q5_0, 16 for Q6_K on the tile layout)
 * without changing any row's arithmetic; the tile-layout paths
 * (ms_qdot_pack) put 16 weight rows in the lanes of a vector for any n,
 * Q4_K's per-super-block terms in the twin's order. Where the CPU has
 * AMX-INT8 (and the kernel grants the tile data), Q8_0 products of n ≥ 8 rows and Q6_K of n ≥ 65 (packed;
 * unpacked n ≥ 8) take their block sums from AMX tiles (16 x rows × 16
 * weight rows a tile product, each weight block unpacked once for all n
 * rows), and so do Q4_K products of n ≥ 5
 * rows (8 x rows × 16 weight rows × a pair of 32-blocks a tile product,
 * over the zero-padded A rows in qz; the sub-block sums combined in 16-bit
 * lanes, exactly); the sums are the same integers and the f32
 * steps the same operations in the same order, so every path gives the
 * same bits. MS_ISA=avx512 in the environment keeps to AVX-512 VNNI.
 *
 * Instruction sets (one file each under kernels/cpu/, chosen once through
 * the table in ms_k_qdot.c, capped by MS_ISA: ms_isa.h): AVX2 (+FMA, F16C),
 * the same with AVX-VNNI, AVX-512 VNNI, AMX; ARM NEON, dotprod, i8mm. Each
 * gives the twin's bits.
 *
 * Accuracy: versus the f32 ms_q_linear the difference is the activation
 * rounding, |Δy| ≤ Σ_b (d_b/2)·Σ_{e∈b}|W_e| (plus f32 rounding); about 0.5 %
 * relative (rms) on Gaussian x.
 */
#ifndef MS_QDOT_H
#define MS_QDOT_H

#include "ms_k_backend.h"
#include "ms_quant.h"

/* Elements per activation block; blocks per group (see the layout above). */
enum { MS_Q8_BLOCK = 32, MS_Q8_GROUP = 16 };

/* Quantized activations. Owns q, d, s when made by ms_q8_act_alloc. The
 * struct is the backend table's opaque ms_k_act (ms_k_backend.h). */
struct ms_k_act {
    int64_t n, k;       /* rows and elements a row, of the last ms_q8_quantize */
    int64_t cap_groups; /* capacity: rows × groups a row, summed */
    int8_t *q;          /* [n][512·groups(k)], the transposed layout above (64-byte aligned) */
    int8_t *qa;         /* [n][512·groups(k)], the same q in the pair layout above (64-byte aligned) */
    int8_t *qp;         /* [n][512·groups(k)], the same q in element order (q of element e at e):
                         * the AMX path's row tiles; room for n rounded up to 16 rows */
    float *d;           /* [n][16·groups(k)] block scales */
    int32_t *s;         /* [n][16·groups(k)] block sums Σq */
    int32_t *h6;        /* [n][16·groups(k)][2] per block, −32 × the sum of each 16-element half,
                         * −32·Σ_{e<16} q and −32·Σ_{e≥16} q: where Q6_K's VNNI path starts its
                         * halves' sums (its two 16-element scales need them apart; read from
                         * memory, the start is a broadcast load, not a vector ALU operation) */
    int32_t *h6p;       /* [n][16·groups(k)] the same two sums ÷ 32 as int16 halves of one word (low:
                         * −Σ_{e<16} q, high: −Σ_{e≥16} q; |·| ≤ 2032): the AVX2 Q6_K path's
                         * one vpmaddwd against its two scales, from a broadcast load */
    bool has_b;         /* the last quantize filled the block form above (q, qa, qp, d, s, h6, h6p) */
    /* The per-super-block form (Q4_K), made when k is a multiple of 256: */
    bool has_k;         /* the last ms_q8_quantize filled qk, dk, sk */
    int8_t *qk;         /* [n][512·groups(k)] qk in element order (row stride 512·groups) */
    float *uk;          /* [n][2·groups(k)] super-block units */
    int32_t *ek;        /* [n][16·groups(k)] 32-block step exponents e_b (0..5) */
    int32_t *sk;        /* [n][16·groups(k)] 32-block sums of qk, << e_b */
    /* The AMX Q4_K path's operands, made by ms_q8_quantize where that path
     * runs (the CPU has AMX-INT8, n ≥ its minimum, k whole super-blocks):
     * per pair P of 32-blocks (elements 64P..64P+63) and row r < nz, two
     * 64-byte tile rows, [qk of block 2P | 32 zeros] and [32 zeros | qk of
     * block 2P + 1], at qz + (P·nz + r)·128; nz = n rounded up to 8 (rows
     * past n zero). */
    bool has_z;
    int64_t nz;
    int8_t *qz;         /* room for [2·16·groups(k)][max_n rounded up to 8][128] */
    int32_t *zw;        /* [n][k/64][2]: pair P's words of two 16-bit halves (block 2P low, 2P + 1
                         * high): 2^e_b (a 16-bit multiply by it, not a variable shift); 8·Q_b,
                         * Q_b = Σ_{e∈b} qk = sk_b >> e_b */
};
typedef struct ms_k_act ms_q8_act;

/* Groups of 16 blocks a row of k elements takes (k a multiple of 32). */
int64_t ms_q8_groups(int64_t k);
/* Buffers for up to max_n rows of max_k elements (sized once at load). */
ms_status ms_q8_act_alloc(ms_q8_act *a, int64_t max_n, int64_t max_k);
void ms_q8_act_free(ms_q8_act *a);

/* Quantize x[n, k] (k a multiple of 32) row by row into a; deterministic
 * (q = nearest-even of x·(1/d), clamped to ±127). MS_ASSERTs capacity. A
 * block with a non-finite element gets d = NaN (its outputs are NaN). */
void ms_q8_quantize(ms_q8_act *a, const float *x, int64_t n, int64_t k);
/* The forms of a quantized x a product reads: the blocks of 32 (q, qa, qp,
 * d, s, h6: every dtype but Q4_K) and the per-super-block form (qk, uk,
 * ek, sk, and qz, zw where the AMX Q4_K path runs: Q4_K). */
enum { MS_Q8_BLOCKS = 1, MS_Q8_SUPER = 2, MS_Q8_ALL = 3 };
int ms_q8_forms(const ms_qweight *w);
/* ms_q8_quantize making only `forms` (the others are marked absent, and a
 * product that needs one MS_ASSERTs): each form's bytes are those
 * ms_q8_quantize makes. A matmul whose weights read one form (Q4_K's o,
 * gate, up) skips the other's work. */
void ms_q8_quantize_forms(ms_q8_act *a, const float *x, int64_t n, int64_t k, int forms);

/* y[n, m] = x · Wᵀ (+ b[m] when b != NULL), n = x->n, w->k == x->k; output
 * rows split over the pool (ms_pool.h). y must not alias x. */
void ms_qdot_linear(float *y, const ms_q8_act *x, const ms_qweight *w, const float *b);
/* Several products of the same x in one pool round (q, k, v; gate, up):
 * outs[i].y [n, outs[i].w->m] = x · outs[i].wᵀ (+ outs[i].b), each exactly
 * as ms_qdot_linear computes it (the same bits), with one wait for the
 * threads instead of one per product. 1 ≤ count ≤ MS_QDOT_MULTI_MAX. */
enum { MS_QDOT_MULTI_MAX = MS_K_LINEAR_MULTI_MAX };
typedef ms_k_linear_out ms_qdot_out; /* the backend's linear_multi passes its outs through */
void ms_qdot_linear_multi(const ms_qdot_out *outs, int count, const ms_q8_act *x);
/* The same over a subset of W's rows: y[n, n_rows], column j = row rows[j]. */
void ms_qdot_linear_rows(float *y, const ms_q8_act *x, const ms_qweight *w, const int32_t *rows, int64_t n_rows);

/* The scalar twins: the specification above, one thread, no SIMD. */
void ms_qdot_linear_ref(float *y, const ms_q8_act *x, const ms_qweight *w, const float *b);
void ms_qdot_linear_rows_ref(float *y, const ms_q8_act *x, const ms_qweight *w, const int32_t *rows,
                             int64_t n_rows);

/* The AMX tile layout. The AMX path builds each tile product's B operand
 * from 16 weight rows; read from the rows in place that is a 16-lane
 * gather per 32-bit word, which costs more than the tile products of a
 * small batch. ms_qdot_pack copies W's blocks once into w->tiles in the
 * order the path reads them: per tile of 16 weight rows (the last padded
 * with zero rows), per unit (a K-quant super-block, a Q8_0 block), per
 * 32-bit word of the unit's ggml layout that the path reads, 64 bytes —
 * that word of the 16 rows, row j in bytes 4j..4j+3. The values read are
 * the same, so the results are the same bits with or without it (the
 * tests check both). It is made where the active instruction-set level
 * (ms_isa.h) reads it: Q4_K and Q6_K at every SIMD level (AVX2 and NEON
 * put 8 or 4 of a tile's rows in a vector, AVX-512 all 16), Q5_0 where
 * AVX-512 VNNI runs, Q8_0 where AMX does. Those paths read the tile layout
 * for every n, one row included (no transpose, no horizontal sums, so the
 * one-row product reads at the memory's speed); Q5_0's unit is a pair of
 * blocks, its fifth bits stored as byte masks. An unpacked weight takes
 * the row-major path of its level (Q4_K on x86: the scalar twin).
 * Elsewhere w->tiles stays NULL. The copy is as large as the weight (Q8_0
 * 6 %, Q6_K 1 % larger); single-row Q8_0 products keep reading w->data.
 * Free with ms_qdot_pack_free. */
ms_status ms_qdot_pack(ms_qweight *w);
void ms_qdot_pack_free(ms_qweight *w);
/* Bytes ms_qdot_pack would allocate for w (0 where it makes none). */
size_t ms_qdot_pack_bytes(const ms_qweight *w);

/* The path ms_qdot_linear takes for dtype at the active instruction-set
 * level (ms_isa.h): "avx512vnni+amx", "avx512vnni", "avx2-vnni", "avx2", "neon",
 * "neon-dotprod", "neon-i8mm" or "scalar" (the twin, threaded), for tests
 * and reports (the level itself: ms_isa_name(ms_isa_active())). */
const char *ms_qdot_path(ms_dtype dtype);

#endif
