# Tokenizer: HF byte-level BPE (llama3, qwen3) against llama.cpp's vocab test
# vectors, llama2.c tok512 against a naive reference, streaming decode, bad
# input, chat templates, and the tokenizer.json fuzz target.
ms_add_test(test_tokenizer_vectors test_tokenizer_vectors.c LABELS tokenizer TIMEOUT 300)
ms_add_test(test_tokenizer_llama2c test_tokenizer_llama2c.c LABELS tokenizer TIMEOUT 120)
ms_add_test(test_tokenizer_unit test_tokenizer_unit.c LABELS tokenizer TIMEOUT 300)
ms_add_fuzz(fuzz_tokenizer_json fuzz/fuzz_tokenizer_json.c 20)
