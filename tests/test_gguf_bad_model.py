#!/usr/bin/env python3
"""Bad GGUF models get a clear error from microspec-generate, never a crash.

  test_gguf_bad_model.py BUILD_DIR

A tiny valid qwen2 model (random f32 weights, a 40-token byte-level BPE
vocabulary) is written with the `gguf` package's own writer (independent of
this project's reader); it must load and generate. Then variants that each
break one thing must be refused with exit status 1 (not a signal) and an error
naming the offending key, tensor or field:
  - tokenizer size differs from the embedding rows
  - a tensor of the wrong shape
  - an architecture this engine does not run
  - a key that changes the maths and is not implemented (logit softcapping)
  - RoPE scaling
  - the file truncated in the tensor data
  - a missing tensor
Exit 77 when the gguf package is missing.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
except ImportError:
    print("SKIP: python gguf/numpy not importable")
    sys.exit(77)

D, FFN, LAYERS, HEADS, KV, V = 64, 128, 2, 4, 2, 40
HD = D // HEADS


def vocab():
    # 40 tokens: the byte-level letters a–z and space-led words, plus specials
    toks = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["Ġ", "Ġa", "Ġb", "ab", "ba", "Ġab"]
    merges = ["Ġ a", "Ġ b", "a b", "b a", "Ġa b"]
    while len(toks) < V - 2:
        toks.append("<pad%d>" % len(toks))
    toks += ["<|endoftext|>", "<|im_end|>"]
    types = [1] * (V - 2) + [3, 3]
    return toks, merges, types


def write(path, *, arch="qwen2", n_tokens=V, bad_shape=None, extra_keys=(), drop=None):
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(256)
    w.add_embedding_length(D)
    w.add_feed_forward_length(FFN)
    w.add_block_count(LAYERS)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    for key, kind, val in extra_keys:
        getattr(w, "add_" + kind)(key, val)
    toks, merges, types = vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(toks[:n_tokens] if n_tokens <= V else toks + ["<x%d>" % i for i in range(n_tokens - V)])
    w.add_token_types((types[:n_tokens]) if n_tokens <= V else types + [1] * (n_tokens - V))
    w.add_token_merges(merges)
    w.add_eos_token_id(V - 1)
    w.add_bos_token_id(V - 2)
    w.add_add_bos_token(False)

    def t(name, *shape):
        if name == drop:
            return
        if bad_shape and name == bad_shape:
            shape = (shape[0] + 1,) + shape[1:]
        w.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))

    t("token_embd.weight", V, D)
    t("output_norm.weight", D)
    for l in range(LAYERS):
        p = "blk.%d." % l
        t(p + "attn_norm.weight", D)
        t(p + "attn_q.weight", HEADS * HD, D)
        t(p + "attn_k.weight", KV * HD, D)
        t(p + "attn_v.weight", KV * HD, D)
        t(p + "attn_q.bias", HEADS * HD)
        t(p + "attn_k.bias", KV * HD)
        t(p + "attn_v.bias", KV * HD)
        t(p + "attn_output.weight", D, HEADS * HD)
        t(p + "ffn_norm.weight", D)
        t(p + "ffn_gate.weight", FFN, D)
        t(p + "ffn_up.weight", FFN, D)
        t(p + "ffn_down.weight", D, FFN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(gen, path):
    p = subprocess.run([gen, "--model", path, "--prompt", "ab ba", "-n", "4", "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def main():
    gen = os.path.join(sys.argv[1], "tools", "microspec-generate")
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good.gguf")
        write(good)
        rc, out = run(gen, good)
        if rc != 0:
            print("FAIL: the valid tiny model was refused:\n" + out)
            fails += 1
        else:
            print("ok: valid tiny qwen2 model loads and generates")
        cases = [
            ("tokenizer size", dict(n_tokens=V + 4), ["tokenizer.ggml.tokens", "token_embd.weight"]),
            ("wrong shape", dict(bad_shape="blk.1.attn_k.weight"), ["blk.1.attn_k.weight"]),
            ("architecture", dict(arch="mamba"), ["general.architecture", "mamba"]),
            ("softcapping", dict(extra_keys=[("qwen2.final_logit_softcapping", "float32", 30.0)]),
             ["final_logit_softcapping"]),
            ("rope scaling", dict(extra_keys=[("qwen2.rope.scaling.type", "string", "yarn")]), ["rope.scaling.type"]),
            ("missing tensor", dict(drop="blk.0.ffn_up.weight"), ["blk.0.ffn_up.weight"]),
        ]
        for name, kw, want in cases:
            path = os.path.join(tmp, name.replace(" ", "_") + ".gguf")
            write(path, **kw)
            rc, out = run(gen, path)
            ok = rc == 1 and all(s in out for s in want)
            print(("ok" if ok else "FAIL") + ": %s → exit %d%s" % (name, rc, "" if ok else "\n" + out[-1500:]))
            fails += not ok
        # truncated in the tensor data: the reader must refuse, naming a tensor
        data = open(good, "rb").read()
        trunc = os.path.join(tmp, "truncated.gguf")
        open(trunc, "wb").write(data[: len(data) - 1000])
        rc, out = run(gen, trunc)
        ok = rc == 1 and "tensor" in out
        print(("ok" if ok else "FAIL") + ": truncated → exit %d%s" % (rc, "" if ok else "\n" + out[-1500:]))
        fails += not ok
    print("%d passed, %d failed" % (len(cases) + 2 - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
