/* microspec-bench-prompts — picks the prompts of one benchmark run
 * (tools/bench/microspec_bench.sh): the first N questions of each paper category,
 * in the paper's column order, preceded by the warm-up copies of the first
 * question. Writes a JSON-lines prompt file that microspec-generate
 * --prompts-jsonl reads ({"turns": [text]}) and a manifest (TSV: index,
 * category, source category, question id, warm-up flag) that maps its
 * --stats-out indices back to questions.
 *
 * Categories (eagle2-frspec-notes §5.1; FR-Spec's columns): MT = translation,
 * Conv = the 8 MT-bench categories (taken round-robin so that a reduced set
 * spans them), RAG = rag, Math = math_reasoning, QA = qa, Summ =
 * summarization; HumanEval is Code. Only the first turn is used.
 *
 * Spec-Bench's training split: the last quarter of each source category
 * (MT-bench: questions 8-9 of each of its 8 categories; the others: 60-79 of
 * 80, in file order) is never selected; --train-text writes those questions'
 * first turns as plain text, the corpus microspec-record reads to record
 * draft states for the offline vocabulary tools (issue 16). So the
 * evaluation ("all" = the first three quarters) never sees a prompt that a
 * router or ranking was fitted on. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ms_common.h"

typedef struct {
    const char *name;
    const char *sources[8];
} group;

static const group SB_GROUPS[] = {
    {"MT", {"translation"}},
    {"Conv", {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}},
    {"RAG", {"rag"}},
    {"Math", {"math_reasoning"}},
    {"QA", {"qa"}},
    {"Summ", {"summarization"}},
};

typedef struct {
    char *id, *category, *text;
    bool used;
    bool train; /* Spec-Bench's training split (see the top) */
} question;

/* Marks the last quarter of each source category, in file order. */
static void mark_train(question *qs, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int64_t pos = 0, count = 0;
        for (int64_t j = 0; j < n; j++)
            if (strcmp(qs[j].category, qs[i].category) == 0) count++, pos += j < i;
        qs[i].train = pos >= count - count / 4;
    }
}

static void usage(FILE *f) {
    fprintf(f, "usage: microspec-bench-prompts (--spec-bench F | --human-eval F) --out-jsonl F --out-manifest F\n"
               "                               [--per-category N] [--warmup N] [--max-chars N]\n"
               "       microspec-bench-prompts --spec-bench F --train-text F\n"
               "\n"
               "Spec-Bench's last quarter of each source category is its training split: never\n"
               "selected here; --train-text writes those prompts as plain text (a corpus for\n"
               "microspec-record) and nothing else.\n"
               "\n"
               "  --spec-bench F     Spec-Bench question.jsonl (categories MT Conv RAG Math QA Summ)\n"
               "  --human-eval F     HumanEval question.jsonl (category Code)\n"
               "  --per-category N   questions per category (default all of the evaluation split)\n"
               "  --train-text F     write the training split's prompts to F (Spec-Bench only)\n"
               "  --warmup N         copies of the first question put first, untimed (default 3)\n"
               "  --max-chars N      keep only the first N bytes of each prompt, cut at a UTF-8\n"
               "                     boundary (for models with a short context; default no limit)\n");
}

/* Reads every question: Spec-Bench rows give question_id, category and
 * turns[0]; HumanEval rows give task_id and prompt. */
static ms_status load(const char *path, bool human_eval, question **out, int64_t *n_out) {
    char *text;
    size_t len;
    MS_TRY(ms_read_file(path, &text, &len));
    question *qs = NULL;
    int64_t n = 0, cap = 0, line = 0;
    ms_status st = MS_OK;
    for (char *p = text; *p;) {
        char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        line++;
        if (ll > 0) {
            json_error_t je;
            json_t *row = json_loadb(p, ll, 0, &je);
            json_t *id = NULL, *cat = NULL, *v = NULL;
            if (row && human_eval) {
                id = json_object_get(row, "task_id");
                v = json_object_get(row, "prompt");
            } else if (row) {
                id = json_object_get(row, "question_id");
                cat = json_object_get(row, "category");
                json_t *turns = json_object_get(row, "turns");
                v = json_is_array(turns) ? json_array_get(turns, 0) : NULL;
            }
            const char *bad = !row                                        ? je.text
                              : !json_is_string(v)                        ? "no string prompt / turns[0]"
                              : !human_eval && !json_is_string(cat)       ? "no string category"
                              : !json_is_string(id) && !json_is_integer(id) ? "no question_id / task_id"
                                                                          : NULL;
            if (bad) {
                json_decref(row);
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: %s", path, (long long)line, bad);
                st = MS_ERR_FORMAT;
                break;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                question *q2 = ms_realloc(qs, (size_t)cap * sizeof *q2);
                if (!q2) {
                    json_decref(row);
                    st = MS_ERR_NOMEM;
                    break;
                }
                qs = q2;
            }
            char idbuf[32];
            if (json_is_integer(id)) snprintf(idbuf, sizeof idbuf, "%lld", (long long)json_integer_value(id));
            qs[n] = (question){.id = strdup(json_is_string(id) ? json_string_value(id) : idbuf),
                               .category = strdup(human_eval ? "Code" : json_string_value(cat)),
                               .text = strdup(json_string_value(v))};
            n++;
            json_decref(row);
        }
        p = eol ? eol + 1 : p + ll;
    }
    free(text);
    *out = qs;
    *n_out = n;
    if (st == MS_OK && n == 0) MS_FAIL(MS_ERR_FORMAT, "%s: no questions", path);
    return st;
}

/* Ids and categories go into TSV: no tabs or newlines there. */
static void tsv_clean(char *s) {
    for (; *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r') *s = ' ';
}

static ms_status emit(FILE *js, FILE *man, int64_t *index, const char *cat, question *q, int64_t max_chars,
                      bool warm) {
    size_t n = strlen(q->text);
    if (max_chars > 0 && n > (size_t)max_chars) {
        n = (size_t)max_chars;
        while (n > 0 && ((unsigned char)q->text[n] & 0xC0) == 0x80) n--; /* not inside a UTF-8 sequence */
    }
    json_t *row = json_pack("{s:[s%]}", "turns", q->text, n);
    if (!row) MS_FAIL(MS_ERR_FORMAT, "question %s: the prompt is not valid UTF-8", q->id);
    char *line = json_dumps(row, JSON_COMPACT);
    json_decref(row);
    if (!line) MS_FAIL(MS_ERR_NOMEM, "out of memory");
    fprintf(js, "%s\n", line);
    free(line);
    tsv_clean(q->id);
    tsv_clean(q->category);
    fprintf(man, "%lld\t%s\t%s\t%s\t%d\n", (long long)(*index)++, cat, q->category, q->id, warm ? 1 : 0);
    return MS_OK;
}

static void free_questions(question *qs, int64_t n) {
    for (int64_t i = 0; i < n; i++) free(qs[i].id), free(qs[i].category), free(qs[i].text);
    free(qs);
}

/* --train-text: the training split's first turns, a blank line between them. */
static int write_train(const char *sb, const char *path) {
    question *qs = NULL;
    int64_t n = 0, k = 0;
    if (load(sb, false, &qs, &n) < 0) return 1;
    mark_train(qs, n);
    int rc = 1;
    FILE *f = fopen(path, "w");
    if (!f) {
        MS_LOG_ERROR("%s: cannot write", path);
    } else {
        bool ok = true;
        for (int64_t i = 0; i < n; i++)
            if (qs[i].train) ok = ok && fprintf(f, "%s\n\n", qs[i].text) >= 0, k++;
        if (fclose(f) != 0 || !ok) MS_LOG_ERROR("%s: write failed", path);
        else rc = 0;
    }
    if (rc == 0) fprintf(stderr, "microspec-bench-prompts: %lld training prompts of %lld to %s\n", (long long)k,
                         (long long)n, path);
    free_questions(qs, n);
    return rc;
}

int main(int argc, char **argv) {
    ms_log_set_role("bench-prompts");
    const char *sb = NULL, *he = NULL, *out_js = NULL, *out_man = NULL, *train_text = NULL;
    int64_t per_cat = INT64_MAX, warmup = 3, max_chars = 0;
    enum { O_SB = 1000, O_HE, O_OJS, O_OMAN, O_PER, O_WARM, O_MAXC, O_TRAIN };
    static const struct option opts[] = {
        {"spec-bench", required_argument, 0, O_SB},   {"human-eval", required_argument, 0, O_HE},
        {"out-jsonl", required_argument, 0, O_OJS},   {"out-manifest", required_argument, 0, O_OMAN},
        {"per-category", required_argument, 0, O_PER}, {"warmup", required_argument, 0, O_WARM},
        {"max-chars", required_argument, 0, O_MAXC},  {"help", no_argument, 0, 'h'},
        {"train-text", required_argument, 0, O_TRAIN},
        {0, 0, 0, 0}};
    const char *T = "microspec-bench-prompts";
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case O_SB: sb = optarg; break;
        case O_HE: he = optarg; break;
        case O_OJS: out_js = optarg; break;
        case O_OMAN: out_man = optarg; break;
        case O_PER: ok = ms_cli_i64(T, "--per-category", optarg, 1, 1 << 24, &per_cat); break;
        case O_WARM: ok = ms_cli_i64(T, "--warmup", optarg, 0, 100, &warmup); break;
        case O_MAXC: ok = ms_cli_i64(T, "--max-chars", optarg, 1, 1 << 30, &max_chars); break;
        case O_TRAIN: train_text = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (!ok) return 2;
    }
    if (train_text) {
        if (optind < argc || !sb || he || out_js || out_man) {
            usage(stderr);
            return 2;
        }
        return write_train(sb, train_text);
    }
    if (optind < argc || !out_js || !out_man || (sb != NULL) == (he != NULL)) {
        usage(stderr);
        return 2;
    }
    question *qs = NULL;
    int64_t n = 0;
    int rc = 1;
    FILE *js = NULL, *man = NULL;
    if (load(sb ? sb : he, he != NULL, &qs, &n) < 0) goto done;
    if (sb) {
        mark_train(qs, n);
        for (int64_t i = 0; i < n; i++) qs[i].used = qs[i].train;
    }

    /* the selection, in column order */
    question **sel = ms_calloc((size_t)n, sizeof *sel);
    const char **sel_cat = ms_calloc((size_t)n, sizeof *sel_cat);
    if (!sel || !sel_cat) goto done_sel;
    int64_t ns = 0;
    if (he) {
        for (int64_t i = 0; i < n && i < per_cat; i++) sel[ns] = &qs[i], sel_cat[ns++] = "Code";
    } else {
        for (size_t g = 0; g < sizeof SB_GROUPS / sizeof SB_GROUPS[0]; g++) {
            const group *gr = &SB_GROUPS[g];
            int64_t taken = 0;
            for (bool progress = true; progress && taken < per_cat;) { /* round-robin over the sources */
                progress = false;
                for (int s = 0; s < 8 && gr->sources[s] && taken < per_cat; s++)
                    for (int64_t i = 0; i < n; i++)
                        if (!qs[i].used && strcmp(qs[i].category, gr->sources[s]) == 0) {
                            qs[i].used = progress = true;
                            sel[ns] = &qs[i], sel_cat[ns++] = gr->name;
                            taken++;
                            break;
                        }
            }
            if (taken == 0) MS_LOG_WARN("%s: no questions of category %s", sb, gr->name);
        }
    }
    if (ns == 0) {
        MS_LOG_ERROR("%s: nothing selected", sb ? sb : he);
        goto done_sel;
    }
    if (!(js = fopen(out_js, "w")) || !(man = fopen(out_man, "w"))) {
        MS_LOG_ERROR("%s: cannot write", js ? out_man : out_js);
        goto done_sel;
    }
    int64_t index = 0;
    for (int64_t w = 0; w < warmup; w++)
        if (emit(js, man, &index, sel_cat[0], sel[0], max_chars, true) < 0) goto done_sel;
    for (int64_t i = 0; i < ns; i++)
        if (emit(js, man, &index, sel_cat[i], sel[i], max_chars, false) < 0) goto done_sel;
    rc = 0;
done_sel:
    free(sel);
    free(sel_cat);
done:
    if (js && fclose(js) != 0) rc = 1;
    if (man && fclose(man) != 0) rc = 1;
    free_questions(qs, n);
    return rc;
}
