"""When two configurations tie by the best rule's own evidence, the next figure that
separates them: the largest difference `compare` finds significant between them over all
the points they share, latency first (without per-request samples: the largest measured
difference, unconfirmed). analysis/best.py names its winner best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tunebench.analysis.compare import (
    ALL_POINTS,
    NO_CHANGE,
    SIGNIFICANT_BETTER,
    SIGNIFICANT_WORSE,
    compare_sides,
)
from tunebench.analysis.compare_metrics import METRICS
from tunebench.analysis.frames import load_requests, load_run
from tunebench.analysis.sides import Side
from tunebench.errors import TunebenchError
from tunebench.numbers import to_float
from tunebench.points.offered import is_replay, replay_key, speed_text
from tunebench.spec.load_kind import LoadKind


@dataclass(frozen=True)
class SeparatingFigure:
    """ "at 4 streams c2 mns=8 has 23% lower TTFT p95": the text, the winner (its label and
    configuration id) and whether compare confirmed the difference with an interval."""

    text: str
    winner_label: str
    winner_id: str | None
    confirmed: bool


# The figures that may decide a tie, latency first: a configuration that sustains the same
# load with a fraction of the wait is the one a user wants.
DECIDING_METRICS = ("ttft_p95", "ttft_p50", "itl_p95", "e2e_p95", "output_tok_s")


def config_sides(path: Path, config_ids: list[str]) -> list[Side]:
    """One compare side per configuration: its valid points and its requests."""
    points = load_run(path)
    try:
        requests = load_requests(path)
    except TunebenchError:  # raw reports not kept: the figures go without intervals
        requests = pd.DataFrame(columns=["config_id", "point_id"])
    sides = []
    for config_id in config_ids:
        mine = points[(points["config_id"] == config_id) & (points["valid"] == True)]  # noqa: E712
        label = str(mine["config_label"].iloc[0]) if not mine.empty else config_id
        sides.append(Side(label, mine, requests[requests["config_id"] == config_id]))
    return sides


def load_text(kind: Any, target: Any, point: str) -> str:
    """Where a point loaded the server, for a sentence: "4 streams", "2 req/s"."""
    number = to_float(target)
    if number is None:
        return str(point)
    if kind in LoadKind.STREAM:
        return f"{number:g} stream{'' if number == 1 else 's'}"
    if kind in LoadKind.RATE:
        return f"{number:g} req/s"
    if is_replay(kind):
        # compare's aligned point already names trace and speed; a point id does not
        return point if point.endswith(speed_text(number)) else replay_key(point, number)
    return str(point)


def _factor(a: float, b: float, higher_is_better: bool) -> str:
    """How much better the better of a and b is: "5.4x lower", "23% higher"."""
    small, large = sorted((a, b))
    ratio = large / small
    word = "higher" if higher_is_better else "lower"
    if ratio >= 2:
        return f"{ratio:.2g}x {word}" if ratio < 10 else f"{ratio:.0f}x {word}"
    change = (1 - small / large) if not higher_is_better else (ratio - 1)
    return f"{100 * change:.0f}% {word}"


def separating_figure(path: Path, config_ids: list[str]) -> SeparatingFigure | None:
    """The figure that separates the tied configurations `config_ids` of the run at `path`
    (the first is the rule's best), or None when no measured figure does."""
    sides = config_sides(path, config_ids)
    ids = {side.name: config_id for side, config_id in zip(sides, config_ids)}
    try:
        result = compare_sides(sides, [METRICS[m] for m in DECIDING_METRICS])
    except TunebenchError:  # no point in common
        result = None
    rows = result.rows[result.rows["point"] != ALL_POINTS] if result is not None else pd.DataFrame()
    chosen, confirmed = None, True
    if not rows.empty:
        numbers = rows.assign(
            a=pd.to_numeric(rows["a"], errors="coerce"), b=pd.to_numeric(rows["b"], errors="coerce")
        )
        numbers = numbers[(numbers["a"] > 0) & (numbers["b"] > 0)]
        numbers = numbers.assign(size=(numbers["b"] / numbers["a"]).map(lambda r: abs(math.log(r))))
        significant = numbers[numbers["verdict"].isin((SIGNIFICANT_BETTER, SIGNIFICANT_WORSE))]
        if not significant.empty:
            chosen = significant.loc[significant["size"].idxmax()]
        elif not numbers.empty and not numbers["verdict"].eq(NO_CHANGE).any():
            # nothing could be judged (no per-request samples): the largest difference
            chosen, confirmed = numbers.loc[numbers["size"].idxmax()], False
    if chosen is None:
        return None
    metric = METRICS[str(chosen["metric"])]
    b_better = (chosen["b"] > chosen["a"]) == metric.higher_is_better
    winner_name = str(chosen["candidate"] if b_better else chosen["baseline"])
    where = load_text(chosen["load_kind"], chosen["target"], str(chosen["point"]))
    label = metric.label.removesuffix(" ms").removesuffix(" s")
    text = (
        f"at {where} {winner_name} has "
        f"{_factor(float(chosen['a']), float(chosen['b']), metric.higher_is_better)} {label}"
    )
    return SeparatingFigure(text, winner_name, ids.get(winner_name), confirmed)
