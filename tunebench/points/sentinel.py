"""The A...A sentinel: a configuration's first load point measured again, short, after its
last. Nothing about the load differs between the two, so a difference in the time per
output token beyond their noise is the machine's: it did not hold its speed while the
configuration was measured, and every point of it is unverified.

A long configuration gets sentinels between its points too (A, points, A, points, ..., A:
every `every_s` seconds of planned windows, or `every` points). runner/sentinel.py reads
each against the reading before it and against the first point, and marks only the points
since the reading before: on a machine that wanders over minutes, one sentinel at the end
of a ten-point configuration marks all ten for a change that came after the eighth.

The two windows are read as the steadiness test reads one (points/steadiness.py): their
first waves left out (each window starts every stream at once), bins of equal count, each
bin's median log time per token, the noise from neighbouring bins of both windows. A change
counts when it is beyond `THRESHOLD_Z` noise units and at least `LEAST_CHANGE` (the same
20%: windows of a steady spell of this machine differ by up to 13-20%;
tests/unit/test_sentinel.py grades the rule on pairs of recorded windows).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tunebench.points.cells import SampleView
from tunebench.points.records import SentinelRecord
from tunebench.points.steadiness import (
    LEAST_CHANGE,
    LEAST_PER_BIN,
    THRESHOLD_Z,
    after_first_wave,
    bin_levels,
    noise,
    per_token_series,
)
from tunebench.spec.load_kind import LoadKind
from tunebench.spec.measure_settings import DEFAULT_SENTINEL_EVERY_S
from tunebench.spec.plan import LoadPoint

#: A sentinel's point id: its first point's, with this after it.
SENTINEL_SUFFIX = "~sentinel"
#: Bins per window, and the fewest a window must fill.
BINS = 8
LEAST_BINS = 4
#: A sentinel ends after this many requests past its first wave, or at its seconds, whichever
#: comes first: 8 bins of 8. A fast configuration needs no more to be judged
#: (tests/unit/test_sentinel.py grades the rule on sentinels cut there), and every second it
#: does not run is a second of the sweep saved; a slow one runs its full seconds.
SENTINEL_REQUESTS = 64


@dataclass(frozen=True)
class SentinelVerdict:
    held: bool
    change: float  # the sentinel's time per token over the first point's, minus one
    z: float
    first_requests: int
    sentinel_requests: int
    # not flagged, yet 20% apart or more: within the windows' own noise, the sentinel cannot
    # say whether the machine held (its points keep the other evidence's verdicts)
    inconclusive: bool = False

    def describe(self, point_id: str, after: str | None = None, against: str | None = None) -> str:
        """`after`: the point a sentinel between points followed (None: the only sentinel,
        after the last point); `against`: the reading it was compared with, when not
        `point_id` itself (the sentinel before it)."""
        way = "slower" if self.change > 0 else "faster"
        size = f"{abs(self.change):.0%} {way}"
        if after is None:
            return (
                f"the sentinel (a repeat of {point_id} after the last point) decoded "
                f"{size} than {point_id} itself ({self.z:.1f} noise units)"
            )
        than = (
            f"{point_id} itself"
            if against in (None, point_id)
            else f"its repeat after {sentinel_after(against)}"
        )
        return (
            f"the sentinel after {after} (a repeat of {point_id}) decoded {size} than {than} "
            f"({self.z:.1f} noise units)"
        )

    def as_record(self) -> SentinelRecord:
        record: SentinelRecord = {
            "held": self.held,
            "change_pct": round(100 * self.change, 1),
            "z": self.z,
            "first_requests": self.first_requests,
            "sentinel_requests": self.sentinel_requests,
        }
        if self.inconclusive:
            record["inconclusive"] = True
        return record


def _series(samples: Sequence[SampleView]) -> list[tuple[float, float]]:
    return per_token_series(after_first_wave(samples))


def _levels(samples: Sequence[SampleView]) -> list[float] | str:
    series = _series(samples)
    bins = min(BINS, len(series) // LEAST_PER_BIN)
    if bins < LEAST_BINS:
        return (
            f"{len(series)} requests with timings after the first wave "
            f"({LEAST_BINS * LEAST_PER_BIN} needed)"
        )
    return [level for _, _, level in bin_levels(series, bins)]


def readable(samples: Sequence[SampleView]) -> bool:
    """Whether a window has the requests a sentinel comparison needs."""
    return not isinstance(_levels(samples), str)


def sentinel_verdict(
    first: Sequence[SampleView],
    sentinel: Sequence[SampleView],
    threshold_z: float = THRESHOLD_Z,
    least_change: float = LEAST_CHANGE,
) -> SentinelVerdict | str:
    """Whether the machine held its speed between the two windows, or why it cannot say."""
    a, b = _levels(first), _levels(sentinel)
    if isinstance(a, str) or isinstance(b, str):
        which = "the first point" if isinstance(a, str) else "the sentinel"
        return f"sentinel not compared: {which} has {a if isinstance(a, str) else b}"
    sd = math.sqrt((noise(a) ** 2 + noise(b) ** 2) / 2)
    diff = statistics.fmean(b) - statistics.fmean(a)
    z = diff / (sd * math.sqrt(1 / len(a) + 1 / len(b)))
    change = math.exp(diff) - 1
    large = math.exp(abs(diff)) - 1 >= least_change
    moved = abs(z) > threshold_z and large
    return SentinelVerdict(
        held=not moved,
        change=round(change, 4),
        z=round(abs(z), 2),
        first_requests=len(_series(first)),
        sentinel_requests=len(_series(sentinel)),
        inconclusive=large and not moved,
    )


def sentinel_point(
    fixed: list[LoadPoint], seconds: float | None, after: str | None = None
) -> LoadPoint | None:
    """The first fixed point again, at most `seconds` long and `SENTINEL_REQUESTS` past its
    first wave (a concurrent point's streams: every one starts at once), for a configuration
    of two or more fixed points of a repeatable kind; None when there is nothing to repeat.
    `after`: the point a sentinel between points follows (None: the last sentinel)."""
    if seconds is None or len(fixed) < 2:
        return None
    first = fixed[0]
    if first.kind not in LoadKind.REPEATABLE or first.trace is not None:
        return None
    window = min(seconds, first.max_seconds) if first.max_seconds else seconds
    first_wave = int(first.target or 1) if first.kind in LoadKind.STREAM else 1
    return dataclasses.replace(
        first,
        point_id=first.point_id + SENTINEL_SUFFIX + (f"@{after}" if after else ""),
        max_seconds=window,
        max_requests=first_wave + SENTINEL_REQUESTS,
        warmup=None,
        cooldown=None,
    )


def with_sentinels(
    fixed: list[LoadPoint],
    seconds: float | None,
    every: int = 0,
    every_s: float = DEFAULT_SENTINEL_EVERY_S,
) -> list[LoadPoint]:
    """The fixed points in order with their sentinels placed: one after the last, and one
    between points once the points since the last reading number `every` (0: not by count)
    or planned `every_s` seconds of windows (0: not by time; a point without `max_seconds`
    counts none), while two or more points follow. Without a sentinel (`sentinel_point` is
    None) the points alone."""
    last = sentinel_point(fixed, seconds)
    if last is None:
        return list(fixed)
    out: list[LoadPoint] = []
    count, planned = 0, 0.0  # since the last reading
    for number, point in enumerate(fixed, start=1):
        out.append(point)
        count, planned = count + 1, planned + (point.max_seconds or 0.0)
        due = (every and count >= every) or (every_s and planned >= every_s)
        if due and number <= len(fixed) - 2:
            between = sentinel_point(fixed, seconds, after=point.point_id)
            assert between is not None  # the same points as `last`
            out.append(between)
            count, planned = 0, 0.0
    return [*out, last]


def sentinel_of(point_id: str) -> str | None:
    """The point a sentinel repeats, from the sentinel's id; None for a point that is not one."""
    head, found, _ = point_id.partition(SENTINEL_SUFFIX)
    return head if found else None


def sentinel_after(point_id: str) -> str | None:
    """The point a sentinel between points followed; None for the last sentinel (after the
    last point) and for a point that is not a sentinel."""
    _, found, tail = point_id.partition(SENTINEL_SUFFIX)
    return tail.removeprefix("@") or None if found else None
