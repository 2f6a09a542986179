"""The recorded grid with repeats (tests/fixtures/grid-cpu-repeats): what a noisy recorded
deployment and the held-out truth of the benchmarks stand on."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import FIXTURES
from tunebench.points import trust
from tunebench.recorded.noisy import RecordedGrid, held_out_capacity, run_spread
from tunebench.tune.recorded import SearchRules, search_noisy

GRID = FIXTURES / "grid-cpu-repeats"


@pytest.fixture(scope="module")
def grid() -> RecordedGrid:
    return RecordedGrid(GRID)


def test_every_configuration_was_started_three_times_with_its_requests_kept(grid):
    assert grid.repeats == [1, 2, 3]
    assert len(grid.configs) >= 9
    for config in grid.configs:
        assert sorted(config.starts) == [1, 2, 3], config.label
        for start in config.starts.values():
            assert [w.target for w in start.windows] == [1.0, 2.0, 3.0, 4.5], config.label
            # about 45 requests a window: a p90 needs 36
            assert all(w.requests >= 30 for w in start.windows), config.label


def test_the_client_was_not_the_bottleneck(grid):
    rows = [r for r in grid.rows if r["load_kind"] == "poisson"]
    limited = [r for r in rows if trust.is_client_limited(r)]
    assert len(limited) <= 0.1 * len(rows), [
        (r["config_label"], r["point_id"], r["client_limited_reason"]) for r in limited
    ]


def test_the_held_out_truth_separates_the_configurations(grid):
    truths = {c.label: held_out_capacity(c, [3], grid.slo) for c in grid.configs}
    exact = [t for t in truths.values() if t is not None and t.kind == "exact"]
    assert len(exact) >= 3, truths
    rates = sorted(t.rate for t in truths.values() if t is not None)
    assert rates[-1] > 1.5 * rates[0], truths  # a grid whose configurations differ
    assert 0.0 < run_spread(grid.configs, [1, 2], grid.slo) < 0.3


def test_the_search_on_the_played_part_lands_near_the_held_out_truth(grid):
    rng = np.random.default_rng(0)
    right = []
    for config in grid.configs:
        truth = held_out_capacity(config, [3], grid.slo)
        for _ in range(20):
            search = search_noisy(
                config.deploy([1, 2], rng), grid.slo, 1.0, False, SearchRules(), grid.costs(), rng
            ).search
            right.append(truth.within(search.capacity, 0.10))
    assert np.mean(right) >= 0.8, np.mean(right)
