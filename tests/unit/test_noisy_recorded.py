"""The noisy recorded deployment (a recorded grid with repeats as a noisy server) and its
held-out truth, on a synthetic recording whose latency law is known."""

from __future__ import annotations

import numpy as np
import pytest

from tunebench.errors import StoreError
from tunebench.recorded.noisy import RecordedGrid, held_out_capacity, run_spread
from tunebench.testing.runs import make_repeats_grid_run, make_synthetic_run
from tunebench.tune.recorded import SearchRules, noisy_probe, search_noisy

SATURATION = {
    "slow": ({"max-num-seqs": 1}, 3.0),
    "fast": ({"max-num-seqs": 4}, 6.0),
}


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> RecordedGrid:
    store = make_repeats_grid_run(
        tmp_path_factory.mktemp("grid"), SATURATION, rates=(1, 2, 3, 4, 5), repeats=3
    )
    return RecordedGrid(store.path)


def test_every_start_of_every_configuration_is_read_with_its_requests(grid):
    assert grid.repeats == [1, 2, 3]
    for config in grid.configs:
        assert sorted(config.starts) == [1, 2, 3]
        for start in config.starts.values():
            assert [w.target for w in start.windows] == [1, 2, 3, 4, 5]
            assert all(w.requests > 10 and "ttft_ms" in w.samples for w in start.windows)


def test_costs_come_from_the_recordings_own_clock(grid):
    costs = grid.costs()
    assert costs.deployment_s == pytest.approx(52.0)  # 50 s start + the 2 s after the last point
    assert costs.point_overhead_s == pytest.approx(2.0)


def test_a_probe_at_a_recorded_rate_draws_that_windows_requests(grid):
    start = grid.configs[0].starts[1]
    window = start.windows[1]  # 2 req/s
    recorded = float(np.percentile(window.samples["ttft_ms"], 90))
    rng = np.random.default_rng(0)
    long = [noisy_probe(start, 2.0, 300.0, grid.slo, rng)["ttft_p90_ms"] for _ in range(20)]
    assert np.median(long) == pytest.approx(recorded, rel=0.10)


def test_a_short_window_is_noisier_than_a_long_one(grid):
    start = grid.configs[1].starts[2]
    rng = np.random.default_rng(1)

    def spread(seconds: float) -> float:
        values = [noisy_probe(start, 3.0, seconds, grid.slo, rng)["ttft_p90_ms"] for _ in range(60)]
        return float(np.std(np.log(values)))

    assert spread(8.0) > 1.5 * spread(120.0)


def test_between_rates_latency_grows_and_beyond_the_recording_is_not_evidence(grid):
    start = grid.configs[0].starts[1]
    rng = np.random.default_rng(2)
    low = noisy_probe(start, 2.0, 600.0, grid.slo, rng)["ttft_p50_ms"]
    middle = noisy_probe(start, 2.5, 600.0, grid.slo, rng)["ttft_p50_ms"]
    high = noisy_probe(start, 3.0, 600.0, grid.slo, rng)["ttft_p50_ms"]
    assert low < middle < high
    beyond = noisy_probe(start, 7.0, 30.0, grid.slo, rng)
    assert beyond["client_limited"] and "recorded_extrapolated" in beyond["client_warnings"]


def test_the_held_out_truth_follows_the_latency_law(grid):
    # median TTFT 60 ms / (1 - r/s) x lognormal(0.4): the p90 is 1.67 x the median, so the
    # 300 ms p90 holds up to r = s x (1 - 60 x 1.67 / 300) = 0.666 s, up to the start factor
    for config, (_args, saturation) in zip(grid.configs, SATURATION.values()):
        truth = held_out_capacity(config, [3], grid.slo)
        assert truth.kind == "exact"
        assert truth.rate == pytest.approx(0.666 * saturation, rel=0.12)
    spread = run_spread(grid.configs, [1, 2, 3], grid.slo)
    assert 0.0 < spread < 0.15


def test_a_search_on_the_noisy_recorded_run_lands_near_the_held_out_truth(grid):
    rng = np.random.default_rng(3)
    rules = SearchRules(window_s=10.0)
    for config in grid.configs:
        truth = held_out_capacity(config, [3], grid.slo)
        answers = []
        for _ in range(30):
            played = search_noisy(
                config.deploy([1, 2], rng), grid.slo, 1.0, False, rules, grid.costs(), rng
            )
            search, cost = played.search, played.cost
            assert played.drifted == []  # nothing in this recording was flagged
            answers.append(truth.within(search.capacity, 0.10))
            assert cost.deployments == 1 and cost.probes == len(search.probes)
            assert cost.seconds > grid.costs().deployment_s + 10.0 * cost.probes
        assert np.mean(answers) >= 0.8, config.label


def test_a_run_without_per_request_samples_cannot_be_played_noisy(tmp_path):
    store = make_synthetic_run(tmp_path, configs=1)  # concurrent points only
    with pytest.raises(StoreError, match="per-request samples"):
        RecordedGrid(store.path)
