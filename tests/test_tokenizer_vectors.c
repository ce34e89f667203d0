/* Byte-level BPE against llama.cpp's tokenizer test vectors (produced by the
 * Hugging Face tokenizers library): every id of every string, for Llama-3
 * (ggml-vocab-llama-bpe) and Qwen3 (ggml-vocab-qwen2, same Qwen2 vocab and
 * pre-tokenizer), plus decode(encode(s)) == s. Also checks the bos/eos ids
 * and chat kind read from tokenizer_config.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_tokenizer.h"

#define SEP "\n__ggml_vocab_test__\n"

#include "ms_check.h"

static void print_ids(const char *what, const int32_t *v, int64_t n) {
    fprintf(stderr, "    %s:", what);
    for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", v[i]);
    fprintf(stderr, "\n");
}

static int run_vectors(const char *tok_dir, const char *vec_name, int32_t want_bos, const int32_t *want_eos,
                       int n_want_eos, ms_chat_kind want_kind) {
    char path[1024], inp_path[1024], out_path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/%s", MS_SHARED_DIR, tok_dir);
    snprintf(inp_path, sizeof inp_path, "%s/tokenizers/vectors/%s.inp", MS_SHARED_DIR, vec_name);
    snprintf(out_path, sizeof out_path, "%s/tokenizers/vectors/%s.out", MS_SHARED_DIR, vec_name);
    ms_tok *t = NULL;
    double t0 = ms_now_s();
    if (ms_tok_load_dir(path, &t) < 0) {
        CHECK(0, "cannot load %s", path);
        return 1;
    }
    fprintf(stderr, "%s: loaded in %.2f s, %lld ids\n", tok_dir, ms_now_s() - t0, (long long)ms_tok_vocab_size(t));
    CHECK(ms_tok_bos(t) == want_bos, "%s: bos %d, want %d", tok_dir, ms_tok_bos(t), want_bos);
    const int32_t *eos;
    int n_eos = ms_tok_eos(t, &eos);
    CHECK(n_eos == n_want_eos, "%s: %d eos ids, want %d", tok_dir, n_eos, n_want_eos);
    for (int i = 0; i < n_want_eos; i++)
        CHECK(ms_tok_is_eos(t, want_eos[i]), "%s: %d is not eos", tok_dir, want_eos[i]);
    CHECK(ms_tok_chat_kind(t) == want_kind, "%s: chat kind %d, want %d", tok_dir, ms_tok_chat_kind(t), want_kind);

    char *inp, *out;
    size_t inp_len, out_len;
    if (ms_read_file(inp_path, &inp, &inp_len) < 0 || ms_read_file(out_path, &out, &out_len) < 0) {
        CHECK(0, "cannot read %s", vec_name);
        return 1;
    }
    /* the .inp ends with a separator; the .out has one line per string */
    int n_strings = 0, bad = 0;
    char *s = inp, *o = out;
    for (;;) {
        char *sep = strstr(s, SEP);
        if (!sep) break;
        *sep = '\0';
        size_t slen = (size_t)(sep - s);
        char *nl = strchr(o, '\n');
        if (!nl) {
            CHECK(0, "%s: .out has fewer lines than .inp has strings", vec_name);
            break;
        }
        *nl = '\0';
        ms_ids want = {0};
        for (char *p = o; *p;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) break;
            ms_ids_push(&want, (int32_t)v);
            p = end;
        }
        ms_ids got = {0};
        ms_status st = ms_tok_encode(t, s, slen, false, &got);
        bool same = st == MS_OK && got.n == want.n && (want.n == 0 || memcmp(got.v, want.v, (size_t)want.n * 4) == 0);
        if (!same) {
            fprintf(stderr, "FAIL %s string %d \"%s\" (status %d)\n", vec_name, n_strings, s, st);
            print_ids("expected", want.v, want.n);
            print_ids("actual  ", got.v, got.n);
            bad++;
        }
        char *back = NULL;
        st = ms_tok_decode_all(t, got.v, got.n, false, &back);
        CHECK(st == MS_OK && back && strlen(back) == slen && memcmp(back, s, slen) == 0,
              "%s string %d: decode(encode(s)) = \"%s\", want \"%s\"", vec_name, n_strings, back ? back : "(null)", s);
        free(back);
        ms_ids_free(&want);
        ms_ids_free(&got);
        n_strings++;
        s = sep + strlen(SEP);
        o = nl + 1;
    }
    CHECK(n_strings >= 40, "%s: only %d strings parsed", vec_name, n_strings);
    CHECK(bad == 0, "%s: %d of %d strings encode wrongly", vec_name, bad, n_strings);
    g_fail += 0;
    fprintf(stderr, "%s with %s: %d strings, %d wrong\n", vec_name, tok_dir, n_strings, bad);
    free(inp);
    free(out);
    ms_tok_free(&t);
    return bad;
}

int main(void) {
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/tokenizers/vectors/ggml-vocab-llama-bpe.gguf.inp", MS_SHARED_DIR);
    if (!ms_file_exists(probe)) {
        fprintf(stderr, "skip: %s not found\n", probe);
        return 77;
    }
    /* Llama-3: bos <|begin_of_text|>; eos <|end_of_text|>, <|eot_id|> */
    const int32_t llama_eos[] = {128001, 128009};
    run_vectors("llama3", "ggml-vocab-llama-bpe.gguf", 128000, llama_eos, 2, MS_CHAT_LLAMA3);
    /* Qwen3: no bos; eos <|im_end|>, <|endoftext|> */
    const int32_t qwen_eos[] = {151645, 151643};
    run_vectors("qwen3", "ggml-vocab-qwen2.gguf", -1, qwen_eos, 2, MS_CHAT_CHATML);
    if (g_fail)
        fprintf(stderr, "%d g_fail\n", g_fail);
    else
        fprintf(stderr, "all passed\n");
    return g_fail ? 1 : 0;
}
