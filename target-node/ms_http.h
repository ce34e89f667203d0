/* ms_http.h — the target node's OpenAI-compatible HTTP front end (docs/architecture.md §7).
 *
 * Endpoints (libmicrohttpd):
 *   POST /v1/completions       {model, prompt, max_tokens, temperature, top_p, seed, stop, stream}
 *   POST /v1/chat/completions  {model, messages [{role, content}], ...same}
 *   GET  /v1/models            the one model served
 *   GET  /v1/models/{id}       that model (404 for another id)
 *   OPTIONS any path           CORS preflight: 204 (with Access-Control-Allow-* for an allowed Origin)
 *   GET  /health               {"status", "queue", "running", "model", ...backend health}
 *   GET  /metrics              Prometheus text (+ backend extra)
 * Responses follow OpenAI's shapes plus a "microspec" object with the
 * request's statistics; "stream": true answers text/event-stream chunks, a
 * final chunk with finish_reason + usage + microspec, then `data: [DONE]`.
 *
 * The layer does not know how text is generated: it runs requests one at a
 * time (batch 1) on a worker thread it owns, through an ms_http_backend, and
 * keeps a bounded FIFO queue (full → 503 at once). Stop strings are applied
 * here: the text is cut before the stop string that is completed first (byte
 * by byte, so independent of how the backend splits its text; on a tie the
 * longer one) and the backend is told to stop (its emit callback returns
 * false). While streaming, the last (longest stop − 1) bytes are held back. A client that goes away cancels
 * its request the same way.
 *
 * With a bearer token set, every endpoint except /health needs
 * `Authorization: Bearer <token>` (401 otherwise); /health stays open so that
 * launchers and load balancers can probe the node without the secret.
 *
 * Overload is answered, not reset: see max_connections and header_timeout_s.
 * A malformed method gets 400. A request line without a space is closed at
 * once by libmicrohttpd 0.9.7x without a reply (it gives the application no
 * hook there); one that never ends gets the 408 of the header timeout.
 *
 * Framing (issue 35.4), before any endpoint: an HTTP/1.1 request without
 * exactly one Host, with two Content-Length values that differ, with
 * Transfer-Encoding and Content-Length together or a Transfer-Encoding other
 * than chunked, or with a control character (a bare CR) in a header gets 400.
 * The errors libmicrohttpd answers itself (400 for a Content-Length it cannot
 * read or a header line without a colon, 413, 414, 431) are answered in the
 * API's JSON error shape instead of the library's HTML (see ms_http.c).
 * Then the Host and Origin checks (allowed_hosts, allowed_origins): 403.
 */
#ifndef MS_HTTP_H
#define MS_HTTP_H

#include <jansson.h>
#include <stdio.h>

#include "ms_target.h"    /* ms_gen_stats */
#include "ms_tokenizer.h" /* ms_chat_msg, ms_chat_role */

#define MS_HTTP_MAX_STOP 4          /* stop strings per request (OpenAI's limit) */
#define MS_HTTP_MAX_STOP_LEN 256    /* bytes per stop string */
#define MS_HTTP_MAX_BODY (1u << 20) /* request bodies above 1 MiB → 413 */
#define MS_HTTP_MAX_MESSAGES 1024   /* chat messages per request */
#define MS_HTTP_MAX_TOKENS_CAP (1 << 24) /* parser bound; the server applies its own limit */
#define MS_HTTP_MODEL_MAX 128       /* bytes of the model name, NUL included */

/* One validated request body. Owns its strings (ms_http_request_free). */
typedef struct {
    bool chat;                 /* /v1/chat/completions */
    char *prompt;              /* completions: the prompt (UTF-8, NUL-terminated, no NUL inside) */
    size_t prompt_len;
    ms_chat_msg *messages;     /* chat: n_messages ≥ 1, contents owned (NUL-terminated) */
    int64_t n_messages;
    int64_t max_tokens;        /* 1..MS_HTTP_MAX_TOKENS_CAP; 0 = absent (the server's default applies) */
    double temperature;        /* [0, 2], default 1 (OpenAI); 0 = greedy */
    double top_p;              /* (0, 1], default 1 */
    uint64_t seed;             /* valid when has_seed (JSON integers are taken modulo 2^64) */
    bool has_seed;
    char stop[MS_HTTP_MAX_STOP][MS_HTTP_MAX_STOP_LEN + 1]; /* each 1..256 bytes, NUL-terminated */
    size_t stop_len[MS_HTTP_MAX_STOP];
    int n_stop;
    bool stream;
    char model[MS_HTTP_MODEL_MAX]; /* as sent by the client; "" when absent */
    /* On a parse failure: the offending field ("max_tokens", "messages[2].role"), "" if none. */
    char err_param[48];
} ms_http_request;

/* Parse and validate a request body (bytes, not necessarily NUL-terminated).
 * On failure returns MS_ERR_INVALID with a client-facing message in err and
 * the field in out->err_param; out then holds nothing to free. Unknown fields
 * are ignored, JSON null counts as absent, "n" must be 1 if given. Never logs
 * (client errors are answered, not logged). */
ms_status ms_http_parse_request(const char *body, size_t len, bool chat, ms_http_request *out, char *err, size_t cap);
void ms_http_request_free(ms_http_request *r);

/* An error the backend wants the client to see as such (e.g. a prompt longer
 * than the context: 400, code "context_length_exceeded"), rather than the
 * generic 500. Left at http_code 0 by a backend that has nothing to add. */
typedef struct {
    int http_code;     /* 4xx/5xx; 0 → 500 "generation failed" */
    char code[40];     /* OpenAI-style error code, "" → null */
    char param[40];    /* the offending field, "" → null */
    char message[256]; /* client-facing text */
} ms_http_error;

/* Generation behind the HTTP layer. Callbacks run on the worker thread
 * (run) or on connection threads (health, metrics), never two runs at once;
 * health/metrics may run while run is in progress. */
typedef struct {
    void *ctx;
    /* Run one request: render/tokenize, generate, calling emit(text piece)
     * in order as text is decoded (any split, UTF-8 may straddle pieces).
     * emit returns false when the request must stop (a stop string was hit,
     * or the client went away): the backend then returns promptly. Fill
     * stats and finish_reason ("stop" | "length", cap bytes). MS_OK, or an
     * error (→ HTTP 500 JSON error, or an error event mid-stream; the status
     * and message of *err when the backend fills it). */
    ms_status (*run)(void *ctx, const ms_http_request *req, bool (*emit)(void *ectx, const char *text, size_t n),
                     void *ectx, ms_gen_stats *stats, char *finish_reason, size_t cap, ms_http_error *err);
    /* Adds the backend's state to the /health object, e.g. {"draft": "up"}. May be NULL. */
    void (*health)(void *ctx, json_t *obj);
    /* Appends Prometheus text to /metrics (e.g. draft link state). May be NULL. */
    void (*metrics)(void *ctx, FILE *out);
} ms_http_backend;

typedef struct {
    const char *listen;         /* address to bind (IPv4 or IPv6 literal); NULL → "127.0.0.1" */
    int port;                   /* 0 → any free port (ms_http_port tells which) */
    int queue;                  /* requests waiting behind the running one; ≤ 0 → 16 */
    const char *bearer_token;   /* NULL or "" → no authentication */
    int max_tokens_default;     /* when the request gives none; ≤ 0 → 256 (clamped to the limit) */
    int max_tokens_limit;       /* larger max_tokens → 400; ≤ 0 → 4096 */
    const char *model_name;     /* echoed when the request names none; NULL → "microspec" */
    /* Connections held open at once, idle ones included; ≤ 0 → 1024. Beyond it
     * (up to a reserve of max_connections/4 + 16 more) a request is answered
     * 503 with "Connection: close" (/health still 200), past the reserve the
     * socket is closed at once. */
    int max_connections;
    /* A request (line, headers and body) must arrive within this many seconds
     * of the connection opening or of the previous response on it, else the
     * connection gets a 408 and is closed: trickling clients cannot hold a
     * slot. ≤ 0 → 10. */
    double header_timeout_s;
    int idle_timeout_s;         /* no socket activity for this long → closed (MHD's timeout); ≤ 0 → 30 */
    /* A request generating for longer is stopped: finish_reason "timeout",
     * microspec.stop_reason "request timeout", the text so far. ≤ 0 → none. */
    double request_timeout_s;
    /* Browser origins (common/ms_origin.h): a request with an Origin header
     * not in the list gets 403; an allowed one is echoed in
     * Access-Control-Allow-Origin (never "*" unless the list says "*").
     * NULL → "localhost"; "" or "none" → no origin. */
    const char *allowed_origins;
    /* Host names answered besides loopback names, the listen address and
     * gethostname() (DNS rebinding; others get 403); "*" → any. NULL → none. */
    const char *allowed_hosts;
} ms_http_opts;

typedef struct ms_http ms_http;

/* Start listening and the worker thread. Copies opts and backend. */
ms_status ms_http_start(const ms_http_opts *o, const ms_http_backend *b, ms_http **out);
int ms_http_port(const ms_http *h);
/* Finish the running request, answer the queued ones 503, join the threads,
 * free, and set *h to NULL. NULL-safe. */
void ms_http_stop(ms_http **h);

#endif
