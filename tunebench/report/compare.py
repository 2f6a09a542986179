"""`tunebench compare` on the console and in markdown (for a pull request or a CI summary)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tunebench.report.formats import number

VERDICT_STYLE = {"better": "green", "worse": "bold red", "no significant change": "dim"}
HEADERS = ["candidate", "point", "metric", "A", "B", "change", "95% CI", "verdict"]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _point(row: dict, key: list[str]) -> str:
    parts = [str(row.get("point") or row["load_kind"])]
    parts += [str(row[k]) for k in key if k not in ("load_kind", "target")]
    return " · ".join(parts)


def _change(row: dict) -> str:
    if _missing(row["change_pct"]):
        return "-"
    unit = " pp" if row.get("unit") == "pp" else "%"
    return f"{row['change_pct']:+.1f}{unit}"


def _ci(row: dict) -> str:
    if _missing(row["ci_low_pct"]):
        return "-"
    unit = " pp" if row.get("unit") == "pp" else "%"
    return f"[{row['ci_low_pct']:+.1f}, {row['ci_high_pct']:+.1f}]{unit}"


def _verdict(row: dict) -> str:
    verdict = str(row["verdict"])
    short = verdict.split(" (", 1)[0]  # the reason of an n/a or exclusion goes below
    return short + (" *" if row.get("client_limited") else "")


def lines(result: Any) -> list[list[str]]:
    rows = result.to_dict()["rows"]
    return [
        [
            r["candidate"],
            _point(r, list(result.key)),
            r["label"],
            number(r["a"], 2),
            number(r["b"], 2),
            _change(r),
            _ci(r),
            _verdict(r),
        ]
        for r in rows
    ]


def notes(result: Any) -> list[str]:
    """Each distinct reason and caveat once: why rows have no verdict, what intervals cover."""
    out: list[str] = list(result.warnings)
    seen: set[str] = set()
    for row in result.to_dict()["rows"]:
        verdict = str(row["verdict"])
        reason = verdict.split(" (", 1)[1].rstrip(")") if " (" in verdict else ""
        note = str(row.get("note") or "")
        # a row without a verdict carries its reason both in the verdict and as its note:
        # say it once, with the metric it belongs to
        texts = [f"{row['label']}: {reason}" if reason else ""]
        texts += [note] if note and note != reason else []
        for text in texts:
            if text and text not in seen:
                seen.add(text)
                out.append(text)
    if any(r.get("client_limited") for r in result.to_dict()["rows"]):
        out.append(
            "*: the load generator held the point back on the side(s) named in "
            "client_limited (compared and gated all the same)"
        )
    return out


def _args_line(args_differ: dict[str, list[Any]], code: str = "") -> str:
    return "; ".join(f"{code}{k}{code}: {' → '.join(map(str, v))}" for k, v in args_differ.items())


def crossover_text(x: dict[str, Any]) -> str:
    """One crossover, naming both sides (and the configuration, when sides hold several)."""
    where = f" of {x['config_label']}" if isinstance(x.get("config_label"), str) else ""
    return (
        f"{x['metric']} ({x['load_kind']}{where}): {x['baseline']} vs {x['candidate']} cross "
        f"at target ≈ {x['target']:.2f}; lower below: {x['better_below']}, above: "
        f"{x['better_above']}"
    )


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
        style = VERDICT_STYLE.get(line[-1].rstrip(" *"), "dim")
        table.add_row(*line[:-1], Text(line[-1], style=style))
    parts.append(table)
    for x in result.crossovers:
        parts.append(Text(f"crossover: {crossover_text(x)}"))
    for text in notes(result):
        parts.append(Text(f"note: {text}", style="dim"))
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
        out.append(f"\nCrossover: {crossover_text(x)}")
    if notes(result):
        out.append("")
        out += [f"- {text}" for text in notes(result)]
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
