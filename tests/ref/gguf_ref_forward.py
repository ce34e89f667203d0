#!/usr/bin/env python3
"""Double-precision reference forward pass for GGUF models (qwen2, gemma3).

Written independently of this engine's C/CUDA runtime so that its GGUF model
path can be tested against it. Weights are dequantized with ggml's own Python
reader (PyPI `gguf`: GGUFReader + gguf.quants.dequantize), one tensor at a
time, into float64; every activation is float64. Output: log-softmax of the
logits at every position, shape [T, n_vocab].

Usage as a script:
  gguf_ref_forward.py MODEL.gguf --ids 151644,872,198 [--ids ...] [--top 5]
prints, per sequence and position, the top log-probs and the logsumexp.
Usage as a module: forward(path, [ids, ...]) -> [np.ndarray [T, V] float64].

Facts below are cited against the vendored llama.cpp 0c1e57098 shipped in
llama-cpp-python 0.3.36 (paths relative to vendor/llama.cpp/):

Common
- RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, eps = <arch>.attention.
  layer_norm_rms_epsilon (src/llama-graph.cpp build_norm: LLM_NORM_RMS ->
  ggml_rms_norm(cur, hparams.f_norm_rms_eps), then ggml_mul by the weight).
- RoPE type NEOX for LLM_ARCH_QWEN2 and LLM_ARCH_GEMMA3 (src/llama-model.cpp
  llama_model_rope_type): the pair is (i, i + n_rot/2) (ggml/src/ggml-cpu/
  ops.cpp rotate_pairs with n_offset = n_dims/2), theta_i = pos *
  base^(-2i/n_rot) (ops.cpp: theta_scale = powf(freq_base, -2.0f/n_dims)),
  freq_scale 1 and ext_factor 0 (no rope scaling keys in these files), so
  rope_yarn reduces to plain cos/sin. n_rot = head_dim (no rope.dimension_count
  key; hparams default n_rot = n_embd_head_k).
- GQA: query head h reads KV head h // (n_head / n_head_kv) (ggml mul_mat
  broadcast: i02 = i12 / (ne12/ne02), i.e. contiguous groups).
- A GGUF weight with shape [n_in, n_out] (ggml ne0 = n_in) is stored row-major
  as n_out rows of n_in; gguf.quants.dequantize returns [n_out, n_in], so
  y = x @ W.T.
- Causal mask: a query at position p1 sees keys p0 <= p1.

qwen2 (src/models/qwen2.cpp)
- x = token_embd[ids]; per layer: h = x + attn(rmsnorm(x, attn_norm));
  x = h + ffn(rmsnorm(h, ffn_norm)); then rmsnorm(output_norm) and the head.
- q/k/v have biases (attn_{q,k,v}.bias: create_tensor_qkv in
  src/llama-model.cpp loads them; build_qkv adds them); attn_output has none
  in these files (wo_b absent).
- RoPE base = qwen2.rope.freq_base; attention scale 1/sqrt(head_dim)
  (build_attn(..., 1.0f/sqrtf(float(n_embd_head)))).
- FFN: down(silu(gate(x)) * up(x)) (build_ffn LLM_FFN_SILU, LLM_FFN_PAR).
- Head: output.weight, or token_embd when absent (load_arch_tensors: "if
  output is NULL, init from the input tok embed"); optional output.bias.

gemma3 (src/models/gemma3.cpp)
- x = token_embd[ids] * sqrt(n_embd) (ggml_scale(inpL, sqrtf(n_embd))).
- Per layer: a = rmsnorm(x, attn_norm); q,k,v = a@Wq,Wk,Wv (no biases);
  q = rmsnorm_per_head(q, attn_q_norm), k = rmsnorm_per_head(k, attn_k_norm)
  (same eps); RoPE on q and k; q *= f_attention_scale = 1/sqrt(head_dim)
  (load_arch_hparams, non-27B); softmax attention with kq_scale 1.0;
  o = attn_output(attn); x = x + rmsnorm(o, post_attention_norm);
  f = down(gelu_tanh(gate(n)) * up(n)) with n = rmsnorm(x, ffn_norm)
  (build_ffn LLM_FFN_GELU + LLM_FFN_PAR -> ggml_geglu_split(gate, up);
  ggml gelu is the tanh form: ggml/src/ggml-cpu/vec.h ggml_gelu_f32);
  x = x + rmsnorm(f, post_ffw_norm).
- Final rmsnorm(output_norm); head = output.weight or tied token_embd (the
  270M file has no output.weight); final_logit_softcapping only if the key
  exists (absent in this file -> 0 -> no softcap).
- Sliding window: gemma3.attention.sliding_window (512) present ->
  LLAMA_SWA_TYPE_STANDARD and load_swa_pattern(ml, 6) with no pattern key ->
  set_swa_pattern(6, dense_first=false): layer il is SWA iff il % 6 < 5, so
  il is global iff (il + 1) % 6 == 0 (src/llama-hparams.cpp).
- SWA mask rule (src/llama-hparams.h is_masked_swa, STANDARD): key at p0 is
  masked for query p1 iff p1 - p0 >= n_swa; a query sees n_swa keys
  including itself.
- RoPE base: SWA layers use rope_freq_base_train_swa, default 10000.0
  (src/llama-hparams.h; gemma3 reads LLM_KV_ROPE_FREQ_BASE_SWA only if present,
  absent here); global layers use gemma3.rope.freq_base (1e6)
  (llama_model::get_rope_freq_base).
- Norm weights are stored with Gemma's +1 already added
  (conversion/gemma.py Gemma3Model.norm_shift: 1.0 for "*norm.weight"), so
  they are used as stored.
"""
import argparse
import sys

import numpy as np

try:
    import gguf
except ImportError:  # caller decides whether that is a skip
    gguf = None


class Model:
    """A GGUF file opened with ggml's reader; tensors dequantized on demand."""

    def __init__(self, path):
        if gguf is None:
            raise RuntimeError("python package 'gguf' is not installed")
        self.r = gguf.GGUFReader(path)
        self.t = {t.name: t for t in self.r.tensors}
        self.arch = self.kv("general.architecture")
        a = self.arch
        if a not in ("qwen2", "gemma3"):
            raise ValueError("unsupported architecture %r" % a)
        self.n_layer = int(self.kv(a + ".block_count"))
        self.n_embd = int(self.kv(a + ".embedding_length"))
        self.n_head = int(self.kv(a + ".attention.head_count"))
        self.n_head_kv = int(self.kv(a + ".attention.head_count_kv"))
        self.head_dim = int(self.kv(a + ".attention.key_length", self.n_embd // self.n_head))
        self.eps = float(self.kv(a + ".attention.layer_norm_rms_epsilon"))
        self.rope_base = float(self.kv(a + ".rope.freq_base"))
        self.rope_base_swa = float(self.kv(a + ".rope.freq_base_swa", 10000.0))
        self.n_swa = int(self.kv(a + ".attention.sliding_window", 0))
        self.softcap = float(self.kv(a + ".final_logit_softcapping", 0.0))
        self.add_bos = bool(self.kv("tokenizer.ggml.add_bos_token", False))
        self.bos = self.kv("tokenizer.ggml.bos_token_id", None)
        self.n_vocab = int(self.t["token_embd.weight"].shape[1])

    def kv(self, key, default=KeyError):
        f = self.r.fields.get(key)
        if f is None:
            if default is KeyError:
                raise KeyError(key)
            return default
        return f.contents()

    def has(self, name):
        return name in self.t

    def w(self, name, rows=None):
        """Tensor `name` as float64; for 2-D, shape [n_out, n_in], optionally rows only."""
        t = self.t[name]
        data = t.data
        if rows is not None:
            data = data[rows]
        x = gguf.quants.dequantize(np.asarray(data), t.tensor_type)
        return np.asarray(x, dtype=np.float64)

    def is_swa(self, il):
        # set_swa_pattern(6, dense_first=false): SWA iff il % 6 < 5.
        return self.arch == "gemma3" and self.n_swa > 0 and (il % 6) < 5


def rmsnorm(x, w, eps):
    # x [..., n], w [n]
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_neox(x, pos, base):
    # x [T, H, hd]; pairs (i, i + hd/2), theta_i = pos * base^(-2i/hd)
    hd = x.shape[-1]
    half = hd // 2
    inv = base ** (-2.0 * np.arange(half, dtype=np.float64) / hd)  # [half]
    ang = pos[:, None].astype(np.float64) * inv[None, :]           # [T, half]
    c = np.cos(ang)[:, None, :]
    s = np.sin(ang)[:, None, :]
    x0 = x[..., :half]
    x1 = x[..., half:]
    return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * x * (1.0 + 0.044715 * x * x)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def attention(q, k, v, n_swa, scale):
    # q [T, H, hd], k/v [T, Hkv, hd] -> [T, H*hd]
    T, H, hd = q.shape
    g = H // k.shape[1]
    kk = np.repeat(k, g, axis=1)  # head h -> kv head h // g
    vv = np.repeat(v, g, axis=1)
    s = np.einsum("thd,shd->hts", q, kk) * scale  # [H, T(query), T(key)]
    p1 = np.arange(T)[:, None]
    p0 = np.arange(T)[None, :]
    masked = p0 > p1
    if n_swa > 0:
        masked |= (p1 - p0) >= n_swa  # llama_hparams::is_masked_swa, STANDARD
    s = np.where(masked[None], -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    a = e / e.sum(axis=-1, keepdims=True)
    o = np.einsum("hts,shd->thd", a, vv)
    return o.reshape(T, H * hd)


def quant_act(x, wtype):
    """Diagnosis only: round x [T, n] the way ggml-cpu rounds the activation
    operand of a matmul with a `wtype` weight (its vec_dot_type): Q8_0 blocks of
    32 with an fp16 scale for *_0 weights, Q8_K blocks of 256 with an f32 scale
    for K-quants (ggml/src/ggml-cpu/ggml-cpu.c type_traits_cpu;
    ggml-quants.c quantize_row_q8_0_ref / quantize_row_q8_K_ref)."""
    if wtype in ("F32",):
        return x
    if wtype in ("F16", "BF16"):
        return x.astype(np.float16).astype(np.float64)
    kquant = wtype.endswith("_K")
    bs = 256 if kquant else 32
    xb = x.astype(np.float32).reshape(x.shape[0], -1, bs)
    if kquant:
        idx = np.argmax(np.abs(xb), axis=-1)[..., None]
        mx = np.take_along_axis(xb, idx, axis=-1)  # signed value with the largest |x|
        with np.errstate(divide="ignore", invalid="ignore"):
            iscale = np.where(mx == 0, 0, np.float32(-127.0) / mx).astype(np.float32)
        q = np.minimum(127, np.rint(iscale * xb))
        d = np.where(iscale == 0, 0, 1 / iscale)
    else:
        amax = np.max(np.abs(xb), axis=-1, keepdims=True)
        d = (amax / 127).astype(np.float16).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(d == 0, 0, np.round(xb / (amax / 127)))
    return (q * d).reshape(x.shape).astype(np.float64)


def forward(path, seqs, log=None, with_lse=False, act_quant=False):
    """Log-softmax [T, V] (float64) for each token-id list in seqs; with_lse:
    pairs (log-softmax, logsumexp of the logits [T]). act_quant: diagnosis
    only, mimic llama.cpp's CPU rounding of activations (see quant_act)."""
    m = Model(path)
    aq = (lambda x, name: quant_act(x, m.t[name].tensor_type.name)) if act_quant else (lambda x, name: x)
    hd, H, Hkv, eps = m.head_dim, m.n_head, m.n_head_kv, m.eps
    seqs = [np.asarray(s, dtype=np.int64) for s in seqs]
    for s in seqs:
        if len(s) == 0 or s.min() < 0 or s.max() >= m.n_vocab:
            raise ValueError("token id out of range or empty sequence")

    # Embedding rows only for the ids used (the tied head is dequantized later in chunks).
    xs = []
    for s in seqs:
        x = m.w("token_embd.weight", rows=s)  # [T, d]
        if m.arch == "gemma3":
            x = x * np.sqrt(np.float64(m.n_embd))
        xs.append(x)

    for il in range(m.n_layer):
        if log:
            log("layer %d/%d" % (il + 1, m.n_layer))
        p = "blk.%d." % il
        W = lambda n: m.w(p + n)
        attn_norm = W("attn_norm.weight")
        wq, wk, wv, wo = W("attn_q.weight"), W("attn_k.weight"), W("attn_v.weight"), W("attn_output.weight")
        bq = W("attn_q.bias") if m.has(p + "attn_q.bias") else 0.0
        bk = W("attn_k.bias") if m.has(p + "attn_k.bias") else 0.0
        bv = W("attn_v.bias") if m.has(p + "attn_v.bias") else 0.0
        bo = W("attn_output.bias") if m.has(p + "attn_output.bias") else 0.0
        if m.arch == "gemma3":
            qn, kn = W("attn_q_norm.weight"), W("attn_k_norm.weight")
            post_attn = W("post_attention_norm.weight")
            swa = m.is_swa(il)
            base = m.rope_base_swa if swa else m.rope_base
            n_swa = m.n_swa if swa else 0
        else:
            base, n_swa = m.rope_base, 0
        new = []
        for x in xs:
            T = x.shape[0]
            pos = np.arange(T)
            a = rmsnorm(x, attn_norm, eps)
            q = (aq(a, p + "attn_q.weight") @ wq.T + bq).reshape(T, H, hd)
            k = (aq(a, p + "attn_k.weight") @ wk.T + bk).reshape(T, Hkv, hd)
            v = (aq(a, p + "attn_v.weight") @ wv.T + bv).reshape(T, Hkv, hd)
            if m.arch == "gemma3":
                q = rmsnorm(q, qn, eps)
                k = rmsnorm(k, kn, eps)
            q = rope_neox(q, pos, base)
            k = rope_neox(k, pos, base)
            if act_quant:  # llama.cpp: f16 KV cache, Q converted to f16 for K·Q
                q, k, v = (t.astype(np.float16).astype(np.float64) for t in (q, k, v))
            o = aq(attention(q, k, v, n_swa, 1.0 / np.sqrt(hd)), p + "attn_output.weight") @ wo.T + bo
            if m.arch == "gemma3":
                o = rmsnorm(o, post_attn, eps)
            new.append(x + o)
        xs = new
        del wq, wk, wv, wo

        ffn_norm = W("ffn_norm.weight")
        wg, wu, wd = W("ffn_gate.weight"), W("ffn_up.weight"), W("ffn_down.weight")
        post_ffw = W("post_ffw_norm.weight") if m.arch == "gemma3" else None
        new = []
        for x in xs:
            n = rmsnorm(x, ffn_norm, eps)
            g = aq(n, p + "ffn_gate.weight") @ wg.T
            act = gelu_tanh(g) if m.arch == "gemma3" else silu(g)
            if act_quant and m.arch == "gemma3":  # ggml-cpu vec.h GGML_GELU_FP16: f16 table, exact past |x| >= 10
                f16 = lambda t: t.astype(np.float16).astype(np.float64)
                act = np.where(g <= -10, 0.0, np.where(g >= 10, g, f16(gelu_tanh(f16(g)))))
            f = aq(act * (aq(n, p + "ffn_up.weight") @ wu.T), p + "ffn_down.weight") @ wd.T
            if post_ffw is not None:
                f = rmsnorm(f, post_ffw, eps)
            new.append(x + f)
        xs = new
        del wg, wu, wd

    out_norm = m.w("output_norm.weight")
    hs = [rmsnorm(x, out_norm, eps) for x in xs]
    head = "output.weight" if m.has("output.weight") else "token_embd.weight"
    logits = [np.empty((h.shape[0], m.n_vocab)) for h in hs]
    chunk = 16384
    for r0 in range(0, m.n_vocab, chunk):
        r1 = min(m.n_vocab, r0 + chunk)
        wc = m.w(head, rows=slice(r0, r1))  # [rows, d]
        for h, lg in zip(hs, logits):
            lg[:, r0:r1] = aq(h, head) @ wc.T
    if m.has("output.bias"):
        b = m.w("output.bias")
        for lg in logits:
            lg += b
    out = []
    for lg in logits:
        if m.softcap:
            lg = np.tanh(lg / m.softcap) * m.softcap
        mx = lg.max(axis=-1, keepdims=True)
        lse = mx + np.log(np.exp(lg - mx).sum(axis=-1, keepdims=True))
        out.append((lg - lse, lse[:, 0]) if with_lse else lg - lse)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--ids", action="append", required=True, help="comma-separated token ids")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--act-quant", action="store_true", help="diagnosis: mimic llama.cpp's activation rounding")
    a = ap.parse_args()
    seqs = [[int(t) for t in s.split(",") if t.strip()] for s in a.ids]
    res = forward(a.model, seqs, log=lambda s: print(s, file=sys.stderr), act_quant=a.act_quant)
    for si, lp in enumerate(res):
        for t in range(lp.shape[0]):
            top = np.argsort(-lp[t])[: a.top]
            print("seq %d pos %d: %s" % (si, t, " ".join("%d:%.5f" % (i, lp[t, i]) for i in top)))


if __name__ == "__main__":
    main()
