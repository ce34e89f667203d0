# GGUF tokenizers (tokenizer.ggml.*): llama.cpp golden ids for Gemma 3 and
# Qwen2.5-Coder (tests/golden/tokenize, made by make.sh there), HF vectors,
# round trips, microspec-tokenize, bad metadata in tiny in-memory GGUF images,
# and the fuzz target over GGUF images.
ms_add_test(test_tokenizer_gguf test_tokenizer_gguf.c LIBS PkgConfig::SODIUM LABELS "tokenizer;models" TIMEOUT 600)
ms_add_fuzz(fuzz_tok_gguf fuzz/fuzz_tok_gguf.c 20)

# Gemma 3: the GGUF vocabulary against Hugging Face's own tokenizer.json, encoded by
# Hugging Face's `tokenizers` library (pip; skipped when absent).
if(NOT MS_SANITIZE) # 689 tokenizer runs; the ASan build checks the same code through test_tokenizer_gguf
  add_test(NAME test_gemma_hf_tokenizer
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_gemma_hf_tokenizer.py ${CMAKE_BINARY_DIR} ${MS_SHARED})
  set_tests_properties(test_gemma_hf_tokenizer PROPERTIES SKIP_RETURN_CODE 77 LABELS "tokenizer;models" TIMEOUT 600)
endif()
