/* test_cuda_draft.c — the draft's LM head and MicroSpec window on the device
 * (draft-node/ms_draft.c, ms_dft_head_on_device) against the same draft with
 * its head on the host (ms_dft_opts.host_head: downloaded hidden rows, host
 * f32 head, CPU window — the path the CPU suite covers).
 *
 * Two drafts over the same random checkpoint on cuda:0 — A with the device
 * head (the default), B forced to the host head — are driven in lockstep by a
 * seeded script of begin / draft / accept calls (random prompts, K_pre,
 * K_ver, accepted paths and bonus tokens; some rounds pre-drafted and
 * confirmed or missed through ms_dft_predraft / ms_dft_accept_overlap) for
 * every vocabulary mode × gathered / indexed head × (dynamic) the three
 * window streams, a window smaller than top-K (padded top-k) and an initially
 * empty window (extension stream, K_pre = 0), in BF16 and F16 with a hidden
 * width on the 16-byte and one on the 2-byte load path. Checked:
 *   (a) every head evaluation (the root's level-1 top-K, each tree level, the
 *       pre-draft bonus) of A equals B's: the k log-probs per row agree
 *       within TOL at every rank, and the ids agree wherever the two values
 *       at that rank are not a near-tie (a swap of two candidates whose
 *       log-probs lie within TOL); padded entries (fewer active rows than k)
 *       are the same id at −inf. The trees then agree; once a near-tie
 *       changed a tree the request's later rounds are not compared (the
 *       windows legitimately differ) and such requests must stay rare.
 *   (a') after every begin and accept the device window downloaded from A
 *       (ms_k_cuda_vocab_download_state) equals A's CPU window: |I|, slot →
 *       id and id → slot for every id;
 *   (b)  the window module made no host synchronisation inside A's calls
 *       (ms_dft_window_syncs), and A really ran its head on the device.
 *
 * Without a CUDA device: "SKIPPED: no CUDA device", exit 77.
 */
#include "spec_util.h"

#include "ms_k_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 2e-3     /* log-prob agreement of the two heads (f32 sums in another order) */
#define MAX_EVALS 64 /* head evaluations recorded per round */
#define ROUNDS 8
#define REQUESTS 3

typedef struct {
    int64_t n, k;
    int32_t tokens[MS_TREE_MAX_K];
    int32_t ids[MS_TREE_MAX_K * MS_TREE_MAX_K];
    float logp[MS_TREE_MAX_K * MS_TREE_MAX_K];
} eval_rec;

typedef struct {
    eval_rec ev[MAX_EVALS];
    int64_t n, dropped;
} eval_log;

static void record(void *ctx, const int32_t *tokens, int64_t n, int64_t k, const int32_t *ids, const float *logp) {
    eval_log *l = ctx;
    if (l->n == MAX_EVALS || n > MS_TREE_MAX_K || k > MS_TREE_MAX_K) {
        l->dropped++;
        return;
    }
    eval_rec *e = &l->ev[l->n++];
    e->n = n;
    e->k = k;
    memcpy(e->tokens, tokens, (size_t)n * sizeof *tokens);
    memcpy(e->ids, ids, (size_t)(n * k) * sizeof *ids);
    memcpy(e->logp, logp, (size_t)(n * k) * sizeof *logp);
}

static int64_t g_evals, g_tie_swaps, g_diverged, g_requests, g_rounds, g_window_checks, g_hits;

/* Compare A's head evaluations with B's for one round. Returns false when
 * the inputs stop matching (then the rest is not comparable); *tie is set
 * when some ids differ only by a near-tie. */
static bool compare_evals(const char *name, const eval_log *a, const eval_log *b, bool *tie) {
    SPEC_CHECK(a->dropped == 0 && b->dropped == 0, "%s: evaluation log overflow", name);
    int64_t n = a->n < b->n ? a->n : b->n;
    for (int64_t i = 0; i < n; i++) {
        const eval_rec *x = &a->ev[i], *y = &b->ev[i];
        if (x->n != y->n || x->k != y->k || memcmp(x->tokens, y->tokens, (size_t)x->n * sizeof(int32_t)) != 0) {
            SPEC_CHECK(*tie, "%s: evaluation %lld has other inputs without an earlier near-tie", name, (long long)i);
            return false;
        }
        g_evals++;
        for (int64_t r = 0; r < x->n; r++) {
            bool row_tie = false; /* padded entries repeat the last real id, a near-tie included */
            for (int64_t j = 0; j < x->k; j++) {
                const int64_t at = r * x->k + j;
                const float va = x->logp[at], vb = y->logp[at];
                const bool both_inf = isinf(va) && isinf(vb) && va < 0 && vb < 0;
                const bool close = both_inf || fabs((double)va - (double)vb) <= TOL;
                SPEC_CHECK(close, "%s: eval %lld row %lld rank %lld: log-prob %.6f (device) vs %.6f (host)", name,
                           (long long)i, (long long)r, (long long)j, va, vb);
                if (x->ids[at] == y->ids[at]) continue;
                /* another id at this rank: a near-tie needs a finite value and
                 * a neighbour rank within TOL on one side */
                bool near = both_inf ? row_tie : close;
                if (near) {
                    bool nb = false;
                    for (int64_t o = -1; o <= 1; o += 2) {
                        int64_t jj = j + o;
                        if (jj < 0 || jj >= x->k) continue;
                        nb |= fabs((double)x->logp[at] - (double)x->logp[r * x->k + jj]) <= 2 * TOL ||
                              fabs((double)y->logp[at] - (double)y->logp[r * y->k + jj]) <= 2 * TOL;
                    }
                    /* the last rank may swap with the (k+1)-th, which is not shown */
                    near = both_inf || nb || j == x->k - 1;
                }
                SPEC_CHECK(near, "%s: eval %lld row %lld rank %lld: id %d (device) vs %d (host), log-probs %.6f / %.6f",
                           name, (long long)i, (long long)r, (long long)j, x->ids[at], y->ids[at], va, vb);
                if (near) {
                    *tie = row_tie = true;
                    g_tie_swaps++;
                }
            }
        }
    }
    if (a->n != b->n) {
        SPEC_CHECK(*tie, "%s: %lld head evaluations on the device, %lld on the host", name, (long long)a->n,
                   (long long)b->n);
        return false;
    }
    return true;
}

/* (a') the device window of A equals A's CPU window. */
static void check_window(const char *name, ms_dft *d, int64_t V, int64_t w_max, ms_k_cuda_vocab_state *h) {
    struct ms_k_cuda_vocab *win = ms_dft_cuda_window(d);
    SPEC_CHECK(win != NULL, "%s: no device window", name);
    if (!win) return;
    ms_status s = ms_k_cuda_vocab_download_state(win, h);
    SPEC_CHECK(s == MS_OK, "%s: download_state: %s", name, ms_status_str(s));
    const ms_vocab *cv = ms_dft_vocabulary(d);
    const int64_t n = ms_vocab_size(cv);
    SPEC_CHECK(h->n_active == n, "%s: device |I| = %d, CPU %lld", name, h->n_active, (long long)n);
    SPEC_CHECK(h->ring_n <= w_max && h->flags == 0, "%s: ring %d of W_max %lld, flags %u", name, h->ring_n,
               (long long)w_max, h->flags);
    int64_t bad_slot = 0, bad_id = 0;
    for (int64_t s2 = 0; s2 < n && s2 < w_max; s2++) bad_id += h->id_of[s2] != ms_vocab_id_at(cv, s2);
    for (int64_t id = 0; id < V; id++) bad_slot += h->slot_of[id] != ms_vocab_slot_of(cv, (int32_t)id);
    SPEC_CHECK(bad_id == 0 && bad_slot == 0, "%s: %lld slots hold another id, %lld ids sit in another slot", name,
               (long long)bad_id, (long long)bad_slot);
    g_window_checks++;
}

typedef struct {
    const char *label;
    const char *args;
    int64_t V;
    ms_dtype act;
} model_case;

typedef struct {
    ms_vocab_mode vocab;
    ms_dft_head head;
    ms_vocab_stream stream;
    int64_t w_max;
    int64_t k_pre_max; /* K_pre drawn in [0, k_pre_max] */
    ms_tree_params tree;
} draft_case;

/* A verdict for tree t: a walk from the root taking a random child or
 * stopping, a random bonus, random C_ver ids. */
static void script_verdict(ms_rng *rng, const ms_tree *t, int64_t V, ms_msg_verify *m, int32_t *ver, int64_t *k_ver) {
    memset(m, 0, sizeof *m);
    m->path[0] = 0;
    m->n_path = 1;
    for (;;) {
        int32_t kids[MS_TREE_MAX];
        int64_t nk = 0, cur = m->path[m->n_path - 1];
        for (int32_t i = 1; i < t->n; i++)
            if (t->parent[i] == cur) kids[nk++] = i;
        int64_t c = (int64_t)(ms_rng_u64(rng) % (uint64_t)(nk + 1));
        if (c == nk) break;
        m->path[m->n_path++] = kids[c];
    }
    m->bonus = (int32_t)(ms_rng_u64(rng) % (uint64_t)V);
    *k_ver = (int64_t)(ms_rng_u64(rng) % 5);
    for (int64_t i = 0; i < m->n_path * *k_ver; i++) ver[i] = (int32_t)(ms_rng_u64(rng) % (uint64_t)V);
    m->ver_topk = ver;
    m->k_ver = *k_ver;
}

static bool trees_equal(const ms_tree *a, const ms_tree *b) {
    if (a->n != b->n) return false;
    for (int32_t i = 0; i < a->n; i++)
        if (a->token[i] != b->token[i] || a->parent[i] != b->parent[i]) return false;
    return true;
}

static void run_case(const model_case *mc, const char *dir, const char *list, const draft_case *dc, uint64_t seed,
                     ms_k_cuda_vocab_state *h) {
    char name[192];
    snprintf(name, sizeof name, "%s/%s/%s/%s/W%lld/k%lld", mc->label, ms_vocab_mode_name(dc->vocab),
             ms_dft_head_name(dc->head), ms_vocab_stream_name(dc->stream), (long long)dc->w_max,
             (long long)dc->tree.top_k);
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LM;
    o.model_dir = dir;
    o.vocab = dc->vocab;
    o.vocab_list = list;
    o.w_max = dc->w_max;
    o.tree = dc->tree;
    o.device = "cuda:0";
    o.act = mc->act;
    o.stream = dc->stream;
    o.lm_head = dc->head;
    ms_dft *a = NULL, *b = NULL;
    ms_status s = ms_dft_new(&o, &a);
    o.host_head = true;
    if (s >= 0) s = ms_dft_new(&o, &b);
    SPEC_CHECK(s >= 0, "%s: ms_dft_new: %s", name, ms_status_str(s));
    if (s < 0) goto done;
    SPEC_CHECK(ms_dft_head_on_device(a) && !ms_dft_head_on_device(b), "%s: head placement", name);
    SPEC_CHECK((ms_dft_cuda_window(a) != NULL) == (dc->vocab == MS_VOCAB_DYNAMIC) && !ms_dft_cuda_window(b),
               "%s: device window present iff dynamic", name);
    eval_log *la = ms_calloc(1, sizeof *la), *lb = ms_calloc(1, sizeof *lb);
    if (!la || !lb) {
        free(la);
        free(lb);
        SPEC_CHECK(0, "%s: out of memory", name);
        goto done;
    }
    ms_dft_set_level_hook(a, record, la);
    ms_dft_set_level_hook(b, record, lb);
    ms_draft_port pa = ms_dft_port(a), pb = ms_dft_port(b);
    ms_rng rng;
    ms_rng_seed(&rng, seed);
    const bool dyn = dc->vocab == MS_VOCAB_DYNAMIC;
    for (int req = 0; req < REQUESTS; req++) {
        int32_t prompt[40], topk_pre[40 * 4], ver[MS_TREE_MAX * 4];
        const int64_t n_prompt = 1 + (int64_t)(ms_rng_u64(&rng) % 40);
        const int64_t k_pre = dc->k_pre_max ? (int64_t)(ms_rng_u64(&rng) % (uint64_t)(dc->k_pre_max + 1)) : 0;
        for (int64_t i = 0; i < n_prompt; i++) prompt[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)mc->V);
        for (int64_t i = 0; i < n_prompt * k_pre; i++) topk_pre[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)mc->V);
        ms_msg_begin bm = {.request_id = 100 + (uint64_t)req,
                           .prompt = prompt,
                           .n_prompt = n_prompt,
                           .topk_pre = k_pre ? topk_pre : NULL,
                           .k_pre = k_pre,
                           .root = (int32_t)(ms_rng_u64(&rng) % (uint64_t)mc->V)};
        s = pa.begin(pa.ctx, &bm);
        ms_status s2 = pb.begin(pb.ctx, &bm);
        SPEC_CHECK(s >= 0 && s2 >= 0, "%s request %d: begin %s / %s", name, req, ms_status_str(s), ms_status_str(s2));
        if (s < 0 || s2 < 0) break;
        g_requests++;
        if (dyn) check_window(name, a, mc->V, dc->w_max, h);
        bool same = true, tie = false;
        ms_msg_tree ta, tb;
        bool have_tree = false; /* ta / tb hold this round's trees (from a confirmed pre-draft) */
        for (int64_t round = 1; round <= ROUNDS; round++) {
            if (!have_tree) {
                la->n = lb->n = la->dropped = lb->dropped = 0;
                s = pa.draft(pa.ctx, bm.request_id, round, &ta);
                s2 = pb.draft(pb.ctx, bm.request_id, round, &tb);
                SPEC_CHECK(s >= 0 && s2 >= 0, "%s request %d round %lld: draft %s / %s", name, req, (long long)round,
                           ms_status_str(s), ms_status_str(s2));
                if (s < 0 || s2 < 0) break;
            }
            have_tree = false;
            g_rounds++;
            if (same) {
                same = compare_evals(name, la, lb, &tie);
                if (same && !trees_equal(&ta.tree, &tb.tree)) {
                    SPEC_CHECK(tie, "%s request %d round %lld: trees differ without a near-tie", name, req,
                               (long long)round);
                    same = false;
                }
                if (same)
                    SPEC_CHECK(ta.stats.vocab_size == tb.stats.vocab_size, "%s: vocabulary sizes %lld / %lld", name,
                               (long long)ta.stats.vocab_size, (long long)tb.stats.vocab_size);
                if (!same) g_diverged++;
            }
            /* Every third round: pre-draft round + 1 on both, then a verdict
             * that confirms A's assumption (deepest path, A's bonus) or not. */
            const bool overlap = round % 3 == 0 && round < ROUNDS;
            bool want_hit = false;
            int32_t pre_bonus = -1;
            if (overlap) {
                la->n = lb->n = 0;
                s = ms_dft_predraft(a);
                s2 = ms_dft_predraft(b);
                SPEC_CHECK(s >= 0 && s2 >= 0, "%s: predraft %s / %s", name, ms_status_str(s), ms_status_str(s2));
                if (s < 0 || s2 < 0) break;
                /* the bonus head evaluation is the first one recorded (n = 1, k = 1) */
                if (la->n > 0 && la->ev[0].n == 1 && la->ev[0].k == 1) pre_bonus = la->ev[0].ids[0];
                want_hit = pre_bonus >= 0 && ms_rng_u64(&rng) % 2 == 0;
                if (same) same = compare_evals(name, la, lb, &tie); /* the pre-draft's bonus and tree */
                if (!same) g_diverged++;
                la->n = lb->n = 0; /* on a hit, next round's tree is the pre-draft's, compared already */
            }
            ms_rng ra = rng, rb = rng; /* the same script for both while the trees agree */
            ms_msg_verify va, vb;
            int32_t ver_b[MS_TREE_MAX * 4];
            int64_t kva, kvb;
            script_verdict(&ra, &ta.tree, mc->V, &va, ver, &kva);
            script_verdict(&rb, &tb.tree, mc->V, &vb, ver_b, &kvb);
            rng = ra;
            if (want_hit && same) {
                /* the pre-draft's assumed path: the deepest node of highest score */
                const ms_tree *t = &ta.tree;
                int32_t leaf = 0;
                for (int32_t i = 1; i < t->n; i++)
                    if (t->depth[i] > t->depth[leaf] || (t->depth[i] == t->depth[leaf] && t->score[i] > t->score[leaf]))
                        leaf = i;
                va.n_path = t->depth[leaf] + 1;
                for (int32_t v = leaf, k = (int32_t)va.n_path - 1; k >= 0; v = t->parent[v], k--) va.path[k] = v;
                va.bonus = pre_bonus;
                va.k_ver = 0;
                va.ver_topk = NULL;
                vb = va;
            }
            va.request_id = vb.request_id = bm.request_id;
            va.round = vb.round = round;
            if (overlap) {
                bool hit_a = false, hit_b = false;
                s = ms_dft_accept_overlap(a, &va, &hit_a, &ta);
                s2 = ms_dft_accept_overlap(b, &vb, &hit_b, &tb);
                SPEC_CHECK(s >= 0 && s2 >= 0, "%s: accept_overlap %s / %s", name, ms_status_str(s), ms_status_str(s2));
                if (s < 0 || s2 < 0) break;
                if (same && want_hit) {
                    SPEC_CHECK(hit_a, "%s: the assumed verdict was not a hit", name);
                    SPEC_CHECK(hit_b || tie, "%s: the host draft missed the verdict it assumed too", name);
                }
                g_hits += hit_a;
                if (hit_a != hit_b) same = false;
                have_tree = hit_a && hit_b;
                if (hit_a != hit_b) break; /* the two drafts are no longer in the same round */
            } else {
                s = pa.accept(pa.ctx, &va);
                s2 = pb.accept(pb.ctx, &vb);
                SPEC_CHECK(s >= 0 && s2 >= 0, "%s: accept %s / %s", name, ms_status_str(s), ms_status_str(s2));
                if (s < 0 || s2 < 0) break;
            }
            if (dyn) check_window(name, a, mc->V, dc->w_max, h);
        }
        pa.end(pa.ctx, bm.request_id);
        pb.end(pb.ctx, bm.request_id);
    }
    int64_t calls, syncs;
    ms_dft_window_syncs(a, &calls, &syncs);
    SPEC_CHECK(calls > 0 && syncs == 0, "%s: %lld window host syncs in %lld draft calls", name, (long long)syncs,
               (long long)calls);
    free(la);
    free(lb);
done:
    ms_dft_free(&a);
    ms_dft_free(&b);
}

int main(void) {
    ms_log_set_level(MS_LOG_WARN);
    if (ms_k_cuda_device_count() == 0) {
        printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    char tmp[256];
    if (!ms_test_tmpdir("ms-cuda-draft", tmp, sizeof tmp)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = ms_now_s();
    static const model_case MC[] = {
        /* d = 64: the indexed kernel's 16-byte loads */
        {"llama-bf16", "--arch llama --vocab 400 --hidden 64 --layers 2 --heads 4 --kv-heads 2 --seed 21", 400,
         MS_DTYPE_BF16},
        /* d = 36: its 2-byte path; tied head, F16 */
        {"qwen2-f16", "--arch qwen2 --vocab 333 --hidden 36 --layers 1 --heads 2 --kv-heads 1 --tie 1 --seed 22", 333,
         MS_DTYPE_F16},
    };
    const ms_tree_params tree = {.top_k = 5, .depth = 4, .total = 24, .chain = false};
    const ms_tree_params wide = {.top_k = 8, .depth = 3, .total = 20, .chain = false};
    const ms_tree_params chain = {.top_k = 1, .depth = 5, .total = 2, .chain = true};
    ms_k_cuda_vocab_state h = {0};
    for (size_t c = 0; c < sizeof MC / sizeof MC[0]; c++) {
        const model_case *mc = &MC[c];
        char dir[512], list[600];
        ms_status s = spec_mkmodel(tmp, mc->label, mc->args, dir, sizeof dir);
        SPEC_CHECK(s >= 0, "%s: making the model", mc->label);
        if (s < 0) continue;
        /* a static list of V/3 ids ranked by seeded random counts */
        int64_t *counts = ms_calloc((size_t)mc->V, sizeof *counts);
        ms_rng rng;
        ms_rng_seed(&rng, 77 + c);
        for (int64_t i = 0; counts && i < mc->V; i++) counts[i] = (int64_t)(ms_rng_u64(&rng) % 1000);
        snprintf(list, sizeof list, "%s/%s.list", tmp, mc->label);
        s = counts ? spec_save_ranked_list(list, counts, mc->V, mc->V / 3) : MS_ERR_NOMEM;
        free(counts);
        SPEC_CHECK(s >= 0, "%s: static list", mc->label);
        if (s < 0) continue;
        h.counts = ms_malloc((size_t)mc->V * sizeof(int32_t));
        h.slot_of = ms_malloc((size_t)mc->V * sizeof(int32_t));
        h.ring = ms_malloc(64 * sizeof(int32_t));
        h.id_of = ms_malloc(64 * sizeof(int32_t));
        if (!h.counts || !h.slot_of || !h.ring || !h.id_of) return 1;
        draft_case cases[32];
        int n = 0;
        for (int hd = MS_DFT_HEAD_GATHERED; hd <= MS_DFT_HEAD_INDEXED; hd++) {
            cases[n++] = (draft_case){MS_VOCAB_FULL, (ms_dft_head)hd, MS_VOCAB_STREAM_BOTH, 48, 3, tree};
            cases[n++] = (draft_case){MS_VOCAB_STATIC, (ms_dft_head)hd, MS_VOCAB_STREAM_BOTH, 48, 3, tree};
            for (int st = MS_VOCAB_STREAM_BOTH; st <= MS_VOCAB_STREAM_EXTENSION; st++)
                cases[n++] = (draft_case){MS_VOCAB_DYNAMIC, (ms_dft_head)hd, (ms_vocab_stream)st, 48, 3, tree};
            /* a window smaller than top-K: padded top-k rows */
            cases[n++] = (draft_case){MS_VOCAB_DYNAMIC, (ms_dft_head)hd, MS_VOCAB_STREAM_BOTH, 6, 2, wide};
            /* extension with K_pre = 0: round 1 drafts from an empty window */
            cases[n++] = (draft_case){MS_VOCAB_DYNAMIC, (ms_dft_head)hd, MS_VOCAB_STREAM_EXTENSION, 64, 0, tree};
            cases[n++] = (draft_case){MS_VOCAB_DYNAMIC, (ms_dft_head)hd, MS_VOCAB_STREAM_CONTEXT, 20, 1, chain};
        }
        for (int i = 0; i < n; i++) run_case(mc, dir, list, &cases[i], 1000 + 31 * (uint64_t)i + 7 * c, &h);
        free(h.counts);
        free(h.slot_of);
        free(h.ring);
        free(h.id_of);
        memset(&h, 0, sizeof h);
    }
    ms_test_rmtree(tmp);
    fprintf(stderr,
            "%lld requests, %lld rounds: %lld head evaluations compared, %lld near-tie id swaps, %lld requests "
            "diverged by a near-tie, %lld window checks, %lld pre-draft hits; %.1f s\n",
            (long long)g_requests, (long long)g_rounds, (long long)g_evals, (long long)g_tie_swaps,
            (long long)g_diverged, (long long)g_window_checks, (long long)g_hits, ms_now_s() - t0);
    SPEC_CHECK(g_evals > 0 && g_window_checks > 0 && g_hits > 0, "nothing compared");
    SPEC_CHECK(g_diverged * 8 <= g_requests, "%lld of %lld requests diverged (≤ 1 in 8 allowed)",
               (long long)g_diverged, (long long)g_requests);
    if (spec_failures) {
        fprintf(stderr, "test_cuda_draft: %d check(s) FAILED\n", spec_failures);
        return 1;
    }
    fprintf(stderr, "test_cuda_draft: OK\n");
    return 0;
}
