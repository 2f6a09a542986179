"""Plots of a run: `*_data()` computes a tidy frame, `render_*()` draws one (PNG bytes).

Tests assert on the data; rendering only turns a frame into pixels.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunebench.analysis.machine_plots import (
    MACHINE_FIGURE,
    machine_speed_data,
    machine_speed_figure,
    sentinel_data,
)
from tunebench.points.offered import REPLAY, SPEED_AXIS, load_panel

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


# The PNG text chunk that carries where a figure put its panels, legends and series, in
# the image's own pixels: a test of the report reads what a person sees from the report's
# own images instead of trusting the code that placed them (tunebench/testing/plot_layout.py).
LAYOUT_KEY = "tunebench-layout"


def _figure_bytes(fig) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    recorded: dict[str, Any] = {}
    # recorded while the PNG is drawn: the positions the constrained layout settled on, at
    # the saved image's dpi (after savefig the figure is back at its own dpi)
    hook = fig.canvas.mpl_connect(
        "draw_event", lambda event: recorded.update(_layout(fig, event.renderer))
    )
    # A constrained layout instead of bbox_inches="tight": the latter draws every figure twice.
    fig.savefig(buffer, format="png", dpi=80)
    fig.canvas.mpl_disconnect(hook)
    plt.close(fig)
    png = buffer.getvalue()
    return _with_text_chunk(png, LAYOUT_KEY, json.dumps(recorded, separators=(",", ":")))


def _with_text_chunk(png: bytes, key: str, text: str) -> bytes:
    """`png` with a tEXt chunk before its IEND (the last 12 bytes of every PNG)."""
    data = key.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = b"tEXt" + data
    crc = struct.pack(">I", zlib.crc32(chunk) & 0xFFFFFFFF)
    return png[:-12] + struct.pack(">I", len(data)) + chunk + crc + png[-12:]


def _radius(fig, size_pt: float, marker: Any) -> float:
    """Half a marker's width in the image's pixels (0 for a line without markers)."""
    if marker in (None, "None", "none", "", " "):
        return 0.0
    return round(size_pt * fig.dpi / 72 / 2, 1)


def _layout(fig, renderer) -> dict[str, Any]:
    """Panels, legends and labelled series of `fig` as drawn: boxes [left, top, right,
    bottom] and points [x, y] in image pixels from the top left; each series with its data
    values, colour and marker (a series is what a legend names: a line or a scatter whose
    label does not start with "_")."""
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_hex

    height = fig.bbox.height

    def box(extent) -> list[float]:
        return [
            round(extent.x0, 1),
            round(height - extent.y1, 1),
            round(extent.x1, 1),
            round(height - extent.y0, 1),
        ]

    def pixels(ax, xy: np.ndarray) -> list[list[float]]:
        at = ax.transData.transform(xy)
        return [[round(x, 1), round(height - y, 1)] for x, y in at]

    axes, series = [], []
    for index, ax in enumerate(a for a in fig.axes if a.get_visible()):
        axes.append(
            {
                "box": box(ax.get_window_extent(renderer)),
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
            }
        )
        for line in ax.get_lines():
            if line.get_label().startswith("_") or not line.get_visible():
                continue
            xy = np.asarray(line.get_xydata(), dtype=float)
            xy = xy[np.isfinite(xy).all(axis=1)]
            face = line.get_markerfacecolor()
            series.append(
                {
                    "axes": index,
                    "label": line.get_label(),
                    "colour": to_hex(line.get_color()),
                    "marker": str(line.get_marker()),
                    "filled": not (isinstance(face, str) and face == "none"),
                    "size": float(line.get_markersize()),
                    "radius": _radius(fig, line.get_markersize(), line.get_marker()),
                    "clipped": bool(line.get_clip_on()),
                    "data": np.round(xy, 4).tolist(),
                    "pixels": pixels(ax, xy),
                }
            )
        for collection in ax.collections:
            if not isinstance(collection, PathCollection) or not collection.get_visible():
                continue
            if collection.get_label().startswith("_"):
                continue
            xy = np.asarray(collection.get_offsets(), dtype=float)
            xy = xy[np.isfinite(xy).all(axis=1)]
            paths = collection.get_paths()
            shape = paths[0].vertices.round(3).tobytes() if paths else b""
            faces = collection.get_facecolor()
            sizes = collection.get_sizes()
            size = float(np.sqrt(sizes[0])) if len(sizes) else 0.0  # s is the area in pt²
            series.append(
                {
                    "axes": index,
                    "label": collection.get_label(),
                    "colour": to_hex(faces[0]) if len(faces) else "none",
                    # a scatter's marker is a path: its vertices tell two shapes apart
                    "marker": hashlib.sha1(shape).hexdigest()[:8],
                    "filled": bool(len(faces)),
                    "size": size,
                    "radius": _radius(fig, size, "o"),
                    "clipped": bool(collection.get_clip_on()),
                    "data": np.round(xy, 4).tolist(),
                    "pixels": pixels(ax, xy),
                }
            )
    legends = [*fig.legends, *(a.get_legend() for a in fig.axes if a.get_legend() is not None)]
    return {
        "size": [round(fig.bbox.width, 1), round(height, 1)],
        "axes": axes,
        "legends": [
            {
                "box": box(legend.get_window_extent(renderer)),
                "labels": [t.get_text() for t in legend.get_texts()],
            }
            for legend in legends
        ],
        "series": series,
    }


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


def draw_pareto(data: pd.DataFrame):
    """Every valid point, colour and marker by configuration, the front joined; the legend
    right of the panel."""
    plt, _sns = _setup()
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
            _legend_outside(fig, [*handles, line], [*labels, "Pareto front"])
    ax.set(xlabel="output tokens/s", ylabel="TTFT p95 (ms)")
    return fig


def render_pareto(data: pd.DataFrame) -> bytes:
    return _figure_bytes(draw_pareto(data))


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


# -- plots that compare: curves against the offered load ----------------------------------

# The offered load of each kind, as its x axis names it. A point without a numeric target
# (synchronous, a sweep's steps) has no place on these axes. A replay's target is a speed of
# its trace: a panel of its own per trace (`PANEL`), never on a req/s axis.
LOAD_AXES = {
    "concurrent": "concurrent streams (offered)",
    "throughput": "concurrent streams (offered)",
    "poisson": "request rate offered (req/s)",
    "constant": "request rate offered (req/s)",
    REPLAY: SPEED_AXIS,
}
PANEL = "panel"  # the load kind, or "replay <trace>": one panel each
CURVE_COLUMNS = (
    "output_tok_s",
    "achieved_rps",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "itl_p50_ms",
    "itl_p95_ms",
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# tab10 without its grey (index 7): the grid and the bands are grey
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79",
)  # fmt: skip


def styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    """label -> (colour, marker), a different pair for every label: colours and markers
    step together, so two configurations differ in both while there are colours left
    and in at least one up to len(PALETTE) x len(MARKERS) configurations."""
    out = {}
    for index, label in enumerate(dict.fromkeys(labels)):
        colour = PALETTE[index % len(PALETTE)]
        marker = MARKERS[(index + index // len(PALETTE)) % len(MARKERS)]
        out[label] = (colour, marker)
    return out


def load_curves(points: pd.DataFrame, hue: str = HUE) -> pd.DataFrame:
    """[hue, load_kind, target, order, *CURVE_COLUMNS, panel]: each configuration's valid
    points of each load kind in the order of the load offered (repeats averaged), so a curve
    is drawn from light load to heavy load even where the achieved throughput falls back.
    Replays of different traces are different loads: a panel (and curve) per trace."""
    columns = [c for c in CURVE_COLUMNS if c in points]
    out_columns = [hue, "load_kind", "target", "order", *columns, PANEL]
    if points.empty or "target" not in points:
        return pd.DataFrame(columns=out_columns)
    frame = points[points["load_kind"].isin(LOAD_AXES) & points["target"].notna()]
    if "valid" in frame:
        frame = frame[frame["valid"] == True]  # noqa: E712 - pandas mask
    if frame.empty:
        return pd.DataFrame(columns=out_columns)
    frame = frame.assign(
        target=pd.to_numeric(frame["target"], errors="coerce"),
        **{PANEL: [load_panel(k, p) for k, p in zip(frame["load_kind"], _point_ids(frame))]},
    )
    numbers = frame[[hue, "load_kind", PANEL, "target"]].join(
        frame[columns].apply(pd.to_numeric, errors="coerce")
    )
    mean = numbers.groupby([hue, "load_kind", PANEL, "target"], sort=False).mean().reset_index()
    mean = mean.sort_values(["load_kind", PANEL, hue, "target"], kind="stable")
    mean["order"] = mean.groupby([hue, "load_kind", PANEL]).cumcount()
    return mean[out_columns].reset_index(drop=True)


def _point_ids(frame: pd.DataFrame) -> list[Any]:
    return list(frame["point_id"]) if "point_id" in frame else [None] * len(frame)


def _panels(data: pd.DataFrame) -> list[tuple[str, str]]:
    """(load kind, panel) of every panel to draw, in LOAD_AXES order, a replay's per trace."""
    panels = data[PANEL] if PANEL in data else data["load_kind"]
    present = list(dict.fromkeys(zip(data["load_kind"], panels)))
    return [(kind, panel) for kind in LOAD_AXES for k, panel in present if k == kind]


def _legend_outside(fig, handles, labels) -> None:
    """One legend for the figure, right of every panel: never over the data."""
    fig.legend(handles, labels, loc="outside right upper", fontsize="small", frameon=False)


def draw_curves(
    curves: pd.DataFrame,
    y: str,
    title: str,
    ylabel: str,
    band: str | None = None,
    x: str = "target",
    xlabel: str | None = None,
    hue: str = HUE,
    marks: pd.DataFrame | None = None,
    mark_column: str | None = None,
):
    """A figure with one panel per load kind: each configuration's `y` against the offered
    load (or `x`), in load order, colour and marker its own; with `band` the area between
    `y` and `band` (p50 to p95) shaded and `band` dashed. `marks`: [hue, load_kind, target,
    text, colour] drawn beside those points of `mark_column` (default `y`): the gate's
    verdicts. Every other series has hollow markers, so a series drawn over another with
    the same numbers still shows. Returns the Figure."""
    plt, _sns = _setup()
    data = curves.dropna(subset=[y, x]) if y in curves and x in curves else curves.iloc[0:0]
    panels = _panels(data) or [("none", "none")]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.2 * len(panels) + 2.2, 4), layout="constrained", squeeze=False
    )
    style = styles(list(curves[hue].astype(str)))
    handles: dict[str, Any] = {}
    for ax, (kind, panel) in zip(axes[0], panels):
        part = data[data[PANEL] == panel] if PANEL in data else data[data["load_kind"] == kind]
        for label, line in part.groupby(hue, sort=False):
            line = line.sort_values("order")
            colour, marker = style[str(label)]
            index = list(style).index(str(label))
            hollow = index % 2 == 1
            # drawn in turn, each a little thinner: one on top of another still shows a rim
            (handle,) = ax.plot(
                line[x],
                line[y],
                color=colour,
                marker=marker,
                lw=max(1.0, 2.8 - 0.4 * index),
                ms=max(4.0, 11 - 1.5 * index),
                mfc="none" if hollow else colour,
                label=str(label),
                # whole markers at the panel's edge: a short TTFT at 1 stream sits on the
                # axis at 0, and clipped there half a marker reads as none or another shape
                clip_on=False,
            )
            handles.setdefault(str(label), handle)
            if band and band in line and line[band].notna().any():
                ax.plot(line[x], line[band], color=colour, lw=1, ls="--", marker=marker, ms=3)
                ax.fill_between(
                    line[x].to_numpy(float),
                    line[y].to_numpy(float),
                    line[band].to_numpy(float),
                    color=colour,
                    alpha=0.12,
                    lw=0,
                )
        if marks is not None and not marks.empty:
            mine = marks[PANEL] == panel if PANEL in marks else marks["load_kind"] == kind
            for mark in marks[mine].itertuples():
                spot = part[(part[hue] == getattr(mark, hue)) & (part["target"] == mark.target)]
                if spot.empty:
                    continue
                at = mark_column if mark_column in spot else y
                ax.annotate(
                    mark.text,
                    (float(spot[x].iloc[0]), float(spot[at].iloc[0])),
                    xytext=(0, 7),
                    textcoords="offset points",
                    ha="center",
                    fontsize=7,
                    color=mark.colour,
                )
        ax.set_title(f"{panel} load" if kind != "none" else "no point with an offered load")
        ax.set_xlabel(xlabel or LOAD_AXES.get(kind, ""))
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        # headroom over the highest point: autoscaling pads by the data's spread, which at
        # a single rate (one point per configuration) is almost none, leaving the top
        # marker on the frame and no room for a verdict mark above it
        ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    fig.suptitle(title, x=0.01, ha="left")
    if handles:
        labels = list(handles)
        extra_handles = list(handles.values())
        if band:
            from matplotlib.lines import Line2D

            extra_handles += [
                Line2D([], [], color="black", lw=1.6),
                Line2D([], [], color="black", lw=1, ls="--"),
            ]
            labels += [_short(y), f"{_short(band)} (shaded between)"]
        if len(handles) <= MANY_HUES * 3:
            _legend_outside(fig, extra_handles, labels)
    return fig


CURVE_NAMES = {
    "ttft_p50_ms": "TTFT p50",
    "ttft_p95_ms": "TTFT p95",
    "itl_p50_ms": "ITL p50",
    "itl_p95_ms": "ITL p95",
    "output_tok_s": "output tok/s",
    "achieved_rps": "req/s",
}


def _short(column: str) -> str:
    return CURVE_NAMES.get(column, column)


def render_curves(*args, **kwargs) -> bytes:
    return _figure_bytes(draw_curves(*args, **kwargs))


def comparing_figures(points: pd.DataFrame, hue: str = HUE, marks=None) -> list[tuple[str, Any]]:
    """The figures that compare configurations (or compared runs): (title, Figure)."""
    curves = load_curves(points, hue)
    if curves.empty:
        return []
    out = [
        (
            "Output throughput vs offered load",
            draw_curves(
                curves,
                "output_tok_s",
                "Output throughput vs offered load",
                "output tokens/s",
                hue=hue,
                marks=None if marks is None else marks.get("output_tok_s"),
            ),
        ),
        (
            "TTFT vs offered load",
            draw_curves(
                curves,
                "ttft_p50_ms",
                "TTFT p50 (line) to p95 (dashed) vs offered load",
                "ms",
                band="ttft_p95_ms",
                hue=hue,
                marks=None if marks is None else marks.get("ttft_p95_ms"),
                mark_column="ttft_p95_ms",
            ),
        ),
        (
            "TTFT p95 vs achieved throughput, in load order",
            draw_curves(
                curves,
                "ttft_p95_ms",
                "TTFT p95 vs achieved output throughput (points joined in load order)",
                "ms",
                x="output_tok_s",
                xlabel="output tokens/s achieved",
                hue=hue,
            ),
        ),
        (
            "ITL vs offered load",
            draw_curves(
                curves,
                "itl_p50_ms",
                "ITL p50 (line) to p95 (dashed) vs offered load",
                "ms",
                band="itl_p95_ms",
                hue=hue,
            ),
        ),
    ]
    return out


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
    figures = [(title, _figure_bytes(fig)) for title, fig in comparing_figures(points)]
    figures.append(("Latency-throughput Pareto", render_pareto(pareto_data(points))))
    machine = machine_speed_data(points)
    if not machine.empty:
        sentinels = sentinel_data(_manifest_configs(run_path), points)
        figures.append((MACHINE_FIGURE, _figure_bytes(machine_speed_figure(machine, sentinels))))
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
