"""Capacity search: the highest request rate at which the SLO holds, as an ask/tell loop.

    search = CapacitySearch(start_rate=4.0)
    while (rate := search.next_rate()) is not None:
        point = run_point(rate)                      # e.g. a poisson point at `rate`
        search.tell(rate, point.slo_met, point.client_limited)
    search.capacity                                  # req/s, or None

Bracketing first (grow or shrink the rate by `growth` until one rate meets the SLO and a
higher one misses it), then bisection until the bracket is within `tolerance` (relative).
A probe the client could not drive (`client_limited`) never counts as server capacity:
the search stops there and reports the best rate it could prove, with `client_bound`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Probe:
    rate: float
    slo_met: bool
    client_limited: bool = False


@dataclass
class CapacitySearch:
    start_rate: float = 1.0
    tolerance: float = 0.05
    growth: float = 2.0
    max_probes: int = 12
    min_rate: float = 0.05
    probes: list[Probe] = field(default_factory=list)
    client_bound: bool = False  # stopped because the client, not the server, was the limit

    def __post_init__(self) -> None:
        if self.start_rate <= 0 or self.tolerance <= 0 or self.growth <= 1:
            raise ValueError("start_rate > 0, tolerance > 0 and growth > 1 are required")

    @property
    def lower(self) -> float | None:
        """Highest rate proven to meet the SLO."""
        met = [p.rate for p in self.probes if p.slo_met and not p.client_limited]
        return max(met) if met else None

    @property
    def upper(self) -> float | None:
        """Lowest rate proven to miss the SLO."""
        missed = [p.rate for p in self.probes if not p.slo_met and not p.client_limited]
        return min(missed) if missed else None

    @property
    def capacity(self) -> float | None:
        return self.lower

    def tell(self, rate: float, slo_met: bool, client_limited: bool = False) -> None:
        self.probes.append(Probe(rate, bool(slo_met), bool(client_limited)))
        if client_limited:
            self.client_bound = True

    @property
    def done(self) -> bool:
        if self.client_bound or len(self.probes) >= self.max_probes:
            return True
        lower, upper = self.lower, self.upper
        if upper is not None and upper <= self.min_rate:
            return True  # even the smallest rate misses: capacity 0 (None)
        return lower is not None and upper is not None and (upper - lower) <= self.tolerance * upper

    def next_rate(self) -> float | None:
        if self.done:
            return None
        if not self.probes:
            return self.start_rate
        lower, upper = self.lower, self.upper
        if upper is None:
            return lower * self.growth  # everything met so far: grow
        if lower is None:
            return max(self.min_rate, upper / self.growth)  # everything missed: shrink
        return (lower + upper) / 2
