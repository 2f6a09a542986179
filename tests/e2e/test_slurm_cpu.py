"""`tunebench batch --slurm` for real: the sbatch script it writes is submitted to a real
single-node Slurm (Debian's slurm-wlm and munge, tunebench/testing/slurm.py), whose slurmd
runs the batch job on the embedded model; the job's outputs are checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.store.run import read_points
from tunebench.testing.slurm import slurm_cluster

pytestmark = [pytest.mark.server, NEEDS_SERVER]

RECORDS = 8


def test_the_sbatch_script_runs_the_batch_job_on_a_real_slurm(tmp_path):
    # One engine start of its own: what only it proves is the generated sbatch script running
    # as a real Slurm job (environment, setup lines, output back in the run). The two-shard
    # check (tests/e2e/test_batch_cpu.py, two starts) tests `tunebench batch --shards` itself,
    # which runs without Slurm; folding it into this job would test it only through Slurm
    spec = yaml.safe_load((REPO / "sweeps/batch-recipes.yaml").read_text())
    spec["name"] = "slurm-recipes"
    spec["dataset"]["path"] = str(REPO / "sweeps/data/recipes.jsonl")
    spec["dataset"]["limit"] = RECORDS
    spec["engine_args"] = {"args": {"max-model-len": 512, "max-num-seqs": 8, "enforce-eager": True}}
    spec["slurm"] = {
        "gpus_per_node": 0,
        "cpus_per_task": 1,
        "memory": "2G",
        "time": "00:20:00",
        # as a site's `module load` would: the job finds tunebench through the setup lines
        "setup": [f"export PATH={Path(sys.executable).parent}:$PATH"],
    }
    spec["output"] = str(tmp_path / "runs")
    path = tmp_path / "slurm-recipes.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    script = tmp_path / "job.sbatch"
    written = run_cli("batch", str(path), "--slurm", str(script), cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    text = script.read_text()
    assert "#SBATCH --cpus-per-task=1" in text and "--gres" not in text  # no GPU asked
    assert f"export PATH={Path(sys.executable).parent}:$PATH" in text
    with slurm_cluster() as slurm:
        job = subprocess.run(
            ["sbatch", "--wait", str(script)],
            cwd=tmp_path,
            env=slurm,
            capture_output=True,
            text=True,
            timeout=900,
        )
    logs = sorted(tmp_path.glob("tunebench-slurm-recipes-*.log"))
    log = logs[0].read_text() if logs else ""
    assert job.returncode == 0, job.stderr + log[-3000:]
    assert job.stdout.startswith("Submitted batch job "), job.stdout
    job_id = job.stdout.split()[-1]
    assert logs and logs[0].name == f"tunebench-slurm-recipes-{job_id}.log"
    run = next((tmp_path / "runs").iterdir())
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["kind"] == "batch" and manifest["status"] == "complete"
    assert f"run: {run}" in log  # the job's own output names the run it wrote
    (row,) = read_points(run)
    assert row["valid"] == "True" and int(row["requests_ok"]) == RECORDS
    schema = spec["structured_output"]["json_schema"]
    outputs = [json.loads(line) for line in (run / "outputs/c1.jsonl").read_text().splitlines()]
    assert len(outputs) == RECORDS
    for output in outputs:
        jsonschema.validate(json.loads(output["output"]), schema)
