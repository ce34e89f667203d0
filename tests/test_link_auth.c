/* test_link_auth — who may be the target's draft (protocol/ms_link.h), with
 * real ms_link ends over an ipc:// endpoint in one process:
 *   1. HMAC-SHA256 against RFC 4231 (cases 1, 2, 6, 7) and against Python's
 *      hmac module at the padding boundaries (55, 56, 64, 119, 120 bytes);
 *   2. link.secret_file is refused when missing, readable by others or short;
 *   3. with a secret: a hello without proof gets a refused hello_ack with a
 *      nonce and never reaches the caller; a draft with another secret is
 *      refused after its answered challenges; a draft with the secret is
 *      admitted after answering; a replayed proof (the consumed nonce, as a
 *      sniffer would send it) is refused;
 *   4. a second draft with the secret does not evict the healthy first: it
 *      gets an error reply (MS_ERR_PEER) and the first stays the peer; it is
 *      admitted once the first closes its connection;
 *   5. without a secret: the same refusal of a second draft, and admission
 *      once the first stays silent for 3 heartbeat periods;
 *   6. a flood of undecodable frames from a stranger without the secret (issue
 *      35): every frame counted and answered, the log a few lines (the first
 *      ones, then one summary naming the peer with the rest), the pump never
 *      held by a stranger who does not read its replies, and a draft with the
 *      secret admitted after it.
 * Waits are bounded polls. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "ms_link.h"
#include "test_fs.h"

#include "ms_check.h"

/* ---- 1. HMAC-SHA256 ---------------------------------------------------------- */

static void hex_of(const uint8_t *p, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", p[i]);
}

static void expect_hmac(const uint8_t *key, size_t kl, const uint8_t *msg, size_t ml, const char *want, const char *what) {
    uint8_t mac[32];
    char hex[65];
    ms_link_hmac_sha256(key, kl, msg, ml, mac);
    hex_of(mac, 32, hex);
    CHECK(!strcmp(hex, want), "%s: %s, expected %s", what, hex, want);
}

static void test_hmac(void) {
    uint8_t k0b[20], kaa[131], k64[64], msg[120];
    memset(k0b, 0x0b, sizeof k0b);
    memset(kaa, 0xaa, sizeof kaa);
    memset(k64, 'k', sizeof k64);
    for (int i = 0; i < 120; i++) msg[i] = (uint8_t)i;
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    const char *m7 = "This is a test using a larger than block-size key and a larger than block-size data. The key needs "
                     "to be hashed before being used by the HMAC algorithm.";
    expect_hmac(k0b, 20, (const uint8_t *)"Hi There", 8,
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", "RFC 4231 case 1");
    expect_hmac((const uint8_t *)"Jefe", 4, (const uint8_t *)"what do ya want for nothing?", 28,
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", "RFC 4231 case 2");
    expect_hmac(kaa, 131, (const uint8_t *)m6, strlen(m6),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", "RFC 4231 case 6");
    expect_hmac(kaa, 131, (const uint8_t *)m7, strlen(m7),
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", "RFC 4231 case 7");
    /* python3: hmac.new(b'k'*64, bytes(range(n)), hashlib.sha256).hexdigest() */
    static const struct {
        size_t n;
        const char *hex;
    } py[] = {{55, "b76cff732b8ba577f730ddd77ccb72e3a108d1b4d39d7edaafa41514acdd99db"},
              {56, "4091a62835b57595df29d377eaf0e943a033ff1040d92080e85b5c3a1c2b2c23"},
              {64, "dbeb61d0ac6378c092809249a8d2d5d71a5fc6928aa5417282b18af18d643b8f"},
              {119, "76353f9a43f92b8ad5a1199db1439810f9bdebc8e176703231f91f40cb17acb8"},
              {120, "29accb1d6853137ceef4f0d45a73be48bdc53cf4a6eeb243cec1f89572f719c0"}};
    for (size_t i = 0; i < sizeof py / sizeof py[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "python hmac, %zu-byte message", py[i].n);
        expect_hmac(k64, 64, msg, py[i].n, py[i].hex, what);
    }
}

/* ---- helpers ------------------------------------------------------------------ */

static const char SECRET[] = "0123456789abcdef0123456789abcdef-test-secret";

static void write_file(const char *path, const char *text, mode_t mode) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static ms_wire_msg hello_of(int64_t pid) {
    ms_wire_msg h = {.type = MS_WIRE_HELLO};
    h.u.hello.role = MS_WIRE_ROLE_DRAFT;
    snprintf(h.u.hello.kind, sizeof h.u.hello.kind, "lm");
    snprintf(h.u.hello.tok_fp, sizeof h.u.hello.tok_fp, "00112233aabbccdd");
    h.u.hello.vocab = 512;
    h.u.hello.hidden = 64;
    h.u.hello.pid = pid;
    return h;
}

/* The target's side for a moment: every hello that reaches the caller is
 * accepted (the node's own checks are not under test here). Returns how many
 * reached it. */
static int serve(ms_link *t, int ms) {
    int n = 0;
    ms_wire_msg m;
    ms_status st = ms_link_recv(t, ms, &m);
    if (st == MS_OK && m.type == MS_WIRE_HELLO) {
        n++;
        CHECK(ms_link_accept_peer(t, true, "") == MS_OK, "accept");
    }
    return n;
}

/* Alternate the target and one draft until the draft's recv returns a
 * message other than a heartbeat (bounded). *reached counts hellos the
 * target's caller saw. MS_ERR_TIMEOUT when nothing came. */
static ms_status exchange(ms_link *t, ms_link *d, ms_wire_msg *out, int *reached) {
    for (int i = 0; i < 100; i++) {
        *reached += serve(t, 20);
        ms_status st = ms_link_recv(d, 20, out);
        /* the answer to a not yet admitted draft's heartbeats is routine */
        if (st == MS_OK && out->type == MS_WIRE_ERROR && strstr(out->u.error.message, "not connected")) continue;
        if (st != MS_ERR_TIMEOUT) return st;
    }
    return MS_ERR_TIMEOUT;
}

static bool nonzero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return true;
    return false;
}

/* ---- 2. the secret file ---------------------------------------------------------- */

static void test_secret_file(const char *dir) {
    char ep[600], path[600];
    snprintf(ep, sizeof ep, "ipc://%s/bad.sock", dir);
    ms_link_opts o = {.endpoint = ep, .heartbeat_ms = 200, .secret_file = path};
    ms_link *l = NULL;
    snprintf(path, sizeof path, "%s/absent.secret", dir);
    CHECK(ms_link_bind(&o, &l) == MS_ERR_NOT_FOUND && !l, "a missing secret file is refused");
    snprintf(path, sizeof path, "%s/open.secret", dir);
    write_file(path, SECRET, 0644);
    CHECK(ms_link_bind(&o, &l) == MS_ERR_INVALID && !l, "a secret file others may read is refused");
    snprintf(path, sizeof path, "%s/short.secret", dir);
    write_file(path, "short-secret\n", 0600);
    CHECK(ms_link_connect(&o, &l) == MS_ERR_INVALID && !l, "a secret of 12 bytes is refused");
}

/* ---- 3, 4. with a secret ------------------------------------------------------- */

static void test_with_secret(const char *dir) {
    char ep[600], right[600], wrong[600];
    snprintf(ep, sizeof ep, "ipc://%s/auth.sock", dir);
    snprintf(right, sizeof right, "%s/right.secret", dir);
    snprintf(wrong, sizeof wrong, "%s/wrong.secret", dir);
    write_file(right, SECRET, 0600);
    write_file(wrong, "another-secret-of-enough-bytes\n", 0400);
    ms_link_opts to = {.endpoint = ep, .deadline_ms = 2000, .heartbeat_ms = 200, .secret_file = right};
    ms_link_opts none = to, other = to;
    none.secret_file = NULL;
    other.secret_file = wrong;
    ms_link *t = NULL, *stranger = NULL, *liar = NULL, *d1 = NULL, *d2 = NULL;
    CHECK(ms_link_bind(&to, &t) == MS_OK, "target link");
    CHECK(ms_link_connect(&none, &stranger) == MS_OK && ms_link_connect(&other, &liar) == MS_OK &&
              ms_link_connect(&to, &d1) == MS_OK && ms_link_connect(&to, &d2) == MS_OK,
          "draft links");
    if (!t || !stranger || !liar || !d1 || !d2) goto out;
    ms_wire_msg m, h;
    int reached = 0;

    /* a stranger without the secret */
    h = hello_of(101);
    CHECK(ms_link_send(stranger, &h) == MS_OK, "stranger's hello sent");
    CHECK(exchange(t, stranger, &m, &reached) == MS_OK && m.type == MS_WIRE_HELLO_ACK && !m.u.ack.accepted &&
              nonzero(m.u.ack.nonce, MS_WIRE_NONCE_BYTES) && strstr(m.u.ack.reason, "authentication required"),
          "no proof: a refused hello_ack with a nonce (got %s '%s')", ms_wire_type_name(m.type), m.u.ack.reason);
    uint8_t first_nonce[MS_WIRE_NONCE_BYTES];
    memcpy(first_nonce, m.u.ack.nonce, sizeof first_nonce);
    CHECK(reached == 0, "a hello without proof reached the target's caller");

    /* a draft with another secret answers its challenges, and is refused */
    h = hello_of(102);
    CHECK(ms_link_send(liar, &h) == MS_OK, "liar's hello sent");
    CHECK(exchange(t, liar, &m, &reached) == MS_OK && m.type == MS_WIRE_HELLO_ACK && !m.u.ack.accepted &&
              strstr(m.u.ack.reason, "authentication failed"),
          "wrong secret: refused (got %s '%s')", ms_wire_type_name(m.type), m.u.ack.reason);
    CHECK(reached == 0, "a hello with a wrong proof reached the target's caller");
    CHECK(ms_link_counters_get(t).auth_refused >= 2, "auth refusals counted: %lld",
          (long long)ms_link_counters_get(t).auth_refused);
    CHECK(!ms_link_has_peer(t), "nobody is the peer yet");

    /* the draft with the secret: challenged, answers by itself, admitted — here
     * after 5 hellos that queued up before the target read any (a draft that
     * starts before its target's model is loaded): the 5 challenges carry one
     * nonce, answered once, so no proof is refused and the draft is not told no */
    const int64_t refused0 = ms_link_counters_get(t).auth_refused;
    h = hello_of(103);
    for (int i = 0; i < 5; i++) CHECK(ms_link_send(d1, &h) == MS_OK, "d1's hello %d sent", i);
    CHECK(exchange(t, d1, &m, &reached) == MS_OK && m.type == MS_WIRE_HELLO_ACK && m.u.ack.accepted,
          "the right secret is admitted (got %s '%s')", ms_wire_type_name(m.type), m.u.ack.reason);
    CHECK(reached == 1, "the proven hello reached the caller once (%d)", reached);
    for (int i = 0; i < 10; i++) {
        reached += serve(t, 20);
        if (ms_link_recv(d1, 20, &m) == MS_OK && m.type == MS_WIRE_HELLO_ACK)
            CHECK(m.u.ack.accepted, "queued hellos: d1 told no afterwards: '%s'", m.u.ack.reason);
    }
    CHECK(ms_link_counters_get(t).auth_refused - refused0 == 5,
          "queued hellos: %lld refusals, want the 5 challenges only (no wrong proof)",
          (long long)(ms_link_counters_get(t).auth_refused - refused0));
    CHECK(ms_link_has_peer(t), "d1 is the peer");

    /* a replayed proof: the nonce d1 answered is spent */
    h = hello_of(104);
    {
        uint8_t msg[64];
        size_t n = strlen("microspec-link-hello-v1");
        memcpy(msg, "microspec-link-hello-v1", n);
        memcpy(msg + n, first_nonce, MS_WIRE_NONCE_BYTES);
        ms_link_hmac_sha256((const uint8_t *)SECRET, strlen(SECRET), msg, n + MS_WIRE_NONCE_BYTES, h.u.hello.auth);
    }
    reached = 0;
    CHECK(ms_link_send(stranger, &h) == MS_OK, "replay sent");
    CHECK(exchange(t, stranger, &m, &reached) == MS_OK && m.type == MS_WIRE_HELLO_ACK && !m.u.ack.accepted &&
              strstr(m.u.ack.reason, "authentication failed") &&
              memcmp(m.u.ack.nonce, first_nonce, MS_WIRE_NONCE_BYTES) != 0,
          "a replayed proof is refused with a new nonce (got %s '%s')", ms_wire_type_name(m.type), m.u.ack.reason);
    CHECK(reached == 0, "a replayed proof reached the caller");

    /* a second draft with the secret: the healthy first keeps its place */
    h = hello_of(105);
    CHECK(ms_link_send(d2, &h) == MS_OK, "d2's hello sent");
    for (int i = 0; i < 3; i++) ms_link_recv(d1, 5, &m); /* d1 keeps its heartbeats going */
    CHECK(exchange(t, d2, &m, &reached) == MS_OK && m.type == MS_WIRE_ERROR && m.u.error.code == MS_ERR_PEER &&
              strstr(m.u.error.message, "already connected"),
          "second draft: an error reply (got %s '%s')", ms_wire_type_name(m.type),
          m.type == MS_WIRE_ERROR ? m.u.error.message : m.u.ack.reason);
    CHECK(reached == 0 && ms_link_counters_get(t).busy_refused == 1, "the second draft reached the caller (%d, %lld)",
          reached, (long long)ms_link_counters_get(t).busy_refused);
    /* d1 is still the one the target talks to */
    ms_wire_msg e = {.type = MS_WIRE_END, .request_id = 5};
    CHECK(ms_link_send(t, &e) == MS_OK, "end to the peer");
    bool got_end = false;
    for (int i = 0; i < 50 && !got_end; i++) got_end = ms_link_recv(d1, 20, &m) == MS_OK && m.type == MS_WIRE_END;
    CHECK(got_end, "d1 still receives the target's messages");

    /* the first goes away: the second is admitted */
    ms_link_close(&d1);
    bool admitted = false;
    for (int i = 0; i < 100 && !admitted; i++) {
        h = hello_of(105);
        ms_link_send(d2, &h);
        reached = 0;
        admitted = exchange(t, d2, &m, &reached) == MS_OK && m.type == MS_WIRE_HELLO_ACK && m.u.ack.accepted;
    }
    CHECK(admitted, "the second draft is admitted once the first is gone");
out:
    ms_link_close(&d2);
    ms_link_close(&d1);
    ms_link_close(&liar);
    ms_link_close(&stranger);
    ms_link_close(&t);
}

/* ---- 5. without a secret --------------------------------------------------------- */

static void test_without_secret(const char *dir) {
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s/open.sock", dir);
    ms_link_opts o = {.endpoint = ep, .deadline_ms = 2000, .heartbeat_ms = 100};
    ms_link *t = NULL, *d1 = NULL, *d2 = NULL;
    CHECK(ms_link_bind(&o, &t) == MS_OK && ms_link_connect(&o, &d1) == MS_OK && ms_link_connect(&o, &d2) == MS_OK,
          "links");
    if (!t || !d1 || !d2) goto out;
    ms_wire_msg m, h = hello_of(201);
    int reached = 0;
    CHECK(ms_link_send(d1, &h) == MS_OK, "d1 hello");
    CHECK(exchange(t, d1, &m, &reached) == MS_OK && m.type == MS_WIRE_HELLO_ACK && m.u.ack.accepted && reached == 1,
          "without a secret the first draft is admitted at once");
    h = hello_of(202);
    CHECK(ms_link_send(d2, &h) == MS_OK, "d2 hello");
    reached = 0;
    ms_link_recv(d1, 5, &m);
    CHECK(exchange(t, d2, &m, &reached) == MS_OK && m.type == MS_WIRE_ERROR && m.u.error.code == MS_ERR_PEER &&
              reached == 0,
          "a stranger's matching hello does not evict the healthy draft (got %s)", ms_wire_type_name(m.type));
    /* d1 falls silent (connected, no heartbeats): after 3 periods d2 gets in */
    bool admitted = false;
    int refusals = 0;
    for (int i = 0; i < 100 && !admitted; i++) {
        h = hello_of(202);
        ms_link_send(d2, &h);
        reached = 0;
        ms_status st = exchange(t, d2, &m, &reached);
        admitted = st == MS_OK && m.type == MS_WIRE_HELLO_ACK && m.u.ack.accepted;
        refusals += st == MS_OK && m.type == MS_WIRE_ERROR;
    }
    CHECK(admitted, "a newcomer is admitted once the draft is silent for 3 heartbeats");
    CHECK(ms_link_counters_get(t).busy_refused >= 1, "busy refusals counted");
    (void)refusals;
out:
    ms_link_close(&d2);
    ms_link_close(&d1);
    ms_link_close(&t);
}

/* ---- 6. a flood from a stranger ----------------------------------------------------- */

/* Lines of path containing needle; *sum adds the number after "peer HEX: " on
 * each (the summary's per-peer counts). */
static int count_lines(const char *path, const char *needle, long long *sum) {
    FILE *f = fopen(path, "r");
    int n = 0;
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (!strstr(line, needle)) continue;
        n++;
        for (const char *p = line; sum && (p = strstr(p, " peer ")) != NULL;) {
            p += 6;
            const char *c = strstr(p, ": ");
            if (c) *sum += atoll(c + 2);
        }
    }
    if (f) fclose(f);
    return n;
}

static void test_flood(const char *dir) {
    enum { N_FLOOD = 5000 };
    char ep[600], secret[600], logp[600];
    snprintf(ep, sizeof ep, "ipc://%s/flood.sock", dir);
    snprintf(secret, sizeof secret, "%s/flood.secret", dir);
    snprintf(logp, sizeof logp, "%s/flood.log", dir);
    write_file(secret, SECRET, 0600);
    ms_link_opts to = {.endpoint = ep, .deadline_ms = 2000, .heartbeat_ms = 200, .secret_file = secret};
    ms_link *t = NULL, *d = NULL;
    CHECK(ms_link_bind(&to, &t) == MS_OK && ms_link_connect(&to, &d) == MS_OK, "flood: links");
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_connect(s, ep) == 0, "flood: the stranger connects");
    if (!t || !d) goto out;
    /* The target's log, at info, into a file. */
    ms_log_level level = ms_log_get_level();
    ms_log_set_level(MS_LOG_INFO);
    fflush(stderr);
    int saved = dup(2), lf = open(logp, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    CHECK(saved >= 0 && lf >= 0 && dup2(lf, 2) == 2, "flood: log to a file");
    /* 200 random bytes a frame (as issue 35's probe), half of them behind a
     * map header so the decoder gets past byte 0; the stranger never reads. */
    uint64_t x = 35;
    int sent = 0;
    ms_wire_msg m;
    /* One bound for sending and pumping: a pump that waited link.deadline_ms
     * at each reply to a stranger who never reads (before issue 35) would
     * take hours; it stops sending there and fails the counts below. */
    double end = ms_now_s() + 40;
    for (int i = 0; i < N_FLOOD && ms_now_s() < end; i++) {
        uint8_t f[200];
        for (size_t k = 0; k < sizeof f; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            f[k] = (uint8_t)(x >> 56);
        }
        f[0] = i % 2 ? 0x82 : 0xc1; /* a 2-key map; a byte msgpack never uses */
        /* Past the socket's high-water mark, the target's pump makes room. */
        int w;
        while ((w = zmq_send(s, f, sizeof f, ZMQ_DONTWAIT)) < 0 && zmq_errno() == EAGAIN && ms_now_s() < end)
            ms_link_recv(t, 5, &m);
        sent += w == (int)sizeof f;
    }
    /* The pump: every frame decoded (and refused). */
    while (ms_link_counters_get(t).decode_errors < sent && ms_now_s() < end) ms_link_recv(t, 20, &m);
    int64_t errs = ms_link_counters_get(t).decode_errors;
    /* A draft with the secret is still admitted (once the flood is absorbed:
     * behind a backlog, a pump held at each reply would not get to it). */
    if (errs == sent) {
        ms_wire_msg h = hello_of(601);
        int reached = 0;
        CHECK(ms_link_send(d, &h) == MS_OK, "flood: the draft's hello sent");
        CHECK(exchange(t, d, &m, &reached) == MS_OK && m.type == MS_WIRE_HELLO_ACK && m.u.ack.accepted,
              "flood: the draft with the secret is admitted after it (got %s)", ms_wire_type_name(m.type));
    }
    ms_link_close(&t); /* writes the summary of what was left out */
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(lf);
    ms_log_set_level(level);
    CHECK(sent == N_FLOOD, "flood: %d of %d frames sent", sent, N_FLOOD);
    CHECK(errs == sent, "flood: %lld decode errors counted for %d frames", (long long)errs, sent);
    long long summarised = 0;
    int detailed = count_lines(logp, "wire: ", NULL);
    int summaries = count_lines(logp, "not logged one by one", &summarised);
    int all = count_lines(logp, "", NULL);
    printf("flood: %d frames, %d log lines (%d one by one, %d summaries of %lld more)\n", sent, all, detailed,
           summaries, summarised);
    CHECK(detailed >= 1, "flood: the first bad frame left no line");
    CHECK(all <= 40, "flood: %d log lines for %d bad frames (want a few: the first ones and a summary)", all, sent);
    CHECK(summaries >= 1 && detailed + summarised == sent,
          "flood: %d lines one by one + %lld summarised != %d frames (the summary must count every one left out)",
          detailed, summarised, sent);
out:
    zmq_close(s);
    zmq_ctx_term(ctx);
    ms_link_close(&d);
    ms_link_close(&t);
}

int main(void) {
    ms_log_set_level(getenv("MS_LOG") ? ms_log_get_level() : MS_LOG_OFF);
    char dir[512];
    if (!ms_test_tmpdir("test_link_auth", dir, sizeof dir)) {
        fprintf(stderr, "no temp folder\n");
        return 1;
    }
    test_hmac();
    test_secret_file(dir);
    test_with_secret(dir);
    test_without_secret(dir);
    test_flood(dir);
    ms_test_rmtree(dir);
    if (g_fail) {
        fprintf(stderr, "test_link_auth: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_link_auth: ok\n");
    return 0;
}
