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
            ..., metavar="RUN", help="The parts: run ids, unique parts of them, or paths."
        ),
        root: Optional[Path] = root_option("Where the merged run is stored (default reports/)."),
        report: bool = typer.Option(
            True, "--report/--no-report", help="Write report.html of the merged run."
        ),
    ) -> None:
        """Join the parts of one split sweep into one run, as if it had run in one go.

        Each part was measured with `tunebench sweep SPEC --only IDS` (on other machines,
        pods or the TaskRuns of a Tekton matrix). Configurations keep their ids and the host
        record of the machine that measured them.

        Examples:
          tunebench sweep sweeps/latency.yaml --only c1,c2 -o parts/a
          tunebench sweep sweeps/latency.yaml --only c3,c4 -o parts/b
          tunebench merge parts/a/* parts/b/* -o reports
        """
        from tunebench.analysis.cross_check import write_cross_check
        from tunebench.quality.verdicts import write_table
        from tunebench.report.tables import wide_console
        from tunebench.store.merge import merge_runs
        from tunebench.store.run import RunStore, resolve_run

        out = wide_console()
        parts = [RunStore.open(resolve_run(r, root_of(root))) for r in runs]
        merged = merge_runs(parts, root_of(root), planned=_planned(out, parts[0]))
        merged = RunStore.open(merged.path)
        write_table(merged)
        write_cross_check(merged)
        if report and merged.rows:
            write_report_keeping_the_run(out, merged.path)
        configs = ", ".join(c.config_id for c in merged.manifest.configs)
        out.print(f"merged {len(parts)} runs: {configs}")
        if merged.manifest.hosts_differ:
            out.print("[yellow]warning:[/] the parts were measured on different hardware")
        out.print(f"run: {merged.path}  (status: {merged.manifest.status.value})")
        for entry in merged.manifest.configs:
            if entry.error and entry.error.startswith("no part measured it"):
                out.print(f"[red]{entry.config_id}:[/] {entry.error}", highlight=False)
        if merged.manifest.status.value != "complete":
            raise typer.Exit(1)


def _planned(out, part) -> list[str] | None:
    """The configuration ids of the parts' spec, planned again, so a configuration that no
    part holds is not silently left out (None, with a warning, when it cannot be planned)."""
    from tunebench import assemble
    from tunebench.errors import TunebenchError
    from tunebench.spec.loading import validate_spec
    from tunebench.store.manifest import spec_of

    try:
        spec_data, spec_path = spec_of(part.manifest)
        spec = validate_spec(spec_data, spec_path)
        return [c.config_id for c in assemble.plan(spec, spec_path).configs]
    except (TunebenchError, OSError, ValueError) as exc:
        out.print(
            f"[yellow]warning:[/] the spec could not be planned again ({exc}); a "
            "configuration no part holds cannot be named"
        )
        return None
