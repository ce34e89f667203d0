/* test_wire — the target↔draft wire format (protocol/ms_wire.c).
 *
 *  1. round trip of every type with seeded random contents, incl. maximum
 *     sizes, edge integers of every MessagePack width and empty arrays;
 *     every encoding is also parsed by msgpack-c's own unpacker (an
 *     independent reader) and checked key by key;
 *  2. golden bytes: a fixed example of each type must encode to
 *     tests/golden/wire/<type>.bin byte for byte (hex diff on mismatch), and
 *     the golden files decode back to the examples;
 *  3. the comparator ms_wire_msg_equal rejects a change to any field;
 *  4. messages rebuilt by msgpack-c in another key order and with
 *     non-shortest integers decode to the same fields; F16/BF16 tensors;
 *  5. bad input (each with its status and the field named in the error):
 *     every prefix of every example, garbage, wrong version, unknown type,
 *     missing/unknown/duplicate key, wrong types, array/count mismatches,
 *     bounds, tensor frame mismatches, trailing bytes, huge counts that must
 *     not be allocated; the encoder refuses what would not decode;
 *  6. timing of encode+decode (printed, not asserted).
 *
 * Modes: test_wire --write-golden DIR (write the golden files once)
 *        test_wire --write-seeds DIR  (write the fuzz_wire seed corpus)
 */
#include "ms_tensor.h"
#include "ms_wire.h"

#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_fail, g_checks;
#define CHECK(c, ...)                                               \
    do {                                                            \
        g_checks++;                                                 \
        if (!(c)) {                                                 \
            g_fail++;                                               \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);    \
            fprintf(stderr, __VA_ARGS__);                           \
            fputc('\n', stderr);                                    \
        }                                                           \
    } while (0)

/* ---- random messages -------------------------------------------------------- */

/* Owned storage behind a generated message's pointers. */
typedef struct {
    int32_t *prompt, *topk;
    float *feat;
} store;

static void store_free(store *s) {
    free(s->prompt);
    free(s->topk);
    free(s->feat);
    *s = (store){0};
}

static int64_t rnd(ms_rng *r, int64_t lo, int64_t hi) {
    return lo + (int64_t)(ms_rng_u64(r) % (uint64_t)(hi - lo + 1));
}

/* Edges of every MessagePack integer width, or a random value. */
static int32_t rnd_id(ms_rng *r) {
    static const int32_t edge[] = {0, 1, 127, 128, 255, 256, 65535, 65536, INT32_MAX};
    return (ms_rng_u64(r) & 1) ? edge[rnd(r, 0, 8)] : (int32_t)rnd(r, 0, INT32_MAX);
}
static uint64_t rnd_u64(ms_rng *r) {
    static const uint64_t edge[] = {0, 127, 128, 65535, 65536, UINT32_MAX, (uint64_t)UINT32_MAX + 1, UINT64_MAX};
    return (ms_rng_u64(r) & 1) ? edge[rnd(r, 0, 7)] : ms_rng_u64(r) >> rnd(r, 0, 63);
}

enum { SZ_RANDOM, SZ_MAX, SZ_MIN };

/* Any non-NUL bytes (the wire carries bytes, not checked UTF-8). */
static void rnd_str(ms_rng *r, char *dst, size_t max, int mode) {
    size_t n = mode == SZ_MAX ? max : mode == SZ_MIN ? 0 : (size_t)rnd(r, 0, (int64_t)max);
    for (size_t i = 0; i < n; i++) dst[i] = (char)rnd(r, 1, 255);
    dst[n] = '\0';
}

static void rnd_tree(ms_rng *r, int64_t n, ms_tree *t) {
    memset(t, 0, sizeof(*t));
    t->n = n;
    for (int64_t i = 0; i < n; i++) {
        t->parent[i] = i == 0 ? -1 : (int32_t)rnd(r, 0, i - 1);
        t->depth[i] = i == 0 ? 0 : t->depth[t->parent[i]] + 1;
        t->mask[i] = (i == 0 ? 0 : t->mask[t->parent[i]]) | (UINT64_C(1) << i);
        t->token[i] = rnd_id(r);
        t->score[i] = i == 0 ? 0.0f : (rnd(r, 0, 20) == 0 ? -INFINITY : -(float)ms_rng_uniform(r) * 30.0f);
    }
}

static int32_t *rnd_ids(ms_rng *r, int64_t n) {
    int32_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) v[i] = rnd_id(r);
    return v;
}

static float *rnd_feat(ms_rng *r, int64_t n) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = ms_rng_normal(r);
    return v;
}

/* A valid random message of `type`; arrays in s. begin's n_prompt ≤ max_prompt. */
static void gen(ms_rng *r, ms_wire_type type, int mode, int64_t max_prompt, store *s, ms_wire_msg *m) {
    memset(m, 0, sizeof(*m));
    m->type = type;
    m->request_id = rnd_u64(r);
    m->round = mode == SZ_MAX ? INT64_MAX : mode == SZ_MIN ? 0 : (int64_t)(rnd_u64(r) >> 1);
    switch (type) {
    case MS_WIRE_HELLO: {
        ms_wire_hello *h = &m->u.hello;
        h->role = rnd(r, 0, 1) ? MS_WIRE_ROLE_TARGET : MS_WIRE_ROLE_DRAFT;
        rnd_str(r, h->model_fp, MS_WIRE_FP_MAX, mode);
        rnd_str(r, h->tok_fp, MS_WIRE_FP_MAX, mode);
        rnd_str(r, h->kind, MS_WIRE_KIND_MAX, mode);
        h->vocab = mode == SZ_MAX ? INT32_MAX : mode == SZ_MIN ? 1 : rnd(r, 1, 300000);
        h->hidden = mode == SZ_MAX ? MS_WIRE_FEAT_DIM_MAX : mode == SZ_MIN ? 1 : rnd(r, 1, 16384);
        h->wants_features = rnd(r, 0, 1);
        h->pid = mode == SZ_MAX ? INT32_MAX : mode == SZ_MIN ? 0 : rnd(r, 1, 4000000);
        if (mode == SZ_MAX || (mode != SZ_MIN && rnd(r, 0, 1))) /* the optional link-secret proof */
            for (int i = 0; i < MS_WIRE_AUTH_BYTES; i++) h->auth[i] = (uint8_t)(i == 0 ? rnd(r, 1, 255) : rnd(r, 0, 255));
        break;
    }
    case MS_WIRE_HELLO_ACK:
        m->u.ack.accepted = rnd(r, 0, 1);
        rnd_str(r, m->u.ack.reason, MS_WIRE_REASON_MAX, mode);
        if (mode == SZ_MAX || (mode != SZ_MIN && rnd(r, 0, 1))) /* the optional challenge */
            for (int i = 0; i < MS_WIRE_NONCE_BYTES; i++)
                m->u.ack.nonce[i] = (uint8_t)(i == MS_WIRE_NONCE_BYTES - 1 ? rnd(r, 1, 255) : rnd(r, 0, 255));
        break;
    case MS_WIRE_CANCEL: rnd_str(r, m->u.cancel.reason, MS_WIRE_REASON_MAX, mode); break;
    case MS_WIRE_ERROR:
        m->u.error.code = mode == SZ_MAX ? INT32_MIN : mode == SZ_MIN ? -1 : (int32_t)rnd(r, MS_ERR_INTERNAL, -1);
        rnd_str(r, m->u.error.message, MS_WIRE_MESSAGE_MAX, mode);
        break;
    case MS_WIRE_HEARTBEAT:
        m->u.heartbeat.seq = mode == SZ_MAX ? UINT64_MAX : mode == SZ_MIN ? 0 : rnd_u64(r);
        m->u.heartbeat.t_ns = mode == SZ_MAX ? UINT64_MAX : mode == SZ_MIN ? 0 : rnd_u64(r);
        break;
    case MS_WIRE_PING:
        rnd_str(r, m->u.ping.build, MS_WIRE_BUILD_MAX, mode);
        m->u.ping.seq = mode == SZ_MAX ? UINT64_MAX : mode == SZ_MIN ? 0 : rnd_u64(r);
        m->u.ping.reply = mode == SZ_MAX || (mode != SZ_MIN && rnd(r, 0, 1));
        break;
    case MS_WIRE_END: break;
    case MS_WIRE_BEGIN: {
        ms_msg_begin *b = &m->u.begin;
        b->request_id = m->request_id;
        b->n_prompt = mode == SZ_MAX ? max_prompt : mode == SZ_MIN ? 1 : rnd(r, 1, 300);
        b->k_pre = mode == SZ_MAX ? MS_WIRE_TOPK_MAX : mode == SZ_MIN ? 0 : rnd(r, 0, 12);
        b->prompt = s->prompt = rnd_ids(r, b->n_prompt);
        b->topk_pre = s->topk = rnd_ids(r, b->n_prompt * b->k_pre);
        b->root = rnd_id(r);
        b->skip_model = mode == SZ_MAX || (mode != SZ_MIN && rnd(r, 0, 1));
        if (mode == SZ_MAX || rnd(r, 0, 1)) {
            b->feat_dim = mode == SZ_MAX ? 16 : rnd(r, 1, 40);
            b->features = s->feat = rnd_feat(r, b->n_prompt * b->feat_dim);
            m->tensor_seq = rnd_u64(r);
        }
        break;
    }
    case MS_WIRE_TREE: {
        ms_msg_tree *t = &m->u.tree;
        t->request_id = m->request_id;
        t->round = m->round;
        rnd_tree(r, mode == SZ_MAX ? MS_TREE_MAX : mode == SZ_MIN ? 1 : rnd(r, 1, MS_TREE_MAX), &t->tree);
        t->stats.backbone_ns = rnd_u64(r);
        t->stats.head_ns = rnd_u64(r);
        t->stats.vocab_ns = rnd_u64(r);
        t->stats.vocab_size = mode == SZ_MAX ? INT64_MAX : rnd(r, 0, 200000);
        t->stats.emitted = mode == SZ_MAX ? INT64_MAX : rnd(r, 0, 65);
        t->stats.covered = mode == SZ_MAX ? INT64_MAX : rnd(r, 0, t->stats.emitted);
        /* n-gram marks on nodes 1..n−1 (none on a lone root; every one at SZ_MAX) */
        const uint64_t nodes = t->tree.n >= MS_TREE_MAX ? ~UINT64_C(0) : (UINT64_C(1) << t->tree.n) - 1;
        t->tree.ngram = (mode == SZ_MAX ? nodes : rnd_u64(r) & nodes) & ~UINT64_C(1);
        break;
    }
    case MS_WIRE_VERIFY: {
        ms_msg_verify *v = &m->u.verify;
        v->request_id = m->request_id;
        v->round = m->round;
        v->n_path = mode == SZ_MAX ? MS_TREE_MAX : mode == SZ_MIN ? 1 : rnd(r, 1, 12);
        v->path[0] = 0;
        for (int64_t i = 1; i < v->n_path; i++)
            v->path[i] = mode == SZ_MAX ? (int32_t)i : (int32_t)rnd(r, v->path[i - 1] + 1, MS_TREE_MAX - v->n_path + i);
        v->bonus = rnd_id(r);
        v->skip_model = mode == SZ_MAX || (mode != SZ_MIN && rnd(r, 0, 1));
        v->k_ver = mode == SZ_MAX ? MS_WIRE_TOPK_MAX : mode == SZ_MIN ? 0 : rnd(r, 0, 16);
        v->ver_topk = s->topk = rnd_ids(r, v->n_path * v->k_ver);
        if (mode == SZ_MAX || rnd(r, 0, 1)) {
            v->feat_dim = mode == SZ_MAX ? 8192 : rnd(r, 1, 300);
            v->features = s->feat = rnd_feat(r, v->n_path * v->feat_dim);
            m->tensor_seq = rnd_u64(r);
        }
        break;
    }
    }
}

/* ---- an independent reader: msgpack-c's unpacker ---------------------------- */

static const msgpack_object *mget(const msgpack_object *map, const char *key) {
    if (map->type != MSGPACK_OBJECT_MAP) return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) && !memcmp(k->via.str.ptr, key, strlen(key)))
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

static bool obj_u64(const msgpack_object *o, uint64_t want) {
    return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 == want;
}
static bool obj_i64(const msgpack_object *o, int64_t want) {
    if (!o) return false;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) return want >= 0 && o->via.u64 == (uint64_t)want;
    return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 == want;
}
static bool obj_str(const msgpack_object *o, const char *want) {
    return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(want) &&
           !memcmp(o->via.str.ptr, want, strlen(want));
}
static bool obj_ids(const msgpack_object *o, const int32_t *want, int64_t n) {
    if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != (uint32_t)n) return false;
    for (int64_t i = 0; i < n; i++)
        if (!obj_i64(&o->via.array.ptr[i], want[i])) return false;
    return true;
}
/* An optional byte field: absent when all zero, else lowercase hex of the bytes. */
static bool obj_hex_opt(const msgpack_object *o, const uint8_t *want, size_t n) {
    bool zero = true;
    for (size_t i = 0; i < n; i++) zero = zero && !want[i];
    if (zero) return !o;
    char hex[2 * 256 + 1];
    for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", want[i]);
    return obj_str(o, hex);
}

/* frame 0 as msgpack-c reads it, against the message it came from. */
static void check_with_msgpackc(const ms_wire_buf *b, const ms_wire_msg *m, const char *label) {
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    int rc = msgpack_unpack_next(&up, (const char *)b->data, b->len, &off);
    CHECK(rc == MSGPACK_UNPACK_SUCCESS && off == b->len, "%s: msgpack-c cannot read frame 0 (rc %d, %zu of %zu)", label,
          rc, off, b->len);
    const msgpack_object *o = &up.data;
    CHECK(o->type == MSGPACK_OBJECT_MAP && o->via.map.size >= 4, "%s: frame 0 is not a map", label);
    if (o->type == MSGPACK_OBJECT_MAP && o->via.map.size >= 2) {
        CHECK(obj_str(&o->via.map.ptr[0].key, "v") && obj_u64(&o->via.map.ptr[0].val, MS_PROTO_VERSION), "%s: v", label);
        CHECK(obj_str(&o->via.map.ptr[1].key, "t") && obj_str(&o->via.map.ptr[1].val, ms_wire_type_name(m->type)),
              "%s: t", label);
    }
    CHECK(obj_u64(mget(o, "rid"), m->request_id) && obj_i64(mget(o, "round"), m->round), "%s: rid/round", label);
    const msgpack_object *tn = mget(o, "tensor");
    switch (m->type) {
    case MS_WIRE_BEGIN:
        CHECK(obj_ids(mget(o, "prompt"), m->u.begin.prompt, m->u.begin.n_prompt), "%s: prompt", label);
        CHECK(obj_ids(mget(o, "topk_pre"), m->u.begin.topk_pre, m->u.begin.n_prompt * m->u.begin.k_pre), "%s: topk",
              label);
        CHECK(obj_i64(mget(o, "root"), m->u.begin.root), "%s: root", label);
        CHECK(m->u.begin.skip_model ? (mget(o, "skip_model") && mget(o, "skip_model")->type == MSGPACK_OBJECT_BOOLEAN &&
                                       mget(o, "skip_model")->via.boolean)
                                    : !mget(o, "skip_model"),
              "%s: begin skip_model only when set, as true", label);
        CHECK(!tn == !m->u.begin.features, "%s: tensor entry", label);
        if (tn) {
            const msgpack_object *sh = mget(tn, "shape");
            CHECK(obj_str(mget(tn, "dtype"), "F32") && obj_u64(mget(tn, "seq"), m->tensor_seq) && sh &&
                      sh->type == MSGPACK_OBJECT_ARRAY && sh->via.array.size == 2 &&
                      obj_i64(&sh->via.array.ptr[0], m->u.begin.n_prompt) &&
                      obj_i64(&sh->via.array.ptr[1], m->u.begin.feat_dim) &&
                      obj_u64(mget(tn, "bytes"), (uint64_t)(m->u.begin.n_prompt * m->u.begin.feat_dim * 4)),
                  "%s: tensor entry fields", label);
        }
        break;
    case MS_WIRE_TREE: {
        const ms_tree *t = &m->u.tree.tree;
        CHECK(obj_i64(mget(o, "n"), t->n), "%s: n", label);
        CHECK(obj_ids(mget(o, "token"), t->token, t->n) && obj_ids(mget(o, "parent"), t->parent, t->n) &&
                  obj_ids(mget(o, "depth"), t->depth, t->n),
              "%s: tree arrays", label);
        const msgpack_object *sc = mget(o, "score");
        bool ok = sc && sc->type == MSGPACK_OBJECT_ARRAY && sc->via.array.size == (uint32_t)t->n;
        for (int64_t i = 0; ok && i < t->n; i++)
            ok = sc->via.array.ptr[i].type == MSGPACK_OBJECT_FLOAT32 && (float)sc->via.array.ptr[i].via.f64 == t->score[i];
        CHECK(ok, "%s: score (float32 on the wire)", label);
        CHECK(!mget(o, "mask"), "%s: masks are not sent", label);
        const msgpack_object *st = mget(o, "stats");
        CHECK(st && obj_u64(mget(st, "head_ns"), m->u.tree.stats.head_ns) &&
                  obj_i64(mget(st, "covered"), m->u.tree.stats.covered),
              "%s: stats", label);
        CHECK(t->ngram ? obj_u64(mget(o, "ngram"), t->ngram) : !mget(o, "ngram"), "%s: ngram only when set", label);
        break;
    }
    case MS_WIRE_VERIFY:
        CHECK(obj_ids(mget(o, "path"), m->u.verify.path, m->u.verify.n_path), "%s: path", label);
        CHECK(obj_ids(mget(o, "ver_topk"), m->u.verify.ver_topk, m->u.verify.n_path * m->u.verify.k_ver), "%s: ver_topk",
              label);
        CHECK(obj_i64(mget(o, "bonus"), m->u.verify.bonus), "%s: bonus", label);
        CHECK(m->u.verify.skip_model ? (mget(o, "skip_model") && mget(o, "skip_model")->type == MSGPACK_OBJECT_BOOLEAN &&
                                        mget(o, "skip_model")->via.boolean)
                                     : !mget(o, "skip_model"),
              "%s: skip_model only when set, as true", label);
        CHECK(!tn == !m->u.verify.features, "%s: tensor entry", label);
        break;
    case MS_WIRE_HELLO:
        CHECK(obj_str(mget(o, "role"), m->u.hello.role == MS_WIRE_ROLE_TARGET ? "target" : "draft") &&
                  obj_str(mget(o, "model_fp"), m->u.hello.model_fp) && obj_i64(mget(o, "vocab"), m->u.hello.vocab),
              "%s: hello fields", label);
        CHECK(obj_hex_opt(mget(o, "auth"), m->u.hello.auth, MS_WIRE_AUTH_BYTES), "%s: auth (absent when zero)", label);
        break;
    case MS_WIRE_HELLO_ACK:
        CHECK(obj_hex_opt(mget(o, "nonce"), m->u.ack.nonce, MS_WIRE_NONCE_BYTES), "%s: nonce (absent when zero)", label);
        break;
    case MS_WIRE_ERROR:
        CHECK(obj_i64(mget(o, "code"), m->u.error.code) && obj_str(mget(o, "message"), m->u.error.message),
              "%s: error fields", label);
        break;
    case MS_WIRE_HEARTBEAT:
        CHECK(obj_u64(mget(o, "seq"), m->u.heartbeat.seq) && obj_u64(mget(o, "t_ns"), m->u.heartbeat.t_ns),
              "%s: heartbeat fields", label);
        break;
    case MS_WIRE_PING: {
        const msgpack_object *rp = mget(o, "reply");
        CHECK(obj_str(mget(o, "build"), m->u.ping.build) && obj_u64(mget(o, "seq"), m->u.ping.seq) && rp &&
                  rp->type == MSGPACK_OBJECT_BOOLEAN && rp->via.boolean == m->u.ping.reply,
              "%s: ping fields", label);
        break;
    }
    default: break;
    }
    msgpack_unpacked_destroy(&up);
}

/* ---- round trip -------------------------------------------------------------- */

static void roundtrip(const ms_wire_msg *m, ms_wire_arena *a, ms_wire_buf *buf, const char *label) {
    const void *tp = NULL;
    size_t tb = 0;
    ms_status st = ms_wire_encode(m, buf, &tp, &tb);
    CHECK(st == MS_OK, "%s: encode: %s", label, ms_status_str(st));
    if (st != MS_OK) return;
    const float *feat = m->type == MS_WIRE_BEGIN ? m->u.begin.features : m->type == MS_WIRE_VERIFY ? m->u.verify.features : NULL;
    CHECK(tp == (const void *)feat, "%s: the tensor frame is not the caller's features (zero copy)", label);
    if (feat) {
        int64_t rows = m->type == MS_WIRE_BEGIN ? m->u.begin.n_prompt : m->u.verify.n_path;
        int64_t d = m->type == MS_WIRE_BEGIN ? m->u.begin.feat_dim : m->u.verify.feat_dim;
        CHECK(tb == (size_t)(rows * d) * sizeof(float), "%s: tensor bytes %zu", label, tb);
    }
    check_with_msgpackc(buf, m, label);
    ms_wire_msg out;
    st = ms_wire_decode(buf->data, buf->len, tp, tb, tp != NULL, a, &out);
    CHECK(st == MS_OK, "%s: decode: %s: %s", label, ms_status_str(st), ms_wire_arena_error(a));
    if (st != MS_OK) return;
    char why[128];
    CHECK(out.version == MS_PROTO_VERSION, "%s: version", label);
    CHECK(ms_wire_msg_equal(m, &out, why, sizeof(why)), "%s: decoded differs: %s", label, why);
    if (m->type == MS_WIRE_TREE) /* masks rebuilt from parents equal the generator's */
        CHECK(!memcmp(out.u.tree.tree.mask, m->u.tree.tree.mask, (size_t)m->u.tree.tree.n * 8), "%s: masks", label);
}

static void test_roundtrip(void) {
    ms_rng r;
    ms_rng_seed(&r, 20240611);
    ms_wire_arena *a = NULL;
    MS_ASSERT(ms_wire_arena_new(4096, &a) == MS_OK);
    ms_wire_buf buf = {0};
    int n = 0;
    for (int t = MS_WIRE_HELLO; t <= MS_WIRE_TYPE_COUNT; t++) {
        for (int it = 0; it < 200; it++) {
            int mode = it == 0 ? SZ_MAX : it == 1 ? SZ_MIN : SZ_RANDOM;
            store s = {0};
            ms_wire_msg m;
            gen(&r, (ms_wire_type)t, mode, 4096, &s, &m);
            char label[64];
            snprintf(label, sizeof(label), "roundtrip %s #%d", ms_wire_type_name((ms_wire_type)t), it);
            roundtrip(&m, a, &buf, label);
            store_free(&s);
            n++;
        }
    }
    /* The default arena takes a 2^20-token prompt (with its top-1 list). */
    ms_wire_arena *big = NULL;
    MS_ASSERT(ms_wire_arena_new(0, &big) == MS_OK);
    store s = {0};
    ms_wire_msg m;
    gen(&r, MS_WIRE_BEGIN, SZ_MIN, 1, &s, &m);
    free(s.prompt);
    free(s.topk);
    free(s.feat);
    s.feat = NULL;
    m.u.begin.features = NULL;
    m.u.begin.feat_dim = 0;
    m.u.begin.n_prompt = MS_WIRE_PROMPT_MAX_DEFAULT;
    m.u.begin.k_pre = 1;
    m.u.begin.prompt = s.prompt = rnd_ids(&r, m.u.begin.n_prompt);
    m.u.begin.topk_pre = s.topk = rnd_ids(&r, m.u.begin.n_prompt);
    roundtrip(&m, big, &buf, "roundtrip begin 2^20 prompt");
    /* one more than the arena's bound is refused as a range error */
    int32_t *more = rnd_ids(&r, m.u.begin.n_prompt + 1);
    m.u.begin.prompt = more;
    m.u.begin.n_prompt++;
    m.u.begin.k_pre = 0;
    ms_wire_msg out;
    ms_log_set_level(MS_LOG_OFF);
    CHECK(ms_wire_encode(&m, &buf, NULL, NULL) == MS_OK, "encode 2^20+1 prompt");
    ms_status st = ms_wire_decode(buf.data, buf.len, NULL, 0, false, big, &out);
    ms_log_set_level(MS_LOG_WARN);
    CHECK(st == MS_ERR_RANGE && strstr(ms_wire_arena_error(big), "'prompt'"), "2^20+1 prompt: %s %s", ms_status_str(st),
          ms_wire_arena_error(big));
    free(more);
    store_free(&s);
    ms_wire_arena_free(&big);
    CHECK(big == NULL, "arena_free nulls the pointer");
    ms_wire_arena_free(&a);
    ms_wire_buf_free(&buf);
    printf("round trip: %d messages\n", n + 1);
}

/* ---- fixed examples and golden bytes ---------------------------------------- */

static const int32_t ex_prompt[6] = {1, 450, 4996, 17354, 1701, 29916};
static const int32_t ex_topk_pre[12] = {450, 319, 4996, 11203, 17354, 29871, 1701, 338, 29916, 29889, 432, 13};
static const int32_t ex_ver_topk[6] = {278, 263, 29892, 322, 29889, 13};
static float ex_feat_begin[6 * 4], ex_feat_verify[3 * 4];

static void example(ms_wire_type t, ms_wire_msg *m) {
    for (int i = 0; i < 24; i++) ex_feat_begin[i] = 0.25f * (float)i - 1.0f;
    for (int i = 0; i < 12; i++) ex_feat_verify[i] = -0.5f * (float)i + 3.0f;
    memset(m, 0, sizeof(*m));
    m->type = t;
    m->request_id = 7;
    switch (t) {
    case MS_WIRE_HELLO: {
        m->request_id = 0;
        ms_wire_hello *h = &m->u.hello;
        h->role = MS_WIRE_ROLE_DRAFT;
        strcpy(h->model_fp, "eagle-llama3-8b:sha256:0123456789abcdef");
        strcpy(h->tok_fp, "llama3-128256:fe12ab34");
        h->vocab = 128256;
        h->hidden = 4096;
        strcpy(h->kind, "eagle");
        h->wants_features = true;
        h->pid = 4242;
        break;
    }
    case MS_WIRE_HELLO_ACK:
        m->request_id = 0;
        m->u.ack.accepted = false;
        strcpy(m->u.ack.reason, "tokenizer fingerprint differs");
        break;
    case MS_WIRE_BEGIN: {
        ms_msg_begin *b = &m->u.begin;
        b->request_id = 7;
        b->prompt = ex_prompt;
        b->n_prompt = 6;
        b->k_pre = 2;
        b->topk_pre = ex_topk_pre;
        b->root = 432;
        b->features = ex_feat_begin;
        b->feat_dim = 4;
        m->tensor_seq = 3;
        break;
    }
    case MS_WIRE_TREE: {
        m->round = 1;
        ms_msg_tree *tm = &m->u.tree;
        tm->request_id = 7;
        tm->round = 1;
        static const int32_t tok[6] = {432, 278, 263, 3186, 1432, 29892}, par[6] = {-1, 0, 0, 1, 1, 2};
        static const float sc[6] = {0.0f, -0.5f, -1.25f, -1.75f, -2.0f, -3.5f};
        tm->tree.n = 6;
        for (int i = 0; i < 6; i++) {
            tm->tree.token[i] = tok[i];
            tm->tree.parent[i] = par[i];
            tm->tree.depth[i] = i == 0 ? 0 : tm->tree.depth[par[i]] + 1;
            tm->tree.mask[i] = (i == 0 ? 0 : tm->tree.mask[par[i]]) | (UINT64_C(1) << i);
            tm->tree.score[i] = sc[i];
        }
        tm->stats = (ms_draft_stats){1200000, 300000, 45000, 8192, 5, 6};
        break;
    }
    case MS_WIRE_VERIFY: {
        m->round = 1;
        ms_msg_verify *v = &m->u.verify;
        v->request_id = 7;
        v->round = 1;
        v->n_path = 3;
        v->path[0] = 0, v->path[1] = 1, v->path[2] = 3;
        v->bonus = 29889;
        v->k_ver = 2;
        v->ver_topk = ex_ver_topk;
        v->features = ex_feat_verify;
        v->feat_dim = 4;
        m->tensor_seq = 4;
        break;
    }
    case MS_WIRE_CANCEL: strcpy(m->u.cancel.reason, "client disconnected"); break;
    case MS_WIRE_END: break;
    case MS_WIRE_ERROR:
        m->round = 2;
        m->u.error.code = MS_ERR_FORMAT;
        strcpy(m->u.error.message, "tree: field 'parent' has 12 entries, n is 13");
        break;
    case MS_WIRE_HEARTBEAT:
        m->request_id = 0;
        m->u.heartbeat.seq = 99;
        m->u.heartbeat.t_ns = UINT64_C(1234567890123);
        break;
    case MS_WIRE_PING:
        m->request_id = 0;
        strcpy(m->u.ping.build, "0.1.0");
        m->u.ping.seq = 3;
        break;
    }
}

static void hexdump(const char *title, const uint8_t *p, size_t n, size_t mark) {
    fprintf(stderr, "  %s (%zu bytes):\n", title, n);
    for (size_t i = 0; i < n; i += 16) {
        fprintf(stderr, "  %04zx ", i);
        for (size_t j = i; j < i + 16 && j < n; j++) fprintf(stderr, j == mark ? "[%02x]" : " %02x", p[j]);
        fputc('\n', stderr);
    }
}

static void test_golden(void) {
    ms_wire_arena *a = NULL;
    MS_ASSERT(ms_wire_arena_new(0, &a) == MS_OK);
    ms_wire_buf buf = {0};
    for (int t = MS_WIRE_HELLO; t <= MS_WIRE_TYPE_COUNT; t++) {
        ms_wire_msg m;
        example((ms_wire_type)t, &m);
        const void *tp;
        size_t tb;
        CHECK(ms_wire_encode(&m, &buf, &tp, &tb) == MS_OK, "golden %s: encode", ms_wire_type_name(m.type));
        char name[64];
        snprintf(name, sizeof(name), MS_SOURCE_DIR "/tests/golden/wire/%s.bin", ms_wire_type_name(m.type));
        char *g = NULL;
        size_t glen = 0;
        if (ms_read_file(name, &g, &glen) != MS_OK) {
            CHECK(false, "golden %s: cannot read %s", ms_wire_type_name(m.type), name);
            continue;
        }
        bool same = glen == buf.len && memcmp(g, buf.data, glen) == 0;
        CHECK(same, "golden %s: encoding differs from %s", ms_wire_type_name(m.type), name);
        if (!same) {
            size_t d = 0;
            while (d < glen && d < buf.len && (uint8_t)g[d] == buf.data[d]) d++;
            fprintf(stderr, "  first difference at byte %zu\n", d);
            hexdump("golden", (const uint8_t *)g, glen, d);
            hexdump("encoded", buf.data, buf.len, d);
        }
        /* the committed bytes decode back to the example */
        ms_wire_msg out;
        ms_status st = ms_wire_decode(g, glen, tp, tb, tp != NULL, a, &out);
        char why[128] = "";
        CHECK(st == MS_OK && ms_wire_msg_equal(&m, &out, why, sizeof(why)), "golden %s: decode: %s %s %s",
              ms_wire_type_name(m.type), ms_status_str(st), ms_wire_arena_error(a), why);
        free(g);
    }
    ms_wire_buf_free(&buf);
    ms_wire_arena_free(&a);
}

/* ---- the comparator rejects a change to any field --------------------------- */

static void expect_differs(const ms_wire_msg *a, const ms_wire_msg *b, const char *what) {
    CHECK(!ms_wire_msg_equal(a, b, NULL, 0), "ms_wire_msg_equal misses a change of %s", what);
}

static void test_comparator(void) {
    ms_wire_msg a, b;
    int32_t ids[12];
    float feat[24];
    for (int t = MS_WIRE_HELLO; t <= MS_WIRE_TYPE_COUNT; t++) {
        example((ms_wire_type)t, &a);
        CHECK(ms_wire_msg_equal(&a, &a, NULL, 0), "%s equals itself", ms_wire_type_name(a.type));
        b = a, b.request_id++, expect_differs(&a, &b, "rid");
        b = a, b.round++, expect_differs(&a, &b, "round");
        b = a, b.type = t == MS_WIRE_END ? MS_WIRE_CANCEL : MS_WIRE_END, expect_differs(&a, &b, "type");
    }
    example(MS_WIRE_HELLO, &a);
    b = a, b.u.hello.role = MS_WIRE_ROLE_TARGET, expect_differs(&a, &b, "hello.role");
    b = a, b.u.hello.model_fp[3] ^= 1, expect_differs(&a, &b, "hello.model_fp");
    b = a, b.u.hello.tok_fp[0] ^= 1, expect_differs(&a, &b, "hello.tok_fp");
    b = a, b.u.hello.kind[1] ^= 1, expect_differs(&a, &b, "hello.kind");
    b = a, b.u.hello.vocab++, expect_differs(&a, &b, "hello.vocab");
    b = a, b.u.hello.hidden++, expect_differs(&a, &b, "hello.hidden");
    b = a, b.u.hello.wants_features = false, expect_differs(&a, &b, "hello.wants_features");
    b = a, b.u.hello.pid++, expect_differs(&a, &b, "hello.pid");
    b = a, b.u.hello.auth[31] = 1, expect_differs(&a, &b, "hello.auth");
    example(MS_WIRE_HELLO_ACK, &a);
    b = a, b.u.ack.accepted = true, expect_differs(&a, &b, "hello_ack.accepted");
    b = a, b.u.ack.reason[0] = 'x', expect_differs(&a, &b, "hello_ack.reason");
    b = a, b.u.ack.nonce[0] = 1, expect_differs(&a, &b, "hello_ack.nonce");
    example(MS_WIRE_BEGIN, &a);
    memcpy(ids, ex_prompt, sizeof(ex_prompt));
    ids[5]++;
    b = a, b.u.begin.prompt = ids, expect_differs(&a, &b, "begin.prompt");
    b = a, b.u.begin.n_prompt--, expect_differs(&a, &b, "begin.n_prompt");
    memcpy(ids, ex_topk_pre, sizeof(ex_topk_pre));
    ids[11]++;
    b = a, b.u.begin.topk_pre = ids, expect_differs(&a, &b, "begin.topk_pre");
    b = a, b.u.begin.k_pre = 1, expect_differs(&a, &b, "begin.k_pre");
    b = a, b.u.begin.root++, expect_differs(&a, &b, "begin.root");
    b = a, b.u.begin.skip_model = true, expect_differs(&a, &b, "begin.skip_model");
    memcpy(feat, ex_feat_begin, sizeof(ex_feat_begin));
    feat[23] = -feat[23];
    b = a, b.u.begin.features = feat, expect_differs(&a, &b, "begin.features");
    b = a, b.u.begin.features = NULL, expect_differs(&a, &b, "begin.features absent");
    b = a, b.tensor_seq++, expect_differs(&a, &b, "tensor_seq");
    example(MS_WIRE_TREE, &a);
    b = a, b.u.tree.tree.token[5]++, expect_differs(&a, &b, "tree.token");
    b = a, b.u.tree.tree.parent[5] = 1, expect_differs(&a, &b, "tree.parent");
    b = a, b.u.tree.tree.depth[5]++, expect_differs(&a, &b, "tree.depth");
    b = a, b.u.tree.tree.mask[5] ^= 2, expect_differs(&a, &b, "tree.mask");
    b = a, b.u.tree.tree.score[0] = -0.0f, expect_differs(&a, &b, "tree.score (bitwise)");
    b = a, b.u.tree.tree.n--, expect_differs(&a, &b, "tree.n");
    b = a, b.u.tree.round++, expect_differs(&a, &b, "tree.round");
    b = a, b.u.tree.stats.vocab_ns++, expect_differs(&a, &b, "tree.stats.vocab_ns");
    b = a, b.u.tree.stats.emitted++, expect_differs(&a, &b, "tree.stats.emitted");
    example(MS_WIRE_VERIFY, &a);
    b = a, b.u.verify.path[2] = 2, expect_differs(&a, &b, "verify.path");
    b = a, b.u.verify.n_path = 2, expect_differs(&a, &b, "verify.n_path");
    b = a, b.u.verify.bonus++, expect_differs(&a, &b, "verify.bonus");
    b = a, b.u.verify.k_ver = 1, expect_differs(&a, &b, "verify.k_ver");
    b = a, b.u.verify.skip_model = true, expect_differs(&a, &b, "verify.skip_model");
    memcpy(ids, ex_ver_topk, sizeof(ex_ver_topk));
    ids[0]++;
    b = a, b.u.verify.ver_topk = ids, expect_differs(&a, &b, "verify.ver_topk");
    memcpy(feat, ex_feat_verify, sizeof(ex_feat_verify));
    feat[11] += 1.0f;
    b = a, b.u.verify.features = feat, expect_differs(&a, &b, "verify.features");
    b = a, b.u.verify.feat_dim = 2, expect_differs(&a, &b, "verify.feat_dim");
    example(MS_WIRE_CANCEL, &a);
    b = a, b.u.cancel.reason[0] = 'C', expect_differs(&a, &b, "cancel.reason");
    example(MS_WIRE_ERROR, &a);
    b = a, b.u.error.code = MS_ERR_RANGE, expect_differs(&a, &b, "error.code");
    b = a, b.u.error.message[0] = 'T', expect_differs(&a, &b, "error.message");
    example(MS_WIRE_HEARTBEAT, &a);
    b = a, b.u.heartbeat.seq++, expect_differs(&a, &b, "heartbeat.seq");
    b = a, b.u.heartbeat.t_ns++, expect_differs(&a, &b, "heartbeat.t_ns");
    example(MS_WIRE_PING, &a);
    b = a, b.u.ping.build[0] = '9', expect_differs(&a, &b, "ping.build");
    b = a, b.u.ping.seq++, expect_differs(&a, &b, "ping.seq");
    b = a, b.u.ping.reply = true, expect_differs(&a, &b, "ping.reply");
}

/* ---- mutated messages (via msgpack-c objects) -------------------------------- */

/* An example message as msgpack-c objects, to edit and pack again. */
typedef struct {
    msgpack_unpacked up;
    msgpack_object *root;
    msgpack_sbuffer sb;
    ms_wire_buf frame; /* msgpack-c's objects point into it */
    const void *tensor;
    size_t tensor_bytes;
} mmsg;

static void mm_open(mmsg *x, ms_wire_type t) {
    ms_wire_msg m;
    example(t, &m);
    x->frame = (ms_wire_buf){0};
    MS_ASSERT(ms_wire_encode(&m, &x->frame, &x->tensor, &x->tensor_bytes) == MS_OK);
    msgpack_unpacked_init(&x->up);
    size_t off = 0;
    MS_ASSERT(msgpack_unpack_next(&x->up, (const char *)x->frame.data, x->frame.len, &off) == MSGPACK_UNPACK_SUCCESS);
    x->root = &x->up.data;
    msgpack_sbuffer_init(&x->sb);
}

static void mm_close(mmsg *x) {
    msgpack_unpacked_destroy(&x->up);
    msgpack_sbuffer_destroy(&x->sb);
    ms_wire_buf_free(&x->frame);
}

static msgpack_object *mm_get(msgpack_object *map, const char *key) { return (msgpack_object *)mget(map, key); }

static void *mm_alloc(mmsg *x, size_t n) { return msgpack_zone_malloc(x->up.zone, n); }

static msgpack_object mm_int(int64_t v) {
    msgpack_object o;
    memset(&o, 0, sizeof(o));
    if (v >= 0) o.type = MSGPACK_OBJECT_POSITIVE_INTEGER, o.via.u64 = (uint64_t)v;
    else o.type = MSGPACK_OBJECT_NEGATIVE_INTEGER, o.via.i64 = v;
    return o;
}

static msgpack_object mm_str(const char *s) {
    msgpack_object o;
    memset(&o, 0, sizeof(o));
    o.type = MSGPACK_OBJECT_STR;
    o.via.str.ptr = s;
    o.via.str.size = (uint32_t)strlen(s);
    return o;
}

/* Remove the entry `key` from `map`. */
static void mm_del(msgpack_object *map, const char *key) {
    msgpack_object_map *mp = &map->via.map;
    for (uint32_t i = 0; i < mp->size; i++)
        if (obj_str(&mp->ptr[i].key, key)) {
            memmove(&mp->ptr[i], &mp->ptr[i + 1], (mp->size - i - 1) * sizeof(mp->ptr[0]));
            mp->size--;
            return;
        }
    MS_ASSERT(!"mm_del: no such key");
}

/* Append key → val to map (at position pos, or at the end when pos < 0). */
static void mm_add(mmsg *x, msgpack_object *map, int pos, const char *key, msgpack_object val) {
    msgpack_object_map *mp = &map->via.map;
    msgpack_object_kv *kv = mm_alloc(x, (mp->size + 1) * sizeof(*kv));
    uint32_t at = pos < 0 ? mp->size : (uint32_t)pos;
    memcpy(kv, mp->ptr, at * sizeof(*kv));
    kv[at].key = mm_str(key);
    kv[at].val = val;
    memcpy(kv + at + 1, mp->ptr + at, (mp->size - at) * sizeof(*kv));
    mp->ptr = kv;
    mp->size++;
}

/* Resize an array object; new entries copy the last one (or are 0). */
static void mm_resize(mmsg *x, msgpack_object *arr, uint32_t n) {
    msgpack_object *p = mm_alloc(x, (n ? n : 1) * sizeof(*p));
    for (uint32_t i = 0; i < n; i++)
        p[i] = i < arr->via.array.size ? arr->via.array.ptr[i]
               : arr->via.array.size ? arr->via.array.ptr[arr->via.array.size - 1]
                                     : mm_int(0);
    arr->via.array.ptr = p;
    arr->via.array.size = n;
}

static void mm_pack(mmsg *x) {
    msgpack_sbuffer_clear(&x->sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &x->sb, msgpack_sbuffer_write);
    msgpack_pack_object(&pk, *x->root);
}

/* Pack x and decode it; expect status `want` and `needle` in the error text. */
static void mm_expect(mmsg *x, ms_wire_arena *a, ms_status want, const char *needle, const char *what) {
    mm_pack(x);
    ms_wire_msg out;
    ms_status st = ms_wire_decode(x->sb.data, x->sb.size, x->tensor, x->tensor_bytes, x->tensor != NULL, a, &out);
    CHECK(st == want, "%s: status %s, expected %s (%s)", what, ms_status_str(st), ms_status_str(want),
          ms_wire_arena_error(a));
    if (want != MS_OK)
        CHECK(needle && strstr(ms_wire_arena_error(a), needle), "%s: error '%s' does not name '%s'", what,
              ms_wire_arena_error(a), needle ? needle : "");
}

static void test_rebuilt_and_dtypes(ms_wire_arena *a) {
    /* msgpack-c packs its own reading of each example back to the same bytes,
     * and a reordered map with non-shortest integers decodes to the same message. */
    for (int t = MS_WIRE_HELLO; t <= MS_WIRE_TYPE_COUNT; t++) {
        mmsg x;
        mm_open(&x, (ms_wire_type)t);
        ms_wire_msg m, out;
        example((ms_wire_type)t, &m);
        mm_expect(&x, a, MS_OK, NULL, "repacked by msgpack-c");
        /* reverse every key after v, t */
        msgpack_object_map *mp = &x.root->via.map;
        for (uint32_t i = 2, j = mp->size - 1; i < j; i++, j--) {
            msgpack_object_kv tmp = mp->ptr[i];
            mp->ptr[i] = mp->ptr[j];
            mp->ptr[j] = tmp;
        }
        mm_pack(&x);
        /* widen "rid" by hand: replace the packed map with one whose rid is uint64 (0xcf) */
        ms_wire_buf wide = {0};
        {
            msgpack_sbuffer sb;
            msgpack_sbuffer_init(&sb);
            msgpack_packer pk;
            msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
            msgpack_pack_map(&pk, mp->size);
            for (uint32_t i = 0; i < mp->size; i++) {
                msgpack_pack_object(&pk, mp->ptr[i].key);
                if (obj_str(&mp->ptr[i].key, "rid"))
                    msgpack_pack_fix_uint64(&pk, mp->ptr[i].val.via.u64);
                else if (obj_str(&mp->ptr[i].key, "round"))
                    msgpack_pack_fix_int64(&pk, mp->ptr[i].val.via.i64); /* a signed encoding of a value ≥ 0 */
                else
                    msgpack_pack_object(&pk, mp->ptr[i].val);
            }
            wide.data = (uint8_t *)sb.data, wide.len = sb.size;
        }
        ms_status st = ms_wire_decode(wide.data, wide.len, x.tensor, x.tensor_bytes, x.tensor != NULL, a, &out);
        char why[128] = "";
        CHECK(st == MS_OK && ms_wire_msg_equal(&m, &out, why, sizeof(why)), "%s reordered+widened: %s %s %s",
              ms_wire_type_name(m.type), ms_status_str(st), ms_wire_arena_error(a), why);
        free(wide.data);
        mm_close(&x);
    }

    /* F16 / BF16 tensor frames decode to the f32 values (bit patterns written by hand). */
    static const uint16_t f16[12] = {0x3c00, 0xc100, 0x3800, 0x0000, 0x4000, 0xbc00,
                                     0x3e00, 0x4400, 0x8000, 0x3400, 0x7bff, 0xc500};
    static const uint16_t bf16[12] = {0x3f80, 0xc020, 0x3f00, 0x0000, 0x4000, 0xbf80,
                                      0x3fc0, 0x4080, 0x8000, 0x3e80, 0x477f, 0xc0a0};
    static const float want[12] = {1.0f, -2.5f, 0.5f, 0.0f, 2.0f, -1.0f, 1.5f, 4.0f, -0.0f, 0.25f, 0, -5.0f};
    for (int dt = 0; dt < 2; dt++) {
        mmsg x;
        mm_open(&x, MS_WIRE_VERIFY);
        msgpack_object *tn = mm_get(x.root, "tensor");
        *mm_get(tn, "dtype") = mm_str(dt == 0 ? "F16" : "BF16");
        *mm_get(tn, "bytes") = mm_int(24);
        uint8_t frame[25]; /* at an odd address too */
        for (int odd = 0; odd < 2; odd++) {
            memcpy(frame + odd, dt == 0 ? f16 : bf16, 24);
            x.tensor = frame + odd;
            x.tensor_bytes = 24;
            mm_pack(&x);
            ms_wire_msg out;
            ms_status st = ms_wire_decode(x.sb.data, x.sb.size, x.tensor, 24, true, a, &out);
            CHECK(st == MS_OK, "%s tensor: %s", dt == 0 ? "F16" : "BF16", ms_wire_arena_error(a));
            if (st != MS_OK) continue;
            CHECK(out.u.verify.feat_dim == 4, "half tensor: feat_dim");
            for (int i = 0; i < 12; i++) {
                float w = i == 10 ? (dt == 0 ? 65504.0f : 65280.0f) : want[i];
                CHECK(memcmp(&out.u.verify.features[i], &w, 4) == 0, "%s[%d] = %g, expected %g",
                      dt == 0 ? "F16" : "BF16", i, out.u.verify.features[i], w);
            }
        }
        mm_close(&x);
    }
}

/* ---- bad input ---------------------------------------------------------------- */

static void test_prefixes_and_garbage(ms_wire_arena *a) {
    ms_wire_buf buf = {0};
    int n = 0;
    for (int t = MS_WIRE_HELLO; t <= MS_WIRE_TYPE_COUNT; t++) {
        ms_wire_msg m, out;
        example((ms_wire_type)t, &m);
        const void *tp;
        size_t tb;
        MS_ASSERT(ms_wire_encode(&m, &buf, &tp, &tb) == MS_OK);
        /* every proper prefix, copied to an exact-size heap block so ASan sees any overread */
        for (size_t len = 0; len < buf.len; len++) {
            uint8_t *p = malloc(len ? len : 1);
            memcpy(p, buf.data, len);
            ms_status st = ms_wire_decode(len ? p : NULL, len, tp, tb, tp != NULL, a, &out);
            CHECK(st == MS_ERR_FORMAT && strstr(ms_wire_arena_error(a), "truncated"),
                  "%s prefix %zu/%zu: %s %s", ms_wire_type_name(m.type), len, buf.len, ms_status_str(st),
                  ms_wire_arena_error(a));
            free(p);
            n++;
        }
        /* trailing bytes */
        uint8_t *p = malloc(buf.len + 1);
        memcpy(p, buf.data, buf.len);
        p[buf.len] = 0xc0;
        ms_status st = ms_wire_decode(p, buf.len + 1, tp, tb, tp != NULL, a, &out);
        CHECK(st == MS_ERR_FORMAT && strstr(ms_wire_arena_error(a), "trailing"), "%s + 1 byte: %s",
              ms_wire_type_name(m.type), ms_wire_arena_error(a));
        free(p);
        /* a tensor frame with a message that carries none, or a missing one */
        st = ms_wire_decode(buf.data, buf.len, "abcd", 4, true, a, &out);
        if (!tp) CHECK(st == MS_ERR_FORMAT, "%s with a stray tensor frame: %s", ms_wire_type_name(m.type), ms_status_str(st));
        else CHECK(st == MS_ERR_FORMAT && strstr(ms_wire_arena_error(a), "tensor"), "%s with a 4-byte tensor", ms_wire_type_name(m.type));
    }
    /* garbage: never crashes; the fixed patterns are errors */
    static const uint8_t g1[] = {0xc1}, g2[] = {0x93, 0x01, 0x02, 0x03}, g3[] = {0xff, 0xff, 0xff}, g4[] = {0x81, 0xa1, 0x76, 0x01};
    static const struct { const uint8_t *p; size_t n; const char *needle; } garbage[] = {
        {g1, 1, "0xc1"}, {g2, 4, "expected a map"}, {g3, 3, "expected a map"}, {g4, 4, "'v', 't'"}};
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        ms_wire_msg out;
        ms_status st = ms_wire_decode(garbage[i].p, garbage[i].n, NULL, 0, false, a, &out);
        CHECK(st == MS_ERR_FORMAT && strstr(ms_wire_arena_error(a), garbage[i].needle), "garbage %zu: %s", i,
              ms_wire_arena_error(a));
    }
    ms_rng r;
    ms_rng_seed(&r, 99);
    uint8_t junk[300];
    int accepted = 0;
    for (int it = 0; it < 20000; it++) {
        size_t len = (size_t)rnd(&r, 0, sizeof(junk));
        for (size_t i = 0; i < len; i++) junk[i] = (uint8_t)ms_rng_u64(&r);
        if (it % 2) junk[0] = (uint8_t)(0x80 | rnd(&r, 0, 15)); /* a fixmap, to get further */
        ms_wire_msg out;
        accepted += ms_wire_decode(junk, len, NULL, 0, false, a, &out) == MS_OK;
    }
    CHECK(accepted == 0, "random junk accepted %d times", accepted);
    ms_wire_buf_free(&buf);
    printf("bad input: %d prefixes, 20000 random buffers\n", n);
}

/* Announced counts far past the bytes: no allocation sized by them. */
static void test_huge_counts(void) {
    ms_wire_arena *a = NULL;
    MS_ASSERT(ms_wire_arena_new(INT32_MAX, &a) == MS_OK);
    /* {v:1, t:"begin", "prompt": array32(0x7fffffff) } then nothing */
    static const uint8_t huge_prompt[] = {0x83, 0xa1, 'v', 0x01, 0xa1, 't', 0xa5, 'b', 'e', 'g', 'i', 'n',
                                          0xa6, 'p', 'r', 'o', 'm', 'p', 't', 0xdd, 0x7f, 0xff, 0xff, 0xff};
    static const uint8_t huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v', 0x01};
    static const uint8_t huge_str[] = {0x82, 0xa1, 'v', 0x01, 0xa1, 't', 0xdb, 0xff, 0xff, 0xff, 0xf0, 'x'};
    static const uint8_t huge_topk[] = {0x83, 0xa1, 'v', 0x01, 0xa1, 't', 0xa6, 'v', 'e', 'r', 'i', 'f', 'y',
                                        0xa8, 'v', 'e', 'r', '_', 't', 'o', 'p', 'k', 0xdd, 0x00, 0x00, 0x10, 0x01, 0x01};
    static const struct { const uint8_t *p; size_t n; ms_status want; const char *needle; } cases[] = {
        {huge_prompt, sizeof(huge_prompt), MS_ERR_FORMAT, "2147483647 entries"},
        {huge_map, sizeof(huge_map), MS_ERR_FORMAT, "map announces"},
        {huge_str, sizeof(huge_str), MS_ERR_FORMAT, "string of"},
        {huge_topk, sizeof(huge_topk), MS_ERR_FORMAT, "4097 entries"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ms_wire_msg out;
        ms_status st = ms_wire_decode(cases[i].p, cases[i].n, NULL, 0, false, a, &out);
        CHECK(st == cases[i].want && strstr(ms_wire_arena_error(a), cases[i].needle), "huge count %zu: %s %s", i,
              ms_status_str(st), ms_wire_arena_error(a));
        CHECK(ms_wire_arena_bytes(a) == 0, "huge count %zu: arena grew to %zu bytes", i, ms_wire_arena_bytes(a));
    }
    ms_wire_arena_free(&a);
}

static void test_field_errors(ms_wire_arena *a) {
    mmsg x;
#define CASE(type, edit, want, needle)            \
    do {                                          \
        mm_open(&x, type);                        \
        edit;                                     \
        mm_expect(&x, a, want, needle, #edit);    \
        mm_close(&x);                             \
    } while (0)
    msgpack_object *o;
    /* envelope */
    CASE(MS_WIRE_TREE, *mm_get(x.root, "v") = mm_int(2), MS_ERR_UNSUPPORTED, "version 2, this node speaks version 1");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "v") = mm_str("1"), MS_ERR_FORMAT, "field 'v' is a string");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "t") = mm_str("frobnicate"), MS_ERR_FORMAT, "unknown message type 'frobnicate'");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "t") = mm_int(4), MS_ERR_FORMAT, "field 't' is an integer");
    CASE(MS_WIRE_TREE, (mm_del(x.root, "v"), mm_add(&x, x.root, 3, "v", mm_int(1))), MS_ERR_FORMAT, "not 'v'");
    CASE(MS_WIRE_TREE, mm_del(x.root, "rid"), MS_ERR_FORMAT, "tree: missing field 'rid'");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "rid") = mm_int(-3), MS_ERR_RANGE, "'rid' is -3");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "round") = mm_int(-1), MS_ERR_RANGE, "'round' is -1");
    CASE(MS_WIRE_TREE, mm_add(&x, x.root, -1, "bogus", mm_int(1)), MS_ERR_FORMAT, "unknown key 'bogus'");
    CASE(MS_WIRE_TREE, mm_add(&x, x.root, -1, "n", mm_int(6)), MS_ERR_FORMAT, "duplicate key 'n'");
    CASE(MS_WIRE_TREE, mm_add(&x, x.root, -1, "prompt", mm_int(6)), MS_ERR_FORMAT, "unknown key 'prompt'");
    /* tree */
    CASE(MS_WIRE_TREE, mm_del(x.root, "score"), MS_ERR_FORMAT, "missing field 'score'");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "n") = mm_str("6"), MS_ERR_FORMAT, "field 'n' is a string, expected an integer");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "n") = mm_int(65), MS_ERR_RANGE, "field 'n' is 65");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "n") = mm_int(0), MS_ERR_RANGE, "field 'n' is 0");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "n") = mm_int(7), MS_ERR_FORMAT, "field 'token' has 6 entries, n is 7");
    CASE(MS_WIRE_TREE, mm_resize(&x, mm_get(x.root, "parent"), 7), MS_ERR_FORMAT, "field 'parent' has 7 entries, n is 6");
    CASE(MS_WIRE_TREE, mm_resize(&x, mm_get(x.root, "depth"), 5), MS_ERR_FORMAT, "field 'depth' has 5 entries, n is 6");
    CASE(MS_WIRE_TREE, mm_resize(&x, mm_get(x.root, "score"), 5), MS_ERR_FORMAT, "field 'score' has 5 entries, n is 6");
    CASE(MS_WIRE_TREE, mm_resize(&x, mm_get(x.root, "token"), 65), MS_ERR_RANGE, "field 'token' has 65 entries, at most 64");
    CASE(MS_WIRE_TREE, mm_get(x.root, "parent")->via.array.ptr[4] = mm_int(4), MS_ERR_FORMAT, "node 4: parent 4");
    CASE(MS_WIRE_TREE, mm_get(x.root, "parent")->via.array.ptr[0] = mm_int(0), MS_ERR_FORMAT, "node 0: parent 0");
    CASE(MS_WIRE_TREE, mm_get(x.root, "parent")->via.array.ptr[2] = mm_int(-2), MS_ERR_RANGE, "'parent' is -2");
    CASE(MS_WIRE_TREE, mm_get(x.root, "depth")->via.array.ptr[3] = mm_int(1), MS_ERR_FORMAT, "node 3: depth 1, expected 2");
    CASE(MS_WIRE_TREE, mm_get(x.root, "token")->via.array.ptr[3] = mm_int(-5), MS_ERR_RANGE, "'token' is -5");
    CASE(MS_WIRE_TREE, mm_get(x.root, "token")->via.array.ptr[3] = mm_str("x"), MS_ERR_FORMAT, "'token' is a string");
    CASE(MS_WIRE_TREE, mm_get(x.root, "score")->via.array.ptr[1] = mm_int(0), MS_ERR_FORMAT, "'score' is an integer, expected a float");
    CASE(MS_WIRE_TREE, (o = &mm_get(x.root, "score")->via.array.ptr[1], o->via.f64 = NAN), MS_ERR_FORMAT, "'score' is NaN");
    CASE(MS_WIRE_TREE, *mm_get(x.root, "parent") = mm_int(0), MS_ERR_FORMAT, "'parent' is an integer, expected an array");
    CASE(MS_WIRE_TREE, mm_del(mm_get(x.root, "stats"), "covered"), MS_ERR_FORMAT, "stats: missing field 'covered'");
    CASE(MS_WIRE_TREE, *mm_get(mm_get(x.root, "stats"), "covered") = mm_int(7), MS_ERR_FORMAT, "covered 7 > emitted 6");
    CASE(MS_WIRE_TREE, mm_add(&x, mm_get(x.root, "stats"), -1, "extra", mm_int(1)), MS_ERR_FORMAT, "stats: unknown key 'extra'");
    CASE(MS_WIRE_TREE, mm_add(&x, x.root, -1, "ngram", mm_int(0)), MS_ERR_FORMAT, "field 'ngram' is 0");
    CASE(MS_WIRE_TREE, mm_add(&x, x.root, -1, "ngram", mm_int(3)), MS_ERR_FORMAT, "ngram 0x3 names the root");
    CASE(MS_WIRE_TREE, mm_add(&x, x.root, -1, "ngram", mm_int(64)), MS_ERR_FORMAT, "ngram 0x40 names the root or a node past 5");
    CASE(MS_WIRE_TREE, mm_add(&x, x.root, -1, "ngram", mm_int(-2)), MS_ERR_RANGE, "'ngram' is -2");
    /* begin */
    CASE(MS_WIRE_BEGIN, mm_resize(&x, mm_get(x.root, "topk_pre"), 11), MS_ERR_FORMAT, "'topk_pre' has 11 entries, n_prompt·k_pre is 12");
    CASE(MS_WIRE_BEGIN, *mm_get(x.root, "k_pre") = mm_int(65), MS_ERR_RANGE, "'k_pre' is 65");
    CASE(MS_WIRE_BEGIN, mm_resize(&x, mm_get(x.root, "prompt"), 0), MS_ERR_FORMAT, "'prompt' is empty");
    CASE(MS_WIRE_BEGIN, mm_get(x.root, "prompt")->via.array.ptr[0] = mm_int((int64_t)INT32_MAX + 1), MS_ERR_RANGE, "'prompt' is 2147483648");
    CASE(MS_WIRE_BEGIN, mm_resize(&x, mm_get(x.root, "prompt"), 7), MS_ERR_FORMAT, "'topk_pre' has 12 entries, n_prompt·k_pre is 14");
    CASE(MS_WIRE_BEGIN, mm_del(x.root, "root"), MS_ERR_FORMAT, "begin: missing field 'root'");
    /* tensors */
    CASE(MS_WIRE_BEGIN, x.tensor = NULL, MS_ERR_FORMAT, "no tensor frame came");
    CASE(MS_WIRE_BEGIN, x.tensor_bytes -= 4, MS_ERR_FORMAT, "tensor frame has 92 bytes, 96 announced");
    CASE(MS_WIRE_BEGIN, x.tensor_bytes += 1, MS_ERR_FORMAT, "tensor frame has 97 bytes");
    CASE(MS_WIRE_BEGIN, *mm_get(mm_get(x.root, "tensor"), "bytes") = mm_int(100), MS_ERR_FORMAT, "announces 100 bytes");
    CASE(MS_WIRE_BEGIN, mm_get(mm_get(x.root, "tensor"), "shape")->via.array.ptr[0] = mm_int(5), MS_ERR_FORMAT, "tensor has 5 rows, n_prompt is 6");
    CASE(MS_WIRE_BEGIN, mm_get(mm_get(x.root, "tensor"), "shape")->via.array.ptr[1] = mm_int(0), MS_ERR_RANGE, "'tensor.shape[1]' is 0");
    CASE(MS_WIRE_BEGIN, mm_resize(&x, mm_get(mm_get(x.root, "tensor"), "shape"), 3), MS_ERR_RANGE, "'tensor.shape' has 3 entries");
    CASE(MS_WIRE_BEGIN, *mm_get(mm_get(x.root, "tensor"), "dtype") = mm_str("I32"), MS_ERR_FORMAT, "tensor.dtype 'I32'");
    CASE(MS_WIRE_BEGIN, mm_del(mm_get(x.root, "tensor"), "seq"), MS_ERR_FORMAT, "tensor: missing field 'seq'");
    CASE(MS_WIRE_BEGIN, mm_del(x.root, "tensor"), MS_ERR_FORMAT, "none was announced");
    CASE(MS_WIRE_VERIFY, mm_get(mm_get(x.root, "tensor"), "shape")->via.array.ptr[0] = mm_int(65), MS_ERR_RANGE, "'tensor.shape[0]' is 65");
    /* verify */
    CASE(MS_WIRE_VERIFY, *mm_get(x.root, "n_path") = mm_int(2), MS_ERR_FORMAT, "'path' has 3 entries, n_path is 2");
    CASE(MS_WIRE_VERIFY, mm_get(x.root, "path")->via.array.ptr[0] = mm_int(1), MS_ERR_FORMAT, "path[0] is 1");
    CASE(MS_WIRE_VERIFY, mm_get(x.root, "path")->via.array.ptr[2] = mm_int(1), MS_ERR_FORMAT, "path[2] = 1 after 1");
    CASE(MS_WIRE_VERIFY, mm_get(x.root, "path")->via.array.ptr[2] = mm_int(64), MS_ERR_RANGE, "'path' is 64");
    CASE(MS_WIRE_VERIFY, mm_resize(&x, mm_get(x.root, "ver_topk"), 7), MS_ERR_FORMAT, "'ver_topk' has 7 entries, n_path·k_ver is 6");
    CASE(MS_WIRE_VERIFY, *mm_get(x.root, "bonus") = mm_int(-1), MS_ERR_RANGE, "'bonus' is -1");
    CASE(MS_WIRE_VERIFY, *mm_get(x.root, "k_ver") = (msgpack_object){.type = MSGPACK_OBJECT_BOOLEAN}, MS_ERR_FORMAT, "'k_ver' is a bool");
    /* hello, hello_ack, error, heartbeat, cancel */
    static char long_fp[MS_WIRE_FP_MAX + 2];
    static char zero_auth[2 * MS_WIRE_AUTH_BYTES + 1];
    memset(zero_auth, '0', 2 * MS_WIRE_AUTH_BYTES);
    memset(long_fp, 'a', MS_WIRE_FP_MAX + 1);
    CASE(MS_WIRE_HELLO, *mm_get(x.root, "model_fp") = mm_str(long_fp), MS_ERR_RANGE, "'model_fp' has 129 bytes, at most 128");
    CASE(MS_WIRE_HELLO, (o = mm_get(x.root, "tok_fp"), o->via.str.size = 3, o->via.str.ptr = "a\0b"), MS_ERR_FORMAT, "'tok_fp' holds a NUL");
    CASE(MS_WIRE_HELLO, *mm_get(x.root, "role") = mm_str("client"), MS_ERR_FORMAT, "'role' is 'client'");
    CASE(MS_WIRE_HELLO, *mm_get(x.root, "wants_features") = mm_int(1), MS_ERR_FORMAT, "'wants_features' is an integer, expected a bool");
    CASE(MS_WIRE_HELLO, *mm_get(x.root, "vocab") = mm_int(0), MS_ERR_RANGE, "'vocab' is 0");
    CASE(MS_WIRE_HELLO, *mm_get(x.root, "hidden") = mm_int(MS_WIRE_FEAT_DIM_MAX + 1), MS_ERR_RANGE, "'hidden' is 65537");
    CASE(MS_WIRE_HELLO, mm_add(&x, x.root, -1, "auth", mm_str(zero_auth)), MS_ERR_FORMAT, "field 'auth' is all zero");
    CASE(MS_WIRE_HELLO, mm_add(&x, x.root, -1, "auth", mm_str("00ff")), MS_ERR_FORMAT, "'auth' has 4 characters, expected 64 hex digits");
    CASE(MS_WIRE_HELLO, mm_add(&x, x.root, -1, "nonce", mm_str(zero_auth + 32)), MS_ERR_FORMAT, "hello: control map: unknown key 'nonce'");
    CASE(MS_WIRE_HELLO_ACK, mm_add(&x, x.root, -1, "nonce", mm_str(zero_auth + 32)), MS_ERR_FORMAT, "field 'nonce' is all zero");
    CASE(MS_WIRE_HELLO_ACK, mm_add(&x, x.root, -1, "nonce", mm_str("0123456789ABCDEF0123456789abcdef")), MS_ERR_FORMAT, "'nonce': character 10 is not a lowercase hex digit");
    CASE(MS_WIRE_HELLO_ACK, mm_add(&x, x.root, -1, "auth", mm_str(zero_auth)), MS_ERR_FORMAT, "hello_ack: control map: unknown key 'auth'");
    CASE(MS_WIRE_HELLO_ACK, mm_del(x.root, "accepted"), MS_ERR_FORMAT, "hello_ack: missing field 'accepted'");
    CASE(MS_WIRE_ERROR, *mm_get(x.root, "code") = mm_int(0), MS_ERR_RANGE, "'code' is 0");
    CASE(MS_WIRE_ERROR, *mm_get(x.root, "message") = (msgpack_object){.type = MSGPACK_OBJECT_NIL}, MS_ERR_FORMAT, "'message' is nil");
    CASE(MS_WIRE_HEARTBEAT, *mm_get(x.root, "t_ns") = mm_int(-1), MS_ERR_RANGE, "'t_ns' is -1");
    CASE(MS_WIRE_PING, mm_del(x.root, "reply"), MS_ERR_FORMAT, "ping: missing field 'reply'");
    CASE(MS_WIRE_PING, *mm_get(x.root, "seq") = mm_int(-1), MS_ERR_RANGE, "ping: field 'seq' is -1");
    CASE(MS_WIRE_PING, *mm_get(x.root, "build") = mm_str(long_fp), MS_ERR_RANGE, "'build' has 129 bytes, at most 64");
    CASE(MS_WIRE_CANCEL, mm_add(&x, x.root, -1, "tensor", mm_int(0)), MS_ERR_FORMAT, "unknown key 'tensor'");
    CASE(MS_WIRE_END, mm_add(&x, x.root, -1, "reason", mm_str("x")), MS_ERR_FORMAT, "end: control map: unknown key 'reason'");
#undef CASE
}

static void test_encoder_refuses(void) {
    ms_wire_buf buf = {0};
    ms_wire_msg m;
    const void *tp;
    size_t tb;
    int32_t neg[12];
    memcpy(neg, ex_topk_pre, sizeof(neg));
    neg[4] = -1;
#define REFUSE(type, edit, what)                                                                       \
    do {                                                                                               \
        example(type, &m);                                                                             \
        edit;                                                                                          \
        ms_status st_ = ms_wire_encode(&m, &buf, &tp, &tb);                                            \
        CHECK(st_ == MS_ERR_INVALID, "encoder accepted %s (%s)", what, ms_status_str(st_));            \
    } while (0)
    REFUSE(MS_WIRE_TREE, m.u.tree.tree.parent[3] = 3, "a tree with a bad parent");
    REFUSE(MS_WIRE_TREE, m.u.tree.tree.n = 65, "n = 65");
    REFUSE(MS_WIRE_TREE, m.u.tree.round = 9, "tree round ≠ envelope round");
    REFUSE(MS_WIRE_TREE, m.u.tree.tree.score[2] = NAN, "a NaN score");
    REFUSE(MS_WIRE_TREE, m.u.tree.stats.covered = 7, "covered > emitted");
    REFUSE(MS_WIRE_BEGIN, m.u.begin.topk_pre = neg, "a negative id");
    REFUSE(MS_WIRE_BEGIN, m.u.begin.n_prompt = 0, "an empty prompt");
    REFUSE(MS_WIRE_BEGIN, m.u.begin.k_pre = 65, "k_pre 65");
    REFUSE(MS_WIRE_BEGIN, m.u.begin.request_id = 8, "begin rid ≠ envelope rid");
    REFUSE(MS_WIRE_BEGIN, m.u.begin.feat_dim = 0, "feat_dim 0");
    REFUSE(MS_WIRE_VERIFY, m.u.verify.path[2] = 1, "a path not increasing");
    REFUSE(MS_WIRE_VERIFY, m.u.verify.n_path = 0, "n_path 0");
    REFUSE(MS_WIRE_HELLO, memset(m.u.hello.kind, 'k', sizeof(m.u.hello.kind)), "an unterminated kind");
    REFUSE(MS_WIRE_HELLO, m.u.hello.role = 0, "no role");
    REFUSE(MS_WIRE_ERROR, m.u.error.code = 0, "error code 0");
    REFUSE(MS_WIRE_HEARTBEAT, m.type = 0, "type 0");
    REFUSE(MS_WIRE_HEARTBEAT, m.round = -1, "round -1");
    example(MS_WIRE_VERIFY, &m);
    CHECK(ms_wire_encode(&m, &buf, NULL, NULL) == MS_ERR_INVALID, "features without a place for the tensor frame");
#undef REFUSE
    ms_wire_buf_free(&buf);
}

/* ---- timing (printed, not asserted) ------------------------------------------ */

static void timing(void) {
    ms_rng r;
    ms_rng_seed(&r, 5);
    ms_wire_arena *a = NULL;
    MS_ASSERT(ms_wire_arena_new(0, &a) == MS_OK);
    ms_wire_buf buf = {0};
    ms_wire_msg m, out;
    memset(&m, 0, sizeof(m));
    m.type = MS_WIRE_TREE;
    m.request_id = m.u.tree.request_id = 11;
    m.round = m.u.tree.round = 3;
    rnd_tree(&r, 60, &m.u.tree.tree);
    const int iters = 20000;
    double t0 = ms_now_s();
    for (int i = 0; i < iters; i++) {
        const void *tp;
        size_t tb;
        MS_ASSERT(ms_wire_encode(&m, &buf, &tp, &tb) == MS_OK);
        MS_ASSERT(ms_wire_decode(buf.data, buf.len, NULL, 0, false, a, &out) == MS_OK);
    }
    double tree_us = (ms_now_s() - t0) / iters * 1e6;
    size_t tree_bytes = buf.len;

    store s = {0};
    memset(&m, 0, sizeof(m));
    m.type = MS_WIRE_VERIFY;
    m.request_id = m.u.verify.request_id = 11;
    m.round = m.u.verify.round = 3;
    ms_msg_verify *v = &m.u.verify;
    v->n_path = 64;
    for (int i = 0; i < 64; i++) v->path[i] = i;
    v->bonus = 17;
    v->k_ver = 10;
    v->ver_topk = s.topk = rnd_ids(&r, 64 * 10);
    v->feat_dim = 4096;
    v->features = s.feat = rnd_feat(&r, 64 * 4096);
    const int iters2 = 2000;
    t0 = ms_now_s();
    for (int i = 0; i < iters2; i++) {
        const void *tp;
        size_t tb;
        MS_ASSERT(ms_wire_encode(&m, &buf, &tp, &tb) == MS_OK);
        MS_ASSERT(ms_wire_decode(buf.data, buf.len, tp, tb, true, a, &out) == MS_OK);
    }
    double verify_us = (ms_now_s() - t0) / iters2 * 1e6;
    printf("timing: tree n=60 encode+decode %.2f us (frame 0: %zu bytes); verify 64 rows, k_ver 10, d=4096 F32 "
           "encode+decode %.1f us (frame 0: %zu bytes, tensor frame %zu bytes, copied into the arena)\n",
           tree_us, tree_bytes, verify_us, buf.len, (size_t)64 * 4096 * 4);
    store_free(&s);
    ms_wire_buf_free(&buf);
    ms_wire_arena_free(&a);
}

/* ---- modes that write files ---------------------------------------------------- */

static int write_golden(const char *dir) {
    ms_wire_buf buf = {0};
    for (int t = MS_WIRE_HELLO; t <= MS_WIRE_TYPE_COUNT; t++) {
        ms_wire_msg m;
        example((ms_wire_type)t, &m);
        const void *tp;
        size_t tb;
        MS_ASSERT(ms_wire_encode(&m, &buf, &tp, &tb) == MS_OK);
        char name[64];
        snprintf(name, sizeof(name), "%s.bin", ms_wire_type_name(m.type));
        char *path = ms_path_join(dir, name);
        if (ms_write_file_atomic(path, buf.data, buf.len) != MS_OK) return 1;
        printf("%s: %zu bytes\n", path, buf.len);
        free(path);
    }
    ms_wire_buf_free(&buf);
    return 0;
}

/* fuzz_wire input: byte 0 = (tensor_len/4) << 1 | has_tensor, then frame 0, then the tensor. */
static int write_seed(const char *dir, const char *name, const uint8_t *ctrl, size_t clen, const void *tensor, size_t tlen) {
    MS_ASSERT(tlen % 4 == 0 && tlen / 4 < 128);
    size_t n = 1 + clen + tlen;
    uint8_t *p = malloc(n);
    p[0] = (uint8_t)((tlen / 4) << 1 | (tensor != NULL));
    memcpy(p + 1, ctrl, clen);
    if (tlen) memcpy(p + 1 + clen, tensor, tlen);
    char *path = ms_path_join(dir, name);
    ms_status st = ms_write_file_atomic(path, p, n);
    free(path);
    free(p);
    return st == MS_OK ? 0 : 1;
}

static int write_seeds(const char *dir) {
    ms_wire_buf buf = {0};
    int rc = 0;
    for (int t = MS_WIRE_HELLO; t <= MS_WIRE_TYPE_COUNT; t++) {
        ms_wire_msg m;
        example((ms_wire_type)t, &m);
        const void *tp;
        size_t tb;
        MS_ASSERT(ms_wire_encode(&m, &buf, &tp, &tb) == MS_OK);
        char name[64];
        snprintf(name, sizeof(name), "%s.bin", ms_wire_type_name(m.type));
        rc |= write_seed(dir, name, buf.data, buf.len, tp, tb);
        if (t == MS_WIRE_VERIFY) { /* a broken one: tensor frame 4 bytes short */
            rc |= write_seed(dir, "bad_verify_short_tensor.bin", buf.data, buf.len, tp, tb - 4);
        }
        if (t == MS_WIRE_TREE) { /* a broken one: truncated */
            rc |= write_seed(dir, "bad_tree_truncated.bin", buf.data, buf.len - 3, NULL, 0);
        }
    }
    /* a 64-node tree and an F16 verify */
    ms_rng r;
    ms_rng_seed(&r, 1);
    store s = {0};
    ms_wire_msg m;
    gen(&r, MS_WIRE_TREE, SZ_MAX, 1, &s, &m);
    MS_ASSERT(ms_wire_encode(&m, &buf, NULL, NULL) == MS_OK);
    rc |= write_seed(dir, "tree64.bin", buf.data, buf.len, NULL, 0);
    store_free(&s);
    mmsg x;
    mm_open(&x, MS_WIRE_VERIFY);
    *mm_get(mm_get(x.root, "tensor"), "dtype") = mm_str("F16");
    *mm_get(mm_get(x.root, "tensor"), "bytes") = mm_int(24);
    mm_pack(&x);
    static const uint16_t f16[12] = {0x3c00, 0xc100, 0x3800, 0, 0x4000, 0xbc00, 0x3e00, 0x4400, 0x8000, 0x3400, 0x7c00, 0x7e00};
    rc |= write_seed(dir, "verify_f16.bin", (const uint8_t *)x.sb.data, x.sb.size, f16, 24);
    mm_close(&x);
    ms_wire_buf_free(&buf);
    printf("seeds written to %s\n", dir);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-golden")) return write_golden(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) return write_seeds(argv[2]);
    ms_log_set_role("test_wire");
    test_roundtrip();
    test_golden();
    test_comparator();
    /* the bad-input tests log one error per case: keep stderr for the failures */
    ms_log_set_level(MS_LOG_OFF);
    test_encoder_refuses();
    ms_wire_arena *a = NULL;
    MS_ASSERT(ms_wire_arena_new(0, &a) == MS_OK);
    test_rebuilt_and_dtypes(a);
    test_prefixes_and_garbage(a);
    test_huge_counts();
    test_field_errors(a);
    ms_wire_arena_free(&a);
    ms_log_set_level(MS_LOG_WARN);
    timing();
    printf("test_wire: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
