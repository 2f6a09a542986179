"""Prune configurations that cannot start or fit in the KV cache before deploying them.

vLLM refuses to start when one sequence of `max-model-len` tokens does not fit in the KV
cache, and with `max-num-seqs x max-model-len` beyond the cache it preempts under load.
The KV capacity in tokens is learned from a started server (`kv_capacity_tokens` in the
effective configuration) and scaled by the cache dtype's size for other dtypes. It holds
only for configurations that share the args the KV budget depends on besides the dtype
(`KV_BUDGET_ARGS`: on a GPU the memory share, a draft model's weights and KV, CUDA graphs'
memory, the weights' quantization, the GPUs the cache is split over); for any other the
capacity is not known until it starts, and only the start-up rule applies.
"""

from __future__ import annotations

import json

BYTES_PER_ELEMENT = {
    "auto": 2,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8_per_token_head": 1,
    "fp8_per_token_head": 1,
    # 4-bit caches (vLLM 0.32 CacheDType): half a byte, their scales left out
    "nvfp4": 0.5,
    "nvfp4_4over6": 0.5,
    "int4_per_token_head": 0.5,
}

# Engine args that change how many tokens the KV cache holds, besides its dtype.
KV_BUDGET_ARGS = (
    "model",
    "gpu-memory-utilization",
    "kv-cache-memory-bytes",
    "speculative-config",
    "enforce-eager",
    "quantization",
    "tensor-parallel-size",
    "pipeline-parallel-size",
)


def kv_budget_key(args: dict) -> str:
    """What a learned KV capacity holds for: the KV budget's args, as text."""
    return json.dumps({k: args.get(k) for k in KV_BUDGET_ARGS}, sort_keys=True, default=str)


def kv_capacity_for(learned_tokens: int, learned_dtype: str, dtype: str) -> int:
    """The KV capacity (tokens) with cache dtype `dtype`, from one learned with another."""
    have = BYTES_PER_ELEMENT.get(str(learned_dtype), 2)
    want = BYTES_PER_ELEMENT.get(str(dtype), 2)
    return int(learned_tokens * have / want)


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def prune_reason(args: dict, kv_capacity_tokens: int | None, overcommit: float = 1.0) -> str | None:
    """Why `args` cannot start or run well in `kv_capacity_tokens` (already scaled to its
    dtype; None: not learned yet), or None.

    `overcommit` > 1 allows max-num-seqs x max-model-len beyond the cache (requests rarely
    use their whole context); the hard limit of one full-length sequence always applies.
    """
    batched, seqs = _int(args.get("max-num-batched-tokens")), _int(args.get("max-num-seqs"))
    if batched is not None and seqs is not None and batched < seqs:
        return f"max-num-batched-tokens {batched} < max-num-seqs {seqs}: vLLM refuses to start"
    if kv_capacity_tokens is None:
        return None
    model_len = args.get("max-model-len")
    if not isinstance(model_len, int) or isinstance(model_len, bool):
        return None  # the model's own default is not known before a start
    if model_len > kv_capacity_tokens:
        return f"max-model-len {model_len} exceeds the KV cache ({kv_capacity_tokens} tokens)"
    seqs = args.get("max-num-seqs")
    if isinstance(seqs, int) and not isinstance(seqs, bool):
        needed = seqs * model_len
        if needed > kv_capacity_tokens * overcommit:
            return (
                f"max-num-seqs x max-model-len = {needed} tokens exceeds the KV cache "
                f"({kv_capacity_tokens} tokens x overcommit {overcommit:g})"
            )
    return None
