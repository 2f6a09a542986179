"""Capacity search: the highest request rate at which the SLO holds, as an ask/tell loop.

    search = CapacitySearch(start_rate=4.0)
    while (rate := search.next_rate()) is not None:
        point = run_point(rate)                      # e.g. a poisson point at `rate`
        search.tell(rate, point.slo_met, point.client_limited, point.slo_ratio)
    search.capacity                                  # req/s, or None

Bracketing first (grow or shrink the rate until one rate meets the SLO and a higher one
misses it), then narrowing until the bracket is within `tolerance` (relative): the result
is then within `tolerance` of the true capacity. Growing projects the rate at which
`slo_ratio` (measured/limit of the worst threshold) reaches 1 from two passes (see
`reciprocal_crossing`). Narrowing and the answer take the bracket's crossing in log ratio
(`_log_crossing`), and probe where one more result can close the bracket; without ratios
they double and bisect. With `pool_span` (not the default) a nearly closed bracket's
answer under a noise model is a line through every probe near it (`_pooled_crossing`), not
its two ends alone: they were kept for landing on their sides, so their own windows are the
luckiest readings of the knee.

A warm start (the previous configuration's capacity) brackets with small steps, since the
answer is probably near; a cold start doubles. A probe the client could not drive
(`client_limited`) never counts as server capacity (a miss still counts as a miss: the
server missed with less load than asked): it bounds the search like a miss does, and when
the bracket under it closes the result is "at least this much", flagged `client_bound`.

Noise (`noise` > 0, the sd of one probe's log SLO ratio): a window of requests measures a
percentile with sampling error, so a probe near the knee can land on the wrong side of the
limit. Probes at one rate are then taken together (the mean of their log ratios), and a
rate that bounds the bracket is re-probed until its verdict is clear of the noise (its mean
is more than `z` standard errors from the limit) or it has `1 + max_confirm` probes. A miss
below a pass contradicts itself and is re-probed too, so one unlucky window no longer caps
the search for good. The answer comes with its bracket (`interval`), and no probability:
the noise model's own probability that the capacity lies inside it was not calibrated
(per band of what it stated, the share of brackets holding the true capacity differed by
up to 38 points on synthetic queueing servers), so none is reported.
Probe windows are sized so the SLO percentile has the requests it needs (`probe_seconds`),
and grow as the bracket narrows (`window_margin`): near the knee a short window reads a
latency percentile low (it mostly misses the busy periods that make it), so the probes
that decide the answer read the most requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tunebench.points.samples import needed

# A probe window expects this many times the requests its percentile needs: with the bare
# minimum (p90: 36) one window's p90 TTFT scattered by sd 0.24 in log on the recorded grid,
# and one unlucky window near the knee moved the bracket; chosen with
# `benchmarks/capacity_accuracy.py --choose` (docs/capacity.md).
SAMPLE_MARGIN = 4.0
# ... except while bracketing: those probes step by large factors and mostly land far from
# the knee, where a shorter window's verdict is already clear. 1.25 there cost 3 points of
# accuracy on the recorded grid, 2.5 none, at 0.77 x the load time of 4 throughout.
BRACKETING_MARGIN = 2.5
# ... and grows as the bracket narrows, up to this many times `margin` once the bracket is
# within 2 x tolerance: a narrowing probe's percentile then has to tell rates apart that
# differ by less, and on a batching server (benchmarks/capacity_second_sim.py) a window of
# 144 requests at the capacity read its p90 at 0.84 of the limit, of 600 at 0.94.
NARROWING_GROWTH = 2.0
MAX_WINDOW_FACTOR = 10  # ... but is never more than this many times the spec's max_seconds
SELECTION = 2.5  # see CapacitySearch._verdict; checked by tests/unit/test_capacity_noise.py
# With `pool_span` set (not the default), the answer of a nearly closed bracket under a
# noise model pools the probes within that factor of its ends (`_pooled_crossing`): the
# ends were kept for landing on their sides of the limit, so their own windows overstate
# how far apart the sides lie (on a batching server a lucky window passed above the capacity
# in 42% of searches, an unlucky one missed below it in 13%), and their neighbours' windows
# carry the rest of what was measured about the knee. Measured with 1.3 on the batching
# simulator, the queueing law, the recorded CPU grid and two analytic laws, and with the
# tuner (docs/benchmarks.md, capacity_second_sim.py): a gain of 1-6 points within 10% on the
# batching server, none elsewhere, and 2-3 points fewer tuner picks within 5% of the best on
# two grids, so the chord between the ends stays the default.
POOL_SPAN = 1.3
# ... and only once the bracket is within this many tolerances: a wide one (probes ran out
# on the way up) ends at a miss far past the knee, and a line from it through the passes
# below bends with the latency curve and reads low (on an M/M/1 law, 85% of cold searches
# within 10% pooled at any width against 96% for the chord; benchmarks/capacity_laws.py)
POOL_WIDTH = 4.0


@dataclass(frozen=True)
class Probe:
    rate: float
    slo_met: bool
    client_limited: bool = False
    ratio: float | None = None  # worst measured/limit; > 1 means missed


@dataclass(frozen=True)
class RateVerdict:
    """Every measured probe at one rate, taken together."""

    rate: float
    slo_met: bool
    ratio: float | None  # geometric mean of the probes' ratios
    count: int
    settled: bool  # clear of the noise, or out of confirmations
    p_met: float | None  # probability that this deployment meets the SLO at this rate

    def as_probe(self) -> Probe:
        return Probe(self.rate, self.slo_met, False, self.ratio)


def probe_seconds(
    rate: float, base_seconds: float, quantile: float | None, margin: float = SAMPLE_MARGIN
) -> float:
    """A probe's window: `base_seconds`, or longer so that `rate` brings `margin` times the
    requests the SLO's percentile needs (p90: 36, p95: 72; points/samples.py); capped at
    MAX_WINDOW_FACTOR x base_seconds (a thinner window is flagged by thin_percentiles)."""
    if not quantile or rate <= 0:
        return base_seconds
    wanted = margin * needed(quantile) / rate
    return float(min(max(base_seconds, math.ceil(wanted)), MAX_WINDOW_FACTOR * base_seconds))


@dataclass
class CapacitySearch:
    start_rate: float = 1.0
    tolerance: float = 0.05
    growth: float = 2.0  # first bracketing step on a cold start
    warm: bool = False  # start_rate is a previous capacity: step by 1 + 4 x tolerance
    max_probes: int = 12
    min_rate: float = 0.05
    max_rate: float | None = None  # the client's limit, if known
    noise: float = 0.0  # sd of one probe's log SLO ratio; 0: every probe is taken at its word
    max_confirm: int = 2  # extra probes a rate may get before its verdict stands
    z: float = 1.645  # a verdict is clear when its mean is this many standard errors away
    chord: str = "log"  # the bracket's crossing: "log" ratio, or "reciprocal" (1/ratio)
    narrowing_growth: float = NARROWING_GROWTH  # 1: narrowing windows of `margin` only
    pool_span: float | None = None  # e.g. POOL_SPAN: pool the probes near a narrow bracket
    probes: list[Probe] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.start_rate <= 0 or not 0 < self.tolerance < 1 or self.growth <= 1:
            raise ValueError("start_rate > 0, 0 < tolerance < 1 and growth > 1 are required")
        if self.noise < 0 or self.max_confirm < 0:
            raise ValueError("noise >= 0 and max_confirm >= 0 are required")
        if self.chord not in ("log", "reciprocal") or self.narrowing_growth < 1:
            raise ValueError('chord "log" or "reciprocal" and narrowing_growth >= 1 are required')
        if self.pool_span is not None and self.pool_span < 1:
            raise ValueError("pool_span >= 1 (or None: no pooling) is required")

    def _measured(self) -> list[Probe]:
        """Probes that say something about the server. A client that fell behind sent less
        (or less bursty) load than asked: if the SLO was missed anyway it is missed at the
        asked rate too; if it was met, that proves nothing."""
        return [p for p in self.probes if not (p.client_limited and p.slo_met)]

    def verdicts(self) -> list[RateVerdict]:
        """The measured probes grouped by rate, lowest rate first."""
        groups: dict[float, list[Probe]] = {}
        for probe in self._measured():
            groups.setdefault(round(probe.rate, 9), []).append(probe)
        return [self._verdict(rate, group) for rate, group in sorted(groups.items())]

    def _verdict(self, rate: float, group: list[Probe]) -> RateVerdict:
        if any(not p.slo_met and (not p.ratio or p.ratio <= 1) for p in group):
            # missed with no latency margin (no request finished, the error rate): not noise
            return RateVerdict(rate, False, None, len(group), True, 0.0)
        ratios = [p.ratio for p in group if p.ratio]
        if self.noise <= 0 or len(ratios) < len(group):
            met = all(p.slo_met for p in group)
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
            return RateVerdict(rate, met, mean, len(group), True, None)
        log_mean = sum(math.log(r) for r in ratios) / len(ratios)
        error = self.noise / math.sqrt(len(ratios))
        settled = abs(log_mean) >= self.z * error or len(group) > self.max_confirm
        # The bracket's ends were chosen for landing on their side of the limit, so their
        # own probes overstate how clearly they did (the winner's curse): the probability
        # counts their noise SELECTION times.
        p_met = _normal_cdf(-log_mean / (SELECTION * error))
        return RateVerdict(rate, log_mean <= 0, math.exp(log_mean), len(group), settled, p_met)

    def _upper_verdict(self, verdicts: list[RateVerdict]) -> RateVerdict | None:
        return next((v for v in verdicts if not v.slo_met), None)

    @property
    def upper(self) -> Probe | None:
        """The lowest rate that missed the SLO (its probes taken together)."""
        found = self._upper_verdict(self.verdicts())
        return found.as_probe() if found else None

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

    def _lower_verdict(self, verdicts: list[RateVerdict]) -> RateVerdict | None:
        bound = self.bound
        met = [v for v in verdicts if v.slo_met and (bound is None or v.rate < bound.rate)]
        return met[-1] if met else None

    @property
    def lower(self) -> Probe | None:
        """The highest rate below `bound` that met the SLO (noise can make a higher rate
        pass after a lower one failed; once confirmed, the failure wins)."""
        found = self._lower_verdict(self.verdicts())
        return found.as_probe() if found else None

    @property
    def proven(self) -> float | None:
        """The highest rate that met the SLO below the bound: what was shown to hold."""
        lower = self.lower
        return lower.rate if lower else None

    @property
    def capacity(self) -> float | None:
        """The estimate: where log ratio, linear between the bracket's ends, reaches 0 (the
        ends' ratios taken together over their probes; `chord`), inside the bracket; the
        proven rate when the bound is the client's or a margin is missing. The proven rate
        alone sits up to `tolerance` below the crossing, every time. With `pool_span` and a
        noise model, where the probes near the bracket cross the limit together
        (`_pooled_crossing`), which may lie below the highest pass: that pass may have been
        a lucky window."""
        lower, upper, bound = self.lower, self.upper, self.bound
        if lower is None:
            return None
        if upper is None or bound is None or bound.rate != upper.rate:
            return lower.rate
        if not (lower.ratio and upper.ratio):
            return lower.rate
        if upper.ratio <= lower.ratio:
            return lower.rate
        pooled = self._pooled_crossing(lower, upper)
        if pooled is not None:
            return pooled
        return min(upper.rate, max(lower.rate, self._chord(lower, upper)))

    def _pooled_crossing(self, lower: Probe, upper: Probe) -> float | None:
        """Where a least-squares line of log ratio on log rate, through every measured
        probe within `pool_span` of the bracket's ends (from lower / pool_span to upper x
        pool_span; each window once, so a confirmed rate weighs by its windows), reaches 0:
        between the lowest of those rates and the lowest miss. None without a noise model,
        for a bracket wider than `POOL_WIDTH` tolerances, with fewer than two rates, or when
        the line does not rise with the rate."""
        if self.noise <= 0 or self.pool_span is None:
            return None
        if upper.rate > lower.rate * (1 + POOL_WIDTH * self.tolerance):
            return None
        near = [
            (math.log(p.rate), math.log(p.ratio))
            for p in self._measured()
            if p.ratio
            and p.slo_met == (p.ratio <= 1)  # a miss by errors has no latency margin
            and lower.rate / self.pool_span <= p.rate <= upper.rate * self.pool_span
        ]
        if len({x for x, _ in near}) < 2:
            return None
        mean_x = sum(x for x, _ in near) / len(near)
        mean_y = sum(y for _, y in near) / len(near)
        sxx = sum((x - mean_x) ** 2 for x, _ in near)
        sxy = sum((x - mean_x) * (y - mean_y) for x, y in near)
        if sxy <= 0:
            return None
        crossing = math.exp(mean_x - mean_y * sxx / sxy)
        return min(upper.rate, max(math.exp(min(x for x, _ in near)), crossing))

    def _chord(self, lower: Probe, upper: Probe) -> float:
        """Where the bracket's ends cross the limit: `_log_crossing`, or `reciprocal_crossing` (the
        1/ratio chord the search used before) with chord="reciprocal"."""
        return (
            reciprocal_crossing(lower, upper)
            if self.chord == "reciprocal"
            else _log_crossing(lower, upper)
        )

    def window_margin(
        self, margin: float = SAMPLE_MARGIN, bracketing: float = BRACKETING_MARGIN
    ) -> float:
        """The sample margin of the next probe's window (probe_seconds): at most `bracketing`
        before the knee is bracketed; `margin` once it is (narrowing and confirming probes
        near it), growing as the bracket narrows: in proportion to 4 x tolerance / its
        width, up to `narrowing_growth` x `margin` (at 2 x tolerance and under)."""
        lower, bound = self.lower, self.bound
        if lower is None or bound is None:
            return min(margin, bracketing)
        width = max(bound.rate / lower.rate - 1, 1e-9)
        return margin * min(self.narrowing_growth, max(1.0, 4 * self.tolerance / width))

    def unsettled(self) -> RateVerdict | None:
        """A rate whose verdict the next probe must confirm before the search acts on it:
        a miss that a pass above it contradicts; a miss that bounds a bracket and is still
        within the noise (narrowing under a false miss would cap the answer for good); and,
        once the bracket is nearly closed, its lower end while still within the noise.
        Far from the knee a probe's verdict is clear; confirming there would only spend
        probes."""
        if self.noise <= 0:
            return None
        verdicts = self.verdicts()
        upper, lower = self._upper_verdict(verdicts), self._lower_verdict(verdicts)
        if upper is not None and upper.count <= self.max_confirm:
            if any(v.slo_met and v.rate > upper.rate for v in verdicts):
                return upper
        if upper is None or lower is None:
            return None
        if not upper.settled:
            return upper
        if upper.rate - lower.rate > 2 * self.tolerance * upper.rate:
            return None
        return next((v for v in (upper, lower) if not v.settled), None)

    @property
    def interval(self) -> tuple[float, float | None] | None:
        """Where this deployment's capacity lies: (highest pass, lowest miss or the rate the
        client could not drive); (0, miss) when nothing passed; (pass, None) when unbounded."""
        lower, bound = self.lower, self.bound
        if lower is None and bound is None:
            return None
        return (lower.rate if lower else 0.0, bound.rate if bound else None)

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
        when the client was the limit, that the server holds up to what the client drives).
        Under a noise model its ends must also be confirmed, unless the probes ran out: the
        bracket then stands, unconfirmed."""
        lower, bound = self.lower, self.bound
        return (
            lower is not None
            and bound is not None
            and bound.rate - lower.rate <= self.tolerance * bound.rate
            and (self.unsettled() is None or len(self.probes) >= self.max_probes)
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
        return (
            bound is not None and bound.rate <= self.min_rate and self.unsettled() is None
        )  # nothing to search below

    def next_rate(self) -> float | None:
        if self.done:
            return None
        if not self.probes:
            return self._clamp(self.start_rate)
        pending = self.unsettled()
        if pending is not None:  # confirm an end of the bracket before moving it
            return pending.rate
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
        return reciprocal_crossing(a, b) if a.rate < b.rate and b.ratio > a.ratio else None

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
            estimate = min(high, max(low, self._chord(lower, upper)))
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


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def reciprocal_crossing(a: Probe, b: Probe) -> float:
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


def _log_crossing(a: Probe, b: Probe) -> float:
    """The rate where the line through (rate, log ratio) of `a` and `b` reaches 0.

    The bracket's ends lie on either side of the limit. On a queueing server 1/ratio falls
    about linearly in the rate (`reciprocal_crossing`); on a batching server latency is flat until
    the batch fills and then a queue as long as the window, so a miss past the knee reads
    1/ratio ~ 0 however far past it lies, and the 1/ratio chord lands next to the miss
    (on benchmarks/capacity_second_sim.py's grid it over-estimated by 9% in the median).
    Log ratio weighs how far each end lies from the limit by factors, and lands between.
    """
    assert a.ratio and b.ratio  # callers pass probes with margins
    la, lb = math.log(a.ratio), math.log(b.ratio)
    if la == lb:
        return (a.rate + b.rate) / 2
    return a.rate - la / (lb - la) * (b.rate - a.rate)
