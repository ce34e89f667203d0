#!/usr/bin/env python3
"""Spec-Bench's training split (tools/bench/microspec_bench_prompts.c) against an
independent rule written here: the last quarter of each source category, in
file order, is training; every other question is evaluation.

  test_bench_split.py BENCH_PROMPTS SHARED_DIR

- the default selection ("all") is exactly the evaluation split (question ids),
- --per-category 70 still takes none of the training split,
- --train-text holds exactly the training split's first turns, in file order,
- --train-text with --human-eval (or with --out-jsonl) is bad usage (exit 2).
Exit 77 without ../shared's Spec-Bench file.
"""
import json
import os
import subprocess
import sys
import tempfile

TOOL, SHARED = sys.argv[1], sys.argv[2]
SB = os.path.join(SHARED, "data", "spec_bench", "question.jsonl")
if not os.path.isfile(SB):
    print("SKIP: %s is missing" % SB)
    sys.exit(77)
fails = 0


def check(ok, what, detail=""):
    global fails
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else "\n" + str(detail)[-2000:]), flush=True)
    fails += not ok


rows = [json.loads(line) for line in open(SB, encoding="utf-8") if line.strip()]
by_cat = {}
for r in rows:
    by_cat.setdefault(r["category"], []).append(r)
train = set()
for cat, rs in by_cat.items():
    keep = len(rs) - len(rs) // 4
    train.update(str(r["question_id"]) for r in rs[keep:])
evaluation = {str(r["question_id"]) for r in rows} - train

with tempfile.TemporaryDirectory() as tmp:
    def select(extra):
        js, man = os.path.join(tmp, "p.jsonl"), os.path.join(tmp, "m.tsv")
        p = subprocess.run([TOOL, "--spec-bench", SB, "--out-jsonl", js, "--out-manifest", man, "--warmup", "0"] + extra,
                           capture_output=True, text=True)
        if p.returncode != 0:
            return None, p.stderr
        return [line.split("\t")[3] for line in open(man, encoding="utf-8").read().splitlines()], p.stderr

    ids, err = select([])
    check(ids is not None and sorted(ids) == sorted(evaluation), "default selection == the evaluation split", err)
    ids, err = select(["--per-category", "70"])
    check(ids is not None and not (set(ids) & train) and len(ids) > 0, "--per-category 70 takes no training question", err)

    txt = os.path.join(tmp, "train.txt")
    p = subprocess.run([TOOL, "--spec-bench", SB, "--train-text", txt], capture_output=True, text=True)
    want = "".join(r["turns"][0] + "\n\n" for r in rows if str(r["question_id"]) in train)
    got = open(txt, encoding="utf-8").read() if p.returncode == 0 else None
    check(got == want and len(train) > 0, "--train-text writes the training split's first turns (%d)" % len(train),
          p.stderr)
    for bad in (["--human-eval", SB, "--train-text", txt], ["--spec-bench", SB, "--train-text", txt, "--out-jsonl", txt]):
        p = subprocess.run([TOOL] + bad, capture_output=True, text=True)
        check(p.returncode == 2, "bad usage exits 2: %s" % " ".join(bad[::2]), p.stderr)
print("%d failed" % fails)
sys.exit(1 if fails else 0)
