# Quantized matmul with 8-bit activations (kernels/ms_qdot.h): the scalar
# twin against a naive double dot, the SIMD path against the twin bitwise,
# batch/thread invariance, and the accuracy bound versus the f32 ms_q_linear.
# On a CPU with AMX the fast path mixes AMX (Q4_K at n ≥ 5, Q6_K and Q8_0 at
# n ≥ 8) and VNNI (the rest); test_qdot_noamx runs the same checks with
# AMX turned off (MS_NO_AMX=1), so the VNNI-only dispatch is covered too.
# The scalar twin is most of the time; under ASan on a busy 2-core VM one
# run took 410 s, hence 600.
ms_add_test(test_qdot test_qdot.c LABELS kernels TIMEOUT 600)
add_test(NAME test_qdot_noamx COMMAND test_qdot)
set_tests_properties(test_qdot_noamx PROPERTIES ENVIRONMENT "MS_NO_AMX=1" LABELS kernels TIMEOUT 600
                                                SKIP_RETURN_CODE 77)
