"""`tunebench tune`: an Optuna ask/tell loop over engine args, one deployment per trial.

The loop never crashes on a bad configuration: a failed start, an OOM, args that did not
take effect, or a load failure become FAIL trials with the reason in the trial's user
attributes. Before deploying, a configuration that cannot fit in the KV cache learned from
earlier trials is PRUNED without a deployment; a configuration already measured is told
the earlier result again (TPE repeats itself on small categorical spaces). Neither counts
as a deployment; `trials` counts deployments, the baseline included.

The study lives in `<run>/study.db` (Optuna RDB storage): optuna-dashboard opens it, and
`tunebench tune --resume RUN` continues it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import optuna

from tunebench.redact import redact, redact_text
from tunebench.spec.models import Tune
from tunebench.spec.plan import ServerConfig, args_key
from tunebench.tune import space as search_space
from tunebench.tune.hints import next_trial
from tunebench.tune.pruning import kv_capacity_for, prune_reason

STUDY_FILE = "study.db"
MAX_IDLE_PROPOSALS = 25
BASELINE_ATTR = "baseline"


@dataclass
class TrialOutcome:
    """What one deployment measured; `values` is None when it failed."""

    values: list[float] | None
    reason: str | None = None  # why it failed
    attrs: dict[str, Any] = field(default_factory=dict)  # e.g. capacity details, tok/s
    effective: dict[str, Any] = field(default_factory=dict)


class TrialEvaluator(Protocol):
    def evaluate(self, config: ServerConfig) -> TrialOutcome:
        """Deploy `config`, measure it, tear it down; never raises for a bad config."""


def directions(objective: str) -> list[str]:
    return {
        "capacity": ["maximize"],
        "capacity-per-cost": ["maximize"],
        "throughput": ["maximize"],
        "throughput-latency": ["maximize", "minimize"],
    }[objective]


def objective_names(objective: str) -> list[str]:
    return {
        "capacity": ["capacity_rps"],
        "capacity-per-cost": ["requests_per_cost"],
        "throughput": ["output_tok_s"],
        "throughput-latency": ["output_tok_s", "ttft_p95_ms"],
    }[objective]


def storage_url(run_dir: Path) -> str:
    return f"sqlite:///{(run_dir / STUDY_FILE).resolve()}"


def open_study(run_dir: Path, name: str, tune: Tune, create: bool) -> optuna.Study:
    sampler: optuna.samplers.BaseSampler
    if tune.sampler == "random":
        sampler = optuna.samplers.RandomSampler(seed=tune.seed)
    else:
        # Optuna's default TPE (one density per param; a conditional param is modelled from
        # the trials that have it). On the recorded CPU grid it reached the best region in
        # fewer deployments than multivariate/grouped TPE (benchmarks/tune_efficiency.py).
        sampler = optuna.samplers.TPESampler(seed=tune.seed, n_startup_trials=tune.startup_trials)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if create:
        return optuna.create_study(
            storage=storage_url(run_dir),
            study_name=name,
            directions=directions(tune.objective),
            sampler=sampler,
        )
    return optuna.load_study(storage=storage_url(run_dir), study_name=name, sampler=sampler)


class Tuner:
    """Runs trials until `tune.trials` deployments are done, or the space is exhausted."""

    def __init__(
        self,
        study: optuna.Study,
        tune: Tune,
        base_args: dict[str, Any],
        model: str,
        tokenizer: str | None,
        evaluator: TrialEvaluator,
        on_trial: Callable[[optuna.trial.FrozenTrial, str], None] | None = None,
        hinter: Callable[[ServerConfig], dict[str, tuple[str, str]]] | None = None,
    ):
        self.study = study
        self.tune = tune
        self.base_args = dict(base_args)
        self.model = model
        self.tokenizer = tokenizer
        self.evaluator = evaluator
        self.on_trial = on_trial or (lambda trial, note: None)
        # a measured configuration's diagnosis: arg -> (way, rule) (tune/hints.py)
        self.hinter = hinter if tune.hints else None
        self.stopped_early: str | None = None

    # -- state kept in the study, so that a resumed study knows it -----------------------
    def deployments(self) -> int:
        return sum(1 for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get("deployed"))

    def _measured(self) -> dict[str, optuna.trial.FrozenTrial]:
        done = {}
        for trial in self.study.get_trials(deepcopy=False):
            key = trial.user_attrs.get("args_key")
            if (
                key
                and trial.user_attrs.get("deployed")
                and trial.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
            ):
                done.setdefault(key, trial)
        return done

    def _kv_capacity(self) -> tuple[int, str] | None:
        attrs = self.study.user_attrs
        if attrs.get("kv_capacity_tokens"):
            return int(attrs["kv_capacity_tokens"]), str(attrs.get("kv_cache_dtype", "auto"))
        return None

    def _learn(self, effective: dict[str, Any]) -> None:
        tokens = effective.get("kv_capacity_tokens")
        if tokens and not self.study.user_attrs.get("kv_capacity_tokens"):
            self.study.set_user_attr("kv_capacity_tokens", int(tokens))
            self.study.set_user_attr("kv_cache_dtype", str(effective.get("cache_dtype") or "auto"))

    def mark_interrupted(self) -> int:
        """Trials left RUNNING by an interrupted process become FAIL; returns how many."""
        count = 0
        for frozen in self.study.get_trials(
            deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)
        ):
            live = optuna.trial.Trial(self.study, frozen._trial_id)
            live.set_user_attr("fail_reason", "interrupted")
            self.study.tell(live, state=optuna.trial.TrialState.FAIL)
            count += 1
        return count

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        if self.tune.baseline and not any(
            t.user_attrs.get(BASELINE_ATTR) for t in self.study.get_trials(deepcopy=False)
        ):
            self._baseline()
        if self.tune.enqueue and not self.study.user_attrs.get("enqueued"):
            for params in self.tune.enqueue:  # asked next, in order, once per study
                self.study.enqueue_trial(params)
            self.study.set_user_attr("enqueued", True)
        idle = 0  # consecutive proposals that deployed nothing (repeats, pruned)
        while self.deployments() < self.tune.trials:
            if idle >= MAX_IDLE_PROPOSALS or self._space_exhausted():
                self.stopped_early = (
                    f"stopped after {self.deployments()} deployments: the "
                    "search space is exhausted (every proposal was measured "
                    "or pruned already)"
                )
                return
            before = self.deployments()
            self._one_trial()
            idle = 0 if self.deployments() > before else idle + 1

    def _space_exhausted(self) -> bool:
        """All-categorical spaces are finite: stop once every combination was tried."""
        if any(p.kind != "categorical" for p in self.tune.space.values()):
            return False
        size = 1
        for param in self.tune.space.values():
            size *= len(param.choices)
        tried = {
            t.user_attrs.get("args_key")
            for t in self.study.get_trials(deepcopy=False)
            if t.user_attrs.get("args_key") and not t.user_attrs.get(BASELINE_ATTR)
        }
        return len(tried) >= size  # conditional params only make the space smaller

    def _baseline(self) -> None:
        trial = self.study.ask()
        trial.set_user_attr(BASELINE_ATTR, True)
        self._deploy(trial, {}, note="baseline: vLLM defaults")

    def _one_trial(self) -> None:
        trial = self.study.ask()
        params = search_space.suggest(self.tune.space, trial)
        trial.set_user_attr("param_values", redact(params))  # ordered params are indexes in Optuna
        args = search_space.engine_args(self.base_args, params)
        key = args_key(args)
        earlier = self._measured().get(key)
        if earlier is not None:
            # The same engine args were measured: tell that result again, deploy nothing.
            trial.set_user_attr("args_key", key)
            trial.set_user_attr("repeat_of", earlier.number)
            if earlier.state == optuna.trial.TrialState.COMPLETE:
                self.study.tell(trial, earlier.values)
            else:
                trial.set_user_attr("fail_reason", earlier.user_attrs.get("fail_reason", "failed"))
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.on_trial(self.study.trials[trial.number], f"same args as trial {earlier.number}")
            return
        known = self._kv_capacity()
        tokens = (
            None
            if known is None
            else kv_capacity_for(known[0], known[1], str(args.get("kv-cache-dtype", "auto")))
        )
        reason = prune_reason(args, tokens, self.tune.kv_overcommit)
        if reason:
            trial.set_user_attr("args_key", key)
            trial.set_user_attr("pruned_reason", reason)
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            self.on_trial(self.study.trials[trial.number], f"pruned: {reason}")
            return
        self._deploy(trial, params, note=str(trial.user_attrs.get("hint") or ""))

    def _deploy(self, trial: optuna.Trial, params: dict[str, Any], note: str = "") -> None:
        args = search_space.engine_args(self.base_args, params)
        trial.set_user_attr("args_key", args_key(args))
        trial.set_user_attr("args", redact(args))  # study.db is a file in the run: no secrets
        trial.set_user_attr("deployed", True)
        config = ServerConfig(
            config_id=f"t{trial.number}",
            label=search_space.label(params) if params else "baseline",
            model=self.model,
            tokenizer=self.tokenizer,
            args=args,
            varied={"trial": trial.number, **params},
        )
        trial.set_user_attr("config_id", config.config_id)
        outcome = self.evaluator.evaluate(config)
        self._learn(outcome.effective)
        for name, value in redact(outcome.attrs).items():
            trial.set_user_attr(name, value)
        if outcome.values is None or any(v is None or math.isnan(v) for v in outcome.values):
            trial.set_user_attr("fail_reason", redact_text(outcome.reason or "no value measured"))
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, outcome.values)
            if self.hinter is not None and params:
                self._follow_hints(trial.number, config, params)
        self.on_trial(self.study.trials[trial.number], note)

    def _follow_hints(self, number: int, config: ServerConfig, params: dict[str, Any]) -> None:
        """Enqueue what the trial's diagnosis suggests, unless measured or queued already."""
        hint = next_trial(self.tune.space, params, self.hinter(config), number)
        if hint is None:
            return
        key = args_key(search_space.engine_args(self.base_args, hint.params))
        if key in self._measured():
            return
        self.study.enqueue_trial(
            hint.optuna_params, user_attrs={"hint": hint.text}, skip_if_exists=True
        )
