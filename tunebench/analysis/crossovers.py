"""Where two configurations' latency curves cross as the load grows: below the crossing one
is better, above it the other (`compare` lists them; the report marks them), with the
interval of the crossing's load from the points' requests (crossing_interval.py)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pandas as pd

from tunebench.analysis.compare_metrics import METRICS
from tunebench.analysis.crossing_interval import crossing_interval, quantile_draws
from tunebench.analysis.quantile_bootstrap import (
    QuantileBootstrap,
    min_quantile_requests,
    positive_finite,
)
from tunebench.analysis.replay_samples import repeat_of
from tunebench.analysis.sides import LOAD_KEY, Side
from tunebench.points.offered import is_replay, trace_name

# per-request latency belongs here beside TTFT and ITL: speculation under a token budget
# decodes its running sequences fast (ITL) while their prompts wait (TTFT), and only the
# request's whole time says which side of its crossover a load is on
CROSSOVER_COLUMNS = (
    "ttft_p50_ms",
    "ttft_p95_ms",
    "itl_p50_ms",
    "tpot_p50_ms",
    "e2e_p50_s",
    "e2e_p95_s",
)
# the trace a replay point plays: replays of two traces are two curves, not one
TRACE = "_trace"


def crossover_points(xs, a_values, b_values) -> list[float]:
    """Loads x at which curve B crosses curve A, linearly interpolated between points."""
    found = []
    diffs = [b - a for a, b in zip(a_values, b_values)]
    for i in range(len(xs) - 1):
        d1, d2 = diffs[i], diffs[i + 1]
        if d1 == 0 or np.isnan(d1) or np.isnan(d2):
            continue
        if d1 * d2 < 0:
            found.append(float(xs[i] + (xs[i + 1] - xs[i]) * d1 / (d1 - d2)))
    return found


def crossovers_between(
    sides: list[Side],
    key: tuple[str, ...],
    columns: tuple[str, ...] = CROSSOVER_COLUMNS,
    confidence: float = 0.95,
    run_cv: float = 0.0,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Where the baseline's latency curve and each candidate's cross as the target grows
    (repeats of a point are averaged first), for the latency `columns` asked for; each with
    its interval at `confidence` (`run_cv`: the run-to-run spread a point measured once
    cannot show)."""
    out = []
    extra = [k for k in key if k not in LOAD_KEY]
    base = _mean_of_repeats(sides[0].points, key)
    for candidate in sides[1:]:
        other = _mean_of_repeats(candidate.points, key)
        merged = base.merge(other, on=[*key, TRACE], suffixes=("_a", "_b"))
        if merged.empty:
            continue
        for group_key, group in merged.groupby(["load_kind", *extra, TRACE], sort=False):
            trace = group_key[-1]
            group_key = group_key[:-1] if len(group_key) > 2 else group_key[0]
            group = group.dropna(subset=["target"]).sort_values("target")
            if len(group) < 2:
                continue
            kind = group_key[0] if isinstance(group_key, tuple) else group_key
            for column in CROSSOVER_COLUMNS:
                if column not in columns or f"{column}_a" not in group:
                    continue
                a_vals = group[f"{column}_a"].astype(float).to_numpy()
                b_vals = group[f"{column}_b"].astype(float).to_numpy()
                xs = group["target"].astype(float).to_numpy()
                for x in crossover_points(xs, a_vals, b_vals):
                    first_better = sides[0].name if b_vals[0] > a_vals[0] else candidate.name
                    other_name = candidate.name if first_better == sides[0].name else sides[0].name
                    upper = int(np.searchsorted(xs, x))  # the first target above the crossing
                    above = b_vals[upper] - a_vals[upper]
                    where = {"load_kind": kind, TRACE: trace} | dict(
                        zip(extra, group_key[1:] if isinstance(group_key, tuple) else ())
                    )
                    interval = _interval(
                        (sides[0], candidate),
                        where,
                        xs,
                        column,
                        (x, above),
                        (confidence, run_cv, seed),
                    )
                    out.append(
                        {
                            "metric": column,
                            "load_kind": kind,
                            **({"trace": trace} if trace else {}),
                            # the configuration both curves belong to, when sides hold several
                            **dict(
                                zip(extra, group_key[1:] if isinstance(group_key, tuple) else ())
                            ),
                            "baseline": sides[0].name,
                            "candidate": candidate.name,
                            "target": round(x, 3),
                            "better_below": first_better,
                            "better_above": other_name,
                            **interval,
                        }
                    )
    return out


def _interval(
    pair: tuple[Side, Side],
    where: dict[str, Any],
    xs: np.ndarray,
    column: str,
    crossing: tuple[float, float],
    settings: tuple[float, float, int],
) -> dict[str, Any]:
    """The crossing's interval fields: `target_low` / `target_high` (None: beyond the range
    measured), `confirmed`, `confidence`; or `interval_note` saying why there is none."""
    confidence, run_cv, seed = settings
    metric = next((m for m in METRICS.values() if m.column == column), None)
    if metric is None or metric.sample is None or metric.quantile is None:
        return {"interval_note": f"no per-request samples define {column}"}
    need = min_quantile_requests(metric.quantile, confidence)
    curves = []
    for side in pair:
        draws = []
        for target in xs:
            values, windows = _samples_at(side, where, float(target), metric.sample)
            if not len(values):
                return {
                    "interval_note": f"{side.name} has no per-request samples at target {target:g}"
                }
            if len(values) < need:
                return {
                    "interval_note": f"too few requests for an interval: {side.name} has "
                    f"{len(values)} at target {target:g}, need {need}"
                }
            rng = np.random.default_rng(
                [seed, zlib.crc32(f"{side.name}|{where}|{target}|{column}".encode())]
            )
            boot = QuantileBootstrap(values, rng)
            # repeats averaged: their run-to-run spread shrinks with their number
            draws.append(
                quantile_draws(boot, metric.quantile, run_cv / max(1, windows) ** 0.5, rng)
            )
        curves.append(np.array(draws))
    x, above = crossing
    interval = crossing_interval(xs, curves[0], curves[1], x, above, confidence)
    return {
        "target_low": _inside(interval.low),
        "target_high": _inside(interval.high),
        "confirmed": interval.confirmed,
        "order_significant": interval.reversed,
        "confidence": confidence,
    }


def _inside(end: float) -> float | None:
    """An end of the interval, None where it lies beyond the measured range."""
    return round(end, 3) if np.isfinite(end) else None


def _samples_at(
    side: Side, where: dict[str, Any], target: float, column: str
) -> tuple[np.ndarray, int]:
    """One side's requests (`column`, in time order within each window) at one target of one
    curve, and the number of windows (repeats) they come from."""
    points = side.points
    if side.requests.empty or column not in side.requests:
        return np.array([]), 0
    mine = pd.to_numeric(points["target"], errors="coerce") == target
    for name, value in where.items():
        if name == TRACE:
            mine &= np.array([_trace_of(r) == value for r in points.to_dict(orient="records")])
        elif name in points:
            mine &= points[name].astype(str) == str(value)
    rows = points[mine]
    keys = {
        (str(c), str(p), repeat_of(r))
        for c, p, r in zip(
            rows["config_id"],
            rows["point_id"],
            rows["repeat"] if "repeat" in rows else [1] * len(rows),
        )
    }
    requests = side.requests
    repeats = requests["repeat"] if "repeat" in requests else pd.Series(1, index=requests.index)
    chosen = [
        (str(c), str(p), repeat_of(r)) in keys
        for c, p, r in zip(requests["config_id"], requests["point_id"], repeats)
    ]
    picked = requests[chosen]
    if "start_time" in picked:
        picked = picked.sort_values("start_time", kind="stable")
    values = pd.to_numeric(picked[column], errors="coerce").to_numpy(dtype=float)
    return positive_finite(values), len(rows)


def _mean_of_repeats(points: pd.DataFrame, key: tuple[str, ...]) -> pd.DataFrame:
    present = [c for c in CROSSOVER_COLUMNS if c in points]
    if points.empty or not present:
        return points.assign(**{TRACE: pd.Series(dtype=str)})
    points = points.assign(**{TRACE: [_trace_of(r) for r in points.to_dict(orient="records")]})
    grouped = points.groupby([*key, TRACE], sort=False, dropna=False)
    return grouped[present].mean().reset_index()


def _trace_of(row: dict[str, Any]) -> str:
    if not is_replay(row.get("load_kind")):
        return ""
    return trace_name(row.get("point_id")) or ""
