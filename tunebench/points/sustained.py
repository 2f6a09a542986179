"""The capacity a set of fixed-rate load points shows: the one rule `results`, the report,
the recorded deployment's truth and the benchmarks share (the capacity search,
points/capacity.py, finds the same crossing by probing)."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.points.capacity import Probe, reciprocal_crossing


@dataclass(frozen=True)
class RatePoint:
    """One fixed-rate load point as the SLO saw it."""

    rate: float
    slo_met: bool
    ratio: float | None = None
    client_limited: bool = False


@dataclass(frozen=True)
class SustainedCapacity:
    """The capacity a set of fixed-rate points shows. `kind`: "exact" (crossed between two
    measured rates), "below" (the lowest rate already missed: under `rate`), "at-least"
    (every rate met it, or the client could not drive the next: `rate` or more)."""

    rate: float
    kind: str


def sustained_capacity(points: list[RatePoint]) -> SustainedCapacity | None:
    """The one rule for "how much load does this configuration sustain within the SLO",
    shared by `results`, the report, the recorded deployment's truth and the benchmarks: walk up the
    rates; the SLO must hold at every rate up to the capacity (a pass above a miss is luck,
    not capacity); between the last pass and the first miss the capacity is where 1/ratio,
    linear in the rate, reaches 1 (as the search interpolates; ratios taken as a running
    maximum, as the recorded deployment makes latencies monotone). A pass the client could not drive
    ends the walk: the capacity is at least the last pass."""
    if not points:
        return None
    passed: RatePoint | None = None
    worst = 0.0  # a server is not faster under more load: ratios as a running maximum
    for point in sorted(points, key=lambda p: p.rate):
        if point.ratio:
            worst = max(worst, point.ratio)
            point = RatePoint(point.rate, point.slo_met, worst, point.client_limited)
        if not point.slo_met:
            if passed is None:
                return SustainedCapacity(point.rate, "below")
            as_probe = Probe(passed.rate, True, False, passed.ratio)
            miss = Probe(point.rate, False, False, point.ratio)
            if passed.ratio and point.ratio and point.ratio > passed.ratio:
                rate = min(point.rate, max(passed.rate, reciprocal_crossing(as_probe, miss)))
            else:
                rate = (passed.rate + point.rate) / 2
            return SustainedCapacity(rate, "exact")
        if point.client_limited:
            return SustainedCapacity(passed.rate if passed else point.rate, "at-least")
        passed = point
    assert passed is not None
    return SustainedCapacity(passed.rate, "at-least")
