/* spec_util.c — helpers of the speculative-core acceptance tests. */
#include "spec_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

extern char **environ;

int spec_failures;

bool spec_small(void) {
    const char *e = getenv("SPEC_SMALL");
    if (e && *e && strcmp(e, "0") != 0) return true;
#if defined(__SANITIZE_ADDRESS__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return true;
#endif
#endif
    return false;
}

int spec_spawn(const char *const *argv) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (!getenv("SPEC_VERBOSE")) {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "spec_spawn: cannot start %s: %s\n", argv[0], strerror(rc));
        return -1;
    }
    int ws = 0;
    if (waitpid(pid, &ws, 0) < 0) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}

/* argv = tool, fixed[], then `args` split on spaces. */
static int run_split(const char *tool, const char *const *fixed, int n_fixed, const char *args) {
    enum { MAX_ARGS = 64 };
    char *copy = strdup(args ? args : "");
    const char *argv[MAX_ARGS + 8];
    int argc = 0;
    argv[argc++] = tool;
    for (int i = 0; i < n_fixed; i++) argv[argc++] = fixed[i];
    for (char *save = NULL, *tok = strtok_r(copy, " ", &save); tok && argc < MAX_ARGS;
         tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    int rc = copy ? spec_spawn(argv) : -1;
    free(copy);
    return rc;
}

ms_status spec_mkmodel(const char *root, const char *name, const char *args, char *dir, size_t cap) {
    if ((size_t)snprintf(dir, cap, "%s/%s", root, name) >= cap) MS_FAIL(MS_ERR_INVALID, "path too long");
    const char *fixed[] = {"--out", dir};
    int rc = run_split(MS_BUILD_DIR "/tools/microspec-mkmodel", fixed, 2, args);
    if (rc != 0) MS_FAIL(MS_ERR_IO, "microspec-mkmodel --out %s %s: exit %d", dir, args, rc);
    return MS_OK;
}

ms_status spec_mkeagle(const char *root, const char *name, const char *target, const char *args, char *dir,
                       size_t cap) {
    if ((size_t)snprintf(dir, cap, "%s/%s", root, name) >= cap) MS_FAIL(MS_ERR_INVALID, "path too long");
    const char *fixed[] = {"--target", target, "--out", dir};
    int rc = run_split(MS_BUILD_DIR "/tools/microspec-mkeagle", fixed, 4, args);
    if (rc != 0) MS_FAIL(MS_ERR_IO, "microspec-mkeagle --target %s --out %s %s: exit %d", target, dir, args, rc);
    return MS_OK;
}

ms_status spec_convert_stories(const char *root, char *dir, size_t cap) {
    const char *bin = MS_SHARED_DIR "/models/stories260k/stories260K.bin";
    const char *tok = MS_SHARED_DIR "/models/stories260k/tok512.bin";
    if (!ms_file_exists(bin) || !ms_file_exists(tok)) return MS_ERR_NOT_FOUND;
    if ((size_t)snprintf(dir, cap, "%s/stories", root) >= cap) MS_FAIL(MS_ERR_INVALID, "path too long");
    const char *argv[] = {MS_BUILD_DIR "/tools/convert-llama2c", bin, tok, dir, NULL};
    int rc = spec_spawn(argv);
    if (rc != 0) MS_FAIL(MS_ERR_IO, "convert-llama2c %s: exit %d", bin, rc);
    return MS_OK;
}

ms_status spec_specvocab_build(const char *model, const char *out, int64_t rank) {
    char r[24];
    snprintf(r, sizeof r, "%lld", (long long)rank);
    const char *argv[] = {"/usr/bin/env", "python3", MS_SOURCE_DIR "/tools/vocab/specvocab_build.py", "--model", model,
                          "--out", out, "--rank", r, NULL};
    int rc = spec_spawn(argv);
    if (rc != 0) MS_FAIL(MS_ERR_IO, "specvocab_build.py --model %s --out %s: exit %d", model, out, rc);
    return MS_OK;
}

ms_status spec_dynaspec_random(const char *model, const char *out, int64_t clusters, int64_t seed) {
    char c[24], sd[24];
    snprintf(c, sizeof c, "%lld", (long long)clusters);
    snprintf(sd, sizeof sd, "%lld", (long long)seed);
    const char *argv[] = {"/usr/bin/env", "python3", MS_SOURCE_DIR "/tests/dynaspec_random.py", "--model", model,
                          "--out", out, "--clusters", c, "--seed", sd, NULL};
    int rc = spec_spawn(argv);
    if (rc != 0) MS_FAIL(MS_ERR_IO, "dynaspec_random.py --model %s --out %s: exit %d", model, out, rc);
    return MS_OK;
}

ms_status spec_bench_prompts(int64_t n, char ***out, int64_t *n_out) {
    const char *path = MS_SHARED_DIR "/data/spec_bench/question.jsonl";
    *out = NULL;
    *n_out = 0;
    if (!ms_file_exists(path)) return MS_ERR_NOT_FOUND;
    FILE *f = fopen(path, "rb");
    if (!f) MS_FAIL(MS_ERR_IO, "%s: %s", path, strerror(errno));
    char **v = ms_calloc((size_t)n, sizeof *v);
    if (!v) {
        fclose(f);
        return MS_ERR_NOMEM;
    }
    ms_status s = MS_OK;
    char *line = NULL;
    size_t lcap = 0;
    int64_t k = 0, lineno = 0;
    while (k < n && getline(&line, &lcap, f) > 0) {
        lineno++;
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        json_t *turns = j ? json_object_get(j, "turns") : NULL;
        json_t *t0 = turns ? json_array_get(turns, 0) : NULL;
        if (!json_is_string(t0)) {
            json_decref(j);
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: no turns[0] string", path, (long long)lineno);
            s = MS_ERR_FORMAT;
            break;
        }
        v[k] = strdup(json_string_value(t0));
        json_decref(j);
        if (!v[k]) {
            s = MS_ERR_NOMEM;
            break;
        }
        k++;
    }
    free(line);
    fclose(f);
    if (s < 0) {
        spec_free_strings(v, k);
        return s;
    }
    *out = v;
    *n_out = k;
    return MS_OK;
}

void spec_free_strings(char **s, int64_t n) {
    if (!s) return;
    for (int64_t i = 0; i < n; i++) free(s[i]);
    free(s);
}

ms_status spec_save_ranked_list(const char *path, const int64_t *counts, int64_t V, int64_t k) {
    int32_t *ids = ms_malloc((size_t)k * sizeof *ids);
    if (!ids) return MS_ERR_NOMEM;
    ms_status s = ms_vocab_rank_counts(counts, V, NULL, 0, k, ids);
    if (s >= 0) s = ms_vocab_save_list(path, ids, k);
    free(ids);
    return s;
}

bool spec_sink_cb(void *ctx, const int32_t *ids, int64_t n) {
    spec_sink *s = ctx;
    if (s->batches < (int64_t)(sizeof s->batch_n / sizeof s->batch_n[0])) s->batch_n[s->batches] = n;
    s->batches++;
    for (int64_t i = 0; i < n; i++)
        if (ms_ids_push(&s->ids, ids[i]) < 0) return false;
    return !(s->cancel_after > 0 && s->ids.n >= s->cancel_after);
}

void spec_sink_clear(spec_sink *s) {
    s->ids.n = 0;
    s->batches = 0;
}

ms_status spec_generate(ms_tgt *t, ms_draft_port *port, const int32_t *prompt, int64_t n, const ms_gen_params *p,
                        spec_sink *sink, ms_gen_stats *st) {
    spec_sink_clear(sink);
    return ms_tgt_generate(t, port, 7, prompt, n, p, spec_sink_cb, sink, st);
}

/* ---- the wrapping port ---------------------------------------------------- */

void spec_wrap_reset(spec_wrap *w, uint64_t seed) {
    ms_rng_seed(&w->rng, seed);
    w->n_begin = w->n_draft = w->n_accept = w->n_end = 0;
    w->sum_path = w->last_path = w->rounds_seen = w->max_tree_n = 0;
    w->order_ok = true;
    w->last_round = 0;
    w->oracle_pos = 0;
    w->last_begin_status = MS_OK;
}

static ms_status wrap_begin(void *ctx, const ms_msg_begin *m) {
    spec_wrap *w = ctx;
    if (w->n_begin != 0) w->order_ok = false;
    w->n_begin++;
    w->last_round = 0;
    w->oracle_pos = 0;
    if (w->fault == SPEC_FAULT_BEGIN_STATUS) return MS_ERR_PEER;
    if (w->fault == SPEC_FAULT_ORACLE) {
        if (w->n_oracle < 1 || m->root != w->oracle[0]) w->order_ok = false;
        return MS_OK;
    }
    w->last_begin_status = w->inner.begin(w->inner.ctx, m);
    return w->last_begin_status;
}

static int32_t random_other(spec_wrap *w, int32_t not_this) {
    for (;;) {
        int32_t x = (int32_t)(ms_rng_u64(&w->rng) % (uint64_t)w->V);
        if (x != not_this || w->V == 1) return x;
    }
}

static int add_node(ms_tree *t, int32_t parent, int32_t token) {
    int i = (int)t->n++;
    t->token[i] = token;
    t->parent[i] = parent;
    t->depth[i] = t->depth[parent] + 1;
    t->mask[i] = t->mask[parent] | (1ull << i);
    t->score[i] = t->score[parent] - 1.0f;
    return i;
}

/* A tree whose right path is the known continuation, each right child hidden
 * at a random place among decoys, and a trap per level: a decoy whose own
 * child carries the next right token (under the wrong parent). */
static void oracle_tree(spec_wrap *w, ms_tree *t) {
    memset(t, 0, sizeof *t);
    t->n = 1;
    t->token[0] = w->oracle[w->oracle_pos];
    t->parent[0] = -1;
    t->mask[0] = 1;
    int32_t cur = 0;
    for (int64_t dd = 1; dd <= w->oracle_depth; dd++) {
        int64_t at = w->oracle_pos + dd;
        int32_t right = at < w->n_oracle ? w->oracle[at] : (int32_t)(ms_rng_u64(&w->rng) % (uint64_t)w->V);
        if (t->n + w->oracle_width + 1 > MS_TREE_MAX) break;
        int64_t where = (int64_t)(ms_rng_u64(&w->rng) % (uint64_t)w->oracle_width);
        int32_t next = -1, decoy = -1;
        for (int64_t j = 0; j < w->oracle_width; j++) {
            if (j == where) next = add_node(t, cur, right);
            else {
                int d = add_node(t, cur, random_other(w, right));
                if (decoy < 0) decoy = d;
            }
        }
        int64_t at2 = at + 1;
        if (decoy >= 0 && at2 < w->n_oracle) add_node(t, decoy, w->oracle[at2]);
        cur = next;
    }
}

static void break_structure(spec_wrap *w, ms_tree *t) {
    int64_t last = t->n - 1;
    switch (w->structure_kind) {
    case 0: t->parent[last] = (int32_t)last; break; /* not a strict ancestor */
    case 1: t->depth[last] += 1; break;
    case 2: t->mask[last] &= ~1ull; break;          /* root bit missing */
    case 3: t->n = 0; break;
    case 4: t->n = MS_TREE_MAX + 1; break;
    default: t->token[last] = -3; break;
    }
}

static ms_status wrap_draft(void *ctx, uint64_t rid, int64_t round, ms_msg_tree *out) {
    spec_wrap *w = ctx;
    w->n_draft++;
    if (round != w->last_round + 1) w->order_ok = false;
    w->last_round = round;
    const bool at_fault = round == w->fault_round;
    if (w->fault == SPEC_FAULT_DRAFT_STATUS && at_fault) return MS_ERR_PEER;
    if (w->fault == SPEC_FAULT_ORACLE) {
        memset(out, 0, sizeof *out);
        out->request_id = rid;
        out->round = round;
        oracle_tree(w, &out->tree);
    } else {
        MS_TRY(w->inner.draft(w->inner.ctx, rid, round, out));
    }
    ms_tree *t = &out->tree;
    switch (w->fault) {
    case SPEC_FAULT_CORRUPT:
        for (int64_t i = 1; i < t->n; i++)
            if (ms_rng_uniform(&w->rng) < w->corrupt_p) t->token[i] = (int32_t)(ms_rng_u64(&w->rng) % (uint64_t)w->V);
        break;
    case SPEC_FAULT_ROOT_ONLY: t->n = 1; break;
    case SPEC_FAULT_STRUCTURE:
        if (at_fault) break_structure(w, t);
        break;
    case SPEC_FAULT_WRONG_ROUND:
        if (at_fault) out->round = round + 1;
        break;
    case SPEC_FAULT_WRONG_REQUEST:
        if (at_fault) out->request_id = rid + 1;
        break;
    case SPEC_FAULT_WRONG_ROOT:
        if (at_fault) t->token[0] = random_other(w, t->token[0]);
        break;
    case SPEC_FAULT_TOKEN_RANGE:
        if (at_fault && t->n > 1) t->token[t->n - 1] = (int32_t)w->V;
        else if (at_fault) t->token[0] = (int32_t)w->V;
        break;
    default: break;
    }
    w->rounds_seen++;
    if (t->n > w->max_tree_n) w->max_tree_n = t->n;
    return MS_OK;
}

static ms_status wrap_accept(void *ctx, const ms_msg_verify *m) {
    spec_wrap *w = ctx;
    w->n_accept++;
    if (m->round != w->last_round) w->order_ok = false;
    if (w->n_accept <= (int64_t)(sizeof w->paths / sizeof w->paths[0])) w->paths[w->n_accept - 1] = m->n_path;
    w->sum_path += m->n_path;
    w->last_path = m->n_path;
    if (w->fault == SPEC_FAULT_ACCEPT_STATUS && m->round == w->fault_round) return MS_ERR_PEER;
    if (w->fault == SPEC_FAULT_ORACLE) {
        w->oracle_pos += m->n_path;
        if (w->oracle_pos < w->n_oracle && m->bonus != w->oracle[w->oracle_pos]) w->order_ok = false;
        return MS_OK;
    }
    return w->inner.accept(w->inner.ctx, m);
}

static void wrap_end(void *ctx, uint64_t rid) {
    spec_wrap *w = ctx;
    w->n_end++;
    if (w->fault != SPEC_FAULT_ORACLE && w->fault != SPEC_FAULT_BEGIN_STATUS) w->inner.end(w->inner.ctx, rid);
}

ms_draft_port spec_wrap_port(spec_wrap *w, bool wants_features) {
    return (ms_draft_port){.ctx = w,
                           .wants_features = wants_features,
                           .begin = wrap_begin,
                           .draft = wrap_draft,
                           .accept = wrap_accept,
                           .end = wrap_end};
}

/* ---- misc ----------------------------------------------------------------- */

double spec_top2_gap(const float *row, int64_t V, int32_t *best, int32_t *second) {
    int32_t b = 0, s = -1;
    for (int64_t i = 1; i < V; i++)
        if (row[i] > row[b]) b = (int32_t)i;
    for (int64_t i = 0; i < V; i++)
        if (i != b && (s < 0 || row[i] > row[s])) s = (int32_t)i;
    if (best) *best = b;
    if (second) *second = s;
    return s < 0 ? INFINITY : (double)row[b] - (double)row[s];
}

bool spec_ids_equal(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, (size_t)na * sizeof *a));
}

int64_t spec_first_diff(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    int64_t n = na < nb ? na : nb;
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return n;
}
