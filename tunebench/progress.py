"""Progress of long work: a Reporter seam with a rich console implementation and a silent one."""

from __future__ import annotations

import time
from typing import Any, Protocol

from rich.console import Console
from rich.status import Status
from rich.text import Text

from tunebench.redact import redact_text
from tunebench.spec.plan import LoadPoint, ServerConfig


class Reporter(Protocol):
    def config_starting(self, config: ServerConfig, index: int, total: int) -> None: ...
    def server_status(self, message: str) -> None: ...
    def server_ready(self, config: ServerConfig, seconds: float | None) -> None: ...
    def point_starting(self, config: ServerConfig, point: LoadPoint) -> None: ...
    def point_done(self, config: ServerConfig, row: dict[str, Any]) -> None: ...
    def config_failed(self, config: ServerConfig, message: str, log_tail: str = "") -> None: ...
    def capacity_found(self, config: ServerConfig, summary: dict[str, Any]) -> None: ...
    def trial_done(self, trial: Any, note: str) -> None: ...
    def note(self, message: str) -> None: ...


class SilentReporter:
    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value in (None, "") else f"{float(value):.{digits}f}"


class ConsoleReporter:
    """One line per event, a live spinner while a server starts or a point runs."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True, highlight=False)
        self._status: Status | None = None
        self._point_started = 0.0

    def _spin(self, message: str) -> None:
        if self._status is None:
            self._status = self.console.status(message)
            self._status.start()
        else:
            self._status.update(message)

    def _stop_spin(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def config_starting(self, config, index, total):
        self._stop_spin()
        self.console.print(f"[bold]\\[{index}/{total}] {config.config_id}: {config.label}[/]")
        self._spin("starting server …")

    def server_status(self, message):
        self._spin(message)

    def server_ready(self, config, seconds):
        self._stop_spin()
        took = f" in {seconds:.0f} s" if seconds is not None else ""
        self.console.print(f"  server ready{took}")

    def point_starting(self, config, point):
        self._point_started = time.monotonic()
        target = "" if point.target is None else f" target {point.target:g}"
        limit = f"{point.max_seconds:g} s" if point.max_seconds else f"{point.max_requests} requests"
        self._spin(f"  load {point.point_id}{target} ({limit}) …")

    def point_done(self, config, row):
        self._stop_spin()
        flag = "" if str(row.get("valid")) in ("True", "true", "1") else " [yellow](invalid)[/]"
        self.console.print(
            f"  {row['point_id']:<16} achieved {_fmt(row.get('achieved_rps'), 2)} req/s, "
            f"conc {_fmt(row.get('achieved_concurrency'))}, "
            f"TTFT p50 {_fmt(row.get('ttft_p50_ms'))} ms, "
            f"{_fmt(row.get('output_tok_s'), 0)} tok/s, "
            f"{row.get('requests_ok')} ok / {row.get('requests_failed')} failed{flag}"
        )

    def capacity_found(self, config, summary):
        self._stop_spin()
        self.console.print(f"  [bold]{describe_capacity(summary)}[/]")

    def trial_done(self, trial, note):
        self._stop_spin()
        state = trial.state.name
        if state == "COMPLETE":
            values = ", ".join(f"{v:.4g}" for v in trial.values)
            text = f"  trial {trial.number}: [green]{values}[/]"
        elif state == "FAIL":
            text = f"  trial {trial.number}: [red]FAIL[/] {trial.user_attrs.get('fail_reason', '')}"
        else:
            text = f"  trial {trial.number}: [yellow]{state}[/]"
        if note:
            text += f"  [dim]({note})[/]"
        self.console.print(text)

    def config_failed(self, config, message, log_tail=""):
        self._stop_spin()
        self.console.print(Text("  failed: ", style="red") + Text(redact_text(message)))
        if log_tail:
            self.console.print("  [dim]server log tail:[/]")
            for line in redact_text(log_tail).splitlines()[-8:]:
                self.console.print(Text(f"    {line[:200]}", style="dim"))

    def note(self, message):
        self._stop_spin()
        self.console.print(redact_text(message))

    def close(self):
        self._stop_spin()


def describe_capacity(summary: dict[str, Any]) -> str:
    """One line: the capacity a search found, and how sure it is."""
    probes = f"{summary['probes']} probe{'s' if summary['probes'] != 1 else ''}"
    rate, upper = summary.get("rate"), summary.get("upper")
    if rate is None and summary.get("client_bound"):
        return (f"capacity: unknown: the client could not drive {summary['probe_rates'][-1]:.3g} req/s "
                f"and no lower rate was proven ({probes}); see client_limited_reason")
    if rate is None:
        return f"capacity: no rate met the SLO ({probes}, lowest tried {min(summary['probe_rates']):.3g} req/s)"
    text = f"capacity: {rate:.3g} req/s at SLO"
    if summary.get("client_bound"):
        return f"{text} or more: the client could not drive more ({probes})"
    if summary.get("capped"):
        return f"{text} or more: max_rate reached ({probes})"
    if upper is not None:
        text += f" (missed at {upper:.3g})"
    if not summary.get("converged"):
        text += ", not converged: raise max_probes"
    return f"{text}, {probes}"
