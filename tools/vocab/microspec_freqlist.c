/* microspec-freqlist — build an FR-Spec static draft vocabulary
 * (eagle2-frspec-notes.md §3.1, docs/architecture.md §5 `static`): tokenize text corpora
 * with the project tokenizer, count id frequencies, write exactly K distinct
 * ids (EOS ids forced in, then by descending frequency, ties by lower id,
 * filled with the lowest unused ids when the corpus is small).
 *
 * Big corpora are read in pieces that end at a line break followed by a
 * printable ASCII character: for the byte-level BPE pre-tokenizer regexes
 * (Llama-3, Qwen2/3, GPT-2) no pre-token crosses such a point, so the counts
 * equal those of encoding each file whole. (llama2.c SentencePiece tokenizers
 * have no pre-tokenizer; for them each piece is encoded on its own.)
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tokenizer.h"
#include "ms_vocab.h"

#define TOOL "microspec-freqlist"

static void usage(FILE *f) {
    fprintf(f,
            "usage: " TOOL " --tokenizer FILE.gguf|DIR|tokenizer.json --k K --out FILE [options] CORPUS_FILE...\n"
            "\n"
            "Builds a static (FR-Spec) draft vocabulary: the K most frequent token ids of\n"
            "the corpus files, EOS ids always included, ties broken by lower id, filled\n"
            "with the lowest unused ids when the corpus has fewer than K distinct ids.\n"
            "Writes \"# microspec-vocab v1 k=K\" and one id per line, atomically.\n"
            "Progress and a summary go to stderr.\n"
            "\n"
            "  -t, --tokenizer P      a GGUF model file, a model directory (tokenizer.json or\n"
            "                         tokenizer.bin) or a tokenizer.json file (tokenizer_config.json\n"
            "                         beside it is read)\n"
            "  -k, --k K              number of ids to write\n"
            "  -o, --out FILE         output list\n"
            "  -e, --eos ID           force ID in (repeatable; the tokenizer's EOS ids always are)\n"
            "      --vocab-size V     id range [0, V) when the model's LM head has more rows than\n"
            "                         the tokenizer has ids (default: the tokenizer's size)\n"
            "      --chunk-bytes N    encode the corpus in pieces of about N bytes (default 4 MiB)\n"
            "  -h, --help             this text\n");
}

static bool parse_i64(const char *s, const char *flag, int64_t lo, int64_t hi, int64_t *out) {
    return ms_cli_i64(TOOL, flag, s, lo, hi, out);
}

/* Last split point p in buf[0, n): buf[p-1] == '\n' and buf[p] printable
 * ASCII (no pre-token crosses it); 0 if none. */
static size_t last_boundary(const char *buf, size_t n) {
    for (size_t p = n; p-- > 1;)
        if (buf[p - 1] == '\n' && buf[p] > ' ' && buf[p] < 0x7f) return p;
    return 0;
}

typedef struct {
    const ms_tok *tok;
    int64_t *counts; /* [V] */
    int64_t V;
    ms_ids ids;
    int64_t tokens;
} counter;

static ms_status count_text(counter *c, const char *path, const char *text, size_t len) {
    c->ids.n = 0;
    MS_TRY(ms_tok_encode(c->tok, text, len, false, &c->ids));
    for (int64_t i = 0; i < c->ids.n; i++) {
        int32_t id = c->ids.v[i];
        if (id < 0 || id >= c->V) MS_FAIL(MS_ERR_RANGE, "%s: token id %d out of [0, %lld)", path, id, (long long)c->V);
        c->counts[id]++;
    }
    c->tokens += c->ids.n;
    return MS_OK;
}

static ms_status count_file(counter *c, const char *path, size_t chunk) {
    FILE *f = fopen(path, "rb");
    if (!f) MS_FAIL(MS_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 2 * chunk, fill = 0, total = 0, next_report = 64u << 20;
    char *buf = ms_malloc(cap);
    ms_status st = buf ? MS_OK : MS_ERR_NOMEM;
    bool eof = false;
    while (st == MS_OK && !eof) {
        if (fill == cap) { /* no split point in a whole buffer: grow it */
            char *nb = ms_realloc(buf, 2 * cap);
            if (!nb) {
                st = MS_ERR_NOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + fill, 1, cap - fill, f);
        if (got == 0) {
            if (ferror(f)) {
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: read error", path);
                st = MS_ERR_IO;
                break;
            }
            eof = true;
        }
        fill += got;
        total += got;
        if (!eof && fill < chunk) continue;
        size_t cut = eof ? fill : last_boundary(buf, fill);
        if (cut == 0) continue;
        st = count_text(c, path, buf, cut);
        memmove(buf, buf + cut, fill - cut);
        fill -= cut;
        if (total >= next_report) {
            fprintf(stderr, TOOL ": %s: %.0f MiB, %lld tokens so far\n", path, (double)total / (1 << 20),
                    (long long)c->tokens);
            next_report += 64u << 20;
        }
    }
    free(buf);
    fclose(f);
    if (st == MS_OK) fprintf(stderr, TOOL ": %s: %zu bytes, %lld tokens in total\n", path, total, (long long)c->tokens);
    return st;
}

int main(int argc, char **argv) {
    ms_log_set_role("freqlist");
    const char *tok_path = NULL, *out_path = NULL;
    int64_t k = 0, vocab_size = 0, chunk = 4 << 20;
    int64_t eos[64];
    int n_eos = 0;
    enum { OPT_VOCAB = 256, OPT_CHUNK };
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, 't'}, {"k", required_argument, NULL, 'k'},
        {"out", required_argument, NULL, 'o'},       {"eos", required_argument, NULL, 'e'},
        {"vocab-size", required_argument, NULL, OPT_VOCAB}, {"chunk-bytes", required_argument, NULL, OPT_CHUNK},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "t:k:o:e:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': tok_path = optarg; break;
        case 'o': out_path = optarg; break;
        case 'k':
            if (!parse_i64(optarg, "--k", 1, INT32_MAX, &k)) return 2;
            break;
        case 'e':
            if (n_eos == (int)(sizeof eos / sizeof *eos)) {
                fprintf(stderr, TOOL ": at most %d --eos ids\n", n_eos);
                return 2;
            }
            if (!parse_i64(optarg, "--eos", 0, INT32_MAX - 1, &eos[n_eos])) return 2;
            n_eos++;
            break;
        case OPT_VOCAB:
            if (!parse_i64(optarg, "--vocab-size", 1, INT32_MAX, &vocab_size)) return 2;
            break;
        case OPT_CHUNK:
            if (!parse_i64(optarg, "--chunk-bytes", 16, (int64_t)1 << 40, &chunk)) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!tok_path || !out_path || k == 0 || optind >= argc) {
        fprintf(stderr, TOOL ": --tokenizer, --k, --out and at least one corpus file are required\n");
        usage(stderr);
        return 2;
    }

    int rc = 1;
    ms_tok *tok = NULL;
    counter cnt = {0};
    int32_t *list = NULL, *forced = NULL;
    if (ms_tok_load_path(tok_path, &tok) < 0) goto done;
    int64_t V = ms_tok_vocab_size(tok);
    if (vocab_size) {
        if (vocab_size < V) {
            fprintf(stderr, TOOL ": --vocab-size %lld is below the tokenizer's %lld ids\n", (long long)vocab_size,
                    (long long)V);
            goto done;
        }
        V = vocab_size;
    }
    if (k > V) {
        fprintf(stderr, TOOL ": --k %lld exceeds the vocabulary size %lld\n", (long long)k, (long long)V);
        goto done;
    }
    const int32_t *tok_eos;
    int n_tok_eos = ms_tok_eos(tok, &tok_eos);
    forced = ms_malloc((size_t)(n_eos + n_tok_eos + 1) * sizeof(int32_t));
    cnt.counts = ms_calloc((size_t)V, sizeof(int64_t));
    list = ms_malloc((size_t)k * sizeof(int32_t));
    if (!forced || !cnt.counts || !list) goto done;
    for (int i = 0; i < n_eos; i++) {
        if (eos[i] >= V) {
            fprintf(stderr, TOOL ": --eos %lld out of [0, %lld)\n", (long long)eos[i], (long long)V);
            goto done;
        }
        forced[i] = (int32_t)eos[i];
    }
    for (int i = 0; i < n_tok_eos; i++) forced[n_eos + i] = tok_eos[i];
    cnt.tok = tok;
    cnt.V = V;
    for (int i = optind; i < argc; i++)
        if (count_file(&cnt, argv[i], (size_t)chunk) < 0) goto done;
    if (ms_vocab_rank_counts(cnt.counts, V, forced, n_eos + n_tok_eos, k, list) < 0) goto done;
    if (ms_vocab_save_list(out_path, list, k) < 0) goto done;
    /* Summary: how much of the corpus the list covers (FR-Spec's argument). */
    int64_t distinct = 0, covered = 0;
    for (int64_t id = 0; id < V; id++) distinct += cnt.counts[id] > 0;
    for (int64_t i = 0; i < k; i++) covered += cnt.counts[list[i]];
    fprintf(stderr, TOOL ": %lld tokens, %lld distinct ids of %lld; wrote %lld ids to %s, covering %.2f%% of tokens\n",
            (long long)cnt.tokens, (long long)distinct, (long long)V, (long long)k, out_path,
            cnt.tokens ? 100.0 * (double)covered / (double)cnt.tokens : 0.0);
    rc = 0;
done:
    ms_ids_free(&cnt.ids);
    free(cnt.counts);
    free(list);
    free(forced);
    ms_tok_free(&tok);
    return rc;
}
