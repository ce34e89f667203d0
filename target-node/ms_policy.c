/* ms_policy.c — the cost-aware verify policy (ms_policy.h). */
#include "ms_policy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void ms_cost_init(ms_cost *c) { memset(c, 0, sizeof *c); }

void ms_cost_observe(ms_cost *c, int64_t n, double s) {
    if (n < 1 || n > MS_TREE_MAX || !(s > 0.0) || !isfinite(s)) return;
    c->c[n] = c->c[n] > 0.0 ? c->c[n] + (s - c->c[n]) / 8.0 : s;
}

bool ms_cost_ready(const ms_cost *c) {
    if (!(c->c[1] > 0.0)) return false;
    for (int64_t n = 2; n <= MS_TREE_MAX; n++)
        if (c->c[n] > 0.0) return true;
    return false;
}

double ms_cost_at(const ms_cost *c, int64_t n) {
    if (n < 1) n = 1;
    if (n > MS_TREE_MAX) n = MS_TREE_MAX;
    if (c->c[n] > 0.0) return c->c[n];
    int64_t lo = n - 1, hi = n + 1;
    while (lo >= 1 && !(c->c[lo] > 0.0)) lo--;
    while (hi <= MS_TREE_MAX && !(c->c[hi] > 0.0)) hi++;
    if (lo >= 1 && hi <= MS_TREE_MAX)
        return c->c[lo] + (c->c[hi] - c->c[lo]) * (double)(n - lo) / (double)(hi - lo);
    if (lo < 1) return hi <= MS_TREE_MAX ? c->c[hi] : 0.0; /* below every measure: no cheaper than the smallest */
    int64_t lo2 = lo - 1;
    while (lo2 >= 1 && !(c->c[lo2] > 0.0)) lo2--;
    /* one measure only: assume every further row costs a whole forward (no speculation is assumed to pay) */
    const double slope = lo2 >= 1 ? (c->c[lo] - c->c[lo2]) / (double)(lo - lo2) : c->c[lo] / (double)lo;
    return c->c[lo] + (slope > 0.0 ? slope : 0.0) * (double)(n - lo);
}

#define COST_MAGIC "microspec-verify-cost 1"
static const int cost_rows[4] = {1, 2, 4, 8};

/* v[i] = c(2^i), i < 4: each finite, positive, below 60 s, and each at least
 * half and at most 2.5 times the one before (twice the rows never cost more
 * than twice as much, give or take noise: a table past that was measured on
 * a loaded machine, and a 2-row cost of 3x a plain step, read from such a
 * file, kept every later run from ever verifying one drafted token). */
static bool costs_plausible(const double v[4]) {
    for (int i = 0; i < 4; i++)
        if (!isfinite(v[i]) || !(v[i] > 0.0) || !(v[i] < 60.0) ||
            (i > 0 && (v[i] < 0.5 * v[i - 1] || v[i] > 2.5 * v[i - 1])))
            return false;
    return true;
}

bool ms_cost_plausible(const ms_cost *c) {
    double v[4];
    for (int i = 0; i < 4; i++) v[i] = ms_cost_at(c, cost_rows[i]);
    return costs_plausible(v);
}

bool ms_cost_load(ms_cost *c, const char *path) {
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return false;
    char line[256], tail[2];
    double v[4];
    const bool got = fgets(line, sizeof line, f) != NULL;
    const bool more = fgetc(f) != EOF;
    fclose(f);
    if (!got || more || strncmp(line, COST_MAGIC " ", sizeof COST_MAGIC) != 0) return false;
    if (sscanf(line + sizeof COST_MAGIC, "%lf %lf %lf %lf%1s", &v[0], &v[1], &v[2], &v[3], tail) != 4) return false;
    if (!costs_plausible(v)) return false;
    for (int i = 0; i < 4; i++) c->c[cost_rows[i]] = v[i];
    return true;
}

ms_status ms_cost_save(const ms_cost *c, const char *path) {
    if (!path) MS_FAIL(MS_ERR_INVALID, "verify cost: no file to save to");
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
        MS_FAIL(MS_ERR_INVALID, "verify cost: path too long: %s", path);
    FILE *f = fopen(tmp, "w");
    if (!f) MS_FAIL(MS_ERR_IO, "verify cost: cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, COST_MAGIC);
    for (int i = 0; i < 4; i++) fprintf(f, " %.9g", ms_cost_at(c, cost_rows[i]));
    fprintf(f, "\n");
    const bool ok = fflush(f) == 0 && !ferror(f);
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        const int e = errno;
        remove(tmp);
        MS_FAIL(MS_ERR_IO, "verify cost: cannot write %s: %s", path, strerror(e));
    }
    return MS_OK;
}

int64_t ms_policy_prune(const ms_tree *in, const ms_cost *c, ms_tree *out, int32_t *map, double *expected) {
    const int64_t n = in->n;
    double p[MS_TREE_MAX];
    int32_t order[MS_TREE_MAX];
    bool keep[MS_TREE_MAX];
    /* P(v): exp(score), at most the parent's (parents precede children) */
    p[0] = 1.0;
    for (int64_t i = 1; i < n; i++) {
        double q = exp((double)in->score[i]);
        if (!(q <= 1.0)) q = q > 1.0 ? 1.0 : 0.0; /* NaN → 0 */
        const double pp = p[in->parent[i]];
        p[i] = q < pp ? q : pp;
    }
    int64_t best_k = n - 1;
    double best_sum = 0.0;
    /* nodes 1..n-1 by P descending, ties to the lower index (so parents come first) */
    for (int64_t i = 1; i < n; i++) order[i - 1] = (int32_t)i;
    for (int64_t i = 1; i < n - 1; i++) { /* insertion sort: n ≤ 64 */
        const int32_t v = order[i];
        int64_t j = i - 1;
        while (j >= 0 && (p[order[j]] < p[v] || (p[order[j]] == p[v] && order[j] > v))) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = v;
    }
    if (ms_cost_ready(c)) {
        double sum = 0.0, best = 1.0 / ms_cost_at(c, 1);
        best_k = 0;
        for (int64_t k = 1; k < n; k++) {
            sum += p[order[k - 1]];
            const double r = (1.0 + sum) / ms_cost_at(c, k + 1);
            if (r > best) {
                best = r;
                best_k = k;
                best_sum = sum;
            }
        }
    } else {
        for (int64_t k = 0; k < n - 1; k++) best_sum += p[order[k]];
    }
    memset(keep, 0, sizeof keep);
    keep[0] = true;
    for (int64_t k = 0; k < best_k; k++) keep[order[k]] = true;
    int32_t idx[MS_TREE_MAX]; /* in's node → out's, or −1 */
    memset(out, 0, sizeof *out);
    for (int64_t i = 0; i < n; i++) {
        idx[i] = -1;
        if (!keep[i] || (i > 0 && idx[in->parent[i]] < 0)) continue; /* a parent is kept first (P order) */
        const int32_t j = (int32_t)out->n++;
        idx[i] = j;
        map[j] = (int32_t)i;
        out->token[j] = in->token[i];
        out->score[j] = in->score[i];
        if (i == 0) {
            out->parent[0] = -1;
            out->depth[0] = 0;
            out->mask[0] = 1;
        } else {
            const int32_t pj = idx[in->parent[i]];
            out->parent[j] = pj;
            out->depth[j] = out->depth[pj] + 1;
            out->mask[j] = out->mask[pj] | (uint64_t)1 << j;
            out->ngram |= (in->ngram >> i & 1) << j;
        }
    }
    if (expected) *expected = best_sum;
    return out->n;
}

/* ---- the draft-model gate ---------------------------------------------------- */

#define GATE_DECAY 0.9
#define GATE_WARM 5
#define GATE_PROBE 3
#define GATE_MARGIN 0.95 /* the model keeps running unless clearly behind (timing noise) */
/* A probe costs ~2 plain steps a round (its catch-up, the draft chain, a
 * wider verify): at 4 rounds every 16-128 a 256-token math answer paid 7-12 %
 * for probes of a 0.5B draft that never paid on the AVX2 path. Up to 512
 * rounds apart, a workload where the model loses pays ~1 %. */
#define GATE_BACKOFF_MIN 32
#define GATE_BACKOFF_MAX 512

void ms_gate_init(ms_gate *g) {
    memset(g, 0, sizeof *g);
    g->d_s = -1.0;
    g->backoff = GATE_BACKOFF_MIN;
}

void ms_gate_start_closed(ms_gate *g) {
    if (g->started) return;
    g->started = true;
    g->next = true;
    g->skip_left = GATE_BACKOFF_MIN - 1; /* this decision is the first of the run */
}

void ms_gate_observe(ms_gate *g, bool skipped, bool catchup, int64_t tokens, double draft_s, double verify_s) {
    g->started = true;
    if (skipped) {
        g->p_tok = GATE_DECAY * g->p_tok + (double)tokens;
        g->p_s = GATE_DECAY * g->p_s + draft_s + verify_s;
    } else if (!catchup || g->d_s >= 0.0) {
        /* a round that first commits a prompt or the tokens of skipped
         * rounds is charged an ordinary round's draft time (none known yet:
         * the round is not counted) */
        const double d = catchup ? g->d_s : draft_s;
        if (!catchup) g->d_s = g->d_s >= 0.0 ? GATE_DECAY * g->d_s + (1.0 - GATE_DECAY) * draft_s : draft_s;
        g->m_tok = GATE_DECAY * g->m_tok + (double)tokens;
        g->m_s = GATE_DECAY * g->m_s + d + verify_s;
        g->m_rounds++;
    }
    g->prev_skipped = skipped;
}

static bool gate_decide(ms_gate *g, double c1) {
    if (g->skip_left > 0) {
        g->skip_left--;
        return true;
    }
    if (g->prev_skipped) { /* a run without the model is over: probe it for GATE_PROBE rounds */
        g->probe_left = GATE_PROBE - 1;
        /* judged on its own rounds: blended with the rounds that closed the
         * gate (decay 0.9 a round), a 3-round probe could not show a model
         * that had come to win, and the gate stayed shut for another backoff */
        g->m_tok = g->m_s = 0.0;
        return false;
    }
    if (g->probe_left > 0) {
        g->probe_left--;
        return false;
    }
    if (!(c1 > 0.0) || g->m_rounds < GATE_WARM || !(g->m_s > 0.0)) return false;
    const double rate_m = g->m_tok / g->m_s, rate_p = g->p_s > 0.0 ? g->p_tok / g->p_s : 1.0 / c1;
    if (rate_m >= GATE_MARGIN * rate_p) {
        g->backoff = GATE_BACKOFF_MIN;
        return false;
    }
    g->skip_left = g->backoff - 1;
    g->backoff = g->backoff * 2 < GATE_BACKOFF_MAX ? g->backoff * 2 : GATE_BACKOFF_MAX;
    return true;
}

bool ms_gate_next(ms_gate *g, double c1) { return g->next = gate_decide(g, c1); }
