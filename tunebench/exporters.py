"""`tunebench export RUN --format ...`: a run in the formats the rest of the field reads.

- `vllm-bench`: per point, a `vllm bench serve --save-result --save-detailed` JSON (summary
  statistics from points.csv, per-request lists from requests/<config>.csv), which
  `tunebench import` reads back to the same numbers;
- `csv`: points.csv and requests/<config>.csv as they are;
- `llmd-br`: per point, an llm-d Benchmark Report v0.2 (revision 0.2.1): `run` (ids, times),
  `scenario.stack` (the vLLM engine with its effective engine args) and `scenario.load`
  (the load kind, target and token lengths), `results.request_performance.aggregate`
  (requests, latency and throughput statistics with units).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

from tunebench.errors import UsageError
from tunebench.load.vllm_bench_report import ARGS_KEY, CLIENT_LIMITED_KEY, LABEL_KEY, REPEAT_KEY
from tunebench.numbers import to_float
from tunebench.spec.load_kind import LoadKind
from tunebench.store.layout import RunLayout
from tunebench.store.run import RunStore, read_requests

FORMATS = ("llmd-br", "vllm-bench", "csv")
BR_VERSION = "0.2.1"


def export_run(store: RunStore, fmt: str, out: Path) -> list[Path]:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        return _csv(store, out)
    written = []
    requests = {c.config_id: read_requests(store.path, c.config_id) for c in store.manifest.configs}
    for row in store.rows:
        mine = [
            r
            for r in requests.get(row["config_id"], [])
            if r.get("point_id") == row["point_id"]
            and str(r.get("repeat") or "1") == str(row.get("repeat") or "1")
        ]
        stem = f"{row['config_id']}-{row['point_id']}" + (
            f"-repeat{row['repeat']}" if str(row.get("repeat") or "1") != "1" else ""
        )
        if fmt == "vllm-bench":
            path = out / f"{stem}.json"
            config = next(c for c in store.manifest.configs if c.config_id == row["config_id"])
            result = vllm_bench_result(row, mine, config.model, dict(config.args))
            path.write_text(json.dumps(result, indent=1))
        else:
            path = out / f"{stem}.br.json"
            path.write_text(json.dumps(benchmark_report(store, row, mine), indent=1))
        written.append(path)
    return written


def _csv(store: RunStore, out: Path) -> list[Path]:
    layout = RunLayout(store.path)
    written = [Path(shutil.copy(layout.points, out / "points.csv"))]
    for config in store.manifest.configs:
        source = layout.requests(config.config_id)
        if source.exists():
            written.append(Path(shutil.copy(source, out / f"requests-{config.config_id}.csv")))
    return written


def _f(row: dict, column: str) -> float | None:
    return to_float(row.get(column))


def _values(samples: list[dict], column: str) -> list[float]:
    return [v for v in (to_float(s.get(column)) for s in samples) if v is not None]


def vllm_bench_result(
    row: dict, samples: list[dict], model: str | None = None, args: dict | None = None
) -> dict[str, Any]:
    """A point as `vllm bench serve --save-result --save-detailed` writes it; with the
    configuration's `model` (vllm's `model_id`) and engine `args` (a metadata key)."""
    kind, target = row.get("load_kind"), _f(row, "target")
    concurrency = int(target) if kind in LoadKind.STREAM and target else None
    if kind == LoadKind.SYNCHRONOUS:
        concurrency = 1
    rate = target if kind in LoadKind.RATE | {LoadKind.GAMMA} else float("inf")
    out: dict[str, Any] = {
        "backend": "vllm",
        "request_rate": rate if rate != float("inf") else "inf",
        "burstiness": 1.0,
        "max_concurrency": concurrency,
        "duration": _f(row, "duration_s"),
        "completed": int(_f(row, "requests_ok") or 0),
        "failed": int(_f(row, "requests_failed") or 0),
        "request_throughput": _f(row, "achieved_rps"),
        "output_throughput": _f(row, "output_tok_s"),
        "total_token_throughput": _f(row, "total_tok_s"),
    }
    for name, prefix, stats in (
        ("ttft", "ttft", ("mean", "p50", "p90", "p95", "p99")),
        ("itl", "itl", ("mean", "p50", "p95", "p99")),
        ("tpot", "tpot", ("mean", "p50", "p95")),
    ):
        for stat in stats:
            key = "median" if stat == "p50" else stat
            out[f"{key}_{name}_ms"] = _f(row, f"{prefix}_{stat}_ms")
    for stat in ("mean", "p50", "p95", "p99"):
        value = _f(row, f"e2e_{stat}_s")
        out[f"{'median' if stat == 'p50' else stat}_e2el_ms"] = (
            value * 1000 if value is not None else None
        )
    out["ttfts"] = [(to_float(s.get("ttft_ms")) or 0) / 1000 for s in samples]
    # one mean gap per request stands for its gaps (tunebench keeps the mean, not each gap)
    out["itls"] = [
        [(to_float(s.get("itl_ms")) or 0) / 1000]
        * max(0, int(to_float(s.get("output_tokens")) or 1) - 1)
        if to_float(s.get("itl_ms")) is not None
        else []
        for s in samples
    ]
    out["latencies"] = [to_float(s.get("e2e_s")) for s in samples]
    out["output_lens"] = [int(to_float(s.get("output_tokens")) or 0) for s in samples]
    out["input_lens"] = [int(to_float(s.get("prompt_tokens")) or 0) for s in samples]
    starts = _values(samples, "start_time")
    if len(starts) == len(samples) and samples:
        out["start_times"] = starts
        out["epoch_offset"] = 0.0  # the start times are epoch seconds already
    # as `vllm bench serve --metadata KEY=VALUE` adds keys: which configuration and repeat
    # the point belongs to, so `tunebench import` keeps them apart
    out[LABEL_KEY] = str(row.get("config_label") or row.get("config_id") or "")
    out[REPEAT_KEY] = int(to_float(row.get("repeat")) or 1)
    if model:
        out["model_id"] = model
    if args is not None:
        out[ARGS_KEY] = args
    if str(row.get("client_limited")).lower() in ("true", "1"):
        out[CLIENT_LIMITED_KEY] = str(row.get("client_limited_reason") or "client-limited")
    return out


def _stats(values: list[float], units: str, mean: float | None = None) -> dict | None:
    if not values and mean is None:
        return None
    out: dict[str, Any] = {"units": units}
    if values:
        ordered = sorted(values)

        def at(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

        out.update(
            mean=statistics.fmean(ordered),
            min=ordered[0],
            p50=at(0.50),
            p90=at(0.90),
            p95=at(0.95),
            p99=at(0.99),
            max=ordered[-1],
        )
        if len(ordered) > 1:
            out["stddev"] = statistics.stdev(ordered)
    else:
        out["mean"] = mean
    return out


def benchmark_report(store: RunStore, row: dict, samples: list[dict]) -> dict[str, Any]:
    """One point as an llm-d Benchmark Report v0.2 (revision 0.2.1)."""
    manifest = store.manifest
    config = next(c for c in manifest.configs if c.config_id == row["config_id"])
    engine_args = dict(config.args)
    cfg_id = hashlib.sha256(json.dumps(engine_args, sort_keys=True).encode()).hexdigest()[:16]
    start, end = _f(row, "start_time"), _f(row, "end_time")
    duration = _f(row, "duration_s")
    prompt_mean = _f(row, "prompt_tokens_mean")
    output_mean = _f(row, "output_tokens_mean")
    load_kind = row.get("load_kind")
    report = {
        "version": BR_VERSION,
        "run": {
            "uid": f"{manifest.run_id}/{row['config_id']}/{row['point_id']}",
            "eid": manifest.run_id,
            "cid": row["config_id"],
            "pid": row["point_id"],
            "time": _run_time(start, end, duration),
            "description": f"tunebench {manifest.kind.value} {manifest.name}",
            "keywords": ["tunebench", str(load_kind)],
        },
        "scenario": {
            "stack": [
                {
                    "metadata": {"label": config.label or config.config_id, "cfg_id": cfg_id},
                    "standardized": {
                        "kind": "inference_engine",
                        "tool": "vllm",
                        "tool_version": str((manifest.versions or {}).get("vllm") or "unknown"),
                        "role": "replica",
                        "replicas": 1,
                        "model": {"name": str(config.model or "")},
                        "accelerator": _accelerator(manifest.host or {}, engine_args),
                    },
                    "native": {"args": engine_args},
                }
            ],
            "load": {
                "metadata": {"schema_version": "0.0.1", "cfg_id": cfg_id},
                "standardized": _load(manifest, row, prompt_mean, output_mean),
                "native": {"config": _native_load(row)},
            },
        },
        "results": {
            "request_performance": {
                "aggregate": {
                    "requests": {
                        "total": int(
                            (_f(row, "requests_ok") or 0) + (_f(row, "requests_failed") or 0)
                        ),
                        "failures": int(_f(row, "requests_failed") or 0),
                        "input_length": _stats(
                            _values(samples, "prompt_tokens"), "count", prompt_mean
                        ),
                        "output_length": _stats(
                            _values(samples, "output_tokens"), "count", output_mean
                        ),
                    },
                    "latency": {
                        "time_to_first_token": _stats(_values(samples, "ttft_ms"), "ms"),
                        "inter_token_latency": _stats(_values(samples, "itl_ms"), "ms/token"),
                        "time_per_output_token": _stats(_values(samples, "tpot_ms"), "ms/token"),
                        "request_latency": _stats(_values(samples, "e2e_s"), "s"),
                    },
                    "throughput": {
                        "output_token_rate": _stats([], "tokens/s", _f(row, "output_tok_s")),
                        "total_token_rate": _stats([], "tokens/s", _f(row, "total_tok_s")),
                        "request_rate": _stats([], "queries/s", _f(row, "achieved_rps")),
                    },
                }
            }
        },
    }
    return _drop_none(report)


def _native_load(row: dict) -> dict:
    """tunebench's own words for the load (read back by importers/llmd_br.py)."""
    out: dict[str, Any] = {"load_kind": row.get("load_kind"), "target": _f(row, "target")}
    if str(row.get("client_limited")).lower() in ("true", "1"):
        out["client_limited_reason"] = str(row.get("client_limited_reason") or "client-limited")
    return out


def _run_time(start: float | None, end: float | None, duration: float | None) -> dict:
    from datetime import datetime, timezone

    def iso(value: float | None) -> str | None:
        return datetime.fromtimestamp(value, timezone.utc).isoformat() if value else None

    return {"start": iso(start), "end": iso(end), "duration": f"PT{duration or 0:.3f}S"}


def _accelerator(host: dict, args: dict) -> dict:
    def size(*names: str) -> int:
        value = next((args[n] for n in names if args.get(n) is not None), 1)
        return int(to_float(value) or 1)

    parallelism = {
        "tp": size("tensor-parallel-size", "tensor_parallel_size"),
        "pp": size("pipeline-parallel-size", "pipeline_parallel_size"),
        "dp": size("data-parallel-size", "data_parallel_size"),
    }
    gpus = host.get("gpus") or []
    if gpus:
        model, count = str(gpus[0].get("name")), parallelism["tp"] * parallelism["pp"]
    else:
        model, count = f"cpu: {host.get('cpu_model') or 'unknown'}", 0
    return {"model": model, "count": count, "parallelism": parallelism}


def _load(manifest: Any, row: dict, prompt_mean: float | None, output_mean: float | None) -> dict:
    kind, target = row.get("load_kind"), _f(row, "target")
    driver = (
        row.get("load_driver")
        or ((manifest.spec or {}).get("load") or {}).get("driver")
        or "guidellm"
    )
    tool = "vllm-benchmark" if driver == "vllm-bench" else "guidellm"
    versions = manifest.versions or {}
    out: dict[str, Any] = {
        "tool": tool,
        "tool_version": str(
            versions.get("vllm" if tool == "vllm-benchmark" else tool) or "unknown"
        ),
        "source": "random",
        "input_seq_len": {"distribution": "fixed", "value": int(prompt_mean or 0)},
        "output_seq_len": {"distribution": "fixed", "value": int(output_mean or 0)},
    }
    if kind in LoadKind.RATE and target:
        out["rate_qps"] = target
    if kind in LoadKind.FIXED_STREAMS:
        out["concurrency"] = int(target or 1)
    return out


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value
