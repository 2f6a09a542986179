"""Replayed points in words: lengths sent vs the trace's, and arrival lag, for `show` and
the report.

Per replayed point: the prompt and output tokens per request (p50/p95/max) as the server
counted them (sent) and as the trace asked for them (after its length scale), over the
point's successful requests (requests/<config>.csv); the send lag p50/p95 and the share
sent late, the point's own columns (over every request it sent, points/trace.py). A run
without replayed points gets nothing from here: `show` and the report look as before.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Group
from rich.table import Table
from rich.text import Text

from tunebench.analysis.frames import load_run
from tunebench.analysis.replay_samples import (
    LENGTHS,
    SENT,
    TRACE,
    length_stats,
    point_samples,
    repeat_suffix,
    replay_rows,
    replay_samples,
)
from tunebench.analysis.trace_plots import replay_figures
from tunebench.numbers import to_float
from tunebench.points.cells import ArrivalLag
from tunebench.points.offered import is_replay, speed_text
from tunebench.points.trace import LATE_MS, arrival_fidelity
from tunebench.report.formats import MISSING, number
from tunebench.report.table_kit import Column, fit_widths, short_label

LENGTHS_NOTE = (
    "lengths: p50/p95/max tokens per successful request, sent as the server counted them "
    "and as the trace asked (after its length scale); lag: sent minus scheduled, p50/p95 ms "
    f"over every request sent; late: the share more than {LATE_MS:g} ms late"
)


def _tokens(stats: dict[str, float | None]) -> str:
    """The p50/p95/max of a length in whole tokens: "226/480/510"."""
    if stats["p50"] is None:
        return MISSING
    return "/".join(f"{stats[k]:.0f}" for k in ("p50", "p95", "max"))


def _arrivals(row: dict[str, Any], samples: pd.DataFrame) -> ArrivalLag:
    """The point's lag columns; from its samples where points.csv has none (an older run)."""
    stored: ArrivalLag = {
        "arrival_lag_p50_ms": to_float(row.get("arrival_lag_p50_ms")),
        "arrival_lag_p95_ms": to_float(row.get("arrival_lag_p95_ms")),
        "arrival_late_share": to_float(row.get("arrival_late_share")),
    }
    if stored["arrival_lag_p50_ms"] is not None or samples.empty:
        return stored
    return arrival_fidelity([lag / 1000 for lag in samples["lag_ms"].dropna()])


def replay_summary(points: pd.DataFrame, samples: pd.DataFrame) -> list[dict[str, Any]]:
    """One entry per replayed point with samples: its id, speed, request count, the
    lengths (`length_stats`) and the lag and late share."""
    out = []
    for row in replay_rows(points).to_dict(orient="records"):
        mine = point_samples(samples, row)
        if mine.empty:
            continue
        out.append(
            {
                "config_id": str(row.get("config_id")),
                "config_label": str(row.get("config_label") or ""),
                "point": str(row.get("point_id")) + repeat_suffix(row.get("repeat")),
                "speed": speed_text(row.get("target")),
                "requests": len(mine),
                "lengths": length_stats(mine),
                **_arrivals(row, mine),
            }
        )
    return out


def _late(share: Any) -> str:
    value = to_float(share)
    return MISSING if value is None else f"{value:.1%}"


def _lag(entry: dict[str, Any]) -> str:
    return f"{number(entry['arrival_lag_p50_ms'])}/{number(entry['arrival_lag_p95_ms'])}"


# the console table, two lines per point (sent, then trace); lower priority is kept first
CONSOLE_COLUMNS = (
    Column("config", 0, None),
    Column("point", 0, None),
    Column("speed", 6, None),
    Column("lengths", 0, None),
    Column("prompt tok p50/p95/max", 1, None),
    Column("output tok p50/p95/max", 1, None),
    Column("lag p50/p95 ms", 2, None),
    Column("late", 3, None),
)


def replay_table(
    summary: list[dict[str, Any]], varied: dict[str, dict[str, Any]], width: int = 100
) -> Group | None:
    """`show`'s view of the replayed points within `width` columns; None without any."""
    if not summary:
        return None
    labels = {config_id: short_label(config_id, values)[0] for config_id, values in varied.items()}
    lines: list[dict[str, str]] = []
    for entry in summary:
        config = labels.get(entry["config_id"]) or entry["config_id"]
        for source in (SENT, TRACE):
            first = source == SENT
            lines.append(
                {
                    "config": config if first else "",
                    "point": entry["point"] if first else "",
                    "speed": entry["speed"] if first else "",
                    "lengths": source,
                    "prompt tok p50/p95/max": _tokens(entry["lengths"]["prompt"][source]),
                    "output tok p50/p95/max": _tokens(entry["lengths"]["output"][source]),
                    "lag p50/p95 ms": _lag(entry) if first else "",
                    "late": _late(entry["arrival_late_share"]) if first else "",
                }
            )
    cells = {c.header: [line[c.header] for line in lines] for c in CONSOLE_COLUMNS}
    widths = fit_widths(list(CONSOLE_COLUMNS), cells, width)
    shown = [c for c in CONSOLE_COLUMNS if c.header in widths]
    table = Table(title="trace replay: request lengths and arrivals", header_style="bold")
    for column in shown:
        left = column.header in ("config", "point", "speed", "lengths")
        table.add_column(
            column.header, justify="left" if left else "right", width=widths[column.header]
        )
    for index, line in enumerate(lines):
        # a rule between points, none between a point's two lines
        table.add_row(*(line[c.header] for c in shown), end_section=index % 2 == 1)
    parts: list[Any] = [table, Text(LENGTHS_NOTE, style="dim")]
    hidden = [c.header for c in CONSOLE_COLUMNS if c not in shown]
    if hidden:
        parts.append(Text(f"not shown at this width: {', '.join(hidden)}", style="dim"))
    return Group(*parts)


def replay_view(run_path: Path, points: pd.DataFrame, varied: dict, width: int) -> Group | None:
    """`replay_table` of a run (None when it replayed nothing with per-request samples)."""
    replays = replay_rows(points)
    if replays.empty:
        return None
    return replay_table(replay_summary(replays, replay_samples(run_path, replays)), varied, width)


def stored_replay_view(store: Any, width: int) -> Group | None:
    """`replay_view` of an open run (a RunStore), for `show` and the end of a sweep; a run
    without replayed points is not read any further."""
    if not any(is_replay(row.get("load_kind")) for row in store.rows):
        return None
    varied = {c.config_id: c.varied for c in store.manifest.configs}
    return replay_view(store.layout.root, load_run(store.layout.root), varied, width)


def replay_section(points: pd.DataFrame, run_path: Path) -> dict[str, Any] | None:
    """The report's "Trace replay" section: a row per replayed point and its figures; None
    when the run replayed nothing with per-request samples."""
    replays = replay_rows(points)
    if replays.empty:
        return None
    summary = replay_summary(replays, replay_samples(run_path, replays))
    if not summary:
        return None
    figures, left_out = replay_figures(replays, run_path)
    headers = ["config", "point", "speed", "requests"]
    for what in LENGTHS:
        headers += [f"{what} sent", f"{what} trace"]
    headers += ["lag p50/p95 ms", "late"]
    rows = [
        [
            f"{e['config_id']} {e['config_label']}".strip(),
            e["point"],
            e["speed"],
            str(e["requests"]),
            *(_tokens(e["lengths"][what][source]) for what in LENGTHS for source in (SENT, TRACE)),
            _lag(e),
            _late(e["arrival_late_share"]),
        ]
        for e in summary
    ]
    return {
        "headers": headers,
        "rows": rows,
        "note": LENGTHS_NOTE,
        "figures": [(title, base64.b64encode(png).decode()) for title, png in figures],
        "left_out": left_out,
    }
