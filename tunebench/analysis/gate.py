"""The regression gate of `tunebench compare --fail-on-regression PCT`: its rule and verdict.

A metric regresses when the comparison calls it significantly worse and the change is
larger than PCT percent. The verdict is written into `compare --json` and read back by
`tunebench results --compare-json`.
"""

from __future__ import annotations

from typing import Any

from tunebench.analysis.compare import Comparison


def regression_gate(result: Comparison, threshold_pct: float) -> dict[str, Any]:
    regressions = result.regressions(threshold_pct)
    gate: dict[str, Any] = {
        "threshold_pct": threshold_pct,
        "regressions": int(len(regressions)),
        "verdict": "regression" if len(regressions) else "no-regression",
    }
    if len(regressions):
        worst = regressions.loc[regressions["change_pct"].abs().idxmax()]
        gate["worst"] = {
            "candidate": worst["candidate"],
            "label": worst["label"],
            "load_kind": worst["load_kind"],
            "target": float(worst["target"]),
            "change_pct": float(worst["change_pct"]),
        }
    return gate


def describe_gate(gate: dict[str, Any]) -> str:
    """The one line the gate prints when it fails."""
    worst = gate["worst"]
    return (
        f"regression: {gate['regressions']} metric(s) significantly worse by more than "
        f"{gate['threshold_pct']:g}% (worst: {worst['label']} at {worst['load_kind']} "
        f"{worst['target']:g}, {worst['change_pct']:+.1f}%)"
    )
