# Tensor transports between the nodes (protocol/ms_xfer.h): the negotiation
# table, host frames through two real links bit-exact, bad announcements refused
# while the receiver keeps serving (CPU, always); CUDA IPC between two forked
# processes on one GPU and NCCL between two GPUs (label cuda; each reports
# skipped, exit 77, when its hardware is absent).
ms_add_test(test_xfer test_xfer.c LIBS ms_protocol LABELS protocol unit TIMEOUT 120)
if(MS_HAVE_CUDA)
  ms_add_test(test_cuda_xfer test_cuda_xfer.c LIBS ms_protocol ms_kernels_cuda ARGS ipc LABELS cuda protocol TIMEOUT 300)
  ms_add_test(test_cuda_xfer_nccl test_cuda_xfer.c LIBS ms_protocol ms_kernels_cuda ARGS nccl LABELS cuda protocol
              TIMEOUT 300)
endif()
