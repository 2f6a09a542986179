"""How long a batch will take, for --dry-run: read from the last complete run of the same
batch file (by its name) under the run root. Each configuration's wall time is taken as it
was, its generation scaled by the records asked for now. Without such a run there is no
estimate: a batch's throughput is what it measures, and a guess from another model or
machine would be off by more than the answer is worth. report/batch_tables.py words it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tunebench.batch.run import PHASES
from tunebench.numbers import to_float
from tunebench.store.manifest import RunKind, Status
from tunebench.store.run import RunStore, newest_runs

#: The phases a configuration pays whatever its records.
FIXED_PHASES = tuple(phase for phase in PHASES if phase != "generate_s")


@dataclass(frozen=True)
class BatchEstimate:
    """`seconds` for the `known` of `configs` configurations that run `run_id` measured
    (None: no such run, or it measured none of them)."""

    seconds: float | None
    run_id: str | None
    known: int
    configs: int
    records: int


def estimate_batch(root: Path, name: str, labels: list[str], records: int) -> BatchEstimate:
    """The time of `labels` (configurations) over `records` records, from the last complete
    batch run named `name` under `root`."""
    earlier = _last_complete(root, name)
    if earlier is None:
        return BatchEstimate(None, None, 0, len(labels), records)
    rows = {str(row.get("config_label")): row for row in earlier.rows}
    found = [_seconds(rows[label], records) for label in labels if label in rows]
    known = [seconds for seconds in found if seconds is not None]
    return BatchEstimate(
        sum(known) if known else None, earlier.run_id, len(known), len(labels), records
    )


def _last_complete(root: Path, name: str) -> RunStore | None:
    for store in newest_runs(root):
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
