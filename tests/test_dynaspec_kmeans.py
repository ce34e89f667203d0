#!/usr/bin/env python3
"""tools/vocab/dynaspec_cluster.py's spherical k-means against a naive reference.

The reference below is plain Python loops over lists (float64), written from
the algorithm in the tool's docstring: the same initial rows
(default_rng(seed).choice), cosine assignment with the first max, mean-then-
normalise update, an empty cluster re-seeded with the worst-fitting row. On
small seeded matrices (odd sizes; one case built so a cluster empties, one
with fewer distinct directions than clusters, one with a zero row) the tool
(float32 numpy, chunked) must give the same assignment and centroids within
1e-5, for several chunk sizes. Exit 77 when numpy is missing.
"""
import math
import os
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy not importable")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "vocab"))
import dynaspec_cluster as dcl  # noqa: E402


def unit(v):
    n = math.sqrt(sum(a * a for a in v))
    return [a / n for a in v] if n > 0 else [0.0] * len(v)


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def naive_kmeans(rows, m, seed, iters):
    xs = [unit(r) for r in rows]
    init = np.random.default_rng(seed).choice(len(xs), m, replace=False)
    cs = [list(xs[i]) for i in init]

    def assign():
        a, s = [], []
        for x in xs:
            best, bs = 0, dot(x, cs[0])
            for j in range(1, m):
                v = dot(x, cs[j])
                if v > bs:
                    best, bs = j, v
            a.append(best)
            s.append(bs)
        return a, s

    prev = None
    for _ in range(iters):
        a, s = assign()
        changed = len(xs) if prev is None else sum(1 for p, q in zip(prev, a) if p != q)
        new = []
        for j in range(m):
            acc = [0.0] * len(xs[0])
            for x, aj in zip(xs, a):
                if aj == j:
                    acc = [u + v for u, v in zip(acc, x)]
            new.append(unit(acc))
        empty = [j for j in range(m) if j not in a]
        worst = sorted(range(len(xs)), key=lambda i: (s[i], i))
        for j, i in zip(empty, worst):
            new[j] = list(xs[i])
        cs = new
        prev = a
        if changed == 0 and not empty:
            break
    a, _ = assign()
    return a, cs


def main():
    fails = 0
    rng = np.random.default_rng(11)
    cases = []
    cases.append(("gaussian 97x7, M 5", rng.standard_normal((97, 7)), 5, 3))
    # rows 10..15 identical: a seed whose initial rows hold two of them starts with two equal
    # centroids; the first max gives every row to the lower one, the other empties and is re-seeded
    x = rng.standard_normal((60, 6))
    x[11:16] = x[10]
    seed = next(s for s in range(1000) if np.isin(np.random.default_rng(s).choice(60, 5, replace=False),
                                                  np.arange(10, 16)).sum() >= 2)
    cases.append(("duplicate rows, an empty cluster, M 5", x, 5, seed))
    z = rng.standard_normal((41, 5))
    z[7] = 0
    cases.append(("a zero row, 41x5, M 6", z, 6, 2))
    cases.append(("gaussian 150x16, M 12", rng.standard_normal((150, 16)), 12, 9))
    total_reseeded = 0
    for name, x, m, seed in cases:
        want_a, want_c = naive_kmeans(x.tolist(), m, seed, 30)
        xn = dcl.normalize_rows(x.astype(np.float32))
        for chunk in (1, 7, 1000):
            reseeded = []
            a, c, its = dcl.spherical_kmeans(xn, m, seed, 30, chunk, lambda it, ch, ms, r: reseeded.append(r))
            total_reseeded += sum(reseeded)
            ok_a = a.tolist() == want_a
            err = float(np.abs(c - np.array(want_c)).max())
            ok = ok_a and err < 1e-5
            print("%s: %s (chunk %d, %d iterations, centroid error %.2g%s)" %
                  ("ok" if ok else "FAIL", name, chunk, its, err, "" if ok_a else ", assignments differ"))
            fails += not ok
    # the duplicate-rows case really went through the re-seeding branch
    if total_reseeded == 0:
        print("FAIL: no case re-seeded an empty cluster")
        fails += 1
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
