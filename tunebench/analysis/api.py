"""The notebook API: load runs as DataFrames and compare them, as the CLI does.

import tunebench
points = tunebench.load_run("cpu-demo")             # id, unique part of it, or path
requests = tunebench.load_requests("cpu-demo", point_id="concurrent-8")
result = tunebench.compare(["run-a", "run-b"])      # or compare(["run"], by="max-num-seqs")
result.rows                                         # what `tunebench compare` prints
"""

from __future__ import annotations

from pathlib import Path

from tunebench.analysis.compare import (
    DEFAULT_RUN_CV,
    LOAD_KEY,
    Comparison,
    Side,
    compare_sides,
)
from tunebench.analysis.compare_metrics import resolve_metrics
from tunebench.analysis.frames import load_manifest, load_requests, load_run
from tunebench.errors import TunebenchError, UsageError


def _config_args(manifest: dict) -> dict[str, dict]:
    return {
        c["label"]: {"model": c.get("model"), **(c.get("args") or {})}
        for c in manifest.get("configs", [])
    }


def run_sides(runs: list[str], root: str | Path = "reports") -> tuple[list[Side], tuple[str, ...]]:
    loaded = []
    for run in runs:
        points = load_run(run, root)
        manifest = load_manifest(points.attrs["run_path"], root)
        loaded.append((manifest, points, load_requests(points.attrs["run_path"], root)))
    label_sets = [tuple(sorted(set(p["config_label"]))) for _, p, _ in loaded]
    if all(len(labels) == 1 for labels in label_sets):
        key: tuple[str, ...] = LOAD_KEY
        sides = [
            Side(m["run_id"], p, r, next(iter(_config_args(m).values()), {}), m.get("host") or {})
            for m, p, r in loaded
        ]
    elif len(set(label_sets)) == 1:
        key = (*LOAD_KEY, "config_label")
        sides = []
        for manifest, points, requests in loaded:
            args = {
                f"{label}: {name}": value
                for label, values in _config_args(manifest).items()
                for name, value in values.items()
            }
            sides.append(
                Side(manifest["run_id"], points, requests, args, manifest.get("host") or {})
            )
    else:
        names = ", ".join(
            f"{m['run_id']} ({len(labels)})" for (m, _, _), labels in zip(loaded, label_sets)
        )
        raise TunebenchError(
            f"the runs hold different configurations ({names}); compare runs of one "
            "configuration each, runs of the same sweep, or one run with --by ARG"
        )
    return sides, key


def by_sides(
    run: str, arg: str, root: str | Path = "reports", baseline: str | None = None
) -> tuple[list[Side], tuple[str, ...]]:
    points = load_run(run, root)
    manifest = load_manifest(points.attrs["run_path"], root)
    varied = manifest.get("varied_args", [])
    if arg not in points.columns:
        choices = ", ".join(varied) or "none (the run has one configuration)"
        raise UsageError(
            f"--by {arg!r}: not a varied arg of {manifest['run_id']}; use one of {choices}"
        )
    requests = load_requests(points.attrs["run_path"], root)
    others = tuple(c for c in varied if c != arg)
    sides = []
    values = list(dict.fromkeys(points[arg]))
    if baseline is not None:
        if baseline not in values:
            raise UsageError(
                f"--baseline {baseline!r}: {arg} takes {', '.join(values)} in this run"
            )
        values.remove(baseline)
        values.insert(0, baseline)
    for value in values:
        subset = points[points[arg] == value]
        sides.append(
            Side(f"{arg}={value}", subset, requests, {arg: value}, manifest.get("host") or {})
        )
    return sides, (*LOAD_KEY, *others)


def compare(
    runs: list[str],
    by: str | None = None,
    metrics: list[str] | None = None,
    root: str | Path = "reports",
    confidence: float = 0.95,
    min_change_pct: float = 1.0,
    seed: int = 0,
    baseline: str | None = None,
    run_cv: float = DEFAULT_RUN_CV,
) -> Comparison:
    """Compare runs (baseline first), or with `by` the configurations of one run."""
    if by:
        if len(runs) != 1:
            raise UsageError("--by compares the configurations inside one run; give one run")
        sides, key = by_sides(runs[0], by, root, baseline)
    else:
        if baseline is not None:
            raise UsageError("--baseline goes with --by; with runs, the first run is the baseline")
        if len(runs) < 2:
            raise UsageError("give two or more runs, or one run with --by ARG")
        sides, key = run_sides(runs, root)
    return compare_sides(
        sides,
        resolve_metrics(metrics),
        key,
        confidence=confidence,
        min_change_pct=min_change_pct,
        seed=seed,
        run_cv=run_cv,
    )


__all__ = ["compare", "load_run", "load_requests", "load_manifest", "Comparison"]
