"""A `kind: capacity` load point turned into probe points, one at a time, as results come."""

from __future__ import annotations

from typing import Any

from tunebench.numbers import to_float
from tunebench.points import trust
from tunebench.points.capacity import SAMPLE_MARGIN, CapacitySearch, probe_seconds
from tunebench.points.cells import PointCells, RowView
from tunebench.points.machine import is_drift
from tunebench.points.records import CapacityRecord
from tunebench.points.slo import highest_quantile
from tunebench.spec.plan import LoadPoint


class CapacityProbing:
    """Feeds a CapacitySearch with probe results; hands the load driver the next probe."""

    def __init__(self, point: LoadPoint, start_rate: float | None, slo: dict | None):
        settings = point.search
        assert settings is not None, "a capacity point carries its search settings"
        self.point = point
        self.slo = slo
        # The first configuration starts at start_rate; later ones from the previous
        # configuration's capacity, which is probably close (a warm start).
        self.search = CapacitySearch(
            start_rate=start_rate or settings.start_rate or 1.0,
            warm=start_rate is not None,
            tolerance=settings.tolerance,
            max_probes=settings.max_probes,
            max_rate=settings.max_rate,
            noise=settings.noise,
        )
        self.quantile = highest_quantile(slo)  # sets how many requests a probe needs
        self.sample_margin = settings.sample_margin or SAMPLE_MARGIN
        self._pending: dict[str, float] = {}
        self.drifted: list[str] = []  # probes the machine moved under: "point: reason"

    def next_points(self) -> list[LoadPoint]:
        if self._pending:
            return []  # a probe did not report (the driver failed); stop searching
        rate = self.search.next_rate()
        if rate is None:
            return []
        rate = float(f"{rate:.3g}")
        if self.point.trace is not None:
            # a replay probe plays the whole slice at this speed: its requests are the
            # slice's, however fast it goes, so there is no window to size
            seconds = self.point.max_seconds
        else:
            margin = self.search.window_margin(self.sample_margin)
            seconds = probe_seconds(rate, self.point.max_seconds or 0.0, self.quantile, margin)
        probe = self.point.probe(len(self.search.probes) + 1, rate, seconds)
        assert probe.target is not None
        self._pending[probe.point_id] = probe.target
        return [probe]

    def seed(self, rows: list[dict[str, Any]]) -> None:
        """Probes an earlier attempt of this configuration stored (a resumed run)."""
        for row in rows:
            if str(row.get("point_id", "")).startswith("capacity-") and row.get("target"):
                self._note_drift(str(row["point_id"]), row)
                self.search.tell(
                    float(row["target"]),
                    trust.flag(row.get("slo_met")),
                    not trust.is_server_evidence(row),
                    to_float(row.get("slo_ratio")),
                )

    def _note_drift(self, point_id: str, row: RowView) -> None:
        moved = [r for r in trust.unverified_reasons(row) if is_drift(r)]
        if moved:
            self.drifted.append(f"{point_id}: {moved[0]}")

    def observe(self, point_id: str, row: PointCells) -> None:
        """One measured point of the configuration; only the search's own probes count (a
        configuration's other points, e.g. a warm-up before the search, are not probes)."""
        rate = self._pending.pop(point_id, None)
        if rate is not None:
            self._note_drift(point_id, row)
            self.search.tell(
                rate,
                trust.flag(row.get("slo_met")),
                not trust.is_server_evidence(row),  # invalid probes are no capacity either
                row.get("slo_ratio"),
            )

    def summary(self) -> CapacityRecord:
        search = self.search
        assert self.point.search is not None
        return {
            "rate": search.capacity,
            "arrival": self.point.search.arrival,
            "probes": len(search.probes),
            "probe_rates": [p.rate for p in search.probes],
            "upper": search.bound.rate if search.bound else None,
            "interval": list(search.interval) if search.interval else None,
            "noise": search.noise,
            # a replay probe's window is its slice: no margin sized it
            "sample_margin": self.sample_margin if self.point.trace is None else None,
            "tolerance": search.tolerance,
            "converged": search.converged,
            "done": search.done,  # the search stopped by its own rule (resume: not again)
            "client_bound": search.client_bound,
            "capped": search.capped,
            "slo": self.slo,
            # probes measured while the machine moved: the capacity is no answer of record
            "drift": (
                f"machine drifted during the search ({len(self.drifted)} of "
                f"{len(search.probes)} probes; first: {self.drifted[0]})"
                if self.drifted
                else None
            ),
        }
