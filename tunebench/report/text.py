"""One-line texts about results, shared by the console, `show` and the HTML report."""

from __future__ import annotations

from typing import Any

from tunebench.analysis.standings import capacity_bound, capacity_text, unconverged
from tunebench.points.offered import is_replay, rate_text
from tunebench.points.records import CapacityRecord


def describe_capacity(summary: CapacityRecord) -> str:
    """One line: the capacity a search found, and how sure it is. A capacity the search
    only bounded from below (never missed, capped, client-bound) reads ">= X req/s (not
    reached)", as `results` and the report's headline print it (analysis/best.py); a search
    over replay speed (`arrival: replay`) gives its rates as speeds ("13.1x trace")."""
    probes = f"{summary['probes']} probe{'s' if summary['probes'] != 1 else ''}"
    rate, upper = summary.get("rate"), summary.get("upper")
    arrival = summary.get("arrival")
    if rate is None and summary.get("client_bound"):
        return (
            f"capacity: unknown: the client could not drive "
            f"{rate_text(summary['probe_rates'][-1], arrival)} "
            f"and no lower rate was proven ({probes}); see client_limited_reason"
        )
    if rate is None:
        lowest = min(summary["probe_rates"])
        return (
            f"capacity: no rate met the SLO ({probes}, lowest tried {rate_text(lowest, arrival)})"
        )
    bound = capacity_bound(summary)
    text = f"capacity: {capacity_text(rate, bound, arrival)} at SLO"
    if bound:
        text += f": {bound}"
    elif upper is not None:
        # a speed carries its unit; a rate's is the capacity's, just before
        missed = rate_text(upper, arrival) if is_replay(arrival) else f"{upper:.3g}"
        text += f" (missed at {missed})"
    if unconverged(summary):
        text += ", not converged: raise max_probes"
    if summary.get("drift"):
        text += f", {summary['drift']}: not an answer of record"
    return f"{text}, {probes}"


def describe_trial_value(names: list[str], best: dict[str, Any]) -> str:
    """A tune's best trial's objective values, with what its capacity search proved: a
    capacity the search only bounded from below reads ">= X req/s (not reached)", and a
    search that did not converge says so (the console's `best:` and the report alike)."""
    values = best.get("values") or []
    capacity: CapacityRecord = best.get("capacity") or CapacityRecord()
    parts = []
    for index, (name, value) in enumerate(zip(names, values)):
        text = f"{name} {value:.4g}" if isinstance(value, (int, float)) else f"{name} {value}"
        if index == 0 and capacity:
            bound = capacity_bound(capacity)
            if name == "capacity_rps":
                text = f"{name} {capacity_text(value, bound, capacity.get('arrival'))}"
            elif bound:
                text += " (a lower bound)"
            if bound:
                text += f": {bound}"
            if unconverged(capacity):
                text += "; search not converged: raise max_probes"
        parts.append(text)
    return ", ".join(parts)
