"""Reading the gate beside the table: the table's verdict of a row ("worse") is that row's
own 95% interval against no change, the gate's is a threshold with Holm's correction over
every gated row. A row can be the first and not fail the second; this says how many and why,
so the two never read as a contradiction."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tunebench.analysis.compare import SIGNIFICANT_WORSE
from tunebench.analysis.compare_metrics import METRICS


def worse_not_failing(
    rows: pd.DataFrame, gated: list[int], decided: set[int], pct: float, pp: float
) -> dict[str, int]:
    """The rows the table marks worse that do not fail the gate, so that the two can be
    read together: worse but by less than the threshold, or beyond it row by row yet not
    significant once corrected for every gated row (Holm)."""
    worse = [
        i for i in gated if i not in decided and str(rows.iloc[i]["verdict"]) == SIGNIFICANT_WORSE
    ]
    beyond = 0
    for i in worse:
        row = rows.iloc[i]
        metric = METRICS[row["metric"]]
        threshold = pp if metric.kind == "proportion" else pct
        if metric.higher_is_better:
            beyond += bool(row["ci_high_pct"] < -threshold)
        else:
            beyond += bool(row["ci_low_pct"] > threshold)
    return {"rows": len(worse), "beyond_threshold": beyond}


def reconcile_line(gate: dict[str, Any]) -> str | None:
    """Why rows the table marks worse do not fail the gate (None: there are none)."""
    found = gate.get("worse_not_failing") or {}
    count, beyond = found.get("rows", 0), found.get("beyond_threshold", 0)
    if not count:
        return None
    threshold = (
        f"the threshold ({gate['threshold_pct']:g}%; error rate "
        f"{gate['error_rate_threshold_pp']:g}pp)"
    )
    parts = []
    if beyond:
        parts.append(
            f"{beyond} lie beyond {threshold} row by row but are not significant after "
            f"correction for {gate['rows_gated']} gated rows (Holm)"
        )
    if count - beyond:
        parts.append(f"{count - beyond} are worse, but not surely by more than {threshold}")
    return f"{count} row(s) marked worse do not fail the gate: " + "; ".join(parts)
