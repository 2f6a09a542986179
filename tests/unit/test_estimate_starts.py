"""A dry-run's estimate takes its server starts from an earlier run of the same spec on the
same run root (sweep/estimate.py: `measured_starts`), where the kind's typical start is a
guess that machines and models differ on most; and where that root holds a whole run of the
very same spec, the estimate is that run's wall time (`measured_run`)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

from tunebench.spec.loading import validate_spec
from tunebench.spec.plan import build_plan
from tunebench.store.manifest import ConfigStatus, RunKind
from tunebench.store.run import RunStore
from tunebench.sweep.estimate import estimate_seconds, measured_run, measured_starts

SPEC = {
    "name": "starts",
    "model": "org/base",
    "deployment": {"kind": "local"},
    "server": {"matrix": {"max-num-seqs": [2, 8]}},
    "load": {
        "data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8},
        "profiles": [{"kind": "concurrent", "streams": [1], "max_seconds": 5}],
    },
}


def a_run(
    root: Path,
    name: str,
    starts: list[float | None],
    kind: str = "local",
    rk=RunKind.SWEEP,
    spec: dict | None = None,
    wall: tuple[str, str] | None = None,
    fail: bool = False,
) -> RunStore:
    """A run under `root`; `wall`: its (started_at, ended_at) as the manifest keeps them."""
    store = RunStore.create(
        root, rk, name, spec=spec or {"name": name}, versions={}, host={}, deployment_kind=kind
    )
    with store.running("sweep") as result:
        for index, start in enumerate(starts, start=1):
            store.update_config(
                f"c{index}", label=f"c{index}", args={}, status=ConfigStatus.COMPLETE, start_s=start
            )
        if fail:
            result.fail()
    if wall is not None:
        path = store.path / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["started_at"], manifest["ended_at"] = wall
        path.write_text(json.dumps(manifest))
    time.sleep(1.1)  # run ids carry the second they began: the next one sorts after it
    return store


def test_the_newest_run_of_the_name_and_kind_with_a_start_gives_the_median(tmp_path):
    chosen = a_run(tmp_path, "starts", [30.0, 44.0, 34.0])
    a_run(tmp_path, "starts", [None, None])  # stopped before any server was up
    a_run(tmp_path, "other", [90.0])
    a_run(tmp_path, "starts", [200.0], kind="helm")
    found = measured_starts(tmp_path, "starts", "local")
    assert found is not None
    assert (found.seconds, found.run_id, found.count) == (34.0, chosen.run_id, 3)
    assert measured_starts(tmp_path, "starts", "endpoint") is None
    assert measured_starts(tmp_path, "nothing", "local") is None


def test_a_measured_start_replaces_the_typical_one_in_every_configuration():
    spec = validate_spec({**SPEC, "repeats": 2}, Path("x.yaml"))
    plan = build_plan(spec, Path("x.yaml"))
    typical = estimate_seconds(spec, plan)
    measured = estimate_seconds(spec, plan, start_s=35.0)
    # 2 configurations x 2 repeats, each start 60 s (the local kind's) -> 35 s
    assert typical - measured == pytest.approx(4 * (60.0 - 35.0))


def test_the_dry_run_says_whose_starts_it_took(cli, tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    path = tmp_path / "starts.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "output": str(root)}))
    before = cli("sweep", str(path), "--dry-run")
    assert before.returncode == 0, before.stderr
    assert "measured them" not in before.stdout
    earlier = a_run(root, "starts", [34.0, 36.0])
    after = cli("sweep", str(path), "--dry-run")
    assert after.returncode == 0, after.stderr
    lines = [
        next(x for x in run.stdout.splitlines() if "estimated time" in x) for run in (before, after)
    ]
    assert f"server starts as {earlier.run_id} measured them (35 s, the median of 2)" in lines[1]
    # "about 3 min (166 s)" or, under two minutes, "about 116 s"
    seconds = [float(re.search(r"(\d+) s[);]", x).group(1)) for x in lines]
    assert seconds[0] - seconds[1] == pytest.approx(2 * (60.0 - 35.0), abs=1)


WALL = ("2026-11-30T18:40:18+00:00", "2026-11-30T18:43:45+00:00")  # 207 s


def test_the_newest_whole_run_of_the_very_same_spec_gives_its_wall_time(tmp_path):
    spec = {**SPEC, "repeats": 1}
    chosen = a_run(tmp_path, "starts", [30.0, 34.0], spec=spec, wall=WALL)
    a_run(tmp_path, "starts", [30.0], spec={**spec, "repeats": 2}, wall=WALL)  # another spec
    a_run(tmp_path, "starts", [30.0, 31.0], spec=spec, wall=WALL, fail=True)  # a failed run
    a_run(tmp_path, "starts", [30.0, 31.0], spec=spec, kind="helm", wall=WALL)
    resumed = a_run(tmp_path, "starts", [30.0, 31.0], spec=spec, wall=WALL)
    manifest = json.loads((resumed.path / "manifest.json").read_text())
    manifest["attempts"].append(dict(manifest["attempts"][0], attempt=2))
    (resumed.path / "manifest.json").write_text(json.dumps(manifest))  # two part-runs
    found = measured_run(tmp_path, spec, "local")
    assert found is not None
    assert (found.seconds, found.run_id) == (207.0, chosen.run_id)
    assert measured_run(tmp_path, {**spec, "repeats": 3}, "local") is None
    assert measured_run(tmp_path, spec, "endpoint") is None


def test_the_dry_run_takes_the_same_specs_wall_time_but_not_for_a_part(cli, tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    path = tmp_path / "starts.yaml"
    data = {**SPEC, "output": str(root)}
    path.write_text(yaml.safe_dump(data))
    earlier = a_run(root, "starts", [34.0, 36.0], spec=data, wall=WALL)
    whole = cli("sweep", str(path), "--dry-run")
    assert whole.returncode == 0, whole.stderr
    line = next(x for x in whole.stdout.splitlines() if "estimated time" in x)
    assert f"about 3 min (207 s), what {earlier.run_id} of the same spec took" in line, line
    # the parts' model stays beside it: a server start as measured, the rest as modelled
    assert re.search(r"the parts' estimate: \d+ s", line), line
    part = cli("sweep", str(path), "--dry-run", "--only", "c1")
    assert part.returncode == 0, part.stderr
    line = next(x for x in part.stdout.splitlines() if "estimated time" in x)
    assert "same spec" not in line and "measured them (35 s, the median of 2)" in line, line
