/* ms_wire.h — the target↔draft wire format (docs/architecture.md §4, §6, §7).
 *
 * One message is one ZeroMQ multipart message:
 *   frame 0  a MessagePack map (the control map);
 *   frame 1  only for begin/verify carrying features: the raw tensor, announced
 *            in frame 0 by "tensor": {seq, dtype "F32"|"F16"|"BF16",
 *            shape [rows, cols], bytes}; little-endian, dense row-major.
 *
 * Every control map starts with "v" (MS_PROTO_VERSION) then "t" (the type
 * name), and also holds "rid" (uint64 request id) and "round" (int64, 0 when
 * not applicable). The remaining keys may come in any order; each type's keys
 * are all required except "tensor":
 *   hello      role "target"|"draft", model_fp, tok_fp (str ≤ 128), vocab, hidden,
 *              kind (str ≤ 32), wants_features (bool), pid,
 *              optional tensor-transport offer (protocol/ms_xfer.h), all absent
 *              for a host-only peer: xfer_offer (uint, bits 1<<MS_WIRE_VIA_IPC |
 *              1<<MS_WIRE_VIA_NCCL), gpu_uuid (32 hex), host_id (str ≤ 64),
 *              xfer_rows (1..MS_WIRE_XFER_ROWS_MAX), ipc_mem, ipc_event (128 hex
 *              each: cudaIpcMemHandle_t / cudaIpcEventHandle_t); gpu_uuid is
 *              required with any bit, xfer_rows/ipc_mem/ipc_event with the ipc bit;
 *              optional auth (64 hex: the link-secret proof, ms_link.h), absent
 *              when all zero
 *   hello_ack  accepted (bool), reason (str ≤ 255), optional xfer ("ipc"|"nccl":
 *              the transport chosen; absent = host) and nccl_id (256 hex, the
 *              ncclUniqueId; present exactly when xfer is "nccl"), optional nonce (32
 *              hex: a link-secret challenge, ms_link.h; absent when all zero)
 *   begin      prompt [n_prompt ids], k_pre, topk_pre [n_prompt·k_pre ids], root, tensor?
 *   tree       n, token [n], parent [n], depth [n], score [n] (float32),
 *              stats {backbone_ns, head_ns, vocab_ns, vocab_size, covered, emitted},
 *              optional ngram (uint64: bit j ⇔ node j came from the n-gram source;
 *              absent when 0)
 *              (masks are not sent: the receiver rebuilds them from parents)
 *   verify     n_path, path [n_path], bonus, k_ver, ver_topk [n_path·k_ver], tensor?
 *   cancel     reason (str ≤ 255)
 *   end        —
 *   error      code (a negative ms_status), message (str ≤ 1024)
 *   heartbeat  seq, t_ns (uint64)
 *   ping       build (str ≤ 64: the sender's build id), seq (uint64), reply (bool):
 *              a ping (reply false) is answered with the receiver's build and
 *              the same seq (reply true); the build is only logged, never judged
 * Integers use MessagePack's shortest form, floats float32. The encoder always
 * sends frame-1 features as F32; the decoder also accepts F16 and BF16 and
 * converts. "tensor" may carry a fifth key, via ("ipc"|"nccl"), absent for a
 * frame-1 tensor: the bytes then travel by the negotiated transport
 * (ms_xfer.h), no frame 1 comes, and the decoder returns features NULL with
 * the announcement in ms_wire_msg.tensor for ms_xfer to check and receive.
 *
 * The decoder trusts nothing: every field's type, every array length against
 * its count, every bound, no unknown type or key, no duplicate key, no
 * trailing byte, and no allocation sized by the wire before the bytes to back
 * it have been seen. It never crashes on any input.
 */
#ifndef MS_WIRE_H
#define MS_WIRE_H

#include "ms_msg.h"
#include "ms_tensor.h"

#define MS_WIRE_FP_MAX 128       /* model_fp / tok_fp characters */
#define MS_WIRE_KIND_MAX 32      /* hello.kind characters */
#define MS_WIRE_REASON_MAX 255   /* hello_ack / cancel reason characters */
#define MS_WIRE_MESSAGE_MAX 1024 /* error message characters */
#define MS_WIRE_BUILD_MAX 64     /* ping.build characters */
#define MS_WIRE_TOPK_MAX 64      /* k_pre, k_ver */
#define MS_WIRE_FEAT_DIM_MAX 65536
#define MS_WIRE_PROMPT_MAX_DEFAULT (INT64_C(1) << 20)

typedef enum {
    MS_WIRE_HELLO = 1,
    MS_WIRE_HELLO_ACK,
    MS_WIRE_BEGIN,
    MS_WIRE_TREE,
    MS_WIRE_VERIFY,
    MS_WIRE_CANCEL,
    MS_WIRE_END,
    MS_WIRE_ERROR,
    MS_WIRE_HEARTBEAT,
    MS_WIRE_PING,
} ms_wire_type;
#define MS_WIRE_TYPE_COUNT 10

typedef enum { MS_WIRE_ROLE_TARGET = 1, MS_WIRE_ROLE_DRAFT } ms_wire_role;

/* How a begin/verify tensor travels ("tensor".via): frame 1, CUDA IPC on one
 * GPU, or NCCL between two GPUs (ms_xfer.h). */
typedef enum { MS_WIRE_VIA_HOST = 0, MS_WIRE_VIA_IPC = 1, MS_WIRE_VIA_NCCL = 2 } ms_wire_via;
#define MS_WIRE_VIA_COUNT 3
#define MS_WIRE_UUID_BYTES 16       /* cudaDeviceProp.uuid */
#define MS_WIRE_HOST_ID_MAX 64      /* hello.host_id characters */
#define MS_WIRE_IPC_HANDLE_BYTES 64 /* CUDA_IPC_HANDLE_SIZE */
#define MS_WIRE_NCCL_ID_BYTES 128   /* NCCL_UNIQUE_ID_BYTES */
#define MS_WIRE_XFER_ROWS_MAX (INT64_C(1) << 20)
#define MS_WIRE_AUTH_BYTES 32  /* hello.auth: HMAC-SHA256 */
#define MS_WIRE_NONCE_BYTES 16 /* hello_ack.nonce */

/* A hello's tensor-transport offer. offer == 0: a host-only peer (none of its
 * keys is sent, so such a hello has the same bytes as before transports). */
typedef struct {
    uint32_t offer;                       /* bits 1 << MS_WIRE_VIA_IPC / _NCCL (host is always possible) */
    uint8_t gpu_uuid[MS_WIRE_UUID_BYTES]; /* the sender's GPU (required when offer != 0) */
    char host_id[MS_WIRE_HOST_ID_MAX + 1]; /* same machine ⇔ same id ("" = unknown) */
    int64_t max_rows;                     /* ipc: rows of the receiver's buffer; 0 otherwise */
    uint8_t ipc_mem[MS_WIRE_IPC_HANDLE_BYTES];   /* ipc: the receiver's buffer */
    uint8_t ipc_event[MS_WIRE_IPC_HANDLE_BYTES]; /* ipc: the event the sender records after a copy */
} ms_wire_xfer;

/* A begin/verify tensor announcement as decoded (any via); the encoder reads
 * it only when via != MS_WIRE_VIA_HOST (then the message's features pointer
 * is not sent: dtype/bytes come from here, rows from n_prompt/n_path, cols
 * from feat_dim). */
typedef struct {
    ms_wire_via via;
    ms_dtype dtype;    /* MS_DTYPE_F32 / F16 / BF16 */
    int64_t rows, cols;
    uint64_t bytes;
} ms_wire_tensor;

/* First message on a link, both ways: who I am and what I serve. */
typedef struct {
    ms_wire_role role;
    char model_fp[MS_WIRE_FP_MAX + 1]; /* model fingerprint */
    char tok_fp[MS_WIRE_FP_MAX + 1];   /* tokenizer fingerprint: target and draft must agree */
    int64_t vocab;                     /* 1..INT32_MAX */
    int64_t hidden;                    /* 1..MS_WIRE_FEAT_DIM_MAX */
    char kind[MS_WIRE_KIND_MAX + 1];   /* draft kind ("eagle", "layerskip", ...) or the target's model kind */
    bool wants_features;
    int64_t pid; /* 0..INT32_MAX */
    ms_wire_xfer xfer; /* optional tensor-transport offer (zeroed: none) */
    uint8_t auth[MS_WIRE_AUTH_BYTES]; /* proof of the link secret for the target's nonce (all zero: none) */
} ms_wire_hello;

typedef struct {
    bool accepted;
    char reason[MS_WIRE_REASON_MAX + 1];
    ms_wire_via xfer;                          /* transport chosen by the target (host: keys absent) */
    uint8_t nccl_id[MS_WIRE_NCCL_ID_BYTES];    /* xfer == nccl: the communicator's ncclUniqueId */
    uint8_t nonce[MS_WIRE_NONCE_BYTES];        /* a link-secret challenge to answer in the next hello (all zero: none) */
} ms_wire_hello_ack;

typedef struct {
    char reason[MS_WIRE_REASON_MAX + 1];
} ms_wire_cancel;

typedef struct {
    int32_t code; /* a negative ms_status */
    char message[MS_WIRE_MESSAGE_MAX + 1];
} ms_wire_error;

typedef struct {
    uint64_t seq, t_ns;
} ms_wire_heartbeat;

typedef struct {
    char build[MS_WIRE_BUILD_MAX + 1]; /* the sender's build id (its version string) */
    uint64_t seq;                      /* a reply carries the ping's */
    bool reply;
} ms_wire_ping;

/* A decoded or to-be-encoded message. For begin/tree/verify the envelope's
 * request_id (and round for tree/verify) must equal the inner struct's copy;
 * the decoder fills both. Strings are NUL-terminated C strings. */
typedef struct {
    ms_wire_type type;
    uint32_t version;    /* decoder: MS_PROTO_VERSION; ignored by the encoder (always sends its own) */
    uint64_t request_id;
    int64_t round;       /* 0 when not applicable */
    uint64_t tensor_seq; /* begin/verify with features: the sender's tensor counter ("tensor".seq) */
    ms_wire_tensor tensor; /* begin/verify: the announcement (decoder: any via; encoder: see ms_wire_tensor) */
    union {
        ms_wire_hello hello;
        ms_wire_hello_ack ack;
        ms_msg_begin begin;
        ms_msg_tree tree;
        ms_msg_verify verify;
        ms_wire_cancel cancel;
        ms_wire_error error;
        ms_wire_heartbeat heartbeat;
        ms_wire_ping ping;
    } u;
} ms_wire_msg;

/* A growable byte buffer owned by the caller; start zeroed ({0}), reuse it
 * across messages (no allocation once grown), free with ms_wire_buf_free. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
} ms_wire_buf;
void ms_wire_buf_free(ms_wire_buf *b);

/* Encode m: frame 0 replaces ctrl's contents (ctrl->len = its size). For a
 * begin/verify with features, *tensor and *tensor_bytes are the caller's own
 * features pointer and byte size (zero copy: send it as frame 1); otherwise
 * NULL/0. tensor and tensor_bytes may be NULL only for messages without features.
 * Checks m (bounds, string lengths, tree structure): MS_ERR_INVALID naming the
 * field if it would not decode; MS_ERR_NOMEM. */
ms_status ms_wire_encode(const ms_wire_msg *m, ms_wire_buf *ctrl, const void **tensor, size_t *tensor_bytes);

/* Decoder scratch: the arrays a decoded message points to (prompt, topk_pre,
 * ver_topk, features) live here until the next decode with the same arena.
 * max_prompt bounds begin's n_prompt (0 = MS_WIRE_PROMPT_MAX_DEFAULT). */
typedef struct ms_wire_arena ms_wire_arena;
ms_status ms_wire_arena_new(int64_t max_prompt, ms_wire_arena **out);
void ms_wire_arena_free(ms_wire_arena **a); /* nulls *a */
/* Text of the last decode error ("" after a success): what a node puts in its
 * error reply. Valid until the next decode. */
const char *ms_wire_arena_error(const ms_wire_arena *a);
/* Bytes the arena holds now (grows to the largest message seen; for metrics
 * and for tests that check nothing was sized by an unbacked count). */
size_t ms_wire_arena_bytes(const ms_wire_arena *a);

/* Decode one message: ctrl = frame 0; tensor/tensor_len = frame 1 when
 * has_tensor (any alignment). Fills *out (pointers into the arena; features
 * always f32, copied or converted). Trees come with masks rebuilt from the
 * parents and pass ms_tree_validate. Errors (kept in ms_wire_arena_error for
 * the caller to report, logged at debug level only: the bytes come from
 * peers; *out is then unspecified): MS_ERR_FORMAT malformed,
 * MS_ERR_UNSUPPORTED another protocol version (naming both), MS_ERR_RANGE a
 * count or value past its bound; each names the message type and the field.
 * MS_ERR_NOMEM. Ids are checked ≥ 0 only: their range vs the vocabulary is
 * the receiver's check. */
ms_status ms_wire_decode(const void *ctrl, size_t ctrl_len, const void *tensor, size_t tensor_len, bool has_tensor,
                         ms_wire_arena *arena, ms_wire_msg *out);

/* "hello", "tree", ... ("?" for an unknown value). */
const char *ms_wire_type_name(ms_wire_type t);

/* Field-by-field equality of two messages (arrays by content, floats and
 * features bitwise, tree masks included); on a difference writes the first
 * differing field into why (may be NULL). For tests and fault reports. */
bool ms_wire_msg_equal(const ms_wire_msg *a, const ms_wire_msg *b, char *why, size_t why_cap);

#endif
