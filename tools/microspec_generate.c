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
#include "ms_pool.h"
#include "ms_target.h"
#include "ms_tokenizer.h"

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
            "      --q8-matmul        GGUF: activations quantized to 8-bit blocks and integer dot\n"
            "                         products (several times faster; log-probs ~0.1 from the exact\n"
            "                         default, f32 activations against the dequantized blocks)\n"
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
    /* draft tokens accepted over the request: Σ_d accepted_ge[d] (a round with a
     * d-token accepted path counts in accepted_ge[1..d]) */
    int64_t accepted = 0;
    for (int64_t d = 1; d <= s->max_depth; d++) accepted += s->accepted_ge[d];
    fprintf(f, "{\"index\": %lld, \"turn\": %lld", (long long)index, (long long)turn);
    put_json_str(f, "question_id", q->id);
    put_json_str(f, "category", q->category);
    fprintf(f,
            ", \"prompt_tokens\": %lld, \"new_tokens\": %lld, \"rounds\": %lld, \"spec_rounds\": %lld, "
            "\"mean_accepted\": %.4f, \"accepted\": %lld, \"drafted\": %lld, \"coverage\": %.4f, \"vocab_mean\": %.1f, "
            "\"vocab_max\": %lld, "
            "\"wall_s\": %.6f, \"prefill_s\": %.6f, \"draft_backbone_s\": %.6f, \"draft_head_s\": %.6f, "
            "\"vocab_s\": %.6f, \"verify_s\": %.6f, \"accept_s\": %.6f, \"pruned\": %lld, \"plain_rounds\": %lld, "
            "\"skipped_rounds\": %lld, \"stop\": \"%s\", \"draft_failed\": %s}\n",
            (long long)s->prompt_tokens, (long long)s->new_tokens, (long long)s->rounds,
            (long long)s->spec_rounds, ms_gen_stats_mean_accepted(s), (long long)accepted, (long long)s->drafted,
            ms_gen_stats_coverage(s),
            s->spec_rounds ? (double)s->vocab_sum / (double)s->spec_rounds : 0.0, (long long)s->vocab_max, s->total_s,
            s->prefill_s, s->draft_backbone_s, s->draft_head_s, s->vocab_s, s->verify_s, s->accept_s,
            (long long)s->pruned, (long long)s->plain_rounds, (long long)s->skipped_rounds, s->stop_reason,
            s->draft_failed ? "true" : "false");
}

int main(int argc, char **argv) {
    ms_k_cpu_fix_blas_core(argv);
    ms_log_set_role("generate");
    const char *model_dir = NULL, *prompt = "", *prompt_file = NULL, *system_msg = NULL;
    const char *draft_dir = NULL, *draft_kind = NULL, *vocab_mode = "dynamic", *vocab_list = NULL;
    int64_t max_tokens = 256, steps = -1, max_ctx = 0, threads = 0, seed = 42;
    int q8_matmul = 0;
    double temperature = 0.0, top_p = 1.0;
    bool chat = false, echo = false, no_bos = false, ignore_eos = false, quiet = false;
    const char *prompts_jsonl = NULL, *stats_out = NULL, *ids_out = NULL, *vocab_stream = NULL, *lm_head = "gathered";
    int64_t first = INT64_MAX, max_turns = 1;
    ms_gen_params gp = ms_gen_params_default();
    ms_dft_opts dopt = ms_dft_opts_default();
    const char *device = "cpu", *draft_device = NULL;
    ms_dtype act = MS_DTYPE_BF16;

    enum {
        O_STEPS = 1000, O_TOPP, O_SEED, O_MAXCTX, O_THREADS, O_ECHO, O_NOBOS, O_IGNEOS, O_DRAFT, O_DKIND,
        O_DLAYERS, O_VOCAB, O_VLIST, O_WMAX, O_KPRE, O_KVER, O_TK, O_TDEPTH, O_TTOTAL, O_VSTREAM, O_LMHEAD, O_VART, O_SVK, O_BDECAY, O_BMIN, O_DSC, O_DSD, O_DSM, O_PMIN, O_ADAPT, O_CHAIN, O_JSONL, O_FIRST,
        O_QUIET, O_STATSOUT, O_IDSOUT, O_Q8MM, O_TURNS, O_DEVICE, O_DDEVICE, O_DTYPE, O_NGMIN, O_NGMAX, O_NGLEN, O_POLICY
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
        {"q8-matmul", no_argument, 0, O_Q8MM}, {"help", no_argument, 0, 'h'},
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
    int c;
    bool spec_flags = false, tree_flags = false;
    while ((c = getopt_long(argc, argv, "m:p:f:cs:n:t:h", opts, NULL)) != -1) {
        bool ok = true;
        if ((c >= O_DRAFT && c <= O_CHAIN) || (c >= O_NGMIN && c <= O_POLICY)) spec_flags = true;
        if (c == O_TK || c == O_TDEPTH || c == O_TTOTAL || c == O_CHAIN || c == O_PMIN || c == O_ADAPT) tree_flags = true;
        switch (c) {
        case 'm': model_dir = optarg; break;
        case 'p': prompt = optarg; break;
        case 'f': prompt_file = optarg; break;
        case 'c': chat = true; break;
        case 's': system_msg = optarg; break;
        case 'n': ok = parse_i64(optarg, "--max-tokens", 0, 1 << 24, &max_tokens); break;
        case O_STEPS: ok = parse_i64(optarg, "--steps", 1, 1 << 24, &steps); break;
        case 't': ok = parse_f(optarg, "--temperature", 0.0, 100.0, &temperature); break;
        case O_TOPP: ok = parse_f(optarg, "--top-p", 1e-6, 1.0, &top_p); break;
        case O_SEED: ok = parse_i64(optarg, "--seed", 0, INT64_MAX, &seed); break;
        case O_MAXCTX: ok = parse_i64(optarg, "--max-ctx", 1, 1 << 24, &max_ctx); break;
        case O_THREADS: ok = parse_i64(optarg, "--threads", 1, 256, &threads); break;
        case O_ECHO: echo = true; break;
        case O_NOBOS: no_bos = true; break;
        case O_IGNEOS: ignore_eos = true; break;
        case O_DRAFT: draft_dir = optarg; break;
        case O_DKIND: draft_kind = optarg; break;
        case O_DLAYERS: ok = parse_i64(optarg, "--draft-layers", 1, 1024, &dopt.layers); break;
        case O_VOCAB: vocab_mode = optarg; break;
        case O_VLIST: vocab_list = optarg; break;
        case O_WMAX: ok = parse_i64(optarg, "--w-max", 1, 1 << 24, &dopt.w_max); break;
        case O_KPRE: ok = parse_i64(optarg, "--k-pre", 0, 64, &gp.k_pre); break;
        case O_KVER: ok = parse_i64(optarg, "--k-ver", 0, 64, &gp.k_ver); break;
        case O_TK: ok = parse_i64(optarg, "--tree-k", 1, MS_TREE_MAX_K, &dopt.tree.top_k); break;
        case O_TDEPTH: ok = parse_i64(optarg, "--tree-depth", 0, 62, &dopt.tree.depth); break;
        case O_TTOTAL: ok = parse_i64(optarg, "--tree-total", 2, MS_TREE_MAX, &dopt.tree.total); break;
        case O_CHAIN: dopt.tree.chain = true; break;
        case O_PMIN: {
            double pm = 0.0;
            ok = parse_f(optarg, "--draft-p-min", 0.0, 2.0, &pm);
            dopt.tree.p_min = (float)pm;
            break;
        }
        case O_ADAPT: dopt.adaptive = true; break;
        case O_POLICY:
            ok = !strcmp(optarg, "cost") || !strcmp(optarg, "all");
            gp.cost_policy = !strcmp(optarg, "cost");
            if (!ok) fprintf(stderr, "microspec-generate: --draft-policy must be cost or all, got '%s'\n", optarg);
            break;
        case O_NGMIN: ok = parse_i64(optarg, "--ngram-min", 1, MS_NGRAM_N_MAX, &dopt.ngram_p.n_min); break;
        case O_NGMAX: ok = parse_i64(optarg, "--ngram-max", 1, MS_NGRAM_N_MAX, &dopt.ngram_p.n_max); break;
        case O_NGLEN: ok = parse_i64(optarg, "--ngram-len", 1, MS_TREE_MAX - 1, &dopt.ngram_p.max_len); break;
        case O_VSTREAM: vocab_stream = optarg; break;
        case O_LMHEAD: lm_head = optarg; break;
        case O_VART: dopt.vocab_artifact = optarg; break;
        case O_SVK: ok = parse_i64(optarg, "--specvocab-k", 1, 1 << 24, &dopt.specvocab_k); break;
        case O_BDECAY: ok = parse_f(optarg, "--vocab-budget-decay", 1e-6, 1.0, &dopt.budget_decay); break;
        case O_BMIN: ok = parse_i64(optarg, "--vocab-budget-min", 0, 1 << 24, &dopt.budget_min); break;
        case O_DSC: ok = parse_i64(optarg, "--dynaspec-clusters", 0, 1 << 24, &dopt.dynaspec_clusters); break;
        case O_DSD: ok = parse_f(optarg, "--dynaspec-decay", 1e-6, 1.0, &dopt.dynaspec_decay); break;
        case O_DSM: ok = parse_i64(optarg, "--dynaspec-min", 0, 1 << 24, &dopt.dynaspec_min); break;
        case O_DEVICE: device = optarg; break;
        case O_DDEVICE: draft_device = optarg; break;
        case O_DTYPE:
            ok = ms_dtype_parse_float(optarg, &act) && (act == MS_DTYPE_BF16 || act == MS_DTYPE_F16);
            if (!ok) fprintf(stderr, "microspec-generate: --dtype must be bf16 or f16, got '%s'\n", optarg);
            break;
        case O_TURNS:
            if (!strcmp(optarg, "all")) max_turns = INT64_MAX;
            else ok = parse_i64(optarg, "--turns", 1, 2, &max_turns);
            break;
        case O_JSONL: prompts_jsonl = optarg; break;
        case O_FIRST: ok = parse_i64(optarg, "--first", 1, 1 << 24, &first); break;
        case O_QUIET: quiet = true; break;
        case O_STATSOUT: stats_out = optarg; break;
        case O_IDSOUT: ids_out = optarg; break;
        case O_Q8MM: q8_matmul = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (!ok) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "microspec-generate: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (!model_dir) {
        fprintf(stderr, "microspec-generate: --model DIR is required (see --help)\n");
        return 2;
    }
    if (!draft_device) draft_device = device;
    int cuda_dev, draft_cuda_dev;
    if (ms_model_device_parse(device, &cuda_dev) < 0 || ms_model_device_parse(draft_device, &draft_cuda_dev) < 0)
        return 2;
#ifndef MS_HAVE_CUDA
    if (cuda_dev >= 0 || draft_cuda_dev >= 0) {
        fprintf(stderr, "microspec-generate: device '%s' needs CUDA, but this program was built without CUDA\n",
                cuda_dev >= 0 ? device : draft_device);
        return 2;
    }
#endif
    bool speculative = draft_dir || draft_kind || spec_flags;
    if (speculative) {
        /* The defaults are what measured best on a CPU (results/gguf/defaults-2026-11-28.md):
         * the n-gram source merged (free drafts; the gate then starts with the
         * model off and lets it in once it pays), and on a CPU a chain of 5 with
         * the confidence stop at 0.7 (a 60-node tree costs more rows than it
         * saves on a few cores). */
        if (!draft_kind) draft_kind = draft_dir ? "lm+ngram" : "layerskip+ngram";
        if (!tree_flags && draft_cuda_dev < 0) {
            dopt.tree.chain = true;
            dopt.tree.depth = 4;
            dopt.tree.p_min = 0.7f;
        }
        if (!ms_dft_kind_parse(draft_kind, &dopt.kind, &dopt.ngram)) {
            fprintf(stderr, "microspec-generate: --draft-kind must be lm, eagle, layerskip, ngram or one of the first "
                            "three + \"+ngram\", got '%s'\n", draft_kind);
            return 2;
        }
        if ((dopt.kind == MS_DRAFT_NGRAM || dopt.ngram) && ms_ngram_params_check(&dopt.ngram_p) < 0) return 2;
        if (dopt.kind == MS_DRAFT_NGRAM && draft_dir) {
            fprintf(stderr, "microspec-generate: --draft-kind ngram has no model: drop --draft, or use lm+ngram\n");
            return 2;
        }
        if (!ms_dft_vocab_parse(vocab_mode, &dopt.vocab, &dopt.vsel)) {
            fprintf(stderr, "microspec-generate: --vocab must be full, static, dynamic, specvocab, specvocab+window, "
                            "dynaspec or dynaspec+window, got '%s'\n", vocab_mode);
            return 2;
        }
        if (vocab_stream && !ms_vocab_stream_parse(vocab_stream, &dopt.stream)) {
            fprintf(stderr, "microspec-generate: --vocab-stream must be both, context or extension, got '%s'\n",
                    vocab_stream);
            return 2;
        }
        if (vocab_stream && dopt.vocab != MS_VOCAB_DYNAMIC) {
            fprintf(stderr, "microspec-generate: --vocab-stream only applies to --vocab dynamic (the window), not %s\n",
                    vocab_mode);
            return 2;
        }
        if (!ms_dft_head_parse(lm_head, &dopt.lm_head)) {
            fprintf(stderr, "microspec-generate: --lm-head must be gathered or indexed, got '%s'\n", lm_head);
            return 2;
        }
        if (dopt.kind != MS_DRAFT_LAYERSKIP && dopt.kind != MS_DRAFT_NGRAM && !draft_dir) {
            fprintf(stderr, "microspec-generate: --draft-kind %s needs --draft DIR\n", draft_kind);
            return 2;
        }
        if (dopt.tree.chain && dopt.tree.depth < 1) dopt.tree.depth = 1;
        dopt.model_dir = dopt.kind == MS_DRAFT_LAYERSKIP ? model_dir : draft_dir;
        dopt.target_dir = model_dir;
        dopt.vocab_list = vocab_list;
        dopt.max_ctx = max_ctx;
        dopt.device = draft_device;
        dopt.act = act;
        if (dopt.kind == MS_DRAFT_EAGLE && draft_cuda_dev >= 0) {
            fprintf(stderr, "microspec-generate: an eagle draft runs on the CPU only: add --draft-device cpu "
                            "(the target may stay on '%s')\n", device);
            return 2;
        }
    }
    ms_k_cpu_set_threads(threads > 0 ? (int)threads : ms_pool_cores());

    char *prompt_buf = NULL;
    if (prompt_file) {
        size_t len;
        if (ms_read_file(prompt_file, &prompt_buf, &len) < 0) return 1;
        prompt = prompt_buf;
    }

    int rc = 1;
    ms_tok *tok = NULL;
    ms_model *model = NULL;
    ms_tgt *tgt = NULL;
    ms_dft *dft = NULL;
    ms_ngd *ngd = NULL; /* --draft-kind ngram */
    ms_ids ids = {0};
    char *rendered = NULL;
    question *plist = NULL;
    int64_t n_prompts = 0;
    ms_ids gen = {0};        /* the ids a turn emitted */
    char **answers = NULL;   /* chat: each finished turn's answer text [n_answers] */
    int64_t n_answers = 0;
    ms_chat_msg *msgs = NULL;
    FILE *stats_f = NULL, *ids_f = NULL;

    if (ms_tok_load_path(model_dir, &tok) < 0) goto done;
    ms_model_opts mo = {.max_ctx = max_ctx, .device = device, .act = act, .q8_matmul = q8_matmul};
    if (ms_model_load(model_dir, &mo, &model) < 0) goto done;
    const int64_t V = ms_model_vocab(model);
    if (ms_tok_vocab_size(tok) > V) {
        MS_LOG_ERROR("%s: tokenizer has %lld ids but the model only %lld", model_dir,
                     (long long)ms_tok_vocab_size(tok), (long long)V);
        goto done;
    }
    if (ms_tgt_new(model, &tgt) < 0) goto done;
    if (speculative) ms_tgt_cost_cache(tgt, model_dir, threads > 0 ? (int)threads : ms_pool_cores(), q8_matmul, device);
    if (speculative && dopt.kind == MS_DRAFT_NGRAM) {
        if (ms_ngd_new(&dopt.ngram_p, &ngd) < 0) goto done;
        MS_LOG_INFO("draft: kind ngram (suffixes of %lld..%lld tokens, continuations of ≤ %lld)",
                    (long long)dopt.ngram_p.n_min, (long long)dopt.ngram_p.n_max, (long long)dopt.ngram_p.max_len);
    } else if (speculative) {
        if (ms_dft_new(&dopt, &dft) < 0) goto done;
        if (ms_dft_vocab(dft) != V) {
            MS_LOG_ERROR("draft vocabulary %lld differs from the target's %lld: they must share a tokenizer",
                         (long long)ms_dft_vocab(dft), (long long)V);
            goto done;
        }
    }

    if (chat && ms_tok_chat_kind(tok) == MS_CHAT_NONE) {
        MS_LOG_ERROR("%s: the tokenizer has no chat template this program knows (Llama-3 or ChatML); drop --chat",
                     model_dir);
        goto done;
    }
    gp.sampling = (ms_k_sampling){.temperature = (float)temperature, .top_p = (float)top_p};
    gp.seed = (uint64_t)seed;
    {
        /* the end-of-generation ids stop a request, or with --ignore-eos are
         * never generated (llama.cpp's semantics: its text goes on as ours) */
        const int32_t *eos;
        int n_eos = ms_tok_eos(tok, &eos);
        for (int i = 0; i < n_eos && i < MS_MAX_STOP; i++) {
            if (ignore_eos) gp.ban_ids[gp.n_ban++] = eos[i];
            else gp.stop_ids[gp.n_stop++] = eos[i];
        }
    }
    if (prompts_jsonl) {
        if (load_jsonl_prompts(prompts_jsonl, first, &plist, &n_prompts) < 0) goto done;
    } else {
        plist = ms_calloc(1, sizeof *plist);
        if (!plist) goto done;
        n_prompts = 1;
        plist[0].turns = ms_calloc(1, sizeof(char *));
        if (!plist[0].turns || !(plist[0].turns[0] = strdup(prompt))) goto done;
        plist[0].n_turns = 1;
    }
    if (stats_out && !(stats_f = fopen(stats_out, "w"))) {
        MS_LOG_ERROR("%s: cannot write: %s", stats_out, strerror(errno));
        goto done;
    }
    if (ids_out && !(ids_f = fopen(ids_out, "w"))) {
        MS_LOG_ERROR("%s: cannot write: %s", ids_out, strerror(errno));
        goto done;
    }

    static summary sum; /* large: the link samples */
    uint64_t request_id = 0;
    for (int64_t pi = 0; pi < n_prompts; pi++) {
        const question *q = &plist[pi];
        const int64_t n_turns = q->n_turns < max_turns ? q->n_turns : max_turns;
        int64_t q_new = 0;
        double q_wall = 0.0;
        bool q_ran = false;
        free(answers);
        free(msgs);
        n_answers = 0;
        answers = ms_calloc((size_t)n_turns, sizeof *answers);
        msgs = ms_calloc((size_t)(2 * n_turns + 1), sizeof *msgs);
        if (!answers || !msgs) goto done;
        n_answers = n_turns;
        ids.n = 0;
        for (int64_t t = 0; t < n_turns; t++) {
            /* The context of turn t: the conversation so far (see --help). */
            free(rendered);
            rendered = NULL;
            if (chat) {
                int64_t nm = 0;
                if (system_msg) msgs[nm++] = (ms_chat_msg){MS_ROLE_SYSTEM, system_msg};
                for (int64_t j = 0; j < t; j++) {
                    msgs[nm++] = (ms_chat_msg){MS_ROLE_USER, q->turns[j]};
                    msgs[nm++] = (ms_chat_msg){MS_ROLE_ASSISTANT, answers[j]};
                }
                msgs[nm++] = (ms_chat_msg){MS_ROLE_USER, q->turns[t]};
                if (ms_chat_render(ms_tok_chat_kind(tok), msgs, nm, true, &rendered) < 0) goto done;
                ids.n = 0;
                if (ms_tok_encode(tok, rendered, strlen(rendered), true, &ids) < 0) goto done;
            } else if (t == 0) {
                if (!no_bos && ms_tok_add_bos(tok) && ms_tok_bos(tok) >= 0 && ms_ids_push(&ids, ms_tok_bos(tok)) < 0)
                    goto done;
                if (ms_tok_encode(tok, q->turns[0], strlen(q->turns[0]), false, &ids) < 0) goto done;
            } else {
                /* ids = turn t−1's prompt ⊕ its generated ids (appended below) */
                size_t len = strlen(q->turns[t]) + 3;
                rendered = ms_malloc(len);
                if (!rendered) goto done;
                snprintf(rendered, len, "\n\n%s", q->turns[t]);
                if (ms_tok_encode(tok, rendered, strlen(rendered), false, &ids) < 0) goto done;
            }
            if (ids.n == 0) {
                MS_LOG_ERROR("prompt %lld: empty prompt and no BOS token: nothing to condition on", (long long)pi);
                goto done;
            }
            int64_t budget = max_tokens;
            if (steps >= 0) budget = steps + 1 > ids.n ? steps + 1 - ids.n : 0;
            if (ids.n >= ms_model_max_ctx(model)) {
                MS_LOG_WARN("prompt %lld turn %lld: %lld tokens leave no room in the %lld-row context; skipped",
                            (long long)pi, (long long)t + 1, (long long)ids.n, (long long)ms_model_max_ctx(model));
                break; /* later turns only grow */
            }
            gp.max_new_tokens = budget;

            gen.n = 0;
            printer pr = {.tok = tok, .quiet = quiet, .collect = &gen};
            ms_tok_decoder_init(&pr.dec);
            if (echo) {
                pr.collect = NULL;
                if (!print_tokens(&pr, ids.v, ids.n)) goto done;
                pr.collect = &gen;
            } else {
                pr.dec.prev_id = ids.v[ids.n - 1];
            }
            ms_gen_stats st;
            ms_draft_port port;
            if (dft) port = ms_dft_port(dft);
            if (ngd) port = ms_ngd_port(ngd);
            if (ms_tgt_generate(tgt, dft || ngd ? &port : NULL, ++request_id, ids.v, ids.n, &gp, print_tokens, &pr, &st) < 0)
                goto done;
            if (pr.err < 0) goto done;
            if (!quiet) {
                char tail[16];
                size_t n = 0;
                ms_tok_decode_flush(&pr.dec, tail, sizeof tail, &n);
                fwrite(tail, 1, n, stdout);
                fputc('\n', stdout);
                fflush(stdout);
            }
            double decode_s = st.total_s - st.prefill_s;
            if (n_prompts == 1 && n_turns == 1) {
                fprintf(stderr,
                        "prompt tokens: %lld, prefill: %.2f ms (%.1f tok/s), generated: %lld (%s), decode: %.1f tok/s, "
                        "CPU kernels %s\n",
                        (long long)st.prompt_tokens, st.prefill_s * 1e3,
                        st.prefill_s > 0 ? (double)st.prompt_tokens / st.prefill_s : 0.0, (long long)st.new_tokens,
                        st.stop_reason, decode_s > 0 ? (double)st.new_tokens / decode_s : 0.0,
                        ms_isa_name(ms_isa_active()));
                if (dft || ngd) ms_gen_stats_print(&st, stderr);
            } else {
                fprintf(stderr, "\r[%lld/%lld] turn %lld: prompt %lld tokens, %lld new, accepted %.2f, %.1f tok/s   ",
                        (long long)pi + 1, (long long)n_prompts, (long long)t + 1, (long long)st.prompt_tokens,
                        (long long)st.new_tokens, ms_gen_stats_mean_accepted(&st),
                        st.total_s > 0 ? (double)st.new_tokens / st.total_s : 0.0);
            }
            summary_add(&sum, &st);
            q_new += st.new_tokens;
            q_wall += st.total_s;
            q_ran = true;
            if (stats_f) write_stats_line(stats_f, pi, t + 1, q, &st);
            if (ids_f) {
                fprintf(ids_f, "{\"prompt\": %lld, \"turn\": %lld, \"prompt_ids\": [", (long long)pi, (long long)t + 1);
                for (int64_t i = 0; i < ids.n; i++) fprintf(ids_f, "%s%d", i ? ", " : "", ids.v[i]);
                fprintf(ids_f, "], \"ids\": [");
                for (int64_t i = 0; i < gen.n; i++) fprintf(ids_f, "%s%d", i ? ", " : "", gen.v[i]);
                /* the stop token too (not emitted as text), as llama.cpp lists it */
                if (st.stop_id >= 0) fprintf(ids_f, "%s%d", gen.n ? ", " : "", st.stop_id);
                fprintf(ids_f, "]}\n");
                fflush(ids_f);
            }
            if (t + 1 == n_turns) break;
            /* carry the turn into the next one's context */
            if (chat) {
                if (answer_text(tok, &gen, &answers[t]) < 0) goto done;
            } else {
                for (int64_t i = 0; i < gen.n; i++)
                    if (ms_ids_push(&ids, gen.v[i]) < 0) goto done;
            }
        }
        if (q_ran) summary_question(&sum, q_new, q_wall);
        for (int64_t t = 0; t < n_answers; t++) {
            free(answers[t]);
            answers[t] = NULL;
        }
    }
    if (n_prompts > 1 || max_turns > 1) fputc('\n', stderr);
    if (prompts_jsonl || stats_out) summary_print(&sum, dft || ngd, stdout);
    rc = 0;
done:
    if (stats_f) fclose(stats_f);
    if (ids_f) fclose(ids_f);
    for (int64_t t = 0; answers && t < n_answers; t++) free(answers[t]);
    questions_free(plist, n_prompts);
    free(answers);
    free(msgs);
    ms_ids_free(&gen);
    free(rendered);
    free(prompt_buf);
    ms_ids_free(&ids);
    ms_dft_free(&dft);
    ms_ngd_free(&ngd);
    ms_tgt_free(&tgt);
    ms_model_free(&model);
    ms_tok_free(&tok);
    return rc;
}
