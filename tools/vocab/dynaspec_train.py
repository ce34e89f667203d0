#!/usr/bin/env python3
"""dynaspec_train.py — train the DynaSpec cluster router on recorded draft
states and write the artefact GGUF the C engine loads (issue 16;
draft-node/ms_dynaspec.h).

  dynaspec_train.py --model DRAFT.gguf --clusters CLUSTERS.npz --records REC [--records REC2 ...] --out ART.gguf [options]

Inputs: CLUSTERS.npz from dynaspec_cluster.py and REC from microspec-record,
all made from the same model file (sha256 checked, else refused). Several
record files are trained on together (e.g. teacher-forced windows and
`--chains` records of the deeper draft steps); the held-out recall is also
reported per file.

Router (two-layer MLP, plain numpy):
  z = [e(x_t), h_{t-1}]            [2d]  e = the RAW token_embd row of x_t
                                          (Gemma's sqrt(d) embedding scale is
                                          NOT applied: the C side reads the
                                          same raw row), h = final-norm state
  s = W2 relu(W1 z + b1) + b2      [M]
Training: binary cross-entropy with logits against the multi-hot targets
y_j = 1 iff cluster j holds one of the full head's top-L ids at t; Adam,
seeded init and shuffles. Inputs are standardised per feature during
training and the standardisation is folded into W1, b1 on export, so the
artefact takes raw z. A held-out split (whole blocks of 512 records, from
each record file) reports
  recall@k_c = share of positions whose full-head top-1 id lies in the union
               of the picked clusters, and the mean size of that union,
for k_c = 4, 8, 16, 32 and for levels of 1 row, 10 rows (10 consecutive
held-out positions: more diverse than a real tree level) and 8 sibling rows
(the parent's top-8 tokens after the same h_{t-1}: a level of a tree); and,
as a baseline without a router, the same for the k_c clusters most often
positive in the training split.

The artefact (GGUF, written with the `gguf` package): KV microspec.artifact
= "dynaspec", microspec.model_sha256, microspec.vocab_size,
microspec.hidden_size, dynaspec.n_clusters, dynaspec.router_hidden,
dynaspec.top_l, dynaspec.seed; tensors dynaspec.cluster_of i32 [V],
dynaspec.w1 f32 [H, 2d], dynaspec.b1 [H], dynaspec.w2 [M, H], dynaspec.b2 [M].

--dump-forward FILE writes N held-out positions' router inputs and outputs
(the exported weights' forward in float64) for the C equality test:
  "MSDSFWD1", u32 n, u32 d, u32 M, u32 0, then i32 tok [n], f32 prev [n, d],
  f32 z [n, 2d], f32 scores [n, M] (little-endian).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dynaspec_common as dc  # noqa: E402

TOOL = "dynaspec_train"
BLOCK = 512


def relu(x):
    return np.maximum(x, 0)


def forward(p, z):
    a = relu(z @ p["w1"].T + p["b1"])
    return a @ p["w2"].T + p["b2"], a


def bce_grad(s, y):
    """Mean BCE-with-logits over batch and clusters, and dL/ds."""
    l = np.maximum(s, 0) - s * y + np.log1p(np.exp(-np.abs(s)))
    g = (1 / (1 + np.exp(-s)) - y) / s.size
    return float(l.mean()), g


def train(z, y, H, epochs, batch, lr, seed, log):
    n, k = z.shape
    M = y.shape[1]
    rng = np.random.default_rng(seed)
    base = np.clip(y.mean(axis=0), 1e-4, 1 - 1e-4)
    p = {"w1": (rng.standard_normal((H, k)) * np.sqrt(2.0 / k)).astype(np.float32),
         "b1": np.zeros(H, np.float32),
         "w2": (rng.standard_normal((M, H)) * np.sqrt(1.0 / H)).astype(np.float32),
         "b2": np.log(base / (1 - base)).astype(np.float32)}
    m = {key: np.zeros_like(v) for key, v in p.items()}
    v2 = {key: np.zeros_like(v) for key, v in p.items()}
    b1_, b2_, eps, t = 0.9, 0.999, 1e-8, 0
    for ep in range(epochs):
        order = rng.permutation(n)
        tot = 0.0
        for r in range(0, n, batch):
            idx = order[r:r + batch]
            zb, yb = z[idx], y[idx]
            s, a = forward(p, zb)
            loss, gs = bce_grad(s, yb)
            tot += loss * len(idx)
            g = {"w2": gs.T @ a, "b2": gs.sum(0)}
            ga = (gs @ p["w2"]) * (a > 0)
            g["w1"] = ga.T @ zb
            g["b1"] = ga.sum(0)
            t += 1
            for key in p:
                m[key] = b1_ * m[key] + (1 - b1_) * g[key]
                v2[key] = b2_ * v2[key] + (1 - b2_) * g[key] ** 2
                mh = m[key] / (1 - b1_ ** t)
                vh = v2[key] / (1 - b2_ ** t)
                p[key] -= (lr * mh / (np.sqrt(vh) + eps)).astype(np.float32)
        log("epoch %d/%d: training BCE %.5f" % (ep + 1, epochs, tot / n))
    return p


def fold(p, mu, sd):
    """Weights on standardised z' = (z - mu)/sd → weights on raw z."""
    w1 = (p["w1"] / sd).astype(np.float32)
    b1 = (p["b1"] - (p["w1"] * (mu / sd)).sum(axis=1)).astype(np.float32)
    return {"w1": w1, "b1": b1, "w2": p["w2"].copy(), "b2": p["b2"].copy()}


def union_stats(scores_groups, top1_groups, cluster_of, sizes, kc):
    """scores_groups [G, R, M], top1 [G, R] (-1: no target row) → (recall, mean union size)."""
    G, R, M = scores_groups.shape
    pick = np.argsort(-scores_groups, axis=2, kind="stable")[:, :, :kc]  # [G, R, kc]
    taken = np.zeros((G, M), bool)
    np.put_along_axis(taken, pick.reshape(G, R * kc), True, axis=1)
    usize = (taken * sizes).sum(1)
    hit, cnt = 0, 0
    for r in range(top1_groups.shape[1]):
        valid = top1_groups[:, r] >= 0
        c = cluster_of[np.where(valid, top1_groups[:, r], 0)]
        hit += int(taken[np.arange(G), c][valid].sum())
        cnt += int(valid.sum())
    return hit / max(cnt, 1), float(usize.mean())


def main():
    ap = dc.argparser(TOOL, __doc__)
    ap.add_argument("--clusters", required=True, help=".npz from dynaspec_cluster.py")
    ap.add_argument("--records", required=True, action="append",
                    help="file from microspec-record (repeatable: trained on together)")
    ap.add_argument("--out", required=True, help="artefact GGUF to write")
    ap.add_argument("--hidden", type=int, default=256, help="router hidden width H (default 256)")
    ap.add_argument("--epochs", type=int, default=12, help="passes over the training split (default 12)")
    ap.add_argument("--batch", type=int, default=512, help="minibatch (default 512)")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    ap.add_argument("--holdout", type=float, default=0.1, help="held-out share, whole 512-record blocks (default 0.1)")
    ap.add_argument("--seed", type=int, default=1, help="seed of init, split and shuffles (default 1)")
    ap.add_argument("--dump-forward", metavar="FILE", help="write N held-out router inputs and outputs (C test)")
    ap.add_argument("--dump-n", type=int, default=16, help="positions in --dump-forward (default 16)")
    args = ap.parse_args()
    log = lambda msg: dc.log(TOOL, msg)  # noqa: E731
    if args.hidden < 1 or args.epochs < 0 or args.batch < 1 or not 0 < args.holdout < 1:
        dc.die(TOOL, "--hidden, --batch ≥ 1, --epochs ≥ 0, --holdout in (0, 1)", 2)

    reader = dc.open_gguf(TOOL, args.model)
    embd = dc.embed_rows(TOOL, reader, args.model)
    sha = dc.sha256_file(args.model)
    try:
        cl = np.load(args.clusters)
        cluster_of = np.asarray(cl["cluster_of"], dtype=np.int32)
        cl_sha = str(cl["model_sha256"])
        M = int(cl["clusters"])
    except (OSError, KeyError, ValueError) as e:
        dc.die(TOOL, "%s: not a dynaspec_cluster.py file (%s)" % (args.clusters, e))
    recs = [dc.read_record(TOOL, path) for path in args.records]
    checks = [(args.clusters, cl_sha)] + [(path, r["sha256"]) for path, r in zip(args.records, recs)]
    for what, have in checks:
        if have != sha:
            dc.die(TOOL, "%s was made for the model with sha256 %s, but %s has sha256 %s" % (what, have, args.model, sha))
    V, d = embd.m, embd.k
    for path, r in zip(args.records, recs):
        if len(cluster_of) != V or r["d"] != d or r["vocab"] != V or r["L"] != recs[0]["L"]:
            dc.die(TOOL, "sizes disagree: model V %d d %d, clusters V %d, %s: V %d d %d L %d (first file: L %d)" %
                   (V, d, len(cluster_of), path, r["vocab"], r["d"], r["L"], recs[0]["L"]))
    n, L = sum(r["n"] for r in recs), recs[0]["L"]
    if n < 2 * BLOCK:
        dc.die(TOOL, "%s: %d records; at least %d are needed" % (", ".join(args.records), n, 2 * BLOCK))
    log("%d records (top-%d), V %d, d %d, %d clusters; gathering embedding rows" % (n, L, V, d, M))
    tok = np.concatenate([np.asarray(r["tok"]) for r in recs])
    top = np.concatenate([np.asarray(r["top"]) for r in recs])
    prev = np.concatenate([np.asarray(r["prev"], dtype=np.float32) for r in recs])
    file_of = np.repeat(np.arange(len(recs)), [r["n"] for r in recs])
    z = np.concatenate([embd.row_idx(tok), prev], axis=1)  # [n, 2d]
    y = np.zeros((n, M), np.float32)
    np.put_along_axis(y, cluster_of[top], 1.0, axis=1)

    rng = np.random.default_rng(args.seed)
    hold = np.zeros(n, bool)
    base = 0
    for r in recs:  # whole blocks of each file, so every file has held-out positions
        nb = (r["n"] + BLOCK - 1) // BLOCK
        for b in rng.permutation(nb)[:max(1, int(round(nb * args.holdout)))]:
            hold[base + b * BLOCK:base + min((b + 1) * BLOCK, r["n"])] = True
        base += r["n"]
    tr = np.flatnonzero(~hold)
    te = np.flatnonzero(hold)
    mu = z[tr].mean(0)
    sd = z[tr].std(0) + 1e-6
    log("training on %d positions, %d held out; H %d, %d epochs, batch %d, lr %g, seed %d" %
        (len(tr), len(te), args.hidden, args.epochs, args.batch, args.lr, args.seed))
    p = train((z[tr] - mu) / sd, y[tr], args.hidden, args.epochs, args.batch, args.lr, args.seed, log)
    q = fold(p, mu, sd)

    # held-out evaluation with the exported (raw-z) weights
    sizes = np.bincount(cluster_of, minlength=M)
    s_te, _ = forward(q, z[te])
    top1 = top[te, 0]
    results = []
    for kc in (4, 8, 16, 32):
        if kc > M:
            continue
        r1, u1 = union_stats(s_te[:, None, :], top1[:, None], cluster_of, sizes, kc)
        g = len(te) // 10
        r10, u10 = union_stats(s_te[:g * 10].reshape(g, 10, M), top1[:g * 10].reshape(g, 10), cluster_of, sizes, kc)
        results.append((kc, r1, u1, r10, u10))
    # sibling levels: the rows after the same h_{t-1} with tokens = the parent's top-min(8, L) ids
    sib = te[(te > 0) & np.any(prev[te] != 0, axis=1)]
    S = min(8, L)
    zs = np.concatenate([embd.row_idx(top[sib - 1, :S].reshape(-1)), np.repeat(prev[sib], S, axis=0)], axis=1)
    ss, _ = forward(q, zs)
    ss = ss.reshape(len(sib), S, M)
    # the target row is the true token's (when it is among the siblings); other rows have no target
    tgt = np.full((len(sib), S), -1, np.int64)
    at = np.argmax(top[sib - 1, :S] == tok[sib][:, None], axis=1)
    present = np.any(top[sib - 1, :S] == tok[sib][:, None], axis=1)
    tgt[np.arange(len(sib))[present], at[present]] = top[sib, 0][present]
    print("held-out: %d positions; %d levels of %d siblings (true token among them: %.1f%%)" %
          (len(te), len(sib), S, 100.0 * present.mean()))
    # no router: the k_c clusters most often positive in the training split, at every step
    static = np.argsort(-y[tr].sum(0), kind="stable")
    print("%6s %10s %10s %11s %11s %11s %11s %13s %13s" % ("k_c", "recall@1r", "union@1r", "recall@10r", "union@10r",
                                                          "recall@sib", "union@sib", "static:recall", "static:union"))
    for kc, r1, u1, r10, u10 in results:
        rs, us = union_stats(ss, tgt, cluster_of, sizes, kc)
        rst = float(np.isin(cluster_of[top1], static[:kc]).mean())
        print("%6d %10.4f %10.1f %11.4f %11.1f %11.4f %11.1f %13.4f %13d" % (kc, r1, u1, r10, u10, rs, us, rst,
                                                                             sizes[static[:kc]].sum()))
    if len(recs) > 1:
        for i, path in enumerate(args.records):
            sel = file_of[te] == i
            line = ", ".join("k_c %d %.4f" % (kc, union_stats(s_te[sel][:, None, :], top1[sel][:, None], cluster_of,
                                                                sizes, kc)[0])
                             for kc, *_ in results)
            print("held-out recall@1r of %s (%d positions): %s" % (path, int(sel.sum()), line))
    sys.stdout.flush()

    if args.dump_forward:
        nd = min(args.dump_n, len(te))
        idx = te[:nd]
        sd64 = forward({k2: v.astype(np.float64) for k2, v in q.items()}, z[idx].astype(np.float64))[0]
        with open(args.dump_forward, "wb") as f:
            f.write(b"MSDSFWD1")
            f.write(np.array([nd, d, M, 0], "<u4").tobytes())
            f.write(tok[idx].astype("<i4").tobytes())
            f.write(prev[idx].astype("<f4").tobytes())
            f.write(z[idx].astype("<f4").tobytes())
            f.write(sd64.astype("<f4").tobytes())
        log("wrote %d router inputs and outputs to %s" % (nd, args.dump_forward))

    import gguf
    tmp = args.out + ".tmp"
    w = gguf.GGUFWriter(tmp, "dynaspec")
    w.add_string("microspec.artifact", "dynaspec")
    w.add_string("microspec.model_sha256", sha)
    w.add_uint32("microspec.vocab_size", V)
    w.add_uint32("microspec.hidden_size", d)
    w.add_uint32("dynaspec.n_clusters", M)
    w.add_uint32("dynaspec.router_hidden", args.hidden)
    w.add_uint32("dynaspec.top_l", L)
    w.add_uint32("dynaspec.seed", args.seed)
    w.add_string("dynaspec.embedding", "raw token_embd row (no sqrt(d) scale)")
    w.add_tensor("dynaspec.cluster_of", cluster_of.astype(np.int32))
    for name in ("w1", "b1", "w2", "b2"):
        w.add_tensor("dynaspec." + name, np.ascontiguousarray(q[name], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, args.out)
    log("wrote %s (model sha256 %s)" % (args.out, sha))


if __name__ == "__main__":
    main()
