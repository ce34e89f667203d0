/* Fuzz target: tokenizer.json parsing (ms_tok_load_hf_memory) and, when a
 * tokenizer loads, encoding/decoding with it; also the fuzz input as text for
 * a small fixed valid tokenizer, where decode(encode(x)) == x must hold for
 * valid UTF-8 (every byte has a token, no normalizer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tokenizer.h"

/* 256 byte-level tokens (id = byte, GPT-2 bytes_to_unicode), a few merges
 * and added tokens; built once as a JSON string. */
static char *fixed_json(void) {
    size_t cap = 16384, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(
        s + n, cap - n,
        "{\"added_tokens\":["
        "{\"id\":261,\"content\":\"<|end|>\",\"special\":true},"
        "{\"id\":262,\"content\":\"<think>\",\"special\":false},"
        "{\"id\":263,\"content\":\"<|pad|>\",\"special\":true,\"lstrip\":true,\"rstrip\":true,\"single_word\":true}],"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{"
        "L}+|"
        "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
        "\"behavior\":\"Isolated\",\"invert\":false},"
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},"
        "\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{");
    int k = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        n += (size_t)snprintf(s + n, cap - n, "\"\\u%04x\":%d,", keep ? b : 256 + k++, b);
    }
    n += (size_t)snprintf(s + n, cap - n,
                          "\"\\u0120t\":256,\"he\":257,\"\\u0120the\":258,\"in\":259,\"\\u0120a\":260},"
                          "\"merges\":[\"\\u0120 t\",[\"h\",\"e\"],\"\\u0120t he\",\"i n\",\"\\u0120 a\"]}}");
    return s;
}

static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        int need = c < 0x80                 ? 1
                   : c >= 0xC2 && c <= 0xDF ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
        if (need == 0 || i + (size_t)need > n) return false;
        for (int k = 1; k < need; k++) {
            uint8_t d = s[i + (size_t)k];
            if ((d & 0xC0) != 0x80) return false;
            if (k == 1 && ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F) || (c == 0xF0 && d < 0x90) ||
                           (c == 0xF4 && d > 0x8F)))
                return false;
        }
        i += (size_t)need;
    }
    return true;
}

static void encode_decode(const ms_tok *t, const char *text, size_t len, bool special, bool must_round_trip) {
    ms_ids ids = {0};
    if (ms_tok_encode(t, text, len, special, &ids) == MS_OK) {
        for (int64_t i = 0; i < ids.n; i++)
            if (ids.v[i] < 0 || ids.v[i] >= ms_tok_vocab_size(t)) abort();
        char *back = NULL;
        if (ms_tok_decode_all(t, ids.v, ids.n, false, &back) != MS_OK) abort();
        if (must_round_trip && (strlen(back) != len || memcmp(back, text, len) != 0)) abort();
        free(back);
        if (ms_tok_decode_all(t, ids.v, ids.n, true, &back) == MS_OK) free(back);
    } else if (must_round_trip) {
        abort();
    }
    ms_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ms_tok *fixed;
    if (!fixed) {
        ms_log_set_level(MS_LOG_OFF);
        char *j = fixed_json();
        if (ms_tok_load_hf_memory(j, strlen(j), "fixed.json", &fixed) != MS_OK) abort();
        free(j);
    }
    ms_tok *t = NULL;
    if (ms_tok_load_hf_memory((const char *)data, size, "fuzz.json", &t) == MS_OK) {
        static const char *texts[] = {"Hello world",       " the in a", "héllo 世界 🙂",
                                      "<|end|> x <think>", "",          "\n\n  \t 123456"};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            encode_decode(t, texts[i], strlen(texts[i]), true, false);
            encode_decode(t, texts[i], strlen(texts[i]), false, false);
        }
        const int32_t *eos;
        (void)ms_tok_eos(t, &eos);
        (void)ms_tok_find(t, "a");
        ms_tok_free(&t);
    }
    /* no NUL inside: decode_all returns a C string */
    bool text_ok = memchr(data, 0, size) == NULL && valid_utf8(data, size);
    encode_decode(fixed, (const char *)data, size, true, false); /* <|pad|> strips spaces */
    encode_decode(fixed, (const char *)data, size, false, text_ok);
    return 0;
}
