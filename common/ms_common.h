/* ms_common.h — status codes, check macros, logging, assertions, small helpers.
 *
 * Error convention (STYLE.md): a function that can fail returns ms_status
 * (0 ok, negative error) and writes results through pointers. An error is
 * logged once, where it is found (MS_FAIL); callers propagate it with MS_TRY
 * without logging again. MS_ASSERT is for programmer errors only and is never
 * compiled out; input from files, peers and clients is validated instead.
 */
#ifndef MS_COMMON_H
#define MS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define MS_NORETURN [[noreturn]]
extern "C" {
#else
#define MS_NORETURN _Noreturn
#endif

typedef int ms_status;

enum {
    MS_OK = 0,
    MS_ERR_INVALID = -1,     /* bad argument or value (from a caller or a client) */
    MS_ERR_IO = -2,          /* open/read/write/mmap failed */
    MS_ERR_FORMAT = -3,      /* malformed file or message content */
    MS_ERR_NOMEM = -4,
    MS_ERR_UNSUPPORTED = -5, /* well-formed but not supported (architecture, dtype...) */
    MS_ERR_NOT_FOUND = -6,   /* missing tensor, field, file, token */
    MS_ERR_RANGE = -7,       /* a count or size past its bound */
    MS_ERR_TIMEOUT = -8,
    MS_ERR_PEER = -9,        /* the other node misbehaved or is gone */
    MS_ERR_CANCELLED = -10,
    MS_ERR_INTERNAL = -11,
};

/* Short, stable name of a status ("MS_ERR_FORMAT"). */
const char *ms_status_str(ms_status s);

typedef enum { MS_LOG_DEBUG = 0, MS_LOG_INFO, MS_LOG_WARN, MS_LOG_ERROR, MS_LOG_OFF } ms_log_level;

/* Logs go to stderr as "[role pid] LEVEL file:line: message". The role names
 * the process ("target", "draft", "generate"); the level threshold comes from
 * ms_log_set_level or the MS_LOG environment variable (debug|info|warn|error|off). */
void ms_log_set_role(const char *role);
/* "debug" | "info" | "warn" | "error" | "off" → level; false if unknown. */
bool ms_log_level_parse(const char *s, ms_log_level *out);
void ms_log_set_level(ms_log_level level);
/* log.dir: from now on this process's stderr (our log lines, libraries'
 * messages, sanitizer reports) is appended to DIR/microspec-ROLE.log. DIR
 * must be an existing, writable folder (MS_ERR_NOT_FOUND / MS_ERR_IO, logged
 * on the old stderr). One line on the old stderr says where the log went;
 * the file's path is written to path_out (cap bytes) when given. */
ms_status ms_log_to_dir(const char *dir, const char *role, char *path_out, size_t cap);
ms_log_level ms_log_get_level(void);
void ms_log_msg(ms_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define MS_LOG_DEBUG(...) ms_log_msg(MS_LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__)
#define MS_LOG_INFO(...) ms_log_msg(MS_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define MS_LOG_WARN(...) ms_log_msg(MS_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define MS_LOG_ERROR(...) ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)

/* Log an error where it is found and return `code` from the current function. */
#define MS_FAIL(code, ...)                                   \
    do {                                                     \
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__); \
        return (code);                                       \
    } while (0)

/* Propagate a failure (already logged where it was found). Evaluates once. */
#define MS_TRY(expr)                       \
    do {                                   \
        ms_status ms_try_s_ = (expr);      \
        if (ms_try_s_ < 0) return ms_try_s_; \
    } while (0)

/* Same, but jump to a cleanup label with the status stored in `st`. */
#define MS_TRY_GOTO(st, expr, label) \
    do {                             \
        (st) = (expr);               \
        if ((st) < 0) goto label;    \
    } while (0)

/* Programmer errors: always checked, never compiled out. */
#define MS_ASSERT(cond)                                                         \
    do {                                                                        \
        if (!(cond)) ms_assert_fail(__FILE__, __LINE__, #cond);                 \
    } while (0)
MS_NORETURN void ms_assert_fail(const char *file, int line, const char *cond);

/* Allocation that logs on failure. Sizes are size_t; use ms_mul_size to
 * multiply counts safely (returns false on overflow). */
void *ms_malloc(size_t n);
void *ms_calloc(size_t count, size_t size);
void *ms_realloc(void *p, size_t n);
bool ms_mul_size(size_t a, size_t b, size_t *out);

/* Monotonic clock in seconds and nanoseconds. */
double ms_now_s(void);
uint64_t ms_now_ns(void);

/* Whole-file read (NUL-terminated for convenience; *len excludes the NUL).
 * The caller frees *data. Errors name the path. */
ms_status ms_read_file(const char *path, char **data, size_t *len);

/* Write a file atomically: a temporary file in the same folder, fsync, rename.
 * No partial file is ever left under `path`. */
ms_status ms_write_file_atomic(const char *path, const void *data, size_t len);

/* SHA-256 of the file at path (libsodium, read in 1 MiB chunks) as 64
 * lowercase hex digits + NUL into hex[65]. MS_ERR_IO (logged with the path)
 * if it cannot be read. Artefacts record the model's hash with it (issue 16). */
ms_status ms_sha256_file(const char *path, char hex[65]);

/* Join a directory and a file name into a malloc'd string. */
char *ms_path_join(const char *dir, const char *name);
bool ms_file_exists(const char *path);

/* Strict number parsing for command lines and config values: the whole
 * string must be the number, inside [lo, hi]; false otherwise. */
bool ms_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool ms_parse_f64(const char *s, double lo, double hi, double *out);
/* The same for a CLI flag: on failure prints "tool: --flag expects an
 * integer in [lo, hi], got 'x'" to stderr. */
bool ms_cli_i64(const char *tool, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool ms_cli_f64(const char *tool, const char *flag, const char *s, double lo, double hi, double *out);

/* A growable vector of token ids. Owns its array. */
typedef struct {
    int32_t *v;
    int64_t n, cap;
} ms_ids;
ms_status ms_ids_push(ms_ids *ids, int32_t id);
ms_status ms_ids_reserve(ms_ids *ids, int64_t cap);
void ms_ids_free(ms_ids *ids);

/* Deterministic random numbers (splitmix64 seeding + xoshiro256**). Same
 * seed, same sequence, on every machine. */
typedef struct {
    uint64_t s[4];
} ms_rng;
void ms_rng_seed(ms_rng *r, uint64_t seed);
uint64_t ms_rng_u64(ms_rng *r);
double ms_rng_uniform(ms_rng *r); /* [0, 1) with 53 random bits */
float ms_rng_normal(ms_rng *r);   /* standard normal (Box-Muller) */

#ifdef __cplusplus
}
#endif

#endif
