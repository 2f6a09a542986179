"""The per-request evidence of replayed points, as data: lengths and arrivals.

A replay point (`load_kind` replay) stores, for each successful request in
`requests/<config>.csv`, the lengths the server counted (`prompt_tokens`,
`output_tokens`) beside the trace's lengths it was asked for (`trace_prompt_tokens`,
`trace_output_tokens`: the recorded ones times the point's `trace_length_scale`), and when
it was due (`scheduled_time`) beside when it was sent (`start_time`). These functions turn
them into tidy frames; `trace_plots.py` draws them and `report/replayed_points.py` prints them.
Every function takes the samples of one point unless it says otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunebench.analysis.frames import load_requests
from tunebench.errors import TunebenchError
from tunebench.numbers import to_float
from tunebench.points.offered import is_replay
from tunebench.points.trace import percentile

SENT, TRACE = "sent", "trace"
# what is counted -> (the server's count of what was sent, the trace's length asked for)
LENGTHS = {
    "prompt": ("prompt_tokens", "trace_prompt_tokens"),
    "output": ("output_tokens", "trace_output_tokens"),
}
POINT_KEY = ("config_id", "point_id", "repeat")
MAX_BINS = 20  # a length histogram's bins: enough for a shape, few enough to read each
# widths of an arrival bin, seconds: the narrowest that gives at most MAX_RATE_BINS bins
RATE_BIN_WIDTHS = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0)
MAX_RATE_BINS = 60


def replay_rows(points: pd.DataFrame) -> pd.DataFrame:
    """The replayed points of a run (fixed speeds and capacity probes over speed)."""
    if points.empty or "load_kind" not in points:
        return points.iloc[0:0]
    return points[points["load_kind"].map(is_replay)]


def replay_samples(run_path: Path, points: pd.DataFrame) -> pd.DataFrame:
    """The per-request samples of every replayed point that kept its schedule and lengths,
    with `lag_ms` (sent minus scheduled) added; empty when there is none."""
    replays = replay_rows(points)
    if replays.empty:
        return pd.DataFrame()
    try:
        requests = load_requests(run_path)
    except TunebenchError:  # raw reports that cannot be read: nothing per request to show
        return pd.DataFrame()
    needed = ("scheduled_time", "trace_prompt_tokens", "trace_output_tokens")
    if requests.empty or any(c not in requests for c in needed):
        return pd.DataFrame()
    requests = requests.assign(repeat=_repeats(requests))
    keys = set(zip(replays["config_id"], replays["point_id"], _repeats(replays)))
    mine = [key in keys for key in zip(*(requests[c] for c in POINT_KEY))]
    samples = requests[mine]
    samples = samples.assign(lag_ms=(samples["start_time"] - samples["scheduled_time"]) * 1000)
    return samples.reset_index(drop=True)


def repeat_of(value: Any) -> int:
    """A row's repeat as a whole number (1 where the run has no repeats)."""
    number = to_float(value)
    return int(number) if number is not None and math.isfinite(number) else 1


def repeat_suffix(value: Any) -> str:
    """The suffix of a point measured again, " r2" as `show` writes it; "" for the first."""
    repeat = repeat_of(value)
    return f" r{repeat}" if repeat != 1 else ""


def _repeats(frame: pd.DataFrame) -> list[int]:
    if "repeat" not in frame:
        return [1] * len(frame)
    return [repeat_of(r) for r in frame["repeat"]]


def point_samples(samples: pd.DataFrame, row: dict[str, Any]) -> pd.DataFrame:
    """The samples of one point row of points.csv."""
    if samples.empty:
        return samples
    repeat = repeat_of(row.get("repeat"))
    mine = (
        (samples["config_id"] == row.get("config_id"))
        & (samples["point_id"] == row.get("point_id"))
        & (samples["repeat"] == repeat)
    )
    return samples[mine]


def length_stats(samples: pd.DataFrame) -> dict[str, dict[str, dict[str, float | None]]]:
    """{prompt|output: {sent|trace: {p50, p95, max}}} of one point's requests."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for what, (sent, trace) in LENGTHS.items():
        out[what] = {}
        for source, column in ((SENT, sent), (TRACE, trace)):
            values = _numbers(samples, column)
            out[what][source] = {
                "p50": percentile(values, 0.50) if values else None,
                "p95": percentile(values, 0.95) if values else None,
                "max": max(values) if values else None,
            }
    return out


def _numbers(samples: pd.DataFrame, column: str) -> list[float]:
    if samples.empty or column not in samples:
        return []
    return [float(v) for v in pd.to_numeric(samples[column], errors="coerce").dropna()]


def length_histogram(samples: pd.DataFrame, what: str) -> pd.DataFrame:
    """[source, left, right, centre, count] of the `what` (prompt | output) tokens of one
    point's requests, sent and trace over the same bins of whole tokens: each source's
    counts add up to its requests."""
    sent, trace = (_numbers(samples, c) for c in LENGTHS[what])
    everything = sent + trace
    if not everything:
        return pd.DataFrame(columns=["source", "left", "right", "centre", "count"])
    low, high = math.floor(min(everything)), math.floor(max(everything)) + 1
    width = max(1, math.ceil((high - low) / MAX_BINS))
    edges = np.arange(low, high + width, width, dtype=float)
    rows = []
    for source, values in ((TRACE, trace), (SENT, sent)):
        counts, _ = np.histogram(values, bins=edges)
        for left, right, count in zip(edges[:-1], edges[1:], counts):
            rows.append((source, left, right, (left + right - 1) / 2, int(count)))
    return pd.DataFrame(rows, columns=["source", "left", "right", "centre", "count"])


def point_origin(samples: pd.DataFrame) -> float | None:
    """Epoch second of the point's first due request: its arrivals count from there."""
    if samples.empty or "scheduled_time" not in samples:
        return None
    due = pd.to_numeric(samples["scheduled_time"], errors="coerce").dropna()
    return float(due.min()) if not due.empty else None


def rate_bin_seconds(span_s: float) -> float:
    """The narrowest bin in RATE_BIN_WIDTHS that cuts `span_s` into at most MAX_RATE_BINS."""
    for width in RATE_BIN_WIDTHS:
        if span_s / width <= MAX_RATE_BINS:
            return width
    return RATE_BIN_WIDTHS[-1]


def arrival_rates(samples: pd.DataFrame) -> pd.DataFrame:
    """[source, seconds, rps] of one point: requests per second scheduled and sent in each
    bin of its window (seconds: the bin's middle, from the first due request)."""
    origin = point_origin(samples)
    if origin is None:
        return pd.DataFrame(columns=["source", "seconds", "rps"])
    due = pd.to_numeric(samples["scheduled_time"], errors="coerce").dropna() - origin
    sent = pd.to_numeric(samples["start_time"], errors="coerce").dropna() - origin
    span = max(float(due.max()), float(sent.max()) if not sent.empty else 0.0)
    width = rate_bin_seconds(span)
    # the first due request in the middle of the first bin: a trace whose requests come on
    # whole seconds has them mid-bin, so one sent a few ms late still counts in its own bin
    first = min(0.0, float(sent.min()) if not sent.empty else 0.0) - width / 2
    edges = np.arange(first, span + width, width)  # up to the bin holding the last request
    rows = []
    for source, times in (("scheduled", due), (SENT, sent)):
        counts, _ = np.histogram(times, bins=edges)
        for left, count in zip(edges[:-1], counts):
            rows.append((source, left + width / 2, count / width))
    return pd.DataFrame(rows, columns=["source", "seconds", "rps"])


def arrival_lags(samples: pd.DataFrame) -> pd.DataFrame:
    """[seconds, lag_ms] of one point: each request's send lag against when it was due
    (seconds from the first due request), in due order."""
    origin = point_origin(samples)
    if origin is None or "lag_ms" not in samples:
        return pd.DataFrame(columns=["seconds", "lag_ms"])
    frame = pd.DataFrame(
        {
            "seconds": pd.to_numeric(samples["scheduled_time"], errors="coerce") - origin,
            "lag_ms": pd.to_numeric(samples["lag_ms"], errors="coerce"),
        }
    ).dropna()
    return frame.sort_values("seconds").reset_index(drop=True)
