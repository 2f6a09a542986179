"""Ctrl-C during a sweep: server and load reaped, finished points kept, status interrupted, 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.e2e.conftest import NEEDS_SERVER, wait_for
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]


def test_ctrl_c_mid_sweep(tmp_path, budget):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tunebench.cli.main",
            "sweep",
            "tests/specs/interrupt-cpu.yaml",
            "--output",
            str(tmp_path),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # as a background job of a non-interactive shell starts it: SIGINT ignored. Ctrl-C
        # must still stop the sweep cleanly (and does under a terminal anyway).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        run_dir = wait_for(
            lambda: next(iter(tmp_path.iterdir()), None),
            budget.run_directory(),
            "the run directory",
            process,
        )
        wait_for(
            lambda: len(read_points(run_dir)) >= 1,
            budget.first_point(6, server_starts=1),
            "the first point",
            process,
        )
        manifest = json.loads((run_dir / "manifest.json").read_text())
        groups = [manifest["configs"][0][k] for k in ("server_pgid", "load_pgid")]
        assert all(groups), manifest["configs"][0]
        process.send_signal(signal.SIGINT)  # what Ctrl-C delivers to the foreground process
        stdout, stderr = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["ended_at"]
    rows = read_points(run_dir)
    assert 1 <= len(rows) < 6
    assert all(int(r["requests_ok"]) > 0 for r in rows)
    for pgid in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)
