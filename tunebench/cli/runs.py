"""`tunebench runs` and `tunebench show RUN`."""

from __future__ import annotations

import json
from enum import Enum
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from tunebench.errors import TunebenchError
from tunebench.store.run import RunStore, list_runs, resolve_run

class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def _typed(value: str):
    """CSV text back to JSON types: numbers, booleans, empty -> null."""
    if value == "":
        return None
    if value in ("True", "False"):
        return value == "True"
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number


def register(app: typer.Typer) -> None:
    @app.command("runs")
    def runs(
        root: Path = typer.Option(Path("reports"), "--root", help="Where runs are stored."),
    ) -> None:
        """List stored runs, oldest first.

        Example: tunebench runs --root reports
        """
        table = Table(header_style="bold")
        for header in ("run", "status", "configs", "points", "started"):
            table.add_column(header)
        for path in list_runs(root):
            try:
                store = RunStore.open(path)
            except TunebenchError as exc:
                table.add_row(path.name, f"unreadable: {exc}", "", "", "")
                continue
            m = store.manifest
            table.add_row(path.name, m.get("status", "?"), str(len(m.get("configs", []))),
                          str(len(store.rows)), str(m.get("started_at", "")))
        Console(highlight=False).print(table)

    @app.command("show")
    def show(
        run: str = typer.Argument(..., metavar="RUN", help="Run id, unique part of it, or path."),
        format: Format = typer.Option(Format.table, "--format", "-f", help="table | json | csv"),
        root: Path = typer.Option(Path("reports"), "--root", help="Where runs are stored."),
    ) -> None:
        """Print a run's points.

        Examples:
          tunebench show 20261121-1530-cpu-demo
          tunebench show cpu-demo --format json | jq '.[].ttft_p50_ms'
        """
        from tunebench.report.console import summary_table, wide_console

        store = RunStore.open(resolve_run(run, root))
        if format is Format.json:
            rows = [{k: _typed(v) for k, v in row.items()} for row in store.rows]
            typer.echo(json.dumps(rows, indent=2))
        elif format is Format.csv:
            sys.stdout.write((store.path / "points.csv").read_text() if store.rows else "")
        else:
            m = store.manifest
            wide_console().print(summary_table(store.rows, title=f"{store.run_id} ({m.get('status')})"))
            for entry in m.get("configs", []):
                if entry.get("error"):
                    Console(highlight=False).print(f"{entry['config_id']} failed: {entry['error']}", markup=False)
