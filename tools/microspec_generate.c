/* microspec-generate — autoregressive generation from a Hugging Face model
 * directory: text on stdout, statistics on stderr. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_model.h"
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

/* Decode one id through the streaming decoder and write it out. */
static ms_status emit(const ms_tok *tok, ms_tok_decoder *dec, int32_t id) {
    char buf[512];
    size_t n = 0;
    MS_TRY(ms_tok_decode_next(tok, dec, id, true, buf, sizeof buf, &n));
    fwrite(buf, 1, n, stdout);
    fflush(stdout);
    return MS_OK;
}

int main(int argc, char **argv) {
    ms_log_set_role("generate");
    const char *model_dir = NULL, *prompt = "", *prompt_file = NULL, *system_msg = NULL;
    int64_t max_tokens = 256, steps = -1, max_ctx = 0, threads = 1, seed = 42;
    double temperature = 0.0, top_p = 1.0;
    bool chat = false, echo = false, no_bos = false, ignore_eos = false;

    enum { O_STEPS = 1000, O_TOPP, O_SEED, O_MAXCTX, O_THREADS, O_ECHO, O_NOBOS, O_IGNEOS };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},      {"prompt", required_argument, 0, 'p'},
        {"prompt-file", required_argument, 0, 'f'}, {"chat", no_argument, 0, 'c'},
        {"system", required_argument, 0, 's'},     {"max-tokens", required_argument, 0, 'n'},
        {"steps", required_argument, 0, O_STEPS},  {"temperature", required_argument, 0, 't'},
        {"top-p", required_argument, 0, O_TOPP},   {"seed", required_argument, 0, O_SEED},
        {"max-ctx", required_argument, 0, O_MAXCTX}, {"threads", required_argument, 0, O_THREADS},
        {"echo", no_argument, 0, O_ECHO},          {"no-bos", no_argument, 0, O_NOBOS},
        {"ignore-eos", no_argument, 0, O_IGNEOS},  {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "m:p:f:cs:n:t:h", opts, NULL)) != -1) {
        bool ok = true;
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
    ms_ids ids = {0};
    char *rendered = NULL;
    float *logits = NULL, *probs = NULL;

    if (ms_tok_load_dir(model_dir, &tok) < 0) goto done;
    ms_model_opts mo = {.max_ctx = max_ctx};
    if (ms_model_load(model_dir, &mo, &model) < 0) goto done;
    const int64_t V = ms_model_vocab(model);
    if (ms_tok_vocab_size(tok) > V) {
        MS_LOG_ERROR("%s: tokenizer has %lld ids but the model only %lld", model_dir,
                     (long long)ms_tok_vocab_size(tok), (long long)V);
        goto done;
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
    if (ids.n + max_tokens > ms_model_max_ctx(model)) {
        int64_t fit = ms_model_max_ctx(model) - ids.n;
        if (fit <= 0) {
            MS_LOG_ERROR("prompt of %lld tokens does not fit the KV cache (%lld rows; see --max-ctx)",
                         (long long)ids.n, (long long)ms_model_max_ctx(model));
            goto done;
        }
        MS_LOG_WARN("max tokens %lld cut to %lld to fit the KV cache", (long long)max_tokens, (long long)fit);
        max_tokens = fit;
    }

    logits = ms_malloc((size_t)V * sizeof *logits);
    probs = ms_malloc((size_t)V * sizeof *probs);
    if (!logits || !probs) goto done;

    ms_tok_decoder dec;
    ms_tok_decoder_init(&dec);
    if (echo) {
        for (int64_t i = 0; i < ids.n; i++)
            if (emit(tok, &dec, ids.v[i]) < 0) goto done;
    } else {
        dec.prev_id = ids.v[ids.n - 1];
    }

    uint64_t t0 = ms_now_ns();
    if (ms_model_prefill(model, ids.v, ids.n, logits) < 0) goto done;
    uint64_t t1 = ms_now_ns();

    ms_rng rng;
    ms_rng_seed(&rng, (uint64_t)seed);
    const ms_k_sampling samp = {.temperature = (float)temperature, .top_p = (float)top_p};
    int64_t generated = 0;
    const char *stop = "max tokens";
    while (generated < max_tokens) {
        int32_t next = ms_k_sample(logits, V, &samp, &rng, probs);
        generated++;
        if (!ignore_eos && ms_tok_is_eos(tok, next)) {
            stop = "end of sequence";
            break;
        }
        if (emit(tok, &dec, next) < 0) goto done;
        if (generated == max_tokens) break;
        if (ms_model_forward(model, &next, 1, NULL, NULL, MS_LOGITS_LAST, logits) < 0) goto done;
    }
    uint64_t t2 = ms_now_ns();
    {
        char tail[16];
        size_t n = 0;
        ms_tok_decode_flush(&dec, tail, sizeof tail, &n);
        fwrite(tail, 1, n, stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);

    double prefill_ms = (double)(t1 - t0) * 1e-6, decode_s = (double)(t2 - t1) * 1e-9;
    fprintf(stderr,
            "prompt tokens: %lld, prefill: %.2f ms (%.1f tok/s), generated: %lld (%s), decode: %.1f tok/s\n",
            (long long)ids.n, prefill_ms, prefill_ms > 0 ? (double)ids.n / (prefill_ms * 1e-3) : 0.0,
            (long long)generated, stop, decode_s > 0 ? (double)generated / decode_s : 0.0);
    rc = 0;
done:
    free(logits);
    free(probs);
    free(rendered);
    free(prompt_buf);
    ms_ids_free(&ids);
    ms_model_free(&model);
    ms_tok_free(&tok);
    return rc;
}
