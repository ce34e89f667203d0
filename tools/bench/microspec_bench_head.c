/* microspec-bench-head — the draft LM head at real shapes with a GGUF model's
 * real weights (issue 13, tools/bench/ms_bench_head.c): full head vs a static list
 * vs MicroSpec dynamic windows, rows kept in the head's block format, 8-bit
 * activations, window gathers included. Prints a markdown table on stdout. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "ms_bench_head.h"

#define TOOL "microspec-bench-head"

static void usage(FILE *f) {
    fprintf(f,
            "usage: " TOOL " --model FILE.gguf [--threads N] [--reps R]\n"
            "\n"
            "Times one draft step of the LM head (quantize the hidden rows, then the\n"
            "8-bit-activation matmul over the vocabulary's rows in the head's own block\n"
            "format) for 1 and 4 hidden rows over: the full head, a static list of 32,768\n"
            "rows, and dynamic windows of 1,024 / 2,048 / 3,072 / 4,096 rows, each dynamic\n"
            "step including one round's window update (rows gathered, leavers removed).\n"
            "Prints a markdown table (median ms per step, speedup over full) on stdout.\n"
            "\n"
            "  -m, --model FILE.gguf  a GGUF model (its LM head; the embedding when tied)\n"
            "  -t, --threads N        CPU threads (default 2)\n"
            "  -r, --reps R           timed steps per configuration (default 50)\n"
            "  -h, --help             this text\n");
}

int main(int argc, char **argv) {
    ms_log_set_role("bench-head");
    const char *model = NULL;
    int64_t threads = 2, reps = 50;
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'}, {"threads", required_argument, NULL, 't'},
        {"reps", required_argument, NULL, 'r'},  {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "m:t:r:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't':
            if (!ms_cli_i64(TOOL, "--threads", optarg, 1, 64, &threads)) return 2;
            break;
        case 'r':
            if (!ms_cli_i64(TOOL, "--reps", optarg, 1, 1000000, &reps)) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, TOOL ": unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (!model) {
        fprintf(stderr, TOOL ": --model is required (see --help)\n");
        return 2;
    }
    return ms_bench_head(model, (int)threads, (int)reps, stdout) == MS_OK ? 0 : 1;
}
