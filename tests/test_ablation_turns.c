/* test_ablation_turns.c — multi-turn batch mode (microspec-generate --turns)
 * and the multi-message chat templates.
 *
 * 1. Golden renderings: [system, user, assistant, user] + generation prompt
 *    through the Llama-3 and ChatML (Qwen3) templates must equal strings
 *    written by hand from the HF Jinja templates in ../shared/tokenizers
 *    (Llama-3: bos once, every content `| trim`-ed; Qwen3: no trim, an
 *    assistant turn before the last user query loses its <think> block). With
 *    the real tokenizers the template kind is detected, each special marker
 *    encodes to one id, and decoding the ids gives the text back.
 * 2. Raw two turns (stories260K): `--turns 2` prints turn 1 then turn 2 of
 *    each line; turn 2 must equal an in-process autoregressive run on
 *    BOS ⊕ encode(t1) ⊕ generated ids ⊕ encode("\n\n" + t2), built here from
 *    ids. The tool runs speculatively (layerskip, context stream) — greedy, so
 *    the text must still match. The stats file has one line per turn with the
 *    turn number, the question id / category, the context length and the
 *    per-phase times; a 1-turn line gives one line, a 3-turn line two.
 * 3. Chat two turns: a random target with the real Qwen3 (and Llama-3)
 *    tokenizer, --chat --system: turn 2 must equal an AR run on the rendering
 *    of [system, user t1, assistant a1, user t2], a1 = turn 1's ids decoded
 *    without special tokens and whitespace-stripped (Spec-Bench's
 *    post-processing).
 * 4. CLI refusals (on stories260K): --vocab-stream without the dynamic
 *    window, bad --vocab-stream / --lm-head / --turns values.
 */
#include "spec_util.h"

#include "ms_tokenizer.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <jansson.h>

extern char **environ;

static const char *GEN = MS_BUILD_DIR "/tools/microspec-generate";
/* Parts that got past their SKIP: with none, the test ran nothing and says so
 * with the skip code instead of passing. */
static int g_parts_ran;

/* Run argv with stdout to out_path (stderr to /dev/null unless SPEC_VERBOSE). */
static int run_to_file(const char *const *argv, const char *out_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!getenv("SPEC_VERBOSE")) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int ws = 0;
    if (waitpid(pid, &ws, 0) < 0) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128;
}

/* ---- 1. golden renderings --------------------------------------------------- */

static void golden_case(const char *tok_dir, ms_chat_kind want_kind, const ms_chat_msg *msgs, int64_t n,
                        const char *golden, const char *const *markers, const int64_t *marker_count, int n_markers) {
    char tj[512], tc[512];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", tok_dir);
    snprintf(tc, sizeof tc, "%s/tokenizer_config.json", tok_dir);
    ms_tok *tok = NULL;
    ms_status s = ms_tok_load_hf(tj, tc, &tok);
    SPEC_CHECK(s >= 0, "%s: load", tok_dir);
    if (s < 0) return;
    SPEC_CHECK(ms_tok_chat_kind(tok) == want_kind, "%s: chat kind %d, want %d", tok_dir, (int)ms_tok_chat_kind(tok),
               (int)want_kind);
    char *text = NULL;
    s = ms_chat_render(want_kind, msgs, n, true, &text);
    SPEC_CHECK(s >= 0 && text && !strcmp(text, golden), "%s: rendering differs:\n--- got ---\n%s\n--- want ---\n%s",
               tok_dir, text ? text : "(null)", golden);
    ms_ids ids = {0};
    if (text && ms_tok_encode(tok, text, strlen(text), true, &ids) >= 0) {
        for (int m = 0; m < n_markers; m++) {
            int32_t id = ms_tok_find(tok, markers[m]);
            int64_t c = 0;
            for (int64_t i = 0; i < ids.n; i++) c += ids.v[i] == id;
            SPEC_CHECK(id >= 0 && c == marker_count[m], "%s: marker %s (id %d) encoded %lld times, want %lld", tok_dir,
                       markers[m], id, (long long)c, (long long)marker_count[m]);
        }
        char *back = NULL;
        SPEC_CHECK(ms_tok_decode_all(tok, ids.v, ids.n, false, &back) >= 0 && back && !strcmp(back, golden),
                   "%s: decode(encode(text)) != text", tok_dir);
        free(back);
    } else {
        SPEC_CHECK(false, "%s: encode", tok_dir);
    }
    ms_ids_free(&ids);
    free(text);
    ms_tok_free(&tok);
}

static void test_golden(void) {
    const char *l3 = MS_SHARED_DIR "/tokenizers/llama3", *q3 = MS_SHARED_DIR "/tokenizers/qwen3";
    if (!ms_file_exists(MS_SHARED_DIR "/tokenizers/llama3/tokenizer.json") ||
        !ms_file_exists(MS_SHARED_DIR "/tokenizers/qwen3/tokenizer.json")) {
        fprintf(stderr, "SKIP golden chat renderings: tokenizers absent\n");
        return;
    }
    g_parts_ran++;
    const ms_chat_msg conv[] = {
        {MS_ROLE_SYSTEM, "You are terse."},
        {MS_ROLE_USER, "  Hi there \n"},
        {MS_ROLE_ASSISTANT, "<think>\nplan it\n</think>\n\nHello!  \n"},
        {MS_ROLE_USER, "Again?"},
    };
    /* Llama-3: bos_token + per message header, content|trim, eot; then the
     * assistant header. */
    const char *l3_golden =
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n<think>\nplan it\n</think>\n\nHello!<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAgain?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n";
    const char *l3_markers[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
    const int64_t l3_counts[] = {1, 5, 5, 4};
    golden_case(l3, MS_CHAT_LLAMA3, conv, 4, l3_golden, l3_markers, l3_counts, 4);
    /* Qwen3: last_query_index = 3, so the assistant turn (index 2) is
     * rendered as content.split('</think>')[-1].lstrip('\n'), untrimmed. */
    const char *q3_golden = "<|im_start|>system\nYou are terse.<|im_end|>\n"
                            "<|im_start|>user\n  Hi there \n<|im_end|>\n"
                            "<|im_start|>assistant\nHello!  \n<|im_end|>\n"
                            "<|im_start|>user\nAgain?<|im_end|>\n"
                            "<|im_start|>assistant\n";
    const char *q3_markers[] = {"<|im_start|>", "<|im_end|>"};
    const int64_t q3_counts[] = {5, 4};
    golden_case(q3, MS_CHAT_CHATML, conv, 4, q3_golden, q3_markers, q3_counts, 2);
    /* Without a system message and with a plain answer (the --turns 2 shape). */
    const ms_chat_msg conv2[] = {
        {MS_ROLE_USER, "Write a poem."},
        {MS_ROLE_ASSISTANT, "Roses are red."},
        {MS_ROLE_USER, "Now shorter."},
    };
    const char *q3_golden2 = "<|im_start|>user\nWrite a poem.<|im_end|>\n<|im_start|>assistant\nRoses are red.<|im_end|>\n"
                             "<|im_start|>user\nNow shorter.<|im_end|>\n<|im_start|>assistant\n";
    const int64_t q3_counts2[] = {4, 3};
    golden_case(q3, MS_CHAT_CHATML, conv2, 3, q3_golden2, q3_markers, q3_counts2, 2);
    const char *l3_golden2 =
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWrite a poem.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nRoses are red.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nNow shorter.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n";
    const int64_t l3_counts2[] = {1, 4, 4, 3};
    golden_case(l3, MS_CHAT_LLAMA3, conv2, 3, l3_golden2, l3_markers, l3_counts2, 4);
}

/* ---- shared helpers for 2 and 3 -------------------------------------------- */

typedef struct {
    ms_model *model;
    ms_tgt *tgt;
    ms_tok *tok;
    ms_gen_params p;
} ar_ctx;

static ms_status ar_open(ar_ctx *a, const char *dir, int64_t max_new) {
    memset(a, 0, sizeof *a);
    ms_model_opts mo = {0};
    MS_TRY(ms_model_load(dir, &mo, &a->model));
    MS_TRY(ms_tgt_new(a->model, &a->tgt));
    MS_TRY(ms_tok_load_dir(dir, &a->tok));
    a->p = ms_gen_params_default();
    a->p.max_new_tokens = max_new;
    const int32_t *eos;
    int n_eos = ms_tok_eos(a->tok, &eos);
    for (int i = 0; i < n_eos && a->p.n_stop < MS_MAX_STOP; i++) a->p.stop_ids[a->p.n_stop++] = eos[i];
    return MS_OK;
}

static void ar_close(ar_ctx *a) {
    ms_tgt_free(&a->tgt);
    ms_model_free(&a->model);
    ms_tok_free(&a->tok);
}

/* Append to out what the tool prints for a turn: the ids decoded as a stream
 * after the prompt's last id, without special tokens, then "\n". */
static void expect_text(const ar_ctx *a, int32_t last_prompt_id, const ms_ids *gen, ms_ids *out_bytes) {
    ms_tok_decoder dec;
    ms_tok_decoder_init(&dec);
    dec.prev_id = last_prompt_id;
    char buf[512];
    for (int64_t i = 0; i < gen->n; i++) {
        size_t n = 0;
        if (gen->v[i] >= ms_tok_vocab_size(a->tok)) {
            memcpy(buf, "\xEF\xBF\xBD", 3);
            n = 3;
        } else {
            MS_ASSERT(ms_tok_decode_next(a->tok, &dec, gen->v[i], true, buf, sizeof buf, &n) >= 0);
        }
        for (size_t k = 0; k < n; k++) MS_ASSERT(ms_ids_push(out_bytes, (unsigned char)buf[k]) >= 0);
    }
    size_t n = 0;
    ms_tok_decode_flush(&dec, buf, sizeof buf, &n);
    for (size_t k = 0; k < n; k++) MS_ASSERT(ms_ids_push(out_bytes, (unsigned char)buf[k]) >= 0);
    MS_ASSERT(ms_ids_push(out_bytes, '\n') >= 0);
}

/* The file's bytes are want (ids used as bytes) followed by the batch
 * summary, whose first line names the questions and turns. */
static bool file_equals(const char *path, const ms_ids *want, const char *summary_head) {
    char *text = NULL;
    size_t len = 0;
    if (ms_read_file(path, &text, &len) < 0) return false;
    size_t hl = strlen(summary_head);
    bool same = len >= (size_t)want->n + hl && !memcmp(text + want->n, summary_head, hl);
    if (same) len = (size_t)want->n;
    for (size_t i = 0; same && i < len; i++) same = (unsigned char)text[i] == (unsigned)want->v[i];
    if (!same) {
        size_t at = 0;
        while (at < len && at < (size_t)want->n && (unsigned char)text[at] == (unsigned)want->v[at]) at++;
        fprintf(stderr, "  %s: %zu bytes, want %lld + summary; first difference at byte %zu: \"%.60s\"\n", path, len,
                (long long)want->n, at, text + at);
    }
    free(text);
    return same;
}

typedef struct {
    int64_t index, turn, prompt_tokens, new_tokens;
    char qid[32], cat[32];
} stat_line;

/* Parse the stats file; every line must carry the fields the report needs. */
static int64_t read_stats(const char *path, stat_line *out, int64_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int64_t n = 0;
    static const char *need[] = {"new_tokens", "wall_s", "prefill_s", "rounds", "spec_rounds", "mean_accepted",
                                 "vocab_mean", "vocab_max", "coverage", "draft_backbone_s", "draft_head_s", "vocab_s",
                                 "verify_s", "turn", "index"};
    while (n < cap && fgets(line, sizeof line, f)) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        SPEC_CHECK(j != NULL, "%s line %lld: %s", path, (long long)n + 1, je.text);
        if (!j) continue;
        for (size_t k = 0; k < sizeof need / sizeof need[0]; k++)
            SPEC_CHECK(json_object_get(j, need[k]) != NULL, "%s line %lld: no %s", path, (long long)n + 1, need[k]);
        stat_line *s = &out[n++];
        memset(s, 0, sizeof *s);
        s->index = json_integer_value(json_object_get(j, "index"));
        s->turn = json_integer_value(json_object_get(j, "turn"));
        s->prompt_tokens = json_integer_value(json_object_get(j, "prompt_tokens"));
        s->new_tokens = json_integer_value(json_object_get(j, "new_tokens"));
        const char *q = json_string_value(json_object_get(j, "question_id"));
        const char *c = json_string_value(json_object_get(j, "category"));
        snprintf(s->qid, sizeof s->qid, "%s", q ? q : "");
        snprintf(s->cat, sizeof s->cat, "%s", c ? c : "");
        json_decref(j);
    }
    fclose(f);
    return n;
}

static ms_status gen_ar(ar_ctx *a, const ms_ids *prompt, ms_ids *out) {
    spec_sink sink = {0};
    ms_gen_stats st;
    ms_status s = spec_generate(a->tgt, NULL, prompt->v, prompt->n, &a->p, &sink, &st);
    out->n = 0;
    for (int64_t i = 0; i < sink.ids.n && s >= 0; i++) s = ms_ids_push(out, sink.ids.v[i]);
    ms_ids_free(&sink.ids);
    return s;
}

/* Three questions: two turns, one turn, three turns (only two run). */
static const char *const Q_T[3][3] = {
    {"Once upon a time there was a cat.", "Tell me more about the cat.", NULL},
    {"The little dog ran to the park.", NULL, NULL},
    {"Lily had a red ball.", "What did Lily do next?", "And then?"},
};
static const char *const Q_ID[3] = {"81", "task/7", "99"};
static const char *const Q_CAT[3] = {"writing", "qa", "roleplay"};

static ms_status write_questions(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) MS_FAIL(MS_ERR_IO, "%s", path);
    for (int q = 0; q < 3; q++) {
        json_t *turns = json_array();
        for (int t = 0; t < 3 && Q_T[q][t]; t++) json_array_append_new(turns, json_string(Q_T[q][t]));
        json_t *row = q == 1 ? json_pack("{s:s,s:o}", "task_id", Q_ID[q], "turns", turns)
                             : json_pack("{s:I,s:s,s:o}", "question_id", (json_int_t)atoi(Q_ID[q]), "category", Q_CAT[q],
                                         "turns", turns);
        char *line = json_dumps(row, JSON_COMPACT);
        fprintf(f, "%s\n", line);
        free(line);
        json_decref(row);
    }
    fclose(f);
    return MS_OK;
}

/* Check the stats lines against the expected per-turn context lengths. */
static void check_stats(const char *label, const char *stats, const int64_t ctx_len[3][2], const int64_t gen_len[3][2]) {
    stat_line sl[16];
    int64_t n = read_stats(stats, sl, 16);
    SPEC_CHECK(n == 5, "%s: %lld stats lines, want 5 (2 + 1 + 2 turns)", label, (long long)n);
    int64_t k = 0;
    for (int q = 0; q < 3; q++)
        for (int t = 0; t < 2 && Q_T[q][t] && k < n; t++, k++) {
            SPEC_CHECK(sl[k].index == q && sl[k].turn == t + 1, "%s line %lld: index %lld turn %lld", label,
                       (long long)k, (long long)sl[k].index, (long long)sl[k].turn);
            SPEC_CHECK(!strcmp(sl[k].qid, Q_ID[q]) && !strcmp(sl[k].cat, q == 1 ? "" : Q_CAT[q]),
                       "%s line %lld: question_id '%s' category '%s'", label, (long long)k, sl[k].qid, sl[k].cat);
            SPEC_CHECK(sl[k].prompt_tokens == ctx_len[q][t] && sl[k].new_tokens == gen_len[q][t],
                       "%s q%d turn %d: prompt %lld / new %lld tokens, independent %lld / %lld", label, q, t + 1,
                       (long long)sl[k].prompt_tokens, (long long)sl[k].new_tokens, (long long)ctx_len[q][t],
                       (long long)gen_len[q][t]);
        }
}

static void test_cli(const char *dir);

/* ---- 2. raw two turns ------------------------------------------------------- */

static void test_raw_turns(const char *tmp) {
    char dir[512];
    ms_status s = spec_convert_stories(tmp, dir, sizeof dir);
    if (s == MS_ERR_NOT_FOUND) {
        fprintf(stderr, "SKIP raw two-turn part: stories260K absent\n");
        return;
    }
    g_parts_ran++;
    SPEC_CHECK(s >= 0, "convert stories260K");
    if (s < 0) return;
    test_cli(dir);
    char qpath[600], out[600], stats[600];
    snprintf(qpath, sizeof qpath, "%s/q.jsonl", tmp);
    snprintf(out, sizeof out, "%s/raw.out", tmp);
    snprintf(stats, sizeof stats, "%s/raw.stats", tmp);
    SPEC_CHECK(write_questions(qpath) >= 0, "questions");
    const char *argv[] = {GEN, "-m", dir, "--prompts-jsonl", qpath, "--turns", "2", "-n", "20", "--stats-out", stats,
                          "--draft-kind", "layerskip", "--vocab", "dynamic", "--vocab-stream", "context", "--w-max",
                          "64", NULL};
    int rc = run_to_file(argv, out);
    SPEC_CHECK(rc == 0, "raw --turns 2: exit %d", rc);
    if (rc != 0) return;

    ar_ctx a;
    s = ar_open(&a, dir, 20);
    SPEC_CHECK(s >= 0, "AR model");
    ms_ids want = {0}, ctx = {0}, gen = {0};
    int64_t ctx_len[3][2] = {{0}}, gen_len[3][2] = {{0}};
    for (int q = 0; q < 3 && s >= 0; q++) {
        ctx.n = 0;
        s = ms_ids_push(&ctx, ms_tok_bos(a.tok));
        if (s >= 0) s = ms_tok_encode(a.tok, Q_T[q][0], strlen(Q_T[q][0]), false, &ctx);
        for (int t = 0; t < 2 && Q_T[q][t] && s >= 0; t++) {
            if (t == 1) {
                /* turn 2 = turn 1's prompt ids ⊕ its generated ids ⊕ encode("\n\n" + t2) */
                for (int64_t i = 0; i < gen.n && s >= 0; i++) s = ms_ids_push(&ctx, gen.v[i]);
                char buf[256];
                snprintf(buf, sizeof buf, "\n\n%s", Q_T[q][1]);
                if (s >= 0) s = ms_tok_encode(a.tok, buf, strlen(buf), false, &ctx);
            }
            if (s >= 0) s = gen_ar(&a, &ctx, &gen);
            if (s < 0) break;
            ctx_len[q][t] = ctx.n;
            gen_len[q][t] = gen.n;
            expect_text(&a, ctx.v[ctx.n - 1], &gen, &want);
        }
    }
    SPEC_CHECK(s >= 0, "independent AR runs");
    SPEC_CHECK(file_equals(out, &want, "prompts: 3 (5 turns), "), "raw --turns 2: the printed turns differ from the independent runs");
    check_stats("raw", stats, ctx_len, gen_len);
    /* turn 2's context really contains turn 1 (not just turn 2's text) */
    SPEC_CHECK(ctx_len[0][1] > ctx_len[0][0] + gen_len[0][0], "raw: turn 2 context too short");
    ms_ids_free(&want);
    ms_ids_free(&ctx);
    ms_ids_free(&gen);
    ar_close(&a);
}

/* ---- 3. chat two turns ------------------------------------------------------ */

/* Spec-Bench's answer post-processing: no special tokens, whitespace-stripped. */
static char *answer_of(const ar_ctx *a, const ms_ids *gen) {
    ms_ids keep = {0};
    for (int64_t i = 0; i < gen->n; i++)
        if (gen->v[i] < ms_tok_vocab_size(a->tok)) MS_ASSERT(ms_ids_push(&keep, gen->v[i]) >= 0);
    char *t = NULL;
    MS_ASSERT(ms_tok_decode_all(a->tok, keep.v, keep.n, true, &t) >= 0);
    ms_ids_free(&keep);
    char *b = t;
    while (*b && strchr(" \t\n\r\v\f", *b)) b++;
    size_t n = strlen(b);
    while (n > 0 && strchr(" \t\n\r\v\f", b[n - 1])) n--;
    char *r = strndup(b, n);
    free(t);
    return r;
}

static void test_chat_turns(const char *tmp, const char *label, const char *tok_dir, const char *arch_args) {
    char tokjson[600];
    snprintf(tokjson, sizeof tokjson, "%s/tokenizer.json", tok_dir);
    if (!ms_file_exists(tokjson)) {
        fprintf(stderr, "SKIP chat two-turn part (%s): %s absent\n", label, tokjson);
        return;
    }
    g_parts_ran++;
    char args[1400], dir[512];
    snprintf(args, sizeof args, "%s --tokenizer %s", arch_args, tokjson);
    ms_status s = spec_mkmodel(tmp, label, args, dir, sizeof dir);
    SPEC_CHECK(s >= 0, "%s: mkmodel", label);
    if (s < 0) return;
    char qpath[600], out[600], stats[600];
    snprintf(qpath, sizeof qpath, "%s/q.jsonl", tmp);
    snprintf(out, sizeof out, "%s/%s.out", tmp, label);
    snprintf(stats, sizeof stats, "%s/%s.stats", tmp, label);
    SPEC_CHECK(write_questions(qpath) >= 0, "questions");
    const char *sys = "Be brief.";
    const char *argv[] = {GEN, "-m", dir, "--prompts-jsonl", qpath, "--turns", "2", "-n", "10", "--stats-out", stats,
                          "--chat", "--system", sys, "--draft-kind", "layerskip", "--lm-head", "indexed", NULL};
    int rc = run_to_file(argv, out);
    SPEC_CHECK(rc == 0, "%s chat --turns 2: exit %d", label, rc);
    if (rc != 0) return;

    ar_ctx a;
    s = ar_open(&a, dir, 10);
    SPEC_CHECK(s >= 0, "%s: AR model", label);
    ms_ids want = {0}, ctx = {0}, gen = {0};
    int64_t ctx_len[3][2] = {{0}}, gen_len[3][2] = {{0}};
    for (int q = 0; q < 3 && s >= 0; q++) {
        char *a1 = NULL;
        for (int t = 0; t < 2 && Q_T[q][t] && s >= 0; t++) {
            ms_chat_msg m[4];
            int64_t nm = 0;
            m[nm++] = (ms_chat_msg){MS_ROLE_SYSTEM, sys};
            m[nm++] = (ms_chat_msg){MS_ROLE_USER, Q_T[q][0]};
            if (t == 1) {
                m[nm++] = (ms_chat_msg){MS_ROLE_ASSISTANT, a1};
                m[nm++] = (ms_chat_msg){MS_ROLE_USER, Q_T[q][1]};
            }
            char *text = NULL;
            s = ms_chat_render(ms_tok_chat_kind(a.tok), m, nm, true, &text);
            ctx.n = 0;
            if (s >= 0) s = ms_tok_encode(a.tok, text, strlen(text), true, &ctx);
            free(text);
            if (s >= 0) s = gen_ar(&a, &ctx, &gen);
            if (s < 0) break;
            ctx_len[q][t] = ctx.n;
            gen_len[q][t] = gen.n;
            expect_text(&a, ctx.v[ctx.n - 1], &gen, &want);
            if (t == 0) a1 = answer_of(&a, &gen);
        }
        free(a1);
    }
    SPEC_CHECK(s >= 0, "%s: independent AR runs", label);
    SPEC_CHECK(file_equals(out, &want, "prompts: 3 (5 turns), "), "%s chat --turns 2: the printed turns differ from the independent runs", label);
    check_stats(label, stats, ctx_len, gen_len);
    ms_ids_free(&want);
    ms_ids_free(&ctx);
    ms_ids_free(&gen);
    ar_close(&a);
}

/* ---- 4. CLI refusals --------------------------------------------------------- */

static void test_cli(const char *dir) {
    const char *bad[][12] = {
        {GEN, "-m", dir, "--vocab", "full", "--vocab-stream", "context", NULL},
        {GEN, "-m", dir, "--vocab", "static", "--vocab-stream", "extension", NULL},
        {GEN, "-m", dir, "--vocab-stream", "both2", NULL},
        {GEN, "-m", dir, "--lm-head", "packed", NULL},
        {GEN, "-m", dir, "--turns", "3", NULL},
        {GEN, "-m", dir, "--turns", "0", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_to_file(bad[i], NULL);
        SPEC_CHECK(rc == 2, "refusal %zu (%s %s): exit %d, want 2", i, bad[i][3], bad[i][4], rc);
    }
    const char *good[] = {GEN, "-m", dir, "-n", "4", "--vocab-stream", "extension", "--lm-head", "indexed", "--turns",
                          "all", NULL};
    SPEC_CHECK(run_to_file(good, NULL) == 0, "extension + indexed + --turns all refused");
}

int main(void) {
    ms_log_set_level(MS_LOG_WARN);
    char tmp[256];
    if (!ms_test_tmpdir("ms-ablation-turns", tmp, sizeof tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_golden();
    test_raw_turns(tmp);
    test_chat_turns(tmp, "qwen3-chat", MS_SHARED_DIR "/tokenizers/qwen3",
                    "--arch qwen3 --vocab 151936 --hidden 16 --layers 2 --heads 2 --kv-heads 1 --ffn 32 --seed 41 "
                    "--bos -1 --eos 151645 --eos 151643");
    test_chat_turns(tmp, "llama3-chat", MS_SHARED_DIR "/tokenizers/llama3",
                    "--arch llama --vocab 128256 --hidden 16 --layers 2 --heads 2 --kv-heads 1 --ffn 32 --seed 42 "
                    "--bos 128000 --eos 128009 --eos 128001");
    ms_test_rmtree(tmp);
    if (spec_failures) {
        fprintf(stderr, "test_ablation_turns: %d check(s) FAILED\n", spec_failures);
        return 1;
    }
    if (g_parts_ran == 0) {
        fprintf(stderr, "test_ablation_turns: SKIP: no part could run (%s absent)\n", MS_SHARED_DIR);
        return 77;
    }
    fprintf(stderr, "test_ablation_turns: OK\n");
    return 0;
}
