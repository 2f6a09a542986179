"""`compare --plot`: the latency and throughput curves of every compared side, overlaid."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from tunebench.analysis.frames import load_run
from tunebench.analysis.plots import LATENCY_METRICS, render_lines, versus_data
from tunebench.store.run import write_atomic


def overlay_data(runs: list[str], by: str | None, root) -> pd.DataFrame:
    """Points of all sides with a `side` column (run id, or ARG=value with --by)."""
    frames = []
    if by:
        points = load_run(runs[0], root)
        frames.append(points.assign(side=by + "=" + points[by].astype(str)))
    else:
        for run in runs:
            points = load_run(run, root)
            name = Path(points.attrs["run_path"]).name
            label = points["config_label"] if points["config_label"].nunique() > 1 else ""
            frames.append(points.assign(side=name if isinstance(label, str) else name + " · " + label))
    return pd.concat(frames, ignore_index=True)


def write_overlay(result, runs: list[str], by: str | None, root, target: Path) -> Path:
    data = overlay_data(runs, by, root).rename(columns={"config_label": "_label", "side": "config_label"})
    pngs = [
        ("TTFT vs achieved request rate",
         render_lines(versus_data(data, LATENCY_METRICS), "achieved_rps", "TTFT", "requests/s", "ms")),
        ("Output tokens/s vs achieved request rate",
         render_lines(versus_data(data, {"output_tok_s": "output tok/s"}), "achieved_rps",
                      "Output throughput", "requests/s", "tokens/s")),
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
    write_atomic(target, f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                         f"<title>tunebench compare</title></head><body>"
                         f"<h1>Compared with {html.escape(result.baseline)}</h1>{body}</body></html>")
    return target
