"""`tunebench compare RUN_A RUN_B ...` and `tunebench compare RUN --by ARG`."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any, List, Optional

import typer

from tunebench.cli.common import root_of, root_option, writable_file
from tunebench.errors import UsageError


class Format(str, Enum):
    table = "table"
    markdown = "markdown"
    json = "json"
    csv = "csv"


# The options of `compare`, declared once here so that the command reads as what it does.
RUNS_ARGUMENT = typer.Argument(
    ..., metavar="RUN", help="Baseline run first, then the runs to compare with it."
)
BY_OPTION = typer.Option(
    None, "--by", help="Compare the configurations inside one run by this server arg."
)
BASELINE_OPTION = typer.Option(
    None,
    "--baseline",
    help="With --by: the arg value to compare against (default: the first).",
)
COMMON_OPTION = typer.Option(
    False,
    "--common",
    help="Runs holding different configurations: compare those every run holds "
    "(the rest are named in a note).",
)
METRIC_OPTION = typer.Option(
    None,
    "--metric",
    "-m",
    help="Metric to compare (repeatable): ttft_p50 ttft_p95 ttft_p99 itl_p50 itl_p95 "
    "tpot_p50 e2e_p50 e2e_p95 output_tok_s achieved_rps error_rate (default: all but "
    "ttft_p99, tpot_p50, e2e_p50).",
)
FORMAT_OPTION = typer.Option(
    Format.table,
    "--format",
    "-f",
    case_sensitive=False,
    help="table | markdown | json | csv",
)
FAIL_ON_REGRESSION_OPTION = typer.Option(
    None,
    "--fail-on-regression",
    metavar="PCT",
    help="Exit 1 when some metric is worse than the baseline by more than PCT percent "
    "(the error rate: PCT percentage points) with the --confidence, Holm-corrected over "
    "every gated row.",
)
ERROR_RATE_PP_OPTION = typer.Option(
    1.0,
    "--fail-on-error-rate",
    metavar="PP",
    min=0,
    max=100,
    help="With --fail-on-regression: the error rate's threshold, in percentage points "
    "(default 1: a candidate failing 10% of its requests where the baseline failed none "
    "fails the gate).",
)
ALLOW_MISSING_OPTION = typer.Option(
    False,
    "--allow-missing",
    help="With --fail-on-regression: a baseline point the candidate lacks does not "
    "fail the gate (it is still named).",
)
ALLOW_INVALID_OPTION = typer.Option(
    False,
    "--allow-invalid",
    help="With --fail-on-regression: an invalid candidate point does not fail the gate "
    "(it is still named).",
)
ALLOW_UNVERIFIED_OPTION = typer.Option(
    False,
    "--allow-unverified",
    help="With --fail-on-regression: a candidate point that could not be checked (no "
    "server metrics, args not read back, an imported run) does not fail the gate (it "
    "is still named).",
)
ALLOW_DRIFT_OPTION = typer.Option(
    False,
    "--allow-drift",
    help="With --fail-on-regression: judge rows whose points were measured while the "
    "machine changed speed (otherwise undecided, and the gate fails).",
)
PLOT_OPTION = typer.Option(
    None, "--plot", help="Write an overlay of all curves: PATH.png or PATH.html."
)
HTML_FILE_OPTION = typer.Option(
    None,
    "--html",
    metavar="FILE",
    help="Write one page: every side's curves against the offered load with the "
    "verdict (and the --fail-on-regression gate's) at each point, and the table.",
)
CONFIDENCE_OPTION = typer.Option(
    0.95, "--confidence", min=0.5, max=0.999, help="Confidence level of the intervals."
)
MIN_CHANGE_OPTION = typer.Option(
    1.0, "--min-change", help="Changes smaller than this percent are never significant."
)
RUN_TO_RUN_OPTION = typer.Option(
    None,
    "--run-to-run-pct",
    min=0,
    max=100,
    metavar="PCT",
    help="Run-to-run spread (relative standard deviation, percent) added to intervals "
    "of runs measured without repeats (default: the spread measured between runs on "
    "the CPU server, see docs); runs with repeats measure their own.",
)
ROOT_OPTION = root_option()
JSON_FILE_OPTION = typer.Option(
    None,
    "--json",
    metavar="FILE",
    help="Also write the comparison as JSON to FILE, with the --fail-on-regression "
    "verdict (read by `tunebench results --compare-json`).",
)


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare(
        runs: List[str] = RUNS_ARGUMENT,
        by: Optional[str] = BY_OPTION,
        baseline: Optional[str] = BASELINE_OPTION,
        common: bool = COMMON_OPTION,
        metric: Optional[List[str]] = METRIC_OPTION,
        format: Format = FORMAT_OPTION,
        fail_on_regression: Optional[float] = FAIL_ON_REGRESSION_OPTION,
        error_rate_pp: float = ERROR_RATE_PP_OPTION,
        allow_missing: bool = ALLOW_MISSING_OPTION,
        allow_invalid: bool = ALLOW_INVALID_OPTION,
        allow_unverified: bool = ALLOW_UNVERIFIED_OPTION,
        allow_drift: bool = ALLOW_DRIFT_OPTION,
        plot: Optional[Path] = PLOT_OPTION,
        html_file: Optional[Path] = HTML_FILE_OPTION,
        confidence: float = CONFIDENCE_OPTION,
        min_change: float = MIN_CHANGE_OPTION,
        run_to_run: Optional[float] = RUN_TO_RUN_OPTION,
        root: Optional[Path] = ROOT_OPTION,
        json_file: Optional[Path] = JSON_FILE_OPTION,
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
        from tunebench.analysis.quality import quality_between
        from tunebench.store.run import resolve_run

        where = root_of(root)
        _check_outputs(plot, html_file, json_file)
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
        allowed = {
            "allow_missing": allow_missing,
            "allow_invalid": allow_invalid,
            "allow_unverified": allow_unverified,
            "allow_drift": allow_drift,
        }
        gate = _gate(result, fail_on_regression, confidence, error_rate_pp, allowed)
        quality = quality_between(list(runs), where) if by is None else []
        data = {
            **result.to_dict(),
            "runs": [resolve_run(r, where).name for r in runs],
            **({"gate": gate} if gate else {}),
            **({"quality": quality} if quality else {}),
        }
        if json_file is not None:
            _write_json(json_file, data)
        _print_result(result, data, quality, format)
        # beside a table the notes go to stdout; beside JSON, CSV or markdown to stderr
        notes_err = format is not Format.table
        _write_overlays(result, gate, {"--plot": plot, "--html": html_file}, notes_err)
        _print_machine(result, err=notes_err)
        if result.missing and gate is None:
            typer.echo(
                f"not compared: {len(result.missing)} baseline point(s) missing from the "
                "candidate: " + ", ".join(_missing_names(result.missing)),
                err=notes_err,
            )
        if gate:
            from tunebench.analysis.gate import describe_gate

            # the verdict always shows, on stderr: stdout stays the table, JSON or CSV
            typer.echo(describe_gate(gate), err=True)
            if not gate["passed"]:
                raise typer.Exit(1)


def _check_outputs(plot: Path | None, html_file: Path | None, json_file: Path | None) -> None:
    """Refuse a file that cannot be written before anything is computed."""
    if plot is not None:
        if plot.suffix.lower() not in (".png", ".html"):
            raise UsageError(f"--plot {plot}: name a .png or an .html file")
        writable_file(plot, "--plot")
    if html_file is not None:
        writable_file(html_file, "--html")
    if json_file is not None:
        writable_file(json_file, "--json")


def _gate(
    result: Any,
    fail_on_regression: float | None,
    confidence: float,
    error_rate_pp: float,
    allowed: dict[str, bool],
) -> dict[str, Any] | None:
    """The regression gate's verdict, or None when no --fail-on-regression was asked; the
    --allow-* options name what it may accept and only go with it."""
    if fail_on_regression is None:
        if any(allowed.values()):
            raise UsageError(
                "--allow-missing, --allow-invalid, --allow-unverified and --allow-drift go with "
                "--fail-on-regression PCT"
            )
        return None
    from tunebench.analysis.gate import regression_gate

    return regression_gate(
        result, fail_on_regression, confidence, error_rate_pp=error_rate_pp, **allowed
    )


def _write_json(json_file: Path, data: dict[str, Any]) -> None:
    from tunebench.store.files import write_atomic

    try:
        write_atomic(json_file, json.dumps(data, indent=2, default=str))
    except OSError as exc:  # a place that takes no files (/proc, a full disk)
        raise UsageError(f"--json {json_file}: cannot write it: {exc.strerror}") from exc


def _print_result(result: Any, data: dict[str, Any], quality: list, format: Format) -> None:
    from tunebench.report.compare import compare_markdown, compare_table
    from tunebench.report.quality_tables import quality_change_table
    from tunebench.report.tables import wide_console

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


def _write_overlays(
    result: Any, gate: dict[str, Any] | None, targets: dict[str, Path | None], err: bool
) -> None:
    """The overlay of every side's curves, as --plot (PNG or HTML) and --html asked."""
    for option, target in targets.items():
        if target is None:
            continue
        from tunebench.analysis.overlay import write_overlay

        try:
            written = write_overlay(result, target, gate)
        except OSError as exc:
            raise UsageError(f"{option} {target}: cannot write it: {exc.strerror}") from exc
        typer.echo(f"{option.lstrip('-')}: {written}", err=err)


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
