/* microspec-tokenize — print the token ids of stdin, in llama-tokenize's
 * `--ids` format ("[1, 2, 3]"), so the two can be diffed:
 *
 *   microspec-tokenize --model M.gguf --no-special < text
 *   llama-tokenize -m M.gguf --stdin --ids --no-escape --no-parse-special --log-disable < text
 *
 * All of stdin is read as raw bytes (no escape processing: llama-tokenize
 * needs --no-escape for the same). BOS is added by the file's add_bos rule
 * (ms_tok_add_bos) unless --no-bos. Special tokens written in the text
 * ("<|im_start|>") are parsed unless --no-special, as llama-tokenize parses
 * them unless --no-parse-special.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tokenizer.h"

#define TOOL "microspec-tokenize"

static void usage(FILE *f) {
    fprintf(f,
            "usage: " TOOL " --model FILE.gguf|DIR [--no-special] [--no-bos] [--strip-newline]\n"
            "\n"
            "Reads all of stdin (raw bytes, no escape processing) and prints its token ids\n"
            "on one line as llama-tokenize --ids does: [1, 2, 3]\n"
            "\n"
            "  -m, --model P        a .gguf file or a model directory (tokenizer.json or\n"
            "                       tokenizer.bin)\n"
            "      --no-special     do not parse special tokens written in the text (like\n"
            "                       llama-tokenize --no-parse-special)\n"
            "      --no-bos         do not add BOS even if the model's add_bos rule says so\n"
            "      --strip-newline  drop one trailing \"\\n\" (or \"\\r\\n\") from the input\n"
            "  -h, --help           this text\n"
            "\n"
            "Exit status: 0 ok, 1 load or tokenize error, 2 bad usage.\n");
}

static ms_status read_stdin(char **data, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = ms_malloc(cap);
    if (!buf) return MS_ERR_NOMEM;
    for (;;) {
        if (n == cap) {
            char *p = ms_realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                return MS_ERR_NOMEM;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) {
        free(buf);
        MS_FAIL(MS_ERR_IO, "stdin: read error");
    }
    *data = buf;
    *len = n;
    return MS_OK;
}

int main(int argc, char **argv) {
    ms_log_set_role("tokenize");
    enum { OPT_NO_SPECIAL = 256, OPT_NO_BOS, OPT_STRIP_NL };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"no-special", no_argument, NULL, OPT_NO_SPECIAL},
        {"no-bos", no_argument, NULL, OPT_NO_BOS},
        {"strip-newline", no_argument, NULL, OPT_STRIP_NL},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *model = NULL;
    bool special = true, bos = true, strip_nl = false;
    int c;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case OPT_NO_SPECIAL: special = false; break;
        case OPT_NO_BOS: bos = false; break;
        case OPT_STRIP_NL: strip_nl = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, TOOL ": unexpected argument '%s' (the text is read from stdin)\n", argv[optind]);
        return 2;
    }
    if (!model) {
        fprintf(stderr, TOOL ": --model is required\n");
        usage(stderr);
        return 2;
    }
    ms_tok *tok = NULL;
    if (ms_tok_load_path(model, &tok) < 0) return 1;
    char *text = NULL;
    size_t len = 0;
    ms_ids ids = {0};
    int rc = 1;
    if (read_stdin(&text, &len) < 0) goto done;
    if (strip_nl && len > 0 && text[len - 1] == '\n') {
        len--;
        if (len > 0 && text[len - 1] == '\r') len--;
    }
    if (bos && ms_tok_add_bos(tok) && ms_ids_push(&ids, ms_tok_bos(tok)) < 0) goto done;
    if (ms_tok_encode(tok, text, len, special, &ids) < 0) goto done;
    putchar('[');
    for (int64_t i = 0; i < ids.n; i++) printf(i ? ", %d" : "%d", ids.v[i]);
    printf("]\n");
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    ms_ids_free(&ids);
    free(text);
    ms_tok_free(&tok);
    return rc;
}
