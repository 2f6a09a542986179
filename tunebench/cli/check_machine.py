"""`tunebench check-machine`: does this machine hold its speed well enough to measure on?"""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("check-machine")
    def check_machine(
        seconds: float = typer.Option(
            60.0, "--seconds", min=10, max=3600, help="How long to time the probe (10 s or more)."
        ),
        cpus: Optional[str] = typer.Option(
            None, "--cpus", help="The CPUs a server would run on, e.g. 0 or 0-3 (default: any)."
        ),
        precision: float = typer.Option(
            10.0, "--precision", min=0.1, max=100, help="Percent the bins may differ by."
        ),
    ) -> None:
        """Time a fixed probe (small matrix products and a memory pass) on the server's CPUs
        and say in one line whether the machine holds its speed to --precision percent.

        Exit 0 when it does, 1 when it does not. Run it before a sweep on a shared or
        virtual machine; a sweep runs it itself with `machine: {stability_s: 60}`.

        Examples: tunebench check-machine; tunebench check-machine --cpus 0 --seconds 120
        """
        from tunebench.errors import UsageError
        from tunebench.machine.stability import check_stability
        from tunebench.processes import parse_cpus

        try:
            watched = parse_cpus(cpus) if cpus else None
        except ValueError as exc:
            raise UsageError(f"--cpus {cpus}: {exc}") from exc
        try:
            found = check_stability(seconds, watched, precision=precision / 100)
        except ValueError as exc:
            raise UsageError(f"--seconds {seconds:g}: {exc}") from exc
        typer.echo(found.line())
        raise typer.Exit(0 if found.steady else 1)
