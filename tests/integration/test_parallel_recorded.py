"""A sweep with deployment.parallel writes the same run as the sweep measured in turn: the
same files and points in the same order (a recorded deployment: deterministic points), plus
the fair-comparison note that `show` and the report print."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.conftest import REPO, run_cli, spec_file
from tests.integration.test_merge import _files, _rows, _spec
from tunebench.store.run import read_points


def test_a_parallel_sweep_writes_the_run_a_sweep_in_turn_writes(tmp_path):
    spec = _spec(tmp_path)
    parallel = spec_file(
        tmp_path,
        spec.read_text(),
        "{kind: recorded,",
        "{kind: recorded, parallel: 3,",
        "parallel.yaml",
    )
    in_turn = run_cli("sweep", str(spec), "-o", str(tmp_path / "turn"), "--no-report")
    assert in_turn.returncode == 0, in_turn.stderr
    at_once = run_cli("sweep", str(parallel), "-o", str(tmp_path / "once"))
    assert at_once.returncode == 0, at_once.stderr
    assert "measuring up to 3 configurations at a time" in at_once.stderr
    assert "c3: [3/3] fast: starting" in at_once.stderr
    turn = next((tmp_path / "turn").iterdir())
    once = next((tmp_path / "once").iterdir())
    assert _files(once) == _files(turn)
    assert _rows(once) == _rows(turn)  # the plan's order, whichever finished first
    manifest = json.loads((once / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert [c["config_id"] for c in manifest["configs"]] == ["c1", "c2", "c3"]
    assert manifest["parallel"]["configurations"] == 3
    assert "shared the cluster or host" in manifest["parallel"]["note"]
    shown = run_cli("show", str(once))
    assert shown.returncode == 0 and "fair comparison:" in shown.stdout
    assert "fair comparison:" in (once / "report.html").read_text()


def test_ctrl_c_stops_every_configuration_running_at_once_and_resume_finishes(tmp_path):
    """SIGINT (what Ctrl-C sends) while three configurations start at once: the sweep stops
    as interrupted (130) after all three ended, and --resume measures them."""
    spec = _spec(tmp_path)
    slow = spec_file(
        tmp_path,
        spec.read_text(),
        "{kind: recorded,",
        "{kind: recorded, parallel: 3, time_scale: 0.1,",
        "slow.yaml",
    )
    runs = tmp_path / "runs"
    process = subprocess.Popen(
        [sys.executable, "-m", "tunebench.cli.main", "sweep", str(slow), "-o", str(runs)]
        + ["--no-report"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _all_started(runs) and time.monotonic() < deadline:
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    run = next(runs.iterdir())
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    resumed = run_cli("sweep", "--resume", str(run), "--no-report", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert {r["config_id"] for r in read_points(run)} == {"c1", "c2", "c3"}
    assert json.loads((run / "manifest.json").read_text())["status"] == "complete"


def _all_started(runs) -> bool:
    """Each of the three configurations is starting (its status in the manifest)."""
    for path in runs.glob("*/manifest.json"):
        configs = json.loads(path.read_text()).get("configs") or []
        if len([c for c in configs if c.get("status") in ("starting", "running")]) == 3:
            return True
    return False
