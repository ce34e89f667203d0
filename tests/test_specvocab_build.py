#!/usr/bin/env python3
"""test_specvocab_build.py — tools/specvocab_build.py against a naive reference.

A seeded head W [V=300, d=48] with a decaying spectrum is written as a Hugging
Face folder (model.safetensors, lm_head.weight F32, and once F16). The tool's
rank-r artefact must match numpy.linalg.svd (LAPACK, an independent method
from the tool's Gram-matrix eigendecomposition):
  - W_down rows = the top-r right singular vectors (sign-fixed by the tool's
    documented rule: largest-magnitude component positive), W_vocab = W W_downᵀ,
    so W_vocab's column norms are the singular values;
  - W_vocab · W_down equals U_r Σ_r V_rᵀ, and its Frobenius error is
    sqrt(Σ_{i>r} σ_i²) (Eckart–Young);
  - KVs: microspec.artifact, microspec.model_sha256 (hashlib of the file),
    microspec.vocab_size, microspec.hidden_size, specvocab.rank;
  - rank 32 writes Q8_0, which dequantizes to within Q8_0 rounding of F32;
  - bad arguments exit 1 with a message naming the problem, --help does no work.
Exit 77 (skip) when numpy or gguf cannot be imported.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

TOOL = sys.argv[1]
fails = 0


def check(cond, msg):
    global fails
    if not cond:
        fails += 1
        print(f"FAIL: {msg}", file=sys.stderr)


def write_st(folder, W, dtype="F32"):
    os.makedirs(folder, exist_ok=True)
    data = W.astype(np.float32 if dtype == "F32" else np.float16).tobytes()
    hdr = {"lm_head.weight": {"dtype": dtype, "shape": list(W.shape), "data_offsets": [0, len(data)]}}
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    path = os.path.join(folder, "model.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
    return path


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)


def read(path):
    r = gguf.GGUFReader(path)
    kv = {}
    for k, f in r.fields.items():
        if k.startswith(("microspec.", "specvocab.")):
            v = f.contents()
            kv[k] = v
    t = {x.name: x for x in r.tensors}
    wd = np.array(t["specvocab.w_down"].data, dtype=np.float32).reshape(-1, int(t["specvocab.w_down"].shape[0]))
    tv = t["specvocab.w_vocab"]
    wv = gguf.quants.dequantize(np.asarray(tv.data), tv.tensor_type).reshape(int(tv.shape[1]), int(tv.shape[0]))
    return kv, wd, wv, tv.tensor_type


def main():
    rng = np.random.default_rng(1234)
    V, d = 300, 48
    # W = A diag(spectrum) B with orthonormal B: a known, decaying spectrum
    A = np.linalg.qr(rng.standard_normal((V, d)))[0]
    B = np.linalg.qr(rng.standard_normal((d, d)))[0]
    W = ((A * (0.9 ** np.arange(d)) * 10.0) @ B).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        st = write_st(os.path.join(tmp, "m"), W)
        sha = hashlib.sha256(open(st, "rb").read()).hexdigest()
        U, S, Vt = np.linalg.svd(W.astype(np.float64), full_matrices=False)
        for r in (1, 8, 20):
            out = os.path.join(tmp, f"a{r}.gguf")
            p = run("--model", os.path.join(tmp, "m"), "--out", out, "--rank", str(r), "--dtype", "f32")
            check(p.returncode == 0, f"rank {r}: exit {p.returncode}: {p.stderr}")
            if p.returncode:
                continue
            kv, wd, wv, tt = read(out)
            check(kv.get("microspec.artifact") == "specvocab", f"artifact KV {kv.get('microspec.artifact')}")
            check(kv.get("microspec.model_sha256") == sha, "model sha256 KV")
            check(int(kv.get("microspec.vocab_size", -1)) == V and int(kv.get("microspec.hidden_size", -1)) == d
                  and int(kv.get("specvocab.rank", -1)) == r, f"shape KVs {kv}")
            check(tt == gguf.GGMLQuantizationType.F32 and wd.shape == (r, d) and wv.shape == (V, r), "shapes")
            ref = Vt[:r].copy()
            idx = np.argmax(np.abs(ref), axis=1)
            ref *= np.where(ref[np.arange(r), idx] < 0, -1.0, 1.0)[:, None]
            check(np.max(np.abs(wd - ref)) < 1e-4, f"rank {r}: W_down vs SVD V_r: {np.max(np.abs(wd - ref)):.3g}")
            check(np.allclose(np.linalg.norm(wv, axis=0), S[:r], rtol=1e-4), f"rank {r}: singular values")
            approx = wv.astype(np.float64) @ wd.astype(np.float64)
            best = (U[:, :r] * S[:r]) @ Vt[:r]
            check(np.max(np.abs(approx - best)) < 1e-3 * S[0], f"rank {r}: reconstruction vs U_r S_r V_r^T")
            err = np.linalg.norm(W - approx)
            check(abs(err - np.sqrt(np.sum(S[r:] ** 2))) < 1e-3 * S[0], f"rank {r}: Eckart-Young error {err}")
        # the same head stored as F16 gives the same artefact up to F16 rounding
        write_st(os.path.join(tmp, "h"), W, "F16")
        out = os.path.join(tmp, "h8.gguf")
        p = run("--model", os.path.join(tmp, "h"), "--out", out, "--rank", "8")
        check(p.returncode == 0, f"f16 head: {p.stderr}")
        if p.returncode == 0:
            _, wd16, _, tt = read(out)
            check(tt == gguf.GGMLQuantizationType.F32, "rank 8 auto → F32")
            ref = Vt[:8].copy()
            idx = np.argmax(np.abs(ref), axis=1)
            ref *= np.where(ref[np.arange(8), idx] < 0, -1.0, 1.0)[:, None]
            check(np.max(np.abs(wd16 - ref)) < 1e-2, "f16 head W_down")
        # rank 32 → Q8_0 by default
        out = os.path.join(tmp, "a32.gguf")
        p = run("--model", os.path.join(tmp, "m"), "--out", out, "--rank", "32")
        check(p.returncode == 0, f"rank 32: {p.stderr}")
        if p.returncode == 0:
            _, _, wv8, tt = read(out)
            out32 = os.path.join(tmp, "a32f.gguf")
            run("--model", os.path.join(tmp, "m"), "--out", out32, "--rank", "32", "--dtype", "f32")
            _, _, wvf, _ = read(out32)
            scale = np.abs(wvf).max(axis=1, keepdims=True) / 127.0
            check(tt == gguf.GGMLQuantizationType.Q8_0, "rank 32 auto → Q8_0")
            check(np.all(np.abs(wv8 - wvf) <= scale * 0.51 + np.abs(wvf) * 1e-3), "Q8_0 within half a step (f16 scale) of F32")
        # refusals
        bad = [
            (["--model", os.path.join(tmp, "m"), "--out", os.path.join(tmp, "x.gguf"), "--rank", "0"], "outside [1, d=48]"),
            (["--model", os.path.join(tmp, "m"), "--out", os.path.join(tmp, "x.gguf"), "--rank", "8", "--dtype", "q8_0"],
             "multiple of 32"),
            (["--model", os.path.join(tmp, "nope"), "--out", os.path.join(tmp, "x.gguf")], os.path.join(tmp, "nope")),
            (["--model", os.path.join(tmp, "m"), "--out", os.path.join(tmp, "x.gguf"), "--distill", "s"], "not implemented"),
        ]
        for args, text in bad:
            p = run(*args)
            check(p.returncode == 1 and text in p.stderr, f"{args}: exit {p.returncode}, stderr {p.stderr!r}")
            check(not os.path.exists(os.path.join(tmp, "x.gguf")), f"{args}: wrote a file")
        p = run("--help")
        check(p.returncode == 0 and "--rank" in p.stdout and "sha256" not in p.stderr, "--help does no work")
    if fails:
        print(f"test_specvocab_build: {fails} failure(s)", file=sys.stderr)
        return 1
    print("test_specvocab_build: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
