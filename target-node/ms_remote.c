/* ms_remote.c — the draft port over the ZeroMQ link. */
#include "ms_remote.h"

#include <stdlib.h>
#include <string.h>

struct ms_remote {
    ms_link *link;
    int deadline_ms;
    bool wants_features;
    ms_remote_hello_fn on_hello;
    void *hello_ctx;
};

ms_status ms_remote_new(ms_link *link, int deadline_ms, bool wants_features, ms_remote_hello_fn on_hello,
                        void *hello_ctx, ms_remote **out) {
    ms_remote *r = ms_calloc(1, sizeof *r);
    if (!r) return MS_ERR_NOMEM;
    r->link = link;
    r->deadline_ms = deadline_ms > 0 ? deadline_ms : 2000;
    r->wants_features = wants_features;
    r->on_hello = on_hello;
    r->hello_ctx = hello_ctx;
    *out = r;
    return MS_OK;
}

void ms_remote_free(ms_remote **pr) {
    ms_remote *r = *pr;
    if (!r) return;
    free(r);
    *pr = NULL;
}

static ms_status remote_begin(void *ctx, const ms_msg_begin *m) {
    ms_remote *r = ctx;
    ms_wire_msg w = {.type = MS_WIRE_BEGIN, .request_id = m->request_id, .round = 0};
    w.u.begin = *m;
    return ms_link_send(r->link, &w);
}

static ms_status remote_accept(void *ctx, const ms_msg_verify *m) {
    ms_remote *r = ctx;
    ms_wire_msg w = {.type = MS_WIRE_VERIFY, .request_id = m->request_id, .round = m->round};
    w.u.verify = *m;
    return ms_link_send(r->link, &w);
}

static void remote_end(void *ctx, uint64_t rid) {
    ms_remote *r = ctx;
    ms_wire_msg w = {.type = MS_WIRE_END, .request_id = rid};
    if (ms_link_peer_alive(r->link) && ms_link_send(r->link, &w) < 0)
        MS_LOG_DEBUG("request %llu: end not delivered", (unsigned long long)rid);
}

static ms_status remote_draft(void *ctx, uint64_t rid, int64_t round, ms_msg_tree *out) {
    ms_remote *r = ctx;
    const uint64_t end = ms_now_ns() + (uint64_t)r->deadline_ms * 1000000ull;
    for (;;) {
        uint64_t now = ms_now_ns();
        if (!ms_link_has_peer(r->link))
            MS_FAIL(MS_ERR_PEER, "request %llu round %lld: the draft is unreachable", (unsigned long long)rid,
                    (long long)round);
        if (now >= end)
            MS_FAIL(MS_ERR_TIMEOUT, "request %llu round %lld: no tree from the draft within %d ms",
                    (unsigned long long)rid, (long long)round, r->deadline_ms);
        ms_wire_msg m;
        ms_status s = ms_link_recv(r->link, (int)((end - now) / 1000000ull) + 1, &m);
        if (s == MS_ERR_TIMEOUT) continue;
        if (s == MS_ERR_FORMAT) continue; /* answered and logged by the link */
        if (s < 0) return s;
        switch (m.type) {
        case MS_WIRE_TREE:
            if (m.request_id != rid || m.round != round) {
                MS_LOG_WARN("request %llu round %lld: dropped a stale tree (request %llu round %lld)",
                            (unsigned long long)rid, (long long)round, (unsigned long long)m.request_id,
                            (long long)m.round);
                continue;
            }
            *out = m.u.tree;
            return MS_OK;
        case MS_WIRE_ERROR:
            MS_FAIL(MS_ERR_PEER, "request %llu round %lld: the draft reports %s: %s", (unsigned long long)rid,
                    (long long)round, ms_status_str(m.u.error.code), m.u.error.message);
        case MS_WIRE_HELLO: {
            bool same = ms_link_last_is_peer(r->link);
            if (r->on_hello) r->on_hello(r->hello_ctx, &m.u.hello);
            if (same) continue; /* the same draft announcing again: nothing lost */
            MS_FAIL(MS_ERR_PEER, "request %llu: the draft restarted; continuing without it", (unsigned long long)rid);
        }
        default:
            MS_LOG_WARN("request %llu round %lld: ignored an unexpected %s from the draft", (unsigned long long)rid,
                        (long long)round, ms_wire_type_name(m.type));
            continue;
        }
    }
}

ms_draft_port ms_remote_port(ms_remote *r) {
    return (ms_draft_port){.ctx = r,
                           .wants_features = r->wants_features,
                           .begin = remote_begin,
                           .draft = remote_draft,
                           .accept = remote_accept,
                           .end = remote_end};
}
