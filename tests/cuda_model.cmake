# Model runtime on CUDA (model/ms_model.c with opts.device = "cuda"): logits
# against the CPU model, tree / compaction / chunked-prefill properties,
# graphs vs eager bit-identity, random models; speculative == autoregressive
# on the GPU. Built only with CUDA; without a device at run time they exit 77
# (ctest: skipped). test_model_device (device parsing, CPU random models,
# refusal without CUDA) runs everywhere.
ms_add_test(test_model_device test_model_device.c LABELS model unit)
if(MS_HAVE_CUDA)
  ms_add_test(test_cuda_model test_cuda_model.c LIBS ms_kernels_cuda LABELS cuda TIMEOUT 600)
  target_sources(test_cuda_model PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/ref_model.c)
  if(TARGET microspec-mkmodel)
    add_dependencies(test_cuda_model microspec-mkmodel)
  endif()
  ms_add_test(test_cuda_spec test_cuda_spec.c LIBS ms_target ms_draft ms_protocol ms_kernels_cuda LABELS cuda spec
              TIMEOUT 900)
  target_sources(test_cuda_spec PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/spec_util.c)
  target_link_libraries(test_cuda_spec PRIVATE PkgConfig::JANSSON)
  foreach(tool microspec-mkmodel microspec-mkeagle)
    if(TARGET ${tool})
      add_dependencies(test_cuda_spec ${tool})
    endif()
  endforeach()
endif()
