"""Diagnosis as the tuner's hints: the neighbouring value of the arg a finding names becomes
the next trial (tune/hints.py), taken from real planted-cause runs (tests/fixtures/
diagnosis-cpu/planted: recorded on a 2-core CPU box, see its README)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.unit.test_tune import make_tune
from tunebench.spec.models import TuneParam
from tunebench.store.run import RunStore
from tunebench.tune.hints import neighbour, next_trial
from tunebench.tune.session import diagnosis_hints
from tunebench.tune.storage import open_study
from tunebench.tune.study import TrialOutcome, Tuner

PLANTED = Path(__file__).parents[1] / "fixtures" / "diagnosis-cpu" / "planted"


def test_neighbours_inside_the_space():
    choices = TuneParam.model_validate({"choices": [2, 4, 8, 16]})
    assert neighbour(choices, 4, "up") == 8 and neighbour(choices, 4, "down") == 2
    assert neighbour(choices, 16, "up") is None and neighbour(choices, 3, "up") is None
    log = TuneParam.model_validate({"low": 8, "high": 256, "log": True})
    assert neighbour(log, 64, "up") == 128 and neighbour(log, 200, "up") == 256
    assert neighbour(log, 256, "up") is None and neighbour(log, 8, "down") is None
    linear = TuneParam.model_validate({"low": 0, "high": 100, "step": 10})
    assert neighbour(linear, 50, "down") == 40
    assert neighbour(TuneParam.model_validate({"low": 0.8, "high": 0.95}), 0.9, "up") is None


def test_the_planted_causes_hint_at_their_own_args(tmp_path):
    run = tmp_path / "planted"
    shutil.copytree(PLANTED, run)
    store = RunStore.open(run)
    assert diagnosis_hints(store, "c1") == {}  # healthy: no hint
    assert diagnosis_hints(store, "c2") == {"max-num-seqs": ("up", "scheduler-limited")}
    assert diagnosis_hints(store, "c3")["max-num-seqs"] == ("down", "kv-limited")
    assert diagnosis_hints(store, "c4") == {"max-num-batched-tokens": ("up", "prefill-limited")}


def test_a_hint_becomes_one_whole_next_trial_with_ordered_choices_as_indexes():
    space = {
        "max-num-seqs": TuneParam.model_validate({"choices": [2, 4, 8], "ordered": True}),
        "max-num-batched-tokens": TuneParam.model_validate({"choices": [32, 256, 2048]}),
    }
    params = {"max-num-seqs": 2, "max-num-batched-tokens": 32}
    hint = next_trial(space, params, {"max-num-seqs": ("up", "scheduler-limited")}, 3)
    assert hint is not None
    assert hint.params == {"max-num-seqs": 4, "max-num-batched-tokens": 32}
    assert hint.optuna_params == {"max-num-seqs": 1, "max-num-batched-tokens": 32}
    assert hint.text == "hint from trial 3 (scheduler-limited): max-num-seqs 2 -> 4"
    # an arg outside the space, or at its edge, gives no hint
    assert next_trial(space, params, {"max-model-len": ("down", "kv-limited")}, 3) is None
    assert next_trial(space, params, {"max-num-seqs": ("down", "kv-limited")}, 3) is None


class QueueingEvaluator:
    """Capacity grows with max-num-seqs; below 16 requests queue behind it."""

    def __init__(self):
        self.deployed: list[dict] = []

    def evaluate(self, config):
        self.deployed.append(dict(config.args))
        seqs = config.args.get("max-num-seqs", 16)
        return TrialOutcome([float(seqs)], effective={"kv_capacity_tokens": 1 << 20})


def _hinter(config):
    seqs = config.args.get("max-num-seqs", 16)
    return {"max-num-seqs": ("up", "scheduler-limited")} if seqs < 16 else {}


def _run(tmp_path, hints: bool):
    tune = make_tune(
        trials=4, hints=hints, enqueue=[{"max-num-seqs": 2, "max-num-batched-tokens": 256}]
    )
    tmp_path.mkdir()
    study = open_study(tmp_path, "t", tune, create=True)
    evaluator = QueueingEvaluator()
    Tuner(study, tune, {}, "m", None, evaluator, hinter=_hinter).run()
    return study, evaluator


def test_the_tuner_follows_the_diagnosis_up_the_space(tmp_path):
    study, evaluator = _run(tmp_path / "on", hints=True)
    seqs = [args.get("max-num-seqs") for args in evaluator.deployed]
    assert seqs == [None, 2, 4, 8]  # baseline, the enqueued trial, then the hints
    notes = [t.user_attrs.get("hint") for t in study.trials]
    assert notes[2] == "hint from trial 1 (scheduler-limited): max-num-seqs 2 -> 4"
    assert notes[3] == "hint from trial 2 (scheduler-limited): max-num-seqs 4 -> 8"
    # off: the sampler alone picks after the enqueued trial
    study, evaluator = _run(tmp_path / "off", hints=False)
    assert not any(t.user_attrs.get("hint") for t in study.trials)
