/* ms_target.c — prefill, tree verification, acceptance and the request loop. */
#include "ms_target.h"

#include "ms_isa.h"
#include "ms_policy.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PREFILL_CHUNK 64 /* prompt rows per forward when every row's logits are needed */

struct ms_tgt {
    ms_model *model;
    int64_t V, d;
    float *logits;  /* [MS_TREE_MAX, V] */
    float *probs;   /* [V] */
    int32_t *topk;  /* [MS_TREE_MAX, MS_TREE_MAX] C_ver ids */
    float *topv;    /* [MS_TREE_MAX] scratch values for top-k */
    float *feats;   /* [MS_TREE_MAX, d] hidden states of the path nodes */
    ms_cost cost;   /* verify forward cost by rows (ms_policy.h), kept across requests */
    ms_gate gate;   /* whether the next tree runs the draft model (ms_policy.h), kept across requests */
    bool calibrated;
    char *cost_path; /* ms_tgt_cost_cache's file, or NULL */
};

ms_gen_params ms_gen_params_default(void) {
    return (ms_gen_params){.max_new_tokens = 256,
                           .sampling = {.temperature = 0.0f, .top_p = 1.0f},
                           .seed = 42,
                           .k_pre = 3,
                           .k_ver = 3,
                           .n_stop = 0,
                           .cost_policy = true};
}

ms_status ms_tgt_new(ms_model *model, ms_tgt **out) {
    *out = NULL;
    ms_tgt *t = ms_calloc(1, sizeof *t);
    if (!t) return MS_ERR_NOMEM;
    t->model = model;
    ms_gate_init(&t->gate);
    t->V = ms_model_vocab(model);
    t->d = ms_model_config(model)->hidden_size;
    t->logits = ms_malloc((size_t)(MS_TREE_MAX * t->V) * sizeof(float));
    t->probs = ms_malloc((size_t)t->V * sizeof(float));
    t->topk = ms_malloc((size_t)(MS_TREE_MAX * MS_TREE_MAX) * sizeof(int32_t));
    t->topv = ms_malloc((size_t)MS_TREE_MAX * sizeof(float));
    t->feats = ms_malloc((size_t)(MS_TREE_MAX * t->d) * sizeof(float));
    if (!t->logits || !t->probs || !t->topk || !t->topv || !t->feats) {
        ms_tgt_free(&t);
        return MS_ERR_NOMEM;
    }
    *out = t;
    return MS_OK;
}

/* The table as a log line: "<what>: 1 row X ms, 2 rows Yx, 4 Zx, 8 Wx". */
static void log_cost(const ms_tgt *t, const char *what) {
    const double c1 = ms_cost_at(&t->cost, 1);
    MS_LOG_INFO("%s: 1 row %.2f ms, 2 rows %.2fx, 4 %.2fx, 8 %.2fx", what, c1 * 1e3, ms_cost_at(&t->cost, 2) / c1,
                ms_cost_at(&t->cost, 4) / c1, ms_cost_at(&t->cost, 8) / c1);
}

/* The cost table to ms_tgt_cost_cache's file; after a failure (logged once)
 * the file is given up. */
static void keep_cost(ms_tgt *t) {
    if (t->cost_path && ms_cost_save(&t->cost, t->cost_path) < 0) {
        MS_LOG_WARN("verify cost not kept for the next process (%s)", t->cost_path);
        free(t->cost_path);
        t->cost_path = NULL;
    }
}

void ms_tgt_cost_cache(ms_tgt *t, const char *model_path, int threads, bool q8_matmul, const char *device) {
    const char *off = getenv("MS_VERIFY_COST_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if ((off && !strcmp(off, "0")) || !model_path) return;
    char dir[PATH_MAX];
    int w = xdg && *xdg ? snprintf(dir, sizeof dir, "%s/microspec/verify-cost", xdg)
            : home && *home ? snprintf(dir, sizeof dir, "%s/.cache/microspec/verify-cost", home)
                            : -1;
    if (w < 0 || w >= (int)sizeof dir) return;
    struct stat st;
    if (stat(model_path, &st) != 0) return;
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    char path[PATH_MAX];
    w = snprintf(path, sizeof path, "%s/%s-%lld-%s-t%d-%s-%s.txt", dir, base, (long long)st.st_size,
                 ms_isa_name(ms_isa_active()), threads, q8_matmul ? "q8" : "f32", device ? device : "cpu");
    if (w < 0 || w >= (int)sizeof path) return;
    for (char *p = dir + 1; *p; p++) /* mkdir -p */
        if (*p == '/') {
            *p = 0;
            mkdir(dir, 0755);
            *p = '/';
        }
    mkdir(dir, 0755);
    free(t->cost_path);
    t->cost_path = strdup(path);
    if (t->cost_path && !t->calibrated && ms_cost_load(&t->cost, t->cost_path)) {
        t->calibrated = true;
        char what[PATH_MAX + 64];
        snprintf(what, sizeof what, "verify cost from %s (MS_VERIFY_COST_CACHE=0: measure anew)", t->cost_path);
        log_cost(t, what);
    }
}

void ms_tgt_free(ms_tgt **pt) {
    ms_tgt *t = *pt;
    if (!t) return;
    free(t->cost_path);
    free(t->logits);
    free(t->probs);
    free(t->topk);
    free(t->topv);
    free(t->feats);
    free(t);
    *pt = NULL;
}

ms_model *ms_tgt_model(ms_tgt *t) { return t->model; }

/* ---- verification ------------------------------------------------------- */

/* Draw from the unnormalised, non-negative probs[V] (inverse CDF in id order). */
static int32_t draw(const float *probs, int64_t V, ms_rng *rng, const float *logits_row) {
    double mass = 0.0;
    for (int64_t i = 0; i < V; i++) mass += probs[i];
    if (!(mass > 0.0)) return ms_k_argmax(logits_row, V); /* nothing left: rounding only */
    double u = ms_rng_uniform(rng) * mass, c = 0.0;
    int32_t last = -1;
    for (int64_t i = 0; i < V; i++) {
        if (probs[i] <= 0.0f) continue;
        c += probs[i];
        last = (int32_t)i;
        if (u < c) return (int32_t)i;
    }
    return last;
}

int64_t ms_tgt_verify_tree(const ms_tree *tree, const float *logits, int64_t V, const ms_k_sampling *s, ms_rng *rng,
                           float *probs, int32_t *path, int32_t *bonus) {
    const bool greedy = s->temperature <= 0.0f;
    int64_t n_path = 1;
    int32_t cur = 0;
    path[0] = 0;
    for (;;) {
        const float *row = logits + (int64_t)cur * V;
        int32_t next = -1;
        if (greedy) {
            int32_t g = ms_k_argmax(row, V);
            for (int32_t c = cur + 1; c < tree->n && next < 0; c++)
                if (tree->parent[c] == cur && tree->token[c] == g) next = c;
            if (next < 0) {
                *bonus = g;
                return n_path;
            }
        } else {
            /* Sequential test of the candidate children (draft probability 1
             * each: they are deterministic top-k picks). `mass` is what is
             * left of p after removing rejected candidates, so p(x)/mass is
             * the renormalised residual without touching all V entries. */
            ms_k_sampling_probs(row, V, s, probs);
            double mass = 1.0;
            for (int32_t c = cur + 1; c < tree->n && next < 0; c++) {
                if (tree->parent[c] != cur) continue;
                double px = probs[tree->token[c]];
                if (px <= 0.0) continue;
                if (ms_rng_uniform(rng) * mass < px) {
                    next = c;
                } else {
                    mass -= px;
                    probs[tree->token[c]] = 0.0f;
                }
            }
            if (next < 0) {
                *bonus = draw(probs, V, rng, row);
                return n_path;
            }
        }
        path[n_path++] = next;
        cur = next;
    }
}

/* ---- statistics --------------------------------------------------------- */

int64_t ms_gen_stats_accepted(const ms_gen_stats *s) {
    int64_t a = 0;
    for (int64_t d = 1; d <= s->max_depth; d++) a += s->accepted_ge[d];
    return a;
}

double ms_gen_stats_mean_accepted(const ms_gen_stats *s) {
    /* Σ over rounds of emitted tokens (accepted drafts + bonus) / rounds. */
    if (s->rounds == 0) return 1.0;
    return (double)(s->rounds + ms_gen_stats_accepted(s)) / (double)s->rounds;
}

double ms_gen_stats_accept_rate(const ms_gen_stats *s, int64_t d) {
    if (s->spec_rounds == 0 || d < 1 || d > MS_TREE_MAX) return 0.0;
    return (double)s->accepted_ge[d] / (double)s->spec_rounds;
}

double ms_gen_stats_coverage(const ms_gen_stats *s) {
    return s->emitted > 0 ? (double)s->covered / (double)s->emitted : 1.0;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

void ms_quantiles(const float *v, int64_t n, double *median, double *p99) {
    *median = *p99 = 0.0;
    if (n <= 0) return;
    float *s = malloc((size_t)n * sizeof *s);
    if (!s) return;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_float);
    *median = s[n / 2];
    *p99 = s[(int64_t)((double)(n - 1) * 0.99 + 0.5)];
    free(s);
}

void ms_gen_stats_print(const ms_gen_stats *s, FILE *f) {
    double decode_s = s->total_s - s->prefill_s;
    fprintf(f, "prompt tokens: %lld, new tokens: %lld (%s), rounds: %lld (speculative %lld)%s\n",
            (long long)s->prompt_tokens, (long long)s->new_tokens, s->stop_reason ? s->stop_reason : "?",
            (long long)s->rounds, (long long)s->spec_rounds, s->draft_failed ? ", draft FAILED mid-request" : "");
    fprintf(f, "mean accepted length: %.3f tokens/forward; acceptance by depth:", ms_gen_stats_mean_accepted(s));
    for (int64_t d = 1; d <= s->max_depth && d <= 8; d++) fprintf(f, " %lld:%.3f", (long long)d, ms_gen_stats_accept_rate(s, d));
    fprintf(f, "\n");
    if (s->spec_rounds > 0) {
        fprintf(f, "drafted per round: mean %.2f verified (%.2f left out by the cost policy), max %lld tokens; "
                   "%lld of %lld rounds decoded plainly, %lld without the draft model\n",
                (double)s->drafted / (double)s->spec_rounds, (double)s->pruned / (double)s->spec_rounds,
                (long long)s->drafted_max, (long long)s->plain_rounds, (long long)s->spec_rounds,
                (long long)s->skipped_rounds);
        const int64_t accepted = ms_gen_stats_accepted(s);
        fprintf(f, "accepted draft tokens: %lld (n-gram source %lld, model alone %lld)\n", (long long)accepted,
                (long long)s->accepted_ngram, (long long)(accepted - s->accepted_ngram));
        fprintf(f, "draft vocabulary: mean %.1f, max %lld; coverage %.4f (%lld/%lld)\n",
                (double)s->vocab_sum / (double)s->spec_rounds, (long long)s->vocab_max, ms_gen_stats_coverage(s),
                (long long)s->covered, (long long)s->emitted);
    }
    fprintf(f,
            "time: prefill %.2f ms, draft backbone %.2f ms, draft head %.2f ms, vocab %.2f ms, verify %.2f ms, "
            "accept %.2f ms, total %.2f ms\n",
            s->prefill_s * 1e3, s->draft_backbone_s * 1e3, s->draft_head_s * 1e3, s->vocab_s * 1e3, s->verify_s * 1e3,
            s->accept_s * 1e3, s->total_s * 1e3);
    if (s->n_link > 0) {
        double med, p99;
        ms_quantiles(s->link_us, s->n_link, &med, &p99);
        fprintf(f, "link per round: median %.1f us, p99 %.1f us (%lld rounds)\n", med, p99, (long long)s->n_link);
    }
    fprintf(f, "speed: %.1f tokens/s end to end, %.1f tokens/s after prefill\n",
            s->total_s > 0 ? (double)s->new_tokens / s->total_s : 0.0,
            decode_s > 0 ? (double)(s->new_tokens > 0 ? s->new_tokens - 1 : 0) / decode_s : 0.0);
}

/* ---- the request loop --------------------------------------------------- */

typedef struct {
    const ms_gen_params *p;
    ms_token_cb cb;
    void *cb_ctx;
    ms_gen_stats *stats;
    bool done;
} emitter;

/* Emit tokens in order until a stop id, the token budget, or a cancel. */
static void emit(emitter *e, const int32_t *ids, int64_t n) {
    int64_t k = 0;
    for (; k < n && !e->done; k++) {
        for (int64_t s = 0; s < e->p->n_stop; s++)
            if (ids[k] == e->p->stop_ids[s]) {
                e->stats->stop_reason = "stop token";
                e->stats->stop_id = ids[k];
                e->done = true;
            }
        if (e->done) break;
        if (e->stats->new_tokens + k + 1 >= e->p->max_new_tokens) {
            e->stats->stop_reason = "max tokens";
            e->done = true;
            k++;
            break;
        }
    }
    if (k > 0) {
        e->stats->new_tokens += k;
        if (e->cb && !e->cb(e->cb_ctx, ids, k)) {
            e->stats->stop_reason = "cancelled";
            e->done = true;
        }
    }
}

static void drop_draft(ms_draft_port **draft, ms_gen_stats *st, uint64_t rid, const char *why, ms_status s) {
    MS_LOG_WARN("request %llu: draft failed (%s: %s); finishing alone", (unsigned long long)rid, why,
                ms_status_str(s));
    (*draft)->end((*draft)->ctx, rid);
    *draft = NULL;
    st->draft_failed = true;
}

/* The cost table's first measure (ms_policy.h): forwards of n = 1, 2, 4, 8
 * rows of the root token after the committed rows, each then truncated away
 * (the KV is as before; the logits buffer is scratch). Twice for 1 and 2
 * rows, where the gap the policy weighs is smallest; the minimum. About 10
 * decode steps; larger trees are extrapolated until a verify measures them.
 * A table that fails ms_cost_plausible (another process took the cores
 * meanwhile) is measured again, up to twice, each size keeping its minimum. */
static ms_status calibrate(ms_tgt *t, int32_t root) {
    ms_model *m = t->model;
    const int64_t len0 = ms_model_len(m);
    int32_t tok[MS_TREE_MAX];
    for (int i = 0; i < MS_TREE_MAX; i++) tok[i] = root;
    const uint64_t t0 = ms_now_ns();
    double best[9] = {0};
    for (int pass = 0; pass < 3 && (pass == 0 || !ms_cost_plausible(&t->cost)); pass++)
        for (int64_t n = 1; n <= 8; n *= 2) {
            if (len0 + n > ms_model_max_ctx(m) || n > ms_model_max_batch(m)) break;
            for (int rep = 0; rep < (n <= 2 ? 2 : 1); rep++) {
                const uint64_t a = ms_now_ns();
                MS_TRY(ms_model_forward(m, tok, n, NULL, NULL, MS_LOGITS_ALL, t->logits));
                const double dt = (double)(ms_now_ns() - a) * 1e-9;
                MS_TRY(ms_model_truncate(m, len0));
                if (best[n] == 0.0 || dt < best[n]) best[n] = dt;
            }
            t->cost.c[n] = best[n];
        }
    t->calibrated = true;
    keep_cost(t);
    char what[64];
    snprintf(what, sizeof what, "verify cost measured in %.2f s", (double)(ms_now_ns() - t0) * 1e-9);
    log_cost(t, what);
    return MS_OK;
}

ms_status ms_tgt_warm_up(ms_tgt *t) {
    if (t->calibrated) return MS_OK;
    MS_TRY(ms_model_truncate(t->model, 0));
    return calibrate(t, 0);
}

/* The banned ids' logits to −inf in rows[n] (ms_gen_params.ban_ids). */
static void ban(const ms_gen_params *p, float *rows, int64_t n, int64_t V) {
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < p->n_ban; i++)
            if (p->ban_ids[i] >= 0 && p->ban_ids[i] < V) rows[r * V + p->ban_ids[i]] = -INFINITY;
}

/* Check a tree from the draft before the target trusts it. */
static ms_status check_tree(const ms_msg_tree *m, uint64_t rid, int64_t round, int32_t root, int64_t V) {
    if (m->request_id != rid || m->round != round)
        MS_FAIL(MS_ERR_PEER, "draft tree for request %llu round %lld, expected %llu round %lld",
                (unsigned long long)m->request_id, (long long)m->round, (unsigned long long)rid, (long long)round);
    MS_TRY(ms_tree_validate(&m->tree));
    if (m->tree.token[0] != root)
        MS_FAIL(MS_ERR_PEER, "draft tree root %d, expected %d", m->tree.token[0], root);
    for (int64_t i = 0; i < m->tree.n; i++)
        if (m->tree.token[i] >= V) MS_FAIL(MS_ERR_PEER, "draft tree node %lld: token %d ≥ V %lld", (long long)i, m->tree.token[i], (long long)V);
    return MS_OK;
}

/* Prefill; for a draft that wants them (all_rows) also every row's
 * top-K_pre ids (and hidden states for drafts that want features): the LM
 * head over every prompt row, ~1/6 of a 1.5B prefill, paid only then. */
static ms_status prefill(ms_tgt *t, const int32_t *prompt, int64_t n, const ms_gen_params *p, bool all_rows,
                         bool want_feats, int32_t *topk_pre, float *feats, float *last_logits) {
    ms_model *m = t->model;
    if (!all_rows) return ms_model_prefill(m, prompt, n, last_logits);
    int64_t chunk_max = ms_model_max_batch(m) < PREFILL_CHUNK ? ms_model_max_batch(m) : PREFILL_CHUNK;
    for (int64_t at = 0; at < n; at += chunk_max) {
        int64_t c = n - at < chunk_max ? n - at : chunk_max;
        MS_TRY(ms_model_forward(m, prompt + at, c, NULL, NULL, MS_LOGITS_ALL, t->logits));
        for (int64_t r = 0; r < c; r++)
            ms_k_topk(t->logits + r * t->V, t->V, p->k_pre, topk_pre + (at + r) * p->k_pre, t->topv);
        if (want_feats) memcpy(feats + at * t->d, ms_model_hidden(m), (size_t)(c * t->d) * sizeof(float));
        if (at + c == n) memmove(last_logits, t->logits + (c - 1) * t->V, (size_t)t->V * sizeof(float));
    }
    return MS_OK;
}

/* The request's bounds, before anything runs. */
static ms_status check_request(const ms_tgt *t, uint64_t rid, const int32_t *prompt, int64_t n,
                               const ms_gen_params *p) {
    if (n <= 0) MS_FAIL(MS_ERR_INVALID, "request %llu: empty prompt", (unsigned long long)rid);
    if (p->k_pre < 0 || p->k_pre > MS_TREE_MAX || p->k_ver < 0 || p->k_ver > MS_TREE_MAX)
        MS_FAIL(MS_ERR_INVALID, "k_pre %lld / k_ver %lld outside [0, %d]", (long long)p->k_pre, (long long)p->k_ver,
                MS_TREE_MAX);
    if (n >= ms_model_max_ctx(t->model))
        MS_FAIL(MS_ERR_RANGE, "request %llu: prompt of %lld tokens leaves no room in a %lld-row context",
                (unsigned long long)rid, (long long)n, (long long)ms_model_max_ctx(t->model));
    for (int64_t i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= t->V)
            MS_FAIL(MS_ERR_INVALID, "request %llu: prompt token %d at %lld outside [0, %lld)", (unsigned long long)rid,
                    prompt[i], (long long)i, (long long)t->V);
    return MS_OK;
}

/* Round `round`'s tree from the draft into *tm, checked. True when it is
 * worth a speculative forward (more than the root, room in the context).
 * *port_ns accumulates the time spent in the port; a failed draft is dropped
 * (*draft = NULL) and the round goes on alone. */
static bool take_tree(const ms_tgt *t, ms_draft_port **draft, ms_gen_stats *st, uint64_t rid, int64_t round,
                      int32_t root, uint64_t *port_ns, ms_msg_tree *tm) {
    uint64_t c0 = ms_now_ns();
    ms_status ds = (*draft)->draft((*draft)->ctx, rid, round, tm);
    *port_ns += ms_now_ns() - c0;
    if (ds >= 0) ds = check_tree(tm, rid, round, root, t->V);
    if (ds < 0) {
        drop_draft(draft, st, rid, "draft", ds);
        return false;
    }
    uint64_t work = tm->stats.backbone_ns + tm->stats.head_ns + tm->stats.vocab_ns;
    if (st->n_link < MS_GEN_LINK_SAMPLES)
        st->link_us[st->n_link++] = *port_ns > work ? (float)((double)(*port_ns - work) * 1e-3) : 0.0f;
    const int64_t len0 = ms_model_len(t->model);
    return tm->tree.n > 1 && len0 + tm->tree.n <= ms_model_max_ctx(t->model);
}

/* A speculative round's statistics: n verified nodes of which path[n_path]
 * accepted (the root included), the draft's own figures. */
static void count_spec_round(ms_gen_stats *st, const ms_tree *tree, const int32_t *path, int64_t n_path,
                             const ms_draft_stats *ds) {
    const int64_t n = tree->n;
    st->spec_rounds++;
    for (int64_t d = 1; d < n_path; d++) {
        st->accepted_ge[d]++;
        st->accepted_ngram += (int64_t)(tree->ngram >> path[d] & 1);
    }
    if (n_path - 1 > st->max_depth) st->max_depth = n_path - 1;
    st->drafted += n - 1;
    if (n - 1 > st->drafted_max) st->drafted_max = n - 1;
    st->vocab_sum += ds->vocab_size;
    if (ds->vocab_size > st->vocab_max) st->vocab_max = ds->vocab_size;
    st->covered += ds->covered;
    st->emitted += ds->emitted;
    st->draft_backbone_s += (double)ds->backbone_ns * 1e-9;
    st->draft_head_s += (double)ds->head_ns * 1e-9;
    st->vocab_s += (double)ds->vocab_ns * 1e-9;
}

/* What the target verifies of *tree: with the cost policy the part of a
 * speculative tree that pays (measuring the costs first if no table is
 * known), else all of it; kept_of maps its nodes to the draft's. */
static ms_status plan_verify(ms_tgt *t, const ms_gen_params *p, ms_gen_stats *st, bool spec, int32_t root,
                             ms_tree *kept, int32_t *kept_of, const ms_tree **tree) {
    if (!spec || !p->cost_policy) {
        for (int64_t i = 0; i < (*tree)->n; i++) kept_of[i] = (int32_t)i;
        return MS_OK;
    }
    if (!t->calibrated) MS_TRY(calibrate(t, root));
    ms_policy_prune(*tree, &t->cost, kept, kept_of, NULL);
    st->pruned += (*tree)->n - kept->n;
    if (kept->n == 1) st->plain_rounds++;
    *tree = kept;
    return MS_OK;
}

/* The request to the draft; the time spent in the port. A failed begin
 * drops the draft. */
static uint64_t call_begin(ms_draft_port **draft, ms_gen_stats *st, const ms_msg_begin *b) {
    uint64_t c0 = ms_now_ns();
    ms_status ds = (*draft)->begin((*draft)->ctx, b);
    uint64_t dt = ms_now_ns() - c0;
    if (ds < 0) drop_draft(draft, st, b->request_id, "begin", ds);
    return dt;
}

/* The verify result to the draft: C_ver (the top-K_ver ids of each accepted
 * node, tree row path[k] of t->logits) and, for a draft that reads them, the
 * accepted rows' hidden states, into v's buffers (t->topk, t->feats). Returns
 * the time spent in the port; a failed accept drops the draft. */
static uint64_t send_verify(ms_tgt *t, ms_draft_port **draft, ms_gen_stats *st, const int32_t *path,
                            ms_msg_verify *v) {
    for (int64_t k = 0; k < v->n_path; k++) {
        ms_k_topk(t->logits + (int64_t)path[k] * t->V, t->V, v->k_ver, t->topk + k * v->k_ver, t->topv);
        if (v->features)
            memcpy(t->feats + k * t->d, ms_model_hidden(t->model) + (int64_t)path[k] * t->d,
                   (size_t)t->d * sizeof(float));
    }
    uint64_t c0 = ms_now_ns();
    ms_status ds = (*draft)->accept((*draft)->ctx, v);
    uint64_t dt = ms_now_ns() - c0;
    if (ds < 0) drop_draft(draft, st, v->request_id, "accept", ds);
    return dt;
}

ms_status ms_tgt_generate(ms_tgt *t, ms_draft_port *draft, uint64_t rid, const int32_t *prompt, int64_t n,
                          const ms_gen_params *p, ms_token_cb cb, void *cb_ctx, ms_gen_stats *st) {
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n;
    st->stop_reason = "max tokens";
    st->stop_id = -1;
    MS_TRY(check_request(t, rid, prompt, n, p));
    ms_model *m = t->model;
    const int64_t V = t->V;

    ms_rng rng;
    ms_rng_seed(&rng, p->seed);
    emitter em = {.p = p, .cb = cb, .cb_ctx = cb_ctx, .stats = st};
    const bool want_feats = draft && draft->wants_features;
    const bool gated = draft && p->cost_policy && !draft->model_free; /* ms_gate: whether the model runs */
    if (gated && draft->free_part) ms_gate_start_closed(&t->gate);
    bool skip_model = gated && t->gate.next; /* the tree being drafted goes without the model */
    /* Every prompt row's logits (the LM head over the whole prompt, 5-20 %
     * of a prefill) only for a draft that reads them: eagle's features, a
     * MicroSpec window's top-K_pre. A request that starts with the gate
     * closed (the model did not pay in the last rounds) gets no top-K_pre:
     * if its model runs later, the window starts from the prompt's ids and
     * fills from the rounds' top-K_ver; the output is the same either way.
     * K_pre = 0 asks for none: no LM head over the prompt either. */
    const bool all_rows = draft && (want_feats || (!draft->no_topk_pre && !skip_model && p->k_pre > 0));
    const int64_t k_pre = all_rows ? p->k_pre : 0;
    int32_t *topk_pre = NULL;
    float *feats = NULL, *root_logits = t->logits + (MS_TREE_MAX - 1) * V;
    ms_status s = MS_OK;
    uint64_t port_ns = 0; /* time inside port calls since the last tree (begin, accept) */
    bool begun = false;   /* end() only for a request the draft has begun */
    uint64_t t0 = ms_now_ns();

    ms_model_reset(m);
    if (all_rows) {
        topk_pre = ms_malloc((size_t)(n * (p->k_pre > 0 ? p->k_pre : 1)) * sizeof *topk_pre);
        feats = want_feats ? ms_malloc((size_t)(n * t->d) * sizeof *feats) : NULL;
        if (!topk_pre || (want_feats && !feats)) {
            s = MS_ERR_NOMEM;
            goto out;
        }
    }
    /* The last prompt row's logits land in the tree buffer's last row (a
     * 64-row chunk already has them there; memmove covers that case). */
    MS_TRY_GOTO(s, prefill(t, prompt, n, p, all_rows, want_feats, topk_pre, feats, root_logits), out);
    ban(p, root_logits, 1, V);
    int32_t root = ms_k_sample(root_logits, V, &p->sampling, &rng, t->probs);
    uint64_t t1 = ms_now_ns();
    st->prefill_s = (double)(t1 - t0) * 1e-9;
    if (p->max_new_tokens <= 0) em.done = true;
    else emit(&em, &root, 1);

    bool catchup = true; /* the next model round commits what waited (the prompt first) */
    if (draft && !em.done) {
        ms_msg_begin b = {.request_id = rid, .prompt = prompt, .n_prompt = n, .topk_pre = topk_pre,
                          .k_pre = k_pre, .root = root, .features = feats, .feat_dim = want_feats ? t->d : 0,
                          .skip_model = skip_model};
        port_ns = call_begin(&draft, st, &b);
        begun = true;
    }

    ms_msg_tree tm;
    ms_tree kept;                /* the part of tm.tree the cost policy verifies */
    int32_t kept_of[MS_TREE_MAX]; /* kept's node → tm.tree's */
    int32_t path[MS_TREE_MAX], pos[MS_TREE_MAX];
    int64_t rows[MS_TREE_MAX];
    for (int64_t round = 1; !em.done; round++) {
        const int64_t len0 = ms_model_len(m);
        if (len0 >= ms_model_max_ctx(m)) {
            st->stop_reason = "context full";
            break;
        }
        bool spec = false;
        double draft_s = 0.0; /* port time for this tree (the last accept + this draft) */
        if (draft) {
            spec = take_tree(t, &draft, st, rid, round, root, &port_ns, &tm);
            draft_s = (double)port_ns * 1e-9;
            port_ns = 0;
        }
        /* a tree the draft made without its model: the gate's skip, or the draft's own rule (its n-gram part
         * was confident: ms_draft.c) under any policy; counted by the tree, since an overlap draft's confirmed
         * bet brings the model's tree even where the gate said skip */
        if (draft && !draft->model_free && tm.stats.backbone_ns == 0) st->skipped_rounds++;
        if (!spec) ms_tree_root(&tm.tree, root); /* a one-node tree: plain autoregressive step */
        const ms_tree *tree = &tm.tree;
        MS_TRY_GOTO(s, plan_verify(t, p, st, spec, root, &kept, kept_of, &tree), out);
        for (int64_t i = 0; i < tree->n; i++) pos[i] = (int32_t)(len0 + tree->depth[i]);

        uint64_t a = ms_now_ns();
        MS_TRY_GOTO(s, ms_model_forward(m, tree->token, tree->n, pos, tree->n > 1 ? tree->mask : NULL, MS_LOGITS_ALL,
                                        t->logits), out);
        uint64_t b = ms_now_ns();
        ms_cost_observe(&t->cost, tree->n, (double)(b - a) * 1e-9);
        ban(p, t->logits, tree->n, V);
        int32_t bonus;
        int64_t n_path = ms_tgt_verify_tree(tree, t->logits, V, &p->sampling, &rng, t->probs, path, &bonus);
        for (int64_t k = 0; k < n_path; k++) rows[k] = path[k];
        MS_TRY_GOTO(s, ms_model_compact(m, len0, rows, n_path), out);

        st->rounds++;
        if (gated && draft) {
            ms_gate_observe(&t->gate, skip_model, catchup && !skip_model, n_path, draft_s, (double)(b - a) * 1e-9);
            catchup = skip_model; /* after a round without the model, the next with it catches up */
            skip_model = ms_gate_next(&t->gate, ms_cost_ready(&t->cost) ? ms_cost_at(&t->cost, 1) : 0.0);
        }
        if (spec) count_spec_round(st, tree, path, n_path, &tm.stats);
        MS_LOG_DEBUG("request %llu round %lld: drafted %lld (model %s), verified %lld rows in %.2f ms, accepted %lld, "
                     "port %.2f ms, next round %s the model",
                     (unsigned long long)rid, (long long)round, (long long)(spec ? tm.tree.n - 1 : 0),
                     spec && tm.stats.backbone_ns ? "ran" : "off", (long long)tree->n, (double)(b - a) * 1e-6,
                     (long long)(n_path - 1), draft_s * 1e3, skip_model ? "without" : "with");

        int32_t out_ids[MS_TREE_MAX + 1];
        for (int64_t k = 1; k < n_path; k++) out_ids[k - 1] = tree->token[path[k]];
        out_ids[n_path - 1] = bonus;
        emit(&em, out_ids, n_path);

        if (draft && !em.done) {
            ms_msg_verify v = {.request_id = rid, .round = round, .n_path = n_path, .bonus = bonus,
                               .ver_topk = t->topk, .k_ver = p->k_ver, .skip_model = skip_model,
                               .features = want_feats ? t->feats : NULL, .feat_dim = want_feats ? t->d : 0};
            for (int64_t k = 0; k < n_path; k++) v.path[k] = kept_of[path[k]]; /* in the draft's tree */
            port_ns = send_verify(t, &draft, st, path, &v);
        }
        uint64_t c = ms_now_ns();
        st->verify_s += (double)(b - a) * 1e-9;
        st->accept_s += (double)(c - b) * 1e-9;
        root = bonus;
    }
out:
    if (draft && begun) draft->end(draft->ctx, rid);
    /* the table as the request's forwards moved it, for the next process
     * (a calibration taken on a busy machine does not stay) */
    if (s >= 0 && st->spec_rounds > 0 && t->calibrated) keep_cost(t);
    st->total_s = (double)(ms_now_ns() - t0) * 1e-9;
    free(topk_pre);
    free(feats);
    return s;
}
