"""`tunebench export RUN --format llmd-br|vllm-bench|csv [--dir DIR]`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tunebench.cli.common import root_of, writable_dir


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        run: str = typer.Argument(..., metavar="RUN", help="Run id, unique part of it, or path."),
        format: str = typer.Option("llmd-br", "--format", "-f", help="llmd-br | vllm-bench | csv"),
        output: Optional[Path] = typer.Option(
            None,
            "--dir",
            "-d",
            "--output",
            "-o",
            metavar="DIR",
            help="Directory to write (default: RUN/export-FORMAT); --output and -o mean the "
            "same here, as they say.",
        ),
        root: Optional[Path] = typer.Option(
            None, "--root", metavar="DIR", help="Where runs are stored (default: reports/)."
        ),
    ) -> None:
        """Write a run in the formats the rest of the field reads.

        llmd-br: one llm-d Benchmark Report v0.2 (revision 0.2.1) per point, engine args in
        its stack section; vllm-bench: one `vllm bench serve --save-result --save-detailed`
        JSON per point (`tunebench import` reads it back); csv: points and requests.

        Examples:
          tunebench export cpu-demo --format llmd-br
          tunebench export cpu-demo --format vllm-bench --dir /tmp/bench
        """
        from tunebench.exporters import export_run
        from tunebench.store.run import RunStore, resolve_run

        format = format.lower()
        store = RunStore.open(resolve_run(run, root_of(root)))
        target = writable_dir(output or store.path / f"export-{format}", "--dir")
        written = export_run(store, format, target)
        typer.echo(f"exported {len(written)} file(s) to {target}")
