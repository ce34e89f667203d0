/* itest_tool — helpers of the two-node integration tests (tests/integration/test_cluster_*.sh)
 * for what bash and curl cannot do on their own: JSON in and out (jansson),
 * server-sent-event streams, a client that disconnects mid-stream, CURVE keys,
 * and raw ZeroMQ peers that send the target and the draft node garbage.
 *
 *   itest-tool free-port                              a free TCP port, below the ephemeral range, reserved
 *   itest-tool prompts JSONL N OUTDIR                 turns[0] of the first N lines → OUTDIR/pNN.txt
 *   itest-tool body completions|chat PROMPT_FILE MAX_TOKENS STREAM(0|1)   request body on stdout
 *   itest-tool text RESPONSE OUT                      choices[0] text/content → OUT (raw bytes)
 *   itest-tool get JSON PATH...                       scalar values (dotted paths), one per line
 *   itest-tool sse STREAM OUT_TEXT OUT_FINAL          concatenated deltas; the final chunk's JSON
 *   itest-tool stats-eq RESPONSE STATS_JSONL          microspec stats == microspec-generate's line
 *   itest-tool disconnect HOST PORT BODY_FILE         stream a completion, read one chunk, close
 *   itest-tool keypair                                CURVE key pair (public, secret) in Z85
 *   itest-tool poke-target ENDPOINT MODEL_DIR VOCAB MAX_MSG_BYTES
 *   itest-tool hello ENDPOINT MODEL_DIR VOCAB EXPECT [SECRET_FILE]
 *                                                     a stranger's hello with the model's real fingerprints
 *                                                     through an ms_link (answering the target's challenge
 *                                                     when SECRET_FILE is given); EXPECT is the reply:
 *                                                     auth-required | auth-failed | busy | accepted |
 *                                                     wrong-tokenizer (then the hello's tok_fp is wrong)
 *   itest-tool fake-target ENDPOINT READY_FILE
 *   itest-tool flood HOST PORT N_IDLE N_TRICKLE MAX_S READY_FILE
 *                                                     hold N_IDLE silent and N_TRICKLE trickling (a header
 *                                                     byte every 250 ms) connections until the server closes
 *                                                     them or MAX_S pass; READY_FILE once all are open;
 *                                                     prints key=value lines (closed counts, 408s, longest
 *                                                     time a connection stayed open, in seconds)
 *   itest-tool junk ENDPOINT N                        a stranger's DEALER sends N frames of 200 random bytes and
 *                                                     never reads (issue 35: the link's log under a flood);
 *                                                     prints sent=N once they are handed to ZeroMQ
 *
 * Every command exits 0 when what it checks holds, 1 with a message otherwise,
 * 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "ms_link.h"
#include "ms_wire.h"

#define DIE(...)                                   \
    do {                                           \
        fprintf(stderr, "itest-tool: " __VA_ARGS__); \
        fprintf(stderr, "\n");                     \
        exit(1);                                   \
    } while (0)

/* ---- files and JSON ------------------------------------------------------------ */

static char *slurp(const char *path, size_t *len) {
    char *d;
    size_t n;
    if (ms_read_file(path, &d, &n) < 0) DIE("cannot read %s", path);
    if (len) *len = n;
    return d;
}

static void spit(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) DIE("cannot write %s", path);
}

static json_t *load_json(const char *path) {
    size_t n;
    char *d = slurp(path, &n);
    json_error_t e;
    json_t *j = json_loadb(d, n, 0, &e);
    if (!j) DIE("%s: not JSON (%s at line %d): %.200s", path, e.text, e.line, d);
    free(d);
    return j;
}

/* Dotted path: "microspec.spec_rounds", "choices.0.text". */
static json_t *json_path(json_t *j, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ".", &save); tok && j; tok = strtok_r(NULL, ".", &save)) {
        if (json_is_array(j)) {
            char *end;
            long i = strtol(tok, &end, 10);
            j = *end ? NULL : json_array_get(j, (size_t)i);
        } else {
            j = json_object_get(j, tok);
        }
    }
    return j;
}

static int cmd_prompts(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *f = fopen(argv[0], "rb");
    if (!f) DIE("%s: %s", argv[0], strerror(errno));
    long n = atol(argv[1]), k = 0;
    char *line = NULL;
    size_t cap = 0;
    while (k < n && getline(&line, &cap, f) > 0) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        json_t *t0 = j ? json_array_get(json_object_get(j, "turns"), 0) : NULL;
        if (!json_is_string(t0)) DIE("%s:%ld: no turns[0] string", argv[0], k + 1);
        char path[4096];
        snprintf(path, sizeof path, "%s/p%02ld.txt", argv[2], k);
        spit(path, json_string_value(t0), json_string_length(t0));
        json_decref(j);
        k++;
    }
    free(line);
    fclose(f);
    if (k != n) DIE("%s: only %ld prompts", argv[0], k);
    return 0;
}

static int cmd_body(int argc, char **argv) {
    if (argc != 4) return 2;
    bool chat = !strcmp(argv[0], "chat");
    size_t n;
    char *p = slurp(argv[1], &n);
    json_t *o = json_object();
    json_t *text = json_stringn(p, n);
    if (!text) DIE("%s: not UTF-8", argv[1]);
    if (chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("user"));
        json_object_set_new(m, "content", text);
        json_t *a = json_array();
        json_array_append_new(a, m);
        json_object_set_new(o, "messages", a);
    } else {
        json_object_set_new(o, "prompt", text);
    }
    json_object_set_new(o, "max_tokens", json_integer(atol(argv[2])));
    json_object_set_new(o, "temperature", json_integer(0));
    json_object_set_new(o, "stream", json_boolean(atoi(argv[3]) != 0));
    char *s = json_dumps(o, JSON_COMPACT);
    fputs(s, stdout);
    free(s);
    free(p);
    json_decref(o);
    return 0;
}

static int cmd_text(int argc, char **argv) {
    if (argc != 2) return 2;
    json_t *j = load_json(argv[0]);
    json_t *t = json_path(j, "choices.0.text");
    if (!t) t = json_path(j, "choices.0.message.content");
    if (!json_is_string(t)) {
        char *s = json_dumps(j, JSON_COMPACT);
        DIE("%s: no choices[0] text: %.300s", argv[0], s);
    }
    spit(argv[1], json_string_value(t), json_string_length(t));
    json_decref(j);
    return 0;
}

static void print_scalar(json_t *v) {
    if (json_is_string(v)) printf("%s\n", json_string_value(v));
    else if (json_is_integer(v)) printf("%lld\n", (long long)json_integer_value(v));
    else if (json_is_real(v)) printf("%.17g\n", json_real_value(v));
    else if (json_is_true(v)) printf("true\n");
    else if (json_is_false(v)) printf("false\n");
    else if (json_is_null(v)) printf("null\n");
    else {
        char *s = json_dumps(v, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
    }
}

static int cmd_get(int argc, char **argv) {
    if (argc < 2) return 2;
    json_t *j = load_json(argv[0]);
    for (int i = 1; i < argc; i++) {
        json_t *v = json_path(j, argv[i]);
        if (!v) DIE("%s: no %s", argv[0], argv[i]);
        print_scalar(v);
    }
    json_decref(j);
    return 0;
}

/* SSE: "data: {json}\n\n" events, the last "data: [DONE]". Deltas are
 * choices[0].text (completions) or choices[0].delta.content (chat). The final
 * chunk is the last JSON event (it carries finish_reason and microspec). */
static int cmd_sse(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t n;
    char *d = slurp(argv[0], &n);
    char *text = ms_calloc(1, n + 1);
    size_t tl = 0;
    json_t *last = NULL;
    bool done = false;
    long events = 0;
    char *save = NULL;
    for (char *line = strtok_r(d, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r') line[--ll] = 0;
        if (ll == 0) continue;
        if (done) DIE("%s: data after [DONE]: %.200s", argv[0], line);
        if (strncmp(line, "data: ", 6) != 0) DIE("%s: not an SSE data line: %.200s", argv[0], line);
        const char *payload = line + 6;
        if (!strcmp(payload, "[DONE]")) {
            done = true;
            continue;
        }
        json_error_t e;
        json_t *j = json_loads(payload, 0, &e);
        if (!j) DIE("%s: event %ld is not JSON: %.200s", argv[0], events, payload);
        if (json_object_get(j, "error")) DIE("%s: error event: %.300s", argv[0], payload);
        json_t *t = json_path(j, "choices.0.text");
        if (!t) t = json_path(j, "choices.0.delta.content");
        if (json_is_string(t)) {
            memcpy(text + tl, json_string_value(t), json_string_length(t));
            tl += json_string_length(t);
        }
        json_decref(last);
        last = j;
        events++;
    }
    if (!done) DIE("%s: the stream does not end with data: [DONE] (%ld events)", argv[0], events);
    if (!last || !json_object_get(last, "microspec"))
        DIE("%s: the final chunk carries no microspec object", argv[0]);
    json_t *fin = json_path(last, "choices.0.finish_reason");
    if (!json_is_string(fin)) DIE("%s: the final chunk has no finish_reason", argv[0]);
    spit(argv[1], text, tl);
    char *s = json_dumps(last, JSON_COMPACT);
    spit(argv[2], s, strlen(s));
    fprintf(stderr, "itest-tool sse: %ld events, %zu text bytes, finish %s\n", events, tl, json_string_value(fin));
    free(s);
    free(text);
    free(d);
    json_decref(last);
    return 0;
}

/* The HTTP microspec object against microspec-generate --stats-out's line for
 * the same prompt: integers exactly, reals formatted as generate formats them. */
static int cmd_stats_eq(int argc, char **argv) {
    if (argc != 2) return 2;
    json_t *r = load_json(argv[0]);
    json_t *g = load_json(argv[1]);
    json_t *ms = json_object_get(r, "microspec");
    if (!ms) DIE("%s: no microspec object", argv[0]);
    struct {
        const char *http, *gen, *fmt;
    } f[] = {{"rounds", "rounds", NULL},
             {"spec_rounds", "spec_rounds", NULL},
             {"vocab_max", "vocab_max", NULL},
             {"mean_accepted_length", "mean_accepted", "%.4f"},
             {"coverage", "coverage", "%.4f"},
             {"vocab_mean", "vocab_mean", "%.1f"},
             {"draft_failed", "draft_failed", NULL}};
    int bad = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        json_t *a = json_object_get(ms, f[i].http), *b = json_object_get(g, f[i].gen);
        if (!a || !b) DIE("missing %s / %s", f[i].http, f[i].gen);
        char sa[64], sb[64];
        if (f[i].fmt) {
            snprintf(sa, sizeof sa, f[i].fmt, json_number_value(a));
            snprintf(sb, sizeof sb, f[i].fmt, json_number_value(b));
        } else if (json_is_boolean(a)) {
            snprintf(sa, sizeof sa, "%d", json_is_true(a));
            snprintf(sb, sizeof sb, "%d", json_is_true(b));
        } else {
            snprintf(sa, sizeof sa, "%lld", (long long)json_integer_value(a));
            snprintf(sb, sizeof sb, "%lld", (long long)json_integer_value(b));
        }
        bool ok = !strcmp(sa, sb);
        printf("  %-22s cluster %-10s single-process %-10s %s\n", f[i].http, sa, sb, ok ? "ok" : "DIFFERENT");
        bad += !ok;
    }
    json_decref(r);
    json_decref(g);
    return bad ? 1 : 0;
}

/* ---- sockets ---------------------------------------------------------------------- */

/* free-port: a port below the kernel's ephemeral range, reserved for an hour.
 * A port from bind(0) comes from the ephemeral range, which every outgoing
 * connection (curl, Slurm's RPCs, the link's dials) draws from too; between
 * the test picking it and its node binding it, one of them could take it (a
 * node then fails with EADDRINUSE: a flaky test). Below that range only
 * listeners bind, and the reservation file (created O_EXCL in
 * $TMPDIR/ms-itest-ports) keeps two tests running at once from picking the
 * same port. The port must bind now on 0.0.0.0 (so neither a listener nor a
 * TIME_WAIT socket holds it). Where the range starts too low to leave room,
 * bind(0) as before. */
static int port_binds(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

static int port_reserve(const char *dir, int port) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d", dir, port);
    for (int tries = 0; tries < 2; tries++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) {
            close(fd);
            return 1;
        }
        struct stat st;
        if (errno != EEXIST || stat(path, &st) != 0 || time(NULL) - st.st_mtime < 3600) return 0;
        unlink(path); /* an hour old: its test is long gone */
    }
    return 0;
}

static int cmd_free_port(int argc, char **argv) {
    (void)argv;
    if (argc != 0) return 2;
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
        fclose(f);
    }
    const int first = 15000;
    if (lo - first >= 2000) {
        const char *tmp = getenv("TMPDIR");
        char dir[4000];
        if (snprintf(dir, sizeof dir, "%s/ms-itest-ports", tmp && *tmp ? tmp : "/tmp") >= (int)sizeof dir)
            DIE("free-port: TMPDIR too long");
        mode_t old = umask(0);
        if (mkdir(dir, 01777) != 0 && errno != EEXIST) DIE("free-port: mkdir %s: %s", dir, strerror(errno));
        umask(old);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int n = lo - first;
        int start = (int)(((unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec) % (unsigned)n);
        for (int i = 0; i < n; i++) {
            int port = first + (start + i) % n;
            if (!port_binds(port) || !port_reserve(dir, port)) continue;
            if (!port_binds(port)) continue; /* taken while reserving: leave the file, try another */
            printf("%d\n", port);
            return 0;
        }
        DIE("free-port: no free port in %d..%d", first, lo - 1);
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &al) != 0)
        DIE("free-port: %s", strerror(errno));
    printf("%d\n", ntohs(a.sin_port));
    close(fd);
    return 0;
}

/* Send a streaming completion, wait (≤ 30 s) for the first SSE data chunk,
 * then close the connection while the server is still generating. */
static int cmd_disconnect(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t bl;
    char *body = slurp(argv[2], &bl);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    if (fd < 0 || inet_pton(AF_INET, argv[0], &a.sin_addr) != 1 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        DIE("disconnect: connect %s:%s: %s", argv[0], argv[1], strerror(errno));
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char head[512];
    int hl = snprintf(head, sizeof head,
                      "POST /v1/completions HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      argv[0], argv[1], bl);
    if (write(fd, head, (size_t)hl) != hl || write(fd, body, bl) != (ssize_t)bl) DIE("disconnect: write failed");
    char buf[8192];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r <= 0) DIE("disconnect: the server closed or timed out before the first chunk (%zu bytes)", got);
        got += (size_t)r;
        buf[got] = 0;
        char *hdr_end = strstr(buf, "\r\n\r\n");
        if (strncmp(buf, "HTTP/1.1 200", 12) != 0 && hdr_end) DIE("disconnect: not 200: %.100s", buf);
        if (hdr_end && strstr(hdr_end, "data: ")) break;
    }
    /* RST rather than FIN: the server sees the client gone at its next write. */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    free(body);
    printf("disconnected after the first chunk (%zu bytes read)\n", got);
    return 0;
}

static int cmd_keypair(int argc, char **argv) {
    (void)argv;
    if (argc != 0) return 2;
    char pub[41], sec[41];
    if (zmq_curve_keypair(pub, sec) != 0) DIE("zmq_curve_keypair: %s", zmq_strerror(zmq_errno()));
    printf("%s\n%s\n", pub, sec);
    return 0;
}

/* ---- raw ZeroMQ peers ------------------------------------------------------------- */

static ms_wire_arena *g_arena;
static ms_wire_buf g_buf;
static int g_fail;

#define EXPECT(cond, ...)                             \
    do {                                              \
        if (!(cond)) {                                \
            printf("FAIL: " __VA_ARGS__);             \
            printf("\n");                             \
            g_fail++;                                 \
        }                                             \
    } while (0)

/* Encode m into a fresh heap frame; *len its size. */
static uint8_t *encode(const ms_wire_msg *m, size_t *len) {
    if (ms_wire_encode(m, &g_buf, NULL, NULL) < 0) DIE("encode %s failed", ms_wire_type_name(m->type));
    uint8_t *p = ms_malloc(g_buf.len);
    memcpy(p, g_buf.data, g_buf.len);
    *len = g_buf.len;
    return p;
}

/* Send [id] frame on sock (id NULL for a DEALER). */
static void send_frame(void *sock, const zmq_msg_t *id, const void *data, size_t len) {
    if (id && zmq_send(sock, zmq_msg_data((zmq_msg_t *)id), zmq_msg_size((zmq_msg_t *)id), ZMQ_SNDMORE) < 0)
        DIE("send id: %s", zmq_strerror(zmq_errno()));
    if (zmq_send(sock, data, len, 0) < 0) DIE("send: %s", zmq_strerror(zmq_errno()));
}

static void send_msg(void *sock, const zmq_msg_t *id, const ms_wire_msg *m) {
    size_t n;
    uint8_t *p = encode(m, &n);
    send_frame(sock, id, p, n);
    free(p);
}

/* Wait up to ms for one message that is not a heartbeat; decode it into *out.
 * A ROUTER stores the sender's identity in *id (initialised by the caller).
 * hb_sock/hb_id: send a heartbeat there every 50 ms while waiting (the fake
 * target keeps the draft from thinking it went silent). 1 got, 0 none, -1 a
 * reply that does not decode. */
static int recv_msg(void *sock, bool router, zmq_msg_t *id, int ms, ms_wire_msg *out) {
    uint64_t end = ms_now_ns() + (uint64_t)ms * 1000000ull, last_hb = 0;
    static uint64_t hb_seq;
    for (;;) {
        uint64_t now = ms_now_ns();
        if (now >= end) return 0;
        if (router && id && zmq_msg_size(id) > 0 && now - last_hb > 50000000ull) {
            ms_wire_msg hb = {.type = MS_WIRE_HEARTBEAT};
            hb.u.heartbeat.seq = ++hb_seq;
            hb.u.heartbeat.t_ns = now;
            send_msg(sock, id, &hb);
            last_hb = now;
        }
        zmq_pollitem_t pi = {.socket = sock, .events = ZMQ_POLLIN};
        if (zmq_poll(&pi, 1, 20) <= 0) continue;
        zmq_msg_t parts[4];
        int np = 0, more = 1;
        while (more && np < 4) {
            zmq_msg_init(&parts[np]);
            if (zmq_msg_recv(&parts[np], sock, 0) < 0) DIE("recv: %s", zmq_strerror(zmq_errno()));
            more = zmq_msg_more(&parts[np]);
            np++;
        }
        int base = router ? 1 : 0;
        if (router) {
            zmq_msg_close(id);
            zmq_msg_init(id);
            zmq_msg_copy(id, &parts[0]);
        }
        ms_status s = np > base ? ms_wire_decode(zmq_msg_data(&parts[base]), zmq_msg_size(&parts[base]),
                                                 np > base + 1 ? zmq_msg_data(&parts[base + 1]) : NULL,
                                                 np > base + 1 ? zmq_msg_size(&parts[base + 1]) : 0, np > base + 1,
                                                 g_arena, out)
                                : MS_ERR_FORMAT;
        for (int i = 0; i < np; i++) zmq_msg_close(&parts[i]);
        if (s < 0) return -1;
        if (out->type == MS_WIRE_HEARTBEAT) continue;
        if (out->type == MS_WIRE_PING && !out->u.ping.reply) continue; /* link chatter like a heartbeat */
        return 1;
    }
}

static void describe(const char *what, int got, const ms_wire_msg *m) {
    if (got == 0) printf("  %-34s → no reply (dropped)\n", what);
    else if (got < 0) printf("  %-34s → a reply that does not decode\n", what);
    else if (m->type == MS_WIRE_ERROR)
        printf("  %-34s → error %s: %s\n", what, ms_status_str(m->u.error.code), m->u.error.message);
    else if (m->type == MS_WIRE_HELLO_ACK)
        printf("  %-34s → hello_ack accepted=%d %s\n", what, m->u.ack.accepted, m->u.ack.reason);
    else printf("  %-34s → %s (request %llu round %lld)\n", what, ms_wire_type_name(m->type),
                (unsigned long long)m->request_id, (long long)m->round);
}

/* Expect an error reply (code 0: any code). */
static void expect_error(const char *what, int got, const ms_wire_msg *m, ms_status code) {
    describe(what, got, m);
    EXPECT(got == 1 && m->type == MS_WIRE_ERROR && (code == 0 || m->u.error.code == code),
           "%s: expected an error reply%s%s", what, code ? " " : "", code ? ms_status_str(code) : "");
}

/* In a valid control frame, the protocol version byte: "v" is the first key,
 * the value a positive fixint right after the 0xa1 'v' key. */
static void patch_version(uint8_t *p, size_t n, uint8_t v) {
    for (size_t i = 0; i + 2 < n; i++)
        if (p[i] == 0xa1 && p[i + 1] == 'v') {
            p[i + 2] = v;
            return;
        }
    DIE("no version key in the frame");
}

/* Replace the first occurrence of a string value (same length) in a frame. */
static void patch_string(uint8_t *p, size_t n, const char *from, const char *to) {
    size_t l = strlen(from);
    for (size_t i = 0; i + l <= n; i++)
        if (!memcmp(p + i, from, l)) {
            memcpy(p + i, to, l);
            return;
        }
    DIE("no '%s' in the frame", from);
}

static ms_wire_msg tree_msg(uint64_t rid, int64_t round) {
    ms_wire_msg t = {.type = MS_WIRE_TREE, .request_id = rid, .round = round};
    t.u.tree.request_id = rid;
    t.u.tree.round = round;
    ms_tree *tr = &t.u.tree.tree;
    tr->n = 2;
    tr->token[0] = 5;
    tr->parent[0] = -1;
    tr->mask[0] = 1;
    tr->token[1] = 6;
    tr->parent[1] = 0;
    tr->depth[1] = 1;
    tr->mask[1] = 3;
    tr->score[1] = -0.5f;
    return t;
}

/* The target's link endpoint, from a stranger and then from a hijacking
 * "draft": every bad message gets an error reply or is dropped. */
static int cmd_poke_target(int argc, char **argv) {
    if (argc != 4) return 2;
    const char *ep = argv[0];
    int64_t vocab = atoll(argv[2]), maxmsg = atoll(argv[3]);
    char tok_fp[17] = "", model_fp[17] = "", path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", argv[1]);
    if (access(path, R_OK) != 0) snprintf(path, sizeof path, "%s/tokenizer.bin", argv[1]);
    if (ms_link_fingerprint_file(path, tok_fp) < 0) DIE("fingerprint %s", path);
    snprintf(path, sizeof path, "%s/config.json", argv[1]);
    if (ms_link_fingerprint_file(path, model_fp) < 0) DIE("fingerprint %s", path);

    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(s, ep) != 0) DIE("connect %s: %s", ep, zmq_strerror(zmq_errno()));
    ms_wire_msg r;
    int got;
    ms_rng rng;
    ms_rng_seed(&rng, 2024);
    printf("poking the target at %s\n", ep);

    /* 1. random bytes (a fixmap header first so the decoder gets past byte 0 sometimes) */
    uint8_t junk[97];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)ms_rng_u64(&rng);
    send_frame(s, NULL, junk, sizeof junk);
    got = recv_msg(s, false, NULL, 3000, &r);
    expect_error("random bytes", got, &r, 0);

    /* 2. a truncated valid hello */
    ms_wire_msg hello = {.type = MS_WIRE_HELLO};
    hello.u.hello.role = MS_WIRE_ROLE_DRAFT;
    snprintf(hello.u.hello.model_fp, sizeof hello.u.hello.model_fp, "%s", model_fp);
    snprintf(hello.u.hello.tok_fp, sizeof hello.u.hello.tok_fp, "%s", tok_fp);
    snprintf(hello.u.hello.kind, sizeof hello.u.hello.kind, "layerskip");
    hello.u.hello.vocab = vocab;
    hello.u.hello.hidden = 64;
    hello.u.hello.pid = (int64_t)getpid();
    size_t hn;
    uint8_t *hp = encode(&hello, &hn);
    send_frame(s, NULL, hp, hn / 2);
    got = recv_msg(s, false, NULL, 3000, &r);
    expect_error("truncated hello", got, &r, MS_ERR_FORMAT);

    /* 3. another protocol version */
    uint8_t *vp = ms_malloc(hn);
    memcpy(vp, hp, hn);
    patch_version(vp, hn, MS_PROTO_VERSION + 1);
    send_frame(s, NULL, vp, hn);
    got = recv_msg(s, false, NULL, 3000, &r);
    expect_error("wrong protocol version", got, &r, MS_ERR_UNSUPPORTED);

    /* 4. an unknown message type (same length as "hello") */
    memcpy(vp, hp, hn);
    patch_string(vp, hn, "hello", "howdy");
    send_frame(s, NULL, vp, hn);
    got = recv_msg(s, false, NULL, 3000, &r);
    expect_error("unknown message type", got, &r, 0);
    free(vp);

    /* 5. three frames where one or two are allowed */
    if (zmq_send(s, hp, hn, ZMQ_SNDMORE) < 0 || zmq_send(s, "x", 1, ZMQ_SNDMORE) < 0 || zmq_send(s, "y", 1, 0) < 0)
        DIE("send: %s", zmq_strerror(zmq_errno()));
    got = recv_msg(s, false, NULL, 3000, &r);
    expect_error("three frames", got, &r, 0);

    /* 6. a tree for a request that does not exist, from a stranger */
    ms_wire_msg t = tree_msg(424242, 99);
    send_msg(s, NULL, &t);
    got = recv_msg(s, false, NULL, 3000, &r);
    expect_error("tree round 99 (stranger)", got, &r, MS_ERR_PEER);

    /* 7. an oversized frame: ZeroMQ drops it (and the connection) */
    size_t big = (size_t)maxmsg + 4096;
    uint8_t *bp = ms_calloc(1, big);
    memcpy(bp, hp, hn);
    send_frame(s, NULL, bp, big);
    free(bp);
    got = recv_msg(s, false, NULL, 1500, &r);
    describe("oversized frame", got, &r);
    EXPECT(got == 0 || (got == 1 && r.type == MS_WIRE_ERROR), "oversized frame: expected no reply or an error");
    /* the link must still answer a (reconnected) stranger */
    got = 0;
    for (int attempt = 0; attempt < 20 && got != 1; attempt++) {
        send_frame(s, NULL, junk, sizeof junk);
        got = recv_msg(s, false, NULL, 500, &r);
    }
    expect_error("random bytes after the oversized one", got, &r, 0);

    /* 8. a hello with a tokenizer that is not the target's: refused */
    ms_wire_msg bad = hello;
    snprintf(bad.u.hello.tok_fp, sizeof bad.u.hello.tok_fp, "0123456789abcdef");
    send_msg(s, NULL, &bad);
    got = recv_msg(s, false, NULL, 3000, &r);
    describe("hello, wrong tokenizer", got, &r);
    /* the live draft keeps its place before the tokenizer is even compared */
    EXPECT(got == 1 && ((r.type == MS_WIRE_HELLO_ACK && !r.u.ack.accepted) ||
                        (r.type == MS_WIRE_ERROR && r.u.error.code == MS_ERR_PEER)),
           "hello with a wrong tokenizer: expected a refusal");

    /* 9. a hello that matches while the real draft is alive: refused with an
     *    error (a healthy draft is not evicted), then a tree for a request
     *    that does not exist: answered as from an unknown peer, never acted on. */
    send_frame(s, NULL, hp, hn);
    got = recv_msg(s, false, NULL, 3000, &r);
    describe("hello, matching", got, &r);
    EXPECT(got == 1 && r.type == MS_WIRE_ERROR && r.u.error.code == MS_ERR_PEER &&
               strstr(r.u.error.message, "already connected"),
           "matching hello while the draft is alive: expected an error reply");
    t = tree_msg(777, 99);
    send_msg(s, NULL, &t);
    got = recv_msg(s, false, NULL, 1000, &r);
    describe("tree round 99 (refused stranger)", got, &r);
    EXPECT(got == 1 && r.type == MS_WIRE_ERROR && r.u.error.code == MS_ERR_PEER, "stray tree: expected an error");
    free(hp);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return g_fail ? 1 : 0;
}

/* A stranger's hello through a real ms_link: with SECRET_FILE the link answers
 * the target's challenge like a draft node's would. */
static int cmd_hello(int argc, char **argv) {
    if (argc != 4 && argc != 5) return 2;
    const char *want = argv[3];
    if (strcmp(want, "auth-required") && strcmp(want, "auth-failed") && strcmp(want, "busy") &&
        strcmp(want, "accepted") && strcmp(want, "wrong-tokenizer"))
        return 2;
    char tok_fp[17] = "", model_fp[17] = "", path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", argv[1]);
    if (access(path, R_OK) != 0) snprintf(path, sizeof path, "%s/tokenizer.bin", argv[1]);
    if (ms_link_fingerprint_file(path, tok_fp) < 0) DIE("fingerprint %s", path);
    snprintf(path, sizeof path, "%s/config.json", argv[1]);
    if (ms_link_fingerprint_file(path, model_fp) < 0) DIE("fingerprint %s", path);
    ms_link_opts o = {.endpoint = argv[0], .deadline_ms = 2000, .heartbeat_ms = 500,
                      .secret_file = argc == 5 ? argv[4] : NULL};
    ms_link *l = NULL;
    if (ms_link_connect(&o, &l) < 0) DIE("cannot open a link to %s", argv[0]);
    ms_wire_msg h = {.type = MS_WIRE_HELLO}, r;
    h.u.hello.role = MS_WIRE_ROLE_DRAFT;
    snprintf(h.u.hello.model_fp, sizeof h.u.hello.model_fp, "%s", model_fp);
    snprintf(h.u.hello.tok_fp, sizeof h.u.hello.tok_fp, "%s",
             strcmp(want, "wrong-tokenizer") ? tok_fp : "0123456789abcdef");
    snprintf(h.u.hello.kind, sizeof h.u.hello.kind, "layerskip");
    h.u.hello.vocab = atoll(argv[2]);
    h.u.hello.hidden = 64;
    h.u.hello.pid = (int64_t)getpid();
    if (ms_link_send(l, &h) < 0) DIE("hello not sent");
    const char *got = NULL;
    char text[MS_WIRE_MESSAGE_MAX + 1] = "";
    for (int i = 0; i < 100 && !got; i++) { /* ≤ 10 s */
        if (ms_link_recv(l, 100, &r) != MS_OK) continue;
        if (r.type == MS_WIRE_HELLO_ACK) {
            snprintf(text, sizeof text, "%s", r.u.ack.reason);
            got = r.u.ack.accepted                               ? "accepted"
                  : strstr(r.u.ack.reason, "authentication required") ? "auth-required"
                  : strstr(r.u.ack.reason, "authentication failed")   ? "auth-failed"
                  : strstr(r.u.ack.reason, "tokenizer fingerprint")   ? "wrong-tokenizer"
                                                                      : "refused";
        } else if (r.type == MS_WIRE_ERROR) {
            if (strstr(r.u.error.message, "not connected")) continue; /* our heartbeats before a place */
            snprintf(text, sizeof text, "%s", r.u.error.message);
            got = strstr(r.u.error.message, "already connected") ? "busy" : "error";
        }
    }
    printf("hello from pid %lld: %s (%s)\n", (long long)h.u.hello.pid, got ? got : "no reply", text);
    ms_link_close(&l);
    return got && !strcmp(got, want) ? 0 : 1;
}

/* A fake target: bind a ROUTER where the draft connects, admit its hello, send
 * it garbage, then a valid begin → tree → verify → tree exchange. */
static int cmd_fake_target(int argc, char **argv) {
    if (argc != 2) return 2;
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0, one = 1;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    if (zmq_bind(s, argv[0]) != 0) DIE("bind %s: %s", argv[0], zmq_strerror(zmq_errno()));
    spit(argv[1], "ready\n", 6);
    zmq_msg_t id;
    zmq_msg_init(&id);
    ms_wire_msg r;
    int got;
    printf("fake target at %s: waiting for the draft's hello\n", argv[0]);
    got = recv_msg(s, true, &id, 60000, &r);
    if (got != 1 || r.type != MS_WIRE_HELLO) DIE("no hello from the draft within 60 s");
    int64_t vocab = r.u.hello.vocab;
    printf("  hello from a %s draft, vocab %lld, pid %lld\n", r.u.hello.kind, (long long)vocab, (long long)r.u.hello.pid);
    ms_wire_msg ack = {.type = MS_WIRE_HELLO_ACK};
    ack.u.ack.accepted = true;
    send_msg(s, &id, &ack);

    /* Skip the draft's repeated hellos until it has seen the ack. */
    for (;;) {
        got = recv_msg(s, true, &id, 300, &r);
        if (got == 0) break;
        if (got == 1 && r.type == MS_WIRE_HELLO) continue;
        DIE("unexpected %s from the draft after the ack", got == 1 ? ms_wire_type_name(r.type) : "garbage");
    }

    /* The draft's link answers a ping with its build and the same seq. */
    ms_wire_msg ping = {.type = MS_WIRE_PING};
    snprintf(ping.u.ping.build, sizeof ping.u.ping.build, "fake-target");
    ping.u.ping.seq = 4242;
    send_msg(s, &id, &ping);
    got = recv_msg(s, true, &id, 3000, &r);
    describe("a ping", got, &r);
    EXPECT(got == 1 && r.type == MS_WIRE_PING && r.u.ping.reply && r.u.ping.seq == 4242 && r.u.ping.build[0],
           "a ping: expected the answer with seq 4242 and the draft's build");
    if (got == 1 && r.type == MS_WIRE_PING) printf("    the draft runs build %s\n", r.u.ping.build);

    ms_rng rng;
    ms_rng_seed(&rng, 77);
    uint8_t junk[61];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)ms_rng_u64(&rng);
    send_frame(s, &id, junk, sizeof junk);
    got = recv_msg(s, true, &id, 3000, &r);
    expect_error("random bytes", got, &r, 0);

    ms_wire_msg hb = {.type = MS_WIRE_HEARTBEAT};
    hb.u.heartbeat.seq = 1;
    size_t n;
    uint8_t *p = encode(&hb, &n);
    patch_version(p, n, MS_PROTO_VERSION + 1);
    send_frame(s, &id, p, n);
    free(p);
    got = recv_msg(s, true, &id, 3000, &r);
    expect_error("wrong protocol version", got, &r, MS_ERR_UNSUPPORTED);

    int32_t ver_topk[3] = {7, 8, 9};
    ms_wire_msg v = {.type = MS_WIRE_VERIFY, .request_id = 9999, .round = 1};
    v.u.verify.request_id = 9999;
    v.u.verify.round = 1;
    v.u.verify.n_path = 1;
    v.u.verify.bonus = 5;
    v.u.verify.k_ver = 3;
    v.u.verify.ver_topk = ver_topk;
    send_msg(s, &id, &v);
    got = recv_msg(s, true, &id, 3000, &r);
    expect_error("verify for an unknown request", got, &r, 0);
    EXPECT(got != 1 || r.request_id == 9999, "the error names request %llu, not 9999", (unsigned long long)r.request_id);

    ms_wire_msg t = tree_msg(31, 2);
    send_msg(s, &id, &t);
    got = recv_msg(s, true, &id, 800, &r);
    describe("a tree sent to the draft", got, &r);
    EXPECT(got == 0 || (got == 1 && r.type == MS_WIRE_ERROR), "a tree to the draft: expected no reply or an error");

    /* A valid exchange: begin → tree 1 → verify (root only accepted) → tree 2. */
    int32_t prompt[4] = {1, 10, 20, 30};
    int32_t topk_pre[12];
    for (int i = 0; i < 12; i++) topk_pre[i] = (int32_t)((40 + 7 * i) % vocab);
    ms_wire_msg b = {.type = MS_WIRE_BEGIN, .request_id = 5};
    b.u.begin.request_id = 5;
    b.u.begin.prompt = prompt;
    b.u.begin.n_prompt = 4;
    b.u.begin.topk_pre = topk_pre;
    b.u.begin.k_pre = 3;
    b.u.begin.root = (int32_t)(50 % vocab);
    send_msg(s, &id, &b);
    got = recv_msg(s, true, &id, 10000, &r);
    describe("begin (4-token prompt)", got, &r);
    EXPECT(got == 1 && r.type == MS_WIRE_TREE && r.request_id == 5 && r.round == 1 && r.u.tree.tree.n >= 2 &&
               r.u.tree.tree.token[0] == b.u.begin.root && ms_tree_validate(&r.u.tree.tree) == MS_OK,
           "begin: expected a valid tree of ≥ 2 nodes rooted at %d for request 5 round 1", b.u.begin.root);
    if (got == 1 && r.type == MS_WIRE_TREE) {
        printf("    tree: %lld nodes, first child %d, vocabulary %lld\n", (long long)r.u.tree.tree.n,
               r.u.tree.tree.token[1], (long long)r.u.tree.stats.vocab_size);
        v = (ms_wire_msg){.type = MS_WIRE_VERIFY, .request_id = 5, .round = 1};
        v.u.verify.request_id = 5;
        v.u.verify.round = 1;
        v.u.verify.n_path = 1;
        v.u.verify.bonus = (int32_t)(60 % vocab);
        v.u.verify.k_ver = 3;
        v.u.verify.ver_topk = ver_topk;
        send_msg(s, &id, &v);
        got = recv_msg(s, true, &id, 10000, &r);
        describe("verify round 1", got, &r);
        EXPECT(got == 1 && r.type == MS_WIRE_TREE && r.request_id == 5 && r.round == 2 &&
                   r.u.tree.tree.token[0] == v.u.verify.bonus,
               "verify: expected the round-2 tree rooted at the bonus token");
        ms_wire_msg e = {.type = MS_WIRE_END, .request_id = 5};
        send_msg(s, &id, &e);
    }
    zmq_msg_close(&id);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return g_fail ? 1 : 0;
}

/* ---- flood: idle and trickling connections (issue 15) ------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmd_flood(int argc, char **argv) {
    if (argc != 6) return 2;
    int n_idle = atoi(argv[2]), n_trickle = atoi(argv[3]), n = n_idle + n_trickle;
    double max_s = atof(argv[4]);
    if (n_idle < 0 || n_trickle < 0 || n <= 0 || n > 4000 || !(max_s > 0)) return 2;
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    double *opened = calloc((size_t)n, sizeof *opened), *closed_at = calloc((size_t)n, sizeof *closed_at);
    int *got408 = calloc((size_t)n, sizeof *got408);
    size_t *sent = calloc((size_t)n, sizeof *sent);
    if (!pf || !opened || !closed_at || !got408 || !sent) DIE("flood: out of memory");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    if (inet_pton(AF_INET, argv[0], &a.sin_addr) != 1) DIE("flood: bad host %s", argv[0]);
    for (int i = 0; i < n; i++) {
        pf[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        if (pf[i].fd < 0 || connect(pf[i].fd, (struct sockaddr *)&a, sizeof a) != 0)
            DIE("flood: connection %d: %s", i, strerror(errno));
        pf[i].events = POLLIN;
        opened[i] = now_s();
    }
    spit(argv[5], "ready\n", 6);
    static const char head[] = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    double start = now_s(), next_drip = start;
    int open_n = n;
    while (open_n > 0 && now_s() - start < max_s) {
        if (now_s() >= next_drip) {
            next_drip += 0.25;
            for (int i = n_idle; i < n; i++) {
                if (closed_at[i] > 0) continue;
                char c = sent[i] < sizeof head - 1 ? head[sent[i]] : 'a';
                if (send(pf[i].fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) sent[i]++;
            }
        }
        if (poll(pf, (nfds_t)n, 50) <= 0) continue;
        for (int i = 0; i < n; i++) {
            if (!pf[i].revents || closed_at[i] > 0) continue;
            char buf[512];
            ssize_t r = recv(pf[i].fd, buf, sizeof buf - 1, MSG_DONTWAIT);
            if (r > 0) {
                buf[r] = 0;
                if (!strncmp(buf, "HTTP/1.1 408", 12)) got408[i] = 1;
                continue;
            }
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            closed_at[i] = now_s();
            pf[i].events = 0;
            pf[i].fd = -pf[i].fd - 1; /* poll ignores negative descriptors */
            open_n--;
        }
    }
    for (int g = 0; g < 2; g++) {
        int lo = g ? n_idle : 0, hi = g ? n : n_idle, nc = 0, n408 = 0;
        double longest = 0;
        for (int i = lo; i < hi; i++) {
            double t = (closed_at[i] > 0 ? closed_at[i] : now_s()) - opened[i];
            if (t > longest) longest = t;
            nc += closed_at[i] > 0;
            n408 += got408[i];
        }
        const char *k = g ? "trickle" : "idle";
        printf("%s_closed=%d\n%s_408=%d\n%s_longest_s=%.2f\n", k, nc, k, n408, k, longest);
    }
    for (int i = 0; i < n; i++) close(pf[i].fd >= 0 ? pf[i].fd : -pf[i].fd - 1);
    free(pf), free(opened), free(closed_at), free(got408), free(sent);
    return 0;
}

/* ---- junk: an unauthenticated flood of the link (issue 35) -------------------------- */

static int cmd_junk(int argc, char **argv) {
    if (argc != 2) return 2;
    int n = atoi(argv[1]);
    if (n <= 0 || n > 1000000) return 2;
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 5000, hwm = 100000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger); /* bounded: the frames go out before the close */
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (zmq_connect(s, argv[0]) != 0) DIE("junk: connect %s: %s", argv[0], zmq_strerror(zmq_errno()));
    ms_rng rng;
    ms_rng_seed(&rng, 35);
    int sent = 0;
    double end = now_s() + 30;
    while (sent < n && now_s() < end) {
        uint8_t junk[200];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)ms_rng_u64(&rng);
        if (zmq_send(s, junk, sizeof junk, ZMQ_DONTWAIT) == (int)sizeof junk) sent++;
        else usleep(1000);
    }
    printf("sent=%d\n", sent);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return sent == n ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: itest-tool COMMAND ARGS... (see the source header)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ms_log_set_level(MS_LOG_WARN);
    if (ms_wire_arena_new(0, &g_arena) < 0) return 1;
    const char *c = argv[1];
    int ac = argc - 2;
    char **av = argv + 2;
    int rc = 2;
    if (!strcmp(c, "free-port")) rc = cmd_free_port(ac, av);
    else if (!strcmp(c, "prompts")) rc = cmd_prompts(ac, av);
    else if (!strcmp(c, "body")) rc = cmd_body(ac, av);
    else if (!strcmp(c, "text")) rc = cmd_text(ac, av);
    else if (!strcmp(c, "get")) rc = cmd_get(ac, av);
    else if (!strcmp(c, "sse")) rc = cmd_sse(ac, av);
    else if (!strcmp(c, "stats-eq")) rc = cmd_stats_eq(ac, av);
    else if (!strcmp(c, "disconnect")) rc = cmd_disconnect(ac, av);
    else if (!strcmp(c, "keypair")) rc = cmd_keypair(ac, av);
    else if (!strcmp(c, "poke-target")) rc = cmd_poke_target(ac, av);
    else if (!strcmp(c, "hello")) rc = cmd_hello(ac, av);
    else if (!strcmp(c, "fake-target")) rc = cmd_fake_target(ac, av);
    else if (!strcmp(c, "flood")) rc = cmd_flood(ac, av);
    else if (!strcmp(c, "junk")) rc = cmd_junk(ac, av);
    if (rc == 2) fprintf(stderr, "itest-tool: bad usage of '%s' (see the source header)\n", c);
    ms_wire_arena_free(&g_arena);
    ms_wire_buf_free(&g_buf);
    return rc;
}
