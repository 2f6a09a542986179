"""`compare --plot`: the latency and throughput curves of every compared side, overlaid."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from tunebench.analysis.compare import Comparison
from tunebench.analysis.plots import HUE, LATENCY_METRICS, render_lines, versus_data
from tunebench.store.files import write_atomic


def overlay_data(result: Comparison) -> pd.DataFrame:
    """The compared points, labelled by side (and configuration, where a side has several)."""
    frames = []
    for side in result.sides:
        labels = side.points[HUE]
        name = side.name if labels.nunique() <= 1 else side.name + " · " + labels
        frames.append(side.points.assign(**{HUE: name}))
    return pd.concat(frames, ignore_index=True)


def write_overlay(result: Comparison, target: Path) -> Path:
    data = overlay_data(result)
    pngs = [
        (
            "TTFT vs achieved request rate",
            render_lines(
                versus_data(data, LATENCY_METRICS), "achieved_rps", "TTFT", "requests/s", "ms"
            ),
        ),
        (
            "Output tokens/s vs achieved request rate",
            render_lines(
                versus_data(data, {"output_tok_s": "output tok/s"}),
                "achieved_rps",
                "Output throughput",
                "requests/s",
                "tokens/s",
            ),
        ),
    ]
    target = Path(target)
    if target.suffix.lower() == ".png":
        target.write_bytes(pngs[0][1])
        return target
    body = "".join(
        f'<figure><img src="data:image/png;base64,{base64.b64encode(png).decode()}" '
        f'alt="{html.escape(title)}"><figcaption>{html.escape(title)}</figcaption></figure>'
        for title, png in pngs
    )
    write_atomic(
        target,
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>tunebench compare</title></head><body>"
        f"<h1>Compared with {html.escape(result.baseline)}</h1>{body}</body></html>",
    )
    return target
