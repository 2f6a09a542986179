"""`tunebench import`: existing benchmark results -> a run that compare and report accept.

Formats, detected from the content:
- GuideLLM reports, 0.3.x (JSON or YAML: `benchmarks[].args.strategy`, `run_stats`) through
  0.8.x (`benchmarks[].config.strategy`, `scheduler_metrics`); one point per benchmark.
- `vllm bench serve --save-result` JSON (`request_throughput`, `median_ttft_ms`, ...; with
  `--save-detailed` also the per-request `ttfts`, `itls`, `latencies`); one point per file.
- AIPerf's `profile_export_aiperf.json` (with `profile_export.jsonl` beside it for the
  requests), or its artifact directory; one point per export (importers/aiperf.py).
- inference-perf's report directory (`stage_<N>_lifecycle_metrics.json`, and
  `per_request_lifecycle_metrics.json` for the requests), or one stage file of it; one point
  per stage (importers/inference_perf.py).
- an llm-d Benchmark Report v0.2 (`tunebench export`'s default): aggregates only, one point
  per report, its stack's label, model and engine args kept (importers/llmd_br.py).
tunebench's own exports keep their configuration: label, model and engine args.
The imported run has one configuration; server metrics are absent and marked so; each row's
`load_driver` names the tool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tunebench.errors import SpecError
from tunebench.importers.aiperf import SUMMARY_FILE as AIPERF_SUMMARY
from tunebench.importers.aiperf import aiperf_point, is_aiperf
from tunebench.importers.inference_perf import (
    inference_perf_points,
    inference_perf_stage,
    is_stage_report,
    stage_files,
)
from tunebench.importers.llmd_br import benchmark_report_point, is_benchmark_report
from tunebench.load.guidellm_report import client_columns, request_samples, strategy_of
from tunebench.load.vllm_bench_report import ARGS_KEY, CLIENT_LIMITED_KEY, LABEL_KEY, REPEAT_KEY
from tunebench.load.vllm_bench_report import client_columns as vllm_bench_columns
from tunebench.load.vllm_bench_report import request_samples as vllm_bench_samples
from tunebench.points.columns import SERVER_COLUMNS
from tunebench.store.manifest import ConfigStatus, RunKind
from tunebench.store.run import RunStore
from tunebench.version import __version__

# An imported report holds what the client measured, nothing the server said: its points
# are valid client measurements that no server-side check has confirmed.
IMPORTED_UNVERIFIED = "imported: no server metrics, args not read back"
COUNTS_MISSING = "request counts not in the report"

MAX_IMPORT_BYTES = 2_000_000_000
# A point's configuration as its file names it ({"args": ..., "model": ...}), taken off the
# row into the run's configuration entry
CONFIG_KEY = "_config"
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
    if is_aiperf(data):
        return "aiperf"
    if is_stage_report(data):
        return "inference-perf"
    if is_benchmark_report(data):
        return "llmd-br"
    return "unknown"


def per_request_itl(row: dict, samples: list[dict]) -> dict:
    """ITL and TPOT columns recomputed from the requests as tunebench defines them (each
    request's (latency - TTFT) / (output tokens - 1), the server's token count): AIPerf
    divides by its own re-tokenised count and inference-perf reports the gaps between
    chunks, neither comparable with GuideLLM's or vLLM's figures. Unchanged without samples."""
    values = np.array([s["itl_ms"] for s in samples if s.get("itl_ms") is not None], float)
    if not len(values):
        return row
    out = dict(row)
    for prefix, stats in (("itl", ("mean", "p50", "p95", "p99")), ("tpot", ("mean", "p50", "p95"))):
        for stat in stats:
            out[f"{prefix}_{stat}_ms"] = float(
                values.mean() if stat == "mean" else np.quantile(values, int(stat[1:]) / 100)
            )
    return out


def _directory_points(path: Path) -> tuple[str, list[tuple[dict, list[dict]]]]:
    """An AIPerf artifact directory or an inference-perf report directory."""
    if (path / AIPERF_SUMMARY).is_file():
        summary = path / AIPERF_SUMMARY
        return "aiperf", [aiperf_point(read_result(summary), summary)]
    if stage_files(path):
        return "inference-perf", inference_perf_points(path)
    raise SpecError(
        f"{path}: a directory, but neither AIPerf's ({AIPERF_SUMMARY}) nor inference-perf's "
        "(stage_<N>_lifecycle_metrics.json); give the result files or such a directory"
    )


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
    row = vllm_bench_columns(data)
    if data.get(LABEL_KEY):
        row["config_label"] = str(data[LABEL_KEY])
    if data.get(REPEAT_KEY):
        row["repeat"] = int(data[REPEAT_KEY])
    if data.get(CLIENT_LIMITED_KEY):  # the client's verdict, as the run that measured it said
        row["client_limited"] = True
        row["client_limited_reason"] = str(data[CLIENT_LIMITED_KEY])
    if isinstance(data.get(ARGS_KEY), dict):
        row[CONFIG_KEY] = {"args": data[ARGS_KEY], "model": data.get("model_id")}
    elif data.get("model_id"):
        row[CONFIG_KEY] = {"model": data["model_id"]}
    return row, vllm_bench_samples(data)


def import_results(files: list[Path], name: str | None, root: Path) -> RunStore:
    points: list[tuple[dict, list[dict]]] = []
    formats: list[str] = []
    for path in files:
        if path.is_dir():
            kind, found = _directory_points(path)
            points += [(per_request_itl(row, s), s) for row, s in found]
            formats.append(kind)
            continue
        data = read_result(path)
        kind = detect(data)
        if kind == "aiperf":
            row, samples = aiperf_point(data, path)
            points.append((per_request_itl(row, samples), samples))
        elif kind == "inference-perf":
            row, samples = inference_perf_stage(path, data)
            points.append((per_request_itl(row, samples), samples))
        elif kind == "guidellm":
            if not data["benchmarks"]:
                raise SpecError(f"{path}: the GuideLLM report holds no benchmarks")
            points += [({**row, "load_driver": kind}, s) for row, s in guidellm_points(data)]
        elif kind == "vllm-bench":
            row, samples = vllm_bench_point(data)
            points.append(({**row, "load_driver": kind}, samples))
        elif kind == "llmd-br":
            row = benchmark_report_point(data)
            row[CONFIG_KEY] = row.pop("config")
            points.append(({**row, "load_driver": kind}, []))
        else:
            raise SpecError(
                f"{path}: not a GuideLLM report (a 'benchmarks' list), a vllm bench serve "
                "result ('request_throughput', 'completed'), an AIPerf export "
                f"({AIPERF_SUMMARY}), an inference-perf stage report nor an llm-d Benchmark "
                "Report v0.2 ('version', 'scenario', 'results'); nothing imported"
            )
        formats.append(kind)
    name = name or (files[0].name if files[0].is_dir() else files[0].stem)
    # one configuration per label the files name (else one, "imported"), in file order
    labels = list(dict.fromkeys(str(row.get("config_label") or "imported") for row, _ in points))
    config_of = {label: f"c{number}" for number, label in enumerate(labels, start=1)}
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
    named: dict[str, dict] = {}  # label -> the configuration its file names
    for row, _ in points:
        config = row.pop(CONFIG_KEY, None)
        if config:
            named.setdefault(str(row.get("config_label") or "imported"), config)
    with store.running("import"):
        for label, config_id in config_of.items():
            config = {k: v for k, v in named.get(label, {}).items() if v is not None}
            store.update_config(
                config_id, label=label, status=ConfigStatus.COMPLETE, effective={}, **config
            )
        seen: dict[tuple[str, int], set[str]] = {}
        for row, samples in points:
            label = str(row.get("config_label") or "imported")
            config_id, repeat = config_of[label], int(row.get("repeat") or 1)
            point_id = _point_id(
                row["load_kind"], row.get("target"), seen.setdefault((config_id, repeat), set())
            )
            store.add_requests(config_id, point_id, samples, repeat=repeat)
            store.add_point(
                {
                    "run_id": store.run_id,
                    **row,
                    "config_id": config_id,
                    "config_label": label,
                    "point_id": point_id,
                    "repeat": repeat,
                    **{c: None for c in SERVER_COLUMNS},
                    "server_metrics": "absent",
                    **request_count_verdict(row.get("requests_ok")),
                }
            )
    return store


def request_count_verdict(requests_ok: Any) -> dict[str, Any]:
    """An imported point's verdict columns from its count of successful requests: a report
    that does not give the count leaves the point unverified, never invalid (a missing
    count is not zero); a count of zero makes it invalid."""
    if requests_ok is None:
        return {
            "unverified_reason": f"{IMPORTED_UNVERIFIED}; {COUNTS_MISSING}",
            "valid": True,
            "invalid_reason": "",
        }
    return {
        "unverified_reason": IMPORTED_UNVERIFIED,
        "valid": bool(requests_ok),
        "invalid_reason": "" if requests_ok else "no successful requests",
    }
