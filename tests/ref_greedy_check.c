/* ref_greedy_check — greedy output checked against the naive reference.
 *
 *   ref-greedy-check MODEL_DIR IDS_JSONL
 *
 * IDS_JSONL is microspec-generate's --ids-out (one line per turn: the prompt
 * ids and the generated ids). tests/ref_model.c (double precision, written
 * from the HF modeling code, not from the engine) runs once over
 * prompt ⊕ generated ids with every row's logits, teacher-forced on the
 * engine's own choices; each generated id must be the reference's argmax at
 * its position, or within a near tie of it: ref[best] − ref[chosen] ≤ TIE ·
 * max(1, max|ref|), the engine-vs-reference bound that test_model_ref asserts,
 * doubled (each of the two logits may be off by it). A line without generated
 * ids, or a file without lines, fails: there is nothing to have checked.
 * Exit 0 all chosen ids pass, 1 otherwise, 2 bad usage or unreadable input. */
#include "ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

enum { TIE_PER_LOGIT_E6 = 100 }; /* 1e-4: test_model_ref's TOL */

static int check_line(const ref_model *ref, json_t *line, int64_t index, int64_t *n_checked, int64_t *n_ties) {
    json_t *pj = json_object_get(line, "prompt_ids"), *gj = json_object_get(line, "ids");
    if (!json_is_array(pj) || !json_is_array(gj)) {
        fprintf(stderr, "line %lld: no prompt_ids / ids arrays\n", (long long)index);
        return 2;
    }
    const int64_t np = (int64_t)json_array_size(pj), ng = (int64_t)json_array_size(gj), n = np + ng;
    if (np == 0 || ng == 0) {
        fprintf(stderr, "line %lld: %lld prompt ids, %lld generated: nothing to check\n", (long long)index,
                (long long)np, (long long)ng);
        return 1;
    }
    const int64_t V = ref_model_config(ref)->vocab_size;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    double *lg = malloc((size_t)n * (size_t)V * sizeof *lg); /* [n, V] */
    if (!tok || !lg) {
        free(tok);
        free(lg);
        return 2;
    }
    for (int64_t i = 0; i < np; i++) tok[i] = (int32_t)json_integer_value(json_array_get(pj, (size_t)i));
    for (int64_t i = 0; i < ng; i++) tok[np + i] = (int32_t)json_integer_value(json_array_get(gj, (size_t)i));
    int rc = 0;
    if (ref_forward(ref, tok, n, true, lg) != MS_OK) {
        fprintf(stderr, "line %lld: the reference refused the ids\n", (long long)index);
        rc = 2;
    }
    double worst = 0.0; /* largest scaled margin of a chosen id below the reference's best */
    for (int64_t p = np; p < n && rc == 0; p++) {
        const double *row = lg + (p - 1) * V; /* the logits that chose tok[p] */
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        const double scale = fmax(1.0, ref_max_abs(row, V));
        const double margin = (row[best] - row[tok[p]]) / scale;
        if (isnan(margin) || isnan(worst) || margin > worst) worst = margin;
        if (tok[p] != best) {
            if (margin <= 2.0 * TIE_PER_LOGIT_E6 * 1e-6) {
                (*n_ties)++;
            } else {
                fprintf(stderr,
                        "FAIL line %lld, generated id %lld (position %lld): %d, the reference's argmax is %lld "
                        "(logit %.6g vs %.6g, margin %.3g of the scale, tie bound %.3g)\n",
                        (long long)index, (long long)(p - np), (long long)p, tok[p], (long long)best, row[tok[p]],
                        row[best], margin, 2.0 * TIE_PER_LOGIT_E6 * 1e-6);
                rc = 1;
            }
        }
        (*n_checked)++;
    }
    printf("line %lld: %lld generated ids against the reference, largest scaled margin %.3g\n", (long long)index,
           (long long)ng, worst);
    free(tok);
    free(lg);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: ref-greedy-check MODEL_DIR IDS_JSONL\n");
        return 2;
    }
    ref_model *ref = NULL;
    if (ref_model_load(argv[1], &ref) != MS_OK) {
        fprintf(stderr, "ref-greedy-check: cannot load %s\n", argv[1]);
        return 2;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        ref_model_free(&ref);
        return 2;
    }
    int rc = 0;
    int64_t lines = 0, checked = 0, ties = 0;
    char *buf = NULL;
    size_t cap = 0;
    while (rc != 2 && getline(&buf, &cap, f) > 0) {
        json_error_t je;
        json_t *line = json_loads(buf, 0, &je);
        if (!line) {
            fprintf(stderr, "%s line %lld: %s\n", argv[2], (long long)lines, je.text);
            rc = 2;
            break;
        }
        int r = check_line(ref, line, lines++, &checked, &ties);
        if (r > rc) rc = r;
        json_decref(line);
    }
    free(buf);
    fclose(f);
    ref_model_free(&ref);
    if (lines == 0) {
        fprintf(stderr, "FAIL %s: no lines\n", argv[2]);
        return 1;
    }
    printf("ref-greedy-check: %lld ids in %lld line(s), %lld near-tie partings: %s\n", (long long)checked,
           (long long)lines, (long long)ties, rc == 0 ? "ok" : "FAILED");
    return rc;
}
