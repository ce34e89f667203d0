/* test_config.c — the cluster configuration file (common/ms_config.c) and the
 * microspec-config CLI.
 *
 * Defaults are compared with values written out here (docs/architecture.md §5, §7 and the
 * brief), not read back from the table; every bad-input case names the error
 * code and the line the message must point at; secrets are searched for in
 * the captured log; dump → parse must give the same struct for a config in
 * which every key differs from its default (checked key by key through the
 * key list that --help prints). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ms_config.h"

#include "ms_check.h"

static char g_tmp[256]; /* short, so paths built from it fit PATH_MAX buffers */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    MS_ASSERT(f);
    fputs(text, f);
    fclose(f);
}

/* Run fn with stderr redirected to a temporary file; returns what it wrote
 * (malloc'd). */
static char *capture_stderr(void (*fn)(void *), void *arg) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/stderr.txt", g_tmp);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    MS_ASSERT(saved >= 0 && f);
    dup2(fileno(f), 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    char *text = NULL;
    size_t len = 0;
    MS_ASSERT(ms_read_file(path, &text, &len) == MS_OK);
    return text;
}

/* The key paths, from the table as --help prints it ("  PATH  KIND ..."). */
static int64_t key_paths(char paths[][64], int64_t cap) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ms_cfg_help(m);
    fclose(m);
    int64_t n = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "  ", 2) || line[2] == ' ') continue;
        if (n < cap) sscanf(line + 2, "%63s", paths[n]);
        n++;
    }
    free(buf);
    return n;
}

/* ---- defaults ------------------------------------------------------------------- */

static void test_defaults(void) {
    ms_cfg d;
    ms_cfg_defaults(&d);
    CHECK(!strcmp(d.target.model, "") && d.target.max_ctx == 4096 && d.target.threads == 0, "target");
    CHECK(!strcmp(d.target.device, "cpu"), "target.device %s", d.target.device);
    CHECK(d.target.q8_matmul, "target.q8_matmul defaults to the 8-bit path");
    CHECK(d.draft.enabled && !strcmp(d.draft.kind, "layerskip") && !strcmp(d.draft.model, ""), "draft");
    CHECK(d.draft.layers == 1 && d.draft.max_ctx == 0 && d.draft.threads == 0 && !strcmp(d.draft.device, "cpu"),
          "draft numbers");
    CHECK(!strcmp(d.vocab.mode, "dynamic") && d.vocab.w_max == 3072 && d.vocab.k_pre == 3 && d.vocab.k_ver == 3 &&
              !strcmp(d.vocab.list, ""),
          "vocab");
    CHECK(d.tree.top_k == 10 && d.tree.depth == 5 && d.tree.total == 60 && !d.tree.chain, "tree");
    CHECK(!strcmp(d.pipeline, "sync"), "pipeline %s", d.pipeline);
    CHECK(!strcmp(d.link.endpoint, "tcp://127.0.0.1:5757"), "endpoint %s", d.link.endpoint);
    CHECK(d.link.deadline_ms == 2000 && d.link.heartbeat_ms == 500 && d.link.reconnect_ms == 500 &&
              d.link.max_message_bytes == 67108864,
          "link");
    CHECK(!d.link.curve.enabled && !d.link.curve.server_public[0] && !d.link.curve.server_secret[0] &&
              !d.link.curve.client_public[0] && !d.link.curve.client_secret[0],
          "curve");
    CHECK(!strcmp(d.http.listen, "127.0.0.1") && d.http.port == 8080 && d.http.queue == 8 &&
              d.http.max_tokens_default == 256 && d.http.max_tokens_limit == 4096 && !d.http.bearer_token[0] &&
              d.http.request_timeout_s == 600,
          "http");
    CHECK(!strcmp(d.hosts.target, "localhost") && !strcmp(d.hosts.draft, "localhost") && !d.hosts.ssh_user[0] &&
              !d.hosts.workdir[0],
          "hosts");
    CHECK(!strcmp(d.log.level, "info") && !d.log.dir[0], "log");

    /* Defaults need a target model; with one they pass every check. */
    char err[512];
    CHECK(ms_cfg_check(&d, err, sizeof err) == MS_ERR_NOT_FOUND, "defaults without a model");
    CHECK(strstr(err, "target.model"), "message %s", err);
    snprintf(d.target.model, sizeof d.target.model, "m");
    CHECK(ms_cfg_check(&d, err, sizeof err) == MS_OK, "%s", err);

    /* Absent keys take the defaults: a file naming only the model gives the
     * default struct (memcmp: both start from a zeroed struct). */
    ms_cfg p;
    memset(&p, 0xAB, sizeof p);
    ms_status st = ms_cfg_parse_ex("target = { model = \"m\"; };\n", "min.cfg", &p, err, sizeof err);
    CHECK(st == MS_OK, "%s", err);
    snprintf(d.source, sizeof d.source, "min.cfg");
    CHECK(memcmp(&p, &d, sizeof p) == 0, "minimal config differs from the defaults");

    /* Empty groups are fine too. */
    st = ms_cfg_parse_ex("target = { model = \"m\"; };\ndraft = {};\nlink = { curve = {}; };\n", "min.cfg", &p, err,
                         sizeof err);
    CHECK(st == MS_OK && memcmp(&p, &d, sizeof p) == 0, "empty groups: %s", err);
}

/* ---- the example configs ------------------------------------------------------------ */

static void test_examples(void) {
    static const char *const names[] = {"cpu-one-box", "one-gpu", "two-gpus", "two-hosts"};
    char dir[PATH_MAX];
    CHECK(realpath(MS_SOURCE_DIR "/cluster/configs", dir) != NULL, "no cluster/configs");
    ms_cfg c[4];
    char err[1024];
    for (int i = 0; i < 4; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s.cfg", dir, names[i]);
        ms_status st = ms_cfg_load_ex(path, &c[i], err, sizeof err);
        CHECK(st == MS_OK, "%s: %s", names[i], err);
        if (st != MS_OK) return;
        CHECK(ms_cfg_check(&c[i], err, sizeof err) == MS_OK, "%s: check: %s", names[i], err);
        CHECK(!strcmp(c[i].source, path), "%s: source %s", names[i], c[i].source);
    }
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s/../../build/models/stories260k", dir);
    CHECK(!strcmp(c[0].target.model, want), "cpu-one-box target.model %s (want %s)", c[0].target.model, want);
    CHECK(!strcmp(c[0].draft.kind, "layerskip") && c[0].draft.enabled && !strcmp(c[0].target.device, "cpu"),
          "cpu-one-box draft");
    CHECK(!strcmp(c[1].target.device, "cuda:0") && !strcmp(c[1].draft.device, "cuda:0"), "one-gpu devices");
    CHECK(!strncmp(c[1].link.endpoint, "ipc://", 6), "one-gpu endpoint %s", c[1].link.endpoint);
    CHECK(!strcmp(c[2].target.device, "cuda:0") && !strcmp(c[2].draft.device, "cuda:1"), "two-gpus devices");
    CHECK(!strcmp(c[2].pipeline, "overlap") && !strcmp(c[2].draft.kind, "eagle"), "two-gpus pipeline/kind");
    CHECK(!strcmp(c[3].hosts.target, "10.200.0.1") && !strcmp(c[3].hosts.draft, "10.200.0.2"), "two-hosts hosts");
    CHECK(!strcmp(c[3].link.endpoint, "tcp://10.200.0.1:5757"), "two-hosts endpoint %s", c[3].link.endpoint);
    CHECK(c[3].link.curve.enabled && strlen(c[3].link.curve.client_secret) == 40, "two-hosts curve");
}

/* ---- bad input ---------------------------------------------------------------------- */

typedef struct {
    const char *what;
    const char *text;
    ms_status code;
    int line;           /* 0: the message has no line */
    const char *needle; /* must appear in the message after "bad.cfg:LINE: " */
} bad_case;

#define M "target = { model = \"m\"; };\n" /* line 1 of most cases */

static const bad_case g_bad[] = {
    {"unknown top-level key", M "foo = 1;\n", MS_ERR_UNSUPPORTED, 2, "foo: unknown key (valid here: target,"},
    {"unknown nested key", "target = {\n  model = \"m\";\n  modle = \"x\";\n};\n", MS_ERR_UNSUPPORTED, 3,
     "target.modle: unknown key (valid in target: model, max_ctx, threads, device, q8_matmul)"},
    {"unknown key two levels down", M "link = {\n  curve = {\n    enabled = false;\n    enable = true;\n  };\n};\n",
     MS_ERR_UNSUPPORTED, 5, "link.curve.enable: unknown key"},
    {"unknown group", M "\ndevices = { target = \"cuda:0\"; };\n", MS_ERR_UNSUPPORTED, 3, "devices: unknown key"},
    {"string for an integer", M "tree = {\n  top_k = \"10\";\n};\n", MS_ERR_INVALID, 3,
     "tree.top_k: expected an integer, got a string"},
    {"float for an integer", M "tree = { depth = 5.0; };\n", MS_ERR_INVALID, 2, "tree.depth: expected an integer, got a float"},
    {"integer for a boolean", M "draft = {\n\n  enabled = 1;\n};\n", MS_ERR_INVALID, 4,
     "draft.enabled: expected a boolean (true/false), got an integer"},
    {"boolean for a string", M "pipeline = true;\n", MS_ERR_INVALID, 2, "pipeline: expected a string, got a boolean"},
    {"value for a group", M "link = 5;\n", MS_ERR_INVALID, 2, "link: expected a group { ... }, got an integer"},
    {"group for a value", M "pipeline = { mode = \"sync\"; };\n", MS_ERR_INVALID, 2, "pipeline: expected a string, got a group"},
    {"array for an integer", M "tree = { top_k = [1, 2]; };\n", MS_ERR_INVALID, 2, "tree.top_k: expected an integer, got an array"},
    {"list for a group", M "hosts = ( \"a\" );\n", MS_ERR_INVALID, 2, "hosts: expected a group { ... }, got a list"},
    {"port out of range", M "http = {\n  port = 70000;\n};\n", MS_ERR_RANGE, 3, "http.port: 70000 is out of range [1, 65535]"},
    {"top_k below range", M "tree = { top_k = 0; };\n", MS_ERR_RANGE, 2, "tree.top_k: 0 is out of range [1, 16]"},
    {"total above range", M "tree = { total = 65; };\n", MS_ERR_RANGE, 2, "tree.total: 65 is out of range [2, 64]"},
    {"64-bit integer out of range", M "vocab = { w_max = 9999999999L; };\n", MS_ERR_RANGE, 2,
     "vocab.w_max: 9999999999 is out of range [1, 2147483647]"},
    /* libconfig 1.5 reads a plain literal into an int and would wrap it. */
    {"32-bit literal overflow", M "link = {\n  max_message_bytes = 3000000000;\n};\n", MS_ERR_RANGE, 3,
     "link.max_message_bytes: 3000000000 does not fit 32 bits; write it as 3000000000L"},
    {"32-bit literal overflow, value on the next line", M "link = {\n  max_message_bytes =\n    -3000000000;\n};\n",
     MS_ERR_RANGE, 4, "-3000000000 does not fit 32 bits"},
    {"hex literal overflow", M "vocab = { w_max = 0x80000000; };\n", MS_ERR_RANGE, 2, "0x80000000 does not fit 32 bits"},
    {"big literal in an unknown key", M "\nfoo = 99999999999;\n", MS_ERR_UNSUPPORTED, 3, "foo: unknown key"},
    {"negative", M "link = { deadline_ms = -5; };\n", MS_ERR_RANGE, 2, "link.deadline_ms: -5 is out of range"},
    {"p_min above range", M "draft = { p_min = 2.5; };\n", MS_ERR_RANGE, 2, "draft.p_min: 2.5 is out of range [0, 2]"},
    {"p_min negative", M "draft = { p_min = -0.1; };\n", MS_ERR_RANGE, 2, "draft.p_min: -0.1 is out of range"},
    {"string for a float", M "draft = { p_min = \"0.3\"; };\n", MS_ERR_INVALID, 2,
     "draft.p_min: expected a number, got a string"},
    {"bad vocab mode", M "vocab = {\n  mode = \"dynamc\";\n};\n", MS_ERR_INVALID, 3,
     "vocab.mode: \"dynamc\" is not one of dynamic|static|full"},
    {"bad draft kind", M "draft = { kind = \"medusa\"; };\n", MS_ERR_INVALID, 2, "draft.kind: \"medusa\" is not one of layerskip|lm|eagle"},
    {"bad pipeline", M "pipeline = \"async\";\n", MS_ERR_INVALID, 2, "pipeline: \"async\" is not one of sync|overlap"},
    {"bad log level", M "log = { level = \"verbose\"; };\n", MS_ERR_INVALID, 2, "log.level: \"verbose\" is not one of"},
    {"bad device", M "draft = { device = \"gpu0\"; };\n", MS_ERR_INVALID, 2, "draft.device: \"gpu0\" is not a device"},
    {"bad device number", M "draft = { device = \"cuda:x\"; };\n", MS_ERR_INVALID, 2, "draft.device:"},
    {"endpoint scheme", M "link = { endpoint = \"udp://1.2.3.4:5\"; };\n", MS_ERR_INVALID, 2,
     "link.endpoint: \"udp://1.2.3.4:5\": the scheme must be tcp:// or ipc://"},
    {"endpoint without port", M "link = { endpoint = \"tcp://host\"; };\n", MS_ERR_INVALID, 2, "expected tcp://HOST:PORT"},
    {"endpoint port 0", M "link = { endpoint = \"tcp://host:0\"; };\n", MS_ERR_INVALID, 2, "port must be 1..65535"},
    {"endpoint wildcard", M "link = { endpoint = \"tcp://*:5757\"; };\n", MS_ERR_INVALID, 2, "cannot be *"},
    {"missing target model", "http = { port = 1; };\n", MS_ERR_NOT_FOUND, 0, "target.model: required"},
    {"empty target model", "\ntarget = {\n  model = \"\";\n};\n", MS_ERR_NOT_FOUND, 3, "target.model: required"},
    {"lm without a model", M "draft = {\n  enabled = true;\n  kind = \"lm\";\n};\n", MS_ERR_NOT_FOUND, 4,
     "draft.model: required when draft.kind is \"lm\""},
    {"eagle without a model", M "draft = { kind = \"eagle\"; };\n", MS_ERR_NOT_FOUND, 2, "draft.model: required"},
    {"static without a list", M "vocab = {\n  w_max = 10;\n  mode = \"static\";\n};\n", MS_ERR_NOT_FOUND, 4,
     "vocab.list: required when vocab.mode is \"static\""},
    {"specvocab without an artefact", M "vocab = {\n  mode = \"specvocab+window\";\n};\n", MS_ERR_NOT_FOUND, 3,
     "vocab.artifact: required when vocab.mode is \"specvocab+window\""},
    {"curve without keys", M "link = {\n  curve = {\n    enabled = true;\n  };\n};\n", MS_ERR_NOT_FOUND, 4,
     "link.curve.server_public: required when link.curve.enabled is true"},
    {"curve missing one key",
     M "link = { curve = {\n  enabled = true;\n"
       "  server_public = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\";\n"
       "  server_secret = \"JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6\";\n"
       "  client_public = \"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\";\n}; };\n",
     MS_ERR_NOT_FOUND, 3, "link.curve.client_secret: required"},
    {"Z85 key too short", M "link = { curve = {\n  server_public = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf\";\n}; };\n",
     MS_ERR_INVALID, 3, "link.curve.server_public: a CURVE key is 40 Z85 characters, got 39"},
    {"Z85 key bad character",
     M "link = { curve = {\n\n  client_secret = \"D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%c~\";\n}; };\n", MS_ERR_INVALID,
     4, "link.curve.client_secret: character 39 ('~') is not in the Z85 alphabet"},
    {"tree rows", M "tree = {\n  top_k = 16;\n  depth = 5;\n};\n", MS_ERR_RANGE, 4,
     "tree.depth: top_k * depth = 16 * 5 = 80 rows per round, more than 64"},
    {"max_tokens default above limit", M "http = {\n  max_tokens_limit = 100;\n  max_tokens_default = 200;\n};\n",
     MS_ERR_RANGE, 4, "http.max_tokens_default: 200 is more than http.max_tokens_limit 100"},
    {"listen on a host name", M "http = {\n  listen = \"example.com\";\n};\n", MS_ERR_INVALID, 3,
     "http.listen: \"example.com\" is not an IPv4 or IPv6 address or \"localhost\""},
    {"connections not above the queue", M "http = {\n  max_connections = 50;\n  queue = 49;\n};\n", MS_ERR_RANGE, 3,
     "http.max_connections: 50 must be more than http.queue + 1 (50)"},
    {"host with a shell character", M "hosts = { target = \"a;rm -rf\"; };\n", MS_ERR_INVALID, 2,
     "hosts.target: \"a;rm -rf\": only letters, digits"},
    {"empty host", M "hosts = { draft = \"\"; };\n", MS_ERR_INVALID, 2, "hosts.draft: must not be empty"},
    /* Issue 35.7: the origin and Host lists. */
    {"origin without a scheme", M "http = { allowed_origins = \"localhost, app.example.com\"; };\n", MS_ERR_INVALID, 2,
     "http.allowed_origins: \"app.example.com\" is not an origin"},
    {"origin with a path", M "http = { allowed_origins = \"https://a.example/x\"; };\n", MS_ERR_INVALID, 2,
     "http.allowed_origins: \"https://a.example/x\" is not an origin"},
    {"origin port 0", M "http = { allowed_origins = \"http://a.example:0\"; };\n", MS_ERR_INVALID, 2,
     "http.allowed_origins: \"http://a.example:0\" is not an origin"},
    {"none among origins", M "http = { allowed_origins = \"none, localhost\"; };\n", MS_ERR_INVALID, 2,
     "http.allowed_origins: \"none\" must stand alone"},
    {"host with a port", M "http = { allowed_hosts = \"api.example.com:8080\"; };\n", MS_ERR_INVALID, 2,
     "http.allowed_hosts: \"api.example.com:8080\" is not a host name or IP literal"},
    {"host with a slash", M "http = {\n  allowed_hosts = \"a.example, b/c\";\n};\n", MS_ERR_INVALID, 3,
     "http.allowed_hosts: \"b/c\" is not a host name or IP literal"},
    {"control character", M "http = { bearer_token = \"a\\tb\"; };\n", MS_ERR_INVALID, 2,
     "http.bearer_token: control character 0x09 at byte 1"},
    {"string too long", M "http = { listen = \""
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
       "\"; };\n",
     MS_ERR_RANGE, 2, "http.listen: 256 bytes, longer than the limit of 255"},
    {"syntax error", M "tree = {\n  top_k = = 10;\n};\n", MS_ERR_FORMAT, 3, "syntax error"},
    {"unclosed group", M "tree = {\n  top_k = 10;\n", MS_ERR_FORMAT, 4, "syntax error"},
    {"duplicate key", M "tree = {\n  top_k = 1;\n  top_k = 2;\n};\n", MS_ERR_FORMAT, 4, "duplicate"},
    {"unterminated string", M "tree = {\n  top_k = 1;\n};\nlog = { dir = \"abc\\\"\n\n", MS_ERR_FORMAT, 5, "unterminated string"},
    {"include", M "\n  @include \"/etc/passwd\"\n", MS_ERR_FORMAT, 3, "@include is not supported"},
};

static void test_bad(void) {
    ms_log_level saved = ms_log_get_level();
    ms_log_set_level(MS_LOG_OFF);
    for (size_t i = 0; i < sizeof g_bad / sizeof g_bad[0]; i++) {
        const bad_case *b = &g_bad[i];
        ms_cfg c;
        ms_cfg_defaults(&c);
        ms_cfg before = c;
        char err[1024] = "";
        ms_status st = ms_cfg_parse_ex(b->text, "bad.cfg", &c, err, sizeof err);
        CHECK(st == b->code, "%s: got %s, want %s (%s)", b->what, ms_status_str(st), ms_status_str(b->code), err);
        char prefix[64];
        if (b->line) snprintf(prefix, sizeof prefix, "bad.cfg:%d: ", b->line);
        else snprintf(prefix, sizeof prefix, "bad.cfg: ");
        CHECK(!strncmp(err, prefix, strlen(prefix)), "%s: message \"%s\" does not start with \"%s\"", b->what, err,
              prefix);
        CHECK(strstr(err + (strncmp(err, prefix, strlen(prefix)) ? 0 : strlen(prefix)), b->needle) != NULL,
              "%s: message \"%s\" lacks \"%s\"", b->what, err, b->needle);
        CHECK(memcmp(&c, &before, sizeof c) == 0, "%s: the output was changed on failure", b->what);

        /* The same text from a file: same code and line, the file's name. */
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/bad.cfg", g_tmp);
        write_text(path, b->text);
        char err2[1024] = "";
        st = ms_cfg_load_ex(path, &c, err2, sizeof err2);
        CHECK(st == b->code, "%s (file): got %s", b->what, ms_status_str(st));
        CHECK(!strncmp(err2, path, strlen(path)) && !strcmp(err2 + strlen(path), err + strlen("bad.cfg")),
              "%s (file): \"%s\" vs \"%s\"", b->what, err2, err);
    }
    ms_log_set_level(saved);

    char err[512];
    ms_cfg c;
    CHECK(ms_cfg_load_ex("/nonexistent/microspec.cfg", &c, err, sizeof err) == MS_ERR_IO, "missing file");
    CHECK(strstr(err, "/nonexistent/microspec.cfg: cannot open") == err, "missing file message %s", err);

    /* ms_cfg_check on structs built in code. */
    ms_cfg_defaults(&c);
    snprintf(c.target.model, sizeof c.target.model, "m");
    c.tree.top_k = 17;
    CHECK(ms_cfg_check(&c, err, sizeof err) == MS_ERR_RANGE && strstr(err, "tree.top_k: 17 is out of range"), "%s", err);
    c.tree.top_k = 10;
    snprintf(c.vocab.mode, sizeof c.vocab.mode, "fast");
    CHECK(ms_cfg_check(&c, err, sizeof err) == MS_ERR_INVALID && strstr(err, "vocab.mode"), "%s", err);
    snprintf(c.vocab.mode, sizeof c.vocab.mode, "full");
    c.tree.chain = true;
    c.tree.depth = 62;
    c.tree.top_k = 16;
    CHECK(ms_cfg_check(&c, err, sizeof err) == MS_OK, "chain mode ignores top_k * depth: %s", err);
}

struct parse_arg {
    const char *text;
    ms_status st;
};
static void parse_quiet(void *p) {
    struct parse_arg *a = p;
    ms_cfg c;
    a->st = ms_cfg_parse(a->text, "once.cfg", &c);
}

/* An error is logged once, where it is found, with the same message. */
static void test_logged_once(void) {
    struct parse_arg a = {M "tree = {\n  top_k = 99;\n};\n", MS_OK};
    ms_log_set_level(MS_LOG_INFO);
    char *log = capture_stderr(parse_quiet, &a);
    CHECK(a.st == MS_ERR_RANGE, "got %s", ms_status_str(a.st));
    const char *hit = strstr(log, "once.cfg:3: tree.top_k: 99 is out of range [1, 16]");
    CHECK(hit != NULL, "log: %s", log);
    CHECK(hit && !strstr(hit + 1, "once.cfg:3:"), "logged more than once: %s", log);
    int lines = 0;
    for (const char *p = log; *p; p++) lines += *p == '\n';
    CHECK(lines == 1, "%d log lines: %s", lines, log);
    free(log);
}

/* ---- paths ----------------------------------------------------------------------------- */

static void test_paths(void) {
    char dir[PATH_MAX], real[PATH_MAX], path[PATH_MAX + 64], err[512];
    snprintf(dir, sizeof dir, "%s/sub", g_tmp);
    mkdir(dir, 0700);
    MS_ASSERT(realpath(dir, real));
    snprintf(path, sizeof path, "%s/c.cfg", dir);
    const char *text = "target = { model = \"models/t\"; };\n"
                       "draft = { kind = \"lm\"; model = \"/abs/draft\"; };\n"
                       "vocab = { mode = \"static\"; list = \"../lists/k.txt\"; };\n"
                       "log = { dir = \"\"; };\n"
                       "hosts = { workdir = \"remote/dir\"; };\n";
    write_text(path, text);
    ms_cfg c;
    CHECK(ms_cfg_load_ex(path, &c, err, sizeof err) == MS_OK, "%s", err);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s/models/t", real);
    CHECK(!strcmp(c.target.model, want), "target.model %s, want %s", c.target.model, want);
    CHECK(!strcmp(c.draft.model, "/abs/draft"), "absolute path changed: %s", c.draft.model);
    snprintf(want, sizeof want, "%s/../lists/k.txt", real);
    CHECK(!strcmp(c.vocab.list, want), "vocab.list %s", c.vocab.list);
    CHECK(!strcmp(c.log.dir, ""), "empty path changed: %s", c.log.dir);
    CHECK(!strcmp(c.hosts.workdir, "remote/dir"), "remote folder resolved: %s", c.hosts.workdir);

    /* From memory: relative paths stay relative to the current folder. */
    CHECK(ms_cfg_parse_ex(text, "mem.cfg", &c, err, sizeof err) == MS_OK, "%s", err);
    CHECK(!strcmp(c.target.model, "models/t") && !strcmp(c.vocab.list, "../lists/k.txt"), "parse: %s %s",
          c.target.model, c.vocab.list);

    /* Resolving can push a path over PATH_MAX. */
    char *big = malloc(PATH_MAX + 128);
    int n = snprintf(big, PATH_MAX + 128, "target = { model = \"");
    for (int i = 0; i < PATH_MAX - 3; i++) big[n++] = 'x';
    snprintf(big + n, 32, "\"; };\n");
    ms_log_set_level(MS_LOG_OFF);
    CHECK(ms_cfg_parse_ex(big, "mem.cfg", &c, err, sizeof err) == MS_OK, "PATH_MAX-3 bytes in memory: %s", err);
    write_text(path, big);
    CHECK(ms_cfg_load_ex(path, &c, err, sizeof err) == MS_ERR_RANGE && strstr(err, "c.cfg:1: target.model:"),
          "resolved too long: %s", err);
    ms_log_set_level(MS_LOG_INFO);
    free(big);
}

/* ---- log, get, dump --------------------------------------------------------------------- */

#define K_SP "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
#define K_SS "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
#define K_CP "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
#define K_CS "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs"

/* Every key differs from its default (checked in test_dump_roundtrip). */
static const char *const g_full =
    "target = { model = \"/models/my \\\"target\\\" \\\\ é\"; max_ctx = 2048; threads = 3; device = \"cuda:2\"; q8_matmul = false; };\n"
    "draft = { enabled = false; kind = \"eagle\"; model = \"rel/eagle\"; layers = 2; max_ctx = 1000; threads = 2;\n"
    "          device = \"cuda:3\"; p_min = 0.35; adaptive = true; policy = \"all\"; };\n"
    "vocab = { mode = \"static\"; w_max = 99; k_pre = 0; k_ver = 5; list = \"lists/k.txt\"; stream = \"context\";\n"
    "          lm_head = \"indexed\"; artifact = \"sv/a.gguf\"; specvocab_k = 77; budget_decay = 0.5; budget_min = 9;\n"
    "          dynaspec_clusters = 5; dynaspec_decay = 0.25; dynaspec_min = 2; };\n"
    "tree = { top_k = 4; depth = 3; total = 12; chain = true; };\n"
    "pipeline = \"overlap\";\n"
    "link = { endpoint = \"ipc:///tmp/x.sock\"; deadline_ms = 7; heartbeat_ms = 11; reconnect_ms = 13;\n"
    "         max_message_bytes = 2147483648L; tensor = \"nccl\"; secret_file = \"/run/ms/link.secret\";\n"
    "         curve = { enabled = true; server_public = \"" K_SP "\"; server_secret = \"" K_SS "\";\n"
    "                   client_public = \"" K_CP "\"; client_secret = \"" K_CS "\"; }; };\n"
    "http = { listen = \"0.0.0.0\"; port = 9; queue = 1; max_tokens_default = 5; max_tokens_limit = 6;\n"
    "         bearer_token = \"tok-S3CRET-\\\"q\\\"-\\\\\"; request_timeout_s = 17;\n"
    "         max_connections = 333; header_timeout_s = 7; idle_timeout_s = 44;\n"
    "         allowed_origins = \"https://app.example.com, http://[::1]:*\"; allowed_hosts = \"api.example.com *.lan\"; };\n"
    "hosts = { target = \"10.0.0.1\"; draft = \"gpu-box.lan\"; ssh_user = \"me\"; workdir = \"/srv/ms\"; };\n"
    "log = { level = \"debug\"; dir = \"logs\"; };\n";

static void log_it(void *p) { ms_cfg_log(p); }

static void test_log_secrets(void) {
    ms_cfg c;
    char err[512];
    CHECK(ms_cfg_parse_ex(g_full, "full.cfg", &c, err, sizeof err) == MS_OK, "%s", err);
    ms_log_set_level(MS_LOG_INFO);
    char *log = capture_stderr(log_it, &c);
    static const char *const secrets[] = {K_SP, K_SS, K_CP, K_CS, "S3CRET"};
    for (int i = 0; i < 5; i++) CHECK(!strstr(log, secrets[i]), "secret %d in the log", i);
    CHECK(strstr(log, "config link.curve.server_secret = \"(set)\""), "server_secret not shown as (set)");
    CHECK(strstr(log, "config http.bearer_token = \"(set)\""), "bearer_token not shown as (set)");
    CHECK(strstr(log, "config http.port = 9\n"), "http.port not logged");
    CHECK(strstr(log, "config hosts.draft = \"gpu-box.lan\"\n"), "hosts.draft not logged");
    CHECK(strstr(log, "config source = full.cfg\n"), "source not logged");
    char keys[128][64];
    int64_t n = key_paths(keys, 128), lines = 0;
    for (const char *p = log; *p; p++) lines += *p == '\n';
    CHECK(lines == n + 1, "%lld log lines for %lld keys", (long long)lines, (long long)n);
    free(log);

    /* An unset secret is shown as empty, not as (set). */
    ms_cfg d;
    ms_cfg_defaults(&d);
    log = capture_stderr(log_it, &d);
    CHECK(strstr(log, "config http.bearer_token = \"\"\n"), "unset token");
    free(log);

    /* --dump without secrets hides them; with them round-trips. */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ms_cfg_dump(&c, m, false);
    fclose(m);
    for (int i = 0; i < 5; i++) CHECK(!strstr(buf, secrets[i]), "secret %d in the dump", i);
    CHECK(strstr(buf, "# server_secret = (set; hidden"), "hidden secret not marked");
    free(buf);
}

static void test_get_string(void) {
    ms_cfg c;
    char err[512], v[PATH_MAX];
    CHECK(ms_cfg_parse_ex(g_full, "full.cfg", &c, err, sizeof err) == MS_OK, "%s", err);
    static const char *const want[][2] = {
        {"http.port", "9"},
        {"link.curve.enabled", "true"},
        {"draft.enabled", "false"},
        {"link.max_message_bytes", "2147483648"},
        {"hosts.draft", "gpu-box.lan"},
        {"pipeline", "overlap"},
        {"target.model", "/models/my \"target\" \\ é"},
        {"link.curve.client_secret", K_CS},
        {"draft.model", "rel/eagle"},
        {"draft.p_min", "0.35"},
        {"draft.adaptive", "true"},
        {"draft.policy", "all"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK(ms_cfg_get_string(&c, want[i][0], v, sizeof v) == MS_OK, "%s", want[i][0]);
        CHECK(!strcmp(v, want[i][1]), "%s = %s, want %s", want[i][0], v, want[i][1]);
    }
    ms_log_set_level(MS_LOG_OFF);
    CHECK(ms_cfg_get_string(&c, "link", v, sizeof v) == MS_ERR_NOT_FOUND, "a group");
    CHECK(ms_cfg_get_string(&c, "link.curve", v, sizeof v) == MS_ERR_NOT_FOUND, "a group");
    CHECK(ms_cfg_get_string(&c, "http.nope", v, sizeof v) == MS_ERR_NOT_FOUND, "not a key");
    CHECK(ms_cfg_get_string(&c, "", v, sizeof v) == MS_ERR_NOT_FOUND, "empty path");
    CHECK(ms_cfg_get_string(&c, "http.port", v, 1) == MS_ERR_RANGE, "cap 1");
    CHECK(ms_cfg_get_string(&c, "http.port", v, 2) == MS_OK && !strcmp(v, "9"), "cap 2");
    ms_log_set_level(MS_LOG_INFO);
}

static ms_status roundtrip(const ms_cfg *c, bool secrets, ms_cfg *back, char *err, size_t cap) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ms_cfg_dump(c, m, secrets);
    fclose(m);
    ms_status st = ms_cfg_parse_ex(buf, c->source, back, err, cap);
    free(buf);
    return st;
}

static void test_dump_roundtrip(void) {
    ms_cfg c, d, back;
    char err[512], a[PATH_MAX], b[PATH_MAX];
    CHECK(ms_cfg_parse_ex(g_full, "full.cfg", &c, err, sizeof err) == MS_OK, "%s", err);
    ms_cfg_defaults(&d);

    /* The full config covers the table: every key differs from its default. */
    char keys[128][64];
    int64_t n = key_paths(keys, 128);
    CHECK(n >= 40 && n <= 128, "%lld keys", (long long)n);
    for (int64_t i = 0; i < n && i < 128; i++) {
        CHECK(ms_cfg_get_string(&c, keys[i], a, sizeof a) == MS_OK, "%s", keys[i]);
        CHECK(ms_cfg_get_string(&d, keys[i], b, sizeof b) == MS_OK, "%s", keys[i]);
        CHECK(strcmp(a, b) != 0, "g_full leaves %s at its default %s", keys[i], b);
    }

    CHECK(roundtrip(&c, true, &back, err, sizeof err) == MS_OK, "%s", err);
    CHECK(memcmp(&c, &back, sizeof c) == 0, "dump -> parse differs");
    for (int64_t i = 0; i < n && i < 128; i++) {
        ms_cfg_get_string(&c, keys[i], a, sizeof a);
        ms_cfg_get_string(&back, keys[i], b, sizeof b);
        CHECK(!strcmp(a, b), "%s: %s -> %s", keys[i], a, b);
    }

    /* Defaults (with a model) round-trip too, also with secrets hidden (none set). */
    snprintf(d.target.model, sizeof d.target.model, "m");
    snprintf(d.source, sizeof d.source, "d.cfg");
    CHECK(roundtrip(&d, false, &back, err, sizeof err) == MS_OK, "%s", err);
    CHECK(memcmp(&d, &back, sizeof d) == 0, "defaults: dump -> parse differs");
}

/* ---- the CLI ------------------------------------------------------------------------------- */

/* Runs the tool with args (shell words); returns its exit status, output in
 * *out (stdout, or stdout+stderr with both). */
static int run_cli(const char *args, bool both, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/tools/microspec-config %s %s", MS_BUILD_DIR, args, both ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    MS_ASSERT(p);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, p)) > 0) fwrite(chunk, 1, got, m);
    fclose(m);
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void) {
    char exe[PATH_MAX];
    snprintf(exe, sizeof exe, "%s/tools/microspec-config", MS_BUILD_DIR);
    CHECK(access(exe, X_OK) == 0, "%s not built", exe);
    if (access(exe, X_OK) != 0) return;
    char *out, args[4 * PATH_MAX], err[512];
    const char *cfgdir = MS_SOURCE_DIR "/cluster/configs";

    static const char *const names[] = {"cpu-one-box", "one-gpu", "two-gpus", "two-hosts"};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "'%s/%s.cfg' --check", cfgdir, names[i]);
        int rc = run_cli(args, true, &out);
        CHECK(rc == 0 && !strcmp(out, "ok\n"), "--check %s: rc %d, %s", names[i], rc, out);
        free(out);
    }

    char bad[PATH_MAX];
    snprintf(bad, sizeof bad, "%s/cli-bad.cfg", g_tmp);
    write_text(bad, "target = { model = \"m\"; };\n\ntree = { top_k = 99; };\n");
    snprintf(args, sizeof args, "'%s' --check", bad);
    int rc = run_cli(args, true, &out);
    char want[PATH_MAX + 128];
    snprintf(want, sizeof want, "%s:3: tree.top_k: 99 is out of range [1, 16]\n", bad);
    CHECK(rc == 1 && !strcmp(out, want), "--check bad: rc %d, \"%s\"", rc, out);
    free(out);

    snprintf(args, sizeof args, "'%s/two-hosts.cfg' --get hosts.target --get hosts.draft --get http.port "
             "--get link.endpoint --get hosts.ssh_user --get link.curve.enabled", cfgdir);
    rc = run_cli(args, false, &out);
    CHECK(rc == 0 && !strcmp(out, "10.200.0.1\n10.200.0.2\n8080\ntcp://10.200.0.1:5757\n\ntrue\n"), "--get: rc %d, \"%s\"",
          rc, out);
    free(out);

    snprintf(args, sizeof args, "'%s/two-hosts.cfg' --get http.port --get http.nope", cfgdir);
    rc = run_cli(args, true, &out);
    CHECK(rc == 1 && strstr(out, "http.nope: not a key"), "--get unknown: rc %d, \"%s\"", rc, out);
    free(out);

    /* --dump (cpu-one-box has no secrets) parses back to what the file loads to. */
    ms_cfg loaded, back;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cpu-one-box.cfg", cfgdir);
    CHECK(ms_cfg_load_ex(path, &loaded, err, sizeof err) == MS_OK, "%s", err);
    snprintf(args, sizeof args, "'%s' --dump", path);
    rc = run_cli(args, false, &out);
    CHECK(rc == 0, "--dump rc %d", rc);
    CHECK(ms_cfg_parse_ex(out, path, &back, err, sizeof err) == MS_OK, "dump does not parse: %s", err);
    CHECK(memcmp(&loaded, &back, sizeof back) == 0, "--dump -> parse differs");
    free(out);

    /* two-hosts has CURVE keys: hidden by --dump, present with --secrets. */
    snprintf(path, sizeof path, "%s/two-hosts.cfg", cfgdir);
    CHECK(ms_cfg_load_ex(path, &loaded, err, sizeof err) == MS_OK, "%s", err);
    snprintf(args, sizeof args, "'%s' --dump", path);
    rc = run_cli(args, false, &out);
    CHECK(rc == 0 && !strstr(out, loaded.link.curve.server_secret), "--dump shows a secret");
    free(out);
    snprintf(args, sizeof args, "'%s' --dump --secrets", path);
    rc = run_cli(args, false, &out);
    CHECK(rc == 0 && ms_cfg_parse_ex(out, path, &back, err, sizeof err) == MS_OK, "--dump --secrets: %s", err);
    CHECK(memcmp(&loaded, &back, sizeof back) == 0, "--dump --secrets -> parse differs");
    free(out);

    rc = run_cli("", true, &out);
    CHECK(rc == 2 && strstr(out, "usage:"), "no args: rc %d", rc);
    free(out);
    rc = run_cli("--help", false, &out);
    CHECK(rc == 0 && strstr(out, "link.curve.server_public") && strstr(out, "(secret)"), "--help rc %d", rc);
    free(out);
    snprintf(args, sizeof args, "'%s' --frobnicate", path);
    rc = run_cli(args, true, &out);
    CHECK(rc == 2, "unknown option rc %d", rc);
    free(out);
    rc = run_cli("/nonexistent.cfg --check", true, &out);
    CHECK(rc == 1 && strstr(out, "/nonexistent.cfg: cannot open"), "missing file: rc %d \"%s\"", rc, out);
    free(out);
}

/* http.listen: the literals the target binds, and "localhost", pass (the
 * target maps localhost to 127.0.0.1; tests/integration/test_cluster_ops.sh
 * checks that the node agrees with --check on each). */
static void test_listen(void) {
    static const char *const ok[] = {"localhost", "127.0.0.1", "0.0.0.0", "::1", "::"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char text[256], err[512] = "";
        snprintf(text, sizeof text, "target = { model = \"m\"; };\nhttp = { listen = \"%s\"; };\n", ok[i]);
        ms_cfg c;
        CHECK(ms_cfg_parse_ex(text, "l.cfg", &c, err, sizeof err) == MS_OK, "listen %s refused: %s", ok[i], err);
    }
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_config.XXXXXX");
    MS_ASSERT(mkdtemp(g_tmp));
    test_defaults();
    test_examples();
    test_bad();
    test_logged_once();
    test_paths();
    test_log_secrets();
    test_get_string();
    test_dump_roundtrip();
    test_cli();
    test_listen();
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    if (g_fail) {
        fprintf(stderr, "test_config: %d failure(s)\n", g_fail);
        return 1;
    }
    printf("test_config: ok (%zu bad-input cases)\n", sizeof g_bad / sizeof g_bad[0]);
    return 0;
}
