"""What one configuration's load knows while it runs, and how a finished window becomes a
point's row: the client's result, the server's metrics over the window, the machine, the
energy and the rules every point is judged by.

ConfigRunner (runner/config_runner.py) sequences the seams; this module holds the state
it carries from point to point and turns each window into the row the store keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tunebench.machine.watch import MachineWatch
from tunebench.metrics.scraper import MetricsScraper
from tunebench.metrics.series import series_csv
from tunebench.metrics.summary import summarize_window
from tunebench.points.cells import PointRow
from tunebench.points.client_limit import DEFAULT_TOLERANCE
from tunebench.points.cost import replica_price
from tunebench.points.roofline import Roofline
from tunebench.points.row import PointId, build_row
from tunebench.roofline.plan import RooflinePlanner
from tunebench.runner.probing import CapacityProbing
from tunebench.runner.sentinel import SentinelSpans
from tunebench.seams.energy import EnergyMeter, EnergyReading
from tunebench.seams.load import ClientResult
from tunebench.spec.measure_settings import DEFAULT_SENTINEL_EVERY_S
from tunebench.spec.plan import ServerConfig


@dataclass(frozen=True)
class PointRules:
    """How each point is judged: the SLO, the client-limit tolerance, and the fixed output
    length the data asks for (None: lengths vary), checked per point."""

    slo: dict | None = None
    client_tolerance: float = DEFAULT_TOLERANCE
    expected_output_tokens: int | None = None


@dataclass(frozen=True)
class PointExtras:
    """What the spec adds to every point: cost (`cost:`), energy (`energy:`, a meter per
    configuration, or why it has none) and the roofline's decode bound (`roofline:`)."""

    cost: dict[str, Any] | None = None
    make_meter: Callable[[ServerConfig], EnergyMeter | str] | None = None
    roofline: RooflinePlanner | None = None
    make_machine_watch: Callable[[ServerConfig], MachineWatch | str] | None = None
    # the A...A sentinel's window (spec `machine.sentinel_seconds`); None: no sentinel
    sentinel_seconds: float | None = None
    # sentinels between points: after this many points or seconds of windows since the last
    # reading (spec `machine.sentinel_every`, `sentinel_every_s`; 0: not by that rule)
    sentinel_every: int = 0
    sentinel_every_s: float = DEFAULT_SENTINEL_EVERY_S


@dataclass
class Measuring:
    """State of one configuration's load: what is stored, what is in flight."""

    config: ServerConfig
    reasons: list[str]
    probing: CapacityProbing | None
    scraper: MetricsScraper | None = None
    meter: EnergyMeter | str | None = None  # or why this configuration has none
    machine: MachineWatch | str | None = None  # the machine under the server, or why not
    roofline: Roofline | None = None
    earlier_series: str = ""
    done: int = 0
    repeat: int = 1
    in_flight: str | None = None
    effective: dict[str, Any] = field(default_factory=dict)
    unverified: list[str] = field(default_factory=list)  # args the server gave no read-back of
    # whether the first point is measured again, between points and after the last
    # (points/sentinel.py), and those readings so far
    has_sentinels: bool = False
    spans: SentinelSpans = field(default_factory=SentinelSpans)

    def row(
        self,
        result: ClientResult,
        run_id: str,
        rules: PointRules,
        extras: PointExtras,
        metrics_enabled: bool,
        raw_report: str | None,
    ) -> PointRow:
        """The stored row of one finished window (`raw_report`: its path in the run)."""
        config, scraper = self.config, self.scraper
        server = summarize_window(
            scraper.snapshots() if scraper else [], result.start_time, result.end_time
        )
        note = (
            scraper.last_error
            if scraper and scraper.last_error
            else "metrics disabled"
            if not metrics_enabled
            else ""
        )
        return build_row(
            PointId(
                run_id,
                config.config_id,
                config.label,
                result.point_id,
                result.point.kind,
                self.repeat,
            ),
            config.varied,
            result.columns,
            result.samples,
            server,
            turns=result.turns,
            server_note=note,
            slo_spec=rules.slo,
            client_tolerance=rules.client_tolerance,
            config_problems=self.reasons,
            config_unverified=[f"{arg} not read back from the server" for arg in self.unverified],
            expected_output_tokens=rules.expected_output_tokens,
            raw_report=raw_report,
            window=(result.start_time, result.end_time),
            price_per_hour=(replica_price(extras.cost, config.args) if extras.cost else None),
            energy=self._energy(result),
            roofline=self.roofline,
            # a replayed trace's predicted prefix hits come in the server's cache blocks
            block_size=self.effective.get("block_size"),
            machine=(
                self.machine.window(result.start_time, result.end_time)
                if isinstance(self.machine, MachineWatch)
                else self.machine
            ),
        )

    def _energy(self, result: ClientResult) -> EnergyReading | str | None:
        if self.meter is None or isinstance(self.meter, str):
            return self.meter
        return self.meter.window(result.start_time, result.end_time)

    def series_text(self) -> str:
        """The server's metrics series so far (after an earlier attempt's, when resumed)."""
        snapshots = self.scraper.snapshots() if self.scraper is not None else []
        return series_csv(snapshots, self.earlier_series)
