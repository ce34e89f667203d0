# The real GGUF models (installed by tools/install-models.sh into a cache
# outside the clone; a test skips when they cannot be had): log-softmax
# against a separately written float64 reference, batch invariance. Not under
# the sanitizers (that suite keeps to small models).
if(NOT MS_SANITIZE)
  ms_add_test(test_gguf_logits test_gguf_logits.c ARGS gemma3-270m q8 LABELS models TIMEOUT 900)
  foreach(spec "gemma3-270m;f32" "qwen2.5-coder-0.5b;q8" "qwen2.5-coder-0.5b;f32" "qwen2.5-coder-1.5b;q8"
               "qwen2.5-coder-1.5b;f32")
    list(GET spec 0 model)
    list(GET spec 1 path)
    add_test(NAME test_gguf_logits_${model}_${path} COMMAND test_gguf_logits ${model} ${path})
    set_tests_properties(test_gguf_logits_${model}_${path} PROPERTIES SKIP_RETURN_CODE 77 LABELS models TIMEOUT 900)
  endforeach()
endif()

# Lossless sampling on a real model: chi-square of the verifier's first two
# tokens against the exact target distribution, every vocabulary mode.
if(NOT MS_SANITIZE)
  ms_add_test(test_gguf_sampling test_gguf_sampling.c LIBS ms_target ms_draft ms_protocol LABELS models TIMEOUT 900)
  target_sources(test_gguf_sampling PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/chi2.c)
endif()

# Greedy text against llama.cpp's on the same files (tests/golden/gguf/greedy_*.json):
# the default 8-bit path on all 10 prompts of each model; the exact path
# (--f32-matmul) on Gemma 3's 10 and the 1.5B's first 4 (the script runs all
# 10 when called without the count).
if(NOT MS_SANITIZE)
  foreach(spec "gemma3-270m;10;q8" "qwen2.5-coder-0.5b;10;q8" "qwen2.5-coder-1.5b;10;q8" "gemma3-270m;10;f32"
               "qwen2.5-coder-1.5b;4;f32")
    list(GET spec 0 model)
    list(GET spec 1 count)
    list(GET spec 2 path)
    set(name test_gguf_greedy_${model})
    if(path STREQUAL "f32")
      set(name ${name}_f32)
    endif()
    add_test(NAME ${name}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_greedy.sh ${CMAKE_BINARY_DIR} ${model} ${count} ${path})
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS models TIMEOUT 1200)
  endforeach()
endif()

# Speculative == autoregressive on the real models, every vocabulary mode.
if(NOT MS_SANITIZE)
  foreach(which gemma qwen)
    add_test(NAME test_gguf_spec_${which}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_spec.sh ${CMAKE_BINARY_DIR} ${which} 2 24)
    set_tests_properties(test_gguf_spec_${which} PROPERTIES SKIP_RETURN_CODE 77 LABELS models TIMEOUT 1800)
  endforeach()
endif()

# Bad model files (made with the gguf package's writer): a clear error naming
# the key or tensor, no crash. Small: runs under the sanitizers too.
add_test(NAME test_gguf_bad_model COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_bad_model.py ${CMAKE_BINARY_DIR})
set_tests_properties(test_gguf_bad_model PROPERTIES SKIP_RETURN_CODE 77 LABELS formats TIMEOUT 300)

# The README's "Using the engine" block, run as written (real models, ../shared).
if(NOT MS_SANITIZE)
  add_test(NAME test_readme_examples
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_readme_examples.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(test_readme_examples PROPERTIES SKIP_RETURN_CODE 77 LABELS models TIMEOUT 1200)
endif()
