#!/usr/bin/env python3
"""dynaspec_random.py — a DynaSpec artefact with a seeded random router, for
the sampling test (tests/test_spec_sampling.c).

  dynaspec_random.py --model HF_DIR --out ART.gguf [--clusters M] [--hidden H] [--seed S]

Losslessness may not depend on how good the router is: any cluster
partition and any router weights must leave the sampled distribution the
target's. So the test needs no trained router, only a valid artefact for
its tiny Hugging Face model (tools/vocab/dynaspec_train.py reads GGUF drafts and
their recorded states). Clusters: every id in cluster id mod M (each
cluster non-empty when M <= V); w1, b1, w2, b2 normal(0, 1) from the seed.
The file layout is the trainer's (draft-node/ms_dynaspec.h), with the
sha256 of HF_DIR/model.safetensors.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a Hugging Face model folder (config.json, model.safetensors)")
    ap.add_argument("--out", required=True, help="artefact GGUF to write")
    ap.add_argument("--clusters", type=int, default=4, help="M (default 4)")
    ap.add_argument("--hidden", type=int, default=8, help="router hidden width H (default 8)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the weights (default 1)")
    args = ap.parse_args()
    try:
        import gguf
    except ImportError:
        sys.exit("dynaspec_random.py: the python `gguf` package is missing (tools/install-deps.sh installs it)")
    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    V, d = int(cfg["vocab_size"]), int(cfg["hidden_size"])
    M, H = args.clusters, args.hidden
    if not 1 <= M <= V or H < 1:
        sys.exit("dynaspec_random.py: need 1 <= clusters (%d) <= V (%d) and hidden >= 1" % (M, V))
    h = hashlib.sha256()
    with open(os.path.join(args.model, "model.safetensors"), "rb") as f:
        for b in iter(lambda: f.read(1 << 22), b""):
            h.update(b)
    rng = np.random.default_rng(args.seed)
    tmp = args.out + ".tmp"
    w = gguf.GGUFWriter(tmp, "dynaspec")
    w.add_string("microspec.artifact", "dynaspec")
    w.add_string("microspec.model_sha256", h.hexdigest())
    w.add_uint32("microspec.vocab_size", V)
    w.add_uint32("microspec.hidden_size", d)
    w.add_uint32("dynaspec.n_clusters", M)
    w.add_uint32("dynaspec.router_hidden", H)
    w.add_tensor("dynaspec.cluster_of", (np.arange(V) % M).astype(np.int32))
    for name, shape in (("w1", (H, 2 * d)), ("b1", (H,)), ("w2", (M, H)), ("b2", (M,))):
        w.add_tensor("dynaspec." + name, rng.standard_normal(shape).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
