"""`tunebench runs` and `tunebench show RUN`."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from tunebench.cli.common import existing_root, root_of, root_option


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
    if number.is_integer() and "." not in value and "e" not in value.lower():
        return int(number)
    return number


def register(app: typer.Typer) -> None:
    @app.command("runs")
    def runs(root: Optional[Path] = root_option()) -> None:
        """List stored runs, oldest first.

        Example: tunebench runs --root reports
        """
        from tunebench.errors import TunebenchError
        from tunebench.report.tables import runs_table, wide_console
        from tunebench.store.run import RunStore, list_runs

        entries: list = []
        for path in list_runs(existing_root(root)):
            try:
                store = RunStore.open(path)
            except TunebenchError as exc:
                entries.append((path.name, exc))
                continue
            entries.append((path.name, (store.manifest, len(store.rows))))
        wide_console().print(runs_table(entries))

    @app.command("show")
    def show(
        run: str = typer.Argument(..., metavar="RUN", help="Run id, unique part of it, or path."),
        format: Format = typer.Option(
            Format.table, "--format", "-f", case_sensitive=False, help="table | json | csv"
        ),
        root: Optional[Path] = root_option(),
    ) -> None:
        """Print a run's points.

        Examples:
          tunebench show 20261121-1530-cpu-demo
          tunebench show cpu-demo --format json | jq '.[].ttft_p50_ms'
        """
        from tunebench.analysis.cross_check import run_cross_check
        from tunebench.analysis.quality import quality_table
        from tunebench.report.points_table import points_table
        from tunebench.report.quality_tables import quality_view
        from tunebench.report.replayed_points import stored_replay_view
        from tunebench.report.tables import (
            arg_check_lines,
            capacity_lines,
            cross_check_view,
            failure_lines,
            sentinel_notes,
            wide_console,
        )
        from tunebench.store.run import RunStore, resolve_run

        store = RunStore.open(resolve_run(run, root_of(root)))
        if format is Format.json:
            rows = [{k: _typed(v) for k, v in row.items()} for row in store.rows]
            typer.echo(json.dumps(rows, indent=2))
            return
        if format is Format.csv:
            sys.stdout.write(store.layout.points.read_text() if store.rows else "")
            return
        manifest = store.manifest
        console = wide_console()
        width = console.width
        console.print(
            points_table(
                store.rows,
                {c.config_id: c.varied for c in manifest.configs},
                title=f"{store.run_id} ({manifest.status.value})",
                width=width,
            )
        )
        replayed = stored_replay_view(store, width)
        if replayed is not None:
            console.print(replayed)
        for line in capacity_lines(manifest.configs):
            console.print(line)
        if store.rows and manifest.kind.value != "batch":
            from rich.text import Text

            from tunebench.analysis.best import best_config, headline

            console.print(Text(f"best: {headline(best_config(store.layout.root))}"))
        parallel = manifest.parallel or {}
        if parallel.get("note"):
            console.print(f"[yellow]fair comparison:[/] {parallel['note']}", highlight=False)
        for text in failure_lines(manifest.configs):
            console.print(text)
        for text in arg_check_lines(manifest.configs):
            console.print(text)
        for note in sentinel_notes(manifest.configs):
            console.print(f"[yellow]{note}[/]", highlight=False)
        lm_eval = next(
            (c.quality["lm_eval"] for c in manifest.configs if (c.quality or {}).get("lm_eval")),
            None,
        )
        quality = quality_view(quality_table(store.layout.root), lm_eval, width)
        if quality is not None:
            console.print(quality)
        crossed = cross_check_view(run_cross_check(store.layout.root))
        if crossed is not None:
            console.print(crossed)
