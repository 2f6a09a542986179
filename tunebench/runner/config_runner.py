"""One server configuration: deploy, verify, every load point, teardown (always).

This is the only module that sequences the seams (Deployment, LoadDriver, metrics
scraping, store). Each finished point is on disk before the next one ends; teardown runs
on success, on failure and on KeyboardInterrupt alike.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Sequence

from tunebench.errors import DeploymentError, LoadError, tail
from tunebench.machine.watch import MachineWatch
from tunebench.metrics.effective import read_effective
from tunebench.metrics.scraper import MetricsScraper
from tunebench.metrics.series import rows_of
from tunebench.points.checkpoint import check_checkpoint, declared_for_model
from tunebench.points.records import CapacityRecord
from tunebench.points.sentinel import sentinel_after, sentinel_of, with_sentinels
from tunebench.points.validity import verify_args
from tunebench.redact import redact_text, secret_values
from tunebench.runner.measuring import Measuring, PointExtras, PointRules
from tunebench.runner.probing import CapacityProbing
from tunebench.runner.sentinel import judge_sentinel, sentinel_not_measured
from tunebench.runner.watch import ServerWatch
from tunebench.seams.before_load import BeforeLoad
from tunebench.seams.deployment import Deployment, ServerHandle
from tunebench.seams.load import ClientResult, LoadDriver
from tunebench.seams.progress import Reporter
from tunebench.spec.models import Metrics
from tunebench.spec.plan import LoadPoint, ServerConfig
from tunebench.store.manifest import ConfigStatus
from tunebench.store.run import RunStore


class WarmStart(Enum):
    """`ConfigRunner.run`'s default capacity hint: the last configuration's capacity."""

    LAST_CAPACITY = "last capacity"


WARM_START = WarmStart.LAST_CAPACITY


@dataclass
class ConfigOutcome:
    config_id: str
    status: str  # complete | failed
    points_done: int
    error: str | None = None
    capacity: CapacityRecord | None = None  # CapacityProbing.summary() when searched
    effective: dict[str, Any] | None = None
    invalid_reasons: list[str] | None = None


def _repeat_suffix(repeat: int) -> str:
    return "" if repeat == 1 else f"-r{repeat}"


def stop_together(*stops: Callable[[], None]) -> None:
    """Run every stop at once (the last in this thread) and return when all have ended;
    the first error raised is raised again. The threads are not daemons: on Ctrl-C the
    interpreter still waits for them, so nothing is left running."""
    errors: list[BaseException] = []

    def guarded(stop: Callable[[], None]) -> None:
        try:
            stop()
        except BaseException as exc:  # re-raised below, in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(stop,)) for stop in stops[:-1]]
    for thread in threads:
        thread.start()
    try:
        if stops:
            guarded(stops[-1])
    finally:
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]


class ConfigRunner:
    def __init__(
        self,
        store: RunStore,
        deployment: Deployment,
        make_driver: Callable[[ServerConfig], LoadDriver],
        metrics: Metrics,
        reporter: Reporter,
        rules: PointRules = PointRules(),
        before_load: Sequence[BeforeLoad] = (),
        extras: PointExtras = PointExtras(),
    ):
        self.store = store
        self.deployment = deployment
        self.make_driver = make_driver
        self.metrics = metrics
        self.reporter = reporter
        self.rules = rules
        # per configuration, once its server is verified and before its first point
        self.before_load = tuple(before_load)
        self.extras = extras
        # A capacity search starts from the last configuration's capacity (a warm start),
        # the last one the machine held its speed under.
        self.capacity_hint: float | None = None

    def run(
        self,
        config: ServerConfig,
        points: list[LoadPoint],
        attempt: int = 1,
        earlier_rows: list[dict[str, Any]] | None = None,
        repeat: int = 1,
        capacity_hint: float | None | WarmStart = WARM_START,
    ) -> ConfigOutcome:
        """Deploy `config` and measure `points` (as repeat `repeat` of them); `earlier_rows`
        are this configuration's points of this repeat stored by an earlier attempt of a
        resumed run (kept, and seeding a search). A capacity search starts at
        `capacity_hint` (None: its own start rate; by default the last configuration's
        capacity)."""
        store, layout = self.store, self.store.layout
        earlier_rows = earlier_rows or []
        store.update_config(
            config.config_id,
            label=config.label,
            model=config.model,
            args=config.args,
            command_args=config.command_args(),
            varied=config.varied,
            status=ConfigStatus.STARTING,
            attempts=attempt,
            repeat=repeat,
        )
        driver = self.make_driver(config)
        fixed = [p for p in points if p.search is None]
        searches = [p for p in points if p.search is not None]
        # the fixed points with their A...A sentinels placed (points/sentinel.py)
        planned = with_sentinels(
            fixed,
            self.extras.sentinel_seconds,
            self.extras.sentinel_every,
            self.extras.sentinel_every_s,
        )
        probing = (
            CapacityProbing(
                searches[0],
                self.capacity_hint if capacity_hint is WARM_START else capacity_hint,
                self.rules.slo,
            )
            if searches
            else None
        )
        if probing is not None:
            probing.seed(earlier_rows)
        state = Measuring(config, [], probing, done=len(earlier_rows), repeat=repeat)
        state.has_sentinels = len(planned) > len(fixed)
        if attempt > 1 or repeat > 1:  # the series and the log of the earlier go are kept
            series = layout.series(config.config_id)
            state.earlier_series = rows_of(series.read_text()) if series.exists() else ""
            store.keep_earlier_log(config.config_id, attempt, repeat)
        watch: ServerWatch | None = None
        try:
            # The load generator imports while the server starts: both take seconds.
            driver.prepare(planned, layout.load_dir(config.config_id, attempt, repeat))
            handle = self._start(config, driver)
            if handle is None:
                entry = store.manifest.config(config.config_id)
                return ConfigOutcome(config.config_id, "failed", 0, entry.error if entry else None)
            self._verify(state, handle, driver)
            skip = None
            for step in self.before_load:  # the quality check, lm-eval: outside every window
                reason = step.run(config, handle, repeat)
                skip = skip or reason
            if skip:
                store.update_config(
                    config.config_id, status=ConfigStatus.COMPLETE, load_skipped=skip
                )
                self.reporter.note(f"  load not measured: {skip}")
                return ConfigOutcome(
                    config.config_id, "complete", 0, None, None, state.effective, state.reasons
                )
            if self.metrics.enabled and handle.metrics_url:
                state.scraper = MetricsScraper(
                    handle.metrics_url, self.metrics.interval_s, handle.headers, handle.tls
                ).start()
            if self.extras.make_meter is not None:
                state.meter = self.extras.make_meter(config)
                if not isinstance(state.meter, str):
                    state.meter.start()
            if self.extras.make_machine_watch is not None:
                state.machine = self.extras.make_machine_watch(config)
                if isinstance(state.machine, MachineWatch):
                    state.machine.telemetry.groups = [
                        g for g in (self.deployment.pgid, driver.pgid) if g is not None
                    ]
                    state.machine.telemetry.watch_server(self.deployment.pgid)
                    state.machine.start()
            watch = ServerWatch(self.deployment, driver).start()
            return self._measure(state, handle, driver)
        finally:
            if driver.retried:  # also when the run is interrupted or fails mid point
                store.update_config(config.config_id, load_retries=driver.retried)
            if watch is not None:
                watch.stop()
            if state.scraper is not None:
                state.scraper.stop()
                self._write_series(state)
            if state.meter is not None and not isinstance(state.meter, str):
                state.meter.stop()
            if isinstance(state.machine, MachineWatch):
                state.machine.stop()
                self.store.write_text(
                    self.store.layout.machine(config.config_id + _repeat_suffix(repeat)),
                    state.machine.csv_text(),
                )
            # The load generator and the server each take ~2 s to exit (their own graceful
            # shutdowns, mostly waiting): stopped together, a configuration ends that much
            # sooner, and both are reaped before the next one starts.
            stop_together(driver.close, self.deployment.stop)
            store.redact_file(self.deployment.log_path, secret_values(config.args))

    # -- steps ----------------------------------------------------------------------------
    def _start(self, config: ServerConfig, driver: LoadDriver) -> ServerHandle | None:
        """The ready server, or None after recording why it could not start."""
        launched = time.monotonic()
        try:
            handle = self.deployment.start(config)
        except DeploymentError as exc:
            self.store.update_config(
                config.config_id,
                status=ConfigStatus.FAILED,
                error=str(exc),
                log_tail=redact_text(exc.log_tail),
                start_s=round(time.monotonic() - launched, 1),
                server_pgid=self.deployment.last_pgid,
                load_pgid=driver.pgid,
            )
            self.reporter.config_failed(config, str(exc), redact_text(exc.log_tail))
            return None
        self.reporter.server_ready(config, handle.started_s)
        self.store.update_config(
            config.config_id,
            status=ConfigStatus.RUNNING,
            start_s=round(handle.started_s or (time.monotonic() - launched), 1),
            server_pgid=self.deployment.pgid,
            load_pgid=driver.pgid,
        )
        return handle

    def _verify(self, state: Measuring, handle: ServerHandle, driver: LoadDriver) -> None:
        """Read what the server runs with; args that did not take effect make it invalid."""
        effective = (
            handle.effective
            if handle.effective is not None
            else read_effective(
                handle.base_url,
                handle.metrics_url,
                self.deployment.log_text(),
                handle.headers,
                handle.tls,
            )
        )
        state.effective = effective
        checks = verify_args(state.config.args, effective)
        declared = declared_for_model(state.config.model)
        if declared is not None:  # a quantized checkpoint: does the server run it quantized?
            checks.append(check_checkpoint(declared, effective))
        state.reasons = [c.reason for c in checks if c.state == "mismatch"]
        unverified = [c.arg for c in checks if c.state == "unverified"]
        state.unverified = unverified
        self.store.update_config(
            state.config.config_id,
            effective=effective,
            invalid_reasons=state.reasons,
            arg_checks=[dataclasses.asdict(c) for c in checks],
        )
        if self.extras.roofline is not None:
            state.roofline, record = self.extras.roofline.for_config(
                state.config.model, state.config.args, effective
            )
            self.store.update_config(state.config.config_id, roofline=record)
        if state.reasons:
            self.reporter.note(f"  [yellow]not in effect:[/] {'; '.join(state.reasons)}")
        if unverified:
            # never silently "ok": the server offers no way to read these back
            self.reporter.note(f"  unverified (no read-back here): {', '.join(unverified)}")

    def _measure(self, state: Measuring, handle: ServerHandle, driver: LoadDriver) -> ConfigOutcome:
        config, store, probing = state.config, self.store, state.probing

        def on_start(point: LoadPoint) -> None:
            state.in_flight = point.point_id
            if isinstance(state.machine, MachineWatch):
                state.machine.mark()
            repeated = sentinel_of(point.point_id)
            if repeated is not None:
                after = sentinel_after(point.point_id)
                self.reporter.note(
                    f"  sentinel{f' after {after}' if after else ''}: {repeated} again for "
                    f"{point.max_seconds:g} s or "
                    f"{point.max_requests} requests, whichever ends first (did the machine "
                    "hold its speed?)"
                )
                return
            self.reporter.point_starting(config, point)

        def on_result(result: ClientResult) -> None:
            if state.scraper is not None:
                # Counters need a scrape after the window; don't wait for the next tick.
                latest = state.scraper.snapshots()[-1:]
                if not latest or latest[0].time < result.end_time:
                    state.scraper.scrape_once()
            if state.meter is not None and not isinstance(state.meter, str):
                state.meter.mark()  # a reading after the window: its end is bracketed
            if isinstance(state.machine, MachineWatch):
                state.machine.mark()
                # the probe after the window (tens of ms, in the load generator's pause
                # between points) is read into the row below
                state.machine.wait_for_probe()
            state.in_flight = None
            repeated = sentinel_of(result.point_id)
            if repeated is not None:
                judge_sentinel(
                    self.store,
                    self.reporter,
                    config.config_id,
                    state.repeat,
                    repeated,
                    state.spans,
                    result,
                )
                return
            row = state.row(
                result,
                self.store.run_id,
                self.rules,
                self.extras,
                metrics_enabled=self.metrics.enabled,
                raw_report=(
                    self.store.layout.relative(result.raw_report) if result.raw_report else None
                ),
            )
            store.add_requests(config.config_id, result.point_id, result.samples, state.repeat)
            store.add_point(row)
            if state.has_sentinels and result.point.search is None:
                state.spans.measured(result.point_id, result.samples)
            if probing is not None:
                probing.observe(result.point_id, row.cells)
            state.done += 1
            if state.scraper is not None:
                self._write_series(state)
            self.reporter.point_done(config, row.csv_cells())

        try:
            driver.run(
                handle, on_result, on_start, next_points=probing.next_points if probing else None
            )
        except LoadError as exc:
            failed_at = state.in_flight or ""
            repeated = sentinel_of(failed_at)
            if repeated is not None and sentinel_after(failed_at) is None:
                # every point was measured and stored; only the check after them failed: the
                # configuration is complete, and its sentinel record says what it could not see
                sentinel_not_measured(
                    store, self.reporter, config.config_id, state.repeat, repeated, str(exc)
                )
                return self._complete(state, probing, driver)
            capacity = self._record_capacity(config, probing)
            failed = state.in_flight
            error = str(exc) + (f" (point {failed} not measured)" if failed else "")
            store.update_config(
                config.config_id,
                status=ConfigStatus.FAILED,
                error=error,
                failed_point=failed,
                points_done=state.done,
                load_retries=driver.retried,
                log_tail=redact_text(tail(self.deployment.log_text())),
            )
            self.reporter.config_failed(config, error)
            return ConfigOutcome(
                config.config_id,
                "failed",
                state.done,
                error,
                capacity,
                state.effective,
                state.reasons,
            )
        return self._complete(state, probing, driver)

    def _complete(
        self, state: Measuring, probing: CapacityProbing | None, driver: LoadDriver
    ) -> ConfigOutcome:
        config = state.config
        capacity = self._record_capacity(config, probing)
        self.store.update_config(
            config.config_id,
            status=ConfigStatus.COMPLETE,
            points_done=state.done,
            failed_point=None,
            error=None,
            load_retries=driver.retried,
        )
        return ConfigOutcome(
            config.config_id, "complete", state.done, None, capacity, state.effective, state.reasons
        )

    def _record_capacity(
        self, config: ServerConfig, probing: CapacityProbing | None
    ) -> CapacityRecord | None:
        if probing is None or not probing.search.probes:
            return None
        summary = probing.summary()
        self.store.update_config(config.config_id, capacity=summary)
        self.reporter.capacity_found(config, summary)
        # A capacity the machine moved under is no start for the next search: its rate is
        # the slowed machine's, and a warm start brackets near it with small steps.
        if summary["rate"] and not summary["drift"]:
            self.capacity_hint = summary["rate"]
        return summary

    def _write_series(self, state: Measuring) -> None:
        self.store.write_text(self.store.layout.series(state.config.config_id), state.series_text())
