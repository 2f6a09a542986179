"""The planted-drift throttle (tunebench/testing/throttle.py): which method it uses, and that
a process group it slowed is left running, never stopped."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tunebench.processes import stop_session
from tunebench.testing.throttle import Throttle


def _state(pid: int) -> str:
    # /proc/PID/stat: "pid (comm) STATE ..."; the comm may hold spaces, the state follows ")"
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_forced_duty_cycle_slows_the_group_and_leaves_it_running():
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        seen = set()
        with Throttle(child.pid, 0.9, method="sigstop") as throttle:
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and "T" not in seen:
                seen.add(_state(child.pid))
                time.sleep(0.01)
        assert throttle.method == "sigstop"
        assert "T" in seen  # stopped for 90 ms of every 100 ms while the block ran
        assert _state(child.pid) != "T"  # continued at the end
        assert throttle.ended >= throttle.started > 0
    finally:
        stop_session(child)


def test_a_method_that_cannot_run_is_refused(tmp_path):
    with pytest.raises(ValueError, match="'cgroup' or 'sigstop'"):
        Throttle(1, 0.3, method="freeze")
    not_a_cgroup = tmp_path / "missing" / "cpu"
    with pytest.raises(ValueError, match="is not writable here"):
        Throttle(1, 0.3, root=not_a_cgroup, method="cgroup")
    with pytest.raises(ValueError, match="between 0 and 1"):
        Throttle(1, 1.0)
