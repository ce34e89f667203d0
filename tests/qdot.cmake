# Quantized matmul with 8-bit activations (kernels/ms_qdot.h): the scalar
# twin against a naive double dot, and at every instruction-set level this
# CPU has (ms_isa.h: avx2, avxvnni, avx512, amx here; neon, dotprod, i8mm on ARM) the
# quantizer against its definition, the fast path against the twin bitwise
# and batch/thread invariance; the accuracy bound versus the f32 ms_q_linear.
# The scalar twin is most of the time; under ASan on a busy 2-core VM one
# run took 410 s, hence 600.
ms_add_test(test_qdot test_qdot.c LABELS kernels TIMEOUT 600)
# The MS_ISA knob (kernels/ms_isa.h), one process per level, as the knob is
# read once: the kernels run the level asked for where the CPU has it (else
# the CPU's own), and no dtype takes a path above it; MS_NO_AMX=1, the older
# knob, is avx512. Milliseconds each; never skipped.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(MS_QDOT_CAPS "scalar;avx2;avxvnni;avx512;amx")
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(MS_QDOT_CAPS "scalar;neon;dotprod;i8mm")
endif()
foreach(cap ${MS_QDOT_CAPS})
  add_test(NAME test_qdot_isa_${cap} COMMAND test_qdot --isa-cap ${cap})
  set_tests_properties(test_qdot_isa_${cap} PROPERTIES LABELS kernels ENVIRONMENT "MS_ISA=${cap}" TIMEOUT 60)
endforeach()
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  add_test(NAME test_qdot_no_amx COMMAND test_qdot --isa-cap avx512)
  set_tests_properties(test_qdot_no_amx PROPERTIES LABELS kernels ENVIRONMENT "MS_NO_AMX=1;MS_ISA=" TIMEOUT 60)
endif()
