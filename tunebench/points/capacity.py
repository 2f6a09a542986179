"""Capacity search: the highest request rate at which the SLO holds, as an ask/tell loop.

    search = CapacitySearch(start_rate=4.0)
    while (rate := search.next_rate()) is not None:
        point = run_point(rate)                      # e.g. a poisson point at `rate`
        search.tell(rate, point.slo_met, point.client_limited, point.slo_ratio)
    search.capacity                                  # req/s, or None

Bracketing first (grow or shrink the rate until one rate meets the SLO and a higher one
misses it), then narrowing until the bracket is within `tolerance` (relative): the result
is then within `tolerance` of the true capacity. Growing and narrowing project the rate at which
`slo_ratio` (measured/limit of the worst threshold) reaches 1 (see `_crossing`), and
probe where one more result can close the bracket; without ratios they double and bisect.

A warm start (the previous configuration's capacity) brackets with small steps, since the
answer is probably near; a cold start doubles. A probe the client could not drive
(`client_limited`) never counts as server capacity (a miss still counts as a miss: the
server missed with less load than asked): it bounds the search like a miss does, and when
the bracket under it closes the result is "at least this much", flagged `client_bound`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Probe:
    rate: float
    slo_met: bool
    client_limited: bool = False
    ratio: float | None = None  # worst measured/limit; > 1 means missed


@dataclass
class CapacitySearch:
    start_rate: float = 1.0
    tolerance: float = 0.05
    growth: float = 2.0  # first bracketing step on a cold start
    warm: bool = False  # start_rate is a previous capacity: step by 1 + 4 x tolerance
    max_probes: int = 12
    min_rate: float = 0.05
    max_rate: float | None = None  # the client's limit, if known
    probes: list[Probe] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.start_rate <= 0 or not 0 < self.tolerance < 1 or self.growth <= 1:
            raise ValueError("start_rate > 0, 0 < tolerance < 1 and growth > 1 are required")

    def _measured(self) -> list[Probe]:
        """Probes that say something about the server. A client that fell behind sent less
        (or less bursty) load than asked: if the SLO was missed anyway it is missed at the
        asked rate too; if it was met, that proves nothing."""
        return [p for p in self.probes if not (p.client_limited and p.slo_met)]

    @property
    def upper(self) -> Probe | None:
        """The lowest probe that missed the SLO."""
        missed = [p for p in self._measured() if not p.slo_met]
        return min(missed, key=lambda p: p.rate) if missed else None

    @property
    def late(self) -> Probe | None:
        """The lowest rate the client could not drive (while the SLO held)."""
        late = [p for p in self.probes if p.client_limited and p.slo_met]
        return min(late, key=lambda p: p.rate) if late else None

    @property
    def bound(self) -> Probe | None:
        """Where the search must stay below: the lowest miss, or the lowest rate the client
        could not drive, whichever is lower."""
        candidates = [p for p in (self.upper, self.late) if p is not None]
        return min(candidates, key=lambda p: p.rate) if candidates else None

    @property
    def lower(self) -> Probe | None:
        """The highest probe below `bound` that met the SLO (noise can make a higher rate
        pass after a lower one failed; the failure wins)."""
        bound = self.bound
        met = [p for p in self._measured() if p.slo_met and (bound is None or p.rate < bound.rate)]
        return max(met, key=lambda p: p.rate) if met else None

    @property
    def capacity(self) -> float | None:
        lower = self.lower
        return lower.rate if lower else None

    @property
    def capped(self) -> bool:
        """The SLO held at `max_rate`: the capacity is at least that."""
        lower = self.lower
        return (
            self.max_rate is not None
            and lower is not None
            and lower.rate >= self.max_rate * (1 - 1e-9)
        )

    @property
    def converged(self) -> bool:
        """The bracket is within `tolerance`: the capacity is known to that precision (or,
        when the client was the limit, that the server holds up to what the client drives)."""
        lower, bound = self.lower, self.bound
        return (
            lower is not None
            and bound is not None
            and bound.rate - lower.rate <= self.tolerance * bound.rate
        )

    @property
    def client_bound(self) -> bool:
        """The answer is "at least this much": the client, not the server, set the limit."""
        bound = self.bound
        return self.converged and bound is not None and bound is self.late

    def tell(
        self, rate: float, slo_met: bool, client_limited: bool = False, ratio: float | None = None
    ) -> None:
        self.probes.append(Probe(rate, bool(slo_met), bool(client_limited), ratio))

    @property
    def done(self) -> bool:
        if self.capped or self.converged or len(self.probes) >= self.max_probes:
            return True
        bound = self.bound
        return bound is not None and bound.rate <= self.min_rate  # nothing to search below

    def next_rate(self) -> float | None:
        if self.done:
            return None
        if not self.probes:
            return self._clamp(self.start_rate)
        lower, bound = self.lower, self.bound
        if bound is None:  # everything met so far: grow, to just past the projected knee
            assert lower is not None  # probes, none missed nor client-limited: one met
            step = lower.rate * self._step()
            knee = self._projected_knee()
            if knee is not None and knee > lower.rate:
                step = min(
                    step, max(knee * (1 + self.tolerance), lower.rate * (1 + 2 * self.tolerance))
                )
            return self._clamp(step)
        if lower is None:  # nothing met below the bound: shrink, further the worse the miss
            factor = self._step()
            if not bound.slo_met and bound.ratio:
                factor = min(self.growth, max(factor, bound.ratio))
            return self._clamp(max(self.min_rate, bound.rate / factor))
        return self._clamp(self._narrow(lower, bound))

    def _step(self) -> float:
        """Bracketing factor: doubling when cold; when warm 1 + 4 x tolerance, growing with
        each probe that did not bracket, up to `growth`."""
        if not self.warm:
            return self.growth
        return min(self.growth, (1 + 4 * self.tolerance) ** max(1, len(self.probes)))

    def _projected_knee(self) -> float | None:
        """Where the last two passing probes project 1/ratio to reach 1, if they do."""
        met = [p for p in self._measured() if p.slo_met and p.ratio]
        if len(met) < 2:
            return None
        a, b = sorted(met[-2:], key=lambda p: p.rate)
        if a.ratio is None or b.ratio is None:  # filtered out above
            return None
        return _crossing(a, b) if a.rate < b.rate and b.ratio > a.ratio else None

    def _clamp(self, rate: float) -> float:
        return min(rate, self.max_rate) if self.max_rate is not None else rate

    def _narrow(self, lower: Probe, upper: Probe) -> float:
        low, high = lower.rate, upper.rate
        last_two = self._measured()[-2:]
        one_sided = len(last_two) == 2 and last_two[0].slo_met == last_two[1].slo_met
        if (
            lower.ratio
            and upper.ratio
            and upper.ratio > lower.ratio
            and not one_sided
            and not upper.slo_met
        ):
            estimate = min(high, max(low, _crossing(lower, upper)))
        else:
            # no margins, or interpolation keeps landing on one side (a convex latency
            # curve does that): bisect
            estimate = (low + high) / 2
        # Probe where one result can close the bracket: within reach of an end when the
        # estimate is near it, and never at an end (each probe must shrink the bracket).
        reach = 0.9 * self.tolerance * high
        if high - low <= 2 * reach:
            return (low + high) / 2
        return min(max(estimate, low + reach), high - reach)


def _crossing(a: Probe, b: Probe) -> float:
    """The rate where the line through (rate, 1/ratio) of `a` and `b` reaches 1/ratio = 1.

    Queueing latency grows like 1/(1 - load), so its reciprocal falls about linearly in
    the rate: interpolating 1/ratio finds the knee of a hockey-stick curve in one step,
    where interpolating the ratio itself creeps up on it from below.
    """
    assert a.ratio and b.ratio  # callers pass probes with margins
    xa, xb = 1 / a.ratio, 1 / b.ratio
    if xa == xb:
        return (a.rate + b.rate) / 2
    return a.rate + (xa - 1) / (xa - xb) * (b.rate - a.rate)
