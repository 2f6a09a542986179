"""`tunebench compare` on the console and in markdown (for a pull request or a CI summary)."""

from __future__ import annotations

import math
import re
from typing import Any, Callable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tunebench.points.offered import is_replay, speed_text
from tunebench.report.formats import number
from tunebench.report.table_kit import Column, fit_widths, short_arg, short_label_text, short_value

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


CI_SHOWN = 999.0  # an interval's bound beyond this many percent reads ">+999"


def _bound(value: float) -> str:
    """One bound of an interval; past ±999 the figure says nothing more than "very wide"
    (two repeats give one degree of freedom: bounds of +14980554104.6% are real)."""
    if value > CI_SHOWN:
        return f">+{CI_SHOWN:.0f}"
    if value < -CI_SHOWN:
        return f"<-{CI_SHOWN:.0f}"
    return f"{value:+.1f}"


def _ci(row: dict) -> str:
    if _missing(row["ci_low_pct"]):
        return "-"
    unit = " pp" if row.get("unit") == "pp" else "%"
    return f"[{_bound(row['ci_low_pct'])}, {_bound(row['ci_high_pct'])}]{unit}"


def _few_repeats(rows: list[dict]) -> str | None:
    """The note for intervals made over two repeats a side, which are wide by nature."""
    two = [
        r
        for r in rows
        if not _missing(r.get("ci_low_pct"))
        and min(_count(r.get("repeats_a")), _count(r.get("repeats_b"))) == 2
    ]
    if not two:
        return None
    wide = sum(max(abs(r["ci_low_pct"]), abs(r["ci_high_pct"])) > CI_SHOWN for r in two)
    capped = f"; {wide} bound(s) past ±{CI_SHOWN:.0f}% print as >+{CI_SHOWN:.0f}" if wide else ""
    return (
        "intervals over 2 repeats a side rest on one degree of freedom (Welch's t, up to "
        "two): at 95% t is 4.3 to 12.7, so they are wide by nature; `repeats: 3` or more "
        f"narrows them (5 a side: t 2.3 to 2.8){capped}"
    )


def _count(value: Any) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


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
    few = _few_repeats(result.to_dict()["rows"])
    if few:
        out.append(few)
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
        f"{x['metric']} ({crossover_load(x)}{where}): {x['baseline']} vs {x['candidate']} cross "
        f"at {crossover_at(x)}; lower below: {x['better_below']}, above: "
        f"{x['better_above']}"
    )


def crossover_load(x: dict[str, Any]) -> str:
    """The load kind a crossover lies on, with the trace of a replay ("replay azure")."""
    return f"{x['load_kind']} {x['trace']}" if x.get("trace") else str(x["load_kind"])


def crossover_at(x: dict[str, Any]) -> str:
    """Where it lies: "target ≈ 4.20", or a replay's speed "≈ 1.5x trace", with its interval
    ("95% interval 3.61-5.02", or open where the data cannot place it inside the range)."""
    if is_replay(x.get("load_kind")):
        return f"≈ {speed_text(x['target'])}{_interval_text(x, speed_text)}"
    return f"target ≈ {x['target']:.2f}{_interval_text(x, lambda v: f'{v:.2f}')}"


def _interval_text(x: dict[str, Any], fmt: Callable[[float], str]) -> str:
    if x.get("interval_note"):
        return f" (no interval: {x['interval_note']})"
    if "confirmed" not in x:
        return ""
    share = f"{x['confidence']:.0%} interval"
    low, high = x.get("target_low"), x.get("target_high")
    if x["confirmed"] and low is not None and high is not None:
        return f" ({share} {fmt(low)}-{fmt(high)})"
    below = "below the lowest target" if low is None else fmt(low)
    above = "above the highest target" if high is None else fmt(high)
    why = (
        "not placed inside the measured range"
        if low is None or high is None
        else "neither curve is significantly lower on both sides of it"
    )
    return f" ({share} {below} to {above}; not confirmed: {why})"


# A run id is "<date>-<time>-<name>": the console names a run by its name alone
RUN_ID = re.compile(r"^(?P<date>\d{8})-(?P<time>\d{6})-(?P<name>.+)$")
# "concurrent 8" is the widest word of most points; the legend says what "conc" is
LOAD_WORDS = {"concurrent": "conc", "throughput": "thru", "constant": "const"}
SHORT_VERDICTS = {"no significant change": "n.s."}


def _unique(full: list[str], short: dict[str, str]) -> dict[str, str]:
    """`short` where it tells every name apart; the full names where two would read alike."""
    shown = [short[name] for name in full]
    return short if len(set(shown)) == len(set(full)) else {name: name for name in full}


def side_names(result: Any, legend: dict[str, str]) -> dict[str, str]:
    """Each side (run id, or --by value) -> the short name the console table prints.

    A run is its name without the date and time, or with the time where two runs share a
    name ("cpu-demo@162305"); a --by side is its value with short arg names."""
    candidates = result.rows["candidate"] if "candidate" in result.rows else []
    names = list(dict.fromkeys([result.baseline, *candidates]))
    found = {n: RUN_ID.match(n) for n in names}
    matches = {n: m for n, m in found.items() if m is not None}
    if len(matches) == len(names):
        plain = {n: m["name"] for n, m in matches.items()}
        if len(set(plain.values())) < len(names):
            plain = {n: f"{m['name']}@{m['time']}" for n, m in matches.items()}
        return _unique(names, plain)
    return _unique(names, {n: short_label_text(n, legend) for n in names})


def _point_short(row: dict, key: list[str], labels: dict[str, str]) -> str:
    point = str(row.get("point") or row["load_kind"])
    word, _, rest = point.partition(" ")
    parts = [f"{LOAD_WORDS[word]} {rest}" if word in LOAD_WORDS and rest else point]
    for k in key:
        if k in ("load_kind", "target"):
            continue
        value = row.get(k)
        if k == "config_label":
            parts.append(labels.get(str(value), str(value)))
        else:  # another varied arg, joined to the alignment by --by
            parts.append(f"{short_arg(k)}={short_value(value)}")
    return " · ".join(parts)


def compare_table(result: Any, width: int = 100) -> Group:
    """The console table: one line per row within `width` columns, like `tunebench show`.

    Runs and configurations go by short names spelled out in a legend under the table;
    with one candidate its column gives way to the title; columns that do not fit are
    dropped by priority (the interval first) and named; a reason for a missing verdict
    goes to the notes below, never into a cell."""
    rows = result.to_dict()["rows"]
    key = list(result.key)
    legend: dict[str, str] = {}
    sides = side_names(result, legend)
    configs = sorted({str(r.get("config_label")) for r in rows if "config_label" in key})
    labels = _unique(configs, {c: short_label_text(c, legend) for c in configs})
    for k in key:
        if k not in ("load_kind", "target", "config_label") and short_arg(k) != k:
            legend[short_arg(k)] = k
    candidates = list(dict.fromkeys(r["candidate"] for r in rows))
    verdicts = [_verdict(r) for r in rows]
    for verdict in verdicts:
        short = SHORT_VERDICTS.get(verdict.rstrip(" *"))
        if short:
            legend[short] = verdict.rstrip(" *")
    columns = [
        *([Column("candidate", 0, None)] if len(candidates) > 1 else []),
        Column("point", 0, None),
        Column("metric", 0, None),
        Column("A", 1, None),
        Column("B", 0, None),
        Column("change", 0, None),
        Column("95% CI", 2, None),
        Column("verdict", 0, None),
    ]
    cells: dict[str, list[str]] = {
        "candidate": [sides.get(r["candidate"], r["candidate"]) for r in rows],
        "point": [_point_short(r, key, labels) for r in rows],
        "metric": [str(r["label"]) for r in rows],
        "A": [number(r["a"], 2) for r in rows],
        "B": [number(r["b"], 2) for r in rows],
        "change": [_change(r) for r in rows],
        "95% CI": [_ci(r) for r in rows],
        "verdict": [
            SHORT_VERDICTS.get(v.rstrip(" *"), v.rstrip(" *")) + (" *" if v.endswith(" *") else "")
            for v in verdicts
        ],
    }
    widths = fit_widths(columns, cells, width)
    shown = [c for c in columns if c.header in widths]
    base = sides.get(result.baseline, result.baseline)
    if len(candidates) == 1:
        title = f"A: {base} (baseline)   B: {sides.get(candidates[0], candidates[0])}"
    else:
        title = f"A: {base} (baseline)   B: the row's candidate"
    parts: list[Any] = []
    if result.args_differ:
        parts.append(
            Text("args that differ (baseline first): ", style="bold")
            + Text(_args_line(result.args_differ))
        )
    table = Table(title=title, header_style="bold")
    for column in shown:
        right = column.header in ("A", "B", "change")
        table.add_column(
            column.header,
            justify="right" if right else "left",
            width=widths[column.header],
            no_wrap=True,  # one line per row: a point split over lines misreads
        )
    for index, verdict in enumerate(verdicts):
        style = VERDICT_STYLE.get(verdict.rstrip(" *"), "dim")
        values = [cells[c.header][index] for c in shown]
        table.add_row(*values[:-1], Text(values[-1], style=style))
    parts.append(table)
    named = {f: s for f, s in sides.items() if f != s and RUN_ID.match(f)}
    if named:  # a --by side's short name is spelled out by the arg legend instead
        parts.append(
            Text("runs: " + "; ".join(f"{s} = {f}" for f, s in named.items()), style="dim")
        )
    shorts = [f"{k} = {v}" for k, v in legend.items()]
    points = {str(r.get("point") or "").partition(" ")[0] for r in rows}
    shorts += [f"{short} = {word}" for word, short in LOAD_WORDS.items() if word in points]
    if shorts:
        parts.append(Text("legend: " + "; ".join(shorts), style="dim"))
    hidden = [c.header for c in columns if c not in shown]
    if hidden:
        parts.append(
            Text(
                f"not shown at this width: {', '.join(hidden)} "
                "(--format json, csv or markdown has every column)",
                style="dim",
            )
        )
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
