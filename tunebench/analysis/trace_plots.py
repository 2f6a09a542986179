"""Plots of replayed points: the lengths sent against the trace's, and the arrivals.

Per replayed point two figures, drawn from the data of `replay_samples.py`:

- request lengths: a histogram of the prompt and of the output tokens per request, the
  trace's lengths (as asked, after the length scale) and what the server counted, over the
  same bins; a faithful replay draws the two on top of each other, so the one drawn last is
  hollow and the other still shows through;
- arrivals: requests per second scheduled and sent over the point's window, and each
  request's send lag (sent minus scheduled) over time, with the 50 ms past which it counts
  as late (points/trace.py).

Every figure records its layout in its PNG like the other plots (figure_kit.py `figure_bytes`),
so the checks of tunebench/testing/plot_layout.py read them as a person sees them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from tunebench.analysis.figure_kit import PALETTE, figure_bytes, legend_outside, setup_plotting
from tunebench.analysis.replay_samples import (
    SENT,
    TRACE,
    arrival_lags,
    arrival_rates,
    length_histogram,
    point_samples,
    repeat_suffix,
    replay_rows,
    replay_samples,
)
from tunebench.points.offered import speed_text
from tunebench.points.trace import LATE_MS

# the report draws this many replayed points (two figures each); the rest are named
MAX_REPLAY_POINTS = 8
# source -> (legend label, colour, marker, filled): the second drawn is hollow
LENGTH_STYLE = {
    TRACE: ("trace, as asked", PALETTE[0], "o", True),
    SENT: ("sent, as the server counted", PALETTE[1], "s", False),
}
RATE_STYLE = {
    "scheduled": ("scheduled (the trace at its speed)", PALETTE[0], "o", True),
    SENT: ("sent", PALETTE[1], "s", False),
}
LAG_STYLE = ("send lag per request", PALETTE[2], "o")


def _steps(ax, x, y, style: tuple[str, str, str, bool]) -> None:
    """One histogram-like series: a step outline through a marker at each bin's middle."""
    label, colour, marker, filled = style
    ax.plot(
        x,
        y,
        drawstyle="steps-mid",
        color=colour,
        marker=marker,
        ms=7 if filled else 8,
        mfc=colour if filled else "none",
        lw=1.6 if filled else 1.1,
        label=label,
        # whole markers on the axis at 0 requests: clipped there, half a marker misreads
        clip_on=False,
    )


def draw_lengths(samples: pd.DataFrame, title: str):
    """Two panels, prompt and output tokens per request: how many requests of each length
    the trace asked for and the server counted. Returns the Figure."""
    plt, _sns = setup_plotting()
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4), layout="constrained")
    handles: dict[str, Any] = {}
    for ax, what in zip(axes, ("prompt", "output")):
        histogram = length_histogram(samples, what)
        for source in (TRACE, SENT):
            part = histogram[histogram["source"] == source]
            if not part.empty:
                _steps(ax, part["centre"], part["count"], LENGTH_STYLE[source])
        for line in ax.get_lines():
            handles.setdefault(line.get_label(), line)
        ax.set_title(f"{what} tokens")
        ax.set(xlabel=f"{what} tokens per request", ylabel="requests")
        ax.set_ylim(0, max(1.0, ax.get_ylim()[1]) * 1.08)
    fig.suptitle(title, x=0.01, ha="left")
    if handles:
        legend_outside(fig, list(handles.values()), list(handles))
    return fig


def draw_arrivals(samples: pd.DataFrame, title: str):
    """Two panels over the point's window: requests per second scheduled and sent, and
    each request's send lag in ms. Returns the Figure."""
    plt, _sns = setup_plotting()
    fig, (rate_ax, lag_ax) = plt.subplots(
        2, 1, figsize=(9.5, 4.6), sharex=True, layout="constrained"
    )
    rates = arrival_rates(samples)
    for source in ("scheduled", SENT):
        part = rates[rates["source"] == source]
        if not part.empty:
            _steps(rate_ax, part["seconds"], part["rps"], RATE_STYLE[source])
    rate_ax.set_title("arrivals: requests per second, scheduled vs sent")
    rate_ax.set_ylabel("requests/s")
    rate_ax.set_ylim(0, max(1.0, rate_ax.get_ylim()[1]) * 1.08)
    lags = arrival_lags(samples)
    label, colour, marker = LAG_STYLE
    if not lags.empty:
        lag_ax.plot(
            lags["seconds"],
            lags["lag_ms"],
            ls="none",
            color=colour,
            marker=marker,
            ms=4,
            label=label,
            clip_on=False,
        )
    # not a series: the threshold the late share counts against
    lag_ax.axhline(LATE_MS, color="#777777", lw=1, ls=":", label="_late")
    lag_ax.set_title(f"send lag, sent minus scheduled (dotted: {LATE_MS:g} ms, late beyond)")
    lag_ax.set(xlabel="seconds from the first scheduled request", ylabel="lag (ms)")
    fig.suptitle(title, x=0.01, ha="left")
    handles = [line for ax in (rate_ax, lag_ax) for line in ax.get_lines()]
    handles = [h for h in handles if not h.get_label().startswith("_")]
    if handles:
        legend_outside(fig, handles, [h.get_label() for h in handles])
    return fig


def point_title(row: dict[str, Any], with_label: bool = True) -> str:
    """A replayed point's name, "c1 max-num-seqs=2 · replay-azure-2 (2x trace)"; without its
    configuration's label for a figure's own title, which the legend beside it leaves
    little room for."""
    suffix = repeat_suffix(row.get("repeat"))
    config = str(row.get("config_id"))
    if with_label and row.get("config_label"):
        config += f" {row['config_label']}"
    return f"{config} · {row.get('point_id')}{suffix} ({speed_text(row.get('target'))})"


def replay_figures(
    points: pd.DataFrame, run_path: Path, limit: int | None = None
) -> tuple[list[tuple[str, bytes]], list[str]]:
    """(title, PNG) of the lengths and the arrivals of each replayed point with per-request
    samples, the first `limit` points (default MAX_REPLAY_POINTS); and the titles of the
    points left out."""
    limit = MAX_REPLAY_POINTS if limit is None else limit
    replays = replay_rows(points)
    samples = replay_samples(run_path, replays)
    if samples.empty:
        return [], []
    figures: list[tuple[str, bytes]] = []
    left_out: list[str] = []
    for row in replays.to_dict(orient="records"):
        mine = point_samples(samples, row)
        if mine.empty:
            continue
        name, short = point_title(row), point_title(row, with_label=False)
        if len(figures) >= 2 * limit:
            left_out.append(name)
            continue
        lengths = draw_lengths(mine, f"request lengths: {short}")
        figures.append((f"Request lengths: {name}", figure_bytes(lengths)))
        arrivals = draw_arrivals(mine, f"arrivals: {short}")
        figures.append((f"Arrivals: {name}", figure_bytes(arrivals)))
    return figures, left_out
