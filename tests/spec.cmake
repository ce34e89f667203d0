# Speculative core acceptance tests (target-node/ms_target.c + draft-node/ms_draft.c,
# docs/architecture.md §4-§5): greedy output == autoregressive for every draft kind × vocabulary
# mode × tree shape, and under the draft policies (confidence stop p_min, adaptive depth); wrong and failing drafts; lossless sampling (chi-square against
# the target's exact distribution, with a deliberately broken verifier that must be
# caught); statistics consistency. Models are made in temporary folders with the
# built tools; shared parts (stories260K, Spec-Bench, the Qwen3 tokenizer) are
# skipped with a message when ../shared is absent. SPEC_SMALL=1 (automatic under
# ASan) shrinks prompt counts and sample sizes.
set(MS_SPEC_TESTS test_spec_equiv test_spec_faults test_spec_sampling test_spec_stats test_spec_policy)
# No if(EXISTS): a renamed or removed source stops the configure instead of
# dropping its test from the suite unnoticed.
foreach(t ${MS_SPEC_TESTS})
  ms_add_test(${t} ${t}.c LIBS ms_target ms_draft ms_protocol LABELS spec TIMEOUT 600)
  target_sources(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/spec_util.c ${CMAKE_CURRENT_SOURCE_DIR}/chi2.c)
  target_link_libraries(${t} PRIVATE PkgConfig::JANSSON)
  foreach(tool microspec-mkmodel microspec-mkeagle convert-llama2c)
    if(TARGET ${tool})
      add_dependencies(${t} ${tool})
    endif()
  endforeach()
endforeach()
# SpecVocab (issue 16): the C pick against a naive re-computation from the
# artefact, artefacts for another model refused with the text checked, the
# selection step's union with the window. Artefacts are built at test time by
# tools/vocab/specvocab_build.py (python3 + numpy + gguf).
ms_add_test(test_specvocab test_specvocab.c LIBS ms_target ms_draft ms_protocol LABELS spec vocab TIMEOUT 300)
target_sources(test_specvocab PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/spec_util.c)
target_link_libraries(test_specvocab PRIVATE PkgConfig::JANSSON)
add_dependencies(test_specvocab microspec-mkmodel)
# The SVD of tools/vocab/specvocab_build.py against numpy's own SVD on a small seeded
# head, the artefact's KVs, Q8_0 against F32, bad arguments refused.
add_test(NAME test_specvocab_build COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_specvocab_build.py
         ${CMAKE_SOURCE_DIR}/tools/vocab/specvocab_build.py)
set_tests_properties(test_specvocab_build PROPERTIES LABELS "spec;vocab" TIMEOUT 300 SKIP_RETURN_CODE 77)
