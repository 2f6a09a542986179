"""Compare runs (or the configurations inside one run) point by point, with statistics.

Points are aligned by load point (kind and target, or the point id for points without a
numeric target: synchronous, a sweep's steps), plus the configuration label when the runs
hold the same set of configurations. For every aligned point and metric, the change of B
against A gets an interval from the method that fits the evidence (analysis/stats.py):

- both sides measured the point in 2 or more repeats: configurations of one run measured in
  the same rounds (a sweep's repeats alternate them) by a paired t over each round's log
  ratio, so a drift of the machine that both sides of a round share cancels; otherwise
  Welch's t over the repeats' values, which includes the run-to-run spread;
- otherwise, within each run: percentiles by a block bootstrap over the requests in time
  order, rates by batch means over time bins, error rates as two proportions. These cover
  the request-to-request variability inside each run only, not a new server start's or
  the machine's: the row's note says so, and `repeats: N` in the sweep closes the gap.

Where the intervals measure all their variability (repeats, or no assumed run-to-run
spread), each metric also gets a row over all aligned points (point "all points", the
geometric mean of the points' ratios), which sees a change common to every point with about
sqrt(points) times the precision of one (analysis/pooled.py).

A verdict is "better" or "worse" when the two-sided interval excludes no change (and the
change is at least `min_change_pct`); "n/a" with the reason when the evidence is too thin
(too few samples for a percentile); "excluded" when a side's point is invalid. Points the
client held back are compared but marked (`client_limited`).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tunebench.analysis import quantile_bootstrap, stats
from tunebench.analysis.compare_metrics import (
    METRICS,
    CompareMetric,
)
from tunebench.analysis.crossovers import crossovers_between
from tunebench.analysis.point_evidence import (
    DEFAULT_RUN_CV,
    Evidence,
    measure_change,
    point_value,
)
from tunebench.analysis.pooled import Compared, pooled_change, repeat_of
from tunebench.analysis.sides import LOAD_KEY, Side, args_differ, hardware_warnings
from tunebench.errors import TunebenchError
from tunebench.points import trust
from tunebench.points.offered import is_replay, replay_key
from tunebench.points.row import FAILED_REQUESTS

SIGNIFICANT_WORSE = "worse"
SIGNIFICANT_BETTER = "better"
NO_CHANGE = "no significant change"
NOT_AVAILABLE = "n/a"
EXCLUDED = "excluded"
ALIGN = "align"  # the aligned point: "concurrent 8", "poisson 4", "synchronous", "sweep-3"


@dataclass
class Comparison:
    rows: pd.DataFrame  # one row per (candidate, aligned point, metric)
    args_differ: dict[str, list[Any]]  # arg -> value per side, only args that differ
    crossovers: list[dict[str, Any]]
    baseline: str
    key: tuple[str, ...]
    sides: list[Side] = field(default_factory=list, repr=False)
    changes: list[stats.Change] = field(default_factory=list, repr=False)  # one per row
    warnings: list[str] = field(default_factory=list)
    # aligned points the baseline has and a candidate lacks (a configuration that failed to
    # start, a point that failed or was never run): nothing could be compared there
    missing: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        rows = self.rows.astype(object).where(self.rows.notna(), None)
        return {
            "baseline": self.baseline,
            "key": list(self.key),
            "args_differ": self.args_differ,
            "warnings": self.warnings,
            "rows": rows.to_dict(orient="records"),
            "crossovers": self.crossovers,
            "missing": self.missing,
        }


# -- alignment -----------------------------------------------------------------------------


def align_key(row: pd.Series) -> str:
    target = row.get("target")
    if target is None or (isinstance(target, float) and math.isnan(target)):
        return str(row.get("point_id") or row.get("load_kind"))
    if is_replay(row.get("load_kind")):
        # a speed, and of one trace: two traces replayed at 2x are two loads, not one
        return replay_key(row.get("point_id"), target)
    return f"{row['load_kind']} {float(target):g}"


def _with_align(points: pd.DataFrame) -> pd.DataFrame:
    if points.empty:
        return points.assign(**{ALIGN: pd.Series(dtype=str)})
    return points.assign(**{ALIGN: points.apply(align_key, axis=1)})


def _samples_index(side: Side) -> dict[tuple[str, str, int], pd.DataFrame]:
    requests = side.requests
    if requests.empty:
        return {}
    repeat = requests["repeat"] if "repeat" in requests else pd.Series(1, index=requests.index)
    frame = requests.assign(_repeat=pd.to_numeric(repeat, errors="coerce").fillna(1).astype(int))
    return {
        (str(c), str(p), int(r)): group
        for (c, p, r), group in frame.groupby(["config_id", "point_id", "_repeat"], sort=False)
    }


def verdict(metric: CompareMetric, change: stats.Change, min_change_pct: float) -> str:
    if change.low is None or change.high is None or change.change is None:  # not available
        return f"{NOT_AVAILABLE} ({change.note})" if change.note else NOT_AVAILABLE
    scale = 100.0
    low, high = change.low * scale, change.high * scale
    if low <= 0 <= high or abs(change.change * scale) < min_change_pct:
        return NO_CHANGE
    increased = low > 0
    return SIGNIFICANT_BETTER if increased == metric.higher_is_better else SIGNIFICANT_WORSE


def _problems_for(metric: CompareMetric, problems: list[str]) -> list[str]:
    """A point invalid only for its failed requests still shows its error rate."""
    if metric.kind != "proportion":
        return problems
    return [p for p in problems if not p.split(" invalid: ", 1)[-1].startswith(FAILED_REQUESTS)]


_VALIDITY_COLUMNS = (
    "valid",
    "invalid_reason",
    "client_limited",
    "unverified_reason",
    "server_metrics",
)


def _first(rows: pd.DataFrame, column: str) -> Any:
    return rows[column].iloc[0] if column in rows.columns else None


def _fields(points: pd.DataFrame, columns: tuple[str, ...]) -> dict[Any, dict[str, Any]]:
    """Some columns of every row, by the row's index label: read once per side, not once
    per aligned point (pandas' per-call cost dominated compare on large runs)."""
    read = [c for c in columns if c in points.columns]
    return points[read].to_dict(orient="index")


def _validity(
    rows: pd.DataFrame, side: str, fields: dict[Any, dict[str, Any]]
) -> tuple[list[str], bool, list[str]]:
    """Why a side's point cannot be compared (invalid, one problem per reason), whether the
    client held it back, and what of it could not be checked (unverified)."""
    problems, limited, unchecked = [], False, []
    for row in (fields[label] for label in rows.index):
        if "valid" in row and not trust.flag(row["valid"]):
            reasons = str(row.get("invalid_reason") or "invalid").split("; ")
            problems += [f"{side} invalid: {reason}" for reason in reasons]
        limited |= trust.flag(row.get("client_limited"))
        unchecked += [r for r in trust.unverified_reasons(row) if r not in unchecked]
    return problems, limited, unchecked


# -- whole comparisons ------------------------------------------------------------------------


def compare_sides(
    sides: list[Side],
    metrics: list[CompareMetric],
    key: tuple[str, ...] = LOAD_KEY,
    confidence: float = 0.95,
    min_change_pct: float = 1.0,
    seed: int = 0,
    run_cv: float = DEFAULT_RUN_CV,
) -> Comparison:
    if len(sides) < 2:
        raise TunebenchError("compare needs at least two runs or two configurations")
    extra = [k for k in key if k not in LOAD_KEY]
    group_key = [ALIGN, *extra]
    baseline = sides[0]
    base_points = _with_align(baseline.points)
    base_groups = {k: g for k, g in base_points.groupby(group_key, sort=False, dropna=False)}
    base_samples = _samples_index(baseline)
    base_fields = _fields(base_points, _VALIDITY_COLUMNS + _SAMPLE_KEY_COLUMNS)
    base_evidence: dict[Any, Evidence] = {}  # one per aligned point, shared by candidates
    records: list[dict[str, Any]] = []
    changes: list[stats.Change] = []
    missing: list[dict[str, Any]] = []
    for candidate in sides[1:]:
        cand_samples = _samples_index(candidate)
        cand_points = _with_align(candidate.points)
        cand_fields = _fields(cand_points, _VALIDITY_COLUMNS + _SAMPLE_KEY_COLUMNS)
        cand_keys = {k for k, _ in cand_points.groupby(group_key, sort=False, dropna=False)}
        missing += [
            _missing_point(candidate.name, point_key, rows, extra)
            for point_key, rows in base_groups.items()
            if point_key not in cand_keys
        ]
        # per (extra key, metric): the points pooled into one row over all points
        compared: dict[tuple[Any, ...], list[Compared]] = {}
        pairs: list[tuple[Any, pd.DataFrame, pd.DataFrame, Evidence, Evidence]] = []
        for point_key, cand_rows in cand_points.groupby(group_key, sort=False, dropna=False):
            base_rows = base_groups.get(point_key)
            if base_rows is None:
                continue
            a = base_evidence.get(point_key)
            if a is None:
                a = base_evidence[point_key] = Evidence(
                    base_rows,
                    _samples_of(base_samples, base_rows, base_fields),
                    f"A|{point_key}",
                    seed,
                )
            b = Evidence(
                cand_rows,
                _samples_of(cand_samples, cand_rows, cand_fields),
                f"{candidate.name}|{point_key}",
                seed,
            )
            pairs.append((point_key, cand_rows, base_rows, a, b))
        _draw_bootstraps([e for _, _, _, a, b in pairs for e in (a, b)], metrics)
        for point_key, cand_rows, base_rows, a, b in pairs:
            problems_a, limited_a, unchecked_a = _validity(base_rows, "A", base_fields)
            problems_b, limited_b, unchecked_b = _validity(cand_rows, "B", cand_fields)
            limited = ",".join(s for s, f in (("A", limited_a), ("B", limited_b)) if f)
            unverified = {"unverified_a": "; ".join(unchecked_a)} | {
                "unverified_b": "; ".join(unchecked_b)
            }
            where = {
                "point": point_key[0] if isinstance(point_key, tuple) else point_key,
                "load_kind": _first(cand_rows, "load_kind"),
                "target": _first(cand_rows, "target"),
                **{
                    k: v
                    for k, v in zip(extra, point_key[1:] if isinstance(point_key, tuple) else ())
                },
            }
            for metric in metrics:
                problems = _problems_for(metric, problems_a + problems_b)
                if problems:
                    change = stats.not_available(
                        "", len(base_rows), len(cand_rows), "; ".join(problems)
                    )
                    text = f"{EXCLUDED} ({change.note})"
                else:
                    change = measure_change(metric, a, b, confidence, run_cv)
                    text = verdict(metric, change, min_change_pct)
                    pool = (*(where[k] for k in extra), metric.name)
                    compared.setdefault(pool, []).append(Compared(a, b, change, limited))
                value_a, value_b = point_value(metric, a), point_value(metric, b)
                records.append(
                    _record(baseline, candidate, where, metric, value_a, value_b, change, text)
                    | {
                        "client_limited": limited,
                        "repeats_a": len(base_rows),
                        "repeats_b": len(cand_rows),
                    }
                    | unverified
                )
                changes.append(change)
        # An assumed run-to-run spread is shared by every point of a run: averaging points
        # cannot narrow it, so rows over all points would only widen the gate's correction.
        assumed_spread = any(c.change.shared_var > 0 for e in compared.values() for c in e)
        for pool, evidence in compared.items() if not assumed_spread else ():
            metric = METRICS[pool[-1]]
            pooled = pooled_change(metric, evidence, confidence)
            if pooled is None:
                continue
            change, value_a, value_b, limited, repeats = pooled
            where = {
                "point": ALL_POINTS,
                "load_kind": "",
                "target": None,
                **dict(zip(extra, pool[:-1])),
            }
            text = verdict(metric, change, min_change_pct)
            records.append(
                _record(baseline, candidate, where, metric, value_a, value_b, change, text)
                | {"client_limited": limited, "repeats_a": repeats[0], "repeats_b": repeats[1]}
                | {"unverified_a": "", "unverified_b": ""}
            )
            changes.append(change)
    rows = pd.DataFrame.from_records(records, columns=_row_columns(extra) if not records else None)
    if rows.empty and not missing:
        raise TunebenchError(
            "no load point is common to the compared runs (aligned on load kind and target, "
            "or the point id where there is no target"
            + (f", and {', '.join(extra)}" if extra else "")
            + "); compare runs of the same load profiles"
        )
    return Comparison(
        rows,
        args_differ(sides),
        # only for the latency metrics asked for (-m): a crossover of an unasked metric
        # answers a question nobody put
        crossovers_between(sides, key, tuple(m.column for m in metrics), confidence, run_cv, seed),
        baseline.name,
        key,
        sides,
        changes,
        hardware_warnings(sides),
        missing,
    )


def _row_columns(extra: list[str]) -> list[str]:
    """The columns of compare's rows, for a comparison that has none (every point missing)."""
    return [
        "baseline", "candidate", "point", "load_kind", "target", *extra, "metric", "label",
        "a", "b", "unit", "change_pct", "ci_low_pct", "ci_high_pct", "verdict", "method",
        "note", "n_a", "n_b", "client_limited", "repeats_a", "repeats_b", "unverified_a",
        "unverified_b",
    ]  # fmt: skip


def _missing_point(
    candidate: str, point_key: Any, rows: pd.DataFrame, extra: list[str]
) -> dict[str, Any]:
    keys = point_key if isinstance(point_key, tuple) else (point_key,)
    first = rows.iloc[0]
    return {
        "candidate": candidate,
        "point": keys[0],
        "load_kind": first.get("load_kind"),
        **dict(zip(extra, keys[1:])),
    }


# -- the mean over all aligned points -------------------------------------------------------

ALL_POINTS = "all points"  # the point of the rows that pool every aligned point of a metric


def _draw_bootstraps(evidence: list[Evidence], metrics: list[CompareMetric]) -> None:
    """Draw every request sample's bootstrap the quantile metrics will read, on all cores.
    The heavy part is numpy (noise, gathers, sorts), which runs outside the GIL; each draw
    has its own generator (`Evidence.rng_for`), so threads change no result."""
    columns = sorted({m.sample for m in metrics if m.kind == "quantile" and m.sample})
    if not columns:
        return
    fewest = min(
        quantile_bootstrap.min_quantile_requests(m.quantile or 0.5)
        for m in metrics
        if m.kind == "quantile"
    )
    jobs = []
    for side in evidence:
        for column in columns:
            if column in side._boots:
                continue
            values = quantile_bootstrap.positive_finite(side.sample(column))
            if len(values) >= fewest:
                jobs.append((side, column, values))

    def draw(job: tuple[Evidence, str, np.ndarray]) -> quantile_bootstrap.QuantileBootstrap:
        side, column, values = job
        return quantile_bootstrap.QuantileBootstrap(values, side.rng_for(column))

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for (side, column, _), boot in zip(jobs, pool.map(draw, jobs)):
            side._boots[column] = boot


def _record(
    baseline: Side,
    candidate: Side,
    where: dict[str, Any],
    metric: CompareMetric,
    value_a: float | None,
    value_b: float | None,
    change: stats.Change,
    text: str,
) -> dict[str, Any]:
    return {
        "baseline": baseline.name,
        "candidate": candidate.name,
        **where,
        "metric": metric.name,
        "label": metric.label,
        "a": value_a,
        "b": value_b,
        "unit": "pp" if metric.kind == "proportion" else "%",
        "change_pct": None if change.change is None else 100 * change.change,
        "ci_low_pct": None if change.low is None else 100 * change.low,
        "ci_high_pct": None if change.high is None else 100 * change.high,
        "verdict": text,
        "method": change.method,
        "note": change.note,
        "n_a": change.n_a,
        "n_b": change.n_b,
    }


_SAMPLE_KEY_COLUMNS = ("config_id", "point_id", "repeat")


def _samples_of(
    index: dict, rows: pd.DataFrame, fields: dict[Any, dict[str, Any]]
) -> list[pd.DataFrame]:
    out = []
    for row in (fields[label] for label in rows.index):
        found = index.get((str(row.get("config_id")), str(row.get("point_id")), repeat_of(row)))
        out.append(found if found is not None else pd.DataFrame())
    return out
