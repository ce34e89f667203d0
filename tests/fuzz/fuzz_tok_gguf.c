/* Fuzz target: GGUF tokenizer metadata (ms_gguf_open_memory +
 * ms_tok_load_gguf) and, when a tokenizer loads, encoding and decoding with
 * it: a fixed text with and without special-token parsing, and the input
 * itself as text. Nothing may crash, leak or read out of bounds; every id an
 * encoder returns must be in the vocabulary. Seeds: the tiny gpt2 and llama
 * images of tests/test_tokenizer_gguf.c (its --write-corpus mode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_gguf.h"
#include "ms_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void encode_decode(const ms_tok *t, const char *text, size_t len, bool special) {
    ms_ids ids = {0};
    if (ms_tok_encode(t, text, len, special, &ids) == MS_OK) {
        for (int64_t i = 0; i < ids.n; i++)
            if (ids.v[i] < 0 || ids.v[i] >= ms_tok_vocab_size(t)) abort(); /* an id outside the vocabulary */
        char *back = NULL;
        if (ms_tok_decode_all(t, ids.v, ids.n, false, &back) == MS_OK) free(back);
    }
    ms_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) {
        ms_log_set_level(MS_LOG_OFF);
        quiet = true;
    }
    ms_gguf *g = NULL;
    if (ms_gguf_open_memory(data, size, "fuzz.gguf", &g) != MS_OK) return 0;
    ms_tok *t = NULL;
    if (ms_tok_load_gguf(g, &t) == MS_OK) {
        static const char fixed[] = "ab ab\n\n<|end|> c<ctl>\xE2\x96\x81 \xF0\x9F\x98\x80\xFF";
        encode_decode(t, fixed, sizeof fixed - 1, false);
        encode_decode(t, fixed, sizeof fixed - 1, true);
        encode_decode(t, (const char *)data, size < 4096 ? size : 4096, true);
        ms_tok_free(&t);
    }
    ms_gguf_close(&g);
    return 0;
}
