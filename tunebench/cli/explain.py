"""`tunebench explain RUN [CONFIG]`: why each configuration is as fast as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from tunebench.cli.common import root_of, root_option
from tunebench.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command("explain")
    def explain(
        run: str = typer.Argument(..., metavar="RUN", help="Run path, id or unique part of it."),
        config: Optional[str] = typer.Argument(
            None, metavar="CONFIG", help="One configuration: its id (c2) or label."
        ),
        as_json: bool = typer.Option(False, "--json", help="The findings as JSON."),
        root: Optional[Path] = root_option(),
    ) -> None:
        """What limits each configuration, and which argument to turn which way.

        Ranked findings per configuration from the run's server and client metrics (the
        client, the KV cache, max-num-seqs, prefill, speculation, load beyond capacity), with
        the numbers that show them; "cannot diagnose" where the metrics are missing.

        Examples:
          tunebench explain cpu-demo
          tunebench explain cpu-demo c2
          tunebench explain cpu-demo --json | jq '.[] | select(.rule == "kv-limited")'
        """
        from tunebench.points.diagnosis import (
            CANNOT_DIAGNOSE,
            blind_spots,
            client_cores,
            diagnose_run,
        )
        from tunebench.report.tables import diagnosis_lines, wide_console
        from tunebench.store.run import RunStore, resolve_run

        store = RunStore.open(resolve_run(run, root_of(root)))
        configs = [c.model_dump(mode="json") for c in store.manifest.configs]
        if config is not None:
            chosen = [c for c in configs if config in (c["config_id"], c.get("label"))]
            if not chosen:
                names = ", ".join(f"{c['config_id']} ({c.get('label')})" for c in configs)
                raise UsageError(f"{config!r}: no such configuration in {store.run_id}; {names}")
            configs = chosen
        findings = diagnose_run(store.rows, configs, client_cores(store.manifest.spec))
        blind = blind_spots(store.rows, configs)
        if as_json:
            found = [f.__dict__ for f in findings]
            seen = {f.config_id for f in findings}
            found += [
                {"config_id": c, "rule": CANNOT_DIAGNOSE, "cause": why}
                for c, why in blind.items()
                if c not in seen and any(c == entry["config_id"] for entry in configs)
            ]
            typer.echo(json.dumps(found, indent=2))
            return
        console = wide_console()
        for line in diagnosis_lines(findings, configs, blind):
            console.print(line)
