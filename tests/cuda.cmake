# CUDA op table (kernels/cuda): every op against its C twin on seeded, odd-sized
# inputs with guarded, poisoned device outputs. Built only when nvcc is found
# (MS_CUDA AUTO/ON); without a GPU at run time it exits 77 → ctest SKIPPED.
if(MS_HAVE_CUDA)
  ms_add_test(test_cuda_ops test_cuda_ops.c LIBS ms_kernels_cuda LABELS cuda unit TIMEOUT 300)
  # Dynamic vocabulary window on the device vs the CPU twin (draft-node/ms_vocab.c).
  ms_add_test(test_cuda_vocab test_cuda_vocab.c LIBS ms_kernels_cuda ms_draft LABELS cuda unit TIMEOUT 300)
endif()
# The draft head interface (draft-node/ms_head.h) on the device against the
# same interface on the host: window twins in step, same top-k. Host checks
# first; without a GPU it exits 77 (skipped).
if(MS_HAVE_CUDA)
  ms_add_test(test_cuda_head test_cuda_head.c LIBS ms_draft ms_kernels_cuda LABELS cuda unit TIMEOUT 300)
endif()
