/* test_cuda_xfer — the device transports of protocol/ms_xfer.h between two
 * real processes over a real link:
 *   test_cuda_xfer ipc    two processes on GPU 0 (CUDA IPC)
 *   test_cuda_xfer nccl   GPU 0 → GPU 1 (NCCL)
 * The receiver (draft role) offers, the sender (target role) chooses and
 * sends MSGS verify messages of seeded features (more than the IPC slots, so
 * slot reuse waits for the receiver); the receiver checks every message came
 * by the transport (not host frames) and is bit-exact, then reports back.
 * Exit 77 (skipped) when the part's hardware is absent: no CUDA device, or
 * fewer than 2 for nccl, as counted by a device probe that exited normally; a
 * probe that crashed or hung is a failure, not "no GPU". CUDA is touched only
 * in forked children (a process that initialised CUDA cannot fork a CUDA
 * user). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ms_k_cuda.h"
#include "ms_link.h"
#include "ms_xfer.h"
#include "test_fs.h"

enum { FEAT = 129, ROWS_MAX = 64, MSGS = 11 };

static void fill(float *f, int64_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 7;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        uint32_t bits = ((s >> 1) & 0x7f7fffffu) | ((s & 1u) << 31); /* finite, any sign */
        memcpy(&f[i], &bits, 4);
    }
}

static int64_t rows_of(int r) { return 1 + (r * 7) % ROWS_MAX; } /* odd sizes, up to max_rows */

#define DIE(...)                                      \
    do {                                              \
        fprintf(stderr, "test_cuda_xfer: " __VA_ARGS__); \
        fprintf(stderr, "\n");                        \
        return 1;                                     \
    } while (0)

static ms_status recv_one(ms_link *l, ms_wire_msg *m) {
    for (int i = 0; i < 100; i++) {
        ms_status st = ms_link_recv(l, 100, m);
        if (st != MS_ERR_TIMEOUT) return st;
    }
    return MS_ERR_TIMEOUT;
}

static int receiver(const char *ep, ms_xfer_kind kind, int device) {
    ms_log_set_role("recv");
    ms_link_opts o = {.endpoint = ep, .deadline_ms = 5000, .heartbeat_ms = 500};
    ms_link *l = NULL;
    ms_xfer *x = NULL;
    ms_xfer_opts xo = {.policy = kind, .device = device, .max_rows = ROWS_MAX, .feat_dim = FEAT,
                       .dtype = MS_DTYPE_F32, .deadline_ms = 5000};
    if (ms_xfer_new(&xo, true, &x) < 0) DIE("receiver: ms_xfer_new failed");
    if (ms_link_connect(&o, &l) < 0) DIE("receiver: connect failed");
    ms_link_set_xfer(l, x);
    ms_wire_msg h = {.type = MS_WIRE_HELLO};
    h.u.hello.role = MS_WIRE_ROLE_DRAFT;
    h.u.hello.vocab = 1000, h.u.hello.hidden = FEAT, h.u.hello.wants_features = true;
    h.u.hello.pid = getpid();
    h.u.hello.xfer = ms_xfer_local(x).wire;
    if (!(h.u.hello.xfer.offer & (1u << kind))) DIE("receiver: does not offer %s", ms_xfer_kind_name(kind));
    ms_wire_msg m;
    if (ms_link_send(l, &h) < 0) DIE("receiver: hello not sent");
    if (recv_one(l, &m) < 0 || m.type != MS_WIRE_HELLO_ACK || !m.u.ack.accepted) DIE("receiver: no ack");
    if (ms_xfer_kind_now(x) != (ms_wire_via)kind)
        DIE("receiver: negotiated %d, expected %s", (int)ms_xfer_kind_now(x), ms_xfer_kind_name(kind));
    int bad = 0;
    static float want[ROWS_MAX * FEAT];
    for (int r = 1; r <= MSGS; r++) {
        ms_status st = recv_one(l, &m);
        int64_t rows = rows_of(r);
        fill(want, rows * FEAT, (uint32_t)r);
        if (st < 0 || m.type != MS_WIRE_VERIFY || m.round != r) {
            fprintf(stderr, "receiver: message %d: status %d type %s\n", r, st, ms_wire_type_name(m.type));
            bad++;
            continue;
        }
        if (m.tensor.via != (ms_wire_via)kind || m.u.verify.n_path != rows || m.u.verify.feat_dim != FEAT ||
            !m.u.verify.features || memcmp(m.u.verify.features, want, (size_t)(rows * FEAT) * sizeof(float)) != 0) {
            fprintf(stderr, "receiver: message %d: via %d rows %lld: features differ\n", r, (int)m.tensor.via,
                    (long long)m.u.verify.n_path);
            bad++;
        }
    }
    ms_wire_msg done = {.type = MS_WIRE_CANCEL};
    snprintf(done.u.cancel.reason, sizeof done.u.cancel.reason, "%s", bad ? "bad" : "ok");
    ms_link_send(l, &done);
    usleep(200000); /* let the report leave before the socket closes */
    ms_link_close(&l);
    ms_xfer_free(&x);
    return bad ? 1 : 0;
}

static int sender(const char *ep, ms_xfer_kind kind, int device) {
    ms_log_set_role("send");
    ms_link_opts o = {.endpoint = ep, .deadline_ms = 5000, .heartbeat_ms = 500};
    ms_link *l = NULL;
    ms_xfer *x = NULL;
    ms_xfer_opts xo = {.policy = kind, .device = device, .max_rows = ROWS_MAX, .feat_dim = FEAT,
                       .dtype = MS_DTYPE_F32, .deadline_ms = 5000};
    if (ms_xfer_new(&xo, false, &x) < 0) DIE("sender: ms_xfer_new failed");
    if (ms_link_bind(&o, &l) < 0) DIE("sender: bind failed");
    ms_link_set_xfer(l, x);
    ms_wire_msg m;
    if (recv_one(l, &m) < 0 || m.type != MS_WIRE_HELLO) DIE("sender: no hello");
    if (ms_link_accept_peer(l, true, "") < 0) DIE("sender: accept failed");
    if (ms_xfer_kind_now(x) != (ms_wire_via)kind) DIE("sender: negotiated %d", (int)ms_xfer_kind_now(x));
    static float feat[ROWS_MAX * FEAT];
    for (int r = 1; r <= MSGS; r++) {
        int64_t rows = rows_of(r);
        fill(feat, rows * FEAT, (uint32_t)r);
        ms_wire_msg v = {.type = MS_WIRE_VERIFY, .request_id = 1, .round = r};
        v.u.verify = (ms_msg_verify){.request_id = 1, .round = r, .n_path = rows, .bonus = 3, .features = feat,
                                     .feat_dim = FEAT};
        for (int64_t i = 0; i < rows; i++) v.u.verify.path[i] = (int32_t)i;
        if (ms_link_send(l, &v) < 0) DIE("sender: verify %d not sent", r);
        memset(feat, 0xff, sizeof feat); /* the sender may reuse its buffer at once */
    }
    ms_xfer_counters c = ms_xfer_counters_get(x);
    if (c.sent[kind] != MSGS) DIE("sender: %lld of %d went by %s", (long long)c.sent[kind], MSGS, ms_xfer_kind_name(kind));
    if (recv_one(l, &m) < 0 || m.type != MS_WIRE_CANCEL) DIE("sender: no report from the receiver");
    int rc = strcmp(m.u.cancel.reason, "ok") ? 1 : 0;
    ms_link_close(&l);
    ms_xfer_free(&x);
    return rc;
}

static int run_child(int (*fn)(const char *, ms_xfer_kind, int), const char *ep, ms_xfer_kind k, int dev, pid_t *pid) {
    *pid = fork();
    if (*pid == 0) _exit(fn(ep, k, dev));
    return *pid > 0 ? 0 : -1;
}

enum { CHILD_KILLED = 128, CHILD_TIMEOUT = 124 };

/* The child's exit status, CHILD_KILLED when a signal ended it, CHILD_TIMEOUT
 * (after SIGKILL) when it ran past the deadline. */
static int wait_child(pid_t pid, int seconds) {
    for (int i = 0; i < seconds * 10; i++) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : CHILD_KILLED;
        usleep(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return CHILD_TIMEOUT;
}

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "ipc") && strcmp(argv[1], "nccl"))) {
        fprintf(stderr, "usage: test_cuda_xfer ipc|nccl\n");
        return 2;
    }
    ms_xfer_kind kind = strcmp(argv[1], "ipc") ? MS_XFER_NCCL : MS_XFER_IPC;
    if (!ms_xfer_kind_built(kind)) {
        printf("test_cuda_xfer %s: skipped (not built: no %s)\n", argv[1], kind == MS_XFER_NCCL ? "NCCL" : "CUDA");
        return 77;
    }
    /* Count devices in a child: the parent stays CUDA-free so it can fork. */
    pid_t probe = fork();
    if (probe == 0) {
        int n = ms_k_cuda_device_count();
        _exit(n < 0 ? 0 : n > 100 ? 100 : n);
    }
    if (probe < 0) {
        perror("test_cuda_xfer: fork of the device probe");
        return 1;
    }
    int n_dev = wait_child(probe, 60);
    if (n_dev > 100) {
        printf("test_cuda_xfer %s: FAIL: the device probe %s (status %d), which is not \"no GPU\"\n", argv[1],
               n_dev == CHILD_TIMEOUT ? "hung past 60 s" : n_dev == CHILD_KILLED ? "was killed by a signal" : "failed",
               n_dev);
        return 1;
    }
    int need = kind == MS_XFER_NCCL ? 2 : 1;
    if (n_dev < need) {
        printf("test_cuda_xfer %s: skipped (%d CUDA device(s), needs %d)\n", argv[1], n_dev, need);
        return 77;
    }
    char dir[512], ep[600];
    if (!ms_test_tmpdir("test_cuda_xfer", dir, sizeof dir)) return 1;
    snprintf(ep, sizeof ep, "ipc://%s/link.sock", dir);
    pid_t s_pid, r_pid;
    if (run_child(sender, ep, kind, 0, &s_pid) < 0) return 1;
    if (run_child(receiver, ep, kind, kind == MS_XFER_NCCL ? 1 : 0, &r_pid) < 0) return 1;
    int rr = wait_child(r_pid, 120), rs = wait_child(s_pid, 120);
    ms_test_rmtree(dir);
    printf("test_cuda_xfer %s: receiver %d, sender %d\n", argv[1], rr, rs);
    return rr == 0 && rs == 0 ? 0 : 1;
}
