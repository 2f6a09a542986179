"""`tunebench report RUN`: the self-contained HTML report of a run."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        run: str = typer.Argument(..., metavar="RUN", help="Run id, unique part of it, or path."),
        root: Path = typer.Option(Path("reports"), "--root", help="Where runs are stored."),
    ) -> None:
        """Write reports/<run>/report.html: summary, effective configs, validity, plots, versions.

        One file with every image inside; open it in any browser, offline.

        Example: tunebench report cpu-demo
        """
        from tunebench.report.html import write_report
        from tunebench.store.run import resolve_run

        typer.echo(f"report: {write_report(resolve_run(run, root))}")


def write_report_keeping_the_run(out, run_path: Path) -> None:
    """Write report.html after a sweep or tune; a failure there never loses the run."""
    try:
        from tunebench.report.html import write_report

        out.print(f"report: {write_report(run_path)}")
    except Exception as exc:  # noqa: BLE001 - the measured run must not be lost to a plot
        out.print(f"[yellow]report not written ({type(exc).__name__}: {exc}); "
                  f"retry with: tunebench report {run_path}[/]")
