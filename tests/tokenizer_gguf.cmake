# GGUF tokenizers (tokenizer.ggml.*): llama.cpp golden ids for Gemma 3 and
# Qwen2.5-Coder (tests/golden/tokenize, made by make.sh there), HF vectors,
# round trips, microspec-tokenize, bad metadata in tiny in-memory GGUF images,
# and the fuzz target over GGUF images.
ms_add_test(test_tokenizer_gguf test_tokenizer_gguf.c LABELS "tokenizer;models" TIMEOUT 600)
ms_add_fuzz(fuzz_tok_gguf fuzz/fuzz_tok_gguf.c 20)
