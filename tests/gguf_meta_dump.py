#!/usr/bin/env python3
"""gguf_meta_dump.py FILE — print a GGUF file's header, metadata and tensor
table with ggml's own reader (the PyPI `gguf` package), in the line format
that `test_gguf --dump FILE` prints with ms_gguf.c; test_gguf --golden diffs
the two. Exit 77 (skip) if the package is missing.

Format, one item per line:
  version V
  alignment A
  data_start D                       (file offset of the data block)
  n_kv N                             (real keys; the reader's GGUF.* pseudo-keys are left out)
  kv KEY TYPE VALUE                  scalars; strings escaped (see esc)
  kv KEY array ETYPE COUNT [first 3] [last 3]
  n_tensors N
  tensor NAME GGMLTYPE ne=a,b,.. offset=O nbytes=B
Floats: f32 '%.9g', f64 '%.17g' (C printf formats, so both sides agree).
"""
import sys

try:
    import numpy as np
    from gguf import GGUFReader, GGUFValueType
except ImportError as e:  # the test skips
    print(f"gguf_meta_dump: python gguf package unavailable: {e}", file=sys.stderr)
    sys.exit(77)

TYPE_NAMES = {
    GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
    GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
    GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
    GGUFValueType.FLOAT64: "f64",
}


def esc(b: bytes) -> str:
    """Printable ASCII as is except backslash and quote; every other byte as \\xHH."""
    out = []
    for c in b:
        if 0x20 <= c < 0x7F and c not in (0x5C, 0x22):
            out.append(chr(c))
        else:
            out.append("\\x%02x" % c)
    return '"' + "".join(out) + '"'


def scalar(t: GGUFValueType, part) -> str:
    if t == GGUFValueType.STRING:
        return esc(bytes(part))
    v = part[0]
    if t == GGUFValueType.BOOL:
        return "true" if bool(v) else "false"
    if t == GGUFValueType.FLOAT32:
        return "%.9g" % float(v)
    if t == GGUFValueType.FLOAT64:
        return "%.17g" % float(v)
    return str(int(v))


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: gguf_meta_dump.py FILE", file=sys.stderr)
        return 2
    r = GGUFReader(sys.argv[1], "r")
    out = []
    ver = r.fields["GGUF.version"]
    out.append("version %d" % int(ver.parts[ver.data[0]][0]))
    out.append("alignment %d" % r.alignment)
    out.append("data_start %d" % r.data_offset)
    fields = [f for f in r.fields.values() if not f.name.startswith("GGUF.")]
    out.append("n_kv %d" % len(fields))
    for f in fields:
        t = f.types[0]
        if t == GGUFValueType.ARRAY:
            et = f.types[1] if len(f.types) > 1 else None
            n = len(f.data)
            if et is None:  # an empty array: the reader keeps no element type
                raise SystemExit(f"gguf_meta_dump: {f.name}: empty array, element type unknown to the reader")
            items = [scalar(et, f.parts[i]) for i in f.data]
            out.append("kv %s array %s %d [%s] [%s]" % (f.name, TYPE_NAMES[et], n, ", ".join(items[:3]),
                                                       ", ".join(items[-3:] if n else [])))
        else:
            out.append("kv %s %s %s" % (f.name, TYPE_NAMES[t], scalar(t, f.parts[f.data[0]])))
    out.append("n_tensors %d" % len(r.tensors))
    for t in r.tensors:
        rel = int(t.field.parts[-1][0])
        assert t.data_offset == r.data_offset + rel
        out.append("tensor %s %d ne=%s offset=%d nbytes=%d" % (t.name, int(t.tensor_type),
                                                             ",".join(str(int(d)) for d in t.shape), rel, t.n_bytes))
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
