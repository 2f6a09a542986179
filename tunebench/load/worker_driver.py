"""What both load drivers (GuideLLM, vLLM's benchmark) share: one worker process per server
configuration behind a `WorkerPipe`, and the loop that follows its events.

The loop reads the worker's events with a deadline: each event the driver handles may move
the deadline (`_wait_for`), a quiet worker past it has stalled, an abort from another thread
ends the loop at the next quiet read, and when the stream ends the worker must have said
`finished` and exited 0. What each event means, and what a stall or a lost worker becomes
(a retry, or an error), is the driver's business.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from tunebench.errors import LoadError
from tunebench.load.client_usage import ProcessGroupUsage
from tunebench.load.worker_pipe import ENDED, QUIET, WorkerPipe
from tunebench.spec.plan import LoadPoint

#: Waiting for a worker to exit after it was told no more points come.
EXIT_WAIT_S = 30.0


class WorkerDriver:
    """The worker, the points it was given, its CPU use per point and the abort flag.

    A subclass names its tool (`tool`, as messages print it), starts its worker with
    `_launch`, and follows it with `_follow_events(handle)`."""

    tool = "the load generator"

    def __init__(self) -> None:
        self._process: WorkerPipe | None = None
        self._points: list[LoadPoint] = []
        self._work_dir: Path | None = None
        self._abort_reason: str | None = None
        self._usage = ProcessGroupUsage()  # the worker's CPU and run-queue wait per point
        self._deadline = 0.0
        self.retried: list[dict[str, str]] = []  # points redone in a fresh worker, and why

    @property
    def pgid(self) -> int | None:
        return self._process.pgid if self._process else None

    def _launch(
        self,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        cpus: set[int] | None,
        name: str,
        cannot_start: str,
    ) -> None:
        """Start the worker; LoadError("<cannot_start>: <why>") when it cannot be launched."""
        try:
            self._process = WorkerPipe(argv, env, log_path, cpus, name)
        except OSError as exc:
            hint = "; check load.client_cpus against this host's CPUs" if cpus else ""
            raise LoadError(f"{cannot_start}: {exc.strerror}{hint}") from None
        self._usage.follow(self._process.pgid)

    def _send(self, message: dict[str, Any], last: bool = False) -> None:
        """One message to the worker (the target and key, points added later); `last`
        closes its stdin."""
        if self._process is not None:
            self._process.send(message, last)

    def _wait_for(self, seconds: float) -> None:
        """The worker has `seconds` from now to send its next event."""
        self._deadline = time.monotonic() + seconds

    def _more_points(
        self, next_points: Callable[[], list[LoadPoint]] | None, idle_wait_s: float
    ) -> list[LoadPoint]:
        """The worker is idle: the points to add (a capacity search's next probes), or none,
        in which case the worker is told so and has `idle_wait_s` to finish."""
        more = list(next_points()) if next_points else []
        if not more:
            self._send(self._no_more_points(), last=True)
            self._wait_for(idle_wait_s)
        return more

    def _no_more_points(self) -> dict[str, Any]:
        raise NotImplementedError

    def _stalled(self) -> Exception:
        """What a worker quiet past its deadline becomes (it is stopped after)."""
        return LoadError(f"{self.tool} made no progress; stopped it")

    def _lost(self, problem: str) -> Exception:
        """What a worker that ended without finishing becomes (exit code, last log line)."""
        return LoadError(f"{self.tool} {problem}")

    def _follow_events(self, handle: Callable[[str, dict[str, Any]], None]) -> None:
        """Read events until the worker's stream ends, each but `finished` to `handle`;
        raise `_stalled()` past the deadline, LoadError(reason) after an abort, `_lost()`
        when the worker did not finish cleanly."""
        pipe = self._process
        if pipe is None:
            raise LoadError(f"{self.tool} worker was not prepared")
        finished = False
        while True:
            event = pipe.read()
            if event is QUIET:
                if self._abort_reason:
                    raise LoadError(self._abort_reason) from None
                if time.monotonic() > self._deadline:
                    raise self._stalled() from None
                continue
            if event is ENDED:
                break
            assert isinstance(event, dict)
            kind = str(event.get("event"))
            if kind == "finished":
                finished = True
            else:
                handle(kind, event)
        if self._abort_reason:
            raise LoadError(self._abort_reason)
        problem = pipe.exit_problem(finished, wait_s=EXIT_WAIT_S)
        if problem:
            raise self._lost(problem)

    def abort(self, reason: str) -> None:
        """Stop the load now (from another thread): `run` raises LoadError(reason)."""
        self._abort_reason = reason
        process = self._process
        if process is not None:
            process.stop(grace_s=2)

    def close(self) -> None:
        self._usage.follow(None)
        if self._process is not None:
            self._process.stop(grace_s=5)
            self._process = None
