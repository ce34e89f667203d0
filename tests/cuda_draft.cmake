# The draft's LM head and MicroSpec window on the device (draft-node/ms_draft.c
# with a CUDA lm draft) against the same draft with its head on the host, over
# a scripted begin / draft / accept sequence: every vocabulary mode × gathered /
# indexed × the three window streams; device window == CPU window; no window
# host syncs inside rounds. Built only with CUDA; without a device at run time
# it exits 77 (ctest: skipped).
if(MS_HAVE_CUDA)
  ms_add_test(test_cuda_draft test_cuda_draft.c LIBS ms_target ms_draft ms_protocol ms_kernels_cuda LABELS cuda draft
              TIMEOUT 600)
  target_sources(test_cuda_draft PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/spec_util.c)
  target_link_libraries(test_cuda_draft PRIVATE PkgConfig::JANSSON)
  if(TARGET microspec-mkmodel)
    add_dependencies(test_cuda_draft microspec-mkmodel)
  endif()
endif()
# The stream plans that feed the device window twin (draft-node/ms_vocab.c,
# ms_head.h): a twin vocabulary replaying only the plans equals the original.
# CPU only.
ms_add_test(test_vocab_plan test_vocab_plan.c LIBS ms_draft LABELS vocab unit)
