"""Claims in a shared study: how workers of one study (`tune --storage postgresql://...`)
never deploy the same args twice, and measure the baseline exactly once.

A claim is written before the others' are read, and a claimer that sees another yields:
two that claim together may both yield, never both deploy. The budget counts claims the
same way. Each worker's Tuner (tune/study.py) asks its StudyClaims before deploying.
"""

from __future__ import annotations

import time

import optuna

BASELINE_ATTR = "baseline"


class StudyClaims:
    def __init__(self, study: optuna.Study, worker: str | None):
        self.study = study
        self.worker = worker

    def baseline_claimers(self, own: int) -> list[int]:
        """Numbers of the other trials that claim the baseline now."""
        return [
            t.number
            for t in self.study.get_trials(deepcopy=False)
            if t.user_attrs.get(BASELINE_ATTR)
            and t.number != own
            and t.state != optuna.trial.TrialState.WAITING
        ]

    def baseline_taken(self, own: int, timeout_s: float = 60.0) -> bool:
        """Whether another worker measures (or measured) the baseline, once every claimer
        has decided: a claimer that went on to deploy has its worker recorded or has
        ended; one that yielded no longer claims it."""
        deadline = time.monotonic() + timeout_s
        while True:
            undecided = False
            for t in self.study.get_trials(deepcopy=False):
                if t.number == own or not t.user_attrs.get(BASELINE_ATTR):
                    continue
                if t.state != optuna.trial.TrialState.RUNNING or t.user_attrs.get("worker"):
                    return True
                undecided = True
            if not undecided or time.monotonic() > deadline:
                return undecided  # an undecided claimer past the deadline: leave it to it
            time.sleep(0.1)

    def claim(self, trial: optuna.Trial, key: str, budget: int) -> str | None:
        """Why `trial` must not deploy `key` (None: it may); `budget` is the study's
        deployments, all workers'. The claim (args_key and deployed) is written before the
        check, and a trial yields to any other that claimed the same."""
        trial.set_user_attr("args_key", key)
        trial.set_user_attr("deployed", True)
        live = [
            t
            for t in self.study.get_trials(deepcopy=False)
            if t.number != trial.number and t.state != optuna.trial.TrialState.WAITING
        ]
        for other in live:
            if (
                other.state == optuna.trial.TrialState.RUNNING
                and other.user_attrs.get("args_key") == key
                and other.user_attrs.get("deployed")
            ):
                return f"the same args are being measured by trial {other.number} (another worker)"
        if deployments(self.study) > budget:
            return f"the study's {budget} deployments are spent (by all workers)"
        return None


def deployments(study: optuna.Study) -> int:
    """Deployments of the study (all workers'), running ones included; a retry waiting to
    run carries its failed original's attributes and is not one yet."""
    return sum(
        1
        for t in study.get_trials(deepcopy=False)
        if t.user_attrs.get("deployed") and t.state != optuna.trial.TrialState.WAITING
    )
