"""An llm-d Benchmark Report v0.2 (`tunebench export --format llmd-br` writes one per point)
-> one imported point: its aggregate statistics, the load it names, and the configuration of
its first stack entry (label, model, engine args). The report holds no per-request samples,
so compare can show its figures but not their intervals.
"""

from __future__ import annotations

import re
from typing import Any

from tunebench.numbers import to_float

# (column prefix, the report's latency statistic, the statistics taken, the column's unit)
_LATENCIES = (
    ("ttft", "time_to_first_token", ("mean", "p50", "p90", "p95", "p99"), "ms"),
    ("itl", "inter_token_latency", ("mean", "p50", "p95", "p99"), "ms"),
    ("tpot", "time_per_output_token", ("mean", "p50", "p95"), "ms"),
    ("e2e", "request_latency", ("mean", "p50", "p95", "p99"), "s"),
)
_TO_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ms/token": 1e-3, "s/token": 1.0}
_DURATION = re.compile(r"PT(?P<s>[\d.]+)S")


def is_benchmark_report(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and str(data.get("version", "")).startswith("0.2")
        and isinstance(data.get("scenario"), dict)
        and isinstance(data.get("results"), dict)
    )


def _in(value: Any, unit: str, wanted: str) -> float | None:
    number = to_float(value)
    if number is None:
        return None
    scale = _TO_SECONDS.get(unit, 1e-3 if wanted == "ms" else 1.0)
    return number * scale / (1e-3 if wanted == "ms" else 1.0)


def _load(scenario: dict) -> tuple[str, float | None]:
    load = scenario.get("load") or {}
    native = (load.get("native") or {}).get("config") or {}
    if native.get("load_kind"):
        return str(native["load_kind"]), to_float(native.get("target"))
    standard = load.get("standardized") or {}
    if standard.get("rate_qps") is not None:
        return "poisson", to_float(standard["rate_qps"])
    if standard.get("concurrency") is not None:
        return "concurrent", to_float(standard["concurrency"])
    return "unknown", None


def benchmark_report_point(data: dict) -> dict[str, Any]:
    """The points.csv columns of one report, its configuration under `config`."""
    scenario = data["scenario"]
    kind, target = _load(scenario)
    aggregate = ((data["results"].get("request_performance") or {}).get("aggregate")) or {}
    requests = aggregate.get("requests") or {}
    total, failed = to_float(requests.get("total")), to_float(requests.get("failures")) or 0
    row: dict[str, Any] = {
        "load_kind": kind,
        "target": target,
        "requests_ok": int(total - failed) if total is not None else None,
        "requests_failed": int(failed),
    }
    latency = aggregate.get("latency") or {}
    for prefix, name, stats, unit in _LATENCIES:
        values = latency.get(name) or {}
        for stat in stats:
            row[f"{prefix}_{stat}_{unit}"] = _in(values.get(stat), values.get("units", ""), unit)
    throughput = aggregate.get("throughput") or {}
    for column, name in (
        ("output_tok_s", "output_token_rate"),
        ("total_tok_s", "total_token_rate"),
        ("achieved_rps", "request_rate"),
    ):
        row[column] = to_float((throughput.get(name) or {}).get("mean"))
    for column, name in (
        ("prompt_tokens_mean", "input_length"),
        ("output_tokens_mean", "output_length"),
    ):
        row[column] = to_float((requests.get(name) or {}).get("mean"))
    duration = _DURATION.fullmatch(str(((data.get("run") or {}).get("time") or {}).get("duration")))
    row["duration_s"] = float(duration.group("s")) if duration else None
    native = ((scenario.get("load") or {}).get("native") or {}).get("config") or {}
    if native.get("client_limited_reason"):
        row["client_limited"] = True
        row["client_limited_reason"] = str(native["client_limited_reason"])
    stack = (scenario.get("stack") or [{}])[0]
    label = (stack.get("metadata") or {}).get("label")
    if label:
        row["config_label"] = str(label)
    model = ((stack.get("standardized") or {}).get("model") or {}).get("name")
    args = (stack.get("native") or {}).get("args")
    row["config"] = {"model": model or None, "args": args if isinstance(args, dict) else None}
    return row
