#!/usr/bin/env python3
"""Writes tests/golden/gguf/logsoftmax_<model>.json from gguf_ref_forward.py.

Prompt ids come from llama.cpp's tokenizer (llama-server /tokenize with
add_special=true, i.e. BOS exactly where the file's add_bos_token says). The
float64 reference log-softmax is then computed for the first N_POS positions
and, per position, stored as: the top-64 ids and log-probs, the log-probs of
64 fixed seeded-random ids (same ids at every position, so the tail of the
distribution is checked too) and the logsumexp of the raw logits.

The reference is cross-checked against llama.cpp itself: for every stored
position, /completion on ids[:t+1] with n_predict 1, n_probs N_CMP,
temperature 0, cache_prompt false returns llama.cpp's top log-probs (raw,
pre-sampling); the max |ref - llama.cpp| over those is printed and stored.

  make_gguf_logsoftmax.py NAME [--bin DIR] [--out FILE]
NAME: gemma3-270m | qwen2.5-coder-0.5b | qwen2.5-coder-1.5b
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_ref_forward as ref  # noqa: E402
from llamacpp_client import Server  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
N_POS = 16
N_TOP = 64
N_RAND = 64
RAND_SEED = 20240611
N_CMP = 20

CODE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n"
PROSE = ("The old lighthouse keeper climbed the spiral stairs every evening, counting each step "
         "while the storm gathered over the sea.")
PROSE2 = ("Photosynthesis turns sunlight, water and carbon dioxide into sugar, and the oxygen "
          "it releases is what most animals breathe.")
CHAT = "<|im_start|>user\nName the three primary colors, briefly.<|im_end|>\n<|im_start|>assistant\n"


def prompts_for(arch):
    third = ("chat", CHAT) if arch == "qwen2" else ("prose2", PROSE2)
    return [("code", CODE), ("prose", PROSE), third]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--bin", default=None, help="llama.cpp bin dir (default: tools/build-llamacpp.sh --bin)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--act-quant", action="store_true",
                    help="diagnosis: reference with llama.cpp-like activation rounding (never golden data)")
    ap.add_argument("--fa", default=None, help="diagnosis: pass -fa on|off to llama-server")
    a = ap.parse_args()
    if a.fa and not a.out:
        a.out = "/tmp/ms_logsoftmax_fa%s_%s.json" % (a.fa, a.name)
    if a.act_quant and not a.out:
        a.out = "/tmp/ms_logsoftmax_actquant_%s.json" % a.name
    path = subprocess.run([os.path.join(ROOT, "tools", "install-models.sh"), "--path", a.name],
                          capture_output=True, text=True, check=True).stdout.strip()
    out = a.out or os.path.join(ROOT, "tests", "golden", "gguf", "logsoftmax_%s.json" % a.name)
    m = ref.Model(path)
    prompts = prompts_for(m.arch)

    with Server(path, a.bin, extra=["-c", "2048", "--no-repack"] + (["-fa", a.fa] if a.fa else []), log_path="/tmp/ms_ref_server_%s.log" % a.name) as srv:
        ids = [srv.tokenize(text) for _, text in prompts]
        for (nm, _), s in zip(prompts, ids):
            print("%s: %d tokens" % (nm, len(s)), file=sys.stderr)
            if len(s) < N_POS:
                raise SystemExit("prompt %s has only %d tokens (< %d)" % (nm, len(s), N_POS))
        lc = []  # per prompt, per position: llama.cpp top_logprobs
        for s in ids:
            per = []
            for t in range(N_POS):
                r = srv.completion(prompt=s[: t + 1], n_predict=1, n_probs=N_CMP, temperature=0,
                                   cache_prompt=False)
                per.append(r["completion_probabilities"][0]["top_logprobs"])
            lc.append(per)

    res = ref.forward(path, [s[:N_POS] for s in ids], log=lambda x: print(x, file=sys.stderr), with_lse=True,
                      act_quant=a.act_quant)

    rng = np.random.default_rng(RAND_SEED)
    rand_ids = sorted(int(i) for i in rng.choice(m.n_vocab, N_RAND, replace=False))
    r6 = lambda x: float(round(float(x), 6))
    max_diff = 0.0
    all_diffs = []
    max_diff_top1 = 0.0
    top1_agree = 0
    doc_prompts = []
    pos0_diff = 0.0
    for (nm, text), s, (lp, lse), lcp in zip(prompts, ids, res, lc):
        positions = []
        for t in range(N_POS):
            top = np.argsort(-lp[t], kind="stable")[:N_TOP]
            positions.append({
                "top_ids": [int(i) for i in top],
                "top_logprobs": [r6(lp[t, i]) for i in top],
                "rand_logprobs": [r6(lp[t, i]) for i in rand_ids],
                "logsumexp": r6(lse[t]),
            })
            for j, e in enumerate(lcp[t]):
                d = abs(e["logprob"] - lp[t, e["id"]])
                max_diff = max(max_diff, d)
                all_diffs.append(d)
                if j == 0:
                    max_diff_top1 = max(max_diff_top1, d)
                if t == 0:
                    pos0_diff = max(pos0_diff, d)
            top1_agree += int(lcp[t][0]["id"] == int(top[0]))
        doc_prompts.append({"name": nm, "text": text, "ids": [int(i) for i in s],
                            "n_positions": N_POS, "positions": positions})

    import gguf
    doc = {
        "model": a.name,
        "act_quant_diagnosis": a.act_quant,
        "file": os.path.basename(path),
        "file_size": os.path.getsize(path),
        "arch": m.arch,
        "n_vocab": m.n_vocab,
        "add_bos": m.add_bos,
        "generator": "tests/ref/gguf_ref_forward.py: float64 numpy, weights dequantized by gguf-py %s"
                     % getattr(gguf, "__version__", "?"),
        "tokenizer": "llama.cpp 0c1e57098 llama-server /tokenize add_special=true parse_special=true",
        "positions_note": "position t holds log-softmax of the logits after ids[0..t]",
        "n_top": N_TOP,
        "rand_seed": RAND_SEED,
        "rand_ids": rand_ids,
        "llamacpp_check": {
            "what": "max |ref - llama.cpp| over llama.cpp's top-%d log-probs at every stored position "
                    "(llama-server /completion n_probs=%d, ids[:t+1], temperature 0)" % (N_CMP, N_CMP),
            "max_abs_diff_top%d" % N_CMP: round(max_diff, 4),
            "max_abs_diff_top1": round(max_diff_top1, 4),
            "median_abs_diff_top%d" % N_CMP: round(float(np.median(all_diffs)), 4),
            "top1_agree": "%d/%d" % (top1_agree, N_POS * len(prompts)),
        },
        "prompts": doc_prompts,
    }
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print("%s: position 0 alone: max diff %.4f" % (a.name, pos0_diff))
    print("%s: max|ref-llama.cpp| top-%d %.4f (median %.4f), top-1 %.4f, top-1 agree %d/%d, %d bytes -> %s"
          % (a.name, N_CMP, max_diff, float(np.median(all_diffs)), max_diff_top1, top1_agree, N_POS * len(prompts),
             os.path.getsize(out), out))


if __name__ == "__main__":
    main()
