/* ms_xfer_dev.h — private to protocol/: the device half of ms_xfer as a
 * table of function pointers. The CUDA IPC / NCCL table lives in
 * ms_xfer_cuda.c (built only with CUDA; NCCL parts only with MS_HAVE_NCCL);
 * a build without CUDA links ms_xfer_nodev.c instead, whose
 * ms_xfer_dev_table() returns NULL: the one place such a build answers "no
 * device transport" (ms_xfer_kind_built). Includes no CUDA header: streams
 * are void *, handles bytes. Every entry sets the device first, bounds every
 * wait by the deadline given at creation, and logs CUDA/NCCL errors with the
 * library's string. */
#ifndef MS_XFER_DEV_H
#define MS_XFER_DEV_H

#include "ms_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ms_xfer_dev ms_xfer_dev;

typedef struct {
    /* Whether NCCL was built in. */
    bool (*has_nccl)(void);
    /* The device's cudaDeviceProp.uuid; MS_ERR_UNSUPPORTED when it is absent. */
    ms_status (*uuid)(int device, uint8_t uuid[16]);

    /* A device end on `device` using `stream` (NULL: makes its own non-blocking
     * stream) with room for messages of up to max_bytes (staging). */
    ms_status (*dev_new)(int device, void *stream, size_t max_bytes, int deadline_ms, ms_xfer_dev **out);
    void (*dev_free)(ms_xfer_dev **d);

    /* ipc, receiver: allocate slots·slot_bytes (+ the consumed counter) and an
     * interprocess event; export both handles (64 bytes each). Once. */
    ms_status (*ipc_export)(ms_xfer_dev *d, int slots, uint8_t mem[64], uint8_t ev[64]);
    /* ipc, sender: open the receiver's handles (closes any opened before);
     * slot_bytes = the receiver's max message bytes (its slot stride is that
     * rounded up to 256). */
    ms_status (*ipc_import)(ms_xfer_dev *d, int slots, size_t slot_bytes, const uint8_t mem[64], const uint8_t ev[64]);
    void (*ipc_close)(ms_xfer_dev *d);
    /* ipc: copy bytes of src into slot seq % slots once the receiver consumed the
     * message that used it before (polled, deadline), then record the event. */
    ms_status (*ipc_send)(ms_xfer_dev *d, uint64_t seq, const void *src, bool src_on_device, size_t bytes);
    /* ipc: wait on the event, copy slot seq % slots to dst (host), mark seq consumed. */
    ms_status (*ipc_recv)(ms_xfer_dev *d, uint64_t seq, void *dst, size_t bytes);

    /* nccl: a fresh unique id (sender/target). */
    ms_status (*nccl_id)(uint8_t id[128]);
    /* nccl: join the 2-rank communicator (non-blocking init polled with the
     * deadline; aborts on failure). rank 0 sends, rank 1 receives. */
    ms_status (*nccl_init)(ms_xfer_dev *d, const uint8_t id[128], int rank);
    void (*nccl_abort)(ms_xfer_dev *d);
    /* nccl, sender: enqueue bytes of src (uploaded first when on the host). */
    ms_status (*nccl_send)(ms_xfer_dev *d, const void *src, bool src_on_device, size_t bytes);
    /* nccl, sender: wait for the enqueued send (deadline). */
    ms_status (*nccl_send_wait)(ms_xfer_dev *d);
    /* nccl, receiver: receive exactly bytes into dst (host), deadline. */
    ms_status (*nccl_recv)(ms_xfer_dev *d, void *dst, size_t bytes);
} ms_xfer_dev_ops;

/* The device transport table of this build; NULL without CUDA. */
const ms_xfer_dev_ops *ms_xfer_dev_table(void);

#ifdef __cplusplus
}
#endif

#endif
