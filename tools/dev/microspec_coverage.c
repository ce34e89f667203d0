/* microspec-coverage — the model-free coverage study: how much of a real
 * continuation the MicroSpec dynamic window would hold, next to an FR-Spec
 * static list of the same size, with real tokenizers and no model.
 *
 * For each case (a prompt and its reference continuation t_0..t_{n-1}, both
 * as token ids) and each reference token t_i:
 *  - dynamic, context-only (docs/architecture.md §5 without the top-K_pre / C_draft /
 *    C_ver parts, which need a model): the stream S_i = prompt ids followed
 *    by t_0..t_{i-1}; the window I_i = the distinct ids among the last W_max
 *    entries of S_i; t_i is covered when t_i ∈ I_i. The window is kept
 *    incrementally by ms_vocab (dynamic, W = NULL: maps only), reset per case.
 *  - static (FR-Spec, eagle2-frspec-notes.md §3.1): the top-K list of corpus
 *    counts ranked by ms_vocab_rank_counts (the tokenizer's EOS ids forced in,
 *    then descending count, ties by lower id) — the list microspec-freqlist
 *    writes; t_i is covered when t_i is in the list.
 * Coverage of a group = covered reference tokens / reference tokens, pooled
 * over the group's cases (token-weighted). |I_i| is recorded at every check;
 * the report gives its token-weighted mean and its maximum.
 *
 * Text mode reads Spec-Bench and HumanEval question.jsonl files, renders the
 * prompt as the single user message of each tokenizer's chat template
 * (ms_chat_render, generation prompt on, no system message) and encodes the
 * reference text on its own (no special tokens, no EOS appended). Ids mode
 * (--cases) reads cases as token ids, for tests.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ms_tokenizer.h"
#include "ms_vocab.h"

#define TOOL "microspec-coverage"
#define MAX_CATS 32
#define MAX_SIZES 32
#define MAX_TOKS 8
#define MAX_FORCED 64

static void usage(FILE *f) {
    fprintf(f,
            "usage: " TOOL " -t tokenizer.json [-t ...] --spec-bench FILE --human-eval FILE -c CORPUS... [options]\n"
            "       " TOOL " --cases FILE --vocab-size V [--corpus-ids FILE] [--eos ID]... [options]\n"
            "\n"
            "Coverage of reference continuations by the context-only dynamic window\n"
            "(distinct ids among the last W_max stream entries) and by static top-K\n"
            "corpus frequency lists. Writes CSV (stdout or --csv) and a Markdown report (--md).\n"
            "\n"
            "Text mode:\n"
            "  -t, --tokenizer FILE      tokenizer.json (tokenizer_config.json beside it is read);\n"
            "                            repeatable, one study per tokenizer, named by its folder\n"
            "      --spec-bench FILE     Spec-Bench question.jsonl (rows with a \"reference\")\n"
            "      --human-eval FILE     HumanEval question.jsonl (prompt → canonical_solution)\n"
            "  -c, --corpus FILE         text counted for the static lists (repeatable)\n"
            "Ids mode (tests):\n"
            "      --cases FILE          lines \"category<TAB>prompt ids<TAB>reference ids\" ('#' comments)\n"
            "      --corpus-ids FILE     whitespace-separated ids counted for the static lists\n"
            "      --vocab-size V        ids are in [0, V)\n"
            "  -e, --eos ID              an id forced into the static lists (repeatable)\n"
            "Both:\n"
            "  -w, --w-max LIST          comma-separated W_max values (default 1024,2048,3072,4096,8192,16384,32768)\n"
            "  -k, --k LIST              comma-separated K values (default: the same)\n"
            "      --max-per-category N  only the first N cases of each category (default 0 = all)\n"
            "      --csv FILE            write the CSV there instead of stdout\n"
            "      --md FILE             write the Markdown report there\n"
            "  -h, --help                this text\n");
}

/* ---- data ---------------------------------------------------------------- */

typedef struct {
    int cat;
    ms_ids prompt; /* rendered chat prompt ids */
    ms_ids ref;    /* reference continuation ids */
} cov_case;

typedef struct {
    int64_t prompts, prompt_tokens, tokens, covered, size_sum, size_max;
} cov_acc;

typedef struct {
    char name[64];   /* tokenizer folder name, or "ids" */
    char source[512]; /* tokenizer path */
    int64_t V;
    int n_cat;
    char cats[MAX_CATS][32];
    int64_t cat_skipped[MAX_CATS]; /* rows of the category without a reference */
    cov_case *cases;
    int64_t n_cases, cap_cases;
    int64_t *counts; /* [V] corpus id counts */
    int64_t corpus_tokens;
    int32_t forced[MAX_FORCED];
    int n_forced;
    cov_acc *acc; /* [(n_cat + 1) * n_methods]; row n_cat = overall */
} cov_study;

typedef struct {
    int64_t k[MAX_SIZES], w[MAX_SIZES];
    int n_k, n_w;
    int64_t max_per_cat;
} cov_opts;

/* Methods are indexed static K first (0..n_k-1), then dynamic W_max. */
static int n_methods(const cov_opts *o) { return o->n_k + o->n_w; }

static int cat_index(cov_study *s, const char *name, bool add) {
    for (int i = 0; i < s->n_cat; i++)
        if (strcmp(s->cats[i], name) == 0) return i;
    if (!add || s->n_cat == MAX_CATS || strlen(name) >= sizeof s->cats[0]) return -1;
    strcpy(s->cats[s->n_cat], name);
    return s->n_cat++;
}

static int64_t cat_count(const cov_study *s, int cat) {
    int64_t n = 0;
    for (int64_t i = 0; i < s->n_cases; i++) n += s->cases[i].cat == cat;
    return n;
}

/* Adds an empty case of category `cat` and returns it (NULL on NOMEM). */
static cov_case *case_push(cov_study *s, int cat) {
    if (s->n_cases == s->cap_cases) {
        int64_t cap = s->cap_cases ? 2 * s->cap_cases : 64;
        cov_case *c = ms_realloc(s->cases, (size_t)cap * sizeof *c);
        if (!c) return NULL;
        s->cases = c;
        s->cap_cases = cap;
    }
    cov_case *c = &s->cases[s->n_cases++];
    memset(c, 0, sizeof *c);
    c->cat = cat;
    return c;
}

static void study_free(cov_study *s) {
    for (int64_t i = 0; i < s->n_cases; i++) {
        ms_ids_free(&s->cases[i].prompt);
        ms_ids_free(&s->cases[i].ref);
    }
    free(s->cases);
    free(s->counts);
    free(s->acc);
    memset(s, 0, sizeof *s);
}

static bool parse_list(const char *s, const char *flag, int64_t *out, int *n) {
    *n = 0;
    char *copy = strdup(s);
    if (!copy) return false;
    bool ok = true;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && ok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_SIZES) {
            fprintf(stderr, TOOL ": %s: at most %d values\n", flag, MAX_SIZES);
            ok = false;
        } else {
            ok = ms_cli_i64(TOOL, flag, tok, 1, INT32_MAX, &out[(*n)++]);
        }
    }
    if (ok && *n == 0) {
        fprintf(stderr, TOOL ": %s: empty list\n", flag);
        ok = false;
    }
    free(copy);
    return ok;
}

/* ---- text mode: tokenizers, prompts, corpus -------------------------------- */

/* "a/b/qwen3/tokenizer.json" → "qwen3" (the file name when there is no folder). */
static void tokenizer_name(const char *path, char *name, size_t cap) {
    const char *end = strrchr(path, '/');
    const char *start = path;
    if (end) {
        const char *p = end;
        while (p > path && p[-1] != '/') p--;
        start = p;
    } else {
        end = path + strlen(path);
    }
    size_t n = (size_t)(end - start);
    if (n == 0) start = path, n = strlen(path);
    if (n >= cap) n = cap - 1;
    memcpy(name, start, n);
    name[n] = '\0';
}

/* The continuation text of a reference element: a string, or an array of
 * strings (Spec-Bench rag: the answer list) joined with ", ". */
static ms_status reference_text(const char *path, int64_t line, json_t *ref, char **text) {
    if (json_is_string(ref)) {
        *text = strdup(json_string_value(ref));
        return *text ? MS_OK : MS_ERR_NOMEM;
    }
    if (!json_is_array(ref) || json_array_size(ref) == 0)
        MS_FAIL(MS_ERR_FORMAT, "%s:%lld: \"reference\"[0] is neither a string nor a non-empty array of strings",
                path, (long long)line);
    size_t len = 0, i;
    json_t *v;
    json_array_foreach(ref, i, v) {
        if (!json_is_string(v))
            MS_FAIL(MS_ERR_FORMAT, "%s:%lld: \"reference\"[0][%zu] is not a string", path, (long long)line, i);
        len += json_string_length(v) + 2;
    }
    char *t = ms_malloc(len + 1);
    if (!t) return MS_ERR_NOMEM;
    t[0] = '\0';
    size_t at = 0;
    json_array_foreach(ref, i, v) {
        size_t n = json_string_length(v);
        if (i > 0) memcpy(t + at, ", ", 2), at += 2;
        memcpy(t + at, json_string_value(v), n);
        at += n;
    }
    t[at] = '\0';
    *text = t;
    return MS_OK;
}

/* Encode one case: `user` rendered as the single user message with the
 * generation prompt, `ref` encoded plainly. */
static ms_status add_case(cov_study *s, const ms_tok *tok, int cat, const char *user, const char *ref) {
    ms_chat_msg msg = {MS_ROLE_USER, user};
    char *rendered = NULL;
    MS_TRY(ms_chat_render(ms_tok_chat_kind(tok), &msg, 1, true, &rendered));
    cov_case *c = case_push(s, cat);
    ms_status st = c ? MS_OK : MS_ERR_NOMEM;
    if (st == MS_OK) st = ms_tok_encode(tok, rendered, strlen(rendered), true, &c->prompt);
    if (st == MS_OK) st = ms_tok_encode(tok, ref, strlen(ref), false, &c->ref);
    free(rendered);
    return st;
}

/* One JSON object per line; calls `row` for each with its 1-based line. */
typedef ms_status (*row_fn)(cov_study *s, const ms_tok *tok, const cov_opts *o, const char *path, int64_t line,
                            json_t *row);

static ms_status read_jsonl(cov_study *s, const ms_tok *tok, const cov_opts *o, const char *path, row_fn fn) {
    char *data = NULL;
    size_t len = 0;
    MS_TRY(ms_read_file(path, &data, &len));
    ms_status st = MS_OK;
    int64_t line = 0;
    for (char *p = data, *end = data + len; p < end && st == MS_OK;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line++;
        bool blank = true;
        for (size_t i = 0; i < n && blank; i++) blank = p[i] == ' ' || p[i] == '\t' || p[i] == '\r';
        if (!blank) {
            json_error_t je;
            json_t *row = json_loadb(p, n, 0, &je);
            if (!json_is_object(row)) {
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: not a JSON object: %s", path, (long long)line,
                           row ? "wrong type" : je.text);
                st = MS_ERR_FORMAT;
            } else {
                st = fn(s, tok, o, path, line, row);
            }
            json_decref(row);
        }
        p += n + 1;
    }
    free(data);
    return st;
}

static bool cat_full(const cov_study *s, const cov_opts *o, int cat) {
    return o->max_per_cat > 0 && cat_count(s, cat) >= o->max_per_cat;
}

/* Spec-Bench row: category = "mt_bench" for question_id 81–160, else the
 * "category" field; prompt = turns[0]; continuation = reference[0]. */
static ms_status spec_bench_row(cov_study *s, const ms_tok *tok, const cov_opts *o, const char *path, int64_t line,
                                json_t *row) {
    json_t *qid = json_object_get(row, "question_id"), *cat = json_object_get(row, "category");
    json_t *turns = json_object_get(row, "turns"), *ref = json_object_get(row, "reference");
    if (!json_is_integer(qid) || !json_is_string(cat))
        MS_FAIL(MS_ERR_FORMAT, "%s:%lld: missing \"question_id\" (integer) or \"category\" (string)", path,
                (long long)line);
    json_int_t q = json_integer_value(qid);
    const char *name = (q >= 81 && q <= 160) ? "mt_bench" : json_string_value(cat);
    int ci = cat_index(s, name, true);
    if (ci < 0) MS_FAIL(MS_ERR_RANGE, "%s:%lld: too many categories (at most %d)", path, (long long)line, MAX_CATS);
    if (!ref) {
        s->cat_skipped[ci]++;
        return MS_OK;
    }
    if (!json_is_array(ref) || json_array_size(ref) == 0)
        MS_FAIL(MS_ERR_FORMAT, "%s:%lld: \"reference\" is not a non-empty array", path, (long long)line);
    json_t *turn = json_is_array(turns) ? json_array_get(turns, 0) : NULL;
    if (!json_is_string(turn)) MS_FAIL(MS_ERR_FORMAT, "%s:%lld: \"turns\"[0] is not a string", path, (long long)line);
    if (cat_full(s, o, ci)) return MS_OK;
    char *text = NULL;
    MS_TRY(reference_text(path, line, json_array_get(ref, 0), &text));
    ms_status st = add_case(s, tok, ci, json_string_value(turn), text);
    free(text);
    return st;
}

/* HumanEval row: prompt = "prompt", continuation = "canonical_solution". */
static ms_status human_eval_row(cov_study *s, const ms_tok *tok, const cov_opts *o, const char *path, int64_t line,
                                json_t *row) {
    json_t *prompt = json_object_get(row, "prompt"), *sol = json_object_get(row, "canonical_solution");
    if (!json_is_string(prompt) || !json_is_string(sol))
        MS_FAIL(MS_ERR_FORMAT, "%s:%lld: \"prompt\" and \"canonical_solution\" must be strings", path,
                (long long)line);
    int ci = cat_index(s, "humaneval", true);
    if (ci < 0) MS_FAIL(MS_ERR_RANGE, "%s:%lld: too many categories (at most %d)", path, (long long)line, MAX_CATS);
    if (cat_full(s, o, ci)) return MS_OK;
    return add_case(s, tok, ci, json_string_value(prompt), json_string_value(sol));
}

/* Corpus counts as microspec-freqlist makes them: each file encoded without
 * special-token parsing (whole here; freqlist's pieces give the same ids). */
static ms_status count_corpus(cov_study *s, const ms_tok *tok, const char *path) {
    char *text = NULL;
    size_t len = 0;
    MS_TRY(ms_read_file(path, &text, &len));
    ms_ids ids = {0};
    ms_status st = ms_tok_encode(tok, text, len, false, &ids);
    free(text);
    for (int64_t i = 0; st == MS_OK && i < ids.n; i++) {
        if (ids.v[i] < 0 || ids.v[i] >= s->V) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: token id %d out of [0, %lld)", path, ids.v[i],
                       (long long)s->V);
            st = MS_ERR_RANGE;
        } else {
            s->counts[ids.v[i]]++;
        }
    }
    if (st == MS_OK) s->corpus_tokens += ids.n;
    ms_ids_free(&ids);
    return st;
}

/* ---- ids mode -------------------------------------------------------------- */

/* Whitespace-separated ids in [p, end) appended to out; each in [0, V). */
static ms_status parse_ids(const char *path, int64_t line, const char *p, const char *end, int64_t V, ms_ids *out) {
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
        if (p == end) break;
        const char *q = p;
        while (q < end && *q != ' ' && *q != '\t' && *q != '\r' && *q != '\n') q++;
        char buf[24];
        size_t n = (size_t)(q - p);
        int64_t id;
        if (n >= sizeof buf) MS_FAIL(MS_ERR_FORMAT, "%s:%lld: id too long", path, (long long)line);
        memcpy(buf, p, n);
        buf[n] = '\0';
        if (!ms_parse_i64(buf, 0, V - 1, &id))
            MS_FAIL(MS_ERR_FORMAT, "%s:%lld: '%s' is not an id in [0, %lld)", path, (long long)line, buf, (long long)V);
        MS_TRY(ms_ids_push(out, (int32_t)id));
        p = q;
    }
    return MS_OK;
}

static ms_status read_cases(cov_study *s, const cov_opts *o, const char *path) {
    char *data = NULL;
    size_t len = 0;
    MS_TRY(ms_read_file(path, &data, &len));
    ms_status st = MS_OK;
    int64_t line = 0;
    for (char *p = data, *end = data + len; p < end && st == MS_OK;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *e = nl ? nl : end;
        line++;
        char *t1 = memchr(p, '\t', (size_t)(e - p));
        char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(e - t1 - 1)) : NULL;
        bool skip = p == e || *p == '#' || (e - p == 1 && *p == '\r');
        if (!skip && !t2) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: expected \"category<TAB>prompt<TAB>reference\"",
                       path, (long long)line);
            st = MS_ERR_FORMAT;
        } else if (!skip) {
            char name[32];
            size_t n = (size_t)(t1 - p);
            int ci = -1;
            if (n > 0 && n < sizeof name) {
                memcpy(name, p, n);
                name[n] = '\0';
                ci = cat_index(s, name, true);
            }
            if (ci < 0) {
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__,
                           "%s:%lld: category empty, longer than %zu bytes, or more than %d categories", path,
                           (long long)line, sizeof name - 1, MAX_CATS);
                st = MS_ERR_FORMAT;
            } else if (!cat_full(s, o, ci)) {
                cov_case *c = case_push(s, ci);
                st = c ? MS_OK : MS_ERR_NOMEM;
                if (st == MS_OK) st = parse_ids(path, line, t1 + 1, t2, s->V, &c->prompt);
                if (st == MS_OK) st = parse_ids(path, line, t2 + 1, e, s->V, &c->ref);
            }
        }
        p = e + 1;
    }
    free(data);
    return st;
}

static ms_status count_corpus_ids(cov_study *s, const char *path) {
    char *data = NULL;
    size_t len = 0;
    MS_TRY(ms_read_file(path, &data, &len));
    ms_ids ids = {0};
    ms_status st = parse_ids(path, 1, data, data + len, s->V, &ids);
    for (int64_t i = 0; st == MS_OK && i < ids.n; i++) s->counts[ids.v[i]]++;
    if (st == MS_OK) s->corpus_tokens += ids.n;
    ms_ids_free(&ids);
    free(data);
    return st;
}

/* ---- the measurement ------------------------------------------------------- */

static cov_acc *acc_at(cov_study *s, const cov_opts *o, int cat, int method) {
    return &s->acc[(size_t)cat * (size_t)n_methods(o) + (size_t)method];
}

static void acc_case(cov_acc *a, const cov_case *c) {
    a->prompts++;
    a->prompt_tokens += c->prompt.n;
    a->tokens += c->ref.n;
}

static ms_status measure(cov_study *s, const cov_opts *o) {
    int nm = n_methods(o);
    s->acc = ms_calloc((size_t)(s->n_cat + 1) * (size_t)nm, sizeof(cov_acc));
    bool *in_list = ms_calloc((size_t)s->V, sizeof(bool));
    int32_t *list = NULL;
    ms_vocab *win = NULL;
    ms_status st = s->acc && in_list ? MS_OK : MS_ERR_NOMEM;

    /* static top-K */
    for (int m = 0; st == MS_OK && m < o->n_k; m++) {
        int64_t K = o->k[m];
        if (K > s->V) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: K=%lld exceeds the vocabulary size %lld", s->name,
                       (long long)K, (long long)s->V);
            st = MS_ERR_INVALID;
            break;
        }
        free(list);
        list = ms_malloc((size_t)K * sizeof(int32_t));
        if (!list) st = MS_ERR_NOMEM;
        if (st == MS_OK) st = ms_vocab_rank_counts(s->counts, s->V, s->forced, s->n_forced, K, list);
        if (st < 0) break;
        memset(in_list, 0, (size_t)s->V * sizeof(bool));
        for (int64_t r = 0; r < K; r++) in_list[list[r]] = true;
        for (int64_t i = 0; i < s->n_cases; i++) {
            const cov_case *c = &s->cases[i];
            cov_acc *a = acc_at(s, o, c->cat, m);
            acc_case(a, c);
            for (int64_t j = 0; j < c->ref.n; j++) a->covered += in_list[c->ref.v[j]];
            a->size_sum += K * c->ref.n;
            if (c->ref.n > 0 && K > a->size_max) a->size_max = K;
        }
    }

    /* dynamic, context-only: S = prompt, then each reference token after its check */
    for (int m = 0; st == MS_OK && m < o->n_w; m++) {
        st = ms_vocab_new_dynamic(NULL, s->V, 1, o->w[m], &win);
        for (int64_t i = 0; st == MS_OK && i < s->n_cases; i++) {
            const cov_case *c = &s->cases[i];
            cov_acc *a = acc_at(s, o, c->cat, o->n_k + m);
            acc_case(a, c);
            ms_vocab_reset(win);
            st = ms_vocab_append(win, c->prompt.v, c->prompt.n);
            for (int64_t j = 0; st == MS_OK && j < c->ref.n; j++) {
                int64_t size = ms_vocab_size(win);
                a->size_sum += size;
                if (size > a->size_max) a->size_max = size;
                a->covered += ms_vocab_contains(win, c->ref.v[j]);
                st = ms_vocab_append(win, &c->ref.v[j], 1);
            }
        }
        ms_vocab_free(&win);
    }

    /* overall = the sum of the categories */
    for (int m = 0; st == MS_OK && m < nm; m++) {
        cov_acc *all = acc_at(s, o, s->n_cat, m);
        for (int ci = 0; ci < s->n_cat; ci++) {
            const cov_acc *a = acc_at(s, o, ci, m);
            all->prompts += a->prompts;
            all->prompt_tokens += a->prompt_tokens;
            all->tokens += a->tokens;
            all->covered += a->covered;
            all->size_sum += a->size_sum;
            if (a->size_max > all->size_max) all->size_max = a->size_max;
        }
    }
    free(list);
    free(in_list);
    return st;
}

/* ---- output ---------------------------------------------------------------- */

static const char *cat_name(const cov_study *s, int ci) { return ci == s->n_cat ? "overall" : s->cats[ci]; }

static void method_label(const cov_opts *o, int m, char *buf, size_t cap) {
    if (m < o->n_k)
        snprintf(buf, cap, "static K=%lld", (long long)o->k[m]);
    else
        snprintf(buf, cap, "dynamic W_max=%lld", (long long)o->w[m - o->n_k]);
}

static void write_csv_header(FILE *f) {
    fprintf(f, "tokenizer,category,method,size,prompts,prompt_tokens,ref_tokens,covered,coverage,mean_window,"
               "max_window\n");
}

static void write_csv(FILE *f, cov_study *s, const cov_opts *o) {
    for (int ci = 0; ci <= s->n_cat; ci++) {
        for (int m = 0; m < n_methods(o); m++) {
            const cov_acc *a = acc_at(s, o, ci, m);
            if (a->tokens == 0) continue; /* a category with no reference tokens has no coverage */
            bool dyn = m >= o->n_k;
            fprintf(f, "%s,%s,%s,%lld,%lld,%lld,%lld,%lld,%.6f,%.3f,%lld\n", s->name, cat_name(s, ci),
                    dyn ? "dynamic" : "static", (long long)(dyn ? o->w[m - o->n_k] : o->k[m]), (long long)a->prompts,
                    (long long)a->prompt_tokens, (long long)a->tokens, (long long)a->covered,
                    (double)a->covered / (double)a->tokens, (double)a->size_sum / (double)a->tokens,
                    (long long)a->size_max);
        }
    }
}

static void write_md_definitions(FILE *f, const cov_opts *o) {
    fprintf(f,
            "## Definitions\n\n"
            "- **Case**: a prompt and its reference continuation, as token ids of one tokenizer. The prompt is the\n"
            "  question rendered as the single user message of the tokenizer's chat template (`ms_chat_render`,\n"
            "  generation prompt appended, no system message) and encoded with special tokens parsed; the\n"
            "  continuation t_0..t_{n-1} is the reference text encoded on its own (no special tokens, no EOS added).\n"
            "  Spec-Bench: rows that have a `reference`; prompt = `turns[0]`, continuation = `reference[0]` (MT-bench\n"
            "  rows, question_id 81–160, category `mt_bench`: turn 1 → reference[0]; `rag`: `reference[0]` is a list\n"
            "  of answers, joined with \", \"). Spec-Bench `qa` rows carry no reference, so that category is empty.\n"
            "  HumanEval: prompt = `prompt`, continuation = `canonical_solution`.\n"
            "- **Dynamic, context-only window** (docs/architecture.md §5 without the top-K_pre, C_draft and C_ver parts,\n"
            "  which need a model): before reference token t_i the stream is S_i = prompt ids, t_0, …, t_{i-1};\n"
            "  the window I_i = the distinct ids among the last W_max entries of S_i (FIFO by recency, so\n"
            "  |I_i| ≤ W_max). t_i is covered when t_i ∈ I_i. The stream starts afresh for every case.\n"
            "- **Static top-K list** (FR-Spec): the corpus files are encoded (no special tokens) and ids counted;\n"
            "  `ms_vocab_rank_counts` ranks them — the tokenizer's EOS ids forced in first, then descending count,\n"
            "  ties by lower id, never-seen ids last by id — and the first K form the list (the list\n"
            "  `microspec-freqlist` writes). t_i is covered when it is in the list.\n"
            "- **Coverage** of a group (category or overall) = covered reference tokens / reference tokens, pooled\n"
            "  over the group's cases (token-weighted, not a mean of per-case ratios). Overall = all categories.\n"
            "- **Mean |I|** = the mean over reference tokens of |I_i| at the check of t_i (token-weighted); max |I|\n"
            "  = its largest value. A static list always has |I| = K.\n"
            "- W_max values:");
    for (int i = 0; i < o->n_w; i++) fprintf(f, " %lld", (long long)o->w[i]);
    fprintf(f, "; K values:");
    for (int i = 0; i < o->n_k; i++) fprintf(f, " %lld", (long long)o->k[i]);
    fprintf(f, ".\n\n");
}

static void write_md_study(FILE *f, cov_study *s, const cov_opts *o) {
    int nm = n_methods(o);
    int64_t distinct = 0;
    for (int64_t id = 0; id < s->V; id++) distinct += s->counts[id] > 0;
    fprintf(f, "## %s\n\n", s->name);
    fprintf(f, "Tokenizer `%s`, V = %lld ids. Static lists from %lld corpus tokens (%lld distinct ids); forced ids:",
            s->source, (long long)s->V, (long long)s->corpus_tokens, (long long)distinct);
    for (int i = 0; i < s->n_forced; i++) fprintf(f, " %d", s->forced[i]);
    fprintf(f, ".\n\n");

    /* the data */
    fprintf(f, "| | ");
    for (int ci = 0; ci <= s->n_cat; ci++) fprintf(f, "%s | ", cat_name(s, ci));
    fprintf(f, "\n|---|");
    for (int ci = 0; ci <= s->n_cat; ci++) fprintf(f, "---:|");
    const char *rows[] = {"cases", "prompt tokens (mean)", "reference tokens (mean)", "reference tokens (total)"};
    for (int r = 0; r < 4; r++) {
        fprintf(f, "\n| %s | ", rows[r]);
        for (int ci = 0; ci <= s->n_cat; ci++) {
            const cov_acc *a = acc_at(s, o, ci, 0);
            double np = a->prompts ? (double)a->prompts : 1.0;
            switch (r) {
            case 0: fprintf(f, "%lld | ", (long long)a->prompts); break;
            case 1: fprintf(f, a->prompts ? "%.1f | " : "— | ", (double)a->prompt_tokens / np); break;
            case 2: fprintf(f, a->prompts ? "%.1f | " : "— | ", (double)a->tokens / np); break;
            default: fprintf(f, "%lld | ", (long long)a->tokens); break;
            }
        }
    }
    fprintf(f, "\n\n");

    /* coverage */
    fprintf(f, "Coverage (share of reference tokens inside):\n\n| method | ");
    for (int ci = 0; ci <= s->n_cat; ci++) fprintf(f, "%s | ", cat_name(s, ci));
    fprintf(f, "\n|---|");
    for (int ci = 0; ci <= s->n_cat; ci++) fprintf(f, "---:|");
    for (int m = 0; m < nm; m++) {
        char label[64];
        method_label(o, m, label, sizeof label);
        fprintf(f, "\n| %s | ", label);
        for (int ci = 0; ci <= s->n_cat; ci++) {
            const cov_acc *a = acc_at(s, o, ci, m);
            if (a->tokens)
                fprintf(f, "%.2f%% | ", 100.0 * (double)a->covered / (double)a->tokens);
            else
                fprintf(f, "— | ");
        }
    }
    fprintf(f, "\n\n");

    /* window size */
    fprintf(f, "Dynamic window size reached, mean |I| / max |I| (distinct ids, ≤ W_max):\n\n| W_max | ");
    for (int ci = 0; ci <= s->n_cat; ci++) fprintf(f, "%s | ", cat_name(s, ci));
    fprintf(f, "\n|---|");
    for (int ci = 0; ci <= s->n_cat; ci++) fprintf(f, "---:|");
    for (int m = o->n_k; m < nm; m++) {
        fprintf(f, "\n| %lld | ", (long long)o->w[m - o->n_k]);
        for (int ci = 0; ci <= s->n_cat; ci++) {
            const cov_acc *a = acc_at(s, o, ci, m);
            if (a->tokens)
                fprintf(f, "%.0f / %lld | ", (double)a->size_sum / (double)a->tokens, (long long)a->size_max);
            else
                fprintf(f, "— | ");
        }
    }
    fprintf(f, "\n\n");
    for (int ci = 0; ci < s->n_cat; ci++)
        if (s->cat_skipped[ci])
            fprintf(f, "%s: %lld row(s) without a reference skipped.  \n", s->cats[ci], (long long)s->cat_skipped[ci]);
    fprintf(f, "\n");
}

/* ---- main ------------------------------------------------------------------ */

/* The command line. */
typedef struct {
    const char *toks[MAX_TOKS], *corpus[64];
    int n_toks, n_corpus, n_eos;
    const char *spec_bench, *human_eval, *cases_path, *corpus_ids;
    const char *csv_path, *md_path;
    int64_t vocab_size, eos[MAX_FORCED];
    cov_opts o;
} cov_args;

enum { OPT_SB = 256, OPT_HE, OPT_CASES, OPT_CIDS, OPT_VOCAB, OPT_MAXCAT, OPT_CSV, OPT_MD };
static const struct option opts[] = {
    {"tokenizer", required_argument, NULL, 't'},   {"spec-bench", required_argument, NULL, OPT_SB},
    {"human-eval", required_argument, NULL, OPT_HE}, {"corpus", required_argument, NULL, 'c'},
    {"cases", required_argument, NULL, OPT_CASES}, {"corpus-ids", required_argument, NULL, OPT_CIDS},
    {"vocab-size", required_argument, NULL, OPT_VOCAB}, {"eos", required_argument, NULL, 'e'},
    {"w-max", required_argument, NULL, 'w'},       {"k", required_argument, NULL, 'k'},
    {"max-per-category", required_argument, NULL, OPT_MAXCAT}, {"csv", required_argument, NULL, OPT_CSV},
    {"md", required_argument, NULL, OPT_MD},       {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* One option into *a: 1 ok, 0 refused (after a message), -1 not an option. */
static int apply_opt(int c, const char *v, cov_args *a) {
    switch (c) {
    case 't':
        if (a->n_toks == MAX_TOKS) {
            fprintf(stderr, TOOL ": at most %d --tokenizer\n", MAX_TOKS);
            return 0;
        }
        a->toks[a->n_toks++] = v;
        return 1;
    case 'c':
        if (a->n_corpus == (int)(sizeof a->corpus / sizeof *a->corpus)) {
            fprintf(stderr, TOOL ": at most %d --corpus files\n", a->n_corpus);
            return 0;
        }
        a->corpus[a->n_corpus++] = v;
        return 1;
    case 'e':
        if (a->n_eos == MAX_FORCED / 2) {
            fprintf(stderr, TOOL ": at most %d --eos ids\n", a->n_eos);
            return 0;
        }
        if (!ms_cli_i64(TOOL, "--eos", v, 0, INT32_MAX - 1, &a->eos[a->n_eos])) return 0;
        a->n_eos++;
        return 1;
    case 'w': return parse_list(v, "--w-max", a->o.w, &a->o.n_w);
    case 'k': return parse_list(v, "--k", a->o.k, &a->o.n_k);
    case OPT_SB: a->spec_bench = v; return 1;
    case OPT_HE: a->human_eval = v; return 1;
    case OPT_CASES: a->cases_path = v; return 1;
    case OPT_CIDS: a->corpus_ids = v; return 1;
    case OPT_VOCAB: return ms_cli_i64(TOOL, "--vocab-size", v, 1, INT32_MAX, &a->vocab_size);
    case OPT_MAXCAT: return ms_cli_i64(TOOL, "--max-per-category", v, 0, INT64_MAX, &a->o.max_per_cat);
    case OPT_CSV: a->csv_path = v; return 1;
    case OPT_MD: a->md_path = v; return 1;
    default: return -1;
    }
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, cov_args *a) {
    memset(a, 0, sizeof *a);
    a->o = (cov_opts){.k = {1024, 2048, 3072, 4096, 8192, 16384, 32768}, .n_k = 7};
    memcpy(a->o.w, a->o.k, sizeof a->o.w);
    a->o.n_w = 7;
    int c;
    while ((c = getopt_long(argc, argv, "t:c:e:w:k:h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        int ok = apply_opt(c, optarg, a);
        if (ok < 0) usage(stderr);
        if (ok <= 0) return 2;
    }
    bool ids_mode = a->cases_path != NULL;
    if (optind < argc) {
        fprintf(stderr, TOOL ": unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (ids_mode ? (a->n_toks || a->spec_bench || a->human_eval || a->n_corpus || !a->vocab_size)
                 : (!a->n_toks || (!a->spec_bench && !a->human_eval) || !a->n_corpus || a->corpus_ids ||
                    a->vocab_size)) {
        fprintf(stderr, TOOL ": use either --tokenizer with --spec-bench/--human-eval and --corpus, or --cases "
                        "with --vocab-size (and --corpus-ids)\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Study t's name, vocabulary, categories and forced ids; *tok is its
 * tokenizer in text mode (NULL in ids mode). */
static ms_status study_setup(cov_study *s, const cov_args *a, int t, ms_tok **tok) {
    if (a->cases_path) {
        snprintf(s->name, sizeof s->name, "ids");
        snprintf(s->source, sizeof s->source, "%s", a->cases_path);
        s->V = a->vocab_size;
    } else {
        tokenizer_name(a->toks[t], s->name, sizeof s->name);
        snprintf(s->source, sizeof s->source, "%s", a->toks[t]);
        MS_TRY(ms_tok_load_path(a->toks[t], tok));
        s->V = ms_tok_vocab_size(*tok);
        if (ms_tok_chat_kind(*tok) == MS_CHAT_NONE) {
            fprintf(stderr, TOOL ": %s has no supported chat template\n", a->toks[t]);
            return MS_ERR_UNSUPPORTED;
        }
        /* the fixed Spec-Bench + HumanEval column order */
        const char *fixed[] = {"mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag",
                               "humaneval"};
        for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) cat_index(s, fixed[i], true);
    }
    for (int i = 0; i < a->n_eos; i++) {
        if (a->eos[i] >= s->V) {
            fprintf(stderr, TOOL ": --eos %lld out of [0, %lld)\n", (long long)a->eos[i], (long long)s->V);
            return MS_ERR_RANGE;
        }
        s->forced[s->n_forced++] = (int32_t)a->eos[i];
    }
    if (*tok) {
        const int32_t *te;
        int nte = ms_tok_eos(*tok, &te);
        for (int i = 0; i < nte && s->n_forced < MAX_FORCED; i++) s->forced[s->n_forced++] = te[i];
    }
    return MS_OK;
}

/* Read study t's cases and corpus, and measure it. */
static ms_status study_run(cov_study *s, const cov_args *a, int t) {
    ms_tok *tok = NULL;
    double t0 = ms_now_s();
    ms_status st = study_setup(s, a, t, &tok);
    if (st == MS_OK) {
        s->counts = ms_calloc((size_t)s->V, sizeof(int64_t));
        st = s->counts ? MS_OK : MS_ERR_NOMEM;
    }
    if (a->cases_path) {
        if (st == MS_OK) st = read_cases(s, &a->o, a->cases_path);
        if (st == MS_OK && a->corpus_ids) st = count_corpus_ids(s, a->corpus_ids);
    } else {
        if (st == MS_OK && a->spec_bench) st = read_jsonl(s, tok, &a->o, a->spec_bench, spec_bench_row);
        if (st == MS_OK && a->human_eval) st = read_jsonl(s, tok, &a->o, a->human_eval, human_eval_row);
        for (int i = 0; st == MS_OK && i < a->n_corpus; i++) st = count_corpus(s, tok, a->corpus[i]);
    }
    ms_tok_free(&tok);
    if (st == MS_OK) st = measure(s, &a->o);
    if (st < 0) return st;
    fprintf(stderr, TOOL ": %s: %lld cases, %lld corpus tokens, %.2f s\n", s->name, (long long)s->n_cases,
            (long long)s->corpus_tokens, ms_now_s() - t0);
    return MS_OK;
}

/* The CSV (stdout or --csv) and the Markdown report (--md); the exit code. */
static int write_outputs(const cov_args *a, cov_study *studies, int n_studies) {
    int rc = 1;
    FILE *csv = a->csv_path ? fopen(a->csv_path, "w") : stdout, *md = NULL;
    if (!csv) {
        fprintf(stderr, TOOL ": %s: %s\n", a->csv_path, strerror(errno));
        return 1;
    }
    write_csv_header(csv);
    for (int t = 0; t < n_studies; t++) write_csv(csv, &studies[t], &a->o);
    if (a->md_path) {
        md = fopen(a->md_path, "w");
        if (!md) {
            fprintf(stderr, TOOL ": %s: %s\n", a->md_path, strerror(errno));
            goto done;
        }
        write_md_definitions(md, &a->o);
        for (int t = 0; t < n_studies; t++) write_md_study(md, &studies[t], &a->o);
    }
    rc = 0;
done:
    if (csv != stdout && fclose(csv) != 0) {
        fprintf(stderr, TOOL ": %s: write failed\n", a->csv_path);
        rc = 1;
    } else if (csv == stdout && fflush(stdout) != 0) {
        rc = 1;
    }
    if (md && fclose(md) != 0) {
        fprintf(stderr, TOOL ": %s: write failed\n", a->md_path);
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    ms_log_set_role("coverage");
    cov_args a;
    int code = parse_args(argc, argv, &a);
    if (code >= 0) return code;
    int n_studies = a.cases_path ? 1 : a.n_toks;
    cov_study *studies = ms_calloc((size_t)n_studies, sizeof *studies);
    int rc = 1;
    if (studies) {
        int t = 0;
        while (t < n_studies && study_run(&studies[t], &a, t) == MS_OK) t++;
        if (t == n_studies) rc = write_outputs(&a, studies, n_studies);
    }
    for (int t = 0; studies && t < n_studies; t++) study_free(&studies[t]);
    free(studies);
    return rc;
}
