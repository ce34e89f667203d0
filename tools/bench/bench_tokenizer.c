/* bench-tokenizer — encode speed of a tokenizer on a text file.
 *
 *   bench-tokenizer TOKENIZER_JSON|MODEL_DIR|MODEL.gguf TEXT_FILE [reps]
 *
 * Encodes the whole file (parse_special off) `reps` times and prints bytes,
 * tokens, seconds (best repetition) and MB/s on stdout; also decodes the ids
 * once and checks the text comes back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tokenizer.h"

static void usage(FILE *f, const char *argv0) {
    fprintf(f,
            "usage: %s TOKENIZER_JSON|MODEL_DIR|MODEL.gguf TEXT_FILE [reps]\n"
            "Encodes TEXT_FILE (special tokens not parsed) reps times (default 1); prints bytes, tokens,\n"
            "the best time and MB/s; decodes once and checks the text comes back.\n",
            argv0);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout, argv[0]);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[i]);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    if (argc < 3 || argc > 4) {
        usage(stderr, argv[0]);
        return 2;
    }
    int reps = argc == 4 ? atoi(argv[3]) : 1;
    if (reps < 1) reps = 1;
    ms_tok *t = NULL;
    double t0 = ms_now_s();
    if (ms_tok_load_path(argv[1], &t) < 0) return 1;
    double load_s = ms_now_s() - t0;
    char *text;
    size_t len;
    if (ms_read_file(argv[2], &text, &len) < 0) return 1;
    ms_ids ids = {0};
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        ids.n = 0;
        double a = ms_now_s();
        if (ms_tok_encode(t, text, len, false, &ids) < 0) return 1;
        double s = ms_now_s() - a;
        if (s < best) best = s;
    }
    double a = ms_now_s();
    char *back;
    if (ms_tok_decode_all(t, ids.v, ids.n, false, &back) < 0) return 1;
    double dec_s = ms_now_s() - a;
    bool same = strlen(back) == len && memcmp(back, text, len) == 0;
    printf("tokenizer %s\nload_seconds %.3f\nbytes %zu\ntokens %lld\nseconds %.4f\nMB/s %.2f\n"
           "decode_MB/s %.2f\nroundtrip %s\n",
           argv[1], load_s, len, (long long)ids.n, best, (double)len / best / 1e6, (double)len / dec_s / 1e6,
           same ? "ok" : "differs (expected when a normalizer such as NFC rewrites the text)");
    free(back);
    free(text);
    ms_ids_free(&ids);
    ms_tok_free(&t);
    return 0;
}
