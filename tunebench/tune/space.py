"""A tune search space: engine args as Optuna distributions, with conditions.

    space:
      max-num-seqs: {low: 8, high: 256, log: true}             # log-int
      max-num-batched-tokens: {choices: [2048, 4096, 8192], ordered: true}   # ordinal
      gpu-memory-utilization: {low: 0.80, high: 0.95}           # float
      kv-cache-dtype: {choices: [null, fp8]}                    # null: vLLM's default
      speculative-config.method: {choices: [null, ngram]}
      speculative-config.num_speculative_tokens:                # only when speculating
        {low: 1, high: 5, when: {speculative-config.method: ngram}}

A dotted name sets one key of a mapping arg (`speculative-config` is passed as JSON). A
param whose `when` does not hold is not suggested at all, so Optuna sees a conditional
space (the samplers handle missing params: the local search moves the params a trial
has and leaves a newly enabled one to the random sampler). `null` leaves the arg out: vLLM's
default.
"""

from __future__ import annotations

from typing import Any, Protocol

from tunebench.spec.models import TuneParam


class Suggests(Protocol):
    """The part of optuna.trial.Trial that a space uses (a seam for tests)."""

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = 1, log: bool = False
    ) -> int: ...
    def suggest_float(
        self, name: str, low: float, high: float, *, step: float | None = None, log: bool = False
    ) -> float: ...
    def suggest_categorical(self, name: str, choices: list) -> Any: ...


def suggest(space: dict[str, TuneParam], trial: Suggests) -> dict[str, Any]:
    """The param values of one trial, in space order; conditional params may be absent."""
    values: dict[str, Any] = {}
    for name, param in space.items():
        if not _holds(param.when, values):
            continue
        kind = param.kind
        if kind == "categorical" and param.ordered:
            # an index the sampler treats as a number, so neighbours inform each other
            choices = param.choice_list
            values[name] = choices[trial.suggest_int(name, 0, len(choices) - 1)]
        elif kind == "categorical":
            values[name] = trial.suggest_categorical(name, param.choice_list)
        elif kind == "int":
            step = int(param.step) if param.step else 1
            low, high = param.bounds
            values[name] = trial.suggest_int(name, int(low), int(high), step=step, log=param.log)
        else:
            low, high = param.bounds
            values[name] = trial.suggest_float(name, low, high, step=param.step, log=param.log)
    return values


def _holds(when: dict[str, Any] | None, values: dict[str, Any]) -> bool:
    for name, wanted in (when or {}).items():
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if name not in values or values[name] not in allowed:
            return False
    return True


def engine_args(base: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """`base` server args with a trial's params applied (dotted names into mappings)."""
    args = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for name, value in params.items():
        if "." in name:
            arg, key = name.split(".", 1)
            found = args.get(arg)
            mapping: dict[str, Any] = found if isinstance(found, dict) else {}
            if value is None:
                mapping.pop(key, None)
            else:
                mapping[key] = value
            args[arg] = mapping
        else:
            args[name] = value
    # a mapping left without its required parts (e.g. no speculative method) is dropped
    for arg in [k for k, v in args.items() if isinstance(v, dict)]:
        mapping = args[arg]
        if not mapping or (arg == "speculative-config" and not mapping.get("method")):
            args[arg] = None
    return {k: v for k, v in args.items() if v is not None}


def label(params: dict[str, Any]) -> str:
    from tunebench.spec.plan import format_value

    return ", ".join(f"{k}={format_value(v)}" for k, v in params.items()) or "vLLM defaults"
