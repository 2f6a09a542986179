"""The recorded CPU grid (tests/fixtures/grid-cpu) through the interpolating replay: the
search logic on noise-free data (the truth here is the same interpolation the search probes,
so this checks the logic, not accuracy under noise: tests/unit/test_noisy_replay.py and
benchmarks/capacity_accuracy.py grade that against held-out data)."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tunebench.points import client_limit
from tunebench.points.capacity import RatePoint, sustained_capacity
from tunebench.points.slo import evaluate
from tunebench.replay.model import RecordedRun, true_capacity
from tunebench.tune.replay import search_capacity

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


def test_replay_reproduces_recorded_points(grid):
    config = next(c for c in grid.configs if c.label == "mns8-mnbt512")
    for row in config.rows:
        if row["load_kind"] != "poisson":
            continue
        replayed = config.point_at("poisson", float(row["target"]))
        assert replayed["achieved_rps"] == pytest.approx(float(row["achieved_rps"]))
        assert replayed["ttft_p50_ms"] >= float(row["ttft_p50_ms"]) - 1e-9  # monotone: never lower


def last_rate_passed(config) -> bool:
    """Is the replay's truth for `config` a lower bound ("at least")?"""
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


def test_capacity_search_is_right_on_every_recorded_configuration(grid):
    previous = None
    for config in grid.configs:
        if config.status != "complete" or not config.rows:
            continue
        truth = true_capacity(config, SLO)
        search = search_capacity(config, SLO, previous or 1.0, previous is not None)
        if truth is None:
            assert search.capacity is None or search.capacity <= 0.05 * 1.01, config.label
            continue
        assert search.capacity is not None, config.label
        if last_rate_passed(config):
            # the truth is "at least": every recorded rate met the SLO or the client fell
            # behind first; the search may go past it, never stop short of it
            assert search.capacity >= 0.95 * truth, (config.label, truth, search.probes)
            continue
        if search.client_bound:
            # "at least this much": the replayed client fell behind below the crossing (the
            # recording flagged the rate above it); a lower bound must not overstate it
            assert search.capacity <= 1.05 * truth, (config.label, truth, search.probes)
            continue
        # noise-free: the final bracket (within 5%) holds the truth, the estimate lies in it
        assert 0.95 * truth <= search.capacity <= 1.05 * truth, (
            config.label,
            truth,
            search.probes,
        )
        assert search.interval[0] <= truth <= search.interval[1], (config.label, truth)
        previous = search.capacity
