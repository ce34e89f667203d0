/* ms_link.c — ZeroMQ ROUTER/DEALER link with deadlines, heartbeats, CURVE. */
#include "ms_link.h"
#include "ms_gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>
#include <zmq.h>

#define MS_ZMQ_FAIL(code, what) MS_FAIL(code, "zmq %s: %s", what, zmq_strerror(zmq_errno()))

/* Bad input from peers (issue 35: 24,225 undecodable frames from a stranger
 * without the secret wrote 2.3 MB of log in 6 s). Every bad message is
 * counted; a line is written while a token is left (BADLOG_BURST, one back
 * every BADLOG_REFILL_NS); the rest are tallied per peer (the first
 * BADLOG_PEERS routing ids, then "other peers") and summarised in one line
 * BADLOG_SUMMARY_NS after the first one left out, or when the link closes. */
#define BADLOG_BURST 16
#define BADLOG_REFILL_NS (5ull * 1000000000ull)
#define BADLOG_SUMMARY_NS (30ull * 1000000000ull)
#define BADLOG_PEERS 4
#define BADLOG_ID 8 /* routing id bytes shown (ZeroMQ's own are 5) */

typedef struct {
    int64_t tokens;
    uint64_t refill_ns, first_ns;   /* tokens last refilled; first message left out since the last summary */
    int64_t left_out, others;       /* messages not logged since the last summary; those from peers past the table */
    struct {
        uint8_t id[BADLOG_ID];
        size_t len;
        int64_t n;
    } peer[BADLOG_PEERS];
    int n_peer;
} badlog;

struct ms_link {
    bool server;
    void *ctx, *sock;
    ms_link_opts o;
    char endpoint[512];
    ms_wire_buf ctrl;
    ms_wire_arena *arena;
    /* target: the accepted draft and the sender of the last message */
    uint8_t peer_id[256], last_id[256];
    size_t peer_len, last_len;
    bool have_peer;
    uint64_t last_heard_ns, last_sent_hb_ns, hb_seq;
    ms_link_counters counters;
    /* CURVE server: the ZAP handler thread and the admitted client key */
    pthread_t zap;
    bool zap_running;
    uint8_t client_key[32];
    void *zap_sock;
    /* socket events (disconnects, e.g. a message over max_message_bytes,
     * and failed handshakes) so they leave a log line */
    void *monitor;
    /* tensor transport (borrowed) and what it needs per connection */
    ms_xfer *xfer;
    ms_wire_xfer last_offer; /* target: the last hello's offer */
    uint64_t tensor_seq;     /* without an xfer: the last frame-1 tensor's seq */
    float *feat;             /* receiver: features fetched by the transport [rows, feat_dim] */
    size_t feat_cap;         /* floats */
    char xfer_err[256];      /* the last tensor refusal */
    /* link secret (ms_link.h): both ends */
    uint8_t secret[256];
    size_t secret_len;                       /* 0: no secret */
    uint8_t nonce[MS_WIRE_NONCE_BYTES];      /* target: the challenge a proof must answer */
    ms_wire_hello hello;                     /* draft: the last hello sent, to answer a challenge with */
    bool have_hello;
    int challenges;                          /* draft: challenges answered since the last other reply */
    uint8_t answered[MS_WIRE_NONCE_BYTES];   /* draft: the nonce it proved last (all zero: none) */
    uint64_t listening_since_ns, last_recv_ns; /* target: when recv resumed after a pause */
    badlog bad;                                /* bad input's log budget and tallies */
};

#define LINK_CHALLENGES_MAX 4 /* a draft whose proofs are refused this often in a row has another secret */
/* The reason of a challenge (the answer to a hello without a proof). */
#define AUTH_REQUIRED "link authentication required"
static const char k_auth_context[] = "microspec-link-hello-v1";

/* ---- HMAC-SHA256 (the link secret's proof): libsodium, ZeroMQ's own crypto library ---- */

void ms_link_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t msg_len, uint8_t out[32]) {
    MS_ASSERT(sodium_init() >= 0); /* idempotent; fails only when the system has no entropy source */
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key, key_len);
    crypto_auth_hmacsha256_update(&st, msg, msg_len);
    crypto_auth_hmacsha256_final(&st, out);
}

/* ---- link secret --------------------------------------------------------------- */

/* Reads opts.secret_file: a regular file only its owner can read, ≥ 16 bytes. */
static ms_status load_secret(ms_link *l, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        MS_FAIL(errno == ENOENT ? MS_ERR_NOT_FOUND : MS_ERR_IO, "link.secret_file %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) MS_FAIL(MS_ERR_INVALID, "link.secret_file %s: not a regular file", path);
    if (st.st_mode & 077)
        MS_FAIL(MS_ERR_INVALID, "link.secret_file %s: mode %03o lets others read it; chmod 600 it", path,
                (unsigned)(st.st_mode & 0777));
    char *data;
    size_t len;
    MS_TRY(ms_read_file(path, &data, &len));
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' ' || data[len - 1] == '\t'))
        len--;
    ms_status st2 = MS_OK;
    if (len < 16 || len > sizeof l->secret) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "link.secret_file %s: %zu bytes, expected 16..%zu", path, len,
                   sizeof l->secret);
        st2 = MS_ERR_INVALID;
    } else {
        memcpy(l->secret, data, len);
        l->secret_len = len;
    }
    memset(data, 0, len);
    free(data);
    return st2;
}

static ms_status new_nonce(uint8_t nonce[MS_WIRE_NONCE_BYTES]) {
    size_t got = 0;
    while (got < MS_WIRE_NONCE_BYTES) {
        ssize_t r = getrandom(nonce + got, MS_WIRE_NONCE_BYTES - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) MS_FAIL(MS_ERR_IO, "link: getrandom: %s", strerror(errno));
        got += (size_t)r;
    }
    if (nonce[0] == 0) nonce[0] = 1; /* all zero means "no challenge" on the wire */
    return MS_OK;
}

static void proof_of(const ms_link *l, const uint8_t nonce[MS_WIRE_NONCE_BYTES], uint8_t out[MS_WIRE_AUTH_BYTES]) {
    uint8_t msg[sizeof k_auth_context - 1 + MS_WIRE_NONCE_BYTES];
    memcpy(msg, k_auth_context, sizeof k_auth_context - 1);
    memcpy(msg + sizeof k_auth_context - 1, nonce, MS_WIRE_NONCE_BYTES);
    ms_link_hmac_sha256(l->secret, l->secret_len, msg, sizeof msg, out);
}

static bool bytes_equal_ct(const uint8_t *a, const uint8_t *b, size_t n) {
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++) d |= a[i] ^ b[i];
    return d == 0;
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* ---- CURVE admission (ZAP, RFC 27) ---------------------------------------- */

/* Answers the ZAP requests of the server socket: 200 for the configured
 * client public key, 400 otherwise. Runs until the context terminates. */
static void *zap_main(void *arg) {
    ms_link *l = arg;
    for (;;) {
        zmq_msg_t parts[8];
        int n = 0;
        int more = 1;
        while (more && n < 8) {
            zmq_msg_init(&parts[n]);
            if (zmq_msg_recv(&parts[n], l->zap_sock, 0) < 0) {
                for (int i = 0; i <= n; i++) zmq_msg_close(&parts[i]);
                return NULL; /* ETERM: the link is closing */
            }
            more = zmq_msg_more(&parts[n]);
            n++;
        }
        /* version, request id, domain, address, identity, mechanism, credentials... */
        bool ok = n >= 7 && zmq_msg_size(&parts[5]) == 5 && !memcmp(zmq_msg_data(&parts[5]), "CURVE", 5) &&
                  zmq_msg_size(&parts[6]) == 32 && !memcmp(zmq_msg_data(&parts[6]), l->client_key, 32);
        const char *code = ok ? "200" : "400", *text = ok ? "OK" : "client key not admitted";
        if (!ok) MS_LOG_WARN("link: refused a CURVE client with an unknown key");
        zmq_send(l->zap_sock, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(l->zap_sock, n > 1 ? zmq_msg_data(&parts[1]) : "", n > 1 ? zmq_msg_size(&parts[1]) : 0, ZMQ_SNDMORE);
        zmq_send(l->zap_sock, code, 3, ZMQ_SNDMORE);
        zmq_send(l->zap_sock, text, strlen(text), ZMQ_SNDMORE);
        zmq_send(l->zap_sock, "", 0, ZMQ_SNDMORE);
        zmq_send(l->zap_sock, "", 0, 0);
        for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
        while (more) { /* drain oversized requests */
            zmq_msg_t x;
            zmq_msg_init(&x);
            if (zmq_msg_recv(&x, l->zap_sock, 0) < 0) return NULL;
            more = zmq_msg_more(&x);
            zmq_msg_close(&x);
        }
    }
}

static bool z85_key_ok(const char *k) { return k && strlen(k) == 40; }

static ms_status setup_curve(ms_link *l) {
    const ms_link_opts *o = &l->o;
    if (!zmq_has("curve")) MS_FAIL(MS_ERR_UNSUPPORTED, "link: CURVE requested but this libzmq was built without it");
    if (!z85_key_ok(o->server_public) || (l->server && !z85_key_ok(o->server_secret)) ||
        !z85_key_ok(o->client_public) || (!l->server && !z85_key_ok(o->client_secret)))
        MS_FAIL(MS_ERR_INVALID, "link: CURVE keys must be 40-character Z85 strings");
    if (l->server) {
        if (!zmq_z85_decode(l->client_key, o->client_public))
            MS_FAIL(MS_ERR_INVALID, "link: client public key is not valid Z85");
        /* The ZAP handler must be bound before the server socket binds. */
        l->zap_sock = zmq_socket(l->ctx, ZMQ_REP);
        if (!l->zap_sock || zmq_bind(l->zap_sock, "inproc://zeromq.zap.01") != 0) MS_ZMQ_FAIL(MS_ERR_IO, "zap bind");
        if (pthread_create(&l->zap, NULL, zap_main, l) != 0) MS_FAIL(MS_ERR_INTERNAL, "link: cannot start ZAP thread");
        l->zap_running = true;
        int one = 1;
        if (zmq_setsockopt(l->sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
            zmq_setsockopt(l->sock, ZMQ_CURVE_SECRETKEY, o->server_secret, 41) != 0)
            MS_ZMQ_FAIL(MS_ERR_INVALID, "curve server keys");
    } else {
        if (zmq_setsockopt(l->sock, ZMQ_CURVE_SERVERKEY, o->server_public, 41) != 0 ||
            zmq_setsockopt(l->sock, ZMQ_CURVE_PUBLICKEY, o->client_public, 41) != 0 ||
            zmq_setsockopt(l->sock, ZMQ_CURVE_SECRETKEY, o->client_secret, 41) != 0)
            MS_ZMQ_FAIL(MS_ERR_INVALID, "curve client keys");
    }
    return MS_OK;
}

/* ---- bad input's log ---------------------------------------------------------- */

static void id_hex(const uint8_t *id, size_t n, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && i < BADLOG_ID && k + 3 <= cap; i++, k += 2) snprintf(out + k, cap - k, "%02x", id[i]);
    if (n == 0) snprintf(out, cap, "-");
}

/* One line for the messages left out, once BADLOG_SUMMARY_NS has passed since
 * the first of them (or now: force). */
static void badlog_summary(ms_link *l, bool force) {
    badlog *b = &l->bad;
    if (b->left_out == 0) return;
    const uint64_t now = ms_now_ns();
    if (!force && now - b->first_ns < BADLOG_SUMMARY_NS) return;
    char line[512];
    int k = snprintf(line, sizeof line, "link: %lld bad message(s) in the last %.0f s not logged one by one:",
                     (long long)b->left_out, (double)(now - b->first_ns) * 1e-9);
    for (int i = 0; i < b->n_peer && k > 0 && (size_t)k < sizeof line; i++) {
        char hex[2 * BADLOG_ID + 1];
        id_hex(b->peer[i].id, b->peer[i].len, hex, sizeof hex);
        k += snprintf(line + k, sizeof line - (size_t)k, "%s peer %s: %lld", i ? "," : "", hex, (long long)b->peer[i].n);
    }
    if (b->others > 0 && k > 0 && (size_t)k < sizeof line)
        snprintf(line + k, sizeof line - (size_t)k, ", other peers: %lld", (long long)b->others);
    MS_LOG_WARN("%s", line);
    b->left_out = b->others = 0;
    b->n_peer = 0;
}

/* A bad message from the sender of the last one (its routing id in last_id on
 * the target): counted, and logged at `level` while the budget lasts. */
__attribute__((format(printf, 4, 5))) static void bad_input(ms_link *l, ms_log_level level, int line, const char *fmt,
                                                           ...) {
    badlog *b = &l->bad;
    const uint64_t now = ms_now_ns();
    badlog_summary(l, false);
    uint64_t back = (now - b->refill_ns) / BADLOG_REFILL_NS;
    if (back > 0) {
        b->tokens = b->tokens + (int64_t)back > BADLOG_BURST ? BADLOG_BURST : b->tokens + (int64_t)back;
        b->refill_ns += back * BADLOG_REFILL_NS;
    }
    if (b->tokens == BADLOG_BURST) b->refill_ns = now;
    const uint8_t *id = l->server ? l->last_id : NULL;
    size_t id_len = l->server ? (l->last_len < BADLOG_ID ? l->last_len : BADLOG_ID) : 0;
    if (b->tokens > 0) {
        b->tokens--;
        char msg[640], hex[2 * BADLOG_ID + 1];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        id_hex(id, id_len, hex, sizeof hex);
        ms_log_msg(level, __FILE__, line, "%s (peer %s)%s", msg, l->server ? hex : "target",
                   b->tokens == 0 ? "; more bad messages are counted and summarised" : "");
        return;
    }
    if (b->left_out++ == 0) b->first_ns = now;
    for (int i = 0; i < b->n_peer; i++)
        if (b->peer[i].len == id_len && !memcmp(b->peer[i].id, id, id_len)) {
            b->peer[i].n++;
            return;
        }
    if (b->n_peer < BADLOG_PEERS) {
        if (id_len) memcpy(b->peer[b->n_peer].id, id, id_len);
        b->peer[b->n_peer].len = id_len;
        b->peer[b->n_peer++].n = 1;
        return;
    }
    b->others++;
}

/* ---- open / close ----------------------------------------------------------- */

static ms_status link_open(const ms_link_opts *o, bool server, ms_link **out) {
    *out = NULL;
    if (!o->endpoint || (strncmp(o->endpoint, "tcp://", 6) && strncmp(o->endpoint, "ipc://", 6)))
        MS_FAIL(MS_ERR_INVALID, "link: endpoint '%s' must start with tcp:// or ipc://", o->endpoint ? o->endpoint : "");
    ms_link *l = ms_calloc(1, sizeof *l);
    if (!l) return MS_ERR_NOMEM;
    l->server = server;
    l->o = *o;
    snprintf(l->endpoint, sizeof l->endpoint, "%s", o->endpoint);
    l->o.endpoint = l->endpoint;
    if (l->o.deadline_ms <= 0) l->o.deadline_ms = 2000;
    if (l->o.heartbeat_ms <= 0) l->o.heartbeat_ms = 500;
    if (l->o.max_message_bytes <= 0) l->o.max_message_bytes = 64ll << 20;
    l->o.secret_file = NULL; /* read here, not kept */
    l->bad.tokens = BADLOG_BURST;
    l->bad.refill_ns = ms_now_ns();
    ms_status st = ms_wire_arena_new(o->max_prompt, &l->arena);
    if (st < 0) goto fail;
    if (o->secret_file && o->secret_file[0] && (st = load_secret(l, o->secret_file)) < 0) goto fail;
    if (server && l->secret_len && (st = new_nonce(l->nonce)) < 0) goto fail;
    l->ctx = zmq_ctx_new();
    l->sock = l->ctx ? zmq_socket(l->ctx, server ? ZMQ_ROUTER : ZMQ_DEALER) : NULL;
    if (!l->sock) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "zmq socket: %s", zmq_strerror(zmq_errno()));
        st = MS_ERR_IO;
        goto fail;
    }
    int zero = 0, one = 1;
    int64_t maxmsg = l->o.max_message_bytes;
    int reconnect = 200;
    zmq_setsockopt(l->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(l->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(l->sock, ZMQ_RECONNECT_IVL, &reconnect, sizeof reconnect);
    zmq_setsockopt(l->sock, ZMQ_SNDTIMEO, &l->o.deadline_ms, sizeof l->o.deadline_ms);
    if (server) zmq_setsockopt(l->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    if (o->curve && (st = setup_curve(l)) < 0) goto fail;
    {
        char mon[64];
        snprintf(mon, sizeof mon, "inproc://ms-link-monitor-%p", (void *)l);
        if (zmq_socket_monitor(l->sock, mon, ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0) {
            l->monitor = zmq_socket(l->ctx, ZMQ_PAIR);
            if (l->monitor && zmq_connect(l->monitor, mon) != 0) {
                zmq_close(l->monitor);
                l->monitor = NULL;
            }
        }
        if (!l->monitor) MS_LOG_DEBUG("link: no socket monitor; disconnects will not be logged");
    }
    if ((server ? zmq_bind(l->sock, l->endpoint) : zmq_connect(l->sock, l->endpoint)) != 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "link: cannot %s %s: %s", server ? "bind" : "connect",
                   l->endpoint, zmq_strerror(zmq_errno()));
        st = MS_ERR_IO;
        goto fail;
    }
    MS_LOG_INFO("link: %s %s%s%s", server ? "listening on" : "connecting to", l->endpoint,
                o->curve ? " (CURVE)" : "", l->secret_len ? " (link secret)" : "");
    *out = l;
    return MS_OK;
fail:
    ms_link_close(&l);
    return st;
}

ms_status ms_link_bind(const ms_link_opts *o, ms_link **out) { return link_open(o, true, out); }
ms_status ms_link_connect(const ms_link_opts *o, ms_link **out) { return link_open(o, false, out); }

void ms_link_close(ms_link **pl) {
    ms_link *l = *pl;
    if (!l) return;
    badlog_summary(l, true);
    if (l->monitor) zmq_close(l->monitor);
    if (l->sock) zmq_close(l->sock);
    if (l->ctx) zmq_ctx_shutdown(l->ctx); /* wakes the ZAP thread with ETERM */
    if (l->zap_running) {
        pthread_join(l->zap, NULL);
    }
    if (l->zap_sock) zmq_close(l->zap_sock);
    if (l->ctx) zmq_ctx_term(l->ctx);
    ms_wire_buf_free(&l->ctrl);
    ms_wire_arena_free(&l->arena);
    free(l->feat);
    memset(l->secret, 0, sizeof l->secret);
    free(l);
    *pl = NULL;
}

/* ---- send ------------------------------------------------------------------- */

void ms_link_set_xfer(ms_link *l, ms_xfer *x) { l->xfer = x; }

/* With a transport: a copy of m whose features are stamped with the xfer's
 * seq and, when the transport carries them, announced instead of sent. */
static ms_status xfer_prepare(ms_link *l, const ms_wire_msg *m, ms_wire_msg *c, bool *pending) {
    *pending = false;
    const float *feat = m->type == MS_WIRE_BEGIN ? m->u.begin.features
                        : m->type == MS_WIRE_VERIFY ? m->u.verify.features
                                                    : NULL;
    int64_t rows = m->type == MS_WIRE_BEGIN ? m->u.begin.n_prompt : m->u.verify.n_path;
    int64_t dim = m->type == MS_WIRE_BEGIN ? m->u.begin.feat_dim : m->u.verify.feat_dim;
    *c = *m;
    ms_wire_tensor ann;
    /* the width is checked before anything moves: an NCCL send cannot be taken back */
    MS_TRY(ms_xfer_check_width(l->xfer, dim));
    MS_TRY(ms_xfer_send(l->xfer, feat, false, rows, &ann, &c->tensor_seq));
    if (ann.via != MS_WIRE_VIA_HOST) {
        c->tensor = ann;
        if (c->type == MS_WIRE_BEGIN) c->u.begin.features = NULL;
        else c->u.verify.features = NULL;
        *pending = true;
    }
    return MS_OK;
}

/* flags: 0, or ZMQ_DONTWAIT for replies to input nobody vouched for (a peer
 * that floods and never reads must not hold this thread for the send
 * deadline at each reply; a reply that does not fit is dropped). */
static ms_status send_to(ms_link *l, const uint8_t *id, size_t id_len, const ms_wire_msg *m, int flags) {
    const void *tensor = NULL;
    size_t tensor_bytes = 0;
    ms_wire_msg copy;
    copy.type = (ms_wire_type)0; /* unused unless prepared below */
    bool pending = false;
    const float *feat = m->type == MS_WIRE_BEGIN ? m->u.begin.features
                        : m->type == MS_WIRE_VERIFY ? m->u.verify.features
                                                    : NULL;
    if (feat && l->xfer) {
        MS_TRY(xfer_prepare(l, m, &copy, &pending));
        m = &copy;
    } else if (feat) { /* no transport: frame 1, still numbered so the receiver can order them */
        copy = *m;
        copy.tensor_seq = ++l->tensor_seq;
        m = &copy;
    }
    ms_status st = ms_wire_encode(m, &l->ctrl, &tensor, &tensor_bytes);
    if (st < 0) {
        if (pending) ms_xfer_send_finish(l->xfer); /* the peer never hears of it: NCCL times out, drops */
        return st;
    }
    if (l->server && zmq_send(l->sock, id, id_len, ZMQ_SNDMORE | flags) < 0) goto fail;
    if (zmq_send(l->sock, l->ctrl.data, l->ctrl.len, (tensor ? ZMQ_SNDMORE : 0) | flags) < 0) goto fail;
    if (tensor && zmq_send(l->sock, tensor, tensor_bytes, flags) < 0) goto fail;
    l->counters.sent++;
    if (pending) return ms_xfer_send_finish(l->xfer); /* NCCL: the send completes as the peer receives */
    return MS_OK;
fail:
    if (pending) ms_xfer_send_finish(l->xfer);
    /* EHOSTUNREACH (router: peer gone) or EAGAIN (send deadline): the
     * caller decides how loud this is. */
    MS_LOG_DEBUG("link: cannot send %s: %s", ms_wire_type_name(m->type), zmq_strerror(zmq_errno()));
    return MS_ERR_PEER;
}

ms_status ms_link_send(ms_link *l, const ms_wire_msg *m) {
    if (l->server && !l->have_peer) MS_FAIL(MS_ERR_PEER, "link: no draft connected");
    if (!l->server && m->type == MS_WIRE_HELLO) { /* kept to answer a challenge with */
        l->hello = m->u.hello;
        l->have_hello = true;
    }
    return send_to(l, l->peer_id, l->peer_len, m, 0);
}

static void send_error(ms_link *l, const uint8_t *id, size_t id_len, const ms_wire_msg *about, ms_status code,
                       const char *text) {
    ms_wire_msg e = {.type = MS_WIRE_ERROR};
    if (about) {
        e.request_id = about->request_id;
        e.round = about->round;
    }
    e.u.error.code = code;
    snprintf(e.u.error.message, sizeof e.u.error.message, "%s", text);
    if (send_to(l, id, id_len, &e, ZMQ_DONTWAIT) < 0) MS_LOG_DEBUG("link: error reply not delivered");
}

void ms_link_tick(ms_link *l) {
    badlog_summary(l, false);
    uint64_t now = ms_now_ns();
    if ((l->server && !l->have_peer) || now - l->last_sent_hb_ns < (uint64_t)l->o.heartbeat_ms * 1000000ull) return;
    l->last_sent_hb_ns = now;
    ms_wire_msg hb = {.type = MS_WIRE_HEARTBEAT};
    hb.u.heartbeat.seq = ++l->hb_seq;
    hb.u.heartbeat.t_ns = now;
    if (send_to(l, l->peer_id, l->peer_len, &hb, 0) < 0 && l->server) {
        MS_LOG_WARN("link: draft unreachable; dropping it");
        l->have_peer = false;
    }
}

/* Ping (ms_wire.h): a ping is answered with this build and its seq; an
 * answer's build is logged. A different build is never refused here. */
#ifndef MS_BUILD_ID
#define MS_BUILD_ID "unknown"
#endif
static void send_ping(ms_link *l, uint64_t seq, bool reply) {
    ms_wire_msg p = {.type = MS_WIRE_PING};
    snprintf(p.u.ping.build, sizeof p.u.ping.build, "%s", MS_BUILD_ID);
    p.u.ping.seq = seq;
    p.u.ping.reply = reply;
    if (send_to(l, l->peer_id, l->peer_len, &p, ZMQ_DONTWAIT) < 0) MS_LOG_DEBUG("link: ping not delivered");
}

static void on_ping(ms_link *l, const ms_wire_ping *p) {
    if (p->reply)
        MS_LOG_INFO("link: the %s runs build %s (ping %llu)", l->server ? "draft" : "target", p->build,
                    (unsigned long long)p->seq);
    else
        send_ping(l, p->seq, true);
}

/* ---- receive ----------------------------------------------------------------- */

/* Log what the monitor saw: ZeroMQ closes a connection that sends a message
 * over ZMQ_MAXMSGSIZE (or fails its handshake) without telling the socket.
 * True when a connection closed. */
static bool drain_monitor(ms_link *l) {
    bool closed = false;
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, l->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return closed;
        }
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= 2) memcpy(&event, zmq_msg_data(&ev), 2);
        zmq_msg_close(&ev);
        zmq_msg_init(&addr);
        zmq_msg_recv(&addr, l->monitor, 0);
        zmq_msg_close(&addr);
        closed |= event == ZMQ_EVENT_DISCONNECTED;
        if (event == ZMQ_EVENT_DISCONNECTED)
            MS_LOG_WARN("link: a peer connection closed (it went away, or sent a message over %lld bytes)",
                        (long long)l->o.max_message_bytes);
        else
            MS_LOG_WARN("link: a peer failed the %s handshake", l->o.curve ? "CURVE" : "ZMTP");
    }
}

/* One multipart message: [identity] ctrl [tensor]. Extra parts make it invalid. */
static ms_status recv_frames(ms_link *l, zmq_msg_t *id, zmq_msg_t *ctrl, zmq_msg_t *tensor, bool *has_tensor,
                             bool *extra) {
    *has_tensor = *extra = false;
    if (l->server && zmq_msg_recv(id, l->sock, ZMQ_DONTWAIT) < 0) return MS_ERR_TIMEOUT;
    if (zmq_msg_recv(ctrl, l->sock, l->server ? 0 : ZMQ_DONTWAIT) < 0) return MS_ERR_TIMEOUT;
    if (zmq_msg_more(ctrl)) {
        zmq_msg_recv(tensor, l->sock, 0);
        *has_tensor = true;
        while (zmq_msg_more(tensor)) {
            zmq_msg_t x;
            zmq_msg_init(&x);
            zmq_msg_recv(&x, l->sock, 0);
            int more = zmq_msg_more(&x);
            zmq_msg_close(&x);
            *extra = true;
            if (!more) break;
        }
    }
    return MS_OK;
}

/* A begin/verify's tensor: checked against the transport (or, without one,
 * refused when it did not come as frame 1) and fetched when it travelled by
 * the transport. Refusals leave their reason in l->xfer_err. */
static ms_status xfer_receive(ms_link *l, ms_wire_msg *m) {
    const float **features = m->type == MS_WIRE_BEGIN ? &m->u.begin.features : &m->u.verify.features;
    bool present = *features || m->tensor.via != MS_WIRE_VIA_HOST;
    if (!present) return MS_OK;
    if (!l->xfer) {
        if (m->tensor.via == MS_WIRE_VIA_HOST) return MS_OK;
        snprintf(l->xfer_err, sizeof l->xfer_err, "tensor via %s was not negotiated (this link has no transport)",
                 m->tensor.via == MS_WIRE_VIA_IPC ? "ipc" : "nccl");
        MS_LOG_WARN("link: refused a tensor: %s", l->xfer_err);
        return MS_ERR_PEER;
    }
    float *dst = NULL;
    if (m->tensor.via != MS_WIRE_VIA_HOST) {
        ms_status st = ms_xfer_check(l->xfer, &m->tensor, m->tensor_seq);
        if (st < 0) {
            snprintf(l->xfer_err, sizeof l->xfer_err, "%s", ms_xfer_error(l->xfer));
            return st;
        }
        size_t n = (size_t)m->tensor.rows * (size_t)m->tensor.cols; /* bounded by the check */
        if (n > l->feat_cap) {
            float *p = ms_malloc(n * sizeof(float));
            if (!p) return MS_ERR_NOMEM;
            free(l->feat);
            l->feat = p;
            l->feat_cap = n;
        }
        dst = l->feat;
    }
    ms_status st = ms_xfer_recv(l->xfer, &m->tensor, m->tensor_seq, dst);
    if (st < 0) {
        snprintf(l->xfer_err, sizeof l->xfer_err, "%s", ms_xfer_error(l->xfer));
        return st;
    }
    if (dst) *features = dst;
    return MS_OK;
}

/* Target: the accepted draft is still there — its connection is up (a
 * heartbeat to it can be queued) and it was heard within 3 heartbeat periods
 * of the link being read (a target that computed for a while has not read
 * the heartbeats waiting for it: silence counts only while it listened). */
static bool peer_present(ms_link *l) {
    if (!l->have_peer) return false;
    ms_wire_msg hb = {.type = MS_WIRE_HEARTBEAT};
    hb.u.heartbeat.seq = ++l->hb_seq;
    hb.u.heartbeat.t_ns = ms_now_ns();
    if (send_to(l, l->peer_id, l->peer_len, &hb, 0) < 0) {
        MS_LOG_WARN("link: the accepted draft's connection is gone; dropping it");
        l->have_peer = false;
        return false;
    }
    const uint64_t now = ms_now_ns(), window = 3ull * (uint64_t)l->o.heartbeat_ms * 1000000ull;
    return now - l->last_heard_ns < window || now - l->listening_since_ns < window;
}

/* Target: a hello from a peer other than the accepted draft. Without a valid
 * proof of the link secret it is answered with a challenge; while a healthy
 * draft is in place, with an error. True: the caller may judge it. */
static bool hello_admissible(ms_link *l, const ms_wire_hello *h) {
    if (l->secret_len) {
        bool none = all_zero(h->auth, MS_WIRE_AUTH_BYTES);
        uint8_t want[MS_WIRE_AUTH_BYTES];
        proof_of(l, l->nonce, want);
        if (none || !bytes_equal_ct(want, h->auth, MS_WIRE_AUTH_BYTES)) {
            ms_wire_msg ack = {.type = MS_WIRE_HELLO_ACK};
            snprintf(ack.u.ack.reason, sizeof ack.u.ack.reason, "%s",
                     none ? AUTH_REQUIRED ": answer the nonce with a proof of the cluster's link.secret_file"
                          : "link authentication failed: the proof does not match this target's link.secret_file");
            memcpy(ack.u.ack.nonce, l->nonce, MS_WIRE_NONCE_BYTES);
            l->counters.auth_refused++;
            if (send_to(l, l->last_id, l->last_len, &ack, ZMQ_DONTWAIT) < 0) MS_LOG_DEBUG("link: challenge not delivered");
            /* every draft's first hello comes without a proof: only a wrong one is news */
            if (none) MS_LOG_DEBUG("link: challenged a hello (pid %lld) without a proof of the link secret", (long long)h->pid);
            else bad_input(l, MS_LOG_WARN, __LINE__, "link: refused a hello (pid %lld): wrong proof of the link secret",
                           (long long)h->pid);
            return false;
        }
        /* a proof is good once: the next hello must answer a new nonce */
        if (new_nonce(l->nonce) < 0) return false;
    }
    if (peer_present(l)) {
        char text[256];
        snprintf(text, sizeof text,
                 "a draft is already connected and alive (heard %lld ms ago): this target admits a new draft only "
                 "when it is down",
                 (long long)((ms_now_ns() - l->last_heard_ns) / 1000000ull));
        l->counters.busy_refused++;
        send_error(l, l->last_id, l->last_len, NULL, MS_ERR_PEER, text);
        bad_input(l, MS_LOG_WARN, __LINE__, "link: refused a second draft (pid %lld): the accepted one is alive",
                  (long long)h->pid);
        return false;
    }
    return true;
}

/* Draft: a refused hello_ack with a nonce is a challenge; with a secret, the
 * link answers it with the last hello and its proof. True: answered (the
 * caller does not see the ack). */
static bool answer_challenge(ms_link *l, const ms_wire_hello_ack *a) {
    if (a->accepted || all_zero(a->nonce, MS_WIRE_NONCE_BYTES)) {
        l->challenges = 0;
        return false;
    }
    if (!l->secret_len || !l->have_hello) return false; /* the caller reports the refusal */
    /* A challenge of the nonce just proved: the answer to another of our hellos that waited
     * in the queue (a draft that starts before its target sends one every
     * reconnect interval, and all arrive at once). The proof already sent
     * answers it; a second proof of a spent nonce would be refused, and a
     * few of those made the draft give up (seen with cluster/launch.sh when
     * the target's model load took seconds). */
    if (!strncmp(a->reason, AUTH_REQUIRED, strlen(AUTH_REQUIRED)) && !memcmp(a->nonce, l->answered, MS_WIRE_NONCE_BYTES)) {
        MS_LOG_DEBUG("link: a repeated challenge, already answered");
        return true;
    }
    if (l->challenges >= LINK_CHALLENGES_MAX) {
        l->challenges = 0;
        return false; /* refused again and again: another secret */
    }
    l->challenges++;
    ms_wire_msg h = {.type = MS_WIRE_HELLO};
    h.u.hello = l->hello;
    proof_of(l, a->nonce, h.u.hello.auth);
    memcpy(l->answered, a->nonce, MS_WIRE_NONCE_BYTES);
    if (send_to(l, NULL, 0, &h, 0) < 0) MS_LOG_DEBUG("link: answer to the challenge not sent");
    else MS_LOG_DEBUG("link: answered the target's challenge");
    return true;
}

ms_status ms_link_recv(ms_link *l, int timeout_ms, ms_wire_msg *out) {
    if (timeout_ms < 0) timeout_ms = l->o.deadline_ms;
    {
        const uint64_t now = ms_now_ns();
        if (now - l->last_recv_ns > (uint64_t)l->o.heartbeat_ms * 1000000ull) l->listening_since_ns = now;
    }
    const uint64_t end = ms_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    /* Target: a draft found gone while we wait (its heartbeat cannot be
     * queued: the connection closed, e.g. the process was killed) ends the
     * wait now, not at its deadline — the caller goes on without it. */
    const bool had_peer = l->server && l->have_peer;
    for (;;) {
        ms_link_tick(l);
        if (had_peer && !l->have_peer) return MS_ERR_PEER;
        uint64_t now = ms_now_ns();
        l->last_recv_ns = now;
        long wait_ms = now >= end ? 0 : (long)((end - now) / 1000000ull);
        if (wait_ms > l->o.heartbeat_ms) wait_ms = l->o.heartbeat_ms;
        zmq_pollitem_t pi[2] = {{.socket = l->sock, .events = ZMQ_POLLIN},
                                {.socket = l->monitor, .events = ZMQ_POLLIN}};
        int r = zmq_poll(pi, l->monitor ? 2 : 1, wait_ms);
        l->last_recv_ns = ms_now_ns();
        if (r < 0 && zmq_errno() != EINTR) MS_ZMQ_FAIL(MS_ERR_IO, "poll");
        if (l->monitor && (pi[1].revents & ZMQ_POLLIN)) {
            /* A closed connection may be the draft's: probe it with the next tick. */
            if (drain_monitor(l)) l->last_sent_hb_ns = 0;
        }
        if (r <= 0 || !(pi[0].revents & ZMQ_POLLIN)) {
            if (ms_now_ns() >= end) return MS_ERR_TIMEOUT;
            continue;
        }
        zmq_msg_t id, ctrl, tensor;
        zmq_msg_init(&id);
        zmq_msg_init(&ctrl);
        zmq_msg_init(&tensor);
        bool has_tensor, extra;
        ms_status st = recv_frames(l, &id, &ctrl, &tensor, &has_tensor, &extra);
        if (st < 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&ctrl);
            zmq_msg_close(&tensor);
            continue;
        }
        if (l->server) {
            l->last_len = zmq_msg_size(&id) < sizeof l->last_id ? zmq_msg_size(&id) : sizeof l->last_id;
            memcpy(l->last_id, zmq_msg_data(&id), l->last_len);
        }
        if (extra) {
            st = MS_ERR_FORMAT;
            bad_input(l, MS_LOG_WARN, __LINE__, "link: dropped a message of more than two frames");
        } else {
            st = ms_wire_decode(zmq_msg_data(&ctrl), zmq_msg_size(&ctrl), has_tensor ? zmq_msg_data(&tensor) : NULL,
                                has_tensor ? zmq_msg_size(&tensor) : 0, has_tensor, l->arena, out);
        }
        zmq_msg_close(&id);
        zmq_msg_close(&ctrl);
        zmq_msg_close(&tensor);
        if (st < 0) {
            l->counters.decode_errors++;
            if (!extra) bad_input(l, MS_LOG_ERROR, __LINE__, "wire: %s", ms_wire_arena_error(l->arena));
            send_error(l, l->last_id, l->last_len, NULL, st,
                       extra ? "message has more than two frames" : ms_wire_arena_error(l->arena));
            return st == MS_ERR_NOMEM ? st : MS_ERR_FORMAT;
        }
        bool from_peer = !l->server ||
                         (l->have_peer && l->last_len == l->peer_len && !memcmp(l->last_id, l->peer_id, l->peer_len));
        if (out->type == MS_WIRE_HELLO && l->server) {
            if (!from_peer && !hello_admissible(l, &out->u.hello)) continue; /* answered here */
            l->last_offer = out->u.hello.xfer;
            return MS_OK; /* the caller decides */
        }
        if (!l->server && out->type == MS_WIRE_HELLO_ACK && answer_challenge(l, &out->u.ack)) continue;
        if (!from_peer) {
            send_error(l, l->last_id, l->last_len, out, MS_ERR_PEER, "not connected: send a hello first");
            /* A draft's heartbeats before its hello is accepted are routine. */
            if (out->type == MS_WIRE_HEARTBEAT) MS_LOG_DEBUG("link: dropped heartbeat from an unknown peer");
            else bad_input(l, MS_LOG_WARN, __LINE__, "link: dropped %s from an unknown peer", ms_wire_type_name(out->type));
            continue;
        }
        l->last_heard_ns = ms_now_ns();
        l->counters.received++;
        if (out->type == MS_WIRE_HEARTBEAT) {
            l->counters.heartbeats++;
            continue;
        }
        if (out->type == MS_WIRE_PING) {
            on_ping(l, &out->u.ping);
            continue;
        }
        if (!l->server && l->xfer && out->type == MS_WIRE_HELLO_ACK && out->u.ack.accepted &&
            ms_xfer_adopt(l->xfer, &out->u.ack) < 0)
            MS_LOG_WARN("link: tensor transport not adopted; features go as host frames");
        if ((out->type == MS_WIRE_BEGIN || out->type == MS_WIRE_VERIFY) && (st = xfer_receive(l, out)) < 0) {
            l->counters.decode_errors++;
            send_error(l, l->last_id, l->last_len, out, MS_ERR_FORMAT, l->xfer_err);
            return st == MS_ERR_NOMEM ? st : MS_ERR_FORMAT;
        }
        return MS_OK;
    }
}

ms_status ms_link_accept_peer(ms_link *l, bool accept, const char *reason) {
    MS_ASSERT(l->server);
    ms_wire_msg ack = {.type = MS_WIRE_HELLO_ACK};
    ack.u.ack.accepted = accept;
    snprintf(ack.u.ack.reason, sizeof ack.u.ack.reason, "%s", reason ? reason : "");
    if (accept) {
        memcpy(l->peer_id, l->last_id, l->last_len);
        l->peer_len = l->last_len;
        l->have_peer = true;
        l->last_heard_ns = ms_now_ns();
        if (l->xfer) MS_TRY(ms_xfer_accept(l->xfer, &l->last_offer, &ack.u.ack));
    }
    MS_TRY(send_to(l, l->last_id, l->last_len, &ack, 0));
    /* NCCL: the draft joins the communicator when it reads the ack. */
    if (accept && l->xfer && ms_xfer_connect(l->xfer) < 0)
        MS_LOG_WARN("link: tensor transport not connected; features go as host frames");
    if (accept) send_ping(l, ++l->hb_seq, false); /* the handshake is done: ask the draft's build, for the log */
    return MS_OK;
}

void ms_link_drop_peer(ms_link *l) { l->have_peer = false; }

bool ms_link_last_is_peer(const ms_link *l) {
    return l->server && l->have_peer && l->last_len == l->peer_len && !memcmp(l->last_id, l->peer_id, l->peer_len);
}

bool ms_link_has_peer(const ms_link *l) { return !l->server || l->have_peer; }

bool ms_link_peer_alive(const ms_link *l) {
    if (l->server && !l->have_peer) return false;
    return l->last_heard_ns && ms_now_ns() - l->last_heard_ns < 3ull * (uint64_t)l->o.heartbeat_ms * 1000000ull;
}

ms_link_counters ms_link_counters_get(const ms_link *l) { return l->counters; }

ms_status ms_link_fingerprint_tokenizer(const char *dir, char out[17]) {
    if (ms_gguf_is_gguf(dir)) return ms_link_fingerprint_gguf_tokens(dir, out);
    const char *names[] = {"tokenizer.json", "tokenizer.bin"};
    for (int i = 0; i < 2; i++) {
        char *p = ms_path_join(dir, names[i]);
        if (!p) return MS_ERR_NOMEM;
        bool ok = ms_file_exists(p);
        ms_status s = ok ? ms_link_fingerprint_file(p, out) : MS_OK;
        free(p);
        if (ok) return s;
    }
    MS_FAIL(MS_ERR_NOT_FOUND, "%s: no tokenizer.json or tokenizer.bin to fingerprint", dir);
}

ms_status ms_link_fingerprint_file(const char *path, char out[17]) {
    char *data;
    size_t len;
    MS_TRY(ms_read_file(path, &data, &len));
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)data[i];
        h *= 1099511628211ull;
    }
    free(data);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return MS_OK;
}
