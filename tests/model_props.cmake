# Model runtime and kernels against an independent double-precision reference
# (tests/ref_model.c) and against their own properties (tree == path-by-path,
# compaction == recompute, chunked prefill == one shot).
function(ms_add_ref_test name src)
  ms_add_test(${name} ${src} ${ARGN})
  target_sources(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/ref_model.c)
  # The model tests generate their models with microspec-mkmodel.
  if(TARGET microspec-mkmodel)
    add_dependencies(${name} microspec-mkmodel)
  endif()
endfunction()

ms_add_ref_test(test_kernels_ref test_kernels_ref.c LABELS kernels)
# No if(EXISTS): a renamed or removed source stops the configure instead of
# dropping its test from the suite unnoticed.
foreach(t ref tree prefill)
  ms_add_ref_test(test_model_${t} test_model_${t}.c LABELS model TIMEOUT 300)
endforeach()
