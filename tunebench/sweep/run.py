"""A whole sweep: plan -> run store -> every configuration in turn -> final status."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tunebench import assemble, kinds
from tunebench.errors import TunebenchError
from tunebench.quality.verdicts import write_table as write_quality_table
from tunebench.runner import ConfigOutcome, ConfigRunner
from tunebench.seams.progress import Reporter, SilentReporter
from tunebench.spec.models import SweepSpec
from tunebench.spec.plan import Plan
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore
from tunebench.sweep.parallel import FAIR_COMPARISON_NOTE, measure_in_parallel
from tunebench.sweep.work import Work, WorkItem, plan_work, repeat_of

__all__ = ["SweepResult", "Work", "WorkItem", "plan_work", "run_configs", "run_sweep"]


@dataclass
class SweepResult:
    store: RunStore
    outcomes: list[ConfigOutcome]

    @property
    def failed(self) -> list[ConfigOutcome]:
        return [o for o in self.outcomes if o.status != "complete"]


def varied_args(plan: Plan) -> list[str]:
    keys: list[str] = []
    for config in plan.configs:
        for key in config.varied:
            if key not in keys:
                keys.append(key)
    return keys


def run_sweep(
    spec: SweepSpec,
    spec_path: Path,
    spec_data: dict,
    plan: Plan,
    output_root: Path,
    reporter: Reporter | None = None,
    on_store: Callable[[RunStore], None] | None = None,
    keep: bool = False,
    only: bool = False,
) -> SweepResult:
    """Run every configuration of `plan`; `on_store` sees the run store as soon as it exists.
    `only`: the plan is one part of a split sweep (its config ids are recorded)."""
    reporter = reporter or SilentReporter()
    store = RunStore.create(
        output_root,
        RunKind.SWEEP,
        spec.name,
        spec=spec_data,
        spec_path=spec_path,
        deployment_kind=spec.deployment.kind,
        varied_args=varied_args(plan),
        planned_points=[p.point_id for p in plan.points],
        **({"only": [c.config_id for c in plan.configs]} if only else {}),
    )
    if on_store:
        on_store(store)
    return run_configs(
        spec, spec_path, store, output_root, reporter, plan_work(plan), keep, "sweep"
    )


def run_configs(
    spec: SweepSpec,
    spec_path: Path,
    store: RunStore,
    output_root: Path,
    reporter: Reporter,
    work: Work,
    keep: bool,
    command: str,
    kept: list[ConfigOutcome] | None = None,
    **attempt_details,
) -> SweepResult:
    """Measure each item of `work` (one server start each); the run is complete only when
    every configuration (`kept` ones included) is."""
    outcomes: list[ConfigOutcome] = list(kept or [])
    parallel = assemble.parallel_of(spec)
    with store.running(command, **attempt_details) as attempt:
        if spec.machine.stability_s and attempt.number == 1:
            preflight(spec, spec_path, store, reporter)
        try:
            job = _Job(spec, spec_path, store, output_root, reporter, keep)
            if parallel > 1 and len(work) > 1:
                outcomes += _measure_in_parallel(job, work, attempt.number)
            else:
                outcomes += _measure_in_turn(job, work, attempt.number)
        finally:
            write_quality_table(store)  # also when interrupted: what was answered is judged
        if any(o.status != "complete" for o in outcomes):
            attempt.fail()
    return SweepResult(store, outcomes)


def preflight(spec: SweepSpec, spec_path: Path, store: RunStore, reporter: Reporter) -> None:
    """`machine.stability_s`: time the probe on the server's CPUs before any server starts;
    a machine that does not hold its speed stops the sweep before it measures anything."""
    from tunebench.machine.stability import check_stability
    from tunebench.processes import parse_cpus

    seconds = float(spec.machine.stability_s or 0)
    cpus = getattr(spec.deployment, "cpus", None) if kinds.kind_of(spec).on_this_host else None
    reporter.note(f"checking that the machine holds its speed ({seconds:g} s)")
    found = check_stability(seconds, parse_cpus(cpus) if cpus else None)
    store.record(machine_check={"line": found.line(), "steady": found.steady, "bins": found.bins})
    reporter.note(found.line())
    if not found.steady:
        raise TunebenchError(
            f"{spec_path}: machine.stability_s: {found.line()}; measure on a quieter machine, "
            "or remove machine.stability_s to measure anyway (drift is then flagged per point)"
        )


@dataclass(frozen=True)
class _Job:
    """What every runner of one sweep attempt is built from."""

    spec: SweepSpec
    spec_path: Path
    store: RunStore
    output_root: Path
    reporter: Reporter
    keep: bool

    def runner(
        self, keep: bool, slot: kinds.Slot | None, reporter: Reporter | None = None
    ) -> ConfigRunner:
        return assemble.build_runner(
            self.spec,
            self.spec_path,
            self.store,
            self.output_root,
            reporter or self.reporter,
            keep,
            slot,
        )


def _measure_in_turn(job: _Job, work: Work, attempt: int) -> list[ConfigOutcome]:
    store, reporter, keep = job.store, job.reporter, job.keep
    outcomes: list[ConfigOutcome] = []
    # A part of a split sweep (--only) may run beside the other parts in the same namespace:
    # each configuration then gets a release of its own, as in parallel.
    own_names = bool(store.manifest.only)
    runner = None
    try:
        for index, item in enumerate(work, start=1):
            reporter.config_starting(item.config, index, len(work), repeat_of(item))
            if runner is None or own_names:
                if runner is not None:
                    runner.deployment.stop()
                slot = kinds.Slot(item.config.config_id) if own_names else None
                # --keep leaves the last configuration's release: one runner (one release)
                # keeps whatever it ran last; with a release each, only the last one keeps
                keep_this = keep and (not own_names or index == len(work))
                runner = job.runner(keep_this, slot)
            outcomes.append(item.measure(runner, attempt))
    finally:
        if runner is not None:
            runner.deployment.stop()
    return outcomes


def _measure_in_parallel(job: _Job, work: Work, attempt: int) -> list[ConfigOutcome]:
    """deployment.parallel > 1: each item with a runner of its own (sweep/parallel.py)."""
    store, reporter = job.store, job.reporter
    parallel = assemble.parallel_of(job.spec)
    note = FAIR_COMPARISON_NOTE.format(n=parallel)
    store.record(parallel={"configurations": parallel, "note": note})
    reporter.note(f"measuring up to {parallel} configurations at a time")

    def measure(item: WorkItem, slot: kinds.Slot, shared: Reporter) -> ConfigOutcome:
        last = item is work[-1]  # --keep: the plan's last configuration's release stays
        runner = job.runner(job.keep and last, slot, shared)
        if slot.gpus:
            store.update_config(item.config.config_id, gpus=list(slot.gpus))
        try:
            return item.measure(runner, attempt)
        finally:
            runner.deployment.stop()

    try:
        return measure_in_parallel(
            work, parallel, measure, reporter, assemble.parallel_gpus(job.spec)
        )
    finally:
        store.order_points()  # as a sequential sweep writes them
