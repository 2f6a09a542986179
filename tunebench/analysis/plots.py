"""Plots of a run: `*_data()` computes a tidy frame, `render_*()` draws one (PNG bytes).

Tests assert on the data; rendering only turns a frame into pixels.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

HUE = "config_label"
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


def _figure_bytes(fig) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    # A constrained layout instead of bbox_inches="tight": the latter draws every figure twice.
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    return buffer.getvalue()


def _setup():
    import matplotlib

    matplotlib.use("Agg")  # no display; PNGs only
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    return plt, sns


MANY_HUES = 10  # beyond this a legend says nothing; the summary table names the lines


def _place_legend(ax, sns, hues: int, what: str = "configurations") -> None:
    if hues > MANY_HUES and ax.get_legend() is not None:
        ax.get_legend().remove()
        ax.set_title(f"{ax.get_title()} ({hues} {what}; legend omitted)")


def render_lines(
    data: pd.DataFrame, x: str, title: str, xlabel: str, ylabel: str, hue: str = SERIES
) -> bytes:
    """A `versus_data` frame as lines: colour by `hue` (a series), dashes by metric."""
    plt, sns = _setup()
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
        _place_legend(ax, sns, hues, "series" if hue == SERIES else "configurations")
    ax.set(xlabel=xlabel, ylabel=ylabel)
    return _figure_bytes(fig)


def render_pareto(data: pd.DataFrame) -> bytes:
    plt, sns = _setup()
    hues = data[HUE].nunique() if not data.empty else 0
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.set_title("Latency vs throughput (line: Pareto front)")
    if not data.empty:
        sns.scatterplot(data=data, x="output_tok_s", y="ttft_p95_ms", hue=HUE, ax=ax, s=50)
        front = data[data["on_front"]].sort_values("output_tok_s")
        ax.plot(
            front["output_tok_s"],
            front["ttft_p95_ms"],
            color="black",
            lw=1.5,
            label="Pareto front",
            zorder=0,
        )
        ax.legend(fontsize="small")
        _place_legend(ax, sns, hues)
    ax.set(xlabel="output tokens/s", ylabel="TTFT p95 (ms)")
    return _figure_bytes(fig)


def render_timeseries_group(data: pd.DataFrame, title: str) -> bytes:
    """Several configurations in one figure: one line each, time from each one's start."""
    plt, sns = _setup()
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
    return _figure_bytes(fig)


def render_timeseries(data: pd.DataFrame, title: str) -> bytes:
    plt, sns = _setup()
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
    return _figure_bytes(fig)


def run_figures(points: pd.DataFrame, run_path: Path) -> list[tuple[str, bytes]]:
    """Every plot of a run as (title, PNG bytes), in report order."""
    figures = [
        (
            "TTFT vs achieved request rate",
            render_lines(
                versus_data(points, LATENCY_METRICS),
                "achieved_rps",
                "TTFT vs achieved request rate",
                "requests/s",
                "ms",
            ),
        ),
    ]
    concurrency = concurrency_data(points)
    if not concurrency.empty:
        figures.append(
            (
                "TTFT per number of concurrent streams",
                render_lines(
                    concurrency,
                    "streams",
                    "TTFT per concurrent streams",
                    "concurrent streams",
                    "ms",
                ),
            )
        )
    figures += [
        (
            "ITL vs achieved request rate",
            render_lines(
                versus_data(points, ITL_METRICS),
                "achieved_rps",
                "ITL vs achieved request rate",
                "requests/s",
                "ms",
            ),
        ),
        (
            "Output tokens/s vs achieved request rate",
            render_lines(
                throughput_data(points),
                "achieved_rps",
                "Output throughput",
                "requests/s",
                "tokens/s",
            ),
        ),
        ("Latency-throughput Pareto", render_pareto(pareto_data(points))),
    ]
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
