# Block formats of GGUF weights (kernels/ms_quant.h): the scalar C
# dequantization against the `gguf` package's numpy one (bit for bit), the
# fast path against it, and the batch-invariant quantized linear.
ms_add_test(test_quant test_quant.c LABELS kernels TIMEOUT 300)
# Every tensor of the installed real GGUF models vs the gguf package
# (tests/quant_models_ref.py); needs common/ms_gguf.c. Minutes: ~2.4e9 elements.
ms_add_test(test_quant_models test_quant_models.c LABELS models TIMEOUT 900)
