"""Children run in their own process group and stop() reaps the whole group."""

from __future__ import annotations

import os
import sys
import time

import pytest

from tunebench.processes import ManagedProcess, live_groups, parse_cpus


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


def test_a_pinned_child_and_its_children_run_on_the_cores_given(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    wanted = {cores[-1]}  # one core this test may use
    script = (
        "import os, subprocess, sys\n"
        "child = subprocess.run([sys.executable, '-c', 'import os; "
        "print(sorted(os.sched_getaffinity(0)))'], capture_output=True, text=True)\n"
        "print(sorted(os.sched_getaffinity(0)), child.stdout.strip())\n"
    )
    process = ManagedProcess(
        [sys.executable, "-c", script],
        log_path=tmp_path / "log",
        capture_stdout=True,
        cpus=wanted,
    )
    assert process.popen.stdout.read().split() == [f"[{cores[-1]}]", f"[{cores[-1]}]"]
    assert process.wait(10) == 0
    process.stop()


def test_a_core_this_host_lacks_is_a_clear_error(tmp_path):
    before = set(live_groups())
    with pytest.raises(OSError, match="cannot pin to CPUs"):
        ManagedProcess(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            log_path=tmp_path / "log",
            cpus={4095},
        )
    assert set(live_groups()) == before  # the child it had started was stopped and reaped


def test_cpu_lists_read_as_linux_writes_them():

    assert parse_cpus("0") == {0}
    assert parse_cpus("0-2,5") == {0, 1, 2, 5}
    for bad in ("", "a", "3-1", "1,,2", "-1"):
        with pytest.raises(ValueError):
            parse_cpus(bad)
