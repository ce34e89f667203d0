/* ms_vsel.c — the per-step selection step and the artefact checks shared by
 * the selectors (ms_vsel.h). */
#include "ms_vsel.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

void ms_vsel_release(ms_vsel *s) {
    if (!s) return;
    if (s->free && s->ctx) s->free(s->ctx);
    memset(s, 0, sizeof *s);
}

ms_status ms_vsel_step(const ms_vsel *sel, ms_vocab *step, const ms_vocab *window, const float *hid,
                       const float *prev, const int32_t *tok, int64_t n, int64_t depth, int32_t *ids, int64_t cap) {
    int64_t n_ids = 0;
    const int64_t pick_cap = sel->max_ids < cap ? sel->max_ids : cap;
    MS_TRY(sel->pick(sel->ctx, hid, prev, tok, n, depth, ids, pick_cap, &n_ids));
    if (n_ids < 0 || n_ids > pick_cap)
        MS_FAIL(MS_ERR_INVALID, "vocab selector %s: %lld ids, at most %lld allowed", sel->name, (long long)n_ids,
                (long long)pick_cap);
    if (window) {
        const int64_t w = ms_vocab_size(window);
        if (n_ids + w > cap)
            MS_FAIL(MS_ERR_INVALID, "vocab selector %s: %lld picks + %lld window ids exceed %lld", sel->name,
                    (long long)n_ids, (long long)w, (long long)cap);
        for (int64_t s = 0; s < w; s++) ids[n_ids++] = ms_vocab_id_at(window, s);
    }
    return ms_vocab_set_active(step, ids, n_ids); /* validates the ids, drops duplicates */
}

ms_status ms_vsel_model_file(const char *model_path, char *out, size_t cap) {
    struct stat st;
    if (!model_path || stat(model_path, &st) != 0) MS_FAIL(MS_ERR_NOT_FOUND, "vocab artefact: model %s not found", model_path ? model_path : "(none)");
    int n = S_ISDIR(st.st_mode) ? snprintf(out, cap, "%s/model.safetensors", model_path)
                                : snprintf(out, cap, "%s", model_path);
    if (n < 0 || (size_t)n >= cap) MS_FAIL(MS_ERR_INVALID, "vocab artefact: model path %s too long", model_path);
    return MS_OK;
}

/* A required integer KV equal to want. */
static ms_status kv_equal(const ms_gguf *g, const char *path, const char *key, int64_t want) {
    int64_t got;
    ms_status s = ms_gguf_get_i64(g, key, &got);
    if (s == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_FORMAT, "vocab artefact %s: no %s", path, key);
    MS_TRY(s);
    if (got != want)
        MS_FAIL(MS_ERR_INVALID, "vocab artefact %s: %s = %lld, but the model has %lld", path, key, (long long)got,
                (long long)want);
    return MS_OK;
}

static ms_status check_artifact(const ms_gguf *g, const char *path, const char *kind, const char *model_path,
                                int64_t V, int64_t d) {
    const char *s;
    ms_status st = ms_gguf_get_str(g, "microspec.artifact", &s, NULL);
    if (st == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_FORMAT, "vocab artefact %s: no microspec.artifact (not an artefact)", path);
    MS_TRY(st);
    if (strcmp(s, kind)) MS_FAIL(MS_ERR_INVALID, "vocab artefact %s is a \"%s\" artefact, not \"%s\"", path, s, kind);
    /* the model's identity first: an artefact of another model is named as such, whatever its sizes */
    const char *want;
    size_t len;
    st = ms_gguf_get_str(g, "microspec.model_sha256", &want, &len);
    if (st == MS_ERR_NOT_FOUND) MS_FAIL(MS_ERR_FORMAT, "vocab artefact %s: no microspec.model_sha256", path);
    MS_TRY(st);
    char file[4096], have[65];
    MS_TRY(ms_vsel_model_file(model_path, file, sizeof file));
    MS_TRY(ms_sha256_file(file, have));
    if (len != 64 || strcmp(want, have))
        MS_FAIL(MS_ERR_INVALID,
                "vocab artefact %s was made for the model with sha256 %s, but the model %s (%s) has sha256 %s: "
                "rebuild the artefact for this model",
                path, want, model_path, file, have);
    MS_TRY(kv_equal(g, path, "microspec.vocab_size", V));
    MS_TRY(kv_equal(g, path, "microspec.hidden_size", d));
    return MS_OK;
}

ms_status ms_vsel_artifact_open(const char *path, const char *kind, const char *model_path, int64_t V, int64_t d,
                                ms_gguf **out) {
    *out = NULL;
    if (!path || !path[0]) MS_FAIL(MS_ERR_INVALID, "vocabulary mode %s needs an artefact (--vocab-artifact)", kind);
    ms_gguf *g = NULL;
    MS_TRY(ms_gguf_open(path, &g));
    ms_status s = check_artifact(g, path, kind, model_path, V, d);
    if (s < 0) {
        ms_gguf_close(&g);
        return s;
    }
    *out = g;
    return MS_OK;
}
