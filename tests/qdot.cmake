# Quantized matmul with 8-bit activations (kernels/ms_qdot.h): the scalar
# twin against a naive double dot, and at every instruction-set level this
# CPU has (ms_isa.h: avx2, avx512, amx here; neon, dotprod, i8mm on ARM) the
# quantizer against its definition, the fast path against the twin bitwise
# and batch/thread invariance; the accuracy bound versus the f32 ms_q_linear.
# The scalar twin is most of the time; under ASan on a busy 2-core VM one
# run took 410 s, hence 600.
ms_add_test(test_qdot test_qdot.c LABELS kernels TIMEOUT 600)
