#!/usr/bin/env python3
"""Acceptance check of this engine's greedy output against llama.cpp's.

  gguf_greedy_check.py GREEDY.json ENGINE.json [--margin M] [--min-pass N] [--strict]

GREEDY.json: tests/golden/gguf/greedy_<model>.json (make_llamacpp_ref.sh).
ENGINE.json: {"0": [ids...], "1": [...], ...}, the ids this engine generated
for each prompt (index as in GREEDY.json), the EOS token included if it
generated one.

Rule: prompt i passes if the engine's ids equal llama.cpp's generated ids, or
if they first part at a step k where llama.cpp's top-1/top-2 log-prob margin
is < MARGIN (a near-tie that quantized-activation noise may flip). Only the
first len(llama.cpp ids) engine ids are compared (llama.cpp stops at 32 or at
EOS); an engine list that ends early parts at the step where it ends.
MARGIN: --margin, else 0.35 when the file's model is a gemma model, 0.25 for
qwen. --strict also requires the engine's token at the parting step to be
llama.cpp's top-2. Exit 0 iff at least --min-pass (default 9) prompts pass;
1 otherwise; 2 for unusable input.
"""
import argparse
import json
import math
import sys

MARGINS = {"gemma": 0.35, "qwen": 0.25}


def fail_input(msg):
    print("gguf_greedy_check: " + msg, file=sys.stderr)
    sys.exit(2)


def pick_margin(doc, override):
    if override is not None:
        return override
    name = (str(doc.get("model", "")) + " " + str(doc.get("file", ""))).lower()
    for key, m in MARGINS.items():
        if key in name:
            return m
    fail_input("cannot tell the model family from %r; pass --margin" % name.strip())


def check_prompt(p, eng, margin, strict):
    """Returns (passed, message)."""
    ref = p["generated_ids"]
    steps = p["steps"]
    if eng is None:
        return False, "FAILED (no engine ids)"
    if not isinstance(eng, list) or not all(isinstance(t, int) for t in eng):
        return False, "FAILED (engine ids are not a list of integers)"
    k = next((j for j in range(min(len(ref), len(eng))) if ref[j] != eng[j]), None)
    if k is None and len(eng) < len(ref):
        k = len(eng)
    if k is None:
        return True, "equal (%d tokens)" % len(ref)
    st = steps[k] if k < len(steps) else []
    m = st[0][1] - st[1][1] if len(st) >= 2 else math.inf
    got = eng[k] if k < len(eng) else None
    what = "engine ended" if got is None else "engine %d, llama.cpp %d" % (got, ref[k])
    ok = m < margin
    if ok and strict and (got is None or got != st[1][0]):
        return False, "FAILED: parted at step %d with margin %.4f (%s), engine token is not llama.cpp's top-2" % (
            k, m, what)
    if ok:
        return True, "parted at step %d with margin %.4f (< %.2f; %s)" % (k, m, margin, what)
    return False, "FAILED: parted at step %d with margin %.4f (>= %.2f; %s)" % (k, m, margin, what)


def main(argv=None):
    ap = argparse.ArgumentParser(description="greedy acceptance check against llama.cpp")
    ap.add_argument("greedy")
    ap.add_argument("engine")
    ap.add_argument("--margin", type=float, default=None)
    ap.add_argument("--min-pass", type=int, default=9)
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args(argv)
    try:
        doc = json.load(open(a.greedy))
        eng = json.load(open(a.engine))
        prompts = doc["prompts"]
        for p in prompts:
            if not isinstance(p["generated_ids"], list) or not isinstance(p["steps"], list):
                raise TypeError("prompt without generated_ids/steps lists")
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail_input("unusable input: %s" % e)
    if not isinstance(eng, dict):
        fail_input("engine file must be a JSON object {\"0\": [ids...], ...}")
    margin = pick_margin(doc, a.margin)
    n_pass = 0
    for i, p in enumerate(prompts):
        ok, msg = check_prompt(p, eng.get(str(i)), margin, a.strict)
        n_pass += ok
        print("prompt %d: %s" % (i, msg))
    verdict = n_pass >= a.min_pass
    print("%s: %d/%d prompts pass (need %d, margin %.2f)" % ("PASS" if verdict else "FAIL", n_pass, len(prompts),
                                                           a.min_pass, margin))
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
