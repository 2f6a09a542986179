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
from tunebench.analysis.frames import load_manifest, load_requests, load_run, read_manifest
from tunebench.errors import TunebenchError, UsageError
from tunebench.store.manifest import Manifest, RunKind


def _config_args(manifest: Manifest) -> dict[str, dict]:
    return {c.label: {"model": c.model, **c.args} for c in manifest.configs}


def run_sides(
    runs: list[str], root: str | Path = "reports", common: bool = False
) -> tuple[list[Side], tuple[str, ...], list[str]]:
    """The sides of a comparison of runs, the key that aligns their points, and notes on
    what was left out (`common`: only the configurations every run holds)."""
    loaded = []
    for run in runs:
        points = load_run(run, root)
        manifest = read_manifest(points.attrs["run_path"], root)
        loaded.append((manifest, points, load_requests(points.attrs["run_path"], root)))
    label_sets = [tuple(sorted(set(p["config_label"]))) for _, p, _ in loaded]
    notes: list[str] = []
    if len(set(label_sets)) > 1 and not all(len(labels) == 1 for labels in label_sets):
        shared = sorted(set(label_sets[0]).intersection(*label_sets[1:]))
        if not common or not shared:
            raise TunebenchError(_different_configurations(loaded, label_sets, shared, common))
        left_out = sorted(set().union(*label_sets) - set(shared))
        notes.append(
            f"--common: compared the {len(shared)} configuration(s) every run holds; left out: "
            + ", ".join(left_out)
        )
        loaded = [(m, p[p["config_label"].isin(shared)], r) for m, p, r in loaded]
        label_sets = [tuple(shared)] * len(loaded)
    if all(len(labels) == 1 for labels in label_sets):
        key: tuple[str, ...] = LOAD_KEY
        sides = [
            Side(
                m.run_id,
                p,
                r,
                _config_args(m).get(labels[0], next(iter(_config_args(m).values()), {})),
                m.host,
            )
            for (m, p, r), labels in zip(loaded, label_sets)
        ]
    else:
        key = (*LOAD_KEY, "config_label")
        sides = []
        for (manifest, points, requests), labels in zip(loaded, label_sets):
            args = {
                f"{label}: {name}": value
                for label, values in _config_args(manifest).items()
                if label in labels
                for name, value in values.items()
            }
            sides.append(Side(manifest.run_id, points, requests, args, manifest.host))
    return sides, key, notes


def _different_configurations(
    loaded: list, label_sets: list[tuple[str, ...]], shared: list[str], common: bool
) -> str:
    """One line: which run holds which configuration the others lack, and what to do."""
    names = []
    for (manifest, _, _), labels in zip(loaded, label_sets):
        own = [label for label in labels if label not in shared]
        if own:
            shown = ", ".join(own[:3]) + (f" (+{len(own) - 3} more)" if len(own) > 3 else "")
            names.append(f"{manifest.run_id} alone has {shown}")
    if shared and not common:
        how = f"compare the {len(shared)} they share with --common, or one run with --by ARG"
    else:
        how = "they share none; compare runs of one configuration each, or one run with --by ARG"
    return f"the runs hold different configurations ({'; '.join(names)}); {how}"


def by_sides(
    run: str, arg: str, root: str | Path = "reports", baseline: str | None = None
) -> tuple[list[Side], tuple[str, ...]]:
    points = load_run(run, root)
    manifest = read_manifest(points.attrs["run_path"], root)
    varied = manifest.varied_args
    if arg not in points.columns:
        choices = ", ".join(varied) or "none (the run has one configuration)"
        raise UsageError(
            f"--by {arg!r}: not a varied arg of {manifest.run_id}; use one of {choices}"
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
        sides.append(Side(f"{arg}={value}", subset, requests, {arg: value}, manifest.host))
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
    common: bool = False,
) -> Comparison:
    """Compare runs (baseline first), or with `by` the configurations of one run; `common`:
    runs holding different configurations are compared on those they share."""
    notes: list[str] = []
    if by:
        if len(runs) != 1:
            raise UsageError("--by compares the configurations inside one run; give one run")
        sides, key = by_sides(runs[0], by, root, baseline)
    else:
        if baseline is not None:
            raise UsageError("--baseline goes with --by; with runs, the first run is the baseline")
        if len(runs) < 2:
            raise UsageError("give two or more runs, or one run with --by ARG")
        sides, key, notes = run_sides(runs, root, common)
    result = compare_sides(
        sides,
        resolve_metrics(metrics),
        key,
        confidence=confidence,
        min_change_pct=min_change_pct,
        seed=seed,
        run_cv=run_cv,
    )
    if by and result.rows.empty:
        raise UsageError(_nothing_aligned(runs[0], by, key, root))
    result.warnings.extend(notes)
    return result


def _nothing_aligned(run: str, arg: str, key: tuple[str, ...], root: str | Path) -> str:
    """Why `--by ARG` found no point to compare, and where to look instead."""
    manifest = read_manifest(run, root)
    name = manifest.run_id
    if manifest.kind == RunKind.TUNE:
        return (
            f"--by {arg}: {name} is a tune run: each trial has its own args and its own "
            f"capacity probes, so no two values of {arg} share a point; its trials: "
            f"`tunebench results {name}` or `tunebench show {name}`"
        )
    others = [k for k in key if k not in LOAD_KEY]
    same = f" and the same {', '.join(others)}" if others else ""
    return (
        f"--by {arg}: no point of {name} was measured at two values of {arg} with the same "
        f"load{same}; nothing to compare (`tunebench show {name}` lists the points)"
    )


__all__ = ["compare", "load_run", "load_requests", "load_manifest", "Comparison"]
