#!/usr/bin/env python3
"""DynaSpec offline tools and C loader end to end (issue 16).

  test_dynaspec.py BUILD_DIR tiny     a tiny qwen2 GGUF written here (f32, V 40)
  test_dynaspec.py BUILD_DIR qwen     qwen2.5-coder-0.5b (tools/install-models.sh;
                                      exit 77 when it cannot be had), small settings

Pipeline: dynaspec_cluster.py → microspec-record (on seeded text for tiny,
../shared/corpus for qwen) → dynaspec_train.py --dump-forward → test_dynaspec
(the C router forward == numpy within 1e-4, the C pick == a naive union;
tests/test_dynaspec.c). Then:
  - the clustering is reproducible: the same seed gives the same cluster_of;
  - the artefact is refused for another model file (same shapes, another
    sha256): exit 1 and a message naming the artefact, the model path and
    both hashes (computed here with hashlib);
  - the trainer refuses records made from another model;
  - every tool's --help exits 0, prints its usage and writes nothing.
Exit 77 when numpy / gguf are missing.
"""
import hashlib
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf  # noqa: F401
except ImportError:
    print("SKIP: python gguf/numpy not importable")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
TOOLS = os.path.join(SRC, "tools")
VOCAB_TOOLS = os.path.join(TOOLS, "vocab")  # the artefact builders
sys.path.insert(0, HERE)
import test_gguf_bad_model as tiny  # noqa: E402  (the tiny qwen2 writer)

fails = 0


def check(ok, what, detail=""):
    global fails
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else "\n" + detail[-3000:]), flush=True)
    fails += not ok


def run(cmd, timeout=900):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def must(cmd, what):
    rc, out, err = run(cmd)
    if rc != 0:
        check(False, what, "exit %d\n%s\n%s" % (rc, out, err))
        print("%d failed" % fails)
        sys.exit(1)
    return out + err


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def check_chains(record, model, rec, corpus, n, win, tmp):
    """--chains D --chain-every S against the window records of the same text:
    chain c of the first window starts at p = S(c+1) − 1 with prev = h_p (the
    window record p + 1's prev) and tok = the argmax at p (window record p's
    top[0]); inside a chain each tok is the step before's argmax."""
    sys.path.insert(0, VOCAB_TOOLS)
    import dynaspec_common as dc
    D, S = 3, 8
    rc_path = os.path.join(tmp, "chains.rec")
    must([record, "--model", model, "--out", rc_path, "-n", n, "-w", win, "--threads", "2", "--chains", str(D),
          "--chain-every", str(S)] + corpus, "record chains")
    with open(rc_path, "rb") as f:
        hdr_d = int(np.frombuffer(f.read(24), dtype="<u4", count=4, offset=8)[3])
    w, c = dc.read_record("test", rec), dc.read_record("test", rc_path)
    check(hdr_d == D and c["n"] % D == 0 and c["n"] > 0, "chain records: header D = %d, whole chains" % D)
    tok, top = c["tok"].reshape(-1, D), c["top"].reshape(-1, D, c["L"])
    check(np.array_equal(tok[:, 1:], top[:, :-1, 0]), "inside a chain each token is the step before's argmax")
    nwin = min(int(win), w["n"]) // S - 1  # chains whose p + 1 lies in the first window
    firsts = np.arange(nwin) * D
    ps = S * (np.arange(nwin) + 1) - 1
    check(nwin > 0 and np.array_equal(c["tok"][firsts], w["top"][ps, 0]),
          "a chain starts from the window's argmax at p")
    check(np.allclose(c["prev"][firsts], w["prev"][ps + 1], rtol=1e-5, atol=1e-5),
          "a chain starts from the window's state h_p")
    rc, out, err = run([record, "--model", model, "--out", os.path.join(tmp, "x.rec"), "--chains", "9",
                        "--chain-every", "4"] + corpus)
    check(rc == 1 and "--chains 9" in err and not os.path.exists(os.path.join(tmp, "x.rec")),
          "chains longer than their spacing refused", out + err)


def main():
    build, which = os.path.abspath(sys.argv[1]), sys.argv[2]
    record = os.path.join(build, "tools", "microspec-record")
    ctest = os.path.join(build, "tests", "test_dynaspec")
    cluster = [sys.executable, os.path.join(VOCAB_TOOLS, "dynaspec_cluster.py")]
    train = [sys.executable, os.path.join(VOCAB_TOOLS, "dynaspec_train.py")]
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        # --help: usage on stdout, exit 0, no work (no file appears)
        for name, cmd in (("dynaspec_cluster.py", cluster), ("dynaspec_train.py", train), ("microspec-record", [record])):
            rc, out, err = run(cmd + ["--help"], timeout=60)
            check(rc == 0 and "usage" in out and os.listdir(tmp) == [], name + " --help", out + err)

        if which == "tiny":
            model = os.path.join(tmp, "tiny.gguf")
            tiny.write(model)
            wrong = os.path.join(tmp, "tiny-other.gguf")
            tiny.write(wrong, extra_keys=[("general.name", "string", "another model")])
            rng = np.random.default_rng(3)
            words = ["a", "b", "ab", "ba", "abc", "cab", "zz", "q"]
            text = os.path.join(tmp, "text.txt")
            with open(text, "w") as f:
                for _ in range(200):
                    f.write(" ".join(rng.choice(words, 12)) + "\n")
            corpus = [text]
            M, n, win, H, epochs, iters = "8", "1200", "100", "16", "3", "10"
        else:
            rc = subprocess.run(["bash", os.path.join(TOOLS, "install-models.sh"), "qwen2.5-coder-0.5b"]).returncode
            if rc == 3:  # only "pip cannot reach the packages" is a skip
                print("SKIP: qwen2.5-coder-0.5b cannot be installed (pip cannot reach its packages)")
                return 77
            if rc != 0:
                print("FAIL: tools/install-models.sh qwen2.5-coder-0.5b: exit %d" % rc)
                return 1
            model = subprocess.run(["bash", os.path.join(TOOLS, "install-models.sh"), "--path", "qwen2.5-coder-0.5b"],
                                   capture_output=True, text=True).stdout.strip()
            corpus = [os.path.join(SRC, "..", "shared", "corpus", f) for f in ("wikitext2_valid.txt", "python-docs.txt")]
            if not all(os.path.isfile(c) for c in corpus):
                print("SKIP: ../shared/corpus is missing")
                return 77
            # another model file: the same tiny-shaped check is enough for the refusal
            wrong = os.path.join(tmp, "tiny-other.gguf")
            tiny.write(wrong)
            M, n, win, H, epochs, iters = "64", "1100", "275", "32", "1", "2"

        cl = os.path.join(tmp, "clusters.npz")
        must(cluster + ["--model", model, "--out", cl, "--clusters", M, "--iters", iters, "--seed", "5"], "cluster")
        cl2 = os.path.join(tmp, "clusters2.npz")
        must(cluster + ["--model", model, "--out", cl2, "--clusters", M, "--iters", iters, "--seed", "5"], "cluster again")
        a, b = np.load(cl)["cluster_of"], np.load(cl2)["cluster_of"]
        check(np.array_equal(a, b) and len(np.unique(a)) > 1, "clustering reproducible with the same seed")

        rec = os.path.join(tmp, "states.rec")
        must([record, "--model", model, "--out", rec, "-n", n, "-w", win, "--threads", "2"] + corpus, "record")
        check_chains(record, model, rec, corpus, n, win, tmp)
        art = os.path.join(tmp, "router.gguf")
        dump = os.path.join(tmp, "forward.bin")
        out = must(train + ["--model", model, "--clusters", cl, "--records", rec, "--out", art, "--hidden", H,
                            "--epochs", epochs, "--dump-forward", dump, "--dump-n", "12"], "train")
        print(out.strip())

        rc, out, err = run([ctest, art, model, dump])
        print(out.strip())
        check(rc == 0, "C router forward and pick == the training tool / naive union", out + err)

        rc, out, err = run([ctest, "--load", art, wrong])
        want = [os.path.basename(art), wrong, sha(model), sha(wrong)]
        check(rc == 1 and all(w in err for w in want) and "MS_ERR_INVALID" in out,
              "artefact refused for another model, naming both hashes and both files", out + err)

        if which == "tiny":
            rc, out, err = run(train + ["--model", wrong, "--clusters", cl, "--records", rec, "--out",
                                        os.path.join(tmp, "x.gguf")])
            check(rc == 1 and sha(wrong) in err and sha(model) in err and not os.path.exists("x.gguf"),
                  "trainer refuses clusters / records of another model", out + err)
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
