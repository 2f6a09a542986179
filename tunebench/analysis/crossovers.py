"""Where two configurations' latency curves cross as the load grows: below the crossing one
is better, above it the other (`compare` lists them; the report marks them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tunebench.analysis.sides import LOAD_KEY, Side
from tunebench.points.offered import is_replay, trace_name

CROSSOVER_COLUMNS = ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "e2e_p95_s")
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
    sides: list[Side], key: tuple[str, ...], columns: tuple[str, ...] = CROSSOVER_COLUMNS
) -> list[dict[str, Any]]:
    """Where the baseline's latency curve and each candidate's cross as the target grows
    (repeats of a point are averaged first), for the latency `columns` asked for."""
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
                        }
                    )
    return out


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
