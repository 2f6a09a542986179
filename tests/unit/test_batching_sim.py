"""The continuous-batching simulator (tunebench/testing/batching_sim.py) obeys the laws
benchmarks/capacity_second_sim.py grades the capacity search against, and the grid that
benchmark records is one a noisy recorded deployment reads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.capacity_accuracy import Outcome
from benchmarks.grid.search_variants import MeasureLongerWhenContradicted, WorstWindow
from benchmarks.grid.second_sim import SLO, Recording, make_batching_grid, window_rates
from benchmarks.grid.second_sim_grading import Bench, BracketSides
from tunebench.points.capacity import CapacitySearch
from tunebench.recorded.noisy import RecordedGrid, held_out_capacity
from tunebench.testing.batching_sim import (
    Engine,
    StepCosts,
    saturation_rps,
    serve,
    simulate,
    ttft_quantile,
)
from tunebench.tune.recorded import SearchCost


def test_a_lone_request_costs_its_steps():
    """64 prompt tokens in a 32-token budget: two prefill steps of 4 + 32 x 0.05 + 0.3 ms;
    in a 64-token budget one step of 4 + 64 x 0.05 + 0.3; then 31 decode steps of
    4 + 0.05 + 0.3 ms each (the first token came with the prompt)."""
    chunked = serve(Engine(4, 32), np.zeros(1))
    whole = serve(Engine(4, 64), np.zeros(1))
    assert chunked.ttft_ms[0] == pytest.approx(2 * 5.9)
    assert whole.ttft_ms[0] == pytest.approx(7.5)
    assert whole.itl_ms[0] == pytest.approx(4.35)
    assert whole.e2e_s[0] == pytest.approx((7.5 + 31 * 4.35) / 1000)


def test_no_more_than_max_num_seqs_run_at_once():
    served = serve(Engine(2, 512), np.zeros(6))
    # the third request is admitted only when one of the first two has left
    assert served.first_token[2] > min(served.end[:2])
    for t in served.first_token:
        running = np.sum((served.first_token <= t) & (served.end > t))
        assert running <= 2


def test_the_step_slows_past_the_kv_and_bandwidth_knees():
    engine = Engine(8, 512, StepCosts())
    base = engine.step_seconds(100, 4, 0.5)
    assert engine.step_seconds(100, 4, 1.0) == pytest.approx(2 * base)  # a full cache: x2
    plain = (4.0 + 0.05 * 512 + 0.3 * 4) / 1000
    assert engine.step_seconds(512, 4, 0.5) == pytest.approx(plain * 1.5)  # 2 knees: +50%


def test_a_start_speed_factor_scales_every_time():
    arrivals = np.zeros(20)  # all at once: every time is a sum of steps
    slow = serve(Engine(4, 64).with_speed(1.1), arrivals)
    fast = serve(Engine(4, 64), arrivals)
    np.testing.assert_allclose(slow.end, 1.1 * fast.end)


def test_ttft_grows_with_load():
    engine = Engine(4, 64)
    mu = saturation_rps(engine)
    p90 = [
        ttft_quantile(simulate(engine, f * mu, 3000, seed=1).tail(300), 0.9)
        for f in (0.3, 0.6, 0.9)
    ]
    assert p90[0] < p90[1] < p90[2]
    assert p90[2] > 3 * p90[0]  # a knee, not a drift


def test_capacity_grows_with_max_num_seqs_until_the_token_budget_binds():
    wide = [saturation_rps(Engine(seqs, 512)) for seqs in (1, 2, 4, 8, 16)]
    assert all(a < b for a, b in zip(wide, wide[1:]))
    narrow = [saturation_rps(Engine(seqs, 32)) for seqs in (8, 16)]
    # 16 decodes leave a 32-token budget half its room for prompts: doubling the
    # sequences gains far less than with room to spare
    assert narrow[1] / narrow[0] < 0.9 * wide[4] / wide[3]
    assert narrow[1] < 0.9 * wide[4]


def test_the_same_seed_gives_the_same_requests_and_times():
    engine = Engine(4, 64)
    a, b = simulate(engine, 10.0, 500, seed=7), simulate(engine, 10.0, 500, seed=7)
    np.testing.assert_array_equal(a.arrival, b.arrival)
    np.testing.assert_array_equal(a.end, b.end)
    other = simulate(engine, 10.0, 500, seed=8)
    assert not np.array_equal(a.arrival, other.arrival)
    assert not np.isnan(a.end).any() and (a.first_token <= a.end).all()


def test_the_recorded_grid_is_what_a_noisy_recorded_deployment_reads(tmp_path):
    knees = {"mns2-mnbt64": 7.0, "mns8-mnbt128": 27.0}
    rec = Recording(repeats=2)
    store = make_batching_grid(tmp_path, knees, rec)
    grid = RecordedGrid(store.path)
    assert grid.slo == SLO and grid.repeats == [1, 2]
    assert [c.label for c in grid.configs] == list(knees)
    for config in grid.configs:
        assert config.args["max-num-seqs"] in (2, 8)
        for start in config.starts.values():
            targets = [w.target for w in start.windows]
            assert targets == pytest.approx(window_rates(knees[config.label], rec))
            # ~60 requests a window (Poisson): never a handful, never the warm-up's too
            assert all(30 <= w.requests <= 100 for w in start.windows)
        found = held_out_capacity(config, [1, 2], grid.slo)
        assert found is not None and math.isfinite(found.rate)
        assert 0.5 * knees[config.label] <= found.rate <= 1.6 * knees[config.label]
    costs = grid.costs()
    assert costs.deployment_s > 0 and costs.point_overhead_s == pytest.approx(2.0)


def test_the_worst_window_variant_counts_a_rate_whose_windows_disagree_as_a_miss():
    """The benchmark's `WorstWindow` against today's search on one rate's two windows (ratios
    0.8 and 1.2: their geometric mean, 0.98, passes)."""
    today, worst = CapacitySearch(noise=0.2), WorstWindow(noise=0.2)
    for search in (today, worst):
        search.tell(4.0, True, ratio=0.8)
        search.tell(4.0, False, ratio=1.2)
    (mean,) = today.verdicts()
    assert mean.slo_met and mean.ratio == pytest.approx(math.sqrt(0.8 * 1.2))
    (worst_verdict,) = worst.verdicts()
    assert not worst_verdict.slo_met and worst_verdict.ratio == pytest.approx(1.2)
    # windows that agree are read as today's search reads them
    agreeing = WorstWindow(noise=0.2)
    agreeing.tell(4.0, True, ratio=0.8)
    agreeing.tell(4.0, True, ratio=0.9)
    assert agreeing.verdicts()[0].slo_met


def test_bracket_sides_grades_each_answer_against_its_own_start(tmp_path):
    """The live rows' second grade: an answer against the deployed start's own long-run
    capacity (not the configuration's truth), and where the bracket lies against it."""
    store = make_batching_grid(tmp_path, {"mns2-mnbt64": 7.0}, Recording(repeats=2))
    grid = RecordedGrid(store.path)
    bench = Bench("b", grid, grid.configs, {}, [1, 2], 0.9, 10.0)
    (config,) = grid.configs
    own = {("mns2-mnbt64", 1): 6.0, ("mns2-mnbt64", 2): 8.0}
    answers = {1: (6.3, (6.2, 6.6)), 2: (None, None)}

    def strategy(start, *args):
        answer, interval = answers[start.repeat]
        return Outcome(answer, SearchCost(), interval)

    sides = BracketSides(strategy, bench, own)
    for repeat in (1, 1, 2):
        sides(config.starts[repeat], SLO, None, 0.0, None)
    assert sides.errors[:2] == pytest.approx([0.05, 0.05]) and math.isnan(sides.errors[2])
    assert sides.above == [True, True] and sides.below == [False, False]
    # a search with no answer is not within 10% of anything
    assert "within 10%  66.7%" in sides.against_own()
    assert "median signed error  +5.0%" in sides.against_own()


def test_the_contradicted_variant_measures_longer_once_a_pass_lies_above_a_miss():
    search = MeasureLongerWhenContradicted(noise=0.2, max_probes=8)
    plain = CapacitySearch(noise=0.2, max_probes=8)
    for each in (search, plain):
        each.tell(2.0, True, ratio=0.5)
        each.tell(4.0, False, ratio=1.3)
    # windows that agree (a pass below a miss): today's search, its windows and its budget
    assert not search.contradicted() and search.max_probes == 8
    assert search.window_margin() == plain.window_margin()
    for each in (search, plain):
        each.tell(4.4, True, ratio=0.9)  # a pass above the miss
    assert search.contradicted() and search.max_probes == 12
    assert search.window_margin() == pytest.approx(4 * plain.window_margin())
    search.tell(4.4, True, ratio=0.95)  # still contradicted: the budget grows once
    assert search.max_probes == 12
