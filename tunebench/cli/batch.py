"""`tunebench batch SPEC`: push a dataset through the model offline, per engine configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def load_batch_spec(path: Path):
    """The validated BatchSpec of `path` and its mapping as written (see tunebench.batch.spec)."""
    from tunebench.batch.spec import load_batch_spec as load

    return load(path)


def register(app: typer.Typer) -> None:
    @app.command("batch")
    def batch(
        spec_path: Path = typer.Argument(..., metavar="SPEC", help="A batch file, e.g. sweeps/batch-recipes.yaml."),
        shards: Optional[int] = typer.Option(None, "--shards", min=1, help="Data-parallel worker processes (overrides the spec)."),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Run directory root (overrides the spec's `output`)."),
        slurm: Optional[Path] = typer.Option(None, "--slurm", help="Write an sbatch script to this path instead of running."),
        report: bool = typer.Option(True, "--report/--no-report", help="Write report.html at the end."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Check the spec, dataset and prompts and print the plan; start nothing."),
    ) -> None:
        """Run the dataset through each engine configuration; phases and tok/s per configuration.

        Examples:
          tunebench batch sweeps/batch-recipes.yaml
          tunebench batch sweeps/batch-recipes.yaml --dry-run
          tunebench batch sweeps/batch-recipes.yaml --shards 2
          tunebench batch sweeps/batch-recipes.yaml --slurm job.sbatch
        """
        from tunebench.batch.run import run_batch
        from tunebench.cli.report import write_report_keeping_the_run
        from tunebench.progress import ConsoleReporter
        from tunebench.report.console import wide_console

        out = wide_console()
        spec, data = load_batch_spec(spec_path)
        if dry_run:
            _print_plan(out, spec, spec_path, shards or spec.shards)
            return
        if slurm is not None:
            from tunebench.batch.slurm import write_sbatch

            out.print(f"sbatch script: {write_sbatch(spec, spec_path, slurm, shards or spec.shards)}")
            return
        reporter = ConsoleReporter()
        stores = []
        try:
            store, outcomes = run_batch(spec, spec_path, data, output or Path(spec.output), reporter,
                                        shards=shards, on_store=stores.append)
        except KeyboardInterrupt:
            reporter.close()
            if stores:
                reporter.note(f"interrupted; finished configurations are in {stores[0].path}")
            raise
        reporter.close()
        if report and store.rows:
            write_report_keeping_the_run(out, store.path)
        print_batch_summary(out, store)
        failed = [o for o in outcomes if o.status != "complete"]
        for outcome in failed:
            out.print(f"[red]{outcome.config_id} failed:[/] {outcome.error}")
        out.print(f"run: {store.path}  (status: {store.manifest['status']})")
        if failed:
            raise typer.Exit(1)


def _print_plan(out, spec, spec_path: Path, shards: int) -> None:
    """What `tunebench batch` would run: every check it makes before a worker starts."""
    from rich.table import Table

    from tunebench.batch.run import json_schema_of, plan_configs, render_prompts

    prompts = render_prompts(spec, spec_path)
    json_schema_of(spec, spec_path)
    configs = plan_configs(spec, spec_path)
    table = Table(title=f"plan for {spec.name}: {len(configs)} configurations x {len(prompts)} "
                        f"records, engine {spec.engine}, {shards} shard(s)")
    for column in ("config", "model", "engine args"):
        table.add_column(column)
    for config in configs:
        table.add_row(f"{config.config_id}: {config.label}", config.model,
                      " ".join(config.command_args()))
    out.print(table)
    longest = max(len(p["prompt"]) for p in prompts)
    out.print(f"prompts: {len(prompts)} rendered (longest {longest} characters); "
              f"max_tokens {spec.sampling.max_tokens}; dry run: nothing started")


def print_batch_summary(out, store) -> None:
    from rich.table import Table

    table = Table(title=f"batch {store.run_id}: {store.manifest.get('records')} records, "
                        f"{store.manifest.get('shards')} shard(s)")
    columns = [("config", "config_label", None), ("load s", "load_s", 1), ("init s", "init_s", 1),
               ("generate s", "generate_s", 1), ("write s", "write_s", 2), ("req/s", "achieved_rps", 2),
               ("in tok/s", "input_tok_s", 0), ("out tok/s", "output_tok_s", 0),
               ("schema ok", "schema_valid_fraction", 3)]
    for title, _, _ in columns:
        table.add_column(title)
    for row in store.rows:
        cells = []
        for _, key, digits in columns:
            value = row.get(key)
            cells.append("-" if value in (None, "") else (str(value) if digits is None else f"{float(value):.{digits}f}"))
        table.add_row(*cells)
    out.print(table)
