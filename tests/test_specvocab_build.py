#!/usr/bin/env python3
"""test_specvocab_build.py — tools/vocab/specvocab_build.py against a naive reference.

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
--distill:
  - the tool's loss_grad (imported by path) equals central finite differences
    of a naive float64 log-softmax loss written here, for W_vocab and W_down;
  - records in microspec-record's format whose h lie in the span of W's
    singular directions 9..16 (which the rank-8 SVD drops), with top-L ids
    computed here from W·h: the distilled artefact's held-out recall KV beats
    the SVD's (and the SVD's is low), W_vocab·W_down is still [V, d], the
    bytes repeat on a second run; --steps 0 (no gain) writes the SVD start
    with specvocab.distilled = false;
  - records of another model (sha256) and a missing records file exit 1
    naming both hashes / the file.
Exit 77 (skip) when numpy or gguf cannot be imported.
"""
import hashlib
import importlib.util
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


def load_tool():
    """The tool as a module (imported by path), for its functions."""
    spec = importlib.util.spec_from_file_location("specvocab_build", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def check_gradient():
    """loss_grad against central differences on a tiny float64 problem."""
    tool = load_tool()
    rng = np.random.default_rng(7)
    V, r, d, B, L = 23, 3, 5, 6, 4
    wv, wd, H = rng.standard_normal((V, r)), rng.standard_normal((r, d)), rng.standard_normal((B, d))
    top = np.stack([rng.permutation(V)[:L] for _ in range(B)])

    def naive(wv, wd):
        s = H @ wd.T @ wv.T
        m = s.max(axis=1, keepdims=True)
        logp = s - m - np.log(np.exp(s - m).sum(axis=1, keepdims=True))
        return -np.mean([logp[b, top[b]].mean() for b in range(B)])

    loss, gv, gd = tool.loss_grad(wv, wd, H, top)
    check(abs(loss - naive(wv, wd)) < 1e-12, f"loss {loss} vs naive {naive(wv, wd)}")
    for name, x, g in (("W_vocab", wv, gv), ("W_down", wd, gd)):
        fd = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            x0 = x[i]
            x[i] = x0 + 1e-6
            up = naive(wv, wd)
            x[i] = x0 - 1e-6
            fd[i] = (up - naive(wv, wd)) / 2e-6
            x[i] = x0
        check(g.shape == x.shape and np.max(np.abs(g - fd)) < 1e-7 * max(1.0, np.max(np.abs(fd))),
              f"∂loss/∂{name} vs central differences: {np.max(np.abs(g - fd)):.3g}")


def check_chain_pairs():
    """record_pairs on a --chains file pairs (prev[i+1], top[i]) inside each
    chain of D only, though every chain's first prev is non-zero."""
    tool = load_tool()
    D, chains, d, L = 3, 4, 5, 2
    n = D * chains
    rec = dict(n=n, chain=D, prev=np.arange(1, n * d + 1, dtype=np.float32).reshape(n, d),
               top=np.arange(n * L, dtype=np.int32).reshape(n, L))
    H, top, window = tool.record_pairs(rec)
    want = [i for i in range(n - 1) if i % D != D - 1]
    check(np.array_equal(H, rec["prev"][[i + 1 for i in want]]) and np.array_equal(top, rec["top"][want])
          and len(np.unique(window)) == chains, f"chain records pair inside their chain only ({len(want)} pairs)")
    rec["chain"] = 0  # as windows (no zero prev): one window, every neighbour paired
    H, top, window = tool.record_pairs(rec)
    check(len(top) == n - 1, "window records pair every neighbour of a window")


def write_records(path, sha, W, Bt, L, windows, T, rng):
    """microspec-record's format (tools/vocab/microspec_record.c): windows of T
    positions; position t holds tok, top-L(W h_t) and prev = h_{t-1}."""
    V, d = W.shape
    recs = bytearray()
    for _ in range(windows):
        h = (rng.standard_normal((T, 8)) @ Bt[8:16] + 0.05 * rng.standard_normal((T, d))).astype(np.float32)
        top = np.argsort(-(h.astype(np.float64) @ W.T.astype(np.float64)), axis=1, kind="stable")[:, :L]
        for t in range(T):
            prev = h[t - 1] if t else np.zeros(d, np.float32)
            recs += struct.pack("<i", int(rng.integers(V))) + top[t].astype("<i4").tobytes() + prev.astype("<f4").tobytes()
    hdr = b"MSDSREC1" + struct.pack("<4I", 1, d, L, 0) + struct.pack("<2Q", windows * T, V) + sha.encode()
    with open(path, "wb") as f:
        f.write(hdr + bytes(128 - len(hdr)) + recs)


def check_distill(tmp, W, Bt, sha):
    V, d = W.shape
    rec = os.path.join(tmp, "m.rec")
    write_records(rec, sha, W, Bt, 4, 40, 32, np.random.default_rng(99))
    base = ["--model", os.path.join(tmp, "m"), "--rank", "8", "--dtype", "f32", "--distill", rec, "--distill-k", "20",
            "--batch", "64", "--lr", "1e-2"]
    outs = [os.path.join(tmp, f"d{i}.gguf") for i in range(2)]
    for out in outs:
        p = run(*base, "--out", out, "--steps", "200")
        check(p.returncode == 0, f"--distill: exit {p.returncode}: {p.stderr}")
    if p.returncode == 0:
        kv, wd, wv, _ = read(outs[0])
        before, after = float(kv["specvocab.heldout_recall_svd"]), float(kv["specvocab.heldout_recall"])
        check(bool(kv.get("specvocab.distilled")), "specvocab.distilled true")
        check(before < 0.5 and after > before + 0.3, f"held-out recall@20: SVD {before:.3f}, distilled {after:.3f}")
        check(kv.get("specvocab.distill_records_sha256") == hashlib.sha256(open(rec, "rb").read()).hexdigest()
              and int(kv.get("specvocab.distill_steps", -1)) == 200, "distill KVs")
        check((wv @ wd).shape == (V, d), f"W_vocab·W_down shape {(wv @ wd).shape}")
        check(open(outs[0], "rb").read() == open(outs[1], "rb").read(), "--distill twice: different bytes")
    # no step, no gain: the SVD start is written, marked as such
    svd, out = os.path.join(tmp, "s8.gguf"), os.path.join(tmp, "d0.gguf")
    run("--model", os.path.join(tmp, "m"), "--out", svd, "--rank", "8", "--dtype", "f32")
    p = run(*base, "--out", out, "--steps", "0")
    check(p.returncode == 0 and "did NOT improve" in p.stderr, f"--steps 0: exit {p.returncode}: {p.stderr}")
    if p.returncode == 0:
        kv, wd, wv, _ = read(out)
        _, wd_svd, wv_svd, _ = read(svd)
        check(kv.get("specvocab.distilled") is False and "specvocab.heldout_recall" not in kv
              and np.array_equal(wd, wd_svd) and np.array_equal(wv, wv_svd), "--steps 0 writes the SVD start")
    # records of another model, and no records at all
    other = hashlib.sha256(b"another model").hexdigest()
    write_records(os.path.join(tmp, "o.rec"), other, W, Bt, 4, 2, 8, np.random.default_rng(1))
    return [(["--model", os.path.join(tmp, "m"), "--out", os.path.join(tmp, "x.gguf"), "--distill",
              os.path.join(tmp, "o.rec")], f"sha256 {other}", sha),
            (["--model", os.path.join(tmp, "m"), "--out", os.path.join(tmp, "x.gguf"), "--distill",
              os.path.join(tmp, "none.rec")], os.path.join(tmp, "none.rec"))]


def main():
    check_gradient()
    check_chain_pairs()
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
        bad = check_distill(tmp, W, B, sha)
        # refusals
        bad += [
            (["--model", os.path.join(tmp, "m"), "--out", os.path.join(tmp, "x.gguf"), "--rank", "0"], "outside [1, d=48]"),
            (["--model", os.path.join(tmp, "m"), "--out", os.path.join(tmp, "x.gguf"), "--rank", "8", "--dtype", "q8_0"],
             "multiple of 32"),
            (["--model", os.path.join(tmp, "nope"), "--out", os.path.join(tmp, "x.gguf")], os.path.join(tmp, "nope")),
        ]
        for args, *texts in bad:
            p = run(*args)
            check(p.returncode == 1 and all(t in p.stderr for t in texts), f"{args}: exit {p.returncode}, stderr {p.stderr!r}")
            check(not os.path.exists(os.path.join(tmp, "x.gguf")), f"{args}: wrote a file")
        p = run("--model", os.path.join(tmp, "m"), "--out", os.path.join(tmp, "x.gguf"), "--steps", "5")
        check(p.returncode == 2 and "--steps only with --distill" in p.stderr and not os.path.exists(os.path.join(tmp, "x.gguf")),
              f"--steps without --distill: exit {p.returncode}, stderr {p.stderr!r}")
        p = run("--help")
        check(p.returncode == 0 and "--rank" in p.stdout and "sha256" not in p.stderr, "--help does no work")
    if fails:
        print(f"test_specvocab_build: {fails} failure(s)", file=sys.stderr)
        return 1
    print("test_specvocab_build: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
