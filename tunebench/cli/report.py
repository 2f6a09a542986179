"""`tunebench report RUN`: the self-contained HTML report of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tunebench.cli.common import root_of, root_option


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        run: str = typer.Argument(..., metavar="RUN", help="Run id, unique part of it, or path."),
        root: Optional[Path] = root_option(),
    ) -> None:
        """Write reports/<run>/report.html: summary, effective configs, validity, plots, versions.

        One file with every image inside; open it in any browser, offline.

        Example: tunebench report cpu-demo
        """
        from tunebench.report.html import write_report
        from tunebench.store.run import resolve_run

        typer.echo(f"report: {write_report(resolve_run(run, root_of(root)))}")
