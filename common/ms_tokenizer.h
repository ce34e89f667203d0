/* ms_tokenizer.h — tokenizers and chat templates.
 *
 * Three sources (one file each: ms_tok_hf.c, ms_tok_llama2c.c, ms_tok_gguf.c;
 * the encoders in ms_tok_bpe.c and ms_tok_spm.c):
 *  - Hugging Face tokenizer.json, byte-level BPE (GPT-2 byte↦unicode map) with
 *    the pre-tokenizer's Split regex run through PCRE2 (UTF, UCP), merges by
 *    rank, `ignore_merges` (Llama-3: a pre-split word that is itself a vocab
 *    entry is not merged), added/special tokens matched before the regex.
 *  - llama2.c tokenizer.bin (SentencePiece-style: scores, <0xXX> byte tokens,
 *    merges by best score, leading-space prepending), e.g. tok512.bin.
 *  - GGUF metadata (tokenizer.ggml.*), encoding as llama.cpp does: "gpt2"
 *    (byte-level BPE, merges by rank, pre-tokenizer regex named by
 *    tokenizer.ggml.pre: qwen2, llama-bpe) and "llama" (SentencePiece-style:
 *    merges by best score over UTF-8 characters, ' ' written U+2581, <0xXX>
 *    byte fallback, optional space prefix — Gemma has none). Control and
 *    user-defined tokens are cut out of the text first, longest first.
 *
 * Decoding is streaming-safe: ms_tok_decoder holds back the bytes of an
 * incomplete UTF-8 sequence until the token that completes it arrives.
 */
#ifndef MS_TOKENIZER_H
#define MS_TOKENIZER_H

#include "ms_common.h"

typedef struct ms_tok ms_tok;

typedef enum { MS_CHAT_NONE = 0, MS_CHAT_LLAMA3, MS_CHAT_CHATML } ms_chat_kind;

/* Load tokenizer.json (and, if `config_path` is non-NULL and exists,
 * tokenizer_config.json for bos/eos and the chat template kind). */
ms_status ms_tok_load_hf(const char *tokenizer_json, const char *config_path, ms_tok **out);
/* Parse tokenizer.json from memory (fuzz target, tests). */
ms_status ms_tok_load_hf_memory(const char *json, size_t len, const char *name, ms_tok **out);
/* Load a llama2.c tokenizer.bin with `vocab_size` entries. */
ms_status ms_tok_load_llama2c(const char *path, int64_t vocab_size, ms_tok **out);
/* Load from a model directory: tokenizer.json (+ tokenizer_config.json) if
 * present, else tokenizer.bin (vocab size read from config.json). */
ms_status ms_tok_load_dir(const char *dir, ms_tok **out);
/* Load from a GGUF reader's metadata (everything is copied: the reader may
 * be closed afterwards). Errors name the file and the key. */
typedef struct ms_gguf ms_gguf;
ms_status ms_tok_load_gguf(const ms_gguf *g, ms_tok **out);
/* A .gguf file (detected by its magic), a model directory (ms_tok_load_dir)
 * or a tokenizer.json file (with tokenizer_config.json from its folder, where
 * present). */
ms_status ms_tok_load_path(const char *path, ms_tok **out);
void ms_tok_free(ms_tok **t);

int64_t ms_tok_vocab_size(const ms_tok *t); /* number of ids incl. added tokens */
int32_t ms_tok_bos(const ms_tok *t);        /* -1 if none */
/* Whether a prompt starts with BOS: GGUF tokenizer.ggml.add_bos_token, else
 * llama.cpp's default (true for "llama" and llama-bpe, false for other gpt2);
 * HF and llama2.c: true when there is a BOS id. */
bool ms_tok_add_bos(const ms_tok *t);
/* End-of-generation ids (eos and, for chat models, end-of-turn). */
int ms_tok_eos(const ms_tok *t, const int32_t **ids);
bool ms_tok_is_eos(const ms_tok *t, int32_t id);
/* Id of an exact token string (added or regular), or -1. */
int32_t ms_tok_find(const ms_tok *t, const char *piece);
ms_chat_kind ms_tok_chat_kind(const ms_tok *t);

/* Append the ids of `text` (len bytes, UTF-8) to `out`. With
 * `parse_special`, added/special tokens written in the text are recognised.
 * No BOS is added (callers add ms_tok_bos explicitly). For llama2.c
 * tokenizers a leading space is prepended as SentencePiece does. */
ms_status ms_tok_encode(const ms_tok *t, const char *text, size_t len, bool parse_special, ms_ids *out);

/* The raw bytes a token stands for (after byte-level / <0xXX> decoding). */
ms_status ms_tok_token_bytes(const ms_tok *t, int32_t id, const uint8_t **bytes, size_t *len);

/* Streaming decoder. Holds ≤ 3 pending bytes of an unfinished UTF-8 char. */
typedef struct {
    uint8_t pending[8];
    int n_pending;
    int32_t prev_id; /* llama2.c: a leading space after BOS is dropped */
} ms_tok_decoder;
void ms_tok_decoder_init(ms_tok_decoder *d);
/* Decode one id; appends complete UTF-8 text to out (cap bytes), sets *n.
 * Special/control tokens decode to their text unless skip_special. */
ms_status ms_tok_decode_next(const ms_tok *t, ms_tok_decoder *d, int32_t id, bool skip_special, char *out,
                             size_t cap, size_t *n);
/* Flush held-back bytes (invalid UTF-8 at end of stream → U+FFFD). */
ms_status ms_tok_decode_flush(ms_tok_decoder *d, char *out, size_t cap, size_t *n);
/* Decode a whole id list into a malloc'd NUL-terminated string. */
ms_status ms_tok_decode_all(const ms_tok *t, const int32_t *ids, int64_t n, bool skip_special, char **text);

/* Chat templates rendered in C (no Jinja). */
typedef enum { MS_ROLE_SYSTEM = 0, MS_ROLE_USER, MS_ROLE_ASSISTANT } ms_chat_role;
typedef struct {
    ms_chat_role role;
    const char *content;
} ms_chat_msg;
/* Render messages as the model's chat template would (Llama-3: begin_of_text,
 * header ids, eot; ChatML: <|im_start|>role\n...<|im_end|>\n), with the
 * assistant header appended when add_generation_prompt. Returns malloc'd text
 * to be encoded with parse_special = true. */
ms_status ms_chat_render(ms_chat_kind kind, const ms_chat_msg *msgs, int64_t n, bool add_generation_prompt,
                         char **text);

#endif
