"""What a started server actually runs with, read back from the server itself.

A requested setting can be silently ignored (vLLM-CPU's int8 weight-only quantization
starts but quantizes 0 layers), so tunebench reads the configuration back from what the
server shows: `/v1/models` (max_model_len), the labels of `vllm:cache_config_info` (block
size, cache dtype, KV capacity, prefix caching, GPU memory utilization) and the start-up
log: the engine config line, the scheduler and max-model-len lines, the KV cache size,
quantized layers, and vLLM's `non-default args: {...}` line (the command line as the server
parsed it). Comparing it with what was requested is a rule of points/validity.py, whose
`KNOWN_ARGS` names the key of this dict each arg is read from.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import httpx

from tunebench.metrics.parse import MetricsParseError, snapshot_from_text
from tunebench.redact import redact

# Fields of vLLM's engine config line ("Initializing a V1 LLM engine (v0.x) with config:").
_ENGINE_FIELDS = {
    "quantization": r"\bquantization=([^,\s]+)",
    "kv_cache_dtype": r"\bkv_cache_dtype=([^,\s]+)",
    "dtype": r"\bdtype=(?:torch\.)?([^,\s]+)",
    "max_seq_len": r"\bmax_seq_len=(\d+)",
    "enforce_eager": r"\benforce_eager=(True|False)",
    "tensor_parallel_size": r"\btensor_parallel_size=(\d+)",
    "pipeline_parallel_size": r"\bpipeline_parallel_size=(\d+)",
    "data_parallel_size": r"\bdata_parallel_size=(\d+)",
    "enable_prefix_caching": r"\benable_prefix_caching=(True|False)",
    # vLLM before 0.9 wrote chunked_prefill_enabled; later ones enable_chunked_prefill.
    "enable_chunked_prefill": r"\b(?:enable_chunked_prefill|chunked_prefill_enabled)=(True|False)",
    "seed": r"\bseed=(-?\d+|None)",
}
_ENGINE_LINE_MARKERS = ("Initializing a V1 LLM engine", "Initializing an LLM engine")
_KV_TOKENS = re.compile(r"(?:GPU|CPU|XPU|TPU)? ?KV cache size: ([\d,]+) tokens")
_MAX_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_BATCHED_TOKENS = re.compile(r"max_num_batched_tokens=(\d+)")
_MAX_MODEL_LEN = re.compile(r"Using max model len (\d+)")
_QUANTIZED_LAYERS = re.compile(r"Quantizing (\d+) layers")
_SPEC_METHOD = re.compile(r"speculative_config=\S*?method=['\"]?([A-Za-z0-9_]+)")
_SPEC_TOKENS = re.compile(r"speculative_config=SpeculativeConfig\([^)]*?num_spec_tokens=(\d+)")
# "Selected CPUInt8ScaledMMLinearKernel for CompressedTensorsW8A8Int8", "Using
# CPUWNA16LinearKernel for CompressedTensorsWNA16": the kernel vLLM chose for each
# quantization scheme of the checkpoint, logged once per scheme while the model loads (the
# same code on every platform: vllm/model_executor/kernels/linear/__init__.py).
_SCHEME_KERNEL = re.compile(
    r"\b(?:Selected|Using) (\w+) for (\w*(?:CompressedTensors|LinearMethod)\w*)"
)
_VERSION = re.compile(r"version (\d+\.\d+\.\d+\S*)")
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")


def parse_startup_log(log: str) -> dict[str, Any]:
    """Effective settings that only the start-up log tells."""
    out: dict[str, Any] = {}
    engine_line = _first_line(log, _ENGINE_LINE_MARKERS)
    for key, pattern in _ENGINE_FIELDS.items():
        match = re.search(pattern, engine_line)
        if match:
            out[key] = _plain(match.group(1))
    if engine_line:
        method = _SPEC_METHOD.search(engine_line)
        out["speculative_method"] = method.group(1) if method else None
        if tokens := _SPEC_TOKENS.search(engine_line):
            out["speculative_num_tokens"] = int(tokens.group(1))
    if match := _KV_TOKENS.search(log):
        out["kv_cache_size_tokens"] = int(match.group(1).replace(",", ""))
    if match := _MAX_CONCURRENCY.search(log):
        out["max_concurrency_at_max_len"] = float(match.group(2))
    if match := _BATCHED_TOKENS.search(log):
        out["max_num_batched_tokens"] = int(match.group(1))
    if match := _MAX_MODEL_LEN.search(log):
        out["max_model_len_used"] = int(match.group(1))
    quantized = [int(n) for n in _QUANTIZED_LAYERS.findall(log)]
    if quantized:
        out["quantized_layers"] = sum(quantized)
    schemes = {scheme: kernel for kernel, scheme in _SCHEME_KERNEL.findall(log)}
    if schemes:
        out["quantization_schemes"] = schemes
    if match := _VERSION.search(log):
        out["vllm_version"] = match.group(1)
    non_default = _NON_DEFAULT.search(_first_line(log, ("non-default args: {",)))
    if non_default:
        out["non_default_args"] = parse_arg_dict(non_default.group(1))
    return out


def _first_line(log: str, markers: tuple[str, ...]) -> str:
    return next((line for line in log.splitlines() if any(m in line for m in markers)), "")


def _plain(text: str) -> Any:
    text = text.strip("'\"")
    if text in ("None", "none"):
        return None
    if text in ("True", "False"):
        return text == "True"
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def parse_arg_dict(text: str) -> dict[str, Any]:
    """vLLM's `non-default args` dict (a Python repr) as plain data, secrets masked.

    Values that are not literals (config objects such as `KVTransferConfig(...)`) stay as
    their text, so one odd value never loses the others.
    """
    try:
        parsed = ast.literal_eval(text)
        items = parsed.items() if isinstance(parsed, dict) else []
        out = {str(k): _jsonable(v) for k, v in items}
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        out = {key: _literal_or_text(value) for key, value in _top_level_items(text)}
    # vLLM masks api_key itself only since late 2025; older servers log it in clear.
    masked = redact(out)
    return masked if isinstance(masked, dict) else out


def _top_level_items(text: str) -> list[tuple[str, str]]:
    """`'key': value` pairs of a dict repr, split at its top-level commas only."""
    body = text.strip()[1:-1]
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for index, char in enumerate(body):
        if quote:
            quote = "" if char == quote and body[index - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:index])
            start = index + 1
    parts.append(body[start:])
    pairs = []
    for part in parts:
        match = re.fullmatch(r"\s*'([^']+)'\s*:\s*(.*?)\s*", part, re.S)
        if match:
            pairs.append((match.group(1), match.group(2)))
    return pairs


def _literal_or_text(value: str) -> Any:
    try:
        return _jsonable(ast.literal_eval(value))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def _jsonable(value: Any) -> Any:
    """The effective config is stored in the manifest (JSON): no tuples, sets or objects."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def combine_effective(
    models: Any, version: Any, metrics_text: str | None, log: str
) -> dict[str, Any]:
    """The effective config from what the server answered (None where it did not)."""
    effective: dict[str, Any] = {}
    data = models.get("data") if isinstance(models, dict) else None
    if data:
        effective["served_model"] = data[0].get("id")
        effective["max_model_len"] = data[0].get("max_model_len")
    if isinstance(version, dict) and version.get("version"):
        effective["vllm_version"] = version["version"]
    if metrics_text:
        try:
            info = snapshot_from_text(metrics_text, 0).cache_config
        except MetricsParseError:
            info = {}
        if info:
            effective.update(_cache_config(info))
    from_log = parse_startup_log(log)
    for key, value in from_log.items():
        effective.setdefault(key, value)
    if effective.get("kv_capacity_tokens") is None and "kv_cache_size_tokens" in from_log:
        effective["kv_capacity_tokens"] = from_log["kv_cache_size_tokens"]
    return effective


def _cache_config(info: dict[str, str]) -> dict[str, Any]:
    return {
        "block_size": _int_or_none(info.get("block_size")),
        "cache_dtype": info.get("cache_dtype"),
        "kv_capacity_tokens": _int_or_none(info.get("kv_cache_size_tokens")),
        "prefix_caching": _bool_or_none(info.get("enable_prefix_caching")),
        "num_gpu_blocks": _int_or_none(info.get("num_gpu_blocks")),
        "gpu_memory_utilization": _float_or_none(info.get("gpu_memory_utilization")),
        "kv_cache_memory_bytes": _int_or_none(info.get("kv_cache_memory_bytes")),
    }


def read_effective(
    base_url: str, metrics_url: str, log: str, headers: dict[str, str], verify=True
) -> dict[str, Any]:
    """Query the running server and its log; missing sources leave keys out, never fail."""
    with httpx.Client(headers=headers, verify=verify, timeout=10) as client:
        models = _get_json(client, f"{base_url}/v1/models")
        version = _get_json(client, f"{base_url}/version")
        try:
            metrics_text: str | None = client.get(metrics_url).text
        except httpx.HTTPError:
            metrics_text = None
    return combine_effective(models, version, metrics_text, log)


def _get_json(client: httpx.Client, url: str) -> Any:
    try:
        return client.get(url).json()
    except (httpx.HTTPError, ValueError):
        return None


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(float(text)) if text not in (None, "None") else None
    except ValueError:
        return None


def _float_or_none(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "None") else None
    except ValueError:
        return None


def _bool_or_none(text: str | None) -> bool | None:
    return None if text in (None, "None") else text == "True"
