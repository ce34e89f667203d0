/* microspec-record — record a draft model's states teacher-forced over corpus
 * text, the training data of the DynaSpec router (issue 16,
 * tools/vocab/dynaspec_train.py; draft-node/ms_dynaspec.h).
 *
 * Each corpus file is tokenised with the model's own tokenizer (a prefix of
 * the file: about 16 bytes per wanted position, cut at a line break) and cut
 * into windows of W tokens (BOS first where the model adds one); each window
 * is one forward from an empty cache. For window position t the record holds
 *     tok  = x_t                                the router's token input
 *     top  = the full head's L best ids at t    (descending logit; the target
 *                                                 is the clusters holding them)
 *     prev = h_{t-1}, the final-norm hidden state of position t-1
 *            (zeros at t = 0 of a window)       the router's state input
 * so the router sees [e(x_t), h_{t-1}] and learns the clusters of
 * top-L(head(h_t)), as when drafting from x_t.
 *
 * --chains D records the deeper draft steps instead: at every S-th position
 * p of a window (--chain-every S) the draft continues greedily for D steps
 * from the corpus prefix, as a chain draft does, and step l = 1..D gives
 *     tok  = y_l, the head's argmax at the step before (y_1 from h_p)
 *     top  = the head's top-L ids after y_l
 *     prev = the hidden state the step before (h_p, then the chain's own)
 * so the router also learns the states it meets below the root, where its
 * token input is the draft's own guess. Records come in chains of D, in
 * order; the header says D (0: windows as above).
 *
 * --layers N records a layerskip draft: the model's first N layers, its
 * final norm and head (draft.kind = "layerskip"); the sha256 is the file's.
 *
 * File format (little-endian), read by tools/vocab/dynaspec_common.py:
 *   header, 128 bytes:
 *     [0, 8)    magic "MSDSREC1"
 *     [8, 24)   u32 version (1), u32 d, u32 L, u32 D (chain length; 0: windows)
 *     [24, 40)  u64 n (records), u64 V (the model's vocabulary)
 *     [40, 104) the model file's sha256, 64 lowercase hex chars
 *     [104,128) zeros
 *   then n records of 4 + 4·L + 4·d bytes: i32 tok, i32 top[L], f32 prev[d].
 * Written to FILE.tmp and renamed when complete.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_dynaspec.h"
#include "ms_gguf.h"
#include "ms_model.h"
#include "ms_tokenizer.h"

#define TOOL "microspec-record"

enum { REC_HEADER = 128 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: " TOOL " --model DRAFT.gguf --out FILE [options] CORPUS_FILE...\n"
            "\n"
            "Runs the draft model teacher-forced over the corpus files (windows of W\n"
            "tokens) and writes, for each position t, the token x_t, the previous\n"
            "position's final-norm hidden state h_{t-1} (zeros at a window's start) and\n"
            "the full LM head's top-L ids at t: the DynaSpec router's inputs and targets\n"
            "(tools/vocab/dynaspec_train.py). The format is described at the top of\n"
            "tools/vocab/microspec_record.c. Use ../shared/corpus only: never the evaluation\n"
            "prompts (Spec-Bench, HumanEval). Progress goes to stderr.\n"
            "\n"
            "  -m, --model FILE         the draft model (GGUF)\n"
            "  -o, --out FILE           output records\n"
            "  -n, --max-positions N    at most N records, shared evenly by the files (default 40000)\n"
            "  -w, --window W           tokens a window (default 512)\n"
            "  -L, --top L              ids of the head's top-L kept a position (default 8)\n"
            "      --chains D           record greedy draft chains of D steps (deeper draft\n"
            "                           steps) instead of every window position\n"
            "      --chain-every S      a chain from every S-th window position (default 16)\n"
            "      --layers N           a layerskip draft: the model's first N layers only\n"
            "      --threads T          CPU threads (default: all cores)\n"
            "      --exact              f32 activations (default: 8-bit activations, as the draft runs)\n"
            "  -h, --help               this text\n");
}

typedef struct {
    ms_model *m;
    const ms_tok *tok;
    FILE *f;
    const char *out;
    int64_t W, L, d, V;
    int64_t chains, every; /* --chains D (0: windows), --chain-every S */
    float *logits; /* [W, V] */
    int32_t *top;  /* [L] */
    float *val;    /* [L] */
    float *zero;   /* [d] */
    float *state;  /* [d] a chain's state of the step before */
    int64_t n;     /* records written */
} recorder;

static ms_status write_rec(recorder *r, int32_t tok, const float *prev) {
    if (fwrite(&tok, sizeof tok, 1, r->f) != 1 || fwrite(r->top, sizeof *r->top, (size_t)r->L, r->f) != (size_t)r->L ||
        fwrite(prev, sizeof *prev, (size_t)r->d, r->f) != (size_t)r->d)
        MS_FAIL(MS_ERR_IO, "%s: write failed: %s", r->out, strerror(errno));
    r->n++;
    return MS_OK;
}

/* One window: forward ids[0, n) from an empty cache, record every position. */
static ms_status record_window(recorder *r, const int32_t *ids, int64_t n) {
    ms_model_reset(r->m);
    MS_TRY(ms_model_forward(r->m, ids, n, NULL, NULL, MS_LOGITS_ALL, r->logits));
    const float *hid = ms_model_hidden(r->m); /* [n, d] */
    for (int64_t t = 0; t < n; t++) {
        ms_k_topk(r->logits + t * r->V, r->V, r->L, r->top, r->val);
        MS_TRY(write_rec(r, ids[t], t ? hid + (t - 1) * r->d : r->zero));
    }
    return MS_OK;
}

/* One window as chains: from every S-th position p, D greedy draft steps.
 * The cache holds ids[0, p] when a chain starts; each chain is cut off again
 * before the window moves on to the next p. */
static ms_status record_chains(recorder *r, const int32_t *ids, int64_t n) {
    const int64_t d = r->d;
    float *prev = r->state;
    ms_model_reset(r->m);
    int64_t len = 0; /* corpus positions in the cache */
    for (int64_t p = r->every - 1; p < n; p += r->every) {
        const int64_t k = p + 1 - len;
        MS_TRY(ms_model_forward(r->m, ids + len, k, NULL, NULL, MS_LOGITS_LAST, r->logits));
        memcpy(prev, ms_model_hidden(r->m) + (k - 1) * d, (size_t)d * sizeof *prev); /* h_p */
        len = p + 1;
        for (int64_t l = 0; l < r->chains; l++) {
            const int32_t y = ms_k_argmax(r->logits, r->V); /* the draft's greedy guess */
            MS_TRY(ms_model_forward(r->m, &y, 1, NULL, NULL, MS_LOGITS_LAST, r->logits));
            ms_k_topk(r->logits, r->V, r->L, r->top, r->val);
            MS_TRY(write_rec(r, y, prev));
            memcpy(prev, ms_model_hidden(r->m), (size_t)d * sizeof *prev);
        }
        MS_TRY(ms_model_truncate(r->m, len));
    }
    return MS_OK;
}

/* Up to `quota` records from a prefix of `path`. */
static ms_status record_file(recorder *r, const char *path, int64_t quota) {
    FILE *f = fopen(path, "rb");
    if (!f) MS_FAIL(MS_ERR_IO, "%s: %s", path, strerror(errno));
    size_t want = (size_t)quota * 16 + 4096;
    char *buf = ms_malloc(want + 1);
    if (!buf) {
        fclose(f);
        return MS_ERR_NOMEM;
    }
    size_t len = fread(buf, 1, want, f);
    bool short_read = len < want;
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        MS_FAIL(MS_ERR_IO, "%s: read error", path);
    }
    if (!short_read) /* cut at the last line break, so no word is split */
        while (len > 0 && buf[len - 1] != '\n') len--;
    ms_ids ids = {0};
    ms_status st = ms_tok_encode(r->tok, buf, len, false, &ids);
    free(buf);
    int32_t *win = st == MS_OK ? ms_malloc((size_t)r->W * sizeof(int32_t)) : NULL;
    if (st == MS_OK && !win) st = MS_ERR_NOMEM;
    int32_t bos = ms_tok_add_bos(r->tok) ? ms_tok_bos(r->tok) : -1;
    int64_t at = 0, got = 0, n0 = r->n;
    double t0 = ms_now_s();
    while (st == MS_OK && got < quota && at < ids.n) {
        /* tokens this window may take: chains give D records per S tokens */
        const int64_t room = r->chains ? (quota - got) / r->chains * r->every : quota - got;
        int64_t k = 0;
        if (bos >= 0) win[k++] = bos;
        while (k < r->W && at < ids.n && k < room) win[k++] = ids.v[at++];
        if (k < (r->chains ? r->every : 2)) break;
        for (int64_t i = 0; i < k; i++)
            if (win[i] < 0 || win[i] >= r->V) {
                ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "%s: token id %d outside the model's [0, %lld)", path,
                           win[i], (long long)r->V);
                st = MS_ERR_RANGE;
            }
        if (st == MS_OK) st = r->chains ? record_chains(r, win, k) : record_window(r, win, k);
        got = r->n - n0;
        fprintf(stderr, TOOL ": %s: %lld / %lld positions (%.1f s)\n", path, (long long)got,
                (long long)quota, ms_now_s() - t0);
    }
    if (st == MS_OK && got < quota)
        fprintf(stderr, TOOL ": %s: the file gave only %lld of %lld positions\n", path, (long long)got,
                (long long)quota);
    free(win);
    ms_ids_free(&ids);
    return st;
}

static ms_status write_header(recorder *r, const char *sha) {
    uint8_t h[REC_HEADER] = {0};
    uint32_t u32[4] = {1, (uint32_t)r->d, (uint32_t)r->L, (uint32_t)r->chains};
    uint64_t u64[2] = {(uint64_t)r->n, (uint64_t)r->V};
    memcpy(h, "MSDSREC1", 8);
    memcpy(h + 8, u32, sizeof u32); /* the machines we run on are little-endian (as GGUF assumes) */
    memcpy(h + 24, u64, sizeof u64);
    memcpy(h + 40, sha, 64);
    if (fseek(r->f, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof h, r->f) != sizeof h)
        MS_FAIL(MS_ERR_IO, "%s: write failed: %s", r->out, strerror(errno));
    return MS_OK;
}

/* ---- main ------------------------------------------------------------------ */

typedef struct {
    const char *model_path, *out;
    int64_t max_pos, W, L, threads, chains, every, layers;
    int exact;
} rec_args;

enum { O_THREADS = 256, O_EXACT, O_CHAINS, O_EVERY, O_LAYERS };
static const struct option opts[] = {
    {"model", required_argument, NULL, 'm'},   {"out", required_argument, NULL, 'o'},
    {"max-positions", required_argument, NULL, 'n'}, {"window", required_argument, NULL, 'w'},
    {"top", required_argument, NULL, 'L'},     {"threads", required_argument, NULL, O_THREADS},
    {"exact", no_argument, NULL, O_EXACT},     {"help", no_argument, NULL, 'h'},
    {"chains", required_argument, NULL, O_CHAINS}, {"chain-every", required_argument, NULL, O_EVERY},
    {"layers", required_argument, NULL, O_LAYERS},
    {NULL, 0, NULL, 0},
};

/* One option into *a: 1 ok, 0 a bad value (after a message), -1 not an option. */
static int apply_opt(int c, const char *v, rec_args *a) {
    switch (c) {
    case 'm': a->model_path = v; return 1;
    case 'o': a->out = v; return 1;
    case 'n': return ms_cli_i64(TOOL, "--max-positions", v, 1, INT64_C(1) << 40, &a->max_pos);
    case 'w': return ms_cli_i64(TOOL, "--window", v, 2, 4096, &a->W);
    case 'L': return ms_cli_i64(TOOL, "--top", v, 1, 256, &a->L);
    case O_THREADS: return ms_cli_i64(TOOL, "--threads", v, 1, 1024, &a->threads);
    case O_EXACT: a->exact = 1; return 1;
    case O_CHAINS: return ms_cli_i64(TOOL, "--chains", v, 1, 64, &a->chains);
    case O_EVERY: return ms_cli_i64(TOOL, "--chain-every", v, 1, 4096, &a->every);
    case O_LAYERS: return ms_cli_i64(TOOL, "--layers", v, 1, 1024, &a->layers);
    default: return -1;
    }
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, rec_args *a) {
    *a = (rec_args){.max_pos = 40000, .W = 512, .L = 8, .every = 16};
    int c;
    while ((c = getopt_long(argc, argv, "m:o:n:w:L:h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        int ok = apply_opt(c, optarg, a);
        if (ok < 0) usage(stderr);
        if (ok <= 0) return 2;
    }
    if (!a->model_path || !a->out || optind >= argc) {
        fprintf(stderr, TOOL ": --model, --out and at least one corpus file are required\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* The model (hashed into sha) and its tokenizer, the buffers, OUT.tmp open
 * for writing (*tmp its name). */
static ms_status recorder_open(const rec_args *a, recorder *r, char sha[65], ms_tok **tok, ms_model **m,
                               char **tmp) {
    if (a->chains && (a->every >= a->W || a->chains > a->every)) {
        /* chains ≤ every: a window's records ≤ its tokens (quota) */
        fprintf(stderr, TOOL ": --chains %lld with --chain-every %lld: need chains ≤ every < the window %lld\n",
                (long long)a->chains, (long long)a->every, (long long)a->W);
        return MS_ERR_INVALID;
    }
    if (!ms_gguf_is_gguf(a->model_path)) {
        fprintf(stderr, TOOL ": %s is not a GGUF model file\n", a->model_path);
        return MS_ERR_FORMAT;
    }
    MS_TRY(ms_sha256_file(a->model_path, sha));
    MS_TRY(ms_tok_load_path(a->model_path, tok));
    ms_model_opts mo = {.max_ctx = a->W + a->chains, .max_batch = a->W, .q8_matmul = !a->exact, .n_layers = a->layers};
    MS_TRY(ms_model_load(a->model_path, &mo, m));
    r->m = *m;
    r->tok = *tok;
    r->d = ms_model_config(*m)->hidden_size;
    r->V = ms_model_vocab(*m);
    if (a->L > r->V) {
        fprintf(stderr, TOOL ": --top %lld exceeds the vocabulary %lld\n", (long long)a->L, (long long)r->V);
        return MS_ERR_RANGE;
    }
    size_t nlog;
    if (!ms_mul_size((size_t)a->W, (size_t)r->V, &nlog) || !ms_mul_size(nlog, sizeof(float), &nlog))
        return MS_ERR_RANGE;
    r->logits = ms_malloc(nlog);
    r->top = ms_malloc((size_t)a->L * sizeof(int32_t));
    r->val = ms_malloc((size_t)a->L * sizeof(float));
    r->zero = ms_calloc((size_t)r->d, sizeof(float));
    r->state = ms_malloc((size_t)r->d * sizeof(float));
    size_t tl = strlen(a->out) + 5;
    *tmp = ms_malloc(tl);
    if (!r->logits || !r->top || !r->val || !r->zero || !r->state || !*tmp) return MS_ERR_NOMEM;
    snprintf(*tmp, tl, "%s.tmp", a->out);
    r->f = fopen(*tmp, "wb");
    if (!r->f) {
        fprintf(stderr, TOOL ": %s: %s\n", *tmp, strerror(errno));
        return MS_ERR_IO;
    }
    return MS_OK;
}

/* Record the corpus files into OUT.tmp, then rename it to OUT. */
static ms_status record_all(const rec_args *a, recorder *r, const char *sha, const char *tmp, char **files,
                            int nfiles) {
    fprintf(stderr, TOOL ": %s (sha256 %.16s…): V %lld, d %lld; %lld %s in windows of %lld, top-%lld\n",
            a->model_path, sha, (long long)r->V, (long long)r->d, (long long)a->max_pos,
            a->chains ? "chain steps" : "positions", (long long)a->W, (long long)a->L);
    if (a->layers) fprintf(stderr, TOOL ": layerskip draft: the first %lld layers\n", (long long)a->layers);
    if (a->chains)
        fprintf(stderr, TOOL ": chains of %lld greedy draft steps from every %lld-th position\n",
                (long long)a->chains, (long long)a->every);
    MS_TRY(write_header(r, sha));
    for (int i = 0; i < nfiles; i++) {
        int64_t quota = (a->max_pos - r->n) / (nfiles - i); /* what earlier files did not give goes to later ones */
        if (quota > 0) MS_TRY(record_file(r, files[i], quota));
    }
    MS_TRY(write_header(r, sha));
    int closed = fclose(r->f);
    r->f = NULL;
    if (closed != 0) {
        fprintf(stderr, TOOL ": %s: %s\n", tmp, strerror(errno));
        return MS_ERR_IO;
    }
    if (rename(tmp, a->out) != 0) {
        fprintf(stderr, TOOL ": rename %s → %s: %s\n", tmp, a->out, strerror(errno));
        return MS_ERR_IO;
    }
    fprintf(stderr, TOOL ": wrote %lld records to %s\n", (long long)r->n, a->out);
    return MS_OK;
}

int main(int argc, char **argv) {
    ms_k_cpu_fix_blas_core(argv);
    ms_log_set_role("record");
    rec_args a;
    int code = parse_args(argc, argv, &a);
    if (code >= 0) return code;
    ms_k_cpu_set_threads(a.threads > 0 ? (int)a.threads : ms_k_cpu_cores());

    char sha[65];
    char *tmp = NULL;
    ms_tok *tok = NULL;
    ms_model *m = NULL;
    recorder r = {.out = a.out, .W = a.W, .L = a.L, .chains = a.chains, .every = a.every};
    int rc = 1;
    if (recorder_open(&a, &r, sha, &tok, &m, &tmp) == MS_OK &&
        record_all(&a, &r, sha, tmp, argv + optind, argc - optind) == MS_OK)
        rc = 0;
    if (r.f) {
        fclose(r.f);
        remove(tmp);
    }
    free(tmp);
    free(r.logits);
    free(r.top);
    free(r.val);
    free(r.zero);
    free(r.state);
    ms_model_free(&m);
    ms_tok_free(&tok);
    return rc;
}
