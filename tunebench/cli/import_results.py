"""`tunebench import PATH... [--name NAME]`: existing results become a run."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tunebench.cli.common import new_run_root, root_option


def register(app: typer.Typer) -> None:
    @app.command("import")
    def import_(
        files: List[Path] = typer.Argument(
            ...,
            metavar="PATH",
            help="GuideLLM report(s) (0.3-0.8, JSON/YAML), vllm bench serve result JSON, an "
            "AIPerf artifact directory or profile_export_aiperf.json, an inference-perf report "
            "directory or stage file.",
        ),
        name: Optional[str] = typer.Option(
            None, "--name", help="Run name (default: the first file's name)."
        ),
        root: Optional[Path] = root_option("Where the imported run is stored (default: reports/)."),
    ) -> None:
        """Turn existing benchmark results into a run that compare and report accept.

        Server metrics are absent in imported runs and marked so.

        Examples:
          tunebench import benchmarks.json --name before-upgrade
          tunebench import vllm-bench-rate4.json vllm-bench-rate8.json --name bench-sweep
          tunebench import aiperf-artifacts/ --name aiperf-c4
          tunebench import inference-perf-reports/ --name ip-run
        """
        from tunebench.importers import import_results

        # checked first, made with the run (RunStore.create): a bad file makes no directory
        store = import_results(list(files), name, new_run_root(root, make=False))
        typer.echo(f"imported {len(store.rows)} point(s): {store.path}")
