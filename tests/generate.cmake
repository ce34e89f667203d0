# End-to-end checks of the generate CLI and the converter on the real model.
# golden_stories260k: f32 byte for byte against llama2.c's run.c; the bf16
# conversion's greedy ids against the double-precision reference
# (tests/ref_model.c) through ref-greedy-check.
add_executable(ref-greedy-check ref_greedy_check.c ref_model.c test_fs.c)
target_link_libraries(ref-greedy-check PRIVATE ms_model ms_kernels ms_common PkgConfig::JANSSON)
target_include_directories(ref-greedy-check PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(ref-greedy-check PRIVATE MS_SHARED_DIR="${MS_SHARED}" MS_BUILD_DIR="${CMAKE_BINARY_DIR}"
                                                    MS_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME golden_stories260k
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_golden_stories.sh ${CMAKE_BINARY_DIR} ${MS_SHARED})
set_tests_properties(golden_stories260k PROPERTIES SKIP_RETURN_CODE 77 LABELS e2e TIMEOUT 300)
add_test(NAME generate_cli_errors
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_generate_cli.sh ${CMAKE_BINARY_DIR})
set_tests_properties(generate_cli_errors PROPERTIES LABELS e2e)
