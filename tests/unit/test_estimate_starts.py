"""A dry-run's estimate takes its server starts from an earlier run of the same spec on the
same run root (sweep/estimate.py: `measured_starts`), where the kind's typical start is a
guess that machines and models differ on most."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from tunebench.spec.loading import validate_spec
from tunebench.spec.plan import build_plan
from tunebench.store.manifest import ConfigStatus, RunKind
from tunebench.store.run import RunStore
from tunebench.sweep.estimate import estimate_seconds, measured_starts

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
    root: Path, name: str, starts: list[float | None], kind: str = "local", rk=RunKind.SWEEP
) -> RunStore:
    store = RunStore.create(
        root, rk, name, spec={"name": name}, versions={}, host={}, deployment_kind=kind
    )
    with store.running("sweep"):
        for index, start in enumerate(starts, start=1):
            store.update_config(
                f"c{index}", label=f"c{index}", args={}, status=ConfigStatus.COMPLETE, start_s=start
            )
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
