"""`tunebench sweep --resume RUN`: finish an interrupted or failed sweep in the same run.

Points already stored are kept and not measured again; every point not in points.csv (the
one in flight when the run stopped, and those after it) is measured, configuration by
configuration, with one server start for each configuration that still has work. A
configuration's capacity search continues from the probes it already stored. Each go at
the run is recorded in `manifest.attempts`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tunebench import assemble
from tunebench.errors import StoreError
from tunebench.load.guidellm import expected_benchmarks
from tunebench.runner import ConfigOutcome
from tunebench.seams.progress import Reporter
from tunebench.spec.load_kind import LoadKind
from tunebench.spec.loading import validate_spec
from tunebench.spec.plan import LoadPoint
from tunebench.store.manifest import ConfigStatus, RunKind, Status, spec_of
from tunebench.store.run import RunStore
from tunebench.sweep.run import SweepResult, Work, WorkItem, plan_work, run_configs


def _measured(point: LoadPoint, ids: set[str]) -> bool:
    if point.kind == LoadKind.SWEEP:
        return all(f"sweep-{j}" in ids for j in range(expected_benchmarks(point)))
    return point.point_id in ids


def resume_sweep(
    run_path: Path, output_root: Path, reporter: Reporter, keep: bool = False
) -> SweepResult | None:
    """None when the run is already complete (nothing to do)."""
    store = RunStore.open(run_path)
    manifest = store.manifest
    if manifest.kind is not RunKind.SWEEP:
        raise StoreError(
            f"{run_path}: a {manifest.kind.value} run, not a sweep; "
            + (
                "resume it with `tunebench tune --resume RUN`"
                if manifest.kind is RunKind.TUNE
                else "run it again"
            )
        )
    store.acquire_lock()
    if manifest.status is Status.COMPLETE:
        store.release_lock()
        return None
    for note in store.stop_leftover_processes():
        reporter.note(note)
    try:
        spec_data, spec_path = spec_of(manifest)
        spec = validate_spec(spec_data, spec_path)
        plan = assemble.plan(spec, spec_path)
        only = manifest.only
        if only:  # a part of a split sweep (sweep --only): its configurations only
            plan = dataclasses.replace(
                plan, configs=[c for c in plan.configs if c.config_id in only]
            )
    except BaseException:
        store.release_lock()
        raise
    work: Work = []
    kept: list[ConfigOutcome] = []
    for item in plan_work(plan):
        config = item.config
        rows = [
            r
            for r in store.rows
            if r.get("config_id") == config.config_id
            and int(float(r.get("repeat") or 1)) == item.repeat
        ]
        ids = {r.get("point_id", "") for r in rows}
        todo = [p for p in item.points if p.search is None and not _measured(p, ids)]
        entry = manifest.config(config.config_id)
        capacity = (entry.capacity if entry is not None else None) or {}
        search_done = bool(
            capacity.get(
                "done", capacity and entry is not None and entry.status is ConfigStatus.COMPLETE
            )
        )
        todo += [p for p in item.points if p.search is not None and not search_done]
        if todo:
            work.append(WorkItem(config, todo, rows, item.repeat, item.repeats))
        else:
            kept.append(ConfigOutcome(config.config_id, "complete", len(rows)))
    to_measure = sum(len(w.points) for w in work)
    reporter.note(
        f"resuming {store.run_id}: {len(store.rows)} points kept, "
        f"{to_measure} to measure in {len(work)} server start(s)"
    )
    return run_configs(
        spec,
        spec_path,
        store,
        output_root,
        reporter,
        work,
        keep,
        "sweep --resume",
        kept,
        points_kept=len(store.rows),
        points_to_measure=to_measure,
    )
