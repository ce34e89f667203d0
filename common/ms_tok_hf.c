/* ms_tok_hf.c — loading a Hugging Face tokenizer.json (byte-level BPE: the
 * model's vocab and merges, added tokens, the pre-tokenizer's Split regex,
 * NFC) and its tokenizer_config.json (bos/eos, the chat template kind).
 * Encoding is ms_tok_bpe.c's.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tok_int.h"

/* Added-token ids may leave holes above the model vocabulary, but not many:
 * the per-id tables are sized by the largest id. */
#define TOK_ID_SLACK 65536

/* GPT-2's own pattern, used by a ByteLevel pre-tokenizer with use_regex true. */
static const char *const GPT2_REGEX =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char *json_type_name(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Optional boolean field: absent or null → def. */
static ms_status get_bool(const char *name, const json_t *obj, const char *where, const char *key, bool def,
                          bool *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return MS_OK;
    }
    if (!json_is_boolean(v))
        MS_FAIL(MS_ERR_FORMAT, "%s: %s.%s must be a boolean, got %s", name, where, key, json_type_name(v));
    *out = json_is_true(v);
    return MS_OK;
}

/* Optional string field: absent or null → NULL. */
static ms_status get_str(const char *name, const json_t *obj, const char *where, const char *key, const char **out) {
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v)) return MS_OK;
    if (!json_is_string(v))
        MS_FAIL(MS_ERR_FORMAT, "%s: %s.%s must be a string, got %s", name, where, key, json_type_name(v));
    *out = json_string_value(v);
    return MS_OK;
}

static ms_status hf_normalizer(const char *name, const json_t *n, ms_tok *t) {
    if (!n || json_is_null(n)) return MS_OK;
    if (!json_is_object(n)) MS_FAIL(MS_ERR_FORMAT, "%s: normalizer must be an object or null", name);
    const char *type;
    MS_TRY(get_str(name, n, "normalizer", "type", &type));
    if (!type) MS_FAIL(MS_ERR_FORMAT, "%s: normalizer.type is missing", name);
    if (strcmp(type, "NFC") == 0) {
        t->nfc = true;
        return MS_OK;
    }
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) MS_FAIL(MS_ERR_FORMAT, "%s: normalizer.normalizers must be an array", name);
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            if (!json_is_object(e))
                MS_FAIL(MS_ERR_FORMAT, "%s: normalizer.normalizers[%zu] must be an object", name, i);
            MS_TRY(hf_normalizer(name, e, t));
        }
        return MS_OK;
    }
    MS_FAIL(MS_ERR_UNSUPPORTED, "%s: normalizer.type \"%s\" is not supported (only NFC)", name, type);
}

/* A ByteLevel pre-tokenizer; *regex is set to GPT-2's when use_regex. */
static ms_status hf_byte_level(const char *name, const json_t *p, const char *where, const char **regex) {
    bool prefix, use_regex;
    MS_TRY(get_bool(name, p, where, "add_prefix_space", true, &prefix));
    MS_TRY(get_bool(name, p, where, "use_regex", true, &use_regex));
    if (prefix) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s.add_prefix_space true is not supported", name, where);
    *regex = use_regex ? GPT2_REGEX : NULL;
    return MS_OK;
}

/* Accepted: ByteLevel, or Sequence [Split{Regex, Isolated}, ByteLevel]. */
static ms_status hf_pre_tokenizer(const char *name, const json_t *p, const char **regex) {
    if (!p || json_is_null(p))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: pre_tokenizer is null; only byte-level BPE is supported", name);
    if (!json_is_object(p)) MS_FAIL(MS_ERR_FORMAT, "%s: pre_tokenizer must be an object", name);
    const char *type;
    MS_TRY(get_str(name, p, "pre_tokenizer", "type", &type));
    if (!type) MS_FAIL(MS_ERR_FORMAT, "%s: pre_tokenizer.type is missing", name);
    if (strcmp(type, "ByteLevel") == 0) return hf_byte_level(name, p, "pre_tokenizer", regex);
    if (strcmp(type, "Sequence") != 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: pre_tokenizer.type \"%s\" is not supported (ByteLevel or Sequence)", name,
                type);
    json_t *list = json_object_get(p, "pretokenizers");
    if (!json_is_array(list)) MS_FAIL(MS_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers must be an array", name);
    const char *split = NULL;
    bool byte_level = false;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        char where[64];
        snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%zu]", i);
        if (!json_is_object(e)) MS_FAIL(MS_ERR_FORMAT, "%s: %s must be an object", name, where);
        const char *et;
        MS_TRY(get_str(name, e, where, "type", &et));
        if (!et) MS_FAIL(MS_ERR_FORMAT, "%s: %s.type is missing", name, where);
        if (byte_level) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s: nothing may follow ByteLevel", name, where);
        if (strcmp(et, "Split") == 0) {
            if (split) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s: only one Split is supported", name, where);
            json_t *pat = json_object_get(e, "pattern");
            if (!json_is_object(pat)) MS_FAIL(MS_ERR_FORMAT, "%s: %s.pattern must be an object", name, where);
            json_t *re = json_object_get(pat, "Regex");
            if (!re) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s.pattern: only {\"Regex\": ...} is supported", name, where);
            if (!json_is_string(re)) MS_FAIL(MS_ERR_FORMAT, "%s: %s.pattern.Regex must be a string", name, where);
            const char *behavior;
            bool invert;
            MS_TRY(get_str(name, e, where, "behavior", &behavior));
            MS_TRY(get_bool(name, e, where, "invert", false, &invert));
            if (!behavior || strcmp(behavior, "Isolated") != 0 || invert)
                MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s: only behavior \"Isolated\" without invert is supported", name,
                        where);
            split = json_string_value(re);
        } else if (strcmp(et, "ByteLevel") == 0) {
            const char *own;
            MS_TRY(hf_byte_level(name, e, where, &own));
            if (own && split)
                MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s: ByteLevel use_regex after a Split is not supported", name, where);
            if (own) split = own;
            byte_level = true;
        } else {
            MS_FAIL(MS_ERR_UNSUPPORTED, "%s: %s.type \"%s\" is not supported (Split or ByteLevel)", name, where, et);
        }
    }
    if (!byte_level)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: pre_tokenizer has no ByteLevel step; only byte-level BPE is supported", name);
    *regex = split;
    return MS_OK;
}

static ms_status hf_decoder(const char *name, const json_t *d) {
    if (!d || json_is_null(d)) return MS_OK;
    if (!json_is_object(d)) MS_FAIL(MS_ERR_FORMAT, "%s: decoder must be an object or null", name);
    const char *type;
    MS_TRY(get_str(name, d, "decoder", "type", &type));
    if (!type || strcmp(type, "ByteLevel") != 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: decoder.type \"%s\" is not supported (only ByteLevel)", name,
                type ? type : "(missing)");
    return MS_OK;
}


static ms_status hf_set_piece(ms_tok *t, int32_t id, const char *s, size_t n, const int16_t *u2b, bool byte_level) {
    MS_TRY(tok_arena_put(t, s, n, &t->piece[id]));
    if (!byte_level) {
        t->bytes[id] = t->piece[id];
        return MS_OK;
    }
    /* decoded bytes are never longer than the piece; decode in place at the arena end */
    span tmp;
    MS_TRY(tok_arena_put(t, s, n, &tmp));
    size_t m = tok_byte_level_decode((const uint8_t *)s, n, u2b, (uint8_t *)t->arena + tmp.off);
    t->bytes[id] = (span){tmp.off, (uint32_t)m};
    t->arena_len = tmp.off + m;
    return MS_OK;
}

typedef struct {
    uint8_t first;
    uint32_t len;
    int32_t id;
} added_key;

/* (first byte asc, length desc, id asc) */
static int cmp_added(const void *a, const void *b) {
    const added_key *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The parts of tokenizer.json the loader reads, their types checked. */
typedef struct {
    const json_t *vocab, *merges, *added;
    size_t n_added;
    const char *unk; /* model.unk_token, NULL if none */
} hf_doc;

/* model: a BPE without dropout, byte fallback or subword affixes; its vocab,
 * merges and the added tokens beside it. */
static ms_status hf_model(const json_t *root, const char *name, ms_tok *t, hf_doc *d) {
    if (!json_is_object(root)) MS_FAIL(MS_ERR_FORMAT, "%s: top level must be an object", name);
    json_t *model = json_object_get(root, "model");
    if (!model) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing field \"model\"", name);
    if (!json_is_object(model))
        MS_FAIL(MS_ERR_FORMAT, "%s: model must be an object, got %s", name, json_type_name(model));
    const char *type;
    MS_TRY(get_str(name, model, "model", "type", &type));
    if (type && strcmp(type, "BPE") != 0)
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model.type \"%s\" is not supported (only BPE)", name, type);
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model.dropout must be null (BPE dropout is not supported)", name);
    bool byte_fallback;
    MS_TRY(get_bool(name, model, "model", "byte_fallback", false, &byte_fallback));
    if (byte_fallback) MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model.byte_fallback true is not supported", name);
    const char *prefix, *suffix;
    MS_TRY(get_str(name, model, "model", "continuing_subword_prefix", &prefix));
    MS_TRY(get_str(name, model, "model", "end_of_word_suffix", &suffix));
    if ((prefix && *prefix) || (suffix && *suffix))
        MS_FAIL(MS_ERR_UNSUPPORTED, "%s: model.continuing_subword_prefix/end_of_word_suffix are not supported", name);
    MS_TRY(get_str(name, model, "model", "unk_token", &d->unk));
    MS_TRY(get_bool(name, model, "model", "ignore_merges", false, &t->ignore_merges));

    d->vocab = json_object_get(model, "vocab");
    if (!d->vocab) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing field \"model.vocab\"", name);
    if (!json_is_object(d->vocab))
        MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab must be an object, got %s", name, json_type_name(d->vocab));
    d->merges = json_object_get(model, "merges");
    if (!d->merges) MS_FAIL(MS_ERR_NOT_FOUND, "%s: missing field \"model.merges\"", name);
    if (!json_is_array(d->merges))
        MS_FAIL(MS_ERR_FORMAT, "%s: model.merges must be an array, got %s", name, json_type_name(d->merges));
    d->added = json_object_get(root, "added_tokens");
    if (d->added && !json_is_null(d->added) && !json_is_array(d->added))
        MS_FAIL(MS_ERR_FORMAT, "%s: added_tokens must be an array, got %s", name, json_type_name(d->added));
    d->n_added = json_is_array(d->added) ? json_array_size(d->added) : 0;
    return MS_OK;
}

/* ids: the model vocab is dense [0, n_model); added tokens may sit above it */
static ms_status hf_count_ids(const char *name, const hf_doc *d, int64_t *n_model_out, int64_t *n_ids_out) {
    int64_t n_model = (int64_t)json_object_size(d->vocab);
    if (n_model == 0) MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab is empty", name);
    if (n_model >= INT32_MAX / 2) MS_FAIL(MS_ERR_RANGE, "%s: model.vocab has too many entries", name);
    int64_t id_bound = n_model + (int64_t)d->n_added + TOK_ID_SLACK, n_ids = n_model;
    for (size_t i = 0; i < d->n_added; i++) {
        json_t *a = json_array_get(d->added, i);
        if (!json_is_object(a)) MS_FAIL(MS_ERR_FORMAT, "%s: added_tokens[%zu] must be an object", name, i);
        json_t *id = json_object_get(a, "id");
        if (!json_is_integer(id)) MS_FAIL(MS_ERR_FORMAT, "%s: added_tokens[%zu].id must be an integer", name, i);
        json_int_t v = json_integer_value(id);
        if (v < 0 || v >= id_bound)
            MS_FAIL(MS_ERR_RANGE, "%s: added_tokens[%zu].id = %lld is out of range [0, %lld)", name, i, (long long)v,
                    (long long)id_bound);
        if (v + 1 > n_ids) n_ids = v + 1;
    }
    *n_model_out = n_model;
    *n_ids_out = n_ids;
    return MS_OK;
}

static ms_status hf_load_vocab(ms_tok *t, const char *name, const json_t *vocab, const int16_t *u2b) {
    const char *key;
    size_t key_len;
    json_t *val;
    json_object_keylen_foreach((json_t *)vocab, key, key_len, val) {
        if (!json_is_integer(val)) MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab[\"%s\"] must be an integer id", name, key);
        json_int_t v = json_integer_value(val);
        if (v < 0 || v >= t->n_model)
            MS_FAIL(MS_ERR_RANGE, "%s: model.vocab[\"%s\"] = %lld is out of range [0, %lld) (ids must be dense)", name,
                    key, (long long)v, (long long)t->n_model);
        if (t->flags[v] & TOK_PRESENT)
            MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab: id %lld appears twice (\"%s\")", name, (long long)v, key);
        if (key_len == 0) MS_FAIL(MS_ERR_FORMAT, "%s: model.vocab: empty token for id %lld", name, (long long)v);
        MS_TRY(hf_set_piece(t, (int32_t)v, key, key_len, u2b, true));
        t->flags[v] = TOK_PRESENT;
    }
    return MS_OK;
}

/* added_tokens[i] (its id checked by hf_count_ids) */
static ms_status hf_load_added_one(ms_tok *t, const char *name, const json_t *a, size_t i, const int16_t *u2b) {
    int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
    char where[48];
    snprintf(where, sizeof where, "added_tokens[%zu]", i);
    json_t *content = json_object_get(a, "content");
    if (!json_is_string(content) || json_string_length(content) == 0)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s.content must be a non-empty string", name, where);
    const char *c = json_string_value(content);
    size_t clen = json_string_length(content);
    bool special, lstrip, rstrip, single, normalized;
    MS_TRY(get_bool(name, a, where, "special", false, &special));
    MS_TRY(get_bool(name, a, where, "lstrip", false, &lstrip));
    MS_TRY(get_bool(name, a, where, "rstrip", false, &rstrip));
    MS_TRY(get_bool(name, a, where, "single_word", false, &single));
    MS_TRY(get_bool(name, a, where, "normalized", false, &normalized));
    if (t->flags[id] & TOK_ADDED)
        MS_FAIL(MS_ERR_FORMAT, "%s: %s: id %d appears twice in added_tokens", name, where, id);
    if (t->flags[id] & TOK_PRESENT) {
        /* an added token may re-declare a vocab entry, but only with its own text */
        const span *p = &t->piece[id];
        if (p->len != clen || memcmp(t->arena + p->off, c, clen) != 0)
            MS_FAIL(MS_ERR_FORMAT, "%s: %s: id %d is already the vocab entry \"%.*s\"", name, where, id, (int)p->len,
                    t->arena + p->off);
    } else {
        MS_TRY(hf_set_piece(t, id, c, clen, u2b, false));
    }
    /* the text of an added token is its content, not a byte-level string */
    MS_TRY(tok_arena_put(t, c, clen, &t->bytes[id]));
    t->flags[id] |= TOK_PRESENT | TOK_ADDED | (special ? TOK_SPECIAL : 0) | (lstrip ? TOK_LSTRIP : 0) |
                    (rstrip ? TOK_RSTRIP : 0) | (single ? TOK_SINGLE : 0);
    if (!special) t->any_nonspecial_added = true;
    t->added[t->n_added++] = id;
    return MS_OK;
}

/* lookup tables: pieces (vocab first, then added) and raw bytes of the vocab */
static ms_status hf_build_maps(ms_tok *t, const char *name, const char *unk) {
    MS_TRY(tok_strmap_init(&t->piece_map, t->n_ids));
    MS_TRY(tok_strmap_init(&t->bytes_map, t->n_model));
    for (int64_t id = 0; id < t->n_model; id++) {
        tok_strmap_insert(t, &t->piece_map, t->piece, (int32_t)id);
        tok_strmap_insert(t, &t->bytes_map, t->bytes, (int32_t)id);
    }
    for (int64_t i = 0; i < t->n_added; i++) tok_strmap_insert(t, &t->piece_map, t->piece, t->added[i]);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = tok_strmap_find(t, &t->bytes_map, t->bytes, &c, 1);
    }
    if (unk) {
        t->unk_id = tok_strmap_find(t, &t->piece_map, t->piece, unk, strlen(unk));
        if (t->unk_id < 0) MS_FAIL(MS_ERR_FORMAT, "%s: model.unk_token \"%s\" is not in the vocab", name, unk);
    }
    return MS_OK;
}

/* added tokens by (first byte, longest first) for the leftmost-longest scan */
static ms_status hf_index_added(ms_tok *t) {
    if (t->n_added) {
        added_key *keys = ms_malloc((size_t)t->n_added * sizeof *keys);
        if (!keys) return MS_ERR_NOMEM;
        for (int64_t i = 0; i < t->n_added; i++) {
            const span *p = &t->piece[t->added[i]];
            keys[i] = (added_key){(uint8_t)t->arena[p->off], p->len, t->added[i]};
        }
        qsort(keys, (size_t)t->n_added, sizeof *keys, cmp_added);
        for (int64_t i = 0; i < t->n_added; i++) t->added[i] = keys[i].id;
        free(keys);
    }
    int64_t k = 0;
    for (int b = 0; b < 256; b++) {
        t->by_first[b] = k;
        while (k < t->n_added && (uint8_t)t->arena[t->piece[t->added[k]].off] == b) k++;
    }
    t->by_first[256] = k;
    return MS_OK;
}

/* model.merges[r]: "a b" or ["a", "b"] → its two sides */
static ms_status hf_merge_sides(const char *name, const json_t *m, size_t r, const char **a, size_t *la,
                                const char **b, size_t *lb) {
    if (json_is_string(m)) {
        *a = json_string_value(m);
        const char *sp = memchr(*a, ' ', json_string_length(m));
        if (!sp || memchr(sp + 1, ' ', json_string_length(m) - (size_t)(sp + 1 - *a)))
            MS_FAIL(MS_ERR_FORMAT, "%s: model.merges[%zu] \"%s\" is not two tokens separated by one space", name, r,
                    *a);
        *la = (size_t)(sp - *a);
        *b = sp + 1;
        *lb = json_string_length(m) - *la - 1;
        return MS_OK;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *la = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *lb = json_string_length(json_array_get(m, 1));
        return MS_OK;
    }
    MS_FAIL(MS_ERR_FORMAT, "%s: model.merges[%zu] must be \"a b\" or [\"a\", \"b\"], got %s", name, r,
            json_type_name(m));
}

/* merges: rank = position */
static ms_status hf_load_merges(ms_tok *t, const char *name, const json_t *merges) {
    size_t n_merges = json_array_size(merges);
    if (n_merges >= INT32_MAX) MS_FAIL(MS_ERR_RANGE, "%s: model.merges has too many entries", name);
    MS_TRY(tok_pairmap_init(&t->merges, (int64_t)n_merges));
    tok_catbuf cat = {0};
    ms_status st = MS_OK;
    for (size_t r = 0; r < n_merges && st == MS_OK; r++) {
        const char *a, *b;
        size_t la, lb;
        st = hf_merge_sides(name, json_array_get(merges, r), r, &a, &la, &b, &lb);
        int32_t ids[3];
        int missing = 0;
        if (st == MS_OK) st = tok_merge_ids(t, a, la, b, lb, &cat, ids, &missing);
        if (st < 0) break;
        if (missing == 1 || missing == 2) {
            st = MS_ERR_FORMAT;
            MS_LOG_ERROR("%s: model.merges[%zu]: token \"%.*s\" is not in model.vocab", name, r,
                         (int)(missing == 1 ? la : lb), missing == 1 ? a : b);
        } else if (missing == 3) {
            st = MS_ERR_FORMAT;
            MS_LOG_ERROR("%s: model.merges[%zu]: the merged token \"%.*s\" is not in model.vocab", name, r,
                         (int)(la + lb), cat.v);
        } else {
            tok_pairmap_insert(&t->merges, ids[0], ids[1], (int32_t)r, ids[2]);
        }
    }
    free(cat.v);
    return st;
}

static ms_status hf_parse(const json_t *root, const char *name, ms_tok *t) {
    hf_doc d = {0};
    MS_TRY(hf_model(root, name, t, &d));
    const char *regex = NULL;
    MS_TRY(hf_normalizer(name, json_object_get(root, "normalizer"), t));
    MS_TRY(hf_pre_tokenizer(name, json_object_get(root, "pre_tokenizer"), &regex));
    MS_TRY(hf_decoder(name, json_object_get(root, "decoder")));
    int64_t n_model, n_ids;
    MS_TRY(hf_count_ids(name, &d, &n_model, &n_ids));
    t->n_model = n_model;
    MS_TRY(tok_alloc_ids(t, n_ids, false));
    int16_t u2b[512];
    tok_unicode_to_byte(u2b);
    MS_TRY(hf_load_vocab(t, name, d.vocab, u2b));
    if (d.n_added) {
        t->added = ms_malloc(d.n_added * sizeof *t->added);
        if (!t->added) return MS_ERR_NOMEM;
    }
    for (size_t i = 0; i < d.n_added; i++) MS_TRY(hf_load_added_one(t, name, json_array_get(d.added, i), i, u2b));
    MS_TRY(hf_build_maps(t, name, d.unk));
    MS_TRY(hf_index_added(t));
    MS_TRY(hf_load_merges(t, name, d.merges));
    if (regex) MS_TRY(tok_compile_regex(name, regex, t));
    for (int64_t id = 0; id < n_ids; id++)
        if (t->flags[id] & TOK_PRESENT && t->bytes[id].len > t->max_piece_len) t->max_piece_len = t->bytes[id].len;
    return MS_OK;
}

ms_status ms_tok_load_hf_memory(const char *json, size_t len, const char *name, ms_tok **out) {
    MS_ASSERT(out && (json || len == 0));
    *out = NULL;
    if (!name) name = "tokenizer.json";
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!root)
        MS_FAIL(MS_ERR_FORMAT, "%s: not valid JSON (line %d, column %d): %s", name, err.line, err.column, err.text);
    ms_tok *t = tok_new(TOK_HF_BPE);
    if (!t) {
        json_decref(root);
        return MS_ERR_NOMEM;
    }
    ms_status st = hf_parse(root, name, t);
    json_decref(root);
    if (st < 0) {
        ms_tok_free(&t);
        return st;
    }
    *out = t;
    return MS_OK;
}

/* ---- tokenizer_config.json ----------------------------------------------------------- */


/* bos_token / eos_token: a string, {"content": ...}, or null. *id = -1 when null/absent. */
static ms_status config_token(const ms_tok *t, const char *name, const json_t *root, const char *key, int32_t *id) {
    *id = -1;
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return MS_OK;
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) MS_FAIL(MS_ERR_FORMAT, "%s: %s must be a string, {\"content\": string} or null", name, key);
    *id = ms_tok_find(t, json_string_value(v));
    if (*id < 0)
        MS_FAIL(MS_ERR_NOT_FOUND, "%s: %s \"%s\" is not a token of the tokenizer", name, key, json_string_value(v));
    return MS_OK;
}

static ms_status config_parse(ms_tok *t, const char *name, const json_t *root) {
    if (!json_is_object(root)) MS_FAIL(MS_ERR_FORMAT, "%s: top level must be an object", name);
    int32_t bos, eos;
    MS_TRY(config_token(t, name, root, "bos_token", &bos));
    MS_TRY(config_token(t, name, root, "eos_token", &eos));
    /* chat_template: a string, or a list of {"name", "template"} (the "default" one) */
    json_t *ct = json_object_get(root, "chat_template");
    const char *tmpl = NULL;
    if (json_is_string(ct)) {
        tmpl = json_string_value(ct);
    } else if (json_is_array(ct)) {
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            json_t *nm = json_object_get(e, "name"), *tx = json_object_get(e, "template");
            if (!json_is_string(tx))
                MS_FAIL(MS_ERR_FORMAT, "%s: chat_template[%zu].template must be a string", name, i);
            if (!tmpl || (json_is_string(nm) && strcmp(json_string_value(nm), "default") == 0))
                tmpl = json_string_value(tx);
        }
    } else if (ct && !json_is_null(ct)) {
        MS_FAIL(MS_ERR_FORMAT, "%s: chat_template must be a string or a list", name);
    }
    t->chat = MS_CHAT_NONE;
    if (tmpl && strstr(tmpl, "<|start_header_id|>"))
        t->chat = MS_CHAT_LLAMA3;
    else if (tmpl && strstr(tmpl, "<|im_start|>"))
        t->chat = MS_CHAT_CHATML;
    t->bos = bos;
    t->n_eos = 0;
    tok_eos_add(t, eos);
    if (t->chat == MS_CHAT_LLAMA3) {
        tok_eos_add(t, ms_tok_find(t, "<|eot_id|>"));
        tok_eos_add(t, ms_tok_find(t, "<|end_of_text|>"));
    } else if (t->chat == MS_CHAT_CHATML) {
        tok_eos_add(t, ms_tok_find(t, "<|im_end|>"));
        tok_eos_add(t, ms_tok_find(t, "<|endoftext|>"));
    }
    return MS_OK;
}

ms_status ms_tok_load_hf(const char *tokenizer_json, const char *config_path, ms_tok **out) {
    MS_ASSERT(tokenizer_json && out);
    *out = NULL;
    char *data;
    size_t len;
    MS_TRY(ms_read_file(tokenizer_json, &data, &len));
    ms_tok *t;
    ms_status st = ms_tok_load_hf_memory(data, len, tokenizer_json, &t);
    free(data);
    MS_TRY(st);
    if (config_path && ms_file_exists(config_path)) {
        st = ms_read_file(config_path, &data, &len);
        if (st == MS_OK) {
            json_error_t err;
            /* model_max_length may exceed int64 (Llama-3: 1e30); no integer is read here */
            json_t *root = json_loadb(data, len, JSON_DECODE_INT_AS_REAL, &err);
            free(data);
            if (!root) {
                st = MS_ERR_FORMAT;
                MS_LOG_ERROR("%s: not valid JSON (line %d, column %d): %s", config_path, err.line, err.column,
                             err.text);
            } else {
                st = config_parse(t, config_path, root);
                json_decref(root);
            }
        }
        if (st < 0) {
            ms_tok_free(&t);
            return st;
        }
    }
    *out = t;
    return MS_OK;
}
