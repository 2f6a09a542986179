"""One `tunebench tune` invocation: a new or resumed run directory holding the study."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import optuna

from tunebench import assemble, demo
from tunebench.errors import SpecError, StoreError, UsageError
from tunebench.points.diagnosis import diagnose_run, hint_rules
from tunebench.points.slo import thresholds_of
from tunebench.seams.progress import Reporter, SilentReporter
from tunebench.spec.loading import validate_spec
from tunebench.spec.models import SweepSpec
from tunebench.spec.plan import BUILTIN_PREFIX, Plan, ServerConfig
from tunebench.store.manifest import RunKind, spec_of
from tunebench.store.run import RunStore
from tunebench.tune import results
from tunebench.tune.evaluate import RunnerEvaluator
from tunebench.tune.revalidate import Compare, Contender, contenders, judge, run_revalidation
from tunebench.tune.storage import open_study
from tunebench.tune.study import TrialOutcome, Tuner


@dataclass
class TuneResult:
    store: RunStore
    summary: dict[str, Any]
    exports: dict[str, str]


@dataclass(frozen=True)
class TuneJob:
    """What a tune session runs: the spec as validated, where it came from, its plan."""

    spec: SweepSpec
    spec_path: Path
    spec_data: dict
    plan: Plan


def require_tune(spec: SweepSpec, spec_path: Path) -> None:
    if spec.tune is None:
        raise UsageError(
            f"{spec_path}: no `tune` section; add tune: {{space: {{max-num-seqs: "
            "{low: 8, high: 256, log: true}}} (see docs/tuning.md)"
        )
    if assemble.parallel_of(spec) > 1:
        raise SpecError(
            f"{spec_path}: deployment.parallel: a tune measures one trial at a time per "
            "worker; for trials side by side start several workers on one study "
            "(tunebench tune SPEC --storage postgresql://..., docs/tuning.md)"
        )


def job_of_run(store: RunStore) -> TuneJob:
    """The tune job a run was started with (the spec file again if secrets were masked)."""
    if store.kind is not RunKind.TUNE:
        raise UsageError(
            f"{store.path}: not a tune run (no study); start one with tunebench tune SPEC"
        )
    spec_data, spec_path = spec_of(store.manifest)
    spec = validate_spec(spec_data, spec_path)
    require_tune(spec, spec_path)
    return TuneJob(spec, spec_path, spec_data, assemble.plan(spec, spec_path))


def worker_id(store: RunStore) -> str:
    """Who a shared study's trial was measured by: host, process and run (run ids of workers
    started in the same second are alike)."""
    return f"{socket.gethostname()}:{os.getpid()}:{store.run_id}"


def masked_url(url: str) -> str:
    """A storage URL without its password (postgresql://user:***@host/db)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def diagnosis_hints(store: RunStore, config_id: str) -> dict[str, tuple[str, str]]:
    """What a measured trial's diagnosis suggests: arg -> (way, rule)."""
    entry = store.manifest.config(config_id)
    if entry is None:
        return {}
    rows = [r for r in store.rows if r.get("config_id") == config_id]
    return hint_rules(diagnose_run(rows, [entry.model_dump(mode="json")]), config_id)


def run_tune(
    job: TuneJob,
    output_root: Path,
    helm_dir: Path | None,
    reporter: Reporter | None = None,
    resume: RunStore | None = None,
    trials: int | None = None,
    on_store: Callable[[RunStore], None] | None = None,
    revalidate: int | None = None,
    compare: Compare | None = None,
    storage: str | None = None,
) -> TuneResult:
    """Start a study in a new run, or continue the study of `resume` (a tune run).

    With `revalidate` runs (default: the spec's `tune.revalidate`) and a `compare` function,
    the best, the runner-up and the baseline are re-measured after the study
    (tune/revalidate.py) and the verdict goes into the summary."""
    reporter = reporter or SilentReporter()
    spec, spec_path, plan = job.spec, job.spec_path, job.plan
    assert spec.tune is not None
    tune = spec.tune.model_copy(update={"trials": trials}) if trials else spec.tune
    base = plan.configs[0]  # tune specs have no matrix: one base configuration
    if resume is None:
        store = RunStore.create(
            output_root,
            RunKind.TUNE,
            spec.name,
            spec=job.spec_data,
            spec_path=spec_path,
            deployment_kind=spec.deployment.kind,
            varied_args=["trial", *tune.space],
            planned_points=[p.point_id for p in plan.points],
            tune={
                "objective": tune.objective,
                "study": masked_url(storage) if storage else "study.db",
                "study_name": spec.name,
            },
        )
        study = open_study(store.path, spec.name, tune, create=True, storage=storage)
        command = "tune"
    else:
        store = resume.acquire_lock()
        for note in store.stop_leftover_processes():
            reporter.note(note)
        study_name = (store.manifest.tune or {}).get("study_name", spec.name)
        try:
            study = open_study(store.path, study_name, tune, create=False)
        except KeyError:
            store.release_lock()
            raise StoreError(
                f"{store.path}: no Optuna study in study.db; is it a tune run?"
            ) from None
        command = "tune --resume"
    if storage:
        store.record(tune={**(store.manifest.tune or {}), "worker": worker_id(store)})
    if on_store:
        on_store(store)
    with store.running(command):
        # a trial that fails the quality gate is infeasible: its load is not measured
        runner = assemble.build_runner(
            spec, spec_path, store, output_root, reporter, quality_gates_load=True
        )
        try:
            evaluator = RunnerEvaluator(
                runner,
                plan.points,
                store,
                tune.objective,
                reporter,
                tune.trials,
                cost=spec.cost.model_dump() if spec.cost else None,
            )

            def on_trial(trial: optuna.trial.FrozenTrial, note: str) -> None:
                trials_seen = dict(store.manifest.trials or {})
                trials_seen[str(trial.number)] = results.trial_row(trial)
                store.record(trials=trials_seen)
                reporter.trial_done(trial, note)

            tuner = Tuner(
                study,
                tune,
                base.args,
                base.model,
                base.tokenizer,
                evaluator,
                on_trial,
                hinter=lambda config: diagnosis_hints(store, config.config_id),
                worker=worker_id(store) if storage else None,
            )
            interrupted = tuner.mark_interrupted()
            if interrupted:
                reporter.note(
                    f"{interrupted} trial(s) left running by an interrupted session marked FAIL"
                )
            evaluator.count = tuner.deployments()
            tuner.run()
            if tuner.stopped_early:
                reporter.note(tuner.stopped_early)
            checks = tune.revalidate if revalidate is None else revalidate
            revalidation = None
            if checks and compare is not None:
                entries = contenders(study)
                reporter.note(
                    f"re-validating {', '.join(f'{e.role} (trial {e.trial})' for e in entries)}: "
                    f"{checks} more run(s) each, alternated"
                )

                def measure(config: ServerConfig, entry: Contender) -> TrialOutcome:
                    # warm-start at its own value
                    return evaluator.evaluate(config, capacity_hint=entry.tuned or None)

                evaluator.total = evaluator.count + checks * len(entries)
                run_revalidation(entries, checks, measure, base.model, base.tokenizer)
                revalidation = judge(entries, compare)
                reporter.note(revalidation["verdict_text"])
        finally:
            runner.deployment.stop()
    summary = results.summarize(study, tune.objective)
    if revalidation is not None:
        summary["revalidation"] = revalidation
    slo_text = "; ".join(t.label for t in thresholds_of(spec.slo.as_dict() if spec.slo else None))
    model = base.model
    if model.startswith(BUILTIN_PREFIX):  # the path it is served from, without building it
        model = str(demo.default_model_path(model.removeprefix(BUILTIN_PREFIX)))
    exports = results.write_exports(
        summary, model, store, spec.name, helm_dir or store.layout.tuned_values_dir, slo_text
    )
    return TuneResult(store, summary, exports)
