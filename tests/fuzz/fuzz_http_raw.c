/* fuzz_http_raw — arbitrary bytes as a raw HTTP/1.1 connection to the real
 * front end (ms_http: libmicrohttpd 0.9.75, the framing, Host and Origin
 * checks, the body parser, the queue, SSE) over loopback, with a stub backend
 * that answers at once (issue 35, acceptance 3).
 *
 * One server for the whole run. Each input is sent on a fresh connection,
 * which is then half-closed (so an unfinished request ends at once and a
 * waiting generation is cancelled, as a client that hangs up is), and the
 * answer read until the server closes (bounded). The input fails when
 *   - the answer is not a sequence of whole HTTP/1.1 responses (a second
 *     status line inside a response, bytes that are not a status line, a
 *     status outside 100..599);
 *   - an error response (4xx/5xx) is not the API's JSON error object
 *     (application/json, {"error": {"message": string, ...}});
 *   - the server then does not answer GET /health with 200;
 * and, under the sanitizers, on any memory error or undefined behaviour. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ms_http.h"

#define ANSWER_MAX (1 << 20)
#define READ_BOUND_S 5.0

/* How the last read_all ended: "close", "reset (...)", "bound", "full". */
static char g_read_end[96];

/* The input fails: say why, with the answer's start, so a CI log names the
 * cause (libFuzzer keeps the input). */
static _Noreturn void fail(const char *why, const char *a, size_t n) {
    fprintf(stderr, "fuzz_http_raw: %s (read ended: %s); the answer, %zu bytes, begins:\n%.*s\n", why, g_read_end, n,
            (int)(n < 800 ? n : 800), a ? a : "");
    abort();
}

static ms_status stub_run(void *ctx, const ms_http_request *req, bool (*emit)(void *, const char *, size_t),
                          void *ectx, ms_gen_stats *stats, char *finish, size_t cap, ms_http_error *err) {
    static const char *const pieces[] = {"Once", " upon", " a time"};
    int64_t n = req->max_tokens < 3 ? req->max_tokens : 3;
    memset(stats, 0, sizeof *stats);
    stats->prompt_tokens = 1;
    for (int64_t i = 0; i < n; i++) {
        stats->new_tokens++;
        if (!emit(ectx, pieces[i], strlen(pieces[i]))) return MS_ERR_CANCELLED;
    }
    snprintf(finish, cap, "%s", n == req->max_tokens ? "length" : "stop");
    return MS_OK;
}

static int g_port;

static void server_once(void) {
    if (g_port) return;
    ms_log_set_level(MS_LOG_ERROR);
    static ms_http *h;
    ms_http_backend be = {.run = stub_run};
    ms_http_opts o = {.listen = "127.0.0.1", .port = 0, .queue = 4, .max_tokens_default = 3, .max_tokens_limit = 16,
                      .model_name = "fuzz", .header_timeout_s = 2, .idle_timeout_s = 5, .request_timeout_s = 5,
                      .max_connections = 64};
    if (ms_http_start(&o, &be, &h) != MS_OK) abort();
    g_port = ms_http_port(h); /* h lives for the process */
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A connect that a signal interrupted goes on in the kernel (with a send
 * timeout set it is never restarted): wait for it, 10 s at most, and take its
 * result. 0, or -1 with errno. */
static int connect_finish(int fd) {
    double end = now_s() + 10.0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n = poll(&p, 1, 100);
        if (n > 0) break;
        if (n < 0 && errno != EINTR) return -1;
        if (now_s() > end) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
    errno = err;
    return err ? -1 : 0;
}

/* One connection from source address 127.0.0.(1 + src % 250); -1 with errno
 * set when connect fails. */
static int connect_from(unsigned src) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) abort();
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    /* The port is chosen at connect, for the whole 4-tuple: a port chosen at
     * bind may be one whose earlier connection to the server still waits in
     * TIME_WAIT, and connect then fails (EADDRNOTAVAIL). */
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = 0};
    from.sin_addr.s_addr = htonl(0x7f000001u + src % 250u);
    if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0) abort();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int r = connect(fd, (struct sockaddr *)&a, sizeof a);
    if (r != 0 && errno == EINTR) r = connect_finish(fd); /* a signal (libFuzzer's timer) is no failure */
    if (r == 0) return fd;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

static int connect_port(void) {
    /* Each run makes two connections, and the server's side of each closed
     * one waits in TIME_WAIT for a minute, holding its (address, port) pair:
     * from one source address, ~40,000 runs used up the ephemeral ports and
     * connect failed (EADDRNOTAVAIL), not the server. The source rotates over
     * 127.0.0.1-127.0.0.250 (all of 127/8 is this host); a source out of
     * ports (the client's resource, not the server's) passes to the next. */
    static unsigned src;
    for (int tries = 0; tries < 250; tries++) {
        int fd = connect_from(src++);
        if (fd >= 0) return fd;
        if (errno != EADDRNOTAVAIL) break;
    }
    fprintf(stderr, "fuzz_http_raw: connect to the server failed: %s\n", strerror(errno));
    abort(); /* the server must still accept */
}

/* Everything the server sends until it closes (or READ_BOUND_S). */
static size_t read_all(int fd, char *out, size_t cap) {
    size_t n = 0;
    double end = now_s() + READ_BOUND_S;
    snprintf(g_read_end, sizeof g_read_end, "full");
    for (;;) {
        if (n >= cap - 1) break;
        if (now_s() >= end) {
            snprintf(g_read_end, sizeof g_read_end, "bound of %.0f s", READ_BOUND_S);
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        ssize_t got = recv(fd, out + n, cap - 1 - n, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) {
            snprintf(g_read_end, sizeof g_read_end, "%s", got == 0 ? "close" : strerror(errno));
            break;
        }
        n += (size_t)got;
    }
    out[n] = 0;
    return n;
}

static const char *find_ci(const char *hay, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (!strncasecmp(hay + i, needle, m)) return hay + i;
    return NULL;
}

/* The value of a header in head[0..n) ("" if absent). */
static void header_value(const char *head, size_t n, const char *name, char *out, size_t cap) {
    out[0] = 0;
    char key[64];
    snprintf(key, sizeof key, "\r\n%s:", name);
    const char *k = find_ci(head, n, key);
    if (!k) return;
    k += strlen(key);
    while (*k == ' ') k++;
    size_t len = strcspn(k, "\r\n");
    if (len >= cap) len = cap - 1;
    memcpy(out, k, len);
    out[len] = 0;
}

static void check_error_body(const char *body, size_t n, const char *head, size_t head_n) {
    char type[128];
    header_value(head, head_n, "Content-Type", type, sizeof type);
    json_t *o = json_loadb(body, n, 0, NULL);
    json_t *e = json_object_get(o, "error");
    if (strncasecmp(type, "application/json", 16) != 0 || !json_is_string(json_object_get(e, "message")) ||
        !json_is_string(json_object_get(e, "type"))) {
        fprintf(stderr, "fuzz_http_raw: an error answer not in the API's JSON shape:\n%.*s%.*s\n", (int)head_n, head,
                (int)(n < 600 ? n : 600), body);
        abort();
    }
    json_decref(o);
}

/* The answer must be whole responses one after another. */
static void check_answer(const char *a, size_t n) {
    size_t at = 0;
    while (at < n) {
        const char *r = a + at;
        size_t left = n - at;
        int code = 0;
        if (left < 12 || strncmp(r, "HTTP/1.", 7) != 0 || sscanf(r + 9, "%3d", &code) != 1 || code < 100 || code > 599)
            fail("not a status line where one must be", a, n);
        const char *end = find_ci(r, left, "\r\n\r\n");
        if (!end) return; /* cut by the read bound: nothing more to say */
        size_t head_n = (size_t)(end - r) + 2, body_at = head_n + 2;
        if (find_ci(r + 12, head_n - 12, "\r\nHTTP/1.")) fail("a second status line inside a head", a, n);
        if (code < 200 || code == 204 || code == 304) {
            at += body_at;
            continue;
        }
        char cl[32], te[32];
        header_value(r, head_n, "Content-Length", cl, sizeof cl);
        header_value(r, head_n, "Transfer-Encoding", te, sizeof te);
        size_t body_n;
        if (cl[0]) {
            body_n = (size_t)strtoull(cl, NULL, 10);
            /* A HEAD answer announces a length it does not send: the next
             * status line follows at once (no JSON body starts so). */
            bool next_is_status = left - body_at >= 7 && !strncmp(r + body_at, "HTTP/1.", 7);
            if (next_is_status) body_n = 0;
            else if (body_at + body_n > left) return; /* cut by the read bound */
        } else if (!strcasecmp(te, "chunked")) {
            return; /* an SSE stream: its content is test_http's and the integration tests' */
        } else {
            body_n = left - body_at; /* until the close */
        }
        if (code >= 400 && body_n > 0) check_error_body(r + body_at, body_n, r, head_n);
        if (code >= 400 && body_n == 0 && strncmp(r, "HTTP/1.1 408", 12) != 0) {
            char type[128]; /* no body: at least not the library's HTML */
            header_value(r, head_n, "Content-Type", type, sizeof type);
            if (find_ci(type, strlen(type), "html")) fail("an error answer in HTML", a, n);
        }
        at += body_at + body_n;
    }
}

static void check_alive(void) {
    int fd = connect_port();
    static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) fail("GET /health not sent", "", 0);
    char buf[4096];
    read_all(fd, buf, sizeof buf);
    close(fd);
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0) fail("GET /health after the input not answered 200", buf, strlen(buf));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    server_once();
    static char *answer;
    if (!answer && !(answer = malloc(ANSWER_MAX))) abort();
    int fd = connect_port();
    size_t off = 0;
    while (off < size) { /* the server may close early (an error answer): stop sending then */
        ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    size_t n = read_all(fd, answer, ANSWER_MAX);
    close(fd);
    check_answer(answer, n);
    check_alive();
    return 0;
}
