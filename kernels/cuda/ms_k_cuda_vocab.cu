/* ms_k_cuda_vocab.cu — the dynamic draft vocabulary window (docs/architecture.md §5) on
 * the device: the CUDA twin of the `dynamic` mode of draft-node/ms_vocab.c.
 *
 * State (all device memory): counts[V], ring[W_max] (+ head, ring_n),
 * slot_of[V] (−1 = absent), id_of[W_max], n_active, the packed rows
 * [W_max, d] (act dtype), a "dirty" list of slots whose row must be
 * (re)gathered (each slot once, dirty[W_max] flags) and a dedup stamp
 * mark[V] for the distinct appends.
 *
 * Round path, no host synchronisation anywhere in it:
 *   append  — ONE kernel, one block, on the compute stream: the block
 *             validates every id in parallel (any out of range: nothing is
 *             appended, a device flag is raised), then thread 0 runs the
 *             CPU's stream_push for each entry in order (evict the oldest when
 *             the ring is full, count−−, leave → swap-remove, count++, enter
 *             → slot n_active), recording each changed slot once; an event
 *             marks its end.
 *   gather  — on the COPY stream after that event: rows[s] = W[id_of[s]] for
 *             every recorded slot s < n_active, then an event "gathered".
 *   wait    — the compute stream waits on "gathered" (call it just before
 *             the draft LM-head GEMM).
 * Sequential per-entry processing makes the slot layout identical to the
 * CPU twin's fed the same ids. Every host-side synchronisation of this file
 * goes through host_sync(), which counts (ms_k_cuda_vocab_host_syncs); the
 * round functions never call it. */
#include "ms_k_cuda_impl.h"

#include <stdlib.h>

/* Device flags (ms_k_cuda_vocab_dstate.flags). */
enum { VOCAB_FLAG_BAD_ID = 1 };

/* Device scalars of one window. */
typedef struct {
    int32_t n_active; /* |I| */
    int32_t ring_n;   /* entries in the ring (≤ W_max) */
    int32_t head;     /* ring position of the oldest entry */
    int32_t n_dirty;  /* recorded slots in dirty_slots */
    int32_t taken;    /* 1: a gather consumed the list; the next append empties it */
    uint32_t flags;   /* VOCAB_FLAG_* */
} vocab_dstate;

struct ms_k_cuda_vocab {
    int64_t V, w_max, d;
    ms_dtype act;
    size_t row_bytes;
    const void *W; /* device [V, d], not owned */
    cudaStream_t compute, copy;
    cudaEvent_t ev_appended, ev_gathered;
    bool gather_pending; /* an append since the last gather */
    uint32_t epoch;      /* dedup stamp of the last distinct append */
    /* device */
    vocab_dstate *st;
    int32_t *counts, *slot_of; /* [V] */
    uint32_t *mark;            /* [V] */
    int32_t *ring, *id_of;     /* [W_max] */
    int32_t *dirty_slots;      /* [W_max] */
    uint8_t *dirty;            /* [W_max] */
    void *rows;                /* [W_max, d] act */
};

static int64_t g_host_syncs; /* every host synchronisation of this file */

extern "C" int64_t ms_k_cuda_vocab_host_syncs(void) { return g_host_syncs; }

static ms_status host_sync(cudaStream_t s) {
    g_host_syncs++;
    MS_CUDA_TRY(cudaStreamSynchronize(s));
    return MS_OK;
}

/* ---- kernels --------------------------------------------------------------- */

#define APPEND_THREADS 256
#define RESET_THREADS 1024
#define GATHER_THREADS 128
#define GATHER_MAX_BLOCKS 1024

__device__ static void mark_dirty(vocab_dstate *st, uint8_t *dirty, int32_t *dirty_slots, int32_t s) {
    if (dirty[s]) return;
    dirty[s] = 1;
    dirty_slots[st->n_dirty++] = s;
}

/* One block. epoch == 0: plain append; else a distinct append (ids whose
 * mark already equals epoch are skipped, as the CPU's union_push). */
__global__ void vocab_append_kernel(vocab_dstate *st, int32_t *counts, int32_t *slot_of, uint32_t *mark,
                                    int32_t *ring, int32_t *id_of, int32_t *dirty_slots, uint8_t *dirty,
                                    const int32_t *ids, int64_t n, int32_t V, int32_t w_max, uint32_t epoch) {
    int bad = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) bad |= ids[i] < 0 || ids[i] >= V;
    if (__syncthreads_or(bad)) {
        if (threadIdx.x == 0) st->flags |= VOCAB_FLAG_BAD_ID;
        return;
    }
    if (threadIdx.x != 0) return;
    if (st->taken) { /* the previous gather consumed the list (it cleared the flags) */
        st->n_dirty = 0;
        st->taken = 0;
    }
    int32_t n_active = st->n_active, ring_n = st->ring_n, head = st->head;
    for (int64_t i = 0; i < n; i++) {
        const int32_t id = ids[i];
        if (epoch) {
            if (mark[id] == epoch) continue;
            mark[id] = epoch;
        }
        if (ring_n == w_max) {
            const int32_t old = ring[head];
            ring[head] = id;
            if (++head == w_max) head = 0;
            if (old == id) continue;
            if (--counts[old] == 0) { /* old leaves: swap-remove */
                const int32_t s = slot_of[old], last = n_active - 1;
                if (s != last) {
                    const int32_t moved = id_of[last];
                    id_of[s] = moved;
                    slot_of[moved] = s;
                    mark_dirty(st, dirty, dirty_slots, s);
                }
                slot_of[old] = -1;
                n_active--;
            }
        } else {
            int32_t pos = head + ring_n;
            if (pos >= w_max) pos -= w_max;
            ring[pos] = id;
            ring_n++;
        }
        if (counts[id]++ == 0) { /* id enters at slot |I| */
            const int32_t s = n_active++;
            slot_of[id] = s;
            id_of[s] = id;
            mark_dirty(st, dirty, dirty_slots, s);
        }
    }
    st->n_active = n_active;
    st->ring_n = ring_n;
    st->head = head;
}

/* One block: O(W_max + |I|), never O(V). */
__global__ void vocab_reset_kernel(vocab_dstate *st, int32_t *counts, int32_t *slot_of, const int32_t *ring,
                                   const int32_t *id_of, const int32_t *dirty_slots, uint8_t *dirty,
                                   int32_t w_max) {
    const int32_t ring_n = st->ring_n, head = st->head, n_active = st->n_active, n_dirty = st->n_dirty;
    for (int32_t i = threadIdx.x; i < ring_n; i += blockDim.x) {
        int64_t pos = (int64_t)head + i;
        if (pos >= w_max) pos -= w_max;
        counts[ring[pos]] = 0;
    }
    for (int32_t s = threadIdx.x; s < n_active; s += blockDim.x) slot_of[id_of[s]] = -1;
    for (int32_t i = threadIdx.x; i < n_dirty; i += blockDim.x) dirty[dirty_slots[i]] = 0;
    __syncthreads(); /* every thread has read the scalars */
    if (threadIdx.x == 0) {
        st->n_active = st->ring_n = st->head = st->n_dirty = 0;
        st->taken = 0;
    }
}

/* rows[s] = W[id_of[s]] for each recorded slot s < n_active; one block per
 * entry (grid-stride). U is the copy unit (uint4 when 16-byte aligned). */
template <typename U>
__global__ void vocab_gather_kernel(vocab_dstate *st, const int32_t *id_of, const int32_t *dirty_slots,
                                    uint8_t *dirty, const U *W, U *rows, int64_t units_per_row) {
    const int32_t n_dirty = st->n_dirty, n_active = st->n_active;
    for (int32_t i = blockIdx.x; i < n_dirty; i += gridDim.x) {
        const int32_t s = dirty_slots[i];
        if (threadIdx.x == 0) dirty[s] = 0;
        if (s >= n_active) continue; /* vacated since it was recorded */
        const U *src = W + (int64_t)id_of[s] * units_per_row;
        U *dst = rows + (int64_t)s * units_per_row;
        for (int64_t j = threadIdx.x; j < units_per_row; j += blockDim.x) dst[j] = src[j];
    }
    /* Every block read n_dirty above; the next append (ordered after this
     * kernel by the gathered event) empties the list. */
    if (blockIdx.x == 0 && threadIdx.x == 0) st->taken = 1;
}

__global__ void vocab_fill_kernel(int32_t *p, int64_t n, int32_t v) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = v;
}

/* ---- host ------------------------------------------------------------------ */

static unsigned fill_blocks(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 4096 ? b : 4096);
}

extern "C" ms_status ms_k_cuda_vocab_new(int64_t V, int64_t w_max, int64_t d, ms_dtype act, const void *W,
                                         void *stream_compute, void *stream_copy, ms_k_cuda_vocab **out) {
    MS_ASSERT(out);
    *out = NULL;
    if (V < 1 || V > INT32_MAX) MS_FAIL(MS_ERR_INVALID, "cuda vocab: V=%lld out of [1, INT32_MAX]", (long long)V);
    if (w_max < 1 || w_max > INT32_MAX)
        MS_FAIL(MS_ERR_INVALID, "cuda vocab: W_max=%lld out of [1, INT32_MAX]", (long long)w_max);
    if (d < 1) MS_FAIL(MS_ERR_INVALID, "cuda vocab: row width d=%lld must be ≥ 1", (long long)d);
    if (act != MS_DTYPE_BF16 && act != MS_DTYPE_F16)
        MS_FAIL(MS_ERR_INVALID, "cuda vocab: rows dtype %s unsupported (BF16 or F16)", ms_dtype_name(act));
    if (!W) MS_FAIL(MS_ERR_INVALID, "cuda vocab: no LM-head weights");
    size_t row_bytes, rows_bytes;
    size_t w_bytes; /* the head W [V, d] must be addressable */
    if (!ms_mul_size((size_t)d, 2, &row_bytes) || !ms_mul_size(row_bytes, (size_t)V, &w_bytes) ||
        !ms_mul_size(row_bytes, (size_t)w_max, &rows_bytes))
        MS_FAIL(MS_ERR_INVALID, "cuda vocab: rows of width %lld overflow", (long long)d);
    ms_k_cuda_vocab *v = (ms_k_cuda_vocab *)ms_calloc(1, sizeof *v);
    if (!v) return MS_ERR_NOMEM;
    v->V = V;
    v->w_max = w_max;
    v->d = d;
    v->act = act;
    v->row_bytes = row_bytes;
    v->W = W;
    v->compute = (cudaStream_t)stream_compute;
    v->copy = (cudaStream_t)stream_copy;
    const size_t nv = (size_t)V, nw = (size_t)w_max;
    ms_status st = MS_OK;
    cudaError_t e;
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&v->st, sizeof(vocab_dstate));
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&v->counts, nv * sizeof(int32_t));
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&v->slot_of, nv * sizeof(int32_t));
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&v->mark, nv * sizeof(uint32_t));
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&v->ring, nw * sizeof(int32_t));
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&v->id_of, nw * sizeof(int32_t));
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&v->dirty_slots, nw * sizeof(int32_t));
    if (st == MS_OK) st = ms_k_cuda_malloc((void **)&v->dirty, nw);
    if (st == MS_OK) st = ms_k_cuda_malloc(&v->rows, rows_bytes);
    if (st != MS_OK) goto fail;
    if ((e = cudaEventCreateWithFlags(&v->ev_appended, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&v->ev_gathered, cudaEventDisableTiming)) != cudaSuccess) {
        MS_LOG_ERROR("cuda vocab: events: %s", cudaGetErrorString(e));
        st = ms_k_cuda_status_of(e);
        goto fail;
    }
    /* Initial state on the compute stream, once (creation may synchronise). */
    if ((e = cudaMemsetAsync(v->st, 0, sizeof(vocab_dstate), v->compute)) != cudaSuccess ||
        (e = cudaMemsetAsync(v->counts, 0, nv * sizeof(int32_t), v->compute)) != cudaSuccess ||
        (e = cudaMemsetAsync(v->slot_of, 0xff, nv * sizeof(int32_t), v->compute)) != cudaSuccess ||
        (e = cudaMemsetAsync(v->mark, 0, nv * sizeof(uint32_t), v->compute)) != cudaSuccess ||
        (e = cudaMemsetAsync(v->dirty, 0, nw, v->compute)) != cudaSuccess ||
        (e = cudaMemsetAsync(v->id_of, 0xff, nw * sizeof(int32_t), v->compute)) != cudaSuccess ||
        /* the unused slots too: a state download (tests, diagnostics) reads
         * the whole capacity, and compute-sanitizer's initcheck flagged it */
        (e = cudaMemsetAsync(v->ring, 0xff, nw * sizeof(int32_t), v->compute)) != cudaSuccess ||
        (e = cudaMemsetAsync(v->dirty_slots, 0xff, nw * sizeof(int32_t), v->compute)) != cudaSuccess ||
        (e = cudaMemsetAsync(v->rows, 0, rows_bytes, v->compute)) != cudaSuccess) {
        MS_LOG_ERROR("cuda vocab: initial state: %s", cudaGetErrorString(e));
        st = ms_k_cuda_status_of(e);
        goto fail;
    }
    /* The first wait/append orders against a recorded (empty) gather. */
    if ((e = cudaEventRecord(v->ev_gathered, v->compute)) != cudaSuccess) {
        MS_LOG_ERROR("cuda vocab: event record: %s", cudaGetErrorString(e));
        st = ms_k_cuda_status_of(e);
        goto fail;
    }
    if ((st = host_sync(v->compute)) != MS_OK) goto fail;
    *out = v;
    return MS_OK;
fail:
    ms_k_cuda_vocab_free(&v);
    return st;
}

extern "C" void ms_k_cuda_vocab_free(ms_k_cuda_vocab **pv) {
    if (!pv || !*pv) return;
    ms_k_cuda_vocab *v = *pv;
    /* Work of this window may still be in flight on either stream. */
    cudaError_t e = cudaSuccess;
    if (v->ev_gathered) e = cudaEventSynchronize(v->ev_gathered);
    if (e == cudaSuccess && v->ev_appended) e = cudaEventSynchronize(v->ev_appended);
    if (e != cudaSuccess) MS_LOG_WARN("cuda vocab free: %s", cudaGetErrorString(e));
    g_host_syncs++;
    if (v->ev_appended) cudaEventDestroy(v->ev_appended);
    if (v->ev_gathered) cudaEventDestroy(v->ev_gathered);
    ms_k_cuda_free((void **)&v->st);
    ms_k_cuda_free((void **)&v->counts);
    ms_k_cuda_free((void **)&v->slot_of);
    ms_k_cuda_free((void **)&v->mark);
    ms_k_cuda_free((void **)&v->ring);
    ms_k_cuda_free((void **)&v->id_of);
    ms_k_cuda_free((void **)&v->dirty_slots);
    ms_k_cuda_free((void **)&v->dirty);
    ms_k_cuda_free(&v->rows);
    free(v);
    *pv = NULL;
}

/* Device work that changes the maps is ordered after the last gather, which
 * reads them on the copy stream (a wait on a completed event costs nothing). */
static ms_status after_gather(ms_k_cuda_vocab *v) {
    MS_CUDA_TRY(cudaStreamWaitEvent(v->compute, v->ev_gathered, 0));
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_vocab_reset(ms_k_cuda_vocab *v) {
    MS_TRY(after_gather(v));
    vocab_reset_kernel<<<1, RESET_THREADS, 0, v->compute>>>(v->st, v->counts, v->slot_of, v->ring, v->id_of,
                                                            v->dirty_slots, v->dirty, (int32_t)v->w_max);
    MS_CUDA_TRY(cudaGetLastError());
    MS_CUDA_TRY(cudaEventRecord(v->ev_appended, v->compute)); /* free() waits on it */
    v->gather_pending = false; /* nothing recorded is left to gather */
    return MS_OK;
}

static ms_status append(ms_k_cuda_vocab *v, const int32_t *ids, int64_t n, bool distinct) {
    if (n < 0) MS_FAIL(MS_ERR_INVALID, "cuda vocab append: negative count %lld", (long long)n);
    if (n > 0 && !ids) MS_FAIL(MS_ERR_INVALID, "cuda vocab append: %lld ids but no array", (long long)n);
    uint32_t epoch = 0;
    if (distinct) {
        if (++v->epoch == 0) { /* wrapped after 2^32 unions: clear once */
            vocab_fill_kernel<<<fill_blocks(v->V), 256, 0, v->compute>>>((int32_t *)v->mark, v->V, 0);
            MS_CUDA_TRY(cudaGetLastError());
            v->epoch = 1;
        }
        epoch = v->epoch;
    }
    if (n == 0) return MS_OK;
    MS_TRY(after_gather(v));
    vocab_append_kernel<<<1, APPEND_THREADS, 0, v->compute>>>(v->st, v->counts, v->slot_of, v->mark, v->ring,
                                                              v->id_of, v->dirty_slots, v->dirty, ids, n,
                                                              (int32_t)v->V, (int32_t)v->w_max, epoch);
    MS_CUDA_TRY(cudaGetLastError());
    MS_CUDA_TRY(cudaEventRecord(v->ev_appended, v->compute));
    v->gather_pending = true;
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_vocab_append(ms_k_cuda_vocab *v, const int32_t *ids, int64_t n) {
    return append(v, ids, n, false);
}

extern "C" ms_status ms_k_cuda_vocab_append_distinct(ms_k_cuda_vocab *v, const int32_t *ids, int64_t n) {
    return append(v, ids, n, true);
}

extern "C" ms_status ms_k_cuda_vocab_gather(ms_k_cuda_vocab *v) {
    if (!v->gather_pending) return MS_OK;
    MS_CUDA_TRY(cudaStreamWaitEvent(v->copy, v->ev_appended, 0));
    const unsigned blocks = (unsigned)(v->w_max < GATHER_MAX_BLOCKS ? v->w_max : GATHER_MAX_BLOCKS);
    const bool wide = v->row_bytes % 16 == 0 && (uintptr_t)v->W % 16 == 0 && (uintptr_t)v->rows % 16 == 0;
    if (wide)
        vocab_gather_kernel<uint4><<<blocks, GATHER_THREADS, 0, v->copy>>>(
            v->st, v->id_of, v->dirty_slots, v->dirty, (const uint4 *)v->W, (uint4 *)v->rows,
            (int64_t)(v->row_bytes / 16));
    else
        vocab_gather_kernel<uint16_t><<<blocks, GATHER_THREADS, 0, v->copy>>>(
            v->st, v->id_of, v->dirty_slots, v->dirty, (const uint16_t *)v->W, (uint16_t *)v->rows, v->d);
    MS_CUDA_TRY(cudaGetLastError());
    MS_CUDA_TRY(cudaEventRecord(v->ev_gathered, v->copy));
    v->gather_pending = false;
    return MS_OK;
}

extern "C" ms_status ms_k_cuda_vocab_wait(ms_k_cuda_vocab *v, void *stream) {
    MS_TRY(ms_k_cuda_vocab_gather(v)); /* no-op unless an append is not gathered yet */
    MS_CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)stream, v->ev_gathered, 0));
    return MS_OK;
}

extern "C" void ms_k_cuda_vocab_rows(const ms_k_cuda_vocab *v, const void **rows, const int32_t **n_active,
                                     const int32_t **id_of) {
    if (rows) *rows = v->rows;
    if (n_active) *n_active = &v->st->n_active;
    if (id_of) *id_of = v->id_of;
}

extern "C" int64_t ms_k_cuda_vocab_w_max(const ms_k_cuda_vocab *v) { return v->w_max; }

extern "C" ms_status ms_k_cuda_vocab_download_state(ms_k_cuda_vocab *v, ms_k_cuda_vocab_state *h) {
    MS_TRY(ms_k_cuda_vocab_gather(v));
    /* Both streams' work for this window is done once both events are. */
    MS_TRY(after_gather(v));
    MS_TRY(host_sync(v->compute));
    vocab_dstate s;
    const cudaStream_t c = v->compute;
    const size_t nv = (size_t)v->V, nw = (size_t)v->w_max;
    MS_CUDA_TRY(cudaMemcpyAsync(&s, v->st, sizeof s, cudaMemcpyDeviceToHost, c));
    if (h->counts) MS_CUDA_TRY(cudaMemcpyAsync(h->counts, v->counts, nv * sizeof(int32_t), cudaMemcpyDeviceToHost, c));
    if (h->slot_of)
        MS_CUDA_TRY(cudaMemcpyAsync(h->slot_of, v->slot_of, nv * sizeof(int32_t), cudaMemcpyDeviceToHost, c));
    if (h->ring) MS_CUDA_TRY(cudaMemcpyAsync(h->ring, v->ring, nw * sizeof(int32_t), cudaMemcpyDeviceToHost, c));
    if (h->id_of) MS_CUDA_TRY(cudaMemcpyAsync(h->id_of, v->id_of, nw * sizeof(int32_t), cudaMemcpyDeviceToHost, c));
    if (h->rows) MS_CUDA_TRY(cudaMemcpyAsync(h->rows, v->rows, nw * v->row_bytes, cudaMemcpyDeviceToHost, c));
    MS_TRY(host_sync(c));
    h->n_active = s.n_active;
    h->ring_n = s.ring_n;
    h->head = s.head;
    h->flags = s.flags;
    if (s.flags) {
        const uint32_t zero = 0;
        MS_CUDA_TRY(cudaMemcpyAsync(&v->st->flags, &zero, sizeof zero, cudaMemcpyHostToDevice, c));
        MS_TRY(host_sync(c));
        MS_LOG_ERROR("cuda vocab: an appended id was out of [0, %lld) (that batch was not appended)",
                     (long long)v->V);
        return MS_ERR_INVALID;
    }
    return MS_OK;
}
