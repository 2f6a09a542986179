"""The recorded CPU grid (tests/fixtures/grid-cpu) through replay: the search logic, exactly."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
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
        assert 0.95 * truth <= search.capacity <= truth * 1.0001, (
            config.label,
            truth,
            search.probes,
        )
        previous = search.capacity
