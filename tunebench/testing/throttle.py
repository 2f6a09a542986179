"""Planted drift: slow a running server down by a known share, for a known time.

With a writable cgroup v1 CPU controller, the server's processes move into a cgroup of their
own whose CFS quota is `1 - slowdown` of the CPUs they had (a server on one core slowed by
30% gets 70 ms of every 100 ms), and back to their cgroup at the end; elsewhere the server's
process group is stopped and continued in a duty cycle (SIGSTOP for `slowdown` of every
100 ms). Either way the server itself is slowed, not the machine: what tunebench must see
is the server's speed changing under a point.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from tunebench.machine.telemetry import cgroup_of
from tunebench.processes import group_members

CPU_ROOT = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


def cgroup_writable(root: Path = CPU_ROOT) -> bool:
    probe = root / f"tunebench-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    probe.rmdir()
    return True


class Throttle:
    """`with Throttle(pgid, 0.3, cpus=1):` slows the group by 30% for the block."""

    def __init__(
        self,
        pgid: int,
        slowdown: float,
        cpus: float = 1.0,
        root: Path = CPU_ROOT,
        method: str | None = None,
    ):
        """`method` None: the cgroup where writable, else the duty cycle; "sigstop" forces
        the duty cycle (a slowdown no cgroup counter shows, as a machine's own would be)."""
        if not 0 < slowdown < 1:
            raise ValueError(f"slowdown {slowdown} must lie between 0 and 1")
        if method not in (None, "cgroup", "sigstop"):
            raise ValueError(f"method {method!r}: use 'cgroup' or 'sigstop'")
        if method == "cgroup" and not cgroup_writable(root):
            raise ValueError(f"method 'cgroup': {root} is not writable here")
        self.pgid = pgid
        self.slowdown = slowdown
        self.cpus = cpus
        self.root = root
        self.method = method or ("cgroup" if cgroup_writable(root) else "sigstop")
        self._group = root / f"tunebench-throttle-{pgid}"
        self._home: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = self.ended = 0.0

    def __enter__(self) -> Throttle:
        self.started = time.time()
        if self.method == "cgroup":
            self._group.mkdir(exist_ok=True)
            (self._group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            quota = int(PERIOD_US * self.cpus * (1 - self.slowdown))
            (self._group / "cpu.cfs_quota_us").write_text(str(quota))
            self._move_in()
            # threads a process starts later stay in the cgroup; processes are re-read
            self._thread = threading.Thread(target=self._follow, daemon=True)
        else:
            self._thread = threading.Thread(target=self._duty_cycle, daemon=True)
        self._thread.start()
        return self

    def _move_in(self) -> None:
        for pid in group_members(self.pgid):
            if pid in self._home:
                continue
            home = cgroup_of(pid)
            if home is None:
                continue
            self._home[pid] = home
            for task in _tasks(pid):
                _write_quietly(self._group / "tasks", task)

    def _follow(self) -> None:
        while not self._stop.wait(0.5):
            self._move_in()

    def _duty_cycle(self) -> None:
        stopped = self.slowdown * PERIOD_US / 1e6
        running = (1 - self.slowdown) * PERIOD_US / 1e6
        while not self._stop.is_set():
            _signal(self.pgid, signal.SIGSTOP)
            time.sleep(stopped)
            _signal(self.pgid, signal.SIGCONT)
            self._stop.wait(running)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.method == "cgroup":
            for pid, home in self._home.items():
                for task in _tasks(pid):
                    _write_quietly(self.root / home.lstrip("/") / "tasks", task)
            try:
                self._group.rmdir()
            except OSError:
                pass
        else:
            _signal(self.pgid, signal.SIGCONT)
        self.ended = time.time()


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _write_quietly(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError:  # the thread ended meanwhile
        pass


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
