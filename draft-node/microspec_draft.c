/* microspec-draft — the draft node: connects to the target over the link and
 * drafts a tree per round (docs/architecture.md §4, §6 `sync`). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_config.h"
#include "ms_draft.h"
#include "ms_kernels.h"
#include "ms_gguf.h"
#include "ms_link.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: microspec-draft --config FILE\n"
            "\n"
            "The draft node of a MicroSpec cluster: loads the draft model described by the\n"
            "cluster configuration, connects to the target node's link endpoint and drafts\n"
            "token trees for it. Runs until SIGINT/SIGTERM; reconnects by itself when the\n"
            "target restarts. Logs go to stderr.\n"
            "\n"
            "  -c, --config FILE   cluster configuration (libconfig; see cluster/configs/)\n"
            "  --link-secret FILE  the link secret (overrides link.secret_file; cluster/launch.sh\n"
            "                      passes the one it makes for the cluster)\n"
            "  -h, --help          this text\n");
}

/* The configuration, and what it sets for the whole process (log level and
 * folder, kernel threads). False (logged) when the node cannot start. */
static bool load_config(const char *path, ms_cfg *cfg) {
    if (ms_cfg_load(path, cfg) < 0) return false;
    ms_log_level lvl = MS_LOG_INFO;
    ms_log_level_parse(cfg->log.level, &lvl); /* the config loader allows only known names */
    if (!getenv("MS_LOG")) ms_log_set_level(lvl);
    if (cfg->log.dir[0] && ms_log_to_dir(cfg->log.dir, "draft", NULL, 0) < 0) return false;
    if (!cfg->draft.enabled) {
        MS_LOG_ERROR("%s: draft.enabled is false: there is nothing for a draft node to do", cfg->source);
        return false;
    }
    ms_k_cpu_set_threads(cfg->draft.threads > 0 ? (int)cfg->draft.threads : ms_k_cpu_cores()); /* 0: every core */
    return true;
}

/* The draft's options from the configuration (pointing into it); false
 * (logged) for a name that does not parse. */
static bool draft_opts(const ms_cfg *cfg, ms_dft_opts *o) {
    *o = ms_dft_opts_default();
    if (!ms_dft_kind_parse(cfg->draft.kind, &o->kind, &o->ngram) || o->kind == MS_DRAFT_NGRAM ||
        !ms_dft_vocab_set(o, cfg->vocab.mode) || !ms_vocab_stream_parse(cfg->vocab.stream, &o->stream) ||
        !ms_dft_head_parse(cfg->vocab.lm_head, &o->lm_head)) {
        MS_LOG_ERROR("%s: bad draft.kind '%s', vocab.mode '%s', vocab.stream '%s' or vocab.lm_head '%s'", cfg->source,
                     cfg->draft.kind, cfg->vocab.mode, cfg->vocab.stream, cfg->vocab.lm_head);
        return false;
    }
    o->model_dir = o->kind == MS_DRAFT_LAYERSKIP ? cfg->target.model : cfg->draft.model;
    o->target_dir = cfg->target.model;
    o->layers = cfg->draft.layers;
    o->vocab_list = cfg->vocab.list[0] ? cfg->vocab.list : NULL;
    o->w_max = cfg->vocab.w_max;
    o->vocab_artifact = cfg->vocab.artifact[0] ? cfg->vocab.artifact : NULL;
    o->specvocab_k = cfg->vocab.specvocab_k;
    o->budget_decay = cfg->vocab.budget_decay;
    o->budget_min = cfg->vocab.budget_min;
    o->dynaspec_clusters = cfg->vocab.dynaspec_clusters;
    o->dynaspec_decay = cfg->vocab.dynaspec_decay;
    o->dynaspec_min = cfg->vocab.dynaspec_min;
    o->tree.top_k = cfg->tree.top_k;
    o->tree.depth = cfg->tree.depth;
    o->tree.total = cfg->tree.total;
    o->tree.chain = cfg->tree.chain;
    o->tree.p_min = (float)cfg->draft.p_min;
    o->adaptive = cfg->draft.adaptive;
    o->max_ctx = cfg->draft.max_ctx;
    /* lm / layerskip models run on draft.device; an EAGLE head is CPU-only
     * (draft.device then only selects the feature transport below) */
    if (o->kind != MS_DRAFT_EAGLE) o->device = cfg->draft.device;
    else if (strcmp(cfg->draft.device, "cpu")) MS_LOG_INFO("draft: the eagle head runs on the CPU (draft.device %s)", cfg->draft.device);
    return true;
}

/* The fingerprints the hello carries, then the model. */
static ms_status load_draft(const ms_cfg *cfg, const ms_dft_opts *o, char model_fp[17], char tok_fp[17], ms_dft **dft) {
    char *model_cfg = ms_path_join(o->model_dir, "config.json");
    if (!model_cfg) return MS_ERR_NOMEM;
    ms_status st = ms_gguf_is_gguf(o->model_dir) ? ms_link_fingerprint_gguf_model(o->model_dir, model_fp)
                                                 : ms_link_fingerprint_file(model_cfg, model_fp);
    free(model_cfg);
    if (st < 0) return st;
    /* An EAGLE head has no tokenizer of its own: it uses the target's. */
    st = ms_link_fingerprint_tokenizer(o->kind == MS_DRAFT_LM ? cfg->draft.model : cfg->target.model, tok_fp);
    if (st < 0 || (st = ms_dft_new(o, dft)) < 0) return st;
    ms_cfg_log(cfg); /* after the model: a failed load's reason is not buried under the settings */
    return MS_OK;
}

static ms_status connect_link(const ms_cfg *cfg, const char *secret_path, ms_link **link) {
    ms_link_opts lo = {.endpoint = cfg->link.endpoint,
                       .deadline_ms = (int)cfg->link.deadline_ms,
                       .heartbeat_ms = (int)cfg->link.heartbeat_ms,
                       .max_message_bytes = cfg->link.max_message_bytes,
                       .curve = cfg->link.curve.enabled,
                       .server_public = cfg->link.curve.server_public,
                       .client_public = cfg->link.curve.client_public,
                       .client_secret = cfg->link.curve.client_secret,
                       .secret_file = secret_path ? secret_path : cfg->link.secret_file};
    return ms_link_connect(&lo, link);
}

typedef struct {
    ms_link *link;
    ms_draft_port port;
    ms_dft *dft;
    bool overlap; /* pre-draft the next round while the target verifies */
    bool joined;  /* the target accepted our hello and has not forgotten us since */
    char last_error[2][MS_WIRE_MESSAGE_MAX + 1]; /* the last two distinct error replies */
} node;

/* The hello this draft announces itself with; for eagle also the device
 * transport it offers for the target's features (link.tensor, *xfer). */
static ms_status make_hello(const ms_cfg *cfg, const node *n, ms_draft_kind kind, const char *model_fp,
                            const char *tok_fp, ms_xfer **xfer, ms_wire_msg *hello) {
    *hello = (ms_wire_msg){.type = MS_WIRE_HELLO};
    ms_wire_hello *h = &hello->u.hello;
    h->role = MS_WIRE_ROLE_DRAFT;
    snprintf(h->model_fp, sizeof h->model_fp, "%s", model_fp);
    snprintf(h->tok_fp, sizeof h->tok_fp, "%s", tok_fp);
    snprintf(h->kind, sizeof h->kind, "%s", ms_draft_kind_name(kind));
    h->vocab = ms_dft_vocab(n->dft);
    h->hidden = ms_dft_hidden(n->dft);
    h->wants_features = n->port.wants_features;
    h->pid = (int64_t)getpid();
    if (!n->port.wants_features) return MS_OK;
    /* The head takes host f32 today, so a GPU transport downloads them. */
    ms_xfer_opts xo = {.device = strncmp(cfg->draft.device, "cuda:", 5) ? -1 : atoi(cfg->draft.device + 5),
                       .max_rows = MS_TREE_MAX,
                       .feat_dim = ms_dft_hidden(n->dft),
                       .dtype = MS_DTYPE_F32,
                       .deadline_ms = (int)cfg->link.deadline_ms};
    if (!ms_xfer_kind_parse(cfg->link.tensor, &xo.policy)) return MS_ERR_INVALID;
    ms_status st = ms_xfer_new(&xo, true, xfer);
    if (st < 0) return st;
    ms_link_set_xfer(n->link, *xfer);
    h->xfer = ms_xfer_local(*xfer).wire;
    return MS_OK;
}

static void reply_error(node *n, uint64_t rid, int64_t round, ms_status code, const char *what) {
    ms_wire_msg e = {.type = MS_WIRE_ERROR, .request_id = rid, .round = round};
    e.u.error.code = code;
    snprintf(e.u.error.message, sizeof e.u.error.message, "draft %s failed: %s (see the draft node's log)", what,
             ms_status_str(code));
    if (ms_link_send(n->link, &e) < 0) MS_LOG_WARN("could not deliver the error reply");
}

/* Overlap: pre-draft the next round now, while the target verifies. */
static void predraft(node *n) {
    if (n->overlap && ms_dft_predraft(n->dft) < 0) MS_LOG_DEBUG("no pre-draft this round");
}

/* Draft round `round` of request rid and send the tree. */
static void draft_and_send(node *n, uint64_t rid, int64_t round) {
    ms_wire_msg t = {.type = MS_WIRE_TREE, .request_id = rid, .round = round};
    ms_status s = n->port.draft(n->port.ctx, rid, round, &t.u.tree);
    if (s < 0) {
        reply_error(n, rid, round, s, "tree");
        return;
    }
    if (ms_link_send(n->link, &t) < 0) MS_LOG_WARN("request %llu: tree %lld not delivered", (unsigned long long)rid, (long long)round);
}

/* ---- one handler per message from the target ---------------------------------- */

/* False: the target refused this draft (the node stops). */
static bool on_ack(node *n, const ms_wire_msg *m, const char *endpoint) {
    if (!m->u.ack.accepted) {
        MS_LOG_ERROR("the target refused this draft: %s", m->u.ack.reason);
        return false;
    }
    if (!n->joined) MS_LOG_INFO("joined the target at %s", endpoint);
    n->joined = true;
    n->last_error[0][0] = n->last_error[1][0] = 0;
    return true;
}

static void on_begin(node *n, const ms_wire_msg *m) {
    ms_status s = n->port.begin(n->port.ctx, &m->u.begin);
    if (s < 0) {
        reply_error(n, m->request_id, 0, s, "begin");
        return;
    }
    draft_and_send(n, m->request_id, 1);
    predraft(n);
}

static void on_verify(node *n, const ms_wire_msg *m) {
    bool hit = false;
    ms_wire_msg t = {.type = MS_WIRE_TREE, .request_id = m->request_id, .round = m->round + 1};
    ms_status s = n->overlap ? ms_dft_accept_overlap(n->dft, &m->u.verify, &hit, &t.u.tree)
                             : n->port.accept(n->port.ctx, &m->u.verify);
    if (s < 0) {
        reply_error(n, m->request_id, m->round, s, "accept");
        return;
    }
    if (hit) {
        if (ms_link_send(n->link, &t) < 0) MS_LOG_WARN("request %llu: tree not delivered", (unsigned long long)m->request_id);
    } else {
        draft_and_send(n, m->request_id, m->round + 1);
    }
    predraft(n);
}

/* end or cancel: the request is over. */
static void on_end(node *n, const ms_wire_msg *m) {
    n->port.end(n->port.ctx, m->request_id);
    if (n->overlap) {
        int64_t hits, misses;
        ms_dft_overlap_counts(n->dft, &hits, &misses);
        MS_LOG_INFO("request %llu over; pre-drafts so far: %lld confirmed, %lld dropped",
                    (unsigned long long)m->request_id, (long long)hits, (long long)misses);
    }
}

static void on_error(node *n, const ms_wire_msg *m) {
    /* Refusals repeat while we wait (another draft is in place: that and
     * "not connected" for our heartbeats): a line per new message. */
    bool seen = !strcmp(m->u.error.message, n->last_error[0]) || !strcmp(m->u.error.message, n->last_error[1]);
    ms_log_msg(seen ? MS_LOG_DEBUG : MS_LOG_WARN, __FILE__, __LINE__, "the target reports %s: %s",
               ms_status_str(m->u.error.code), m->u.error.message);
    if (!seen) {
        memcpy(n->last_error[1], n->last_error[0], sizeof n->last_error[0]);
        snprintf(n->last_error[0], sizeof n->last_error[0], "%s", m->u.error.message);
    }
    if (m->u.error.code == MS_ERR_PEER) n->joined = false; /* it does not know us: announce again */
}

/* Announce, then serve the target's messages until a signal (0) or a link
 * failure or refusal (1). */
static int serve(node *n, const ms_cfg *cfg, const ms_wire_msg *hello) {
    uint64_t next_hello = 0;
    const uint64_t reconnect_ns = (uint64_t)(cfg->link.reconnect_ms > 0 ? cfg->link.reconnect_ms : 500) * 1000000ull;
    while (!g_stop) {
        if (!n->joined && ms_now_ns() >= next_hello) {
            if (ms_link_send(n->link, hello) < 0) MS_LOG_DEBUG("hello not sent yet");
            next_hello = ms_now_ns() + reconnect_ns;
        }
        ms_wire_msg m;
        ms_status s = ms_link_recv(n->link, (int)cfg->link.heartbeat_ms, &m);
        if (s == MS_ERR_TIMEOUT || s == MS_ERR_FORMAT) {
            if (n->joined && !ms_link_peer_alive(n->link)) {
                MS_LOG_WARN("the target went silent; announcing again");
                n->joined = false;
            }
            continue;
        }
        if (s < 0) break;
        switch (m.type) {
        case MS_WIRE_HELLO_ACK:
            if (!on_ack(n, &m, cfg->link.endpoint)) return 1;
            break;
        case MS_WIRE_BEGIN: on_begin(n, &m); break;
        case MS_WIRE_VERIFY: on_verify(n, &m); break;
        case MS_WIRE_END:
        case MS_WIRE_CANCEL: on_end(n, &m); break;
        case MS_WIRE_ERROR: on_error(n, &m); break;
        default: MS_LOG_WARN("ignored an unexpected %s from the target", ms_wire_type_name(m.type)); break;
        }
    }
    MS_LOG_INFO("stopping");
    return g_stop ? 0 : 1;
}

int main(int argc, char **argv) {
    ms_k_cpu_fix_blas_core(argv);
    ms_log_set_role("draft");
    const char *cfg_path = NULL, *secret_path = NULL;
    int rc = ms_cfg_node_args("microspec-draft", argc, argv, usage, &cfg_path, &secret_path);
    if (rc >= 0) return rc;
    ms_cfg cfg;
    ms_dft_opts o;
    if (!load_config(cfg_path, &cfg) || !draft_opts(&cfg, &o)) return 2;
    /* the folders this kind reads: its own model (layerskip: the target's), the
     * target's for the tokenizer of a layerskip/eagle draft */
    if (!ms_cfg_path_ok(o.kind == MS_DRAFT_LAYERSKIP ? "target.model" : "draft.model", o.model_dir) ||
        (o.kind != MS_DRAFT_LM && !ms_cfg_path_ok("target.model", cfg.target.model)))
        return 1;

    rc = 1;
    ms_dft *dft = NULL;
    ms_link *link = NULL;
    ms_xfer *xfer = NULL;
    char tok_fp[17], model_fp[17];
    if (load_draft(&cfg, &o, model_fp, tok_fp, &dft) < 0 || connect_link(&cfg, secret_path, &link) < 0) goto done;

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);

    node n = {.link = link, .port = ms_dft_port(dft), .dft = dft, .overlap = !strcmp(cfg.pipeline, "overlap")};
    if (n.overlap && o.kind == MS_DRAFT_EAGLE) {
        MS_LOG_WARN("pipeline overlap needs the target's features of the path it bets on: eagle drafts run sync");
        n.overlap = false;
    }
    MS_LOG_INFO("pipeline %s", n.overlap ? "overlap" : "sync");
    ms_wire_msg hello;
    if (make_hello(&cfg, &n, o.kind, model_fp, tok_fp, &xfer, &hello) < 0) goto done;
    rc = serve(&n, &cfg, &hello);
done:
    ms_link_close(&link);
    ms_xfer_free(&xfer);
    ms_dft_free(&dft);
    return rc;
}
