"""One server configuration: deploy, verify, every load point, teardown (always).

This is the only module that sequences the seams (Deployment, LoadDriver, metrics
scraping, store). Each finished point is on disk before the next one ends; teardown runs
on success, on failure and on KeyboardInterrupt alike.
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tunebench import client_limit, slo
from tunebench.client_limit import DEFAULT_TOLERANCE
from tunebench.deploy.base import Deployment
from tunebench.effective import ineffective_args, read_effective
from tunebench.errors import DeploymentError, LoadError
from tunebench.load.base import ClientResult, LoadDriver
from tunebench.metrics.catalogue import COLUMNS as METRIC_COLUMNS
from tunebench.metrics.scraper import MetricsScraper
from tunebench.metrics.summary import summarize_window
from tunebench.progress import Reporter
from tunebench.redact import redact_text, secret_values
from tunebench.spec.models import Metrics
from tunebench.spec.plan import LoadPoint, ServerConfig, format_value
from tunebench.store.run import RunStore


@dataclass
class ConfigOutcome:
    config_id: str
    status: str  # complete | failed
    points_done: int
    error: str | None = None


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

    def run(self, config: ServerConfig, points: list[LoadPoint]) -> ConfigOutcome:
        store = self.store
        store.update_config(
            config.config_id,
            label=config.label,
            model=config.model,
            args=config.args,
            command_args=config.command_args(),
            varied=config.varied,
            status="starting",
        )
        scraper: MetricsScraper | None = None
        driver = self.make_driver(config)
        done = 0
        try:
            # The load generator imports while the server starts: both take seconds.
            driver.prepare(points, store.path / "guidellm" / config.config_id)
            launched = time.monotonic()
            try:
                handle = self.deployment.start(config)
            except DeploymentError as exc:
                store.update_config(config.config_id, status="failed", error=str(exc),
                                    log_tail=redact_text(exc.log_tail),
                                    start_s=round(time.monotonic() - launched, 1))
                self.reporter.config_failed(config, str(exc), redact_text(exc.log_tail))
                return ConfigOutcome(config.config_id, "failed", 0, str(exc))
            self.reporter.server_ready(config, handle.started_s)
            effective = read_effective(
                handle.base_url, handle.metrics_url, self.deployment.log_text(),
                handle.headers, handle.verify_tls,
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
            if self.metrics.enabled:
                scraper = MetricsScraper(
                    handle.metrics_url, self.metrics.interval_s, handle.headers, handle.verify_tls
                ).start()

            def on_result(result: ClientResult) -> None:
                nonlocal done
                if scraper is not None:
                    # Counters need a scrape after the window; don't wait for the next tick.
                    latest = scraper.snapshots()[-1:]
                    if not latest or latest[0].time < result.end_time:
                        scraper.scrape_once()
                row = self._row(config, result, scraper, reasons)
                store.add_requests(config.config_id, result.point_id, result.samples)
                store.add_point(row)
                done += 1
                if scraper is not None:
                    self._write_timeseries(config, scraper)
                self.reporter.point_done(config, row)

            try:
                driver.run(handle, on_result, lambda p: self.reporter.point_starting(config, p))
            except LoadError as exc:
                store.update_config(config.config_id, status="failed", error=str(exc),
                                    points_done=done)
                self.reporter.config_failed(config, str(exc))
                return ConfigOutcome(config.config_id, "failed", done, str(exc))
            store.update_config(config.config_id, status="complete", points_done=done)
            return ConfigOutcome(config.config_id, "complete", done)
        finally:
            driver.close()
            if scraper is not None:
                scraper.stop()
                self._write_timeseries(config, scraper)
            self.deployment.stop()
            self._redact_log(secret_values(config.args))

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

    def _write_timeseries(self, config: ServerConfig, scraper: MetricsScraper) -> None:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["time", *METRIC_COLUMNS])
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


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"
