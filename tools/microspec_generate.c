/* microspec-generate — generation from a Hugging Face model directory, alone
 * (autoregressive) or with a draft in the same process (speculative): text
 * on stdout, statistics on stderr. The single-process driver of both nodes. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ms_draft.h"
#include "ms_isa.h"
#include "ms_model.h"
#include "ms_target.h"
#include "ms_tokenizer.h"
#include "ms_vmode.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: microspec-generate --model FILE.gguf|DIR [options]\n"
            "\n"
            "Generates text with the target model: autoregressively, or speculatively with a\n"
            "draft (--draft-kind, below) whose tree the target verifies, so the output is the\n"
            "target's own. Text goes to stdout, statistics to stderr.\n"
            "\n"
            "  -m, --model PATH       a GGUF file (weights in their stored block formats, the\n"
            "                         tokenizer and chat template from its metadata) or a Hugging\n"
            "                         Face model directory (config.json, *.safetensors,\n"
            "                         tokenizer.json or tokenizer.bin)\n"
            "  -p, --prompt TEXT      prompt (default: empty, i.e. BOS only)\n"
            "  -f, --prompt-file F    read the prompt from a file\n"
            "  -c, --chat             render the prompt as a user turn through the chat template\n"
            "  -s, --system TEXT      system message for --chat\n"
            "  -n, --max-tokens N     new tokens to generate (default 256)\n"
            "      --steps N          like llama2.c's -n: stop when N tokens after BOS exist\n"
            "                         (prompt included); overrides --max-tokens\n"
            "  -t, --temperature T    0 = greedy (default 0)\n"
            "      --top-p P          nucleus sampling mass (default 1.0 = off)\n"
            "      --seed S           sampling seed (default 42)\n"
            "      --max-ctx N        KV cache rows (default min(max_position_embeddings, 4096))\n"
            "      --threads N        CPU threads (default: the number of cores)\n"
            "      --f32-matmul       GGUF: the exact path, f32 activations against the dequantized\n"
            "                         blocks (several times slower; by default activations are quantized\n"
            "                         to 8-bit blocks with integer dot products, as llama.cpp does:\n"
            "                         log-probs ~0.1 from the exact path, greedy text may part at\n"
            "                         near-ties); --q8-matmul names the default\n"
            "      --device D         cpu | cuda | cuda:N: where the target runs (default cpu)\n"
            "      --draft-device D   where an lm / layerskip draft runs (default: --device; eagle: cpu only)\n"
            "      --dtype T          CUDA activations and weights: bf16 | f16 (default bf16)\n"
            "      --echo             print the prompt text before the continuation\n"
            "      --no-bos           do not prepend BOS to a raw prompt\n"
            "      --ignore-eos       never generate the end-of-sequence ids (logits −inf, as llama.cpp's\n"
            "                         --ignore-eos does): exactly -n new tokens\n"
            "Environment: MS_ISA=scalar|avx2|avx512|amx|neon|dotprod|i8mm caps the CPU kernels' instruction\n"
            "set (default: the best this CPU has; the quantized products give the same bits at every level).\n"
            "MS_VERIFY_COST_CACHE=0: measure the verify costs anew in this process (by default a speculative\n"
            "run keeps them in ~/.cache/microspec/verify-cost/ per model file, level, threads and path).\n"
            "\n"
            "Batch evaluation:\n"
            "      --prompts-jsonl F  one prompt per line: Spec-Bench (turns[0]) or HumanEval (prompt)\n"
            "      --first N          only the first N lines (default all)\n"
            "      --turns 1|2|all    Spec-Bench turns per line (default 1). Turn k is its own generation\n"
            "                         (fresh KV, whole context prefilled) on the conversation so far:\n"
            "                         --chat: the template of [user t1, assistant a1, ..., user tk], a_j =\n"
            "                         turn j's output decoded without special tokens, whitespace-stripped;\n"
            "                         raw: turn k-1's prompt ids + its generated ids + encode(\"\\n\\n\" + tk)\n"
            "      --quiet            do not print the generated text\n"
            "      --ids-out F        per turn a JSON line {\"prompt\", \"turn\", \"prompt_ids\", \"ids\"}:\n"
            "                         the token ids given and generated, the stop token included\n"
            "      --stats-out F      per-turn statistics as JSON lines (turn, question_id and category\n"
            "                         when the line has them, times in s); a summary goes to stdout\n"
            "\n"
            "Speculative decoding (output unchanged; only speed and acceptance change):\n"
            "      --draft DIR        draft model directory (lm: a small model with the same tokenizer;\n"
            "                         eagle: an EAGLE-1/2 head); layerskip needs none (uses --model)\n"
            "      --draft-kind K     lm | eagle | layerskip (default lm+ngram with --draft, else layerskip+ngram) |\n"
            "                         ngram (continuations of the request's own text: no model) |\n"
            "                         lm+ngram, layerskip+ngram, eagle+ngram (both in one tree)\n"
            "      --ngram-min N, --ngram-max N  ngram: suffix lengths matched (default 2, 4)\n"
            "      --ngram-len N      ngram: tokens a continuation drafts at most (default 16)\n"
            "      --draft-layers N   layerskip: the target's first N layers (default 1)\n"
            "      --vocab MODE       full | static | dynamic (default dynamic = MicroSpec) |\n"
            "                         specvocab | specvocab+window | dynaspec | dynaspec+window\n"
            "                         (per-step candidates from --vocab-artifact, +window: ∪ the window)\n"
            "      --vocab-artifact F specvocab / dynaspec: the artefact built for the draft model\n"
            "                         (tools/vocab/specvocab_build.py); refused for another model\n"
            "      --specvocab-k N    specvocab: candidates per row at the first step (default 1024)\n"
            "      --vocab-budget-decay R  position-aware budget: depth l uses max(K_MIN, floor(K*R^l))\n"
            "                         (static: the first ids of the list; specvocab: per row); 1 = off\n"
            "      --vocab-budget-min K_MIN  the budget's floor (default 0)\n"
            "      --dynaspec-clusters K_C0, --dynaspec-decay R, --dynaspec-min K_MIN  dynaspec budgets\n"
            "      --vocab-list F     static: id list from microspec-freqlist\n"
            "      --w-max N          dynamic window W_max (default 3072)\n"
            "      --vocab-stream S   dynamic: the stream that feeds the window (ablation):\n"
            "                         both (prompt + top-K_pre, then C_draft + C_ver per round; default),\n"
            "                         context (prompt, then the tokens emitted each round),\n"
            "                         extension (top-K_pre, then C_draft + C_ver per round)\n"
            "      --lm-head H        gathered (one GEMM over the packed active rows; default) |\n"
            "                         indexed (a dot product per active id with W[id] in place, no row copies)\n"
            "      --k-pre N          top-K_pre target ids per prompt position (default 3)\n"
            "      --k-ver N          top-K_ver target ids per accepted node (default 3)\n"
            "      --tree-k N         children per node / beam width (default 10)\n"
            "      --tree-depth N     expansion passes after the first (default 5)\n"
            "      --tree-total N     tree nodes incl. the root, ≤ 64 (default 60)\n"
            "                         (a draft on the CPU with none of the tree flags: --chain\n"
            "                         --tree-depth 4 --draft-p-min 0.7)\n"
            "      --chain            a single path of tree-depth+1 tokens instead of a tree\n"
            "      --draft-p-min P    confidence stop: draft no further in a round once the draft's\n"
            "                         top-1 probability at a step (tree: the best cumulative\n"
            "                         probability of a level) is below P; that token is still\n"
            "                         verified (default 0 = off; > 1: one draft step per round)\n"
            "      --draft-policy P   cost: verify only the part of each tree expected to pay on this\n"
            "                         machine (verify costs measured at the first request; a round\n"
            "                         that would not pay is a plain decode step; default) |\n"
            "                         all: verify every drafted node\n"
            "      --draft-adaptive   adapt the draft depth per request between 1 and tree-depth+1\n"
            "                         tokens from the recent acceptance (see draft-node/ms_draft.h)\n"
            "  -h, --help             this text\n");
}

static bool parse_i64(const char *s, const char *flag, int64_t lo, int64_t hi, int64_t *out) {
    return ms_cli_i64("microspec-generate", flag, s, lo, hi, out);
}

static bool parse_f(const char *s, const char *flag, double lo, double hi, double *out) {
    return ms_cli_f64("microspec-generate", flag, s, lo, hi, out);
}

typedef struct {
    const ms_tok *tok;
    ms_tok_decoder dec;
    ms_status err;
    bool quiet;
    ms_ids *collect; /* when set, every emitted id is also appended here */
} printer;

/* Token callback: decode and write each batch of emitted tokens as it comes. */
static bool print_tokens(void *ctx, const int32_t *ids, int64_t n) {
    printer *pr = ctx;
    for (int64_t i = 0; pr->collect && i < n; i++)
        if ((pr->err = ms_ids_push(pr->collect, ids[i])) < 0) return false;
    if (pr->quiet) return true;
    char buf[512];
    for (int64_t i = 0; i < n; i++) {
        size_t len = 0;
        if (ids[i] >= ms_tok_vocab_size(pr->tok)) {
            /* a padded LM-head row the tokenizer has no text for: U+FFFD */
            fwrite("\xEF\xBF\xBD", 1, 3, stdout);
            continue;
        }
        pr->err = ms_tok_decode_next(pr->tok, &pr->dec, ids[i], true, buf, sizeof buf, &len);
        if (pr->err < 0) return false;
        fwrite(buf, 1, len, stdout);
    }
    fflush(stdout);
    return true;
}

/* One line of a --prompts-jsonl file: its turns (Spec-Bench turns[], or a
 * HumanEval prompt as one turn) and, when the line has them, its id and
 * category (written into the --stats-out lines). */
typedef struct {
    char **turns;
    int64_t n_turns;
    char *id;       /* question_id (integer or string) or task_id as text; NULL if absent */
    char *category; /* NULL if absent */
} question;

static void questions_free(question *q, int64_t n) {
    for (int64_t i = 0; q && i < n; i++) {
        for (int64_t t = 0; t < q[i].n_turns; t++) free(q[i].turns[t]);
        free(q[i].turns);
        free(q[i].id);
        free(q[i].category);
    }
    free(q);
}

/* Fill *q from one parsed line; a message names what is wrong. */
static const char *question_from_json(json_t *row, question *q) {
    json_t *turns = json_object_get(row, "turns");
    if (turns) {
        if (!json_is_array(turns) || json_array_size(turns) == 0) return "turns is not a non-empty array";
        for (size_t t = 0; t < json_array_size(turns); t++)
            if (!json_is_string(json_array_get(turns, t))) return "turns has an entry that is not a string";
    } else if (!json_is_string(json_object_get(row, "prompt"))) {
        return "no string turns[0] or prompt field";
    }
    int64_t n = turns ? (int64_t)json_array_size(turns) : 1;
    q->turns = ms_calloc((size_t)n, sizeof *q->turns);
    if (!q->turns) return "out of memory";
    for (int64_t t = 0; t < n; t++) {
        json_t *v = turns ? json_array_get(turns, (size_t)t) : json_object_get(row, "prompt");
        if (!(q->turns[t] = strdup(json_string_value(v)))) return "out of memory";
        q->n_turns = t + 1;
    }
    json_t *id = json_object_get(row, "question_id");
    if (!id) id = json_object_get(row, "task_id");
    char buf[32];
    if (json_is_integer(id)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(id));
    const char *ids = json_is_integer(id) ? buf : json_is_string(id) ? json_string_value(id) : NULL;
    if (ids && !(q->id = strdup(ids))) return "out of memory";
    json_t *cat = json_object_get(row, "category");
    if (json_is_string(cat) && !(q->category = strdup(json_string_value(cat)))) return "out of memory";
    return NULL;
}

/* Questions from a JSON-lines file: Spec-Bench rows give turns[], HumanEval
 * rows give prompt. Each line is validated; a bad line names file:line. */
static ms_status load_jsonl_prompts(const char *path, int64_t first, question **out, int64_t *n_out) {
    char *text;
    size_t len;
    MS_TRY(ms_read_file(path, &text, &len));
    question *list = NULL;
    int64_t n = 0, cap = 0, line = 0;
    ms_status st = MS_OK;
    for (char *p = text; *p && n < first;) {
        char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        line++;
        if (ll > 0) {
            json_error_t je;
            json_t *row = json_loadb(p, ll, 0, &je);
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                question *l2 = ms_realloc(list, (size_t)cap * sizeof *l2);
                if (!l2) {
                    json_decref(row);
                    st = MS_ERR_NOMEM;
                    break;
                }
                list = l2;
            }
            memset(&list[n], 0, sizeof list[n]);
            const char *why = !json_is_object(row) ? (row ? "not a JSON object" : je.text) : question_from_json(row, &list[n]);
            n++; /* freed with the list even when incomplete */
            json_decref(row);
            if (why) {
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s:%lld: %s", path, (long long)line, why);
                st = MS_ERR_FORMAT;
                break;
            }
        }
        p = eol ? eol + 1 : p + ll;
    }
    free(text);
    if (st < 0) {
        questions_free(list, n);
        return st;
    }
    if (n == 0) MS_FAIL(MS_ERR_FORMAT, "%s: no prompts", path);
    *out = list;
    *n_out = n;
    return MS_OK;
}

/* Spec-Bench's post-processing of an answer before it becomes the assistant
 * message of the next turn: the text without special tokens, stripped of
 * surrounding whitespace (ASCII). Padded LM-head ids (≥ the tokenizer's
 * size) have no text and are dropped. */
static ms_status answer_text(const ms_tok *tok, const ms_ids *gen, char **out) {
    ms_ids keep = {0};
    ms_status st = MS_OK;
    for (int64_t i = 0; i < gen->n && st >= 0; i++)
        if (gen->v[i] < ms_tok_vocab_size(tok)) st = ms_ids_push(&keep, gen->v[i]);
    char *text = NULL;
    if (st >= 0) st = ms_tok_decode_all(tok, keep.v, keep.n, true, &text);
    ms_ids_free(&keep);
    if (st < 0) return st;
    size_t a = 0, e = strlen(text);
    while (a < e && strchr(" \t\n\r\v\f", text[a])) a++;
    while (e > a && strchr(" \t\n\r\v\f", text[e - 1])) e--;
    memmove(text, text + a, e - a);
    text[e - a] = '\0';
    *out = text;
    return MS_OK;
}

/* Aggregates over prompts, following the Spec-Bench conventions
 * (eagle2-frspec-notes §5.4): tokens/s is the mean over questions of
 * Σ_turns new_tokens / Σ_turns wall time (prefill included). */
typedef struct {
    int64_t prompts, turns, new_tokens, rounds, vocab_sum, vocab_max, spec_rounds, covered, emitted, drafted;
    int64_t accepted_ngram;
    int64_t accepted_ge[MS_TREE_MAX + 1];
    double tps_sum, wall, draft_s, head_s, vocab_s, verify_s, accept_s;
    float link_us[1 << 16];
    int64_t n_link;
} summary;

/* One turn's counters; summary_question closes a question. */
static void summary_add(summary *u, const ms_gen_stats *s) {
    u->turns++;
    u->new_tokens += s->new_tokens;
    u->rounds += s->rounds;
    u->spec_rounds += s->spec_rounds;
    u->drafted += s->drafted;
    u->vocab_sum += s->vocab_sum;
    if (s->vocab_max > u->vocab_max) u->vocab_max = s->vocab_max;
    u->covered += s->covered;
    u->emitted += s->emitted;
    for (int64_t d = 1; d <= MS_TREE_MAX; d++) u->accepted_ge[d] += s->accepted_ge[d];
    u->accepted_ngram += s->accepted_ngram;
    u->wall += s->total_s;
    u->draft_s += s->draft_backbone_s;
    u->head_s += s->draft_head_s;
    u->vocab_s += s->vocab_s;
    u->verify_s += s->verify_s;
    u->accept_s += s->accept_s;
    for (int64_t i = 0; i < s->n_link && u->n_link < (int64_t)(sizeof u->link_us / sizeof u->link_us[0]); i++)
        u->link_us[u->n_link++] = s->link_us[i];
}

static void summary_question(summary *u, int64_t new_tokens, double wall_s) {
    u->prompts++;
    u->tps_sum += wall_s > 0 ? (double)new_tokens / wall_s : 0.0;
}

static void summary_print(const summary *u, bool spec, FILE *f) {
    double rounds = u->rounds > 0 ? (double)u->rounds : 1.0, sr = u->spec_rounds > 0 ? (double)u->spec_rounds : 1.0;
    fprintf(f, "prompts: %lld", (long long)u->prompts);
    if (u->turns != u->prompts) fprintf(f, " (%lld turns)", (long long)u->turns);
    fprintf(f, ", new tokens: %lld, wall: %.3f s, tokens/s (mean over prompts): %.1f\n", (long long)u->new_tokens, u->wall, u->prompts ? u->tps_sum / (double)u->prompts : 0.0);
    /* as ms_gen_stats_mean_accepted: each round emits 1 + its accepted depth */
    double emitted = (double)u->rounds;
    for (int64_t d = 1; d <= MS_TREE_MAX; d++) emitted += (double)u->accepted_ge[d];
    fprintf(f, "mean accepted length: %.3f tokens/forward over %lld rounds\n", emitted / rounds,
            (long long)u->rounds);
    if (!spec) return;
    fprintf(f, "drafted per round: %.3f tokens\n", (double)u->drafted / sr);
    fprintf(f, "accepted per round: %.3f tokens from the n-gram source, %.3f from the model alone\n",
            (double)u->accepted_ngram / rounds, (emitted - (double)u->rounds - (double)u->accepted_ngram) / rounds);
    fprintf(f, "acceptance by depth:");
    for (int64_t d = 1; d <= 8 && u->accepted_ge[d] > 0; d++) fprintf(f, " %lld:%.3f", (long long)d, (double)u->accepted_ge[d] / sr);
    fprintf(f, "\ndraft vocabulary: mean %.1f, max %lld; coverage %.4f (%lld/%lld)\n", (double)u->vocab_sum / sr,
            (long long)u->vocab_max, u->emitted ? (double)u->covered / (double)u->emitted : 1.0, (long long)u->covered,
            (long long)u->emitted);
    double med, p99;
    ms_quantiles(u->link_us, u->n_link, &med, &p99);
    fprintf(f, "link per round (port time minus draft work): median %.1f us, p99 %.1f us over %lld rounds\n", med, p99,
            (long long)u->n_link);
    fprintf(f, "time per round: draft backbone %.1f us, draft head %.1f us, vocab %.1f us, verify %.1f us, accept %.1f us\n",
            u->draft_s / sr * 1e6, u->head_s / sr * 1e6, u->vocab_s / sr * 1e6, u->verify_s / rounds * 1e6,
            u->accept_s / rounds * 1e6);
}

/* A JSON string value (the id and category come from the input file). */
static void put_json_str(FILE *f, const char *key, const char *v) {
    if (!v) return;
    json_t *j = json_string(v);
    char *e = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    if (e) fprintf(f, ", \"%s\": %s", key, e);
    free(e);
    json_decref(j);
}

static void write_stats_line(FILE *f, int64_t index, int64_t turn, const question *q, const ms_gen_stats *s) {
    fprintf(f, "{\"index\": %lld, \"turn\": %lld", (long long)index, (long long)turn);
    put_json_str(f, "question_id", q->id);
    put_json_str(f, "category", q->category);
    fprintf(f,
            ", \"prompt_tokens\": %lld, \"new_tokens\": %lld, \"rounds\": %lld, \"spec_rounds\": %lld, "
            "\"mean_accepted\": %.4f, \"accepted\": %lld, \"accepted_ngram\": %lld, \"drafted\": %lld, \"coverage\": %.4f, \"vocab_mean\": %.1f, "
            "\"vocab_max\": %lld, "
            "\"wall_s\": %.6f, \"prefill_s\": %.6f, \"draft_backbone_s\": %.6f, \"draft_head_s\": %.6f, "
            "\"vocab_s\": %.6f, \"verify_s\": %.6f, \"accept_s\": %.6f, \"pruned\": %lld, \"plain_rounds\": %lld, "
            "\"skipped_rounds\": %lld, \"stop\": \"%s\", \"draft_failed\": %s}\n",
            (long long)s->prompt_tokens, (long long)s->new_tokens, (long long)s->rounds,
            (long long)s->spec_rounds, ms_gen_stats_mean_accepted(s), (long long)ms_gen_stats_accepted(s),
            (long long)s->accepted_ngram, (long long)s->drafted,
            ms_gen_stats_coverage(s),
            s->spec_rounds ? (double)s->vocab_sum / (double)s->spec_rounds : 0.0, (long long)s->vocab_max, s->total_s,
            s->prefill_s, s->draft_backbone_s, s->draft_head_s, s->vocab_s, s->verify_s, s->accept_s,
            (long long)s->pruned, (long long)s->plain_rounds, (long long)s->skipped_rounds, s->stop_reason,
            s->draft_failed ? "true" : "false");
}

/* ---- options ------------------------------------------------------------------ */

enum {
    O_STEPS = 1000, O_TOPP, O_SEED, O_MAXCTX, O_THREADS, O_ECHO, O_NOBOS, O_IGNEOS, O_DRAFT, O_DKIND,
    O_DLAYERS, O_VOCAB, O_VLIST, O_WMAX, O_KPRE, O_KVER, O_TK, O_TDEPTH, O_TTOTAL, O_VSTREAM, O_LMHEAD, O_VART, O_SVK,
    O_BDECAY, O_BMIN, O_DSC, O_DSD, O_DSM, O_PMIN, O_ADAPT, O_CHAIN, O_JSONL, O_FIRST,
    O_QUIET, O_STATSOUT, O_IDSOUT, O_Q8MM, O_F32MM, O_TURNS, O_DEVICE, O_DDEVICE, O_DTYPE, O_NGMIN, O_NGMAX, O_NGLEN, O_POLICY
};
static const struct option opts[] = {
    {"model", required_argument, 0, 'm'},        {"prompt", required_argument, 0, 'p'},
    {"prompt-file", required_argument, 0, 'f'},  {"chat", no_argument, 0, 'c'},
    {"system", required_argument, 0, 's'},       {"max-tokens", required_argument, 0, 'n'},
    {"steps", required_argument, 0, O_STEPS},    {"temperature", required_argument, 0, 't'},
    {"top-p", required_argument, 0, O_TOPP},     {"seed", required_argument, 0, O_SEED},
    {"max-ctx", required_argument, 0, O_MAXCTX}, {"threads", required_argument, 0, O_THREADS},
    {"echo", no_argument, 0, O_ECHO},            {"no-bos", no_argument, 0, O_NOBOS},
    {"ignore-eos", no_argument, 0, O_IGNEOS},    {"draft", required_argument, 0, O_DRAFT},
    {"draft-kind", required_argument, 0, O_DKIND}, {"draft-layers", required_argument, 0, O_DLAYERS},
    {"vocab", required_argument, 0, O_VOCAB},    {"vocab-list", required_argument, 0, O_VLIST},
    {"w-max", required_argument, 0, O_WMAX},     {"k-pre", required_argument, 0, O_KPRE},
    {"k-ver", required_argument, 0, O_KVER},     {"tree-k", required_argument, 0, O_TK},
    {"tree-depth", required_argument, 0, O_TDEPTH}, {"tree-total", required_argument, 0, O_TTOTAL},
    {"chain", no_argument, 0, O_CHAIN},          {"prompts-jsonl", required_argument, 0, O_JSONL},
    {"draft-p-min", required_argument, 0, O_PMIN}, {"draft-adaptive", no_argument, 0, O_ADAPT},
    {"first", required_argument, 0, O_FIRST},    {"quiet", no_argument, 0, O_QUIET},
    {"stats-out", required_argument, 0, O_STATSOUT}, {"ids-out", required_argument, 0, O_IDSOUT},
    {"q8-matmul", no_argument, 0, O_Q8MM}, {"f32-matmul", no_argument, 0, O_F32MM},
    {"help", no_argument, 0, 'h'},
    {"vocab-stream", required_argument, 0, O_VSTREAM}, {"lm-head", required_argument, 0, O_LMHEAD},
    {"turns", required_argument, 0, O_TURNS},
    {"vocab-artifact", required_argument, 0, O_VART}, {"specvocab-k", required_argument, 0, O_SVK},
    {"vocab-budget-decay", required_argument, 0, O_BDECAY}, {"vocab-budget-min", required_argument, 0, O_BMIN},
    {"dynaspec-clusters", required_argument, 0, O_DSC}, {"dynaspec-decay", required_argument, 0, O_DSD},
    {"dynaspec-min", required_argument, 0, O_DSM},
    {"device", required_argument, 0, O_DEVICE}, {"draft-device", required_argument, 0, O_DDEVICE},
    {"dtype", required_argument, 0, O_DTYPE},
    {"ngram-min", required_argument, 0, O_NGMIN}, {"ngram-max", required_argument, 0, O_NGMAX},
    {"ngram-len", required_argument, 0, O_NGLEN}, {"draft-policy", required_argument, 0, O_POLICY},
    {0, 0, 0, 0}};

/* Everything the command line sets, with its defaults (gen_args_default). */
typedef struct {
    const char *model_dir, *prompt, *prompt_file, *system_msg;
    const char *draft_dir, *draft_kind, *vocab_mode, *vocab_list;
    int64_t max_tokens, steps, max_ctx, threads, seed;
    int q8_matmul;
    double temperature, top_p;
    bool chat, echo, no_bos, ignore_eos, quiet;
    const char *prompts_jsonl, *stats_out, *ids_out, *vocab_stream, *lm_head;
    int64_t first, max_turns;
    ms_gen_params gp;
    ms_dft_opts dopt;
    const char *device, *draft_device;
    ms_dtype act;
    bool spec_flags, tree_flags, speculative;
    int cuda_dev, draft_cuda_dev;
} gen_args;

static gen_args gen_args_default(void) {
    return (gen_args){.prompt = "",
                      .vocab_mode = "dynamic",
                      .max_tokens = 256,
                      .q8_matmul = 1,
                      .steps = -1,
                      .seed = 42,
                      .top_p = 1.0,
                      .lm_head = "gathered",
                      .first = INT64_MAX,
                      .max_turns = 1,
                      .gp = ms_gen_params_default(),
                      .dopt = ms_dft_opts_default(),
                      .device = "cpu",
                      .act = MS_DTYPE_BF16};
}

/* The options with a value to check: 1 ok, 0 a bad value (after a message),
 * -1 not an option of this program. */
static int apply_value_opt(int c, const char *v, gen_args *a) {
    ms_dft_opts *d = &a->dopt;
    switch (c) {
    case 'n': return parse_i64(v, "--max-tokens", 0, 1 << 24, &a->max_tokens);
    case O_STEPS: return parse_i64(v, "--steps", 1, 1 << 24, &a->steps);
    case 't': return parse_f(v, "--temperature", 0.0, 100.0, &a->temperature);
    case O_TOPP: return parse_f(v, "--top-p", 1e-6, 1.0, &a->top_p);
    case O_SEED: return parse_i64(v, "--seed", 0, INT64_MAX, &a->seed);
    case O_MAXCTX: return parse_i64(v, "--max-ctx", 1, 1 << 24, &a->max_ctx);
    case O_THREADS: return parse_i64(v, "--threads", 1, 256, &a->threads);
    case O_DLAYERS: return parse_i64(v, "--draft-layers", 1, 1024, &d->layers);
    case O_WMAX: return parse_i64(v, "--w-max", 1, 1 << 24, &d->w_max);
    case O_KPRE: return parse_i64(v, "--k-pre", 0, 64, &a->gp.k_pre);
    case O_KVER: return parse_i64(v, "--k-ver", 0, 64, &a->gp.k_ver);
    case O_TK: return parse_i64(v, "--tree-k", 1, MS_TREE_MAX_K, &d->tree.top_k);
    case O_TDEPTH: return parse_i64(v, "--tree-depth", 0, 62, &d->tree.depth);
    case O_TTOTAL: return parse_i64(v, "--tree-total", 2, MS_TREE_MAX, &d->tree.total);
    case O_PMIN: {
        double pm = 0.0;
        bool ok = parse_f(v, "--draft-p-min", 0.0, 2.0, &pm);
        d->tree.p_min = (float)pm;
        return ok;
    }
    case O_POLICY:
        a->gp.cost_policy = !strcmp(v, "cost");
        if (!strcmp(v, "cost") || !strcmp(v, "all")) return true;
        fprintf(stderr, "microspec-generate: --draft-policy must be cost or all, got '%s'\n", v);
        return false;
    case O_NGMIN: return parse_i64(v, "--ngram-min", 1, MS_NGRAM_N_MAX, &d->ngram_p.n_min);
    case O_NGMAX: return parse_i64(v, "--ngram-max", 1, MS_NGRAM_N_MAX, &d->ngram_p.n_max);
    case O_NGLEN: return parse_i64(v, "--ngram-len", 1, MS_TREE_MAX - 1, &d->ngram_p.max_len);
    case O_SVK: return parse_i64(v, "--specvocab-k", 1, 1 << 24, &d->specvocab_k);
    case O_BDECAY: return parse_f(v, "--vocab-budget-decay", 1e-6, 1.0, &d->budget_decay);
    case O_BMIN: return parse_i64(v, "--vocab-budget-min", 0, 1 << 24, &d->budget_min);
    case O_DSC: return parse_i64(v, "--dynaspec-clusters", 0, 1 << 24, &d->dynaspec_clusters);
    case O_DSD: return parse_f(v, "--dynaspec-decay", 1e-6, 1.0, &d->dynaspec_decay);
    case O_DSM: return parse_i64(v, "--dynaspec-min", 0, 1 << 24, &d->dynaspec_min);
    case O_DTYPE:
        if (ms_dtype_parse_float(v, &a->act) && (a->act == MS_DTYPE_BF16 || a->act == MS_DTYPE_F16)) return true;
        fprintf(stderr, "microspec-generate: --dtype must be bf16 or f16, got '%s'\n", v);
        return false;
    case O_TURNS:
        if (!strcmp(v, "all")) {
            a->max_turns = INT64_MAX;
            return true;
        }
        return parse_i64(v, "--turns", 1, 2, &a->max_turns);
    case O_FIRST: return parse_i64(v, "--first", 1, 1 << 24, &a->first);
    default: return -1;
    }
}

/* Where each option that only stores its argument or a flag goes. */
static bool apply_plain_opt(int c, const char *v, gen_args *a) {
    switch (c) {
    case 'm': a->model_dir = v; break;
    case 'p': a->prompt = v; break;
    case 'f': a->prompt_file = v; break;
    case 'c': a->chat = true; break;
    case 's': a->system_msg = v; break;
    case O_ECHO: a->echo = true; break;
    case O_NOBOS: a->no_bos = true; break;
    case O_IGNEOS: a->ignore_eos = true; break;
    case O_DRAFT: a->draft_dir = v; break;
    case O_DKIND: a->draft_kind = v; break;
    case O_VOCAB: a->vocab_mode = v; break;
    case O_VLIST: a->vocab_list = v; break;
    case O_CHAIN: a->dopt.tree.chain = true; break;
    case O_ADAPT: a->dopt.adaptive = true; break;
    case O_VSTREAM: a->vocab_stream = v; break;
    case O_LMHEAD: a->lm_head = v; break;
    case O_VART: a->dopt.vocab_artifact = v; break;
    case O_DEVICE: a->device = v; break;
    case O_DDEVICE: a->draft_device = v; break;
    case O_JSONL: a->prompts_jsonl = v; break;
    case O_QUIET: a->quiet = true; break;
    case O_STATSOUT: a->stats_out = v; break;
    case O_IDSOUT: a->ids_out = v; break;
    case O_Q8MM: a->q8_matmul = 1; break;
    case O_F32MM: a->q8_matmul = 0; break;
    default: return false;
    }
    return true;
}

/* Parse the command line into *a; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, gen_args *a) {
    *a = gen_args_default();
    int c;
    while ((c = getopt_long(argc, argv, "m:p:f:cs:n:t:h", opts, NULL)) != -1) {
        if ((c >= O_DRAFT && c <= O_CHAIN) || (c >= O_NGMIN && c <= O_POLICY)) a->spec_flags = true;
        if (c == O_TK || c == O_TDEPTH || c == O_TTOTAL || c == O_CHAIN || c == O_PMIN || c == O_ADAPT)
            a->tree_flags = true;
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (apply_plain_opt(c, optarg, a)) continue;
        int ok = apply_value_opt(c, optarg, a);
        if (ok < 0) usage(stderr);
        if (ok <= 0) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "microspec-generate: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (!a->model_dir) {
        fprintf(stderr, "microspec-generate: --model DIR is required (see --help)\n");
        return 2;
    }
    if (!a->draft_device) a->draft_device = a->device;
    if (ms_model_device_parse(a->device, &a->cuda_dev) < 0 ||
        ms_model_device_parse(a->draft_device, &a->draft_cuda_dev) < 0)
        return 2;
#ifndef MS_HAVE_CUDA
    if (a->cuda_dev >= 0 || a->draft_cuda_dev >= 0) {
        fprintf(stderr, "microspec-generate: device '%s' needs CUDA, but this program was built without CUDA\n",
                a->cuda_dev >= 0 ? a->device : a->draft_device);
        return 2;
    }
#endif
    a->speculative = a->draft_dir || a->draft_kind || a->spec_flags;
    return -1;
}

/* The draft's options, defaults and checks; returns 0, or 2 after a message. */
static int check_spec_args(gen_args *a) {
    ms_dft_opts *d = &a->dopt;
    /* The defaults are what measured best on a CPU (results/gguf/defaults-2026-11-28.md):
     * the n-gram source merged (free drafts; the gate then starts with the
     * model off and lets it in once it pays), and on a CPU a chain of 5 with
     * the confidence stop at 0.7 (a 60-node tree costs more rows than it
     * saves on a few cores). */
    if (!a->draft_kind) a->draft_kind = a->draft_dir ? "lm+ngram" : "layerskip+ngram";
    if (!a->tree_flags && a->draft_cuda_dev < 0) {
        d->tree.chain = true;
        d->tree.depth = 4;
        d->tree.p_min = 0.7f;
    }
    if (!ms_dft_kind_parse(a->draft_kind, &d->kind, &d->ngram)) {
        fprintf(stderr, "microspec-generate: --draft-kind must be lm, eagle, layerskip, ngram or one of the first "
                        "three + \"+ngram\", got '%s'\n", a->draft_kind);
        return 2;
    }
    if ((d->kind == MS_DRAFT_NGRAM || d->ngram) && ms_ngram_params_check(&d->ngram_p) < 0) return 2;
    if (d->kind == MS_DRAFT_NGRAM && a->draft_dir) {
        fprintf(stderr, "microspec-generate: --draft-kind ngram has no model: drop --draft, or use lm+ngram\n");
        return 2;
    }
    if (!ms_dft_vocab_set(d, a->vocab_mode)) {
        fprintf(stderr, "microspec-generate: --vocab must be one of %s, got '%s'\n", ms_dft_vocab_names(),
                a->vocab_mode);
        return 2;
    }
    if (a->vocab_stream && !ms_vocab_stream_parse(a->vocab_stream, &d->stream)) {
        fprintf(stderr, "microspec-generate: --vocab-stream must be both, context or extension, got '%s'\n",
                a->vocab_stream);
        return 2;
    }
    if (a->vocab_stream && !ms_vmode_for(d)->window) { /* the mode's flag, not d->vocab (unset by name) */
        fprintf(stderr, "microspec-generate: --vocab-stream only applies to --vocab dynamic (the window), not %s\n",
                a->vocab_mode);
        return 2;
    }
    if (!ms_dft_head_parse(a->lm_head, &d->lm_head)) {
        fprintf(stderr, "microspec-generate: --lm-head must be gathered or indexed, got '%s'\n", a->lm_head);
        return 2;
    }
    if (d->kind != MS_DRAFT_LAYERSKIP && d->kind != MS_DRAFT_NGRAM && !a->draft_dir) {
        fprintf(stderr, "microspec-generate: --draft-kind %s needs --draft DIR\n", a->draft_kind);
        return 2;
    }
    if (d->tree.chain && d->tree.depth < 1) d->tree.depth = 1;
    d->model_dir = d->kind == MS_DRAFT_LAYERSKIP ? a->model_dir : a->draft_dir;
    d->target_dir = a->model_dir;
    d->vocab_list = a->vocab_list;
    d->max_ctx = a->max_ctx;
    d->device = a->draft_device;
    d->act = a->act;
    if (d->kind == MS_DRAFT_EAGLE && a->draft_cuda_dev >= 0) {
        fprintf(stderr, "microspec-generate: an eagle draft runs on the CPU only: add --draft-device cpu "
                        "(the target may stay on '%s')\n", a->device);
        return 2;
    }
    return 0;
}

/* ---- the run ------------------------------------------------------------------ */

/* What a run holds; gen_run_free releases it. */
typedef struct {
    ms_tok *tok;
    ms_model *model;
    ms_tgt *tgt;
    ms_dft *dft;
    ms_ngd *ngd; /* --draft-kind ngram */
    ms_ids ids;
    char *rendered;
    question *plist;
    int64_t n_prompts;
    ms_ids gen;            /* the ids a turn emitted */
    char **answers;        /* chat: each finished turn's answer text [n_answers] */
    int64_t n_answers;
    ms_chat_msg *msgs;
    FILE *stats_f, *ids_f;
    uint64_t request_id;
} gen_run;

static void gen_run_free(gen_run *r) {
    if (r->stats_f) fclose(r->stats_f);
    if (r->ids_f) fclose(r->ids_f);
    for (int64_t t = 0; r->answers && t < r->n_answers; t++) free(r->answers[t]);
    questions_free(r->plist, r->n_prompts);
    free(r->answers);
    free(r->msgs);
    ms_ids_free(&r->gen);
    free(r->rendered);
    ms_ids_free(&r->ids);
    ms_dft_free(&r->dft);
    ms_ngd_free(&r->ngd);
    ms_tgt_free(&r->tgt);
    ms_model_free(&r->model);
    ms_tok_free(&r->tok);
}

/* Tokenizer, target model and draft, each checked against the others. */
static ms_status load_models(const gen_args *a, gen_run *r) {
    MS_TRY(ms_tok_load_path(a->model_dir, &r->tok));
    ms_model_opts mo = {.max_ctx = a->max_ctx, .device = a->device, .act = a->act, .q8_matmul = a->q8_matmul};
    MS_TRY(ms_model_load(a->model_dir, &mo, &r->model));
    const int64_t V = ms_model_vocab(r->model);
    if (ms_tok_vocab_size(r->tok) > V)
        MS_FAIL(MS_ERR_FORMAT, "%s: tokenizer has %lld ids but the model only %lld", a->model_dir,
                (long long)ms_tok_vocab_size(r->tok), (long long)V);
    MS_TRY(ms_tgt_new(r->model, &r->tgt));
    int threads = a->threads > 0 ? (int)a->threads : ms_k_cpu_cores();
    if (a->speculative) ms_tgt_cost_cache(r->tgt, a->model_dir, threads, a->q8_matmul, a->device);
    const ms_dft_opts *d = &a->dopt;
    if (a->speculative && d->kind == MS_DRAFT_NGRAM) {
        MS_TRY(ms_ngd_new(&d->ngram_p, &r->ngd));
        MS_LOG_INFO("draft: kind ngram (suffixes of %lld..%lld tokens, continuations of ≤ %lld)",
                    (long long)d->ngram_p.n_min, (long long)d->ngram_p.n_max, (long long)d->ngram_p.max_len);
    } else if (a->speculative) {
        MS_TRY(ms_dft_new(d, &r->dft));
        if (ms_dft_vocab(r->dft) != V)
            MS_FAIL(MS_ERR_FORMAT, "draft vocabulary %lld differs from the target's %lld: they must share a tokenizer",
                    (long long)ms_dft_vocab(r->dft), (long long)V);
    }
    if (a->chat && ms_tok_chat_kind(r->tok) == MS_CHAT_NONE)
        MS_FAIL(MS_ERR_UNSUPPORTED,
                "%s: the tokenizer has no chat template this program knows (Llama-3 or ChatML); drop --chat",
                a->model_dir);
    return MS_OK;
}

/* Sampling and stop ids into a->gp; the prompts; the output files. */
static ms_status prepare_run(gen_args *a, const char *prompt, gen_run *r) {
    a->gp.sampling = (ms_k_sampling){.temperature = (float)a->temperature, .top_p = (float)a->top_p};
    a->gp.seed = (uint64_t)a->seed;
    /* the end-of-generation ids stop a request, or with --ignore-eos are
     * never generated (llama.cpp's semantics: its text goes on as ours) */
    const int32_t *eos;
    int n_eos = ms_tok_eos(r->tok, &eos);
    for (int i = 0; i < n_eos && i < MS_MAX_STOP; i++) {
        if (a->ignore_eos) a->gp.ban_ids[a->gp.n_ban++] = eos[i];
        else a->gp.stop_ids[a->gp.n_stop++] = eos[i];
    }
    if (a->prompts_jsonl) {
        MS_TRY(load_jsonl_prompts(a->prompts_jsonl, a->first, &r->plist, &r->n_prompts));
    } else {
        r->plist = ms_calloc(1, sizeof *r->plist);
        if (!r->plist) return MS_ERR_NOMEM;
        r->n_prompts = 1;
        r->plist[0].turns = ms_calloc(1, sizeof(char *));
        if (!r->plist[0].turns || !(r->plist[0].turns[0] = strdup(prompt))) return MS_ERR_NOMEM;
        r->plist[0].n_turns = 1;
    }
    if (a->stats_out && !(r->stats_f = fopen(a->stats_out, "w")))
        MS_FAIL(MS_ERR_IO, "%s: cannot write: %s", a->stats_out, strerror(errno));
    if (a->ids_out && !(r->ids_f = fopen(a->ids_out, "w")))
        MS_FAIL(MS_ERR_IO, "%s: cannot write: %s", a->ids_out, strerror(errno));
    return MS_OK;
}

/* r->ids := the context of turn t, the conversation so far (see --help). */
static ms_status turn_prompt(const gen_args *a, gen_run *r, const question *q, int64_t pi, int64_t t) {
    free(r->rendered);
    r->rendered = NULL;
    if (a->chat) {
        int64_t nm = 0;
        if (a->system_msg) r->msgs[nm++] = (ms_chat_msg){MS_ROLE_SYSTEM, a->system_msg};
        for (int64_t j = 0; j < t; j++) {
            r->msgs[nm++] = (ms_chat_msg){MS_ROLE_USER, q->turns[j]};
            r->msgs[nm++] = (ms_chat_msg){MS_ROLE_ASSISTANT, r->answers[j]};
        }
        r->msgs[nm++] = (ms_chat_msg){MS_ROLE_USER, q->turns[t]};
        MS_TRY(ms_chat_render(ms_tok_chat_kind(r->tok), r->msgs, nm, true, &r->rendered));
        r->ids.n = 0;
        MS_TRY(ms_tok_encode(r->tok, r->rendered, strlen(r->rendered), true, &r->ids));
    } else if (t == 0) {
        if (!a->no_bos && ms_tok_add_bos(r->tok) && ms_tok_bos(r->tok) >= 0)
            MS_TRY(ms_ids_push(&r->ids, ms_tok_bos(r->tok)));
        MS_TRY(ms_tok_encode(r->tok, q->turns[0], strlen(q->turns[0]), false, &r->ids));
    } else {
        /* ids = turn t−1's prompt ⊕ its generated ids (appended by run_question) */
        size_t len = strlen(q->turns[t]) + 3;
        r->rendered = ms_malloc(len);
        if (!r->rendered) return MS_ERR_NOMEM;
        snprintf(r->rendered, len, "\n\n%s", q->turns[t]);
        MS_TRY(ms_tok_encode(r->tok, r->rendered, strlen(r->rendered), false, &r->ids));
    }
    if (r->ids.n == 0)
        MS_FAIL(MS_ERR_FORMAT, "prompt %lld: empty prompt and no BOS token: nothing to condition on", (long long)pi);
    return MS_OK;
}

/* Generate one turn from r->ids, its text to stdout (unless quiet) and its
 * ids to r->gen. */
static ms_status turn_generate(const gen_args *a, gen_run *r, ms_gen_stats *st) {
    r->gen.n = 0;
    printer pr = {.tok = r->tok, .quiet = a->quiet, .collect = &r->gen};
    ms_tok_decoder_init(&pr.dec);
    if (a->echo) {
        pr.collect = NULL;
        if (!print_tokens(&pr, r->ids.v, r->ids.n)) return pr.err < 0 ? pr.err : MS_ERR_INTERNAL;
        pr.collect = &r->gen;
    } else {
        pr.dec.prev_id = r->ids.v[r->ids.n - 1];
    }
    ms_draft_port port;
    if (r->dft) port = ms_dft_port(r->dft);
    if (r->ngd) port = ms_ngd_port(r->ngd);
    MS_TRY(ms_tgt_generate(r->tgt, r->dft || r->ngd ? &port : NULL, ++r->request_id, r->ids.v, r->ids.n, &a->gp,
                           print_tokens, &pr, st));
    if (pr.err < 0) return pr.err;
    if (!a->quiet) {
        char tail[16];
        size_t n = 0;
        ms_tok_decode_flush(&pr.dec, tail, sizeof tail, &n);
        fwrite(tail, 1, n, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    return MS_OK;
}

/* The turn's line on stderr: the full report for a single generation, a
 * progress line otherwise. */
static void report_turn(const gen_run *r, int64_t pi, int64_t t, int64_t n_turns, const ms_gen_stats *st) {
    double decode_s = st->total_s - st->prefill_s;
    if (r->n_prompts == 1 && n_turns == 1) {
        fprintf(stderr,
                "prompt tokens: %lld, prefill: %.2f ms (%.1f tok/s), generated: %lld (%s), decode: %.1f tok/s, "
                "CPU kernels %s\n",
                (long long)st->prompt_tokens, st->prefill_s * 1e3,
                st->prefill_s > 0 ? (double)st->prompt_tokens / st->prefill_s : 0.0, (long long)st->new_tokens,
                st->stop_reason, decode_s > 0 ? (double)st->new_tokens / decode_s : 0.0,
                ms_isa_name(ms_isa_active()));
        if (r->dft || r->ngd) ms_gen_stats_print(st, stderr);
    } else {
        fprintf(stderr, "\r[%lld/%lld] turn %lld: prompt %lld tokens, %lld new, accepted %.2f, %.1f tok/s   ",
                (long long)pi + 1, (long long)r->n_prompts, (long long)t + 1, (long long)st->prompt_tokens,
                (long long)st->new_tokens, ms_gen_stats_mean_accepted(st),
                st->total_s > 0 ? (double)st->new_tokens / st->total_s : 0.0);
    }
}

static void write_ids_line(FILE *f, int64_t pi, int64_t t, const ms_ids *ids, const ms_ids *gen, int32_t stop_id) {
    fprintf(f, "{\"prompt\": %lld, \"turn\": %lld, \"prompt_ids\": [", (long long)pi, (long long)t + 1);
    for (int64_t i = 0; i < ids->n; i++) fprintf(f, "%s%d", i ? ", " : "", ids->v[i]);
    fprintf(f, "], \"ids\": [");
    for (int64_t i = 0; i < gen->n; i++) fprintf(f, "%s%d", i ? ", " : "", gen->v[i]);
    /* the stop token too (not emitted as text), as llama.cpp lists it */
    if (stop_id >= 0) fprintf(f, "%s%d", gen->n ? ", " : "", stop_id);
    fprintf(f, "]}\n");
    fflush(f);
}

/* Every turn of question pi (up to --turns), each carried into the next. */
static ms_status run_question(gen_args *a, gen_run *r, int64_t pi, summary *sum) {
    const question *q = &r->plist[pi];
    const int64_t n_turns = q->n_turns < a->max_turns ? q->n_turns : a->max_turns;
    int64_t q_new = 0;
    double q_wall = 0.0;
    bool q_ran = false;
    free(r->answers);
    free(r->msgs);
    r->n_answers = 0;
    r->answers = ms_calloc((size_t)n_turns, sizeof *r->answers);
    r->msgs = ms_calloc((size_t)(2 * n_turns + 1), sizeof *r->msgs);
    if (!r->answers || !r->msgs) return MS_ERR_NOMEM;
    r->n_answers = n_turns;
    r->ids.n = 0;
    for (int64_t t = 0; t < n_turns; t++) {
        MS_TRY(turn_prompt(a, r, q, pi, t));
        int64_t budget = a->max_tokens;
        if (a->steps >= 0) budget = a->steps + 1 > r->ids.n ? a->steps + 1 - r->ids.n : 0;
        if (r->ids.n >= ms_model_max_ctx(r->model)) {
            MS_LOG_WARN("prompt %lld turn %lld: %lld tokens leave no room in the %lld-row context; skipped",
                        (long long)pi, (long long)t + 1, (long long)r->ids.n, (long long)ms_model_max_ctx(r->model));
            break; /* later turns only grow */
        }
        a->gp.max_new_tokens = budget;
        ms_gen_stats st;
        MS_TRY(turn_generate(a, r, &st));
        report_turn(r, pi, t, n_turns, &st);
        summary_add(sum, &st);
        q_new += st.new_tokens;
        q_wall += st.total_s;
        q_ran = true;
        if (r->stats_f) write_stats_line(r->stats_f, pi, t + 1, q, &st);
        if (r->ids_f) write_ids_line(r->ids_f, pi, t, &r->ids, &r->gen, st.stop_id);
        if (t + 1 == n_turns) break;
        /* carry the turn into the next one's context */
        if (a->chat) {
            MS_TRY(answer_text(r->tok, &r->gen, &r->answers[t]));
        } else {
            for (int64_t i = 0; i < r->gen.n; i++) MS_TRY(ms_ids_push(&r->ids, r->gen.v[i]));
        }
    }
    if (q_ran) summary_question(sum, q_new, q_wall);
    for (int64_t t = 0; t < r->n_answers; t++) {
        free(r->answers[t]);
        r->answers[t] = NULL;
    }
    return MS_OK;
}

int main(int argc, char **argv) {
    ms_k_cpu_fix_blas_core(argv);
    ms_log_set_role("generate");
    gen_args a;
    int code = parse_args(argc, argv, &a);
    if (code >= 0) return code;
    if (a.speculative && check_spec_args(&a) != 0) return 2;
    ms_k_cpu_set_threads(a.threads > 0 ? (int)a.threads : ms_k_cpu_cores());

    const char *prompt = a.prompt;
    char *prompt_buf = NULL;
    if (a.prompt_file) {
        size_t len;
        if (ms_read_file(a.prompt_file, &prompt_buf, &len) < 0) return 1;
        prompt = prompt_buf;
    }
    int rc = 1;
    gen_run r = {0};
    static summary sum; /* large: the link samples */
    if (load_models(&a, &r) < 0 || prepare_run(&a, prompt, &r) < 0) goto done;
    for (int64_t pi = 0; pi < r.n_prompts; pi++)
        if (run_question(&a, &r, pi, &sum) < 0) goto done;
    if (r.n_prompts > 1 || a.max_turns > 1) fputc('\n', stderr);
    if (a.prompts_jsonl || a.stats_out) summary_print(&sum, r.dft || r.ngd, stdout);
    rc = 0;
done:
    gen_run_free(&r);
    free(prompt_buf);
    return rc;
}
