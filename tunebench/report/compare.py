"""`tunebench compare` on the console and in markdown (for a pull request or a CI summary)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tunebench.report.formats import number

VERDICT_STYLE = {
    "better": "green",
    "worse": "bold red",
    "no significant change": "dim",
    "n/a": "dim",
}
HEADERS = ["candidate", "point", "metric", "A", "B", "change", "95% CI %", "verdict"]


def _point(row: dict, key: list[str]) -> str:
    parts = [f"{row['load_kind']}"]
    target = row.get("target")
    if target is not None and not (isinstance(target, float) and math.isnan(target)):
        parts[0] += f" {target:g}"
    parts += [str(row[k]) for k in key if k not in ("load_kind", "target")]
    return " · ".join(parts)


def _ci(row: dict) -> str:
    low = row["ci_low_pct"]
    if low is None or (isinstance(low, float) and math.isnan(low)):
        return "-"
    return f"[{low:+.1f}, {row['ci_high_pct']:+.1f}]"


def lines(result: Any) -> list[list[str]]:
    rows = result.to_dict()["rows"]
    return [
        [
            r["candidate"],
            _point(r, list(result.key)),
            r["label"],
            number(r["a"], 2),
            number(r["b"], 2),
            "-" if r["change_pct"] is None else f"{r['change_pct']:+.1f}%",
            _ci(r),
            r["verdict"],
        ]
        for r in rows
    ]


def _args_line(args_differ: dict[str, list[Any]], code: str = "") -> str:
    return "; ".join(f"{code}{k}{code}: {' → '.join(map(str, v))}" for k, v in args_differ.items())


def compare_table(result: Any) -> Group:
    parts: list[Any] = []
    if result.args_differ:
        parts.append(
            Text("args that differ (baseline first): ", style="bold")
            + Text(_args_line(result.args_differ))
        )
    table = Table(title=f"baseline: {result.baseline}", header_style="bold")
    for header in HEADERS:
        table.add_column(header, justify="right" if header in ("A", "B", "change") else "left")
    for line in lines(result):
        table.add_row(*line[:-1], Text(line[-1], style=VERDICT_STYLE.get(line[-1], "")))
    parts.append(table)
    for x in result.crossovers:
        parts.append(
            Text(
                f"crossover: {x['metric']} ({x['load_kind']}) {x['baseline']} vs "
                f"{x['candidate']} cross at target ≈ {x['target']:.2f}; lower below: "
                f"{x['better_below']}, above: {x['better_above']}"
            )
        )
    return Group(*parts)


def compare_markdown(result: Any) -> str:
    out = []
    if result.args_differ:
        out.append("Args that differ: " + _args_line(result.args_differ, "`") + "\n")
    out.append(f"Baseline: `{result.baseline}`\n")
    out.append("| " + " | ".join(HEADERS) + " |")
    out.append("|" + "---|" * len(HEADERS))
    out += ["| " + " | ".join(line) + " |" for line in lines(result)]
    for x in result.crossovers:
        out.append(f"\nCrossover: {x['metric']} ({x['load_kind']}) at target ≈ {x['target']:.2f}")
    return "\n".join(out)


def serving_overhead_table(batch: str, sweep: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"offline {batch} vs serving {sweep}: output tok/s")
    for header in ("config", "offline tok/s", "serving tok/s (best point)", "serving / offline"):
        table.add_column(header)
    for row in rows:
        ratio = row["ratio"]
        table.add_row(
            row["config"],
            number(row["offline_tok_s"], 1),
            f"{number(row['online_tok_s'], 1)} ({row['online_point']})",
            "-" if ratio is None else f"{ratio:.2f}x ({(1 - ratio) * 100:+.0f}% serving overhead)",
        )
    return table
