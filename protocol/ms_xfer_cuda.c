/* ms_xfer_cuda.c — CUDA IPC and NCCL ends of ms_xfer (see ms_xfer.h for the
 * protocol, ms_xfer_dev.h for the contract). Plain C on the CUDA runtime API
 * (no kernels), so programs linking the protocol keep the C linker (libFuzzer
 * targets included); built only with CUDA, and reached only through its
 * table (ms_xfer_dev_table, the end of this file). Every CUDA/NCCL return is
 * checked; every wait is a poll bounded by the deadline (nccl-tests style),
 * so a dead peer turns into MS_ERR_TIMEOUT, never a hang. */
#include "ms_xfer_dev.h"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef MS_HAVE_NCCL
#include <nccl.h>
#endif

#define XCUDA(expr)                                                                                   \
    do {                                                                                              \
        cudaError_t xe_ = (expr);                                                                     \
        if (xe_ != cudaSuccess) {                                                                     \
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "xfer: %s: %s (%s)", #expr, cudaGetErrorString(xe_), \
                       cudaGetErrorName(xe_));                                                        \
            return xe_ == cudaErrorMemoryAllocation ? MS_ERR_NOMEM : MS_ERR_IO;                       \
        }                                                                                             \
    } while (0)

#ifdef MS_HAVE_NCCL
/* ncclInProgress is not an error on a non-blocking communicator: the caller
 * polls it with nccl_wait. */
#define XNCCL(expr)                                                                                   \
    do {                                                                                              \
        ncclResult_t xr_ = (expr);                                                                    \
        if (xr_ != ncclSuccess && xr_ != ncclInProgress) {                                            \
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "xfer: %s: %s", #expr, ncclGetErrorString(xr_)); \
            return MS_ERR_IO;                                                                         \
        }                                                                                             \
    } while (0)
#endif

struct ms_xfer_dev {
    int device;
    cudaStream_t stream;
    bool own_stream;
    int deadline_ms;
    size_t max_bytes;   /* one message */
    size_t slot_bytes;  /* max_bytes rounded up to 256 */
    void *pinned;       /* host staging [max_bytes] (page-locked: async copies, polled) */
    uint64_t *pinned_seq; /* page-locked source of the consumed counter write */
    cudaEvent_t done;   /* local: end of the last transfer's work */
    /* ipc */
    int slots;
    size_t ipc_slot_bytes; /* the receiver's slot stride (both ends use its value) */
    char *ipc_base;     /* receiver: cudaMalloc'd; sender: opened from the handle */
    bool ipc_opened;    /* sender: ipc_base came from cudaIpcOpenMemHandle */
    cudaEvent_t ipc_ev; /* interprocess event (receiver creates, sender opens) */
    bool have_ipc_ev;
    uint64_t known_consumed; /* sender: last value read from the counter */
    /* nccl */
    void *dstage;       /* device staging [max_bytes] */
#ifdef MS_HAVE_NCCL
    ncclComm_t comm;
#endif
    bool have_comm;
};

/* used by ms_xfer_dev_free before their definitions */
static void ms_xfer_dev_ipc_close(ms_xfer_dev *d);
static void ms_xfer_dev_nccl_abort(ms_xfer_dev *d);

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap(void) {
    struct timespec ts = {0, 20000}; /* 20 µs */
    nanosleep(&ts, NULL);
}

/* Poll the stream (or event) until its work is done, the deadline passes or
 * an error shows; NCCL's asynchronous errors are polled too. */
static ms_status wait_done(ms_xfer_dev *d, cudaEvent_t ev, const char *what) {
    const uint64_t end = now_ns() + (uint64_t)d->deadline_ms * 1000000ull;
    for (;;) {
        cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(d->stream);
        if (e == cudaSuccess) return MS_OK;
        if (e != cudaErrorNotReady) {
            ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "xfer: %s: %s (%s)", what, cudaGetErrorString(e),
                       cudaGetErrorName(e));
            return MS_ERR_IO;
        }
#ifdef MS_HAVE_NCCL
        if (d->have_comm) {
            ncclResult_t ar = ncclSuccess;
            ncclResult_t r = ncclCommGetAsyncError(d->comm, &ar);
            if (r != ncclSuccess || (ar != ncclSuccess && ar != ncclInProgress))
                MS_FAIL(MS_ERR_PEER, "xfer: %s: NCCL reports %s", what,
                        ncclGetErrorString(r != ncclSuccess ? r : ar));
        }
#endif
        if (now_ns() >= end) MS_FAIL(MS_ERR_TIMEOUT, "xfer: %s: not done within %d ms", what, d->deadline_ms);
        nap();
    }
}

static bool ms_xfer_dev_has_nccl(void) {
#ifdef MS_HAVE_NCCL
    return true;
#else
    return false;
#endif
}

static ms_status ms_xfer_dev_uuid(int device, uint8_t uuid[16]) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        n = 0;
    }
    if (device < 0 || device >= n) MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: no CUDA device %d (%d present)", device, n);
    struct cudaDeviceProp p;
    XCUDA(cudaGetDeviceProperties(&p, device));
    _Static_assert(sizeof p.uuid.bytes == 16, "cudaUUID_t is 16 bytes");
    memcpy(uuid, p.uuid.bytes, 16);
    return MS_OK;
}

static ms_status ms_xfer_dev_new(int device, void *stream, size_t max_bytes, int deadline_ms, ms_xfer_dev **out) {
    *out = NULL;
    uint8_t uuid[16];
    MS_TRY(ms_xfer_dev_uuid(device, uuid)); /* the device exists */
    if (max_bytes == 0) MS_FAIL(MS_ERR_INVALID, "xfer: max_bytes 0");
    ms_xfer_dev *d = ms_calloc(1, sizeof *d);
    if (!d) return MS_ERR_NOMEM;
    d->device = device;
    d->deadline_ms = deadline_ms > 0 ? deadline_ms : 2000;
    d->max_bytes = max_bytes;
    d->slot_bytes = (max_bytes + 255) / 256 * 256;
    *out = d; /* from here ms_xfer_dev_free cleans up whatever was made */
    XCUDA(cudaSetDevice(device));
    if (stream) {
        d->stream = (cudaStream_t)stream;
    } else {
        XCUDA(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
        d->own_stream = true;
    }
    XCUDA(cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming));
    XCUDA(cudaMallocHost(&d->pinned, max_bytes));
    XCUDA(cudaMallocHost((void **)&d->pinned_seq, sizeof(uint64_t)));
    return MS_OK;
}

static void ms_xfer_dev_free(ms_xfer_dev **pd) {
    ms_xfer_dev *d = *pd;
    if (!d) return;
    cudaSetDevice(d->device);
    ms_xfer_dev_nccl_abort(d);
    if (d->stream && wait_done(d, NULL, "free: draining the stream") < 0)
        MS_LOG_WARN("xfer: freeing with work still queued");
    ms_xfer_dev_ipc_close(d);
    if (d->ipc_base && !d->ipc_opened && cudaFree(d->ipc_base) != cudaSuccess) MS_LOG_WARN("xfer: cudaFree failed");
    if (d->have_ipc_ev) cudaEventDestroy(d->ipc_ev);
    if (d->dstage) cudaFree(d->dstage);
    if (d->done) cudaEventDestroy(d->done);
    if (d->pinned) cudaFreeHost(d->pinned);
    if (d->pinned_seq) cudaFreeHost(d->pinned_seq);
    if (d->own_stream) cudaStreamDestroy(d->stream);
    cudaGetLastError();
    free(d);
    *pd = NULL;
}

/* ---- CUDA IPC ---------------------------------------------------------------- */

/* Layout of the receiver's buffer: slots·slot_bytes, then the uint64 seq of
 * the last message the receiver copied out ("consumed"). */
static uint64_t *counter_of(ms_xfer_dev *d) { return (uint64_t *)(d->ipc_base + (size_t)d->slots * d->ipc_slot_bytes); }

static ms_status ms_xfer_dev_ipc_export(ms_xfer_dev *d, int slots, uint8_t mem[64], uint8_t ev[64]) {
    _Static_assert(sizeof(cudaIpcMemHandle_t) == 64 && sizeof(cudaIpcEventHandle_t) == 64, "IPC handles are 64 bytes");
    MS_ASSERT(!d->ipc_base && slots >= 1);
    XCUDA(cudaSetDevice(d->device));
    d->slots = slots;
    d->ipc_slot_bytes = d->slot_bytes;
    XCUDA(cudaMalloc((void **)&d->ipc_base, (size_t)slots * d->ipc_slot_bytes + 256));
    XCUDA(cudaMemset(counter_of(d), 0, sizeof(uint64_t)));
    XCUDA(cudaDeviceSynchronize()); /* the counter is zero before any sender can read it */
    XCUDA(cudaEventCreateWithFlags(&d->ipc_ev, cudaEventInterprocess | cudaEventDisableTiming));
    d->have_ipc_ev = true;
    /* Record once so a wait before the first sender record is well defined. */
    XCUDA(cudaEventRecord(d->ipc_ev, d->stream));
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    XCUDA(cudaIpcGetMemHandle(&mh, d->ipc_base));
    XCUDA(cudaIpcGetEventHandle(&eh, d->ipc_ev));
    memcpy(mem, &mh, 64);
    memcpy(ev, &eh, 64);
    return MS_OK;
}

static void ms_xfer_dev_ipc_close(ms_xfer_dev *d) {
    if (!d || !d->ipc_opened) return;
    cudaSetDevice(d->device);
    if (cudaIpcCloseMemHandle(d->ipc_base) != cudaSuccess) MS_LOG_WARN("xfer: cudaIpcCloseMemHandle failed");
    if (d->have_ipc_ev) cudaEventDestroy(d->ipc_ev);
    cudaGetLastError();
    d->ipc_base = NULL;
    d->ipc_opened = false;
    d->have_ipc_ev = false;
}

static ms_status ms_xfer_dev_ipc_import(ms_xfer_dev *d, int slots, size_t slot_bytes, const uint8_t mem[64],
                                            const uint8_t ev[64]) {
    MS_ASSERT(slots >= 1 && slot_bytes >= 1);
    if (d->ipc_base && !d->ipc_opened) MS_FAIL(MS_ERR_INVALID, "xfer: an exporting end cannot import");
    ms_xfer_dev_ipc_close(d);
    XCUDA(cudaSetDevice(d->device));
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    memcpy(&mh, mem, 64);
    memcpy(&eh, ev, 64);
    void *p = NULL;
    XCUDA(cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess));
    d->ipc_base = (char *)p;
    d->ipc_opened = true;
    d->slots = slots;
    d->ipc_slot_bytes = (slot_bytes + 255) / 256 * 256;
    d->known_consumed = 0;
    cudaError_t e = cudaIpcOpenEventHandle(&d->ipc_ev, eh);
    if (e != cudaSuccess) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "xfer: cudaIpcOpenEventHandle: %s", cudaGetErrorString(e));
        ms_xfer_dev_ipc_close(d);
        return MS_ERR_IO;
    }
    d->have_ipc_ev = true;
    return MS_OK;
}

static ms_status ms_xfer_dev_ipc_send(ms_xfer_dev *d, uint64_t seq, const void *src, bool src_on_device,
                                          size_t bytes) {
    if (!d->ipc_opened) MS_FAIL(MS_ERR_INVALID, "xfer: ipc send before the receiver's handles were opened");
    if (bytes > d->ipc_slot_bytes) MS_FAIL(MS_ERR_RANGE, "xfer: %zu bytes, the slot holds %zu", bytes, d->ipc_slot_bytes);
    XCUDA(cudaSetDevice(d->device));
    /* Slot seq % slots last carried seq - slots: wait until it was read. */
    const uint64_t end = now_ns() + (uint64_t)d->deadline_ms * 1000000ull;
    while (seq > (uint64_t)d->slots && d->known_consumed < seq - (uint64_t)d->slots) {
        XCUDA(cudaMemcpyAsync(d->pinned_seq, counter_of(d), sizeof(uint64_t), cudaMemcpyDeviceToHost, d->stream));
        MS_TRY(wait_done(d, NULL, "ipc: reading the consumed counter"));
        d->known_consumed = *d->pinned_seq;
        if (d->known_consumed >= seq - (uint64_t)d->slots) break;
        if (now_ns() >= end)
            MS_FAIL(MS_ERR_TIMEOUT, "xfer: ipc slot of seq %llu still unread by the receiver after %d ms (consumed %llu)",
                    (unsigned long long)seq, d->deadline_ms, (unsigned long long)d->known_consumed);
        nap();
    }
    char *slot = d->ipc_base + (size_t)(seq % (uint64_t)d->slots) * d->ipc_slot_bytes;
    /* A host source is pageable: the runtime stages it before returning, so
     * the caller may reuse src at once. */
    XCUDA(cudaMemcpyAsync(slot, src, bytes, src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice, d->stream));
    XCUDA(cudaEventRecord(d->ipc_ev, d->stream));
    return MS_OK;
}

static ms_status ms_xfer_dev_ipc_recv(ms_xfer_dev *d, uint64_t seq, void *dst, size_t bytes) {
    if (!d->ipc_base || d->ipc_opened) MS_FAIL(MS_ERR_INVALID, "xfer: ipc receive on an end that exported nothing");
    if (bytes > d->max_bytes) MS_FAIL(MS_ERR_RANGE, "xfer: %zu bytes, the slot holds %zu", bytes, d->max_bytes);
    XCUDA(cudaSetDevice(d->device));
    const char *slot = d->ipc_base + (size_t)(seq % (uint64_t)d->slots) * d->ipc_slot_bytes;
    /* The sender recorded the event after its copy and before sending the
     * control message we are answering: this waits for that copy (or a
     * later one, which is later on the sender's stream). */
    XCUDA(cudaStreamWaitEvent(d->stream, d->ipc_ev, 0));
    XCUDA(cudaMemcpyAsync(d->pinned, slot, bytes, cudaMemcpyDeviceToHost, d->stream));
    *d->pinned_seq = seq;
    XCUDA(cudaMemcpyAsync(counter_of(d), d->pinned_seq, sizeof(uint64_t), cudaMemcpyHostToDevice, d->stream));
    MS_TRY(wait_done(d, NULL, "ipc: copying the slot out"));
    memcpy(dst, d->pinned, bytes);
    return MS_OK;
}

/* ---- NCCL ------------------------------------------------------------------------ */

#ifdef MS_HAVE_NCCL
/* A non-blocking communicator's calls may return ncclInProgress: poll its
 * async state until it settles (deadline). */
static ms_status nccl_settle(ms_xfer_dev *d, const char *what) {
    const uint64_t end = now_ns() + (uint64_t)d->deadline_ms * 1000000ull;
    for (;;) {
        ncclResult_t st = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(d->comm, &st);
        if (r != ncclSuccess) MS_FAIL(MS_ERR_IO, "xfer: %s: ncclCommGetAsyncError: %s", what, ncclGetErrorString(r));
        if (st == ncclSuccess) return MS_OK;
        if (st != ncclInProgress) MS_FAIL(MS_ERR_PEER, "xfer: %s: %s", what, ncclGetErrorString(st));
        if (now_ns() >= end) MS_FAIL(MS_ERR_TIMEOUT, "xfer: %s: not done within %d ms", what, d->deadline_ms);
        nap();
    }
}
#endif

static ms_status ms_xfer_dev_nccl_id(uint8_t id[128]) {
#ifdef MS_HAVE_NCCL
    _Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");
    ncclUniqueId u;
    XNCCL(ncclGetUniqueId(&u));
    memcpy(id, &u, 128);
    return MS_OK;
#else
    (void)id;
    MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: this build has no NCCL");
#endif
}

static void ms_xfer_dev_nccl_abort(ms_xfer_dev *d) {
#ifdef MS_HAVE_NCCL
    if (!d || !d->have_comm) return;
    cudaSetDevice(d->device);
    ncclResult_t r = ncclCommAbort(d->comm); /* also releases operations still pending */
    if (r != ncclSuccess) MS_LOG_WARN("xfer: ncclCommAbort: %s", ncclGetErrorString(r));
    d->have_comm = false;
#else
    (void)d;
#endif
}

static ms_status ms_xfer_dev_nccl_init(ms_xfer_dev *d, const uint8_t id[128], int rank) {
#ifdef MS_HAVE_NCCL
    MS_ASSERT(rank == 0 || rank == 1);
    ms_xfer_dev_nccl_abort(d);
    XCUDA(cudaSetDevice(d->device));
    if (!d->dstage) XCUDA(cudaMalloc(&d->dstage, d->max_bytes));
    ncclUniqueId u;
    memcpy(&u, id, 128);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* a draft that never joins must not hang the target */
    ncclResult_t r = ncclCommInitRankConfig(&d->comm, 2, u, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress)
        MS_FAIL(MS_ERR_IO, "xfer: ncclCommInitRankConfig (rank %d): %s", rank, ncclGetErrorString(r));
    d->have_comm = true;
    ms_status s = nccl_settle(d, "NCCL communicator init");
    if (s < 0) {
        ms_xfer_dev_nccl_abort(d);
        return s;
    }
    return MS_OK;
#else
    (void)d, (void)id, (void)rank;
    MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: this build has no NCCL");
#endif
}

static ms_status ms_xfer_dev_nccl_send(ms_xfer_dev *d, const void *src, bool src_on_device, size_t bytes) {
#ifdef MS_HAVE_NCCL
    if (!d->have_comm) MS_FAIL(MS_ERR_INVALID, "xfer: nccl send without a communicator");
    if (bytes > d->max_bytes) MS_FAIL(MS_ERR_RANGE, "xfer: %zu bytes, staging holds %zu", bytes, d->max_bytes);
    XCUDA(cudaSetDevice(d->device));
    const void *p = src;
    if (!src_on_device) {
        XCUDA(cudaMemcpyAsync(d->dstage, src, bytes, cudaMemcpyHostToDevice, d->stream));
        p = d->dstage;
    }
    XNCCL(ncclSend(p, bytes, ncclUint8, 1, d->comm, d->stream));
    MS_TRY(nccl_settle(d, "ncclSend enqueue"));
    XCUDA(cudaEventRecord(d->done, d->stream));
    return MS_OK;
#else
    (void)d, (void)src, (void)src_on_device, (void)bytes;
    MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: this build has no NCCL");
#endif
}

static ms_status ms_xfer_dev_nccl_send_wait(ms_xfer_dev *d) {
    if (!d->have_comm) MS_FAIL(MS_ERR_INVALID, "xfer: nccl wait without a communicator");
    return wait_done(d, d->done, "ncclSend");
}

static ms_status ms_xfer_dev_nccl_recv(ms_xfer_dev *d, void *dst, size_t bytes) {
#ifdef MS_HAVE_NCCL
    if (!d->have_comm) MS_FAIL(MS_ERR_INVALID, "xfer: nccl receive without a communicator");
    if (bytes > d->max_bytes) MS_FAIL(MS_ERR_RANGE, "xfer: %zu bytes, staging holds %zu", bytes, d->max_bytes);
    XCUDA(cudaSetDevice(d->device));
    XNCCL(ncclRecv(d->dstage, bytes, ncclUint8, 0, d->comm, d->stream));
    MS_TRY(nccl_settle(d, "ncclRecv enqueue"));
    XCUDA(cudaMemcpyAsync(d->pinned, d->dstage, bytes, cudaMemcpyDeviceToHost, d->stream));
    MS_TRY(wait_done(d, NULL, "ncclRecv"));
    memcpy(dst, d->pinned, bytes);
    return MS_OK;
#else
    (void)d, (void)dst, (void)bytes;
    MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: this build has no NCCL");
#endif
}

static const ms_xfer_dev_ops cuda_xfer = {
    .has_nccl = ms_xfer_dev_has_nccl,
    .uuid = ms_xfer_dev_uuid,
    .dev_new = ms_xfer_dev_new,
    .dev_free = ms_xfer_dev_free,
    .ipc_export = ms_xfer_dev_ipc_export,
    .ipc_import = ms_xfer_dev_ipc_import,
    .ipc_close = ms_xfer_dev_ipc_close,
    .ipc_send = ms_xfer_dev_ipc_send,
    .ipc_recv = ms_xfer_dev_ipc_recv,
    .nccl_id = ms_xfer_dev_nccl_id,
    .nccl_init = ms_xfer_dev_nccl_init,
    .nccl_abort = ms_xfer_dev_nccl_abort,
    .nccl_send = ms_xfer_dev_nccl_send,
    .nccl_send_wait = ms_xfer_dev_nccl_send_wait,
    .nccl_recv = ms_xfer_dev_nccl_recv,
};

const ms_xfer_dev_ops *ms_xfer_dev_table(void) { return &cuda_xfer; }
