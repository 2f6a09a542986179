"""How long a batch will take, for --dry-run: read from the last complete run of the same
batch file (by its name) under the run root. Each configuration's engine phases are taken as
they were; its generation is scaled by the records asked for now. Without such a run there
is no estimate: a batch's throughput is what it measures, and a guess from another model or
machine would be off by more than the answer is worth.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tunebench.errors import TunebenchError
from tunebench.numbers import to_float
from tunebench.store.manifest import RunKind, Status
from tunebench.store.run import RunStore, list_runs

#: The phases a configuration pays whatever its records (batch/run.py PHASES but generate).
FIXED_PHASES = ("import_s", "load_s", "init_s", "compile_s", "write_s")


@dataclass(frozen=True)
class BatchEstimate:
    seconds: float | None
    text: str


def estimate_batch(root: Path, name: str, labels: list[str], records: int) -> BatchEstimate:
    """The time of `labels` (configurations) over `records` records, from the last complete
    batch run named `name` under `root`."""
    earlier = _last_complete(root, name)
    if earlier is None:
        return BatchEstimate(
            None,
            f"estimated time: none (no earlier complete run of batch {name!r} under {root}: "
            "the first run records each phase, and the next dry-run estimates from it)",
        )
    rows = {str(row.get("config_label")): row for row in earlier.rows}
    total, known = 0.0, 0
    for label in labels:
        row = rows.get(label)
        seconds = _seconds(row, records) if row else None
        if seconds is not None:
            total += seconds
            known += 1
    if not known:
        return BatchEstimate(
            None,
            f"estimated time: none (run {earlier.run_id} of this batch measured none of these "
            "configurations)",
        )
    share = "" if known == len(labels) else f" for {known} of {len(labels)} configurations"
    return BatchEstimate(
        total,
        f"estimated time: about {_clock(total)}{share} (each configuration's phases as run "
        f"{earlier.run_id} measured them, its generation scaled to {records} records)",
    )


def _last_complete(root: Path, name: str) -> RunStore | None:
    for path in reversed(list_runs(root)):  # run ids sort by time
        try:
            store = RunStore.open(path)
        except TunebenchError:
            continue
        manifest = store.manifest
        if (
            manifest.kind == RunKind.BATCH
            and manifest.name == name
            and manifest.status == Status.COMPLETE
        ):
            return store
    return None


def _seconds(row: dict, records: int) -> float | None:
    """A configuration's wall time (its workers' starts included) with its generation
    scaled from the records it measured to `records`."""
    generate = to_float(row.get("generate_s"))
    measured = to_float(row.get("target"))  # a batch row's target is its records
    if generate is None or not measured:
        return None
    wall = to_float(row.get("wall_s"))
    fixed = (
        wall - generate
        if wall is not None and wall >= generate
        else sum(to_float(row.get(phase)) or 0.0 for phase in FIXED_PHASES)
    )
    return fixed + generate * records / measured


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"
