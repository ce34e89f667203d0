# Integration tests of the two-node cluster (issue "disaggregated pair"): the
# real microspec-target and microspec-draft started on loopback (HTTP on a free
# port, the link on an ipc:// socket in a temporary folder, so the tests can run
# in parallel), driven with curl and with itest-tool (tests/integration/itest_tool.c:
# JSON, SSE, a disconnecting client, CURVE keys, raw ZeroMQ peers). Each script
# cleans up on exit (trap) and skips (77) when ../shared or network namespaces
# are missing. Label "integration"; `ctest -L integration`.
add_executable(itest-tool ${CMAKE_CURRENT_SOURCE_DIR}/integration/itest_tool.c)
target_link_libraries(itest-tool PRIVATE ms_protocol ms_common PkgConfig::JANSSON PkgConfig::ZMQ)

# name → timeout (s). The three equivalence tests split test 1 by draft kind.
set(MS_ITESTS
    cluster_equiv_layerskip 240
    cluster_equiv_lm 240
    cluster_equiv_eagle 240
    cluster_kill 180
    cluster_garbage 180
    cluster_clients 240
    cluster_auth 180
    cluster_twohosts 180
    cluster_stream 180
    cluster_ops 240
    cluster_launch 240
    cluster_hello 240
    cluster_promtool 180
    cluster_openai 180
    cluster_badpath 120
    cluster_restart 180
    cluster_probe 180
    cluster_front 180
    cluster_slurm 180
    readme_pairs 180)
while(MS_ITESTS)
  list(POP_FRONT MS_ITESTS name timeout)
  string(REGEX REPLACE "^cluster_equiv_.*" "cluster_equiv" script ${name})
  string(REGEX REPLACE "^cluster_equiv_" "" arg ${name})
  if(arg STREQUAL name)
    set(arg "")
  endif()
  add_test(NAME test_${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_${script}.sh ${arg})
  set(env "MS_BUILD_DIR=${CMAKE_BINARY_DIR}" "MS_SHARED_DIR=${MS_SHARED}" "MS_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  if(MS_SANITIZE)
    # Sanitized nodes run ~20x slower: fewer prompts, a longer link deadline.
    list(APPEND env "ITEST_SMALL=1")
  endif()
  set_tests_properties(test_${name} PROPERTIES
    LABELS integration
    TIMEOUT ${timeout}
    SKIP_RETURN_CODE 77
    ENVIRONMENT "${env}")
endwhile()
# Issue 35 point 8: no process a test starts outlives it (lib.sh's tag and
# detached watcher, tests/proc_guard.sh), on a timeout's tree kill too.
add_test(NAME test_proc_guard COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_proc_guard.sh)
set_tests_properties(test_proc_guard PROPERTIES LABELS integration TIMEOUT 120
  ENVIRONMENT "MS_BUILD_DIR=${CMAKE_BINARY_DIR}")
# Issue 34 point 3: the Kubernetes layouts of cluster/k8s/ against the schemas
# (PyPI kubernetes-validate), their references and configs; broken copies fail.
add_test(NAME test_k8s_manifests COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_k8s_manifests.sh ${CMAKE_BINARY_DIR})
set_tests_properties(test_k8s_manifests PROPERTIES LABELS integration TIMEOUT 180 SKIP_RETURN_CODE 77)
# Both nodes are single-threaded; two clusters at once on a 2-core machine
# already share the cores. ctest -j N runs them side by side (unique ports).

# Acceptance 3 of issue 14: the real Qwen2.5-Coder pair (1.5B target, 0.5B
# draft; tools/install-models.sh, skipped when they cannot be had) as two nodes
# in two network namespaces: the target's own text, and the same text across a
# kill -9 of the draft. Real models: not under the sanitizers (label models).
if(NOT MS_SANITIZE)
  add_test(NAME test_cluster_realpair COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cluster_realpair.sh)
  set_tests_properties(test_cluster_realpair PROPERTIES
    LABELS models
    TIMEOUT 1500
    SKIP_RETURN_CODE 77
    ENVIRONMENT "MS_BUILD_DIR=${CMAKE_BINARY_DIR};MS_SHARED_DIR=${MS_SHARED};MS_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()
