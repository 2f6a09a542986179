"""Diagnosis as the tuner's hints: a measured trial whose findings name an arg and a way
(points/diagnosis.py `hints`: max-num-seqs up when requests queue behind it, down when the
KV cache runs full, max-num-batched-tokens up when prompts are prefilled in many steps)
makes the neighbouring value of that arg the next trial, with every other param kept.

The hint is a proposal, not a verdict: it is enqueued in the Optuna study, measured like any
trial and counted in the budget; the sampler goes on as before afterwards. A hint is only
followed inside the space (the next choice, or a step of an int range: doubled or halved on
a log range) and never for args already measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunebench.spec.models import TuneParam


@dataclass(frozen=True)
class Hint:
    params: dict[str, Any]  # the whole next trial's params
    optuna_params: dict[str, Any]  # the same as Optuna stores them (ordered choices: index)
    text: str  # why, e.g. "hint from trial 3 (scheduler-limited): max-num-seqs 4 -> 8"


def neighbour(param: TuneParam, current: Any, way: str) -> Any | None:
    """The next value of `param` from `current` in direction `way` (up/down), or None."""
    if param.kind == "categorical":
        numbers = [c for c in param.choice_list if isinstance(c, (int, float)) and c is not True]
        if current not in numbers:
            return None
        ordered = sorted(numbers)
        index = ordered.index(current) + (1 if way == "up" else -1)
        return ordered[index] if 0 <= index < len(ordered) else None
    if param.kind != "int" or not isinstance(current, int):
        return None  # a float range has no "next" value worth a deployment
    low, high = (int(bound) for bound in param.bounds)
    if param.log:
        value = current * 2 if way == "up" else max(1, current // 2)
    else:
        step = int(param.step or max(1, (high - low) // 4))
        value = current + step if way == "up" else current - step
    value = min(high, max(low, value))
    return value if value != current else None


def optuna_value(param: TuneParam, value: Any) -> Any:
    """How Optuna stores a value of `param` (space.suggest: an ordered choice is an index)."""
    if param.kind == "categorical" and param.ordered:
        return param.choice_list.index(value)
    return value


def next_trial(
    space: dict[str, TuneParam],
    params: dict[str, Any],
    directions: dict[str, tuple[str, str]],
    trial_number: int,
) -> Hint | None:
    """The first direction (arg -> (way, rule)) that leads to a new point of the space."""
    for arg, (way, rule) in directions.items():
        param = space.get(arg)
        if param is None or param.when or arg not in params:
            continue
        value = neighbour(param, params[arg], way)
        if value is None:
            continue
        new = {**params, arg: value}
        text = f"hint from trial {trial_number} ({rule}): {arg} {params[arg]} -> {value}"
        return Hint(new, {k: optuna_value(space[k], v) for k, v in new.items()}, text)
    return None
