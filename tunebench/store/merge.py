"""Join the parts of one sweep, each measured with `tunebench sweep SPEC --only IDS` (on
other machines, pods or TaskRuns of a Tekton matrix), into one run laid out as if the sweep
had run in one go: the configurations in plan order with their ids, points.csv, and every
file that belongs to a configuration (requests, metrics, logs, load reports, quality).

Parts must be sweeps of the same spec and measure disjoint configurations. Each
configuration keeps the host record of the machine that measured it; when the parts come
from different hardware the merged run says so (`hosts_differ`), as compare does for runs.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tunebench.errors import UsageError
from tunebench.store.manifest import ConfigStatus, RunKind
from tunebench.store.run import RunStore, config_number

# Run-level files that are regenerated, not copied (the merge writes its own; the CLI writes
# the quality and cross-check tables and the report again over all configurations).
REGENERATED = (
    "manifest.json",
    "points.csv",
    ".lock",
    "report.html",
    "quality/summary.csv",
    "cross-check/",
)


def _plan_order(config_id: str) -> tuple[int, str]:
    return (config_number(config_id), config_id)


def belongs_to(relative: str, config_id: str) -> bool:
    """Whether a run file belongs to a configuration: `requests/c2.csv`, `logs/server-c2.log`,
    `guidellm/c2/...`, `quality/lm-eval-c2/...` (never `c20`'s)."""
    return re.search(rf"(^|[/-]){re.escape(config_id)}([-./]|$)", relative) is not None


NO_PART = (
    "no part measured it: its part never made a run (a TaskRun or array task that was "
    "evicted, timed out or never started); measure it with `tunebench sweep SPEC --only {id}` "
    "and merge again"
)


def merge_runs(
    parts: list[RunStore], root: Path, name: str | None = None, planned: list[str] | None = None
) -> RunStore:
    """A new run under `root` holding every configuration of `parts`; each of `planned` (the
    spec's plan) that no part holds is recorded as failed, so the run is not complete."""
    if len(parts) < 2:
        raise UsageError("merge: give two or more runs (the parts of one sweep)")
    first = parts[0].manifest
    for part in parts:
        manifest = part.manifest
        if manifest.kind is not RunKind.SWEEP:
            raise UsageError(f"{part.path}: a {manifest.kind.value} run; merge joins sweeps")
        if manifest.spec != first.spec:
            raise UsageError(
                f"{part.path}: a different spec than {parts[0].path}; merge joins the parts "
                "of one sweep (the same spec file, each run with --only)"
            )
    owner: dict[str, RunStore] = {}
    for part in parts:
        for entry in part.manifest.configs:
            if entry.status == ConfigStatus.PLANNED and not any(
                r.get("config_id") == entry.config_id for r in part.rows
            ):
                continue  # planned in this part, measured in another
            if entry.config_id in owner:
                raise UsageError(
                    f"{entry.config_id} was measured in {owner[entry.config_id].path} and in "
                    f"{part.path}: each configuration must come from one part"
                )
            owner[entry.config_id] = part
    varied: list[str] = []
    for part in parts:
        varied += [a for a in part.manifest.varied_args if a not in varied]
    hosts = [p.manifest.host for p in parts]
    # parts measured several configurations at a time: the merged run says so too
    parallel = [p.manifest.parallel for p in parts]
    parallel = [p for p in parallel if p]
    merged = RunStore.create(
        root,
        RunKind.SWEEP,
        name or first.name,
        spec=first.spec,
        spec_path=first.spec_path,
        deployment_kind=first.deployment_kind,
        varied_args=varied,
        planned_points=first.planned_points,
        versions=first.versions,
        host=hosts[0],
        merged_from=[p.run_id for p in parts],
        hosts_differ=any(h != hosts[0] for h in hosts),
        **({"parallel": parallel[0]} if parallel else {}),
    )
    with merged.running("merge", parts=[str(p.path) for p in parts]) as attempt:
        _copy(parts, owner, merged)
        for config_id in planned or []:
            if config_id not in owner:
                merged.update_config(
                    config_id, status=ConfigStatus.FAILED, error=NO_PART.format(id=config_id)
                )
        merged.manifest.configs.sort(key=lambda entry: _plan_order(entry.config_id))
        merged.save_manifest()
        if any(e.status != ConfigStatus.COMPLETE for e in merged.manifest.configs):
            attempt.fail()
    return merged


def _copy(parts: list[RunStore], owner: dict[str, RunStore], merged: RunStore) -> None:
    for config_id in sorted(owner, key=_plan_order):
        part = owner[config_id]
        entry = next(e for e in part.manifest.configs if e.config_id == config_id)
        fields = entry.model_dump(exclude={"config_id"})
        fields["host"] = part.manifest.host
        fields["measured_in"] = part.run_id
        merged.manifest.update_config(config_id, **fields)
        for row in part.rows:
            if row.get("config_id") == config_id:
                merged.rows.append({**row, "run_id": merged.run_id})
        for path in sorted(part.path.rglob("*")):
            relative = path.relative_to(part.path).as_posix()
            if path.is_file() and belongs_to(relative, config_id):
                target = merged.path / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    for path in sorted(parts[0].path.rglob("*")):  # run-level files: the first part's
        relative = path.relative_to(parts[0].path).as_posix()
        if (
            path.is_file()
            and not relative.startswith(REGENERATED)
            and not any(belongs_to(relative, c) for c in owner)
            and not (merged.path / relative).exists()
        ):
            (merged.path / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, merged.path / relative)
    if merged.rows:
        last = merged.rows.pop()
        merged.add_point(last)  # writes points.csv with every row
    merged.save_manifest()
