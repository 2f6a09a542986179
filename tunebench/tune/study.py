"""`tunebench tune`: an Optuna ask/tell loop over engine args, one deployment per trial.

The loop never crashes on a bad configuration: a failed start, an OOM, args that did not
take effect, or a load failure become FAIL trials with the reason in the trial's user
attributes. Before deploying, a configuration that cannot fit in the KV cache learned from
earlier trials is PRUNED without a deployment; a configuration already measured is told
the earlier result again (TPE repeats itself on small categorical spaces). Neither counts
as a deployment; `trials` counts deployments, the baseline included.

The study lives in `<run>/study.db` (Optuna RDB storage): optuna-dashboard opens it, and
`tunebench tune --resume RUN` continues it. With `--storage postgresql://...` the study is
shared: every `tunebench tune` process given that storage is a worker adding trials to it
(docs/tuning.md#several-workers-on-one-study). Workers claim a trial's args before deploying
them (never two the same args), count the budget over the whole study, and record a
heartbeat while a trial runs: a worker that dies leaves a trial that another fails and
retries.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import optuna

from tunebench.redact import redact, redact_text
from tunebench.spec.models import Tune
from tunebench.spec.plan import ServerConfig, args_key
from tunebench.tune import space as search_space
from tunebench.tune.claims import BASELINE_ATTR, StudyClaims, deployments
from tunebench.tune.hints import next_trial
from tunebench.tune.pruning import kv_budget_key, kv_capacity_for, prune_reason
from tunebench.tune.storage import fail_stale, heartbeat

MAX_IDLE_PROPOSALS = 25
# After this many proposals in a row that deployed nothing, propose at random until one does.
RANDOM_AFTER_IDLE = 5
# Rounds of claiming the baseline in a shared study before leaving it to the other workers.
BASELINE_CLAIM_ROUNDS = 20


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
        worker: str | None = None,
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
        # a shared study (several workers): claims, a study-wide budget, heartbeats
        self.worker = worker
        self.shared = worker is not None
        self.claims = StudyClaims(study, worker)

    # -- state kept in the study, so that a resumed study knows it -----------------------
    def deployments(self) -> int:
        """Deployments of the study (all workers'), running ones included."""
        return deployments(self.study)

    def _measured(self) -> dict[str, optuna.trial.FrozenTrial]:
        done: dict[str, optuna.trial.FrozenTrial] = {}
        for trial in self.study.get_trials(deepcopy=False):
            key = trial.user_attrs.get("args_key")
            if (
                key
                and trial.user_attrs.get("deployed")
                and trial.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
                # a trial whose worker died (failed by its heartbeat) measured nothing
                and not (
                    trial.state == optuna.trial.TrialState.FAIL
                    and not trial.user_attrs.get("fail_reason")
                )
            ):
                done.setdefault(key, trial)
        return done

    def _kv_capacity(self, args: dict[str, Any]) -> tuple[int, str] | None:
        """The KV capacity and its dtype learned from a trial with the same KV budget args as
        `args` (tune/pruning.py `KV_BUDGET_ARGS`), or None: not known before it starts."""
        attrs = self.study.user_attrs
        learned = (attrs.get("kv_capacities") or {}).get(kv_budget_key(args))
        if learned:
            return int(learned[0]), str(learned[1])
        if attrs.get("kv_capacity_tokens") and not attrs.get("kv_capacities"):
            # a study from before the budget key: one capacity for all
            return int(attrs["kv_capacity_tokens"]), str(attrs.get("kv_cache_dtype", "auto"))
        return None

    def _learn(self, effective: dict[str, Any], args: dict[str, Any]) -> None:
        tokens = effective.get("kv_capacity_tokens")
        if not tokens:
            return
        learned = dict(self.study.user_attrs.get("kv_capacities") or {})
        key = kv_budget_key(args)
        if key not in learned:
            learned[key] = [int(tokens), str(effective.get("cache_dtype") or "auto")]
            self.study.set_user_attr("kv_capacities", learned)

    def mark_interrupted(self) -> int:
        """Trials left RUNNING by an interrupted process become FAIL; returns how many. A
        shared study's running trials may be other workers' alive: their heartbeats decide."""
        if self.shared:
            fail_stale(self.study)
            return 0
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
                self.study.enqueue_trial(params, skip_if_exists=self.shared)
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
            if self.shared:  # a dead worker's trial: failed, and retried if allowed
                fail_stale(self.study)
            self._one_trial(explore=idle >= RANDOM_AFTER_IDLE)
            idle = 0 if self.deployments() > before else idle + 1

    def _space_exhausted(self) -> bool:
        """All-categorical spaces are finite: stop once every combination was tried."""
        if any(p.kind != "categorical" for p in self.tune.space.values()):
            return False
        size = 1
        for param in self.tune.space.values():
            size *= len(param.choice_list)
        tried = {
            t.user_attrs.get("args_key")
            for t in self.study.get_trials(deepcopy=False)
            if t.user_attrs.get("args_key")
            and not t.user_attrs.get(BASELINE_ATTR)
            and not t.user_attrs.get("yielded")  # left to another worker: not measured
        }
        return len(tried) >= size  # conditional params only make the space smaller

    def _baseline(self) -> None:
        """Deploy the baseline, once per study. Workers of a shared study claim it as they
        claim args: the claim is written before the others' are read, and a claimer that
        sees another yields, so two never both measure it. Two that claim together may
        both yield: then each waits for the other's decision and, when nobody took the
        baseline, claims it again after a random pause, which breaks the tie."""
        for _ in range(BASELINE_CLAIM_ROUNDS):
            trial = self.study.ask()
            trial.set_user_attr(BASELINE_ATTR, True)
            if not self.shared:
                break
            others = self.claims.baseline_claimers(trial.number)
            if not others:
                break
            trial.set_user_attr(BASELINE_ATTR, False)
            self._yield(trial, f"the baseline is trial {min(others)} (another worker)")
            if self.claims.baseline_taken(trial.number):
                return
            time.sleep(random.uniform(0.05, 0.5))
        else:
            return  # every round tied (the others keep claiming): they will measure it
        self._deploy(trial, {}, note="baseline: vLLM defaults")

    def _yield(self, trial: optuna.Trial, reason: str) -> None:
        """A shared study's trial left to another worker: PRUNED, not a deployment."""
        trial.set_user_attr("deployed", False)
        trial.set_user_attr("yielded", True)
        trial.set_user_attr("pruned_reason", reason)
        self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        self.on_trial(self.study.trials[trial.number], reason)

    def _one_trial(self, explore: bool = False) -> None:
        """One proposal; with `explore`, drawn at random: TPE that has converged proposes
        measured args again and again (told, not deployed) while the space has others."""
        sampler = self.study.sampler
        if explore:  # the trial samples when its params are suggested: swap until then
            self.study.sampler = optuna.samplers.RandomSampler()
        try:
            trial, params = self._propose()
        finally:
            self.study.sampler = sampler
        if trial is None:
            return
        self._measure_proposal(trial, params)

    def _propose(self) -> tuple[optuna.Trial | None, dict[str, Any]]:
        """Ask for a trial and suggest its params (None: a retried baseline, handled)."""
        trial = self.study.ask()
        if trial.user_attrs.get("deployed"):
            # a retry of a dead worker's trial carries its attributes: not deployed yet
            trial.set_user_attr("deployed", False)
            if trial.user_attrs.get(BASELINE_ATTR):
                self._deploy(trial, {}, note="baseline: vLLM defaults (retried)")
                return None, {}
        return trial, search_space.suggest(self.tune.space, trial)

    def _measure_proposal(self, trial: optuna.Trial, params: dict[str, Any]) -> None:
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
        known = self._kv_capacity(args)
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
        # beating from the claim on: a worker that dies after claiming leaves a trial that
        # goes stale (and is retried), not one that holds its args forever
        with heartbeat(self.study, trial, self.tune.heartbeat_s):
            self._claim_and_measure(trial, params, note)

    def _claim_and_measure(self, trial: optuna.Trial, params: dict[str, Any], note: str) -> None:
        args = search_space.engine_args(self.base_args, params)
        key = args_key(args)
        if self.shared:  # the claim writes args_key and deployed
            refused = self.claims.claim(trial, key, self.tune.trials)
            if refused:
                self._yield(trial, refused)
                return
            trial.set_user_attr("worker", self.worker)
        else:
            trial.set_user_attr("args_key", key)
            trial.set_user_attr("deployed", True)
        trial.set_user_attr("args", redact(args))  # study.db is a file in the run: no secrets
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
        self._learn(outcome.effective, args)
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
        assert self.hinter is not None  # called only when the tune follows hints
        hint = next_trial(self.tune.space, params, self.hinter(config), number)
        if hint is None:
            return
        key = args_key(search_space.engine_args(self.base_args, hint.params))
        if key in self._measured():
            return
        self.study.enqueue_trial(
            hint.optuna_params, user_attrs={"hint": hint.text}, skip_if_exists=True
        )
