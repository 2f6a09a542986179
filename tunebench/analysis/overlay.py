"""`compare --plot` / `compare --html`: every compared side's curves against the offered
load, with the comparison's verdict (and the regression gate's) at each candidate point."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

import pandas as pd

from tunebench.analysis.compare import ALL_POINTS, Comparison
from tunebench.analysis.figure_kit import figure_bytes
from tunebench.analysis.load_curves import HUE, PANEL, comparing_figures
from tunebench.points.offered import panel_of_key
from tunebench.store.files import write_atomic

# What a candidate point's verdict looks like beside it on a plot.
MARK = {
    "better": ("better", "#0a7d32"),
    "worse": ("worse", "#b00020"),
    "no significant change": ("=", "#555555"),
}
GATE_FAILED = ("REGRESSION", "#b00020")
MARKED_METRICS = {"output_tok_s": "output_tok_s", "ttft_p95": "ttft_p95_ms"}


def overlay_data(result: Comparison) -> pd.DataFrame:
    """The compared points, labelled by side (and configuration, where a side has several)."""
    frames = []
    for side in result.sides:
        labels = side.points[HUE]
        name = side.name if labels.nunique() <= 1 else side.name + " · " + labels
        frames.append(side.points.assign(**{HUE: name}))
    return pd.concat(frames, ignore_index=True)


def _series_of(result: Comparison, row: dict[str, Any]) -> str:
    """The plotted series a comparison row's candidate point lies on (overlay_data's name)."""
    side = next((s for s in result.sides if s.name == row["candidate"]), None)
    if side is None or side.points[HUE].nunique() <= 1:
        return str(row["candidate"])
    label = row.get("config_label")
    return f"{row['candidate']} · {label}" if isinstance(label, str) else str(row["candidate"])


def verdict_marks(result: Comparison, gate: dict[str, Any] | None) -> dict[str, pd.DataFrame]:
    """column -> [hue, load_kind, target, panel, text, colour]: the verdict of each
    candidate point for the plotted metric; a row that failed the gate is marked
    REGRESSION."""
    failing = {
        (f["candidate"], f["point"], f["metric"], f.get("config_label"))
        for f in (gate or {}).get("failing_rows", [])
    }
    out: dict[str, list[dict[str, Any]]] = {column: [] for column in MARKED_METRICS.values()}
    for row in result.to_dict()["rows"]:
        column = MARKED_METRICS.get(str(row["metric"]))
        if column is None or row["point"] == ALL_POINTS or row.get("target") is None:
            continue
        key = (row["candidate"], row["point"], row["metric"], row.get("config_label"))
        verdict = str(row["verdict"]).split(" (", 1)[0]
        text, colour = GATE_FAILED if key in failing else MARK.get(verdict, ("n/a", "#777777"))
        out[column].append(
            {
                HUE: _series_of(result, row),
                "load_kind": row["load_kind"],
                "target": float(row["target"]),
                # a replay's verdict belongs on its trace's panel
                PANEL: panel_of_key(row["point"], row["load_kind"], row["target"]),
                "text": text,
                "colour": colour,
            }
        )
    return {column: pd.DataFrame(rows) for column, rows in out.items()}


def compare_figures(
    result: Comparison, gate: dict[str, Any] | None = None
) -> list[tuple[str, bytes]]:
    figures = comparing_figures(overlay_data(result), marks=verdict_marks(result, gate))
    return [(title, figure_bytes(fig)) for title, fig in figures]


def _verdict_table(result: Comparison, gate: dict[str, Any] | None) -> str:
    failing = {
        (f["candidate"], f["point"], f["metric"], f.get("config_label"))
        for f in (gate or {}).get("failing_rows", [])
    }
    head = (
        "<tr><th>candidate</th><th>point</th><th>metric</th><th>A</th><th>B</th>"
        "<th>change</th><th>interval</th><th>verdict</th>"
        + ("<th>gate</th>" if gate else "")
        + "</tr>"
    )
    lines = [head]
    for row in result.to_dict()["rows"]:
        key = (row["candidate"], row["point"], row["metric"], row.get("config_label"))
        point = str(row["point"]) + (
            f" · {row['config_label']}" if isinstance(row.get("config_label"), str) else ""
        )
        cells = [
            str(row["candidate"]),
            point,
            str(row["label"]),
            _num(row["a"]),
            _num(row["b"]),
            _pct(row["change_pct"], row.get("unit")),
            "-"
            if row["ci_low_pct"] is None
            else f"[{row['ci_low_pct']:+.1f}, {row['ci_high_pct']:+.1f}]",
            str(row["verdict"]),
        ]
        if gate:
            cells.append("regression" if key in failing else "-")
        style = " class='bad'" if key in failing or row["verdict"] == "worse" else ""
        lines.append(
            f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
        )
    return "<table>" + "".join(lines) + "</table>"


def _num(value: Any) -> str:
    return "-" if value is None else f"{float(value):.4g}"


def _pct(value: Any, unit: Any) -> str:
    if value is None:
        return "-"
    return f"{float(value):+.1f}{' pp' if unit == 'pp' else '%'}"


def write_overlay(result: Comparison, target: Path, gate: dict[str, Any] | None = None) -> Path:
    """PATH.png: the TTFT figure; PATH.html: every figure, the verdict per point and the
    gate's verdict, one self-contained page."""
    pngs = compare_figures(result, gate)
    target = Path(target)
    if target.suffix.lower() == ".png":
        chosen = next((png for title, png in pngs if title.startswith("TTFT")), pngs[0][1])
        target.write_bytes(chosen)
        return target
    body = "".join(
        f'<figure><img src="data:image/png;base64,{base64.b64encode(png).decode()}" '
        f'alt="{html.escape(title)}"><figcaption>{html.escape(title)}</figcaption></figure>'
        for title, png in pngs
    )
    if gate:
        verdict = html.escape(f"gate: {gate['verdict']} ({gate['rule']})")
        body = f"<p class='gate {html.escape(gate['verdict'])}'><b>{verdict}</b></p>" + body
    sides = ", ".join(html.escape(s.name) for s in result.sides[1:])
    write_atomic(
        target,
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<title>tunebench compare</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2rem;max-width:1400px}"
        "table{border-collapse:collapse;font-size:.8rem}td,th{padding:.2rem .5rem;"
        "border-bottom:1px solid #eee;text-align:left}.bad{color:#b00020}"
        "figure{margin:1rem 0}img{max-width:100%}</style></head><body>"
        f"<h1>{sides} compared with {html.escape(result.baseline)}</h1>"
        "<p>Each side's curves against the offered load, one panel per load kind; beside "
        "each candidate point its verdict for the plotted metric (better, worse, = for no "
        "significant change, REGRESSION where the gate failed).</p>"
        f"{body}<h2>Every aligned point</h2>{_verdict_table(result, gate)}</body></html>",
    )
    return target
