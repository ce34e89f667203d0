# Model file formats: safetensors reader/writer, HF config.json, the llama2.c
# converter and the random test-model maker (tools/dev/microspec_mkmodel.c).
ms_add_test(test_safetensors test_safetensors.c LABELS formats TIMEOUT 120)
ms_add_test(test_hfconfig test_hfconfig.c LABELS formats)
ms_add_test(test_convert test_convert.c LABELS formats TIMEOUT 120)
# The tests run the tools from MS_BUILD_DIR/tools: build them first.
add_dependencies(test_safetensors microspec-mkmodel)
add_dependencies(test_convert convert-llama2c)

ms_add_fuzz(fuzz_safetensors fuzz/fuzz_safetensors.c 20)
ms_add_fuzz(fuzz_hfconfig fuzz/fuzz_hfconfig.c 20)
