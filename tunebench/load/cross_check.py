"""Cross-check: every point measured by two load drivers in turn, on the same server.

Two load generators measuring the same server at the same load disagree when one of them is
the bottleneck (on a small box GuideLLM's scheduler processes need far more CPU than vLLM's
one asyncio loop). Measuring each point with both, alternated, lets the run say which
figures describe the server (analysis/cross_check.py holds the verdict).

Each driver keeps its own worker process for the whole configuration (it pays its import
once, while the server starts) and is fed one point at a time: the driver whose turn it is
runs its point while the other waits idle, so the two never load the server together. The
order alternates per point (A B, B A, A B, ...) so that a drift of the server over the
configuration's life (warming caches, a growing prefix cache) does not favour one side.

A point `concurrent-8` becomes `concurrent-8@guidellm` and `concurrent-8@vllm-bench`; its
rows carry `load_driver`.

A replayed trace point is played by both sides from the same slice: the same lengths fitted
to the context, the same times and lead (GuideLLM through its replay profile, vLLM through
its timed_trace dataset). Each side's prompt blocks are its own (salted by the point id,
which names the driver), so the side that goes second finds none of the first side's
prompts in the server's prefix cache.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Callable

from tunebench.errors import LoadError
from tunebench.seams.deployment import ServerHandle
from tunebench.seams.load import ClientResult, LoadDriver
from tunebench.spec.plan import LoadPoint

SEPARATOR = "@"


def split_point_id(point_id: str) -> tuple[str, str | None]:
    """("concurrent-8", "guidellm") for "concurrent-8@guidellm"; (point_id, None) otherwise."""
    base, sep, driver = point_id.rpartition(SEPARATOR)
    return (base, driver) if sep and base else (point_id, None)


def alternated(points: list[LoadPoint], names: list[str]) -> list[tuple[str, LoadPoint]]:
    """Every point once per driver, each under its own id; who goes first alternates."""
    turns: list[tuple[str, LoadPoint]] = []
    for number, point in enumerate(points):
        order = names if number % 2 == 0 else list(reversed(names))
        for name in order:
            turns.append(
                (name, dataclasses.replace(point, point_id=f"{point.point_id}{SEPARATOR}{name}"))
            )
    return turns


class _Turns:
    """Whose turn it is, shared by the drivers' threads; a failure ends every wait."""

    def __init__(self, turns: list[tuple[str, LoadPoint]]):
        self.turns = turns
        self.position = 0
        self.failed: BaseException | None = None
        self._condition = threading.Condition()

    def wait_for(self, name: str) -> LoadPoint | None:
        """Block until `name` is to run the next point (returned), or nothing is left for it
        (None: the plan is done, or another driver failed)."""
        with self._condition:
            while True:
                if self.failed is not None:
                    return None
                if self.position >= len(self.turns):
                    return None
                if not any(n == name for n, _ in self.turns[self.position :]):
                    return None
                if self.turns[self.position][0] == name:
                    return self.turns[self.position][1]
                self._condition.wait(timeout=1.0)

    def advance(self) -> None:
        with self._condition:
            self.position += 1
            self._condition.notify_all()

    def fail(self, error: BaseException) -> None:
        with self._condition:
            if self.failed is None:
                self.failed = error
            self._condition.notify_all()


class CrossCheckDriver:
    """Two (or more) LoadDrivers behind the one seam, taking turns point by point."""

    def __init__(self, drivers: dict[str, LoadDriver]):
        if len(drivers) < 2:
            raise ValueError("a cross-check needs two load drivers")
        self.drivers = drivers
        self._turns = _Turns([])
        self._current: str | None = None

    @property
    def retried(self) -> list[dict[str, str]]:
        return [entry for driver in self.drivers.values() for entry in driver.retried]

    @property
    def pgid(self) -> int | None:
        current = self.drivers.get(self._current or "")
        if current is not None and current.pgid is not None:
            return current.pgid
        return next((d.pgid for d in self.drivers.values() if d.pgid is not None), None)

    def prepare(self, points: list[LoadPoint], work_dir: Path) -> None:
        for point in points:
            if point.search is not None:
                raise LoadError("load.driver cross-check measures fixed points, not a search")
        self._turns = _Turns(alternated(points, list(self.drivers)))
        # Each driver starts with its first point (its worker imports meanwhile); the rest
        # come one at a time through next_points, when its turn comes.
        for name, driver in self.drivers.items():
            first = [p for n, p in self._turns.turns if n == name][:1]
            driver.prepare(first, work_dir / name)

    def run(
        self,
        handle: ServerHandle,
        on_result: Callable[[ClientResult], None],
        on_start: Callable[[LoadPoint], None] | None = None,
        next_points: Callable[[], list[LoadPoint]] | None = None,
    ) -> None:
        """`next_points` is not asked: a cross-check has no search (refused in prepare)."""
        turns = self._turns
        threads = [
            threading.Thread(
                target=self._drive,
                args=(name, driver, handle, on_result, on_start),
                name=f"cross-check-{name}",
                daemon=True,
            )
            for name, driver in self.drivers.items()
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(timeout=0.5)
        except BaseException as exc:  # KeyboardInterrupt: stop both, then let it through
            self.abort(f"interrupted: {type(exc).__name__}")
            raise
        if turns.failed is not None:
            if isinstance(turns.failed, LoadError):
                raise turns.failed
            raise LoadError(f"cross-check failed: {turns.failed}") from turns.failed

    def _drive(self, name, driver, handle, on_result, on_start) -> None:
        turns = self._turns
        first = turns.wait_for(name)
        if first is None:
            return  # nothing for this driver (or the other failed before its turn)

        def result(found: ClientResult) -> None:
            columns = found.columns.copy()
            columns["load_driver"] = name
            on_result(dataclasses.replace(found, columns=columns))
            turns.advance()

        def started(point: LoadPoint) -> None:
            self._current = name
            if on_start is not None:
                on_start(point)

        def more() -> list[LoadPoint]:
            # the turn moved past this driver's last point when its result came in
            point = turns.wait_for(name)
            return [] if point is None else [point]

        try:
            driver.run(handle, result, started, more)
        except BaseException as exc:
            turns.fail(exc)
            for other_name, other in self.drivers.items():
                if other_name != name:
                    other.abort(f"the {name} side of the cross-check failed: {exc}")
            return
        if turns.failed is None and turns.wait_for(name) is not None:
            # its worker ended while a point of its was still to come
            turns.fail(LoadError(f"{name} stopped before its last cross-check point"))

    def abort(self, reason: str) -> None:
        self._turns.fail(LoadError(reason))
        for driver in self.drivers.values():
            driver.abort(reason)

    def close(self) -> None:
        errors = []
        for driver in self.drivers.values():
            try:
                driver.close()
            except Exception as exc:  # close every driver, then say what went wrong
                errors.append(exc)
        if errors:
            raise errors[0]
