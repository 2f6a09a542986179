"""Plots of a run: `*_data()` computes a tidy frame, `render_*()` draws one (PNG bytes).

Tests assert on the data; rendering only turns a frame into pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunebench.analysis.figure_kit import (
    MANY_HUES,
    figure_bytes,
    legend_outside,
    place_legend,
    setup_plotting,
    styles,
)
from tunebench.analysis.load_curves import HUE, comparing_figures
from tunebench.analysis.machine_plots import (
    MACHINE_FIGURE,
    machine_speed_data,
    machine_speed_figure,
    sentinel_data,
)

# One drawn line of a `versus_data` frame: one configuration under one kind of load. A
# concurrent sweep and a poisson sweep of one configuration are two curves; joined into
# one line, sorted by achieved rate, they zig-zag between the two.
SERIES = "series"
LINE = (SERIES, "metric")  # the columns that identify one line (colour: series, dashes: metric)
TIMESERIES_PER_FIGURE = 8
LATENCY_METRICS = {"ttft_p50_ms": "TTFT p50", "ttft_p95_ms": "TTFT p95"}
ITL_METRICS = {"itl_p50_ms": "ITL p50", "itl_p95_ms": "ITL p95"}


# -- data ---------------------------------------------------------------------------------


def versus_data(
    points: pd.DataFrame,
    metrics: dict[str, str],
    x: str = "achieved_rps",
    kinds: tuple[str, ...] | None = None,
) -> pd.DataFrame:
    """Long frame [config_label, load_kind, series, x, metric, value], each line sorted along x.

    `series` names a line: the configuration label, with " · <load kind>" after it when the
    frame holds more than one kind of load. Each (series, metric) is one line (`LINE`).
    """
    frame = points if kinds is None else points[points["load_kind"].isin(kinds)]
    present = [m for m in metrics if m in frame]
    if frame.empty or not present:
        return pd.DataFrame(columns=[HUE, "load_kind", SERIES, x, "metric", "value"])
    long = frame.melt(
        id_vars=[HUE, "load_kind", x], value_vars=present, var_name="metric", value_name="value"
    )
    long["metric"] = long["metric"].map(metrics)
    long = long.dropna(subset=[x, "value"])
    kinds_present = long["load_kind"].nunique(dropna=False)
    label = long[HUE].astype(str)
    series = label + " · " + long["load_kind"].astype(str) if kinds_present > 1 else label
    long.insert(2, SERIES, series)
    return long.sort_values([*LINE, x]).reset_index(drop=True)


def concurrency_data(points: pd.DataFrame) -> pd.DataFrame:
    """The workshop chart: median (and p95) TTFT per number of concurrent streams."""
    data = versus_data(points, LATENCY_METRICS, x="target", kinds=("concurrent",))
    return data.rename(columns={"target": "streams"})


def throughput_data(points: pd.DataFrame) -> pd.DataFrame:
    return versus_data(points, {"output_tok_s": "output tok/s"})


def pareto_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mask of points no other point beats: higher-or-equal x with lower-or-equal y, one strict."""
    mask = np.ones(len(x), dtype=bool)
    for i in range(len(x)):
        dominated = (x >= x[i]) & (y <= y[i]) & ((x > x[i]) | (y < y[i]))
        mask[i] = not dominated.any()
    return mask


def pareto_data(points: pd.DataFrame) -> pd.DataFrame:
    """[config_label, point_id, output_tok_s, ttft_p95_ms, on_front]; front over all configs."""
    frame = points.dropna(subset=["output_tok_s", "ttft_p95_ms"])
    if "valid" in frame:
        frame = frame[frame["valid"] == True]  # noqa: E712 - pandas mask
    out = frame[[HUE, "point_id", "output_tok_s", "ttft_p95_ms"]].copy()
    out["on_front"] = pareto_front(
        out["output_tok_s"].to_numpy(float), out["ttft_p95_ms"].to_numpy(float)
    )
    return out.reset_index(drop=True)


def timeseries_data(run_path: Path, points: pd.DataFrame, config_id: str) -> pd.DataFrame:
    """[seconds, series, value, point_id] for KV usage, running and waiting of one config."""
    path = Path(run_path) / "metrics" / f"{config_id}.csv"
    if not path.exists():
        return pd.DataFrame(columns=["seconds", "series", "value", "point_id"])
    series = pd.read_csv(path)
    if series.empty:
        return pd.DataFrame(columns=["seconds", "series", "value", "point_id"])
    origin = series["time"].iloc[0]
    windows = points[points["config_id"] == config_id][["point_id", "start_time", "end_time"]]
    series["point_id"] = None
    for window in windows.itertuples():
        inside = (series["time"] >= window.start_time) & (series["time"] <= window.end_time)
        series.loc[inside, "point_id"] = window.point_id
    series["seconds"] = series["time"] - origin
    series["kv_usage_pct"] = series["kv_usage"] * 100
    long = series.melt(
        id_vars=["seconds", "point_id"],
        value_vars=["kv_usage_pct", "running", "waiting"],
        var_name="series",
        value_name="value",
    )
    return long.dropna(subset=["value"]).reset_index(drop=True)


# -- rendering ----------------------------------------------------------------------------


def render_lines(
    data: pd.DataFrame, x: str, title: str, xlabel: str, ylabel: str, hue: str = SERIES
) -> bytes:
    """A `versus_data` frame as lines: colour by `hue` (a series), dashes by metric."""
    plt, sns = setup_plotting()
    hues = data[hue].nunique() if not data.empty else 0
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.set_title(title)
    if not data.empty:
        sns.lineplot(
            data=data,
            x=x,
            y="value",
            hue=hue,
            style="metric" if data["metric"].nunique() > 1 else None,
            markers=True,
            dashes=True,
            ax=ax,
            sort=True,
            estimator=None,
        )
        place_legend(ax, sns, hues, "series" if hue == SERIES else "configurations")
    ax.set(xlabel=xlabel, ylabel=ylabel)
    return figure_bytes(fig)


def draw_pareto(data: pd.DataFrame):
    """Every valid point, colour and marker by configuration, the front joined; the legend
    right of the panel."""
    plt, _sns = setup_plotting()
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    ax.set_title("Latency vs throughput (line: Pareto front)")
    if not data.empty:
        style = styles(list(data[HUE].astype(str)))
        handles, labels = [], []
        for label, part in data.groupby(HUE, sort=False):
            colour, marker = style[str(label)]
            handles.append(
                ax.scatter(
                    part["output_tok_s"],
                    part["ttft_p95_ms"],
                    color=colour,
                    marker=marker,
                    s=40,
                    label=str(label),  # names the series in the layout the PNG records
                )
            )
            labels.append(str(label))
        front = data[data["on_front"]].sort_values("output_tok_s")
        (line,) = ax.plot(
            front["output_tok_s"], front["ttft_p95_ms"], color="black", lw=1.2, zorder=0
        )
        if len(labels) <= MANY_HUES * 3:
            legend_outside(fig, [*handles, line], [*labels, "Pareto front"])
    ax.set(xlabel="output tokens/s", ylabel="TTFT p95 (ms)")
    return fig


def render_pareto(data: pd.DataFrame) -> bytes:
    return figure_bytes(draw_pareto(data))


def render_timeseries_group(data: pd.DataFrame, title: str) -> bytes:
    """Several configurations in one figure: one line each, time from each one's start."""
    plt, sns = setup_plotting()
    fig, axes = plt.subplots(3, 1, figsize=(9, 5), sharex=True, layout="constrained")
    for ax, name, label in zip(
        axes, ("kv_usage_pct", "running", "waiting"), ("KV cache %", "running", "waiting")
    ):
        for config, part in data[data["series"] == name].groupby(HUE, sort=False):
            ax.plot(part["seconds"], part["value"], lw=0.8, label=config)
        ax.set_ylabel(label)
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=6, frameon=False)
    axes[0].set_title(title)
    axes[-1].set_xlabel("seconds since the server was ready")
    return figure_bytes(fig)


def render_timeseries(data: pd.DataFrame, title: str) -> bytes:
    plt, sns = setup_plotting()
    fig, axes = plt.subplots(3, 1, figsize=(7, 5), sharex=True, layout="constrained")
    spans = [
        (g["seconds"].min(), g["seconds"].max())
        for _, g in data.dropna(subset=["point_id"]).groupby("point_id", sort=False)
    ]
    for ax, name, label in zip(
        axes, ("kv_usage_pct", "running", "waiting"), ("KV cache %", "running", "waiting")
    ):
        part = data[data["series"] == name]
        ax.plot(part["seconds"], part["value"], lw=1)
        for start, end in spans[::2]:  # shade every other point window to show boundaries
            ax.axvspan(start, end, alpha=0.08, lw=0)
        ax.set_ylabel(label)
    axes[0].set_title(title)
    axes[-1].set_xlabel("seconds since the server was ready")
    return figure_bytes(fig)


def _manifest_configs(run_path: Path) -> list[Any]:
    """The run's configuration entries, or none when its manifest cannot be read."""
    from tunebench.errors import StoreError
    from tunebench.store.manifest import Manifest

    try:
        return list(Manifest.read(run_path).configs)
    except (OSError, ValueError, StoreError):
        return []


def run_figures(points: pd.DataFrame, run_path: Path) -> list[tuple[str, bytes]]:
    """Every plot of a run as (title, PNG bytes), in report order: the curves that compare
    configurations (against the offered load, one panel per load kind), the Pareto front,
    then the server time series."""
    figures = [(title, figure_bytes(fig)) for title, fig in comparing_figures(points)]
    figures.append(("Latency-throughput Pareto", render_pareto(pareto_data(points))))
    machine = machine_speed_data(points)
    if not machine.empty:
        sentinels = sentinel_data(_manifest_configs(run_path), points)
        figures.append((MACHINE_FIGURE, figure_bytes(machine_speed_figure(machine, sentinels))))
    configs = list(dict.fromkeys(zip(points["config_id"], points[HUE])))
    if len(configs) <= TIMESERIES_PER_FIGURE:
        for config_id, label in configs:
            data = timeseries_data(run_path, points, config_id)
            if not data.empty:
                figures.append(
                    (
                        f"Server time series: {label}",
                        render_timeseries(data, f"{config_id}: {label}"),
                    )
                )
        return figures
    # Many configurations: a figure per group, one line per configuration.
    for first in range(0, len(configs), TIMESERIES_PER_FIGURE):
        group = configs[first : first + TIMESERIES_PER_FIGURE]
        frames = [timeseries_data(run_path, points, c).assign(**{HUE: label}) for c, label in group]
        data = pd.concat(frames, ignore_index=True)
        if not data.empty:
            title = f"Server time series: {group[0][0]}-{group[-1][0]}"
            figures.append((title, render_timeseries_group(data, title)))
    return figures
