/* ms_bench_head.h — the draft LM head at real shapes with real weights
 * (issue 13): the head over full / static / dynamic-window rows of a GGUF
 * model's typed head, as a draft runs it (8-bit activations, rows kept in the
 * head's block format, tools/bench/ms_bench_head.c). A benchmark, not a test: it
 * prints numbers and asserts nothing about time.
 */
#ifndef MS_BENCH_HEAD_H
#define MS_BENCH_HEAD_H

#include <stdio.h>

#include "ms_common.h"

/* Load gguf_path as a draft does (8-bit-activation matmuls), set the pool to
 * `threads` (≥ 1), and time `reps` (≥ 1) draft steps for 1 and 4 hidden rows
 * over: the full head (V rows), a static list of 32,768 rows and dynamic
 * windows of 1,024 / 2,048 / 3,072 / 4,096 rows, each dynamic step including
 * one round's window update (its rows gathered, leavers swap-removed). Writes
 * a markdown table (median ms per step, speedup over full) to `out`; logs go
 * to stderr. Returns MS_OK, or the error that stopped it (logged). */
ms_status ms_bench_head(const char *gguf_path, int threads, int reps, FILE *out);

#endif
