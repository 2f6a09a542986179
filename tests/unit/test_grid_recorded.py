"""The recorded CPU grid (tests/fixtures/grid-cpu) through the interpolating recorded
deployment: the search logic on noise-free data (the truth here is the same interpolation
the search probes, so this checks the logic, not accuracy under noise:
tests/unit/test_noisy_recorded.py and benchmarks/capacity_accuracy.py grade that against
held-out data)."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tunebench.points import client_limit
from tunebench.points.slo import evaluate
from tunebench.points.sustained import RatePoint, sustained_capacity
from tunebench.recorded.model import RecordedRun
from tunebench.tune.recorded import search_capacity

GRID = FIXTURES / "grid-cpu"
SLO = {"ttft_ms": {"p95": 250}}


@pytest.fixture(scope="module")
def grid() -> RecordedRun:
    return RecordedRun(GRID)


def test_the_grid_was_measured_on_the_cpu_server(grid):
    measured = [c for c in grid.configs if c.status == "complete" and c.rows]
    assert len([c for c in measured if c.label != "defaults"]) >= 24
    for config in measured:
        rates = sorted(float(r["target"]) for r in config.rows if r["load_kind"] == "poisson")
        assert rates == [1.5, 3.0, 4.5, 6.0, 8.0], config.label
        assert config.effective.get("kv_capacity_tokens")
    assert {c.label for c in measured} >= {"defaults", "mns8-mnbt512", "mns1-mnbt32"}


def test_the_recorded_deployment_reproduces_recorded_points(grid):
    config = next(c for c in grid.configs if c.label == "mns8-mnbt512")
    for row in config.rows:
        if row["load_kind"] != "poisson":
            continue
        replayed = config.point_at("poisson", float(row["target"]))
        assert replayed["achieved_rps"] == pytest.approx(float(row["achieved_rps"]))
        assert replayed["ttft_p50_ms"] >= float(row["ttft_p50_ms"]) - 1e-9  # monotone: never lower


def last_rate_passed(config) -> bool:
    """Is the recorded deployment's truth for `config` a lower bound ("at least")?"""
    points = [
        RatePoint(
            float(r["target"]),
            evaluate(r, [], SLO)["slo_met"],
            None,
            client_limit.verdict(r)["client_limited"],
        )
        for r in config.rows
        if r["load_kind"] == "poisson"
    ]
    found = sustained_capacity(points)
    return found is not None and found.kind == "at-least"


def recorded_bracket(config) -> tuple[float | None, float | None]:
    """Read off the recorded rows, without the capacity rule: the highest poisson rate up to
    which every recorded TTFT p95 met the SLO, and the first rate that missed (None: none);
    a rate the recorded client could not send is no evidence either way (it ends the read)."""
    passed, missed = None, None
    for row in sorted(
        (r for r in config.rows if r["load_kind"] == "poisson"), key=lambda r: float(r["target"])
    ):
        if row.get("client_limited") in ("True", "true", "1", True):
            break
        if float(row["ttft_p95_ms"]) <= SLO["ttft_ms"]["p95"]:
            passed = float(row["target"])
        else:
            missed = float(row["target"])
            break
    return passed, missed


def test_capacity_search_is_right_on_every_recorded_configuration(grid):
    previous = None
    checked = 0
    for config in grid.configs:
        if config.status != "complete" or not config.rows:
            continue
        passed, missed = recorded_bracket(config)
        search = search_capacity(config, SLO, previous or 1.0, previous is not None)
        if passed is None:  # the lowest recorded rate missed
            assert search.capacity is None or search.capacity <= 0.05 * 1.01, config.label
            continue
        assert search.capacity is not None, config.label
        if last_rate_passed(config) or missed is None:
            # every recorded rate met the SLO or the client fell behind first: the search
            # may go past the last pass, never stop short of it
            assert search.capacity >= 0.95 * passed, (config.label, passed, search.probes)
            continue
        if search.client_bound:
            # "at least this much": the recorded client fell behind below the crossing; a
            # lower bound must not overstate the first recorded miss
            assert search.capacity <= 1.05 * missed, (config.label, missed, search.probes)
            continue
        # noise-free: the answer lies between the last recorded pass and the first recorded
        # miss (within the search's 5% tolerance), and its interval meets that bracket
        assert 0.95 * passed <= search.capacity <= 1.05 * missed, (
            config.label,
            passed,
            missed,
            search.probes,
        )
        assert search.interval[0] <= missed and search.interval[1] >= passed, config.label
        checked += 1
        previous = search.capacity
    assert checked >= 10  # most configurations cross the SLO inside the recorded rates
