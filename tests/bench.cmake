# The benchmark driver and report (tools/bench/microspec_bench.sh,
# tools/bench/microspec_report.sh) on a reduced real set with MT-bench second turns,
# an ablation row, a two-node cluster row and (without a GPU) a GPU row that
# must be reported as skipped: every table row and column present, numbers
# parse, AR speedup and accepted length 1.00, the summary agrees with the
# per-question results, the three figures real PNGs (png_info,
# tests/png_check.h) whose scripts carry a title, axis labels and a legend.
# Skipped without ../shared; the PNG sub-checks without gnuplot.
add_executable(png_info png_info.c)
target_include_directories(png_info PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(png_info PRIVATE ms_common)
# Under tests/proc_guard.sh: the clusters it launches die with it, timeout included (issue 35).
add_test(NAME bench_reduced
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/proc_guard.sh run
                 bash ${CMAKE_CURRENT_SOURCE_DIR}/test_bench.sh ${CMAKE_BINARY_DIR} ${MS_SHARED})
set_tests_properties(bench_reduced PROPERTIES SKIP_RETURN_CODE 77 LABELS bench TIMEOUT 300)
if(MS_SANITIZE)
  # Under ASan/UBSan the same checks on a smaller run (1 prompt per category, 8 tokens).
  set_tests_properties(bench_reduced PROPERTIES ENVIRONMENT "BENCH_SMALL=1" TIMEOUT 600)
endif()
# Spec-Bench's training split (the prompts the offline vocabulary tools may
# record on) against an independent rule: never selected for evaluation.
add_test(NAME test_bench_split COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_split.py
         $<TARGET_FILE:microspec-bench-prompts> ${MS_SHARED})
set_tests_properties(test_bench_split PROPERTIES SKIP_RETURN_CODE 77 LABELS bench TIMEOUT 60)
