/* ms_config.c — the cluster configuration file, table-driven (like redis's
 * config.c): one row per key with its type, default, bounds, allowed values,
 * place in ms_cfg and help. Loading walks the libconfig tree against the
 * table (so unknown keys are found at any depth), then runs the cross-field
 * checks. Adding a key = one field in ms_cfg + one row here. */
#include "ms_config.h"
#include "ms_origin.h"

#include <arpa/inet.h>
#include <libconfig.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <errno.h>

typedef enum {
    K_BOOL,
    K_INT,
    K_FLOAT,    /* a double; an integer literal is taken as well */
    K_STR,      /* any printable text */
    K_PATH,     /* a local file or folder, resolved against the config's folder */
    K_ENUM,     /* one of `allowed` ("a|b|c") */
    K_DEVICE,   /* "cpu" | "cuda:N" */
    K_ENDPOINT, /* "tcp://HOST:PORT" | "ipc://PATH" */
    K_Z85,      /* "" or a 40-character Z85 CURVE key */
    K_SAFE,     /* host names, user, remote folder: pasted into ssh command lines */
    K_ORIGINS,  /* a list of browser origins (ms_origin.h) */
    K_HOSTS,    /* a list of Host names (ms_origin.h) */
} key_kind;

enum {
    F_SECRET = 1,   /* never logged; --dump writes it only when asked */
    F_NONEMPTY = 2, /* "" is refused */
};

typedef struct {
    const char *path;
    key_kind kind;
    int64_t def_i;       /* K_BOOL, K_INT */
    const char *def_s;   /* string kinds */
    int64_t lo, hi;      /* K_INT bounds, inclusive */
    const char *allowed; /* K_ENUM */
    size_t off, size;    /* the field in ms_cfg */
    int flags;
    const char *help;
    double def_f, lo_f, hi_f; /* K_FLOAT default and bounds, inclusive */
} cfg_key;

#define FIELD(m) offsetof(ms_cfg, m), sizeof(((ms_cfg *)0)->m)
#define KEY_BOOL(p, m, d, help) {p, K_BOOL, d, NULL, 0, 1, NULL, FIELD(m), 0, help, 0, 0, 0}
#define KEY_INT(p, m, d, lo, hi, help) {p, K_INT, d, NULL, lo, hi, NULL, FIELD(m), 0, help, 0, 0, 0}
#define KEY_FLOAT(p, m, d, lo, hi, help) {p, K_FLOAT, 0, NULL, 0, 0, NULL, FIELD(m), 0, help, d, lo, hi}
#define KEY_STR(p, kind, m, d, flags, help) {p, kind, 0, d, 0, 0, NULL, FIELD(m), flags, help, 0, 0, 0}
#define KEY_ENUM(p, m, d, allowed, help) {p, K_ENUM, 0, d, 0, 0, allowed, FIELD(m), 0, help, 0, 0, 0}

/* Keys of one group must be contiguous (ms_cfg_dump opens each group once). */
static const cfg_key g_keys[] = {
    KEY_STR("target.model", K_PATH, target.model, "", 0,
            "target model folder (config.json, *.safetensors, tokenizer); required; relative paths are "
            "resolved against this file's folder; existence is checked by the node at start"),
    KEY_INT("target.max_ctx", target.max_ctx, 4096, 1, 1 << 24, "target KV cache rows (prompt + generated tokens)"),
    KEY_INT("target.threads", target.threads, 0, 0, 1024, "CPU threads of the target node (0: the number of cores)"),
    KEY_STR("target.device", K_DEVICE, target.device, "cpu", 0, "where the target runs: \"cpu\" or \"cuda:N\""),
    KEY_BOOL("target.q8_matmul", target.q8_matmul, 1,
             "GGUF on the CPU: activations quantized to 8 bits for integer dot products, as llama.cpp does "
             "(several times faster; log-probs ~0.1 from the exact path, so greedy text may part from it at "
             "near-ties); false: the exact f32 path. Output stays the target's own either way (the draft never "
             "changes it)"),

    KEY_BOOL("draft.enabled", draft.enabled, 1, "false: no draft node, the target decodes alone (autoregressive)"),
    KEY_ENUM("draft.kind", draft.kind, "layerskip", "layerskip|lm|eagle|layerskip+ngram|lm+ngram|eagle+ngram",
             "draft model: layerskip (the target's first draft.layers layers, no extra weights), lm (a "
             "small LM sharing the tokenizer), eagle (an EAGLE head on the target's features); +ngram: the "
             "n-gram source (continuations of the request's own text) merged into every tree"),
    KEY_STR("draft.model", K_PATH, draft.model, "", 0,
            "lm: the draft model folder; eagle: the EAGLE head folder; layerskip: unused (uses target.model)"),
    KEY_INT("draft.layers", draft.layers, 1, 1, 1024, "layerskip: how many of the target's first layers draft"),
    KEY_INT("draft.max_ctx", draft.max_ctx, 0, 0, 1 << 24, "draft KV rows (0: the model's default)"),
    KEY_INT("draft.threads", draft.threads, 0, 0, 1024, "CPU threads of the draft node (0: the number of cores)"),
    KEY_STR("draft.device", K_DEVICE, draft.device, "cpu", 0, "where the draft runs: \"cpu\" or \"cuda:N\""),
    KEY_FLOAT("draft.p_min", draft.p_min, 0.0, 0.0, 2.0,
              "confidence stop: a round drafts no further once the draft's top-1 probability at a step (tree mode: "
              "the best cumulative probability of a level) is below p_min; that token is still verified. 0 = off; "
              "> 1: one draft step per round"),
    KEY_ENUM("draft.policy", draft.policy, "cost", "cost|all",
             "cost: the target verifies only the part of each tree expected to pay on this machine and skips "
             "the draft model while it does not pay (verify costs measured at the first request); all: every "
             "drafted node, every round"),
    KEY_BOOL("draft.adaptive", draft.adaptive, 0,
             "adapt the draft depth per request between 1 and tree.depth+1 tokens from the recent acceptance "
             "(grow by one after a fully accepted round, shrink towards the accepted-length average + 1)"),

    KEY_ENUM("vocab.mode", vocab.mode, "dynamic", "dynamic|static|full|specvocab|specvocab+window|dynaspec|dynaspec+window|static+window",
             "draft vocabulary (docs/architecture.md §5): dynamic (MicroSpec window), static (FR-Spec list), full (all rows); "
             "per step (issue 16): specvocab / dynaspec (the candidates a selector picks from vocab.artifact for "
             "each draft step), specvocab+window / dynaspec+window (those candidates plus the dynamic window), "
             "static+window (the vocab.list ids plus the dynamic window)"),
    KEY_INT("vocab.w_max", vocab.w_max, 3072, 1, INT32_MAX, "dynamic: window size W_max (stream entries)"),
    KEY_INT("vocab.k_pre", vocab.k_pre, 3, 0, MS_CFG_TREE_MAX, "dynamic: top-K_pre target ids per prompt position"),
    KEY_INT("vocab.k_ver", vocab.k_ver, 3, 0, MS_CFG_TREE_MAX, "dynamic: top-K_ver target ids per accepted node"),
    KEY_STR("vocab.list", K_PATH, vocab.list, "", 0, "static: a microspec-freqlist file (required for static)"),
    KEY_ENUM("vocab.stream", vocab.stream, "both", "both|context|extension",
             "dynamic: the stream feeding the window (ablation): both = prompt + top-K_pre, then C_draft + C_ver "
             "(the paper's); context = prompt, then the emitted tokens; extension = top-K_pre, then C_draft + C_ver. "
             "The draft node refuses a value other than both unless vocab.mode is dynamic"),
    KEY_STR("vocab.artifact", K_PATH, vocab.artifact, "", 0,
            "specvocab / dynaspec: the selector's artefact, built for the draft model (tools/vocab/specvocab_build.py); "
            "the draft node refuses an artefact made for another model"),
    KEY_INT("vocab.specvocab_k", vocab.specvocab_k, 1024, 1, 1 << 24,
            "specvocab: top-k candidates per draft row at the first step (united over a level's rows)"),
    KEY_FLOAT("vocab.budget_decay", vocab.budget_decay, 1.0, 1e-6, 1.0,
              "position-aware budget R: at draft depth l, static uses the first max(budget_min, floor(K*R^l)) ids "
              "of its list and specvocab that many per row; 1 = off"),
    KEY_INT("vocab.budget_min", vocab.budget_min, 0, 0, 1 << 24, "the position-aware budget's floor K_min"),
    KEY_INT("vocab.dynaspec_clusters", vocab.dynaspec_clusters, 0, 0, 1 << 24,
            "dynaspec: clusters K_C0 at the first step (0: the selector's default)"),
    KEY_FLOAT("vocab.dynaspec_decay", vocab.dynaspec_decay, 1.0, 1e-6, 1.0, "dynaspec: cluster budget decay per depth"),
    KEY_INT("vocab.dynaspec_min", vocab.dynaspec_min, 0, 0, 1 << 24, "dynaspec: the cluster budget's floor K_min"),
    KEY_ENUM("vocab.lm_head", vocab.lm_head, "gathered", "gathered|indexed",
             "draft LM head: gathered (one GEMM over the packed active rows) or indexed (a dot product per "
             "active id with the full head's row in place, no row copies; ablation)"),

    KEY_INT("tree.top_k", tree.top_k, 10, 1, MS_CFG_TREE_MAX_K, "EAGLE-2 tree: children per node and beam width"),
    KEY_INT("tree.depth", tree.depth, 5, 0, MS_CFG_TREE_MAX - 2,
            "expansion passes after the first; tree mode needs top_k*depth <= 64, chain mode depth+2 <= 64"),
    KEY_INT("tree.total", tree.total, 60, 2, MS_CFG_TREE_MAX, "tree nodes per round including the root"),
    KEY_BOOL("tree.chain", tree.chain, 0, "a single path of depth+1 tokens instead of a tree"),

    KEY_ENUM("pipeline", pipeline, "sync", "sync|overlap",
             "sync: draft after each verify; overlap: pre-draft the next round while the target verifies"),

    KEY_STR("link.endpoint", K_ENDPOINT, link.endpoint, "tcp://127.0.0.1:5757", 0,
            "target<->draft ZeroMQ endpoint, tcp://HOST:PORT or ipc://PATH; the target binds it, the draft "
            "connects to it"),
    KEY_INT("link.deadline_ms", link.deadline_ms, 2000, 1, 3600000,
            "the target waits this long for a draft reply, then finishes the request alone"),
    KEY_INT("link.heartbeat_ms", link.heartbeat_ms, 500, 10, 600000, "heartbeat period on an idle link"),
    KEY_INT("link.reconnect_ms", link.reconnect_ms, 500, 10, 600000, "delay between reconnection attempts"),
    KEY_INT("link.max_message_bytes", link.max_message_bytes, 64 << 20, 65536, (int64_t)1 << 31,
            "largest message accepted on the link"),
    KEY_ENUM("link.tensor", link.tensor, "auto", "auto|host|ipc|nccl",
             "how eagle features cross the link: host (ZeroMQ frame), ipc (CUDA IPC, both nodes on one GPU), nccl "
             "(two GPUs), auto (nccl for different GPUs, ipc for the same GPU, else host)"),
    KEY_STR("link.secret_file", K_PATH, link.secret_file, "", 0,
            "a file of >= 16 secret bytes, mode 0600, that both nodes read: the target admits only a draft that "
            "proves it holds the same bytes (HMAC of a fresh nonce). cluster/launch.sh makes one per cluster when "
            "this is \"\" and CURVE is off; a node also takes --link-secret FILE"),
    KEY_BOOL("link.curve.enabled", link.curve.enabled, 0, "require ZeroMQ CURVE encryption on the link"),
    KEY_STR("link.curve.server_public", K_Z85, link.curve.server_public, "", F_SECRET,
            "the target's CURVE public key (40 Z85 characters, e.g. from zmq_curve_keypair)"),
    KEY_STR("link.curve.server_secret", K_Z85, link.curve.server_secret, "", F_SECRET, "the target's CURVE secret key"),
    KEY_STR("link.curve.client_public", K_Z85, link.curve.client_public, "", F_SECRET, "the draft's CURVE public key"),
    KEY_STR("link.curve.client_secret", K_Z85, link.curve.client_secret, "", F_SECRET, "the draft's CURVE secret key"),

    KEY_STR("http.listen", K_SAFE, http.listen, "127.0.0.1", F_NONEMPTY,
            "address the HTTP API listens on: an IPv4/IPv6 literal or \"localhost\" (loopback by default)"),
    KEY_INT("http.port", http.port, 8080, 1, 65535, "HTTP port"),
    KEY_INT("http.queue", http.queue, 8, 1, 4096, "requests waiting beyond the running one; a full queue answers 503"),
    KEY_INT("http.max_tokens_default", http.max_tokens_default, 256, 1, 1 << 20,
            "max_tokens of a request that gives none (<= max_tokens_limit)"),
    KEY_INT("http.max_tokens_limit", http.max_tokens_limit, 4096, 1, 1 << 20, "largest max_tokens a request may ask"),
    KEY_STR("http.bearer_token", K_STR, http.bearer_token, "", F_SECRET,
            "if set, requests need \"Authorization: Bearer TOKEN\""),
    KEY_INT("http.request_timeout_s", http.request_timeout_s, 600, 1, 86400,
            "a request generating longer is stopped: its text so far, finish_reason \"timeout\""),
    KEY_INT("http.max_connections", http.max_connections, 1024, 2, 65536,
            "HTTP connections open at once, idle ones included (> http.queue + 1); beyond it requests get 503 "
            "(/health still answers)"),
    KEY_INT("http.header_timeout_s", http.header_timeout_s, 10, 1, 3600,
            "a request (line, headers, body) must arrive within this many seconds of the connection opening or "
            "the previous response, else 408 and the connection is closed"),
    KEY_INT("http.idle_timeout_s", http.idle_timeout_s, 30, 1, 86400,
            "a connection with no socket activity for this long is closed"),
    KEY_STR("http.allowed_origins", K_ORIGINS, http.allowed_origins, "localhost", 0,
            "browser origins that may call the API (their requests carry Origin; others get 403): localhost "
            "(http(s) on localhost, 127.0.0.1, [::1], any port), SCHEME://HOST[:PORT|:*], * (any "
            "origin), none; comma-separated"),
    KEY_STR("http.allowed_hosts", K_HOSTS, http.allowed_hosts, "", 0,
            "Host names answered besides loopback names, the listen address and this machine's name (DNS "
            "rebinding: others get 403): names, IP literals, *.SUFFIX, or * (no check, e.g. behind a proxy "
            "that rewrites Host); comma-separated"),

    KEY_STR("hosts.target", K_SAFE, hosts.target, "localhost", F_NONEMPTY,
            "cluster/launch.sh: host of the target node (localhost: started locally, else over ssh)"),
    KEY_STR("hosts.draft", K_SAFE, hosts.draft, "localhost", F_NONEMPTY, "cluster/launch.sh: host of the draft node"),
    KEY_STR("hosts.ssh_user", K_SAFE, hosts.ssh_user, "", 0, "cluster/launch.sh: ssh user (\"\": the current user)"),
    KEY_STR("hosts.workdir", K_SAFE, hosts.workdir, "", 0,
            "cluster/launch.sh: the checkout on the remote hosts (\"\": the same path as here); not resolved"),

    KEY_ENUM("log.level", log.level, "info", "debug|info|warn|error|off", "log threshold of both nodes"),
    KEY_STR("log.dir", K_PATH, log.dir, "", 0, "folder for the nodes' log files (\"\": stderr only)"),
};
#define N_KEYS ((int64_t)(sizeof g_keys / sizeof g_keys[0]))

static const char Z85_CHARS[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
static const char SAFE_CHARS[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/~+-@";

/* ---- the table ------------------------------------------------------------ */

static const cfg_key *find_key(const char *path) {
    for (int64_t i = 0; i < N_KEYS; i++)
        if (!strcmp(g_keys[i].path, path)) return &g_keys[i];
    return NULL;
}

/* A group is a proper prefix of some key path, ending at a '.'. */
static bool is_group(const char *path) {
    size_t n = strlen(path);
    for (int64_t i = 0; i < N_KEYS; i++)
        if (!strncmp(g_keys[i].path, path, n) && g_keys[i].path[n] == '.') return true;
    return false;
}

static void *field(ms_cfg *c, const cfg_key *k) { return (char *)c + k->off; }
static const void *cfield(const ms_cfg *c, const cfg_key *k) { return (const char *)c + k->off; }

static const char *kind_name(key_kind kind) {
    switch (kind) {
    case K_BOOL: return "boolean";
    case K_INT: return "integer";
    case K_FLOAT: return "float";
    case K_ENUM: return "enum";
    case K_PATH: return "path";
    case K_DEVICE: return "device";
    case K_ENDPOINT: return "endpoint";
    case K_Z85: return "z85 key";
    case K_SAFE: return "name";
    case K_ORIGINS: return "origins";
    case K_HOSTS: return "hosts";
    default: return "string";
    }
}

void ms_cfg_defaults(ms_cfg *out) {
    memset(out, 0, sizeof *out);
    for (int64_t i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &g_keys[i];
        if (k->kind == K_BOOL) *(bool *)field(out, k) = k->def_i != 0;
        else if (k->kind == K_INT) *(int64_t *)field(out, k) = k->def_i;
        else if (k->kind == K_FLOAT) *(double *)field(out, k) = k->def_f;
        else snprintf(field(out, k), k->size, "%s", k->def_s);
    }
}

/* ---- pre-scan of the text ------------------------------------------------------- */

/* Three things libconfig 1.5 gets wrong for us, found by a small scan of the
 * text (strings and comments skipped, lines counted like libconfig's lexer):
 *  - an integer literal without the L suffix is read with atoi into an int,
 *    so 3000000000 silently becomes -1294967296: such literals are recorded
 *    with the dotted path of their key and refused when the key is read;
 *  - @include would open files relative to the current folder: one file
 *    describes the cluster, so it is refused (this also keeps the fuzz target
 *    off the file system);
 *  - a string left open at the end of the text is refused with the line
 *    where it opens (libconfig would point at the end of the file). */
#define SCAN_MAX_BIG 16
#define SCAN_MAX_DEPTH 8

typedef struct {
    int line;
    char path[128];
    char literal[40];
} big_literal;

typedef struct {
    int include_line;              /* 0: none */
    int open_string_line;          /* a string still open at the end of the text (0: none) */
    int n_big;                     /* all found; the first SCAN_MAX_BIG are kept */
    big_literal big[SCAN_MAX_BIG];
} scan_result;

static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '*'; }
static bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void scan_text(const char *p, scan_result *r) {
    char stack[SCAN_MAX_DEPTH][64], pending[64] = "";
    int depth = 0, line = 1;
    bool line_start = true;
    memset(r, 0, sizeof *r);
    while (*p) {
        char c = *p;
        if (c == '\n') {
            line++;
            line_start = true;
            p++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
            p++;
            continue;
        }
        if (line_start && c == '@' && !strncmp(p, "@include", 8) && !r->include_line) r->include_line = line;
        line_start = false;
        if (c == '#' || (c == '/' && p[1] == '/')) {
            while (*p && *p != '\n') p++;
        } else if (c == '/' && p[1] == '*') {
            for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++) line += *p == '\n';
            if (*p) p += 2;
        } else if (c == '"') {
            int start_line = line;
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1]) p++;
                line += *p == '\n';
            }
            if (*p) p++;
            else r->open_string_line = start_line;
        } else if (is_name_start(c)) {
            const char *w = p;
            while (is_name_char(*p)) p++;
            const char *q = p;
            while (*q == ' ' || *q == '\t' || *q == '\r') q++;
            if (*q == '=' || *q == ':') snprintf(pending, sizeof pending, "%.*s", (int)(p - w), w);
        } else if (c == '{' || c == '(' || c == '[') {
            if (depth < SCAN_MAX_DEPTH) snprintf(stack[depth], sizeof stack[depth], "%s", pending);
            depth++;
            pending[0] = '\0';
            p++;
        } else if (c == '}' || c == ')' || c == ']') {
            if (depth > 0) depth--;
            p++;
        } else if (is_digit(c) || ((c == '-' || c == '+') && is_digit(p[1]))) {
            const char *start = p;
            bool big = false;
            if (c == '-' || c == '+') p++;
            if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
                p += 2;
                const char *h = p;
                while (is_digit(*p) || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')) p++;
                size_t n = (size_t)(p - h);
                while (n > 1 && *h == '0') h++, n--;
                big = *p != 'L' && (n > 8 || (n == 8 && strchr("89abcdefABCDEF", *h)));
            } else {
                while (is_digit(*p)) p++;
                if (*p == '.' || *p == 'e' || *p == 'E') {
                    while (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-') p++;
                } else if (*p != 'L') {
                    errno = 0;
                    long long v = strtoll(start, NULL, 10);
                    big = errno == ERANGE || v < INT32_MIN || v > INT32_MAX;
                }
            }
            while (*p == 'L') p++;
            if (big) {
                if (r->n_big < SCAN_MAX_BIG) {
                    big_literal *b = &r->big[r->n_big];
                    b->line = line;
                    size_t used = 0;
                    b->path[0] = '\0';
                    for (int d = 0; d <= depth && d <= SCAN_MAX_DEPTH; d++) {
                        const char *part = d < depth ? (d < SCAN_MAX_DEPTH ? stack[d] : "?") : pending;
                        int w = snprintf(b->path + used, sizeof b->path - used, "%s%s", used ? "." : "", part);
                        if (w < 0 || (size_t)w >= sizeof b->path - used) break;
                        used += (size_t)w;
                    }
                    snprintf(b->literal, sizeof b->literal, "%.*s", (int)(p - start < 32 ? p - start : 32), start);
                }
                r->n_big++;
            }
        } else {
            p++;
        }
    }
}

/* ---- errors ----------------------------------------------------------------- */

typedef struct {
    const char *name;        /* file name in messages, or NULL (ms_cfg_check) */
    const char *base_dir;    /* relative paths are joined to it; NULL: left as they are */
    const config_t *lc;      /* the parsed file, for line numbers of cross-field errors */
    const scan_result *scan; /* integer literals libconfig would wrap */
    char *err;
    size_t cap;
} cfg_ctx;

/* "NAME:LINE: PATH: problem" (LINE omitted when 0, NAME and PATH when NULL),
 * logged once and copied to the caller's buffer. */
__attribute__((format(printf, 5, 6))) static ms_status cfg_fail(cfg_ctx *x, ms_status code, int line,
                                                                const char *path, const char *fmt, ...) {
    char problem[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    char where[64] = "";
    if (x->name && line > 0) snprintf(where, sizeof where, ":%d", line);
    char *msg = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&msg, &len);
    if (m) {
        if (x->name) fprintf(m, "%s%s: ", x->name, where);
        if (path) fprintf(m, "%s: ", path);
        fputs(problem, m);
        fclose(m);
    }
    const char *text = msg ? msg : problem;
    ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s", text);
    if (x->err && x->cap) snprintf(x->err, x->cap, "%s", text);
    free(msg);
    return code;
}

/* ---- value checks -------------------------------------------------------------- */

static bool all_in(const char *s, const char *set) { return s[strspn(s, set)] == '\0'; }

static bool parse_uint(const char *s, int64_t hi, int64_t *out) {
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 9) return false;
    int64_t v = strtoll(s, NULL, 10);
    if (v > hi) return false;
    *out = v;
    return true;
}

static bool enum_allows(const char *allowed, const char *v) {
    size_t n = strlen(v);
    for (const char *p = allowed; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

/* Kind-specific checks of a string value (already length-checked and free of
 * control characters). Writes the problem to why. */
static ms_status check_string(const cfg_key *k, const char *v, char *why, size_t cap) {
    if ((k->flags & F_NONEMPTY) && !*v) {
        snprintf(why, cap, "must not be empty");
        return MS_ERR_INVALID;
    }
    int64_t n;
    switch (k->kind) {
    case K_ENUM:
        if (!enum_allows(k->allowed, v)) {
            snprintf(why, cap, "\"%.64s\" is not one of %s", v, k->allowed);
            return MS_ERR_INVALID;
        }
        return MS_OK;
    case K_DEVICE:
        if (!strcmp(v, "cpu") || (!strncmp(v, "cuda:", 5) && parse_uint(v + 5, 255, &n))) return MS_OK;
        snprintf(why, cap, "\"%.64s\" is not a device (\"cpu\" or \"cuda:N\", N in 0..255)", v);
        return MS_ERR_INVALID;
    case K_ENDPOINT:
        if (!strncmp(v, "ipc://", 6)) {
            if (v[6]) return MS_OK;
            snprintf(why, cap, "ipc:// needs a path");
            return MS_ERR_INVALID;
        }
        if (!strncmp(v, "tcp://", 6)) {
            const char *host = v + 6, *colon = strrchr(host, ':');
            if (!colon || colon == host) {
                snprintf(why, cap, "\"%.64s\": expected tcp://HOST:PORT", v);
                return MS_ERR_INVALID;
            }
            if (!parse_uint(colon + 1, 65535, &n) || n < 1) {
                snprintf(why, cap, "\"%.64s\": port must be 1..65535", v);
                return MS_ERR_INVALID;
            }
            if (colon - host == 1 && host[0] == '*') {
                snprintf(why, cap, "\"%.64s\": the draft connects to this address, so it cannot be *", v);
                return MS_ERR_INVALID;
            }
            for (const char *p = host; p < colon; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]", *p)) {
                    snprintf(why, cap, "\"%.64s\": '%c' cannot appear in a host", v, *p);
                    return MS_ERR_INVALID;
                }
            return MS_OK;
        }
        snprintf(why, cap, "\"%.64s\": the scheme must be tcp:// or ipc://", v);
        return MS_ERR_INVALID;
    case K_Z85:
        if (!*v) return MS_OK;
        if (strlen(v) != MS_CFG_Z85_LEN) {
            snprintf(why, cap, "a CURVE key is %d Z85 characters, got %zu", MS_CFG_Z85_LEN, strlen(v));
            return MS_ERR_INVALID;
        }
        for (size_t i = 0; v[i]; i++)
            if (!strchr(Z85_CHARS, v[i])) {
                snprintf(why, cap, "character %zu ('%c') is not in the Z85 alphabet", i, v[i]);
                return MS_ERR_INVALID;
            }
        return MS_OK;
    case K_SAFE:
        if (!all_in(v, SAFE_CHARS)) {
            snprintf(why, cap, "\"%.64s\": only letters, digits and ._:/~+-@ are allowed (it goes into ssh command lines)",
                     v);
            return MS_ERR_INVALID;
        }
        return MS_OK;
    case K_ORIGINS: return ms_origin_list_check(v, why, cap);
    case K_HOSTS: return ms_origin_hosts_check(v, why, cap);
    default: return MS_OK;
    }
}

/* Length (incl. NUL) and control characters, then the kind's own check. */
static ms_status check_text(const cfg_key *k, const char *v, char *why, size_t cap) {
    size_t len = strlen(v);
    if (len >= k->size) {
        snprintf(why, cap, "%zu bytes, longer than the limit of %zu", len, k->size - 1);
        return MS_ERR_RANGE;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
            snprintf(why, cap, "control character 0x%02x at byte %zu", (unsigned)(unsigned char)v[i], i);
            return MS_ERR_INVALID;
        }
    return check_string(k, v, why, cap);
}

static const char *lc_type_name(int type) {
    switch (type) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a float";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    default: return "nothing";
    }
}

/* One key from the file into the struct. */
static ms_status set_value(cfg_ctx *x, ms_cfg *c, const cfg_key *k, const config_setting_t *s) {
    int line = (int)config_setting_source_line(s);
    int type = config_setting_type(s);
    if (k->kind == K_BOOL) {
        if (type != CONFIG_TYPE_BOOL)
            return cfg_fail(x, MS_ERR_INVALID, line, k->path, "expected a boolean (true/false), got %s",
                            lc_type_name(type));
        *(bool *)field(c, k) = config_setting_get_bool(s) != 0;
        return MS_OK;
    }
    if (k->kind == K_INT) {
        if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
            return cfg_fail(x, MS_ERR_INVALID, line, k->path, "expected an integer, got %s", lc_type_name(type));
        for (int i = 0; type == CONFIG_TYPE_INT && x->scan && i < x->scan->n_big && i < SCAN_MAX_BIG; i++) {
            const big_literal *b = &x->scan->big[i];
            if (!strcmp(b->path, k->path))
                return cfg_fail(x, MS_ERR_RANGE, b->line, k->path, "%s does not fit 32 bits; write it as %sL",
                                b->literal, b->literal);
        }
        long long v = config_setting_get_int64(s);
        if (v < k->lo || v > k->hi)
            return cfg_fail(x, MS_ERR_RANGE, line, k->path, "%lld is out of range [%lld, %lld]", v, (long long)k->lo,
                            (long long)k->hi);
        *(int64_t *)field(c, k) = v;
        return MS_OK;
    }
    if (k->kind == K_FLOAT) {
        double v;
        if (type == CONFIG_TYPE_FLOAT) v = config_setting_get_float(s);
        else if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64) v = (double)config_setting_get_int64(s);
        else return cfg_fail(x, MS_ERR_INVALID, line, k->path, "expected a number, got %s", lc_type_name(type));
        if (!(v >= k->lo_f && v <= k->hi_f))
            return cfg_fail(x, MS_ERR_RANGE, line, k->path, "%g is out of range [%g, %g]", v, k->lo_f, k->hi_f);
        *(double *)field(c, k) = v;
        return MS_OK;
    }
    if (type != CONFIG_TYPE_STRING)
        return cfg_fail(x, MS_ERR_INVALID, line, k->path, "expected a string, got %s", lc_type_name(type));
    const char *v = config_setting_get_string(s);
    if (!v) v = "";
    char why[256];
    char *joined = NULL;
    if (k->kind == K_PATH && x->base_dir && v[0] && v[0] != '/') {
        joined = ms_path_join(x->base_dir, v);
        if (!joined) return cfg_fail(x, MS_ERR_NOMEM, line, k->path, "out of memory");
        v = joined;
    }
    ms_status st = check_text(k, v, why, sizeof why);
    if (st == MS_OK) snprintf(field(c, k), k->size, "%s", v);
    free(joined);
    if (st != MS_OK) return cfg_fail(x, st, line, k->path, "%s", why);
    return MS_OK;
}

/* The keys the table allows right under `prefix` ("" = top level). */
static void list_children(const char *prefix, char *buf, size_t cap) {
    size_t n = strlen(prefix), used = 0;
    const char *last = NULL;
    size_t last_len = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < N_KEYS; i++) {
        const char *p = g_keys[i].path;
        if (n && (strncmp(p, prefix, n) || p[n] != '.')) continue;
        const char *child = n ? p + n + 1 : p;
        size_t len = strcspn(child, ".");
        if (last && len == last_len && !strncmp(child, last, len)) continue;
        int w = snprintf(buf + used, cap - used, "%s%.*s", used ? ", " : "", (int)len, child);
        if (w < 0 || (size_t)w >= cap - used) break;
        used += (size_t)w;
        last = child;
        last_len = len;
    }
}

static ms_status walk(cfg_ctx *x, ms_cfg *c, const config_setting_t *group, const char *prefix) {
    int n = config_setting_length(group);
    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        const char *name = config_setting_name(s);
        int line = (int)config_setting_source_line(s);
        char path[128];
        int len = snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name ? name : "?");
        const cfg_key *k = len > 0 && (size_t)len < sizeof path ? find_key(path) : NULL;
        if (k) {
            MS_TRY(set_value(x, c, k, s));
            continue;
        }
        if (k == NULL && len > 0 && (size_t)len < sizeof path && is_group(path)) {
            if (!config_setting_is_group(s))
                return cfg_fail(x, MS_ERR_INVALID, line, path, "expected a group { ... }, got %s",
                                lc_type_name(config_setting_type(s)));
            MS_TRY(walk(x, c, s, path));
            continue;
        }
        char valid[512];
        list_children(prefix, valid, sizeof valid);
        return cfg_fail(x, MS_ERR_UNSUPPORTED, line, path, "unknown key (valid%s%s: %s)", *prefix ? " in " : " here",
                        prefix, valid);
    }
    return MS_OK;
}

/* ---- cross-field checks --------------------------------------------------------- */

/* The line of `path` in the file, else of its closest enclosing group, else 0. */
static int line_of(const cfg_ctx *x, const char *path) {
    if (!x->lc) return 0;
    char p[128];
    snprintf(p, sizeof p, "%s", path);
    for (;;) {
        const config_setting_t *s = config_lookup(x->lc, p);
        if (s) return (int)config_setting_source_line(s);
        char *dot = strrchr(p, '.');
        if (!dot) return 0;
        *dot = '\0';
    }
}

/* The first of two keys present in the file (or their group). */
static int line_of2(const cfg_ctx *x, const char *a, const char *b) {
    if (x->lc && config_lookup(x->lc, a)) return line_of(x, a);
    return line_of(x, b);
}

static ms_status check_cross(cfg_ctx *x, const ms_cfg *c) {
    if (!c->target.model[0])
        return cfg_fail(x, MS_ERR_NOT_FOUND, line_of(x, "target.model"), "target.model",
                        "required (the target model folder)");
    if (c->draft.enabled && (!strncmp(c->draft.kind, "lm", 2) || !strncmp(c->draft.kind, "eagle", 5)) &&
        !c->draft.model[0])
        return cfg_fail(x, MS_ERR_NOT_FOUND, line_of2(x, "draft.kind", "draft.model"), "draft.model",
                        "required when draft.kind is \"%s\"", c->draft.kind);
    if (c->draft.enabled && !strncmp(c->vocab.mode, "static", 6) && !c->vocab.list[0])
        return cfg_fail(x, MS_ERR_NOT_FOUND, line_of2(x, "vocab.mode", "vocab.list"), "vocab.list",
                        "required when vocab.mode is \"%s\" (a microspec-freqlist file)", c->vocab.mode);
    if (c->draft.enabled && (!strncmp(c->vocab.mode, "specvocab", 9) || !strncmp(c->vocab.mode, "dynaspec", 8)) &&
        !c->vocab.artifact[0])
        return cfg_fail(x, MS_ERR_NOT_FOUND, line_of2(x, "vocab.mode", "vocab.artifact"), "vocab.artifact",
                        "required when vocab.mode is \"%s\" (an artefact built for the draft model)", c->vocab.mode);
    /* The draft tree's rows per round must fit a uint64 attention mask
     * (the same rule as ms_tree_params_check). */
    if (c->tree.chain) {
        if (c->tree.depth + 2 > MS_CFG_TREE_MAX)
            return cfg_fail(x, MS_ERR_RANGE, line_of2(x, "tree.depth", "tree.chain"), "tree.depth",
                            "chain mode needs depth + 2 <= %d, got depth %lld", MS_CFG_TREE_MAX,
                            (long long)c->tree.depth);
    } else if (c->tree.top_k * c->tree.depth > MS_CFG_TREE_MAX) {
        return cfg_fail(x, MS_ERR_RANGE, line_of2(x, "tree.depth", "tree.top_k"), "tree.depth",
                        "top_k * depth = %lld * %lld = %lld rows per round, more than %d", (long long)c->tree.top_k,
                        (long long)c->tree.depth, (long long)(c->tree.top_k * c->tree.depth), MS_CFG_TREE_MAX);
    }
    /* The target binds what inet_pton reads, or "localhost" (= 127.0.0.1):
     * the same rule here, so --check and the node agree (issue 15). */
    unsigned char addr[sizeof(struct in6_addr)];
    if (strcmp(c->http.listen, "localhost") != 0 && inet_pton(AF_INET, c->http.listen, addr) != 1 &&
        inet_pton(AF_INET6, c->http.listen, addr) != 1)
        return cfg_fail(x, MS_ERR_INVALID, line_of(x, "http.listen"), "http.listen",
                        "\"%s\" is not an IPv4 or IPv6 address or \"localhost\" (host names are not resolved)",
                        c->http.listen);
    if (c->http.max_connections <= c->http.queue + 1)
        return cfg_fail(x, MS_ERR_RANGE, line_of2(x, "http.max_connections", "http.queue"), "http.max_connections",
                        "%lld must be more than http.queue + 1 (%lld): queued requests hold their connections",
                        (long long)c->http.max_connections, (long long)c->http.queue + 1);
    if (c->http.max_tokens_default > c->http.max_tokens_limit)
        return cfg_fail(x, MS_ERR_RANGE, line_of2(x, "http.max_tokens_default", "http.max_tokens_limit"),
                        "http.max_tokens_default", "%lld is more than http.max_tokens_limit %lld",
                        (long long)c->http.max_tokens_default, (long long)c->http.max_tokens_limit);
    if (c->link.curve.enabled) {
        static const char *const need[] = {"link.curve.server_public", "link.curve.server_secret",
                                           "link.curve.client_public", "link.curve.client_secret"};
        for (int i = 0; i < 4; i++) {
            const cfg_key *k = find_key(need[i]);
            if (!*(const char *)cfield(c, k))
                return cfg_fail(x, MS_ERR_NOT_FOUND, line_of2(x, "link.curve.enabled", need[i]), need[i],
                                "required when link.curve.enabled is true");
        }
    }
    return MS_OK;
}

ms_status ms_cfg_check(const ms_cfg *c, char *err, size_t cap) {
    cfg_ctx x = {.err = err, .cap = cap};
    char why[256];
    for (int64_t i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &g_keys[i];
        if (k->kind == K_BOOL) continue;
        if (k->kind == K_INT) {
            int64_t v = *(const int64_t *)cfield(c, k);
            if (v < k->lo || v > k->hi)
                return cfg_fail(&x, MS_ERR_RANGE, 0, k->path, "%lld is out of range [%lld, %lld]", (long long)v,
                                (long long)k->lo, (long long)k->hi);
            continue;
        }
        if (k->kind == K_FLOAT) {
            double v = *(const double *)cfield(c, k);
            if (!(v >= k->lo_f && v <= k->hi_f))
                return cfg_fail(&x, MS_ERR_RANGE, 0, k->path, "%g is out of range [%g, %g]", v, k->lo_f, k->hi_f);
            continue;
        }
        const char *v = cfield(c, k);
        if (!memchr(v, '\0', k->size)) return cfg_fail(&x, MS_ERR_RANGE, 0, k->path, "not NUL-terminated");
        ms_status st = check_text(k, v, why, sizeof why);
        if (st != MS_OK) return cfg_fail(&x, st, 0, k->path, "%s", why);
    }
    return check_cross(&x, c);
}

/* ---- loading -------------------------------------------------------------------- */

static ms_status parse_text(const char *text, const char *name, const char *base_dir, ms_cfg *out, char *err,
                            size_t cap) {
    cfg_ctx x = {.name = name ? name : "<config>", .base_dir = base_dir, .err = err, .cap = cap};
    if (err && cap) err[0] = '\0';
    scan_result *scan = ms_malloc(sizeof *scan);
    if (!scan) return cfg_fail(&x, MS_ERR_NOMEM, 0, NULL, "out of memory");
    scan_text(text, scan);
    if (scan->include_line) {
        int line = scan->include_line;
        free(scan);
        return cfg_fail(&x, MS_ERR_FORMAT, line, NULL, "@include is not supported (one file describes the cluster)");
    }
    if (scan->open_string_line) {
        int line = scan->open_string_line;
        free(scan);
        return cfg_fail(&x, MS_ERR_FORMAT, line, NULL, "unterminated string");
    }
    x.scan = scan;

    ms_cfg *c = ms_malloc(sizeof *c);
    if (!c) {
        free(scan);
        return cfg_fail(&x, MS_ERR_NOMEM, 0, NULL, "out of memory");
    }
    ms_cfg_defaults(c);
    snprintf(c->source, sizeof c->source, "%s", x.name);

    config_t lc;
    config_init(&lc);
    ms_status st = MS_OK;
    if (config_read_string(&lc, text) != CONFIG_TRUE) {
        const char *why = config_error_text(&lc);
        st = cfg_fail(&x, MS_ERR_FORMAT, config_error_line(&lc), NULL, "%s", why ? why : "syntax error");
        goto out;
    }
    x.lc = &lc;
    MS_TRY_GOTO(st, walk(&x, c, config_root_setting(&lc), ""), out);
    if (scan->n_big) { /* every key was read, so set_value should have refused it */
        const big_literal *b = &scan->big[0];
        st = cfg_fail(&x, MS_ERR_RANGE, b->line, NULL, "%s does not fit 32 bits; write it as %sL", b->literal,
                      b->literal);
        goto out;
    }
    MS_TRY_GOTO(st, check_cross(&x, c), out);
    *out = *c;
out:
    config_destroy(&lc);
    free(c);
    free(scan);
    return st;
}

ms_status ms_cfg_parse_ex(const char *text, const char *name, ms_cfg *out, char *err, size_t cap) {
    MS_ASSERT(text && out);
    return parse_text(text, name, NULL, out, err, cap);
}

ms_status ms_cfg_parse(const char *text, const char *name, ms_cfg *out) {
    return ms_cfg_parse_ex(text, name, out, NULL, 0);
}

#define CFG_FILE_MAX (1 << 20) /* a cluster config is a page of text */

ms_status ms_cfg_load_ex(const char *path, ms_cfg *out, char *err, size_t cap) {
    MS_ASSERT(path && out);
    cfg_ctx x = {.name = path, .err = err, .cap = cap};
    FILE *f = fopen(path, "rb");
    if (!f) return cfg_fail(&x, MS_ERR_IO, 0, NULL, "cannot open: %s", strerror(errno));
    char *text = ms_malloc(CFG_FILE_MAX + 1);
    if (!text) {
        fclose(f);
        return cfg_fail(&x, MS_ERR_NOMEM, 0, NULL, "out of memory");
    }
    size_t n = fread(text, 1, CFG_FILE_MAX + 1, f);
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(text);
        return cfg_fail(&x, MS_ERR_IO, 0, NULL, "read failed");
    }
    if (n > CFG_FILE_MAX) {
        free(text);
        return cfg_fail(&x, MS_ERR_RANGE, 0, NULL, "larger than %d bytes", CFG_FILE_MAX);
    }
    text[n] = '\0';
    if (memchr(text, '\0', n)) {
        free(text);
        return cfg_fail(&x, MS_ERR_FORMAT, 0, NULL, "contains a NUL byte (not a text file)");
    }

    /* Relative paths in the file are relative to its folder (absolute when
     * the folder can be resolved, so the nodes may change directory). */
    char *copy = strdup(path);
    char base[PATH_MAX];
    const char *dir = copy ? dirname(copy) : ".";
    if (!realpath(dir, base)) snprintf(base, sizeof base, "%s", dir);
    ms_status st = parse_text(text, path, base, out, err, cap);
    free(copy);
    free(text);
    return st;
}

ms_status ms_cfg_load(const char *path, ms_cfg *out) { return ms_cfg_load_ex(path, out, NULL, 0); }

/* ---- output --------------------------------------------------------------------- */

/* The shortest of %.15g / %.17g that reads back as the same double. */
static void format_double(double v, char *buf, size_t cap) {
    snprintf(buf, cap, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, cap, "%.17g", v);
}

static void format_value(const ms_cfg *c, const cfg_key *k, bool mask, char *buf, size_t cap) {
    if (k->kind == K_BOOL) snprintf(buf, cap, "%s", *(const bool *)cfield(c, k) ? "true" : "false");
    else if (k->kind == K_INT) snprintf(buf, cap, "%lld", (long long)*(const int64_t *)cfield(c, k));
    else if (k->kind == K_FLOAT) format_double(*(const double *)cfield(c, k), buf, cap);
    else {
        const char *v = cfield(c, k);
        if (mask && (k->flags & F_SECRET) && v[0]) v = "(set)";
        snprintf(buf, cap, "%s", v);
    }
}

void ms_cfg_log(const ms_cfg *c) {
    MS_LOG_INFO("config source = %s", c->source);
    char v[PATH_MAX];
    for (int64_t i = 0; i < N_KEYS; i++) {
        format_value(c, &g_keys[i], true, v, sizeof v);
        if (g_keys[i].kind == K_BOOL || g_keys[i].kind == K_INT || g_keys[i].kind == K_FLOAT) MS_LOG_INFO("config %s = %s", g_keys[i].path, v);
        else MS_LOG_INFO("config %s = \"%s\"", g_keys[i].path, v);
    }
}

ms_status ms_cfg_get_string(const ms_cfg *c, const char *path, char *buf, size_t cap) {
    const cfg_key *k = find_key(path);
    if (!k) {
        if (is_group(path)) MS_FAIL(MS_ERR_NOT_FOUND, "config: %s is a group, not a key", path);
        MS_FAIL(MS_ERR_NOT_FOUND, "config: %s is not a key", path);
    }
    char v[PATH_MAX];
    format_value(c, k, false, v, sizeof v);
    if (strlen(v) >= cap) MS_FAIL(MS_ERR_RANGE, "config: %s: the value needs %zu bytes, got %zu", path, strlen(v) + 1, cap);
    memcpy(buf, v, strlen(v) + 1);
    return MS_OK;
}

/* A libconfig string literal: only '"' and '\\' need escapes (control
 * characters are refused by the loader; bytes >= 0x80 pass through). */
static void write_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s < 0x20 || *s == 0x7f) fprintf(f, "\\x%02x", (unsigned)(unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* Number of leading dotted components a and b share. */
static int common_groups(const char *a, const char *b) {
    int n = 0;
    for (;;) {
        size_t la = strcspn(a, "."), lb = strcspn(b, ".");
        if (!a[la] || !b[lb] || la != lb || strncmp(a, b, la)) return n;
        n++;
        a += la + 1;
        b += lb + 1;
    }
}

static int count_groups(const char *path) {
    int n = 0;
    for (; *path; path++) n += *path == '.';
    return n;
}

void ms_cfg_dump(const ms_cfg *c, FILE *f, bool with_secrets) {
    fprintf(f, "# MicroSpec cluster configuration (effective values; `microspec-config --help` lists the keys).\n");
    const char *prev = "";
    for (int64_t i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &g_keys[i];
        int keep = common_groups(prev, k->path), open = count_groups(prev), want = count_groups(k->path);
        for (int d = open; d > keep; d--) fprintf(f, "%*s};\n", 2 * (d - 1), "");
        const char *p = k->path;
        for (int d = 0; d < want; d++) {
            size_t len = strcspn(p, ".");
            if (d >= keep) fprintf(f, "%s%*s%.*s = {\n", d == 0 ? "\n" : "", 2 * d, "", (int)len, p);
            p += len + 1;
        }
        int ind = 2 * want;
        if (want == 0) fputc('\n', f);
        fprintf(f, "%*s# %s\n", ind, "", k->help);
        const char *v = cfield(c, k);
        if ((k->flags & F_SECRET) && v[0] && !with_secrets) {
            fprintf(f, "%*s# %s = (set; hidden, `microspec-config --dump --secrets` shows it)\n", ind, "", p);
        } else if (k->kind == K_BOOL) {
            fprintf(f, "%*s%s = %s;\n", ind, "", p, *(const bool *)v ? "true" : "false");
        } else if (k->kind == K_INT) {
            long long iv = *(const int64_t *)v;
            fprintf(f, "%*s%s = %lld%s;\n", ind, "", p, iv, iv < INT32_MIN || iv > INT32_MAX ? "L" : "");
        } else if (k->kind == K_FLOAT) {
            /* a decimal point keeps libconfig reading it as a float */
            char num[40];
            format_double(*(const double *)v, num, sizeof num);
            fprintf(f, "%*s%s = %s%s;\n", ind, "", p, num, strpbrk(num, ".eEn") ? "" : ".0");
        } else {
            fprintf(f, "%*s%s = ", ind, "", p);
            write_quoted(f, v);
            fputs(";\n", f);
        }
        prev = k->path;
    }
    for (int d = count_groups(prev); d > 0; d--) fprintf(f, "%*s};\n", 2 * (d - 1), "");
}

void ms_cfg_help(FILE *f) {
    for (int64_t i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &g_keys[i];
        fprintf(f, "  %-26s %-8s ", k->path, kind_name(k->kind));
        if (k->kind == K_BOOL) fprintf(f, "default %s", k->def_i ? "true" : "false");
        else if (k->kind == K_INT) fprintf(f, "default %lld, %lld..%lld", (long long)k->def_i, (long long)k->lo,
                                           (long long)k->hi);
        else if (k->kind == K_FLOAT) fprintf(f, "default %g, %g..%g", k->def_f, k->lo_f, k->hi_f);
        else if (k->kind == K_ENUM) fprintf(f, "default \"%s\", one of %s", k->def_s, k->allowed);
        else fprintf(f, "default \"%s\"", k->def_s);
        fprintf(f, "%s\n      %s\n", (k->flags & F_SECRET) ? " (secret)" : "", k->help);
    }
}

int ms_cfg_node_args(const char *tool, int argc, char **argv, void (*usage)(FILE *), const char **cfg_path,
                     const char **secret_path) {
    *cfg_path = *secret_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) && i + 1 < argc) {
            *cfg_path = argv[++i];
        } else if (!strcmp(argv[i], "--link-secret") && i + 1 < argc) {
            *secret_path = argv[++i];
        } else {
            fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", tool, argv[i]);
            return 2;
        }
    }
    if (!*cfg_path) {
        fprintf(stderr, "%s: --config FILE is required (see --help)\n", tool);
        return 2;
    }
    return -1;
}

bool ms_cfg_path_ok(const char *key, const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0) return true;
    MS_LOG_ERROR("%s: %s (%s)", path, errno == ENOENT ? "no such file or directory" : strerror(errno), key);
    return false;
}
