# Draft LM head on the device (kernels/cuda/ms_k_cuda_lmhead.cu): full, static,
# dynamic packed and indexed heads against a double reference, the dynamic ones
# driven through a real ms_k_cuda_vocab window next to the CPU twin. Built only
# when nvcc is found; without a GPU at run time it exits 77 → ctest SKIPPED.
if(MS_HAVE_CUDA)
  ms_add_test(test_cuda_lmhead test_cuda_lmhead.c LIBS ms_kernels_cuda ms_draft LABELS cuda unit TIMEOUT 300)
endif()
