"""A load generator's worker process and the pipe both drivers talk to it through.

Each driver (GuideLLM, vLLM's benchmark) runs its tool in a worker of its own process
group: the job file names the points, the worker's stdin carries what must not touch a
file (the target, the API key, points added later), and its stdout is a stream of JSON
events, one per line (`start`, `done`, `idle`, `finished`, ...). A thread reads stdout
into a queue so that the driver can wait on it with a deadline; what each event means is
the driver's business.

A worker that stalls is asked for its threads' stacks before it is stopped
(`WorkerPipe.dump_stacks`): every process of its group that called `answer_stack_requests`
writes them to the worker's log, so a hang inside the tool says where it hangs.
"""

from __future__ import annotations

import faulthandler
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tunebench.processes import ManagedProcess

QUIET = object()  # no event within the read's timeout
ENDED = object()  # the worker closed its stdout: no event will come
STACKS_SIGNAL = signal.SIGUSR1  # "write your threads' stacks to stderr" (the worker's log)


def answer_stack_requests() -> None:
    """In a worker process: on STACKS_SIGNAL write every thread's stack to stderr and go on.
    A process that never called this (a library's helper process) is ended by the signal,
    which is fine: the group is being stopped."""
    faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True)


class WorkerPipe:
    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        cpus: set[int] | None,
        name: str,
    ):
        """Start the worker (OSError when it cannot be launched)."""
        self.process = ManagedProcess(
            argv, env=env, log_path=log_path, capture_stdout=True, cpus=cpus
        )
        self._events: queue.Queue[str | None] = queue.Queue()
        process, events = self.process, self._events
        stdout = process.popen.stdout
        assert stdout is not None  # capture_stdout=True gives the worker a pipe

        def pump() -> None:
            for line in stdout:
                events.put(line)
            events.put(None)

        threading.Thread(target=pump, name=f"{name}-events", daemon=True).start()

    @property
    def pgid(self) -> int:
        return self.process.pgid

    def send(self, message: dict[str, Any], last: bool = False) -> None:
        """One line to the worker's stdin; `last` closes it (no more points)."""
        stdin = self.process.popen.stdin
        assert stdin is not None  # the worker reads its points from a pipe
        try:
            stdin.write(json.dumps(message) + "\n")
            stdin.flush()
            if last:
                stdin.close()
        except OSError:
            pass  # it died; `exit_problem` reports its exit code and last log line

    def read(self, timeout_s: float = 1.0) -> dict[str, Any] | object:
        """The next event, QUIET when none came within `timeout_s`, ENDED at the end.
        Lines that are not JSON (a library's stray output; the log has it) are skipped."""
        while True:
            try:
                line = self._events.get(timeout=timeout_s)
            except queue.Empty:
                return QUIET
            if line is None:
                return ENDED
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                return event

    def exit_problem(self, finished: bool, wait_s: float = 30.0) -> str | None:
        """After the stream ended: None when the worker said `finished` and exited 0,
        else its exit code and the last line of its log."""
        try:
            code = self.process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            code = None
        if finished and code == 0:
            return None
        path = self.process.log_path
        log = path.read_text(errors="replace") if path else ""
        last = [line for line in log.splitlines() if line.strip()][-1:] or ["(no output)"]
        return f"exited with code {code}: {last[0][:300]}"

    def dump_stacks(self, settle_s: float = 1.0) -> None:
        """Ask the worker's whole group for its stacks (STACKS_SIGNAL) and give the processes
        `settle_s` to write them to the log. Nothing happens when the group is gone."""
        try:
            os.killpg(self.pgid, STACKS_SIGNAL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(settle_s)

    def stop(self, grace_s: float) -> None:
        self.process.stop(grace_s=grace_s)
