"""Children run in their own process group and stop() reaps the whole group."""

from __future__ import annotations

import os
import sys
import time

from tunebench.processes import ManagedProcess, live_groups


def test_stop_ends_the_whole_group_including_grandchildren(tmp_path):
    # The child starts a grandchild that ignores SIGTERM: stop() must still end both.
    script = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        "time.sleep(600)\n"
    )
    process = ManagedProcess([sys.executable, "-c", script], log_path=tmp_path / "log")
    assert process.pgid == process.pid and process.pgid != os.getpgid(0)
    assert process.pgid in live_groups()
    time.sleep(0.5)
    process.stop(grace_s=1)
    assert not process.group_alive()
    assert process.pgid not in live_groups()
    process.stop()  # idempotent


def test_pipes(tmp_path):
    process = ManagedProcess(
        [sys.executable, "-c", "import sys; print(sys.stdin.readline().upper(), end='')"],
        log_path=tmp_path / "log",
        capture_stdout=True,
    )
    process.popen.stdin.write("go\n")
    process.popen.stdin.close()
    assert process.popen.stdout.read() == "GO\n"
    assert process.wait(5) == 0
    process.stop()
