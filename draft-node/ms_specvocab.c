/* ms_specvocab.c — the SpecVocab selector (ms_specvocab.h). */
#include "ms_specvocab.h"

#include <stdlib.h>
#include <string.h>

#include "ms_k_backend.h" /* ms_qweight, linear; ms_k_topk */

typedef struct {
    ms_gguf *g;
    int64_t V, d, rank, k, k_min, max_rows;
    double decay;
    ms_qweight down;  /* F32 [rank, d], in the artefact's mapping */
    ms_qweight vocab; /* [V, rank] */
    float *z;         /* [max_rows, rank] W_down · h per row */
    float *score;     /* [max_rows, V] approximate logits */
    int32_t *top;     /* [k] */
    float *top_val;   /* [k] */
    uint32_t *mark;   /* [V] union stamps */
    uint32_t epoch;
} specvocab;

static void sv_free(void *ctx) {
    specvocab *s = ctx;
    if (!s) return;
    ms_gguf_close(&s->g);
    free(s->z);
    free(s->score);
    free(s->top);
    free(s->top_val);
    free(s->mark);
    free(s);
}

static ms_status sv_pick(void *ctx, const float *hid, const float *prev, const int32_t *tok, int64_t n, int64_t depth,
                         int32_t *ids, int64_t cap, int64_t *n_ids) {
    specvocab *s = ctx;
    (void)prev;
    (void)tok;
    *n_ids = 0;
    if (n < 1 || n > s->max_rows)
        MS_FAIL(MS_ERR_RANGE, "specvocab: %lld rows outside [1, %lld]", (long long)n, (long long)s->max_rows);
    const ms_k_backend *be = ms_k_backend_cpu(); /* the selector runs on the host */
    const ms_k_ops *ops = ms_k_cpu_ops();
    be->linear(ops, s->z, hid, NULL, &s->down, NULL, NULL, n, s->d, s->rank);         /* z [n, d'] = h · W_downᵀ */
    be->linear(ops, s->score, s->z, NULL, &s->vocab, NULL, NULL, n, s->rank, s->V); /* s [n, V] = z · W_vocabᵀ */
    const int64_t k = ms_vocab_budget(s->k, s->decay, s->k_min, depth);
    if (++s->epoch == 0) {
        memset(s->mark, 0, (size_t)s->V * sizeof *s->mark);
        s->epoch = 1;
    }
    int64_t m = 0;
    for (int64_t r = 0; r < n; r++) {
        ms_k_topk(s->score + r * s->V, s->V, k, s->top, s->top_val);
        for (int64_t j = 0; j < k; j++) {
            const int32_t id = s->top[j];
            if (s->mark[id] == s->epoch) continue;
            if (m == cap) MS_FAIL(MS_ERR_RANGE, "specvocab: more than %lld candidates", (long long)cap);
            s->mark[id] = s->epoch;
            ids[m++] = id;
        }
    }
    *n_ids = m;
    return MS_OK;
}

ms_status ms_specvocab_vsel(const ms_specvocab_opts *o, ms_vsel *out) {
    memset(out, 0, sizeof *out);
    if (o->k < 1 || o->max_rows < 1 || o->V < 1 || o->d < 1)
        MS_FAIL(MS_ERR_INVALID, "specvocab: k=%lld and max_rows=%lld must be ≥ 1", (long long)o->k,
                (long long)o->max_rows);
    specvocab *s = ms_calloc(1, sizeof *s);
    if (!s) return MS_ERR_NOMEM;
    ms_status st = MS_OK;
    s->V = o->V;
    s->d = o->d;
    s->k = o->k < o->V ? o->k : o->V;
    s->k_min = o->k_min;
    s->decay = o->decay > 0.0 ? o->decay : 1.0;
    s->max_rows = o->max_rows;
    MS_TRY_GOTO(st, ms_vsel_artifact_open(o->artifact, "specvocab", o->model_path, o->V, o->d, &s->g), fail);
    int64_t rank;
    st = ms_gguf_get_i64(s->g, "specvocab.rank", &rank);
    if (st < 0 || rank < 1 || rank > o->d) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "specvocab artefact %s: specvocab.rank missing or outside [1, %lld]",
                   o->artifact, (long long)o->d);
        st = MS_ERR_FORMAT;
        goto fail;
    }
    s->rank = rank;
    const ms_gguf_tensor_info *wd, *wv;
    const ms_dtype f32 = MS_DTYPE_F32, vt[] = {MS_DTYPE_F32, MS_DTYPE_Q8_0};
    MS_TRY_GOTO(st, ms_gguf_get_tensor(s->g, "specvocab.w_down", 2, (int64_t[]){rank, o->d}, &f32, 1, &wd), fail);
    MS_TRY_GOTO(st, ms_gguf_get_tensor(s->g, "specvocab.w_vocab", 2, (int64_t[]){o->V, rank}, vt, 2, &wv), fail);
    if (wv->dtype == MS_DTYPE_Q8_0 && rank % 32) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "specvocab artefact %s: Q8_0 w_vocab needs rank %% 32 == 0 (rank %lld)",
                   o->artifact, (long long)rank);
        st = MS_ERR_FORMAT;
        goto fail;
    }
    s->down = ms_qweight_view(MS_DTYPE_F32, wd->data, rank, o->d);
    s->vocab = ms_qweight_view(wv->dtype, wv->data, o->V, rank);
    s->z = ms_malloc((size_t)(o->max_rows * rank) * sizeof(float));
    s->score = ms_malloc((size_t)o->max_rows * (size_t)o->V * sizeof(float));
    s->top = ms_malloc((size_t)s->k * sizeof(int32_t));
    s->top_val = ms_malloc((size_t)s->k * sizeof(float));
    s->mark = ms_calloc((size_t)o->V, sizeof(uint32_t));
    if (!s->z || !s->score || !s->top || !s->top_val || !s->mark) {
        st = MS_ERR_NOMEM;
        goto fail;
    }
    const int64_t max_ids = o->max_rows * s->k < o->V ? o->max_rows * s->k : o->V;
    *out = (ms_vsel){.name = "specvocab", .ctx = s, .pick = sv_pick, .max_ids = max_ids, .free = sv_free};
    MS_LOG_INFO("specvocab: %s, rank %lld, w_vocab %s, k %lld (decay %g, min %lld)", o->artifact, (long long)rank,
                ms_dtype_name(wv->dtype), (long long)s->k, s->decay, (long long)s->k_min);
    return MS_OK;
fail:
    sv_free(s);
    return st;
}
