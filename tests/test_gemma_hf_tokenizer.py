#!/usr/bin/env python3
"""The Gemma 3 GGUF tokenizer agrees with Hugging Face's own files.

  test_gemma_hf_tokenizer.py BUILD_DIR SHARED_DIR

Hugging Face's `tokenizers` library (PyPI) encodes with
SHARED_DIR/tokenizers/gemma3/tokenizer.json — an independent implementation
and an independent copy of the vocabulary — and this engine's
microspec-tokenize encodes with the vocabulary in the Gemma 3 270M GGUF file.
Texts: the strings of the llama.cpp tokenizer test vectors, and turn 1 of
every Spec-Bench question and every HumanEval prompt; raw text (no special
tokens parsed, no BOS). Every id list must be equal; the first differences
are printed. Exit 77 when `tokenizers`, the model or SHARED_DIR is absent.
"""
import json
import os
import subprocess
import sys

SEP = "\n__ggml_vocab_test__\n"


def main():
    build, shared = sys.argv[1], sys.argv[2]
    try:
        import tokenizers
    except ImportError:
        print("SKIP: the Python package `tokenizers` is not importable")
        return 77
    tj = os.path.join(shared, "tokenizers", "gemma3", "tokenizer.json")
    if not os.path.exists(tj):
        print("SKIP: %s absent" % tj)
        return 77
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    rc = subprocess.run(["bash", os.path.join(src, "tools", "install-models.sh"), "gemma3-270m"]).returncode
    if rc == 3:  # only "pip cannot reach the packages" is a skip
        print("SKIP: gemma3-270m cannot be installed (pip cannot reach its packages)")
        return 77
    if rc != 0:
        print("FAIL: tools/install-models.sh gemma3-270m: exit %d" % rc)
        return 1
    model = subprocess.run(["bash", os.path.join(src, "tools", "install-models.sh"), "--path", "gemma3-270m"],
                           capture_output=True, text=True, check=True).stdout.strip()
    hf = tokenizers.Tokenizer.from_file(tj)

    texts = []
    inp = open(os.path.join(shared, "tokenizers", "vectors", "ggml-vocab-qwen2.gguf.inp"), encoding="utf-8").read()
    texts += [("vector %d" % i, t) for i, t in enumerate(inp.split(SEP)) if t]
    for line in open(os.path.join(shared, "data", "spec_bench", "question.jsonl"), encoding="utf-8"):
        q = json.loads(line)
        texts.append(("spec_bench %s" % q["question_id"], q["turns"][0]))
    for i, line in enumerate(open(os.path.join(shared, "data", "human_eval", "question.jsonl"), encoding="utf-8")):
        q = json.loads(line)
        texts.append(("human_eval %d" % i, q.get("prompt") or q["turns"][0]))

    tool = os.path.join(build, "tools", "microspec-tokenize")
    bad = 0
    for name, text in texts:
        want = hf.encode(text, add_special_tokens=False).ids
        p = subprocess.run([tool, "--model", model, "--no-bos", "--no-special"], input=text.encode("utf-8"),
                           capture_output=True, timeout=60)
        if p.returncode != 0:
            print("FAIL %s: microspec-tokenize exit %d: %s" % (name, p.returncode, p.stderr.decode()[-300:]))
            bad += 1
            continue
        got = json.loads(p.stdout.decode())
        if got != want:
            bad += 1
            if bad <= 5:
                k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                print("FAIL %s: ids differ at %d: ours %s, Hugging Face %s" % (name, k, got[k:k + 6], want[k:k + 6]))
    print("%d passed, %d failed" % (len(texts) - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
