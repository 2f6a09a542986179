"""What a started server actually runs with, read back from the server itself.

A requested setting can be silently ignored (vLLM-CPU's int8 weight-only quantization
starts but quantizes 0 layers), so tunebench reads the configuration back from three
places: `/v1/models` (max_model_len), the labels of `vllm:cache_config_info` (block size,
cache dtype, KV capacity, prefix caching) and the start-up log (engine config line, KV
cache size, quantized layers). Comparing it with what was requested is a rule of
points/validity.py.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from tunebench.metrics.parse import MetricsParseError, snapshot_from_text

_ENGINE_FIELDS = {
    "quantization": r"quantization=([^,\s]+)",
    "kv_cache_dtype": r"kv_cache_dtype=([^,\s]+)",
    "dtype": r"\bdtype=(?:torch\.)?([^,\s]+)",
    "max_seq_len": r"max_seq_len=(\d+)",
    "enforce_eager": r"enforce_eager=(True|False)",
    "tensor_parallel_size": r"tensor_parallel_size=(\d+)",
    "enable_prefix_caching": r"enable_prefix_caching=(True|False)",
}
_KV_TOKENS = re.compile(r"(?:GPU|CPU|XPU|TPU)? ?KV cache size: ([\d,]+) tokens")
_MAX_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_BATCHED_TOKENS = re.compile(r"max_num_batched_tokens=(\d+)")
_QUANTIZED_LAYERS = re.compile(r"Quantizing (\d+) layers")
_SPEC_METHOD = re.compile(r"speculative_config=\S*?method=['\"]?([A-Za-z0-9_]+)")
_VERSION = re.compile(r"version (\d+\.\d+\.\d+\S*)")


def parse_startup_log(log: str) -> dict[str, Any]:
    """Effective settings that only the start-up log tells."""
    out: dict[str, Any] = {}
    engine_line = next(
        (
            line
            for line in log.splitlines()
            if "Initializing a V1 LLM engine" in line or "Initializing an LLM engine" in line
        ),
        "",
    )
    for key, pattern in _ENGINE_FIELDS.items():
        match = re.search(pattern, engine_line)
        if match:
            out[key] = _plain(match.group(1))
    if engine_line:
        method = _SPEC_METHOD.search(engine_line)
        out["speculative_method"] = method.group(1) if method else None
    if match := _KV_TOKENS.search(log):
        out["kv_cache_size_tokens"] = int(match.group(1).replace(",", ""))
    if match := _MAX_CONCURRENCY.search(log):
        out["max_concurrency_at_max_len"] = float(match.group(2))
    if match := _BATCHED_TOKENS.search(log):
        out["max_num_batched_tokens"] = int(match.group(1))
    quantized = [int(n) for n in _QUANTIZED_LAYERS.findall(log)]
    if quantized:
        out["quantized_layers"] = sum(quantized)
    if match := _VERSION.search(log):
        out["vllm_version"] = match.group(1)
    return out


def _plain(text: str) -> Any:
    text = text.strip("'\"")
    if text in ("None", "none"):
        return None
    if text in ("True", "False"):
        return text == "True"
    return int(text) if text.isdigit() else text


def read_effective(
    base_url: str, metrics_url: str, log: str, headers: dict[str, str], verify=True
) -> dict[str, Any]:
    """Query the running server and its log; missing sources leave keys out, never fail."""
    effective: dict[str, Any] = {}
    with httpx.Client(headers=headers, verify=verify, timeout=10) as client:
        try:
            models = client.get(f"{base_url}/v1/models").json().get("data") or []
            if models:
                effective["served_model"] = models[0].get("id")
                effective["max_model_len"] = models[0].get("max_model_len")
        except (httpx.HTTPError, ValueError):
            pass
        try:
            version = client.get(f"{base_url}/version").json().get("version")
            if version:
                effective["vllm_version"] = version
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
        try:
            info = snapshot_from_text(client.get(metrics_url).text, 0).cache_config
            if info:
                effective["block_size"] = _int_or_none(info.get("block_size"))
                effective["cache_dtype"] = info.get("cache_dtype")
                effective["kv_capacity_tokens"] = _int_or_none(info.get("kv_cache_size_tokens"))
                effective["prefix_caching"] = _bool_or_none(info.get("enable_prefix_caching"))
                effective["num_gpu_blocks"] = _int_or_none(info.get("num_gpu_blocks"))
        except (httpx.HTTPError, MetricsParseError):
            pass
    from_log = parse_startup_log(log)
    for key, value in from_log.items():
        effective.setdefault(key, value)
    if effective.get("kv_capacity_tokens") is None and "kv_cache_size_tokens" in from_log:
        effective["kv_capacity_tokens"] = from_log["kv_cache_size_tokens"]
    return effective


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(float(text)) if text not in (None, "None") else None
    except ValueError:
        return None


def _bool_or_none(text: str | None) -> bool | None:
    return None if text in (None, "None") else text == "True"
