"""Shared pieces of the DynaSpec offline tools (issue 16): the model file's
sha256, the GGUF head / embedding table dequantized in row chunks, and the
recorded-states file written by microspec-record.

numpy + ggml's `gguf` package only (tools/install-deps.sh installs both).
"""
import argparse
import hashlib
import os
import sys

import numpy as np

try:
    import gguf
    import gguf.quants
except ImportError:  # the caller reports it (its --help works without gguf)
    gguf = None


def log(tool, msg):
    print("%s: %s" % (tool, msg), file=sys.stderr, flush=True)


def die(tool, msg, code=1):
    log(tool, "error: " + msg)
    sys.exit(code)


def argparser(tool, doc):
    """A parser whose --help shows the tool's docstring: its first paragraph
    above the options, the rest below; --model (the draft GGUF) is added."""
    ap = argparse.ArgumentParser(prog=tool, description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc.split("\n\n", 2)[2])
    ap.add_argument("--model", required=True, help="the draft model's GGUF file")
    return ap


def sha256_file(path, chunk=1 << 22):
    """Hex sha256 of a file, read in 4 MiB chunks (as the C loader does)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)


def open_gguf(tool, path):
    if gguf is None:
        die(tool, "the python `gguf` package is missing (tools/install-deps.sh installs it)")
    if not os.path.isfile(path):
        die(tool, "%s: no such file" % path)
    try:
        return gguf.GGUFReader(path)
    except Exception as e:  # the package raises plain ValueError / struct errors
        die(tool, "%s: not a readable GGUF file (%s)" % (path, e))


def find_tensor(reader, name):
    for t in reader.tensors:
        if t.name == name:
            return t
    return None


class Rows:
    """A 2-d GGUF weight of m rows of k elements, dequantized on demand (f32)."""

    def __init__(self, tensor):
        self.t = tensor
        self.name = tensor.name
        # GGUF shape is ne (fastest first): a [m, k] weight has shape [k, m]
        self.k, self.m = int(tensor.shape[0]), int(tensor.shape[1])

    def rows(self, a, b):
        raw = self.t.data[a:b]
        if self.t.tensor_type in (gguf.GGMLQuantizationType.F32,):
            return np.asarray(raw, dtype=np.float32).reshape(b - a, self.k)
        out = gguf.quants.dequantize(np.asarray(raw), self.t.tensor_type)
        return np.asarray(out, dtype=np.float32).reshape(b - a, self.k)

    def row_idx(self, ids):
        """Rows at `ids` (any order, repeats allowed) as f32 [len(ids), k]."""
        ids = np.asarray(ids, dtype=np.int64)
        uniq, inv = np.unique(ids, return_inverse=True)
        raw = np.asarray(self.t.data[uniq])
        if self.t.tensor_type == gguf.GGMLQuantizationType.F32:
            u = raw.astype(np.float32).reshape(len(uniq), self.k)
        else:
            u = np.asarray(gguf.quants.dequantize(raw, self.t.tensor_type), dtype=np.float32).reshape(len(uniq), self.k)
        return u[inv]


def head_rows(tool, reader, path):
    """The LM head: `output.weight` when the file has one (Qwen2.5 0.5B),
    else the tied embedding `token_embd.weight` (Gemma 3)."""
    t = find_tensor(reader, "output.weight") or find_tensor(reader, "token_embd.weight")
    if t is None or len(t.shape) != 2:
        die(tool, "%s: neither output.weight nor token_embd.weight (2-d) in the file" % path)
    return Rows(t)


def embed_rows(tool, reader, path):
    """The token embedding table, raw (Gemma's sqrt(d) scale NOT applied)."""
    t = find_tensor(reader, "token_embd.weight")
    if t is None or len(t.shape) != 2:
        die(tool, "%s: no 2-d token_embd.weight in the file" % path)
    return Rows(t)


# ---- recorded draft states (microspec-record; format in tools/vocab/microspec_record.c) ----
REC_MAGIC = b"MSDSREC1"
REC_HEADER = 128


def read_record(tool, path):
    """→ dict(d, L, vocab, sha256, chain (D of --chains; 0: windows), tok [n] i32, top [n, L] i32,
    prev [n, d] f32), memory-mapped."""
    try:
        with open(path, "rb") as f:
            hdr = f.read(REC_HEADER)
    except OSError as e:
        die(tool, "%s: %s" % (path, e))
    if len(hdr) < REC_HEADER or hdr[:8] != REC_MAGIC:
        die(tool, "%s: not a microspec-record file (magic %r)" % (path, hdr[:8]))
    ver, d, L, chain = np.frombuffer(hdr, dtype="<u4", count=4, offset=8)
    n, vocab = np.frombuffer(hdr, dtype="<u8", count=2, offset=24)
    sha = hdr[40:104].decode("ascii", "replace")
    if ver != 1:
        die(tool, "%s: record version %d (this tool reads 1)" % (path, ver))
    rec = np.dtype([("tok", "<i4"), ("top", "<i4", (int(L),)), ("prev", "<f4", (int(d),))])
    size = os.path.getsize(path)
    if size != REC_HEADER + int(n) * rec.itemsize:
        die(tool, "%s: %d bytes, header says %d records of %d bytes" % (path, size, n, rec.itemsize))
    a = np.memmap(path, dtype=rec, mode="r", offset=REC_HEADER, shape=(int(n),))
    return dict(d=int(d), L=int(L), vocab=int(vocab), sha256=sha, n=int(n), chain=int(chain), tok=a["tok"],
                top=a["top"], prev=a["prev"])
