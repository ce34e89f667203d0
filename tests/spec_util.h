/* spec_util.h — shared helpers of the speculative-core acceptance tests
 * (tests/test_spec_*.c): temporary model folders made with the built tools,
 * Spec-Bench prompts, a collecting token callback, and a wrapping draft port
 * that records what crosses the port and can inject faults.
 */
#ifndef SPEC_UTIL_H
#define SPEC_UTIL_H

#include "test_fs.h"
#include "ms_draft.h"
#include "ms_target.h"

#include <stdio.h>

extern int spec_failures;

#define SPEC_CHECK(cond, ...)                                               \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            spec_failures++;                                                \
        }                                                                   \
    } while (0)

/* True under AddressSanitizer or with SPEC_SMALL=1 in the environment: tests
 * shrink their prompt counts / sample sizes (never the set of kinds). */
bool spec_small(void);


/* Run argv[0] with argv (NULL-terminated); stdout and stderr to /dev/null
 * unless SPEC_VERBOSE is set. Returns the exit status (−1: could not start). */
int spec_spawn(const char *const *argv);

/* microspec-mkmodel --out root/name <args split on spaces>; dir[cap] = root/name. */
ms_status spec_mkmodel(const char *root, const char *name, const char *args, char *dir, size_t cap);
/* microspec-mkeagle --target target --out root/name <args>; dir[cap] = root/name. */
ms_status spec_mkeagle(const char *root, const char *name, const char *target, const char *args, char *dir,
                       size_t cap);
/* stories260K converted with convert-llama2c into root/stories; MS_ERR_NOT_FOUND
 * (no message) when the shared model is absent. */
ms_status spec_convert_stories(const char *root, char *dir, size_t cap);

/* tools/vocab/specvocab_build.py --model model --out out --rank rank (python3; w_vocab
 * Q8_0 when rank % 32 == 0, else F32): a SpecVocab artefact for model. */
ms_status spec_specvocab_build(const char *model, const char *out, int64_t rank);
/* tests/dynaspec_random.py: a DynaSpec artefact with a seeded random router
 * and id-mod-M clusters for the Hugging Face folder `model`. */
ms_status spec_dynaspec_random(const char *model, const char *out, int64_t clusters, int64_t seed);

/* turns[0] of the first n Spec-Bench questions (malloc'd strings). MS_ERR_NOT_FOUND
 * without a message when the shared file is absent. */
ms_status spec_bench_prompts(int64_t n, char ***out, int64_t *n_out);
void spec_free_strings(char **s, int64_t n);

/* A static list of the k ids ranked by counts[V] (ms_vocab_rank_counts, no
 * forced ids) written with ms_vocab_save_list to path. */
ms_status spec_save_ranked_list(const char *path, const int64_t *counts, int64_t V, int64_t k);

/* Token sink for ms_tgt_generate: every id in order, the batch sizes, and an
 * optional cancel after `cancel_after` tokens (0: never). */
typedef struct {
    ms_ids ids;
    int64_t batches;
    int64_t batch_n[4096]; /* sizes of the first 4096 batches */
    int64_t cancel_after;
} spec_sink;
bool spec_sink_cb(void *ctx, const int32_t *ids, int64_t n);
void spec_sink_clear(spec_sink *s);

/* Generate into a cleared sink. */
ms_status spec_generate(ms_tgt *t, ms_draft_port *port, const int32_t *prompt, int64_t n, const ms_gen_params *p,
                        spec_sink *sink, ms_gen_stats *st);

/* ---- a wrapping draft port ------------------------------------------------ */

typedef enum {
    SPEC_FAULT_NONE = 0,
    SPEC_FAULT_CORRUPT,      /* replace each non-root token with a random id with probability `corrupt_p` */
    SPEC_FAULT_STRUCTURE,    /* at round fault_round: a structurally invalid tree (see structure_kind) */
    SPEC_FAULT_WRONG_ROUND,  /* at round fault_round: the tree claims round + 1 */
    SPEC_FAULT_WRONG_REQUEST,/* at round fault_round: another request id */
    SPEC_FAULT_WRONG_ROOT,   /* at round fault_round: root token changed */
    SPEC_FAULT_TOKEN_RANGE,  /* at round fault_round: a node token ≥ V */
    SPEC_FAULT_DRAFT_STATUS, /* at round fault_round: draft() returns an error */
    SPEC_FAULT_ACCEPT_STATUS,/* at round fault_round: accept() returns an error */
    SPEC_FAULT_BEGIN_STATUS, /* begin() returns an error */
    SPEC_FAULT_ROOT_ONLY,    /* every tree is the root alone (valid, nothing to verify) */
    SPEC_FAULT_ORACLE,       /* no inner port: trees built from the known continuation `oracle` */
} spec_fault;

typedef struct {
    ms_draft_port inner; /* unused for SPEC_FAULT_ORACLE */
    spec_fault fault;
    int64_t fault_round;
    int structure_kind; /* 0 parent forward, 1 depth, 2 mask, 3 n = 0, 4 n > MS_TREE_MAX, 5 negative token */
    double corrupt_p;
    int64_t V;
    ms_rng rng;
    /* oracle: the greedy continuation (first token = the root of round 1);
     * trees hide the right child among `oracle_width` siblings, depth oracle_depth */
    const int32_t *oracle;
    int64_t n_oracle, oracle_pos, oracle_width, oracle_depth;

    /* recorded */
    int64_t n_begin, n_draft, n_accept, n_end;
    int64_t sum_path;         /* Σ n_path over accept messages */
    int64_t last_path;        /* n_path of the last accept */
    int64_t paths[512];       /* n_path of the first 512 accepts, in round order */
    int64_t rounds_seen;      /* trees returned */
    int64_t max_tree_n;
    bool order_ok;            /* begin → (draft → accept)* → end, rounds 1, 2, ... */
    int64_t last_round;
    ms_status last_begin_status;
} spec_wrap;

/* Reset the recorded fields and the fault rng (seed). */
void spec_wrap_reset(spec_wrap *w, uint64_t seed);
ms_draft_port spec_wrap_port(spec_wrap *w, bool wants_features);

/* ---- misc ----------------------------------------------------------------- */

/* Logit gap between the best and the second-best id of row[V]. */
double spec_top2_gap(const float *row, int64_t V, int32_t *best, int32_t *second);

/* a[na] == b[nb] (either may be NULL when its count is 0). */
bool spec_ids_equal(const int32_t *a, int64_t na, const int32_t *b, int64_t nb);

/* Index of the first difference between a[na] and b[nb] (min(na, nb) when one is a prefix). */
int64_t spec_first_diff(const int32_t *a, int64_t na, const int32_t *b, int64_t nb);

#endif
