"""The LoadDriver of a recorded deployment: each point is interpolated from the recording,
or, for a noisy recorded run, drawn from the requests of the recorded start the deployment drew."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from tunebench.errors import LoadError, StoreError
from tunebench.points.cells import request_samples, stored_client_cells
from tunebench.recorded.deployment import RecordedDeployment
from tunebench.seams.deployment import ServerHandle
from tunebench.seams.load import ClientResult
from tunebench.spec.plan import LoadPoint

NOISY_DEFAULT_SECONDS = 10.0  # a noisy point without max_seconds: the requests of 10 s


class RecordedDriver:
    def __init__(self, deployment: RecordedDeployment):
        self.deployment = deployment
        self._points: list[LoadPoint] = []
        self.retried: list[dict[str, str]] = []  # nothing to retry: no generator runs
        self._aborted: str | None = None

    def prepare(self, points: list[LoadPoint], work_dir: Path) -> None:
        self._points = list(points)

    def run(
        self,
        handle: ServerHandle,
        on_result: Callable[[ClientResult], None],
        on_start: Callable[[LoadPoint], None] | None = None,
        next_points: Callable[[], list[LoadPoint]] | None = None,
    ) -> None:
        pending = list(self._points)
        while True:
            if self._aborted:
                raise LoadError(self._aborted)
            if not pending:
                pending = list(next_points()) if next_points else []
                if not pending:
                    return
            point = pending.pop(0)
            if on_start:
                on_start(point)
            on_result(self._result(point))

    def _result(self, point: LoadPoint) -> ClientResult:
        recorded = self.deployment.current
        if recorded is None:
            raise LoadError("recorded: no configuration is deployed")
        if point.target is None:
            raise LoadError(
                f"recorded: {point.point_id} has no target to interpolate at; a recorded "
                "run answers concurrent, throughput, poisson, constant or capacity points"
            )
        samples: list[dict] = []
        try:
            start = self.deployment.start_drawn
            if start is not None:
                seconds = float(point.max_seconds or NOISY_DEFAULT_SECONDS)
                drawn, samples = start.draw(
                    point.kind, float(point.target), seconds, self.deployment.rng
                )
            else:
                drawn = recorded.point_at(point.kind, float(point.target))
            # the recorded row's client columns; the rules judge the point afresh
            columns = stored_client_cells(drawn, f"recorded run of {recorded.label}")
        except StoreError as exc:
            raise LoadError(str(exc)) from None
        warnings = [w for w in str(columns.get("client_warnings") or "").split(";") if w]
        duration = float(columns.get("duration_s") or 0)
        if self.deployment.time_scale:
            time.sleep(self.deployment.time_scale * duration)
        now = time.time()
        return ClientResult(
            point,
            point.point_id,
            columns,
            now - duration,
            now,
            None,
            warnings,
            request_samples(samples, f"recorded {recorded.label}"),
        )

    @property
    def pgid(self) -> int | None:
        return None

    def abort(self, reason: str) -> None:
        self._aborted = reason

    def close(self) -> None:
        pass
