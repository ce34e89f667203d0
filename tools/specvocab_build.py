#!/usr/bin/env python3
"""specvocab_build.py — build a SpecVocab artefact (issue 16) for a draft model.

SpecVocab ranks the whole vocabulary with a low-rank copy of the LM head,
    s = W_vocab · (W_down · h),   W_down [d', d], W_vocab [V, d'],
and the draft runs its exact head over the top-k ids of s only. Training-free
start: the rank-d' truncated SVD of the head W [V, d] itself,
    W ≈ U_k Σ_k V_kᵀ  →  W_vocab = U_k Σ_k = W V_k,  W_down = V_kᵀ,
computed from the eigendecomposition of the d×d Gram matrix WᵀW (float64,
accumulated over row chunks; d ≤ a few thousand, so this is cheap and exact up
to rounding). Deterministic: no random numbers are drawn; each singular vector's
sign is fixed so that its largest-magnitude component is positive.

The model is a GGUF file (head: output.weight, else the tied token_embd.weight;
any block format the `gguf` package dequantizes) or a Hugging Face folder whose
model.safetensors holds lm_head.weight (else the tied model.embed_tokens.weight;
F32 / F16 / BF16). The artefact records the sha256 of that file (the GGUF, or the
folder's model.safetensors) and the draft node refuses it for any other model.

Output (GGUF, written with the `gguf` package): KVs microspec.artifact =
"specvocab", microspec.model_sha256, microspec.vocab_size, microspec.hidden_size,
specvocab.rank; tensors specvocab.w_down F32 [d', d] and specvocab.w_vocab
[V, d'] in Q8_0 (default when d' is a multiple of 32: a quarter of the f32 bytes,
and the draft reads all V rows of it every step, so its size is its cost; the
ranking tolerates the 8-bit rounding, and losslessness never depends on it) or
F32 (--dtype f32, exact; the only choice for other ranks).

Not done yet: --distill STATES (fit W_vocab/W_down to the full head's top-k on
recorded draft states from ../shared/corpus) is accepted by nothing; the SVD is
the whole build.

Exit status: 0 ok, 1 error (a message naming the file), 2 bad usage.
"""
import argparse
import hashlib
import json
import os
import struct
import sys
import time

import numpy as np


def log(msg):
    print(f"specvocab_build: {msg}", file=sys.stderr, flush=True)


class BuildError(Exception):
    pass


def model_file(path):
    """The file whose sha256 identifies a model (the C rule, ms_vsel_model_file)."""
    if os.path.isdir(path):
        return os.path.join(path, "model.safetensors")
    return path


def sha256_file(path):
    h = hashlib.sha256()
    size = os.path.getsize(path)
    done, last = 0, time.monotonic()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 24)
            if not b:
                break
            h.update(b)
            done += len(b)
            if time.monotonic() - last > 2.0:
                log(f"sha256 {done * 100 // max(size, 1)}% of {path}")
                last = time.monotonic()
    return h.hexdigest()


def head_from_gguf(path):
    try:
        import gguf
    except ImportError as e:
        raise BuildError(f"reading {path} needs the `gguf` package (tools/install-deps.sh): {e}")
    r = gguf.GGUFReader(path)
    tensors = {t.name: t for t in r.tensors}
    t = tensors.get("output.weight") or tensors.get("token_embd.weight")
    if t is None:
        raise BuildError(f"{path}: no output.weight or token_embd.weight (no LM head)")
    log(f"{path}: head {t.name} {t.tensor_type.name} {list(reversed([int(x) for x in t.shape]))}, dequantizing")
    w = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
    return np.ascontiguousarray(w.reshape(int(t.shape[1]), int(t.shape[0])), dtype=np.float32)


def head_from_safetensors(path):
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > 1 << 28:
                raise BuildError(f"{path}: header of {n} bytes is not a safetensors header")
            hdr = json.loads(f.read(n))
            base = 8 + n
    except (OSError, ValueError, struct.error) as e:
        raise BuildError(f"{path}: cannot read a safetensors header: {e}")
    name = "lm_head.weight" if "lm_head.weight" in hdr else "model.embed_tokens.weight"
    if name not in hdr:
        raise BuildError(f"{path}: no lm_head.weight or model.embed_tokens.weight (no LM head)")
    info = hdr[name]
    shape, (a, b) = info["shape"], info["data_offsets"]
    if len(shape) != 2:
        raise BuildError(f"{path}: {name} has shape {shape}, expected [V, d]")
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=base + a, shape=(b - a,))
    dt = info["dtype"]
    if dt == "F32":
        w = raw.view(np.float32)
    elif dt == "F16":
        w = raw.view(np.float16).astype(np.float32)
    elif dt == "BF16":
        w = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        raise BuildError(f"{path}: {name} has dtype {dt}; F32, F16 or BF16 expected")
    log(f"{path}: head {name} {dt} {shape}")
    return np.ascontiguousarray(w.reshape(shape), dtype=np.float32)


def load_head(path):
    if os.path.isdir(path):
        return head_from_safetensors(model_file(path))
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"GGUF":
        return head_from_gguf(path)
    return head_from_safetensors(path)


def truncated_svd(W, rank, chunk=16384):
    """W ≈ (W V_k) V_kᵀ with V_k the top-`rank` eigenvectors of WᵀW.
    Returns (w_down [rank, d] f32, w_vocab [V, rank] f32, singular values [rank])."""
    V, d = W.shape
    G = np.zeros((d, d), dtype=np.float64)
    last = time.monotonic()
    for i in range(0, V, chunk):
        c = W[i:i + chunk].astype(np.float64)
        G += c.T @ c
        if time.monotonic() - last > 2.0:
            log(f"Gram matrix {min(i + chunk, V) * 100 // V}%")
            last = time.monotonic()
    log(f"eigendecomposition of the {d}x{d} Gram matrix")
    evals, evecs = np.linalg.eigh(G)  # ascending
    order = np.argsort(-evals, kind="stable")[:rank]
    Vk = evecs[:, order]
    # fix each vector's sign: its largest-magnitude component positive
    idx = np.argmax(np.abs(Vk), axis=0)
    Vk = Vk * np.where(Vk[idx, np.arange(rank)] < 0, -1.0, 1.0)
    sv = np.sqrt(np.maximum(evals[order], 0.0))
    w_vocab = np.empty((V, rank), dtype=np.float32)
    for i in range(0, V, chunk):
        w_vocab[i:i + chunk] = (W[i:i + chunk].astype(np.float64) @ Vk).astype(np.float32)
    return np.ascontiguousarray(Vk.T.astype(np.float32)), w_vocab, sv


def write_artifact(out, sha, w_down, w_vocab, dtype):
    import gguf
    V, rank = w_vocab.shape
    d = w_down.shape[1]
    tmp = out + ".tmp"
    w = gguf.GGUFWriter(tmp, arch="specvocab")
    w.add_string("microspec.artifact", "specvocab")
    w.add_string("microspec.model_sha256", sha)
    w.add_uint64("microspec.vocab_size", V)
    w.add_uint64("microspec.hidden_size", d)
    w.add_uint64("specvocab.rank", rank)
    w.add_tensor("specvocab.w_down", w_down)
    if dtype == "q8_0":
        q = gguf.quants.quantize(w_vocab, gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("specvocab.w_vocab", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    else:
        w.add_tensor("specvocab.w_vocab", w_vocab)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)


def main(argv):
    ap = argparse.ArgumentParser(
        prog="specvocab_build.py",
        description="Build a SpecVocab artefact (truncated SVD of a draft model's LM head) for "
                    "`--vocab specvocab` / `specvocab+window`. See the module docstring for the format.")
    ap.add_argument("--model", required=True, help="the draft model: a GGUF file or a Hugging Face folder")
    ap.add_argument("--out", required=True, help="the artefact to write (GGUF)")
    ap.add_argument("--rank", type=int, default=64, help="d', the reduced width (default 64)")
    ap.add_argument("--dtype", choices=["auto", "q8_0", "f32"], default="auto",
                    help="w_vocab's format: auto = q8_0 when the rank is a multiple of 32, else f32")
    ap.add_argument("--distill", metavar="STATES",
                    help="not implemented yet: distil on recorded draft states (refused)")
    a = ap.parse_args(argv)
    try:
        if a.distill:
            raise BuildError("--distill is not implemented yet (the SVD start is the whole build)")
        mf = model_file(a.model)
        if not os.path.isfile(mf):
            raise BuildError(f"{mf}: no such model file")
        log(f"sha256 of {mf}")
        sha = sha256_file(mf)
        W = load_head(a.model)
        V, d = W.shape
        if not 1 <= a.rank <= d:
            raise BuildError(f"--rank {a.rank} outside [1, d={d}] for {a.model}")
        dtype = a.dtype
        if dtype == "auto":
            dtype = "q8_0" if a.rank % 32 == 0 else "f32"
        if dtype == "q8_0" and a.rank % 32:
            raise BuildError(f"--dtype q8_0 needs a rank that is a multiple of 32 (got {a.rank})")
        log(f"head [{V}, {d}], rank {a.rank}, w_vocab {dtype}")
        w_down, w_vocab, sv = truncated_svd(W, a.rank)
        tail = float(np.sum(W.astype(np.float64) ** 2)) - float(np.sum(sv ** 2)) if V * d <= (1 << 26) else None
        msg = f"singular values {sv[0]:.4g} .. {sv[-1]:.4g}"
        if tail is not None:
            msg += f", relative residual {np.sqrt(max(tail, 0.0) / max(np.sum(W.astype(np.float64) ** 2), 1e-300)):.4f}"
        log(msg)
        write_artifact(a.out, sha, w_down, w_vocab, dtype)
        log(f"wrote {a.out} (model sha256 {sha})")
    except BuildError as e:
        log(f"error: {e}")
        return 1
    except OSError as e:
        log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
