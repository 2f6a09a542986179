"""`tunebench batch SPEC`: push a dataset through the model offline, per engine configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tunebench.cli.common import (
    live_progress,
    new_run_root,
    root_option,
    write_report_keeping_the_run,
    writing,
)


def register(app: typer.Typer) -> None:
    @app.command("batch")
    def batch(
        spec_path: Path = typer.Argument(
            ..., metavar="SPEC", help="A batch file, e.g. sweeps/batch-recipes.yaml."
        ),
        shards: Optional[int] = typer.Option(
            None, "--shards", min=1, help="Data-parallel worker processes (overrides the spec)."
        ),
        root: Optional[Path] = root_option(
            "Where the run is stored (overrides the spec's `output`, default reports/)."
        ),
        slurm: Optional[Path] = typer.Option(
            None, "--slurm", help="Write an sbatch script to this path instead of running."
        ),
        report: bool = typer.Option(
            True, "--report/--no-report", help="Write report.html at the end."
        ),
        dry_run: bool = typer.Option(
            False,
            "--dry-run",
            help="Check the spec, dataset and prompts and print the plan; start nothing.",
        ),
    ) -> None:
        """Run the dataset through each engine configuration; phases and tok/s per configuration.

        Examples:
          tunebench batch sweeps/batch-recipes.yaml
          tunebench batch sweeps/batch-recipes.yaml --dry-run
          tunebench batch sweeps/batch-recipes.yaml --shards 2
          tunebench batch sweeps/batch-recipes.yaml --slurm job.sbatch
        """
        from tunebench.batch.run import json_schema_of, plan_configs, render_prompts, run_batch
        from tunebench.batch.spec import load_batch_spec
        from tunebench.report.batch_tables import batch_plan, batch_summary, estimate_line
        from tunebench.report.tables import wide_console

        out = wide_console()
        spec, data = load_batch_spec(spec_path)
        if dry_run:
            from tunebench.batch.estimate import estimate_batch

            runs_root = new_run_root(root, spec.output, spec_path, make=False)
            prompts = render_prompts(spec, spec_path)
            json_schema_of(spec, spec_path)
            configs = plan_configs(spec, spec_path)
            out.print(batch_plan(spec, configs, prompts, shards or spec.shards))
            labels = [config.label for config in configs]
            estimate = estimate_batch(runs_root, spec.name, labels, len(prompts))
            out.print(estimate_line(estimate, runs_root, spec.name))
            return
        if slurm is not None:
            from tunebench.batch.slurm import write_sbatch

            with writing(slurm, "--slurm"):
                script = write_sbatch(spec, spec_path, slurm, shards or spec.shards)
            out.print(f"sbatch script: {script}")
            return
        output = new_run_root(root, spec.output, spec_path)
        stores: list = []

        def where() -> str | None:
            if stores:
                return f"interrupted; finished configurations are in {stores[0].path}"
            return None

        with live_progress(where) as reporter:
            store, outcomes = run_batch(
                spec,
                spec_path,
                data,
                output,
                reporter,
                shards=shards,
                on_store=stores.append,
            )
        if report and store.rows:
            write_report_keeping_the_run(out, store.path)
        manifest = store.manifest
        out.print(
            batch_summary(
                store.run_id,
                manifest.records,
                manifest.shards,
                store.rows,
                {c.config_id: c.varied for c in manifest.configs},
                out.width,
            )
        )
        failed = [o for o in outcomes if o.status != "complete"]
        for outcome in failed:
            out.print(f"[red]{outcome.config_id} failed:[/] {outcome.error}")
        out.print(f"run: {store.path}  (status: {manifest.status.value})")
        if failed:
            raise typer.Exit(1)
