"""`tunebench sweep --resume RUN`: finish an interrupted or failed sweep in the same run.

Points already stored are kept and not measured again; every point not in points.csv (the
one in flight when the run stopped, and those after it) is measured, configuration by
configuration, with one server start for each configuration that still has work. A
configuration's capacity search continues from the probes it already stored. Each go at
the run is recorded in `manifest.attempts`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunebench.errors import SpecError, StoreError
from tunebench.load.guidellm import expected_benchmarks
from tunebench.progress import Reporter
from tunebench.redact import MASK, redact
from tunebench.runner import ConfigOutcome
from tunebench.spec.loading import read_yaml_mapping, validate_spec
from tunebench.spec.plan import LoadPoint, build_plan
from tunebench.store.run import RunStore
from tunebench.sweep import SweepResult, run_configs


def _spec_of(store: RunStore) -> tuple[dict[str, Any], Path]:
    """The sweep as it was run. The manifest's copy has secrets masked, so the file is read
    again when it still holds the same sweep; a masked copy alone cannot be resumed."""
    manifest = store.manifest
    spec_path = Path(manifest.get("spec_path") or "")
    recorded = manifest.get("spec")
    if not isinstance(recorded, dict):
        raise StoreError(f"{store.path}: manifest.json holds no sweep spec; it cannot be resumed")
    if spec_path.is_file():
        current = read_yaml_mapping(spec_path)
        if redact(current) == recorded:
            return current, spec_path
        if MASK not in repr(recorded):
            return recorded, spec_path  # the file changed since: resume what was run
    elif MASK not in repr(recorded):
        return recorded, spec_path
    raise SpecError(f"{spec_path}: the run's spec holds a secret that was masked, and this file "
                    "is gone or changed; restore the sweep file the run was started with")


def _measured(point: LoadPoint, ids: set[str]) -> bool:
    if point.kind == "sweep":
        return all(f"sweep-{j}" in ids for j in range(expected_benchmarks(point)))
    return point.point_id in ids


def resume_sweep(run_path: Path, output_root: Path, reporter: Reporter,
                 keep: bool = False) -> SweepResult | None:
    """None when the run is already complete (nothing to do)."""
    store = RunStore.open(run_path)
    manifest = store.manifest
    kind = "tune" if "tune" in manifest else manifest.get("kind", "sweep")
    if kind != "sweep":
        raise StoreError(f"{run_path}: a {kind} run, not a sweep; "
                         + ("resume it with `tunebench tune --resume RUN`" if kind == "tune"
                            else "run the batch again"))
    store.acquire_lock()
    if manifest.get("status") == "complete":
        store.release_lock()
        return None
    spec_data, spec_path = _spec_of(store)
    spec = validate_spec(spec_data, spec_path)
    plan = build_plan(spec, spec_path)
    entries = {c["config_id"]: c for c in manifest.get("configs", [])}
    work, kept = [], []
    for config in plan.configs:
        rows = [r for r in store.rows if r.get("config_id") == config.config_id]
        ids = {r.get("point_id", "") for r in rows}
        entry = entries.get(config.config_id, {})
        todo = [p for p in plan.points if p.search is None and not _measured(p, ids)]
        search_done = entry.get("capacity") is not None and entry.get("status") == "complete"
        todo += [p for p in plan.points if p.search is not None and not search_done]
        if todo or entry.get("status") != "complete":
            work.append((config, todo, rows))
        else:
            kept.append(ConfigOutcome(config.config_id, "complete", len(rows)))
    attempt = store.begin_attempt(command="sweep --resume", points_kept=len(store.rows),
                                  points_to_measure=sum(len(t) for _, t, _ in work))
    reporter.note(f"resuming {store.run_id}: {len(store.rows)} points kept, "
                  f"{sum(len(t) for _, t, _ in work)} to measure in {len(work)} configuration(s)")
    return run_configs(spec, spec_path, store, output_root, reporter, work, keep, attempt, kept)
