"""One `tunebench tune` invocation: a new or resumed run directory holding the study."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from tunebench import demo
from tunebench.errors import StoreError
from tunebench.slo import thresholds_of
from tunebench.progress import Reporter, SilentReporter
from tunebench.spec.models import SweepSpec
from tunebench.spec.plan import BUILTIN_PREFIX, Plan
from tunebench.store.run import RunStore
from tunebench.sweep import build_runner, new_run_manifest
from tunebench.tune import results
from tunebench.tune.evaluate import RunnerEvaluator
from tunebench.tune.study import Tuner, open_study


@dataclass
class TuneResult:
    store: RunStore
    summary: dict[str, Any]
    exports: dict[str, str]


def run_tune(
    spec: SweepSpec,
    spec_path: Path,
    spec_data: dict,
    plan: Plan,
    output_root: Path,
    helm_dir: Path,
    reporter: Reporter | None = None,
    resume: RunStore | None = None,
    trials: int | None = None,
    on_store=None,
) -> TuneResult:
    reporter = reporter or SilentReporter()
    tune = spec.tune.model_copy(update={"trials": trials}) if trials else spec.tune
    base = plan.configs[0]  # tune specs have no matrix: one base configuration
    if resume is None:
        store = RunStore.create(output_root, spec.name, {
            **new_run_manifest(spec, spec_path, spec_data, plan, ["trial", *tune.space]),
            "tune": {"objective": tune.objective, "study": "study.db", "study_name": spec.name},
        })
        store.begin_attempt(command="tune")
        study = open_study(store.path, spec.name, tune, create=True)
    else:
        store = resume.acquire_lock()
        try:
            study = open_study(store.path, store.manifest.get("tune", {}).get("study_name", spec.name),
                               tune, create=False)
        except KeyError:
            raise StoreError(f"{store.path}: no Optuna study in study.db; is it a tune run?") from None
        store.begin_attempt(command="tune --resume")
    if on_store:
        on_store(store)
    runner = None
    status = "interrupted"
    try:
        runner = build_runner(spec, spec_path, store, output_root, reporter)
        evaluator = RunnerEvaluator(runner, plan.points, store, tune.objective, reporter, tune.trials)

        def on_trial(trial: optuna.trial.FrozenTrial, note: str) -> None:
            store.manifest.setdefault("trials", {})[str(trial.number)] = results.trial_row(trial)
            store.save_manifest()
            reporter.trial_done(trial, note)

        tuner = Tuner(study, tune, base.args, base.model, base.tokenizer, evaluator, on_trial)
        interrupted = tuner.mark_interrupted()
        if interrupted:
            reporter.note(f"{interrupted} trial(s) left running by an interrupted session marked FAIL")
        evaluator.count = tuner.deployments()
        tuner.run()
        if tuner.stopped_early:
            reporter.note(tuner.stopped_early)
        status = "complete"
    except Exception:
        status = "failed"
        raise
    finally:
        if runner is not None:
            runner.deployment.stop()
        store.set_status(status)
    summary = results.summarize(study, tune.objective)
    slo_text = "; ".join(t.label for t in thresholds_of(spec.slo.as_dict() if spec.slo else None))
    model = base.model
    if model.startswith(BUILTIN_PREFIX):  # the path it is served from, without building it
        model = str(demo.default_model_path(model.removeprefix(BUILTIN_PREFIX)))
    exports = results.write_exports(summary, model, store.run_id, spec.name, store.path,
                                    helm_dir, slo_text)
    return TuneResult(store, summary, exports)
