"""Each configuration's capacity at the SLO as the best's rules see it (`Standing`): a
capacity search's answer, or the sustained rate of its fixed-rate points, with what its
evidence proves (the highest rate held, the lowest missed) and why a capacity is only a lower
bound. When a runner-up cannot be told apart from the best by that evidence, the best is a
tie (`standing_out`); analysis/best.py applies the rules."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tunebench.numbers import to_float
from tunebench.points.offered import rate_text
from tunebench.points.records import CapacityRecord
from tunebench.points.sustained import RatePoint, sustained_capacity
from tunebench.spec.load_kind import LoadKind
from tunebench.store.manifest import Manifest

HIGHEST_RATE = "the SLO held at the highest rate tested"
CLIENT_BOUND = "the client could not drive more"
MAX_RATE = "the SLO held at the search's max_rate"
NEVER_MISSED = "the search never saw the SLO missed"


@dataclass(frozen=True)
class Standing:
    """One configuration's capacity under a rule, with what its evidence proves: `low` held,
    `high` missed (None: nothing above `low` was seen to miss)."""

    config_id: str
    value: float
    low: float
    high: float | None
    lower_bound: str | None = None  # why `value` is only "at least" (None: it was reached)
    arrival: str | None = None  # a capacity search's arrival: replay makes its rates speeds


def capacity_bound(capacity: CapacityRecord) -> str | None:
    """Why a capacity search's answer is only a lower bound, or None (it was bracketed)."""
    if capacity.get("rate") is None:
        return None
    if capacity.get("client_bound"):
        return CLIENT_BOUND
    if capacity.get("capped"):
        return MAX_RATE
    if capacity.get("upper") is None:
        return NEVER_MISSED
    return None


def unconverged(capacity: CapacityRecord) -> bool:
    """The search stopped on max_probes with its bracket still wide: raising max_probes
    narrows it. A search that held the SLO at max_rate stopped there (`capped`), so more
    probes would change nothing: its limit is max_rate, which its lower bound names."""
    return capacity.get("converged") is False and not capacity.get("capped")


def rate_standings(points: pd.DataFrame) -> list[Standing]:
    """Each configuration's sustained capacity over its valid fixed-rate points (rule 3)."""
    rates = points[points["load_kind"].isin(LoadKind.RATE) & points["target"].notna()]
    standings: list[Standing] = []
    for config_id, rows in rates.groupby("config_id", sort=False):
        per_repeat, lows, highs, whys = [], [], [], []
        group_by = ["load_kind", "repeat"] if "repeat" in rows else ["load_kind"]
        for _key, window in rows.groupby(group_by, sort=False, dropna=False):
            counted = [
                RatePoint(
                    float(r["target"]),
                    r["slo_met"] == True,  # noqa: E712
                    to_float(r.get("slo_ratio")),
                    r.get("client_limited") == True,  # noqa: E712
                )
                for _, r in window.iterrows()
                if r["valid"] == True  # noqa: E712
            ]
            capacity = sustained_capacity(counted)
            if capacity is None:
                continue
            per_repeat.append(0.0 if capacity.kind == "below" else capacity.rate)
            low, high, why = _bracket(counted, capacity)
            lows.append(low)
            highs.append(high)
            whys.append(why)
        if per_repeat:
            value = statistics.median(per_repeat)
            # the bracket over every repeat: what all of them together prove
            high = None if any(h is None for h in highs) else max(h for h in highs if h)
            why = next((w for w in whys if w), None) if high is None else None
            standings.append(Standing(str(config_id), value, min(lows), high, why))
    return standings


def capacities(points: pd.DataFrame, manifest: Manifest) -> dict[str, Standing]:
    """config_id -> its capacity at the SLO as the best's rules see it: a capacity search's
    answer, else the sustained rate of its fixed-rate points (valid ones); absent when the
    run has no SLO or the configuration neither (for the report's summary)."""
    if not (manifest.spec or {}).get("slo") or points.empty or "slo_met" not in points:
        return {}
    valid = points[points["valid"] == True]  # noqa: E712
    found = {s.config_id: s for s in rate_standings(valid)}
    for config in manifest.configs:
        capacity: CapacityRecord = config.capacity or {}
        rate = capacity.get("rate")
        if rate is not None:
            why = capacity_bound(capacity)
            found[config.config_id] = Standing(
                config.config_id,
                rate,
                rate,
                None if why else capacity.get("upper"),
                why,
                capacity.get("arrival"),
            )
    return found


def _bracket(counted: list[RatePoint], capacity: Any) -> tuple[float, float | None, str | None]:
    """(highest rate shown to hold, lowest rate that missed or None, why only a lower bound)
    of one window of fixed-rate points, read the way `sustained_capacity` walks them."""
    if capacity.kind == "below":
        return 0.0, capacity.rate, None
    if capacity.kind == "exact":
        above = [p.rate for p in counted if not p.slo_met and p.rate >= capacity.rate]
        below = [p.rate for p in counted if p.slo_met and p.rate <= capacity.rate]
        return (max(below) if below else 0.0), (min(above) if above else None), None
    limited = any(p.client_limited and p.rate > capacity.rate for p in counted) or any(
        p.client_limited and p.rate == capacity.rate for p in counted
    )
    return capacity.rate, None, CLIENT_BOUND if limited else HIGHEST_RATE


def standing_out(
    out: dict[str, Any], ranked: list[Standing], how: str, manifest: Manifest
) -> dict[str, Any]:
    """The best's lower bound and, when the runner-ups cannot be told apart from it by the
    rule's own evidence, the tie (the caller's `_decide` names the next figure)."""
    best = ranked[0]
    if best.lower_bound:
        out["lower_bound"] = best.lower_bound
    tied = [
        s
        for s in ranked[1:]
        # a runner-up that held at least what the best proved and never missed above it, or
        # whose first miss lies above the best's last pass: nothing measured separates them
        if (s.high is None and s.value > 0 and s.value >= best.low)
        or (s.high is not None and s.high > best.low)
    ]
    if tied:
        out["tie"] = {
            "configs": [best.config_id, *(s.config_id for s in tied)],
            "on": _tie_on(best, tied, config_names(manifest)),
            "hint": _tie_hint(best, tied, how),
        }
        out["_standings"] = {s.config_id: s for s in (best, *tied)}
    return out


def _tie_on(best: Standing, others: list[Standing], names: dict[str, str]) -> str:
    between = joined_names([names.get(s.config_id, s.config_id) for s in (best, *others)])
    same = {s.value for s in (best, *others)} == {best.value}
    arrival = best.arrival
    if best.lower_bound and same and all(s.lower_bound == best.lower_bound for s in others):
        if best.lower_bound == HIGHEST_RATE:
            return (
                f"tie at >= {rate_text(best.value, arrival)}, the highest rate tested, "
                f"between {between}"
            )
        return f"tie at >= {rate_text(best.value, arrival)} ({best.lower_bound}) between {between}"
    each = ", ".join(
        f"{s.config_id} {capacity_text(s.value, s.lower_bound, arrival)}" for s in (best, *others)
    )
    return (
        f"tie on capacity between {between} ({each}): each held {rate_text(best.low, arrival)} "
        "and no rate measured separates them"
    )


def joined_names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _tie_hint(best: Standing, others: list[Standing], how: str) -> str:
    if best.lower_bound or any(s.lower_bound for s in others):
        if how == "capacity search":
            return "raise the search's max_rate to decide"
        return "probe higher rates or add a capacity profile to decide"
    if how == "capacity search":
        return "lower the search's tolerance to decide"
    return "probe rates inside the bracket or add a capacity profile to decide"


def config_names(manifest: Manifest) -> dict[str, str]:
    return {c.config_id: f"{c.config_id} {c.label}".strip() for c in manifest.configs}


def capacity_text(value: Any, lower_bound: str | None = None, arrival: Any = None) -> str:
    """A capacity as a person reads it: "5.09 req/s", or ">= 4 req/s (not reached)" when
    the evidence only shows it is at least that; a search over replay speed (`arrival`
    replay) found a speed: "13.1x trace"."""
    number = to_float(value)
    if number is None:
        return "not measured"
    if lower_bound:
        return f">= {rate_text(number, arrival)} (not reached)"
    return rate_text(number, arrival)
