# DynaSpec (issue 16; draft-node/ms_dynaspec.c, tools/vocab/dynaspec_*.py,
# tools/vocab/microspec_record.c): k-means against a naive reference; the whole
# offline pipeline on a tiny GGUF with the C router forward and pick checked
# against the training tool and a naive union, the wrong-model refusal and the
# tools' --help (test_dynaspec.py); the same on the real Qwen2.5 0.5B draft
# (label models). The artefact goes through ms_gguf, fuzzed by fuzz_gguf.
# test_dynaspec (C) is driven by test_dynaspec.py with the files it makes: built here, not a test alone.
add_executable(test_dynaspec test_dynaspec.c)
target_link_libraries(test_dynaspec PRIVATE ms_draft ms_model ms_kernels ms_common)
target_include_directories(test_dynaspec PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME test_dynaspec_kmeans COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dynaspec_kmeans.py)
set_tests_properties(test_dynaspec_kmeans PROPERTIES SKIP_RETURN_CODE 77 LABELS dynaspec TIMEOUT 120)
add_test(NAME test_dynaspec_tiny COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dynaspec.py ${CMAKE_BINARY_DIR} tiny)
set_tests_properties(test_dynaspec_tiny PROPERTIES SKIP_RETURN_CODE 77 LABELS dynaspec TIMEOUT 300)
if(NOT MS_SANITIZE)
  add_test(NAME test_dynaspec_qwen COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dynaspec.py ${CMAKE_BINARY_DIR} qwen)
  set_tests_properties(test_dynaspec_qwen PROPERTIES SKIP_RETURN_CODE 77 LABELS "dynaspec;models" TIMEOUT 900)
endif()
