# Cluster configuration file (common/ms_config.c) and the microspec-config CLI:
# defaults, the example configs in cluster/configs, every class of bad input with
# its error code and line, path resolution, secrets kept out of logs and dumps,
# dump → parse round trips, and the CLI's --check/--get/--dump.
ms_add_test(test_config test_config.c LABELS config unit)
add_dependencies(test_config microspec-config)
ms_add_fuzz(fuzz_config fuzz/fuzz_config.c 20)
# Issue 15: --help (exit 0, usage, no side effect) and an unknown option (exit
# 2) for every script in tools/ and cluster/ and every program the build made.
add_test(NAME test_cli_help COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_help.sh)
set_tests_properties(test_cli_help PROPERTIES LABELS "cli" TIMEOUT 600
  ENVIRONMENT "MS_BUILD_DIR=${CMAKE_BINARY_DIR};MS_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
