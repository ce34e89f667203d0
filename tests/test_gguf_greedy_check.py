#!/usr/bin/env python3
"""Tests tests/gguf_greedy_check.py on synthetic greedy files with known
margins (it must accept equal ids and near-tie partings, and reject partings
at confident steps), then, when the committed golden files exist, checks that
each one accepts its own ids and rejects them perturbed at the most confident
step of two prompts. No golden file at all is a failure.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "gguf_greedy_check.py")
GOLDEN = os.path.join(HERE, "golden", "gguf")

N_PROMPTS, N_STEPS = 10, 8
TIE_STEP, MID_STEP = 3, 5          # margins 0.10 and 0.30; every other step 2.0
failures = []


def synthetic(model):
    prompts = []
    for i in range(N_PROMPTS):
        gen = [1000 + 10 * i + k for k in range(N_STEPS)]
        steps = []
        for k, t in enumerate(gen):
            m = 0.10 if k == TIE_STEP else 0.30 if k == MID_STEP else 2.0
            steps.append([[t, -0.5], [t + 5000, round(-0.5 - m, 5)]])
        prompts.append({"text": "p%d" % i, "prompt_ids": [1, 2, 3], "generated_ids": gen, "steps": steps})
    return {"model": model, "file": model + ".gguf", "prompts": prompts}


def engine_from(doc):
    return {str(i): list(p["generated_ids"]) for i, p in enumerate(doc["prompts"])}


def part(eng, doc, i, k, top2=True):
    """Engine ids for prompt i part from llama.cpp's at step k."""
    p = doc["prompts"][i]
    ids = list(p["generated_ids"][:k])
    ids.append(p["steps"][k][1][0] if top2 else 7)
    ids += [9] * (len(p["generated_ids"]) - k - 1)
    eng[str(i)] = ids


def run(doc, eng, *extra, raw_engine=None):
    with tempfile.TemporaryDirectory() as d:
        g, e = os.path.join(d, "g.json"), os.path.join(d, "e.json")
        with open(g, "w") as f:
            json.dump(doc, f) if isinstance(doc, dict) else f.write(doc)
        with open(e, "w") as f:
            f.write(raw_engine if raw_engine is not None else json.dumps(eng))
        r = subprocess.run([sys.executable, CHECK, g, e] + list(extra), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(name, got_rc, out, want_rc, must_contain=()):
    ok = got_rc == want_rc and all(s in out for s in must_contain)
    print("%s %s (rc %d, want %d)" % ("ok  " if ok else "FAIL", name, got_rc, want_rc))
    if not ok:
        failures.append(name)
        print(out)


def synthetic_cases():
    q = synthetic("qwen2.5-coder-0.5b")
    gm = synthetic("gemma3-270m")

    rc, out = run(q, engine_from(q))
    expect("all equal passes", rc, out, 0, ["prompt 0: equal (8 tokens)", "10/10"])

    e = engine_from(q)
    part(e, q, 4, 6)
    rc, out = run(q, e)
    expect("one confident parting still 9/10", rc, out, 0, ["prompt 4: FAILED: parted at step 6 with margin 2.0000"])

    e = engine_from(q)
    part(e, q, 4, 6)
    part(e, q, 7, 0)
    rc, out = run(q, e)
    expect("two confident partings fail", rc, out, 1, ["8/10", "prompt 7: FAILED"])

    e = engine_from(q)
    for i in (1, 2, 3):
        part(e, q, i, TIE_STEP)
    rc, out = run(q, e)
    expect("near-tie partings pass", rc, out, 0, ["prompt 2: parted at step 3 with margin 0.1000"])

    e = engine_from(q)
    part(e, q, 0, MID_STEP)
    part(e, q, 1, MID_STEP)
    rc, out = run(q, e)
    expect("margin 0.30 fails for qwen (0.25)", rc, out, 1, ["margin 0.25"])
    rc, out = run(gm, e)
    expect("margin 0.30 passes for gemma (0.35)", rc, out, 0, ["margin 0.35"])
    rc, out = run(gm, e, "--margin", "0.2")
    expect("--margin overrides the model's", rc, out, 1, ["margin 0.20"])

    e = engine_from(q)
    part(e, q, 0, TIE_STEP, top2=False)
    part(e, q, 1, TIE_STEP, top2=False)
    rc, out = run(q, e)
    expect("non-top-2 token at a near tie passes the plain rule", rc, out, 0)
    rc, out = run(q, e, "--strict")
    expect("--strict rejects a non-top-2 token", rc, out, 1, ["not llama.cpp's top-2"])

    e = engine_from(q)
    del e["3"]
    e["5"] = e["5"][:2]
    rc, out = run(q, e)
    expect("missing and early-ending prompts fail", rc, out, 1,
           ["prompt 3: FAILED (no engine ids)", "prompt 5: FAILED: parted at step 2", "engine ended"])

    e = engine_from(q)
    e["6"] = e["6"] + [1, 2, 3]
    rc, out = run(q, e)
    expect("ids past llama.cpp's end are ignored", rc, out, 0, ["prompt 6: equal"])

    e = engine_from(q)
    e["2"] = "not a list"
    e["8"] = [1.5]
    rc, out = run(q, e)
    expect("malformed engine ids fail", rc, out, 1, ["prompt 2: FAILED", "prompt 8: FAILED"])

    rc, out = run(q, None, raw_engine="[1, 2]")
    expect("engine file not an object -> 2", rc, out, 2)
    rc, out = run("{not json", engine_from(q))
    expect("broken greedy file -> 2", rc, out, 2)
    rc, out = run(synthetic("llama-7b"), engine_from(q))
    expect("unknown model without --margin -> 2", rc, out, 2)


def golden_cases():
    names = [n for n in sorted(os.listdir(GOLDEN)) if n.startswith("greedy_") and n != "greedy_prompts.json"] \
        if os.path.isdir(GOLDEN) else []
    if not names:  # a moved or emptied golden folder must not pass as "nothing to check"
        failures.append("no greedy_*.json golden file in " + GOLDEN)
    for n in names:
        doc = json.load(open(os.path.join(GOLDEN, n)))
        if len(doc["prompts"]) != 10:
            failures.append(n + " has %d prompts" % len(doc["prompts"]))
            continue
        for p in doc["prompts"]:
            ok = len(p["steps"]) == len(p["generated_ids"]) and all(
                len(s) == 2 and s[0][0] == t and s[0][1] >= s[1][1] for s, t in zip(p["steps"], p["generated_ids"]))
            if not ok:
                failures.append(n + ": steps do not match generated ids")
                break
        rc, out = run(doc, engine_from(doc))
        expect(n + ": own ids pass", rc, out, 0, ["10/10"])
        e = engine_from(doc)
        for i in (0, 1):
            steps = doc["prompts"][i]["steps"]
            k = max(range(len(steps)), key=lambda j: steps[j][0][1] - steps[j][1][1])
            part(e, copy.deepcopy(doc), i, k)
        rc, out = run(doc, e)
        expect(n + ": two confident partings fail", rc, out, 1, ["8/10"])


if __name__ == "__main__":
    synthetic_cases()
    golden_cases()
    if failures:
        print("FAILED: %s" % ", ".join(failures))
        sys.exit(1)
    print("all passed")
