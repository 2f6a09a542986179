"""One server configuration: deploy, verify, every load point, teardown (always).

This is the only module that sequences the seams (Deployment, LoadDriver, metrics
scraping, store). Each finished point is on disk before the next one ends; teardown runs
on success, on failure and on KeyboardInterrupt alike.
"""

from __future__ import annotations

import csv
import io
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tunebench import client_limit, slo
from tunebench.client_limit import DEFAULT_TOLERANCE
from tunebench.deploy.base import Deployment
from tunebench.deploy.local import tail
from tunebench.effective import ineffective_args, read_effective
from tunebench.errors import DeploymentError, LoadError
from tunebench.load.base import ClientResult, LoadDriver
from tunebench.metrics.catalogue import COLUMNS as METRIC_COLUMNS
from tunebench.metrics.scraper import MetricsScraper
from tunebench.metrics.summary import summarize_window
from tunebench.numbers import to_float
from tunebench.progress import Reporter
from tunebench.redact import redact_text, secret_values
from tunebench.spec.models import Metrics
from tunebench.spec.plan import LoadPoint, ServerConfig, format_value
from tunebench.store.run import RunStore
from tunebench.tune.capacity import CapacitySearch


@dataclass
class ConfigOutcome:
    config_id: str
    status: str  # complete | failed
    points_done: int
    error: str | None = None
    capacity: dict[str, Any] | None = None  # CapacityProbing.summary() when searched
    effective: dict[str, Any] | None = None
    invalid_reasons: list[str] | None = None


class CapacityProbing:
    """Turns one `kind: capacity` point into probe points, one at a time, as results come."""

    def __init__(self, point: LoadPoint, start_rate: float | None, slo: dict | None):
        settings = point.search
        self.point = point
        self.slo = slo
        # The first configuration starts at start_rate; later ones from the previous
        # configuration's capacity, which is probably close (a warm start).
        self.search = CapacitySearch(
            start_rate=start_rate or settings.start_rate or 1.0,
            warm=start_rate is not None,
            tolerance=settings.tolerance, max_probes=settings.max_probes,
            max_rate=settings.max_rate,
        )
        self._pending: dict[str, float] = {}

    def next_points(self) -> list[LoadPoint]:
        if self._pending:
            return []  # a probe did not report (the driver failed); stop searching
        rate = self.search.next_rate()
        if rate is None:
            return []
        probe = self.point.probe(len(self.search.probes) + 1, float(f"{rate:.3g}"))
        self._pending[probe.point_id] = probe.target
        return [probe]

    def seed(self, rows: list[dict[str, Any]]) -> None:
        """Probes an earlier attempt of this configuration stored (a resumed run)."""
        for row in rows:
            if str(row.get("point_id", "")).startswith("capacity-") and row.get("target"):
                self.search.tell(float(row["target"]), _true(row.get("slo_met")),
                                 _true(row.get("client_limited")), to_float(row.get("slo_ratio")))

    def observe(self, point_id: str, row: dict[str, Any]) -> None:
        rate = self._pending.pop(point_id, None)
        if rate is not None:
            self.search.tell(rate, bool(row.get("slo_met")), bool(row.get("client_limited")),
                             row.get("slo_ratio"))

    def summary(self) -> dict[str, Any]:
        search = self.search
        return {
            "rate": search.capacity,
            "arrival": self.point.search.arrival,
            "probes": len(search.probes),
            "probe_rates": [p.rate for p in search.probes],
            "upper": search.bound.rate if search.bound else None,
            "tolerance": search.tolerance,
            "converged": search.converged,
            "client_bound": search.client_bound,
            "capped": search.capped,
            "slo": self.slo,
        }


class ConfigRunner:
    def __init__(
        self,
        store: RunStore,
        deployment: Deployment,
        make_driver: Callable[[ServerConfig], LoadDriver],
        metrics: Metrics,
        reporter: Reporter,
        slo: dict | None = None,
        client_tolerance: float = DEFAULT_TOLERANCE,
    ):
        self.slo = slo
        self.client_tolerance = client_tolerance
        self.store = store
        self.deployment = deployment
        self.make_driver = make_driver
        self.metrics = metrics
        self.reporter = reporter
        # A capacity search starts from the last configuration's capacity (a warm start).
        self.capacity_hint: float | None = None

    def run(self, config: ServerConfig, points: list[LoadPoint], attempt: int = 1,
            earlier_rows: list[dict[str, Any]] | None = None) -> ConfigOutcome:
        """Deploy `config` and measure `points`; `earlier_rows` are this configuration's
        points stored by an earlier attempt of a resumed run (kept, and seeding a search)."""
        store = self.store
        earlier_rows = earlier_rows or []
        store.update_config(
            config.config_id,
            label=config.label,
            model=config.model,
            args=config.args,
            command_args=config.command_args(),
            varied=config.varied,
            status="starting",
            attempts=attempt,
        )
        scraper: MetricsScraper | None = None
        watch: ServerWatch | None = None
        driver = self.make_driver(config)
        done = len(earlier_rows)
        in_flight: dict[str, str] = {}
        fixed = [p for p in points if p.search is None]
        searches = [p for p in points if p.search is not None]
        probing = CapacityProbing(searches[0], self.capacity_hint, self.slo) if searches else None
        if probing is not None:
            probing.seed(earlier_rows)
        suffix = f"-attempt{attempt}" if attempt > 1 else ""
        previous_series = self._read_series(config) if attempt > 1 else ""
        if attempt > 1:
            self._keep_earlier_log(config, attempt)
        try:
            # The load generator imports while the server starts: both take seconds.
            driver.prepare(fixed, store.path / "guidellm" / f"{config.config_id}{suffix}")
            launched = time.monotonic()
            try:
                handle = self.deployment.start(config)
            except DeploymentError as exc:
                store.update_config(config.config_id, status="failed", error=str(exc),
                                    log_tail=redact_text(exc.log_tail),
                                    start_s=round(time.monotonic() - launched, 1),
                                    server_pgid=getattr(self.deployment, "last_pgid", None),
                                    load_pgid=getattr(driver, "pgid", None))
                self.reporter.config_failed(config, str(exc), redact_text(exc.log_tail))
                return ConfigOutcome(config.config_id, "failed", 0, str(exc))
            self.reporter.server_ready(config, handle.started_s)
            effective = handle.effective if handle.effective is not None else read_effective(
                handle.base_url, handle.metrics_url, self.deployment.log_text(),
                handle.headers, handle.tls,
            )
            reasons = ineffective_args(config.args, effective)
            store.update_config(
                config.config_id, status="running",
                start_s=round(handle.started_s or (time.monotonic() - launched), 1),
                effective=effective, invalid_reasons=reasons,
                server_pgid=self.deployment.pgid,
                load_pgid=getattr(driver, "pgid", None),
            )
            if reasons:
                self.reporter.note(f"  [yellow]not in effect:[/] {'; '.join(reasons)}")
            if self.metrics.enabled and handle.metrics_url:
                scraper = MetricsScraper(
                    handle.metrics_url, self.metrics.interval_s, handle.headers, handle.tls
                ).start()
            watch = ServerWatch(self.deployment, driver).start()

            def on_result(result: ClientResult) -> None:
                nonlocal done
                if scraper is not None:
                    # Counters need a scrape after the window; don't wait for the next tick.
                    latest = scraper.snapshots()[-1:]
                    if not latest or latest[0].time < result.end_time:
                        scraper.scrape_once()
                in_flight.pop("point", None)
                row = self._row(config, result, scraper, reasons)
                store.add_requests(config.config_id, result.point_id, result.samples)
                store.add_point(row)
                if probing is not None:
                    probing.observe(result.point_id, row)
                done += 1
                if scraper is not None:
                    self._write_timeseries(config, scraper, previous_series)
                self.reporter.point_done(config, row)

            def on_start(point: LoadPoint) -> None:
                in_flight["point"] = point.point_id
                self.reporter.point_starting(config, point)

            capacity = None
            try:
                driver.run(handle, on_result, on_start,
                           next_points=probing.next_points if probing else None)
            except LoadError as exc:
                capacity = self._record_capacity(config, probing)
                failed_point = in_flight.get("point")
                error = str(exc) + (f" (point {failed_point} not measured)" if failed_point else "")
                store.update_config(config.config_id, status="failed", error=error,
                                    failed_point=failed_point, points_done=done,
                                    load_retries=getattr(driver, "retried", []),
                                    log_tail=redact_text(tail(self.deployment.log_text())))
                self.reporter.config_failed(config, error)
                return ConfigOutcome(config.config_id, "failed", done, error, capacity,
                                     effective, reasons)
            capacity = self._record_capacity(config, probing)
            store.update_config(config.config_id, status="complete", points_done=done,
                                failed_point=None, error=None,
                                load_retries=getattr(driver, "retried", []))
            return ConfigOutcome(config.config_id, "complete", done, None, capacity,
                                 effective, reasons)
        finally:
            if watch is not None:
                watch.stop()
            driver.close()
            if scraper is not None:
                scraper.stop()
                self._write_timeseries(config, scraper, previous_series)
            self.deployment.stop()
            self._redact_log(secret_values(config.args))

    def _record_capacity(self, config: ServerConfig,
                         probing: CapacityProbing | None) -> dict[str, Any] | None:
        if probing is None or not probing.search.probes:
            return None
        summary = probing.summary()
        self.store.update_config(config.config_id, capacity=summary)
        self.reporter.capacity_found(config, summary)
        if summary["rate"]:
            self.capacity_hint = summary["rate"]
        return summary

    def _row(
        self,
        config: ServerConfig,
        result: ClientResult,
        scraper: MetricsScraper | None,
        reasons: list[str],
    ) -> dict[str, Any]:
        point = result.point
        row: dict[str, Any] = {
            "run_id": self.store.run_id,
            "config_id": config.config_id,
            "config_label": config.label,
            "point_id": result.point_id,
            "load_kind": point.kind,
            "target": result.columns.get("target"),
        }
        for key, value in config.varied.items():
            row[key] = format_value(value)
        row.update({k: v for k, v in result.columns.items() if k not in ("target", "strategy")})
        server = summarize_window(scraper.snapshots() if scraper else [], result.start_time,
                                  result.end_time)
        row.update(server)
        row["server_metrics"] = "present" if server["server_samples"] else "absent"
        if not server["server_samples"]:
            # The client's measurements stand; say why the server side is missing.
            why = (scraper.last_error if scraper and scraper.last_error
                   else "metrics disabled" if not self.metrics.enabled else "no scrape in the window")
            row["server_metrics_note"] = f"no server metrics: {why}"[:300]
        row.update(slo.evaluate(row, result.samples, self.slo))
        row.update(client_limit.verdict(row, self.client_tolerance))
        problems = list(reasons)
        if not result.columns.get("requests_ok"):
            problems.append("no successful requests")
        row["valid"] = not problems
        row["invalid_reason"] = "; ".join(problems)
        if result.raw_report is not None:
            row["raw_report"] = str(result.raw_report.relative_to(self.store.path))
        row["start_time"] = round(result.start_time, 3)
        row["end_time"] = round(result.end_time, 3)
        return row

    def _read_series(self, config: ServerConfig) -> str:
        path = self.store.path / "metrics" / f"{config.config_id}.csv"
        if not path.exists():
            return ""
        return "".join(path.read_text().splitlines(keepends=True)[1:])  # without the header

    def _keep_earlier_log(self, config: ServerConfig, attempt: int) -> None:
        path = self.store.path / "logs" / f"server-{config.config_id}.log"
        if path.exists():
            path.rename(path.with_name(f"server-{config.config_id}.attempt{attempt - 1}.log"))

    def _write_timeseries(self, config: ServerConfig, scraper: MetricsScraper,
                          previous: str = "") -> None:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["time", *METRIC_COLUMNS])
        buffer.write(previous)  # an earlier attempt's series (resumed run)
        for snap in scraper.snapshots():
            writer.writerow([f"{snap.time:.3f}", *(_num(snap.values.get(c)) for c in METRIC_COLUMNS)])
        self.store.write_text(f"metrics/{config.config_id}.csv", buffer.getvalue())

    def _redact_log(self, secrets: list[str]) -> None:
        path: Path | None = self.deployment.log_path
        if path and path.exists():
            text = path.read_text(errors="replace")
            clean = redact_text(text, secrets)
            if clean != text:
                path.write_text(clean)


def _true(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


class ServerWatch:
    """Checks once a second that the deployment's server still runs; when it is gone, the
    load is aborted at once instead of running every remaining point against nothing."""

    def __init__(self, deployment: Deployment, driver: LoadDriver, period_s: float = 1.0):
        self._check = getattr(deployment, "failure", None)
        self._driver = driver
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="server-watch", daemon=True)

    def start(self) -> "ServerWatch":
        if self._check is not None:
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self._period_s):
            failure = self._check()
            if failure:
                abort = getattr(self._driver, "abort", None)
                if abort:
                    abort(failure)
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"
