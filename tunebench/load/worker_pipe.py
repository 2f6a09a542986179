"""A load generator's worker process and the pipe both drivers talk to it through.

Each driver (GuideLLM, vLLM's benchmark) runs its tool in a worker of its own process
group: the job file names the points, the worker's stdin carries what must not touch a
file (the target, the API key, points added later), and its stdout is a stream of JSON
events, one per line (`start`, `done`, `idle`, `finished`, ...). A thread reads stdout
into a queue so that the driver can wait on it with a deadline; what each event means is
the driver's business.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from tunebench.processes import ManagedProcess

QUIET = object()  # no event within the read's timeout
ENDED = object()  # the worker closed its stdout: no event will come


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

        def pump() -> None:
            for line in process.popen.stdout:
                events.put(line)
            events.put(None)

        threading.Thread(target=pump, name=f"{name}-events", daemon=True).start()

    @property
    def pgid(self) -> int:
        return self.process.pgid

    def send(self, message: dict[str, Any], last: bool = False) -> None:
        """One line to the worker's stdin; `last` closes it (no more points)."""
        try:
            self.process.popen.stdin.write(json.dumps(message) + "\n")
            self.process.popen.stdin.flush()
            if last:
                self.process.popen.stdin.close()
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

    def stop(self, grace_s: float) -> None:
        self.process.stop(grace_s=grace_s)
