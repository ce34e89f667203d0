/* ms_link.h — the ZeroMQ link between the target node and the draft node.
 *
 * The target binds a ROUTER socket at the configured endpoint (tcp:// or
 * ipc://); the draft connects a DEALER and announces itself with a hello.
 * Each message is one ZeroMQ multipart message of ms_wire frames. Every wait
 * has a deadline; heartbeats are sent and consumed inside the waits, so a
 * silent peer is noticed. Pings are answered and their answers logged inside
 * the waits too: the target pings the draft once it accepts it, to log the
 * draft's build (MS_BUILD_ID, the project version; a mismatch is not refused). With CURVE the target is the server and only the
 * configured client public key is admitted (a ZAP handler checks it).
 *
 * One draft is served at a time, and a healthy one keeps its place: while the
 * accepted draft's connection is up and it was heard within 3 heartbeat
 * periods, a hello from any other peer is answered by the link itself with an
 * error reply (MS_ERR_PEER, "a draft is already connected ...") and never
 * reaches the caller. A newcomer is admitted only once the old draft is gone.
 *
 * Link secret (opts.secret_file; cluster/launch.sh makes one per cluster):
 * both ends read the same secret, and the target admits a hello only with a
 * proof of it. The target answers a hello without a valid proof with a refused
 * hello_ack carrying a nonce (16 random bytes, renewed after each accepted
 * proof, so a proof cannot be replayed); the draft's link answers it by itself
 * with the hello again, auth = HMAC-SHA256(secret, "microspec-link-hello-v1" ||
 * nonce). A hello from the already accepted draft needs no new proof (its
 * connection was authenticated). A draft without the secret, or with another
 * one, gets the refusal back from ms_link_recv (after a few answered
 * challenges). This authenticates the draft, it does not encrypt: use CURVE
 * across hosts.
 *
 * Not thread-safe: one thread at a time (callers serialise with a mutex).
 */
#ifndef MS_LINK_H
#define MS_LINK_H

#include "ms_wire.h"
#include "ms_xfer.h"

typedef struct {
    const char *endpoint;      /* "tcp://127.0.0.1:5757", "ipc:///tmp/ms.sock" */
    int deadline_ms;           /* default wait for the peer's answer (≥ 1) */
    int heartbeat_ms;          /* heartbeat period; the peer is down after 3 missed */
    int64_t max_message_bytes; /* larger messages are dropped by ZeroMQ (ZMQ_MAXMSGSIZE) */
    int64_t max_prompt;        /* decoder bound on begin's prompt (0: default) */
    bool curve;
    const char *server_public, *server_secret; /* Z85, 40 chars */
    const char *client_public, *client_secret;
    /* "" / NULL: none. A file of at least 16 bytes (trailing white space
     * ignored) that only its owner may read (mode 0600 or stricter). */
    const char *secret_file;
} ms_link_opts;

typedef struct ms_link ms_link;

ms_status ms_link_bind(const ms_link_opts *o, ms_link **out);    /* target */
ms_status ms_link_connect(const ms_link_opts *o, ms_link **out); /* draft */
void ms_link_close(ms_link **l);

/* Send to the peer (target: the accepted draft; MS_ERR_PEER when there is
 * none or it is gone). */
ms_status ms_link_send(ms_link *l, const ms_wire_msg *m);

/* Wait up to timeout_ms (0: poll, -1: the deadline) for one message that is
 * not a heartbeat. MS_ERR_TIMEOUT when none came. A frame that does not decode
 * is answered with an error reply (without waiting), logged within a budget
 * (bad input from any peer is counted; past 16 lines, one back every 5 s, it
 * is summarised per peer at most every 30 s), and MS_ERR_FORMAT returned (the
 * caller just goes on). On the target, a hello from a new draft is returned
 * to the caller, who accepts it with ms_link_accept_peer; messages from any
 * other unknown peer are answered with an error and dropped. Target: when the
 * accepted draft is found gone during the wait (its connection closed: a
 * heartbeat to it cannot be queued), MS_ERR_PEER at once, not at the end of
 * timeout_ms (ms_link_has_peer is then false). *out points into
 * the link's arena until the next receive. */
ms_status ms_link_recv(ms_link *l, int timeout_ms, ms_wire_msg *out);

/* Target: make the sender of the last received hello the draft peer (or
 * refuse it); answers with a hello_ack either way. Only hellos that passed the
 * link's own checks (secret, a healthy draft keeps its place) reach the caller. */
ms_status ms_link_accept_peer(ms_link *l, bool accept, const char *reason);
/* Target: the last received message came from the accepted draft (e.g. a
 * repeated hello of a draft that thought the target went silent). */
bool ms_link_last_is_peer(const ms_link *l);
/* Target: forget the current draft peer (after a failure). */
void ms_link_drop_peer(ms_link *l);
/* Target: a draft peer is accepted and was not found unreachable since. */
bool ms_link_has_peer(const ms_link *l);
/* A peer is known and was heard from within 3 heartbeat periods. */
bool ms_link_peer_alive(const ms_link *l);
/* Send a heartbeat now if one is due (both roles; also done inside recv). */
void ms_link_tick(ms_link *l);

/* Attach a tensor transport (ms_xfer.h; borrowed, outlives the link or is
 * detached with NULL). From then on the link negotiates it: the target's
 * ms_link_accept_peer chooses from the last hello's offer and answers in the
 * hello_ack (then makes the NCCL communicator); the draft adopts an accepted
 * hello_ack as it is received. Sending begin/verify features stamps the
 * xfer's seq and moves the rows by the negotiated transport when it carries
 * them (else as frame 1). Receiving checks every tensor announcement
 * (ms_xfer_check) and fetches transport tensors: a refused one is answered
 * with an error reply and MS_ERR_FORMAT is returned, like a frame that does
 * not decode. Without an xfer, a tensor announced via ipc/nccl is refused the
 * same way. The sender's hello offer is the caller's (ms_xfer_local). */
void ms_link_set_xfer(ms_link *l, ms_xfer *x);

/* Message counters of the link. Target: hellos refused for the link secret
 * (challenges included) and for a healthy draft already in place. */
typedef struct {
    int64_t sent, received, decode_errors, heartbeats;
    int64_t auth_refused, busy_refused;
} ms_link_counters;
ms_link_counters ms_link_counters_get(const ms_link *l);

/* HMAC-SHA256 (RFC 2104 over FIPS 180-4), the link secret's proof. */
void ms_link_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t msg_len, uint8_t out[32]);

/* Fingerprint of a file's bytes (FNV-1a 64, hex) for the hello. */
ms_status ms_link_fingerprint_file(const char *path, char out[17]);
/* Fingerprint of a model folder's tokenizer (tokenizer.json, else tokenizer.bin):
 * target and draft must agree on it. */
ms_status ms_link_fingerprint_tokenizer(const char *dir, char out[17]);
/* GGUF models (ms_link_fp.c): the token list (model, pre, tokens with types,
 * merges, BOS/EOS, add_bos) — equal for files sharing a tokenizer — and the
 * header (keys, tensor names, types, shapes, offsets). */
ms_status ms_link_fingerprint_gguf_tokens(const char *path, char out[17]);
ms_status ms_link_fingerprint_gguf_model(const char *path, char out[17]);

#endif
