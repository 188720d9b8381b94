#!/usr/bin/env python3
"""Independent float64 numpy reference of the Qwen3 decoder (q3c ground truth).

Written directly from the numeric contract in docs/reference.md; it shares no
code with the C++ compiler and needs nothing but numpy.

Subcommands:
  random-model --config CFG.json --seed N --dtype bf16|f16|f32 -o DIR
               [--write-tied-lm-head] [--shards K]
      Writes DIR/config.json and DIR/model.safetensors (or, with --shards K>1,
      DIR/model-0000i-of-0000K.safetensors + DIR/model.safetensors.index.json)
      with Hugging Face Qwen3 tensor names, filled from numpy's legacy
      RandomState(seed) (whose stream numpy guarantees not to change).
  logits --model DIR --tokens 1,2,3 -o out.npy [--variant V] [--greedy N]
      Runs the forward pass in float64 over the prompt and saves float32 logits
      of shape [T, vocab] with np.save.  --greedy N also prints
      "ids: a b c ..." -- N greedy tokens after the prompt, each step
      recomputing the whole forward pass (no KV cache), no EOS stopping.
      --variant selects a deliberately WRONG model for negative tests:
      interleaved-rope, norm-after-rope, one-plus-gain, kv-head-modulo.
      --kv-cache bf16|f16 rounds keys and values as such a cache holds them;
      --prefill-activations avx512bf16|amx rounds the inputs of the matrix
      products as q3c's CPU prefill of that kind does (class
      PrefillActivations), so bf16-activation builds can be checked at f32
      accuracy instead of the bf16 bound; with avx512bf16 also the inputs of
      the prefill's attention (--prefill-attention f32 keeps those exact).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

VARIANTS = ("correct", "interleaved-rope", "norm-after-rope", "one-plus-gain",
            "kv-head-modulo")

# --------------------------------------------------------------------------
# dtype helpers
# --------------------------------------------------------------------------

def f32_to_bf16_bits(a):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    assert np.all(np.isfinite(a))
    u = a.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_f64(bits):
    """bfloat16 bit patterns (uint16) -> float64, exact."""
    u32 = bits.astype(np.uint32) << 16
    return u32.view(np.float32).astype(np.float64)


ST_DTYPE = {"bf16": "BF16", "f16": "F16", "f32": "F32"}
TORCH_DTYPE = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def encode_tensor(a, dtype):
    """float array -> (safetensors dtype string, raw little-endian bytes)."""
    if dtype == "bf16":
        raw = f32_to_bf16_bits(a).astype("<u2").tobytes()
    elif dtype == "f16":
        a32 = np.asarray(a, dtype=np.float32)
        h = a32.astype(np.float16)
        assert np.all(np.isfinite(h))
        raw = h.astype("<f2").tobytes()
    elif dtype == "f32":
        raw = np.asarray(a, dtype="<f4").tobytes()
    else:
        raise ValueError(dtype)
    return ST_DTYPE[dtype], raw


def decode_tensor(st_dtype, shape, raw):
    """raw little-endian bytes -> float64 ndarray of the given shape (exact)."""
    n = int(np.prod(shape)) if len(shape) else 1
    if st_dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2", count=n)
        out = bf16_bits_to_f64(bits)
    elif st_dtype == "F16":
        out = np.frombuffer(raw, dtype="<f2", count=n).astype(np.float64)
    elif st_dtype == "F32":
        out = np.frombuffer(raw, dtype="<f4", count=n).astype(np.float64)
    elif st_dtype == "F64":
        out = np.frombuffer(raw, dtype="<f8", count=n).astype(np.float64)
    else:
        raise ValueError("unsupported safetensors dtype %r" % st_dtype)
    return out.reshape(shape)


ST_ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8}

# --------------------------------------------------------------------------
# safetensors writer / reader (own implementation)
# --------------------------------------------------------------------------

def write_safetensors(path, tensors, dtype):
    """tensors: list of (name, float ndarray) in file order."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, arr in tensors:
        st, raw = encode_tensor(arr, dtype)
        header[name] = {"dtype": st, "shape": [int(d) for d in arr.shape],
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)
    return offset


def read_safetensors(path):
    """-> dict name -> float64 ndarray."""
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen].decode("utf-8"))
    body = memoryview(data)[8 + hlen:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        st = info["dtype"]
        shape = tuple(int(d) for d in info["shape"])
        b, e = info["data_offsets"]
        n = int(np.prod(shape)) if shape else 1
        if st not in ST_ITEMSIZE:
            raise ValueError("%s: unsupported dtype %s" % (name, st))
        if not (0 <= b <= e <= len(body)) or e - b != n * ST_ITEMSIZE[st]:
            raise ValueError("%s: bad data_offsets %r" % (name, info["data_offsets"]))
        out[name] = decode_tensor(st, shape, bytes(body[b:e]))
    return out


def load_weights(model_dir):
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single):
        return read_safetensors(single)
    if os.path.exists(index):
        with open(index) as f:
            wmap = json.load(f)["weight_map"]
        weights = {}
        for shard in sorted(set(wmap.values())):
            part = read_safetensors(os.path.join(model_dir, shard))
            for name, arr in part.items():
                if wmap.get(name) != shard:
                    raise ValueError("%s found in %s but index says %s"
                                     % (name, shard, wmap.get(name)))
                weights[name] = arr
        missing = set(wmap) - set(weights)
        if missing:
            raise ValueError("tensors listed in index but absent: %s" % sorted(missing))
        return weights
    raise FileNotFoundError("no model.safetensors(.index.json) in " + model_dir)

# --------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------

class Cfg:
    def __init__(self, d):
        self.hidden = int(d["hidden_size"])
        self.inter = int(d["intermediate_size"])
        self.layers = int(d["num_hidden_layers"])
        self.heads = int(d["num_attention_heads"])
        self.kv_heads = int(d.get("num_key_value_heads", self.heads))
        hd = d.get("head_dim")
        self.head_dim = int(hd) if hd is not None else self.hidden // self.heads
        self.vocab = int(d["vocab_size"])
        self.theta = float(d.get("rope_theta", 10000.0))
        self.eps = float(d.get("rms_norm_eps", 1e-6))
        self.tied = bool(d.get("tie_word_embeddings", False))
        self.torch_dtype = d.get("torch_dtype", d.get("dtype", "bfloat16"))
        assert d.get("hidden_act", "silu") == "silu"
        assert not d.get("attention_bias", False)
        assert d.get("rope_scaling") is None
        assert self.heads % self.kv_heads == 0
        assert self.head_dim % 2 == 0


def tensor_shapes(c, with_lm_head):
    """HF Qwen3 tensor names and shapes, in a fixed order."""
    H, I, hd = c.hidden, c.inter, c.head_dim
    s = [("model.embed_tokens.weight", (c.vocab, H))]
    for i in range(c.layers):
        p = "model.layers.%d." % i
        s += [
            (p + "input_layernorm.weight", (H,)),
            (p + "self_attn.q_proj.weight", (c.heads * hd, H)),
            (p + "self_attn.k_proj.weight", (c.kv_heads * hd, H)),
            (p + "self_attn.v_proj.weight", (c.kv_heads * hd, H)),
            (p + "self_attn.o_proj.weight", (H, c.heads * hd)),
            (p + "self_attn.q_norm.weight", (hd,)),
            (p + "self_attn.k_norm.weight", (hd,)),
            (p + "post_attention_layernorm.weight", (H,)),
            (p + "mlp.gate_proj.weight", (I, H)),
            (p + "mlp.up_proj.weight", (I, H)),
            (p + "mlp.down_proj.weight", (H, I)),
        ]
    s.append(("model.norm.weight", (H,)))
    if with_lm_head:
        s.append(("lm_head.weight", (c.vocab, H)))
    return s

# --------------------------------------------------------------------------
# random-model
# --------------------------------------------------------------------------

def cmd_random_model(a):
    with open(a.config) as f:
        cfgd = json.load(f)
    cfgd["torch_dtype"] = TORCH_DTYPE[a.dtype]
    c = Cfg(cfgd)
    rng = np.random.RandomState(a.seed)
    write_lm_head = (not c.tied) or a.write_tied_lm_head
    tensors = []
    for name, shape in tensor_shapes(c, with_lm_head=(not c.tied)):
        if len(shape) == 1:
            # norm gains ~ 1 + 0.1 N(0,1): a gain that is dropped or used as
            # (1 + w) changes the result visibly.
            arr = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            # RMS-normed final state (rms ~1) @ E.T with std 2/sqrt(H) gives
            # logits with std ~2: O(1), well separated.
            arr = (2.0 / np.sqrt(c.hidden)) * rng.standard_normal(shape)
        elif name.endswith(("o_proj.weight", "down_proj.weight")):
            # projections that write into the residual stream: std 2/sqrt(fan_in)
            # so block outputs outweigh the raw embedding (less repetitive
            # greedy output from these random models).
            arr = (2.0 / np.sqrt(shape[1])) * rng.standard_normal(shape)
        else:
            # y = x @ W.T keeps O(1) activations when std = 1/sqrt(fan_in).
            arr = (1.0 / np.sqrt(shape[1])) * rng.standard_normal(shape)
        tensors.append((name, arr.astype(np.float32)))
    if c.tied and write_lm_head:
        tensors.append(("lm_head.weight", tensors[0][1].copy()))

    os.makedirs(a.o, exist_ok=True)
    with open(os.path.join(a.o, "config.json"), "w") as f:
        json.dump(cfgd, f, indent=2)
        f.write("\n")
    for fn in os.listdir(a.o):  # drop stale checkpoints from a previous layout
        if fn.startswith("model") and (fn.endswith(".safetensors") or fn.endswith(".index.json")):
            os.remove(os.path.join(a.o, fn))
    if a.shards <= 1:
        write_safetensors(os.path.join(a.o, "model.safetensors"), tensors, a.dtype)
        return
    # split into contiguous groups of roughly equal byte size
    itemsize = {"bf16": 2, "f16": 2, "f32": 4}[a.dtype]
    sizes = [t[1].size * itemsize for t in tensors]
    total = sum(sizes)
    groups = [[] for _ in range(a.shards)]
    acc = 0
    for t, sz in zip(tensors, sizes):
        g = min(a.shards - 1, int(acc * a.shards // total))
        groups[g].append(t)
        acc += sz
    assert all(groups), "too many shards for this model"
    wmap = {}
    for k, g in enumerate(groups):
        fn = "model-%05d-of-%05d.safetensors" % (k + 1, a.shards)
        write_safetensors(os.path.join(a.o, fn), g, a.dtype)
        for name, _ in g:
            wmap[name] = fn
    with open(os.path.join(a.o, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wmap},
                  f, indent=2, sort_keys=True)
        f.write("\n")

# --------------------------------------------------------------------------
# forward pass (float64)
# --------------------------------------------------------------------------

def rms_norm(x, w, eps, variant):
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    gain = (1.0 + w) if variant == "one-plus-gain" else w
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gain


def rope(x, positions, theta, variant):
    """x: [T, n_heads, hd]. Rotate-half RoPE (HF/Qwen convention)."""
    T, _, hd = x.shape
    half = hd // 2
    i = np.arange(half, dtype=np.float64)
    inv_freq = theta ** (-2.0 * i / hd)                       # [half]
    ang = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # [T, half]
    cos = np.cos(ang)[:, None, :]
    sin = np.sin(ang)[:, None, :]
    if variant == "interleaved-rope":  # WRONG on purpose: pairs (2i, 2i+1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x1 * cos - x2 * sin
        out[..., 1::2] = x2 * cos + x1 * sin
        return out
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def silu(z):
    with np.errstate(over="ignore"):
        return z * (1.0 / (1.0 + np.exp(-z)))


def softmax_last(s):
    s = s - np.max(s, axis=-1, keepdims=True)
    e = np.exp(s)
    return e / np.sum(e, axis=-1, keepdims=True)


def lm_head_weight(W, c):
    if c.tied:
        return W["model.embed_tokens.weight"]
    return W["lm_head.weight"]


def cached(a, kv_cache):
    """Keys or values as a KV cache of that type holds them: f32, or bf16 or
    f16 (rounded to nearest even from their f32 value; f16 clamped to its
    finite range)."""
    a32 = a.astype(np.float32)
    if kv_cache == "bf16":
        return bf16_bits_to_f64(f32_to_bf16_bits(a32))
    if kv_cache == "f16":
        # Clamped to f16's largest finite value first, as q3c's caches store.
        return np.clip(a32, -65504.0, 65504.0).astype(np.float16).astype(np.float64)
    return a32.astype(np.float64)


class PrefillActivations:
    """Which rows of a matrix product's input q3c's CPU kernels round to bf16
    in a prefill of T rows (docs/cpu-backend.md, "Prefill products" and
    "Rounding"), so that this reference can round the same values:

    - only products whose weight is a bf16 matrix with N % 16 == 0 output
      rows and an even K (the column-block kernels; the checkpoint's dtype
      decides, as it does for q3c compile);
    - avx512bf16: every row of a prefill (T > 1; the rows past the last
      whole register tile run smaller vdpbf16ps tiles), none of a decode step;
    - amx: every row of a prefill (T > 1) when K % 32 == 0 (16 rows or more
      on the tile unit, fewer on vdpbf16ps tiles), else none (f32 tiles);
    - the rounded value is the kernel's input after the RMSNorm gain and
      before the row's norm scale (which is applied to the product), taken
      from its float32 value, to nearest even.

    The products q3c runs are the merged q/k/v ([heads + 2 kv_heads] x
    head_dim rows), o_proj, the merged gate/up (SwiGLU: N = intermediate),
    down_proj and lm_head.

    Attention (q3c's --attention-matmul, by default avx512bf16 where the
    products run avx512bf16, f32 with AMX or exact ones): with avx512bf16 and head_dim
    % 32 == 0, a prefill of T > 1 rows multiplies bf16 inputs (function
    bf16_attention); decode stays exact."""

    def __init__(self, mode, c, attention=None):
        assert mode in ("avx512bf16", "amx")
        self.mode = mode
        self.bf16_weights = c.torch_dtype == "bfloat16"
        if attention is None:
            bf16_products = mode == "avx512bf16" and self.bf16_weights
            attention = "avx512bf16" if bf16_products else "f32"
        assert attention in ("f32", "avx512bf16")
        self.bf16_attention = attention == "avx512bf16" and c.head_dim % 32 == 0

    def attention_rounds(self, T):
        return self.bf16_attention and T > 1

    def rows(self, T, n, k):
        if not self.bf16_weights or n % 16 or k % 2:
            return 0
        if self.mode == "avx512bf16":
            return T if T > 1 else 0
        return T if T > 1 and k % 32 == 0 else 0


FLASH_KEY_BLOCK = 16  # positions whose probabilities q3c's CPU flash prefill rounds together


def to_bf16(a):
    """a (float64) -> float32 -> bf16 (nearest even), as float64."""
    return bf16_bits_to_f64(f32_to_bf16_bits(np.asarray(a, dtype=np.float32)))


def bf16_attention(q, k, v, scale, causal):
    """Causal attention of one query head [T, hd] over its KV head [T, hd]
    as q3c's CPU flash prefill with vdpbf16ps computes it: the query times
    the scale (in float32), the keys, the values and the probabilities enter
    the products rounded to bf16; a probability is exp(score - m) with m the
    running maximum at the end of its 16-position key block (the online
    softmax), rounded, then times exp(m - max); the softmax's sum is of the
    unrounded probabilities."""
    qs = to_bf16(q.astype(np.float32) * np.float32(scale))
    s = qs @ to_bf16(k).T
    s = np.where(causal, s, -np.inf)
    T = s.shape[1]
    blocks = -(-T // FLASH_KEY_BLOCK)
    padded = np.full((s.shape[0], blocks * FLASH_KEY_BLOCK), -np.inf)
    padded[:, :T] = s
    block_max = padded.reshape(s.shape[0], blocks, FLASH_KEY_BLOCK).max(axis=2)
    running = np.repeat(np.maximum.accumulate(block_max, axis=1), FLASH_KEY_BLOCK, axis=1)[:, :T]
    row_max = s.max(axis=1, keepdims=True)
    weights = to_bf16(np.exp(s - running)) * np.exp(running - row_max)
    total = np.exp(s - row_max).sum(axis=1, keepdims=True)
    return (weights @ to_bf16(v)) / total


def rounded_rows(a, n_rows):
    """The first n_rows rows of a, rounded f64 -> f32 -> bf16 (nearest even)."""
    if n_rows == 0:
        return a
    out = a.copy()
    out[:n_rows] = bf16_bits_to_f64(f32_to_bf16_bits(a[:n_rows].astype(np.float32)))
    return out


def product(x, w, rounding, n_out=None):
    """x @ w.T, with the input rows a CPU prefill would round rounded first.
    n_out: the output rows of the kernel that runs it (merged products)."""
    if rounding is None:
        return x @ w.T
    n = w.shape[0] if n_out is None else n_out
    return rounded_rows(x, rounding.rows(x.shape[0], n, w.shape[1])) @ w.T


def normed_product(x, gain, w, c, rounding, n_out=None):
    """rms_norm(x, gain) @ w.T as the fused kernels compute it: the gain
    multiplies the input, the norm scale the product."""
    if rounding is None:
        return rms_norm(x, gain, c.eps, "correct") @ w.T
    scale = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + c.eps)
    return product(x * gain, w, rounding, n_out) * scale


def forward(W, c, tokens, variant="correct", kv_cache=None, prefill_activations=None,
            prefill_attention=None):
    """tokens: list of ints -> float64 logits [T, vocab]. kv_cache (f32 or
    bf16) rounds the keys and values as a cache of that type would; None
    keeps them in float64. prefill_activations (avx512bf16 or amx) rounds
    the inputs of the matrix products as q3c's CPU prefill of that kind does
    (class PrefillActivations); None keeps them exact."""
    rounding = None
    if prefill_activations is not None:
        assert variant == "correct"
        rounding = PrefillActivations(prefill_activations, c, prefill_attention)
    tokens = np.asarray(tokens, dtype=np.int64)
    assert tokens.ndim == 1 and len(tokens) >= 1
    assert np.all((tokens >= 0) & (tokens < c.vocab))
    T = len(tokens)
    hd, nh, nkv = c.head_dim, c.heads, c.kv_heads
    group = nh // nkv
    pos = np.arange(T)
    x = W["model.embed_tokens.weight"][tokens]               # [T, H]
    causal = np.tril(np.ones((T, T), dtype=bool))            # query t sees s <= t
    for L in range(c.layers):
        p = "model.layers.%d." % L
        # ---- attention ----
        if rounding is None:
            h = rms_norm(x, W[p + "input_layernorm.weight"], c.eps, variant)
            q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, nh, hd)
            k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, hd)
            v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd)
        else:  # one merged q/k/v product
            qkv_w = np.concatenate([W[p + "self_attn.%s_proj.weight" % n] for n in "qkv"])
            qkv = normed_product(x, W[p + "input_layernorm.weight"], qkv_w, c, rounding)
            q = qkv[:, :nh * hd].reshape(T, nh, hd)
            k = qkv[:, nh * hd:(nh + nkv) * hd].reshape(T, nkv, hd)
            v = qkv[:, (nh + nkv) * hd:].reshape(T, nkv, hd)
        qn, kn = W[p + "self_attn.q_norm.weight"], W[p + "self_attn.k_norm.weight"]
        if variant == "norm-after-rope":  # WRONG on purpose
            q = rms_norm(rope(q, pos, c.theta, variant), qn, c.eps, variant)
            k = rms_norm(rope(k, pos, c.theta, variant), kn, c.eps, variant)
        else:
            q = rope(rms_norm(q, qn, c.eps, variant), pos, c.theta, variant)
            k = rope(rms_norm(k, kn, c.eps, variant), pos, c.theta, variant)
        if kv_cache is not None:
            k, v = cached(k, kv_cache), cached(v, kv_cache)
        out = np.zeros((T, nh, hd))
        for hq in range(nh):
            kvh = (hq % nkv) if variant == "kv-head-modulo" else (hq // group)
            if rounding is not None and rounding.attention_rounds(T):
                out[:, hq, :] = bf16_attention(q[:, hq, :], k[:, kvh, :], v[:, kvh, :],
                                               hd ** -0.5, causal)
                continue
            s = (q[:, hq, :] @ k[:, kvh, :].T) * (hd ** -0.5)  # [T, T]
            s = np.where(causal, s, -np.inf)
            out[:, hq, :] = softmax_last(s) @ v[:, kvh, :]
        x = x + product(out.reshape(T, nh * hd), W[p + "self_attn.o_proj.weight"], rounding)
        # ---- MLP ----
        if rounding is None:
            h = rms_norm(x, W[p + "post_attention_layernorm.weight"], c.eps, variant)
            g = h @ W[p + "mlp.gate_proj.weight"].T
            u = h @ W[p + "mlp.up_proj.weight"].T
        else:  # one SwiGLU product of N = intermediate outputs
            gu_w = np.concatenate([W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"]])
            gu = normed_product(x, W[p + "post_attention_layernorm.weight"], gu_w, c, rounding,
                                n_out=c.inter)
            g, u = gu[:, :c.inter], gu[:, c.inter:]
        x = x + product(silu(g) * u, W[p + "mlp.down_proj.weight"], rounding)
    if rounding is None:
        x = rms_norm(x, W["model.norm.weight"], c.eps, variant)
        return x @ lm_head_weight(W, c).T
    return normed_product(x, W["model.norm.weight"], lm_head_weight(W, c), c, rounding)


def check_weights(W, c):
    expect = dict(tensor_shapes(c, with_lm_head=not c.tied))
    for name, shape in expect.items():
        if name not in W:
            raise ValueError("missing tensor " + name)
        if tuple(W[name].shape) != tuple(shape):
            raise ValueError("%s: shape %s, expected %s" % (name, W[name].shape, shape))
    extra = set(W) - set(expect) - {"lm_head.weight"}
    if extra:
        raise ValueError("unexpected tensors: %s" % sorted(extra))
    if "lm_head.weight" in W and tuple(W["lm_head.weight"].shape) != (c.vocab, c.hidden):
        raise ValueError("lm_head.weight: bad shape")


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = Cfg(json.load(f))
    W = load_weights(model_dir)
    check_weights(W, c)
    return c, W


def greedy(W, c, prompt, n, variant="correct", kv_cache=None):
    ids = list(prompt)
    new = []
    margins = []
    for _ in range(n):
        last = forward(W, c, ids, variant, kv_cache)[-1]
        nxt = int(np.argmax(last))
        top2 = np.sort(last)[-2:]
        margins.append(float(top2[1] - top2[0]))
        ids.append(nxt)
        new.append(nxt)
    return new, margins


def cmd_logits(a):
    c, W = load_model(a.model)
    tokens = [int(t) for t in a.tokens.split(",") if t.strip() != ""]
    if a.prefill_attention is not None and a.prefill_activations is None:
        sys.exit("--prefill-attention needs --prefill-activations")
    logits = forward(W, c, tokens, a.variant, a.kv_cache, a.prefill_activations,
                     a.prefill_attention)
    if a.o:
        np.save(a.o, logits.astype(np.float32))
    if a.greedy:
        new, margins = greedy(W, c, tokens, a.greedy, a.variant, a.kv_cache)
        print("ids: " + " ".join(str(t) for t in new))
        if a.margins:
            print("min top1-top2 margin: %.6g" % min(margins), file=sys.stderr)
        if min(margins) < a.min_margin:
            sys.exit("greedy top1-top2 margin %.6g < --min-margin %g: argmax is "
                     "fragile, pick another seed" % (min(margins), a.min_margin))
    if a.stats:
        print("max|logit| %.6g  std %.6g" % (np.max(np.abs(logits)), np.std(logits)),
              file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("random-model")
    r.add_argument("--config", required=True)
    r.add_argument("--seed", type=int, required=True)
    r.add_argument("--dtype", choices=sorted(ST_DTYPE), required=True)
    r.add_argument("-o", required=True, help="output directory")
    r.add_argument("--write-tied-lm-head", action="store_true",
                   help="tied model: also store a redundant lm_head.weight copy")
    r.add_argument("--shards", type=int, default=1)
    l = sub.add_parser("logits")
    l.add_argument("--model", required=True)
    l.add_argument("--tokens", required=True, help="comma-separated ids")
    l.add_argument("-o", help="output .npy (float32 [T, vocab])")
    l.add_argument("--variant", choices=VARIANTS, default="correct")
    l.add_argument("--greedy", type=int, default=0)
    l.add_argument("--kv-cache", choices=("f32", "bf16", "f16"), default=None,
                   help="round keys and values as a KV cache of this type holds them "
                        "(default: keep them in float64)")
    l.add_argument("--prefill-activations", choices=("avx512bf16", "amx"), default=None,
                   help="round the inputs of the matrix products as q3c's CPU prefill with "
                        "--prefill-matmul of this kind does (the logits of one prefill; "
                        "--greedy keeps the exact products)")
    l.add_argument("--prefill-attention", choices=("f32", "avx512bf16"), default=None,
                   help="with --prefill-activations: the prefill attention's inputs as q3c's "
                        "--attention-matmul of this kind has them (default: avx512bf16 with "
                        "--prefill-activations avx512bf16, else f32)")
    l.add_argument("--margins", action="store_true",
                   help="with --greedy: print the smallest top1-top2 gap to stderr")
    l.add_argument("--min-margin", type=float, default=0.0,
                   help="with --greedy: fail if any greedy step's top1-top2 gap is smaller")
    l.add_argument("--stats", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "random-model":
        cmd_random_model(a)
    else:
        cmd_logits(a)


if __name__ == "__main__":
    main()
