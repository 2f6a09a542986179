"""Which requested engine args demonstrably did not take effect on the running server.

A configuration whose args were not applied measured something else than asked: its points
are stored but marked invalid, with the reason naming what was requested and what runs.
The running configuration is read by metrics/effective.py.
"""

from __future__ import annotations

import json
from typing import Any


def ineffective_args(requested: dict[str, Any], effective: dict[str, Any]) -> list[str]:
    """Reasons why a requested arg demonstrably did not take effect (empty: all good)."""
    reasons: list[str] = []

    def differs(arg: str, key: str, want: Any) -> None:
        have = effective.get(key)
        if have is not None and str(have) != str(want):
            reasons.append(f"{arg} requested {want}, server runs {have}")

    if (value := requested.get("max-model-len")) is not None:
        differs("max-model-len", "max_model_len", value)
    if (value := requested.get("max-num-batched-tokens")) is not None:
        differs("max-num-batched-tokens", "max_num_batched_tokens", value)
    if (value := requested.get("kv-cache-dtype")) not in (None, "auto"):
        differs("kv-cache-dtype", "cache_dtype", value)
    if isinstance(value := requested.get("enable-prefix-caching"), bool):
        differs("enable-prefix-caching", "prefix_caching", value)
    if (value := requested.get("quantization")) is not None:
        if "quantization" in effective and effective["quantization"] is None:
            reasons.append(f"quantization requested {value}, server runs without quantization")
        elif effective.get("quantized_layers") == 0:
            reasons.append(f"quantization {value} requested but the server quantized 0 layers")
    if (value := requested.get("speculative-config")) is not None:
        if "speculative_method" in effective and effective["speculative_method"] is None:
            wanted = value.get("method") if isinstance(value, dict) else json.dumps(value)
            reasons.append(f"speculative-config requested ({wanted}), server runs without it")
    return reasons
