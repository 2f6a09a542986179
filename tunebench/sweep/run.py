"""A whole sweep: plan -> run store -> every configuration in turn -> final status."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tunebench import kinds
from tunebench.quality.verdicts import write_table as write_quality_table
from tunebench.runner import ConfigOutcome
from tunebench.seams.progress import Reporter, SilentReporter
from tunebench.spec.models import SweepSpec
from tunebench.spec.plan import LoadPoint, Plan, ServerConfig
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore


@dataclass(frozen=True)
class WorkItem:
    """One server start: a configuration, the points still to measure in this repeat, and
    the rows of this repeat an earlier attempt stored (a resumed run)."""

    config: ServerConfig
    points: list[LoadPoint]
    earlier_rows: list[dict]
    repeat: int = 1


Work = list[WorkItem]


def plan_work(plan: Plan) -> Work:
    """Every configuration, `plan.repeats` times, alternating (c1 c2 c1 c2 ...) so that a
    drift of the machine over the run hits every configuration alike. A capacity search
    runs in the first repeat only; later repeats measure the fixed points."""
    fixed = [p for p in plan.points if p.search is None]
    return [
        WorkItem(config, plan.points if repeat == 1 else fixed, [], repeat)
        for repeat in range(1, plan.repeats + 1)
        for config in plan.configs
    ]


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
    with store.running(command, **attempt_details) as attempt:
        runner = kinds.build_runner(spec, spec_path, store, output_root, reporter, keep)
        try:
            for index, item in enumerate(work, start=1):
                reporter.config_starting(item.config, index, len(work))
                outcomes.append(
                    runner.run(
                        item.config,
                        item.points,
                        attempt=attempt.number,
                        earlier_rows=item.earlier_rows,
                        repeat=item.repeat,
                    )
                )
        finally:
            runner.deployment.stop()
            write_quality_table(store)  # also when interrupted: what was answered is judged
        if any(o.status != "complete" for o in outcomes):
            attempt.fail()
    return SweepResult(store, outcomes)
