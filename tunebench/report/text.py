"""One-line texts about results, shared by the console, `show` and the HTML report."""

from __future__ import annotations

from typing import Any


def describe_capacity(summary: dict[str, Any]) -> str:
    """One line: the capacity a search found, and how sure it is."""
    probes = f"{summary['probes']} probe{'s' if summary['probes'] != 1 else ''}"
    rate, upper = summary.get("rate"), summary.get("upper")
    if rate is None and summary.get("client_bound"):
        return (
            f"capacity: unknown: the client could not drive {summary['probe_rates'][-1]:.3g} req/s "
            f"and no lower rate was proven ({probes}); see client_limited_reason"
        )
    if rate is None:
        lowest = min(summary["probe_rates"])
        return f"capacity: no rate met the SLO ({probes}, lowest tried {lowest:.3g} req/s)"
    text = f"capacity: {rate:.3g} req/s at SLO"
    if summary.get("client_bound"):
        return f"{text} or more: the client could not drive more ({probes})"
    if summary.get("capped"):
        return f"{text} or more: max_rate reached ({probes})"
    if upper is not None:
        text += f" (missed at {upper:.3g})"
    if not summary.get("converged"):
        text += ", not converged: raise max_probes"
    return f"{text}, {probes}"
