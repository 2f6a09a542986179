"""The LoadDriver seam: drives load against a ready server, one result per load point.

Contract for every implementation (tests/contract/test_load_driver_contract.py runs it):
- `prepare(points, work_dir)` may start work before the server is ready (import a load
  generator while vLLM starts); it never needs the server.
- `run(handle, on_result, on_start, next_points)` calls `on_start(point)` before and
  `on_result(result)` after every point, in plan order, as soon as each is finished (so the
  caller stores it before the next ends). When the prepared points are done it asks
  `next_points()` for more (capacity-search probes chosen from the results so far); an
  empty list ends the run. It raises `LoadError` if the generator fails, after reporting
  the points that did finish.
- `abort(reason)` may be called from another thread (the server died): `run` then raises
  `LoadError(reason)` promptly and retries nothing.
- `close()` stops and reaps anything `prepare` or `run` started; idempotent; never leaves a
  process behind, also on KeyboardInterrupt.
- `pgid` is the process group of the load generator running now (None when none);
  `retried` lists the points redone after a generator failure, each {"point", "reason"}.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from tunebench.points.cells import ClientCells, RequestSample
from tunebench.seams.deployment import ServerHandle
from tunebench.spec.plan import LoadPoint

ResultCallback = Callable[["ClientResult"], None]
StartCallback = Callable[[LoadPoint], None]
MorePoints = Callable[[], list[LoadPoint]]


@dataclass(frozen=True)
class ClientResult:
    point: LoadPoint
    point_id: str  # equals point.point_id except for sweep profiles (sweep-0, sweep-1, ...)
    columns: ClientCells  # client-side statistics and evidence, with the target
    start_time: float  # epoch seconds of the measured window
    end_time: float
    raw_report: Path | None = None
    warnings: list[str] = field(default_factory=list)
    samples: list[RequestSample] = field(default_factory=list)  # per successful request
    turns: dict[str, float | int | None] = field(default_factory=dict)  # a sessions point's


class LoadDriver(Protocol):
    @property
    def retried(self) -> list[dict[str, str]]: ...

    def prepare(self, points: list[LoadPoint], work_dir: Path) -> None: ...

    def run(
        self,
        handle: ServerHandle,
        on_result: ResultCallback,
        on_start: StartCallback | None = None,
        next_points: MorePoints | None = None,
    ) -> None: ...

    def abort(self, reason: str) -> None: ...

    def close(self) -> None: ...

    @property
    def pgid(self) -> int | None: ...
