/* ms_xfer.h — how the target's hidden states reach an eagle draft (docs/architecture.md §6,
 * last paragraph): a raw ZeroMQ frame (host), CUDA IPC when both nodes share
 * one GPU (ipc), or NCCL between two GPUs (nccl).
 *
 * Roles. Features flow one way, target → draft: the target is the sender, the
 * draft the receiver. The receiver owns the landing memory:
 *   ipc   the receiver allocates once a device buffer of MS_XFER_IPC_SLOTS
 *         slots of [max_rows, feat_dim] plus a "consumed" counter, and an
 *         interprocess event; it offers both handles in its hello. The sender
 *         opens them; per message it copies the rows into slot seq % SLOTS on
 *         its stream and records the event; the control message announces
 *         seq/dtype/shape/bytes with via = ipc; the receiver's stream waits on
 *         the event, copies the slot out and stores seq as consumed. Before
 *         reusing a slot the sender polls the counter (with the deadline), so a
 *         slot is never overwritten before it was read.
 *   nccl  the target makes an ncclUniqueId and sends it in its hello_ack; both
 *         make a 2-rank communicator (target rank 0) without blocking, polled
 *         with the deadline. Per message the sender ncclSends the announced
 *         bytes on its stream after sending the control message and waits for
 *         the send to complete (deadline); the receiver ncclRecvs exactly the
 *         announced bytes. A refused or timed-out transfer leaves the
 *         communicator unusable: both ends abort it and use host from then on.
 *   host  frame 1 of the message (ms_wire.h); always possible, and used for a
 *         message whose rows exceed the negotiated max_rows (long prompts).
 *
 * Negotiation (once per connection): the draft's hello carries its offer
 * (ms_xfer_offer), the target chooses (ms_xfer_choose, table below) and
 * answers in the hello_ack (ms_xfer_accept); the draft adopts the answer
 * (ms_xfer_adopt). A peer that offers nothing gets host, and its messages
 * have the bytes of the protocol before transports.
 *
 *   policy (either end)  remote / local device       chosen
 *   host                 any                           host
 *   either on CPU        -                             host
 *   auto | ipc           same GPU uuid, same host id   ipc   (if both offer ipc)
 *   auto | nccl          different GPU uuids           nccl  (if both offer nccl)
 *   anything else                                      host
 *
 * Today both models' features are host f32 arrays: on a GPU run the sender
 * uploads them (H2D into the IPC slot / an NCCL staging buffer) and the
 * receiver downloads them to its host staging buffer. When the models keep
 * hidden states on the device, pass device pointers instead (src_on_device).
 *
 * Checks on the receiver: a tensor message is refused (MS_ERR_PEER, with the
 * reason in ms_xfer_error; the link answers it with an error reply) when its
 * via is neither host nor the negotiated kind, its seq is not above the last
 * one accepted, its dtype is not the negotiated one (transport) or not
 * F32/F16/BF16 (host), its width is not feat_dim, its rows exceed max_rows
 * (transport), or its bytes do not match its shape. Never a crash.
 *
 * Not thread-safe; one thread at a time (the link's).
 */
#ifndef MS_XFER_H
#define MS_XFER_H

#include "ms_wire.h"

typedef enum {
    MS_XFER_HOST = MS_WIRE_VIA_HOST,
    MS_XFER_IPC = MS_WIRE_VIA_IPC,
    MS_XFER_NCCL = MS_WIRE_VIA_NCCL,
    MS_XFER_AUTO,
} ms_xfer_kind;

#define MS_XFER_IPC_SLOTS 4

/* "auto" | "host" | "ipc" | "nccl" → kind; false if unknown. */
bool ms_xfer_kind_parse(const char *s, ms_xfer_kind *out);
const char *ms_xfer_kind_name(ms_xfer_kind k);
/* Whether this build has the kind (ipc needs CUDA, nccl CUDA and NCCL). */
bool ms_xfer_kind_built(ms_xfer_kind k);

/* What one end brings to the choice: its policy and its wire offer (the
 * local device's uuid/host id even when it offers nothing, so the table can
 * be evaluated on both sides). */
typedef struct {
    ms_xfer_kind policy;
    bool on_gpu;
    ms_wire_xfer wire;
} ms_xfer_side;

/* The negotiation table above: what the target (local) chooses for a draft
 * (remote). Pure; why (optional) receives a one-line reason. */
ms_wire_via ms_xfer_choose(const ms_xfer_side *target, const ms_xfer_side *draft, char *why, size_t why_cap);

typedef struct {
    ms_xfer_kind policy; /* link.tensor */
    int device;          /* CUDA ordinal, -1 = CPU (host only) */
    int64_t max_rows;    /* rows of one message the transport carries (≥ 1; larger go as host frames) */
    int64_t feat_dim;    /* 1..MS_WIRE_FEAT_DIM_MAX */
    ms_dtype dtype;      /* on the transport: F32 (today), F16 or BF16 */
    void *stream;        /* cudaStream_t for the copies; NULL: the xfer makes its own */
    int deadline_ms;     /* bound on every wait (peer copy, NCCL init/send/recv); ≤ 0: 2000 */
    const char *host_id; /* NULL: this machine's boot id (else its host name) */
} ms_xfer_opts;

typedef struct ms_xfer ms_xfer;

/* A transport end. The receiver (draft) allocates its IPC buffer and event
 * here when it may offer ipc. Asking for ipc/nccl on a CPU device, in a build
 * without CUDA (or NCCL), or on a device that cannot provide it is
 * MS_ERR_UNSUPPORTED with a message saying why; auto then offers what works. */
ms_status ms_xfer_new(const ms_xfer_opts *o, bool receiver, ms_xfer **out);
/* Releases device memory, events, communicator; nulls *x. */
void ms_xfer_free(ms_xfer **x);

/* This end's negotiation inputs (its hello offer and policy). */
ms_xfer_side ms_xfer_local(const ms_xfer *x);

/* Target: choose for the draft's offer, set up the sender side (open the
 * draft's IPC handles / make the NCCL id) and fill ack->xfer / ack->nccl_id.
 * Falls back to host (logged) when the setup fails. After the ack is sent,
 * call ms_xfer_connect (makes the NCCL communicator; no-op otherwise). */
ms_status ms_xfer_accept(ms_xfer *x, const ms_wire_xfer *offer, ms_wire_hello_ack *ack);
/* Draft: adopt the target's choice from its hello_ack (joins the NCCL
 * communicator). Refuses a choice this end did not offer. */
ms_status ms_xfer_adopt(ms_xfer *x, const ms_wire_hello_ack *ack);
ms_status ms_xfer_connect(ms_xfer *x);

/* The kind in use on this connection (host before negotiation, and after a
 * transport failed). */
ms_wire_via ms_xfer_kind_now(const ms_xfer *x);

/* Sender: stamp the next seq, and when the transport carries these rows start
 * moving them (src [rows, feat_dim] in the xfer's dtype; host or device
 * memory per src_on_device). *ann receives the announcement for the control
 * message (via host: the caller sends src as frame 1, f32 only). Then, after
 * the control message is sent, ms_xfer_send_finish (NCCL: waits for the send
 * with the deadline; on failure the transport is dropped, host from then on). */
ms_status ms_xfer_send(ms_xfer *x, const void *src, bool src_on_device, int64_t rows, ms_wire_tensor *ann,
                       uint64_t *seq);
ms_status ms_xfer_send_finish(ms_xfer *x);
/* MS_ERR_INVALID (logged) unless feat_dim is the transport's width. */
ms_status ms_xfer_check_width(const ms_xfer *x, int64_t feat_dim);

/* Receiver: check an announcement against the negotiation and the last seq
 * (see above; MS_ERR_PEER with ms_xfer_error set when refused). */
ms_status ms_xfer_check(ms_xfer *x, const ms_wire_tensor *ann, uint64_t seq);
/* Receiver: check, then fetch a transport tensor into dst ([rows, feat_dim]
 * f32, host memory ≥ rows·feat_dim floats; converted from F16/BF16). On
 * success the seq is recorded. via host: only the check (the frame is the
 * data). */
ms_status ms_xfer_recv(ms_xfer *x, const ms_wire_tensor *ann, uint64_t seq, float *dst);
/* The reason of the last refusal ("" if none). */
const char *ms_xfer_error(const ms_xfer *x);

/* Counters: tensors sent/received per via, refusals, transport failures. */
typedef struct {
    int64_t sent[MS_WIRE_VIA_COUNT], received[MS_WIRE_VIA_COUNT], refused, failures;
} ms_xfer_counters;
ms_xfer_counters ms_xfer_counters_get(const ms_xfer *x);

#endif
