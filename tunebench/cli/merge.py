"""`tunebench merge RUN RUN...`: join the parts of one sweep (each `sweep --only`) into a run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tunebench.cli.common import root_of, root_option, write_report_keeping_the_run


def register(app: typer.Typer) -> None:
    @app.command("merge")
    def merge(
        runs: list[str] = typer.Argument(
            ..., metavar="RUN...", help="The parts: run ids, unique parts of them, or paths."
        ),
        root: Optional[Path] = root_option("Where the merged run is stored (default reports/)."),
        report: bool = typer.Option(
            True, "--report/--no-report", help="Write report.html of the merged run."
        ),
    ) -> None:
        """Join the parts of one sweep, each measured with `tunebench sweep SPEC --only IDS`
        (on other machines, pods or the TaskRuns of a Tekton matrix), into one run laid out as
        if the sweep had run in one go. Configurations keep their ids and the host record of
        the machine that measured them.

        Examples:
          tunebench sweep sweeps/latency.yaml --only c1,c2 -o parts/a
          tunebench sweep sweeps/latency.yaml --only c3,c4 -o parts/b
          tunebench merge parts/a/* parts/b/* -o reports
        """
        from tunebench.cli.sweep import _write_cross_check
        from tunebench.quality.verdicts import write_table
        from tunebench.report.tables import wide_console
        from tunebench.store.merge import merge_runs
        from tunebench.store.run import RunStore, resolve_run

        out = wide_console()
        parts = [RunStore.open(resolve_run(r, root_of(root))) for r in runs]
        merged = merge_runs(parts, root_of(root))
        merged = RunStore.open(merged.path)
        write_table(merged)
        _write_cross_check(merged)
        if report and merged.rows:
            write_report_keeping_the_run(out, merged.path)
        configs = ", ".join(c.config_id for c in merged.manifest.configs)
        out.print(f"merged {len(parts)} runs: {configs}")
        if merged.manifest.hosts_differ:
            out.print("[yellow]warning:[/] the parts were measured on different hardware")
        out.print(f"run: {merged.path}  (status: {merged.manifest.status.value})")
        if merged.manifest.status.value != "complete":
            raise typer.Exit(1)
