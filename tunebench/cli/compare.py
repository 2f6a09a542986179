"""`tunebench compare RUN_A RUN_B ...` and `tunebench compare RUN --by ARG`."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from tunebench.cli.common import root_of, root_option, writable_file
from tunebench.errors import UsageError


class Format(str, Enum):
    table = "table"
    markdown = "markdown"
    json = "json"
    csv = "csv"


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare(
        runs: List[str] = typer.Argument(
            ..., metavar="RUN", help="Baseline run first, then the runs to compare with it."
        ),
        by: Optional[str] = typer.Option(
            None, "--by", help="Compare the configurations inside one run by this server arg."
        ),
        baseline: Optional[str] = typer.Option(
            None,
            "--baseline",
            help="With --by: the arg value to compare against (default: the first).",
        ),
        common: bool = typer.Option(
            False,
            "--common",
            help="Runs holding different configurations: compare those every run holds "
            "(the rest are named in a note).",
        ),
        metric: Optional[List[str]] = typer.Option(
            None,
            "--metric",
            "-m",
            help="Metric to compare (repeatable): ttft_p50 ttft_p95 ttft_p99 itl_p50 itl_p95 "
            "tpot_p50 e2e_p50 e2e_p95 output_tok_s achieved_rps error_rate (default: all but "
            "ttft_p99, tpot_p50, e2e_p50).",
        ),
        format: Format = typer.Option(
            Format.table,
            "--format",
            "-f",
            case_sensitive=False,
            help="table | markdown | json | csv",
        ),
        fail_on_regression: Optional[float] = typer.Option(
            None,
            "--fail-on-regression",
            metavar="PCT",
            help="Exit 1 when some metric is worse than the baseline by more than PCT percent "
            "(the error rate: PCT percentage points) with the --confidence, Holm-corrected over "
            "every gated row.",
        ),
        error_rate_pp: float = typer.Option(
            1.0,
            "--fail-on-error-rate",
            metavar="PP",
            min=0,
            max=100,
            help="With --fail-on-regression: the error rate's threshold, in percentage points "
            "(default 1: a candidate failing 10% of its requests where the baseline failed none "
            "fails the gate).",
        ),
        allow_missing: bool = typer.Option(
            False,
            "--allow-missing",
            help="With --fail-on-regression: a baseline point the candidate lacks does not "
            "fail the gate (it is still named).",
        ),
        allow_invalid: bool = typer.Option(
            False,
            "--allow-invalid",
            help="With --fail-on-regression: an invalid candidate point does not fail the gate "
            "(it is still named).",
        ),
        allow_unverified: bool = typer.Option(
            False,
            "--allow-unverified",
            help="With --fail-on-regression: a candidate point that could not be checked (no "
            "server metrics, args not read back, an imported run) does not fail the gate (it "
            "is still named).",
        ),
        allow_drift: bool = typer.Option(
            False,
            "--allow-drift",
            help="With --fail-on-regression: judge rows whose points were measured while the "
            "machine changed speed (otherwise undecided, and the gate fails).",
        ),
        plot: Optional[Path] = typer.Option(
            None, "--plot", help="Write an overlay of all curves: PATH.png or PATH.html."
        ),
        html_file: Optional[Path] = typer.Option(
            None,
            "--html",
            metavar="FILE",
            help="Write one page: every side's curves against the offered load with the "
            "verdict (and the --fail-on-regression gate's) at each point, and the table.",
        ),
        confidence: float = typer.Option(
            0.95, "--confidence", min=0.5, max=0.999, help="Confidence level of the intervals."
        ),
        min_change: float = typer.Option(
            1.0, "--min-change", help="Changes smaller than this percent are never significant."
        ),
        run_to_run: Optional[float] = typer.Option(
            None,
            "--run-to-run-pct",
            min=0,
            max=100,
            metavar="PCT",
            help="Run-to-run spread (relative standard deviation, percent) added to intervals "
            "of runs measured without repeats (default: the spread measured between runs on "
            "the CPU server, see docs); runs with repeats measure their own.",
        ),
        root: Optional[Path] = root_option(),
        json_file: Optional[Path] = typer.Option(
            None,
            "--json",
            metavar="FILE",
            help="Also write the comparison as JSON to FILE, with the --fail-on-regression "
            "verdict (read by `tunebench results --compare-json`).",
        ),
    ) -> None:
        """Compare runs point by point: A, B, the change, its interval and a verdict.

        Points are aligned by load kind and target (the point id where there is no target).
        With repeats on both sides the interval is Welch's t over the repeats; otherwise
        percentiles get a block bootstrap over the requests in time order, rates batch
        means over time bins, plus a run-to-run spread a single run cannot show; the error
        rate is compared as two proportions. Percentiles from too few samples have no verdict
        ("n/a"); invalid points are excluded; client-limited points are marked with *.
        docs/results-and-compare.md states each method's assumptions.

        Examples:
          tunebench compare 20261121-0900-latency 20261121-1000-latency
          tunebench compare cpu-demo --by max-num-seqs --baseline 8 \\
            --metric ttft_p50 --metric output_tok_s
          tunebench compare base-run new-run --fail-on-regression 5 --format markdown
          tunebench compare base-run new-run --fail-on-regression 5 --html out.html
        """
        from tunebench.analysis.api import compare as run_compare
        from tunebench.analysis.gate import describe_gate, regression_gate
        from tunebench.analysis.quality import quality_between
        from tunebench.report.compare import compare_markdown, compare_table
        from tunebench.report.quality_tables import quality_change_table
        from tunebench.report.tables import wide_console
        from tunebench.store.files import write_atomic
        from tunebench.store.run import resolve_run

        where = root_of(root)
        if plot is not None:
            if plot.suffix.lower() not in (".png", ".html"):
                raise UsageError(f"--plot {plot}: name a .png or an .html file")
            writable_file(plot, "--plot")
        if html_file is not None:
            writable_file(html_file, "--html")
        if json_file is not None:
            writable_file(json_file, "--json")
        if len(runs) == 2 and by is None and _offline_vs_online(list(runs), where, format):
            return
        result = run_compare(
            list(runs),
            by=by,
            metrics=metric,
            root=where,
            confidence=confidence,
            min_change_pct=min_change,
            baseline=baseline,
            common=common,
            **({} if run_to_run is None else {"run_cv": run_to_run / 100}),
        )
        if fail_on_regression is None and (
            allow_missing or allow_invalid or allow_unverified or allow_drift
        ):
            raise UsageError(
                "--allow-missing, --allow-invalid, --allow-unverified and --allow-drift go with "
                "--fail-on-regression PCT"
            )
        gate = (
            regression_gate(
                result,
                fail_on_regression,
                confidence,
                error_rate_pp=error_rate_pp,
                allow_missing=allow_missing,
                allow_invalid=allow_invalid,
                allow_unverified=allow_unverified,
                allow_drift=allow_drift,
            )
            if fail_on_regression is not None
            else None
        )
        quality = quality_between(list(runs), where) if by is None else []
        data = {
            **result.to_dict(),
            "runs": [resolve_run(r, where).name for r in runs],
            **({"gate": gate} if gate else {}),
            **({"quality": quality} if quality else {}),
        }
        if json_file is not None:
            try:
                write_atomic(json_file, json.dumps(data, indent=2, default=str))
            except OSError as exc:  # a place that takes no files (/proc, a full disk)
                raise UsageError(f"--json {json_file}: cannot write it: {exc.strerror}") from exc
        if format is Format.json:
            typer.echo(json.dumps(data, indent=2, default=str))
        elif format is Format.csv:
            result.rows.to_csv(sys.stdout, index=False)
        elif format is Format.markdown:
            typer.echo(compare_markdown(result))
        else:
            console = wide_console()
            console.print(compare_table(result, width=console.width))
            if quality:
                wide_console().print(quality_change_table(quality))
        for option, target in (("--plot", plot), ("--html", html_file)):
            if target is None:
                continue
            from tunebench.analysis.overlay import write_overlay

            try:
                written = write_overlay(result, target, gate)
            except OSError as exc:
                raise UsageError(f"{option} {target}: cannot write it: {exc.strerror}") from exc
            name = "plot" if option == "--plot" else "html"
            typer.echo(f"{name}: {written}", err=format is not Format.table)
        _print_machine(result, err=format is not Format.table)
        if result.missing and gate is None:
            typer.echo(
                f"not compared: {len(result.missing)} baseline point(s) missing from the "
                "candidate: " + ", ".join(_missing_names(result.missing)),
                err=format is not Format.table,
            )
        if gate:
            # the verdict always shows, on stderr: stdout stays the table, JSON or CSV
            typer.echo(describe_gate(gate), err=True)
            if not gate["passed"]:
                raise typer.Exit(1)


def _print_machine(result, err: bool) -> None:
    """Each side's machine speed, so a difference can be read against the machine's own."""
    from tunebench.analysis.machine_plots import machine_line

    lines = [machine_line(side.name, side.points) for side in result.sides]
    found = [line for line in lines if line]
    if found:
        typer.echo("machine: " + "; ".join(found), err=err)


def _missing_names(missing: list[dict]) -> list[str]:
    from tunebench.analysis.gate import describe_missing

    return [describe_missing(m) for m in missing]


def _offline_vs_online(runs: list[str], root: Path, format: Format) -> bool:
    """A batch run against a sweep run: the serving overhead. False when not that case."""
    from tunebench.analysis.serving_overhead import is_batch_run, serving_overhead
    from tunebench.report.compare import serving_overhead_table
    from tunebench.report.tables import wide_console
    from tunebench.store.run import resolve_run

    paths = [resolve_run(r, root) for r in runs]
    kinds = [is_batch_run(p) for p in paths]
    if kinds.count(True) != 1:
        return False
    batch, sweep = (paths[0], paths[1]) if kinds[0] else (paths[1], paths[0])
    rows = serving_overhead(batch, sweep)
    if format is Format.json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        wide_console().print(serving_overhead_table(batch.name, sweep.name, rows))
    return True
