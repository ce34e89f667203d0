# EAGLE-1/2 draft head (draft-node/ms_eagle.c) against a naive double-precision
# reference written in the test (causal, tree masks reaching back, truncate,
# bias/dtype/GQA/RoPE variants, logits), plus bad files and bad inputs. Models
# come from microspec-mkmodel (target) and microspec-mkeagle (head).
ms_add_test(test_eagle test_eagle.c LIBS ms_draft LABELS draft eagle TIMEOUT 300)
target_sources(test_eagle PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/ref_model.c)
foreach(tool microspec-mkmodel microspec-mkeagle)
  if(TARGET ${tool})
    add_dependencies(test_eagle ${tool})
  endif()
endforeach()
# The head's config parser reads files from outside: fuzzed. ms_eagle.c is
# compiled into the target (not linked from ms_draft) so libFuzzer's coverage sees it.
ms_add_fuzz(fuzz_eagle_config fuzz/fuzz_eagle_config.c 20)
target_sources(fuzz_eagle_config PRIVATE ${CMAKE_SOURCE_DIR}/draft-node/ms_eagle.c)
target_include_directories(fuzz_eagle_config PRIVATE ${CMAKE_SOURCE_DIR}/draft-node)
