/* ms_common.c — status names, logging, allocation, files, ids, rng. */
#include "ms_common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *ms_status_str(ms_status s) {
    switch (s) {
    case MS_OK: return "MS_OK";
    case MS_ERR_INVALID: return "MS_ERR_INVALID";
    case MS_ERR_IO: return "MS_ERR_IO";
    case MS_ERR_FORMAT: return "MS_ERR_FORMAT";
    case MS_ERR_NOMEM: return "MS_ERR_NOMEM";
    case MS_ERR_UNSUPPORTED: return "MS_ERR_UNSUPPORTED";
    case MS_ERR_NOT_FOUND: return "MS_ERR_NOT_FOUND";
    case MS_ERR_RANGE: return "MS_ERR_RANGE";
    case MS_ERR_TIMEOUT: return "MS_ERR_TIMEOUT";
    case MS_ERR_PEER: return "MS_ERR_PEER";
    case MS_ERR_CANCELLED: return "MS_ERR_CANCELLED";
    case MS_ERR_INTERNAL: return "MS_ERR_INTERNAL";
    default: return "MS_ERR_?";
    }
}

/* ---- logging ------------------------------------------------------------ */

static char g_role[32] = "microspec";
static int g_level = -1; /* -1: not yet read from MS_LOG */

void ms_log_set_role(const char *role) {
    snprintf(g_role, sizeof g_role, "%s", role ? role : "microspec");
}

void ms_log_set_level(ms_log_level level) { g_level = (int)level; }

ms_status ms_log_to_dir(const char *dir, const char *role, char *path_out, size_t cap) {
    MS_ASSERT(dir && role);
    struct stat st;
    errno = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        MS_FAIL(MS_ERR_NOT_FOUND, "log.dir: \"%s\" is not an existing folder%s%s", dir, errno ? ": " : "",
                errno ? strerror(errno) : "");
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/microspec-%s.log", dir, role);
    if (n < 0 || (size_t)n >= sizeof path) MS_FAIL(MS_ERR_RANGE, "log.dir: \"%s\" is too long a path", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) MS_FAIL(MS_ERR_IO, "log.dir: cannot open %s for appending: %s", path, strerror(errno));
    fprintf(stderr, "[%s %d] INFO logging to %s\n", g_role, (int)getpid(), path);
    fflush(stderr);
    if (dup2(fd, STDERR_FILENO) < 0) {
        int e = errno;
        close(fd);
        MS_FAIL(MS_ERR_IO, "log.dir: cannot redirect stderr to %s: %s", path, strerror(e));
    }
    close(fd);
    if (path_out && cap) snprintf(path_out, cap, "%s", path);
    return MS_OK;
}

bool ms_log_level_parse(const char *s, ms_log_level *out) {
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i <= MS_LOG_OFF; i++)
        if (s && !strcmp(s, names[i])) {
            *out = (ms_log_level)i;
            return true;
        }
    return false;
}

ms_log_level ms_log_get_level(void) {
    if (g_level < 0) {
        ms_log_level l = MS_LOG_INFO;
        ms_log_level_parse(getenv("MS_LOG"), &l);
        g_level = (int)l;
    }
    return (ms_log_level)g_level;
}

void ms_log_msg(ms_log_level level, const char *file, int line, const char *fmt, ...) {
    if ((int)level < (int)ms_log_get_level()) return;
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One fprintf per line so lines from two threads do not interleave. */
    fprintf(stderr, "[%s %d] %s %s:%d: %s\n", g_role, (int)getpid(), names[level], base, line, msg);
}

_Noreturn void ms_assert_fail(const char *file, int line, const char *cond) {
    fprintf(stderr, "[%s %d] ASSERT %s:%d: %s\n", g_role, (int)getpid(), file, line, cond);
    abort();
}

/* ---- allocation --------------------------------------------------------- */

void *ms_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) MS_LOG_ERROR("out of memory allocating %zu bytes", n);
    return p;
}

void *ms_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) MS_LOG_ERROR("out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *ms_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) MS_LOG_ERROR("out of memory reallocating to %zu bytes", n);
    return q;
}

bool ms_mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

/* ---- time --------------------------------------------------------------- */

uint64_t ms_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double ms_now_s(void) { return (double)ms_now_ns() * 1e-9; }

/* ---- files -------------------------------------------------------------- */

ms_status ms_read_file(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) MS_FAIL(MS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        MS_FAIL(MS_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = ms_malloc(n + 1);
    if (!buf) {
        close(fd);
        return MS_ERR_NOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            close(fd);
            MS_FAIL(MS_ERR_IO, "%s: read failed after %zu of %zu bytes", path, got, n);
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return MS_OK;
}

ms_status ms_write_file_atomic(const char *path, const void *data, size_t len) {
    size_t plen = strlen(path);
    char *tmp = ms_malloc(plen + 32);
    if (!tmp) return MS_ERR_NOMEM;
    snprintf(tmp, plen + 32, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return MS_ERR_IO;
    }
    const char *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    int ok = done == len && fsync(fd) == 0;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return MS_ERR_IO;
    }
    free(tmp);
    return MS_OK;
}

char *ms_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *s = ms_malloc(a + b + 2);
    if (!s) return NULL;
    memcpy(s, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/') s[k++] = '/';
    memcpy(s + k, name, b + 1);
    return s;
}

bool ms_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- number parsing ------------------------------------------------------ */

bool ms_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool ms_parse_f64(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

bool ms_cli_i64(const char *tool, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (ms_parse_i64(s, lo, hi, out)) return true;
    fprintf(stderr, "%s: %s expects an integer in [%lld, %lld], got '%s'\n", tool, flag, (long long)lo,
            (long long)hi, s);
    return false;
}

bool ms_cli_f64(const char *tool, const char *flag, const char *s, double lo, double hi, double *out) {
    if (ms_parse_f64(s, lo, hi, out)) return true;
    fprintf(stderr, "%s: %s expects a number in [%g, %g], got '%s'\n", tool, flag, lo, hi, s);
    return false;
}

/* ---- ids ---------------------------------------------------------------- */

ms_status ms_ids_reserve(ms_ids *ids, int64_t cap) {
    if (cap <= ids->cap) return MS_OK;
    int64_t c = ids->cap ? ids->cap : 16;
    while (c < cap) c *= 2;
    int32_t *v = ms_realloc(ids->v, (size_t)c * sizeof *v);
    if (!v) return MS_ERR_NOMEM;
    ids->v = v;
    ids->cap = c;
    return MS_OK;
}

ms_status ms_ids_push(ms_ids *ids, int32_t id) {
    if (ids->n == ids->cap) MS_TRY(ms_ids_reserve(ids, ids->n + 1));
    ids->v[ids->n++] = id;
    return MS_OK;
}

void ms_ids_free(ms_ids *ids) {
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

/* ---- rng: splitmix64 seeding, xoshiro256** ------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ms_rng_seed(ms_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ms_rng_u64(ms_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ms_rng_uniform(ms_rng *r) { return (double)(ms_rng_u64(r) >> 11) * 0x1.0p-53; }

float ms_rng_normal(ms_rng *r) {
    double u1 = ms_rng_uniform(r), u2 = ms_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
