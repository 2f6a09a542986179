"""Did the server hold its speed through one point's window? A test on the window's own
requests.

A load point's figures are means and percentiles over its window, which is right only when
the server ran at one speed throughout. A machine that slows down for part of a window (a
noisy neighbour, a throttled cgroup, a GPU dropping its clocks) leaves a window whose
requests are slower in one stretch than in the rest, and its percentiles describe neither
speed.

The test reads the time per output token of the window's requests in order of their middle
(a request decodes across its whole span), groups them into bins of equal count, and takes
each bin's median of the log time per token: a robust level per bin that a few slow
requests do not move. The bins' noise is estimated from the differences of neighbouring
bins (a level shift moves one difference, not the spread of all of them), and every
contiguous stretch of bins is compared with the rest of the window: a stretch that differs
by more than `THRESHOLD_Z` noise units and by at least `LEAST_CHANGE` is a change of speed,
reported with where it starts and by how much. One test covers a level shift (a stretch that
runs to an edge) and a passing slowdown (a stretch in the middle).

The window's first wave is left out of the test (not of the point's figures): the requests
sent before any request of the window had finished. A closed-loop point starts every stream's
prompt at once into a server that had nothing to do, and the load generator starts its
workers in the same moment, so those requests decode in a state the rest of the window never
returns to; on this machine's quiet demo runs they decoded up to 2.5 times as slow as the
window's median, and a test that read them called the load's own start a change of the machine
(benchmarks/drift_overhead.py). A machine that slows down stays slow past its first wave.

Time per token is read at equal batch. A server's step takes longer the more sequences it
decodes at once, so in an open-loop window (poisson, constant rate) near the knee a burst of
arrivals that fills the batch for a second or two slows every token of it, on a machine that
held its speed (on this machine: probes at 9-10 req/s whose stretch of a doubled batch ran
26% slower). Each request's batch is read from the window itself (the mean number of the
window's requests in flight while it decoded), each bin gets its median batch beside its
level, and the levels are taken at the window's mean batch with the slope of log time per
token on batch that neighbouring bins show (as the noise is: a level shift moves one neighbouring
difference, not the median of them). A machine that slows down keeps its own change: the
slope explains only what the batch did, and the rest stays. A closed loop runs one batch
throughout (its streams), and nothing is adjusted.

A window whose queue grew through it is not tested either: when the offered load outruns the
server (a capacity search's probe above the knee), the batch fills through the window and
every step decodes more sequences, so the time per token rises with the load on a machine
that held its speed. The requests alone cannot tell that from a machine that slowed until
the load outran it; the window says so, and the telemetry and the probe judge the machine.

`THRESHOLD_Z` was set on independent normal bins (5% false flags over all stretches) and is
graded on recorded windows of this machine it was not set on
(tests/unit/test_steadiness.py): the false-flag rate on steady recorded spells and the
detection rate of slowdowns planted into them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from tunebench.numbers import to_float
from tunebench.points.cells import SampleView

#: Bins a window is cut into (fewer when it holds fewer requests).
MAX_BINS = 16
#: Fewest requests a bin's median is read from, and fewest bins a test is made on.
LEAST_PER_BIN = 6
LEAST_BINS = 6
#: How many noise units a stretch must differ by: the 95th percentile of the largest |z|
#: over all stretches of independent normal bins, with the noise estimated as here
#: (6,000 draws each: 4.32 at 6 bins, 4.12 at 8, 4.24 at 12, 4.19 at 16); the estimate from
#: few neighbouring differences has heavy tails, hence far above a plain normal's 1.96.
THRESHOLD_Z = 4.3
#: A bin's level is never known closer than 1% (in log units): a floor under the noise.
NOISE_FLOOR = 0.01
#: Smallest change of speed in a stretch that counts, whatever its z: within spells whose 5-s
#: bins all lie within 10% of their median, halves of a 20-s window still differ by 13-20%
#: (tests/unit/test_steadiness.py); a change of 20% stands out of that wander.
LEAST_CHANGE = 0.20
#: Smallest change of the whole window's figures that counts: the change times the share of
#: the window that ran at the other speed (a 2-s hiccup 20% slower moves a 20-s window's mean
#: by 2%; a spell 43% slower over a third of it, by 14%). On this machine's steady
#: recordings 20-30% of 20-s windows hold a 2-4-s stretch 20% off the rest: real, but too
#: short to move a figure.
LEAST_IMPACT = 0.05
#: Neighbouring bins whose median batch differs by at least this (one sequence) say how
#: time per token follows the batch; fewer than `LEAST_SLOPE_PAIRS` such pairs: no slope.
LEAST_BATCH_STEP = 1.0
LEAST_SLOPE_PAIRS = 3
#: The slope of log time per token on the batch (per sequence) lies in [0, this]: a step
#: never gets faster with more sequences, and one more sequence never makes it a quarter
#: longer (a step of t0 + b x n grows by b / (t0 + b x n) a sequence; the embedded model's
#: ITL on this CPU, 3.2 / 6.0 / 7.2 / 11.3 ms at 1 / 8 / 16 / 32 streams, gives 0.09, 0.02
#: and 0.03 a sequence between them).
MAX_BATCH_SLOPE = 0.25
#: A queue that grew through the window: its last quarter of requests waited this many times
#: as long for their first token as its first quarter (median TTFT). Measured on this
#: machine: 0.9-1.2 on the demo's windows (closed loops above max-num-seqs included, whose
#: queue is long but steady), 23-45 on capacity probes above the knee.
QUEUE_GROWTH = 3.0


@dataclass(frozen=True)
class Steadiness:
    """The verdict on one window: the stretch `from_s`-`to_s` (seconds from the window's
    start) that differs most from the rest. `change` is the slower part's time per token over
    the faster part's, minus one (0.43: 43% slower): positive when the stretch is the slower
    part, negative when the rest of the window is."""

    steady: bool
    change: float
    share: float  # of the window's requests inside the stretch
    z: float
    from_s: float
    to_s: float
    requests: int
    bins: int
    # log time per token per sequence the levels were adjusted by (0: not adjusted)
    batch_slope: float = 0.0

    def describe(self) -> str:
        where = "inside" if self.change > 0 else "outside"
        batch = ", at equal batch" if self.batch_slope > 0 else ""
        return (
            f"{abs(self.change):.0%} slower {where} t={self.from_s:.0f}-{self.to_s:.0f} s of "
            f"the window ({self.z:.1f} noise units, {self.requests} requests after the first wave, "
            f"in {self.bins} bins{batch})"
        )


def _per_token_ms(sample: SampleView) -> float | None:
    """Time per output token of one request: its inter-token latency, else its TPOT."""
    for key in ("itl_ms", "tpot_ms"):
        value = to_float(sample.get(key))
        if value is not None and value > 0 and math.isfinite(value):
            return value
    return None


def per_token_series(samples: Iterable[SampleView]) -> list[tuple[float, float]]:
    """(middle time, log time per token) of every request that has both, in time order."""
    out = []
    for sample in samples:
        per_token, span = _per_token_ms(sample), _span(sample)
        if per_token is None or span is None:
            continue
        out.append(((span[0] + span[1]) / 2, math.log(per_token)))
    out.sort()
    return out


def _span(sample: SampleView) -> tuple[float, float] | None:
    start, end = to_float(sample.get("start_time")), to_float(sample.get("end_time"))
    if start is None or end is None or end < start:
        return None
    return start, end


def batch_series(
    settled: Sequence[SampleView], everyone: Sequence[SampleView]
) -> list[tuple[float, float, float]]:
    """(middle time, log time per token, mean batch) of every request of `settled` that has
    them, in time order. A request's batch is the mean number of `everyone`'s requests
    in flight (started, not finished) over its decode (from its first token to its end;
    its whole span where the first token's time is unknown)."""
    spans = [span for s in everyone if (span := _span(s)) is not None]
    if not spans:
        return []
    times = np.array([t for span in spans for t in span])
    steps = np.array([1.0, -1.0] * len(spans))
    order = np.argsort(times, kind="stable")
    times, count = times[order], np.cumsum(steps[order])
    # the integral of the in-flight count up to each event
    area = np.concatenate(([0.0], np.cumsum(count[:-1] * np.diff(times))))

    def integral(t: float) -> float:
        k = int(np.searchsorted(times, t, side="right")) - 1
        return 0.0 if k < 0 else float(area[k] + count[k] * (t - times[k]))

    def in_flight(t: float) -> float:
        k = int(np.searchsorted(times, t, side="right")) - 1
        return 0.0 if k < 0 else float(count[k])

    out = []
    for sample in settled:
        per_token, span = _per_token_ms(sample), _span(sample)
        if per_token is None or span is None:
            continue
        start, end = span
        ttft = to_float(sample.get("ttft_ms"))
        decode_from = start
        if ttft is not None and 0 < ttft / 1000 < end - start:
            decode_from = start + ttft / 1000
        if end > decode_from:
            batch = (integral(end) - integral(decode_from)) / (end - decode_from)
        else:
            batch = in_flight(decode_from)
        out.append(((start + end) / 2, math.log(per_token), max(batch, 1.0)))
    out.sort()
    return out


def batch_slope(levels: Sequence[float], batches: Sequence[float]) -> float:
    """How log time per token follows the batch across the window, from neighbouring bins
    whose batch moved: the median of their ratios, within [0, `MAX_BATCH_SLOPE`]; 0 when
    too few neighbours moved to tell (a closed loop's steady batch)."""
    ratios = [
        (lb - la) / (bb - ba)
        for la, lb, ba, bb in zip(levels, levels[1:], batches, batches[1:])
        if abs(bb - ba) >= LEAST_BATCH_STEP
    ]
    if len(ratios) < LEAST_SLOPE_PAIRS:
        return 0.0
    return min(MAX_BATCH_SLOPE, max(0.0, statistics.median(ratios)))


def after_first_wave(samples: Sequence[SampleView]) -> list[SampleView]:
    """The window's requests that started once one of its requests had finished: the first
    wave (every request already in flight when the first answer came back) left out."""
    ends = [to_float(s.get("end_time")) for s in samples]
    known = [end for end in ends if end is not None]
    if not known:
        return list(samples)
    first_end = min(known)
    return [
        s
        for s in samples
        if (start := to_float(s.get("start_time"))) is not None and start >= first_end
    ]


def queue_growth(samples: Sequence[SampleView]) -> float | None:
    """How much longer the window's last quarter of requests (by start) waited for their
    first token than its first quarter: median over median; None with too few to tell.
    Where every request's prompt length is known the wait is per prompt token, so prompts
    that grow through the window (a session's later turns carry its history) are no queue."""
    waits = []
    for sample in samples:
        start, ttft = to_float(sample.get("start_time")), to_float(sample.get("ttft_ms"))
        if start is not None and ttft is not None and ttft > 0:
            waits.append((start, ttft, to_float(sample.get("prompt_tokens")) or 0.0))
    per_token = all(prompt > 0 for _, _, prompt in waits)
    timed = sorted((start, ttft / prompt if per_token else ttft) for start, ttft, prompt in waits)
    quarter = len(timed) // 4
    if quarter < LEAST_PER_BIN:
        return None
    first = statistics.median(t for _, t in timed[:quarter])
    last = statistics.median(t for _, t in timed[-quarter:])
    return last / first


def bin_levels(series: list[tuple[float, float]], bins: int) -> list[tuple[float, float, float]]:
    """(first time, last time, median level) of `bins` consecutive groups of equal count."""
    n = len(series)
    edges = [round(i * n / bins) for i in range(bins + 1)]
    out = []
    for a, b in zip(edges, edges[1:]):
        group = series[a:b]
        out.append((group[0][0], group[-1][0], statistics.median(v for _, v in group)))
    return out


def noise(levels: list[float]) -> float:
    """The bins' own spread, from neighbouring differences: sd of one bin's level, never under
    `NOISE_FLOOR` (bins of identical medians would make every difference infinitely sure)."""
    diffs = [abs(b - a) for a, b in zip(levels, levels[1:])]
    # the median absolute difference of two independent normals is 0.6745 * sqrt(2) sd
    return max(NOISE_FLOOR, statistics.median(diffs) / (0.6745 * math.sqrt(2)))


def stretches(levels: list[float]) -> list[tuple[int, int, float, float]]:
    """Every contiguous stretch [a, b) of two or more bins that leaves two or more outside,
    with the difference of its mean level from the rest's and that difference in noise
    units: (a, b, difference, z). One bin alone is one median: its outliers are noise, not a
    spell."""
    sd = noise(levels)
    count = len(levels)
    prefix = [0.0]
    for level in levels:
        prefix.append(prefix[-1] + level)
    total = prefix[-1]
    out = []
    for a in range(count):
        for b in range(a + 2, count - 1 if a == 0 else count + 1):
            inside = b - a
            outside = count - inside
            if outside < 2:
                continue
            diff = (prefix[b] - prefix[a]) / inside - (total - prefix[b] + prefix[a]) / outside
            scale = sd * math.sqrt(1 / inside + 1 / outside)
            z = diff / scale
            out.append((a, b, diff, z))
    return out


def steadiness(
    samples: Sequence[SampleView],
    window_start: float | None = None,
    threshold_z: float = THRESHOLD_Z,
    least_change: float = LEAST_CHANGE,
    least_impact: float = LEAST_IMPACT,
) -> Steadiness | str:
    """The steadiness verdict on a window's requests after its first wave, or why none could
    be reached."""
    settled = after_first_wave(samples)
    # a closed loop's first wave queues up from nothing: its waits are no growth either
    growth = queue_growth(settled)
    if growth is not None and growth >= QUEUE_GROWTH:
        return (
            f"steadiness not tested: the queue grew through the window (TTFT x{growth:.0f} "
            "from its first quarter of requests to its last): the load outran the server, "
            "whose time per token rises as its batch fills"
        )
    timed = batch_series(settled, samples)
    series = [(middle, level) for middle, level, _ in timed]
    bins = min(MAX_BINS, len(series) // LEAST_PER_BIN)
    if bins < LEAST_BINS:
        return (
            f"steadiness not tested: {len(series)} requests with timings after the first "
            f"wave ({LEAST_BINS * LEAST_PER_BIN} needed)"
        )
    grouped = bin_levels(series, bins)
    batches = [level for _, _, level in bin_levels([(m, b) for m, _, b in timed], bins)]
    raw = [level for _, _, level in grouped]
    slope = batch_slope(raw, batches)
    centre = statistics.fmean(batches)
    # each bin's level at the window's mean batch
    levels = [level - slope * (batch - centre) for level, batch in zip(raw, batches)]
    candidates = stretches(levels)

    def impact(stretch: tuple[int, int, float, float]) -> float:
        """How far the window's mean is from the speed most of it ran at: the smaller
        part's share times the change."""
        a, b, diff, _ = stretch
        share = (b - a) / bins
        return (math.exp(abs(diff)) - 1) * min(share, 1 - share)

    # large enough to matter and beyond noise: of those, the one that fits best (the
    # largest z; the largest effect would stretch a spell into its noisy surroundings)
    beyond = [
        c
        for c in candidates
        if abs(c[3]) > threshold_z
        and math.exp(abs(c[2])) - 1 >= least_change
        and impact(c) >= least_impact
    ]
    chosen = max(beyond or candidates, key=lambda c: (abs(c[3]), c[2] > 0))
    a, b, diff, z = chosen
    origin = window_start if window_start is not None else series[0][0]
    return Steadiness(
        steady=not beyond,
        # how much slower the slower part ran; positive when that is the stretch itself
        change=round(math.copysign(math.exp(abs(diff)) - 1, diff), 4),
        share=round((b - a) / bins, 3),
        z=round(abs(z), 2),
        from_s=max(0.0, grouped[a][0] - origin),
        to_s=max(0.0, grouped[b - 1][1] - origin),
        requests=len(series),
        bins=bins,
        batch_slope=round(slope, 3),
    )
