#!/usr/bin/env python3
"""quant_ref.py DIR NAME... — the independent side of test_quant.

For each NAME (a ggml type name: F32, F16, BF16, Q4_0, ..., Q6_K), read the
raw blocks DIR/NAME.bin that test_quant wrote, dequantize them with the
`gguf` package (ggml's own numpy dequantization, gguf/quants.py) and write
the f32 result to DIR/NAME.f32 (little-endian). test_quant compares it with
ms_q_dequant_ref bit for bit.
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: quant_ref.py DIR NAME...", file=sys.stderr)
        return 2
    d = sys.argv[1]
    for name in sys.argv[2:]:
        raw = np.fromfile(os.path.join(d, name + ".bin"), dtype=np.uint8)
        out = dequantize(raw, GGMLQuantizationType[name])
        out = np.ascontiguousarray(out, dtype=np.float32).reshape(-1)
        out.astype("<f4", copy=False).tofile(os.path.join(d, name + ".f32"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
