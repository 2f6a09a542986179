"""The work of a sweep: one item per server start, in the order they are measured."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.runner import ConfigOutcome, ConfigRunner
from tunebench.spec.plan import LoadPoint, Plan, ServerConfig


@dataclass(frozen=True)
class WorkItem:
    """One server start: a configuration, the points still to measure in this repeat, and
    the rows of this repeat an earlier attempt stored (a resumed run)."""

    config: ServerConfig
    points: list[LoadPoint]
    earlier_rows: list[dict]
    repeat: int = 1
    repeats: int = 1  # how many the sweep measures: the progress says "repeat 2 of 3"

    def measure(self, runner: ConfigRunner, attempt: int) -> ConfigOutcome:
        """This item's points on `runner` (deploy, measure, teardown), as attempt `attempt`."""
        return runner.run(
            self.config,
            self.points,
            attempt=attempt,
            earlier_rows=self.earlier_rows,
            repeat=self.repeat,
        )


Work = list[WorkItem]


def repeat_of(item: WorkItem) -> tuple[int, int] | None:
    """(this repeat, of how many) for the progress line; None when there is one."""
    return (item.repeat, item.repeats) if item.repeats > 1 else None


def plan_work(plan: Plan) -> Work:
    """Every configuration, `plan.repeats` times, alternating (c1 c2 c1 c2 ...) so that a
    drift of the machine over the run hits every configuration alike. A capacity search
    runs in the first repeat only; later repeats measure the fixed points."""
    fixed = [p for p in plan.points if p.search is None]
    return [
        WorkItem(config, plan.points if repeat == 1 else fixed, [], repeat, plan.repeats)
        for repeat in range(1, plan.repeats + 1)
        for config in plan.configs
    ]
