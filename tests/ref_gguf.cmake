# Reference data for the real GGUF models (tests/ref, tests/golden/gguf) and
# the greedy acceptance checker applied to this engine's output against
# llama.cpp (tests/gguf_greedy_check.py). The checker's own test uses
# synthetic greedy files with known margins plus the committed golden files.
add_test(NAME test_gguf_greedy_check
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_greedy_check.py)
set_tests_properties(test_gguf_greedy_check PROPERTIES LABELS ref_gguf TIMEOUT 120)
