"""points/sentinel.py: a configuration's first point against its repeat after the last.

Graded on pairs of real windows the rule was not set on, from the stability recordings of
this machine (one server, one stream, constant load, 10 minutes each):
- A/A: a 20-s window and a 10-s window 10-60 s later, both inside one steady spell (30-s
  bins within 10% of each other, benchmarks/machine_stability.py's rule): false flags
  <= 5%;
- power: the same pairs with the later window's time per token 30% or 50% longer.
Measured: 0 of 119 A/A pairs flagged (their own change: median 4.6%, 90th percentile 12%);
30% found in 92 of 119, 50% in 118; sized within 15 points in 108 and 102. The sentinel as a
sweep runs it, ended at its request cap (SENTINEL_REQUESTS past its first wave: about 6.5 of
these windows' 10 s): 2 of 119 A/A pairs flagged, 30% found in 95 and 50% in 117, sized in
106 and 99. Windows of a
steady spell of this machine still differ by up to 12%, so a 30% change is not always
beyond the 20% a flag needs: the sentinel catches large drifts, the probe and telemetry the
rest.
"""

from __future__ import annotations

import random
import statistics

import pytest

from tests.unit.test_steadiness import RECORDINGS, _requests
from tunebench.points.sentinel import SENTINEL_REQUESTS, SentinelVerdict, sentinel_verdict


def _window(rows: list[dict], start: float, seconds: float) -> list[dict]:
    return [r for r in rows if start <= r["start_time"] and r["end_time"] <= start + seconds]


def _spells(rows: list[dict], width: float = 30.0) -> list[tuple[float, float]]:
    """Runs of consecutive 30-s bins whose medians lie within 10% of each other
    (benchmarks/machine_stability.py's rule for a steady machine), as (start, end)."""
    first = rows[0]["start_time"]
    bins: dict[int, list[float]] = {}
    for r in rows:
        bins.setdefault(int((r["start_time"] - first) // width), []).append(r["itl_ms"])
    medians = [statistics.median(bins[k]) for k in sorted(bins)]
    spells, i = [], 0
    while i < len(medians):
        j = i + 1
        while j < len(medians) and max(medians[i : j + 1]) / min(medians[i : j + 1]) <= 1.10:
            j += 1
        if j - i >= 2:
            spells.append((first + i * width, first + j * width))
        i = j if j - i >= 2 else i + 1
    return spells


@pytest.fixture(scope="module")
def pairs() -> list[tuple[list[dict], list[dict]]]:
    """A 20-s window and a 10-s one 10-60 s after it, both inside one steady spell."""
    rng = random.Random(3)
    out = []
    for name in RECORDINGS:
        rows = _requests(name)
        for begin, end in _spells(rows):
            for _ in range(int((end - begin) // 6)):
                gap = rng.uniform(10, 60)
                if end - begin < 30 + gap:
                    continue
                start = rng.uniform(begin, end - 30 - gap)
                out.append((_window(rows, start, 20), _window(rows, start + 20 + gap, 10)))
    assert len(out) >= 40, len(out)
    return out


def _verdict(first: list[dict], sentinel: list[dict]) -> SentinelVerdict:
    verdict = sentinel_verdict(first, sentinel)
    assert isinstance(verdict, SentinelVerdict), verdict
    return verdict


def _cut(sentinel: list[dict], cut: bool) -> list[dict]:
    """The sentinel as a sweep runs it: ended at its request cap (one stream: a first wave of
    one, then SENTINEL_REQUESTS) when that comes before its 10 s."""
    ordered = sorted(sentinel, key=lambda r: r["start_time"])
    return ordered[: 1 + SENTINEL_REQUESTS] if cut else ordered


@pytest.mark.parametrize("cut", [False, True], ids=["10 s", "request cap"])
def test_pairs_from_a_steady_spell_agree(pairs, cut):
    flags = [v for v in (_verdict(a, _cut(b, cut)) for a, b in pairs) if not v.held]
    assert len(flags) / len(pairs) <= 0.05, (len(flags), len(pairs))


def test_the_request_cap_shortens_these_sentinels(pairs):
    """The recordings run about 10 requests a second: the cap ends their 10-s sentinels
    early, so the tests above grade a shorter window, not the same one."""
    cut = sum(len(b) > 1 + SENTINEL_REQUESTS for _, b in pairs)
    assert cut / len(pairs) >= 0.9, (cut, len(pairs))


@pytest.mark.parametrize("cut", [False, True], ids=["10 s", "request cap"])
@pytest.mark.parametrize("slowdown, least_found", [(0.3, 0.75), (0.5, 0.95)])
def test_a_slower_sentinel_is_found_and_sized(pairs, slowdown, least_found, cut):
    found = sized = 0
    for first, sentinel in pairs:
        slowed = [{**r, "itl_ms": r["itl_ms"] * (1 + slowdown)} for r in _cut(sentinel, cut)]
        verdict = _verdict(first, slowed)
        found += not verdict.held
        sized += abs(verdict.change - slowdown) <= 0.15
    assert found / len(pairs) >= least_found, (found, len(pairs))
    # cut at the cap, a sentinel sizes a 50% change within 15 points in 99 of 119 pairs
    # against 102 at 10 s; a cap of 32 requests sizes 91 and fails this, one of 24 the finding
    assert sized / len(pairs) >= (0.80 if cut else 0.85), (sized, len(pairs))


def test_too_few_requests_is_said_not_guessed():
    few = [{"start_time": i, "end_time": i + 1, "itl_ms": 2.0} for i in range(10)]
    many = [{"start_time": i, "end_time": i + 1, "itl_ms": 2.0} for i in range(60)]
    assert sentinel_verdict(many, few) == (
        "sentinel not compared: the sentinel has 9 requests with timings after the first wave "
        "(24 needed)"
    )


def test_the_verdict_describes_itself():
    verdict = SentinelVerdict(False, 0.42, 7.5, 200, 100)
    assert verdict.describe("concurrent-1") == (
        "the sentinel (a repeat of concurrent-1 after the last point) decoded 42% slower "
        "than concurrent-1 itself (7.5 noise units)"
    )
    assert verdict.as_record()["change_pct"] == 42.0


def test_every_repeats_sentinel_is_kept_in_the_manifest(tmp_path):
    """A later repeat's sentinel does not replace an earlier one's record: each is measured
    data (the last one stays in `sentinel` too)."""
    from tunebench.runner.sentinel import SentinelSpans, judge_sentinel
    from tunebench.seams.load import ClientResult
    from tunebench.seams.progress import SilentReporter
    from tunebench.spec.plan import LoadPoint
    from tunebench.store.run import RunStore

    rows = _requests(RECORDINGS[0])
    first, later = _window(rows, rows[0]["start_time"], 20), rows[200:300]
    store = RunStore.create(tmp_path, "sweep", "t", varied_args=[], versions={}, host={})
    point = LoadPoint("concurrent-1~sentinel", "concurrent", 1, 10, None, None)
    for repeat in (1, 2):
        result = ClientResult(
            point, point.point_id, {}, 1.0 * repeat, 2.0 * repeat, None, samples=later
        )
        spans = SentinelSpans()
        spans.measured("concurrent-1", first)
        judge_sentinel(store, SilentReporter(), "c1", repeat, "concurrent-1", spans, result)
    entry = store.manifest.config("c1")
    assert entry is not None and entry.sentinels is not None
    assert [r["repeat"] for r in entry.sentinels] == [1, 2]
    assert entry.sentinel == entry.sentinels[-1]
    assert all("change_pct" in r for r in entry.sentinels)


def test_a_large_change_within_the_windows_noise_is_said_unsure_not_held():
    """Two windows 46% apart whose own bins scatter more than that: not flagged (the A/A
    rule stands), but not 'held' either."""
    import itertools

    def window(level: float, spread: float) -> list[dict]:
        wobble = itertools.cycle([1 - spread, 1 + spread, 1 - spread / 2, 1 + spread / 2])
        return [
            {"start_time": i, "end_time": i + 1, "itl_ms": level * next(wobble)}
            for i in range(0, 96, 1)
        ]

    verdict = _verdict(window(2.0, 0.0), window(2.9, 0.0))
    assert not verdict.held and not verdict.inconclusive  # steady windows: a clear move
    noisy = sentinel_verdict(
        [
            {**r, "itl_ms": r["itl_ms"] * (3.0 if (i // 12) % 2 else 1.0)}
            for i, r in enumerate(window(2.0, 0.0))
        ],
        window(5.0, 0.0),
    )
    assert isinstance(noisy, SentinelVerdict)
    assert noisy.held and noisy.inconclusive and noisy.change >= 0.2, noisy
    assert noisy.as_record()["inconclusive"] is True
