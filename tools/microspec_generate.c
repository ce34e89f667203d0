/* microspec-generate — generation from a Hugging Face model directory, alone
 * (autoregressive) or with a draft in the same process (speculative): text
 * on stdout, statistics on stderr. The single-process driver of both nodes. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_draft.h"
#include "ms_model.h"
#include "ms_target.h"
#include "ms_tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: microspec-generate --model DIR [options]\n"
            "\n"
            "Generates text autoregressively with the target model alone.\n"
            "Text goes to stdout, statistics to stderr.\n"
            "\n"
            "  -m, --model DIR        Hugging Face model directory (config.json, *.safetensors,\n"
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
            "      --threads N        CPU GEMM threads (default 1)\n"
            "      --echo             print the prompt text before the continuation\n"
            "      --no-bos           do not prepend BOS to a raw prompt\n"
            "      --ignore-eos       keep generating past end-of-sequence tokens\n"
            "\n"
            "Speculative decoding (output unchanged; only speed and acceptance change):\n"
            "      --draft DIR        draft model directory (lm: a small model with the same tokenizer;\n"
            "                         eagle: an EAGLE-1/2 head); layerskip needs none (uses --model)\n"
            "      --draft-kind K     lm | eagle | layerskip (default lm, or layerskip without --draft)\n"
            "      --draft-layers N   layerskip: the target's first N layers (default 1)\n"
            "      --vocab MODE       full | static | dynamic (default dynamic = MicroSpec)\n"
            "      --vocab-list F     static: id list from microspec-freqlist\n"
            "      --w-max N          dynamic window W_max (default 3072)\n"
            "      --k-pre N          top-K_pre target ids per prompt position (default 3)\n"
            "      --k-ver N          top-K_ver target ids per accepted node (default 3)\n"
            "      --tree-k N         children per node / beam width (default 10)\n"
            "      --tree-depth N     expansion passes after the first (default 5)\n"
            "      --tree-total N     tree nodes incl. the root, ≤ 64 (default 60)\n"
            "      --chain            a single path of tree-depth+1 tokens instead of a tree\n"
            "  -h, --help             this text\n");
}

static bool parse_i64(const char *s, const char *flag, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "microspec-generate: %s expects an integer in [%lld, %lld], got '%s'\n", flag, (long long)lo,
                (long long)hi, s);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_f(const char *s, const char *flag, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi)) {
        fprintf(stderr, "microspec-generate: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

typedef struct {
    const ms_tok *tok;
    ms_tok_decoder dec;
    ms_status err;
} printer;

/* Token callback: decode and write each batch of emitted tokens as it comes. */
static bool print_tokens(void *ctx, const int32_t *ids, int64_t n) {
    printer *pr = ctx;
    char buf[512];
    for (int64_t i = 0; i < n; i++) {
        size_t len = 0;
        pr->err = ms_tok_decode_next(pr->tok, &pr->dec, ids[i], true, buf, sizeof buf, &len);
        if (pr->err < 0) return false;
        fwrite(buf, 1, len, stdout);
    }
    fflush(stdout);
    return true;
}

int main(int argc, char **argv) {
    ms_log_set_role("generate");
    const char *model_dir = NULL, *prompt = "", *prompt_file = NULL, *system_msg = NULL;
    const char *draft_dir = NULL, *draft_kind = NULL, *vocab_mode = "dynamic", *vocab_list = NULL;
    int64_t max_tokens = 256, steps = -1, max_ctx = 0, threads = 1, seed = 42;
    double temperature = 0.0, top_p = 1.0;
    bool chat = false, echo = false, no_bos = false, ignore_eos = false;
    ms_gen_params gp = ms_gen_params_default();
    ms_dft_opts dopt = ms_dft_opts_default();

    enum {
        O_STEPS = 1000, O_TOPP, O_SEED, O_MAXCTX, O_THREADS, O_ECHO, O_NOBOS, O_IGNEOS, O_DRAFT, O_DKIND,
        O_DLAYERS, O_VOCAB, O_VLIST, O_WMAX, O_KPRE, O_KVER, O_TK, O_TDEPTH, O_TTOTAL, O_CHAIN
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
        {"chain", no_argument, 0, O_CHAIN},          {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    bool spec_flags = false;
    while ((c = getopt_long(argc, argv, "m:p:f:cs:n:t:h", opts, NULL)) != -1) {
        bool ok = true;
        if (c >= O_DRAFT) spec_flags = true;
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
    bool speculative = draft_dir || draft_kind || spec_flags;
    if (speculative) {
        if (!draft_kind) draft_kind = draft_dir ? "lm" : "layerskip";
        if (!ms_draft_kind_parse(draft_kind, &dopt.kind)) {
            fprintf(stderr, "microspec-generate: --draft-kind must be lm, eagle or layerskip, got '%s'\n", draft_kind);
            return 2;
        }
        if (!ms_vocab_mode_parse(vocab_mode, &dopt.vocab)) {
            fprintf(stderr, "microspec-generate: --vocab must be full, static or dynamic, got '%s'\n", vocab_mode);
            return 2;
        }
        if (dopt.kind != MS_DRAFT_LAYERSKIP && !draft_dir) {
            fprintf(stderr, "microspec-generate: --draft-kind %s needs --draft DIR\n", draft_kind);
            return 2;
        }
        if (dopt.tree.chain && dopt.tree.depth < 1) dopt.tree.depth = 1;
        dopt.model_dir = dopt.kind == MS_DRAFT_LAYERSKIP ? model_dir : draft_dir;
        dopt.target_dir = model_dir;
        dopt.vocab_list = vocab_list;
        dopt.max_ctx = max_ctx;
    }
    ms_k_cpu_set_threads((int)threads);

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
    ms_ids ids = {0};
    char *rendered = NULL;

    if (ms_tok_load_dir(model_dir, &tok) < 0) goto done;
    ms_model_opts mo = {.max_ctx = max_ctx};
    if (ms_model_load(model_dir, &mo, &model) < 0) goto done;
    const int64_t V = ms_model_vocab(model);
    if (ms_tok_vocab_size(tok) > V) {
        MS_LOG_ERROR("%s: tokenizer has %lld ids but the model only %lld", model_dir,
                     (long long)ms_tok_vocab_size(tok), (long long)V);
        goto done;
    }
    if (ms_tgt_new(model, &tgt) < 0) goto done;
    if (speculative) {
        if (ms_dft_new(&dopt, &dft) < 0) goto done;
        if (ms_dft_vocab(dft) != V) {
            MS_LOG_ERROR("draft vocabulary %lld differs from the target's %lld: they must share a tokenizer",
                         (long long)ms_dft_vocab(dft), (long long)V);
            goto done;
        }
    }

    if (chat) {
        ms_chat_kind kind = ms_tok_chat_kind(tok);
        if (kind == MS_CHAT_NONE) {
            MS_LOG_ERROR("%s: the tokenizer has no chat template this program knows (Llama-3 or ChatML); "
                         "drop --chat",
                         model_dir);
            goto done;
        }
        ms_chat_msg msgs[2];
        int64_t nm = 0;
        if (system_msg) msgs[nm++] = (ms_chat_msg){MS_ROLE_SYSTEM, system_msg};
        msgs[nm++] = (ms_chat_msg){MS_ROLE_USER, prompt};
        if (ms_chat_render(kind, msgs, nm, true, &rendered) < 0) goto done;
        if (ms_tok_encode(tok, rendered, strlen(rendered), true, &ids) < 0) goto done;
    } else {
        if (!no_bos && ms_tok_bos(tok) >= 0 && ms_ids_push(&ids, ms_tok_bos(tok)) < 0) goto done;
        if (ms_tok_encode(tok, prompt, strlen(prompt), false, &ids) < 0) goto done;
    }
    if (ids.n == 0) {
        MS_LOG_ERROR("empty prompt and no BOS token: nothing to condition on");
        goto done;
    }
    if (steps >= 0) max_tokens = steps + 1 > ids.n ? steps + 1 - ids.n : 0;

    gp.max_new_tokens = max_tokens;
    gp.sampling = (ms_k_sampling){.temperature = (float)temperature, .top_p = (float)top_p};
    gp.seed = (uint64_t)seed;
    if (!ignore_eos) {
        const int32_t *eos;
        int n_eos = ms_tok_eos(tok, &eos);
        for (int i = 0; i < n_eos && gp.n_stop < MS_MAX_STOP; i++) gp.stop_ids[gp.n_stop++] = eos[i];
    }

    printer pr = {.tok = tok};
    ms_tok_decoder_init(&pr.dec);
    if (echo) {
        if (!print_tokens(&pr, ids.v, ids.n)) goto done;
    } else {
        pr.dec.prev_id = ids.v[ids.n - 1];
    }

    ms_gen_stats st;
    ms_draft_port port;
    if (dft) port = ms_dft_port(dft);
    if (ms_tgt_generate(tgt, dft ? &port : NULL, 1, ids.v, ids.n, &gp, print_tokens, &pr, &st) < 0) goto done;
    if (pr.err < 0) goto done;
    {
        char tail[16];
        size_t n = 0;
        ms_tok_decode_flush(&pr.dec, tail, sizeof tail, &n);
        fwrite(tail, 1, n, stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);

    double decode_s = st.total_s - st.prefill_s;
    fprintf(stderr,
            "prompt tokens: %lld, prefill: %.2f ms (%.1f tok/s), generated: %lld (%s), decode: %.1f tok/s\n",
            (long long)st.prompt_tokens, st.prefill_s * 1e3,
            st.prefill_s > 0 ? (double)st.prompt_tokens / st.prefill_s : 0.0, (long long)st.new_tokens,
            st.stop_reason, decode_s > 0 ? (double)st.new_tokens / decode_s : 0.0);
    if (dft) ms_gen_stats_print(&st, stderr);
    rc = 0;
done:
    free(rendered);
    free(prompt_buf);
    ms_ids_free(&ids);
    ms_dft_free(&dft);
    ms_tgt_free(&tgt);
    ms_model_free(&model);
    ms_tok_free(&tok);
    return rc;
}
