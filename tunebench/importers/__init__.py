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
from pathlib import Path
from typing import Any

import yaml

from tunebench.errors import SpecError
from tunebench.load.guidellm_report import client_columns, request_samples, strategy_of
from tunebench.load.vllm_bench_report import client_columns as vllm_bench_columns
from tunebench.load.vllm_bench_report import request_samples as vllm_bench_samples
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


def vllm_bench_point(data: dict) -> tuple[dict, list[dict]]:
    return vllm_bench_columns(data), vllm_bench_samples(data)


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
