"""`tunebench tune SPEC`: search engine args with Optuna, one deployment per trial."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tunebench.errors import UsageError
from tunebench.spec.loading import read_yaml_mapping, validate_spec
from tunebench.spec.plan import build_plan


def register(app: typer.Typer) -> None:
    @app.command("tune")
    def tune(
        spec_path: Optional[Path] = typer.Argument(None, metavar="SPEC", help="A sweep file with a `tune` section, e.g. sweeps/tune-cpu.yaml."),
        resume: Optional[str] = typer.Option(None, "--resume", help="Continue the study of this run (path, id or unique part of it)."),
        trials: Optional[int] = typer.Option(None, "--trials", min=1, help="Deployments in total, baseline included (overrides tune.trials)."),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Run directory root (overrides the spec's `output`)."),
        helm_dir: Path = typer.Option(Path("helm-values"), "--helm-dir", help="Where helm-values/<name>.yaml is written."),
        report: bool = typer.Option(True, "--report/--no-report", help="Write report.html at the end."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the search space and a time estimate; start nothing."),
    ) -> None:
        """Find the engine args that serve the most traffic within the SLO (or the most tok/s).

        The first trial is the baseline (server.args only: vLLM's defaults for every tuned
        arg). The study is stored in <run>/study.db; open it with
        `optuna-dashboard sqlite:///<run>/study.db`.

        Examples:
          tunebench tune sweeps/tune-cpu.yaml
          tunebench tune sweeps/tune-cpu.yaml --trials 20
          tunebench tune --resume tune-cpu --trials 12
          tunebench tune sweeps/tune-latency.yaml --dry-run
        """
        from tunebench.cli.report import write_report_keeping_the_run
        from tunebench.progress import ConsoleReporter
        from tunebench.report.console import wide_console
        from tunebench.store.run import RunStore, resolve_run
        from tunebench.sweep import resolve_deployment
        from tunebench.tune.session import run_tune

        out = wide_console()
        store = None
        if resume:
            root = output or Path("reports")
            store = RunStore.open(resolve_run(resume, root))
            if "tune" not in store.manifest:
                raise UsageError(f"{store.path}: not a tune run (no study); start one with tunebench tune SPEC")
            spec_path = spec_path or Path(store.manifest["spec_path"])
            spec_data = store.manifest["spec"]
        elif spec_path is None:
            raise UsageError("give a SPEC, or --resume RUN to continue a study")
        else:
            spec_data = read_yaml_mapping(spec_path)
        spec = validate_spec(spec_data, spec_path)
        if spec.tune is None:
            raise UsageError(f"{spec_path}: no `tune` section; add tune: {{space: {{max-num-seqs: "
                             "{low: 8, high: 256, log: true}}}} (see README, Tune)")
        plan = build_plan(spec, spec_path)
        if dry_run:
            _print_space(out, spec, plan, trials or spec.tune.trials)
            return
        root = output or Path(spec.output)
        resolve_deployment(spec, spec_path, root)  # a bad replay run fails before any work
        reporter = ConsoleReporter()
        stores = []
        try:
            result = run_tune(spec, spec_path, spec_data, plan, root, helm_dir, reporter,
                              resume=store, trials=trials, on_store=stores.append)
        except KeyboardInterrupt:
            reporter.close()
            if stores:
                reporter.note(f"interrupted; continue with: tunebench tune --resume {stores[0].path}")
            raise
        reporter.close()
        if report and result.store.rows:
            write_report_keeping_the_run(out, result.store.path)
        print_summary(out, result.summary, result.exports)
        out.print(f"run: {result.store.path}  (study: {result.store.path / 'study.db'})")
        if result.summary["best"] is None:
            raise typer.Exit(1)


def print_summary(out, summary: dict, exports: dict) -> None:
    from rich.table import Table

    from tunebench.spec.plan import format_value

    names = summary["objective_names"]
    table = Table(title=f"trials ({summary['deployments']} deployments, {summary['failed']} failed, "
                        f"{summary['pruned']} pruned)")
    for column in ("trial", "state", "params", *names, "note"):
        table.add_column(column)
    repeats = [r for r in summary["trials"] if r["note"].startswith("same args as trial")]
    for row in summary["trials"]:
        if row in repeats:
            continue
        params = ", ".join(f"{k}={format_value(v)}" for k, v in row["params"].items())
        values = row["values"] or [None] * len(names)
        table.add_row(str(row["trial"]), row["state"], "baseline" if row["baseline"] else params,
                      *("-" if v is None else f"{v:.4g}" for v in values), row["note"][:70])
    out.print(table)
    if repeats:
        out.print(f"[dim]{len(repeats)} proposal(s) repeated measured args and were not deployed again[/]")
    best = summary["best"]
    if best is None:
        out.print("[red]no trial completed[/]")
        return
    value = ", ".join(f"{n} {v:.4g}" for n, v in zip(names, best["values"]))
    out.print(f"[bold]best: trial {best['trial']}[/] ({value})")
    if summary.get("improvement_pct") is not None:
        base = summary["baseline"]["values"][0]
        out.print(f"  vs baseline (vLLM defaults, {base:.4g}): {summary['improvement_pct']:+.1f}%")
    if summary.get("pareto"):
        out.print("  Pareto front: " + "; ".join(
            f"trial {p['trial']} ({', '.join(f'{v:.4g}' for v in p['values'])})" for p in summary["pareto"]))
    if summary["importances"]:
        out.print("  importance: " + ", ".join(f"{k} {v:.2f}" for k, v in summary["importances"].items()))
    if exports.get("helm_values"):
        out.print(f"  helm values: {exports['helm_values']}")
    if exports.get("serve_command"):
        out.print(f"  vllm serve: {exports['serve_command']}")


def _print_space(out, spec, plan, trials: int) -> None:
    from rich.table import Table

    from tunebench.sweep import estimate_seconds

    table = Table(title=f"tune {spec.name}: objective {spec.tune.objective}, {trials} deployments "
                        f"(baseline: {' '.join(plan.configs[0].command_args()) or 'vLLM defaults'})")
    for column in ("param", "kind", "range / choices", "when"):
        table.add_column(column)
    for name, param in spec.tune.space.items():
        if param.kind == "categorical":
            values = ", ".join("default" if c is None else str(c) for c in param.choices)
        else:
            values = f"{param.low:g} .. {param.high:g}" + (" (log)" if param.log else "") + (
                f" step {param.step:g}" if param.step else "")
        when = ", ".join(f"{k}={v}" for k, v in (param.when or {}).items())
        table.add_row(name, param.kind, values, when or "-")
    out.print(table)
    seconds = estimate_seconds(spec, plan) * trials
    out.print(f"deployment: {spec.deployment.kind}; estimated time: about {seconds / 60:.0f} min "
              f"({seconds:.0f} s) for {trials} deployments")
