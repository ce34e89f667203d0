/* ms_xfer.c — tensor transport selection, announcements and their checks;
 * the CUDA IPC / NCCL work goes through the device transport table
 * (ms_xfer_dev.h: ms_xfer_cuda.c, or NULL in a build without CUDA). */
#include "ms_xfer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_xfer_dev.h"

static const char *const kind_names[] = {"host", "ipc", "nccl", "auto"};

bool ms_xfer_kind_parse(const char *s, ms_xfer_kind *out) {
    for (int k = MS_XFER_HOST; k <= MS_XFER_AUTO; k++)
        if (s && !strcmp(s, kind_names[k])) {
            *out = (ms_xfer_kind)k;
            return true;
        }
    return false;
}

const char *ms_xfer_kind_name(ms_xfer_kind k) {
    return (unsigned)k <= MS_XFER_AUTO ? kind_names[k] : "?";
}

bool ms_xfer_kind_built(ms_xfer_kind k) {
    switch (k) {
    case MS_XFER_HOST:
    case MS_XFER_AUTO: return true;
    case MS_XFER_IPC: return ms_xfer_dev_table() != NULL;
    case MS_XFER_NCCL: return ms_xfer_dev_table() && ms_xfer_dev_table()->has_nccl();
    }
    return false;
}

#define BIT(v) (1u << (v))

static void say(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t cap, const char *fmt, ...) {
    if (!why || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

ms_wire_via ms_xfer_choose(const ms_xfer_side *t, const ms_xfer_side *d, char *why, size_t cap) {
    if (t->policy == MS_XFER_HOST || d->policy == MS_XFER_HOST) {
        say(why, cap, "host: link.tensor is \"host\" on the %s", t->policy == MS_XFER_HOST ? "target" : "draft");
        return MS_WIRE_VIA_HOST;
    }
    if (!t->on_gpu || !d->on_gpu || !d->wire.offer) {
        say(why, cap, "host: the %s is on the CPU or offers no device transport",
            !t->on_gpu ? "target" : "draft");
        return MS_WIRE_VIA_HOST;
    }
    uint32_t both = t->wire.offer & d->wire.offer;
    if (memcmp(t->wire.gpu_uuid, d->wire.gpu_uuid, MS_WIRE_UUID_BYTES) == 0) {
        if (!t->wire.host_id[0] || strcmp(t->wire.host_id, d->wire.host_id) != 0) {
            say(why, cap, "host: same GPU uuid but host ids '%s' and '%s' differ", t->wire.host_id, d->wire.host_id);
            return MS_WIRE_VIA_HOST;
        }
        if (!(both & BIT(MS_WIRE_VIA_IPC))) {
            say(why, cap, "host: same GPU, but ipc is not offered by both ends");
            return MS_WIRE_VIA_HOST;
        }
        say(why, cap, "ipc: both ends on the same GPU");
        return MS_WIRE_VIA_IPC;
    }
    if (!(both & BIT(MS_WIRE_VIA_NCCL))) {
        say(why, cap, "host: different GPUs, but nccl is not offered by both ends");
        return MS_WIRE_VIA_HOST;
    }
    say(why, cap, "nccl: different GPUs");
    return MS_WIRE_VIA_NCCL;
}

/* ---- the object -------------------------------------------------------------- */

struct ms_xfer {
    ms_xfer_opts o;
    char host_id[MS_WIRE_HOST_ID_MAX + 1];
    bool receiver;
    ms_xfer_side local;
    ms_wire_via now;       /* in use on this connection */
    bool pending_nccl;     /* sender: ack sent with nccl, communicator not made yet */
    uint8_t nccl_id[MS_WIRE_NCCL_ID_BYTES];
    bool pending_send;     /* sender: an ncclSend to wait for */
    int64_t peer_rows;     /* rows the transport carries on this connection */
    uint64_t next_seq;     /* sender: the last seq stamped */
    uint64_t last_seq;     /* receiver: the last seq accepted */
    const ms_xfer_dev_ops *T; /* the device transport table; NULL: host frames only */
    ms_xfer_dev *dev;         /* set only with T */
    void *stage;           /* receiver: host [max_rows, feat_dim] in dtype, for F16/BF16 */
    char err[256];
    ms_xfer_counters counters;
};

static void machine_id(char *out, size_t cap) {
    char buf[128] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\r\n")] = 0;
    if (!buf[0] && gethostname(buf, sizeof buf - 1) != 0) buf[0] = 0;
    snprintf(out, cap, "%s", buf);
}

static size_t row_bytes(const ms_xfer *x) { return (size_t)x->o.feat_dim * ms_dtype_size(x->o.dtype); }

/* Sets up the device side: uuid, staging, and (receiver, ipc allowed) the
 * exported buffer. Kinds that fail are dropped from the offer under auto,
 * and are errors when asked for by name. */
static ms_status setup_device(ms_xfer *x) {
    const ms_xfer_dev_ops *T = x->T;
    ms_wire_xfer *w = &x->local.wire;
    ms_status st = T->uuid(x->o.device, w->gpu_uuid);
    if (st < 0) return st;
    x->local.on_gpu = true;
    size_t bytes = (size_t)x->o.max_rows * row_bytes(x);
    MS_TRY(T->dev_new(x->o.device, x->o.stream, bytes, x->o.deadline_ms, &x->dev));
    snprintf(w->host_id, sizeof w->host_id, "%s", x->host_id);
    bool want_ipc = x->o.policy == MS_XFER_AUTO || x->o.policy == MS_XFER_IPC;
    bool want_nccl = x->o.policy == MS_XFER_AUTO || x->o.policy == MS_XFER_NCCL;
    if (want_ipc) {
        st = x->receiver ? T->ipc_export(x->dev, MS_XFER_IPC_SLOTS, w->ipc_mem, w->ipc_event) : MS_OK;
        if (st < 0 && x->o.policy == MS_XFER_IPC)
            MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: link.tensor \"ipc\": device %d cannot export a CUDA IPC buffer",
                    x->o.device);
        if (st >= 0) {
            w->offer |= BIT(MS_WIRE_VIA_IPC);
            if (x->receiver) w->max_rows = x->o.max_rows;
        } else {
            MS_LOG_WARN("xfer: no CUDA IPC on device %d; not offering ipc", x->o.device);
        }
    }
    if (want_nccl) {
        if (T->has_nccl()) w->offer |= BIT(MS_WIRE_VIA_NCCL);
        else if (x->o.policy == MS_XFER_NCCL)
            MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: link.tensor \"nccl\": this build has no NCCL");
    }
    if (!w->offer) { /* nothing beyond host: the hello stays as before */
        memset(w, 0, sizeof *w);
        x->local.on_gpu = true;
    }
    return MS_OK;
}

ms_status ms_xfer_new(const ms_xfer_opts *o, bool receiver, ms_xfer **out) {
    MS_ASSERT(o && out);
    *out = NULL;
    if ((unsigned)o->policy > MS_XFER_AUTO) MS_FAIL(MS_ERR_INVALID, "xfer: policy %d", (int)o->policy);
    if (o->max_rows < 1 || o->max_rows > MS_WIRE_XFER_ROWS_MAX || o->feat_dim < 1 || o->feat_dim > MS_WIRE_FEAT_DIM_MAX)
        MS_FAIL(MS_ERR_INVALID, "xfer: max_rows %lld / feat_dim %lld out of range", (long long)o->max_rows,
                (long long)o->feat_dim);
    if (o->dtype != MS_DTYPE_F32 && o->dtype != MS_DTYPE_F16 && o->dtype != MS_DTYPE_BF16)
        MS_FAIL(MS_ERR_INVALID, "xfer: dtype %s, expected F32, F16 or BF16", ms_dtype_name(o->dtype));
    bool named = o->policy == MS_XFER_IPC || o->policy == MS_XFER_NCCL;
    if (named && !ms_xfer_kind_built(o->policy))
        MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: link.tensor \"%s\" needs a build with CUDA%s; this one has %s",
                kind_names[o->policy], o->policy == MS_XFER_NCCL ? " and NCCL" : "",
                ms_xfer_kind_built(MS_XFER_IPC) ? "CUDA without NCCL" : "no CUDA (only \"host\" or \"auto\")");
    if (named && o->device < 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: link.tensor \"%s\" needs the node on a GPU (device \"cuda:N\"), not the CPU",
                kind_names[o->policy]);
    ms_xfer *x = ms_calloc(1, sizeof *x);
    if (!x) return MS_ERR_NOMEM;
    x->o = *o;
    if (x->o.deadline_ms <= 0) x->o.deadline_ms = 2000;
    x->receiver = receiver;
    if (o->host_id) snprintf(x->host_id, sizeof x->host_id, "%s", o->host_id);
    else machine_id(x->host_id, sizeof x->host_id);
    x->o.host_id = NULL;
    x->local.policy = o->policy;
    x->now = MS_WIRE_VIA_HOST;
    x->T = ms_xfer_dev_table();
    ms_status st = MS_OK;
    if (receiver && o->dtype != MS_DTYPE_F32) {
        x->stage = ms_malloc((size_t)o->max_rows * row_bytes(x));
        if (!x->stage) st = MS_ERR_NOMEM;
    }
    if (st >= 0 && x->T && o->device >= 0 && o->policy != MS_XFER_HOST) {
        st = setup_device(x);
        if (st < 0 && !named) { /* auto: a device that cannot do it is a host-only end */
            MS_LOG_WARN("xfer: device transports unavailable on device %d; using host frames", o->device);
            x->T->dev_free(&x->dev);
            memset(&x->local.wire, 0, sizeof x->local.wire);
            st = MS_OK;
        }
    }
    if (st < 0) {
        ms_xfer_free(&x);
        return st;
    }
    *out = x;
    return MS_OK;
}

void ms_xfer_free(ms_xfer **px) {
    ms_xfer *x = *px;
    if (!x) return;
    if (x->dev) x->T->dev_free(&x->dev);
    free(x->stage);
    free(x);
    *px = NULL;
}

ms_xfer_side ms_xfer_local(const ms_xfer *x) { return x->local; }
ms_wire_via ms_xfer_kind_now(const ms_xfer *x) { return x->now; }
const char *ms_xfer_error(const ms_xfer *x) { return x->err; }
ms_xfer_counters ms_xfer_counters_get(const ms_xfer *x) { return x->counters; }

/* Drop the device transport of this connection (after a failure). */
static void drop_transport(ms_xfer *x, const char *why, bool failure) {
    if (x->now != MS_WIRE_VIA_HOST && failure) {
        MS_LOG_WARN("xfer: %s transport dropped (%s); host frames from now on", kind_names[x->now], why);
        x->counters.failures++;
    }
    if (x->dev) {
        x->T->nccl_abort(x->dev);
        if (!x->receiver) x->T->ipc_close(x->dev);
    }
    x->now = MS_WIRE_VIA_HOST;
    x->pending_nccl = x->pending_send = false;
}

ms_status ms_xfer_accept(ms_xfer *x, const ms_wire_xfer *offer, ms_wire_hello_ack *ack) {
    MS_ASSERT(!x->receiver);
    drop_transport(x, "a new connection", false);
    ack->xfer = MS_WIRE_VIA_HOST;
    memset(ack->nccl_id, 0, sizeof ack->nccl_id);
    ms_xfer_side remote = {.policy = MS_XFER_AUTO, .on_gpu = offer->offer != 0, .wire = *offer};
    char why[256];
    ms_wire_via via = ms_xfer_choose(&x->local, &remote, why, sizeof why);
    MS_LOG_INFO("xfer: tensor transport %s", why);
    /* a device choice needs a local device end: with no table the choice is host */
    if (via != MS_WIRE_VIA_HOST) MS_ASSERT(x->dev);
    if (via == MS_WIRE_VIA_IPC) {
        x->peer_rows = offer->max_rows < x->o.max_rows ? offer->max_rows : x->o.max_rows;
        size_t slot = (size_t)offer->max_rows * row_bytes(x);
        if (x->T->ipc_import(x->dev, MS_XFER_IPC_SLOTS, slot, offer->ipc_mem, offer->ipc_event) < 0) {
            MS_LOG_WARN("xfer: cannot open the draft's CUDA IPC handles; using host frames");
            return MS_OK;
        }
        x->now = MS_WIRE_VIA_IPC;
    } else if (via == MS_WIRE_VIA_NCCL) {
        x->peer_rows = x->o.max_rows;
        if (x->T->nccl_id(x->nccl_id) < 0) {
            MS_LOG_WARN("xfer: no NCCL id; using host frames");
            return MS_OK;
        }
        memcpy(ack->nccl_id, x->nccl_id, sizeof x->nccl_id);
        x->pending_nccl = true;
    }
    ack->xfer = x->pending_nccl ? MS_WIRE_VIA_NCCL : x->now;
    return MS_OK;
}

ms_status ms_xfer_connect(ms_xfer *x) {
    if (!x->pending_nccl) return MS_OK;
    x->pending_nccl = false;
    if (x->T->nccl_init(x->dev, x->nccl_id, 0) < 0) {
        x->counters.failures++;
        MS_FAIL(MS_ERR_PEER, "xfer: the NCCL communicator with the draft was not made; using host frames");
    }
    x->now = MS_WIRE_VIA_NCCL;
    return MS_OK;
}

ms_status ms_xfer_adopt(ms_xfer *x, const ms_wire_hello_ack *ack) {
    MS_ASSERT(x->receiver);
    drop_transport(x, "a new connection", false);
    x->last_seq = 0; /* the target may have restarted: its seq starts again */
    if ((unsigned)ack->xfer >= MS_WIRE_VIA_COUNT) MS_FAIL(MS_ERR_PEER, "xfer: hello_ack xfer %d", (int)ack->xfer);
    if (ack->xfer == MS_WIRE_VIA_HOST) return MS_OK;
    if (!(x->local.wire.offer & BIT(ack->xfer)))
        MS_FAIL(MS_ERR_PEER, "xfer: the target chose %s, which this draft did not offer; using host frames",
                kind_names[ack->xfer]);
    MS_ASSERT(x->dev); /* offered: this end has a device end */
    if (ack->xfer == MS_WIRE_VIA_NCCL) {
        if (x->T->nccl_init(x->dev, ack->nccl_id, 1) < 0) {
            x->counters.failures++;
            MS_FAIL(MS_ERR_PEER, "xfer: could not join the target's NCCL communicator; using host frames");
        }
    }
    x->peer_rows = x->o.max_rows;
    x->now = ack->xfer;
    MS_LOG_INFO("xfer: tensor transport %s", kind_names[x->now]);
    return MS_OK;
}

/* ---- per message -------------------------------------------------------------- */

ms_status ms_xfer_send(ms_xfer *x, const void *src, bool src_on_device, int64_t rows, ms_wire_tensor *ann,
                       uint64_t *seq) {
    MS_ASSERT(!x->receiver && ann && seq && rows >= 0);
    *seq = ++x->next_seq;
    *ann = (ms_wire_tensor){.via = MS_WIRE_VIA_HOST, .dtype = MS_DTYPE_F32, .rows = rows, .cols = x->o.feat_dim};
    size_t bytes = (size_t)rows * row_bytes(x);
    ann->bytes = bytes;
    x->pending_send = false;
    if (x->now != MS_WIRE_VIA_HOST && rows <= x->peer_rows && rows > 0) {
        ms_status st = x->now == MS_WIRE_VIA_IPC ? x->T->ipc_send(x->dev, *seq, src, src_on_device, bytes)
                                                 : x->T->nccl_send(x->dev, src, src_on_device, bytes);
        if (st >= 0) {
            ann->via = x->now;
            ann->dtype = x->o.dtype;
            x->pending_send = x->now == MS_WIRE_VIA_NCCL;
            x->counters.sent[ann->via]++;
            return MS_OK;
        }
        drop_transport(x, "send failed", true);
    }
    if (src_on_device) MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: a device tensor cannot go as a host frame");
    if (x->o.dtype != MS_DTYPE_F32) MS_FAIL(MS_ERR_UNSUPPORTED, "xfer: host frames carry F32 features only");
    ann->bytes = (size_t)rows * (size_t)x->o.feat_dim * sizeof(float);
    x->counters.sent[MS_WIRE_VIA_HOST]++;
    return MS_OK;
}

ms_status ms_xfer_check_width(const ms_xfer *x, int64_t feat_dim) {
    if (feat_dim != x->o.feat_dim)
        MS_FAIL(MS_ERR_INVALID, "xfer: features of width %lld, the transport carries %lld", (long long)feat_dim,
                (long long)x->o.feat_dim);
    return MS_OK;
}

ms_status ms_xfer_send_finish(ms_xfer *x) {
    if (!x->pending_send) return MS_OK;
    x->pending_send = false;
    if (x->T->nccl_send_wait(x->dev) < 0) {
        drop_transport(x, "the draft did not receive the tensor", true);
        return MS_ERR_PEER;
    }
    return MS_OK;
}

#define REFUSE(...)                                        \
    do {                                                   \
        snprintf(x->err, sizeof x->err, __VA_ARGS__);      \
        return refuse(x, ann);                             \
    } while (0)

static ms_status refuse(ms_xfer *x, const ms_wire_tensor *ann) {
    x->counters.refused++;
    MS_LOG_WARN("xfer: refused a tensor: %s", x->err);
    /* A refused NCCL message leaves the sender's ncclSend unmatched: the
     * communicator is unusable; both ends fall back to host. */
    if ((unsigned)ann->via < MS_WIRE_VIA_COUNT && ann->via == MS_WIRE_VIA_NCCL && x->now == MS_WIRE_VIA_NCCL)
        drop_transport(x, "a refused nccl announcement", true);
    return MS_ERR_PEER;
}

ms_status ms_xfer_check(ms_xfer *x, const ms_wire_tensor *ann, uint64_t seq) {
    x->err[0] = 0;
    if ((unsigned)ann->via >= MS_WIRE_VIA_COUNT) REFUSE("tensor via %d is unknown", (int)ann->via);
    if (ann->via != MS_WIRE_VIA_HOST && ann->via != x->now)
        REFUSE("tensor via %s was not negotiated (this connection uses %s)", kind_names[ann->via], kind_names[x->now]);
    if (seq <= x->last_seq)
        REFUSE("tensor seq %llu is not above the last accepted %llu", (unsigned long long)seq,
               (unsigned long long)x->last_seq);
    if (ann->cols != x->o.feat_dim)
        REFUSE("tensor has %lld columns, the features have %lld", (long long)ann->cols, (long long)x->o.feat_dim);
    if (ann->rows < 0) REFUSE("tensor has %lld rows", (long long)ann->rows);
    if (ann->via == MS_WIRE_VIA_HOST) {
        if (ann->dtype != MS_DTYPE_F32 && ann->dtype != MS_DTYPE_F16 && ann->dtype != MS_DTYPE_BF16)
            REFUSE("tensor dtype %s, expected F32, F16 or BF16", ms_dtype_name(ann->dtype));
    } else {
        if (ann->dtype != x->o.dtype)
            REFUSE("tensor dtype %s, the %s transport carries %s", ms_dtype_name(ann->dtype), kind_names[ann->via],
                   ms_dtype_name(x->o.dtype));
        if (ann->rows > x->o.max_rows)
            REFUSE("tensor has %lld rows, the %s transport carries at most %lld", (long long)ann->rows,
                   kind_names[ann->via], (long long)x->o.max_rows);
    }
    size_t need = (size_t)ann->rows * (size_t)ann->cols * ms_dtype_size(ann->dtype); /* both bounded above */
    if (ann->bytes != need)
        REFUSE("tensor announces %llu bytes, [%lld, %lld] %s is %zu", (unsigned long long)ann->bytes,
               (long long)ann->rows, (long long)ann->cols, ms_dtype_name(ann->dtype), need);
    return MS_OK;
}

ms_status ms_xfer_recv(ms_xfer *x, const ms_wire_tensor *ann, uint64_t seq, float *dst) {
    MS_ASSERT(x->receiver);
    MS_TRY(ms_xfer_check(x, ann, seq));
    if (ann->via != MS_WIRE_VIA_HOST && ann->rows > 0) {
        MS_ASSERT(x->dev); /* check refuses a device transport this end did not negotiate */
        void *to = x->o.dtype == MS_DTYPE_F32 ? (void *)dst : x->stage;
        ms_status st = ann->via == MS_WIRE_VIA_IPC ? x->T->ipc_recv(x->dev, seq, to, ann->bytes)
                                                   : x->T->nccl_recv(x->dev, to, ann->bytes);
        if (st < 0) {
            snprintf(x->err, sizeof x->err, "tensor seq %llu: the %s transfer failed", (unsigned long long)seq,
                     kind_names[ann->via]);
            drop_transport(x, "receive failed", true);
            return MS_ERR_PEER;
        }
        if (to != dst) ms_convert_to_f32(dst, x->stage, x->o.dtype, ann->rows * ann->cols);
    }
    x->last_seq = seq;
    x->counters.received[ann->via]++;
    return MS_OK;
}
