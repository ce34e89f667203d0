#!/usr/bin/env python3
"""A GGUF file with some of its 2-D tensors requantized, for benchmarks of a
block format the real models do not ship in (e.g. Q4_0 for the kernels'
Q4_0 paths). The PyPI `gguf` package does the work: its reader, writer and
reference quantizers (ggml's block formats in numpy); this script only picks
the tensors.

  gguf_requant.py IN.gguf OUT.gguf --to TYPE [--from TYPE,TYPE...] [--keep NAME...]

Every 2-D tensor whose type is in --from (default: every quantized type) is
dequantized and quantized again to --to, except token_embd.weight and the
names given with --keep; metadata and every other tensor are copied as they
are. Requantizing an already quantized tensor loses precision twice: the file
is a different model (its output differs from the original's), fit for speed
measurements and as a draft, never as a stand-in for the original's quality.
--to must be a type the package can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
BF16, F16 in gguf 0.19); a row length that is not a multiple of its block is
refused with the tensor's name.
"""
import argparse
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="input GGUF file")
    ap.add_argument("dst", help="output GGUF file (must not exist)")
    ap.add_argument("--to", required=True, help="target type, e.g. Q4_0")
    ap.add_argument("--from", dest="src_types", default="",
                    help="comma-separated source types to convert (default: every quantized type)")
    ap.add_argument("--keep", nargs="*", default=[], help="tensor names to copy unchanged")
    a = ap.parse_args()

    import os
    import gguf
    from gguf import quants
    T = gguf.GGMLQuantizationType
    if a.to not in T.__members__:
        print(f"gguf_requant.py: --to {a.to}: not a ggml type", file=sys.stderr)
        return 2
    target = T[a.to]
    src_types = {s for s in a.src_types.split(",") if s}
    for s in src_types:
        if s not in T.__members__:
            print(f"gguf_requant.py: --from {s}: not a ggml type", file=sys.stderr)
            return 2
    if os.path.exists(a.dst):
        print(f"gguf_requant.py: {a.dst} exists; not overwritten", file=sys.stderr)
        return 2
    try:
        r = gguf.GGUFReader(a.src)
    except Exception as e:  # the package's own message names the problem
        print(f"gguf_requant.py: {a.src}: {e}", file=sys.stderr)
        return 1
    block, _ = gguf.GGML_QUANT_SIZES[target]
    plain = {T.F32, T.F16, T.BF16}
    out = []
    converted = 0
    for t in r.tensors:
        data, ty = t.data, t.tensor_type
        want = (ty.name in src_types) if src_types else (ty not in plain)
        if want and len(t.shape) == 2 and t.name != "token_embd.weight" and t.name not in a.keep and ty != target:
            row = int(t.shape[0])
            if row % block:
                print(f"gguf_requant.py: {t.name}: rows of {row} are not a multiple of {a.to}'s block {block}",
                      file=sys.stderr)
                return 1
            try:
                data = quants.quantize(quants.dequantize(data, ty), target)
            except NotImplementedError:
                print(f"gguf_requant.py: the gguf package cannot quantize to {a.to} (or read {ty.name})",
                      file=sys.stderr)
                return 1
            ty = target
            converted += 1
            print(f"  {t.name}: {t.tensor_type.name} -> {a.to}", file=sys.stderr)
        out.append((t.name, data, ty))

    w = gguf.GGUFWriter(a.dst + ".part", r.fields["general.architecture"].contents())
    for f in r.fields.values():
        if f.name == "general.architecture" or f.name.startswith("GGUF."):
            continue  # written by the writer itself
        vt = f.types[0]
        w.add_key_value(f.name, f.contents(), vt, sub_type=f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None)
    for name, data, ty in out:
        w.add_tensor_info(name, data.shape, data.dtype, data.nbytes, ty)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, data, _ in out:
        w.write_tensor_data(data)
    w.close()
    os.replace(a.dst + ".part", a.dst)  # no partial file under the final name
    print(f"gguf_requant.py: {converted} tensors to {a.to}: {a.dst}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
