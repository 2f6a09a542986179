"""The machine's speed over a run, for the report: the probe before and inside every point,
and each window's own change of speed, across configurations and repeats, with the points
the machine moved under marked. Data and rendering apart (tests assert on the data)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tunebench.points import trust
from tunebench.points.machine import is_drift

MACHINE_FIGURE = "Machine speed over the run"


def machine_speed_data(points: pd.DataFrame) -> pd.DataFrame:
    """One row per point in time order: minutes since the run's first window, its label
    (configuration, repeat, point), the probe before and inside it, the window's change of
    speed, and whether the machine moved under it. Empty when the run has no such columns."""
    wanted = ("probe_before_ms", "probe_ms", "window_change_pct")
    measured = [c for c in wanted if c in points and points[c].notna().any()]
    if points.empty or "start_time" not in points or not measured:
        return pd.DataFrame()
    frame = points.copy()
    frame["start_time"] = pd.to_numeric(frame["start_time"], errors="coerce")
    frame = frame.dropna(subset=["start_time"]).sort_values("start_time")
    if frame.empty:
        return pd.DataFrame()
    first = frame["start_time"].min()
    out = pd.DataFrame(
        {
            "minutes": (frame["start_time"] - first) / 60,
            "config": frame["config_label"].astype(str),
            "repeat": frame.get("repeat", pd.Series(1, index=frame.index)),
            "point": frame["point_id"].astype(str),
        }
    )
    for column in wanted:
        out[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else None
    out["drift"] = [
        any(is_drift(r) for r in trust.unverified_reasons(row))
        for row in frame.to_dict(orient="records")
    ]
    return out.reset_index(drop=True)


def sentinel_data(configs: list[Any], points: pd.DataFrame) -> pd.DataFrame:
    """Each configuration's and repeat's A...A sentinel (the manifest's `sentinels`, or the
    one `sentinel` of a run recorded before every repeat's was kept): minutes since the
    run's first window, its configuration's label, its change against the reading before it
    (the first point, or the sentinel before: %) and whether the machine held. Empty when
    none was measured."""
    if points.empty or "start_time" not in points:
        return pd.DataFrame()
    starts = pd.to_numeric(points["start_time"], errors="coerce").dropna()
    if starts.empty:
        return pd.DataFrame()
    first = starts.min()
    rows = []
    for entry in configs:
        records = getattr(entry, "sentinels", None) or (
            [entry.sentinel] if getattr(entry, "sentinel", None) else []
        )
        for record in records:
            if record.get("change_pct") is None or not record.get("window"):
                continue  # not compared: nothing to plot
            rows.append(
                {
                    "minutes": (float(record["window"][0]) - first) / 60,
                    "config": entry.label or entry.config_id,
                    "repeat": record.get("repeat", 1),
                    "change_pct": float(record["change_pct"]),
                    "held": bool(record.get("held", True)),
                    "inconclusive": bool(record.get("inconclusive", False)),
                }
            )
    return pd.DataFrame(rows)


def machine_speed_figure(data: pd.DataFrame, sentinels: pd.DataFrame | None = None) -> Any:
    """Two panels over the run's time: the probe (the last before each point, and inside
    it, beside the load), and each window's change of speed, the points the
    machine moved under in red, with each sentinel's change against the reading before it
    (its configuration's first point, or the sentinel before) as a diamond (red: the
    machine did not hold). The figure;
    analysis/plots.py turns it into the report's PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(9, 5), sharex=True, layout="constrained", height_ratios=(3, 2)
    )
    for config, rows in data.groupby("config", sort=False):
        if rows["probe_before_ms"].notna().any():
            top.plot(rows["minutes"], rows["probe_before_ms"], "o-", label=f"{config} before")
        if rows["probe_ms"].notna().any():
            top.plot(rows["minutes"], rows["probe_ms"], "x:", label=f"{config} inside")
    top.set_ylabel("probe (ms)")
    top.set_title(MACHINE_FIGURE)
    handles, labels = top.get_legend_handles_labels()
    if handles:  # one legend right of the panels: never over the data
        fig.legend(handles, labels, loc="outside right upper", fontsize="small", frameon=False)
    colours = ["tab:red" if moved else "tab:grey" for moved in data["drift"]]
    bottom.bar(data["minutes"], data["window_change_pct"].fillna(0), width=0.05, color=colours)
    if sentinels is not None and not sentinels.empty:
        bottom.scatter(
            sentinels["minutes"],
            sentinels["change_pct"],
            marker="D",
            color=[
                "tab:orange" if unsure else "tab:grey" if held else "tab:red"
                for held, unsure in zip(sentinels["held"], sentinels["inconclusive"])
            ],
            edgecolor="black",
            zorder=3,
            label="sentinel vs the reading before it",
        )
    bottom.axhline(0, color="black", linewidth=0.5)
    bottom.set_ylabel("change (%)")
    bottom.set_xlabel("minutes since the first window")
    bottom.set_title(
        "bars: each window's change; diamonds: each sentinel's "
        "(red: machine speed changed; orange: within noise, unsure)",
        fontsize="small",
    )
    return fig


def machine_line(name: str, points: pd.DataFrame) -> str | None:
    """One side's machine in one line for compare: the probe before its points (median and
    range) and how many points the machine moved under; None for a run without the
    columns (recorded before the machine was watched)."""
    data = machine_speed_data(points)
    if data.empty:
        return None
    probe = data["probe_before_ms"].dropna()
    speed = (
        f"probe {probe.median():.2f} ms ({probe.min():.2f}-{probe.max():.2f})"
        if not probe.empty
        else "no probe"
    )
    return f"{name}: {speed}, machine moved under {int(data['drift'].sum())} of {len(data)} points"
