#!/usr/bin/env python3
"""quant_models_ref.py OUT MODEL.gguf... — the independent side of test_quant_models.

For every tensor of every file (GGUFReader, file order) write one line
    <file basename> <tensor name> <type name> <elements> <hash, 16 hex digits>
to OUT, where the hash is of the tensor's f32 dequantization by the `gguf`
package (gguf.quants.dequantize). test_quant_models writes the same lines from
ms_q_dequant_ref and compares them.

Hash (the C side computes the same): over the f32 bit patterns b[i] of the
whole tensor, i = 0..n-1 in memory order,
    x = (b[i] ^ (i * K1)) * K2;  x ^= x >> 31;  h += x      (all mod 2^64)
Each term is a bijection of b[i], so any single changed bit changes h.

Memory stays bounded: a tensor is dequantized CHUNK blocks at a time.
"""
import os
import sys

import numpy as np
from gguf import GGUFReader, GGML_QUANT_SIZES
from gguf.quants import dequantize

K1 = np.uint64(0x9E3779B97F4A7C15)
K2 = np.uint64(0xBF58476D1CE4E5B9)
S31 = np.uint64(31)
CHUNK_ELEMS = 1 << 22


def hash_f32(vals: np.ndarray, first: int) -> int:
    bits = vals.view(np.uint32).astype(np.uint64)
    i = np.arange(first, first + bits.size, dtype=np.uint64)
    x = (bits ^ (i * K1)) * K2
    x ^= x >> S31
    return int(x.sum(dtype=np.uint64))


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: quant_models_ref.py OUT MODEL.gguf...", file=sys.stderr)
        return 2
    with open(sys.argv[1], "w") as out:
        for path in sys.argv[2:]:
            reader = GGUFReader(path)
            base = os.path.basename(path)
            for t in reader.tensors:
                qtype = t.tensor_type
                block, type_size = GGML_QUANT_SIZES[qtype]
                raw = np.ascontiguousarray(t.data).reshape(-1).view(np.uint8)
                n = int(t.n_elements)
                step = max(1, CHUNK_ELEMS // block) * type_size  # bytes per chunk, whole blocks
                h, done = 0, 0
                for off in range(0, raw.size, step):
                    vals = dequantize(raw[off:off + step], qtype)
                    vals = np.ascontiguousarray(vals, dtype=np.float32).reshape(-1)
                    h = (h + hash_f32(vals, done)) & 0xFFFFFFFFFFFFFFFF
                    done += vals.size
                if done != n:
                    print(f"{base}: {t.name}: dequantized {done} elements, expected {n}", file=sys.stderr)
                    return 1
                out.write(f"{base} {t.name} {qtype.name} {n} {h:016x}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
