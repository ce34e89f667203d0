#!/usr/bin/env python3
"""Greedy reference generations from a running llama-server (used by
tests/golden/gguf/make_llamacpp_ref.sh, which starts and stops the server).

  llamacpp_greedy.py gen --url URL --name NAME --file GGUF --prompts P.json --flags "..." --out OUT.json
  llamacpp_greedy.py compare A.json B.json     # how often two runs disagree

gen: for each raw prompt (no chat template), /tokenize with add_special=true
(BOS exactly where the file's add_bos_token says), then /completion with the
token ids, temperature 0, n_predict 32, n_probs 2, cache_prompt false,
return_tokens true. Per step the top-2 (id, log-prob) of the raw pre-sampling
distribution are stored, so the top-1/top-2 margin is known at every step.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llamacpp_client import post  # noqa: E402

N_PREDICT = 32
N_PROBS = 2


def gen(a):
    prompts = json.load(open(a.prompts))
    out = []
    for i, text in enumerate(prompts):
        ids = post(a.url + "/tokenize", {"content": text, "add_special": True, "parse_special": False})["tokens"]
        req = {"prompt": ids, "temperature": 0, "n_predict": N_PREDICT, "n_probs": N_PROBS,
               "cache_prompt": False, "return_tokens": True}
        r = post(a.url + "/completion", req)
        toks = r["tokens"]
        probs = r["completion_probabilities"]
        # The server drops the probs of a token that ends inside a UTF-8
        # sequence (server-context.cpp process_token), so insist they line up.
        if len(toks) != len(probs) or any(p["id"] != t for p, t in zip(probs, toks)):
            raise SystemExit("prompt %d: tokens and probabilities do not line up (%d vs %d)"
                             % (i, len(toks), len(probs)))
        steps = []
        for p in probs:
            top = [[e["id"], round(e["logprob"], 5)] for e in p["top_logprobs"][:2]]
            if top[0][0] != p["id"]:
                raise SystemExit("prompt %d: greedy token is not the top-1" % i)
            steps.append(top)
        out.append({"text": text, "prompt_ids": ids, "generated_ids": toks,
                    "stop_type": r.get("stop_type"), "steps": steps})
        print("prompt %d: %d prompt ids, %d generated, stop %s" % (i, len(ids), len(toks), r.get("stop_type")),
              file=sys.stderr)
    doc = {
        "model": a.name,
        "file": os.path.basename(a.file),
        "file_size": os.path.getsize(a.file),
        "llamacpp": "llama-cpp-python 0.3.36 (vendored llama.cpp 0c1e57098), CPU build, GGML_NATIVE",
        "server_flags": a.flags,
        "request": {"temperature": 0, "n_predict": N_PREDICT, "n_probs": N_PROBS, "cache_prompt": False,
                    "return_tokens": True, "prompt": "token ids from /tokenize add_special=true"},
        "steps_note": "steps[k] = [[top1_id, logprob], [top2_id, logprob]] before generated_ids[k]; "
                      "log-probs are log-softmax of the raw logits (pre-sampling)",
        "prompts": out,
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def compare(a):
    x, y = json.load(open(a.a)), json.load(open(a.b))
    n_diff = 0
    n_steps = 0
    n_steps_same = 0
    for i, (p, q) in enumerate(zip(x["prompts"], y["prompts"])):
        g, h = p["generated_ids"], q["generated_ids"]
        k = next((j for j in range(min(len(g), len(h))) if g[j] != h[j]), None)
        if k is None and len(g) != len(h):
            k = min(len(g), len(h))
        m = min(len(g), len(h))
        n_steps += m
        n_steps_same += m if k is None else k
        if k is None:
            print("prompt %d: equal (%d tokens)" % (i, len(g)))
        else:
            n_diff += 1
            st = p["steps"][k] if k < len(p["steps"]) else None
            margin = (st[0][1] - st[1][1]) if st and len(st) > 1 else float("nan")
            print("prompt %d: parted at step %d, top-1/top-2 margin there %.4f" % (i, k, margin))
    # Same-step log-prob differences over the common prefix (0 means bit-identical runs).
    dmax = 0.0
    for p, q in zip(x["prompts"], y["prompts"]):
        for s, t, a_, b_ in zip(p["steps"], q["steps"], p["generated_ids"], q["generated_ids"]):
            dmax = max(dmax, abs(s[0][1] - t[0][1]))
            if a_ != b_:
                break
    print("prompts that differ: %d/%d; identical prefix steps %d/%d; max |top-1 log-prob diff| on the "
          "common prefix %.5f" % (n_diff, len(x["prompts"]), n_steps_same, n_steps, dmax))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--url", required=True)
    g.add_argument("--name", required=True)
    g.add_argument("--file", required=True)
    g.add_argument("--prompts", required=True)
    g.add_argument("--flags", default="")
    g.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    a = ap.parse_args()
    gen(a) if a.cmd == "gen" else compare(a)


if __name__ == "__main__":
    main()
