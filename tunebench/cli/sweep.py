"""`tunebench sweep SPEC`: run every server configuration x load point of a sweep file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from tunebench.errors import UsageError
from tunebench.spec.loading import read_yaml_mapping, validate_spec
from tunebench.spec.plan import build_plan


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    def sweep(
        spec_path: Optional[Path] = typer.Argument(None, metavar="[SPEC]", help="A sweep file, e.g. sweeps/cpu-demo.yaml (not with --resume)."),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Run directory root (overrides the spec's `output`, default reports/)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and a time estimate; start nothing."),
        report: bool = typer.Option(True, "--report/--no-report", help="Write report.html at the end."),
        keep: bool = typer.Option(False, "--keep", help="deployment kind helm: leave the last configuration's release installed."),
        resume: Optional[str] = typer.Option(None, "--resume", metavar="RUN", help="Finish an interrupted or failed run (id, unique part of it, or path): stored points are kept, the rest measured."),
    ) -> None:
        """Deploy each server configuration, drive GuideLLM load at each point, store the run.

        Examples:
          tunebench sweep sweeps/cpu-demo.yaml
          tunebench sweep sweeps/latency.yaml --dry-run
          tunebench sweep sweeps/openshift-latency.yaml --keep
          tunebench sweep --resume 20261121-101500-cpu-demo
        """
        from tunebench.progress import ConsoleReporter
        from tunebench.report.console import wide_console
        from tunebench.sweep import estimate_seconds, run_sweep

        out = wide_console()
        if resume is not None:
            if spec_path is not None or dry_run:
                raise UsageError("--resume RUN takes the sweep from the run; give no SPEC and no --dry-run")
            _resume(out, resume, output, report, keep)
            return
        if spec_path is None:
            raise UsageError("give a sweep file (tunebench sweep SPEC) or --resume RUN")
        spec_data = read_yaml_mapping(spec_path)
        spec = validate_spec(spec_data, spec_path)
        plan = build_plan(spec, spec_path)
        if dry_run:
            _print_plan(out, spec, plan, estimate_seconds(spec, plan))
            return
        root = output or Path(spec.output)
        reporter = ConsoleReporter()
        stores = []
        try:
            result = run_sweep(
                spec, spec_path, spec_data, plan, root, reporter,
                on_store=stores.append, keep=keep,
            )
        except KeyboardInterrupt:
            reporter.close()
            if stores:
                reporter.note(f"interrupted; finished points are in {stores[0].path}")
            raise
        reporter.close()
        _finish(out, result, report)


def _resume(out, ref: str, output: Optional[Path], report: bool, keep: bool) -> None:
    from tunebench.progress import ConsoleReporter
    from tunebench.resume import resume_sweep
    from tunebench.store.run import resolve_run

    path = resolve_run(ref, output or Path("reports"))
    reporter = ConsoleReporter()
    try:
        result = resume_sweep(path, path.parent, reporter, keep=keep)
    except KeyboardInterrupt:
        reporter.close()
        reporter.note(f"interrupted; finished points are in {path}")
        raise
    reporter.close()
    if result is None:
        out.print(f"run {path.name} is complete; nothing to resume")
        return
    _finish(out, result, report)


def _finish(out, result, report: bool) -> None:
    from tunebench.cli.report import write_report_keeping_the_run
    from tunebench.progress import describe_capacity
    from tunebench.report.console import summary_table

    store = result.store
    if report and store.rows:
        write_report_keeping_the_run(out, store.path)
    out.print(summary_table(store.rows, title=f"run {store.run_id}"))
    for config in store.manifest.get("configs", []):
        if config.get("capacity"):
            out.print(f"{config['config_id']} ({config.get('label', '')}): "
                      f"{describe_capacity(config['capacity'])}")
    for outcome in result.failed:
        out.print(f"[red]{outcome.config_id} failed:[/] {outcome.error}", markup=True)
    out.print(f"run: {store.path}  (status: {store.manifest['status']})")
    if result.failed:
        raise typer.Exit(1)


def _print_plan(out: Console, spec, plan, seconds: float) -> None:
    table = Table(title=f"plan for {spec.name}: {len(plan.configs)} configurations x {len(plan.points)} points")
    table.add_column("config")
    table.add_column("model")
    table.add_column("engine args")
    for config in plan.configs:
        table.add_row(f"{config.config_id}: {config.label}", config.model, " ".join(config.command_args()))
    out.print(table)
    points = Table(title="load points (each configuration)")
    for header in ("point", "kind", "target", "limit", "warmup"):
        points.add_column(header)
    for point in plan.points:
        limit = ", ".join(
            x for x in (
                f"{point.max_seconds:g} s" if point.max_seconds else "",
                f"{point.max_requests} requests" if point.max_requests else "",
            ) if x
        )
        target = "-" if point.target is None else f"{point.target:g}"
        points.add_row(point.point_id, point.kind, target, limit, "-" if point.warmup is None else f"{point.warmup:g}")
    out.print(points)
    out.print(f"deployment: {spec.deployment.kind}; estimated time: about {seconds / 60:.0f} min ({seconds:.0f} s)")
