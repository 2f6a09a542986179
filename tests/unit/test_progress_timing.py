"""Long work says how long it has run and how long it has left: each configuration's (or
trial's) line after the first carries the elapsed time and the time left at the pace so far
(report/live.py)."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from tunebench.report import live
from tunebench.report.live import ConsoleReporter


def test_each_configuration_after_the_first_says_elapsed_and_left(monkeypatch):
    clock = iter([1000.0, 1090.0, 1180.0])
    monkeypatch.setattr(live.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, width=200))
    config = SimpleNamespace(config_id="c1", label="max-num-seqs=2")
    for index in (1, 2, 3):
        reporter.config_starting(config, index, 4)
        reporter.close()
    lines = [line for line in out.getvalue().splitlines() if line.startswith("[")]
    assert lines[0] == "[1/4] c1: max-num-seqs=2"
    # 90 s for one configuration: three left
    assert lines[1] == "[2/4] c1: max-num-seqs=2  (1 min 30 s elapsed, about 4 min 30 s left)"
    assert lines[2] == "[3/4] c1: max-num-seqs=2  (3 min 00 s elapsed, about 3 min 00 s left)"


def test_a_resume_starts_its_pace_from_where_it_starts(monkeypatch):
    clock = iter([0.0, 600.0])
    monkeypatch.setattr(live.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, width=200))
    config = SimpleNamespace(config_id="c5", label="x")
    reporter.config_starting(config, 5, 6)
    reporter.config_starting(config, 6, 6)
    reporter.close()
    assert "(10 min 00 s elapsed, about 10 min 00 s left)" in out.getvalue()


def test_clock_reads_as_a_person_would():
    assert live._clock(3) == "3 s"
    assert live._clock(250) == "4 min 10 s"
    assert live._clock(3900) == "1 h 05 min"
