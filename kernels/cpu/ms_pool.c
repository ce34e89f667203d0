/* ms_pool.c — persistent worker threads for the CPU ops (ms_pool.h).
 *
 * A job is published by bumping `gen` under the mutex (workers asleep on the
 * condition variable are woken; workers still spinning see the new value).
 * The job is cut into up to CHUNKS_PER_THREAD chunks a thread: thread i
 * (the caller is 0) runs chunk i, then takes the next unclaimed chunk from
 * `next` until none is left, so a thread slowed by the machine's other load
 * leaves its share to the others instead of holding up the op (which
 * thread runs a chunk never changes its result: chunks are output rows).
 * A worker then decrements `pending`; the caller spins until it is 0.
 * Between jobs a worker spins for SPIN_ITERS polls before sleeping, so the
 * many small ops of one decode step do not each pay a wake-up.
 */
#include "ms_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "ms_common.h"

#define POOL_MAX 64
#define SPIN_ITERS 20000
#define CHUNKS_PER_THREAD 4

static struct {
    int n; /* threads incl. the caller */
    pthread_t th[POOL_MAX];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint_fast64_t gen;
    atomic_int pending;
    atomic_int next; /* the next chunk to claim */
    atomic_bool stop;
    /* the job (written before gen is bumped) */
    ms_pool_fn fn;
    void *arg;
    int64_t items;
    int parts;
    uint64_t start_gen; /* the job count when the workers were made: their first `seen` */
} P = {.n = 1, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void run_parts(int i) {
    while (i < P.parts) {
        const int64_t b = P.items * i / P.parts, e = P.items * (i + 1) / P.parts;
        if (e > b) P.fn(P.arg, b, e);
        i = atomic_fetch_add_explicit(&P.next, 1, memory_order_relaxed);
    }
}

static void *worker(void *argp) {
    const int me = (int)(intptr_t)argp;
    /* Not the current count: a job published before this thread first runs
     * would then look already seen, and its caller would wait forever. */
    uint64_t seen = P.start_gen;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&P.gen, memory_order_acquire) == seen && !atomic_load(&P.stop)) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&P.mu);
            while (atomic_load(&P.gen) == seen && !atomic_load(&P.stop)) pthread_cond_wait(&P.cv, &P.mu);
            pthread_mutex_unlock(&P.mu);
        }
        if (atomic_load(&P.stop)) return NULL;
        seen = atomic_load(&P.gen);
        run_parts(me);
        atomic_fetch_sub_explicit(&P.pending, 1, memory_order_release);
    }
}

static void stop_workers(void) {
    if (P.n <= 1) return;
    pthread_mutex_lock(&P.mu);
    atomic_store(&P.stop, true);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    for (int i = 1; i < P.n; i++) pthread_join(P.th[i], NULL);
    atomic_store(&P.stop, false);
    P.n = 1;
}

int ms_pool_cores(void) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > POOL_MAX ? POOL_MAX : (int)c;
}

void ms_pool_set_threads(int n) {
    if (n < 1) n = 1;
    if (n > POOL_MAX) n = POOL_MAX;
    if (n == P.n) return;
    stop_workers();
    P.start_gen = atomic_load(&P.gen); /* written before pthread_create: visible to the new threads */
    int made = 1;
    for (int i = 1; i < n; i++) {
        if (pthread_create(&P.th[i], NULL, worker, (void *)(intptr_t)i) != 0) {
            MS_LOG_WARN("thread pool: could not start thread %d of %d; running on %d", i + 1, n, made);
            break;
        }
        made++;
    }
    P.n = made;
}

int ms_pool_threads(void) { return P.n; }

int ms_pool_chunks(void) { return P.n * CHUNKS_PER_THREAD; }

void ms_pool_run(ms_pool_fn fn, void *arg, int64_t n, int64_t grain) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t parts = (n + grain - 1) / grain;
    if (parts > ms_pool_chunks()) parts = ms_pool_chunks();
    if (parts <= 1) {
        fn(arg, 0, n);
        return;
    }
    P.fn = fn;
    P.arg = arg;
    P.items = n;
    P.parts = (int)parts;
    atomic_store(&P.next, P.n); /* chunks below P.n go to their own thread */
    atomic_store(&P.pending, P.n - 1); /* every worker checks in, with or without a part */
    pthread_mutex_lock(&P.mu);
    atomic_fetch_add_explicit(&P.gen, 1, memory_order_release);
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    run_parts(0);
    while (atomic_load_explicit(&P.pending, memory_order_acquire) > 0) cpu_relax();
}
