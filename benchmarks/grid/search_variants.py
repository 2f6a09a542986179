"""Variants of the capacity search that benchmarks/capacity_second_sim.py grades beside
today's (`--fixes`, `--fix NAME`): each a CapacitySearch subclass or a change to the search's
settings, swapped in for tunebench.tune.recorded's search while one grade runs."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import benchmarks.capacity_accuracy as accuracy
import tunebench.points.capacity as capacity_module
import tunebench.tune.recorded as tune_recorded
from tunebench.points.capacity import (
    BRACKETING_MARGIN,
    POOL_SPAN,
    SAMPLE_MARGIN,
    CapacitySearch,
    Probe,
    RateVerdict,
)
from tunebench.tune.recorded import SearchRules


@contextlib.contextmanager
def swapped(module: Any, name: str, value: Any) -> Iterator[None]:
    """`module.name` is `value` inside the block (how a variant reaches search_noisy)."""
    before = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, before)


# -- variants of the search, swapped in here only ------------------------------------------


@dataclass
class PreviousSearch(CapacitySearch):
    """The search before the log chord: the bracket's crossing in 1/ratio, and narrowing
    windows of the sample margin however narrow the bracket."""

    chord: str = "reciprocal"
    narrowing_growth: float = 1.0


@dataclass
class FixedWindows(CapacitySearch):
    """Today's chord in log ratio, with the previous fixed narrowing windows."""

    narrowing_growth: float = 1.0


@dataclass
class Pooled(CapacitySearch):
    """Today's search, the answer of a bracket within POOL_WIDTH tolerances a line through
    the probes within 1.3x of its ends (`pool_span`)."""

    pool_span: float | None = POOL_SPAN


@dataclass
class WidePool(CapacitySearch):
    """... through the probes within 1.6x of its ends."""

    pool_span: float | None = 1.6


@dataclass
class WorstWindow(CapacitySearch):
    """Today's search, but a rate whose windows disagree (one missed, the mean passed) counts
    as a miss at its worst window's ratio: on a server whose latency comes in busy periods a
    window that passed may have missed the busy period, and one that missed saw it."""

    def _verdict(self, rate: float, group: list[Probe]) -> RateVerdict:
        verdict = super()._verdict(rate, group)
        ratios = [p.ratio for p in group if p.ratio]
        if verdict.slo_met and len(ratios) > 1 and max(ratios) > 1:
            return replace(verdict, slo_met=False, ratio=max(ratios))
        return verdict


@dataclass
class MeasureLongerWhenContradicted(CapacitySearch):
    """Today's search until its windows contradict each other (a miss at or below a rate
    that passed: the server's latency scatters more than the noise model says); from then
    on its windows are `CONTRADICTED_GROWTH` x as long and it may spend `CONTRADICTED_PROBES`
    more probes. A server whose windows agree pays nothing more."""

    def contradicted(self) -> bool:
        measured = [p for p in self._measured() if p.ratio]
        lowest_miss = min((p.rate for p in measured if not p.slo_met), default=math.inf)
        return any(p.slo_met and p.rate >= lowest_miss for p in measured)

    def tell(
        self, rate: float, slo_met: bool, client_limited: bool = False, ratio: float | None = None
    ) -> None:
        before = self.contradicted()
        super().tell(rate, slo_met, client_limited, ratio)
        if not before and self.contradicted():
            self.max_probes += CONTRADICTED_PROBES

    def window_margin(
        self, margin: float = SAMPLE_MARGIN, bracketing: float = BRACKETING_MARGIN
    ) -> float:
        grown = super().window_margin(margin, bracketing)
        return grown * CONTRADICTED_GROWTH if self.contradicted() else grown


CONTRADICTED_GROWTH, CONTRADICTED_PROBES = 4.0, 4


OVERLOAD = 2.0  # a miss this far past the limit measures its window's length, not the knee


def _geometric_middle(a: Probe, b: Probe) -> float:
    return math.sqrt(a.rate * b.rate)


def _guarded_crossing(a: Probe, b: Probe) -> float:
    """The 1/ratio chord while both ends are within OVERLOAD of the limit; past it the
    chord is flat at 1/ratio ~ 0 on a batching server and overshoots: the middle."""
    assert a.ratio and b.ratio
    if max(b.ratio, 1 / a.ratio) <= OVERLOAD:
        return _CROSSING(a, b)
    return _geometric_middle(a, b)


_CROSSING = capacity_module.reciprocal_crossing


def with_crossing(crossing: Callable[[Probe, Probe], float]) -> type[CapacitySearch]:
    """PreviousSearch whose answer and narrowing probes use `crossing` for the rate
    between the bracket's ends (its growing still projects the knee with the chord)."""

    class Variant(PreviousSearch):
        @property
        def capacity(self) -> float | None:
            with swapped(capacity_module, "reciprocal_crossing", crossing):
                return super().capacity

        def _narrow(self, lower: Probe, upper: Probe) -> float:
            with swapped(capacity_module, "reciprocal_crossing", crossing):
                return super()._narrow(lower, upper)

    return Variant


# name: (the search, changes to the search's settings); the last one changes how much a
# probe measures too (`sample_margin`: requests per narrowing window, 4 today; `max_probes`:
# 8 today).
FIXES: dict[str, tuple[type[CapacitySearch] | None, dict[str, Any]]] = {
    "before: 1/ratio chord, fixed windows": (PreviousSearch, {}),
    "A: chord only near the limit (before's windows)": (with_crossing(_guarded_crossing), {}),
    "log chord, fixed windows": (FixedWindows, {}),
    "today: log chord, growing windows": (None, {}),
    "today + pooled within 1.3x": (Pooled, {}),
    "today + pooled within 1.6x": (WidePool, {}),
    "today + margin 16 + 12 probes": (None, {"sample_margin": 16.0, "max_probes": 12}),
    "today + margin 8, bracketing 1.5": (None, {"sample_margin": 8.0, "bracketing_margin": 1.5}),
    "today + a rate's worst window when they disagree": (WorstWindow, {}),
    "today + 4x windows and 4 more probes once windows contradict": (
        MeasureLongerWhenContradicted,
        {},
    ),
    "worst window + margin 8, bracketing 1.5": (
        WorstWindow,
        {"sample_margin": 8.0, "bracketing_margin": 1.5},
    ),
}


def variant(rules: SearchRules, search: type[CapacitySearch] | None) -> accuracy.Strategy:
    inner = accuracy.tunebench_search(rules)
    if search is None:
        return inner

    def run(*args: Any) -> accuracy.Outcome:
        with swapped(tune_recorded, "CapacitySearch", search):
            return inner(*args)

    return run
