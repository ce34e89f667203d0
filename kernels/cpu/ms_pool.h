/* ms_pool.h — the CPU thread pool: persistent workers, no thread creation per op.
 *
 * ms_pool_run splits [0, n) into contiguous chunks, up to a few a thread
 * (ms_pool_chunks), which the threads (the caller is thread 0) claim in
 * turn, and returns when every chunk is done. Ops split their
 * work by output rows, never a reduction across threads, so a row's result
 * does not depend on the thread count (batch and thread invariance, see
 * ms_quant.h). Work below `grain` items per thread runs on fewer threads.
 *
 * One pool per process. It is not re-entrant: a task must not call
 * ms_pool_run, and ms_pool_run is called from one thread at a time (the
 * caller holding the model). Threads that find no work spin briefly, then
 * sleep on a condition variable.
 */
#ifndef MS_POOL_H
#define MS_POOL_H

#include <stdint.h>

typedef void (*ms_pool_fn)(void *arg, int64_t begin, int64_t end);

/* Number of threads, caller included (≥ 1; capped at 64). Starts or stops
 * workers as needed; call it while no ms_pool_run is in flight. */
void ms_pool_set_threads(int n);
int ms_pool_threads(void);
/* The most chunks ms_pool_run cuts a job into (a few per thread). */
int ms_pool_chunks(void);
/* The number of online cores (the default for --threads). */
int ms_pool_cores(void);
/* fn(arg, begin, end) over a split of [0, n); returns when all are done. */
void ms_pool_run(ms_pool_fn fn, void *arg, int64_t n, int64_t grain);

#endif
