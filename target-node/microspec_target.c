/* microspec-target — the target node: serves the OpenAI-compatible HTTP API,
 * verifies the draft node's trees, and finishes alone whenever the draft is
 * gone, slow or wrong (docs/architecture.md §4, §7). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ms_config.h"
#include "ms_http.h"
#include "ms_isa.h"
#include "ms_link.h"
#include "ms_remote.h"
#include "ms_target.h"
#include "ms_tokenizer.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

enum { DRAFT_DISABLED = 0, DRAFT_DOWN, DRAFT_UP };

typedef struct {
    ms_cfg cfg;
    ms_tok *tok;
    ms_model *model;
    ms_tgt *tgt;
    ms_link *link;
    ms_xfer *xfer; /* eagle: how the features reach the draft (link.tensor) */
    ms_remote *remote;
    char tok_fp[17];
    int64_t V, d;
    pthread_mutex_t mu; /* the link, the remote port and the target model */
    atomic_int draft_state;
    atomic_bool busy;
    atomic_llong draft_joins, draft_failures, next_rid;
    pthread_t pump;
    bool pump_running;
    atomic_bool stop_pump;
    /* link cost per round over all requests (ms_gen_stats.link_us), under mu */
    float *link_us;
    int64_t n_link;
} server;

#define LINK_SAMPLES_MAX 65536

static void usage(FILE *f) {
    fprintf(f,
            "usage: microspec-target --config FILE\n"
            "\n"
            "The target node of a MicroSpec cluster: loads the target model, listens for the\n"
            "draft node on the link endpoint and serves /v1/completions, /v1/chat/completions,\n"
            "/health and /metrics over HTTP. Output is always the target's own: without a\n"
            "draft (or when it fails) requests are decoded autoregressively. Runs until\n"
            "SIGINT/SIGTERM. Logs go to stderr.\n"
            "\n"
            "  -c, --config FILE   cluster configuration (libconfig; see cluster/configs/)\n"
            "  --link-secret FILE  the link secret (overrides link.secret_file; cluster/launch.sh\n"
            "                      passes the one it makes for the cluster)\n"
            "  -h, --help          this text\n");
}

/* ---- the draft's hello ------------------------------------------------------ */

/* Called with s->mu held. */
static void on_hello(void *ctx, const ms_wire_hello *h) {
    server *s = ctx;
    if (ms_link_last_is_peer(s->link) && atomic_load(&s->draft_state) == DRAFT_UP) {
        /* The accepted draft announcing again (it queued hellos before we
         * listened, or thought we went silent): answer, count nothing. */
        if (ms_link_accept_peer(s->link, true, "") < 0) MS_LOG_DEBUG("re-acknowledgement not delivered");
        return;
    }
    char why[256] = "";
    if (h->role != MS_WIRE_ROLE_DRAFT) snprintf(why, sizeof why, "only a draft may join");
    else if (strcmp(h->tok_fp, s->tok_fp) != 0)
        snprintf(why, sizeof why, "tokenizer fingerprint %s differs from the target's %s", h->tok_fp, s->tok_fp);
    else if (h->vocab != s->V)
        snprintf(why, sizeof why, "vocabulary %lld differs from the target's %lld", (long long)h->vocab, (long long)s->V);
    else if (h->wants_features && h->hidden != s->d)
        snprintf(why, sizeof why, "feature width %lld differs from the target's hidden size %lld", (long long)h->hidden,
                 (long long)s->d);
    bool ok = why[0] == 0;
    if (ms_link_accept_peer(s->link, ok, why) < 0) ok = false;
    if (ok) {
        atomic_store(&s->draft_state, DRAFT_UP);
        atomic_fetch_add(&s->draft_joins, 1);
        MS_LOG_INFO("draft joined: kind %s, pid %lld, model %s", h->kind, (long long)h->pid, h->model_fp);
    } else {
        MS_LOG_WARN("refused a draft (pid %lld): %s", (long long)h->pid, why);
    }
}

/* While no request runs, keep the link serviced: hellos, heartbeats, liveness. */
static void *pump_main(void *arg) {
    server *s = arg;
    while (!atomic_load(&s->stop_pump)) {
        if (!atomic_load(&s->busy)) {
            pthread_mutex_lock(&s->mu);
            ms_wire_msg m;
            ms_status st = ms_link_recv(s->link, 20, &m);
            if (st >= 0) {
                if (m.type == MS_WIRE_HELLO) on_hello(s, &m.u.hello);
                else if (m.type == MS_WIRE_ERROR)
                    MS_LOG_WARN("draft reports %s: %s", ms_status_str(m.u.error.code), m.u.error.message);
                else
                    MS_LOG_DEBUG("idle: dropped a %s from the draft (request %llu)", ms_wire_type_name(m.type),
                                 (unsigned long long)m.request_id);
            }
            if (atomic_load(&s->draft_state) == DRAFT_UP && !ms_link_peer_alive(s->link)) {
                MS_LOG_WARN("draft silent for 3 heartbeats: marked down");
                ms_link_drop_peer(s->link);
                atomic_store(&s->draft_state, DRAFT_DOWN);
            }
            pthread_mutex_unlock(&s->mu);
        }
        usleep(2000); /* let a request take the mutex */
    }
    return NULL;
}

/* ---- the HTTP backend -------------------------------------------------------- */

typedef struct {
    const ms_tok *tok;
    ms_tok_decoder dec;
    bool (*emit)(void *ectx, const char *text, size_t n);
    void *ectx;
} relay;

static bool relay_tokens(void *ctx, const int32_t *ids, int64_t n) {
    relay *r = ctx;
    char buf[512];
    for (int64_t i = 0; i < n; i++) {
        size_t len = 0;
        if (ids[i] >= ms_tok_vocab_size(r->tok)) {
            /* A padded LM-head row the tokenizer has no text for (Qwen pads
             * 151,669 ids to 151,936): shown as U+FFFD, generation goes on. */
            memcpy(buf, "\xEF\xBF\xBD", 3);
            len = 3;
        } else if (ms_tok_decode_next(r->tok, &r->dec, ids[i], true, buf, sizeof buf, &len) < 0) {
            return false;
        }
        if (len && !r->emit(r->ectx, buf, len)) return false;
    }
    return true;
}

static ms_status backend_run(void *ctx, const ms_http_request *req, bool (*emit)(void *, const char *, size_t),
                             void *ectx, ms_gen_stats *stats, char *finish, size_t cap, ms_http_error *err) {
    server *s = ctx;
    ms_ids ids = {0};
    char *rendered = NULL;
    ms_status st = MS_OK;
    if (req->chat) {
        ms_chat_kind kind = ms_tok_chat_kind(s->tok);
        if (kind == MS_CHAT_NONE) {
            /* No template: the turns joined as plain text, the way a completion would see them. */
            size_t total = 1;
            for (int64_t i = 0; i < req->n_messages; i++) total += strlen(req->messages[i].content) + 1;
            rendered = ms_malloc(total);
            if (!rendered) return MS_ERR_NOMEM;
            rendered[0] = 0;
            for (int64_t i = 0; i < req->n_messages; i++) {
                strcat(rendered, req->messages[i].content);
                if (i + 1 < req->n_messages) strcat(rendered, "\n");
            }
            if (ms_tok_add_bos(s->tok) && ms_tok_bos(s->tok) >= 0) MS_TRY_GOTO(st, ms_ids_push(&ids, ms_tok_bos(s->tok)), out);
            MS_TRY_GOTO(st, ms_tok_encode(s->tok, rendered, strlen(rendered), false, &ids), out);
        } else {
            MS_TRY_GOTO(st, ms_chat_render(kind, req->messages, req->n_messages, true, &rendered), out);
            MS_TRY_GOTO(st, ms_tok_encode(s->tok, rendered, strlen(rendered), true, &ids), out);
        }
    } else {
        if (ms_tok_add_bos(s->tok) && ms_tok_bos(s->tok) >= 0) MS_TRY_GOTO(st, ms_ids_push(&ids, ms_tok_bos(s->tok)), out);
        MS_TRY_GOTO(st, ms_tok_encode(s->tok, req->prompt, req->prompt_len, false, &ids), out);
    }

    /* The context must hold the prompt and at least one new token: a client
     * error, answered like OpenAI's (400, context_length_exceeded). */
    int64_t n_ctx = ms_model_max_ctx(s->model);
    if (ids.n >= n_ctx) {
        err->http_code = 400;
        snprintf(err->code, sizeof err->code, "context_length_exceeded");
        snprintf(err->param, sizeof err->param, "%s", req->chat ? "messages" : "prompt");
        snprintf(err->message, sizeof err->message,
                 "This model's maximum context length is %lld tokens. However, your %s resulted in %lld tokens, "
                 "which leaves no room for a completion.",
                 (long long)n_ctx, req->chat ? "messages" : "prompt", (long long)ids.n);
        st = MS_ERR_RANGE;
        goto out;
    }

    ms_gen_params gp = ms_gen_params_default();
    gp.max_new_tokens = req->max_tokens > 0 ? req->max_tokens : s->cfg.http.max_tokens_default;
    gp.sampling = (ms_k_sampling){.temperature = (float)req->temperature, .top_p = (float)req->top_p};
    gp.seed = req->has_seed ? req->seed : (uint64_t)ms_now_ns();
    gp.k_pre = s->cfg.vocab.k_pre;
    gp.k_ver = s->cfg.vocab.k_ver;
    gp.cost_policy = !strcmp(s->cfg.draft.policy, "cost");
    const int32_t *eos;
    int n_eos = ms_tok_eos(s->tok, &eos);
    for (int i = 0; i < n_eos && gp.n_stop < MS_MAX_STOP; i++) gp.stop_ids[gp.n_stop++] = eos[i];

    relay r = {.tok = s->tok, .emit = emit, .ectx = ectx};
    ms_tok_decoder_init(&r.dec);
    r.dec.prev_id = ids.n > 0 ? ids.v[ids.n - 1] : -1;

    atomic_store(&s->busy, true);
    pthread_mutex_lock(&s->mu);
    ms_draft_port port, *dp = NULL;
    if (s->link && atomic_load(&s->draft_state) == DRAFT_UP && ms_link_peer_alive(s->link)) {
        port = ms_remote_port(s->remote);
        port.free_part = strstr(s->cfg.draft.kind, "+ngram") != NULL; /* the draft node reads the same file */
        port.no_topk_pre = !strcmp(s->cfg.draft.kind, "ngram") || /* a window: "dynamic", "…+window" */
                           (strcmp(s->cfg.vocab.mode, "dynamic") != 0 && !strstr(s->cfg.vocab.mode, "+window"));
        dp = &port;
    }
    uint64_t rid = (uint64_t)atomic_fetch_add(&s->next_rid, 1) + 1;
    st = ms_tgt_generate(s->tgt, dp, rid, ids.v, ids.n, &gp, relay_tokens, &r, stats);
    for (int64_t i = 0; i < stats->n_link && s->link_us && s->n_link < LINK_SAMPLES_MAX; i++)
        s->link_us[s->n_link++] = stats->link_us[i];
    if (dp && stats->draft_failed) {
        ms_link_drop_peer(s->link);
        atomic_store(&s->draft_state, DRAFT_DOWN);
        atomic_fetch_add(&s->draft_failures, 1);
    }
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->busy, false);
    if (st >= 0) {
        char tail[16];
        size_t n = 0;
        ms_tok_decode_flush(&r.dec, tail, sizeof tail, &n);
        if (n) emit(ectx, tail, n);
    }
    const char *why = stats->stop_reason ? stats->stop_reason : "";
    snprintf(finish, cap, "%s", !strcmp(why, "max tokens") || !strcmp(why, "context full") ? "length" : "stop");
out:
    free(rendered);
    ms_ids_free(&ids);
    return st;
}

static void backend_health(void *ctx, json_t *obj) {
    server *s = ctx;
    int ds = atomic_load(&s->draft_state);
    json_object_set_new(obj, "draft", json_string(ds == DRAFT_UP ? "up" : ds == DRAFT_DOWN ? "down" : "disabled"));
    json_object_set_new(obj, "draft_kind", json_string(s->cfg.draft.enabled ? s->cfg.draft.kind : ""));
    json_object_set_new(obj, "vocab_mode", json_string(s->cfg.vocab.mode));
    json_object_set_new(obj, "pipeline", json_string(s->cfg.pipeline));
    json_object_set_new(obj, "cpu_kernels", json_string(ms_isa_name(ms_isa_active()))); /* ms_isa.h: MS_ISA caps it */
    json_object_set_new(obj, "draft_joins", json_integer(atomic_load(&s->draft_joins)));
    json_object_set_new(obj, "draft_failures", json_integer(atomic_load(&s->draft_failures)));
}

static void backend_metrics(void *ctx, FILE *out) {
    server *s = ctx;
    int ds = atomic_load(&s->draft_state);
    fprintf(out, "# HELP microspec_draft_up Whether a draft node is connected and healthy.\n");
    fprintf(out, "# TYPE microspec_draft_up gauge\nmicrospec_draft_up %d\n", ds == DRAFT_UP);
    fprintf(out, "# HELP microspec_draft_joins_total Draft nodes accepted since start.\n");
    fprintf(out, "# TYPE microspec_draft_joins_total counter\nmicrospec_draft_joins_total %lld\n",
            (long long)atomic_load(&s->draft_joins));
    pthread_mutex_lock(&s->mu);
    double med, p99, sum_us = 0;
    ms_quantiles(s->link_us, s->n_link, &med, &p99);
    for (int64_t i = 0; i < s->n_link; i++) sum_us += s->link_us[i];
    int64_t n = s->n_link;
    pthread_mutex_unlock(&s->mu);
    /* Prometheus conventions: base unit seconds, a summary with _sum and _count
     * (over the first LINK_SAMPLES_MAX rounds, which the quantiles describe). */
    fprintf(out, "# HELP microspec_link_round_seconds Link cost per speculative round: port time minus draft work.\n");
    fprintf(out, "# TYPE microspec_link_round_seconds summary\n");
    fprintf(out, "microspec_link_round_seconds{quantile=\"0.5\"} %.9f\n", med * 1e-6);
    fprintf(out, "microspec_link_round_seconds{quantile=\"0.99\"} %.9f\n", p99 * 1e-6);
    fprintf(out, "microspec_link_round_seconds_sum %.9f\nmicrospec_link_round_seconds_count %lld\n", sum_us * 1e-6,
            (long long)n);
    fprintf(out, "# HELP microspec_draft_failures_total Requests whose draft failed mid-way (finished alone).\n");
    fprintf(out, "# TYPE microspec_draft_failures_total counter\nmicrospec_draft_failures_total %lld\n",
            (long long)atomic_load(&s->draft_failures));
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    ms_k_cpu_fix_blas_core(argv);
    ms_log_set_role("target");
    const char *cfg_path = NULL, *secret_path = NULL;
    int arg_rc = ms_cfg_node_args("microspec-target", argc, argv, usage, &cfg_path, &secret_path);
    if (arg_rc >= 0) return arg_rc;
    static server s; /* large; and the signal handler's world */
    if (ms_cfg_load(cfg_path, &s.cfg) < 0) return 2;
    const ms_cfg *c = &s.cfg;
    ms_log_level lvl = MS_LOG_INFO;
    ms_log_level_parse(c->log.level, &lvl); /* the config loader allows only known names */
    if (!getenv("MS_LOG")) ms_log_set_level(lvl);
    if (c->log.dir[0] && ms_log_to_dir(c->log.dir, "target", NULL, 0) < 0) return 2;
    if (!ms_cfg_path_ok("target.model", c->target.model)) return 1;
    ms_k_cpu_set_threads(c->target.threads > 0 ? (int)c->target.threads : ms_k_cpu_cores()); /* 0: every core */
    pthread_mutex_init(&s.mu, NULL);
    s.link_us = ms_malloc(LINK_SAMPLES_MAX * sizeof *s.link_us);
    if (!s.link_us) return 1;
    atomic_store(&s.draft_state, c->draft.enabled ? DRAFT_DOWN : DRAFT_DISABLED);

    int rc = 1;
    ms_http *http = NULL;
    if (ms_tok_load_path(c->target.model, &s.tok) < 0 || ms_link_fingerprint_tokenizer(c->target.model, s.tok_fp) < 0) goto done;
    ms_model_opts mo = {.max_ctx = c->target.max_ctx,
                        .device = c->target.device, /* "cpu" | "cuda:N" */
                        .q8_matmul = c->target.q8_matmul};
    if (ms_model_load(c->target.model, &mo, &s.model) < 0 || ms_tgt_new(s.model, &s.tgt) < 0) goto done;
    if (c->draft.enabled)
        ms_tgt_cost_cache(s.tgt, c->target.model, c->target.threads > 0 ? (int)c->target.threads : ms_k_cpu_cores(),
                          c->target.q8_matmul, c->target.device);
    if (c->draft.enabled && !strcmp(c->draft.policy, "cost") && ms_tgt_warm_up(s.tgt) < 0) goto done;
    ms_cfg_log(c); /* after the model: a failed load's reason is not buried under the settings */
    s.V = ms_model_vocab(s.model);
    s.d = ms_model_config(s.model)->hidden_size;

    if (c->draft.enabled) {
        ms_link_opts lo = {.endpoint = c->link.endpoint,
                           .deadline_ms = (int)c->link.deadline_ms,
                           .heartbeat_ms = (int)c->link.heartbeat_ms,
                           .max_message_bytes = c->link.max_message_bytes,
                           .curve = c->link.curve.enabled,
                           .server_public = c->link.curve.server_public,
                           .server_secret = c->link.curve.server_secret,
                           .client_public = c->link.curve.client_public,
                           .secret_file = secret_path ? secret_path : c->link.secret_file};
        if (ms_link_bind(&lo, &s.link) < 0) goto done;
        if (!strncmp(c->draft.kind, "eagle", 5)) {
            /* The target's features are host f32 today: on a GPU the transport
             * uploads them (see ms_xfer.h). Rows per message: a verify path;
             * longer begin prompts go as host frames. */
            ms_xfer_opts xo = {.device = strncmp(c->target.device, "cuda:", 5) ? -1 : atoi(c->target.device + 5),
                               .max_rows = MS_TREE_MAX,
                               .feat_dim = s.d,
                               .dtype = MS_DTYPE_F32,
                               .deadline_ms = (int)c->link.deadline_ms};
            if (!ms_xfer_kind_parse(c->link.tensor, &xo.policy) || ms_xfer_new(&xo, false, &s.xfer) < 0) goto done;
            ms_link_set_xfer(s.link, s.xfer);
        }
        if (ms_remote_new(s.link, (int)c->link.deadline_ms, !strncmp(c->draft.kind, "eagle", 5), on_hello, &s, &s.remote) < 0)
            goto done;
        if (pthread_create(&s.pump, NULL, pump_main, &s) != 0) {
            MS_LOG_ERROR("cannot start the link thread");
            goto done;
        }
        s.pump_running = true;
    }

    ms_http_opts ho = {.listen = c->http.listen,
                       .port = (int)c->http.port,
                       .queue = (int)c->http.queue,
                       .bearer_token = c->http.bearer_token[0] ? c->http.bearer_token : NULL,
                       .max_tokens_default = (int)c->http.max_tokens_default,
                       .max_tokens_limit = (int)c->http.max_tokens_limit,
                       .model_name = "microspec",
                       .max_connections = (int)c->http.max_connections,
                       .header_timeout_s = (double)c->http.header_timeout_s,
                       .idle_timeout_s = (int)c->http.idle_timeout_s,
                       .request_timeout_s = (double)c->http.request_timeout_s,
                       .allowed_origins = c->http.allowed_origins,
                       .allowed_hosts = c->http.allowed_hosts};
    ms_http_backend hb = {.ctx = &s, .run = backend_run, .health = backend_health, .metrics = backend_metrics};
    if (ms_http_start(&ho, &hb, &http) < 0) goto done;
    MS_LOG_INFO("serving http://%s:%d (draft %s)", c->http.listen, ms_http_port(http),
                c->draft.enabled ? "expected on the link" : "disabled");

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    while (!g_stop) usleep(50000);
    MS_LOG_INFO("stopping");
    rc = 0;
done:
    ms_http_stop(&http);
    if (s.pump_running) {
        atomic_store(&s.stop_pump, true);
        pthread_join(s.pump, NULL);
    }
    if (s.n_link) {
        double med, p99;
        ms_quantiles(s.link_us, s.n_link, &med, &p99);
        MS_LOG_INFO("link cost per round: median %.1f us, p99 %.1f us over %lld rounds", med, p99, (long long)s.n_link);
    }
    free(s.link_us);
    ms_remote_free(&s.remote);
    ms_link_close(&s.link);
    ms_xfer_free(&s.xfer);
    ms_tgt_free(&s.tgt);
    ms_model_free(&s.model);
    ms_tok_free(&s.tok);
    return rc;
}
