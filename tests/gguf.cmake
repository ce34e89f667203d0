# GGUF reader (common/ms_gguf.c): unit and bad-input tests on files the test
# writes itself; golden comparison with ggml's Python `gguf` reader on the
# installed real models (skipped without python gguf or without models); fuzz.
ms_add_test(test_gguf test_gguf.c LABELS formats TIMEOUT 120)
add_test(NAME test_gguf_golden COMMAND test_gguf --golden)
set_tests_properties(test_gguf_golden PROPERTIES SKIP_RETURN_CODE 77 LABELS formats TIMEOUT 600)

ms_add_fuzz(fuzz_gguf fuzz/fuzz_gguf.c 20)
