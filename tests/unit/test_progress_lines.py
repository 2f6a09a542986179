"""Progress written to a file or a CI log keeps one event a line: rich's default console
cuts lines at 80 columns, mid-field, when standard error is not a terminal."""

from __future__ import annotations

from tunebench.report.live import ConsoleReporter


def test_a_long_progress_line_is_one_line_in_a_file(capsys):
    row = {
        "point_id": "poisson-3",
        "load_kind": "poisson",
        "target": 3,
        "achieved_rps": 3.5,
        "achieved_concurrency": 1.0,
        "ttft_p50_ms": 70.6,
        "output_tok_s": 112,
        "requests_ok": 35,
        "requests_failed": 0,
        "valid": "True",
        "unverified_reason": "machine speed changed: its requests ran 27% slower inside "
        "t=0-4 s of the window (5.2 noise units, 49 requests in 8 bins)",
    }
    reporter = ConsoleReporter()  # standard error is captured: not a terminal
    reporter.point_done(None, row)
    note = "unverified (no read-back here): " + ", ".join(f"arg-{i}" for i in range(60))
    reporter.note(note)
    reporter.close()
    lines = capsys.readouterr().err.splitlines()
    point = [line for line in lines if "poisson-3" in line]
    assert len(point) == 1 and "35 ok / 0 failed" in point[0], lines
    assert note in lines, lines  # longer than 200 columns, and still whole
