/* test_xfer — tensor transports without a GPU (protocol/ms_xfer.h):
 *   1. the negotiation table, every combination of policies / offers /
 *      devices, against a reference written separately as a rule list;
 *   2. features through two real ms_link ends (ipc:// endpoint), bit-exact,
 *      with the seq stamped by the sender;
 *   3. bad announcements (via not negotiated, seq replayed, wrong width,
 *      wrong byte count, dtype on a transport) each refused with an error reply
 *      while the receiver goes on serving the next good message;
 *   4. ms_xfer_check's refusals one by one, and ipc/nccl asked for on the CPU
 *      (or in a build without CUDA) refused with a clear error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "ms_link.h"
#include "ms_xfer.h"
#include "test_fs.h"

#include "ms_check.h"

/* ---- 1. negotiation table ----------------------------------------------------- */

/* The reference, as docs/architecture.md §6 and the brief state it, rule by rule. */
static ms_wire_via reference(ms_xfer_kind tp, bool t_gpu, uint32_t t_off, ms_xfer_kind dp, bool d_gpu, uint32_t d_off,
                             bool same_gpu, bool same_host) {
    const uint32_t IPC = 1u << MS_WIRE_VIA_IPC, NCCL = 1u << MS_WIRE_VIA_NCCL;
    if (tp == MS_XFER_HOST || dp == MS_XFER_HOST) return MS_WIRE_VIA_HOST;       /* asked for host */
    if (!t_gpu || !d_gpu || d_off == 0) return MS_WIRE_VIA_HOST;               /* an end on the CPU */
    if (same_gpu && same_host && (t_off & IPC) && (d_off & IPC)) return MS_WIRE_VIA_IPC;
    if (!same_gpu && (t_off & NCCL) && (d_off & NCCL)) return MS_WIRE_VIA_NCCL;
    return MS_WIRE_VIA_HOST;
}

/* What an end offers for its policy when on a GPU (both kinds built). */
static uint32_t offer_of(ms_xfer_kind p, bool gpu) {
    if (!gpu) return 0;
    switch (p) {
    case MS_XFER_AUTO: return (1u << MS_WIRE_VIA_IPC) | (1u << MS_WIRE_VIA_NCCL);
    case MS_XFER_IPC: return 1u << MS_WIRE_VIA_IPC;
    case MS_XFER_NCCL: return 1u << MS_WIRE_VIA_NCCL;
    case MS_XFER_HOST: return 0;
    }
    return 0;
}

static void test_table(void) {
    int n = 0, seen[MS_WIRE_VIA_COUNT] = {0};
    for (int tp = MS_XFER_HOST; tp <= MS_XFER_AUTO; tp++)
        for (int dp = MS_XFER_HOST; dp <= MS_XFER_AUTO; dp++)
            for (int tg = 0; tg < 2; tg++)
                for (int dg = 0; dg < 2; dg++)
                    for (int same_gpu = 0; same_gpu < 2; same_gpu++)
                        for (int same_host = 0; same_host < 2; same_host++) {
                            ms_xfer_side t = {.policy = (ms_xfer_kind)tp, .on_gpu = tg};
                            ms_xfer_side d = {.policy = (ms_xfer_kind)dp, .on_gpu = dg};
                            t.wire.offer = offer_of(t.policy, tg);
                            d.wire.offer = offer_of(d.policy, dg);
                            memset(t.wire.gpu_uuid, 0xA1, 16);
                            memset(d.wire.gpu_uuid, same_gpu ? 0xA1 : 0xB2, 16);
                            snprintf(t.wire.host_id, sizeof t.wire.host_id, "boot-1");
                            snprintf(d.wire.host_id, sizeof d.wire.host_id, same_host ? "boot-1" : "boot-2");
                            char why[256] = "";
                            ms_wire_via got = ms_xfer_choose(&t, &d, why, sizeof why);
                            ms_wire_via want = reference(t.policy, tg, t.wire.offer, d.policy, dg, d.wire.offer,
                                                         same_gpu, same_host);
                            CHECK(got == want, "table: target %s gpu %d, draft %s gpu %d, same gpu %d host %d: got %d want %d (%s)",
                                  ms_xfer_kind_name(t.policy), tg, ms_xfer_kind_name(d.policy), dg, same_gpu, same_host,
                                  (int)got, (int)want, why);
                            CHECK(why[0] != 0, "table: no reason given");
                            seen[got]++;
                            n++;
                        }
    CHECK(n == 4 * 4 * 16 && seen[0] && seen[1] && seen[2], "table: %d cases, kinds seen %d/%d/%d", n, seen[0], seen[1],
          seen[2]);
    /* A few rows spelled out (the brief's words). */
    ms_xfer_side a = {.policy = MS_XFER_AUTO, .on_gpu = true}, b = a;
    a.wire.offer = b.wire.offer = offer_of(MS_XFER_AUTO, true);
    snprintf(a.wire.host_id, sizeof a.wire.host_id, "h");
    snprintf(b.wire.host_id, sizeof b.wire.host_id, "h");
    CHECK(ms_xfer_choose(&a, &b, NULL, 0) == MS_WIRE_VIA_IPC, "same uuid + same host → ipc");
    b.wire.gpu_uuid[15] = 1;
    CHECK(ms_xfer_choose(&a, &b, NULL, 0) == MS_WIRE_VIA_NCCL, "different uuids → nccl");
    b.wire.offer = 0, b.on_gpu = false;
    CHECK(ms_xfer_choose(&a, &b, NULL, 0) == MS_WIRE_VIA_HOST, "draft on the CPU (offers nothing) → host");

    ms_xfer_kind k;
    CHECK(ms_xfer_kind_parse("auto", &k) && k == MS_XFER_AUTO && ms_xfer_kind_parse("nccl", &k) && k == MS_XFER_NCCL &&
              !ms_xfer_kind_parse("NCCL", &k) && !ms_xfer_kind_parse("", &k) && !ms_xfer_kind_parse(NULL, &k),
          "kind parse");
}

/* ---- shared helpers ---------------------------------------------------------- */

enum { FEAT = 37, ROWS = 5 };

static void fill(float *f, int64_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        uint32_t bits = (s >> 1) & 0x7f7fffffu; /* finite, varied exponents, either sign */
        bits |= (s & 1u) << 31;
        memcpy(&f[i], &bits, 4);
    }
}

static ms_xfer *host_xfer(bool receiver, ms_xfer_kind policy) {
    ms_xfer_opts o = {.policy = policy, .device = -1, .max_rows = 64, .feat_dim = FEAT, .dtype = MS_DTYPE_F32,
                      .deadline_ms = 500, .host_id = "test"};
    ms_xfer *x = NULL;
    ms_status st = ms_xfer_new(&o, receiver, &x);
    CHECK(st == MS_OK && x, "ms_xfer_new host: %d", st);
    return x;
}

static ms_wire_msg verify_msg(uint64_t rid, int64_t round, const float *feat, int64_t feat_dim, int64_t n_path) {
    ms_wire_msg m = {.type = MS_WIRE_VERIFY, .request_id = rid, .round = round};
    m.u.verify.request_id = rid;
    m.u.verify.round = round;
    m.u.verify.n_path = n_path;
    for (int64_t i = 0; i < n_path; i++) m.u.verify.path[i] = (int32_t)i;
    m.u.verify.bonus = 7;
    m.u.verify.features = feat;
    m.u.verify.feat_dim = feat_dim;
    return m;
}

/* Receive the next non-heartbeat message on l (bounded). */
static ms_status recv_one(ms_link *l, ms_wire_msg *m) {
    for (int i = 0; i < 50; i++) {
        ms_status st = ms_link_recv(l, 100, m);
        if (st != MS_ERR_TIMEOUT) return st;
    }
    return MS_ERR_TIMEOUT;
}

/* ---- 2. host round trip through two links -------------------------------------- */

static void test_link_roundtrip(const char *dir) {
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s/link.sock", dir);
    ms_link_opts o = {.endpoint = ep, .deadline_ms = 2000, .heartbeat_ms = 200};
    ms_link *tl = NULL, *dl = NULL;
    CHECK(ms_link_bind(&o, &tl) == MS_OK && ms_link_connect(&o, &dl) == MS_OK, "links");
    if (!tl || !dl) goto out;
    ms_xfer *tx = host_xfer(false, MS_XFER_AUTO), *dx = host_xfer(true, MS_XFER_AUTO);
    ms_link_set_xfer(tl, tx);
    ms_link_set_xfer(dl, dx);
    /* a CPU end offers nothing: its hello has the bytes of old */
    CHECK(ms_xfer_local(dx).wire.offer == 0, "CPU receiver offers nothing");

    ms_wire_msg hello = {.type = MS_WIRE_HELLO};
    hello.u.hello.role = MS_WIRE_ROLE_DRAFT;
    snprintf(hello.u.hello.kind, sizeof hello.u.hello.kind, "eagle");
    hello.u.hello.vocab = 100, hello.u.hello.hidden = FEAT, hello.u.hello.wants_features = true;
    hello.u.hello.xfer = ms_xfer_local(dx).wire;
    CHECK(ms_link_send(dl, &hello) == MS_OK, "hello sent");
    ms_wire_msg m;
    CHECK(recv_one(tl, &m) == MS_OK && m.type == MS_WIRE_HELLO, "target got hello");
    CHECK(ms_link_accept_peer(tl, true, "") == MS_OK, "accept");
    CHECK(recv_one(dl, &m) == MS_OK && m.type == MS_WIRE_HELLO_ACK && m.u.ack.accepted && m.u.ack.xfer == MS_WIRE_VIA_HOST,
          "draft got ack (host)");
    CHECK(ms_xfer_kind_now(tx) == MS_WIRE_VIA_HOST && ms_xfer_kind_now(dx) == MS_WIRE_VIA_HOST, "both on host");

    float feat[ROWS * FEAT], big[200 * FEAT];
    for (int r = 1; r <= 3; r++) {
        fill(feat, ROWS * FEAT, (uint32_t)r);
        ms_wire_msg v = verify_msg(9, r, feat, FEAT, ROWS);
        CHECK(ms_link_send(tl, &v) == MS_OK, "verify %d sent", r);
        CHECK(recv_one(dl, &m) == MS_OK && m.type == MS_WIRE_VERIFY, "verify %d received", r);
        CHECK(m.u.verify.features && m.u.verify.feat_dim == FEAT &&
                  memcmp(m.u.verify.features, feat, sizeof feat) == 0,
              "verify %d: features bit-exact", r);
        CHECK(m.tensor_seq == (uint64_t)r, "verify %d: seq %llu", r, (unsigned long long)m.tensor_seq);
    }
    /* a begin with more rows than the transport's max_rows: host frame too */
    int32_t prompt[200];
    for (int i = 0; i < 200; i++) prompt[i] = i;
    fill(big, 200 * FEAT, 99);
    ms_wire_msg b = {.type = MS_WIRE_BEGIN, .request_id = 10};
    b.u.begin = (ms_msg_begin){.request_id = 10, .prompt = prompt, .n_prompt = 200, .root = 1, .features = big,
                               .feat_dim = FEAT};
    CHECK(ms_link_send(tl, &b) == MS_OK, "begin sent");
    CHECK(recv_one(dl, &m) == MS_OK && m.type == MS_WIRE_BEGIN && m.u.begin.features &&
              memcmp(m.u.begin.features, big, sizeof big) == 0 && m.tensor_seq == 4,
          "begin: 200 rows bit-exact, seq 4");
    ms_xfer_counters c = ms_xfer_counters_get(dx);
    CHECK(c.received[MS_WIRE_VIA_HOST] == 4 && c.refused == 0, "receiver counters %lld/%lld",
          (long long)c.received[0], (long long)c.refused);
    ms_link_close(&tl);
    ms_link_close(&dl);
    ms_xfer_free(&tx);
    ms_xfer_free(&dx);
out:
    ms_link_close(&tl);
    ms_link_close(&dl);
}

/* ---- 3. bad announcements from a raw peer ------------------------------------------- */

typedef struct {
    void *ctx, *sock;
    uint8_t id[256];
    size_t id_len;
    ms_wire_buf buf;
    ms_wire_arena *arena;
} raw_target;

static void raw_send(raw_target *t, const ms_wire_msg *m, const void *frame, size_t frame_len, bool with_frame) {
    const void *tp = NULL;
    size_t tb = 0;
    ms_status st = ms_wire_encode(m, &t->buf, &tp, &tb);
    CHECK(st == MS_OK, "raw encode %s", ms_wire_type_name(m->type));
    zmq_send(t->sock, t->id, t->id_len, ZMQ_SNDMORE);
    zmq_send(t->sock, t->buf.data, t->buf.len, with_frame ? ZMQ_SNDMORE : 0);
    if (with_frame) zmq_send(t->sock, frame, frame_len, 0);
}

/* The next non-heartbeat message from the draft (bounded); its type, 0 if none. */
static ms_wire_type raw_recv(raw_target *t, ms_wire_msg *m) {
    for (int i = 0; i < 40; i++) {
        zmq_pollitem_t pi = {.socket = t->sock, .events = ZMQ_POLLIN};
        if (zmq_poll(&pi, 1, 50) <= 0) continue;
        uint8_t id[256], ctrl[65536];
        int il = zmq_recv(t->sock, id, sizeof id, 0);
        int cl = zmq_recv(t->sock, ctrl, sizeof ctrl, 0);
        if (il <= 0 || cl <= 0) continue;
        t->id_len = (size_t)il < sizeof t->id ? (size_t)il : sizeof t->id;
        memcpy(t->id, id, t->id_len);
        if (ms_wire_decode(ctrl, (size_t)cl, NULL, 0, false, t->arena, m) != MS_OK) continue;
        if (m->type == MS_WIRE_HEARTBEAT) continue;
        return m->type;
    }
    return (ms_wire_type)0;
}

/* The draft link reads one message: a refusal (MS_ERR_FORMAT + an error reply
 * naming `reason`), or the good message with its features. */
static void expect_refused(ms_link *dl, raw_target *t, const char *what, const char *reason) {
    ms_wire_msg m;
    ms_status st = recv_one(dl, &m);
    CHECK(st == MS_ERR_FORMAT, "%s: receiver returned %d, expected MS_ERR_FORMAT", what, st);
    ms_wire_msg e;
    ms_wire_type ty = raw_recv(t, &e);
    CHECK(ty == MS_WIRE_ERROR && strstr(e.u.error.message, reason), "%s: error reply '%s' (type %d), expected '%s'",
          what, ty == MS_WIRE_ERROR ? e.u.error.message : "", (int)ty, reason);
}

static void expect_good(ms_link *dl, const float *feat, uint64_t seq, const char *what) {
    ms_wire_msg m;
    ms_status st = recv_one(dl, &m);
    CHECK(st == MS_OK && m.type == MS_WIRE_VERIFY && m.u.verify.features &&
              memcmp(m.u.verify.features, feat, sizeof(float) * ROWS * FEAT) == 0 && m.tensor_seq == seq,
          "%s: the next good message was not served (st %d)", what, st);
}

static void test_bad_announcements(const char *dir) {
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s/raw.sock", dir);
    raw_target t = {0};
    t.ctx = zmq_ctx_new();
    t.sock = zmq_socket(t.ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(t.sock, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_bind(t.sock, ep) == 0, "raw bind");
    MS_ASSERT(ms_wire_arena_new(0, &t.arena) == MS_OK);
    ms_link_opts o = {.endpoint = ep, .deadline_ms = 2000, .heartbeat_ms = 200};
    ms_link *dl = NULL;
    CHECK(ms_link_connect(&o, &dl) == MS_OK, "draft link");
    ms_xfer *dx = host_xfer(true, MS_XFER_AUTO);
    ms_link_set_xfer(dl, dx);

    ms_wire_msg hello = {.type = MS_WIRE_HELLO};
    hello.u.hello.role = MS_WIRE_ROLE_DRAFT;
    hello.u.hello.vocab = 100, hello.u.hello.hidden = FEAT;
    CHECK(ms_link_send(dl, &hello) == MS_OK, "hello");
    ms_wire_msg m;
    CHECK(raw_recv(&t, &m) == MS_WIRE_HELLO, "raw target got the hello");
    ms_wire_msg ack = {.type = MS_WIRE_HELLO_ACK};
    ack.u.ack.accepted = true;
    raw_send(&t, &ack, NULL, 0, false);
    CHECK(recv_one(dl, &m) == MS_OK && m.type == MS_WIRE_HELLO_ACK, "draft got the ack");

    float good[ROWS * FEAT], wide[ROWS * (FEAT + 1)];
    fill(good, ROWS * FEAT, 5);
    fill(wide, ROWS * (FEAT + 1), 6);
    uint64_t seq = 0;

    ms_wire_msg v = verify_msg(1, 1, good, FEAT, ROWS);
    v.tensor_seq = ++seq;
    raw_send(&t, &v, good, sizeof good, true);
    expect_good(dl, good, seq, "first");

    /* via ipc, never negotiated (this link is host) */
    v = verify_msg(1, 2, NULL, FEAT, ROWS);
    v.tensor = (ms_wire_tensor){.via = MS_WIRE_VIA_IPC, .dtype = MS_DTYPE_F32};
    v.tensor_seq = ++seq;
    raw_send(&t, &v, NULL, 0, false);
    expect_refused(dl, &t, "via ipc", "not negotiated");
    v = verify_msg(1, 2, good, FEAT, ROWS), v.tensor_seq = ++seq;
    raw_send(&t, &v, good, sizeof good, true);
    expect_good(dl, good, seq, "after via ipc");

    /* via nccl, never negotiated */
    v = verify_msg(1, 3, NULL, FEAT, ROWS);
    v.tensor = (ms_wire_tensor){.via = MS_WIRE_VIA_NCCL, .dtype = MS_DTYPE_BF16};
    v.tensor_seq = ++seq;
    raw_send(&t, &v, NULL, 0, false);
    expect_refused(dl, &t, "via nccl", "not negotiated");

    /* a replayed seq */
    v = verify_msg(1, 3, good, FEAT, ROWS), v.tensor_seq = seq - 1;
    raw_send(&t, &v, good, sizeof good, true);
    expect_refused(dl, &t, "replayed seq", "not above");
    v.tensor_seq = 0;
    raw_send(&t, &v, good, sizeof good, true);
    expect_refused(dl, &t, "seq 0", "not above");
    v.tensor_seq = ++seq;
    raw_send(&t, &v, good, sizeof good, true);
    expect_good(dl, good, seq, "after the replays");

    /* wrong width: the features are FEAT wide */
    v = verify_msg(1, 4, wide, FEAT + 1, ROWS), v.tensor_seq = ++seq;
    raw_send(&t, &v, wide, sizeof wide, true);
    expect_refused(dl, &t, "wrong shape", "columns");

    /* wrong byte count: the frame is 4 bytes short of the announcement */
    v = verify_msg(1, 4, good, FEAT, ROWS), v.tensor_seq = ++seq;
    raw_send(&t, &v, good, sizeof good - 4, true);
    expect_refused(dl, &t, "short frame", "bytes");

    /* announced via a transport but a frame came too */
    v = verify_msg(1, 4, NULL, FEAT, ROWS);
    v.tensor = (ms_wire_tensor){.via = MS_WIRE_VIA_IPC, .dtype = MS_DTYPE_F32};
    v.tensor_seq = ++seq;
    raw_send(&t, &v, good, sizeof good, true);
    expect_refused(dl, &t, "via ipc with a frame", "frame");

    v = verify_msg(1, 4, good, FEAT, ROWS), v.tensor_seq = ++seq;
    raw_send(&t, &v, good, sizeof good, true);
    expect_good(dl, good, seq, "the last");
    ms_xfer_counters c = ms_xfer_counters_get(dx);
    CHECK(c.received[MS_WIRE_VIA_HOST] == 4 && c.refused == 5, "counters: received %lld refused %lld",
          (long long)c.received[MS_WIRE_VIA_HOST], (long long)c.refused);

    ms_link_close(&dl);
    ms_xfer_free(&dx);
    ms_wire_arena_free(&t.arena);
    ms_wire_buf_free(&t.buf);
    zmq_close(t.sock);
    zmq_ctx_term(t.ctx);
}

/* ---- 4. the check itself, and kinds that cannot be had ------------------------------ */

static void test_check(void) {
    ms_xfer *x = host_xfer(true, MS_XFER_HOST);
    if (!x) return;
    const size_t row = FEAT * sizeof(float);
    ms_wire_tensor ok = {.via = MS_WIRE_VIA_HOST, .dtype = MS_DTYPE_F32, .rows = 3, .cols = FEAT, .bytes = 3 * row};
    CHECK(ms_xfer_check(x, &ok, 1) == MS_OK, "good host announcement");
    CHECK(ms_xfer_recv(x, &ok, 1, NULL) == MS_OK, "recorded seq 1");
    struct {
        const char *what, *reason;
        ms_wire_tensor t;
        uint64_t seq;
    } bad[] = {
        {"bytes", "bytes", {MS_WIRE_VIA_HOST, MS_DTYPE_F32, 3, FEAT, 3 * row + 1}, 2},
        {"dtype", "dtype", {MS_WIRE_VIA_HOST, MS_DTYPE_I32, 3, FEAT, 3 * row}, 2},
        {"cols", "columns", {MS_WIRE_VIA_HOST, MS_DTYPE_F32, 3, FEAT - 1, 3 * (FEAT - 1) * 4}, 2},
        {"seq", "not above", {MS_WIRE_VIA_HOST, MS_DTYPE_F32, 3, FEAT, 3 * row}, 1},
        {"via ipc", "not negotiated", {MS_WIRE_VIA_IPC, MS_DTYPE_F32, 3, FEAT, 3 * row}, 2},
        {"via nccl", "not negotiated", {MS_WIRE_VIA_NCCL, MS_DTYPE_F32, 3, FEAT, 3 * row}, 2},
        {"via ?", "unknown", {(ms_wire_via)7, MS_DTYPE_F32, 3, FEAT, 3 * row}, 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(ms_xfer_check(x, &bad[i].t, bad[i].seq) == MS_ERR_PEER, "check %s: not refused", bad[i].what);
        CHECK(strstr(ms_xfer_error(x), bad[i].reason), "check %s: reason '%s'", bad[i].what, ms_xfer_error(x));
    }
    ms_wire_tensor f16 = {.via = MS_WIRE_VIA_HOST, .dtype = MS_DTYPE_F16, .rows = 2, .cols = FEAT, .bytes = 2 * FEAT * 2};
    CHECK(ms_xfer_check(x, &f16, 2) == MS_OK, "an F16 host frame is fine (the decoder converts)");
    ms_xfer_free(&x);
    CHECK(x == NULL, "free nulls");

    /* ipc / nccl by name: on the CPU (or without CUDA) a clear error */
    for (int k = MS_XFER_IPC; k <= MS_XFER_NCCL; k++) {
        ms_xfer_opts o = {.policy = (ms_xfer_kind)k, .device = -1, .max_rows = 8, .feat_dim = FEAT, .dtype = MS_DTYPE_F32};
        ms_xfer *y = NULL;
        CHECK(ms_xfer_new(&o, true, &y) == MS_ERR_UNSUPPORTED && !y, "%s on the CPU must be refused",
              ms_xfer_kind_name((ms_xfer_kind)k));
    }
#ifndef MS_HAVE_CUDA
    CHECK(!ms_xfer_kind_built(MS_XFER_IPC) && !ms_xfer_kind_built(MS_XFER_NCCL), "no CUDA: only host");
#endif
    CHECK(ms_xfer_kind_built(MS_XFER_HOST), "host always built");
}

int main(void) {
    ms_log_set_level(getenv("MS_LOG") ? ms_log_get_level() : MS_LOG_OFF);
    char dir[512];
    if (!ms_test_tmpdir("test_xfer", dir, sizeof dir)) {
        fprintf(stderr, "no temp folder\n");
        return 1;
    }
    test_table();
    test_check();
    test_link_roundtrip(dir);
    test_bad_announcements(dir);
    ms_test_rmtree(dir);
    if (g_fail) {
        fprintf(stderr, "test_xfer: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_xfer: ok\n");
    return 0;
}
