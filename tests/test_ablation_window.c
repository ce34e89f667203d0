/* test_ablation_window.c — the window-stream ablation and the indexed LM head
 * (draft-node/ms_vocab.*, ms_draft.*).
 *
 * 1. Vocabulary level: for each stream (both / context / extension) a fixed,
 *    seeded script of rounds (prompt, top-K_pre, then per round a tree's ids,
 *    an accepted path with its bonus and C_ver rows) is fed through
 *    ms_vocab_begin_stream / ms_vocab_stream_round. After every step the
 *    window must equal a naive recomputation written here from the stream's
 *    definition: build S as a plain array, take the set of its last W_max
 *    entries. Both also must equal what ms_vocab_init_stream /
 *    ms_vocab_append_round give (the paper's stream is unchanged).
 * 2. Draft level: a random model as a layerskip draft, driven through its
 *    port with scripted verdicts (random valid paths, bonuses, C_ver rows);
 *    after each accept the draft's window equals the naive recomputation from
 *    the messages and trees that crossed the port — for every stream, with the
 *    gathered and the indexed head.
 * 3. Indexed logits: ms_vocab_logits_indexed on a vocabulary made without W
 *    equals the GEMM over the packed rows of one made with W (same stream),
 *    within 1e-5 relative to Σ|h·w|, and both equal a double-precision naive
 *    dot product — for full, static and dynamic vocabularies, odd sizes.
 * 4. Option checks: a non-default stream outside dynamic mode is refused.
 */
#include "spec_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ms_check.h"

/* ---- naive stream ---------------------------------------------------------- */

typedef struct {
    ms_ids s; /* the whole stream S */
} naive;

static void naive_push(naive *n, int32_t id) { MS_ASSERT(ms_ids_push(&n->s, id) >= 0); }

/* Append the distinct ids of ids[k] in first-occurrence order. */
static void naive_union(naive *n, const int32_t *ids, int64_t k) {
    for (int64_t i = 0; i < k; i++) {
        bool seen = false;
        for (int64_t j = 0; j < i && !seen; j++) seen = ids[j] == ids[i];
        if (!seen) naive_push(n, ids[i]);
    }
}

static void naive_begin(naive *n, ms_vocab_stream st, const int32_t *prompt, int64_t np, const int32_t *pre,
                        int64_t k_pre) {
    n->s.n = 0;
    if (st != MS_VOCAB_STREAM_EXTENSION)
        for (int64_t i = 0; i < np; i++) naive_push(n, prompt[i]);
    if (st != MS_VOCAB_STREAM_CONTEXT) naive_union(n, pre, np * k_pre);
}

static void naive_round(naive *n, ms_vocab_stream st, const int32_t *tree, int64_t nt, const int32_t *emit,
                        int64_t ne, const int32_t *ver, int64_t n_ver) {
    if (st == MS_VOCAB_STREAM_CONTEXT) {
        for (int64_t i = 0; i < ne; i++) naive_push(n, emit[i]);
        return;
    }
    naive_union(n, tree, nt);
    naive_union(n, ver, n_ver);
}

/* The window of vocabulary v equals the set of the last w_max entries of S,
 * and its maps are consistent. */
static bool window_matches(const ms_vocab *v, const naive *n, int64_t w_max, int64_t V, const char *what) {
    uint8_t *want = ms_calloc((size_t)V, 1);
    MS_ASSERT(want);
    int64_t from = n->s.n > w_max ? n->s.n - w_max : 0, n_want = 0;
    for (int64_t i = from; i < n->s.n; i++)
        if (!want[n->s.v[i]]) {
            want[n->s.v[i]] = 1;
            n_want++;
        }
    bool ok = ms_vocab_size(v) == n_want;
    CHECK(ok, "%s: |I| = %lld, naive %lld", what, (long long)ms_vocab_size(v), (long long)n_want);
    for (int64_t id = 0; ok && id < V; id++) {
        bool in = ms_vocab_contains(v, (int32_t)id);
        if (in != (want[id] != 0)) {
            CHECK(false, "%s: id %lld %s the window but %s the naive one", what, (long long)id, in ? "in" : "not in",
                  want[id] ? "in" : "not in");
            ok = false;
        } else if (in && ms_vocab_id_at(v, ms_vocab_slot_of(v, (int32_t)id)) != id) {
            CHECK(false, "%s: slot map of id %lld inconsistent", what, (long long)id);
            ok = false;
        }
    }
    free(want);
    return ok;
}

/* ---- 1. vocabulary level --------------------------------------------------- */

static void test_vocab_streams(void) {
    const int64_t V = 97, W_MAX = 23, N_PROMPT = 13, K_PRE = 3, ROUNDS = 40;
    for (int sti = MS_VOCAB_STREAM_BOTH; sti <= MS_VOCAB_STREAM_EXTENSION; sti++) {
        ms_vocab_stream st = (ms_vocab_stream)sti;
        for (int k_pre = 0; k_pre <= K_PRE; k_pre += K_PRE) {
            ms_vocab *v = NULL, *ref = NULL;
            CHECK(ms_vocab_new_dynamic(NULL, V, 4, W_MAX, &v) >= 0, "new");
            CHECK(ms_vocab_new_dynamic(NULL, V, 4, W_MAX, &ref) >= 0, "new");
            if (!v || !ref) return;
            naive n = {0};
            ms_rng rng;
            ms_rng_seed(&rng, 77 + (uint64_t)sti);
            int32_t prompt[64], pre[64 * 3], tree[40], emit[8], ver[8 * 3];
            /* small id range for the prompt so that repeats occur */
            for (int64_t i = 0; i < N_PROMPT; i++) prompt[i] = (int32_t)(ms_rng_u64(&rng) % 20);
            for (int64_t i = 0; i < N_PROMPT * k_pre; i++) pre[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
            char what[96];
            snprintf(what, sizeof what, "stream %s K_pre %d begin", ms_vocab_stream_name(st), k_pre);
            CHECK(ms_vocab_begin_stream(v, st, prompt, N_PROMPT, pre, k_pre) >= 0, "%s", what);
            naive_begin(&n, st, prompt, N_PROMPT, pre, k_pre);
            window_matches(v, &n, W_MAX, V, what);
            if (st == MS_VOCAB_STREAM_BOTH) CHECK(ms_vocab_init_stream(ref, prompt, N_PROMPT, pre, k_pre) >= 0, "ref");
            for (int64_t r = 0; r < ROUNDS; r++) {
                int64_t nt = 1 + (int64_t)(ms_rng_u64(&rng) % 40), ne = 1 + (int64_t)(ms_rng_u64(&rng) % 8);
                const int64_t k_ver = 3;
                for (int64_t i = 0; i < nt; i++) tree[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
                for (int64_t i = 0; i < ne; i++) emit[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
                for (int64_t i = 0; i < ne * k_ver; i++) ver[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
                snprintf(what, sizeof what, "stream %s K_pre %d round %lld", ms_vocab_stream_name(st), k_pre,
                         (long long)r);
                CHECK(ms_vocab_stream_round(v, st, tree, nt, emit, ne, ver, ne, k_ver) >= 0, "%s", what);
                naive_round(&n, st, tree, nt, emit, ne, ver, ne * k_ver);
                if (!window_matches(v, &n, W_MAX, V, what)) break;
                if (st == MS_VOCAB_STREAM_BOTH) {
                    /* the paper's stream through the original entry points: same slots */
                    CHECK(ms_vocab_append_round(ref, tree, nt, ver, ne, k_ver) >= 0, "ref round");
                    bool same = ms_vocab_size(ref) == ms_vocab_size(v);
                    for (int64_t s = 0; same && s < ms_vocab_size(v); s++)
                        same = ms_vocab_id_at(ref, s) == ms_vocab_id_at(v, s);
                    CHECK(same, "%s: both differs from init_stream/append_round", what);
                }
            }
            /* bad ids are refused and change nothing */
            int32_t bad[2] = {1, (int32_t)V};
            int64_t before = ms_vocab_size(v);
            CHECK(ms_vocab_stream_round(v, st, bad, 2, bad, 2, bad, 2, 1) == MS_ERR_INVALID, "bad id accepted");
            CHECK(ms_vocab_size(v) == before, "bad round changed the window");
            ms_ids_free(&n.s);
            ms_vocab_free(&v);
            ms_vocab_free(&ref);
        }
    }
    ms_vocab_stream s;
    CHECK(ms_vocab_stream_parse("context", &s) && s == MS_VOCAB_STREAM_CONTEXT, "parse context");
    CHECK(ms_vocab_stream_parse("extension", &s) && s == MS_VOCAB_STREAM_EXTENSION, "parse extension");
    CHECK(ms_vocab_stream_parse("both", &s) && s == MS_VOCAB_STREAM_BOTH, "parse both");
    CHECK(!ms_vocab_stream_parse("Both", &s) && !ms_vocab_stream_parse("", &s), "parse junk");
    ms_dft_head h;
    CHECK(ms_dft_head_parse("indexed", &h) && h == MS_DFT_HEAD_INDEXED, "parse indexed");
    CHECK(!ms_dft_head_parse("gather", &h), "parse junk head");
}

/* ---- 2. draft level -------------------------------------------------------- */

static void test_draft_streams(const char *tmp) {
    char dir[512];
    const int64_t V = 211;
    ms_status s = spec_mkmodel(tmp, "win-model",
                               "--arch llama --vocab 211 --hidden 24 --layers 2 --heads 4 --kv-heads 2 --seed 5", dir,
                               sizeof dir);
    CHECK(s >= 0, "mkmodel");
    if (s < 0) return;
    const int64_t W_MAX = 37, K_PRE = 2, K_VER = 3, ROUNDS = spec_small() ? 6 : 14;
    for (int sti = MS_VOCAB_STREAM_BOTH; sti <= MS_VOCAB_STREAM_EXTENSION; sti++)
        for (int hi = MS_DFT_HEAD_GATHERED; hi <= MS_DFT_HEAD_INDEXED; hi++) {
            ms_dft_opts o = ms_dft_opts_default();
            o.kind = MS_DRAFT_LAYERSKIP;
            o.model_dir = o.target_dir = dir;
            o.layers = 1;
            o.vocab = MS_VOCAB_DYNAMIC;
            o.w_max = W_MAX;
            o.stream = (ms_vocab_stream)sti;
            o.lm_head = (ms_dft_head)hi;
            o.tree = (ms_tree_params){.top_k = 4, .depth = 3, .total = 16};
            ms_dft *d = NULL;
            s = ms_dft_new(&o, &d);
            CHECK(s >= 0, "ms_dft_new stream %d head %d", sti, hi);
            if (s < 0) continue;
            ms_draft_port port = ms_dft_port(d);
            ms_rng rng;
            ms_rng_seed(&rng, 900 + (uint64_t)sti);
            int32_t prompt[24], pre[24 * K_PRE];
            const int64_t np = 24;
            for (int64_t i = 0; i < np; i++) prompt[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
            for (int64_t i = 0; i < np * K_PRE; i++) pre[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
            ms_msg_begin b = {.request_id = 3, .prompt = prompt, .n_prompt = np, .topk_pre = pre, .k_pre = K_PRE,
                              .root = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V)};
            naive n = {0};
            naive_begin(&n, o.stream, prompt, np, pre, K_PRE);
            char what[128];
            snprintf(what, sizeof what, "draft stream %s head %s begin", ms_vocab_stream_name(o.stream),
                     ms_dft_head_name(o.lm_head));
            CHECK(port.begin(port.ctx, &b) >= 0, "%s", what);
            window_matches(ms_dft_vocabulary(d), &n, W_MAX, V, what);
            for (int64_t r = 1; r <= ROUNDS; r++) {
                ms_msg_tree t;
                s = port.draft(port.ctx, 3, r, &t);
                CHECK(s >= 0, "draft round %lld", (long long)r);
                if (s < 0) break;
                /* a random root-to-node path, a random bonus, random C_ver rows */
                ms_msg_verify m = {.request_id = 3, .round = r, .k_ver = K_VER};
                int32_t node = (int32_t)(ms_rng_u64(&rng) % (uint64_t)t.tree.n), chain[MS_TREE_MAX];
                int64_t len = 0;
                for (int32_t x = node; x >= 0; x = x == 0 ? -1 : t.tree.parent[x]) chain[len++] = x;
                for (int64_t k = 0; k < len; k++) m.path[k] = chain[len - 1 - k];
                m.n_path = len;
                m.bonus = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
                int32_t ver[MS_TREE_MAX * 3];
                for (int64_t i = 0; i < len * K_VER; i++) ver[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)V);
                m.ver_topk = ver;
                int32_t c_draft[MS_TREE_MAX], emit[MS_TREE_MAX + 1];
                int64_t nd = ms_tree_distinct_ids(&t.tree, c_draft), ne = 0;
                for (int64_t k = 1; k < len; k++) emit[ne++] = t.tree.token[m.path[k]];
                emit[ne++] = m.bonus;
                CHECK(port.accept(port.ctx, &m) >= 0, "accept round %lld", (long long)r);
                naive_round(&n, o.stream, c_draft, nd, emit, ne, ver, len * K_VER);
                snprintf(what, sizeof what, "draft stream %s head %s round %lld", ms_vocab_stream_name(o.stream),
                         ms_dft_head_name(o.lm_head), (long long)r);
                if (!window_matches(ms_dft_vocabulary(d), &n, W_MAX, V, what)) break;
                /* every draft token (not the root) comes from the window it was drafted with */
            }
            port.end(port.ctx, 3);
            ms_vocab_counters c = ms_vocab_counters_get(ms_dft_vocabulary(d));
            CHECK(c.appended == n.s.n, "%s: %lld entries appended, naive stream has %lld", what, (long long)c.appended,
                  (long long)n.s.n);
            ms_ids_free(&n.s);
            ms_dft_free(&d);
        }
    /* a non-default stream needs the dynamic window */
    ms_dft_opts o = ms_dft_opts_default();
    o.kind = MS_DRAFT_LAYERSKIP;
    o.model_dir = o.target_dir = dir;
    o.vocab = MS_VOCAB_FULL;
    o.stream = MS_VOCAB_STREAM_CONTEXT;
    ms_dft *d = NULL;
    ms_log_set_level(MS_LOG_OFF);
    CHECK(ms_dft_new(&o, &d) == MS_ERR_INVALID && !d, "context stream with a full vocabulary accepted");
    ms_log_set_level(MS_LOG_WARN);
}

/* ---- 3. indexed logits ----------------------------------------------------- */

static void compare_logits(const ms_vocab *gath, const ms_vocab *idx, const float *W, const float *hid, int64_t n,
                           int64_t d, const char *what) {
    const float *rows;
    const int32_t *id_of;
    int64_t m;
    ms_vocab_rows(gath, &rows, &m, &id_of);
    CHECK(m == ms_vocab_size(idx), "%s: sizes %lld / %lld", what, (long long)m, (long long)ms_vocab_size(idx));
    if (m != ms_vocab_size(idx) || m == 0) return;
    float *a = ms_malloc((size_t)(n * m) * sizeof *a), *b = ms_malloc((size_t)(n * m) * sizeof *b);
    MS_ASSERT(a && b);
    const ms_k_ops *ops = ms_k_cpu_ops();
    ops->gemm(ops->ctx, a, hid, rows, NULL, n, d, m);
    ms_vocab_logits_indexed(idx, W, hid, n, b);
    int64_t bad = 0;
    double worst = 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t s = 0; s < m; s++) {
            int32_t id = ms_vocab_id_at(idx, s);
            if (id != ms_vocab_id_at(gath, s)) {
                bad++;
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < d; k++) {
                double p = (double)hid[r * d + k] * (double)W[(int64_t)id * d + k];
                ref += p;
                mag += fabs(p);
            }
            double ea = fabs(a[r * m + s] - b[r * m + s]) / (mag > 0 ? mag : 1);
            double eb = fabs(b[r * m + s] - ref) / (mag > 0 ? mag : 1);
            ms_check_worst(&worst, ea);
            if (ea > 1e-5 || eb > 1e-5) bad++;
        }
    CHECK(bad == 0, "%s: %lld logits differ (worst relative %.3g)", what, (long long)bad, worst);
    free(a);
    free(b);
}

static void test_indexed_logits(void) {
    const int64_t V = 1031, d = 77, n = 7, W_MAX = 301;
    float *W = ms_malloc((size_t)(V * d) * sizeof *W), *hid = ms_malloc((size_t)(n * d) * sizeof *hid);
    MS_ASSERT(W && hid);
    ms_rng rng;
    ms_rng_seed(&rng, 4242);
    for (int64_t i = 0; i < V * d; i++) W[i] = (float)((double)(ms_rng_u64(&rng) % 2001) / 1000.0 - 1.0);
    for (int64_t i = 0; i < n * d; i++) hid[i] = (float)((double)(ms_rng_u64(&rng) % 2001) / 500.0 - 2.0);
    /* full */
    ms_vocab *g = NULL, *x = NULL;
    CHECK(ms_vocab_new_full(W, V, d, &g) >= 0, "full");
    if (g) compare_logits(g, g, W, hid, n, d, "full");
    ms_vocab_free(&g);
    /* static: every third id, reversed */
    int32_t ids[400];
    int64_t k = 0;
    for (int64_t id = V - 1; id >= 0 && k < 343; id -= 3) ids[k++] = (int32_t)id;
    CHECK(ms_vocab_new_static(W, V, d, ids, k, &g) >= 0 && ms_vocab_new_static(NULL, V, d, ids, k, &x) >= 0, "static");
    if (g && x) compare_logits(g, x, W, hid, n, d, "static");
    ms_vocab_free(&g);
    ms_vocab_free(&x);
    /* dynamic, after a stream long enough to evict and swap-remove */
    CHECK(ms_vocab_new_dynamic(W, V, d, W_MAX, &g) >= 0 && ms_vocab_new_dynamic(NULL, V, d, W_MAX, &x) >= 0, "dynamic");
    if (g && x) {
        int32_t chunk[50];
        for (int rep = 0; rep < 30; rep++) {
            for (int i = 0; i < 50; i++) chunk[i] = (int32_t)(ms_rng_u64(&rng) % (uint64_t)(rep % 2 ? 200 : V));
            CHECK(ms_vocab_append(g, chunk, 50) >= 0 && ms_vocab_append(x, chunk, 50) >= 0, "append");
            if (rep % 7 == 6) compare_logits(g, x, W, hid, n, d, "dynamic");
        }
        compare_logits(g, x, W, hid, n, d, "dynamic");
        ms_vocab_counters cg = ms_vocab_counters_get(g), cx = ms_vocab_counters_get(x);
        CHECK(cg.gathered == cx.gathered && cg.moved == cx.moved, "the bookkeeping differs");
        const float *rows;
        ms_vocab_rows(x, &rows, NULL, NULL);
        CHECK(rows == NULL, "a vocabulary made without W has packed rows");
    }
    ms_vocab_free(&g);
    ms_vocab_free(&x);
    free(W);
    free(hid);
}

int main(void) {
    ms_log_set_level(MS_LOG_WARN);
    char tmp[256];
    if (!ms_test_tmpdir("ms-ablation-win", tmp, sizeof tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_vocab_streams();
    test_indexed_logits();
    test_draft_streams(tmp);
    ms_test_rmtree(tmp);
    if (g_fail) {
        fprintf(stderr, "test_ablation_window: %d check(s) FAILED\n", g_fail);
        return 1;
    }
    fprintf(stderr, "test_ablation_window: OK\n");
    return 0;
}
