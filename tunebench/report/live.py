"""The live console: progress of long work, one line per event and a spinner in between.

Implements the Reporter seam (seams/progress.py) on stderr, so stdout keeps only results.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.status import Status
from rich.text import Text

from tunebench.points import trust
from tunebench.points.offered import is_replay, rate_text, speed_text
from tunebench.redact import redact_text
from tunebench.report.formats import number
from tunebench.report.tables import wide_console
from tunebench.report.text import describe_capacity


def load_target(point) -> str:
    """The target in a point's progress line: " target 4", or a replay's speed of its
    trace, " at 2x trace" (not req/s)."""
    if point.target is None:
        return ""
    if is_replay(point.kind):
        return f" at {speed_text(point.target)}"
    return f" target {point.target:g}"


def is_probe(row) -> bool:
    """A capacity search's probe (capacity-3), whose rate the search chose."""
    return str(row.get("point_id") or "").startswith("capacity-")


def probe_verdict(row) -> str:
    """What a capacity probe told the search: "SLO met", "SLO missed (TTFT p90 85 > 60)",
    or why it does not count as the server's (client-limited, invalid, not judged)."""
    if not trust.is_valid(row):
        return "no server capacity proven at this rate"
    if str(row.get("slo_met")).lower() in ("none", "", "nan"):
        return "SLO not judged"
    met = trust.flag(row.get("slo_met"))
    verdict = "SLO met" if met else "SLO missed"
    violations = str(row.get("slo_violations") or "")
    if not met and violations and violations != "nan":
        verdict += f" ({violations.split('; ')[0]})"
    if trust.flag(row.get("client_limited")):
        verdict += "; client-limited: no server capacity proven here"
    thin = str(row.get("thin_percentiles") or "")
    if thin and thin != "nan":  # a slow probe's window held fewer requests than its p90 needs
        verdict += f"; read from few requests ({thin})"
    return verdict


def load_limit(point) -> str:
    """What ends the point: its seconds or requests; a replay without either plays its
    whole slice."""
    if point.max_seconds:
        return f"{point.max_seconds:g} s"
    if point.max_requests or not is_replay(point.kind):
        return f"{point.max_requests} requests"
    return "the whole slice"


def _clock(seconds: float) -> str:
    """3 s, 4 min 10 s, 1 h 05 min."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class ConsoleReporter:
    """One line per event, a live spinner while a server starts or a point runs."""

    def __init__(self, console: Console | None = None):
        # piped into a file or a CI log: one event a line (rich cut them at 80, mid-field)
        self.console = console or wide_console(stderr=True, soft_wrap=True)
        self._status: Status | None = None
        self._point_started = 0.0
        self._first: tuple[float, int] | None = None  # when the first configuration started

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

    def config_starting(self, config, index, total, repeat=None):
        self._stop_spin()
        again = f" (repeat {repeat[0]} of {repeat[1]})" if repeat else ""
        self.console.print(
            f"[bold]\\[{index}/{total}] {config.config_id}{again}: {config.label}[/]"
            + self._timing(index, total)
        )
        self._spin("starting server …")

    def _timing(self, index: int, total: int) -> str:
        """Elapsed time since the first configuration started, and the time left at the
        pace of the configurations (or trials) done so far."""
        now = time.monotonic()
        if self._first is None or index <= self._first[1]:
            self._first = (now, index)
            return ""
        began, first_index = self._first
        elapsed = now - began
        done = index - first_index
        left = elapsed / done * (total - index + 1)
        return f"  [dim]({_clock(elapsed)} elapsed, about {_clock(left)} left)[/]"

    def server_status(self, message):
        self._spin(message)

    def server_ready(self, config, seconds):
        self._stop_spin()
        took = f" in {seconds:.0f} s" if seconds is not None else ""
        self.console.print(f"  server ready{took}")

    def point_starting(self, config, point):
        self._point_started = time.monotonic()
        self._spin(f"  load {point.point_id}{load_target(point)} ({load_limit(point)}) …")

    def point_done(self, config, row):
        self._stop_spin()
        flag = "" if str(row.get("valid")) in ("True", "true", "1") else " [yellow](invalid)[/]"
        # a replay's speed beside its id: a capacity probe's id (capacity-3) names none
        speed = f" {speed_text(row.get('target'))}" if is_replay(row.get("load_kind")) else ""
        probe = is_probe(row)
        if probe and not speed:
            speed = f" target {rate_text(row.get('target'))}"
        line = Text.from_markup(
            f"  {row['point_id']:<16}{speed} achieved {number(row.get('achieved_rps'), 2)} req/s, "
            f"conc {number(row.get('achieved_concurrency'))}, "
            f"TTFT p50 {number(row.get('ttft_p50_ms'))} ms, "
            f"{number(row.get('output_tok_s'), 0)} tok/s, "
            # whole requests: a recorded run interpolates expected counts (26.33)
            f"{number(row.get('requests_ok'), 0)} ok / {number(row.get('requests_failed'), 0)} "
            f"failed{flag}"
        )
        if probe:
            line.append(f"; {probe_verdict(row)}")
        self.console.print(line)

    def capacity_found(self, config, summary):
        self._stop_spin()
        self.console.print(f"  [bold]{describe_capacity(summary)}[/]")

    def trial_done(self, trial, note):
        self._stop_spin()
        state = trial.state.name
        text = Text(f"  trial {trial.number}: ")
        if state == "COMPLETE":
            text.append(", ".join(f"{v:.4g}" for v in trial.values), style="green")
        elif state == "FAIL":
            text.append("FAIL ", style="red")
            text.append(redact_text(str(trial.user_attrs.get("fail_reason", ""))))
        else:
            text.append(state, style="yellow")
        if note:
            text.append(f"  ({redact_text(note)})", style="dim")
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
