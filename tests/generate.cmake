# End-to-end checks of the generate CLI and the converter on the real model.
add_test(NAME golden_stories260k
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_golden_stories.sh ${CMAKE_BINARY_DIR} ${MS_SHARED})
set_tests_properties(golden_stories260k PROPERTIES SKIP_RETURN_CODE 77 LABELS e2e TIMEOUT 300)
add_test(NAME generate_cli_errors
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_generate_cli.sh ${CMAKE_BINARY_DIR})
set_tests_properties(generate_cli_errors PROPERTIES LABELS e2e)
