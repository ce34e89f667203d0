/* ms_k_qdot.c — quantized matmul with 8-bit activations (contract, layout
 * and the exact per-element arithmetic: ms_qdot.h): the activation buffers
 * and quantizer, the tile layout's packing, and the dispatch.
 *
 * The kernels come from a table (ms_k_qdot_int.h: qd_kernels), one row per
 * dtype: the scalar twins (ms_k_qdot_ref.c) first, then each instruction
 * set the active level includes (ms_isa.h) fills in what it does faster,
 * lowest first — AVX2 (x86/ms_k_qdot_avx2.c; again with AVX-VNNI's
 * vpdpbusd: x86/ms_k_qdot_avxvnni.c), AVX-512 VNNI and AMX
 * (x86/ms_k_qdot_avx512.c), NEON (arm/ms_k_qdot_neon.c). Every entry
 * computes the twin's bits, so the choice changes only the speed.
 */
#include <stdlib.h>
#include <string.h>

#include "ms_k_qdot_int.h"

/* ---- the kernel table --------------------------------------------------------- */

static qd_kernels g_tables[MS_ISA_COUNT];
static int g_built[MS_ISA_COUNT];

static void build(qd_kernels *k, ms_isa isa) {
    memset(k, 0, sizeof *k);
    k->quant_block = ms_qd_ref_quant_block;
    k->quant_super = ms_qd_ref_quant_super;
    for (int t = 0; t < MS_DTYPE_COUNT; t++) k->t[t].range = ms_qd_ref_range;
    if (ms_isa_includes(isa, MS_ISA_AVX2)) ms_qd_fill_avx2(k);
    if (ms_isa_includes(isa, MS_ISA_AVXVNNI)) ms_qd_fill_avxvnni(k);
    if (ms_isa_includes(isa, MS_ISA_AVX512)) ms_qd_fill_avx512(k);
    if (ms_isa_includes(isa, MS_ISA_AMX)) ms_qd_fill_amx(k);
    if (ms_isa_includes(isa, MS_ISA_NEON)) ms_qd_fill_neon(k, isa);
}

/* The table of the active level, built on first use (called from the
 * thread that drives the kernels, never from pool workers). */
static const qd_kernels *kernels(void) {
    const ms_isa isa = ms_isa_active();
    if (!__atomic_load_n(&g_built[isa], __ATOMIC_ACQUIRE)) {
        build(&g_tables[isa], isa);
        __atomic_store_n(&g_built[isa], 1, __ATOMIC_RELEASE);
    }
    return &g_tables[isa];
}

/* ---- activations ------------------------------------------------------------ */

int64_t ms_q8_groups(int64_t k) {
    MS_ASSERT(k >= 0 && k % QK == 0);
    return (k / QK + GROUP - 1) / GROUP;
}

ms_status ms_q8_act_alloc(ms_q8_act *a, int64_t max_n, int64_t max_k) {
    MS_ASSERT(a && max_n >= 0);
    memset(a, 0, sizeof(*a));
    const int64_t g = ms_q8_groups(max_k);
    size_t cap, qb, fb;
    if (!ms_mul_size((size_t)max_n, (size_t)g, &cap) || !ms_mul_size(cap, GROUP_Q, &qb) ||
        !ms_mul_size(cap, GROUP * sizeof(float), &fb))
        return MS_ERR_RANGE;
    if (qb == 0) qb = fb = 64;
    /* qp: room for the rows of any k ≤ max_k rounded up to a whole AMX tile
     * of 16 rows (the rows past n are read by a tile load, never used) */
    size_t pb;
    if (!ms_mul_size((size_t)g, 16 * GROUP_Q, &pb) || pb > SIZE_MAX - qb) return MS_ERR_RANGE;
    pb += qb;
    a->q = aligned_alloc(64, qb);
    a->qa = aligned_alloc(64, qb);
    a->qp = aligned_alloc(64, pb);
    a->h6 = aligned_alloc(64, 2 * fb);
    a->h6p = aligned_alloc(64, fb);
    if (a->qp) memset(a->qp, 0, pb);
    a->d = aligned_alloc(64, fb);
    a->s = aligned_alloc(64, fb);
    a->qk = aligned_alloc(64, qb);
    a->uk = aligned_alloc(64, fb); /* 2 a group where d has 16 */
    a->ek = aligned_alloc(64, fb);
    a->sk = aligned_alloc(64, fb);
    /* qz: 2 bytes an element, for max_n rounded up to 8 rows */
    size_t zb;
    if (!ms_mul_size(((size_t)max_n + 7) / 8 * 8, (size_t)g * 2 * GROUP_Q, &zb)) zb = 0;
    a->qz = aligned_alloc(64, zb ? zb : 64);
    a->zw = aligned_alloc(64, zb ? zb / 16 : 64); /* 8 bytes a pair of 64 elements */
    if (!a->q || !a->qa || !a->qp || !a->d || !a->s || !a->h6 || !a->h6p || !a->qk || !a->uk || !a->ek || !a->sk ||
        !a->qz || !a->zw) {
        MS_LOG_ERROR("out of memory allocating q8 activations (%lld rows of %lld)", (long long)max_n,
                     (long long)max_k);
        ms_q8_act_free(a);
        return MS_ERR_NOMEM;
    }
    a->cap_groups = (int64_t)cap;
    return MS_OK;
}

void ms_q8_act_free(ms_q8_act *a) {
    if (!a) return;
    free(a->q);
    free(a->qa);
    free(a->qp);
    free(a->h6);
    free(a->h6p);
    free(a->d);
    free(a->s);
    free(a->qk);
    free(a->uk);
    free(a->ek);
    free(a->sk);
    free(a->qz);
    free(a->zw);
    memset(a, 0, sizeof(*a));
}

typedef struct {
    ms_q8_act *a;
    const float *x;
    int64_t g, nb, k;
    bool z; /* also the AMX Q4_K path's A tiles (a->qz, a->nz) */
    const qd_kernels *K;
} quant_job;

/* Items [i0, i1) of a quantize: item i = group i % g of row i / g. */
static void quant_range(void *arg, int64_t i0, int64_t i1) {
    const quant_job *J = arg;
    ms_q8_act *a = J->a;
    const int64_t g = J->g, nb = J->nb, k = J->k;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = i / g, G = i % g;
        int8_t *qg = a->q + (size_t)i * GROUP_Q, *qag = a->qa + (size_t)i * GROUP_Q;
        int8_t *pr = a->qp + (size_t)(r * g) * GROUP_Q;
        float *dr = a->d + r * g * GROUP;
        int32_t *hr = a->h6 + 2 * r * g * GROUP, *hp = a->h6p + r * g * GROUP;
        int32_t *sr = a->s + r * g * GROUP;
        for (int64_t b = G * GROUP; b < (G + 1) * GROUP; b++) {
            const int j = (int)(b % GROUP);
            if (b < nb) {
                J->K->quant_block(J->x + r * k + b * QK, qg, qag, j, pr + b * QK, &dr[b], &sr[b]);
                int32_t h = 0;
                for (int e = 0; e < QK / 2; e++) h += pr[b * QK + e];
                hr[2 * b] = -32 * h;
                hr[2 * b + 1] = -32 * (sr[b] - h);
                hp[b] = (int32_t)((uint32_t)(uint16_t)(int16_t)-h | (uint32_t)(uint16_t)(int16_t)(h - sr[b]) << 16);
            } else { /* padding: contributes +0 to its lane */
                for (int t = 0; t < 8; t++) memset(qg + 64 * t + 4 * j, 0, 4);
                memset(qag + pair_offset(j), 0, QK);
                memset(pr + b * QK, 0, QK);
                dr[b] = 0.0f;
                sr[b] = 0;
                hr[2 * b] = hr[2 * b + 1] = hp[b] = 0;
            }
        }
    }
}

/* Row r's tile rows of super-block S (its qk at qs, step exponents and
 * shifted sums at ek, sk) into a->qz and its pair words into a->zw
 * (ms_qdot.h): per pair P = 4S + p, [qk of block 2P | 0] and [0 | qk of
 * block 2P + 1]; Q_b = sk_b >> e_b, exact (sk_b = Q_b << e_b). */
static void put_z(ms_q8_act *a, int64_t r, int64_t S, const int8_t *qs, const int32_t *ek, const int32_t *sk) {
    for (int p = 0; p < 4; p++) {
        int8_t *z = a->qz + ((size_t)(4 * S + p) * (size_t)a->nz + (size_t)r) * 128;
        memcpy(z, qs + 64 * p, QK);
        memset(z + QK, 0, 2 * QK);
        memcpy(z + 3 * QK, qs + 64 * p + QK, QK);
        const int b = 2 * p;
        int32_t *w = a->zw + ((size_t)r * (size_t)(a->k / 64) + (size_t)(4 * S + p)) * 2;
        w[0] = (int32_t)((uint32_t)1 << ek[b] | (uint32_t)1 << (ek[b + 1] + 16));
        /* 8·Q_b: |8·Q| ≤ 8·32·127 fits 16 bits */
        w[1] = (int32_t)((uint32_t)(uint16_t)(8 * (sk[b] >> ek[b])) |
                         (uint32_t)(uint16_t)(8 * (sk[b + 1] >> ek[b + 1])) << 16);
    }
}

/* Rows [r0, r1) into the per-super-block form. */
static void quant_k_range(void *arg, int64_t r0, int64_t r1) {
    const quant_job *J = arg;
    ms_q8_act *a = J->a;
    const int64_t g = J->g, k = J->k, ns = k / QK_K;
    for (int64_t r = r0; r < r1; r++) {
        int8_t *qr = a->qk + (size_t)(r * g) * GROUP_Q;
        float *ur = a->uk + r * g * 2;
        int32_t *er = a->ek + r * g * GROUP, *sr = a->sk + r * g * GROUP;
        for (int64_t S = 0; S < 2 * g; S++) {
            if (S < ns) {
                J->K->quant_super(J->x + r * k + S * QK_K, qr + S * QK_K, &ur[S], &er[8 * S], &sr[8 * S]);
                if (J->z) put_z(a, r, S, qr + S * QK_K, &er[8 * S], &sr[8 * S]);
            } else { /* padding of the last group */
                memset(qr + S * QK_K, 0, QK_K);
                ur[S] = 0.0f;
                for (int b = 0; b < 8; b++) er[8 * S + b] = sr[8 * S + b] = 0;
            }
        }
    }
}

int ms_q8_forms(const ms_qweight *w) {
    MS_ASSERT(w);
    return w->dtype == MS_DTYPE_Q4_K ? MS_Q8_SUPER : MS_Q8_BLOCKS;
}

void ms_q8_quantize(ms_q8_act *a, const float *x, int64_t n, int64_t k) { ms_q8_quantize_forms(a, x, n, k, MS_Q8_ALL); }

void ms_q8_quantize_forms(ms_q8_act *a, const float *x, int64_t n, int64_t k, int forms) {
    MS_ASSERT(a && n >= 0 && (x || n == 0) && forms >= 1 && forms <= MS_Q8_ALL);
    const int64_t g = ms_q8_groups(k), nb = k / QK;
    MS_ASSERT(g == 0 || n <= a->cap_groups / g);
    a->n = n;
    a->k = k;
    /* groups are independent: split over the pool (a row's bytes do not
     * depend on the split) */
    const qd_kernels *K = kernels();
    quant_job J = {.a = a, .x = x, .g = g, .nb = nb, .k = k, .K = K};
    a->has_b = forms & MS_Q8_BLOCKS;
    if (a->has_b) ms_pool_run(quant_range, &J, n * g, 8);
    a->has_k = k % QK_K == 0 && (forms & MS_Q8_SUPER);
    const qd_paths *q4 = &K->t[MS_DTYPE_Q4_K];
    a->has_z = a->has_k && q4->amx && q4->amx_z && n >= q4->amx_min;
    a->nz = a->has_z ? (n + 7) / 8 * 8 : 0;
    J.z = a->has_z;
    if (a->has_z) /* the padding rows of qz: zero */
        for (int64_t P = 0; P < k / 64; P++)
            memset(a->qz + ((size_t)P * (size_t)a->nz + (size_t)n) * 128, 0, (size_t)(a->nz - n) * 128);
    if (a->has_k) ms_pool_run(quant_k_range, &J, n, 1);
}

/* ---- the tile layout (ms_qdot_pack) ------------------------------------------ */

/* Tiles [t0, t1) of ms_qdot_pack's copy. */
typedef struct {
    const ms_qweight *w;
    uint8_t *out;
} pack_job;

/* Q5_0 or Q4_0: unit P of tile t (the layout above) into o (11 or 9 slots
 * of 64 bytes). */
static void pack_pair_unit(const ms_qweight *w, int64_t t, int64_t P, uint8_t *o) {
    const bool five = w->dtype == MS_DTYPE_Q5_0;
    const int bw = pair_block_words(w->dtype);
    memset(o, 0, (size_t)pack_words(w->dtype) * 64);
    const int64_t nb = w->k / QK;
    for (int j = 0; j < 16 && 16 * t + j < w->m; j++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)(16 * t + j) * w->row_bytes;
        for (int h = 0; h < 2 && 2 * P + h < nb; h++) {
            const uint8_t *blk = row + (size_t)(2 * P + h) * ms_dtype_block_bytes(w->dtype);
            memcpy(o + 4 * j + 2 * h, blk, 2); /* d */
            uint8_t *bo = o + 64 * (1 + bw * h);
            if (five) {
                const uint32_t qh = ld_u32(blk + 2);
                for (int q = 0; q < 8; q++)
                    for (int i = 0; i < 4; i++) {
                        const int e = q < 4 ? 4 * q + i : 16 + 4 * (q - 4) + i, bit = 4 * j + i;
                        if ((qh >> e) & 1u) bo[8 * q + bit / 8] |= (uint8_t)(1u << (bit % 8));
                    }
                bo += 64;
            }
            const uint8_t *qs = blk + (five ? 6 : 2);
            for (int q = 0; q < 4; q++) memcpy(bo + 64 * q + 4 * j, qs + 4 * q, 4);
        }
    }
}

static void pack_range(void *arg, int64_t t0, int64_t t1) {
    const pack_job *P = arg;
    const ms_qweight *w = P->w;
    const int words = pack_words(w->dtype);
    const int64_t units = (w->k + pack_unit(w->dtype) - 1) / pack_unit(w->dtype);
    const size_t unit_bytes = ms_dtype_block_bytes(w->dtype);
    for (int64_t t = t0; t < t1; t++) {
        uint8_t *o = P->out + (size_t)t * pack_tile_bytes(w);
        for (int64_t u = 0; u < units; u++) {
            if (pack_unit(w->dtype) == 2 * QK) {
                pack_pair_unit(w, t, u, o);
                o += (size_t)words * 64;
                continue;
            }
            for (int s = 0; s < words; s++, o += 64)
                for (int j = 0; j < 16; j++) {
                    const int64_t r = 16 * t + j;
                    if (r < w->m)
                        memcpy(o + 4 * j,
                               (const uint8_t *)w->data + (size_t)r * w->row_bytes + (size_t)u * unit_bytes +
                                   pack_off(w->dtype, s),
                               4);
                    else memset(o + 4 * j, 0, 4);
                }
        }
    }
}

size_t ms_qdot_pack_bytes(const ms_qweight *w) {
    MS_ASSERT(w);
    /* packed where this level reads the tile layout (a tile or AMX path) */
    const qd_paths *p = &kernels()->t[w->dtype];
    const bool tiled = pack_words(w->dtype) > 0 && (p->tile || p->amx);
    if (!tiled || w->m == 0) return 0;
    return (size_t)((w->m + 15) / 16) * pack_tile_bytes(w);
}

ms_status ms_qdot_pack(ms_qweight *w) {
    MS_ASSERT(w && !w->tiles);
    const size_t bytes = ms_qdot_pack_bytes(w);
    if (bytes == 0) return MS_OK;
    uint8_t *p = aligned_alloc(64, bytes);
    if (!p) {
        MS_LOG_ERROR("out of memory packing a %lld x %lld %s weight into the tile layout (%zu bytes)", (long long)w->m,
                     (long long)w->k, ms_dtype_name(w->dtype), bytes);
        return MS_ERR_NOMEM;
    }
    pack_job P = {.w = w, .out = p};
    ms_pool_run(pack_range, &P, (w->m + 15) / 16, 16);
    w->tiles = p;
    return MS_OK;
}

void ms_qdot_pack_free(ms_qweight *w) {
    if (!w) return;
    free((void *)w->tiles);
    w->tiles = NULL;
}

const char *ms_qdot_path(ms_dtype dtype) {
    MS_ASSERT(dtype >= 0 && dtype < MS_DTYPE_COUNT);
    const char *p = kernels()->t[dtype].path;
    return p ? p : "scalar";
}

static void check_args(const float *y, const ms_q8_act *x, const ms_qweight *w) {
    MS_ASSERT(y && x && w && x->n >= 0);
    MS_ASSERT(x->k == w->k && ms_q_supported(w->dtype));
    MS_ASSERT((const void *)y != (const void *)x->q && (const void *)y != (const void *)x->d);
    MS_ASSERT(ms_q8_forms(w) == MS_Q8_SUPER ? x->has_k : x->has_b); /* the form its product reads was made */
    ms_qd_ref_check(w->dtype);
}

/* How ms_qdot_linear runs one product: the range function, its work items
 * (weight rows, or tiles of 16 rows on the AMX paths) and the grain. */
typedef struct {
    qd_job J;
    ms_pool_fn fn;
    int64_t items, grain;
} qd_plan;

static qd_plan plan_of(float *y, const ms_q8_act *x, const ms_qweight *w, const float *b) {
    check_args(y, x, w);
    qd_plan p = {.J = {.y = y, .ldy = w->m, .x = x, .w = w, .b = b, .rows = NULL}};
    const qd_paths *P = &kernels()->t[w->dtype];
    const int64_t amx_min = w->tiles ? P->amx_min : P->amx_min_unpacked;
    if (P->amx && amx_min > 0 && x->n >= amx_min && (!P->amx_z || x->has_z)) { /* 16 weight rows a tile */
        p.fn = P->amx;
        p.items = (w->m + 15) / 16;
        p.grain = P->amx_z ? 2 : 1;
    } else if (w->tiles && P->tile) { /* the tile layout: 16 weight rows a vector */
        p.fn = P->tile;
        p.items = (w->m + 15) / 16;
        p.grain = 2;
    } else {
        p.fn = P->range;
        p.items = w->m;
        p.grain = GRAIN;
    }
    return p;
}

void ms_qdot_linear(float *y, const ms_q8_act *x, const ms_qweight *w, const float *b) {
    qd_plan p = plan_of(y, x, w, b);
    if (x->n > 0) ms_pool_run(p.fn, &p.J, p.items, p.grain);
}

/* The products of ms_qdot_linear_multi: part t of the pool's split runs part
 * t of every product's own split (the one ms_qdot_linear would make), so
 * each product keeps its balance and all of them cost one pool round. */
typedef struct {
    qd_plan p[MS_QDOT_MULTI_MAX];
    int count, parts;
} qd_multi;

static void multi_range(void *arg, int64_t t0, int64_t t1) {
    const qd_multi *M = arg;
    for (int64_t t = t0; t < t1; t++)
        for (int i = 0; i < M->count; i++) {
            const qd_plan *p = &M->p[i];
            int64_t parts = (p->items + p->grain - 1) / p->grain;
            if (parts > M->parts) parts = M->parts;
            if (t >= parts) continue;
            const int64_t b = p->items * t / parts, e = p->items * (t + 1) / parts;
            if (e > b) p->fn((void *)&p->J, b, e);
        }
}

void ms_qdot_linear_multi(const ms_qdot_out *outs, int count, const ms_q8_act *x) {
    MS_ASSERT(outs && count >= 1 && count <= MS_QDOT_MULTI_MAX);
    qd_multi M = {.count = count, .parts = ms_pool_chunks()};
    for (int i = 0; i < count; i++) M.p[i] = plan_of(outs[i].y, x, outs[i].w, outs[i].b);
    if (x->n > 0) ms_pool_run(multi_range, &M, M.parts, 1);
}

void ms_qdot_linear_rows(float *y, const ms_q8_act *x, const ms_qweight *w, const int32_t *rows, int64_t n_rows) {
    check_args(y, x, w);
    MS_ASSERT(rows && n_rows >= 0);
    qd_job J = {.y = y, .ldy = n_rows, .x = x, .w = w, .b = NULL, .rows = rows};
    if (x->n > 0) ms_pool_run(kernels()->t[w->dtype].range, &J, n_rows, GRAIN);
}

void ms_qdot_linear_ref(float *y, const ms_q8_act *x, const ms_qweight *w, const float *b) {
    check_args(y, x, w);
    qd_job J = {.y = y, .ldy = w->m, .x = x, .w = w, .b = b, .rows = NULL};
    ms_qd_ref_range(&J, 0, w->m);
}

void ms_qdot_linear_rows_ref(float *y, const ms_q8_act *x, const ms_qweight *w, const int32_t *rows,
                             int64_t n_rows) {
    check_args(y, x, w);
    MS_ASSERT(rows && n_rows >= 0);
    qd_job J = {.y = y, .ldy = n_rows, .x = x, .w = w, .b = NULL, .rows = rows};
    ms_qd_ref_range(&J, 0, n_rows);
}
