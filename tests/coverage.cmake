# The model-free coverage study (tools/dev/microspec_coverage.c,
# tools/dev/coverage_report.sh): a hand-made case with exact answers (always), and
# the report script on a reduced real set checked for consistency and for real
# PNG output (skipped without ../shared).
ms_add_test(test_coverage test_coverage.c ARGS hand LABELS coverage TIMEOUT 60)
add_dependencies(test_coverage microspec-coverage)
add_test(NAME test_coverage_data COMMAND test_coverage data)
set_tests_properties(test_coverage_data PROPERTIES SKIP_RETURN_CODE 77 LABELS coverage TIMEOUT 300)
