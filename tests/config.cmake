# Cluster configuration file (common/ms_config.c) and the microspec-config CLI:
# defaults, the example configs in cluster/configs, every class of bad input with
# its error code and line, path resolution, secrets kept out of logs and dumps,
# dump → parse round trips, and the CLI's --check/--get/--dump.
ms_add_test(test_config test_config.c LABELS config unit)
add_dependencies(test_config microspec-config)
ms_add_fuzz(fuzz_config fuzz/fuzz_config.c 20)
