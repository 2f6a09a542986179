"""The tuner's default sampler: a local search from the best configuration measured so far.

Engine args act on capacity mostly one step at a time (more sequences help until the KV
cache or the step time says no; a token budget helps until prefill crowds decode), so the
configuration next to the best one is the most likely to beat it. After `startup` random
trials (the baseline, with no params, is not one), each proposal is, in this order:

1. the pattern move: the best trial moved again by what separates it from the second best,
   when that was not measured (Hooke and Jeeves): it follows two args that improved together;
2. the ridge move: when the best trial's two best measured neighbours moved one arg the same
   way (say one more max-num-seqs step, one of them with a larger token budget too), the best
   moved by both moves at once (two steps of that arg, one of the other). Two args that only
   work together (sequences x 16 near the token budget) make a ridge along a diagonal that
   no one-step move follows: its next point up is two steps of one arg away, and a best
   trial whose neighbours are all worse can still lie on it, with the two neighbours on the
   ridge the best of them. The one-arg steps the ridge move is made of are measured first
   (when one is not, it is proposed instead): a better neighbour that way means no ridge;
3. an unmeasured neighbour of the best trial: one step of one param (an ordered choice or an
   int range's next value, a log range doubled or halved, another choice of an unordered
   param), then two params at once. Among those, a move away from a neighbour already
   measured worse comes first (the slope says so), then fewer params changed, then a two-
   param move along the one-param move measured best (the ridge move's second neighbour),
   then a move to larger values (more sequences, a larger token budget: the way capacity
   usually grows, see `_upward`), then at random.

When the best trial's neighbours are all measured, the next best trial's are searched; when
every neighbour is, the proposal is random. Measured (benchmarks/tune_efficiency.py
--synthetic, 40 and 160 seeds, grids where the defaults are not best), it finds the best set
more often than random search and TPE when the best lies where one-step moves lead (a knee, a
cliff) and, with the ridge move, on a diagonal of two args within 10 deployments (within 6 it
is no better than random search there and worse than TPE: the climb to the ridge and the
neighbours the ridge move needs take more); where half the grid is best it ties at 10 and is
a little worse at 6 (docs/benchmarks.md#tune_efficiencypy).

It is an Optuna sampler, so the study, its storage, enqueued trials and shared workers work
as with any other. A two-objective study has no single best to search around: the tuner
gives it TPE (tune/storage.py `make_sampler`); given one anyway, this proposes at random.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState

# an int range with more values than this moves by a quarter of it (as tune/hints.py does)
SMALL_RANGE = 8
# how many params one proposal may change at once
MAX_PARAMS_CHANGED = 2


def neighbours(dist: BaseDistribution, value: Any) -> list[Any]:
    """The values next to `value` in `dist` (in Optuna's internal form: an ordered choice is
    its index, an unordered one its choice)."""
    if isinstance(dist, CategoricalDistribution):
        return [c for c in dist.choices if c != value]
    if isinstance(dist, IntDistribution):
        if dist.log:
            moves = [value * 2, value // 2]
        else:
            step = dist.step
            if (dist.high - dist.low) // step > SMALL_RANGE:
                step = max(step, (dist.high - dist.low) // 4 // step * step)
            moves = [value + step, value - step]
        return [int(v) for v in moves if dist.low <= v <= dist.high and v != value]
    if isinstance(dist, FloatDistribution):
        if dist.log:
            spread = [value * 2, value / 2]
        else:
            width = dist.step or (dist.high - dist.low) / 4
            spread = [value + width, value - width]
        return [v for v in spread if dist.low <= v <= dist.high and not math.isclose(v, value)]
    return []


def _upward(
    here: dict[str, Any], params: dict[str, Any], subset: tuple[str, ...], space: dict
) -> bool:
    """Whether a move raises every param it changes (an ordered one: its index). The args a
    tuner sizes a batch with (max-num-seqs, max-num-batched-tokens, the KV cache's share of
    memory) raise capacity until memory or step time says no, and vLLM's own defaults lie at
    their large end, so where nothing measured says which way is better, up is tried first;
    past a cliff (the batch no longer fits) the slope sends the search back down."""
    return all(
        not isinstance(space[name], CategoricalDistribution) and params[name] > here[name]
        for name in subset
    )


def _key(params: dict[str, Any]) -> tuple:
    return tuple(sorted(params.items()))


def _is_neighbour(dist: BaseDistribution, value: Any, other: Any) -> bool:
    """Whether `other` is one of `value`'s neighbours in `dist` (floats: up to rounding)."""
    if isinstance(dist, FloatDistribution):
        return any(math.isclose(other, v) for v in neighbours(dist, value))
    return other in neighbours(dist, value)


def _step(dist: BaseDistribution, before: Any, after: Any) -> Any:
    """The same move again from `after` (for "the slope"), or None for unordered choices."""
    if isinstance(dist, CategoricalDistribution):
        return None
    if isinstance(dist, IntDistribution | FloatDistribution) and dist.log:
        return after * after / before if before else None
    return after + (after - before)


class LocalSearchSampler(optuna.samplers.BaseSampler):
    """Proposes the unmeasured neighbour of the best trial (see the module docstring)."""

    def __init__(self, startup: int = 1, seed: int | None = None):
        self.startup = startup
        self._rng = np.random.default_rng(seed)
        self._random = optuna.samplers.RandomSampler(seed=seed)

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._random.reseed_rng()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        if len(study.directions) != 1:
            return {}
        space: dict[str, BaseDistribution] = {}
        for past in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if not past.params:  # the baseline: vLLM's defaults, no point of the space
                continue
            space.update(past.distributions)
        return space

    def sample_relative(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        search_space: dict[str, BaseDistribution],
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        finished = study.get_trials(
            deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)
        )
        # what another worker measures right now counts as tried: workers sharing a study
        # (PostgreSQL) would otherwise propose the same neighbour of the same best at once
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        tried = {_key(t.params) for t in finished if t.params} | {
            _key(t.params) for t in running if t.params and t.number != trial.number
        }
        measured = [
            t
            for t in finished
            if t.params and t.state == TrialState.COMPLETE and t.values is not None
        ]
        if len({_key(t.params) for t in measured}) < self.startup:
            return {}
        sign = 1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else -1.0
        value_of = {_key(t.params): sign * t.values[0] for t in measured}
        ranked = sorted(measured, key=lambda t: -sign * t.values[0])
        pattern = self._pattern_move(ranked, search_space, tried)
        if pattern is not None:
            return pattern
        ridge = self._ridge_move(ranked, search_space, tried)
        if ridge is not None:
            return ridge
        for best in ranked:
            proposal = self._best_move(best, search_space, tried, value_of)
            if proposal is not None:
                return proposal
        return {}  # every neighbour measured: the random sampler proposes

    @staticmethod
    def _pattern_move(
        ranked: list[FrozenTrial], space: dict[str, BaseDistribution], tried: set[tuple]
    ) -> dict[str, Any] | None:
        """The best trial moved again by what separates it from the second best (Hooke and
        Jeeves' pattern move): two args that only work together (more sequences with a
        larger token budget) lie on a line no one-step move follows."""
        best = ranked[0].params
        second = next((t.params for t in ranked[1:] if _key(t.params) != _key(best)), None)
        if second is None or set(second) != set(best):
            return None
        params = dict(best)
        for name, value in best.items():
            dist = space.get(name)
            if dist is None or second[name] == value:
                continue
            moved = _step(dist, second[name], value)
            if moved is None:
                return None  # an unordered choice has no "further"
            if isinstance(dist, IntDistribution):
                moved = int(round(moved))
            if not dist.low <= moved <= dist.high:  # type: ignore[attr-defined]
                return None
            params[name] = moved
        return None if _key(params) in tried else params

    @staticmethod
    def _ridge_move(
        ranked: list[FrozenTrial], space: dict[str, BaseDistribution], tried: set[tuple]
    ) -> dict[str, Any] | None:
        """The best trial moved by the moves to its two best measured neighbours at once,
        when both moved one arg the same way (a ridge between them: see the module
        docstring); the one-arg steps it is made of first, when one is not measured."""
        best = ranked[0].params
        near: list[dict[str, Any]] = []
        for trial in ranked[1:]:  # best first
            if _key(trial.params) in {_key(n) for n in near}:
                continue
            changed = [n for n in best if trial.params.get(n) != best[n]]
            if (
                set(trial.params) == set(best)
                and 0 < len(changed) <= MAX_PARAMS_CHANGED
                and all(
                    n in space and _is_neighbour(space[n], best[n], trial.params[n])
                    for n in changed
                )
            ):
                near.append(trial.params)
            if len(near) == 2:
                break
        if len(near) < 2:
            return None
        first, second = near
        params = dict(best)
        steps = []  # the one-arg steps the ridge move is made of
        further = False
        for name, value in best.items():
            if first[name] == value and second[name] == value:
                continue
            if first[name] != value and second[name] != value:  # both moved this arg
                dist = space[name]
                if isinstance(dist, CategoricalDistribution):
                    return None  # an unordered choice has no "further"
                if (first[name] - value) * (second[name] - value) < 0:
                    continue  # opposite ways: it stays
                moved = _step(dist, value, first[name])
                if moved is None:
                    return None
                if isinstance(dist, IntDistribution):
                    moved = int(round(moved))
                if not dist.low <= moved <= dist.high:  # type: ignore[attr-defined]
                    return None
                params[name], further = moved, True
                steps.append({**best, name: first[name]})
            else:
                params[name] = first[name] if first[name] != value else second[name]
                steps.append({**best, name: params[name]})
        # no arg moved further: the two moves add up to a neighbour (the neighbour search
        # has it) or to the best itself
        if not further or _key(params) in tried:
            return None
        for step in steps:
            if _key(step) not in tried:
                return step  # is the best's neighbour that way better? then no ridge
        return params

    def _best_move(
        self,
        best: FrozenTrial,
        space: dict[str, BaseDistribution],
        tried: set[tuple],
        value_of: dict[tuple, float],
    ) -> dict[str, Any] | None:
        names = [n for n in space if n in best.params]
        here = value_of[_key(best.params)]
        candidates: list[tuple[tuple, dict[str, Any]]] = []
        for changed in range(1, min(MAX_PARAMS_CHANGED, len(names)) + 1):
            for subset in itertools.combinations(names, changed):
                options: Sequence[list[Any]] = [
                    neighbours(space[n], best.params[n]) for n in subset
                ]
                for values in itertools.product(*options):
                    params = {**best.params, **dict(zip(subset, values))}
                    if _key(params) in tried:
                        continue
                    uphill = self._uphill(best.params, params, subset, space, here, value_of)
                    # a two-param move along the one-param move measured best first: on a
                    # ridge, it is the ridge move's second neighbour; then, where nothing
                    # measured tells the way, larger values first (see _upward)
                    along = [value_of.get(_key({**best.params, n: params[n]})) for n in subset]
                    known = [v for v in along if v is not None] if changed > 1 else []
                    rank = (
                        0 if uphill else 1,
                        changed,
                        -max(known) if known else math.inf,
                        0 if _upward(best.params, params, subset, space) else 1,
                        float(self._rng.random()),
                    )
                    candidates.append((rank, params))
        if not candidates:
            return None
        return min(candidates, key=lambda c: c[0])[1]

    @staticmethod
    def _uphill(
        here_params: dict[str, Any],
        params: dict[str, Any],
        subset: tuple[str, ...],
        space: dict[str, BaseDistribution],
        here: float,
        value_of: dict[tuple, float],
    ) -> bool:
        """Whether the opposite move from the best was measured and is worse."""
        back = dict(here_params)
        for name in subset:
            opposite = _step(space[name], params[name], here_params[name])
            if opposite is None:
                return False
            back[name] = opposite
        worse = value_of.get(_key(back))
        return worse is not None and worse < here

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)
