"""The /metrics time series of a configuration as CSV (metrics/<config>.csv of a run)."""

from __future__ import annotations

import csv
import io

from tunebench.metrics.catalogue import COLUMNS
from tunebench.metrics.parse import Snapshot


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def series_csv(snapshots: list[Snapshot], earlier_rows: str = "") -> str:
    """Header, `earlier_rows` (an earlier attempt's rows, without header), then `snapshots`."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["time", *COLUMNS])
    buffer.write(earlier_rows)
    for snap in snapshots:
        writer.writerow([f"{snap.time:.3f}", *(_num(snap.values.get(c)) for c in COLUMNS)])
    return buffer.getvalue()


def rows_of(text: str) -> str:
    """The rows of a series file without its header (to carry over into a new attempt)."""
    return "".join(text.splitlines(keepends=True)[1:])
