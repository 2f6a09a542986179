"""`tunebench import`: existing benchmark results -> a run that compare and report accept.

Formats, detected from the content:
- GuideLLM reports, 0.3.x (JSON or YAML: `benchmarks[].args.strategy`, `run_stats`) through
  0.8.x (`benchmarks[].config.strategy`, `scheduler_metrics`); one point per benchmark.
- `vllm bench serve --save-result` JSON (`request_throughput`, `median_ttft_ms`, ...; with
  `--save-detailed` also the per-request `ttfts`, `itls`, `latencies`); one point per file.
The imported run has one configuration; server metrics are absent and marked so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from tunebench.errors import SpecError
from tunebench.load.guidellm_report import client_columns, request_samples, strategy_of
from tunebench.points.columns import SERVER_COLUMNS
from tunebench.store.manifest import ConfigStatus, RunKind
from tunebench.store.run import RunStore
from tunebench.version import __version__

MAX_IMPORT_BYTES = 2_000_000_000
_ASYNC_KINDS = {"async": "poisson"}


def read_result(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not UTF-8 text; give a JSON or YAML result file") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            return yaml.safe_load(text)
        return json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SpecError(
            f"{path}: unreadable {path.suffix.lstrip('.') or 'result'} file: "
            f"{' '.join(str(exc).split())[:200]}"
        ) from None


def detect(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("benchmarks"), list):
        return "guidellm"
    if isinstance(data, dict) and "request_throughput" in data and "completed" in data:
        return "vllm-bench"
    return "unknown"


def _point_id(kind: str, target: float | None, seen: set[str]) -> str:
    base = kind if target is None else f"{kind}-{target:g}"
    point_id, n = base, 2
    while point_id in seen:
        point_id, n = f"{base}-{n}", n + 1
    seen.add(point_id)
    return point_id


def guidellm_points(data: dict) -> list[tuple[dict, list[dict]]]:
    out = []
    for benchmark in data["benchmarks"]:
        kind, target = strategy_of(benchmark)
        columns = client_columns(benchmark)
        out.append(
            (
                {"load_kind": _ASYNC_KINDS.get(kind, kind), "target": target, **columns},
                request_samples(benchmark),
            )
        )
    return out


def _ms(data: dict, stat: str, name: str) -> float | None:
    value = data.get(f"{stat}_{name}_ms")
    return float(value) if value is not None else None


def vllm_bench_point(data: dict) -> tuple[dict, list[dict]]:
    rate, concurrency = data.get("request_rate"), data.get("max_concurrency")
    unbounded = rate in (None, "inf") or (isinstance(rate, float) and math.isinf(rate))
    if concurrency and unbounded:
        kind, target = "concurrent", float(concurrency)
    elif unbounded:
        kind, target = "throughput", None
    else:
        kind, target = (
            ("poisson" if float(data.get("burstiness") or 1) == 1 else "gamma"),
            float(rate),
        )
    e2e_mean = _ms(data, "mean", "e2el")
    row = {
        "load_kind": kind,
        "target": target,
        "achieved_rps": data.get("request_throughput"),
        # Little's law: vllm bench does not report concurrency; rate x mean latency is it.
        "achieved_concurrency": (
            data["request_throughput"] * e2e_mean / 1000
            if e2e_mean is not None and data.get("request_throughput")
            else None
        ),
        "requests_ok": data.get("completed"),
        "requests_failed": data.get("failed", 0),
        "duration_s": data.get("duration"),
        "output_tok_s": data.get("output_throughput"),
        "total_tok_s": data.get("total_token_throughput"),
    }
    for prefix, name, stats in (
        ("ttft", "ttft", ("mean", "p50", "p90", "p95", "p99")),
        ("itl", "itl", ("mean", "p50", "p95", "p99")),
        ("tpot", "tpot", ("mean", "p50", "p95")),
    ):
        for stat in stats:
            row[f"{prefix}_{stat}_ms"] = _ms(data, "median" if stat == "p50" else stat, name)
    for stat in ("mean", "p50", "p95", "p99"):
        value = _ms(data, "median" if stat == "p50" else stat, "e2el")
        row[f"e2e_{stat}_s"] = value / 1000 if value is not None else None
    samples = []
    ttfts, itls = data.get("ttfts") or [], data.get("itls") or []
    latencies, outs, ins = (
        data.get("latencies") or [],
        data.get("output_lens") or [],
        data.get("input_lens") or [],
    )
    for i, ttft in enumerate(ttfts):
        if not ttft:  # failed requests have ttft 0
            continue
        gaps = itls[i] if i < len(itls) and itls[i] else []
        samples.append(
            {
                "ttft_ms": ttft * 1000,
                "itl_ms": 1000 * sum(gaps) / len(gaps) if gaps else None,
                "e2e_s": latencies[i] if i < len(latencies) else None,
                "output_tokens": outs[i] if i < len(outs) else None,
                "prompt_tokens": ins[i] if i < len(ins) else None,
            }
        )
    return row, samples


def import_results(files: list[Path], name: str | None, root: Path) -> RunStore:
    points: list[tuple[dict, list[dict]]] = []
    formats: list[str] = []
    for path in files:
        data = read_result(path)
        kind = detect(data)
        if kind == "guidellm":
            if not data["benchmarks"]:
                raise SpecError(f"{path}: the GuideLLM report holds no benchmarks")
            points += guidellm_points(data)
        elif kind == "vllm-bench":
            points.append(vllm_bench_point(data))
        else:
            raise SpecError(
                f"{path}: not a GuideLLM report (a 'benchmarks' list) nor a vllm bench serve "
                "result ('request_throughput', 'completed'); nothing imported"
            )
        formats.append(kind)
    name = name or files[0].stem
    label = "imported"
    # The host of an imported run is unknown: the files were measured elsewhere.
    store = RunStore.create(
        root,
        RunKind.IMPORT,
        name,
        deployment_kind="import",
        versions={"tunebench": __version__},
        host={},
        imported_from=[str(p) for p in files],
        import_formats=formats,
    )
    with store.running("import"):
        store.update_config("c1", label=label, status=ConfigStatus.COMPLETE, effective={})
        seen: set[str] = set()
        for row, samples in points:
            point_id = _point_id(row["load_kind"], row.get("target"), seen)
            store.add_requests("c1", point_id, samples)
            store.add_point(
                {
                    "run_id": store.run_id,
                    "config_id": "c1",
                    "config_label": label,
                    "point_id": point_id,
                    **row,
                    **{c: None for c in SERVER_COLUMNS},
                    "server_metrics": "absent",
                    "valid": bool(row.get("requests_ok")),
                    "invalid_reason": "" if row.get("requests_ok") else "no successful requests",
                }
            )
    return store
