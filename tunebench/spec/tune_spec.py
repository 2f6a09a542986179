"""The `tune` of a sweep file: the search space of `tunebench tune`, its objective and budget."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, model_validator

from tunebench.spec.base import Strict

ParamValue = Union[None, bool, int, float, str]


class TuneParam(Strict):
    """One dimension of a tune search space; see tunebench/tune/space.py."""

    type: Literal["int", "float", "categorical"] | None = Field(
        None, description="default: categorical with choices, else int for int bounds, else float"
    )
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = Field(None, gt=0)
    choices: list[ParamValue] | None = Field(None, min_length=1)
    ordered: bool = Field(
        False,
        description="choices are ordered (e.g. [8, 16, 32, 64]): the "
        "sampler learns that neighbours behave alike",
    )
    when: dict[str, ParamValue | list[ParamValue]] | None = Field(
        None, description="only searched when these earlier params have these values"
    )

    @model_validator(mode="after")
    def _consistent(self) -> "TuneParam":
        kind = self.kind
        if kind == "categorical":
            if not self.choices:
                raise ValueError("a categorical param needs choices: [..]")
            if self.low is not None or self.high is not None:
                raise ValueError("give either choices or low/high, not both")
            if self.ordered and len(self.choices) < 2:
                raise ValueError("ordered needs at least two choices")
        else:
            if self.choices is not None:
                raise ValueError(f"a {kind} param takes low/high, not choices")
            if self.low is None or self.high is None or self.low >= self.high:
                raise ValueError("set low < high")
            if self.log and self.low <= 0:
                raise ValueError("log: true needs low > 0")
            if self.log and self.step is not None:
                raise ValueError("use either log or step, not both")
        return self

    @property
    def kind(self) -> str:
        if self.type:
            return self.type
        if self.choices is not None:
            return "categorical"
        ints = all(
            isinstance(v, int) or (isinstance(v, float) and v.is_integer())
            for v in (self.low, self.high)
            if v is not None
        )
        return "int" if ints else "float"

    @property
    def choice_list(self) -> list[ParamValue]:
        """A categorical param's choices (the validator made sure it has them)."""
        if self.choices is None:
            raise ValueError(f"a {self.kind} param has no choices")
        return list(self.choices)

    @property
    def bounds(self) -> tuple[float, float]:
        """An int or float param's (low, high) (the validator made sure it has both)."""
        if self.low is None or self.high is None:
            raise ValueError(f"a {self.kind} param has no bounds")
        return self.low, self.high


class Tune(Strict):
    """`tunebench tune`: an Optuna study over engine args; see tunebench/tune/study.py."""

    objective: Literal["capacity", "capacity-per-cost", "throughput", "throughput-latency"] = (
        "capacity"
    )
    trials: int = Field(12, ge=1, le=1000, description="deployments, the baseline included")
    sampler: Literal["local", "tpe", "random"] = Field(
        "local",
        description="local: the unmeasured neighbour of the best so far (tune/local_search.py); "
        "tpe: Optuna's TPE; random",
    )
    startup_trials: int | None = Field(
        None,
        ge=1,
        description="random trials (after the baseline) before the sampler uses the measured "
        "ones (default: 1 for local, 3 for tpe)",
    )
    seed: int | None = 0
    baseline: bool = Field(True, description="first trial: server.args only (vLLM's defaults)")
    kv_overcommit: float = Field(
        1.0, ge=1.0, description="allowed max-num-seqs x max-model-len over the learned KV capacity"
    )
    space: dict[str, TuneParam] = Field(min_length=1)
    enqueue: list[dict[str, ParamValue]] = Field(
        default_factory=list,
        description="param sets to try right after the baseline, e.g. "
        "the configuration in production today",
    )
    heartbeat_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="distributed (--storage): a worker's trial records a heartbeat this often; "
        "one silent for 4 heartbeats is failed and retried by another worker",
    )
    retries: int = Field(
        1, ge=0, le=5, description="distributed: times a dead worker's trial is tried again"
    )
    hints: bool = Field(
        True,
        description="after each measured trial, try next what its diagnosis suggests "
        "(e.g. max-num-seqs up when requests queue behind it), when the space holds that "
        "value and it was not measured yet (docs/diagnosis.md)",
    )
    revalidate: int = Field(
        0,
        ge=0,
        le=10,
        description="after the study, re-run the best, the runner-up and the baseline this "
        "many times each (alternated) and report the best's gain with an interval, or a tie; "
        "0: off (3 is a good choice: Welch's t needs 2 per side)",
    )

    @model_validator(mode="after")
    def _enqueued_params_exist(self) -> "Tune":
        for number, params in enumerate(self.enqueue):
            unknown = [k for k in params if k not in self.space]
            if unknown:
                raise ValueError(f"enqueue[{number}]: {', '.join(unknown)} not in tune.space")
            for name, value in params.items():
                choices = self.space[name].choices
                if choices is not None and value not in choices:
                    raise ValueError(
                        f"enqueue[{number}].{name}: {value!r} is not one of its choices {choices}"
                    )
        return self

    @model_validator(mode="after")
    def _conditions_refer_back(self) -> "Tune":
        seen: list[str] = []
        for name, param in self.space.items():
            for other in param.when or {}:
                if other not in seen:
                    raise ValueError(
                        f"space.{name}.when: {other!r} must be a param listed before {name!r}"
                    )
            seen.append(name)
        return self
