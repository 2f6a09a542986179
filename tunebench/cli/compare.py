"""`tunebench compare RUN_A RUN_B ...` and `tunebench compare RUN --by ARG`."""

from __future__ import annotations

import json
import math
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table
from rich.text import Text

VERDICT_STYLE = {"better": "green", "worse": "bold red", "no significant change": "dim", "n/a": "dim"}


class Format(str, Enum):
    table = "table"
    markdown = "markdown"
    json = "json"
    csv = "csv"


def _num(value, digits=2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _point(row: dict, key: list[str]) -> str:
    parts = [f"{row['load_kind']}"]
    if row.get("target") is not None and not (isinstance(row["target"], float) and math.isnan(row["target"])):
        parts[0] += f" {row['target']:g}"
    parts += [str(row[k]) for k in key if k not in ("load_kind", "target")]
    return " · ".join(parts)


def _ci(row: dict) -> str:
    if row["ci_low_pct"] is None or (isinstance(row["ci_low_pct"], float) and math.isnan(row["ci_low_pct"])):
        return "-"
    return f"[{row['ci_low_pct']:+.1f}, {row['ci_high_pct']:+.1f}]"


def _lines(result) -> list[list[str]]:
    rows = result.to_dict()["rows"]
    return [[r["candidate"], _point(r, result.key), r["label"], _num(r["a"]), _num(r["b"]),
             "-" if r["change_pct"] is None else f"{r['change_pct']:+.1f}%", _ci(r), r["verdict"]]
            for r in rows]


HEADERS = ["candidate", "point", "metric", "A", "B", "change", "95% CI %", "verdict"]


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare(
        runs: List[str] = typer.Argument(..., metavar="RUN...", help="Baseline run first, then the runs to compare with it."),
        by: Optional[str] = typer.Option(None, "--by", help="Compare the configurations inside one run by this server arg."),
        baseline: Optional[str] = typer.Option(None, "--baseline", help="With --by: the arg value to compare against (default: the first)."),
        metric: Optional[List[str]] = typer.Option(None, "--metric", "-m", help="Metric to compare (repeatable): ttft_p50 ttft_p95 ttft_p99 itl_p50 itl_p95 tpot_p50 e2e_p50 e2e_p95 output_tok_s achieved_rps."),
        format: Format = typer.Option(Format.table, "--format", "-f", help="table | markdown | json | csv"),
        fail_on_regression: Optional[float] = typer.Option(None, "--fail-on-regression", metavar="PCT", help="Exit 1 when a metric is significantly worse by more than PCT percent."),
        plot: Optional[Path] = typer.Option(None, "--plot", help="Write an overlay of all curves: PATH.png or PATH.html."),
        confidence: float = typer.Option(0.95, "--confidence", min=0.5, max=0.999, help="Confidence level of the intervals."),
        min_change: float = typer.Option(1.0, "--min-change", help="Changes smaller than this percent are never significant."),
        root: Path = typer.Option(Path("reports"), "--root", help="Where runs are stored."),
        json_file: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="Also write the comparison as JSON to FILE, with the --fail-on-regression verdict (read by `tunebench results --compare-json`)."),
    ) -> None:
        """Compare runs point by point: A, B, change and a verdict from a bootstrap interval.

        Points are aligned by load kind and target. Latency percentiles are bootstrapped from
        the per-request samples; throughput from the request counts; repeats when present.

        Examples:
          tunebench compare 20261121-0900-latency 20261121-1000-latency
          tunebench compare cpu-demo --by max-num-seqs --baseline 8 --metric ttft_p50 --metric output_tok_s
          tunebench compare base-run new-run --fail-on-regression 5 --format markdown
        """
        from tunebench.analysis.api import compare as run_compare
        from tunebench.report.console import wide_console

        if len(runs) == 2 and by is None and _offline_vs_online(list(runs), root, format):
            return

        result = run_compare(list(runs), by=by, metrics=metric, root=root,
                             confidence=confidence, min_change_pct=min_change, baseline=baseline)
        gate = _gate(result, fail_on_regression)
        data = {**result.to_dict(), "runs": _run_ids(list(runs), root), **({"gate": gate} if gate else {})}
        if json_file is not None:
            from tunebench.store.run import write_atomic

            write_atomic(json_file, json.dumps(data, indent=2, default=str))
        if format is Format.json:
            typer.echo(json.dumps(data, indent=2, default=str))
        elif format is Format.csv:
            result.rows.to_csv(sys.stdout, index=False)
        elif format is Format.markdown:
            typer.echo(_markdown(result))
        else:
            _print_table(result, wide_console())
        if plot:
            from tunebench.analysis.overlay import write_overlay

            typer.echo(f"plot: {write_overlay(result, plot)}", err=format is not Format.table)
        if gate and gate["verdict"] == "regression":
            worst = gate["worst"]
            typer.echo(
                f"regression: {gate['regressions']} metric(s) significantly worse by more than "
                f"{fail_on_regression:g}% (worst: {worst['label']} at {worst['load_kind']} "
                f"{worst['target']:g}, {worst['change_pct']:+.1f}%)", err=True)
            raise typer.Exit(1)


def _gate(result, threshold: Optional[float]) -> Optional[dict]:
    """The --fail-on-regression verdict: metrics significantly worse by more than PCT."""
    if threshold is None:
        return None
    regressions = result.regressions(threshold)
    gate = {"threshold_pct": threshold, "regressions": int(len(regressions)),
            "verdict": "regression" if len(regressions) else "no-regression"}
    if len(regressions):
        worst = regressions.loc[regressions["change_pct"].abs().idxmax()]
        gate["worst"] = {"candidate": worst["candidate"], "label": worst["label"],
                         "load_kind": worst["load_kind"], "target": float(worst["target"]),
                         "change_pct": float(worst["change_pct"])}
    return gate


def _run_ids(runs: list[str], root: Path) -> list[str]:
    from tunebench.store.run import resolve_run

    return [resolve_run(r, root).name for r in runs]


def _print_table(result, console) -> None:
    if result.args_differ:
        console.print(Text("args that differ (baseline first): ", style="bold") + Text(
            "; ".join(f"{k}: {' → '.join(map(str, v))}" for k, v in result.args_differ.items())))
    table = Table(title=f"baseline: {result.baseline}", header_style="bold")
    for header in HEADERS:
        table.add_column(header, justify="right" if header in ("A", "B", "change") else "left")
    for line in _lines(result):
        table.add_row(*line[:-1], Text(line[-1], style=VERDICT_STYLE.get(line[-1], "")))
    console.print(table)
    for x in result.crossovers:
        console.print(f"crossover: {x['metric']} ({x['load_kind']}) {x['baseline']} vs {x['candidate']} "
                      f"cross at target ≈ {x['target']:.2f}; lower below: {x['better_below']}, above: {x['better_above']}")


def _markdown(result) -> str:
    out = []
    if result.args_differ:
        out.append("Args that differ: " + "; ".join(
            f"`{k}`: {' → '.join(map(str, v))}" for k, v in result.args_differ.items()) + "\n")
    out.append(f"Baseline: `{result.baseline}`\n")
    out.append("| " + " | ".join(HEADERS) + " |")
    out.append("|" + "---|" * len(HEADERS))
    out += ["| " + " | ".join(line) + " |" for line in _lines(result)]
    for x in result.crossovers:
        out.append(f"\nCrossover: {x['metric']} ({x['load_kind']}) at target ≈ {x['target']:.2f}")
    return "\n".join(out)


def _offline_vs_online(runs: list[str], root: Path, format: Format) -> bool:
    """A batch run against a sweep run: the serving overhead. False when not that case."""
    from tunebench.analysis.serving_overhead import is_batch_run, serving_overhead
    from tunebench.store.run import resolve_run

    paths = [resolve_run(r, root) for r in runs]
    kinds = [is_batch_run(p) for p in paths]
    if kinds.count(True) != 1:
        return False
    batch, sweep = (paths[0], paths[1]) if kinds[0] else (paths[1], paths[0])
    rows = serving_overhead(batch, sweep)
    if format is Format.json:
        typer.echo(json.dumps(rows, indent=2))
        return True
    table = Table(title=f"offline {batch.name} vs serving {sweep.name}: output tok/s")
    for header in ("config", "offline tok/s", "serving tok/s (best point)", "serving / offline"):
        table.add_column(header)
    for row in rows:
        table.add_row(row["config"], f"{row['offline_tok_s']:.1f}",
                      f"{row['online_tok_s']:.1f} ({row['online_point']})",
                      "-" if row["ratio"] is None else f"{row['ratio']:.2f}x "
                      f"({(1 - row['ratio']) * 100:+.0f}% serving overhead)")
    from tunebench.report.console import wide_console

    wide_console().print(table)
    return True
