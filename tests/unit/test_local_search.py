"""The tuner's local search: neighbours, the order it tries them in, and what it finds.

The truth of the last tests is brute force over the grid (the argmax of a function the
sampler never sees whole), not anything the sampler computes."""

from __future__ import annotations

import itertools
import math

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from tunebench.spec.models import Tune
from tunebench.tune.local_search import LocalSearchSampler, neighbours
from tunebench.tune.storage import make_sampler
from tunebench.tune.study import TrialOutcome, Tuner

SEQS = [1, 2, 4, 8, 16, 32, 64]
TOKENS = [32, 128, 512, 2048]
SPACE = {
    "max-num-seqs": {"choices": SEQS, "ordered": True},
    "max-num-batched-tokens": {"choices": TOKENS, "ordered": True},
}


def test_neighbours_of_each_kind_of_param():
    ordered = IntDistribution(0, 5)  # an ordered choice is its index
    assert sorted(neighbours(ordered, 0)) == [1]
    assert sorted(neighbours(ordered, 3)) == [2, 4]
    assert sorted(neighbours(IntDistribution(8, 256, log=True), 32)) == [16, 64]
    assert neighbours(IntDistribution(8, 256, log=True), 256) == [128]
    # a wide linear range moves by a quarter of it, on its step
    assert sorted(neighbours(IntDistribution(0, 1000, step=10), 500)) == [250, 750]
    assert neighbours(CategoricalDistribution([None, "fp8", "auto"]), "fp8") == [None, "auto"]
    assert sorted(neighbours(FloatDistribution(0.8, 0.96, step=0.04), 0.88)) == pytest.approx(
        [0.84, 0.92]
    )


def _study(values: dict[tuple[int, int], float], startup: int = 1, seed: int = 0):
    """A study told the given (seqs index, tokens index) -> value trials, baseline first."""
    study = optuna.create_study(
        direction="maximize", sampler=LocalSearchSampler(startup=startup, seed=seed)
    )
    study.add_trial(optuna.trial.create_trial(value=1.0))  # the baseline: no params
    dists = {"max-num-seqs": IntDistribution(0, 6), "max-num-batched-tokens": IntDistribution(0, 3)}
    for (i, j), value in values.items():
        study.add_trial(
            optuna.trial.create_trial(
                params={"max-num-seqs": i, "max-num-batched-tokens": j},
                distributions=dists,
                value=value,
            )
        )
    return study, dists


def _ask(study, dists) -> tuple[int, int]:
    trial = study.ask(dists)
    return trial.params["max-num-seqs"], trial.params["max-num-batched-tokens"]


def test_it_moves_away_from_a_neighbour_measured_worse():
    # the best (3, 1) has a worse neighbour below it in max-num-seqs: the next try is above
    study, dists = _study({(3, 1): 10.0, (2, 1): 6.0})
    assert _ask(study, dists) == (4, 1)


def test_the_pattern_move_follows_the_line_through_the_two_best():
    # (0, 0) then (2, 1) better: two steps of max-num-seqs with one of the token budget
    study, dists = _study({(0, 0): 8.0, (2, 1): 10.0, (1, 0): 3.0})
    assert _ask(study, dists) == (4, 2)
    # off the grid: no pattern move, a neighbour of the best instead
    study, dists = _study({(2, 1): 8.0, (6, 3): 10.0})
    i, j = _ask(study, dists)
    assert max(abs(i - 6), abs(j - 3)) == 1


# around the best (3, 1): both one-arg moves of max-num-seqs measured, both of the token budget,
# and the diagonal the pattern move through the second best (4, 2) leads to, (2, 0)
_AROUND_A_RIDGE = {
    (3, 1): 10.0,
    (4, 1): 8.0,
    (2, 1): 6.0,
    (3, 0): 3.0,
    (3, 2): 3.0,
    (4, 2): 8.1,
    (2, 0): 6.0,
}


def test_the_ridge_move_takes_both_moves_to_the_two_best_neighbours_at_once():
    # every neighbour measured is worse than (3, 1), but the two best, (4, 2) and (4, 1),
    # both moved max-num-seqs up: a ridge between them, next up at two steps of max-num-seqs
    # and one of the token budget (no one-step move, no pattern move reaches it)
    for seed in range(5):
        study, dists = _study(_AROUND_A_RIDGE, seed=seed)
        assert _ask(study, dists) == (5, 2), seed


def test_the_ridge_move_measures_the_one_arg_steps_it_is_made_of_first():
    # (3, 2), one step of the token budget on the way to (5, 2), is not measured: it may be
    # the better neighbour (then there is no ridge), so it comes first
    around = {k: v for k, v in _AROUND_A_RIDGE.items() if k != (3, 2)}
    study, dists = _study(around)
    assert _ask(study, dists) == (3, 2)
    # once it is measured worse, the ridge move
    study.tell(study.trials[-1].number, 3.0)
    assert _ask(study, dists) == (5, 2)


def test_two_arg_moves_go_along_the_one_arg_move_measured_best_first():
    # every one-arg move of (3, 1) measured worse, the best of them (4, 1): of the four
    # diagonals, the two that extend it come first (one of them may be the ridge's)
    for seed in range(8):
        study, dists = _study(
            {(3, 1): 10.0, (4, 1): 8.0, (3, 2): 3.0, (2, 1): 6.0, (3, 0): 3.0}, seed=seed
        )
        assert _ask(study, dists) in {(4, 2), (4, 0)}, seed


def test_one_arg_moves_come_before_two_arg_moves_and_nothing_is_tried_twice():
    study, dists = _study({(0, 0): 5.0})
    asked = []
    for _ in range(3):
        proposal = _ask(study, dists)
        asked.append(proposal)
        study.tell(study.trials[-1].number, 1.0)  # all worse than the start
    assert set(asked) == {(1, 0), (0, 1), (1, 1)}  # the corner's three neighbours
    assert asked[2] == (1, 1)  # the diagonal last
    assert len(set(asked)) == len(asked)


def test_where_nothing_measured_tells_the_way_larger_values_come_first():
    # a start in the middle of the grid, no neighbour measured: the first try is one of its
    # two one-arg moves up (more sequences, a larger token budget), never one down
    first = set()
    for seed in range(16):
        study, dists = _study({(3, 1): 10.0}, seed=seed)
        first.add(_ask(study, dists))
    assert first == {(4, 1), (3, 2)}  # both, by seed: the tie between them is random


def test_a_slope_measured_down_outranks_the_preference_for_up():
    # one more sequence measured worse: the next try is one fewer, not a larger budget
    study, dists = _study({(3, 1): 10.0, (4, 1): 6.0})
    assert _ask(study, dists) == (2, 1)


def test_when_the_best_has_no_unmeasured_neighbour_the_next_best_is_searched():
    around = {(i, j): 1.0 for i, j in itertools.product((0, 1), (0, 1))}
    around[(0, 0)] = 9.0  # the best: every neighbour measured
    around[(1, 1)] = 5.0  # the next best: its neighbours (2, *) and (*, 2) are not
    study, dists = _study(around)
    i, j = _ask(study, dists)
    assert max(abs(i - 1), abs(j - 1)) == 1 and (i, j) not in around


def test_before_the_startup_trials_it_proposes_at_random():
    # one measured configuration, fewer than startup=2: proposals are not kept to neighbours
    far = 0
    for seed in range(20):
        study, dists = _study({(0, 0): 3.0}, startup=2, seed=seed)
        i, j = _ask(study, dists)
        far += max(i, j) > 1
    assert far > 5  # 19 of the 27 other cells are no neighbour of (0, 0)
    # with startup=1 the same study's proposal is a neighbour, whatever the seed
    for seed in range(5):
        study, dists = _study({(0, 0): 3.0}, startup=1, seed=seed)
        assert max(_ask(study, dists)) == 1


def test_a_two_objective_study_gets_tpe():
    tune = Tune.model_validate({"space": SPACE, "objective": "throughput-latency"})
    assert isinstance(make_sampler(tune, seed=0), optuna.samplers.TPESampler)
    assert isinstance(
        make_sampler(Tune.model_validate({"space": SPACE}), seed=0), LocalSearchSampler
    )


class GridEvaluator:
    """Capacity on the grid by a closed form; vLLM's defaults (no args) at `defaults`."""

    def __init__(self, law, defaults: float):
        self.law, self.defaults, self.deployed = law, defaults, []

    def evaluate(self, config):
        args = config.args
        if "max-num-seqs" not in args:
            return TrialOutcome([self.defaults])
        self.deployed.append((args["max-num-seqs"], args["max-num-batched-tokens"]))
        return TrialOutcome([self.law(args["max-num-seqs"], args["max-num-batched-tokens"])])


def _unimodal(seqs: int, tokens: int) -> float:
    # one peak at 16 sequences and 512 tokens, falling off on every side
    return 10.0 * math.exp(-((math.log2(seqs) - 4) ** 2) / 3 - (math.log2(tokens) - 9) ** 2 / 8)


def _tune(sampler: str, law, trials: int, seed: int, defaults: float) -> set:
    tune = Tune.model_validate(
        {"space": SPACE, "trials": trials, "seed": seed, "sampler": sampler, "hints": False}
    )
    study = optuna.create_study(direction="maximize", sampler=make_sampler(tune, seed))
    evaluator = GridEvaluator(law, defaults)
    Tuner(study, tune, {}, "m", None, evaluator).run()
    return set(evaluator.deployed)


def test_on_a_unimodal_grid_it_reaches_the_peak_from_any_start():
    # truth by brute force: every cell of the grid evaluated
    peak = max(itertools.product(SEQS, TOKENS), key=lambda c: _unimodal(*c))
    assert peak == (16, 512)
    # from any random start, climbing one step at a time (diagonals too) reaches the peak
    # within the grid's diameter (6 steps) plus the moves that fail around the way
    for seed in range(20):
        assert peak in _tune("local", _unimodal, trials=12, seed=seed, defaults=1.0), seed


def test_it_finds_the_peak_more_often_than_random_search_on_the_same_budget():
    found = {"local": 0, "random": 0}
    for sampler in found:
        for seed in range(30):
            peak = max(itertools.product(SEQS, TOKENS), key=lambda c: _unimodal(*c))
            found[sampler] += peak in _tune(sampler, _unimodal, trials=7, seed=seed, defaults=1.0)
    # 6 of 28 cells at random: the peak in about 21% of seeds
    assert found["local"] >= found["random"] + 9, found


def test_a_neighbour_another_worker_is_measuring_is_not_proposed_again():
    """Two workers of one study: the second asks while the first still measures the
    neighbour it was given; it must get another one (truth: the grid's neighbours)."""
    import optuna

    from tunebench.tune.local_search import LocalSearchSampler

    study = optuna.create_study(direction="maximize", sampler=LocalSearchSampler(startup=1, seed=0))
    space = {"x": optuna.distributions.IntDistribution(0, 4)}
    study.add_trial(optuna.trial.create_trial(params={"x": 2}, distributions=space, values=[1.0]))
    first = study.ask(space)  # a neighbour of x=2, left RUNNING
    second = study.ask(space)
    assert first.params["x"] in (1, 3) and second.params["x"] in (1, 3)
    assert first.params["x"] != second.params["x"]


def _ridge(seqs: int, tokens: int) -> float:
    # two args that only work together (tunebench/testing/queueing.py's interacting grid):
    # seqs x 16 near the token budget, more so with more sequences; peak (32, 512)
    match = math.exp(-(math.log2(seqs * 16 / tokens) ** 2) / 2)
    return 2.0 + 8.0 * match * (1 + math.log2(seqs) / 10)


def test_on_a_ridge_it_finds_the_peak_more_often_than_random_search():
    # truth by brute force: the peak is on the diagonal, and from the next point down the
    # ridge, (8, 128), every one-step neighbour is worse: a one-step climb stops there
    peak = max(itertools.product(SEQS, TOKENS), key=lambda c: _ridge(*c))
    assert peak == (32, 512)
    step_down = (8, 128)
    assert all(
        _ridge(SEQS[i], TOKENS[j]) < _ridge(*step_down)
        for i, j in itertools.product((2, 3, 4), (0, 1, 2))
        if (SEQS[i], TOKENS[j]) != step_down
    )
    found = {"local": 0, "random": 0}
    for sampler in found:
        for seed in range(30):
            found[sampler] += peak in _tune(sampler, _ridge, trials=10, seed=seed, defaults=1.0)
    # 9 of 28 cells at random: the peak in about a third of seeds (9 of 30 here); the local
    # search without its ridge move found it in 16, with it in 23
    assert found["local"] >= found["random"] + 10, found
