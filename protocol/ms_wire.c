/* ms_wire.c — MessagePack encoding and strict decoding of the link messages.
 *
 * Encoding uses msgpack-c's packer writing straight into the caller's
 * ms_wire_buf. Decoding is a small pull reader over the frame bytes instead of
 * msgpack_unpack: msgpack-c's C unpacker allocates n·sizeof(msgpack_object)
 * for an array as soon as it reads the array's header, so a 5-byte frame
 * announcing 2^32-1 entries would make it allocate ~100 GB. Here every count
 * is checked against the bytes that remain (each element takes ≥ 1 byte)
 * before anything is allocated, and values are parsed straight into the
 * message structs: no intermediate object tree, no per-message allocation once
 * the arena has grown.
 */
#include "ms_wire.h"

#include <math.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tensor.h"

/* ---- keys ---------------------------------------------------------------- */

enum {
    K_RID, K_ROUND, K_ROLE, K_MODEL_FP, K_TOK_FP, K_VOCAB, K_HIDDEN, K_KIND, K_WANTS, K_PID,
    K_ACCEPTED, K_REASON, K_PROMPT, K_K_PRE, K_TOPK_PRE, K_ROOT, K_TENSOR, K_N, K_TOKEN, K_PARENT,
    K_DEPTH, K_SCORE, K_STATS, K_N_PATH, K_PATH, K_BONUS, K_K_VER, K_VER_TOPK, K_CODE, K_MESSAGE,
    K_SEQ, K_T_NS, K_XFER_OFFER, K_GPU_UUID, K_HOST_ID, K_XFER_ROWS, K_IPC_MEM, K_IPC_EVENT, K_XFER, K_NCCL_ID,
    K_AUTH, K_NONCE, K_SKIP_MODEL, K_COUNT
};

static const char *const key_names[K_COUNT] = {
    "rid", "round", "role", "model_fp", "tok_fp", "vocab", "hidden", "kind", "wants_features", "pid",
    "accepted", "reason", "prompt", "k_pre", "topk_pre", "root", "tensor", "n", "token", "parent",
    "depth", "score", "stats", "n_path", "path", "bonus", "k_ver", "ver_topk", "code", "message",
    "seq", "t_ns", "xfer_offer", "gpu_uuid", "host_id", "xfer_rows", "ipc_mem", "ipc_event", "xfer", "nccl_id",
    "auth", "nonce", "skip_model",
};

#define B(k) (UINT64_C(1) << (k))
#define B_ENV (B(K_RID) | B(K_ROUND))
#define B_HELLO_XFER (B(K_XFER_OFFER) | B(K_GPU_UUID) | B(K_HOST_ID) | B(K_XFER_ROWS) | B(K_IPC_MEM) | B(K_IPC_EVENT))
#define B_ACK_XFER (B(K_XFER) | B(K_NCCL_ID))

/* Per type: its wire name, the keys it may carry (after "v" and "t") and which
 * of those are optional. */
static const struct {
    const char *name;
    uint64_t keys, optional;
} type_info[MS_WIRE_TYPE_COUNT + 1] = {
    [MS_WIRE_HELLO] = {"hello",
                       B_ENV | B(K_ROLE) | B(K_MODEL_FP) | B(K_TOK_FP) | B(K_VOCAB) | B(K_HIDDEN) | B(K_KIND) |
                           B(K_WANTS) | B(K_PID) | B_HELLO_XFER | B(K_AUTH),
                       B_HELLO_XFER | B(K_AUTH)},
    [MS_WIRE_HELLO_ACK] = {"hello_ack", B_ENV | B(K_ACCEPTED) | B(K_REASON) | B_ACK_XFER | B(K_NONCE),
                           B_ACK_XFER | B(K_NONCE)},
    [MS_WIRE_BEGIN] = {"begin",
                       B_ENV | B(K_PROMPT) | B(K_K_PRE) | B(K_TOPK_PRE) | B(K_ROOT) | B(K_TENSOR) | B(K_SKIP_MODEL),
                       B(K_TENSOR) | B(K_SKIP_MODEL)},
    [MS_WIRE_TREE] = {"tree",
                      B_ENV | B(K_N) | B(K_TOKEN) | B(K_PARENT) | B(K_DEPTH) | B(K_SCORE) | B(K_STATS), 0},
    [MS_WIRE_VERIFY] = {"verify",
                        B_ENV | B(K_N_PATH) | B(K_PATH) | B(K_BONUS) | B(K_K_VER) | B(K_VER_TOPK) | B(K_TENSOR) |
                            B(K_SKIP_MODEL),
                        B(K_TENSOR) | B(K_SKIP_MODEL)},
    [MS_WIRE_CANCEL] = {"cancel", B_ENV | B(K_REASON), 0},
    [MS_WIRE_END] = {"end", B_ENV, 0},
    [MS_WIRE_ERROR] = {"error", B_ENV | B(K_CODE) | B(K_MESSAGE), 0},
    [MS_WIRE_HEARTBEAT] = {"heartbeat", B_ENV | B(K_SEQ) | B(K_T_NS), 0},
};

static const char *const stats_keys[6] = {"backbone_ns", "head_ns", "vocab_ns", "vocab_size", "covered", "emitted"};
static const char *const tensor_keys[5] = {"seq", "dtype", "shape", "bytes", "via"};
static const char *const via_names[MS_WIRE_VIA_COUNT] = {"host", "ipc", "nccl"};

const char *ms_wire_type_name(ms_wire_type t) {
    return (t >= MS_WIRE_HELLO && t <= MS_WIRE_HEARTBEAT) ? type_info[t].name : "?";
}

static bool valid_type(ms_wire_type t) { return t >= MS_WIRE_HELLO && t <= MS_WIRE_HEARTBEAT; }

/* ---- buffers and arena ----------------------------------------------------- */

void ms_wire_buf_free(ms_wire_buf *b) {
    if (!b) return;
    free(b->data);
    *b = (ms_wire_buf){0};
}

struct ms_wire_arena {
    int64_t max_prompt;
    int32_t *prompt; /* begin.prompt */
    size_t prompt_cap;
    int32_t *topk;   /* begin.topk_pre / verify.ver_topk */
    size_t topk_cap;
    float *feat;     /* begin/verify features as f32 */
    size_t feat_cap;
    char err[512];
};

ms_status ms_wire_arena_new(int64_t max_prompt, ms_wire_arena **out) {
    MS_ASSERT(out);
    *out = NULL;
    if (max_prompt < 0 || max_prompt > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "wire arena: max_prompt %lld, expected 0..%d", (long long)max_prompt, INT32_MAX);
    ms_wire_arena *a = ms_calloc(1, sizeof(*a));
    if (!a) return MS_ERR_NOMEM;
    a->max_prompt = max_prompt ? max_prompt : MS_WIRE_PROMPT_MAX_DEFAULT;
    *out = a;
    return MS_OK;
}

void ms_wire_arena_free(ms_wire_arena **a) {
    if (!a || !*a) return;
    free((*a)->prompt);
    free((*a)->topk);
    free((*a)->feat);
    free(*a);
    *a = NULL;
}

const char *ms_wire_arena_error(const ms_wire_arena *a) { return a ? a->err : ""; }

size_t ms_wire_arena_bytes(const ms_wire_arena *a) { return a ? a->prompt_cap + a->topk_cap + a->feat_cap : 0; }

/* Make *buf hold ≥ bytes; contents are not kept (each decode overwrites). */
static ms_status arena_slot(void **buf, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return MS_OK;
    free(*buf);
    *cap = 0;
    *buf = ms_malloc(bytes);
    if (!*buf) return MS_ERR_NOMEM;
    *cap = bytes;
    return MS_OK;
}

/* ---- encoder --------------------------------------------------------------- */

typedef struct {
    ms_wire_buf *b;
    bool failed;
} sink;

static int sink_write(void *data, const char *src, size_t len) {
    sink *s = data;
    ms_wire_buf *b = s->b;
    if (b->cap - b->len < len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < len) {
            if (cap > SIZE_MAX / 2) {
                s->failed = true;
                return -1;
            }
            cap *= 2;
        }
        uint8_t *p = ms_realloc(b->data, cap);
        if (!p) {
            s->failed = true;
            return -1;
        }
        b->data = p;
        b->cap = cap;
    }
    /* msgpack-c writes mostly 1..9-byte pieces: a plain loop beats a memcpy call */
    uint8_t *dst = b->data + b->len;
    if (len <= 16)
        for (size_t i = 0; i < len; i++) dst[i] = (uint8_t)src[i];
    else
        memcpy(dst, src, len);
    b->len += len;
    return 0;
}

static void put_str(msgpack_packer *pk, const char *s) { msgpack_pack_str_with_body(pk, s, strlen(s)); }
static void put_u64(msgpack_packer *pk, const char *k, uint64_t v) {
    put_str(pk, k);
    msgpack_pack_uint64(pk, v);
}
static void put_i64(msgpack_packer *pk, const char *k, int64_t v) {
    put_str(pk, k);
    msgpack_pack_int64(pk, v);
}
static void put_kstr(msgpack_packer *pk, const char *k, const char *v) {
    put_str(pk, k);
    put_str(pk, v);
}
static void put_bool(msgpack_packer *pk, const char *k, bool v) {
    put_str(pk, k);
    if (v)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}
static void put_i32s(msgpack_packer *pk, const char *k, const int32_t *v, int64_t n) {
    put_str(pk, k);
    msgpack_pack_array(pk, (size_t)n);
    for (int64_t i = 0; i < n; i++) msgpack_pack_int32(pk, v[i]);
}
/* Bytes as lowercase hex (the decoder accepts exactly this form). */
static void put_hex(msgpack_packer *pk, const char *k, const uint8_t *v, size_t n) {
    static const char digits[] = "0123456789abcdef";
    char buf[2 * MS_WIRE_NCCL_ID_BYTES];
    MS_ASSERT(n <= MS_WIRE_NCCL_ID_BYTES);
    for (size_t i = 0; i < n; i++) {
        buf[2 * i] = digits[v[i] >> 4];
        buf[2 * i + 1] = digits[v[i] & 15];
    }
    put_str(pk, k);
    msgpack_pack_str_with_body(pk, buf, 2 * n);
}
/* The announcement; via host is not written (the frame-1 form of old). */
static void put_tensor(msgpack_packer *pk, uint64_t seq, ms_wire_via via, ms_dtype dtype, int64_t rows, int64_t cols,
                       size_t bytes) {
    put_str(pk, "tensor");
    msgpack_pack_map(pk, via == MS_WIRE_VIA_HOST ? 4 : 5);
    put_u64(pk, "seq", seq);
    put_kstr(pk, "dtype", ms_dtype_name(dtype));
    put_str(pk, "shape");
    msgpack_pack_array(pk, 2);
    msgpack_pack_int64(pk, rows);
    msgpack_pack_int64(pk, cols);
    put_u64(pk, "bytes", bytes);
    if (via != MS_WIRE_VIA_HOST) put_kstr(pk, "via", via_names[via]);
}

/* A string field must be NUL-terminated within max characters. */
static ms_status check_str(const char *type, const char *field, const char *s, size_t max) {
    if (strnlen(s, max + 1) > max)
        MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' longer than %zu characters", type, field, max);
    return MS_OK;
}

static ms_status check_ids(const char *type, const char *field, const int32_t *v, int64_t n) {
    if (n > 0 && !v) MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' is NULL with %lld entries", type, field, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (v[i] < 0) MS_FAIL(MS_ERR_INVALID, "encode %s: %s[%lld] = %d < 0", type, field, (long long)i, (int)v[i]);
    return MS_OK;
}

/* Features [rows, feat_dim] f32, or none. */
static ms_status check_features(const char *type, const float *f, int64_t rows, int64_t feat_dim, size_t *bytes) {
    *bytes = 0;
    if (!f) return MS_OK;
    if (feat_dim < 1 || feat_dim > MS_WIRE_FEAT_DIM_MAX)
        MS_FAIL(MS_ERR_INVALID, "encode %s: feat_dim %lld, expected 1..%d", type, (long long)feat_dim,
                MS_WIRE_FEAT_DIM_MAX);
    size_t n;
    if (!ms_mul_size((size_t)rows, (size_t)feat_dim, &n) || !ms_mul_size(n, sizeof(float), bytes))
        MS_FAIL(MS_ERR_INVALID, "encode %s: features [%lld, %lld] overflow", type, (long long)rows, (long long)feat_dim);
    return MS_OK;
}

/* A tensor that goes by a transport (via != host): announced, not sent here. */
static ms_status check_announce(const char *type, const ms_wire_tensor *t, const float *f, int64_t rows,
                                int64_t feat_dim, size_t *bytes) {
    if ((unsigned)t->via >= MS_WIRE_VIA_COUNT) MS_FAIL(MS_ERR_INVALID, "encode %s: tensor.via %d", type, (int)t->via);
    if (t->via == MS_WIRE_VIA_HOST) return MS_OK;
    if (f) MS_FAIL(MS_ERR_INVALID, "encode %s: features given with tensor.via %s (the bytes go by the transport)", type,
                   via_names[t->via]);
    if (t->dtype != MS_DTYPE_F32 && t->dtype != MS_DTYPE_F16 && t->dtype != MS_DTYPE_BF16)
        MS_FAIL(MS_ERR_INVALID, "encode %s: tensor dtype %s, expected F32, F16 or BF16", type, ms_dtype_name(t->dtype));
    if (feat_dim < 1 || feat_dim > MS_WIRE_FEAT_DIM_MAX)
        MS_FAIL(MS_ERR_INVALID, "encode %s: feat_dim %lld, expected 1..%d", type, (long long)feat_dim,
                MS_WIRE_FEAT_DIM_MAX);
    size_t n;
    if (!ms_mul_size((size_t)rows, (size_t)feat_dim, &n) || !ms_mul_size(n, ms_dtype_size(t->dtype), bytes))
        MS_FAIL(MS_ERR_INVALID, "encode %s: tensor [%lld, %lld] overflows", type, (long long)rows, (long long)feat_dim);
    return MS_OK;
}

static bool all_zero(const uint8_t *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (v[i]) return false;
    return true;
}

/* Offer fields must be all absent (offer 0) or consistent: what decodes. */
static ms_status check_xfer_offer(const ms_wire_xfer *x) {
    const uint32_t known = (1u << MS_WIRE_VIA_IPC) | (1u << MS_WIRE_VIA_NCCL);
    if (x->offer & ~known) MS_FAIL(MS_ERR_INVALID, "encode hello: xfer_offer 0x%x has unknown bits", (unsigned)x->offer);
    MS_TRY(check_str("hello", "host_id", x->host_id, MS_WIRE_HOST_ID_MAX));
    bool ipc = x->offer & (1u << MS_WIRE_VIA_IPC);
    if (!x->offer && (x->host_id[0] || !all_zero(x->gpu_uuid, sizeof x->gpu_uuid)))
        MS_FAIL(MS_ERR_INVALID, "encode hello: gpu_uuid/host_id set without an xfer_offer");
    if (ipc ? (x->max_rows < 1 || x->max_rows > MS_WIRE_XFER_ROWS_MAX) : x->max_rows != 0)
        MS_FAIL(MS_ERR_INVALID, "encode hello: xfer_rows %lld %s", (long long)x->max_rows,
                ipc ? "out of 1..2^20" : "set without the ipc offer");
    if (!ipc && (!all_zero(x->ipc_mem, sizeof x->ipc_mem) || !all_zero(x->ipc_event, sizeof x->ipc_event)))
        MS_FAIL(MS_ERR_INVALID, "encode hello: ipc handles set without the ipc offer");
    return MS_OK;
}

static ms_status check_path(const char *type, const int32_t *path, int64_t n_path) {
    if (n_path < 1 || n_path > MS_TREE_MAX)
        MS_FAIL(MS_ERR_INVALID, "encode %s: n_path %lld, expected 1..%d", type, (long long)n_path, MS_TREE_MAX);
    if (path[0] != 0) MS_FAIL(MS_ERR_INVALID, "encode %s: path[0] = %d, expected 0", type, (int)path[0]);
    for (int64_t i = 1; i < n_path; i++)
        if (path[i] <= path[i - 1] || path[i] >= MS_TREE_MAX)
            MS_FAIL(MS_ERR_INVALID, "encode %s: path[%lld] = %d after %d", type, (long long)i, (int)path[i],
                    (int)path[i - 1]);
    return MS_OK;
}

/* Everything the decoder would reject in m, as MS_ERR_INVALID. */
static ms_status check_msg(const ms_wire_msg *m, size_t *tensor_bytes) {
    *tensor_bytes = 0;
    if (!valid_type(m->type)) MS_FAIL(MS_ERR_INVALID, "encode: unknown message type %d", (int)m->type);
    const char *tn = type_info[m->type].name;
    if (m->round < 0) MS_FAIL(MS_ERR_INVALID, "encode %s: round %lld < 0", tn, (long long)m->round);
    switch (m->type) {
    case MS_WIRE_HELLO: {
        const ms_wire_hello *h = &m->u.hello;
        if (h->role != MS_WIRE_ROLE_TARGET && h->role != MS_WIRE_ROLE_DRAFT)
            MS_FAIL(MS_ERR_INVALID, "encode hello: role %d", (int)h->role);
        MS_TRY(check_str(tn, "model_fp", h->model_fp, MS_WIRE_FP_MAX));
        MS_TRY(check_str(tn, "tok_fp", h->tok_fp, MS_WIRE_FP_MAX));
        MS_TRY(check_str(tn, "kind", h->kind, MS_WIRE_KIND_MAX));
        if (h->vocab < 1 || h->vocab > INT32_MAX || h->hidden < 1 || h->hidden > MS_WIRE_FEAT_DIM_MAX || h->pid < 0 ||
            h->pid > INT32_MAX)
            MS_FAIL(MS_ERR_INVALID, "encode hello: vocab %lld, hidden %lld, pid %lld out of range", (long long)h->vocab,
                    (long long)h->hidden, (long long)h->pid);
        MS_TRY(check_xfer_offer(&h->xfer));
        break;
    }
    case MS_WIRE_HELLO_ACK:
        MS_TRY(check_str(tn, "reason", m->u.ack.reason, MS_WIRE_REASON_MAX));
        if ((unsigned)m->u.ack.xfer >= MS_WIRE_VIA_COUNT)
            MS_FAIL(MS_ERR_INVALID, "encode hello_ack: xfer %d", (int)m->u.ack.xfer);
        if (m->u.ack.xfer != MS_WIRE_VIA_NCCL && !all_zero(m->u.ack.nccl_id, sizeof m->u.ack.nccl_id))
            MS_FAIL(MS_ERR_INVALID, "encode hello_ack: nccl_id set but xfer is %s", via_names[m->u.ack.xfer]);
        break;
    case MS_WIRE_CANCEL: MS_TRY(check_str(tn, "reason", m->u.cancel.reason, MS_WIRE_REASON_MAX)); break;
    case MS_WIRE_ERROR:
        if (m->u.error.code >= 0) MS_FAIL(MS_ERR_INVALID, "encode error: code %d is not an error", (int)m->u.error.code);
        MS_TRY(check_str(tn, "message", m->u.error.message, MS_WIRE_MESSAGE_MAX));
        break;
    case MS_WIRE_BEGIN: {
        const ms_msg_begin *b = &m->u.begin;
        if (b->request_id != m->request_id)
            MS_FAIL(MS_ERR_INVALID, "encode begin: request id %llu, envelope %llu", (unsigned long long)b->request_id,
                    (unsigned long long)m->request_id);
        if (b->n_prompt < 1 || b->n_prompt > INT32_MAX)
            MS_FAIL(MS_ERR_INVALID, "encode begin: n_prompt %lld", (long long)b->n_prompt);
        if (b->k_pre < 0 || b->k_pre > MS_WIRE_TOPK_MAX)
            MS_FAIL(MS_ERR_INVALID, "encode begin: k_pre %lld, expected 0..%d", (long long)b->k_pre, MS_WIRE_TOPK_MAX);
        if (b->root < 0) MS_FAIL(MS_ERR_INVALID, "encode begin: root %d < 0", (int)b->root);
        MS_TRY(check_ids(tn, "prompt", b->prompt, b->n_prompt));
        MS_TRY(check_ids(tn, "topk_pre", b->topk_pre, b->n_prompt * b->k_pre));
        MS_TRY(check_features(tn, b->features, b->n_prompt, b->feat_dim, tensor_bytes));
        MS_TRY(check_announce(tn, &m->tensor, b->features, b->n_prompt, b->feat_dim, tensor_bytes));
        break;
    }
    case MS_WIRE_TREE: {
        const ms_msg_tree *t = &m->u.tree;
        if (t->request_id != m->request_id || t->round != m->round)
            MS_FAIL(MS_ERR_INVALID, "encode tree: request %llu round %lld, envelope %llu round %lld",
                    (unsigned long long)t->request_id, (long long)t->round, (unsigned long long)m->request_id,
                    (long long)m->round);
        if (ms_tree_validate(&t->tree) != MS_OK) MS_FAIL(MS_ERR_INVALID, "encode tree: invalid tree");
        for (int64_t i = 0; i < t->tree.n; i++)
            if (isnan(t->tree.score[i])) MS_FAIL(MS_ERR_INVALID, "encode tree: score[%lld] is NaN", (long long)i);
        const ms_draft_stats *s = &t->stats;
        if (s->vocab_size < 0 || s->covered < 0 || s->emitted < 0 || s->covered > s->emitted)
            MS_FAIL(MS_ERR_INVALID, "encode tree: stats vocab_size %lld covered %lld emitted %lld",
                    (long long)s->vocab_size, (long long)s->covered, (long long)s->emitted);
        break;
    }
    case MS_WIRE_VERIFY: {
        const ms_msg_verify *v = &m->u.verify;
        if (v->request_id != m->request_id || v->round != m->round)
            MS_FAIL(MS_ERR_INVALID, "encode verify: request %llu round %lld, envelope %llu round %lld",
                    (unsigned long long)v->request_id, (long long)v->round, (unsigned long long)m->request_id,
                    (long long)m->round);
        MS_TRY(check_path(tn, v->path, v->n_path));
        if (v->bonus < 0) MS_FAIL(MS_ERR_INVALID, "encode verify: bonus %d < 0", (int)v->bonus);
        if (v->k_ver < 0 || v->k_ver > MS_WIRE_TOPK_MAX)
            MS_FAIL(MS_ERR_INVALID, "encode verify: k_ver %lld, expected 0..%d", (long long)v->k_ver, MS_WIRE_TOPK_MAX);
        MS_TRY(check_ids(tn, "ver_topk", v->ver_topk, v->n_path * v->k_ver));
        MS_TRY(check_features(tn, v->features, v->n_path, v->feat_dim, tensor_bytes));
        MS_TRY(check_announce(tn, &m->tensor, v->features, v->n_path, v->feat_dim, tensor_bytes));
        break;
    }
    case MS_WIRE_END:
    case MS_WIRE_HEARTBEAT: break;
    }
    return MS_OK;
}

ms_status ms_wire_encode(const ms_wire_msg *m, ms_wire_buf *ctrl, const void **tensor, size_t *tensor_bytes) {
    MS_ASSERT(m && ctrl);
    if (tensor) *tensor = NULL;
    if (tensor_bytes) *tensor_bytes = 0;
    size_t tbytes;
    MS_TRY(check_msg(m, &tbytes));
    const float *feat = m->type == MS_WIRE_BEGIN ? m->u.begin.features
                        : m->type == MS_WIRE_VERIFY ? m->u.verify.features
                                                    : NULL;
    if (feat && (!tensor || !tensor_bytes))
        MS_FAIL(MS_ERR_INVALID, "encode %s: features given but no place to return the tensor frame",
                type_info[m->type].name);

    ctrl->len = 0;
    sink s = {ctrl, false};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &s, sink_write);
    /* A tensor announced without a frame: via a transport (ms_xfer.h). */
    bool announced = (m->type == MS_WIRE_BEGIN || m->type == MS_WIRE_VERIFY) && m->tensor.via != MS_WIRE_VIA_HOST;
    int n_opt = (feat || announced) ? 1 : 0;
    if (m->type == MS_WIRE_HELLO && m->u.hello.xfer.offer)
        n_opt += 3 + ((m->u.hello.xfer.offer & (1u << MS_WIRE_VIA_IPC)) ? 3 : 0);
    if (m->type == MS_WIRE_HELLO_ACK && m->u.ack.xfer != MS_WIRE_VIA_HOST)
        n_opt += m->u.ack.xfer == MS_WIRE_VIA_NCCL ? 2 : 1;
    if (m->type == MS_WIRE_HELLO && !all_zero(m->u.hello.auth, MS_WIRE_AUTH_BYTES)) n_opt++;
    if (m->type == MS_WIRE_HELLO_ACK && !all_zero(m->u.ack.nonce, MS_WIRE_NONCE_BYTES)) n_opt++;
    if ((m->type == MS_WIRE_VERIFY && m->u.verify.skip_model) || (m->type == MS_WIRE_BEGIN && m->u.begin.skip_model))
        n_opt++;
    int n_keys = __builtin_popcountll(type_info[m->type].keys & ~type_info[m->type].optional) + 2 + n_opt;
    msgpack_pack_map(&pk, (size_t)n_keys);
    put_i64(&pk, "v", MS_PROTO_VERSION);
    put_kstr(&pk, "t", type_info[m->type].name);
    put_u64(&pk, "rid", m->request_id);
    put_i64(&pk, "round", m->round);
    switch (m->type) {
    case MS_WIRE_HELLO: {
        const ms_wire_hello *h = &m->u.hello;
        put_kstr(&pk, "role", h->role == MS_WIRE_ROLE_TARGET ? "target" : "draft");
        put_kstr(&pk, "model_fp", h->model_fp);
        put_kstr(&pk, "tok_fp", h->tok_fp);
        put_i64(&pk, "vocab", h->vocab);
        put_i64(&pk, "hidden", h->hidden);
        put_kstr(&pk, "kind", h->kind);
        put_bool(&pk, "wants_features", h->wants_features);
        put_i64(&pk, "pid", h->pid);
        if (h->xfer.offer) {
            put_u64(&pk, "xfer_offer", h->xfer.offer);
            put_hex(&pk, "gpu_uuid", h->xfer.gpu_uuid, MS_WIRE_UUID_BYTES);
            put_kstr(&pk, "host_id", h->xfer.host_id);
            if (h->xfer.offer & (1u << MS_WIRE_VIA_IPC)) {
                put_i64(&pk, "xfer_rows", h->xfer.max_rows);
                put_hex(&pk, "ipc_mem", h->xfer.ipc_mem, MS_WIRE_IPC_HANDLE_BYTES);
                put_hex(&pk, "ipc_event", h->xfer.ipc_event, MS_WIRE_IPC_HANDLE_BYTES);
            }
        }
        if (!all_zero(h->auth, MS_WIRE_AUTH_BYTES)) put_hex(&pk, "auth", h->auth, MS_WIRE_AUTH_BYTES);
        break;
    }
    case MS_WIRE_HELLO_ACK:
        put_bool(&pk, "accepted", m->u.ack.accepted);
        put_kstr(&pk, "reason", m->u.ack.reason);
        if (m->u.ack.xfer != MS_WIRE_VIA_HOST) put_kstr(&pk, "xfer", via_names[m->u.ack.xfer]);
        if (m->u.ack.xfer == MS_WIRE_VIA_NCCL) put_hex(&pk, "nccl_id", m->u.ack.nccl_id, MS_WIRE_NCCL_ID_BYTES);
        if (!all_zero(m->u.ack.nonce, MS_WIRE_NONCE_BYTES)) put_hex(&pk, "nonce", m->u.ack.nonce, MS_WIRE_NONCE_BYTES);
        break;
    case MS_WIRE_BEGIN: {
        const ms_msg_begin *b = &m->u.begin;
        put_i32s(&pk, "prompt", b->prompt, b->n_prompt);
        put_i64(&pk, "k_pre", b->k_pre);
        put_i32s(&pk, "topk_pre", b->topk_pre, b->n_prompt * b->k_pre);
        put_i64(&pk, "root", b->root);
        if (b->skip_model) put_bool(&pk, "skip_model", true);
        if (feat || announced)
            put_tensor(&pk, m->tensor_seq, m->tensor.via, feat ? MS_DTYPE_F32 : m->tensor.dtype, b->n_prompt,
                       b->feat_dim, tbytes);
        break;
    }
    case MS_WIRE_TREE: {
        const ms_tree *t = &m->u.tree.tree;
        const ms_draft_stats *st = &m->u.tree.stats;
        put_i64(&pk, "n", t->n);
        put_i32s(&pk, "token", t->token, t->n);
        put_i32s(&pk, "parent", t->parent, t->n);
        put_i32s(&pk, "depth", t->depth, t->n);
        put_str(&pk, "score");
        msgpack_pack_array(&pk, (size_t)t->n);
        for (int64_t i = 0; i < t->n; i++) msgpack_pack_float(&pk, t->score[i]);
        put_str(&pk, "stats");
        msgpack_pack_map(&pk, 6);
        put_u64(&pk, "backbone_ns", st->backbone_ns);
        put_u64(&pk, "head_ns", st->head_ns);
        put_u64(&pk, "vocab_ns", st->vocab_ns);
        put_i64(&pk, "vocab_size", st->vocab_size);
        put_i64(&pk, "covered", st->covered);
        put_i64(&pk, "emitted", st->emitted);
        break;
    }
    case MS_WIRE_VERIFY: {
        const ms_msg_verify *v = &m->u.verify;
        put_i64(&pk, "n_path", v->n_path);
        put_i32s(&pk, "path", v->path, v->n_path);
        put_i64(&pk, "bonus", v->bonus);
        put_i64(&pk, "k_ver", v->k_ver);
        put_i32s(&pk, "ver_topk", v->ver_topk, v->n_path * v->k_ver);
        if (v->skip_model) put_bool(&pk, "skip_model", true);
        if (feat || announced)
            put_tensor(&pk, m->tensor_seq, m->tensor.via, feat ? MS_DTYPE_F32 : m->tensor.dtype, v->n_path,
                       v->feat_dim, tbytes);
        break;
    }
    case MS_WIRE_CANCEL: put_kstr(&pk, "reason", m->u.cancel.reason); break;
    case MS_WIRE_END: break;
    case MS_WIRE_ERROR:
        put_i64(&pk, "code", m->u.error.code);
        put_kstr(&pk, "message", m->u.error.message);
        break;
    case MS_WIRE_HEARTBEAT:
        put_u64(&pk, "seq", m->u.heartbeat.seq);
        put_u64(&pk, "t_ns", m->u.heartbeat.t_ns);
        break;
    }
    if (s.failed) {
        ctrl->len = 0;
        MS_FAIL(MS_ERR_NOMEM, "encode %s: out of memory for the control frame", type_info[m->type].name);
    }
    if (feat) {
        *tensor = feat;
        *tensor_bytes = tbytes;
    }
    return MS_OK;
}

/* ---- decoder: a pull reader over one frame ------------------------------- */

typedef struct {
    const uint8_t *p, *end;
    ms_wire_arena *a;
    const char *what; /* message type name once known */
} rd;

__attribute__((format(printf, 5, 6))) static ms_status rd_fail(rd *r, ms_status code, const char *file, int line,
                                                               const char *fmt, ...) {
    int off = snprintf(r->a->err, sizeof(r->a->err), "%s: ", r->what);
    if (off < 0 || (size_t)off >= sizeof(r->a->err)) off = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->a->err + off, sizeof(r->a->err) - (size_t)off, fmt, ap);
    va_end(ap);
    /* Debug only: frames come from peers nobody vouched for yet, so the
     * caller (ms_link) reports the text, counted and rate-limited (issue 35). */
    ms_log_msg(MS_LOG_DEBUG, file, line, "wire: %s", r->a->err);
    return code;
}
#define RFAIL(r, code, ...) return rd_fail((r), (code), __FILE__, __LINE__, __VA_ARGS__)

/* A string from the wire, made printable and short for an error message. */
static const char *printable(const uint8_t *s, size_t n, char *buf, size_t cap) {
    size_t j = 0;
    for (size_t i = 0; i < n && j + 4 < cap; i++) buf[j++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
    if (j + 4 >= cap && n > j) {
        memcpy(buf + j, "...", 3);
        j += 3;
    }
    buf[j] = '\0';
    return buf;
}

typedef enum { V_UINT, V_NINT, V_FLOAT, V_BOOL, V_NIL, V_STR, V_ARRAY, V_MAP, V_OTHER } vkind;
static const char *const vkind_names[] = {"an integer", "an integer", "a float", "a bool", "nil",
                                          "a string",   "an array",   "a map",   "bin/ext"};

typedef struct {
    vkind k;
    uint64_t u;       /* V_UINT value; V_STR/V_ARRAY/V_MAP count */
    int64_t i;        /* V_NINT value (< 0) */
    double f;         /* V_FLOAT */
    bool b;           /* V_BOOL */
    const uint8_t *s; /* V_STR bytes */
} val;

static uint64_t load_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* Reads the header of the next value; for scalars and strings the whole
 * value. An array's count is checked against the bytes left (each element
 * takes ≥ 1 byte, each map entry ≥ 2), so no caller ever sizes anything by
 * an unbacked count. */
static ms_status rd_val(rd *r, const char *field, val *v) {
    size_t left = (size_t)(r->end - r->p);
    if (left < 1) RFAIL(r, MS_ERR_FORMAT, "field '%s': message truncated", field);
    uint8_t c = *r->p;
    int extra = 0; /* bytes after the type byte holding the value or a length */
    *v = (val){0};
    if (c <= 0x7f) {
        v->k = V_UINT, v->u = c;
    } else if (c >= 0xe0) {
        v->k = V_NINT, v->i = (int8_t)c;
    } else if (c >= 0x80 && c <= 0x8f) {
        v->k = V_MAP, v->u = c & 0x0f;
    } else if (c >= 0x90 && c <= 0x9f) {
        v->k = V_ARRAY, v->u = c & 0x0f;
    } else if (c >= 0xa0 && c <= 0xbf) {
        v->k = V_STR, v->u = c & 0x1f;
    } else {
        switch (c) {
        case 0xc0: v->k = V_NIL; break;
        case 0xc2: v->k = V_BOOL, v->b = false; break;
        case 0xc3: v->k = V_BOOL, v->b = true; break;
        case 0xca: v->k = V_FLOAT, extra = 4; break;
        case 0xcb: v->k = V_FLOAT, extra = 8; break;
        case 0xcc: case 0xcd: case 0xce: case 0xcf: v->k = V_UINT, extra = 1 << (c - 0xcc); break;
        case 0xd0: case 0xd1: case 0xd2: case 0xd3: v->k = V_NINT, extra = 1 << (c - 0xd0); break;
        case 0xd9: case 0xda: case 0xdb: v->k = V_STR, extra = 1 << (c - 0xd9); break;
        case 0xdc: case 0xdd: v->k = V_ARRAY, extra = 2 << (c - 0xdc); break;
        case 0xde: case 0xdf: v->k = V_MAP, extra = 2 << (c - 0xde); break;
        default: RFAIL(r, MS_ERR_FORMAT, "field '%s': unsupported MessagePack type byte 0x%02x", field, c);
        }
    }
    if (left < 1 + (size_t)extra) RFAIL(r, MS_ERR_FORMAT, "field '%s': message truncated", field);
    const uint8_t *q = r->p + 1;
    if (extra) {
        uint64_t x = load_be(q, extra);
        switch (v->k) {
        case V_FLOAT:
            if (extra == 4) {
                uint32_t w = (uint32_t)x;
                float f;
                memcpy(&f, &w, 4);
                v->f = f;
            } else {
                memcpy(&v->f, &x, 8);
            }
            break;
        case V_NINT: {
            /* sign-extend the extra-byte big-endian value */
            int64_t s = extra == 8 ? (int64_t)x : (int64_t)(x ^ (UINT64_C(1) << (8 * extra - 1))) - (INT64_C(1) << (8 * extra - 1));
            if (s >= 0) v->k = V_UINT, v->u = (uint64_t)s;
            else v->i = s;
            break;
        }
        default: v->u = x; break;
        }
    }
    q += extra;
    left -= 1 + (size_t)extra;
    if (v->k == V_STR) {
        if (v->u > left)
            RFAIL(r, MS_ERR_FORMAT, "field '%s': truncated or corrupt: a string of %llu bytes, %zu left", field,
                  (unsigned long long)v->u, left);
        v->s = q;
        q += v->u;
    } else if (v->k == V_ARRAY && v->u > left) {
        RFAIL(r, MS_ERR_FORMAT, "field '%s': truncated or corrupt: array announces %llu entries, %zu bytes left", field,
              (unsigned long long)v->u, left);
    } else if (v->k == V_MAP && v->u > left / 2) {
        RFAIL(r, MS_ERR_FORMAT, "field '%s': truncated or corrupt: map announces %llu entries, %zu bytes left", field,
              (unsigned long long)v->u, left);
    }
    r->p = q;
    return MS_OK;
}

static ms_status rd_expect(rd *r, const char *field, vkind want, val *v) {
    MS_TRY(rd_val(r, field, v));
    vkind got = v->k == V_NINT ? V_UINT : v->k;
    if (got != want) RFAIL(r, MS_ERR_FORMAT, "field '%s' is %s, expected %s", field, vkind_names[v->k], vkind_names[want]);
    return MS_OK;
}

static ms_status rd_u64(rd *r, const char *field, uint64_t *out) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_UINT, &v));
    if (v.k == V_NINT) RFAIL(r, MS_ERR_RANGE, "field '%s' is %lld, expected ≥ 0", field, (long long)v.i);
    *out = v.u;
    return MS_OK;
}

static ms_status rd_i64(rd *r, const char *field, int64_t lo, int64_t hi, int64_t *out) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_UINT, &v));
    if (v.k == V_UINT && v.u > (uint64_t)INT64_MAX)
        RFAIL(r, MS_ERR_RANGE, "field '%s' is %llu, expected %lld..%lld", field, (unsigned long long)v.u, (long long)lo,
              (long long)hi);
    int64_t x = v.k == V_UINT ? (int64_t)v.u : v.i;
    if (x < lo || x > hi)
        RFAIL(r, MS_ERR_RANGE, "field '%s' is %lld, expected %lld..%lld", field, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return MS_OK;
}

static ms_status rd_bool(rd *r, const char *field, bool *out) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_BOOL, &v));
    *out = v.b;
    return MS_OK;
}

static ms_status rd_f32(rd *r, const char *field, float *out) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_FLOAT, &v));
    if (isnan(v.f)) RFAIL(r, MS_ERR_FORMAT, "field '%s' is NaN", field);
    *out = (float)v.f;
    return MS_OK;
}

/* A string into a C buffer of max+1 bytes; no NUL byte inside. */
static ms_status rd_cstr(rd *r, const char *field, char *dst, size_t max) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_STR, &v));
    if (v.u > max) RFAIL(r, MS_ERR_RANGE, "field '%s' has %llu bytes, at most %zu", field, (unsigned long long)v.u, max);
    if (memchr(v.s, 0, v.u)) RFAIL(r, MS_ERR_FORMAT, "field '%s' holds a NUL byte", field);
    memcpy(dst, v.s, v.u);
    dst[v.u] = '\0';
    return MS_OK;
}

static ms_status rd_array(rd *r, const char *field, int64_t max, int64_t *n) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_ARRAY, &v));
    if (v.u > (uint64_t)max)
        RFAIL(r, MS_ERR_RANGE, "field '%s' has %llu entries, at most %lld", field, (unsigned long long)v.u, (long long)max);
    *n = (int64_t)v.u;
    return MS_OK;
}

/* n int32 values in lo..hi (already an array of n entries). */
static ms_status rd_i32s(rd *r, const char *field, int32_t *dst, int64_t n, int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < n; i++) {
        /* fast paths: positive fixint (tree indices), uint16 and uint32 (token ids) */
        size_t left = (size_t)(r->end - r->p);
        if (left >= 1 && *r->p <= 0x7f && *r->p >= lo && *r->p <= hi) {
            dst[i] = *r->p++;
            continue;
        }
        if (left >= 3 && *r->p == 0xcd) {
            int64_t x = (int64_t)load_be(r->p + 1, 2);
            if (x >= lo && x <= hi) {
                dst[i] = (int32_t)x;
                r->p += 3;
                continue;
            }
        }
        if (left >= 5 && *r->p == 0xce) {
            int64_t x = (int64_t)load_be(r->p + 1, 4);
            if (x >= lo && x <= hi) {
                dst[i] = (int32_t)x;
                r->p += 5;
                continue;
            }
        }
        int64_t x = 0;
        ms_status st = rd_i64(r, field, lo, hi, &x);
        if (st != MS_OK) {
            size_t len = strlen(r->a->err);
            snprintf(r->a->err + len, sizeof(r->a->err) - len, " (entry %lld)", (long long)i);
            return st;
        }
        dst[i] = (int32_t)x;
    }
    return MS_OK;
}

/* A map key: index into names[0..n), or an error naming the unknown key. */
static ms_status rd_key(rd *r, const char *where, const char *const *names, int n, uint64_t allowed, int *out) {
    val v = {0};
    MS_TRY(rd_val(r, where, &v));
    if (v.k != V_STR) RFAIL(r, MS_ERR_FORMAT, "%s: a key is %s, expected a string", where, vkind_names[v.k]);
    for (uint64_t left = allowed & (n < 64 ? B(n) - 1 : ~UINT64_C(0)); left; left &= left - 1) {
        int k = __builtin_ctzll(left);
        if (names[k][0] == (char)(v.u ? v.s[0] : 0) && strlen(names[k]) == v.u && memcmp(names[k], v.s, v.u) == 0) {
            *out = k;
            return MS_OK;
        }
    }
    char buf[48];
    RFAIL(r, MS_ERR_FORMAT, "%s: unknown key '%s'", where, printable(v.s, v.u, buf, sizeof(buf)));
}

static bool str_is(const val *v, const char *s) { return v->k == V_STR && strlen(s) == v->u && memcmp(s, v->s, v->u) == 0; }

typedef struct {
    bool present;
    uint64_t seq;
    ms_dtype dtype;
    int64_t rows, cols;
    uint64_t bytes;
    ms_wire_via via;
} tensor_info;

/* A string of exactly 2n lowercase hex digits into n bytes (one spelling per
 * value, so a decoded message re-encodes to the same bytes). */
static ms_status rd_hex(rd *r, const char *field, uint8_t *dst, size_t n) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_STR, &v));
    if (v.u != 2 * n) RFAIL(r, MS_ERR_FORMAT, "field '%s' has %llu characters, expected %zu hex digits", field,
                            (unsigned long long)v.u, 2 * n);
    for (size_t i = 0; i < 2 * n; i++) {
        uint8_t c = v.s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) RFAIL(r, MS_ERR_FORMAT, "field '%s': character %zu is not a lowercase hex digit", field, i);
        dst[i / 2] = (uint8_t)(i % 2 ? (dst[i / 2] | d) : d << 4);
    }
    return MS_OK;
}

static ms_status rd_via(rd *r, const char *field, ms_wire_via *out) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_STR, &v));
    /* "host" is never written: absence says it, so accepting it would break canonical bytes */
    for (int i = MS_WIRE_VIA_IPC; i < MS_WIRE_VIA_COUNT; i++)
        if (str_is(&v, via_names[i])) {
            *out = (ms_wire_via)i;
            return MS_OK;
        }
    char buf[48];
    RFAIL(r, MS_ERR_FORMAT, "field '%s' is '%s', expected 'ipc' or 'nccl'", field, printable(v.s, v.u, buf, sizeof(buf)));
}

static ms_status rd_tensor(rd *r, int64_t max_rows, tensor_info *t) {
    val v = {0};
    MS_TRY(rd_expect(r, "tensor", V_MAP, &v));
    uint64_t seen = 0;
    for (uint64_t e = 0; e < v.u; e++) {
        int k = 0;
        MS_TRY(rd_key(r, "tensor", tensor_keys, 5, 0x1f, &k));
        if (seen & B(k)) RFAIL(r, MS_ERR_FORMAT, "tensor: duplicate key '%s'", tensor_keys[k]);
        seen |= B(k);
        switch (k) {
        case 0: MS_TRY(rd_u64(r, "tensor.seq", &t->seq)); break;
        case 1: {
            val d = {0};
            MS_TRY(rd_expect(r, "tensor.dtype", V_STR, &d));
            if (str_is(&d, "F32")) t->dtype = MS_DTYPE_F32;
            else if (str_is(&d, "F16")) t->dtype = MS_DTYPE_F16;
            else if (str_is(&d, "BF16")) t->dtype = MS_DTYPE_BF16;
            else {
                char buf[48];
                RFAIL(r, MS_ERR_FORMAT, "tensor.dtype '%s', expected F32, F16 or BF16", printable(d.s, d.u, buf, sizeof(buf)));
            }
            break;
        }
        case 2: {
            int64_t n = 0;
            MS_TRY(rd_array(r, "tensor.shape", 2, &n));
            if (n != 2) RFAIL(r, MS_ERR_FORMAT, "field 'tensor.shape' has %lld entries, expected 2 [rows, cols]", (long long)n);
            MS_TRY(rd_i64(r, "tensor.shape[0]", 0, max_rows, &t->rows));
            MS_TRY(rd_i64(r, "tensor.shape[1]", 1, MS_WIRE_FEAT_DIM_MAX, &t->cols));
            break;
        }
        case 3: MS_TRY(rd_u64(r, "tensor.bytes", &t->bytes)); break;
        case 4: MS_TRY(rd_via(r, "tensor.via", &t->via)); break;
        }
    }
    for (int k = 0; k < 4; k++) /* "via" (4) is optional: absent = frame 1 */
        if (!(seen & B(k))) RFAIL(r, MS_ERR_FORMAT, "tensor: missing field '%s'", tensor_keys[k]);
    t->present = true;
    return MS_OK;
}

static ms_status rd_stats(rd *r, ms_draft_stats *s) {
    val v = {0};
    MS_TRY(rd_expect(r, "stats", V_MAP, &v));
    uint64_t seen = 0;
    for (uint64_t e = 0; e < v.u; e++) {
        int k = 0;
        MS_TRY(rd_key(r, "stats", stats_keys, 6, 0x3f, &k));
        if (seen & B(k)) RFAIL(r, MS_ERR_FORMAT, "stats: duplicate key '%s'", stats_keys[k]);
        seen |= B(k);
        switch (k) {
        case 0: MS_TRY(rd_u64(r, "stats.backbone_ns", &s->backbone_ns)); break;
        case 1: MS_TRY(rd_u64(r, "stats.head_ns", &s->head_ns)); break;
        case 2: MS_TRY(rd_u64(r, "stats.vocab_ns", &s->vocab_ns)); break;
        case 3: MS_TRY(rd_i64(r, "stats.vocab_size", 0, INT64_MAX, &s->vocab_size)); break;
        case 4: MS_TRY(rd_i64(r, "stats.covered", 0, INT64_MAX, &s->covered)); break;
        case 5: MS_TRY(rd_i64(r, "stats.emitted", 0, INT64_MAX, &s->emitted)); break;
        }
    }
    for (int k = 0; k < 6; k++)
        if (!(seen & B(k))) RFAIL(r, MS_ERR_FORMAT, "stats: missing field '%s'", stats_keys[k]);
    if (s->covered > s->emitted)
        RFAIL(r, MS_ERR_FORMAT, "stats: covered %lld > emitted %lld", (long long)s->covered, (long long)s->emitted);
    return MS_OK;
}

/* Array lengths as read, checked against their counts once all keys are in. */
typedef struct {
    int64_t len[K_COUNT];
    tensor_info tensor;
} dstate;

/* Reads an id array into an arena slot (its count is backed by the bytes left). */
static ms_status rd_ids_arena(rd *r, const char *field, int64_t max, int32_t **slot, size_t *cap, int64_t *n) {
    MS_TRY(rd_array(r, field, max, n));
    if (*n > 0) {
        if (arena_slot((void **)slot, cap, (size_t)*n * sizeof(int32_t)) != MS_OK)
            RFAIL(r, MS_ERR_NOMEM, "field '%s': out of memory for %lld ids", field, (long long)*n);
    }
    return rd_i32s(r, field, *slot, *n, 0, INT32_MAX);
}

static ms_status rd_field(rd *r, int k, ms_wire_msg *m, dstate *d) {
    const char *f = key_names[k];
    ms_wire_arena *a = r->a;
    int64_t x = 0;
    switch (k) {
    case K_RID: return rd_u64(r, f, &m->request_id);
    case K_ROUND: return rd_i64(r, f, 0, INT64_MAX, &m->round);
    case K_ROLE: {
        val v = {0};
        MS_TRY(rd_expect(r, f, V_STR, &v));
        if (str_is(&v, "target")) m->u.hello.role = MS_WIRE_ROLE_TARGET;
        else if (str_is(&v, "draft")) m->u.hello.role = MS_WIRE_ROLE_DRAFT;
        else {
            char buf[48];
            RFAIL(r, MS_ERR_FORMAT, "field 'role' is '%s', expected 'target' or 'draft'", printable(v.s, v.u, buf, sizeof(buf)));
        }
        return MS_OK;
    }
    case K_MODEL_FP: return rd_cstr(r, f, m->u.hello.model_fp, MS_WIRE_FP_MAX);
    case K_TOK_FP: return rd_cstr(r, f, m->u.hello.tok_fp, MS_WIRE_FP_MAX);
    case K_VOCAB: return rd_i64(r, f, 1, INT32_MAX, &m->u.hello.vocab);
    case K_HIDDEN: return rd_i64(r, f, 1, MS_WIRE_FEAT_DIM_MAX, &m->u.hello.hidden);
    case K_KIND: return rd_cstr(r, f, m->u.hello.kind, MS_WIRE_KIND_MAX);
    case K_WANTS: return rd_bool(r, f, &m->u.hello.wants_features);
    case K_PID: return rd_i64(r, f, 0, INT32_MAX, &m->u.hello.pid);
    case K_ACCEPTED: return rd_bool(r, f, &m->u.ack.accepted);
    case K_REASON:
        return rd_cstr(r, f, m->type == MS_WIRE_CANCEL ? m->u.cancel.reason : m->u.ack.reason, MS_WIRE_REASON_MAX);
    case K_PROMPT:
        MS_TRY(rd_ids_arena(r, f, a->max_prompt, &a->prompt, &a->prompt_cap, &d->len[k]));
        m->u.begin.prompt = a->prompt;
        m->u.begin.n_prompt = d->len[k];
        return MS_OK;
    case K_K_PRE: return rd_i64(r, f, 0, MS_WIRE_TOPK_MAX, &m->u.begin.k_pre);
    case K_TOPK_PRE:
        MS_TRY(rd_ids_arena(r, f, a->max_prompt * MS_WIRE_TOPK_MAX, &a->topk, &a->topk_cap, &d->len[k]));
        m->u.begin.topk_pre = a->topk;
        return MS_OK;
    case K_ROOT:
        MS_TRY(rd_i64(r, f, 0, INT32_MAX, &x));
        m->u.begin.root = (int32_t)x;
        return MS_OK;
    case K_TENSOR: return rd_tensor(r, m->type == MS_WIRE_BEGIN ? a->max_prompt : MS_TREE_MAX, &d->tensor);
    case K_N: return rd_i64(r, f, 1, MS_TREE_MAX, &m->u.tree.tree.n);
    case K_TOKEN:
        MS_TRY(rd_array(r, f, MS_TREE_MAX, &d->len[k]));
        return rd_i32s(r, f, m->u.tree.tree.token, d->len[k], 0, INT32_MAX);
    case K_PARENT:
        MS_TRY(rd_array(r, f, MS_TREE_MAX, &d->len[k]));
        return rd_i32s(r, f, m->u.tree.tree.parent, d->len[k], -1, MS_TREE_MAX - 1);
    case K_DEPTH:
        MS_TRY(rd_array(r, f, MS_TREE_MAX, &d->len[k]));
        return rd_i32s(r, f, m->u.tree.tree.depth, d->len[k], 0, MS_TREE_MAX - 1);
    case K_SCORE:
        MS_TRY(rd_array(r, f, MS_TREE_MAX, &d->len[k]));
        for (int64_t i = 0; i < d->len[k]; i++) MS_TRY(rd_f32(r, f, &m->u.tree.tree.score[i]));
        return MS_OK;
    case K_STATS: return rd_stats(r, &m->u.tree.stats);
    case K_N_PATH: return rd_i64(r, f, 1, MS_TREE_MAX, &m->u.verify.n_path);
    case K_PATH:
        MS_TRY(rd_array(r, f, MS_TREE_MAX, &d->len[k]));
        return rd_i32s(r, f, m->u.verify.path, d->len[k], 0, MS_TREE_MAX - 1);
    case K_BONUS:
        MS_TRY(rd_i64(r, f, 0, INT32_MAX, &x));
        m->u.verify.bonus = (int32_t)x;
        return MS_OK;
    case K_K_VER: return rd_i64(r, f, 0, MS_WIRE_TOPK_MAX, &m->u.verify.k_ver);
    case K_SKIP_MODEL:
        return rd_bool(r, f, m->type == MS_WIRE_BEGIN ? &m->u.begin.skip_model : &m->u.verify.skip_model);
    case K_VER_TOPK:
        MS_TRY(rd_ids_arena(r, f, (int64_t)MS_TREE_MAX * MS_WIRE_TOPK_MAX, &a->topk, &a->topk_cap, &d->len[k]));
        m->u.verify.ver_topk = a->topk;
        return MS_OK;
    case K_CODE:
        MS_TRY(rd_i64(r, f, INT32_MIN, -1, &x));
        m->u.error.code = (int32_t)x;
        return MS_OK;
    case K_MESSAGE: return rd_cstr(r, f, m->u.error.message, MS_WIRE_MESSAGE_MAX);
    case K_SEQ: return rd_u64(r, f, &m->u.heartbeat.seq);
    case K_T_NS: return rd_u64(r, f, &m->u.heartbeat.t_ns);
    case K_XFER_OFFER:
        MS_TRY(rd_i64(r, f, 1, (1 << MS_WIRE_VIA_IPC) | (1 << MS_WIRE_VIA_NCCL), &x));
        if (x & 1) RFAIL(r, MS_ERR_FORMAT, "field 'xfer_offer' is %lld: bit 0 (host) is implied, never sent", (long long)x);
        m->u.hello.xfer.offer = (uint32_t)x;
        return MS_OK;
    case K_GPU_UUID: return rd_hex(r, f, m->u.hello.xfer.gpu_uuid, MS_WIRE_UUID_BYTES);
    case K_HOST_ID: return rd_cstr(r, f, m->u.hello.xfer.host_id, MS_WIRE_HOST_ID_MAX);
    case K_XFER_ROWS: return rd_i64(r, f, 1, MS_WIRE_XFER_ROWS_MAX, &m->u.hello.xfer.max_rows);
    case K_IPC_MEM: return rd_hex(r, f, m->u.hello.xfer.ipc_mem, MS_WIRE_IPC_HANDLE_BYTES);
    case K_IPC_EVENT: return rd_hex(r, f, m->u.hello.xfer.ipc_event, MS_WIRE_IPC_HANDLE_BYTES);
    case K_XFER: return rd_via(r, f, &m->u.ack.xfer);
    case K_NCCL_ID: return rd_hex(r, f, m->u.ack.nccl_id, MS_WIRE_NCCL_ID_BYTES);
    case K_AUTH: return rd_hex(r, f, m->u.hello.auth, MS_WIRE_AUTH_BYTES);
    case K_NONCE: return rd_hex(r, f, m->u.ack.nonce, MS_WIRE_NONCE_BYTES);
    }
    RFAIL(r, MS_ERR_INTERNAL, "no reader for key %d", k);
}

static ms_status check_len(rd *r, dstate *d, int k, const char *count_name, int64_t want) {
    if (d->len[k] != want)
        RFAIL(r, MS_ERR_FORMAT, "field '%s' has %lld entries, %s is %lld", key_names[k], (long long)d->len[k],
              count_name, (long long)want);
    return MS_OK;
}

/* Tree structure: masks rebuilt from parents (they are not sent), then the
 * same check as any tree from elsewhere. */
static ms_status finish_tree(rd *r, ms_tree *t) {
    for (int64_t i = 0; i < t->n; i++) {
        int32_t p = t->parent[i];
        if (i == 0 ? p != -1 : (p < 0 || p >= i))
            RFAIL(r, MS_ERR_FORMAT, "node %lld: parent %d, expected %s", (long long)i, (int)p, i == 0 ? "-1" : "an earlier node");
        if (t->depth[i] != (i == 0 ? 0 : t->depth[p] + 1))
            RFAIL(r, MS_ERR_FORMAT, "node %lld: depth %d, expected %d", (long long)i, (int)t->depth[i],
                  i == 0 ? 0 : (int)t->depth[p] + 1);
        t->mask[i] = (i == 0 ? 0 : t->mask[p]) | (UINT64_C(1) << i);
    }
    if (ms_tree_validate(t) != MS_OK) RFAIL(r, MS_ERR_FORMAT, "tree rejected by ms_tree_validate");
    return MS_OK;
}

static ms_status finish_features(rd *r, const dstate *d, int64_t rows, const char *rows_name, const void *tensor,
                                 size_t tensor_len, bool has_tensor, const float **features, int64_t *feat_dim) {
    const tensor_info *t = &d->tensor;
    *features = NULL;
    *feat_dim = 0;
    if (!t->present) {
        if (has_tensor) RFAIL(r, MS_ERR_FORMAT, "a tensor frame of %zu bytes came but none was announced", tensor_len);
        return MS_OK;
    }
    bool framed = t->via == MS_WIRE_VIA_HOST;
    if (framed && !has_tensor)
        RFAIL(r, MS_ERR_FORMAT, "tensor announced (%llu bytes) but no tensor frame came", (unsigned long long)t->bytes);
    if (!framed && has_tensor)
        RFAIL(r, MS_ERR_FORMAT, "tensor announced via %s but a tensor frame of %zu bytes came", via_names[t->via],
              tensor_len);
    if (t->rows != rows)
        RFAIL(r, MS_ERR_FORMAT, "tensor has %lld rows, %s is %lld", (long long)t->rows, rows_name, (long long)rows);
    size_t n = 0, bytes = 0; /* rows ≤ 2^31, cols ≤ 2^16: no overflow, but checked anyway */
    if (!ms_mul_size((size_t)t->rows, (size_t)t->cols, &n) || !ms_mul_size(n, ms_dtype_size(t->dtype), &bytes) ||
        bytes != t->bytes)
        RFAIL(r, MS_ERR_FORMAT, "tensor announces %llu bytes, shape [%lld, %lld] %s needs %zu", (unsigned long long)t->bytes,
              (long long)t->rows, (long long)t->cols, ms_dtype_name(t->dtype), bytes);
    if (!framed) { /* the receiver's ms_xfer checks it against the negotiation and fetches the bytes */
        *feat_dim = t->cols;
        return MS_OK;
    }
    if (tensor_len != bytes)
        RFAIL(r, MS_ERR_FORMAT, "tensor frame has %zu bytes, %zu announced", tensor_len, bytes);
    if (n > 0) {
        /* Backed by the frame: ≤ 2·tensor_len bytes (F16/BF16 → F32). */
        if (arena_slot((void **)&r->a->feat, &r->a->feat_cap, n * sizeof(float)) != MS_OK)
            RFAIL(r, MS_ERR_NOMEM, "tensor: out of memory for %zu floats", n);
        if (t->dtype == MS_DTYPE_F32) {
            memcpy(r->a->feat, tensor, bytes);
        } else if ((uintptr_t)tensor % sizeof(uint16_t) == 0) {
            ms_convert_to_f32(r->a->feat, tensor, t->dtype, (int64_t)n);
        } else { /* a frame at an odd address: no uint16 loads from it */
            const uint8_t *src = tensor;
            for (size_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, src + 2 * i, 2);
                r->a->feat[i] = t->dtype == MS_DTYPE_F16 ? ms_f16_to_f32(h) : ms_bf16_to_f32(h);
            }
        }
    }
    *features = r->a->feat;
    *feat_dim = t->cols;
    return MS_OK;
}

static ms_wire_tensor tensor_of(const tensor_info *t) {
    if (!t->present) return (ms_wire_tensor){0};
    return (ms_wire_tensor){.via = t->via, .dtype = t->dtype, .rows = t->rows, .cols = t->cols, .bytes = t->bytes};
}

/* The offer keys come all together or not at all (see ms_wire.h). */
static ms_status finish_hello(rd *r, const ms_wire_xfer *x, uint64_t seen) {
    if (!(seen & B_HELLO_XFER)) return MS_OK;
    if (!(seen & B(K_XFER_OFFER))) RFAIL(r, MS_ERR_FORMAT, "transport fields without 'xfer_offer'");
    uint64_t need = B(K_XFER_OFFER) | B(K_GPU_UUID) | B(K_HOST_ID);
    if (x->offer & (1u << MS_WIRE_VIA_IPC)) need |= B(K_XFER_ROWS) | B(K_IPC_MEM) | B(K_IPC_EVENT);
    if (seen & B_HELLO_XFER & ~need)
        RFAIL(r, MS_ERR_FORMAT, "field '%s' without the ipc offer", key_names[__builtin_ctzll(seen & B_HELLO_XFER & ~need)]);
    if (need & ~seen) RFAIL(r, MS_ERR_FORMAT, "missing field '%s' of the transport offer", key_names[__builtin_ctzll(need & ~seen)]);
    return MS_OK;
}

ms_status ms_wire_decode(const void *ctrl, size_t ctrl_len, const void *tensor, size_t tensor_len, bool has_tensor,
                         ms_wire_arena *arena, ms_wire_msg *out) {
    MS_ASSERT(arena && out && (ctrl || ctrl_len == 0) && (tensor || !has_tensor || tensor_len == 0));
    memset(out, 0, sizeof(*out));
    arena->err[0] = '\0';
    rd r = {ctrl, ctrl, arena, "message"};
    if (ctrl_len > 0) r.end = (const uint8_t *)ctrl + ctrl_len;

    val v = {0};
    MS_TRY(rd_val(&r, "control map", &v));
    if (v.k != V_MAP) RFAIL(&r, MS_ERR_FORMAT, "control frame is %s, expected a map", vkind_names[v.k]);
    uint64_t n_keys = v.u;
    /* "v" first, so that any other version is named as such before its keys are judged */
    if (n_keys < 2) RFAIL(&r, MS_ERR_FORMAT, "control map has %llu keys, expected 'v', 't', ...", (unsigned long long)n_keys);
    MS_TRY(rd_val(&r, "v", &v));
    if (!str_is(&v, "v")) RFAIL(&r, MS_ERR_FORMAT, "first key of the control map is not 'v'");
    MS_TRY(rd_val(&r, "v", &v));
    if (v.k != V_UINT && v.k != V_NINT) RFAIL(&r, MS_ERR_FORMAT, "field 'v' is %s, expected an integer", vkind_names[v.k]);
    if (v.k != V_UINT || v.u != MS_PROTO_VERSION)
        RFAIL(&r, MS_ERR_UNSUPPORTED, "peer speaks protocol version %lld, this node speaks version %d",
              v.k == V_UINT ? (long long)v.u : (long long)v.i, MS_PROTO_VERSION);
    out->version = MS_PROTO_VERSION;
    MS_TRY(rd_val(&r, "t", &v));
    if (!str_is(&v, "t")) RFAIL(&r, MS_ERR_FORMAT, "second key of the control map is not 't'");
    MS_TRY(rd_expect(&r, "t", V_STR, &v));
    for (int t = MS_WIRE_HELLO; t <= MS_WIRE_HEARTBEAT; t++)
        if (str_is(&v, type_info[t].name)) out->type = (ms_wire_type)t;
    if (!out->type) {
        char buf[48];
        RFAIL(&r, MS_ERR_FORMAT, "unknown message type '%s'", printable(v.s, v.u, buf, sizeof(buf)));
    }
    r.what = type_info[out->type].name;

    dstate d = {0};
    uint64_t allowed = type_info[out->type].keys, seen = 0;
    for (uint64_t e = 2; e < n_keys; e++) {
        int k = 0;
        MS_TRY(rd_key(&r, "control map", key_names, K_COUNT, allowed, &k));
        if (seen & B(k)) RFAIL(&r, MS_ERR_FORMAT, "duplicate key '%s'", key_names[k]);
        seen |= B(k);
        MS_TRY(rd_field(&r, k, out, &d));
    }
    if (r.p != r.end) RFAIL(&r, MS_ERR_FORMAT, "%zu trailing bytes after the control map", (size_t)(r.end - r.p));
    uint64_t missing = (allowed & ~type_info[out->type].optional) & ~seen;
    if (missing) RFAIL(&r, MS_ERR_FORMAT, "missing field '%s'", key_names[__builtin_ctzll(missing)]);

    if (has_tensor && out->type != MS_WIRE_BEGIN && out->type != MS_WIRE_VERIFY)
        RFAIL(&r, MS_ERR_FORMAT, "a tensor frame of %zu bytes came with a message that carries none", tensor_len);
    switch (out->type) {
    case MS_WIRE_HELLO:
        MS_TRY(finish_hello(&r, &out->u.hello.xfer, seen));
        /* all zero means absent: a present one must not be, or bytes would not round-trip */
        if ((seen & B(K_AUTH)) && all_zero(out->u.hello.auth, MS_WIRE_AUTH_BYTES))
            RFAIL(&r, MS_ERR_FORMAT, "field 'auth' is all zero");
        break;
    case MS_WIRE_HELLO_ACK:
        if ((out->u.ack.xfer == MS_WIRE_VIA_NCCL) != !!(seen & B(K_NCCL_ID)))
            RFAIL(&r, MS_ERR_FORMAT, "field 'nccl_id' %s", seen & B(K_NCCL_ID) ? "without xfer 'nccl'" : "missing for xfer 'nccl'");
        if ((seen & B(K_NONCE)) && all_zero(out->u.ack.nonce, MS_WIRE_NONCE_BYTES))
            RFAIL(&r, MS_ERR_FORMAT, "field 'nonce' is all zero");
        break;
    case MS_WIRE_BEGIN: {
        ms_msg_begin *b = &out->u.begin;
        b->request_id = out->request_id;
        if (b->n_prompt < 1) RFAIL(&r, MS_ERR_FORMAT, "field 'prompt' is empty");
        MS_TRY(check_len(&r, &d, K_TOPK_PRE, "n_prompt·k_pre", b->n_prompt * b->k_pre));
        MS_TRY(finish_features(&r, &d, b->n_prompt, "n_prompt", tensor, tensor_len, has_tensor, &b->features,
                               &b->feat_dim));
        out->tensor_seq = d.tensor.seq;
        out->tensor = tensor_of(&d.tensor);
        break;
    }
    case MS_WIRE_TREE: {
        ms_msg_tree *t = &out->u.tree;
        t->request_id = out->request_id;
        t->round = out->round;
        static const int arrays[] = {K_TOKEN, K_PARENT, K_DEPTH, K_SCORE};
        for (int i = 0; i < 4; i++) MS_TRY(check_len(&r, &d, arrays[i], "n", t->tree.n));
        MS_TRY(finish_tree(&r, &t->tree));
        break;
    }
    case MS_WIRE_VERIFY: {
        ms_msg_verify *vm = &out->u.verify;
        vm->request_id = out->request_id;
        vm->round = out->round;
        MS_TRY(check_len(&r, &d, K_PATH, "n_path", vm->n_path));
        if (vm->path[0] != 0) RFAIL(&r, MS_ERR_FORMAT, "path[0] is %d, expected the root 0", (int)vm->path[0]);
        for (int64_t i = 1; i < vm->n_path; i++)
            if (vm->path[i] <= vm->path[i - 1])
                RFAIL(&r, MS_ERR_FORMAT, "path[%lld] = %d after %d: a path goes to later nodes", (long long)i,
                      (int)vm->path[i], (int)vm->path[i - 1]);
        MS_TRY(check_len(&r, &d, K_VER_TOPK, "n_path·k_ver", vm->n_path * vm->k_ver));
        MS_TRY(finish_features(&r, &d, vm->n_path, "n_path", tensor, tensor_len, has_tensor, &vm->features,
                               &vm->feat_dim));
        out->tensor_seq = d.tensor.seq;
        out->tensor = tensor_of(&d.tensor);
        break;
    }
    default: break;
    }
    return MS_OK;
}

/* ---- comparison ------------------------------------------------------------ */

#define DIFF(...)                                          \
    do {                                                   \
        if (why && why_cap) snprintf(why, why_cap, __VA_ARGS__); \
        return false;                                      \
    } while (0)

static bool same_i32s(const int32_t *a, const int32_t *b, int64_t n) {
    return n == 0 || (a && b && memcmp(a, b, (size_t)n * sizeof(int32_t)) == 0);
}

static bool same_features(const float *a, int64_t da, const float *b, int64_t db, int64_t rows) {
    if (!a || !b) return !a && !b;
    return da == db && memcmp(a, b, (size_t)rows * (size_t)da * sizeof(float)) == 0;
}

/* A transport announcement (via != host) is the message's payload description. */
static bool same_announce(const ms_wire_msg *a, const ms_wire_msg *b, int64_t da, int64_t db) {
    bool ea = a->tensor.via != MS_WIRE_VIA_HOST, eb = b->tensor.via != MS_WIRE_VIA_HOST;
    if (!ea && !eb) return true;
    return ea == eb && a->tensor.via == b->tensor.via && a->tensor.dtype == b->tensor.dtype && da == db &&
           a->tensor_seq == b->tensor_seq;
}

bool ms_wire_msg_equal(const ms_wire_msg *a, const ms_wire_msg *b, char *why, size_t why_cap) {
    if (why && why_cap) why[0] = '\0';
    if (a->type != b->type) DIFF("type %s vs %s", ms_wire_type_name(a->type), ms_wire_type_name(b->type));
    if (a->request_id != b->request_id) DIFF("rid");
    if (a->round != b->round) DIFF("round");
    switch (a->type) {
    case MS_WIRE_HELLO: {
        const ms_wire_hello *x = &a->u.hello, *y = &b->u.hello;
        if (x->role != y->role) DIFF("hello.role");
        if (strcmp(x->model_fp, y->model_fp)) DIFF("hello.model_fp");
        if (strcmp(x->tok_fp, y->tok_fp)) DIFF("hello.tok_fp");
        if (x->vocab != y->vocab) DIFF("hello.vocab");
        if (x->hidden != y->hidden) DIFF("hello.hidden");
        if (strcmp(x->kind, y->kind)) DIFF("hello.kind");
        if (x->wants_features != y->wants_features) DIFF("hello.wants_features");
        if (x->pid != y->pid) DIFF("hello.pid");
        const ms_wire_xfer *p = &x->xfer, *q = &y->xfer;
        if (p->offer != q->offer) DIFF("hello.xfer.offer");
        if (memcmp(p->gpu_uuid, q->gpu_uuid, sizeof p->gpu_uuid)) DIFF("hello.xfer.gpu_uuid");
        if (strcmp(p->host_id, q->host_id)) DIFF("hello.xfer.host_id");
        if (p->max_rows != q->max_rows) DIFF("hello.xfer.max_rows");
        if (memcmp(p->ipc_mem, q->ipc_mem, sizeof p->ipc_mem)) DIFF("hello.xfer.ipc_mem");
        if (memcmp(p->ipc_event, q->ipc_event, sizeof p->ipc_event)) DIFF("hello.xfer.ipc_event");
        if (memcmp(x->auth, y->auth, sizeof x->auth)) DIFF("hello.auth");
        break;
    }
    case MS_WIRE_HELLO_ACK:
        if (a->u.ack.accepted != b->u.ack.accepted) DIFF("hello_ack.accepted");
        if (strcmp(a->u.ack.reason, b->u.ack.reason)) DIFF("hello_ack.reason");
        if (a->u.ack.xfer != b->u.ack.xfer) DIFF("hello_ack.xfer");
        if (memcmp(a->u.ack.nccl_id, b->u.ack.nccl_id, sizeof a->u.ack.nccl_id)) DIFF("hello_ack.nccl_id");
        if (memcmp(a->u.ack.nonce, b->u.ack.nonce, sizeof a->u.ack.nonce)) DIFF("hello_ack.nonce");
        break;
    case MS_WIRE_BEGIN: {
        const ms_msg_begin *x = &a->u.begin, *y = &b->u.begin;
        if (x->request_id != y->request_id) DIFF("begin.request_id");
        if (x->n_prompt != y->n_prompt) DIFF("begin.n_prompt");
        if (!same_i32s(x->prompt, y->prompt, x->n_prompt)) DIFF("begin.prompt");
        if (x->k_pre != y->k_pre) DIFF("begin.k_pre");
        if (!same_i32s(x->topk_pre, y->topk_pre, x->n_prompt * x->k_pre)) DIFF("begin.topk_pre");
        if (x->root != y->root) DIFF("begin.root");
        if (x->skip_model != y->skip_model) DIFF("begin.skip_model");
        if (!same_features(x->features, x->feat_dim, y->features, y->feat_dim, x->n_prompt)) DIFF("begin.features");
        if (x->features && a->tensor_seq != b->tensor_seq) DIFF("tensor_seq");
        if (!same_announce(a, b, x->feat_dim, y->feat_dim)) DIFF("begin.tensor (via)");
        break;
    }
    case MS_WIRE_TREE: {
        const ms_msg_tree *x = &a->u.tree, *y = &b->u.tree;
        if (x->request_id != y->request_id || x->round != y->round) DIFF("tree.request_id/round");
        int64_t n = x->tree.n;
        if (n != y->tree.n) DIFF("tree.n");
        if (n < 0 || n > MS_TREE_MAX) DIFF("tree.n out of range");
        if (!same_i32s(x->tree.token, y->tree.token, n)) DIFF("tree.token");
        if (!same_i32s(x->tree.parent, y->tree.parent, n)) DIFF("tree.parent");
        if (!same_i32s(x->tree.depth, y->tree.depth, n)) DIFF("tree.depth");
        if (memcmp(x->tree.mask, y->tree.mask, (size_t)n * sizeof(uint64_t))) DIFF("tree.mask");
        if (memcmp(x->tree.score, y->tree.score, (size_t)n * sizeof(float))) DIFF("tree.score");
        const ms_draft_stats *s = &x->stats, *t = &y->stats;
        if (s->backbone_ns != t->backbone_ns || s->head_ns != t->head_ns || s->vocab_ns != t->vocab_ns)
            DIFF("tree.stats times");
        if (s->vocab_size != t->vocab_size || s->covered != t->covered || s->emitted != t->emitted)
            DIFF("tree.stats counts");
        break;
    }
    case MS_WIRE_VERIFY: {
        const ms_msg_verify *x = &a->u.verify, *y = &b->u.verify;
        if (x->request_id != y->request_id || x->round != y->round) DIFF("verify.request_id/round");
        if (x->n_path != y->n_path) DIFF("verify.n_path");
        if (x->n_path < 0 || x->n_path > MS_TREE_MAX) DIFF("verify.n_path out of range");
        if (!same_i32s(x->path, y->path, x->n_path)) DIFF("verify.path");
        if (x->bonus != y->bonus) DIFF("verify.bonus");
        if (x->k_ver != y->k_ver) DIFF("verify.k_ver");
        if (x->skip_model != y->skip_model) DIFF("verify.skip_model");
        if (!same_i32s(x->ver_topk, y->ver_topk, x->n_path * x->k_ver)) DIFF("verify.ver_topk");
        if (!same_features(x->features, x->feat_dim, y->features, y->feat_dim, x->n_path)) DIFF("verify.features");
        if (x->features && a->tensor_seq != b->tensor_seq) DIFF("tensor_seq");
        if (!same_announce(a, b, x->feat_dim, y->feat_dim)) DIFF("verify.tensor (via)");
        break;
    }
    case MS_WIRE_CANCEL:
        if (strcmp(a->u.cancel.reason, b->u.cancel.reason)) DIFF("cancel.reason");
        break;
    case MS_WIRE_END: break;
    case MS_WIRE_ERROR:
        if (a->u.error.code != b->u.error.code) DIFF("error.code");
        if (strcmp(a->u.error.message, b->u.error.message)) DIFF("error.message");
        break;
    case MS_WIRE_HEARTBEAT:
        if (a->u.heartbeat.seq != b->u.heartbeat.seq) DIFF("heartbeat.seq");
        if (a->u.heartbeat.t_ns != b->u.heartbeat.t_ns) DIFF("heartbeat.t_ns");
        break;
    }
    return true;
}
