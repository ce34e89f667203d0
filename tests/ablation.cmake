# Ablations (draft-node/ms_vocab.* + ms_draft.*, tools/microspec_generate.c):
# the window stream (both / context / extension) against a naive recomputation
# and through the draft port; the indexed LM head against the gathered GEMM;
# greedy speculative == autoregressive for the new streams and the indexed
# head; the multi-turn batch mode (--turns) against independently built
# contexts, and the multi-message chat templates against hand-written golden
# strings with the real tokenizers. Shared parts skip with a message when
# ../shared is absent.
foreach(t test_ablation_window test_ablation_equiv test_ablation_turns)
  ms_add_test(${t} ${t}.c LIBS ms_target ms_draft ms_protocol LABELS ablation TIMEOUT 300)
  target_sources(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/spec_util.c)
  target_link_libraries(${t} PRIVATE PkgConfig::JANSSON)
  foreach(tool microspec-mkmodel microspec-mkeagle convert-llama2c microspec-generate)
    if(TARGET ${tool})
      add_dependencies(${t} ${tool})
    endif()
  endforeach()
endforeach()
