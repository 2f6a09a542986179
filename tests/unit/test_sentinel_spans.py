"""Sentinels between a long configuration's points (points/sentinel.py `with_sentinels`,
runner/sentinel.py): each is read against the reading before it, and a change marks only the
points between the two readings that disagree; the last also reads the whole configuration,
so a drift in steps too small to flag one by one still marks every point.

The runner runs with fake seams; each point's requests are made at a time per token the test
sets per point, with a 5% lognormal scatter (the sentinel's own rule is graded on recorded
windows in tests/unit/test_sentinel.py). At the end, the chain as a whole is graded on
recorded windows of this machine: A/A inside steady spells, and a planted step."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

from tunebench.points.cells import RequestSample
from tunebench.points.sentinel import sentinel_after, sentinel_of, with_sentinels
from tunebench.runner import ConfigRunner, PointRules
from tunebench.runner.measuring import PointExtras
from tunebench.seams.progress import SilentReporter
from tunebench.spec.models import Metrics
from tunebench.spec.plan import LoadPoint, ServerConfig
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore, read_points
from tunebench.testing import FakeDeployment, FakeLoadDriver

CONFIG = ServerConfig("c1", "max-num-seqs=4", "m", None, {"max-num-seqs": 4}, {"max-num-seqs": 4})
TEN = [LoadPoint(f"concurrent-{n}", "concurrent", n, 40.0, None, None) for n in range(1, 11)]
STEADY = 2.0  # ms per output token


def _requests(level_ms: float, seed: int, start: float) -> list[RequestSample]:
    """80 requests one after another, each 0.1 s long, at `level_ms` per token."""
    rng = random.Random(seed)
    return [
        {
            "start_time": start + 0.1 * i,
            "end_time": start + 0.1 * (i + 1),
            "itl_ms": level_ms * rng.lognormvariate(0, 0.05),
        }
        for i in range(80)
    ]


def _run(
    tmp_path,
    levels: dict[str, float],
    every: int = 4,
    fail_at: str | None = None,
    cut: dict[str, int] | None = None,
):
    """One configuration of TEN with sentinels every `every`; `levels` sets a point's (or a
    sentinel's, by its id) time per token, STEADY otherwise; `cut` keeps only a point's first
    requests."""
    made = {"count": 0}

    def samples(point: LoadPoint) -> list[RequestSample]:
        made["count"] += 1
        level = levels.get(point.point_id, STEADY)
        requests = _requests(level, made["count"], 100.0 * made["count"])
        return requests[: (cut or {}).get(point.point_id, len(requests))]

    driver = FakeLoadDriver(samples=samples, fail_at=fail_at)
    store = RunStore.create(
        tmp_path, RunKind.SWEEP, "t", varied_args=["max-num-seqs"], versions={}, host={}
    )
    runner = ConfigRunner(
        store,
        FakeDeployment(),
        lambda config: driver,
        Metrics(enabled=False),
        SilentReporter(),
        PointRules(),
        extras=PointExtras(sentinel_seconds=10.0, sentinel_every=every, sentinel_every_s=0),
    )
    outcome = runner.run(CONFIG, TEN)
    marked = {
        r["point_id"]: r["unverified_reason"]
        for r in read_points(store.path)
        if "machine speed changed" in (r.get("unverified_reason") or "")
    }
    return outcome, store.manifest.config("c1"), driver, marked


def _number(point_id: str) -> int:
    return int(point_id.rsplit("-", 1)[1])


def test_sentinels_go_after_every_fourth_point_while_two_or_more_follow():
    ids = [p.point_id for p in with_sentinels(TEN, 10.0, 4, 0)]
    assert ids == [
        *[f"concurrent-{n}" for n in range(1, 5)],
        "concurrent-1~sentinel@concurrent-4",
        *[f"concurrent-{n}" for n in range(5, 9)],
        "concurrent-1~sentinel@concurrent-8",
        "concurrent-9",
        "concurrent-10",
        "concurrent-1~sentinel",
    ]
    # nine points: no sentinel after the 8th with one point left, the last one follows it
    assert [p.point_id for p in with_sentinels(TEN[:9], 10.0, 4, 0)][-3:] == [
        "concurrent-8",
        "concurrent-9",
        "concurrent-1~sentinel",
    ]
    # four points, or neither rule: one sentinel, after the last
    assert [p.point_id for p in with_sentinels(TEN[:4], 10.0, 4, 0)][4:] == [
        "concurrent-1~sentinel"
    ]
    assert len(with_sentinels(TEN, 10.0, 0, 0)) == 11
    assert with_sentinels(TEN, None, 4, 0) == TEN
    sentinel = with_sentinels(TEN, 10.0, 4, 0)[4]
    assert sentinel.max_seconds == 10.0 and sentinel.target == 1
    assert sentinel_of(sentinel.point_id) == "concurrent-1"
    assert sentinel_after(sentinel.point_id) == "concurrent-4"
    assert sentinel_after("concurrent-1~sentinel") is None
    assert sentinel_of("concurrent-4") is None


def test_by_default_a_sentinel_goes_between_points_every_two_minutes_of_windows():
    """The default (`machine.sentinel_every_s: 120`, no count): ten 40-s points get one after
    the 3rd and the 6th (the 9th has one point after it); ten 5-s points (50 s in all) and the
    demo's four 10-s points only the last; a point without max_seconds counts no time."""
    ids = [p.point_id for p in with_sentinels(TEN, 10.0)]
    assert [i for i in ids if sentinel_of(i)] == [
        "concurrent-1~sentinel@concurrent-3",
        "concurrent-1~sentinel@concurrent-6",
        "concurrent-1~sentinel",
    ]
    short = [dataclasses.replace(p, max_seconds=5.0) for p in TEN]
    assert len(with_sentinels(short, 10.0)) == 11
    demo = [dataclasses.replace(p, max_seconds=10.0) for p in TEN[:4]]
    assert len(with_sentinels(demo, 10.0)) == 5
    unbounded = [dataclasses.replace(p, max_seconds=None, max_requests=100) for p in TEN]
    assert len(with_sentinels(unbounded, 10.0)) == 11


def test_a_steady_machine_marks_nothing_and_every_sentinel_is_kept(tmp_path):
    outcome, entry, driver, marked = _run(tmp_path, {})
    assert outcome.status == "complete" and outcome.points_done == 10
    assert marked == {}
    assert [r.get("after") for r in entry.sentinels] == [
        "concurrent-4",
        "concurrent-8",
        "concurrent-10",
    ]
    assert [r["against"] for r in entry.sentinels] == [
        "concurrent-1",
        "concurrent-1~sentinel@concurrent-4",
        "concurrent-1~sentinel@concurrent-8",
    ]
    assert entry.sentinels[1]["points"] == [f"concurrent-{n}" for n in range(5, 9)]
    assert all(r["held"] and not r.get("marked") for r in entry.sentinels)
    # the first sentinel is read against the first point already; the later ones also are
    assert "first_held" not in entry.sentinels[0]
    assert [r["first_held"] for r in entry.sentinels[1:]] == [True, True]
    assert entry.sentinel == entry.sentinels[-1]
    # the sentinels ran where they were planned, and are no rows
    assert driver.ran[4] == "concurrent-1~sentinel@concurrent-4"
    assert len(driver.ran) == 13


def test_a_machine_that_slowed_for_good_marks_the_points_from_the_change_on(tmp_path):
    """Slower from point 7 to the end: the span of points 5-8 holds the change (its readings
    disagree); points 9-10 ran on a machine that held still, 50% slower than the
    configuration's first point (their readings agree with each other, not with it)."""
    slow = {f"concurrent-{n}": 3.0 for n in range(7, 11)}
    slow["concurrent-1~sentinel@concurrent-8"] = 3.0
    slow["concurrent-1~sentinel"] = 3.0
    _, entry, _, marked = _run(tmp_path, slow)
    assert sorted(marked, key=_number) == [f"concurrent-{n}" for n in range(5, 11)]
    assert (
        "the sentinel after concurrent-8 (a repeat of concurrent-1) decoded 50% slower than "
        "its repeat after concurrent-4" in marked["concurrent-5"]
    ), marked["concurrent-5"]
    assert re.search(
        r"the sentinel after concurrent-10 \(a repeat of concurrent-1\) decoded (49|5\d)% slower "
        r"than concurrent-1 itself",
        marked["concurrent-9"],
    ), marked["concurrent-9"]
    assert [r["held"] for r in entry.sentinels] == [True, False, True]
    assert [r.get("marked", False) for r in entry.sentinels] == [False, True, True]
    assert entry.sentinels[-1]["first_held"] is False


def test_a_slowdown_between_two_sentinels_that_ended_before_the_second_is_left_to_the_windows(
    tmp_path,
):
    """Points 6 and 7 slowed, every reading at one speed: the sentinels see no change (each
    point's own window test is what judges it)."""
    _, entry, _, marked = _run(tmp_path, {"concurrent-6": 3.0, "concurrent-7": 3.0})
    assert marked == {}
    assert all(r["held"] for r in entry.sentinels)


def test_a_first_point_slowed_throughout_marks_every_point(tmp_path):
    """A change between configurations lands on the next one's first point: every later
    reading agrees with the others, not with it. Whether the first point was slowed or the
    machine sped up after it, the sentinels cannot tell, so no point is left verified."""
    _, entry, _, marked = _run(tmp_path, {"concurrent-1": 3.0})
    assert sorted(marked, key=_number) == [p.point_id for p in TEN]
    assert "than concurrent-1 itself" in marked["concurrent-1"]
    assert re.search(r"3\d% faster", marked["concurrent-1"]), marked["concurrent-1"]
    assert [r["held"] for r in entry.sentinels] == [False, True, True]


def test_a_drift_in_steps_too_small_to_flag_marks_the_points_once_it_adds_up(tmp_path):
    """12% slower at each sentinel: no span moves the 20% a change needs; against the first
    point, the second sentinel is 25% slower and the last 40%."""
    steps = {
        "concurrent-1~sentinel@concurrent-4": 2.24,
        **{f"concurrent-{n}": 2.24 for n in range(5, 9)},
        "concurrent-1~sentinel@concurrent-8": 2.51,
        "concurrent-9": 2.51,
        "concurrent-10": 2.81,
        "concurrent-1~sentinel": 2.81,
    }
    _, entry, _, marked = _run(tmp_path, steps)
    assert [r["held"] for r in entry.sentinels] == [True, True, True]
    assert sorted(marked, key=_number) == [f"concurrent-{n}" for n in range(5, 11)]
    assert "than concurrent-1 itself" in marked["concurrent-5"]
    assert [r.get("first_held") for r in entry.sentinels] == [None, False, False]


def test_one_sentinel_after_the_last_marks_every_point_as_before(tmp_path):
    _, entry, driver, marked = _run(tmp_path, {"concurrent-1~sentinel": 3.0}, every=0)
    assert len(driver.ran) == 11 and len(entry.sentinels) == 1
    assert "after" not in entry.sentinels[0] and "first_held" not in entry.sentinels[0]
    assert sorted(marked) == sorted(p.point_id for p in TEN)
    assert (
        "the sentinel (a repeat of concurrent-1 after the last point) decoded 50% slower"
        in marked["concurrent-1"]
    )


def test_a_sentinel_between_points_that_failed_fails_the_configuration(tmp_path):
    """Points were still to come: unlike the last sentinel (the configuration is complete
    then, tests/unit/test_runner.py), the configuration failed at it, its points stored."""
    failed = "concurrent-1~sentinel@concurrent-4"
    outcome, entry, _, _ = _run(tmp_path, {}, fail_at=failed)
    assert outcome.status == "failed" and outcome.points_done == 4
    assert entry.failed_point == failed
    assert f"(point {failed} not measured)" in entry.error


def test_the_estimate_counts_every_sentinel():
    """`--dry-run` pays each sentinel's seconds and overhead: ten points, a sentinel after the
    4th, the 8th and the last, against one after the last."""
    from pathlib import Path

    from tests.unit.test_plan import BASE
    from tunebench.spec.loading import validate_spec
    from tunebench.spec.plan import build_plan
    from tunebench.sweep.estimate import POINT_OVERHEAD_S, estimate_seconds

    ten = {"kind": "concurrent", "streams": list(range(1, 11)), "max_seconds": 40}

    def estimate(every: int) -> float:
        machine = {"sentinel_every": every, "sentinel_every_s": 0, "sentinel_seconds": 10}
        load = {**BASE["load"], "profiles": [ten]}
        spec = validate_spec({**BASE, "load": load, "machine": machine}, Path("x.yaml"))
        return estimate_seconds(spec, build_plan(spec, Path("x.yaml")))

    assert estimate(4) - estimate(0) == 2 * (10 + POINT_OVERHEAD_S)


def test_a_sentinel_too_thin_to_compare_leaves_its_points_to_the_next_one(tmp_path):
    """The sentinel after concurrent-4 finished too few requests: it says so, and the one
    after concurrent-8 is read against concurrent-1 and judges points 1-8."""
    thin = "concurrent-1~sentinel@concurrent-4"
    _, entry, _, marked = _run(
        tmp_path, {"concurrent-1~sentinel@concurrent-8": 3.0}, cut={thin: 10}
    )
    records = entry.sentinels
    assert "sentinel not compared: the sentinel has" in records[0]["note"]
    assert records[1]["against"] == "concurrent-1"
    assert records[1]["points"] == [f"concurrent-{n}" for n in range(1, 9)]
    assert records[1]["held"] is False
    # points 1-8 by the second sentinel; 9-10 because the last one moved back from it
    assert sorted(marked, key=_number) == [p.point_id for p in TEN]


# -- the chain graded on recorded windows --------------------------------------------------


@pytest.fixture(scope="module")
def chains() -> list[tuple[list[dict], list[list[dict]]]]:
    """From the stability recordings of this machine (one server, one stream, constant load),
    inside one steady spell (tests/unit/test_sentinel.py's rule): a 20-s first point, then
    three sentinels 30 s apart, each cut at its request cap as a sweep runs it."""
    from tests.unit.test_sentinel import _cut, _spells, _window
    from tests.unit.test_steadiness import RECORDINGS, _requests

    rng = random.Random(5)
    out = []
    for name in RECORDINGS:
        rows = _requests(name)
        for begin, end in _spells(rows):
            length = 20 + 3 * 30
            for _ in range(int((end - begin) // 6)):
                if end - begin < length + 5:
                    continue
                start = rng.uniform(begin, end - length)
                sentinels = [_cut(_window(rows, start + 40 + 30 * k, 10), True) for k in range(3)]
                out.append((_window(rows, start, 20), sentinels))
    assert len(out) >= 40, len(out)
    return out


def _marks(tmp_path, first: list[dict], sentinels: list[list[dict]]) -> bool:
    """Whether runner/sentinel.py marks any point of a configuration whose first point and
    sentinels (two between points, one after the last) read these windows."""
    from tunebench.runner.sentinel import SentinelSpans, judge_sentinel
    from tunebench.seams.load import ClientResult

    store = RunStore.create(tmp_path, RunKind.SWEEP, "t", varied_args=[], versions={}, host={})
    spans = SentinelSpans()
    spans.measured("concurrent-1", first)
    ids = ["concurrent-1~sentinel@concurrent-1", "concurrent-1~sentinel@concurrent-2"]
    for number, (point_id, samples) in enumerate(zip([*ids, "concurrent-1~sentinel"], sentinels)):
        if number:
            spans.measured(f"concurrent-{number + 1}", [])
        point = LoadPoint(point_id, "concurrent", 1, 10, None, None)
        result = ClientResult(point, point_id, {}, 0.0, 1.0, samples=samples)
        judge_sentinel(store, SilentReporter(), "c1", 1, "concurrent-1", spans, result)
    entry = store.manifest.config("c1")
    assert entry is not None and entry.sentinels is not None and len(entry.sentinels) == 3
    return any(r.get("marked") for r in entry.sentinels)


def test_a_chain_of_sentinels_on_a_steady_spell_marks_little(tmp_path, chains):
    """A/A: five comparisons per configuration (each sentinel against the one before, the
    later two against the first point too). Measured: 1 of 80 chains marked."""
    marked = sum(_marks(tmp_path / str(i), a, b) for i, (a, b) in enumerate(chains))
    assert marked / len(chains) <= 0.05, (marked, len(chains))


@pytest.mark.parametrize("slowdown, least_found", [(0.3, 0.9), (0.5, 0.95)])
def test_a_step_after_the_first_sentinel_is_marked(tmp_path, chains, slowdown, least_found):
    """The same chains with the second and third sentinels slowed (a step that lasted).
    Measured: 80 of 80 at 30% and at 50%."""
    found = 0
    for i, (first, sentinels) in enumerate(chains):
        slowed = [[{**r, "itl_ms": r["itl_ms"] * (1 + slowdown)} for r in w] for w in sentinels[1:]]
        found += _marks(tmp_path / str(i), first, [sentinels[0], *slowed])
    assert found / len(chains) >= least_found, (found, len(chains))
