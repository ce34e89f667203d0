/* ms_config.h — the cluster configuration file (docs/architecture.md §7).
 *
 * One libconfig file describes the whole pair: the target and draft models
 * and where they run, the vocabulary mode, the draft tree, the pipeline, the
 * target↔draft link (with optional ZeroMQ CURVE keys), the HTTP front end,
 * the hosts for cluster/launch.sh, and logging. Every key, its type, default,
 * bounds and meaning is one row of a table in ms_config.c (`microspec-config
 * --help` prints it). The loader
 *   - refuses unknown keys at any level, wrongly typed values, values out of
 *     range, strings outside their allowed set, and failed cross-field checks,
 *     each with "FILE:LINE: PATH: problem" (LINE 0 when the key is absent);
 *   - gives absent keys their defaults;
 *   - resolves relative paths (target.model, draft.model, vocab.list, log.dir)
 *     against the folder of the config file (ms_cfg_load) or leaves them
 *     relative to the current folder (ms_cfg_parse);
 *   - does not check that model files exist: the nodes do that at start, with
 *     the file and field named;
 *   - refuses @include (one file describes the cluster).
 *
 * This module is below the nodes: it knows plain strings, integers and
 * floats. The target and draft nodes translate ms_cfg into their own option
 * structs (draft.kind → ms_draft_kind, vocab.mode → ms_vocab_mode, tree.* and
 * draft.p_min → ms_tree_params, draft.adaptive → ms_dft_opts, vocab.k_pre/k_ver
 * → ms_gen_params).
 *
 * Error codes (all logged once with the message above):
 *   MS_ERR_IO          the file cannot be read
 *   MS_ERR_FORMAT      libconfig syntax error, or an @include
 *   MS_ERR_UNSUPPORTED an unknown key
 *   MS_ERR_INVALID     a wrong type (group vs value, integer vs string...), a
 *                      string outside its allowed set or format (enum, device,
 *                      endpoint, Z85 key, host name), a control character
 *   MS_ERR_RANGE       an integer out of bounds, a string too long, tree or
 *                      http limits that contradict each other
 *   MS_ERR_NOT_FOUND   a key another one requires is missing (target.model;
 *                      draft.model for lm/eagle; vocab.list for static; the
 *                      four CURVE keys when link.curve.enabled)
 */
#ifndef MS_CONFIG_H
#define MS_CONFIG_H

#include <limits.h>
#include <stdio.h>

#include "ms_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

#define MS_CFG_NAME_MAX 256 /* host names, endpoints, devices, tokens */
#define MS_CFG_ENUM_MAX 24  /* enum strings ("dynamic", "specvocab+window") */
#define MS_CFG_Z85_LEN 40   /* a CURVE key: 32 bytes as Z85 text */
#define MS_CFG_TREE_MAX 64  /* = MS_TREE_MAX (protocol/ms_msg.h): nodes per tree */
#define MS_CFG_TREE_MAX_K 16 /* = MS_TREE_MAX_K (draft-node/ms_tree.h) */

/* Plain values; strings are NUL-terminated in fixed arrays. Enum-like keys
 * hold one of their allowed strings (validated). */
typedef struct {
    struct {
        char model[PATH_MAX];           /* model folder (required) */
        int64_t max_ctx;                /* KV rows */
        int64_t threads;                /* CPU threads */
        char device[MS_CFG_NAME_MAX];   /* "cpu" | "cuda:N" */
        bool q8_matmul;                 /* GGUF on the CPU: 8-bit activations (ms_model_opts.q8_matmul) */
    } target;
    struct {
        bool enabled;                   /* false: the target runs alone (autoregressive) */
        char kind[MS_CFG_ENUM_MAX];     /* "layerskip" | "lm" | "eagle", each optionally + "+ngram" */
        char model[PATH_MAX];           /* lm: draft model; eagle: EAGLE head; layerskip: unused */
        int64_t layers;                 /* layerskip: first N target layers */
        int64_t max_ctx;                /* 0: the model's default */
        int64_t threads;
        char device[MS_CFG_NAME_MAX];
        double p_min;                   /* confidence stop of the draft (0: off; ms_tree.h) */
        bool adaptive;                  /* adaptive draft depth per request (ms_draft.h) */
        char policy[MS_CFG_ENUM_MAX];   /* "cost" | "all": ms_gen_params.cost_policy (target-node/ms_policy.h) */
    } draft;
    struct {
        char mode[MS_CFG_ENUM_MAX];     /* "dynamic" | "static" | "full" | "specvocab" | "dynaspec" | "…+window" */
        int64_t w_max, k_pre, k_ver;
        char list[PATH_MAX];            /* static: a microspec-freqlist file */
        char stream[MS_CFG_ENUM_MAX];   /* dynamic: "both" | "context" | "extension" (window-stream ablation) */
        char lm_head[MS_CFG_ENUM_MAX];  /* "gathered" | "indexed" (LM-head ablation) */
        char artifact[PATH_MAX];        /* specvocab / dynaspec: the selector's artefact */
        int64_t specvocab_k;            /* specvocab: candidates per row at the first step */
        double budget_decay;            /* position-aware budget R (static, specvocab); 1 = off */
        int64_t budget_min;             /* its floor K_min */
        int64_t dynaspec_clusters;      /* dynaspec: K_C0 (0: the selector's default) */
        double dynaspec_decay;          /* dynaspec: budget decay per depth */
        int64_t dynaspec_min;           /* dynaspec: K_min clusters */
    } vocab;
    struct {
        int64_t top_k, depth, total;
        bool chain;
    } tree;
    char pipeline[MS_CFG_ENUM_MAX];     /* "sync" | "overlap" */
    struct {
        char endpoint[MS_CFG_NAME_MAX]; /* tcp://HOST:PORT | ipc://PATH */
        int64_t deadline_ms, heartbeat_ms, reconnect_ms, max_message_bytes;
        char tensor[MS_CFG_ENUM_MAX];   /* "auto" | "host" | "ipc" | "nccl": how eagle features travel */
        char secret_file[PATH_MAX];     /* "" or a file both nodes read: drafts must prove it (ms_link.h) */
        struct {
            bool enabled;
            char server_public[MS_CFG_Z85_LEN + 1], server_secret[MS_CFG_Z85_LEN + 1];
            char client_public[MS_CFG_Z85_LEN + 1], client_secret[MS_CFG_Z85_LEN + 1];
        } curve;
    } link;
    struct {
        char listen[MS_CFG_NAME_MAX];
        int64_t port, queue, max_tokens_default, max_tokens_limit;
        char bearer_token[MS_CFG_NAME_MAX]; /* "" = no authentication */
        int64_t request_timeout_s;
        int64_t max_connections, header_timeout_s, idle_timeout_s;
        char allowed_origins[1024];     /* browser origins answered (ms_origin.h); "localhost" by default */
        char allowed_hosts[1024];       /* Host names answered besides loopback, the listen address, this host */
    } http;
    struct {
        char target[MS_CFG_NAME_MAX], draft[MS_CFG_NAME_MAX];
        char ssh_user[MS_CFG_NAME_MAX];
        char workdir[PATH_MAX];         /* on the remote hosts; not resolved */
    } hosts;
    struct {
        char level[MS_CFG_ENUM_MAX];    /* "debug" | "info" | "warn" | "error" | "off" */
        char dir[PATH_MAX];             /* "" = stderr only */
    } log;
    char source[PATH_MAX];              /* the file (or name) it was read from; not a key */
} ms_cfg;

/* Every key at its default (memset first, so two default configs compare
 * equal with memcmp). target.model is empty, so defaults alone do not pass
 * ms_cfg_check. */
void ms_cfg_defaults(ms_cfg *out);

/* Read and validate a config file. On success *out is the effective
 * configuration; on failure *out is untouched. err (optional, cap bytes)
 * receives the one-line message "FILE:LINE: PATH: problem". */
ms_status ms_cfg_load(const char *path, ms_cfg *out);
ms_status ms_cfg_load_ex(const char *path, ms_cfg *out, char *err, size_t cap);

/* Same from a NUL-terminated text in memory; `name` stands for the file in
 * messages (NULL → "<config>"). Relative paths stay relative (to the current
 * folder). */
ms_status ms_cfg_parse(const char *text, const char *name, ms_cfg *out);
ms_status ms_cfg_parse_ex(const char *text, const char *name, ms_cfg *out, char *err, size_t cap);

/* The per-key and cross-field checks on a struct built in code (messages
 * give "PATH: problem", no line). */
ms_status ms_cfg_check(const ms_cfg *c, char *err, size_t cap);

/* A node's command line (microspec-target, microspec-draft): -c/--config
 * FILE (required), --link-secret FILE, -h/--help (usage(stdout)). Returns -1
 * to go on, else the exit code: 0 after --help, 2 for a bad argument (named
 * on stderr after `tool`). */
int ms_cfg_node_args(const char *tool, int argc, char **argv, void (*usage)(FILE *), const char **cfg_path,
                     const char **secret_path);

/* A model path from key `key` that is not there, reported the same way by
 * both nodes ("PATH: no such file or directory (KEY)"), before any loading. */
bool ms_cfg_path_ok(const char *key, const char *path);

/* Logs the effective configuration, one "config PATH = VALUE" line per key at
 * info level. CURVE keys and the bearer token are shown as "(set)" or "". */
void ms_cfg_log(const ms_cfg *c);

/* Any key by its dotted path ("http.port", "link.curve.enabled") as text:
 * integers in decimal, booleans "true"/"false", strings as they are (secrets
 * included: the caller asked for that key). MS_ERR_NOT_FOUND for a path that
 * is not a key, MS_ERR_RANGE when cap is too small. */
ms_status ms_cfg_get_string(const ms_cfg *c, const char *path, char *buf, size_t cap);

/* Writes the configuration as libconfig text that ms_cfg_parse reads back to
 * the same struct (source aside). Each key carries its help as a comment.
 * with_secrets false: secret keys are written as comments, not values. */
void ms_cfg_dump(const ms_cfg *c, FILE *f, bool with_secrets);

/* The key table: path, type, default, bounds and help, one key per line. */
void ms_cfg_help(FILE *f);

#ifdef __cplusplus
}
#endif

#endif
