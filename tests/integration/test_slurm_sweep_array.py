"""`tunebench sweep SPEC --slurm PATH` on a real single-node Slurm (tunebench/testing/
slurm.py): the submit script sends the array (one task per configuration, each `sweep
--only`), then the merge after every task; the merged run equals the sweep run in one go
(a recorded deployment: deterministic points)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli
from tests.integration.test_merge import _files, _rows, _spec
from tunebench.testing.slurm import slurm_cluster

SLURM = f"""
slurm:
  gpus_per_node: 0
  cpus_per_task: 1
  memory: 1G
  time: "00:10:00"
  setup: ["export PATH={Path(sys.executable).parent}:$PATH"]
"""


def test_a_sweep_as_a_slurm_array_merges_into_the_sweep_run_in_one_go(tmp_path):
    spec = _spec(tmp_path)
    spec.write_text(spec.read_text() + SLURM)
    whole = run_cli("sweep", str(spec), "-o", str(tmp_path / "whole"), "--no-report")
    assert whole.returncode == 0, whole.stderr
    script = tmp_path / "split.sbatch"
    written = run_cli(
        "sweep", str(spec), "--slurm", str(script), "-o", str(tmp_path / "runs"), cwd=tmp_path
    )
    assert written.returncode == 0, written.stderr
    assert "bash " in written.stdout and "split-submit.sh" in written.stdout
    array = script.read_text()
    assert "#SBATCH --array=0-2" in array and "ids=(c1 c2 c3)" in array
    assert "--gres" not in array and "#SBATCH --cpus-per-task=1" in array
    submit = tmp_path / "split-submit.sh"
    assert '--dependency="afterany:' in submit.read_text()
    with slurm_cluster() as slurm:
        job = subprocess.run(
            ["bash", str(submit), "--wait"],
            cwd=tmp_path,
            env=slurm,
            capture_output=True,
            text=True,
            timeout=600,
        )
    logs = {p.name: p.read_text() for p in tmp_path.glob("tunebench-split-*.log")}
    assert job.returncode == 0, job.stdout + job.stderr + json.dumps(logs)[-3000:]
    assert "array job " in job.stdout and "merge job " in job.stdout
    assert len([n for n in logs if "merge" not in n]) == 3  # one log per array task
    parts = sorted((tmp_path / "runs" / "parts" / "split").iterdir())
    assert [p.name for p in parts] == ["c1", "c2", "c3"]
    merged = next(p for p in (tmp_path / "runs").iterdir() if p.name != "parts")
    one_go = next((tmp_path / "whole").iterdir())
    assert _rows(merged) == _rows(one_go)
    assert _files(merged) - {"report.html"} == _files(one_go)
    manifest = json.loads((merged / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["merged_from"]) == 3
