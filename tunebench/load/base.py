"""The LoadDriver seam: drives load against a ready server, one result per load point.

Contract: `prepare()` may start work before the server is ready; `run()` calls `on_result` for every finished point as soon as it is finished
(so the caller can store it before the next ends), in plan order; it raises `LoadError`
if the generator fails, after reporting the points that did finish; it never leaves a
process behind, also on KeyboardInterrupt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from tunebench.deploy.base import ServerHandle
from tunebench.spec.plan import LoadPoint


@dataclass(frozen=True)
class ClientResult:
    point: LoadPoint
    point_id: str  # equals point.point_id except for sweep profiles (sweep-0, sweep-1, ...)
    columns: dict[str, Any]  # client-side statistics, see load.guidellm.CLIENT_COLUMNS
    start_time: float  # epoch seconds of the measured window
    end_time: float
    raw_report: Path | None = None
    warnings: list[str] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)  # per successful request


class LoadDriver(Protocol):
    def prepare(self, points: list[LoadPoint], work_dir: Path) -> None:
        """Get ready (e.g. start and import) while the server is still starting."""

    def run(
        self,
        handle: ServerHandle,
        on_result: Callable[[ClientResult], None],
        on_start: Callable[[LoadPoint], None] | None = None,
        next_points: Callable[[], list[LoadPoint]] | None = None,
    ) -> None:
        """Drive every prepared point against `handle`, reporting each as it finishes.

        When all points given so far are done, `next_points()` may return more (chosen
        from the results so far, e.g. capacity-search probes); an empty list ends the run.
        """

    def close(self) -> None:
        """Stop and reap anything `prepare` started; idempotent."""
