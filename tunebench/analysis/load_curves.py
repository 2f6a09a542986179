"""Curves that compare configurations (or compared runs) against the offered load: one
panel per load kind (a replay's per trace), each configuration's points in load order, the
gate's verdicts marked beside them."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tunebench.analysis.figure_kit import (
    MANY_HUES,
    figure_bytes,
    legend_outside,
    setup_plotting,
    styles,
)
from tunebench.points.offered import REPLAY, SPEED_AXIS, load_panel

HUE = "config_label"

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
    plt, _sns = setup_plotting()
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
            legend_outside(fig, extra_handles, labels)
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
    return figure_bytes(draw_curves(*args, **kwargs))


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
