/* test_ngram.c — the n-gram draft source (draft-node/ms_ngram.c) and the
 * cost policy's pruning (target-node/ms_policy.c), each against a naive
 * reference written here:
 *   - lookup: a backward scan of the history for the most recent earlier
 *     occurrence of its suffix, longest n first, on seeded sequences over
 *     small alphabets (many repeats), with histories that overflow
 *     max_history (the kept newer half is tracked here independently);
 *   - graft: the chain is a root path of the tree, shared nodes are not
 *     duplicated, scores and the node cap, ms_tree_validate;
 *   - the acceptance record: a proposal's scores follow the accepted
 *     prefixes fed back (exact counts under the documented decay);
 *   - the n-gram draft port: a scripted request, bad verdicts refused;
 *   - ms_cost_at: measured, interpolated and extrapolated values; the
 *     calibration file (ms_cost_load refuses every malformed line, a save
 *     loads back the same costs);
 *   - ms_policy_prune: the kept set's ratio (1 + Σ P) / c(k + 1) equals the
 *     best over every prefix-closed subset (enumerated) on small random
 *     trees, the kept tree is valid and maps onto the original;
 *   - the draft-model gate: with a model that loses, it runs <= 2 % of the
 *     rounds (probes included); with one that wins, nearly all; a turn from
 *     one to the other is followed within the longest backoff. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_ngram.h"
#include "ms_policy.h"

#include "ms_check.h"

static uint64_t rng_state;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

/* ---- lookup ----------------------------------------------------------------- */

/* The reference: for n = n_max..n_min, the largest p in [n, len) with
 * h[p-n..p) == h[len-n..len); the continuation h[p..min(p+max, len)). */
static int64_t naive_lookup(const int32_t *h, int64_t len, const ms_ngram_params *p, int64_t max, int32_t *out,
                            int64_t *n_match) {
    *n_match = 0;
    for (int64_t n = p->n_max; n >= p->n_min; n--) {
        if (len < n + 1) continue;
        for (int64_t q = len - 1; q >= n; q--) {
            if (memcmp(h + q - n, h + len - n, (size_t)n * sizeof *h)) continue;
            int64_t k = 0;
            for (; k < max && q + k < len; k++) out[k] = h[q + k];
            *n_match = n;
            return k;
        }
    }
    return 0;
}

static void test_lookup(void) {
    static const int64_t alphabets[] = {2, 3, 7, 50};
    int64_t checked = 0, matched = 0;
    for (int cfg = 0; cfg < 24; cfg++) {
        rng_state = 1000 + (uint64_t)cfg;
        ms_ngram_params p = ms_ngram_params_default();
        p.n_min = 1 + cfg % 3;
        p.n_max = p.n_min + cfg % 4;
        p.max_len = 1 + cfg % 9;
        p.max_history = cfg % 2 ? 2 * p.n_max + 2 + cfg : 4096;
        const int64_t A = alphabets[cfg % 4];
        ms_ngram *g = NULL;
        CHECK(ms_ngram_new(&p, &g) == MS_OK, "cfg %d: new", cfg);
        if (!g) continue;
        int32_t *mine = malloc(sizeof(int32_t) * 5 * 3000); /* ≥ every token appended */
        int64_t n_mine = 0;
        for (int step = 0; step < 3000; step++) {
            int32_t chunk[5];
            const int64_t c = 1 + rnd() % 5;
            for (int64_t i = 0; i < c; i++) chunk[i] = (int32_t)(rnd() % (uint32_t)A);
            ms_ngram_append(g, chunk, c);
            for (int64_t i = 0; i < c; i++) {
                if (n_mine == p.max_history) { /* the documented slide: keep the newer half */
                    const int64_t keep = n_mine / 2;
                    memmove(mine, mine + n_mine - keep, (size_t)keep * sizeof *mine);
                    n_mine = keep;
                }
                mine[n_mine++] = chunk[i];
            }
            int64_t n_hist;
            const int32_t *h = ms_ngram_history(g, &n_hist);
            CHECK(n_hist == n_mine && !memcmp(h, mine, (size_t)n_mine * sizeof *h), "cfg %d step %d: history", cfg,
                  step);
            int32_t got[MS_TREE_MAX], want[MS_TREE_MAX];
            int64_t gm, wm;
            const int64_t ng = ms_ngram_lookup(g, p.max_len, got, &gm);
            const int64_t nw = naive_lookup(mine, n_mine, &p, p.max_len, want, &wm);
            CHECK(ng == nw && gm == wm && !memcmp(got, want, (size_t)nw * sizeof *got),
                  "cfg %d step %d: lookup %lld tokens (n %lld), reference %lld (n %lld)", cfg, step, (long long)ng,
                  (long long)gm, (long long)nw, (long long)wm);
            checked++;
            matched += nw > 0;
            if (step == 1500) ms_ngram_reset(g), n_mine = 0;
        }
        free(mine);
        ms_ngram_free(&g);
        CHECK(g == NULL, "free nulls the pointer");
    }
    CHECK(matched > checked / 4, "the sequences repeat enough to match (%lld of %lld)", (long long)matched,
          (long long)checked);
    fprintf(stderr, "lookup: %lld lookups against the backward scan, %lld matched\n", (long long)checked,
            (long long)matched);

    ms_ngram_params bad = ms_ngram_params_default();
    bad.n_max = 0;
    CHECK(ms_ngram_params_check(&bad) == MS_ERR_INVALID, "n_max < n_min refused");
    bad = ms_ngram_params_default();
    bad.max_len = MS_TREE_MAX;
    CHECK(ms_ngram_params_check(&bad) == MS_ERR_INVALID, "max_len ≥ MS_TREE_MAX refused");
    bad = ms_ngram_params_default();
    bad.max_history = 3;
    ms_ngram *g = NULL;
    CHECK(ms_ngram_new(&bad, &g) == MS_ERR_INVALID && g == NULL, "a tiny history refused");
}

/* ---- graft -------------------------------------------------------------------- */

static ms_tree root_tree(int32_t root) {
    ms_tree t;
    memset(&t, 0, sizeof t);
    t.n = 1;
    t.token[0] = root;
    t.parent[0] = -1;
    t.mask[0] = 1;
    return t;
}

/* A node under parent (no check: the test builds valid trees). */
static int32_t add_node(ms_tree *t, int32_t parent, int32_t tok, float score) {
    const int32_t j = (int32_t)t->n++;
    t->token[j] = tok;
    t->parent[j] = parent;
    t->depth[j] = t->depth[parent] + 1;
    t->mask[j] = t->mask[parent] | (uint64_t)1 << j;
    t->score[j] = score;
    return j;
}

static void test_graft(void) {
    /* root 9 → a(1) → b(2); root → c(3) */
    ms_tree t = root_tree(9);
    int32_t a = add_node(&t, 0, 1, -0.1f), b = add_node(&t, a, 2, -0.3f);
    add_node(&t, 0, 3, -1.0f);
    const int32_t chain[] = {1, 2, 5, 6};
    const float lp[] = {-0.5f, -0.5f, -0.25f, -0.125f};
    CHECK(ms_ngram_graft(&t, chain, lp, 4, MS_TREE_MAX) == 2, "shares a and b, adds two");
    CHECK(t.n == 6 && t.parent[4] == b && t.token[4] == 5 && t.parent[5] == 4 && t.token[5] == 6,
          "appended under b in order");
    CHECK(t.score[4] == -0.3f - 0.25f && t.score[5] == -0.3f - 0.25f - 0.125f && t.score[a] == -0.1f,
          "new nodes add their log p to the parent's score; shared nodes keep theirs");
    CHECK(ms_tree_validate(&t) == MS_OK, "valid after the graft");
    CHECK(ms_ngram_graft(&t, chain, lp, 4, MS_TREE_MAX) == 0, "grafting the same chain again adds nothing");
    const int32_t other[] = {7, 8, 9};
    CHECK(ms_ngram_graft(&t, other, NULL, 3, 7) == 1 && t.n == 7 && t.token[6] == 7 && t.score[6] == 0.0f,
          "the node cap stops the graft (NULL log p: point mass)");
    CHECK(ms_tree_validate(&t) == MS_OK, "valid after a capped graft");
    /* random trees: the chain becomes a root path */
    rng_state = 77;
    for (int it = 0; it < 500; it++) {
        ms_tree r = root_tree((int32_t)(rnd() % 4));
        const int64_t n0 = 1 + rnd() % 40;
        while (r.n < n0) add_node(&r, (int32_t)(rnd() % (uint32_t)r.n), (int32_t)(rnd() % 4), -(float)(rnd() % 100) / 10);
        int32_t ch[20];
        const int64_t len = 1 + rnd() % 20;
        for (int64_t i = 0; i < len; i++) ch[i] = (int32_t)(rnd() % 4);
        const int64_t before = r.n;
        const int64_t added = ms_ngram_graft(&r, ch, NULL, len, MS_TREE_MAX);
        CHECK(r.n == before + added && r.n <= MS_TREE_MAX, "it %d: count", it);
        CHECK(ms_tree_validate(&r) == MS_OK, "it %d: valid", it);
        /* follow the chain from the root: each step finds the token under the current node */
        int32_t cur = 0;
        int64_t steps = 0;
        for (int64_t i = 0; i < len; i++) {
            int32_t nx = -1;
            for (int32_t c = 0; c < r.n && nx < 0; c++)
                if (r.parent[c] == cur && r.token[c] == ch[i]) nx = c;
            if (nx < 0) break;
            cur = nx;
            steps++;
        }
        CHECK(steps == len || r.n == MS_TREE_MAX, "it %d: the chain is a root path (%lld of %lld steps)", it,
              (long long)steps, (long long)len);
    }
}

/* ---- the acceptance record and the port ---------------------------------------- */

static void test_record_and_port(void) {
    ms_ngram_params p = ms_ngram_params_default();
    p.n_min = 2;
    p.n_max = 2;
    p.max_len = 4;
    ms_ngram *g = NULL;
    CHECK(ms_ngram_new(&p, &g) == MS_OK, "new");
    /* 1 2 3 4 5 ... 1 2 → proposes 3 4 5 6 */
    const int32_t prompt[] = {1, 2, 3, 4, 5, 6, 7, 1};
    ms_ngram_begin(g, prompt, 8, 2);
    int32_t ids[MS_TREE_MAX];
    float lp[MS_TREE_MAX];
    CHECK(ms_ngram_propose(g, ids, lp) == 4 && ids[0] == 3 && ids[3] == 6, "proposes what followed 1 2");
    for (int i = 0; i < 4; i++) CHECK(fabsf(lp[i] - logf(0.5f)) < 1e-6f, "prior log p = log 1/2 at %d", i);
    /* two accepted, then the bonus differs: positions 0, 1 accepted, 2 tried and refused, 3 untried */
    const int32_t emitted[] = {3, 4, 9};
    ms_ngram_commit(g, emitted, 3);
    int64_t prop, acc;
    ms_ngram_counts(g, &prop, &acc);
    CHECK(prop == 4 && acc == 2, "counts %lld proposed, %lld accepted", (long long)prop, (long long)acc);
    /* history now ... 1 2 3 4 9; make the suffix "1 2" again */
    const int32_t more[] = {1, 2};
    ms_ngram_commit(g, more, 2);
    CHECK(ms_ngram_propose(g, ids, lp) == 4 && ids[0] == 3 && ids[1] == 4 && ids[2] == 9 && ids[3] == 1,
          "the newest occurrence (... 1 2 | 3 4 9 1 2)");
    const float d = 0.95f, pa = 1.0f, pt = 2.0f;
    const float acc1 = d * pa + (1 - d) * pa + 1, tr1 = d * pt + (1 - d) * pt + 1;
    const float acc2 = d * pa + (1 - d) * pa + 0;
    CHECK(fabsf(lp[0] - logf(acc1 / tr1)) < 1e-5f && fabsf(lp[1] - logf(acc1 / tr1)) < 1e-5f,
          "accepted positions: log %g, %g (want %g)", (double)lp[0], (double)lp[1], (double)logf(acc1 / tr1));
    CHECK(fabsf(lp[2] - logf(acc2 / tr1)) < 1e-5f, "the refused position: log %g (want %g)", (double)lp[2],
          (double)logf(acc2 / tr1));
    /* a proposal the policy left out: the bonus alone matches its first token */
    const int32_t bonus_only[] = {3};
    ms_ngram_commit(g, bonus_only, 1);
    ms_ngram_counts(g, &prop, &acc);
    CHECK(prop == 8 && acc == 2, "a bonus match is not a path token: %lld proposed, %lld accepted", (long long)prop,
          (long long)acc);
    /* history ... 9 1 2 3 7 1 2: "1 2" again with a context of 2 tokens (9 ≠ 7 before it), so the same record:
     * position 0 credited twice, once refused never */
    const int32_t again[] = {7, 1, 2};
    ms_ngram_commit(g, again, 3);
    CHECK(ms_ngram_propose(g, ids, lp) >= 3 && ids[0] == 3 && ids[1] == 7, "proposes after ... 9 1 2");
    const float acc3 = d * acc1 + (1 - d) * pa + 1, tr3 = d * tr1 + (1 - d) * pt + 1;
    CHECK(fabsf(lp[0] - logf(acc3 / tr3)) < 1e-5f && fabsf(lp[1] - logf(acc1 / tr1)) < 1e-5f &&
              fabsf(lp[2] - logf(acc2 / tr1)) < 1e-5f,
          "the bonus match credited position 0 only: log %g (want %g); positions 1, 2 unchanged", (double)lp[0],
          (double)logf(acc3 / tr3));
    ms_ngram_free(&g);

    /* the port: a scripted request */
    ms_ngd *nd = NULL;
    CHECK(ms_ngd_new(&p, &nd) == MS_OK, "ngd new");
    if (!nd) return;
    ms_draft_port port = ms_ngd_port(nd);
    ms_msg_begin b = {.request_id = 7, .prompt = prompt, .n_prompt = 8, .root = 2};
    CHECK(port.begin(port.ctx, &b) == MS_OK, "begin");
    ms_msg_tree tm;
    CHECK(port.draft(port.ctx, 7, 1, &tm) == MS_OK, "draft round 1");
    CHECK(tm.tree.n == 5 && tm.tree.token[0] == 2 && tm.tree.token[1] == 3 && tm.tree.token[4] == 6 &&
              ms_tree_validate(&tm.tree) == MS_OK,
          "a chain of the continuation under the root");
    CHECK(port.draft(port.ctx, 7, 1, &tm) == MS_ERR_INVALID, "the same round twice refused");
    ms_msg_verify v = {.request_id = 7, .round = 1, .n_path = 3, .path = {0, 1, 2}, .bonus = 8};
    ms_msg_verify bad = v;
    bad.path[2] = 3; /* not a child of node 1 */
    CHECK(port.accept(port.ctx, &bad) == MS_ERR_INVALID, "a path off the tree refused");
    bad = v;
    bad.round = 2;
    CHECK(port.accept(port.ctx, &bad) == MS_ERR_INVALID, "a verdict for another round refused");
    CHECK(port.accept(port.ctx, &v) == MS_OK, "accept");
    CHECK(port.draft(port.ctx, 7, 2, &tm) == MS_OK && tm.tree.token[0] == 8, "round 2's root is the bonus");
    CHECK(port.draft(port.ctx, 8, 3, &tm) == MS_ERR_INVALID, "another request refused");
    port.end(port.ctx, 7);
    ms_ngd_free(&nd);
}

/* ---- the cost policy ---------------------------------------------------------------- */

static void test_cost(void) {
    ms_cost c;
    ms_cost_init(&c);
    CHECK(!ms_cost_ready(&c), "empty: not ready");
    ms_cost_observe(&c, 1, 10.0);
    CHECK(!ms_cost_ready(&c) && ms_cost_at(&c, 5) == 10.0 + 10.0 * 4, "one measure: each further row a whole forward");
    ms_cost_observe(&c, 4, 16.0);
    CHECK(ms_cost_ready(&c), "ready");
    CHECK(ms_cost_at(&c, 2) == 12.0 && ms_cost_at(&c, 3) == 14.0, "interpolated: %g %g", ms_cost_at(&c, 2),
          ms_cost_at(&c, 3));
    CHECK(ms_cost_at(&c, 10) == 16.0 + 2.0 * 6, "extrapolated with the last slope: %g", ms_cost_at(&c, 10));
    ms_cost_observe(&c, 4, 24.0);
    CHECK(ms_cost_at(&c, 4) == 17.0, "the next measure moves it by 1/8: %g", ms_cost_at(&c, 4));
    ms_cost_observe(&c, 3, NAN);
    ms_cost_observe(&c, 0, 1.0);
    CHECK(fabs(ms_cost_at(&c, 3) - (10.0 + 7.0 * 2.0 / 3.0)) < 1e-12, "NaN and n = 0 ignored: %g", ms_cost_at(&c, 3));
}

/* The calibration file: what is refused leaves the table alone. */
static void put_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_cost_file(void) {
    char dir[] = "/tmp/test_ngram_costXXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/cost.txt", dir);
    ms_cost c;
    ms_cost_init(&c);
    CHECK(!ms_cost_load(&c, path), "no file: not loaded");
    put_file(path, "microspec-verify-cost 1 0.0304 0.0302 0.06 0.1\n"); /* 2 rows measured a hair under 1 */
    CHECK(ms_cost_load(&c, path), "a table that dips a little loads");
    put_file(path, "microspec-verify-cost 1 0.03 0.036 0.06 0.1\n");
    CHECK(ms_cost_load(&c, path) && ms_cost_ready(&c) && ms_cost_at(&c, 1) == 0.03 && ms_cost_at(&c, 8) == 0.1 &&
              fabs(ms_cost_at(&c, 6) - 0.08) < 1e-12,
          "a valid file loads: %g %g %g", ms_cost_at(&c, 1), ms_cost_at(&c, 6), ms_cost_at(&c, 8));
    static const char *bad[] = {
        "",
        "microspec-verify-cost 1 0.03 0.036 0.06\n",            /* three costs */
        "microspec-verify-cost 1 0.03 0.036 0.06 0.1 0.2\n",    /* five */
        "microspec-verify-cost 2 0.03 0.036 0.06 0.1\n",        /* another version */
        "microspec-verify-cost 1 0.03 0.036 nan 0.1\n",         /* NaN */
        "microspec-verify-cost 1 0.03 -0.036 0.06 0.1\n",       /* negative */
        "microspec-verify-cost 1 0.03 0.012 0.06 0.1\n",        /* 2 rows under half of 1 */
        "microspec-verify-cost 1 0.03 0.036 0.06 1e300\n",      /* absurd */
        "microspec-verify-cost 1 0.0406 0.1206 0.1606 0.1355\n", /* 2 rows 3x 1 (written under load, 2026-11-28) */
        "microspec-verify-cost 1 0.03 0.036 0.06 0.1x\n",       /* trailing junk */
        "microspec-verify-cost 1 0.03 0.036 0.06 0.1\nmore\n", /* a second line */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ms_cost d;
        ms_cost_init(&d);
        ms_cost_observe(&d, 1, 5.0);
        put_file(path, bad[i]);
        CHECK(!ms_cost_load(&d, path) && d.c[1] == 5.0 && d.c[2] == 0.0 && d.c[8] == 0.0, "bad file %zu refused, table untouched",
              i);
    }
    /* save, then load into a fresh table: the same four costs */
    CHECK(ms_cost_save(&c, path) == MS_OK, "save");
    ms_cost e;
    ms_cost_init(&e);
    CHECK(ms_cost_load(&e, path) && e.c[1] == c.c[1] && e.c[2] == c.c[2] && e.c[4] == c.c[4] && e.c[8] == c.c[8],
          "save then load: the same costs");
    char nodir[300];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/cost.txt", dir);
    CHECK(ms_cost_save(&c, nodir) == MS_ERR_IO, "an unwritable path is an I/O error");
    remove(path);
    rmdir(dir);
}

/* Best (1 + Σ P) / c(|S|) over prefix-closed S ∋ root, by enumeration. */
static double brute_best(const ms_tree *t, const double *P, const ms_cost *c) {
    double best = 0.0;
    const int64_t n = t->n;
    for (uint64_t m = 0; m < (UINT64_C(1) << (n - 1)); m++) {
        const uint64_t set = m << 1 | 1;
        bool closed = true;
        double sum = 1.0;
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!(set >> i & 1)) continue;
            k++;
            if (i > 0) {
                closed = closed && (set >> t->parent[i] & 1);
                sum += P[i];
            }
        }
        if (closed && sum / ms_cost_at(c, k) > best) best = sum / ms_cost_at(c, k);
    }
    return best;
}

static void test_prune(void) {
    rng_state = 4242;
    int64_t pruned_some = 0, plain = 0;
    for (int it = 0; it < 400; it++) {
        ms_tree t = root_tree(5);
        const int64_t n = 1 + rnd() % 14;
        while (t.n < n) {
            const int32_t par = (int32_t)(rnd() % (uint32_t)t.n);
            const float s = t.score[par] - (float)(rnd() % 1000) / 400.0f;
            add_node(&t, par, (int32_t)(rnd() % 100), it % 7 == 0 ? 0.0f : s); /* some trees all P = 1 */
        }
        if (it % 11 == 0 && t.n > 2) t.score[2] = 0.5f; /* a score above 0 counts as P = 1, capped by the parent */
        ms_cost c;
        ms_cost_init(&c);
        const double c1 = 1.0 + rnd() % 100 / 50.0, slope = (rnd() % 100) / 200.0, bump = (rnd() % 100) / 100.0;
        for (int64_t k = 1; k <= 16; k *= 2) ms_cost_observe(&c, k, c1 * (1.0 + (k > 1 ? bump : 0.0) + slope * (double)(k - 1)));
        double P[MS_TREE_MAX];
        P[0] = 1.0;
        for (int64_t i = 1; i < t.n; i++) {
            const double q = fmin(1.0, exp((double)t.score[i]));
            P[i] = fmin(q, P[t.parent[i]]);
        }
        ms_tree out;
        int32_t map[MS_TREE_MAX];
        double expected;
        const int64_t k = ms_policy_prune(&t, &c, &out, map, &expected);
        CHECK(k == out.n && k >= 1 && k <= t.n && ms_tree_validate(&out) == MS_OK, "it %d: a valid subtree", it);
        double sum = 1.0;
        bool mapped = map[0] == 0;
        for (int64_t i = 1; i < out.n; i++) {
            mapped = mapped && map[i] > map[i - 1] && out.token[i] == t.token[map[i]] &&
                     map[out.parent[i]] == t.parent[map[i]];
            sum += P[map[i]];
        }
        CHECK(mapped, "it %d: the kept nodes map onto the original, in order, parents preserved", it);
        CHECK(fabs(sum - 1.0 - expected) < 1e-9, "it %d: expected %g, Σ P %g", it, expected, sum - 1.0);
        const double want = brute_best(&t, P, &c), got = sum / ms_cost_at(&c, out.n);
        CHECK(fabs(got - want) <= 1e-12 * want, "it %d: ratio %.15g, best %.15g (n %lld, kept %lld)", it, got, want,
              (long long)t.n, (long long)out.n);
        pruned_some += out.n < t.n;
        plain += out.n == 1 && t.n > 1;
    }
    CHECK(pruned_some > 50 && plain > 10, "the cases cover pruning (%lld) and plain steps (%lld)",
          (long long)pruned_some, (long long)plain);
    /* no cost table: the whole tree */
    ms_tree t = root_tree(1);
    add_node(&t, 0, 2, -50.0f);
    ms_cost c;
    ms_cost_init(&c);
    ms_tree out;
    int32_t map[MS_TREE_MAX];
    CHECK(ms_policy_prune(&t, &c, &out, map, NULL) == 2, "without measures everything is verified");
    fprintf(stderr, "prune: 400 trees against the enumeration (%lld pruned, %lld plain steps)\n",
            (long long)pruned_some, (long long)plain);
}

/* The draft-model gate (ms_gate, ms_policy.h) driven as ms_tgt_generate
 * drives it, with rounds whose tokens and times depend on the model: where
 * the model loses its rounds must stay rare (probes included), where it wins
 * it must run nearly always, and a workload that turns must be followed. */
typedef struct {
    double m_tok, m_s; /* a round with the model: tokens, seconds (draft + verify) */
} gate_world;

/* Runs n rounds; returns those made with the model. */
static int64_t gate_run(ms_gate *g, gate_world w, int64_t n, int64_t *first_model) {
    int64_t with_model = 0;
    bool skip = g->next, prev_skip = true;
    *first_model = -1;
    for (int64_t r = 0; r < n; r++) {
        const bool catchup = !skip && prev_skip;
        if (skip) ms_gate_observe(g, true, false, 1, 0.0, 1.0); /* a plain step: 1 token, c(1) = 1 s */
        else ms_gate_observe(g, false, catchup, (int64_t)w.m_tok, w.m_s - 1.0, 1.0);
        if (!skip) {
            with_model++;
            if (*first_model < 0) *first_model = r;
        }
        prev_skip = skip;
        skip = ms_gate_next(g, 1.0);
    }
    return with_model;
}

static void test_gate(void) {
    const gate_world loses = {1.0, 2.0}, wins = {3.0, 1.5};
    int64_t first;
    ms_gate g;
    ms_gate_init(&g);
    int64_t m = gate_run(&g, loses, 4000, &first);
    const int64_t m_losing = m;
    CHECK(first == 0, "an open gate runs the model at once");
    CHECK(m * 100 <= 4000 * 2 && m >= 3 * 5, "a model that loses: %lld of 4000 rounds with it (<= 2 %%, probes go on)",
          (long long)m);
    m = gate_run(&g, wins, 2000, &first);
    CHECK(first >= 0 && first <= 512 + 3, "the model that came to win runs again from round %lld (<= 515)",
          (long long)first);
    CHECK(m >= 2000 - 515, "then it keeps running: %lld of 2000 rounds", (long long)m);

    ms_gate_init(&g);
    ms_gate_start_closed(&g);
    CHECK(g.next, "started closed: the first round goes without the model");
    m = gate_run(&g, wins, 1000, &first);
    CHECK(first > 0 && first <= 32, "started closed, probed at round %lld (<= 32)", (long long)first);
    CHECK(m >= 1000 - 32 - 3, "a model that wins runs %lld of 1000 rounds", (long long)m);
    fprintf(stderr, "gate: a losing model ran %lld/4000 rounds, a winning one after a closed start %lld/1000\n",
            (long long)m_losing, (long long)m);
}

int main(void) {
    test_lookup();
    test_graft();
    test_record_and_port();
    test_cost();
    test_cost_file();
    test_prune();
    test_gate();
    if (g_fail) fprintf(stderr, "test_ngram: %d check(s) FAILED\n", g_fail);
    else fprintf(stderr, "test_ngram: all checks passed\n");
    return g_fail ? 1 : 0;
}
