/* ms_http.c — OpenAI-compatible HTTP front end of the target node (docs/architecture.md §7).
 *
 * Threading. libmicrohttpd runs with MHD_USE_THREAD_PER_CONNECTION (and its
 * internal accept thread). Generation is batch 1, so at most one connection
 * is busy streaming and at most `queue` wait; the rest are answered at once
 * (503, health, metrics). One thread per connection lets a connection block
 * plainly — on the job's condition variable — both while its non-streamed
 * request waits and inside the SSE content reader, without suspending and
 * resuming connections or busy-polling (a reader returning 0 spins in MHD's
 * internal-polling modes).
 *
 * Overload (issue 15). Every connection is tracked from MHD's connection
 * notification (a `peer`). Past max_connections a connection is marked
 * overflow: its request is answered 503 + "Connection: close" (/health is
 * still answered) and it gets 1 s to send it; MHD's own limit sits a reserve
 * above, and only past that is a socket closed unanswered. MHD's timeout is
 * an idle timeout, which a client sending a byte a second never reaches, so a
 * reaper thread enforces a total deadline on receiving each request (line,
 * headers and body): a peer not yet answering a request past its deadline
 * gets a 408 and shutdown(2), which wakes MHD's connection thread to close it. MHD calls the CLOSED
 * notification before close(2), and both run under h->cmu, so the reaper
 * never touches a reused descriptor.
 *
 * One worker thread owns the backend: it pops jobs in FIFO order and calls
 * backend.run; the run's emit callback appends text to the job under h->mu,
 * applies stop strings, formats SSE chunks, and signals the job's condition.
 *
 * Cancellation. A job is cancelled when (a) MHD reports its request ended
 * other than COMPLETED_OK (write error mid-stream, timeout, shutdown), or (b)
 * the connection thread, waking every 100 ms while it waits, finds the socket
 * closed by the peer (recv MSG_PEEK → 0 or a hard error). (b) matters because
 * MHD itself does not watch a socket while our callback blocks. A cancelled
 * queued job leaves the queue at once; a running one sees emit return false.
 * A client that half-closes (shutdown(SHUT_WR)) while waiting is taken as gone.
 *
 * Job lifetime: reference counted under h->mu — one reference for the
 * connection (dropped in the request-completed callback), one for the queue
 * and worker, one for an SSE response (dropped in its free callback).
 *
 * Framing and the library's own errors (issue 35.4). libmicrohttpd 0.9.75
 * parses the request head itself and offers no hook between its header
 * parser and its own error answers: a Content-Length it cannot read, a header
 * line without a colon, a head or line too large for its buffer (400, 413,
 * 414, 431) are answered with its HTML page, and for an unreadable
 * Content-Length it then formats the response head a second time (two status
 * lines), never calling the handler. What it does do, on the connection's own
 * thread and before it queues that answer, is log "Error processing request
 * (HTTP response code is %u ...)" through MHD_OPTION_EXTERNAL_LOGGER. The
 * logger therefore answers there: it writes the API's JSON error with that
 * status to the socket and shuts the socket for writing, so the library's
 * own bytes fail (EPIPE) and the connection closes after exactly one status
 * line. It finds the socket through a thread-local peer that the URI log
 * callback sets when the request line has been read (each connection has its
 * own thread); the errors on a connection's first request line (its version:
 * 400, 505; its length: 414) come before that, so the peer is then the one
 * connection still without a request line that has received bytes (for a 414,
 * more than a request line needs); when several could be it, the library's
 * HTML goes out (counted in /metrics: not fixable from outside the library). What the library
 * parses but does not refuse — two Content-Length values, Transfer-Encoding
 * with Content-Length, control characters (a bare CR) inside a header, no
 * Host — the handler refuses at its first call from the parsed header list.
 */
#include "ms_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <linux/tcp.h> /* struct tcp_info: tcpi_state, tcpi_bytes_received */
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ms_origin.h"

#define WAIT_SLICE_MS 100 /* how often a waiting connection checks its socket */
#define STOP_DRAIN_S 5.0  /* ms_http_stop waits this long for answers to go out */
#define REAP_SLICE_MS 100 /* how often the reaper looks at the header deadlines */
#define OVERFLOW_GRACE_S 1.0 /* an overflow connection's time to send its request */
#define LIB_LOG_BURST 16     /* library log lines written at once; then one per LIB_LOG_REFILL_S */
#define LIB_LOG_REFILL_S 5.0
#define LINE_414_MIN 4096    /* bytes a connection must have sent before its request line can overflow */

/* ---- a growable byte buffer ---------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
} buf;

static bool buf_add(buf *b, const void *data, size_t n) {
    if (n > SIZE_MAX - b->n - 1) return false;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap = cap > SIZE_MAX / 2 ? b->n + n + 1 : cap * 2;
        char *p = ms_realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

static bool buf_str(buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

static void buf_free(buf *b) {
    free(b->p);
    *b = (buf){0};
}

/* ---- UTF-8 ---------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at s[0..n), 0 if ill-formed
 * (overlongs, surrogates, > U+10FFFF, truncated). */
static size_t utf8_valid(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (need == 0 || n < need) return 0;
    for (size_t i = 1; i < need; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] >= 0x90))
        return 0;
    return need;
}

/* The largest cut' ≤ cut such that s[0..cut') does not end inside a
 * multi-byte character whose lead byte is before cut' (a stream chunk never
 * splits a character; ill-formed bytes pass through). */
static size_t utf8_safe_cut(const char *str, size_t n, size_t cut) {
    const unsigned char *s = (const unsigned char *)str;
    if (cut > n) cut = n;
    size_t i = cut;
    int back = 0;
    while (i > 0 && back < 3 && (s[i - 1] & 0xC0) == 0x80) i--, back++;
    if (i == 0) return cut;
    unsigned c = s[i - 1];
    size_t need = c < 0xC2 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 1;
    return need > cut - (i - 1) ? i - 1 : cut;
}

/* A JSON string of s[0..n), each ill-formed byte replaced by U+FFFD. */
static json_t *json_text(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    buf b = {0};
    if (!buf_add(&b, "", 0)) return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_valid(s + i, n - i);
        if (k == 0) {
            if (!buf_add(&b, "\xEF\xBF\xBD", 3)) break;
            i++;
        } else {
            if (!buf_add(&b, s + i, k)) break;
            i += k;
        }
    }
    json_t *j = json_stringn(b.p, b.n);
    buf_free(&b);
    return j;
}

static json_t *jreal(double x) { return json_real(isfinite(x) ? x : 0.0); }

/* ---- request parsing ------------------------------------------------------ */

void ms_http_request_free(ms_http_request *r) {
    if (!r) return;
    free(r->prompt);
    for (int64_t i = 0; i < r->n_messages; i++) free((char *)r->messages[i].content);
    free(r->messages);
    r->prompt = NULL;
    r->messages = NULL;
    r->n_messages = 0;
}

__attribute__((format(printf, 5, 6))) static ms_status parse_fail(ms_http_request *r, char *err, size_t cap,
                                                                  const char *param, const char *fmt, ...) {
    ms_http_request_free(r);
    snprintf(r->err_param, sizeof r->err_param, "%s", param);
    if (cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return MS_ERR_INVALID;
}

/* A member that is present and not null, else NULL. */
static json_t *field(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static const struct {
    const char *name;
    ms_chat_role role;
} k_roles[] = {{"system", MS_ROLE_SYSTEM}, {"developer", MS_ROLE_SYSTEM}, {"user", MS_ROLE_USER},
               {"assistant", MS_ROLE_ASSISTANT}};

/* content: a string, or an array of {"type": "text", "text": string} parts (concatenated). */
static char *message_content(json_t *c) {
    if (json_is_string(c)) return strdup(json_string_value(c));
    if (!json_is_array(c)) return NULL;
    buf b = {0};
    if (!buf_add(&b, "", 0)) return NULL;
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0 || !json_is_string(text) ||
            !buf_add(&b, json_string_value(text), json_string_length(text))) {
            buf_free(&b);
            return NULL;
        }
    }
    return b.p;
}

static ms_status parse_messages(json_t *msgs, ms_http_request *r, char *err, size_t cap) {
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return parse_fail(r, err, cap, "messages", "'messages' must be a non-empty array of {role, content} objects");
    size_t n = json_array_size(msgs);
    if (n > MS_HTTP_MAX_MESSAGES)
        return parse_fail(r, err, cap, "messages", "'messages' has %zu entries; at most %d are accepted", n,
                          MS_HTTP_MAX_MESSAGES);
    r->messages = ms_calloc(n, sizeof *r->messages);
    if (!r->messages) return parse_fail(r, err, cap, "messages", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        char param[48];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) return parse_fail(r, err, cap, param, "'%s' must be an object", param);
        json_t *role = json_object_get(m, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        int k = -1;
        for (int t = 0; json_is_string(role) && t < (int)(sizeof k_roles / sizeof k_roles[0]); t++)
            if (strcmp(json_string_value(role), k_roles[t].name) == 0) k = t;
        if (k < 0) return parse_fail(r, err, cap, param, "'%s' must be one of system, user, assistant", param);
        snprintf(param, sizeof param, "messages[%zu].content", i);
        char *content = message_content(json_object_get(m, "content"));
        if (!content)
            return parse_fail(r, err, cap, param, "'%s' must be a string (or an array of text parts)", param);
        r->messages[i] = (ms_chat_msg){k_roles[k].role, content};
        r->n_messages = (int64_t)i + 1;
        /* Issue 35: an empty message is a client's mistake, not a prompt. */
        if (!content[0]) return parse_fail(r, err, cap, param, "'%s' is empty", param);
    }
    /* Issue 35: a chat is answered from what the user said; without a user
     * message (an assistant's alone, or a system prompt alone) there is
     * nothing to answer. */
    bool user = false;
    for (int64_t i = 0; i < r->n_messages; i++) user |= r->messages[i].role == MS_ROLE_USER;
    if (!user) return parse_fail(r, err, cap, "messages", "'messages' has no message with role \"user\"");
    return MS_OK;
}

static ms_status parse_stop(json_t *v, ms_http_request *r, char *err, size_t cap) {
    json_t *one[1] = {v};
    json_t **items = one;
    size_t n = 1;
    json_t *arr[MS_HTTP_MAX_STOP];
    if (json_is_array(v)) {
        n = json_array_size(v);
        if (n > MS_HTTP_MAX_STOP)
            return parse_fail(r, err, cap, "stop", "'stop' has %zu strings; at most %d are accepted", n,
                              MS_HTTP_MAX_STOP);
        for (size_t i = 0; i < n; i++) arr[i] = json_array_get(v, i);
        items = arr;
    }
    for (size_t i = 0; i < n; i++) {
        if (!json_is_string(items[i]))
            return parse_fail(r, err, cap, "stop", "'stop' must be a string or an array of strings");
        size_t len = json_string_length(items[i]);
        if (len == 0 || len > MS_HTTP_MAX_STOP_LEN)
            return parse_fail(r, err, cap, "stop", "each stop string must be 1 to %d bytes long", MS_HTTP_MAX_STOP_LEN);
        memcpy(r->stop[i], json_string_value(items[i]), len);
        r->stop[i][len] = 0;
        r->stop_len[i] = len;
        r->n_stop = (int)i + 1;
    }
    return MS_OK;
}

static ms_status parse_object(json_t *root, bool chat, ms_http_request *r, char *err, size_t cap) {
    if (!json_is_object(root)) return parse_fail(r, err, cap, "", "the request body must be a JSON object");
    json_t *v;
    if ((v = field(root, "model"))) {
        if (!json_is_string(v) || json_string_length(v) >= MS_HTTP_MODEL_MAX)
            return parse_fail(r, err, cap, "model", "'model' must be a string shorter than %d bytes", MS_HTTP_MODEL_MAX);
        memcpy(r->model, json_string_value(v), json_string_length(v) + 1);
    }
    if (chat) {
        MS_TRY(parse_messages(field(root, "messages"), r, err, cap));
    } else {
        v = field(root, "prompt");
        if (json_is_array(v) && json_array_size(v) == 1) v = json_array_get(v, 0); /* ["text"] */
        if (!json_is_string(v)) return parse_fail(r, err, cap, "prompt", "'prompt' must be a string");
        /* Issue 35: nothing to continue (and no BOS to start from on some models). */
        if (json_string_length(v) == 0) return parse_fail(r, err, cap, "prompt", "'prompt' is empty");
        r->prompt_len = json_string_length(v);
        r->prompt = ms_malloc(r->prompt_len + 1);
        if (!r->prompt) return parse_fail(r, err, cap, "prompt", "out of memory");
        memcpy(r->prompt, json_string_value(v), r->prompt_len + 1);
    }
    const char *mt_name = "max_tokens";
    v = field(root, "max_tokens");
    if (!v && (v = field(root, "max_completion_tokens"))) mt_name = "max_completion_tokens";
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > MS_HTTP_MAX_TOKENS_CAP)
            return parse_fail(r, err, cap, mt_name, "'%s' must be an integer between 1 and %d", mt_name,
                              MS_HTTP_MAX_TOKENS_CAP);
        r->max_tokens = json_integer_value(v);
    }
    if ((v = field(root, "temperature"))) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0.0 && json_number_value(v) <= 2.0))
            return parse_fail(r, err, cap, "temperature", "'temperature' must be a number between 0 and 2");
        r->temperature = json_number_value(v);
    }
    if ((v = field(root, "top_p"))) {
        if (!json_is_number(v) || !(json_number_value(v) > 0.0 && json_number_value(v) <= 1.0))
            return parse_fail(r, err, cap, "top_p", "'top_p' must be a number in (0, 1]");
        /* The sampler works in float: a top_p that rounds to 0.0f would turn
         * filtering off (sample from everything). The smallest positive float
         * keeps just the most likely token, as the value asks: greedy. */
        r->top_p = json_number_value(v) < (double)FLT_TRUE_MIN ? (double)FLT_TRUE_MIN : json_number_value(v);
    }
    if ((v = field(root, "seed"))) {
        if (!json_is_integer(v)) return parse_fail(r, err, cap, "seed", "'seed' must be an integer");
        r->seed = (uint64_t)json_integer_value(v);
        r->has_seed = true;
    }
    if ((v = field(root, "stop"))) MS_TRY(parse_stop(v, r, err, cap));
    if ((v = field(root, "stream"))) {
        if (!json_is_boolean(v)) return parse_fail(r, err, cap, "stream", "'stream' must be true or false");
        r->stream = json_is_true(v);
    }
    if ((v = field(root, "n")) && !(json_is_integer(v) && json_integer_value(v) == 1))
        return parse_fail(r, err, cap, "n", "only 'n': 1 is supported");
    return MS_OK;
}

/* Where a JSON error is: the path of the value that starts at byte `at` of
 * body ("max_tokens", "messages[0].content"; "" at the top level or where no
 * key is known), from a scan of the bytes before it. The prefix was accepted
 * by the parser up to there, so only strings, brackets, ':' and ',' matter. */
#define JPATH_DEPTH 8
typedef struct {
    bool obj, have_key; /* an object; its member's key and ':' were read */
    char key[40];
    long idx;           /* an array's element */
} jframe;

static void json_path_at(const char *body, size_t at, char *out, size_t cap) {
    jframe st[JPATH_DEPTH];
    int depth = 0, over = 0; /* frames past JPATH_DEPTH are counted, not kept */
    bool key_next = false;   /* in an object, the next string is a key */
    for (size_t i = 0; i < at; i++) {
        char ch = body[i];
        if (ch == '"') {
            size_t j = i + 1;
            while (j < at && body[j] != '"') j += body[j] == '\\' ? 2 : 1;
            if (j > at) j = at; /* an escape's second byte past the end */
            if (key_next && !over && depth > 0 && st[depth - 1].obj) {
                size_t n = j - i - 1 < sizeof st[0].key - 1 ? j - i - 1 : sizeof st[0].key - 1;
                memcpy(st[depth - 1].key, body + i + 1, n);
                st[depth - 1].key[n] = 0;
                st[depth - 1].have_key = false; /* until its ':' */
            }
            i = j;
        } else if (ch == '{' || ch == '[') {
            if (over || depth == JPATH_DEPTH) over++;
            else st[depth++] = (jframe){.obj = ch == '{'};
            key_next = ch == '{';
        } else if (ch == '}' || ch == ']') {
            if (over) over--;
            else if (depth > 0) depth--;
            key_next = false;
        } else if (ch == ':') {
            if (!over && depth > 0) st[depth - 1].have_key = true;
            key_next = false;
        } else if (ch == ',') {
            if (!over && depth > 0) {
                if (st[depth - 1].obj) st[depth - 1].have_key = false, key_next = true;
                else st[depth - 1].idx++;
            }
        }
    }
    size_t k = 0;
    out[0] = 0;
    for (int d = 0; d < depth && k + 1 < cap; d++) {
        int w = 0;
        if (!st[d].obj) w = snprintf(out + k, cap - k, "[%ld]", st[d].idx);
        else if (st[d].have_key) w = snprintf(out + k, cap - k, "%s%s", k ? "." : "", st[d].key);
        else break; /* inside an object, not at a member's value */
        if (w < 0 || (size_t)w >= cap - k) break;
        k += (size_t)w;
    }
    if (k > 0 && out[0] == '[') out[0] = 0; /* a top-level array is refused anyway: no field to name */
}

ms_status ms_http_parse_request(const char *body, size_t len, bool chat, ms_http_request *out, char *err, size_t cap) {
    MS_ASSERT(out && (body || len == 0) && (err || cap == 0));
    memset(out, 0, sizeof *out);
    out->chat = chat;
    out->temperature = 1.0;
    out->top_p = 1.0;
    if (cap) err[0] = 0;
    if (len == 0) return parse_fail(out, err, cap, "", "the request body is empty; a JSON object is expected");
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* Issue 35: say where. jansson's position is where it stopped, mostly
         * the end of the bad token it quotes ("near 'NaN'"): its start is the
         * byte a client can find, and the value's key names the field. */
        size_t at = je.position > 0 && (size_t)je.position <= len ? (size_t)je.position : 0;
        const char *near = strstr(je.text, " near '");
        if (near) {
            near += 7;
            size_t n = strlen(near);
            if (n > 0 && near[n - 1] == '\'') n--;
            if (n > 0 && n <= at && memcmp(body + at - n, near, n) == 0) at -= n;
        }
        char path[sizeof out->err_param];
        json_path_at(body, at, path, sizeof path);
        return parse_fail(out, err, cap, path, "the request body is not valid JSON at byte %zu%s%s (line %d, column %d): %s",
                          at, path[0] ? ", in " : "", path, je.line, je.column, je.text);
    }
    ms_status s = parse_object(root, chat, out, err, cap);
    json_decref(root);
    return s;
}

/* ---- server state ----------------------------------------------------------- */

typedef enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE } job_state;

typedef struct job job;
struct job {
    job *next;          /* queue link */
    ms_http *h;
    int refs;           /* under h->mu */
    pthread_cond_t cv;  /* state or output changed (with h->mu) */
    ms_http_request req;
    char id[48];
    long long created;
    char model[MS_HTTP_MODEL_MAX];
    int fd;             /* client socket, polled for a hang-up; -1 unknown */
    job_state state;
    bool cancelled;     /* the client went away */
    bool stopped;       /* a stop string was hit */
    bool nomem;
    bool role_sent;     /* chat stream: the first chunk carried the role */
    bool sse_started;   /* the SSE response has been queued */
    buf gen;            /* text emitted so far, cut before a stop string */
    size_t released;    /* bytes of gen passed on as stream chunks */
    size_t hold;        /* longest stop string − 1: held back while streaming */
    buf sse;            /* SSE bytes not yet read by MHD (from sse_off) */
    size_t sse_off;
    /* result (valid once JOB_DONE) */
    ms_status status;
    int http_code;      /* on failure */
    char errmsg[272];
    ms_gen_stats stats;
    char stop_reason[32];
    char finish[16];
    ms_http_error berr;  /* what the backend reported with its failure */
    double t_arrive;     /* ms_now_s() when queued */
    double deadline;     /* request_timeout_s after the run started; 0 → none */
    double t_last_emit;  /* previous text emission (0 before the first) */
    bool timed_out;
};

/* Status codes counted in /metrics; the last slot takes any other. */
static const int k_codes[] = {200, 204, 400, 401, 403, 404, 405, 408, 413, 414, 431, 500, 503, 0};
#define N_CODES ((int)(sizeof k_codes / sizeof k_codes[0]))

/* Prometheus histograms: cumulative counts per upper bound (seconds), +Inf last. */
static const double k_lat_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
static const double k_itl_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
#define N_LAT ((int)(sizeof k_lat_bounds / sizeof k_lat_bounds[0]))
#define N_ITL ((int)(sizeof k_itl_bounds / sizeof k_itl_bounds[0]))
#define HIST_MAX 16

typedef struct {
    uint64_t bucket[HIST_MAX + 1]; /* bucket[k]: observations ≤ bounds[k] (not cumulative); [n]: above all */
    uint64_t count;
    double sum;
} hist;

static void hist_add(hist *hg, const double *bounds, int n, double x) {
    int k = 0;
    while (k < n && x > bounds[k]) k++;
    hg->bucket[k]++;
    hg->count++;
    hg->sum += x;
}

typedef struct {
    uint64_t by_code[N_CODES];
    uint64_t rejected, cancelled, runs, failed, timeouts;
    uint64_t conn_rejected, conn_reaped; /* 503 for too many connections; 408 + closed past the header deadline */
    uint64_t framing, host_refused, origin_refused; /* issue 35: 400 framing, 403 Host, 403 Origin */
    uint64_t lib_json, lib_html; /* the library's own errors answered as JSON / left as its HTML */
    hist ttft, itl, duration;
    int64_t tokens, prompt_tokens, rounds, spec_rounds, vocab_sum, vocab_max, max_depth;
    int64_t accepted_ge[MS_TREE_MAX + 1];
    int64_t accepted_ngram; /* accepted draft tokens the n-gram source proposed (of Σ_d accepted_ge[d]) */
    double mal_sum;
    uint64_t mal_count;
    double prefill_s, draft_s, vocab_s, verify_s, accept_s, total_s;
} totals;

/* One open connection (MHD's socket context), under h->cmu. */
typedef struct peer peer;
struct peer {
    peer *prev, *next;
    int fd;
    double deadline; /* the current request must have arrived by then (unless busy) */
    bool busy;       /* a request was received and is being answered */
    bool overflow;   /* opened past max_connections: answered 503 */
    bool reaped;     /* 408 (or the library's error as JSON) sent and shut down */
    bool bound;      /* its thread has read a request line (tl_peer set) */
};

struct ms_http {
    struct MHD_Daemon *d;
    ms_http_backend be;
    int port, queue_cap, max_tokens_default, max_tokens_limit, max_conn;
    double header_timeout_s, request_timeout_s;
    pthread_mutex_t cmu;    /* the peers and their count; mu may be taken inside it, never cmu inside mu */
    peer *peers;
    int n_peers;
    pthread_t reaper;
    bool reaper_started, reaper_stop;
    pthread_cond_t reap_cv;
    char *token, *model_name;
    char *origins, *hosts;  /* allowed_origins, allowed_hosts */
    char listen[64];        /* the bound address literal */
    char self[256];         /* gethostname() */
    pthread_mutex_t lmu;    /* the library log budget */
    double log_tokens, log_t;
    uint64_t log_dropped;
    pthread_t worker;
    bool worker_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* a job was queued, or stopping */
    pthread_cond_t idle_cv; /* a connection let go of its job */
    job *head, *tail;
    int n_queued;
    job *running;
    int n_conn_jobs;        /* jobs still referenced by a connection */
    bool stopping;
    ms_rng rng;
    uint64_t next_id;
    totals t;
};

typedef enum { R_NONE, R_COMPLETIONS, R_CHAT, R_MODELS, R_MODEL, R_HEALTH, R_METRICS } route;

typedef struct {
    route r;
    buf body;
    bool too_big;
    job *job;
} conn;

static void cond_init_mono(pthread_cond_t *cv) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* Wait on cv for up to ms milliseconds; true when it timed out. */
static bool wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT;
}

/* Has the peer closed (or reset) the connection? Peeks, never consumes. */
static bool peer_gone(int fd) {
    if (fd < 0) return false;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return true;
    return r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void job_cancel_locked(ms_http *h, job *j);

/* One wait for j's condition (h->mu held), and, once per WAIT_SLICE_MS
 * however often the job wakes us, a look at the client's socket. True when
 * the client has gone (the job is then cancelled). */
static bool job_wait(ms_http *h, job *j, double *next_check) {
    wait_ms(&j->cv, &h->mu, WAIT_SLICE_MS);
    if (j->cancelled) return true;
    double now = ms_now_s();
    if (now < *next_check) return false;
    *next_check = now + WAIT_SLICE_MS * 1e-3;
    pthread_mutex_unlock(&h->mu);
    bool gone = peer_gone(j->fd);
    pthread_mutex_lock(&h->mu);
    if (gone) job_cancel_locked(h, j);
    return j->cancelled;
}

static void job_unref_locked(job *j) {
    MS_ASSERT(j->refs > 0);
    if (--j->refs > 0) return;
    ms_http_request_free(&j->req);
    buf_free(&j->gen);
    buf_free(&j->sse);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void queue_remove_locked(ms_http *h, job *j) {
    for (job **pp = &h->head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        if (*pp != j) continue;
        *pp = j->next;
        if (h->tail == j) h->tail = prev;
        j->next = NULL;
        h->n_queued--;
        job_unref_locked(j); /* the queue's reference */
        return;
    }
}

/* The client is gone: stop or drop the job. */
static void job_cancel_locked(ms_http *h, job *j) {
    if (j->cancelled || j->state == JOB_DONE) return;
    j->cancelled = true;
    h->t.cancelled++;
    MS_LOG_INFO("request %s: the client went away; cancelled (%s)", j->id,
                j->state == JOB_QUEUED ? "while queued" : "while running");
    if (j->state == JOB_QUEUED) {
        j->state = JOB_DONE;
        queue_remove_locked(h, j);
    }
    pthread_cond_broadcast(&j->cv);
}

/* ---- response bodies ------------------------------------------------------- */

/* OpenAI's error object; param and code are null when NULL or "". */
static json_t *error_json_code(const char *msg, const char *type, const char *param, const char *code) {
    json_t *e = json_object();
    json_t *m = json_string(msg);
    json_object_set_new(e, "message", m ? m : json_string("error"));
    json_object_set_new(e, "type", json_string(type));
    json_t *p = param && param[0] ? json_string(param) : NULL;
    json_object_set_new(e, "param", p ? p : json_null());
    json_t *k = code && code[0] ? json_string(code) : NULL;
    json_object_set_new(e, "code", k ? k : json_null());
    json_t *o = json_object();
    json_object_set_new(o, "error", e);
    return o;
}

static json_t *error_json(const char *msg, const char *type, const char *param) {
    return error_json_code(msg, type, param, NULL);
}

static json_t *stats_json(const ms_gen_stats *s, const char *stop_reason) {
    json_t *o = json_object();
    int64_t md = s->max_depth < 0 ? 0 : s->max_depth > MS_TREE_MAX ? MS_TREE_MAX : s->max_depth;
    json_t *acc = json_array();
    for (int64_t d = 1; d <= md; d++) json_array_append_new(acc, jreal(ms_gen_stats_accept_rate(s, d)));
    json_object_set_new(o, "mean_accepted_length", jreal(ms_gen_stats_mean_accepted(s)));
    json_object_set_new(o, "acceptance_by_depth", acc);
    json_object_set_new(o, "rounds", json_integer(s->rounds));
    json_object_set_new(o, "spec_rounds", json_integer(s->spec_rounds));
    json_object_set_new(o, "accepted", json_integer(ms_gen_stats_accepted(s)));
    json_object_set_new(o, "accepted_ngram", json_integer(s->accepted_ngram));
    json_object_set_new(o, "plain_rounds", json_integer(s->plain_rounds));
    json_object_set_new(o, "skipped_rounds", json_integer(s->skipped_rounds));
    json_object_set_new(o, "vocab_mean", jreal(s->spec_rounds > 0 ? (double)s->vocab_sum / (double)s->spec_rounds : 0));
    json_object_set_new(o, "vocab_max", json_integer(s->vocab_max));
    json_object_set_new(o, "coverage", jreal(ms_gen_stats_coverage(s)));
    json_object_set_new(o, "draft_failed", json_boolean(s->draft_failed));
    json_object_set_new(o, "prefill_ms", jreal(s->prefill_s * 1e3));
    json_object_set_new(o, "draft_backbone_ms", jreal(s->draft_backbone_s * 1e3));
    json_object_set_new(o, "draft_head_ms", jreal(s->draft_head_s * 1e3));
    json_object_set_new(o, "vocab_ms", jreal(s->vocab_s * 1e3));
    json_object_set_new(o, "verify_ms", jreal(s->verify_s * 1e3));
    json_object_set_new(o, "accept_ms", jreal(s->accept_s * 1e3));
    json_object_set_new(o, "total_ms", jreal(s->total_s * 1e3));
    json_object_set_new(o, "tokens_per_s", jreal(s->total_s > 0 ? (double)s->new_tokens / s->total_s : 0));
    if (stop_reason[0]) {
        json_t *sr = json_string(stop_reason);
        if (sr) json_object_set_new(o, "stop_reason", sr);
    }
    return o;
}

static json_t *usage_json(const ms_gen_stats *s) {
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(s->prompt_tokens));
    json_object_set_new(u, "completion_tokens", json_integer(s->new_tokens));
    json_object_set_new(u, "total_tokens", json_integer(s->prompt_tokens + s->new_tokens));
    return u;
}

static json_t *envelope(const job *j, const char *object) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(j->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(j->created));
    json_t *m = json_string(j->model);
    json_object_set_new(o, "model", m ? m : json_string(""));
    return o;
}

/* One choice: text (completions) / message or delta (chat), finish_reason or null. */
static json_t *choice(const job *j, json_t *text, bool delta, const char *finish, bool with_role) {
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(0));
    if (!j->req.chat) {
        json_object_set_new(c, "text", text ? text : json_string(""));
    } else {
        json_t *m = json_object();
        if (with_role) json_object_set_new(m, "role", json_string("assistant"));
        if (text) json_object_set_new(m, "content", text);
        json_object_set_new(c, delta ? "delta" : "message", m);
    }
    json_object_set_new(c, "logprobs", json_null());
    json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
    return c;
}

static json_t *full_response(const job *j) {
    json_t *o = envelope(j, j->req.chat ? "chat.completion" : "text_completion");
    json_t *ch = json_array();
    json_array_append_new(ch, choice(j, json_text(j->gen.p, j->gen.n), false, j->finish, true));
    json_object_set_new(o, "choices", ch);
    json_object_set_new(o, "usage", usage_json(&j->stats));
    json_object_set_new(o, "microspec", stats_json(&j->stats, j->stop_reason));
    return o;
}

static bool sse_event(job *j, json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    bool ok = s && buf_str(&j->sse, "data: ") && buf_str(&j->sse, s) && buf_str(&j->sse, "\n\n");
    free(s);
    return ok;
}

static bool sse_chunk(job *j, const char *text, size_t n) {
    json_t *o = envelope(j, j->req.chat ? "chat.completion.chunk" : "text_completion");
    json_t *ch = json_array();
    json_array_append_new(ch, choice(j, json_text(text, n), true, NULL, !j->role_sent));
    j->role_sent = true;
    json_object_set_new(o, "choices", ch);
    return sse_event(j, o);
}

static bool sse_final(job *j) {
    json_t *o = envelope(j, j->req.chat ? "chat.completion.chunk" : "text_completion");
    json_t *ch = json_array();
    json_array_append_new(ch, choice(j, j->req.chat ? NULL : json_string(""), true, j->finish, !j->role_sent));
    json_object_set_new(o, "choices", ch);
    json_object_set_new(o, "usage", usage_json(&j->stats));
    json_object_set_new(o, "microspec", stats_json(&j->stats, j->stop_reason));
    return sse_event(j, o) && buf_str(&j->sse, "data: [DONE]\n\n");
}

/* ---- the worker ---------------------------------------------------------------- */

/* Pass gen[released..) on as a stream chunk, keeping back `hold` bytes (a stop
 * string may still complete there) unless final, never splitting a character. */
static void release_text(job *j, bool final) {
    size_t upto = j->gen.n;
    if (!final) upto = utf8_safe_cut(j->gen.p, j->gen.n, j->gen.n > j->hold ? j->gen.n - j->hold : 0);
    if (upto <= j->released) return;
    if (j->req.stream && !sse_chunk(j, j->gen.p + j->released, upto - j->released)) j->nomem = true;
    j->released = upto;
}

/* Where the text must end: the start of the stop string that is completed
 * first (smallest end; on a tie the longer one), among matches starting at
 * ≥ from; SIZE_MAX if none. Byte by byte, not piece by piece, so the result
 * does not depend on how the backend split its text. */
static size_t find_stop(const job *j, size_t from) {
    size_t best = SIZE_MAX, best_end = SIZE_MAX;
    for (int k = 0; k < j->req.n_stop; k++) {
        size_t m = j->req.stop_len[k];
        for (size_t i = from; i + m <= j->gen.n && i + m <= best_end; i++)
            if (memcmp(j->gen.p + i, j->req.stop[k], m) == 0) {
                if (i + m < best_end || i < best) best = i, best_end = i + m;
                break;
            }
    }
    return best;
}

static bool emit(void *ectx, const char *text, size_t n) {
    job *j = ectx;
    ms_http *h = j->h;
    double now = ms_now_s();
    pthread_mutex_lock(&h->mu);
    if (j->deadline > 0 && now > j->deadline && !j->timed_out && j->state == JOB_RUNNING) {
        /* http.request_timeout_s: this piece is past the limit and is dropped. */
        j->timed_out = true;
        h->t.timeouts++;
        MS_LOG_INFO("request %s: stopped after %.1f s (request timeout)", j->id, h->request_timeout_s);
    }
    bool go = j->state == JOB_RUNNING && !j->cancelled && !j->stopped && !j->nomem && !j->timed_out;
    if (go && text && n > 0) {
        if (j->t_last_emit == 0) hist_add(&h->t.ttft, k_lat_bounds, N_LAT, now - j->t_arrive);
        else hist_add(&h->t.itl, k_itl_bounds, N_ITL, now - j->t_last_emit);
        j->t_last_emit = now;
        size_t old = j->gen.n;
        if (!buf_add(&j->gen, text, n)) {
            j->nomem = true;
        } else {
            /* A match not seen before ends in the new bytes, so starts ≥ old − (len − 1)
             * ≥ old − hold. */
            size_t cut = find_stop(j, old > j->hold ? old - j->hold : 0);
            if (cut != SIZE_MAX) {
                j->gen.n = cut;
                j->gen.p[cut] = 0;
                j->stopped = true;
            }
            release_text(j, j->stopped);
            pthread_cond_broadcast(&j->cv);
        }
        go = !j->stopped && !j->nomem;
    }
    pthread_mutex_unlock(&h->mu);
    return go;
}

static void add_totals(totals *t, const ms_gen_stats *s) {
    t->runs++;
    t->tokens += s->new_tokens;
    t->prompt_tokens += s->prompt_tokens;
    t->rounds += s->rounds;
    t->spec_rounds += s->spec_rounds;
    int64_t md = s->max_depth < 0 ? 0 : s->max_depth > MS_TREE_MAX ? MS_TREE_MAX : s->max_depth;
    for (int64_t d = 1; d <= md; d++) t->accepted_ge[d] += s->accepted_ge[d];
    if (md > t->max_depth) t->max_depth = md;
    t->accepted_ngram += s->accepted_ngram;
    t->vocab_sum += s->vocab_sum;
    if (s->vocab_max > t->vocab_max) t->vocab_max = s->vocab_max;
    double mal = ms_gen_stats_mean_accepted(s);
    if (isfinite(mal)) t->mal_sum += mal, t->mal_count++;
    t->prefill_s += s->prefill_s;
    t->draft_s += s->draft_backbone_s + s->draft_head_s;
    t->vocab_s += s->vocab_s;
    t->verify_s += s->verify_s;
    t->accept_s += s->accept_s;
    t->total_s += s->total_s;
}

static void job_finish_locked(ms_http *h, job *j, ms_status s, const ms_gen_stats *st, char *fin, size_t cap) {
    fin[cap - 1] = 0;
    j->stats = *st;
    snprintf(j->stop_reason, sizeof j->stop_reason, "%s", st->stop_reason ? st->stop_reason : "");
    if (j->stopped) snprintf(j->stop_reason, sizeof j->stop_reason, "stop string");
    /* A timeout that the backend noticed (emit returned false) or not (its
     * last piece was dropped, it then finished): either way a "timeout". */
    if (j->timed_out) snprintf(j->stop_reason, sizeof j->stop_reason, "request timeout");
    bool ok = s == MS_OK || (s == MS_ERR_CANCELLED && (j->stopped || j->cancelled || j->timed_out));
    if (ok || j->cancelled) add_totals(&h->t, st);
    snprintf(j->finish, sizeof j->finish, "%s",
             j->timed_out ? "timeout" : j->stopped || strcmp(fin, "length") != 0 ? "stop" : "length");
    if (ok && !j->nomem) release_text(j, true);
    if (ok && !j->nomem && j->req.stream && !sse_final(j)) j->nomem = true;
    if (!ok || j->nomem) {
        h->t.failed++;
        j->status = ok ? MS_ERR_NOMEM : s;
        bool mine = !ok && j->berr.http_code >= 400 && j->berr.http_code <= 599 && j->berr.message[0];
        j->http_code = mine ? j->berr.http_code : 500;
        if (mine) snprintf(j->errmsg, sizeof j->errmsg, "%s", j->berr.message);
        else snprintf(j->errmsg, sizeof j->errmsg, "generation failed (%s)", ms_status_str(j->status));
        if (j->req.stream) {
            sse_event(j, error_json_code(j->errmsg, j->http_code < 500 ? "invalid_request_error" : "server_error",
                                         mine ? j->berr.param : NULL, mine ? j->berr.code : NULL));
            buf_str(&j->sse, "data: [DONE]\n\n");
        }
    }
    hist_add(&h->t.duration, k_lat_bounds, N_LAT, ms_now_s() - j->t_arrive);
    j->state = JOB_DONE;
    pthread_cond_broadcast(&j->cv);
}

static void *worker_main(void *arg) {
    ms_http *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->head && !h->stopping) pthread_cond_wait(&h->work_cv, &h->mu);
        job *j = h->head;
        if (!j) break; /* stopping, nothing left */
        h->head = j->next;
        if (!h->head) h->tail = NULL;
        j->next = NULL;
        h->n_queued--;
        j->state = JOB_RUNNING;
        if (h->request_timeout_s > 0) j->deadline = ms_now_s() + h->request_timeout_s;
        h->running = j;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&h->mu);

        ms_gen_stats st;
        memset(&st, 0, sizeof st);
        char fin[16] = "stop";
        ms_http_error berr;
        memset(&berr, 0, sizeof berr);
        ms_status s = h->be.run(h->be.ctx, &j->req, emit, j, &st, fin, sizeof fin, &berr);

        pthread_mutex_lock(&h->mu);
        j->berr = berr;
        j->berr.message[sizeof j->berr.message - 1] = j->berr.code[sizeof j->berr.code - 1] = 0;
        j->berr.param[sizeof j->berr.param - 1] = 0;
        job_finish_locked(h, j, s, &st, fin, sizeof fin);
        h->running = NULL;
        job_unref_locked(j); /* the queue's reference */
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- replies --------------------------------------------------------------------- */

static void count_code(ms_http *h, int code) {
    int k = 0;
    while (k < N_CODES - 1 && k_codes[k] != code) k++;
    pthread_mutex_lock(&h->mu);
    h->t.by_code[k]++;
    pthread_mutex_unlock(&h->mu);
}

static peer *peer_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Was c opened past max_connections? Changes nothing: a request whose body
 * is still to come stays under its deadline (issue 35: a body dripped a byte
 * at a time held its connection, and a thread, for ever). */
static bool peer_overflow(ms_http *h, struct MHD_Connection *c) {
    peer *p = peer_of(c);
    if (!p) return false;
    pthread_mutex_lock(&h->cmu);
    bool overflow = p->overflow;
    pthread_mutex_unlock(&h->cmu);
    return overflow;
}

/* The request on c has arrived whole (line, headers, body): the header
 * deadline no longer applies. True when c is an overflow connection (its
 * answer closes it). *reaped (may be NULL): the reaper got there first. */
static bool peer_answering(ms_http *h, struct MHD_Connection *c, bool *reaped) {
    peer *p = peer_of(c);
    if (reaped) *reaped = false;
    if (!p) return false;
    pthread_mutex_lock(&h->cmu);
    p->busy = true;
    bool overflow = p->overflow;
    if (reaped) *reaped = p->reaped;
    pthread_mutex_unlock(&h->cmu);
    return overflow;
}

/* A browser reads a cross-origin answer (and sends the request its preflight
 * asked about) only with these; given to an allowed Origin alone, echoed
 * rather than "*" unless the list allows every origin (issue 35.7). */
static void add_cors(const ms_http *h, struct MHD_Connection *c, struct MHD_Response *r) {
    const char *o = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    bool any;
    if (!o || !ms_origin_allowed(h->origins, o, strlen(o), &any)) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", any ? "*" : o);
    if (!any) MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
}

static enum MHD_Result reply(ms_http *h, struct MHD_Connection *c, int code, char *body, size_t len,
                             const char *type, const char *hname, const char *hval) {
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (hname) MHD_add_response_header(r, hname, hval);
    add_cors(h, c, r);
    if (peer_answering(h, c, NULL)) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    count_code(h, code);
    return ret;
}

/* Steals o. */
static enum MHD_Result reply_json(ms_http *h, struct MHD_Connection *c, int code, json_t *o, const char *hname,
                                  const char *hval) {
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return MHD_NO;
    size_t n = strlen(s);
    char *body = realloc(s, n + 2); /* trailing newline, as curl users expect */
    if (!body) {
        free(s);
        return MHD_NO;
    }
    body[n] = '\n';
    body[n + 1] = 0;
    return reply(h, c, code, body, n + 1, "application/json", hname, hval);
}

static enum MHD_Result reply_error_code(ms_http *h, struct MHD_Connection *c, int code, const char *param,
                                        const char *ecode, const char *msg) {
    const char *type = code == 401   ? "authentication_error"
                       : code == 403 ? "permission_error"
                       : code >= 500 ? "server_error"
                       : code == 404 ? "not_found_error"
                                     : "invalid_request_error";
    const char *hname = NULL, *hval = NULL;
    if (code == 401) hname = MHD_HTTP_HEADER_WWW_AUTHENTICATE, hval = "Bearer";
    if (code == 503) hname = MHD_HTTP_HEADER_RETRY_AFTER, hval = "1";
    return reply_json(h, c, code, error_json_code(msg, type, param, ecode), hname, hval);
}

static enum MHD_Result reply_error(ms_http *h, struct MHD_Connection *c, int code, const char *param,
                                   const char *msg) {
    return reply_error_code(h, c, code, param, NULL, msg);
}

static bool authorized(const ms_http *h, struct MHD_Connection *c) {
    if (!h->token) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncasecmp(a, "Bearer ", 7) != 0) return false;
    a += 7;
    while (*a == ' ') a++;
    size_t n = strlen(a), m = strlen(h->token);
    while (n > 0 && (a[n - 1] == ' ' || a[n - 1] == '\t')) n--;
    if (n != m) return false;
    unsigned char diff = 0; /* constant time in the token's bytes */
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ h->token[i]);
    return diff == 0;
}

/* ---- framing, Host and Origin (issue 35.4, 35.7) ------------------------------------ */

/* What the header list of a request holds, for the checks below. */
typedef struct {
    int n_host, n_cl, n_te, n_origin;
    const char *cl, *te;
    bool cl_conflict;
    char bad[48];       /* a header with a control character or a name that is not a token */
} head_scan;

static bool tchar(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool all_digits(const char *v) { return v[0] && strspn(v, "0123456789") == strlen(v); }

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size) {
    head_scan *s = cls;
    (void)kind;
    bool ok = key_size > 0;
    for (size_t i = 0; i < key_size; i++) ok &= tchar((unsigned char)key[i]);
    /* RFC 9110 §5.5: field values are visible characters, SP and HTAB.
     * libmicrohttpd 0.9.75 ends a line at CRLF or LF only, so a bare CR
     * stays inside the value it came in. */
    for (size_t i = 0; value && i < value_size; i++) {
        unsigned char ch = (unsigned char)value[i];
        ok &= !((ch < 0x20 && ch != '\t') || ch == 0x7f);
    }
    if (!ok && !s->bad[0]) {
        size_t n = 0;
        for (size_t i = 0; i < key_size && n < sizeof s->bad - 1; i++) /* printable for the message */
            s->bad[n++] = tchar((unsigned char)key[i]) ? key[i] : '?';
        s->bad[n] = 0;
        if (!n) snprintf(s->bad, sizeof s->bad, "?");
    }
    if (!value) return MHD_YES;
    if (!strcasecmp(key, "Host")) s->n_host++;
    else if (!strcasecmp(key, "Origin")) s->n_origin++;
    else if (!strcasecmp(key, "Transfer-Encoding")) s->n_te++, s->te = value;
    else if (!strcasecmp(key, "Content-Length")) {
        /* The library reads the first; a second that differs is a request
         * another parser would frame differently (RFC 9112 §6.3). */
        if (s->n_cl++ == 0) s->cl = value;
        else if (!all_digits(value) || !all_digits(s->cl) || strtoull(value, NULL, 10) != strtoull(s->cl, NULL, 10))
            s->cl_conflict = true;
    }
    return MHD_YES;
}

/* 0 when the request may go on, else the status (400 or 403) with its
 * message and param. Runs before any endpoint. */
static int request_refused(const ms_http *h, struct MHD_Connection *c, const char *version, const char **param,
                           char *msg, size_t cap) {
    head_scan s;
    memset(&s, 0, sizeof s);
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_header, &s);
    bool http11 = version && strcmp(version, MHD_HTTP_VERSION_1_0) != 0;
    *param = NULL;
    if (s.bad[0]) {
        *param = "headers";
        snprintf(msg, cap, "malformed HTTP header '%s': a control character (e.g. a bare CR) or a name that is not a token",
                 s.bad);
        return 400;
    }
    if (s.n_host > 1 || (http11 && s.n_host == 0)) {
        *param = "Host";
        snprintf(msg, cap, "an HTTP/1.1 request needs exactly one Host header (got %d)", s.n_host);
        return 400;
    }
    if (s.n_te && s.n_cl) {
        *param = "Transfer-Encoding";
        snprintf(msg, cap, "Transfer-Encoding and Content-Length together: the body's length is ambiguous");
        return 400;
    }
    if (s.n_te > 1 || (s.n_te && strcasecmp(s.te, "chunked") != 0)) {
        *param = "Transfer-Encoding";
        snprintf(msg, cap, "only 'Transfer-Encoding: chunked' is accepted");
        return 400;
    }
    if (s.cl_conflict) {
        *param = "Content-Length";
        snprintf(msg, cap, "Content-Length is given more than once with different values");
        return 400;
    }
    if (s.n_origin > 1) {
        *param = "Origin";
        snprintf(msg, cap, "more than one Origin header");
        return 400;
    }
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (host && !ms_origin_host_allowed(h->hosts, h->listen, h->self, host)) {
        *param = "Host";
        snprintf(msg, cap, "Host '%.64s' is not a name this server answers (loopback, its address, or http.allowed_hosts)",
                 host);
        return 403;
    }
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    bool any;
    if (origin && !ms_origin_allowed(h->origins, origin, strlen(origin), &any)) {
        *param = "Origin";
        snprintf(msg, cap, "browser origin '%.64s' is not allowed (http.allowed_origins)", origin);
        return 403;
    }
    return 0;
}

static enum MHD_Result reply_health(ms_http *h, struct MHD_Connection *c) {
    json_t *o = json_object();
    pthread_mutex_lock(&h->mu);
    bool stopping = h->stopping;
    json_object_set_new(o, "status", json_string(stopping ? "stopping" : "ok"));
    json_object_set_new(o, "queue", json_integer(h->n_queued));
    json_object_set_new(o, "running", json_boolean(h->running != NULL));
    pthread_mutex_unlock(&h->mu);
    json_object_set_new(o, "model", json_string(h->model_name));
    if (h->be.health) h->be.health(h->be.ctx, o);
    return reply_json(h, c, stopping ? 503 : 200, o, NULL, NULL);
}

static json_t *model_json(const ms_http *h) {
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(h->model_name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(0));
    json_object_set_new(m, "owned_by", json_string("microspec"));
    return m;
}

/* GET /v1/models/{id}: the served model, 404 for any other id (the id is
 * compared as sent, after the prefix; MHD has already unescaped it). */
static enum MHD_Result reply_model(ms_http *h, struct MHD_Connection *c, const char *url) {
    const char *id = url + strlen("/v1/models/");
    if (strcmp(id, h->model_name) != 0) return reply_error_code(h, c, 404, "model", "model_not_found", "no such model");
    return reply_json(h, c, 200, model_json(h), NULL, NULL);
}

static enum MHD_Result reply_models(ms_http *h, struct MHD_Connection *c) {
    json_t *m = model_json(h);
    json_t *data = json_array();
    json_array_append_new(data, m);
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    return reply_json(h, c, 200, o, NULL, NULL);
}

static void metric(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void write_hist(FILE *f, const char *name, const char *help, const hist *hg, const double *bounds, int n) {
    metric(f, name, "histogram", help);
    uint64_t cum = 0;
    for (int k = 0; k < n; k++) {
        cum += hg->bucket[k];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[k], (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)hg->count);
    fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, hg->sum, name, (unsigned long long)hg->count);
}

static enum MHD_Result reply_metrics(ms_http *h, struct MHD_Connection *c) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return MHD_NO;
    pthread_mutex_lock(&h->mu);
    totals t = h->t;
    int queued = h->n_queued;
    bool running = h->running != NULL;
    pthread_mutex_unlock(&h->mu);
    metric(f, "microspec_requests_total", "counter", "HTTP responses by status code.");
    for (int k = 0; k < N_CODES; k++) {
        if (k_codes[k]) fprintf(f, "microspec_requests_total{code=\"%d\"} %llu\n", k_codes[k], (unsigned long long)t.by_code[k]);
        else fprintf(f, "microspec_requests_total{code=\"other\"} %llu\n", (unsigned long long)t.by_code[k]);
    }
    metric(f, "microspec_queue_rejections_total", "counter", "Requests refused with 503 because the queue was full.");
    fprintf(f, "microspec_queue_rejections_total %llu\n", (unsigned long long)t.rejected);
    metric(f, "microspec_requests_cancelled_total", "counter", "Requests whose client went away before the end.");
    fprintf(f, "microspec_requests_cancelled_total %llu\n", (unsigned long long)t.cancelled);
    metric(f, "microspec_generation_failures_total", "counter", "Runs the backend failed.");
    fprintf(f, "microspec_generation_failures_total %llu\n", (unsigned long long)t.failed);
    metric(f, "microspec_tokens_generated_total", "counter", "Tokens generated.");
    fprintf(f, "microspec_tokens_generated_total %lld\n", (long long)t.tokens);
    metric(f, "microspec_prompt_tokens_total", "counter", "Prompt tokens processed.");
    fprintf(f, "microspec_prompt_tokens_total %lld\n", (long long)t.prompt_tokens);
    metric(f, "microspec_queue_depth", "gauge", "Requests waiting behind the running one.");
    fprintf(f, "microspec_queue_depth %d\n", queued);
    metric(f, "microspec_running", "gauge", "1 while a request is being generated.");
    fprintf(f, "microspec_running %d\n", running ? 1 : 0);
    metric(f, "microspec_mean_accepted_length", "summary", "Per request: tokens emitted per target forward.");
    fprintf(f, "microspec_mean_accepted_length_sum %.6f\nmicrospec_mean_accepted_length_count %llu\n", t.mal_sum,
            (unsigned long long)t.mal_count);
    metric(f, "microspec_target_rounds_total", "counter", "Target forwards after prefill.");
    fprintf(f, "microspec_target_rounds_total %lld\n", (long long)t.rounds);
    metric(f, "microspec_spec_rounds_total", "counter", "Rounds verified against a draft tree.");
    fprintf(f, "microspec_spec_rounds_total %lld\n", (long long)t.spec_rounds);
    metric(f, "microspec_accepted_ge_total", "counter", "Spec rounds whose accepted path reached depth d.");
    for (int64_t d = 1; d <= t.max_depth; d++)
        fprintf(f, "microspec_accepted_ge_total{depth=\"%lld\"} %lld\n", (long long)d, (long long)t.accepted_ge[d]);
    metric(f, "microspec_accepted_tokens_total", "counter",
           "Accepted draft tokens by source: the n-gram source's (the model may have proposed them too), "
           "the model's alone.");
    fprintf(f, "microspec_accepted_tokens_total{source=\"ngram\"} %lld\n", (long long)t.accepted_ngram);
    int64_t accepted = 0;
    for (int64_t d = 1; d <= t.max_depth; d++) accepted += t.accepted_ge[d];
    fprintf(f, "microspec_accepted_tokens_total{source=\"model\"} %lld\n", (long long)(accepted - t.accepted_ngram));
    metric(f, "microspec_acceptance_rate", "gauge", "Share of spec rounds accepted to depth d (all requests).");
    for (int64_t d = 1; d <= t.max_depth; d++)
        fprintf(f, "microspec_acceptance_rate{depth=\"%lld\"} %.6f\n", (long long)d,
                t.spec_rounds > 0 ? (double)t.accepted_ge[d] / (double)t.spec_rounds : 0.0);
    metric(f, "microspec_active_vocab", "summary", "Active draft vocabulary size per spec round.");
    fprintf(f, "microspec_active_vocab_sum %lld\nmicrospec_active_vocab_count %lld\n", (long long)t.vocab_sum,
            (long long)t.spec_rounds);
    metric(f, "microspec_active_vocab_max", "gauge", "Largest active draft vocabulary seen.");
    fprintf(f, "microspec_active_vocab_max %lld\n", (long long)t.vocab_max);
    metric(f, "microspec_seconds_total", "counter", "Time by phase, all requests.");
    const struct {
        const char *phase;
        double s;
    } ph[] = {{"prefill", t.prefill_s}, {"draft", t.draft_s},   {"vocab", t.vocab_s},
              {"verify", t.verify_s},   {"accept", t.accept_s}, {"total", t.total_s}};
    for (size_t k = 0; k < sizeof ph / sizeof ph[0]; k++)
        fprintf(f, "microspec_seconds_total{phase=\"%s\"} %.6f\n", ph[k].phase, ph[k].s);
    metric(f, "microspec_request_timeouts_total", "counter", "Requests stopped by http.request_timeout_s.");
    fprintf(f, "microspec_request_timeouts_total %llu\n", (unsigned long long)t.timeouts);
    metric(f, "microspec_connections_rejected_total", "counter",
           "Requests answered 503 because http.max_connections were open.");
    fprintf(f, "microspec_connections_rejected_total %llu\n", (unsigned long long)t.conn_rejected);
    metric(f, "microspec_connections_timed_out_total", "counter",
           "Connections closed (408) for not sending a whole request within http.header_timeout_s.");
    fprintf(f, "microspec_connections_timed_out_total %llu\n", (unsigned long long)t.conn_reaped);
    pthread_mutex_lock(&h->cmu);
    int n_open = h->n_peers;
    pthread_mutex_unlock(&h->cmu);
    metric(f, "microspec_http_refused_total", "counter",
           "Requests refused before any endpoint: framing (400), Host not answered (403), browser Origin not allowed (403).");
    fprintf(f, "microspec_http_refused_total{reason=\"framing\"} %llu\n", (unsigned long long)t.framing);
    fprintf(f, "microspec_http_refused_total{reason=\"host\"} %llu\n", (unsigned long long)t.host_refused);
    fprintf(f, "microspec_http_refused_total{reason=\"origin\"} %llu\n", (unsigned long long)t.origin_refused);
    metric(f, "microspec_http_library_errors_total", "counter",
           "Requests libmicrohttpd itself refused (unreadable Content-Length, no colon, too large): answered as JSON, "
           "or with the library's HTML where the connection could not be told.");
    fprintf(f, "microspec_http_library_errors_total{answer=\"json\"} %llu\n", (unsigned long long)t.lib_json);
    fprintf(f, "microspec_http_library_errors_total{answer=\"html\"} %llu\n", (unsigned long long)t.lib_html);
    metric(f, "microspec_connections_open", "gauge", "HTTP connections open now.");
    fprintf(f, "microspec_connections_open %d\n", n_open);
    write_hist(f, "microspec_time_to_first_token_seconds",
               "From the request's arrival (queue included) to its first text.", &t.ttft, k_lat_bounds, N_LAT);
    write_hist(f, "microspec_inter_token_latency_seconds", "Between successive text pieces of a request.", &t.itl,
               k_itl_bounds, N_ITL);
    write_hist(f, "microspec_request_duration_seconds", "From the request's arrival to its last byte generated.",
               &t.duration, k_lat_bounds, N_LAT);
    if (h->be.metrics) h->be.metrics(h->be.ctx, f);
    if (fclose(f) != 0) {
        free(text);
        return MHD_NO;
    }
    return reply(h, c, 200, text, len, "text/plain; version=0.0.4; charset=utf-8", NULL, NULL);
}

/* ---- generation requests ---------------------------------------------------------- */

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max) {
    job *j = cls;
    ms_http *h = j->h;
    ssize_t ret;
    double next_check = ms_now_s() + WAIT_SLICE_MS * 1e-3;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        if (j->sse_off < j->sse.n) {
            size_t n = j->sse.n - j->sse_off < max ? j->sse.n - j->sse_off : max;
            memcpy(out, j->sse.p + j->sse_off, n);
            j->sse_off += n;
            if (j->sse_off == j->sse.n) j->sse.n = j->sse_off = 0;
            ret = (ssize_t)n;
            break;
        }
        if (j->cancelled) {
            ret = MHD_CONTENT_READER_END_WITH_ERROR;
            break;
        }
        if (j->state == JOB_DONE) {
            ret = MHD_CONTENT_READER_END_OF_STREAM;
            break;
        }
        job_wait(h, j, &next_check);
    }
    pthread_mutex_unlock(&h->mu);
    return ret;
}

static void sse_free(void *cls) {
    job *j = cls;
    ms_http *h = j->h;
    pthread_mutex_lock(&h->mu);
    job_unref_locked(j);
    pthread_mutex_unlock(&h->mu);
}

static job *job_new(ms_http *h, ms_http_request *req, int fd) {
    job *j = ms_calloc(1, sizeof *j);
    if (!j) return NULL;
    j->h = h;
    j->req = *req; /* takes ownership */
    memset(req, 0, sizeof *req);
    j->fd = fd;
    cond_init_mono(&j->cv);
    for (int k = 0; k < j->req.n_stop; k++)
        if (j->req.stop_len[k] - 1 > j->hold) j->hold = j->req.stop_len[k] - 1;
    snprintf(j->model, sizeof j->model, "%s", j->req.model[0] ? j->req.model : h->model_name);
    j->created = (long long)time(NULL);
    pthread_mutex_lock(&h->mu);
    uint64_t r = ms_rng_u64(&h->rng), k = ++h->next_id;
    pthread_mutex_unlock(&h->mu);
    snprintf(j->id, sizeof j->id, "%s-%012llx%012llx", j->req.chat ? "chatcmpl" : "cmpl",
             (unsigned long long)(r & 0xffffffffffffull), (unsigned long long)(k & 0xffffffffffffull));
    return j;
}

static enum MHD_Result handle_generate(ms_http *h, struct MHD_Connection *c, conn *cs) {
    ms_http_request req;
    char err[256];
    bool reaped;
    bool overflow = peer_answering(h, c, &reaped);
    if (reaped) return MHD_NO; /* 408 sent as the body's last bytes came in; closed */
    if (overflow) {
        pthread_mutex_lock(&h->mu);
        h->t.conn_rejected++;
        pthread_mutex_unlock(&h->mu);
        return reply_error(h, c, 503, NULL, "too many open connections; retry later");
    }
    if (ms_http_parse_request(cs->body.p, cs->body.n, cs->r == R_CHAT, &req, err, sizeof err) < 0)
        return reply_error(h, c, 400, req.err_param, err);
    buf_free(&cs->body);
    if (req.max_tokens == 0) req.max_tokens = h->max_tokens_default;
    if (req.max_tokens > h->max_tokens_limit) {
        snprintf(err, sizeof err, "'max_tokens' must be an integer between 1 and %d", h->max_tokens_limit);
        ms_http_request_free(&req);
        return reply_error(h, c, 400, "max_tokens", err);
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    job *j = job_new(h, &req, ci ? ci->connect_fd : -1);
    if (!j) {
        ms_http_request_free(&req);
        return reply_error(h, c, 500, NULL, "out of memory");
    }
    bool stream = j->req.stream;

    pthread_mutex_lock(&h->mu);
    const char *refuse = h->stopping                  ? "the server is shutting down"
                         : h->n_queued >= h->queue_cap ? "the request queue is full; retry later"
                                                       : NULL;
    if (refuse) {
        if (!h->stopping) h->t.rejected++;
        j->refs = 1;
        job_unref_locked(j);
        pthread_mutex_unlock(&h->mu);
        return reply_error(h, c, 503, NULL, refuse);
    }
    j->refs = 2; /* connection + queue */
    j->t_arrive = ms_now_s();
    cs->job = j;
    h->n_conn_jobs++;
    if (h->tail) h->tail->next = j;
    else h->head = j;
    h->tail = j;
    h->n_queued++;
    pthread_cond_signal(&h->work_cv);

    /* Wait for the answer (streams: for the first bytes), watching the socket. */
    double next_check = ms_now_s() + WAIT_SLICE_MS * 1e-3;
    for (;;) {
        if (j->state == JOB_DONE) break;
        if (stream && j->state == JOB_RUNNING && j->sse_off < j->sse.n) break;
        if (job_wait(h, j, &next_check)) {
            pthread_mutex_unlock(&h->mu);
            return MHD_NO; /* close; the completed callback drops our reference */
        }
    }
    if (j->cancelled) {
        pthread_mutex_unlock(&h->mu);
        return MHD_NO;
    }
    if (j->state == JOB_DONE && j->status < 0 && !j->sse_started) {
        int code = j->http_code;
        char msg[sizeof j->errmsg];
        ms_http_error be = j->berr;
        memcpy(msg, j->errmsg, sizeof msg);
        pthread_mutex_unlock(&h->mu);
        bool mine = code == be.http_code;
        return reply_error_code(h, c, code, mine ? be.param : NULL, mine ? be.code : NULL, msg);
    }
    if (!stream) {
        pthread_mutex_unlock(&h->mu); /* done: the worker no longer touches j */
        return reply_json(h, c, 200, full_response(j), NULL, NULL);
    }
    j->sse_started = true;
    j->refs++; /* the response's */
    pthread_mutex_unlock(&h->mu);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, j, sse_free);
    if (!r) {
        sse_free(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    add_cors(h, c, r);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    count_code(h, 200);
    return ret;
}

static route route_of(const char *url) {
    static const struct {
        const char *path;
        route r;
    } k[] = {{"/v1/completions", R_COMPLETIONS}, {"/v1/chat/completions", R_CHAT}, {"/v1/models", R_MODELS},
             {"/health", R_HEALTH},              {"/metrics", R_METRICS}};
    for (size_t i = 0; url && i < sizeof k / sizeof k[0]; i++)
        if (strcmp(url, k[i].path) == 0) return k[i].r;
    if (url && strncmp(url, "/v1/models/", 11) == 0 && url[11]) return R_MODEL;
    return R_NONE;
}

/* RFC 9110 §5.6.2: a method is a token of tchars. */
static bool method_is_token(const char *m) {
    if (!m || !*m) return false;
    for (; *m; m++)
        if (!((*m >= 'A' && *m <= 'Z') || (*m >= 'a' && *m <= 'z') || (*m >= '0' && *m <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *m)))
            return false;
    return true;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    ms_http *h = cls;
    conn *cs = *con_cls;
    if (!cs) {
        route r = route_of(url);
        bool post_route = r == R_COMPLETIONS || r == R_CHAT;
        bool is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
        if (!method_is_token(method)) return reply_error(h, c, 400, NULL, "malformed HTTP request line (method)");
        char why[256];
        const char *param;
        int refused = request_refused(h, c, version, &param, why, sizeof why);
        if (refused) {
            pthread_mutex_lock(&h->mu);
            if (refused == 400) h->t.framing++;
            else if (!strcmp(param, "Host")) h->t.host_refused++;
            else h->t.origin_refused++;
            pthread_mutex_unlock(&h->mu);
            return reply_error(h, c, refused, param, why);
        }
        if (r == R_NONE) return reply_error(h, c, 404, NULL, "no such endpoint");
        /* CORS preflight: no body, no token (browsers send none with it). */
        if (strcmp(method, "OPTIONS") == 0) return reply(h, c, 204, strdup(""), 0, NULL, NULL, NULL);
        if (r != R_HEALTH && peer_overflow(h, c)) {
            pthread_mutex_lock(&h->mu);
            h->t.conn_rejected++;
            pthread_mutex_unlock(&h->mu);
            return reply_error(h, c, 503, NULL, "too many open connections; retry later");
        }
        if (post_route && strcmp(method, "POST") != 0)
            return reply_json(h, c, 405, error_json("method not allowed; use POST", "invalid_request_error", NULL),
                              MHD_HTTP_HEADER_ALLOW, "POST");
        if (!post_route && !is_get)
            return reply_json(h, c, 405, error_json("method not allowed; use GET", "invalid_request_error", NULL),
                              MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        if (r != R_HEALTH && !authorized(h, c))
            return reply_error(h, c, 401, NULL, "missing or wrong bearer token (Authorization: Bearer <token>)");
        if (r == R_HEALTH) return reply_health(h, c);
        if (r == R_METRICS) return reply_metrics(h, c);
        if (r == R_MODELS) return reply_models(h, c);
        if (r == R_MODEL) return reply_model(h, c, url);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > MS_HTTP_MAX_BODY)
            return reply_error(h, c, 413, NULL, "the request body is larger than 1 MiB");
        cs = ms_calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        cs->r = r;
        *con_cls = cs;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!cs->too_big && cs->body.n + *upload_size > MS_HTTP_MAX_BODY) {
            cs->too_big = true;
            buf_free(&cs->body);
        }
        if (!cs->too_big && !buf_add(&cs->body, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->too_big) return reply_error(h, c, 413, NULL, "the request body is larger than 1 MiB");
    return handle_generate(h, c, cs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    ms_http *h = cls;
    conn *cs = *con_cls;
    peer *p = peer_of(c);
    if (p) { /* keep-alive: the next request has header_timeout_s from now */
        pthread_mutex_lock(&h->cmu);
        p->busy = false;
        p->deadline = ms_now_s() + (p->overflow ? OVERFLOW_GRACE_S : h->header_timeout_s);
        pthread_mutex_unlock(&h->cmu);
    }
    if (!cs) return;
    if (cs->job) {
        pthread_mutex_lock(&h->mu);
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) job_cancel_locked(h, cs->job);
        job_unref_locked(cs->job);
        h->n_conn_jobs--;
        pthread_cond_broadcast(&h->idle_cv);
        pthread_mutex_unlock(&h->mu);
    }
    buf_free(&cs->body);
    free(cs);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    ms_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        peer *p = ms_calloc(1, sizeof *p);
        *socket_context = p;
        if (!p) return; /* untracked: no deadline, never refused */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        p->fd = ci ? ci->connect_fd : -1;
        pthread_mutex_lock(&h->cmu);
        p->overflow = h->n_peers >= h->max_conn;
        p->deadline = ms_now_s() + (p->overflow ? OVERFLOW_GRACE_S : h->header_timeout_s);
        p->next = h->peers;
        if (h->peers) h->peers->prev = p;
        h->peers = p;
        h->n_peers++;
        pthread_mutex_unlock(&h->cmu);
        return;
    }
    peer *p = *socket_context;
    if (!p) return;
    pthread_mutex_lock(&h->cmu);
    if (p->prev) p->prev->next = p->next;
    else h->peers = p->next;
    if (p->next) p->next->prev = p->prev;
    h->n_peers--;
    pthread_mutex_unlock(&h->cmu);
    free(p);
    *socket_context = NULL;
}

/* Closes connections whose request has not arrived by its deadline. */
static void *reaper_main(void *arg) {
    static const char k_408[] = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\n"
                                "Content-Length: 115\r\n\r\n"
                                "{\"error\":{\"message\":\"the request did not arrive in time\",\"type\":"
                                "\"invalid_request_error\",\"param\":null,\"code\":null}}\n";
    ms_http *h = arg;
    pthread_mutex_lock(&h->cmu);
    while (!h->reaper_stop) {
        wait_ms(&h->reap_cv, &h->cmu, REAP_SLICE_MS);
        double now = ms_now_s();
        for (peer *p = h->peers; p; p = p->next) {
            if (p->busy || p->reaped || p->fd < 0 || now < p->deadline) continue;
            /* Counted before the client can see the close (mu inside cmu:
             * no path takes cmu while holding mu). */
            pthread_mutex_lock(&h->mu);
            h->t.conn_reaped++;
            for (int k = 0; k < N_CODES - 1; k++)
                if (k_codes[k] == 408) h->t.by_code[k]++;
            pthread_mutex_unlock(&h->mu);
            /* MHD's thread only reads while a request is incomplete: the 408
             * cannot interleave with an answer. */
            ssize_t w = send(p->fd, k_408, sizeof k_408 - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)w;
            shutdown(p->fd, SHUT_RDWR);
            p->reaped = true;
            MS_LOG_DEBUG("http: closed a connection that sent no whole request within %.1f s", h->header_timeout_s);
        }
    }
    pthread_mutex_unlock(&h->cmu);
    return NULL;
}

/* The connection this thread serves (MHD_USE_THREAD_PER_CONNECTION), from
 * the moment its first request line was read: see the file's header. */
static _Thread_local peer *tl_peer;

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    ms_http *h = cls;
    (void)uri;
    peer *p = peer_of(c);
    if (p && !tl_peer) {
        pthread_mutex_lock(&h->cmu);
        p->bound = true;
        pthread_mutex_unlock(&h->cmu);
    }
    tl_peer = p;
    return NULL; /* *con_cls stays NULL until the handler's first call */
}

/* Linux's TCP states (include/net/tcp_states.h; not in linux/tcp.h). */
enum { TCP_STATE_ESTABLISHED = 1, TCP_STATE_CLOSE_WAIT = 8 };

/* Whether the library may be about to answer on fd: the server has not shut
 * its side yet (ESTABLISHED, or CLOSE_WAIT when the client half-closed) and
 * the kernel has received at least min_bytes on it. A connection the library
 * has already closed for writing (FIN_WAIT, LAST_ACK, ...) is on its way out:
 * its CLOSED notification may lag behind the next connection's error, and it
 * must not make that error ambiguous. */
static bool may_answer(int fd, uint64_t min_bytes) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return false;
    if (ti.tcpi_state != TCP_STATE_ESTABLISHED && ti.tcpi_state != TCP_STATE_CLOSE_WAIT) return false;
    uint64_t got = len >= offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received
                       ? ti.tcpi_bytes_received
                       : 0;
    return got >= min_bytes;
}

/* The peer whose thread runs this (h->cmu held): the bound one, or, for an
 * error before the first request line was accepted (its HTTP version: 400
 * or 505; its length: 414), the only unbound connection that has received
 * bytes (for a 414, enough to overflow a line). NULL when it cannot be told. */
static peer *current_peer_locked(ms_http *h, unsigned code) {
    peer *found = NULL;
    int candidates = 0;
    for (peer *p = h->peers; p; p = p->next) {
        if (tl_peer) {
            if (p == tl_peer) return p;
            continue;
        }
        if (p->bound || p->reaped || p->fd < 0 || !may_answer(p->fd, code == 414 ? LINE_414_MIN : 1)) continue;
        found = p;
        candidates++;
    }
    return candidates == 1 ? found : NULL;
}

/* The library is about to answer `code` with its HTML page `page` and close:
 * answer first, in the API's JSON shape, and shut the socket for writing. */
static void answer_library_error(ms_http *h, unsigned code, const char *page) {
    const char *param = NULL, *msg;
    switch (code) {
    case 400:
        if (page && strstr(page, "Content-Length")) param = "Content-Length", msg = "Content-Length is not a number";
        else if (page && strstr(page, "chunked")) param = "Transfer-Encoding", msg = "malformed chunked request body";
        else msg = "malformed HTTP request (a header line without a colon, or a broken request line)";
        break;
    case 413:
        if (page && strstr(page, "chunk size")) param = "Transfer-Encoding", msg = "a chunk of the request body is too large";
        else param = "Content-Length", msg = "Content-Length is too large";
        break;
    case 414: msg = "the request line is too long"; break;
    case 431: msg = "the request's headers are too large"; break;
    case 505: msg = "the HTTP version is not supported (HTTP/1.0 and HTTP/1.1 are)"; break;
    default: msg = "the request could not be processed"; break;
    }
    const char *type = code >= 500 ? "server_error" : "invalid_request_error";
    /* Formatted on this thread's stack: nothing on the heap while the socket
     * is looked up and written. */
    json_t *o = error_json(msg, type, param);
    char body[512];
    size_t bn = o ? json_dumpb(o, body, sizeof body, JSON_COMPACT) : 0;
    json_decref(o);
    const char *reason = code == 400   ? "Bad Request"
                         : code == 413 ? "Content Too Large"
                         : code == 414 ? "URI Too Long"
                         : code == 431 ? "Request Header Fields Too Large"
                         : code == 505 ? "HTTP Version Not Supported"
                                       : "Internal Server Error";
    char all[1024];
    int an = bn > 0 && bn < sizeof body
                 ? snprintf(all, sizeof all,
                            "HTTP/1.1 %u %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\n\r\n%.*s\n",
                            code, reason, bn + 1, (int)bn, body)
                 : -1;
    bool sent = false;
    pthread_mutex_lock(&h->cmu);
    peer *p = current_peer_locked(h, code);
    if (p && !p->reaped && an > 0 && (size_t)an < sizeof all) {
        /* One message, one send: the socket is in its reading state, so its
         * send buffer is empty (a response before it on the connection has
         * been written out already by this same thread). */
        ssize_t w = send(p->fd, all, (size_t)an, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w;
        shutdown(p->fd, SHUT_WR); /* the library's own answer now fails (EPIPE) */
        p->reaped = true;         /* the reaper leaves it alone */
        sent = true;
    }
    pthread_mutex_unlock(&h->cmu);
    int k = 0;
    while (k < N_CODES - 1 && k_codes[k] != (int)code) k++;
    pthread_mutex_lock(&h->mu);
    h->t.by_code[k]++;
    if (sent) h->t.lib_json++;
    else h->t.lib_html++;
    pthread_mutex_unlock(&h->mu);
}

/* libmicrohttpd's messages. Most are caused by clients (malformed requests,
 * resets): a budget of LIB_LOG_BURST lines, one more every LIB_LOG_REFILL_S,
 * the rest counted and named in the next line written (issue 35.2's rule: a
 * client's bad input costs a counter, not a log line each). */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    ms_http *h = cls;
    static const char k_err[] = "Error processing request (HTTP response code is %u";
    if (h && !strncmp(fmt, k_err, sizeof k_err - 1)) {
        va_list aq;
        va_copy(aq, ap);
        unsigned code = va_arg(aq, unsigned);
        const char *page = va_arg(aq, const char *);
        va_end(aq);
        answer_library_error(h, code, page);
    }
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    if (!h) {
        MS_LOG_WARN("microhttpd: %s", msg);
        return;
    }
    double now = ms_now_s();
    pthread_mutex_lock(&h->lmu);
    h->log_tokens += (now - h->log_t) / LIB_LOG_REFILL_S;
    if (h->log_tokens > LIB_LOG_BURST) h->log_tokens = LIB_LOG_BURST;
    h->log_t = now;
    bool write = h->log_tokens >= 1.0;
    uint64_t dropped = h->log_dropped;
    if (write) h->log_tokens -= 1.0, h->log_dropped = 0;
    else h->log_dropped++;
    pthread_mutex_unlock(&h->lmu);
    if (!write) return;
    if (dropped) MS_LOG_WARN("microhttpd: %s (%llu earlier messages not logged)", msg, (unsigned long long)dropped);
    else MS_LOG_WARN("microhttpd: %s", msg);
}

/* ---- start / stop ----------------------------------------------------------------------- */

int ms_http_port(const ms_http *h) { return h->port; }

static void http_free(ms_http *h) {
    free(h->token);
    free(h->model_name);
    free(h->origins);
    free(h->hosts);
    pthread_mutex_destroy(&h->lmu);
    pthread_cond_destroy(&h->work_cv);
    pthread_cond_destroy(&h->idle_cv);
    pthread_cond_destroy(&h->reap_cv);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->cmu);
    free(h);
}

ms_status ms_http_start(const ms_http_opts *o, const ms_http_backend *b, ms_http **out) {
    MS_ASSERT(o && b && out);
    *out = NULL;
    if (!b->run) MS_FAIL(MS_ERR_INVALID, "http: the backend has no run callback");
    if (o->port < 0 || o->port > 65535) MS_FAIL(MS_ERR_INVALID, "http: port %d is not in 0..65535", o->port);
    const char *listen = o->listen && o->listen[0] ? o->listen : "127.0.0.1";
    if (strcmp(listen, "localhost") == 0) listen = "127.0.0.1"; /* as ms_cfg_check allows; never resolved */
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, listen, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)o->port);
    } else if (inet_pton(AF_INET6, listen, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)o->port);
        flags |= MHD_USE_IPv6;
    } else {
        MS_FAIL(MS_ERR_INVALID, "http: listen address '%s' is not an IPv4 or IPv6 literal or \"localhost\"", listen);
    }

    ms_http *h = ms_calloc(1, sizeof *h);
    if (!h) return MS_ERR_NOMEM;
    h->be = *b;
    h->queue_cap = o->queue > 0 ? o->queue : 16;
    h->max_tokens_limit = o->max_tokens_limit > 0 ? o->max_tokens_limit : 4096;
    if (h->max_tokens_limit > MS_HTTP_MAX_TOKENS_CAP) h->max_tokens_limit = MS_HTTP_MAX_TOKENS_CAP;
    h->max_tokens_default = o->max_tokens_default > 0 ? o->max_tokens_default : 256;
    if (h->max_tokens_default > h->max_tokens_limit) h->max_tokens_default = h->max_tokens_limit;
    h->max_conn = o->max_connections > 0 ? o->max_connections : 1024;
    h->header_timeout_s = o->header_timeout_s > 0 ? o->header_timeout_s : 10.0;
    h->request_timeout_s = o->request_timeout_s > 0 ? o->request_timeout_s : 0.0;
    int idle_s = o->idle_timeout_s > 0 ? o->idle_timeout_s : 30;
    h->token = o->bearer_token && o->bearer_token[0] ? strdup(o->bearer_token) : NULL;
    h->model_name = strdup(o->model_name && o->model_name[0] ? o->model_name : "microspec");
    h->origins = strdup(o->allowed_origins ? o->allowed_origins : "localhost");
    h->hosts = strdup(o->allowed_hosts ? o->allowed_hosts : "");
    snprintf(h->listen, sizeof h->listen, "%s", listen);
    if (gethostname(h->self, sizeof h->self) != 0) h->self[0] = 0;
    h->self[sizeof h->self - 1] = 0;
    h->log_tokens = LIB_LOG_BURST;
    h->log_t = ms_now_s();
    pthread_mutex_init(&h->lmu, NULL);
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->cmu, NULL);
    cond_init_mono(&h->work_cv);
    cond_init_mono(&h->idle_cv);
    cond_init_mono(&h->reap_cv);
    ms_rng_seed(&h->rng, ms_now_ns() ^ ((uint64_t)getpid() << 32));
    if (!h->model_name || !h->origins || !h->hosts || (o->bearer_token && o->bearer_token[0] && !h->token)) {
        http_free(h);
        MS_FAIL(MS_ERR_NOMEM, "http: out of memory");
    }
    char why[256];
    if (ms_origin_list_check(h->origins, why, sizeof why) < 0 || ms_origin_hosts_check(h->hosts, why, sizeof why) < 0) {
        http_free(h);
        MS_FAIL(MS_ERR_INVALID, "http: %s", why);
    }
    if (strlen(h->model_name) >= MS_HTTP_MODEL_MAX) h->model_name[MS_HTTP_MODEL_MAX - 1] = 0;

    if (pthread_create(&h->worker, NULL, worker_main, h) != 0) {
        http_free(h);
        MS_FAIL(MS_ERR_INTERNAL, "http: cannot start the worker thread");
    }
    h->worker_started = true;
    if (pthread_create(&h->reaper, NULL, reaper_main, h) != 0) {
        ms_http *tmp = h;
        ms_http_stop(&tmp);
        MS_FAIL(MS_ERR_INTERNAL, "http: cannot start the connection reaper thread");
    }
    h->reaper_started = true;
    /* The reserve above max_connections is where overflow connections are
     * answered 503 instead of being closed unanswered. */
    unsigned limit = (unsigned)h->max_conn + (unsigned)h->max_conn / 4 + 16;
    h->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, h,                 //
                            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,                           //
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,                        //
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,                        //
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,                      //
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,                              //
                            MHD_OPTION_CONNECTION_LIMIT, limit,                                  //
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)idle_s,                     //
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)1 << 20,                       //
                            MHD_OPTION_END);
    if (!h->d) {
        ms_http *tmp = h;
        ms_http_stop(&tmp);
        MS_FAIL(MS_ERR_IO, "http: cannot listen on %s:%d (address in use or not local?)", listen, o->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di && di->port ? di->port : o->port;
    MS_LOG_INFO("http: listening on %s:%d (queue %d, max_tokens %d..%d, %d connections, header timeout %.1f s, "
                "idle timeout %d s, request timeout %s%s)",
                listen, h->port, h->queue_cap, h->max_tokens_default, h->max_tokens_limit, h->max_conn,
                h->header_timeout_s, idle_s, h->request_timeout_s > 0 ? "on" : "off",
                h->token ? ", bearer token required" : "");
    *out = h;
    return MS_OK;
}

/* Whether a tracked connection's socket was shut by this file (h->cmu held). */
static bool any_reaped_locked(const ms_http *h) {
    for (const peer *p = h->peers; p; p = p->next)
        if (p->reaped) return true;
    return false;
}

void ms_http_stop(ms_http **hp) {
    if (!hp || !*hp) return;
    ms_http *h = *hp;
    *hp = NULL;
    pthread_mutex_lock(&h->mu);
    h->stopping = true;
    while (h->head) { /* queued requests: 503 */
        job *j = h->head;
        h->head = j->next;
        j->next = NULL;
        h->n_queued--;
        j->status = MS_ERR_CANCELLED;
        j->http_code = 503;
        snprintf(j->errmsg, sizeof j->errmsg, "the server is shutting down");
        if (j->req.stream) {
            sse_event(j, error_json(j->errmsg, "server_error", NULL));
            buf_str(&j->sse, "data: [DONE]\n\n");
        }
        j->state = JOB_DONE;
        pthread_cond_broadcast(&j->cv);
        job_unref_locked(j);
    }
    h->tail = NULL;
    pthread_cond_broadcast(&h->work_cv);
    pthread_mutex_unlock(&h->mu);
    if (h->worker_started) pthread_join(h->worker, NULL); /* finishes the running request */
    if (h->d) {
        /* Let the connections send their answers before MHD closes them (bounded). */
        double deadline = ms_now_s() + STOP_DRAIN_S;
        pthread_mutex_lock(&h->mu);
        while (h->n_conn_jobs > 0 && ms_now_s() < deadline) wait_ms(&h->idle_cv, &h->mu, 50);
        pthread_mutex_unlock(&h->mu);
        /* A connection whose socket this file shut (a library error answered
         * as JSON, a 408) is still in the library's own failing send: let its
         * thread close it first (bounded). libmicrohttpd 0.9.75 closing such
         * a connection from MHD_stop_daemon while its thread builds the
         * response head read a NULL response (SIGSEGV in test_http, 1 run in
         * ~20 on a loaded machine). */
        pthread_mutex_lock(&h->cmu);
        while (any_reaped_locked(h) && ms_now_s() < deadline) wait_ms(&h->reap_cv, &h->cmu, 10);
        pthread_mutex_unlock(&h->cmu);
        MHD_stop_daemon(h->d);
    }
    if (h->reaper_started) {
        pthread_mutex_lock(&h->cmu);
        h->reaper_stop = true;
        pthread_cond_broadcast(&h->reap_cv);
        pthread_mutex_unlock(&h->cmu);
        pthread_join(h->reaper, NULL);
    }
    http_free(h);
}
