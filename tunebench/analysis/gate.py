"""The regression gate of `tunebench compare --fail-on-regression PCT`: its rule and verdict.

The rule, in its own words: the gate fails when some metric of some aligned point (or of
all aligned points together, where compare has such a row) is worse than the baseline by
more than PCT with the comparison's confidence, after correcting for testing many rows at
once. Each gated row gets the one-sided p-value of "not worse by more
than PCT" (latencies: B/A - 1 <= PCT; throughput: B/A - 1 >= -PCT; the error rate: B - A <=
PCT percentage points); Holm's step-down over all gated rows keeps the chance that an
A/A comparison fails at 1 - confidence or less, however many rows there are.

Rows without a verdict (too few samples) and rows whose points are invalid are not gated
(the gate says how many); points the client held back are gated and counted. The verdict is
written into `compare --json` and read back by `tunebench results --compare-json`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tunebench.analysis import stats
from tunebench.analysis.compare import EXCLUDED, METRICS, NOT_AVAILABLE, Comparison


def regression_gate(
    result: Comparison, threshold_pct: float, confidence: float = 0.95
) -> dict[str, Any]:
    rows = result.rows
    gated: list[int] = []
    p_values: list[float] = []
    for index, change in enumerate(result.changes):
        verdict = str(rows.iloc[index]["verdict"])
        if verdict.startswith((NOT_AVAILABLE, EXCLUDED)):
            continue
        metric = METRICS[rows.iloc[index]["metric"]]
        gated.append(index)
        p_values.append(change.p_worse(threshold_pct / 100, not metric.higher_is_better))
    rejected = stats.holm(p_values, 1 - confidence)
    failing = [index for index, hit in zip(gated, rejected) if hit]
    gate: dict[str, Any] = {
        "threshold_pct": threshold_pct,
        "rule": f"worse by more than {threshold_pct:g}% (error rate: percentage points) with "
        f"{confidence:.0%} confidence, Holm-corrected over the gated rows",
        "rows_gated": len(gated),
        "rows_not_gated": len(rows) - len(gated),
        "client_limited_rows": int((rows.iloc[gated]["client_limited"] != "").sum())
        if gated
        else 0,
        "regressions": len(failing),
        "verdict": "regression" if failing else "no-regression",
        "within_run_only": bool(gated)
        and all(rows.iloc[i]["repeats_a"] < 2 or rows.iloc[i]["repeats_b"] < 2 for i in gated),
    }
    if failing:
        worst = rows.iloc[failing].assign(_p=[p_values[gated.index(i)] for i in failing])
        worst = worst.loc[worst["_p"].idxmin()]
        gate["worst"] = {
            "candidate": worst["candidate"],
            "label": worst["label"],
            "point": worst["point"],
            "load_kind": worst["load_kind"],
            "target": _number(worst["target"]),
            "change_pct": float(worst["change_pct"]),
            "unit": worst["unit"],
            "ci_low_pct": float(worst["ci_low_pct"]),
            "ci_high_pct": float(worst["ci_high_pct"]),
        }
    return gate


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def describe_gate(gate: dict[str, Any]) -> str:
    """The one line the gate prints when it fails."""
    worst = gate["worst"]
    unit = "pp" if worst["unit"] == "pp" else "%"
    return (
        f"regression: {gate['regressions']} of {gate['rows_gated']} gated rows worse by "
        f"more than {gate['threshold_pct']:g}{unit if unit == 'pp' else '%'} "
        f"(Holm-corrected); worst: {worst['label']} at {worst['point']} "
        f"{worst['change_pct']:+.1f}{unit} [{worst['ci_low_pct']:+.1f}, "
        f"{worst['ci_high_pct']:+.1f}]"
    )
