"""Writing files so that a crash leaves the old or the new content, never half of one."""

from __future__ import annotations

import csv
import io
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, fsync it, rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # per process and thread: configurations measured in parallel write from several threads
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def csv_value(value: Any) -> Any:
    """A cell as points.csv stores it: floats to 15 significant digits, containers as JSON."""
    if isinstance(value, float):
        return f"{value:.15g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def csv_text(columns: list[str], rows: Iterable[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_value(v) for k, v in row.items()})
    return buffer.getvalue()


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file as text; [] when there is no file."""
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
