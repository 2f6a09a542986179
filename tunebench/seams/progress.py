"""The Reporter seam: progress of long work (server starts, load points, trials).

The runner and the services call it; report/live.py draws it on the console, and
`SilentReporter` swallows it (library use, tests). Implementations must never raise: a
progress display cannot be allowed to lose a measurement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from tunebench.points.cells import Cell
from tunebench.points.records import CapacityRecord
from tunebench.spec.plan import LoadPoint, ServerConfig


class Reporter(Protocol):
    def config_starting(
        self,
        config: ServerConfig,
        index: int,
        total: int,
        repeat: tuple[int, int] | None = None,
    ) -> None:
        """Server start `index` of `total`; `repeat`: (this repeat, of how many) when the
        sweep measures each configuration more than once."""
        ...

    def server_status(self, message: str) -> None: ...
    def server_ready(self, config: ServerConfig, seconds: float | None) -> None: ...
    def point_starting(self, config: ServerConfig, point: LoadPoint) -> None: ...
    def point_done(self, config: ServerConfig, row: Mapping[str, Cell]) -> None:
        """A point was stored: `row` as points.csv holds it."""
        ...

    def config_failed(self, config: ServerConfig, message: str, log_tail: str = "") -> None: ...
    def capacity_found(self, config: ServerConfig, summary: CapacityRecord) -> None: ...
    def trial_done(self, trial: Any, note: str) -> None: ...
    def note(self, message: str) -> None: ...
    def close(self) -> None: ...


class SilentReporter:
    """A Reporter that shows nothing."""

    def config_starting(
        self,
        config: ServerConfig,
        index: int,
        total: int,
        repeat: tuple[int, int] | None = None,
    ) -> None:
        pass

    def server_status(self, message: str) -> None:
        pass

    def server_ready(self, config: ServerConfig, seconds: float | None) -> None:
        pass

    def point_starting(self, config: ServerConfig, point: LoadPoint) -> None:
        pass

    def point_done(self, config: ServerConfig, row: Mapping[str, Cell]) -> None:
        pass

    def config_failed(self, config: ServerConfig, message: str, log_tail: str = "") -> None:
        pass

    def capacity_found(self, config: ServerConfig, summary: CapacityRecord) -> None:
        pass

    def trial_done(self, trial: Any, note: str) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass
