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

--distill RECORDS then fits that start to the full head on recorded draft
states (microspec-record, from ../shared/corpus; format in
tools/vocab/microspec_record.c, read with tools/vocab/dynaspec_common.py). Record t holds
the head's top-L ids at t and h_{t-1}, so the head's input h_t is the next
record's prev: the pairs are (record[i+1].prev, record[i].top) within a window (or, for
`microspec-record --chains D` files, within a chain of D).
That h is the final-norm hidden state, the head's input, which is also what
the draft node ranks with (ms_draft.c hands the head's own hid rows to
ms_specvocab.c's pick). The loss is the multi-label softmax cross-entropy of s
over all V ids against the L recorded ids, weighted alike (loss_grad); Adam
(numpy, float32, manual gradients, cosine-decayed step) runs --steps minibatches
of --batch pairs. A seeded --holdout-frac of whole windows is held out
(neighbouring positions share context, so a split by position would leak), and
the held-out recall@k (the share of the top-L ids, and of the top-1 id, inside
the k best ids of s, with w_vocab rounded as written) is logged before and
after for k = 256, 512, 840, 1024 and --distill-k. Unless the distilled recall
at --distill-k (top-L) beats the SVD's, the SVD start is written instead (and
said so). The records must come from this model (their header's sha256), else
exit 1. Same inputs, same seed and thread count → the same bytes.

Output (GGUF, written with the `gguf` package): KVs microspec.artifact =
"specvocab", microspec.model_sha256, microspec.vocab_size, microspec.hidden_size,
specvocab.rank, specvocab.distilled (bool), and when distilled
specvocab.distill_records_sha256, specvocab.distill_steps, specvocab.distill_k,
specvocab.heldout_recall_svd, specvocab.heldout_recall (f32, top-L recall at
distill_k; the draft node ignores these KVs and loads both kinds alike);
tensors specvocab.w_down F32 [d', d] and specvocab.w_vocab [V, d'] in Q8_0
(default when d' is a multiple of 32: a quarter of the f32 bytes, and the draft
reads all V rows of it every step, so its size is its cost; the ranking
tolerates the 8-bit rounding, and losslessness never depends on it) or F32
(--dtype f32, exact; the only choice for other ranks).

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dynaspec_common as dc  # noqa: E402

TOOL = "specvocab_build"
REPORT_K = (256, 512, 840, 1024)  # 840: MicroSpec's mean active size on the Qwen pair (results, a058886)


def log(msg):
    dc.log(TOOL, msg)


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


def record_pairs(rec):
    """The head's (input, top-L) pairs of a microspec-record file: h_t is the
    next record's prev, so pair i = (prev[i+1], top[i]) when record i+1 is in
    the same window (a window's first record has prev = 0).
    → (H [n, d] f32, top [n, L] i32, window [n] i64)."""
    if rec["chain"]:  # --chains D: records come in chains of D, each its own "window"
        start = np.arange(rec["n"]) % rec["chain"] == 0
    else:
        start = ~np.any(rec["prev"] != 0, axis=1)  # [N] a window's first record
    window = np.cumsum(start)
    i = np.nonzero(~start[1:])[0]  # pairs (i, i+1) inside one window
    return (np.ascontiguousarray(rec["prev"][i + 1], dtype=np.float32),
            np.ascontiguousarray(rec["top"][i], dtype=np.int32), window[i])


def split_by_window(window, frac, seed):
    """Held-out = a seeded share of whole windows (neighbouring positions share
    context, so a split by position would leak). → (train idx, held-out idx)."""
    ids = np.unique(window)
    if len(ids) < 2:
        raise BuildError(f"the records hold {len(ids)} window(s); a held-out split needs at least 2")
    n_held = min(max(1, int(round(frac * len(ids)))), len(ids) - 1)
    held = np.isin(window, np.random.default_rng(seed).permutation(ids)[:n_held])
    return np.nonzero(~held)[0], np.nonzero(held)[0]


def loss_grad(w_vocab, w_down, H, top):
    """Multi-label softmax cross-entropy of s = W_vocab (W_down h) against the
    head's top-L ids, the L ids weighted alike (recall of all L at k is what
    the selector needs; giving the top-1 half the weight measured no better on
    the 0.5B draft, top-1 recall@1024 included):
        loss = mean_b −(1/L) Σ_{i∈top_b} log softmax(s_b)_i,
        ∂loss/∂s_b = (softmax(s_b) − T_b) / B,  T_b = 1/L on top_b.
    w_vocab [V, d'], w_down [d', d], H [B, d], top [B, L] (distinct ids a row).
    → (loss, ∂/∂w_vocab [V, d'], ∂/∂w_down [d', d]), in the inputs' dtype."""
    B, L = top.shape
    rows = np.arange(B)[:, None]
    z = H @ w_down.T  # [B, d']
    g = z @ w_vocab.T  # [B, V] scores, then softmax, then ∂loss/∂s
    g -= g.max(axis=1, keepdims=True)
    hit = g[rows, top].sum(axis=1)  # [B]
    np.exp(g, out=g)
    tot = g.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(tot[:, 0]) - hit / L))
    g /= tot * B
    g[rows, top] -= 1.0 / (L * B)
    g_vocab = g.T @ z
    g_down = (g @ w_vocab).T @ H
    return loss, g_vocab, g_down


def recall_at(w_vocab, w_down, H, top, ks, chunk=256):
    """Fraction of the top-L ids, and of the top-1 id, among the k best of s,
    for each k in ks (k < V). → (recall_L [len(ks)], recall_1 [len(ks)])."""
    V = w_vocab.shape[0]
    kth = [V - k for k in ks]
    hit_l, hit_1 = np.zeros(len(ks)), np.zeros(len(ks))
    for a in range(0, len(H), chunk):
        s = (H[a:a + chunk] @ w_down.T) @ w_vocab.T  # [c, V]
        tgt = np.take_along_axis(s, top[a:a + chunk], axis=1)  # [c, L]
        s.partition(kth, axis=1)
        for j, c in enumerate(kth):
            inside = tgt >= s[:, c:c + 1]  # the k-th largest score is the bar
            hit_l[j] += inside.sum()
            hit_1[j] += inside[:, 0].sum()
    return hit_l / top.size, hit_1 / len(top)


def fit(w_vocab, w_down, H, top, steps, lr, batch, seed):
    """Adam (β 0.9, 0.999) on loss_grad over seeded minibatches of the training
    pairs, the step size decaying to 0 on a cosine. Returns new arrays."""
    p = [w_vocab.copy(), w_down.copy()]
    m = [np.zeros_like(x) for x in p]
    v = [np.zeros_like(x) for x in p]
    b1, b2, eps = 0.9, 0.999, 1e-8
    rng = np.random.default_rng(seed + 1)  # seed itself drew the split
    order, at = rng.permutation(len(H)), 0
    t0 = last = time.monotonic()
    run_loss, run_n = 0.0, 0
    for t in range(1, steps + 1):
        if at + batch > len(order):
            order, at = rng.permutation(len(H)), 0
        idx = np.sort(order[at:at + batch])
        at += batch
        loss, *g = loss_grad(p[0], p[1], H[idx], top[idx])
        run_loss, run_n = run_loss + loss, run_n + 1
        a = lr * 0.5 * (1 + np.cos(np.pi * (t - 1) / steps)) * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for x, gx, mx, vx in zip(p, g, m, v):
            mx *= b1
            mx += (1 - b1) * gx
            vx *= b2
            vx += (1 - b2) * gx * gx
            x -= (a * mx / (np.sqrt(vx) + eps)).astype(x.dtype)
        now = time.monotonic()
        if now - last > 2.0 or t == steps:
            log(f"distill step {t}/{steps}: train loss {run_loss / run_n:.4f} ({now - t0:.1f} s)")
            run_loss, run_n, last = 0.0, 0, now
    return p[0], p[1]


def as_written(w_vocab, dtype):
    """w_vocab as the draft will read it (Q8_0 rounding included)."""
    if dtype != "q8_0":
        return w_vocab
    import gguf
    q8 = gguf.GGMLQuantizationType.Q8_0
    return gguf.quants.dequantize(gguf.quants.quantize(w_vocab, q8), q8).reshape(w_vocab.shape)


def write_artifact(out, sha, w_down, w_vocab, dtype, distilled=None):
    """distilled: None (the SVD start) or a dict of the specvocab.* KVs that
    describe the distillation (see the module docstring)."""
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
    w.add_bool("specvocab.distilled", distilled is not None)
    if distilled is not None:
        w.add_string("specvocab.distill_records_sha256", distilled["records_sha256"])
        w.add_uint32("specvocab.distill_steps", distilled["steps"])
        w.add_uint32("specvocab.distill_k", distilled["k"])
        w.add_float32("specvocab.heldout_recall_svd", distilled["recall_svd"])
        w.add_float32("specvocab.heldout_recall", distilled["recall"])
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


def distill(a, rec, w_vocab, w_down, dtype):
    """Fit (w_vocab, w_down) to the records; keep the fit only if its held-out
    recall@k (top-L) beats the SVD's. → (w_vocab, w_down, KV dict or None)."""
    H, top, window = record_pairs(rec)
    if top.size and (top.min() < 0 or top.max() >= w_vocab.shape[0]):
        raise BuildError(f"{a.distill}: top ids outside [0, {w_vocab.shape[0]})")
    train, held = split_by_window(window, a.holdout_frac, a.seed)
    ks = sorted({k for k in REPORT_K if k < w_vocab.shape[0]} | {a.distill_k})
    j = ks.index(a.distill_k)
    log(f"{a.distill}: {len(H)} pairs, top-{top.shape[1]}; {len(train)} train, {len(held)} held out "
        f"({a.holdout_frac:g} of the windows, seed {a.seed})")

    def report(name, wv, wd):
        rl, r1 = recall_at(as_written(wv, dtype), wd, H[held], top[held], ks)
        log(f"held-out recall, {name}: " + ", ".join(
            f"@{k} top-{top.shape[1]} {x:.4f} top-1 {y:.4f}" for k, x, y in zip(ks, rl, r1)))
        return float(rl[j])

    before = report("SVD start", w_vocab, w_down)
    t0 = time.monotonic()
    wv, wd = fit(w_vocab, w_down, H[train], top[train], a.steps, a.lr, a.batch, a.seed)
    log(f"{a.steps} steps in {time.monotonic() - t0:.1f} s")
    after = report("distilled", wv, wd)
    if not after > before:
        log(f"distillation did NOT improve the held-out recall@{a.distill_k} ({after:.4f} vs the SVD's "
            f"{before:.4f}): writing the SVD start instead (specvocab.distilled = false)")
        return w_vocab, w_down, None
    log(f"held-out recall@{a.distill_k}: {before:.4f} (SVD) → {after:.4f} (distilled)")
    meta = dict(records_sha256=dc.sha256_file(a.distill), steps=a.steps, k=a.distill_k,
                recall_svd=before, recall=after)
    return wv, wd, meta


def main(argv):
    ap = argparse.ArgumentParser(
        prog="specvocab_build.py",
        description="Build a SpecVocab artefact (truncated SVD of a draft model's LM head, optionally distilled "
                    "on recorded draft states) for `--vocab specvocab` / `specvocab+window`. See the module "
                    "docstring for the format.")
    ap.add_argument("--model", required=True, help="the draft model: a GGUF file or a Hugging Face folder")
    ap.add_argument("--out", required=True, help="the artefact to write (GGUF)")
    ap.add_argument("--rank", type=int, default=64, help="d', the reduced width (default 64)")
    ap.add_argument("--dtype", choices=["auto", "q8_0", "f32"], default="auto",
                    help="w_vocab's format: auto = q8_0 when the rank is a multiple of 32, else f32")
    ap.add_argument("--distill", metavar="RECORDS",
                    help="then fit the SVD start to the full head's top-L ids on these microspec-record states")
    ap.add_argument("--steps", type=int, default=300, help="--distill: Adam steps (default 300)")
    ap.add_argument("--lr", type=float, default=1e-3, help="--distill: Adam step size, cosine-decayed (default 1e-3)")
    ap.add_argument("--batch", type=int, default=256, help="--distill: pairs a step (default 256)")
    ap.add_argument("--seed", type=int, default=0, help="--distill: seed of the split and the batches (default 0)")
    ap.add_argument("--holdout-frac", type=float, default=0.1,
                    help="--distill: share of the record windows held out (default 0.1)")
    ap.add_argument("--distill-k", type=int, default=1024,
                    help="--distill: the k of the held-out recall@k that must improve (default 1024)")
    a = ap.parse_args(argv)
    if not a.distill:  # the distillation options mean nothing without it: say so rather than ignore them
        given = [o for o in ("--steps", "--lr", "--batch", "--seed", "--holdout-frac", "--distill-k")
                 if any(x == o or x.startswith(o + "=") for x in argv)]
        if given:
            ap.error(f"{', '.join(given)} only with --distill")
    if a.steps < 0 or a.lr <= 0 or a.batch < 1 or a.distill_k < 1 or not 0 < a.holdout_frac < 1:
        ap.error("--steps ≥ 0, --lr > 0, --batch ≥ 1, --distill-k ≥ 1 and 0 < --holdout-frac < 1")
    try:
        mf = model_file(a.model)
        if not os.path.isfile(mf):
            raise BuildError(f"{mf}: no such model file")
        log(f"sha256 of {mf}")
        sha = sha256_file(mf)
        rec = None
        if a.distill:
            rec = dc.read_record(TOOL, a.distill)  # a bad file: exit 1 naming it
            if rec["sha256"] != sha:
                raise BuildError(f"{a.distill} was recorded from the model with sha256 {rec['sha256']}, "
                                 f"but {mf} has sha256 {sha}")
        W = load_head(a.model)
        V, d = W.shape
        if rec is not None and (rec["vocab"], rec["d"]) != (V, d):
            raise BuildError(f"{a.distill}: V {rec['vocab']}, d {rec['d']}, but the head is [{V}, {d}]")
        if rec is not None and not a.distill_k < V:
            raise BuildError(f"--distill-k {a.distill_k} must be below the vocabulary size {V}")
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
        distilled = None
        if rec is not None:
            w_vocab, w_down, distilled = distill(a, rec, w_vocab, w_down, dtype)
        write_artifact(a.out, sha, w_down, w_vocab, dtype, distilled)
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
