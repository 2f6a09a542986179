"""`tunebench results RUN`: a run's id, best configuration and verdict, as pipeline results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from tunebench.cli.common import root_of, root_option, writable_dir
from tunebench.errors import UsageError

RESULT_NAMES = ("run-id", "best-config", "verdict")


def register(app: typer.Typer) -> None:
    @app.command("results")
    def results(
        run: str = typer.Argument(..., metavar="RUN", help="Run path, id or unique part of it."),
        root: Optional[Path] = root_option(),
        to: Optional[Path] = typer.Option(
            None,
            "--to",
            metavar="DIR",
            help="Write the files run-id, best-config and verdict into DIR "
            "(Tekton: /tekton/results).",
        ),
        compare_json: Optional[Path] = typer.Option(
            None,
            "--compare-json",
            metavar="FILE",
            help="The verdict comes from this `tunebench compare --json FILE` output instead of "
            "the run's status.",
        ),
    ) -> None:
        """Print (and with --to, write) three small results of a run: id, best config, verdict.

        best-config is compact JSON (at most 1.5 KB) of the best configuration's id, label,
        model and engine args, with the rule, metric and value that chose it. The rules, in
        order (tunebench/analysis/best.py): a tune run: its best trial (rule "tune"); a
        capacity search: the highest capacity at the SLO ("capacity"); an SLO and fixed
        request rates: the highest rate sustained within the SLO ("slo-capacity"); an SLO:
        the highest goodput_rps of a point ("slo-goodput"; "slo-throughput" without
        per-request samples); otherwise the highest output tok/s of a point ("throughput").
        Invalid and client-limited points do not count (unless every valid point is
        client-limited: then "client_limited": true); a configuration that fails
        the quality gate or could not be checked is never best ("quality_excluded"); what of
        the best could not be verified is listed ("unverified"). A capacity that is only a
        lower bound says why ("lower_bound"); a runner-up the rule's evidence cannot tell
        apart makes a "tie", with the next figure that separates them ("decider"). The last
        line, "best:", says all of that in words (as `tunebench show` and the report do).

        verdict: the run's status (complete, failed, interrupted); with --compare-json,
        "regression", "unverified" or "no-regression" (the --fail-on-regression gate of that
        comparison; without a gate, any significantly worse metric is a regression).

        Examples:
          tunebench results cpu-demo
          tunebench results cpu-demo --to /tekton/results
          tunebench compare base new --fail-on-regression 5 --json cmp.json
          tunebench results new --compare-json cmp.json
        """
        from tunebench.analysis.best import (
            best_config,
            compact,
            compare_verdict,
            headline,
            run_verdict,
        )
        from tunebench.analysis.frames import run_path

        path = run_path(run, root_of(root))
        best = best_config(path)
        values = {
            "run-id": path.name,
            "best-config": compact(best),
            "verdict": run_verdict(path),
        }
        if compare_json is not None:
            try:
                comparison = json.loads(compare_json.read_text())
            except FileNotFoundError:
                raise UsageError(
                    f"--compare-json {compare_json}: no such file (did the comparison fail?)"
                ) from None
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"--compare-json {compare_json}: not JSON ({exc.msg} at line {exc.lineno})"
                ) from None
            values["verdict"] = compare_verdict(comparison)
        if to is not None:
            writable_dir(to, "--to")
            try:
                for name in RESULT_NAMES:
                    # Tekton takes a result file verbatim: no trailing newline.
                    (to / name).write_text(values[name])
            except OSError as exc:
                raise UsageError(f"--to {to}: cannot write results ({exc.strerror})") from None
        for name in RESULT_NAMES:
            typer.echo(f"{name}: {values[name]}")
        # for the person reading the log: what the best rests on (a tie, a lower bound)
        typer.echo(f"best: {headline(best)}")
