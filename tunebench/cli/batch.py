"""`tunebench batch SPEC`: push a dataset through the model offline, per engine configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tunebench.spec.loading import describe_validation_error, read_yaml_mapping


def load_batch_spec(path: Path):
    from pydantic import ValidationError

    from tunebench.batch.spec import BatchSpec
    from tunebench.errors import SpecError

    data = read_yaml_mapping(path)
    try:
        return BatchSpec.model_validate(data), data
    except ValidationError as exc:
        raise SpecError(f"{path}: {describe_validation_error(exc, BatchSpec)}") from None


def register(app: typer.Typer) -> None:
    @app.command("batch")
    def batch(
        spec_path: Path = typer.Argument(..., metavar="SPEC", help="A batch file, e.g. sweeps/batch-recipes.yaml."),
        shards: Optional[int] = typer.Option(None, "--shards", min=1, help="Data-parallel worker processes (overrides the spec)."),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Run directory root (overrides the spec's `output`)."),
        slurm: Optional[Path] = typer.Option(None, "--slurm", help="Write an sbatch script to this path instead of running."),
        report: bool = typer.Option(True, "--report/--no-report", help="Write report.html at the end."),
    ) -> None:
        """Run the dataset through each engine configuration; phases and tok/s per configuration.

        Examples:
          tunebench batch sweeps/batch-recipes.yaml
          tunebench batch sweeps/batch-recipes.yaml --shards 2
          tunebench batch sweeps/batch-recipes.yaml --slurm job.sbatch
        """
        from tunebench.batch.run import run_batch
        from tunebench.cli.report import write_report_keeping_the_run
        from tunebench.progress import ConsoleReporter
        from tunebench.report.console import wide_console

        out = wide_console()
        spec, data = load_batch_spec(spec_path)
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
