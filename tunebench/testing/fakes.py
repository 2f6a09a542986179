"""Fakes of the Deployment and LoadDriver seams, for unit tests of what sequences them.

They keep the seams' contracts (seams/deployment.py, seams/load.py): the LoadDriver contract
suite in tests/contract runs against `FakeLoadDriver` as well as the real drivers.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tunebench.errors import DeploymentError, LoadError
from tunebench.points.cells import RequestSample, client_cells
from tunebench.seams.deployment import ServerHandle
from tunebench.seams.load import ClientResult, MorePoints, ResultCallback, StartCallback
from tunebench.spec.load_kind import LoadKind
from tunebench.spec.plan import LoadPoint, ServerConfig


def fake_columns(point: LoadPoint, ttft_ms: float = 50.0, requests: int = 20) -> dict[str, Any]:
    """Client columns of a healthy point, every latency at its median: a rate point sends
    exactly its rate, a concurrent one `requests` requests."""
    duration = point.max_seconds or 10.0
    if point.kind in LoadKind.RATE and point.target:
        requests = max(1, round(point.target * duration))
    return {
        "target": point.target,
        "achieved_rps": requests / duration,
        "achieved_concurrency": point.target if point.kind == LoadKind.CONCURRENT else 1.0,
        "requests_ok": requests,
        "requests_failed": 0,
        "requests_incomplete": 0,
        "duration_s": duration,
        "ttft_p50_ms": ttft_ms,
        "ttft_p95_ms": ttft_ms,
        "ttft_p99_ms": ttft_ms,
        "itl_p50_ms": 5.0,
        "output_tok_s": requests / duration * 32,
        "client_warnings": "",
    }


@dataclass
class FakeDeployment:
    """A Deployment that starts nothing. `fail_start` makes `start` raise with that message;
    `effective` is what the "server" reports; `fail_after_s` makes `failure()` report the
    server gone that many seconds after start."""

    kind: str = "fake"
    fail_start: str | None = None
    effective: dict[str, Any] = field(default_factory=dict)
    fail_after_s: float | None = None
    log: str = "INFO fake server\n"
    started: list[str] = field(default_factory=list)
    stops: int = 0
    _running: str | None = None
    _started_at: float = 0.0

    def start(self, config: ServerConfig) -> ServerHandle:
        self.started.append(config.config_id)
        if self.fail_start:
            raise DeploymentError(self.fail_start, log_tail=self.log)
        self._running, self._started_at = config.config_id, time.monotonic()
        return ServerHandle(
            base_url=f"fake://{config.config_id}",
            metrics_url="",
            served_model="fake",
            started_s=0.0,
            effective=dict(self.effective),
        )

    def stop(self) -> None:
        self.stops += 1
        self._running = None

    def log_text(self) -> str:
        return self.log

    def failure(self) -> str | None:
        if self._running and self.fail_after_s is not None:
            if time.monotonic() - self._started_at >= self.fail_after_s:
                return "fake server exited (signal SIGKILL) while load was running"
        return None

    @property
    def log_path(self) -> Path | None:
        return None

    @property
    def pgid(self) -> int | None:
        return None

    @property
    def last_pgid(self) -> int | None:
        return None


Measure = Callable[[LoadPoint], dict[str, Any]]


class FakeLoadDriver:
    """A LoadDriver that measures each point instantly with `measure(point)` (default:
    `fake_columns`). `fail_at` raises LoadError when that point id starts; `hold_s` keeps
    each point "running" that long (so a watch can abort it); `before_point` sees each
    point before it runs (a test can look at what is stored by then); `samples(point)` gives
    a point's per-request samples (default: none)."""

    def __init__(
        self,
        measure: Measure | None = None,
        fail_at: str | None = None,
        hold_s: float = 0.0,
        before_point: Callable[[LoadPoint], None] | None = None,
        samples: Callable[[LoadPoint], list[RequestSample]] | None = None,
    ):
        self.measure = measure or fake_columns
        self.fail_at = fail_at
        self.hold_s = hold_s
        self.before_point = before_point
        self.samples = samples
        self.retried: list[dict[str, str]] = []
        self.prepared: list[LoadPoint] = []
        self.ran: list[str] = []
        self.closed = 0
        self._aborted = threading.Event()
        self._reason = ""

    @property
    def pgid(self) -> int | None:
        return None

    def prepare(self, points: list[LoadPoint], work_dir: Path) -> None:
        self.prepared = list(points)

    def run(
        self,
        handle: ServerHandle,
        on_result: ResultCallback,
        on_start: StartCallback | None = None,
        next_points: MorePoints | None = None,
    ) -> None:
        pending = list(self.prepared)
        while True:
            if not pending:
                pending = list(next_points()) if next_points else []
                if not pending:
                    return
            point = pending.pop(0)
            if self.before_point:
                self.before_point(point)
            if on_start:
                on_start(point)
            if point.point_id == self.fail_at:
                raise LoadError(f"fake load generator failed on {point.point_id}")
            started = time.time()
            if self._aborted.wait(self.hold_s) if self.hold_s else self._aborted.is_set():
                raise LoadError(self._reason)
            self.ran.append(point.point_id)
            on_result(
                ClientResult(
                    point,
                    point.point_id,
                    client_cells(self.measure(point), "fake load driver"),
                    started,
                    time.time(),
                    samples=self.samples(point) if self.samples else [],
                )
            )

    def abort(self, reason: str) -> None:
        self._reason = reason
        self._aborted.set()

    def close(self) -> None:
        self.closed += 1
