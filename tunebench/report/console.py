"""Console tables of a run's points."""

from __future__ import annotations

from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

SUMMARY_COLUMNS = (
    ("config", "config_label", None),
    ("point", "point_id", None),
    ("target", "target", 2),
    ("achieved req/s", "achieved_rps", 2),
    ("conc", "achieved_concurrency", 1),
    ("TTFT p50 ms", "ttft_p50_ms", 1),
    ("TTFT p95 ms", "ttft_p95_ms", 1),
    ("ITL p50 ms", "itl_p50_ms", 2),
    ("ITL p95 ms", "itl_p95_ms", 2),
    ("out tok/s", "output_tok_s", 0),
    ("KV max %", "kv_usage_max", 2),
    ("wait max", "waiting_max", 0),
    ("q depth", "queue_depth_mean", 2),
    ("queue mean s", "queue_time_mean_s", 3),
    ("ok/fail", None, None),
    ("valid", "valid", None),
)


def format_cell(value: Any, digits: int | None) -> str:
    """A table cell: '-' for missing (None, '', NaN), numbers to `digits` decimals."""
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return "-"
    if digits is None:
        return str(value)
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def summary_table(rows: Iterable[dict[str, Any]], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold")
    for header, _, digits in SUMMARY_COLUMNS:
        table.add_column(header, justify="left" if digits is None else "right")
    for row in rows:
        cells = []
        for _, key, digits in SUMMARY_COLUMNS:
            if key is None:
                cells.append(f"{row.get('requests_ok', '-')}/{row.get('requests_failed', '-')}")
            elif key == "valid":
                ok = str(row.get("valid")).lower() in ("true", "1")
                text = "yes" if ok else f"no: {row.get('invalid_reason', '')}"
                if str(row.get("client_limited")).lower() in ("true", "1"):
                    text += " (client-limited)"
                cells.append(text)
            elif key == "kv_usage_max" and row.get(key) not in (None, ""):
                cells.append(format_cell(float(row[key]) * 100, digits))
            else:
                cells.append(format_cell(row.get(key), digits))
        table.add_row(*cells)
    return table


def wide_console(stderr: bool = False) -> Console:
    """A console that does not squeeze tables to 80 columns when output is piped."""
    console = Console(highlight=False, stderr=stderr)
    return console if console.is_terminal else Console(highlight=False, stderr=stderr, width=200)
