#!/usr/bin/env python3
"""Writes a Hugging Face Qwen3 folder (as `q3c random-model` makes) as a GGUF
file for llama.cpp, without torch: the tensors keep their dtype (bf16, f16 or
f32), 1-D norm gains become f32 as llama.cpp's own converter makes them.

Only for benchmarking q3c beside llama.cpp on the same weights; it needs
llama.cpp's gguf-py (pass the llama.cpp source tree) and numpy.

  hf_to_gguf.py MODEL_DIR OUT.gguf --llama-dir /path/to/llama.cpp
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

# Hugging Face parameter name -> GGUF tensor name ("{}" is the layer).
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def read_safetensors(path):
    """Yields (name, dtype string, shape, raw bytes) of each tensor."""
    data = path.read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        yield name, info["dtype"], info["shape"], data[base + begin:base + end]


def gguf_name(hf_name):
    if hf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[hf_name]
    parts = hf_name.split(".")
    if parts[:2] == ["model", "layers"]:
        rest = ".".join(parts[3:])
        if rest in LAYER_NAMES:
            return f"blk.{parts[2]}.{LAYER_NAMES[rest]}"
    sys.exit(f"hf_to_gguf: no GGUF name for tensor '{hf_name}'")


def bf16_to_f32(raw):
    bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
    return bits.view(np.float32)


def add_tensor(writer, gguf, name, dtype, shape, raw):
    if len(shape) == 1:  # norm gains: f32, as llama.cpp expects them
        if dtype == "BF16":
            values = bf16_to_f32(raw)
        else:
            values = np.frombuffer(raw, dtype={"F16": np.float16, "F32": np.float32}[dtype]).astype(np.float32)
        writer.add_tensor(name, values.reshape(shape))
        return
    if dtype == "BF16":
        writer.add_tensor(name, np.frombuffer(raw, dtype=np.uint16).reshape(shape),
                          raw_dtype=gguf.GGMLQuantizationType.BF16)
    elif dtype == "F16":
        writer.add_tensor(name, np.frombuffer(raw, dtype=np.float16).reshape(shape))
    elif dtype == "F32":
        writer.add_tensor(name, np.frombuffer(raw, dtype=np.float32).reshape(shape))
    else:
        sys.exit(f"hf_to_gguf: tensor '{name}' has dtype {dtype}; expected BF16, F16 or F32")


def add_vocab(writer, gguf, tokenizer_path, vocab_size):
    tokenizer = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [gguf.TokenType.UNUSED] * vocab_size
    for text, token_id in tokenizer["model"]["vocab"].items():
        tokens[token_id] = text
        types[token_id] = gguf.TokenType.NORMAL
    for added in tokenizer.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        types[added["id"]] = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    ids = {added["content"]: added["id"] for added in tokenizer.get("added_tokens", [])}
    writer.add_eos_token_id(ids.get("<|im_end|>", ids.get("<|endoftext|>", 0)))
    writer.add_bos_token_id(ids.get("<|endoftext|>", 0))
    writer.add_add_bos_token(False)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--llama-dir", type=Path, required=True, help="llama.cpp source tree (for gguf-py)")
    parser.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: MODEL_DIR/tokenizer.json)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.llama_dir / "gguf-py"))
    import gguf

    config = json.loads((args.model_dir / "config.json").read_text())
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    writer = gguf.GGUFWriter(args.out, "qwen3")
    writer.add_name("q3c random Qwen3")
    writer.add_context_length(config.get("max_position_embeddings", 40960))
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(config.get("rope_theta", 1000000.0))
    writer.add_layer_norm_rms_eps(config.get("rms_norm_eps", 1e-6))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    tokenizer = args.tokenizer or args.model_dir / "tokenizer.json"
    add_vocab(writer, gguf, tokenizer, config["vocab_size"])

    for path in sorted(args.model_dir.glob("*.safetensors")):
        for hf_name, dtype, shape, raw in read_safetensors(path):
            add_tensor(writer, gguf, gguf_name(hf_name), dtype, shape, raw)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
