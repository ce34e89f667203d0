#!/usr/bin/env python3
"""dynaspec_cluster.py — partition a GGUF model's vocabulary into M clusters
by spherical k-means on its L2-normalised LM-head rows (DynaSpec, issue 16).

  dynaspec_cluster.py --model DRAFT.gguf --out CLUSTERS.npz [--clusters M] [--seed S] [--iters N]

The head is `output.weight` when the file has one (Qwen2.5 0.5B), else the
tied `token_embd.weight` (Gemma 3); rows are dequantized chunk by chunk with
the `gguf` package.

Spherical k-means (Dhillon & Modha 2001), unbalanced clusters:
  x_i = w_i / |w_i|                              (a zero row stays zero)
  init: M distinct rows, numpy default_rng(seed).choice(V, M, replace=False)
  repeat: a_i = argmax_j <x_i, c_j>              (first max on ties)
          c_j = normalize(sum_{a_i = j} x_i)
          an empty cluster j takes the worst-fitting row (lowest <x_i, c_{a_i}>,
          then lower i), one row per empty cluster in order of j
  until no assignment changes or N iterations; cluster_of = the assignment
  under the final centroids.
Matmuls run in float32 in chunks of rows, so 262,144 x 640 needs ~0.7 GB.

Writes an .npz: cluster_of int32 [V], centroids float32 [M, d], and the
model's sha256, head tensor name, M, seed, iterations (dynaspec_train.py
refuses the file for another model). Progress goes to stderr, one line an
iteration.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dynaspec_common as dc  # noqa: E402

TOOL = "dynaspec_cluster"


def normalize_rows(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def init_centroids(x, m, seed):
    idx = np.random.default_rng(seed).choice(x.shape[0], m, replace=False)
    return x[idx].copy()


def assign(x, c, chunk):
    """→ (a [V] int64: argmax_j <x_i, c_j>, s [V] f32: that similarity)."""
    a = np.empty(x.shape[0], dtype=np.int64)
    s = np.empty(x.shape[0], dtype=np.float32)
    for r in range(0, x.shape[0], chunk):
        sim = x[r:r + chunk] @ c.T
        a[r:r + chunk] = np.argmax(sim, axis=1)
        s[r:r + chunk] = sim[np.arange(sim.shape[0]), a[r:r + chunk]]
    return a, s


def update(x, a, s, m, chunk):
    """Mean-then-normalise centroids of assignment a; empty clusters re-seeded
    with the worst-fitting rows. → (c [M, d], number of re-seeded clusters)."""
    csum = np.zeros((m, x.shape[1]), dtype=np.float64)
    for r in range(0, x.shape[0], chunk):
        np.add.at(csum, a[r:r + chunk], x[r:r + chunk].astype(np.float64))
    c = normalize_rows(csum).astype(np.float32)
    counts = np.bincount(a, minlength=m)
    empty = np.flatnonzero(counts == 0)
    if len(empty):
        worst = np.lexsort((np.arange(len(s)), s))[:len(empty)]  # by similarity, then index
        c[empty] = x[worst]
    return c, len(empty)


def spherical_kmeans(x, m, seed, iters, chunk=16384, progress=None):
    """x [V, d] f32, already L2-normalised. → (cluster_of int32 [V], centroids f32 [M, d], iterations run)."""
    if not 1 <= m <= x.shape[0]:
        raise ValueError("clusters %d not in [1, %d]" % (m, x.shape[0]))
    c = init_centroids(x, m, seed)
    prev = None
    it = 0
    for it in range(1, iters + 1):
        a, s = assign(x, c, chunk)
        changed = x.shape[0] if prev is None else int(np.count_nonzero(a != prev))
        c, reseeded = update(x, a, s, m, chunk)
        if progress:
            progress(it, changed, float(s.mean()), reseeded)
        prev = a
        if changed == 0 and reseeded == 0:
            break
    a, _ = assign(x, c, chunk)
    return a.astype(np.int32), c, it


def main():
    ap = dc.argparser(TOOL, __doc__)
    ap.add_argument("--out", required=True, help="output .npz")
    ap.add_argument("--clusters", type=int, default=256, help="M (default 256)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the initial centroids (default 1)")
    ap.add_argument("--iters", type=int, default=25, help="at most this many iterations (default 25)")
    ap.add_argument("--chunk", type=int, default=16384, help="rows a matmul chunk (default 16384)")
    args = ap.parse_args()
    if args.clusters < 1 or args.iters < 1 or args.chunk < 1:
        dc.die(TOOL, "--clusters, --iters and --chunk must be positive", 2)

    reader = dc.open_gguf(TOOL, args.model)
    head = dc.head_rows(TOOL, reader, args.model)
    dc.log(TOOL, "%s: head %s [%d, %d] %s; hashing the file" % (args.model, head.name, head.m, head.k,
                                                                 head.t.tensor_type.name))
    sha = dc.sha256_file(args.model)
    x = np.empty((head.m, head.k), dtype=np.float32)
    for r in range(0, head.m, args.chunk):
        x[r:r + args.chunk] = normalize_rows(head.rows(r, min(head.m, r + args.chunk)))
    if args.clusters > head.m:
        dc.die(TOOL, "--clusters %d exceeds the vocabulary %d" % (args.clusters, head.m), 2)

    def progress(it, changed, mean_sim, reseeded):
        dc.log(TOOL, "iteration %d: %d assignments changed, mean cosine %.4f, %d empty clusters re-seeded" %
               (it, changed, mean_sim, reseeded))

    cluster_of, cent, its = spherical_kmeans(x, args.clusters, args.seed, args.iters, args.chunk, progress)
    sizes = np.bincount(cluster_of, minlength=args.clusters)
    tmp = args.out + ".tmp.npz"
    np.savez(tmp, cluster_of=cluster_of, centroids=cent, model_sha256=np.array(sha), head=np.array(head.name),
             clusters=np.int64(args.clusters), seed=np.int64(args.seed), iterations=np.int64(its))
    os.replace(tmp, args.out)
    dc.log(TOOL, "wrote %s: %d clusters over %d ids after %d iterations; sizes min %d median %d max %d, %d empty" %
           (args.out, args.clusters, head.m, its, sizes.min(), int(np.median(sizes)), sizes.max(),
            int(np.count_nonzero(sizes == 0))))


if __name__ == "__main__":
    main()
