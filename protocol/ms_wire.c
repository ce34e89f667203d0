/* ms_wire.c — MessagePack encoding and strict decoding of the link messages.
 *
 * Each message type is one field table (key, kind, bounds, where it lives in
 * ms_wire_msg, when it is sent); the encoder's checks, the encoder, the
 * decoder and the comparator below walk those tables, and a small hook per
 * type holds what a table cannot say (a tree's structure, a path's order).
 * A new message is a struct in ms_wire.h, an enum value and one table here.
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tensor.h"

/* ---- the messages: one field table each ------------------------------------ */

typedef enum {
    F_U64,    /* uint64_t */
    F_I64,    /* int64_t in lo..hi */
    F_I32,    /* int32_t in lo..hi (an integer on the wire like F_I64) */
    F_BOOL,   /* bool */
    F_BITS,   /* uint32_t, bits within hi only, value lo..hi; a uint on the wire */
    F_ENUM,   /* an enum (int-sized) as the string names[v], v in lo..hi */
    F_STR,    /* char[hi + 1]: at most hi bytes, no NUL byte inside */
    F_HEX,    /* uint8_t[hi] as 2·hi lowercase hex digits (one spelling per value) */
    F_IDS,    /* const int32_t * into arena slot `slot`; entries in lo..hi */
    F_IDS_IN, /* int32_t[] inside the message; entries in lo..hi */
    F_F32S,   /* float[] inside the message; float32 on the wire, never NaN */
    F_STATS,  /* ms_draft_stats, a map of its own (stats_keys) */
    F_TENSOR, /* const float * features announced as "tensor" (frame 1 or a transport) */
} fkind;

/* When a field is on the wire. W_SET: only when its value is not zero (then an
 * all-zero hex string is refused: it would not round-trip). W_IF: exactly when
 * bits(dep) & mask; its value must be zero otherwise. */
typedef enum { W_ALWAYS, W_SET, W_IF } fwhen;

typedef struct {
    const char *key; /* first member: key lookups read names through it */
    uint8_t kind, when;
    int8_t slot;          /* F_IDS: arena slot */
    uint32_t mask;        /* W_IF */
    const char *dep;      /* W_IF: the key whose value's bits decide */
    const char *if_what;  /* W_IF: what calls for the field, for errors */
    size_t off;           /* offsetof(ms_wire_msg, the field) */
    int64_t lo, hi;       /* integer bounds (arrays: each entry's); F_STR / F_HEX: the size; F_BITS: also the mask */
    int64_t max;          /* arrays / F_TENSOR: most entries / rows; < 0: -max · the arena's max_prompt */
    size_t cnt, cnt2;     /* arrays / F_TENSOR: offsets of the int64 counts whose product is the length (cnt2 0: none) */
    const char *cnt_name; /* that product in errors; NULL: the array's length sets *cnt (≥ 1) */
    size_t aux;           /* F_TENSOR: offsetof feat_dim */
    const char *const *names; /* F_ENUM, indexed by value */
} wfield;

#define M(f) offsetof(ms_wire_msg, f)
#define FU64(k, f) .key = k, .kind = F_U64, .off = M(f)
#define FI64(k, f, l, h) .key = k, .kind = F_I64, .off = M(f), .lo = (l), .hi = (h)
#define FI32(k, f, l, h) .key = k, .kind = F_I32, .off = M(f), .lo = (l), .hi = (h)
#define FBOOL(k, f) .key = k, .kind = F_BOOL, .off = M(f)
#define FSTR(k, f, n) .key = k, .kind = F_STR, .off = M(f), .hi = (n)
#define FHEX(k, f, n) .key = k, .kind = F_HEX, .off = M(f), .hi = (n)
#define FENUM(k, f, nm, l, h) .key = k, .kind = F_ENUM, .off = M(f), .names = nm, .lo = (l), .hi = (h)
#define FIDS(k, f, s, mx, c, c2, cn)                                                                          \
    .key = k, .kind = F_IDS, .off = M(f), .slot = (s), .lo = 0, .hi = INT32_MAX, .max = (mx), .cnt = M(c), \
    .cnt2 = (c2), .cnt_name = cn
#define FIN(k, kd, f, l, h, c, cn) \
    .key = k, .kind = kd, .off = M(f), .lo = (l), .hi = (h), .max = MS_TREE_MAX, .cnt = M(c), .cnt_name = cn
#define FTENSOR(f, fd, mx, rows, cn) .key = "tensor", .kind = F_TENSOR, .when = W_SET, .off = M(f), .aux = M(fd), \
    .max = (mx), .cnt = M(rows), .cnt_name = cn
#define SENT_IF(d, m, what) .when = W_IF, .dep = d, .mask = (m), .if_what = what

static const char *const role_names[] = {"?", "target", "draft"};
static const char *const via_names[MS_WIRE_VIA_COUNT] = {"host", "ipc", "nccl"};
static const char *const stats_keys[6] = {"backbone_ns", "head_ns", "vocab_ns", "vocab_size", "covered", "emitted"};
static const char *const tensor_keys[5] = {"seq", "dtype", "shape", "bytes", "via"};
_Static_assert(sizeof(ms_wire_role) == sizeof(int) && sizeof(ms_wire_via) == sizeof(int), "F_ENUM reads an int");

#define IPC_BIT (1u << MS_WIRE_VIA_IPC)
#define VIA_BITS (IPC_BIT | (1u << MS_WIRE_VIA_NCCL))

/* Every message starts with these (after "v" and "t"). */
static const wfield env_fields[] = {
    {FU64("rid", request_id)},
    {FI64("round", round, 0, INT64_MAX)},
};
#define N_ENV 2

static const wfield hello_fields[] = {
    {FENUM("role", u.hello.role, role_names, MS_WIRE_ROLE_TARGET, MS_WIRE_ROLE_DRAFT)},
    {FSTR("model_fp", u.hello.model_fp, MS_WIRE_FP_MAX)},
    {FSTR("tok_fp", u.hello.tok_fp, MS_WIRE_FP_MAX)},
    {FI64("vocab", u.hello.vocab, 1, INT32_MAX)},
    {FI64("hidden", u.hello.hidden, 1, MS_WIRE_FEAT_DIM_MAX)},
    {FSTR("kind", u.hello.kind, MS_WIRE_KIND_MAX)},
    {FBOOL("wants_features", u.hello.wants_features)},
    {FI64("pid", u.hello.pid, 0, INT32_MAX)},
    /* the tensor-transport offer (ms_xfer.h): all absent for a host-only peer */
    {.key = "xfer_offer", .kind = F_BITS, .when = W_SET, .off = M(u.hello.xfer.offer), .lo = 1, .hi = VIA_BITS},
    {FHEX("gpu_uuid", u.hello.xfer.gpu_uuid, MS_WIRE_UUID_BYTES), SENT_IF("xfer_offer", VIA_BITS, "an 'xfer_offer'")},
    {FSTR("host_id", u.hello.xfer.host_id, MS_WIRE_HOST_ID_MAX), SENT_IF("xfer_offer", VIA_BITS, "an 'xfer_offer'")},
    {FI64("xfer_rows", u.hello.xfer.max_rows, 1, MS_WIRE_XFER_ROWS_MAX), SENT_IF("xfer_offer", IPC_BIT, "the ipc offer")},
    {FHEX("ipc_mem", u.hello.xfer.ipc_mem, MS_WIRE_IPC_HANDLE_BYTES), SENT_IF("xfer_offer", IPC_BIT, "the ipc offer")},
    {FHEX("ipc_event", u.hello.xfer.ipc_event, MS_WIRE_IPC_HANDLE_BYTES), SENT_IF("xfer_offer", IPC_BIT, "the ipc offer")},
    {FHEX("auth", u.hello.auth, MS_WIRE_AUTH_BYTES), .when = W_SET},
};

static const wfield ack_fields[] = {
    {FBOOL("accepted", u.ack.accepted)},
    {FSTR("reason", u.ack.reason, MS_WIRE_REASON_MAX)},
    /* from ipc: "host" is never written (absence says it), so accepting it would break canonical bytes */
    {FENUM("xfer", u.ack.xfer, via_names, MS_WIRE_VIA_IPC, MS_WIRE_VIA_NCCL), .when = W_SET},
    {FHEX("nccl_id", u.ack.nccl_id, MS_WIRE_NCCL_ID_BYTES), SENT_IF("xfer", 1u << MS_WIRE_VIA_NCCL, "xfer 'nccl'")},
    {FHEX("nonce", u.ack.nonce, MS_WIRE_NONCE_BYTES), .when = W_SET},
};

static const wfield begin_fields[] = {
    {FIDS("prompt", u.begin.prompt, 0, -1, u.begin.n_prompt, 0, NULL)},
    {FI64("k_pre", u.begin.k_pre, 0, MS_WIRE_TOPK_MAX)},
    {FIDS("topk_pre", u.begin.topk_pre, 1, -MS_WIRE_TOPK_MAX, u.begin.n_prompt, M(u.begin.k_pre), "n_prompt·k_pre")},
    {FI32("root", u.begin.root, 0, INT32_MAX)},
    {FBOOL("skip_model", u.begin.skip_model), .when = W_SET},
    {FTENSOR(u.begin.features, u.begin.feat_dim, -1, u.begin.n_prompt, "n_prompt")},
};

static const wfield tree_fields[] = {
    {FI64("n", u.tree.tree.n, 1, MS_TREE_MAX)},
    {FIN("token", F_IDS_IN, u.tree.tree.token, 0, INT32_MAX, u.tree.tree.n, "n")},
    {FIN("parent", F_IDS_IN, u.tree.tree.parent, -1, MS_TREE_MAX - 1, u.tree.tree.n, "n")},
    {FIN("depth", F_IDS_IN, u.tree.tree.depth, 0, MS_TREE_MAX - 1, u.tree.tree.n, "n")},
    {FIN("score", F_F32S, u.tree.tree.score, 0, 0, u.tree.tree.n, "n")},
    {.key = "stats", .kind = F_STATS, .off = M(u.tree.stats)}, /* masks are not sent: rebuilt from the parents */
    {FU64("ngram", u.tree.tree.ngram), .when = W_SET}, /* validated with the tree (ms_tree_validate) */
};

static const wfield verify_fields[] = {
    {FI64("n_path", u.verify.n_path, 1, MS_TREE_MAX)},
    {FIN("path", F_IDS_IN, u.verify.path, 0, MS_TREE_MAX - 1, u.verify.n_path, "n_path")},
    {FI32("bonus", u.verify.bonus, 0, INT32_MAX)},
    {FI64("k_ver", u.verify.k_ver, 0, MS_WIRE_TOPK_MAX)},
    {FIDS("ver_topk", u.verify.ver_topk, 1, (int64_t)MS_TREE_MAX * MS_WIRE_TOPK_MAX, u.verify.n_path,
          M(u.verify.k_ver), "n_path·k_ver")},
    {FBOOL("skip_model", u.verify.skip_model), .when = W_SET},
    {FTENSOR(u.verify.features, u.verify.feat_dim, MS_TREE_MAX, u.verify.n_path, "n_path")},
};

static const wfield cancel_fields[] = {{FSTR("reason", u.cancel.reason, MS_WIRE_REASON_MAX)}};

static const wfield error_fields[] = {
    {FI32("code", u.error.code, INT32_MIN, -1)},
    {FSTR("message", u.error.message, MS_WIRE_MESSAGE_MAX)},
};

static const wfield heartbeat_fields[] = {
    {FU64("seq", u.heartbeat.seq)},
    {FU64("t_ns", u.heartbeat.t_ns)},
};

static const wfield ping_fields[] = {
    {FSTR("build", u.ping.build, MS_WIRE_BUILD_MAX)},
    {FU64("seq", u.ping.seq)},
    {FBOOL("reply", u.ping.reply)},
};

typedef struct rd rd;

/* One row per type: its wire name, its fields, the offsets of the inner
 * struct's copies of rid/round (0: none; the decoder fills them, the encoder
 * checks them), and hooks for the rules across fields a table cannot say. */
typedef struct {
    const char *name;
    const wfield *fields;
    int n_fields;
    size_t rid_copy, round_copy;
    ms_status (*check)(const ms_wire_msg *m);           /* encode: MS_ERR_INVALID naming the field */
    ms_status (*finish)(rd *r, ms_wire_msg *m);         /* decode, after every field is in */
    const char *(*differs)(const ms_wire_msg *a, const ms_wire_msg *b); /* equal: what is not on the wire */
} wtype;

static ms_status tree_check(const ms_wire_msg *m);
static ms_status tree_finish(rd *r, ms_wire_msg *m);
static const char *tree_differs(const ms_wire_msg *a, const ms_wire_msg *b);
static ms_status verify_check(const ms_wire_msg *m);
static ms_status verify_finish(rd *r, ms_wire_msg *m);

#define TABLE(t) .fields = t, .n_fields = (int)(sizeof(t) / sizeof((t)[0]))
static const wtype types[] = {
    [MS_WIRE_HELLO] = {.name = "hello", TABLE(hello_fields)},
    [MS_WIRE_HELLO_ACK] = {.name = "hello_ack", TABLE(ack_fields)},
    [MS_WIRE_BEGIN] = {.name = "begin", TABLE(begin_fields), .rid_copy = M(u.begin.request_id)},
    [MS_WIRE_TREE] = {.name = "tree", TABLE(tree_fields), .rid_copy = M(u.tree.request_id),
                      .round_copy = M(u.tree.round), .check = tree_check, .finish = tree_finish,
                      .differs = tree_differs},
    [MS_WIRE_VERIFY] = {.name = "verify", TABLE(verify_fields), .rid_copy = M(u.verify.request_id),
                        .round_copy = M(u.verify.round), .check = verify_check, .finish = verify_finish},
    [MS_WIRE_CANCEL] = {.name = "cancel", TABLE(cancel_fields)},
    [MS_WIRE_END] = {.name = "end"},
    [MS_WIRE_ERROR] = {.name = "error", TABLE(error_fields)},
    [MS_WIRE_HEARTBEAT] = {.name = "heartbeat", TABLE(heartbeat_fields)},
    [MS_WIRE_PING] = {.name = "ping", TABLE(ping_fields)},
};
_Static_assert(sizeof(types) / sizeof(types[0]) == MS_WIRE_TYPE_COUNT + 1,
               "one row per ms_wire_type (values 1..MS_WIRE_TYPE_COUNT)");

static bool valid_type(ms_wire_type t) { return t >= 1 && t <= MS_WIRE_TYPE_COUNT && types[t].name; }

const char *ms_wire_type_name(ms_wire_type t) { return valid_type(t) ? types[t].name : "?"; }

static int n_all(const wtype *t) { return N_ENV + t->n_fields; }
static const wfield *field_at(const wtype *t, int i) { return i < N_ENV ? &env_fields[i] : &t->fields[i - N_ENV]; }
_Static_assert(N_ENV == sizeof(env_fields) / sizeof(env_fields[0]), "N_ENV");

#define FP(m, f) ((const char *)(m) + (f)->off)
#define I64_AT(m, o) (*(const int64_t *)((const char *)(m) + (o)))

static bool all_zero(const uint8_t *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (v[i]) return false;
    return true;
}

/* An array's length (or a tensor's rows) as the message's counts say. */
static int64_t count_of(const ms_wire_msg *m, const wfield *f) {
    return f->cnt2 ? I64_AT(m, f->cnt) * I64_AT(m, f->cnt2) : I64_AT(m, f->cnt);
}

/* A field's value as bits: 0 exactly when it is "zero" (absent for W_SET);
 * an enum value v is bit v, so a via compares against the offer's bits. */
static uint64_t field_bits(const ms_wire_msg *m, const wfield *f) {
    const char *p = FP(m, f);
    switch (f->kind) {
    case F_U64: return *(const uint64_t *)p;
    case F_I64: return (uint64_t)*(const int64_t *)p;
    case F_I32: return (uint32_t)*(const int32_t *)p;
    case F_BOOL: return *(const bool *)p;
    case F_BITS: return *(const uint32_t *)p;
    case F_ENUM: {
        int v = *(const int *)p;
        return v == 0 ? 0 : (v > 0 && v < 64) ? UINT64_C(1) << v : UINT64_MAX;
    }
    case F_STR: return p[0] != 0;
    case F_HEX: return !all_zero((const uint8_t *)p, (size_t)f->hi);
    case F_TENSOR: return *(const float *const *)p != NULL || m->tensor.via != MS_WIRE_VIA_HOST;
    default: return 1;
    }
}

static const wfield *field_named(const wtype *t, const char *key) {
    for (int i = 0; i < n_all(t); i++)
        if (!strcmp(field_at(t, i)->key, key)) return field_at(t, i);
    MS_ASSERT(!"a W_IF field names a key of its own table");
    return NULL;
}

/* W_IF: whether the message calls for the field. */
static bool field_called(const ms_wire_msg *m, const wtype *t, const wfield *f) {
    return (field_bits(m, field_named(t, f->dep)) & f->mask) != 0;
}

static bool field_sent(const ms_wire_msg *m, const wtype *t, const wfield *f) {
    return f->when == W_ALWAYS || (f->when == W_SET ? field_bits(m, f) != 0 : field_called(m, t, f));
}

static const wfield *tensor_field(const wtype *t) {
    for (int i = 0; i < t->n_fields; i++)
        if (t->fields[i].kind == F_TENSOR) return &t->fields[i];
    return NULL;
}

/* ---- buffers and arena ----------------------------------------------------- */

void ms_wire_buf_free(ms_wire_buf *b) {
    if (!b) return;
    free(b->data);
    *b = (ms_wire_buf){0};
}

#define N_SLOTS 2
struct ms_wire_arena {
    int64_t max_prompt;
    int32_t *ids[N_SLOTS]; /* F_IDS slots: 0 begin.prompt, 1 begin.topk_pre / verify.ver_topk */
    size_t ids_cap[N_SLOTS];
    float *feat;           /* begin/verify features as f32 */
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
    for (int s = 0; s < N_SLOTS; s++) free((*a)->ids[s]);
    free((*a)->feat);
    free(*a);
    *a = NULL;
}

const char *ms_wire_arena_error(const ms_wire_arena *a) { return a ? a->err : ""; }

size_t ms_wire_arena_bytes(const ms_wire_arena *a) {
    return a ? a->ids_cap[0] + a->ids_cap[1] + a->feat_cap : 0;
}

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
/* A string field must be NUL-terminated within max characters. */
static ms_status check_str(const char *type, const char *field, const char *s, size_t max) {
    if (strnlen(s, max + 1) > max)
        MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' longer than %zu characters", type, field, max);
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

/* An id array: its length within bounds, entries within lo..hi. */
static ms_status check_ids(const ms_wire_msg *m, const char *tn, const wfield *f) {
    int64_t n = count_of(m, f);
    if (!f->cnt_name && (n < 1 || n > INT32_MAX))
        MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' has %lld entries, expected 1..%d", tn, f->key, (long long)n,
                INT32_MAX);
    if (n < 0 || (f->max > 0 && n > f->max))
        MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' has %lld entries", tn, f->key, (long long)n);
    const int32_t *v = f->kind == F_IDS ? *(const int32_t *const *)FP(m, f) : (const int32_t *)FP(m, f);
    if (n > 0 && !v) MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' is NULL with %lld entries", tn, f->key, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (v[i] < f->lo || v[i] > f->hi)
            MS_FAIL(MS_ERR_INVALID, "encode %s: %s[%lld] = %d, expected %lld..%lld", tn, f->key, (long long)i,
                    (int)v[i], (long long)f->lo, (long long)f->hi);
    return MS_OK;
}

static ms_status check_stats(const char *tn, const ms_draft_stats *s) {
    if (s->vocab_size < 0 || s->covered < 0 || s->emitted < 0 || s->covered > s->emitted)
        MS_FAIL(MS_ERR_INVALID, "encode %s: stats vocab_size %lld covered %lld emitted %lld", tn,
                (long long)s->vocab_size, (long long)s->covered, (long long)s->emitted);
    return MS_OK;
}

/* Whatever the decoder would refuse in one field, as MS_ERR_INVALID. */
static ms_status check_field(const ms_wire_msg *m, const wtype *t, const wfield *f, size_t *tbytes) {
    const char *tn = t->name, *k = f->key, *p = FP(m, f);
    if (!field_sent(m, t, f)) {
        if (f->when == W_IF && field_bits(m, f))
            MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' set without %s", tn, k, f->if_what);
        return MS_OK;
    }
    int64_t x = 0;
    switch (f->kind) {
    case F_I64:
    case F_I32:
    case F_ENUM:
        x = f->kind == F_I64 ? *(const int64_t *)p : f->kind == F_I32 ? *(const int32_t *)p : *(const int *)p;
        if (x < f->lo || x > f->hi)
            MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' is %lld, expected %lld..%lld", tn, k, (long long)x,
                    (long long)f->lo, (long long)f->hi);
        return MS_OK;
    case F_BITS:
        if (*(const uint32_t *)p & ~(uint32_t)f->hi)
            MS_FAIL(MS_ERR_INVALID, "encode %s: field '%s' 0x%x has unknown bits", tn, k, (unsigned)*(const uint32_t *)p);
        return MS_OK;
    case F_STR: return check_str(tn, k, p, (size_t)f->hi);
    case F_IDS:
    case F_IDS_IN: return check_ids(m, tn, f);
    case F_F32S:
        for (int64_t i = 0; i < count_of(m, f); i++)
            if (isnan(((const float *)p)[i])) MS_FAIL(MS_ERR_INVALID, "encode %s: %s[%lld] is NaN", tn, k, (long long)i);
        return MS_OK;
    case F_STATS: return check_stats(tn, (const ms_draft_stats *)p);
    case F_TENSOR: {
        const float *feat = *(const float *const *)p;
        int64_t rows = count_of(m, f), feat_dim = I64_AT(m, f->aux);
        MS_TRY(check_features(tn, feat, rows, feat_dim, tbytes));
        return check_announce(tn, &m->tensor, feat, rows, feat_dim, tbytes);
    }
    default: return MS_OK;
    }
}

/* Everything the decoder would reject in m, as MS_ERR_INVALID. */
static ms_status check_msg(const ms_wire_msg *m, const wtype *t, size_t *tensor_bytes) {
    *tensor_bytes = 0;
    if (t->rid_copy && I64_AT(m, t->rid_copy) != (int64_t)m->request_id)
        MS_FAIL(MS_ERR_INVALID, "encode %s: request id %llu, envelope %llu", t->name,
                (unsigned long long)I64_AT(m, t->rid_copy), (unsigned long long)m->request_id);
    if (t->round_copy && I64_AT(m, t->round_copy) != m->round)
        MS_FAIL(MS_ERR_INVALID, "encode %s: round %lld, envelope round %lld", t->name,
                (long long)I64_AT(m, t->round_copy), (long long)m->round);
    for (int i = 0; i < n_all(t); i++) MS_TRY(check_field(m, t, field_at(t, i), tensor_bytes));
    return t->check ? t->check(m) : MS_OK;
}

static void put_field(msgpack_packer *pk, const ms_wire_msg *m, const wfield *f, size_t tbytes) {
    const char *k = f->key, *p = FP(m, f);
    switch (f->kind) {
    case F_U64: put_u64(pk, k, *(const uint64_t *)p); break;
    case F_I64: put_i64(pk, k, *(const int64_t *)p); break;
    case F_I32: put_i64(pk, k, *(const int32_t *)p); break;
    case F_BOOL: put_bool(pk, k, *(const bool *)p); break;
    case F_BITS: put_u64(pk, k, *(const uint32_t *)p); break;
    case F_ENUM: put_kstr(pk, k, f->names[*(const int *)p]); break;
    case F_STR: put_kstr(pk, k, p); break;
    case F_HEX: put_hex(pk, k, (const uint8_t *)p, (size_t)f->hi); break;
    case F_IDS: put_i32s(pk, k, *(const int32_t *const *)p, count_of(m, f)); break;
    case F_IDS_IN: put_i32s(pk, k, (const int32_t *)p, count_of(m, f)); break;
    case F_F32S:
        put_str(pk, k);
        msgpack_pack_array(pk, (size_t)count_of(m, f));
        for (int64_t i = 0; i < count_of(m, f); i++) msgpack_pack_float(pk, ((const float *)p)[i]);
        break;
    case F_STATS: {
        const ms_draft_stats *st = (const ms_draft_stats *)p;
        put_str(pk, k);
        msgpack_pack_map(pk, 6);
        put_u64(pk, stats_keys[0], st->backbone_ns);
        put_u64(pk, stats_keys[1], st->head_ns);
        put_u64(pk, stats_keys[2], st->vocab_ns);
        put_i64(pk, stats_keys[3], st->vocab_size);
        put_i64(pk, stats_keys[4], st->covered);
        put_i64(pk, stats_keys[5], st->emitted);
        break;
    }
    case F_TENSOR: {
        const float *feat = *(const float *const *)p;
        put_tensor(pk, m->tensor_seq, m->tensor.via, feat ? MS_DTYPE_F32 : m->tensor.dtype, count_of(m, f),
                   I64_AT(m, f->aux), tbytes);
        break;
    }
    }
}

ms_status ms_wire_encode(const ms_wire_msg *m, ms_wire_buf *ctrl, const void **tensor, size_t *tensor_bytes) {
    MS_ASSERT(m && ctrl);
    if (tensor) *tensor = NULL;
    if (tensor_bytes) *tensor_bytes = 0;
    if (!valid_type(m->type)) MS_FAIL(MS_ERR_INVALID, "encode: unknown message type %d", (int)m->type);
    const wtype *t = &types[m->type];
    size_t tbytes;
    MS_TRY(check_msg(m, t, &tbytes));
    const wfield *tf = tensor_field(t);
    const float *feat = tf ? *(const float *const *)FP(m, tf) : NULL;
    if (feat && (!tensor || !tensor_bytes))
        MS_FAIL(MS_ERR_INVALID, "encode %s: features given but no place to return the tensor frame", t->name);

    ctrl->len = 0;
    sink s = {ctrl, false};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &s, sink_write);
    size_t n_keys = 2; /* "v", "t" */
    for (int i = 0; i < n_all(t); i++) n_keys += field_sent(m, t, field_at(t, i));
    msgpack_pack_map(&pk, n_keys);
    put_i64(&pk, "v", MS_PROTO_VERSION);
    put_kstr(&pk, "t", t->name);
    for (int i = 0; i < n_all(t); i++)
        if (field_sent(m, t, field_at(t, i))) put_field(&pk, m, field_at(t, i), tbytes);
    if (s.failed) {
        ctrl->len = 0;
        MS_FAIL(MS_ERR_NOMEM, "encode %s: out of memory for the control frame", t->name);
    }
    if (feat) {
        *tensor = feat;
        *tensor_bytes = tbytes;
    }
    return MS_OK;
}

/* Masks are not sent but must be right: the same check as any tree from elsewhere. */
static ms_status tree_check(const ms_wire_msg *m) {
    if (ms_tree_validate(&m->u.tree.tree) != MS_OK) MS_FAIL(MS_ERR_INVALID, "encode tree: invalid tree");
    return MS_OK;
}

/* A path starts at the root and goes to later nodes. */
static ms_status verify_check(const ms_wire_msg *m) {
    const int32_t *path = m->u.verify.path;
    if (path[0] != 0) MS_FAIL(MS_ERR_INVALID, "encode verify: path[0] = %d, expected 0", (int)path[0]);
    for (int64_t i = 1; i < m->u.verify.n_path; i++)
        if (path[i] <= path[i - 1])
            MS_FAIL(MS_ERR_INVALID, "encode verify: path[%lld] = %d after %d", (long long)i, (int)path[i],
                    (int)path[i - 1]);
    return MS_OK;
}

/* ---- decoder: a pull reader over one frame ------------------------------- */

#define B(k) (UINT64_C(1) << (k))

struct rd {
    const uint8_t *p, *end;
    ms_wire_arena *a;
    const char *what; /* message type name once known */
};

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

static bool str_is(const val *v, const char *s) { return v->k == V_STR && strlen(s) == v->u && memcmp(s, v->s, v->u) == 0; }

/* The index in n names (each the first member of an element `stride` bytes
 * apart from the next) of v, or -1. */
static int find_name(const val *v, const void *names, size_t stride, int n) {
    for (int i = 0; i < n; i++) {
        const char *s = *(const char *const *)((const char *)names + (size_t)i * stride);
        if (s[0] == (char)(v->u ? v->s[0] : 0) && str_is(v, s)) return i;
    }
    return -1;
}

/* A map key as its index among n names, or an error naming the unknown key. */
static ms_status rd_key(rd *r, const char *where, const void *names, size_t stride, int n, int *out) {
    val v = {0};
    MS_TRY(rd_val(r, where, &v));
    if (v.k != V_STR) RFAIL(r, MS_ERR_FORMAT, "%s: a key is %s, expected a string", where, vkind_names[v.k]);
    if ((*out = find_name(&v, names, stride, n)) >= 0) return MS_OK;
    char buf[48];
    RFAIL(r, MS_ERR_FORMAT, "%s: unknown key '%s'", where, printable(v.s, v.u, buf, sizeof(buf)));
}

/* A control-map key: the envelope's fields, then the type's (field_at order). */
static ms_status rd_msg_key(rd *r, const wtype *t, int *out) {
    val v = {0};
    MS_TRY(rd_val(r, "control map", &v));
    if (v.k != V_STR) RFAIL(r, MS_ERR_FORMAT, "control map: a key is %s, expected a string", vkind_names[v.k]);
    int i = find_name(&v, env_fields, sizeof(wfield), N_ENV);
    if (i < 0 && (i = find_name(&v, t->fields, sizeof(wfield), t->n_fields)) >= 0) i += N_ENV;
    if ((*out = i) >= 0) return MS_OK;
    char buf[48];
    RFAIL(r, MS_ERR_FORMAT, "control map: unknown key '%s'", printable(v.s, v.u, buf, sizeof(buf)));
}

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

/* An enum's name, one of names[lo..hi]. */
static ms_status rd_enum(rd *r, const char *field, const char *const *names, int64_t lo, int64_t hi, int *out) {
    val v = {0};
    MS_TRY(rd_expect(r, field, V_STR, &v));
    for (int64_t i = lo; i <= hi; i++)
        if (str_is(&v, names[i])) {
            *out = (int)i;
            return MS_OK;
        }
    char buf[48], want[128] = "";
    for (int64_t i = lo; i <= hi; i++) {
        size_t len = strlen(want);
        snprintf(want + len, sizeof(want) - len, "%s'%s'", i == lo ? "" : i == hi ? " or " : ", ", names[i]);
    }
    RFAIL(r, MS_ERR_FORMAT, "field '%s' is '%s', expected %s", field, printable(v.s, v.u, buf, sizeof(buf)), want);
}


static ms_status rd_tensor(rd *r, int64_t max_rows, tensor_info *t) {
    val v = {0};
    MS_TRY(rd_expect(r, "tensor", V_MAP, &v));
    uint64_t seen = 0;
    for (uint64_t e = 0; e < v.u; e++) {
        int k = 0;
        MS_TRY(rd_key(r, "tensor", tensor_keys, sizeof(tensor_keys[0]), 5, &k));
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
        case 4: MS_TRY(rd_enum(r, "tensor.via", via_names, MS_WIRE_VIA_IPC, MS_WIRE_VIA_NCCL, (int *)&t->via)); break;
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
        MS_TRY(rd_key(r, "stats", stats_keys, sizeof(stats_keys[0]), 6, &k));
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

#define MAX_FIELDS 64 /* the decoder's seen-bits */

/* Array lengths as read, checked against their counts once all keys are in. */
typedef struct {
    int64_t len[MAX_FIELDS];
    tensor_info tensor;
    const void *frame; /* frame 1 */
    size_t frame_len;
    bool has_frame;
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

/* Field i of the message's table (field_at order) into m. */
static ms_status rd_field(rd *r, const wfield *f, int i, ms_wire_msg *m, dstate *d) {
    const char *k = f->key;
    char *p = (char *)m + f->off;
    int64_t max = f->max < 0 ? -f->max * r->a->max_prompt : f->max;
    int64_t x = 0;
    switch (f->kind) {
    case F_U64: return rd_u64(r, k, (uint64_t *)p);
    case F_I64: return rd_i64(r, k, f->lo, f->hi, (int64_t *)p);
    case F_I32:
        MS_TRY(rd_i64(r, k, f->lo, f->hi, &x));
        *(int32_t *)p = (int32_t)x;
        return MS_OK;
    case F_BOOL: return rd_bool(r, k, (bool *)p);
    case F_BITS:
        MS_TRY(rd_i64(r, k, f->lo, f->hi, &x));
        if (x & ~f->hi) RFAIL(r, MS_ERR_FORMAT, "field '%s' is %lld: bit 0 (host) is implied, never sent", k, (long long)x);
        *(uint32_t *)p = (uint32_t)x;
        return MS_OK;
    case F_ENUM: return rd_enum(r, k, f->names, f->lo, f->hi, (int *)p);
    case F_STR: return rd_cstr(r, k, p, (size_t)f->hi);
    case F_HEX: return rd_hex(r, k, (uint8_t *)p, (size_t)f->hi);
    case F_IDS:
        MS_TRY(rd_ids_arena(r, k, max, &r->a->ids[f->slot], &r->a->ids_cap[f->slot], &d->len[i]));
        *(const int32_t **)p = r->a->ids[f->slot];
        if (!f->cnt_name) *(int64_t *)((char *)m + f->cnt) = d->len[i];
        return MS_OK;
    case F_IDS_IN:
        MS_TRY(rd_array(r, k, max, &d->len[i]));
        return rd_i32s(r, k, (int32_t *)p, d->len[i], f->lo, f->hi);
    case F_F32S:
        MS_TRY(rd_array(r, k, max, &d->len[i]));
        for (int64_t j = 0; j < d->len[i]; j++) MS_TRY(rd_f32(r, k, (float *)p + j));
        return MS_OK;
    case F_STATS: return rd_stats(r, (ms_draft_stats *)p);
    case F_TENSOR: return rd_tensor(r, max, &d->tensor);
    }
    RFAIL(r, MS_ERR_INTERNAL, "no reader for field '%s'", k);
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
    if (!ms_tree_ngram_valid(t))
        RFAIL(r, MS_ERR_FORMAT, "ngram %#llx names the root or a node past %lld", (unsigned long long)t->ngram,
              (long long)t->n - 1);
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


/* The rules between fields a table states: W_SET / W_IF presence, array
 * lengths against their counts, the tensor against its rows and frame. */
static ms_status finish_fields(rd *r, const wtype *t, ms_wire_msg *m, dstate *d, uint64_t seen) {
    for (int i = N_ENV; i < n_all(t); i++) {
        const wfield *f = field_at(t, i);
        bool got = seen & B(i);
        /* all zero means absent: a present one must not be, or bytes would not round-trip */
        if (f->when == W_SET && (f->kind == F_HEX || f->kind == F_U64) && got && !field_bits(m, f))
            RFAIL(r, MS_ERR_FORMAT, "field '%s' is %s", f->key, f->kind == F_HEX ? "all zero" : "0");
        if (f->when == W_IF && got != field_called(m, t, f))
            RFAIL(r, MS_ERR_FORMAT, got ? "field '%s' without %s" : "missing field '%s' for %s", f->key, f->if_what);
        if (f->kind == F_IDS || f->kind == F_IDS_IN || f->kind == F_F32S) {
            if (!f->cnt_name && d->len[i] < 1) RFAIL(r, MS_ERR_FORMAT, "field '%s' is empty", f->key);
            if (f->cnt_name && d->len[i] != count_of(m, f))
                RFAIL(r, MS_ERR_FORMAT, "field '%s' has %lld entries, %s is %lld", f->key, (long long)d->len[i],
                      f->cnt_name, (long long)count_of(m, f));
        }
        if (f->kind == F_TENSOR) {
            MS_TRY(finish_features(r, d, count_of(m, f), f->cnt_name, d->frame, d->frame_len, d->has_frame,
                                   (const float **)((char *)m + f->off), (int64_t *)((char *)m + f->aux)));
            m->tensor_seq = d->tensor.seq;
            m->tensor = tensor_of(&d->tensor);
        }
    }
    return MS_OK;
}

static ms_status tree_finish(rd *r, ms_wire_msg *m) { return finish_tree(r, &m->u.tree.tree); }

static ms_status verify_finish(rd *r, ms_wire_msg *m) {
    const ms_msg_verify *vm = &m->u.verify;
    if (vm->path[0] != 0) RFAIL(r, MS_ERR_FORMAT, "path[0] is %d, expected the root 0", (int)vm->path[0]);
    for (int64_t i = 1; i < vm->n_path; i++)
        if (vm->path[i] <= vm->path[i - 1])
            RFAIL(r, MS_ERR_FORMAT, "path[%lld] = %d after %d: a path goes to later nodes", (long long)i,
                  (int)vm->path[i], (int)vm->path[i - 1]);
    return MS_OK;
}

/* "v" first, so that any other version is named as such before its keys are
 * judged, then "t": the message's type row. */
static ms_status rd_head(rd *r, ms_wire_msg *out, uint64_t *n_keys) {
    val v = {0};
    MS_TRY(rd_val(r, "control map", &v));
    if (v.k != V_MAP) RFAIL(r, MS_ERR_FORMAT, "control frame is %s, expected a map", vkind_names[v.k]);
    *n_keys = v.u;
    if (*n_keys < 2) RFAIL(r, MS_ERR_FORMAT, "control map has %llu keys, expected 'v', 't', ...", (unsigned long long)v.u);
    MS_TRY(rd_val(r, "v", &v));
    if (!str_is(&v, "v")) RFAIL(r, MS_ERR_FORMAT, "first key of the control map is not 'v'");
    MS_TRY(rd_val(r, "v", &v));
    if (v.k != V_UINT && v.k != V_NINT) RFAIL(r, MS_ERR_FORMAT, "field 'v' is %s, expected an integer", vkind_names[v.k]);
    if (v.k != V_UINT || v.u != MS_PROTO_VERSION)
        RFAIL(r, MS_ERR_UNSUPPORTED, "peer speaks protocol version %lld, this node speaks version %d",
              v.k == V_UINT ? (long long)v.u : (long long)v.i, MS_PROTO_VERSION);
    out->version = MS_PROTO_VERSION;
    MS_TRY(rd_val(r, "t", &v));
    if (!str_is(&v, "t")) RFAIL(r, MS_ERR_FORMAT, "second key of the control map is not 't'");
    MS_TRY(rd_expect(r, "t", V_STR, &v));
    for (int t = 1; t <= MS_WIRE_TYPE_COUNT; t++)
        if (valid_type((ms_wire_type)t) && str_is(&v, types[t].name)) out->type = (ms_wire_type)t;
    if (!out->type) {
        char buf[48];
        RFAIL(r, MS_ERR_FORMAT, "unknown message type '%s'", printable(v.s, v.u, buf, sizeof(buf)));
    }
    r->what = types[out->type].name;
    return MS_OK;
}

ms_status ms_wire_decode(const void *ctrl, size_t ctrl_len, const void *tensor, size_t tensor_len, bool has_tensor,
                         ms_wire_arena *arena, ms_wire_msg *out) {
    MS_ASSERT(arena && out && (ctrl || ctrl_len == 0) && (tensor || !has_tensor || tensor_len == 0));
    memset(out, 0, sizeof(*out));
    arena->err[0] = '\0';
    rd r = {ctrl, ctrl, arena, "message"};
    if (ctrl_len > 0) r.end = (const uint8_t *)ctrl + ctrl_len;
    uint64_t n_keys = 0;
    MS_TRY(rd_head(&r, out, &n_keys));
    const wtype *t = &types[out->type];

    dstate d = {.frame = tensor, .frame_len = tensor_len, .has_frame = has_tensor};
    uint64_t seen = 0;
    for (uint64_t e = 2; e < n_keys; e++) {
        int i = 0;
        MS_TRY(rd_msg_key(&r, t, &i));
        if (seen & B(i)) RFAIL(&r, MS_ERR_FORMAT, "duplicate key '%s'", field_at(t, i)->key);
        seen |= B(i);
        MS_TRY(rd_field(&r, field_at(t, i), i, out, &d));
    }
    if (r.p != r.end) RFAIL(&r, MS_ERR_FORMAT, "%zu trailing bytes after the control map", (size_t)(r.end - r.p));
    for (int i = 0; i < n_all(t); i++)
        if (field_at(t, i)->when == W_ALWAYS && !(seen & B(i)))
            RFAIL(&r, MS_ERR_FORMAT, "missing field '%s'", field_at(t, i)->key);
    if (has_tensor && !tensor_field(t))
        RFAIL(&r, MS_ERR_FORMAT, "a tensor frame of %zu bytes came with a message that carries none", tensor_len);
    if (t->rid_copy) *(uint64_t *)((char *)out + t->rid_copy) = out->request_id;
    if (t->round_copy) *(int64_t *)((char *)out + t->round_copy) = out->round;
    MS_TRY(finish_fields(&r, t, out, &d, seen));
    return t->finish ? t->finish(&r, out) : MS_OK;
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


static bool same_field(const ms_wire_msg *a, const ms_wire_msg *b, const wfield *f) {
    const char *p = FP(a, f), *q = FP(b, f);
    switch (f->kind) {
    case F_U64:
    case F_I64: return !memcmp(p, q, 8);
    case F_I32:
    case F_BITS:
    case F_ENUM: return !memcmp(p, q, 4);
    case F_BOOL: return *(const bool *)p == *(const bool *)q;
    case F_STR: return !strcmp(p, q);
    case F_HEX: return !memcmp(p, q, (size_t)f->hi);
    case F_STATS: return !memcmp(p, q, sizeof(ms_draft_stats)); /* six 8-byte members: no padding */
    case F_IDS:
    case F_IDS_IN:
    case F_F32S: {
        int64_t n = count_of(a, f);
        if (n != count_of(b, f) || n < 0 || (f->max > 0 && n > f->max)) return false;
        if (f->kind == F_F32S) return !memcmp(p, q, (size_t)n * sizeof(float));
        return f->kind == F_IDS ? same_i32s(*(const int32_t *const *)p, *(const int32_t *const *)q, n)
                                : same_i32s((const int32_t *)p, (const int32_t *)q, n);
    }
    case F_TENSOR: {
        const float *x = *(const float *const *)p, *y = *(const float *const *)q;
        int64_t da = I64_AT(a, f->aux), db = I64_AT(b, f->aux);
        return same_features(x, da, y, db, count_of(a, f)) && (!x || a->tensor_seq == b->tensor_seq) &&
               same_announce(a, b, da, db);
    }
    }
    return false;
}

static const char *tree_differs(const ms_wire_msg *a, const ms_wire_msg *b) {
    /* n is equal and in range here: the table's fields came first */
    const ms_tree *x = &a->u.tree.tree, *y = &b->u.tree.tree;
    return memcmp(x->mask, y->mask, (size_t)x->n * sizeof(uint64_t)) ? "tree.mask" : NULL;
}

bool ms_wire_msg_equal(const ms_wire_msg *a, const ms_wire_msg *b, char *why, size_t why_cap) {
    if (why && why_cap) why[0] = '\0';
    if (a->type != b->type) DIFF("type %s vs %s", ms_wire_type_name(a->type), ms_wire_type_name(b->type));
    if (a->request_id != b->request_id) DIFF("rid");
    if (a->round != b->round) DIFF("round");
    if (!valid_type(a->type)) return true;
    const wtype *t = &types[a->type];
    for (int i = N_ENV; i < n_all(t); i++)
        if (!same_field(a, b, field_at(t, i))) DIFF("%s.%s", t->name, field_at(t, i)->key);
    if (t->rid_copy && I64_AT(a, t->rid_copy) != I64_AT(b, t->rid_copy)) DIFF("%s.request_id", t->name);
    if (t->round_copy && I64_AT(a, t->round_copy) != I64_AT(b, t->round_copy)) DIFF("%s.round", t->name);
    const char *w = t->differs ? t->differs(a, b) : NULL;
    if (w) DIFF("%s", w);
    return true;
}
