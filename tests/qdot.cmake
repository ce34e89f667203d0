# Quantized matmul with 8-bit activations (kernels/ms_qdot.h): the scalar
# twin against a naive double dot, the SIMD path against the twin bitwise,
# batch/thread invariance, and the accuracy bound versus the f32 ms_q_linear.
ms_add_test(test_qdot test_qdot.c LABELS kernels TIMEOUT 300)
