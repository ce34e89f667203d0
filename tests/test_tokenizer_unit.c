/* Tokenizer unit tests that need no shared data (a tiny byte-level BPE built
 * here), plus a few on the real Llama-3 / Qwen3 files when ../shared exists:
 *  - BPE merges by rank, added tokens (special only with parse_special,
 *    non-special always, lstrip/rstrip), decoding with/without specials;
 *  - streaming decode: multi-byte characters split over byte tokens come out
 *    whole and once; invalid UTF-8 → U+FFFD; a too-small buffer is refused;
 *  - malformed tokenizer.json variants → the expected MS_ERR_* code;
 *  - chat templates: expected strings written from the Jinja templates;
 *  - Qwen3's NFC normalizer (decomposed == composed), Llama-3 has none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tokenizer.h"

#include "ms_check.h"

/* ---- a tiny byte-level tokenizer -------------------------------------------
 * Ids 0..255: the byte-level character of byte b (GPT-2 bytes_to_unicode,
 * computed here independently) has id b. Then merges → 256.., then added. */
static void b2u_table(unsigned cp[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp[b] = keep ? (unsigned)b : (unsigned)(256 + n++);
    }
}

static char *tiny_json(void) {
    unsigned cp[256];
    b2u_table(cp);
    size_t cap = 16384, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(
        s + n, cap - n,
        "{\"version\":\"1.0\",\"added_tokens\":["
        "{\"id\":261,\"content\":\"<|end|>\",\"special\":true},"
        "{\"id\":262,\"content\":\"<think>\",\"special\":false},"
        "{\"id\":263,\"content\":\"<|pad|>\",\"special\":true,\"lstrip\":true,\"rstrip\":true},"
        "{\"id\":264,\"content\":\"<|end|>x\",\"special\":true}],"
        "\"normalizer\":null,"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{"
        "L}+|"
        "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
        "\"behavior\":\"Isolated\",\"invert\":false},"
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]},"
        "\"decoder\":{\"type\":\"ByteLevel\"},"
        "\"model\":{\"type\":\"BPE\",\"ignore_merges\":false,\"vocab\":{");
    for (int b = 0; b < 256; b++) n += (size_t)snprintf(s + n, cap - n, "\"\\u%04x\":%d,", cp[b], b);
    /* Ġ = U+0120 (space) */
    n += (size_t)snprintf(s + n, cap - n,
                          "\"\\u0120t\":256,\"he\":257,\"\\u0120the\":258,\"in\":259,\"\\u0120a\":260},"
                          "\"merges\":[\"\\u0120 t\",[\"h\",\"e\"],\"\\u0120t he\",\"i n\",\"\\u0120 a\"]}}");
    return s;
}

static bool ids_eq(const ms_ids *got, const int32_t *want, int n) {
    if (got->n != n) return false;
    for (int i = 0; i < n; i++)
        if (got->v[i] != want[i]) return false;
    return true;
}

static void expect_ids(const ms_tok *t, const char *text, bool special, const int32_t *want, int n) {
    ms_ids got = {0};
    ms_status st = ms_tok_encode(t, text, strlen(text), special, &got);
    if (st != MS_OK || !ids_eq(&got, want, n)) {
        fprintf(stderr, "FAIL encode \"%s\" (parse_special %d, status %d)\n  expected:", text, special, st);
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n  actual:  ");
        for (int64_t i = 0; i < got.n; i++) fprintf(stderr, " %d", got.v[i]);
        fprintf(stderr, "\n");
        g_fail++;
    }
    ms_ids_free(&got);
}

static void expect_decode(const ms_tok *t, const int32_t *ids, int n, bool skip, const char *want) {
    char *s = NULL;
    ms_status st = ms_tok_decode_all(t, ids, n, skip, &s);
    CHECK(st == MS_OK && s && strcmp(s, want) == 0, "decode → \"%s\", want \"%s\"", s ? s : "(null)", want);
    free(s);
}

static void test_tiny(const ms_tok *t) {
    CHECK(ms_tok_vocab_size(t) == 265, "vocab size %lld", (long long)ms_tok_vocab_size(t));
    CHECK(ms_tok_bos(t) == -1 && ms_tok_eos(t, NULL) == 0 && ms_tok_chat_kind(t) == MS_CHAT_NONE, "no config");
    CHECK(ms_tok_find(t, "<|end|>") == 261 && ms_tok_find(t, "\xc4\xa0the") == 258 && ms_tok_find(t, " the") == 258 &&
              ms_tok_find(t, "zzz") == -1,
          "find");
    /* " the": Ġ t h e → (rank 0) Ġt h e → (rank 1) Ġt he → (rank 2) Ġthe */
    expect_ids(t, " the", false, (int32_t[]){258}, 1);
    expect_ids(t, "the", false, (int32_t[]){'t', 257}, 2);
    /* words "in", " a", " then" (Ġthe n: there is no "hen"), "\n"; "tin" → t in */
    expect_ids(t, "in a then\n", false, (int32_t[]){259, 260, 258, 'n', '\n'}, 5);
    expect_ids(t, "tin", false, (int32_t[]){'t', 259}, 2);
    /* specials only with parse_special; the longest added token wins */
    expect_ids(t, "a<|end|>b", true, (int32_t[]){'a', 261, 'b'}, 3);
    expect_ids(t, "a<|end|>xb", true, (int32_t[]){'a', 264, 'b'}, 3);
    expect_ids(t, "a<|end|>", false, (int32_t[]){'a', '<', '|', 'e', 'n', 'd', '|', '>'}, 8);
    /* a non-special added token is matched either way */
    expect_ids(t, "x<think>y", false, (int32_t[]){'x', 262, 'y'}, 3);
    /* lstrip / rstrip swallow the whitespace around <|pad|> */
    expect_ids(t, "a  <|pad|> \n b", true, (int32_t[]){'a', 263, 'b'}, 3);
    expect_ids(t, "", true, NULL, 0);
    /* bytes that are not UTF-8 still encode, one byte token each */
    expect_ids(t, "\xff\xfe", false, (int32_t[]){0xff, 0xfe}, 2);

    expect_decode(t, (int32_t[]){'a', 261, 258}, 3, false, "a<|end|> the");
    expect_decode(t, (int32_t[]){'a', 261, 258}, 3, true, "a the");
    expect_decode(t, (int32_t[]){'x', 262}, 2, true, "x<think>"); /* not special: kept */
    const uint8_t *b;
    size_t n;
    CHECK(ms_tok_token_bytes(t, 258, &b, &n) == MS_OK && n == 4 && memcmp(b, " the", 4) == 0, "token bytes");
    CHECK(ms_tok_token_bytes(t, 10, &b, &n) == MS_OK && n == 1 && b[0] == '\n', "byte token");
    CHECK(ms_tok_token_bytes(t, 265, &b, &n) == MS_ERR_RANGE, "id out of range");
    CHECK(ms_tok_token_bytes(t, -1, &b, &n) == MS_ERR_RANGE, "negative id");
}

/* Stream the byte tokens of s one by one: after each, the output must be s
 * up to the last complete character seen — each character whole, once. */
static void test_stream_bytes(const ms_tok *t, const char *s) {
    ms_tok_decoder d;
    ms_tok_decoder_init(&d);
    char out[256];
    size_t len = strlen(s), n = 0, got;
    for (size_t i = 0; i < len; i++) {
        char one[2] = {s[i], 0};
        int32_t id = ms_tok_find(t, one); /* raw byte → its byte-level token */
        CHECK(id >= 0, "no byte token for 0x%02x", (uint8_t)s[i]);
        if (id < 0) return;
        CHECK(ms_tok_decode_next(t, &d, id, false, out + n, sizeof out - n, &got) == MS_OK, "decode_next");
        n += got;
        /* a character is complete when the next byte does not continue it;
         * until then, nothing more may come out */
        size_t want = i + 1 == len || ((uint8_t)s[i + 1] & 0xC0) != 0x80 ? i + 1 : n - got;
        if (want != i + 1) CHECK(got == 0, "byte %zu of \"%s\": %zu bytes out mid-character", i, s, got);
        CHECK(n == want && memcmp(out, s, n) == 0, "after byte %zu of \"%s\": %zu bytes out, want %zu", i, s, n, want);
        CHECK(d.n_pending <= 3, "pending %d", d.n_pending);
    }
    CHECK(ms_tok_decode_flush(&d, out + n, sizeof out - n, &got) == MS_OK && got == 0, "flush empty");
    CHECK(n == len && memcmp(out, s, len) == 0, "whole stream");
}

static void test_stream_invalid(const ms_tok *t) {
    /* byte ids are the byte values in the tiny tokenizer */
    expect_decode(t, (int32_t[]){0xff, 'a'}, 2, false,
                  "\xEF\xBF\xBD"
                  "a");
    expect_decode(t, (int32_t[]){0xe4, 0xb8, 'a'}, 3, false,
                  "\xEF\xBF\xBD"
                  "a");                                                        /* cut 3-byte char: one U+FFFD */
    expect_decode(t, (int32_t[]){'a', 0xf0, 0x9f}, 3, false, "a\xEF\xBF\xBD"); /* held at the end, flushed */
    expect_decode(t, (int32_t[]){0xed, 0xa0, 0x80}, 3, false, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* surrogate */
    expect_decode(t, (int32_t[]){0xc3, 261, 0xa9}, 3, false, "\xEF\xBF\xBD<|end|>\xEF\xBF\xBD");
    /* a special token skipped between the two halves of "é" does not break it */
    expect_decode(t, (int32_t[]){0xc3, 261, 0xa9}, 3, true, "\xC3\xA9");

    ms_tok_decoder d;
    ms_tok_decoder_init(&d);
    char out[8];
    size_t got = 99;
    CHECK(ms_tok_decode_next(t, &d, 258, false, out, 3, &got) == MS_ERR_RANGE && got == 0, "small buffer refused");
    CHECK(ms_tok_decode_next(t, &d, 258, false, out, 4, &got) == MS_OK && got == 4, "fits exactly");
    CHECK(ms_tok_decode_next(t, &d, 0xf0, false, out, sizeof out, &got) == MS_OK && got == 0 && d.n_pending == 1,
          "held");
    CHECK(ms_tok_decode_flush(&d, out, 2, &got) == MS_ERR_RANGE, "flush needs 3 bytes");
    CHECK(ms_tok_decode_flush(&d, out, sizeof out, &got) == MS_OK && got == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0,
          "flush → U+FFFD");
    CHECK(ms_tok_decode_next(t, &d, 9999, false, out, sizeof out, &got) == MS_ERR_RANGE, "bad id");
}

/* ---- malformed tokenizer.json ------------------------------------------------- */

#define PRE "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"
#define VOC "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}"

static void test_bad_json(void) {
    static const struct {
        const char *json;
        ms_status want;
    } cases[] = {
        /* the positive control: this one loads */
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[\"a b\"]}," PRE "}", MS_OK},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[[\"a\",\"b\"]]}," PRE
         ",\"decoder\":null,\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"}]}}",
         MS_OK},
        {"not json", MS_ERR_FORMAT},
        {"", MS_ERR_FORMAT},
        {"[1,2]", MS_ERR_FORMAT},
        {"{}", MS_ERR_NOT_FOUND},
        {"{\"model\":5}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"merges\":[]}," PRE "}", MS_ERR_NOT_FOUND},
        {"{\"model\":{\"type\":\"BPE\"," VOC "}," PRE "}", MS_ERR_NOT_FOUND},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":[],\"merges\":[]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":{}}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"WordPiece\"," VOC ",\"merges\":[]}," PRE "}", MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":7," VOC ",\"merges\":[]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":5},\"merges\":[]}," PRE "}", MS_ERR_RANGE},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":-1},\"merges\":[]}," PRE "}", MS_ERR_RANGE},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[\"a c\"]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[\"b a\"]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[\"ab\"]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[\"a b c\"]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[5]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[[\"a\"]]}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[],\"byte_fallback\":true}," PRE "}", MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[],\"dropout\":0.1}," PRE "}", MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[],\"unk_token\":\"zz\"}," PRE "}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}}", MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Whitespace\"}}",
         MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC
         ",\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{"
         "\"Regex\":\"(\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":"
         "false}]}}",
         MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC
         ",\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{"
         "\"Regex\":\"a\"},\"behavior\":\"Removed\"},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":"
         "false}]}}",
         MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC
         ",\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{"
         "\"Regex\":\"a\"},\"behavior\":\"Isolated\"}]}}",
         MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC
         ",\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true}}",
         MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]},\"pre_tokenizer\":5}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE ",\"normalizer\":{\"type\":\"NFKC\"}}",
         MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE
         ",\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Lowercase\"}]}}",
         MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE ",\"decoder\":{\"type\":\"WordPiece\"}}",
         MS_ERR_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE ",\"added_tokens\":{}}", MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE
         ",\"added_tokens\":[{\"id\":-1,\"content\":\"<x>\"}]}",
         MS_ERR_RANGE},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE
         ",\"added_tokens\":[{\"id\":99999999,\"content\":\"<x>\"}]}",
         MS_ERR_RANGE},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE
         ",\"added_tokens\":[{\"id\":\"3\",\"content\":\"<x>\"}]}",
         MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE ",\"added_tokens\":[{\"id\":3,\"content\":\"\"}]}",
         MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE
         ",\"added_tokens\":[{\"id\":3,\"content\":\"<x>\",\"special\":1}]}",
         MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE
         ",\"added_tokens\":[{\"id\":3,\"content\":\"<x>\"},{\"id\":3,\"content\":\"<y>\"}]}",
         MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE
         ",\"added_tokens\":[{\"id\":1,\"content\":\"<x>\"}]}",
         MS_ERR_FORMAT},
        {"{\"model\":{\"type\":\"BPE\"," VOC ",\"merges\":[]}," PRE ",\"added_tokens\":[{\"id\":1,\"content\":\"b\"}]}",
         MS_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ms_tok *t = NULL;
        ms_status st = ms_tok_load_hf_memory(cases[i].json, strlen(cases[i].json), "bad.json", &t);
        CHECK(st == cases[i].want, "case %zu: status %s, want %s: %s", i, ms_status_str(st),
              ms_status_str(cases[i].want), cases[i].json);
        CHECK((st == MS_OK) == (t != NULL), "case %zu: tokenizer returned with an error", i);
        if (t && i == 0) {
            expect_ids(t, "ab", false, (int32_t[]){2}, 1);
            expect_ids(t, "ba", false, (int32_t[]){1, 0}, 2);
        }
        ms_tok_free(&t);
    }
    ms_tok *t = NULL;
    CHECK(ms_tok_load_hf("/nonexistent/tokenizer.json", NULL, &t) == MS_ERR_IO && !t, "missing file");
}

/* ---- chat templates -------------------------------------------------------------
 * Expected strings derived by hand from the Jinja templates in
 * tokenizers/{llama3,qwen3}/tokenizer_config.json (see ms_chat.c). */

static void expect_chat(ms_chat_kind kind, const ms_chat_msg *m, int64_t n, bool gen, const char *want) {
    char *s = NULL;
    ms_status st = ms_chat_render(kind, m, n, gen, &s);
    CHECK(st == MS_OK && s && strcmp(s, want) == 0, "chat kind %d:\n got  \"%s\"\n want \"%s\"", kind, s ? s : "(null)",
          want);
    free(s);
}

static void test_chat(void) {
    const ms_chat_msg a[] = {{MS_ROLE_SYSTEM, "You are helpful.  "}, {MS_ROLE_USER, "  Hi!\n"}};
    expect_chat(MS_CHAT_LLAMA3, a, 2, true,
                "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_chat(MS_CHAT_LLAMA3, a, 2, false,
                "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
    /* trim is Python's str.strip(): U+3000 counts as whitespace */
    const ms_chat_msg b[] = {{MS_ROLE_USER, "Q"}, {MS_ROLE_ASSISTANT, " A \t"}, {MS_ROLE_USER, "Q2\xE3\x80\x80"}};
    expect_chat(MS_CHAT_LLAMA3, b, 3, true,
                "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");

    /* Qwen3: the old assistant turn loses its reasoning; the last one (after the
     * last user query) gets an empty think block */
    const ms_chat_msg c[] = {{MS_ROLE_SYSTEM, "S"},
                             {MS_ROLE_USER, "Q1"},
                             {MS_ROLE_ASSISTANT, "<think>\nr1\n</think>\n\nA1"},
                             {MS_ROLE_USER, "Q2"},
                             {MS_ROLE_ASSISTANT, "A2"}};
    expect_chat(MS_CHAT_CHATML, c, 5, false,
                "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n");
    const ms_chat_msg d[] = {
        {MS_ROLE_USER, "Q"}, {MS_ROLE_ASSISTANT, "<think>\nreason\n</think>\n\nans"}, {MS_ROLE_ASSISTANT, "more"}};
    expect_chat(MS_CHAT_CHATML, d, 3, true,
                "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nreason\n</think>\n\nans<|im_end|>\n"
                "<|im_start|>assistant\n<think>\n\n</think>\n\nmore<|im_end|>\n<|im_start|>assistant\n");
    const ms_chat_msg e[] = {{MS_ROLE_USER, "hi"}, {MS_ROLE_SYSTEM, "late sys"}};
    expect_chat(MS_CHAT_CHATML, e, 2, true,
                "<|im_start|>user\nhi<|im_end|>\n<|im_start|>system\nlate sys<|im_end|>\n<|im_start|>assistant\n");
    /* a user turn that is a wrapped tool response is not the last query */
    const ms_chat_msg f[] = {{MS_ROLE_USER, "Q"},
                             {MS_ROLE_ASSISTANT, "\n\nplain\n"},
                             {MS_ROLE_USER, "<tool_response>x</tool_response>"},
                             {MS_ROLE_ASSISTANT, "x<think>a<think>\nb\n</think>mid</think>\n\nend"}};
    expect_chat(MS_CHAT_CHATML, f, 4, false,
                "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n\n\nplain\n<|im_end|>\n"
                "<|im_start|>user\n<tool_response>x</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n<think>\nb\n</think>\n\nend<|im_end|>\n");
    expect_chat(MS_CHAT_CHATML, NULL, 0, true, "<|im_start|>assistant\n");

    char *s = NULL;
    CHECK(ms_chat_render(MS_CHAT_NONE, a, 2, true, &s) == MS_ERR_UNSUPPORTED && !s, "no template");
    const ms_chat_msg bad[] = {{MS_ROLE_USER, NULL}};
    CHECK(ms_chat_render(MS_CHAT_CHATML, bad, 1, true, &s) == MS_ERR_INVALID && !s, "NULL content");
}

/* ---- real tokenizers ------------------------------------------------------------- */

static void test_real(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tokenizers/qwen3", MS_SHARED_DIR);
    ms_tok *q = NULL, *l = NULL;
    if (ms_tok_load_dir(dir, &q) < 0) {
        CHECK(0, "load %s", dir);
        return;
    }
    snprintf(dir, sizeof dir, "%s/tokenizers/llama3", MS_SHARED_DIR);
    if (ms_tok_load_dir(dir, &l) < 0) {
        CHECK(0, "load %s", dir);
        ms_tok_free(&q);
        return;
    }
    /* NFC: "e" + U+0301 encodes as "é" for Qwen3, not for Llama-3 */
    ms_ids x = {0}, y = {0};
    ms_tok_encode(q, "cafe\xCC\x81 ok", strlen("cafe\xCC\x81 ok"), false, &x);
    ms_tok_encode(q, "caf\xC3\xA9 ok", strlen("caf\xC3\xA9 ok"), false, &y);
    CHECK(x.n == y.n && x.n > 0 && memcmp(x.v, y.v, (size_t)x.n * 4) == 0, "qwen3 NFC");
    x.n = y.n = 0;
    ms_tok_encode(l, "cafe\xCC\x81 ok", strlen("cafe\xCC\x81 ok"), false, &x);
    ms_tok_encode(l, "caf\xC3\xA9 ok", strlen("caf\xC3\xA9 ok"), false, &y);
    CHECK(!(x.n == y.n && memcmp(x.v, y.v, (size_t)x.n * 4) == 0), "llama3 has no normalizer");

    /* a rendered chat prompt encodes its special tokens as single ids */
    const ms_chat_msg m[] = {{MS_ROLE_USER, "Hi"}};
    char *p = NULL;
    ms_chat_render(ms_tok_chat_kind(l), m, 1, true, &p);
    x.n = 0;
    ms_tok_encode(l, p, strlen(p), true, &x);
    /* <|begin_of_text|> <|start_header_id|> user <|end_header_id|> ĊĊ Hi <|eot_id|> <|start_header_id|> assistant
     * <|end_header_id|> ĊĊ */
    const int32_t want[] = {128000, 128006, 882, 128007, 271, 13347, 128009, 128006, 78191, 128007, 271};
    CHECK(ids_eq(&x, want, 11), "llama3 chat prompt ids (%lld ids)", (long long)x.n);
    char *back = NULL;
    ms_tok_decode_all(l, x.v, x.n, false, &back);
    CHECK(back && strcmp(back, p) == 0, "llama3 chat prompt round trip");
    free(back);
    free(p);
    x.n = 0;
    ms_tok_encode(q, "<|im_start|>user\nHi<|im_end|>\n", strlen("<|im_start|>user\nHi<|im_end|>\n"), true, &x);
    CHECK(x.n >= 4 && x.v[0] == 151644 && x.v[x.n - 2] == 151645, "qwen3 specials");
    x.n = 0;
    ms_tok_encode(q, "<|im_start|>", strlen("<|im_start|>"), false, &x);
    CHECK(x.n > 1, "qwen3: specials are text without parse_special");

    test_stream_bytes(l, "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82");
    test_stream_bytes(q, "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82");
    ms_ids_free(&x);
    ms_ids_free(&y);
    ms_tok_free(&q);
    ms_tok_free(&l);
}

int main(void) {
    char *json = tiny_json();
    ms_tok *t = NULL;
    ms_status st = ms_tok_load_hf_memory(json, strlen(json), "tiny.json", &t);
    free(json);
    if (st < 0) {
        fprintf(stderr, "FAIL: tiny tokenizer does not load\n");
        return 1;
    }
    test_tiny(t);
    test_stream_bytes(t, "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82");
    test_stream_invalid(t);
    ms_tok_free(&t);
    test_bad_json();
    test_chat();
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/tokenizers/llama3/tokenizer.json", MS_SHARED_DIR);
    if (ms_file_exists(probe))
        test_real();
    else
        fprintf(stderr, "note: %s missing, real-tokenizer checks skipped\n", probe);
    if (g_fail)
        fprintf(stderr, "%d g_fail\n", g_fail);
    else
        fprintf(stderr, "all passed\n");
    return g_fail ? 1 : 0;
}
