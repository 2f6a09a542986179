"""Child processes in their own process groups, always reaped.

Every server or load generator tunebench starts gets a new session (so a new process
group whose id is its pid). Stopping it signals the whole group: vLLM's API server, engine
core and workers go together, and nothing else on the machine is touched. Groups still
alive at interpreter exit are stopped by an atexit hook as a last resort.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Sequence

_live: dict[int, "ManagedProcess"] = {}
_live_lock = threading.Lock()


class ManagedProcess:
    """A child started with `start_new_session=True`; `stop()` ends its whole group.

    Output goes to `log_path`; with `capture_stdout`, stdin and stdout are text pipes
    (`self.popen.stdin`, `self.popen.stdout`) and only stderr goes to the log.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        log_path: Path | None = None,
        capture_stdout: bool = False,
        cpus: set[int] | None = None,
    ):
        self.argv = list(argv)
        self.log_path = log_path
        self._log: IO[bytes] | None = open(log_path, "ab") if log_path else None
        try:
            self.popen = subprocess.Popen(
                self.argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.PIPE if capture_stdout else subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture_stdout else (self._log or subprocess.DEVNULL),
                stderr=(self._log or subprocess.DEVNULL) if capture_stdout else subprocess.STDOUT,
                text=capture_stdout or None,
                start_new_session=True,
            )
        except OSError:
            if self._log:
                self._log.close()
            raise
        self.pgid = self.popen.pid
        with _live_lock:
            _live[self.pgid] = self
        if cpus:
            # Set on the leader before it can start its own children (a Python start-up
            # takes far longer than this call): they inherit it.
            try:
                os.sched_setaffinity(self.popen.pid, cpus)
            except OSError as exc:
                self.stop()
                raise OSError(exc.errno, f"cannot pin to CPUs {sorted(cpus)}: {exc.strerror}")

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.popen.wait(timeout)

    def group_alive(self) -> bool:
        """True while any process of the group exists (children can outlive the leader)."""
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # A zombie leader still counts for killpg; reap it and ask again.
        if self.popen.poll() is not None:
            try:
                os.killpg(self.pgid, 0)
            except ProcessLookupError:
                return False
        return True

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM the group, wait up to `grace_s`, then SIGKILL what is left. Idempotent."""
        try:
            self._signal_group(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and self.group_alive():
                time.sleep(0.1)
            if self.group_alive():
                self._signal_group(signal.SIGKILL)
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and self.group_alive():
                    time.sleep(0.05)
            try:
                return self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                return None
        finally:
            if self._log:
                self._log.close()
                self._log = None
            with _live_lock:
                _live.pop(self.pgid, None)

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass


def _live_processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every process that is not a zombie (Linux /proc)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":  # after ")": state, ppid, pgrp
            found[int(entry)] = (int(fields[1]), int(fields[2]))
    return found


def group_members(pgid: int) -> list[int]:
    """The processes of group `pgid`."""
    return [pid for pid, (_, group) in _live_processes().items() if group == pgid]


def _descendant_groups(pid: int) -> set[int]:
    """The process groups of every process below `pid`."""
    processes = _live_processes()
    below, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, (parent, _) in processes.items() if parent in frontier}
        below |= frontier
    return {processes[child][1] for child in below}


def stop_session(process: subprocess.Popen, grace_s: float = 30.0) -> tuple[str, str]:
    """Stop a process started with `start_new_session=True` and every process group it
    started: SIGINT to its group (its own teardown, as a Ctrl-C would), SIGKILL to it after
    `grace_s`, then SIGKILL to whatever is left in its group and in each group its
    descendants were in. Servers and load generators run in sessions of their own, which the
    first signal never reaches, so those groups are read before anything is signalled; this
    process's own group is never signalled. Returns what was left of its output (pipes it was
    given), else ""."""
    # its own group too: a member left there after it ended (a shell's background job ignores
    # SIGINT) holds no pipe that would keep the read below waiting, and would live on
    groups = (_descendant_groups(process.pid) | {process.pid}) - {os.getpgrp()}
    try:
        os.killpg(process.pid, signal.SIGINT)
    except ProcessLookupError:
        pass

    def kill_the_rest() -> None:
        for group in groups:
            if group_members(group):  # still there: not a group id given out again since
                try:
                    os.killpg(group, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    try:
        stdout, stderr = process.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # before reading to the end: a process of another group that holds the same pipes
        # would keep them open, and the read waiting, for as long as it lives
        kill_the_rest()
        stdout, stderr = process.communicate()
    kill_the_rest()
    return stdout or "", stderr or ""


def run_in_own_session(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float, grace_s: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """`argv` in a session of its own, its output captured (text). At `timeout`, or on a
    Ctrl-C here, it is stopped with everything it started (`stop_session`, `grace_s` for its
    own teardown); at `timeout` subprocess.TimeoutExpired is raised."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stdout, stderr = stop_session(process, grace_s)
        raise subprocess.TimeoutExpired(process.args, timeout, stdout, stderr) from None
    except BaseException:
        stop_session(process, grace_s)
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def stop_leftover_group(pgid: int, markers: tuple[str, ...], grace_s: float = 15.0) -> bool:
    """Stop process group `pgid` that an interrupted tunebench recorded, when it still runs
    and one of its processes' command lines holds a marker (e.g. "vllm"): a group id that
    the system has given to something else since is left alone. True when it was stopped."""
    members = group_members(pgid)
    if not members or pgid == os.getpgrp():
        return False
    commands = []
    for pid in members:
        try:
            commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "))
        except OSError:
            continue
    if not any(marker.encode() in command for command in commands for marker in markers):
        return False
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and group_members(pgid):
            time.sleep(0.1)
        if not group_members(pgid):
            return True
    return not group_members(pgid)


def live_groups() -> list[int]:
    with _live_lock:
        return list(_live)


@atexit.register
def _stop_all_at_exit() -> None:
    with _live_lock:
        remaining = list(_live.values())
    for process in remaining:
        process.stop(grace_s=5)


def parse_cpus(text: str) -> set[int]:
    """A Linux CPU list ("0", "0-3", "0,2-3") as a set; ValueError names what is wrong."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            raise ValueError(f"empty item in CPU list {text!r}")
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"{part!r} is not a CPU number or range, e.g. 0 or 0-3")
        first, last = int(low), int(high or low)
        if last < first:
            raise ValueError(f"range {part!r} runs backwards")
        cpus.update(range(first, last + 1))
    return cpus
