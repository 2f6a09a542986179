"""compare on configurations of one run measured in the same rounds (a sweep's repeats): the
paired t over each round's log ratio (analysis/stats.py `paired_rounds_change`).

Graded on a generator the method does not share: both configurations' points in a round are
multiplied by that round's machine factor (a drift, lognormal with a 15% sd) besides each
point's own run-to-run noise (3%), and B by a known effect, at 4 rounds (the fewest a
paired compare uses: stats.PAIRED_MIN_ROUNDS; with 3, Welch's t over the repeats):
- A/A (no effect): the share of compares that call a change stays at the nominal 5%;
- power: a 15% slowdown is found in most seeds by the paired test, where Welch's t over the
  same repeats (which cannot know the rounds) sees the drift as noise and misses it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tunebench.analysis import stats
from tunebench.analysis.compare import Side, compare_sides
from tunebench.analysis.compare_metrics import METRICS
from tunebench.testing.latencies import stream_side

ITL = METRICS["itl_p50"]
ROUNDS = 4


def _drifted_pair(
    seed: int, effect: float, paired: bool = True, rounds: int = ROUNDS
) -> list[Side]:
    rng = np.random.default_rng(10_000 + seed)
    drift = np.exp(rng.normal(0, 0.15, rounds))
    sides = []
    for name, factor, offset in (("a", 1.0, 0), ("b", 1 + effect, 1)):
        found = stream_side(name, 2 * seed + offset, 0.0, repeats=rounds, run_sd=0.03)
        points = found.points.copy()
        by_round = points["repeat"].map(lambda r: drift[int(r) - 1])
        points["itl_p50_ms"] = points["itl_p50_ms"] * by_round * factor
        if paired:
            points["run_id"] = "one-run"
        else:  # as two runs: nothing says which repeats were measured together
            points["run_id"] = f"run-{name}"
        sides.append(Side(found.name, points, found.requests))
    return sides


def _called(rows: pd.DataFrame) -> bool:
    per_point = rows[rows["point"] != "all points"]
    return bool(per_point["verdict"].isin(["worse", "better"]).any())


def test_paired_rounds_are_used_within_one_run_and_not_across_runs():
    rows = compare_sides(_drifted_pair(0, 0.0), [ITL]).rows
    assert set(rows["method"]) == {stats.PAIRED_METHOD}
    over_all = rows[rows["point"] == "all points"].iloc[0]
    assert over_all["note"] == "geometric mean over 3 points per round"
    apart = compare_sides(_drifted_pair(0, 0.0, paired=False), [ITL]).rows
    assert set(apart["method"]) == {stats.REPEATS_METHOD}
    # 3 rounds: a paired t of 2 degrees of freedom loses to Welch on a still machine
    three = compare_sides(_drifted_pair(0, 0.0, rounds=3), [ITL]).rows
    assert set(three["method"]) == {stats.REPEATS_METHOD}


def test_a_drift_shared_by_a_round_cancels_a_a_stays_at_five_percent():
    seeds = 120
    # one point's row per compare: three points share their rounds' drift, so the rows of
    # one compare are not independent; the first point alone is graded
    called = 0
    for seed in range(seeds):
        rows = compare_sides(_drifted_pair(seed, 0.0), [ITL]).rows
        first = rows[rows["point"] == rows["point"].iloc[0]]
        called += _called(first)
    assert called / seeds <= 0.09, called  # nominal 5%; 120 seeds' binomial noise allowed


def test_a_known_slowdown_is_found_through_the_drift():
    seeds = 60
    paired = welch = 0
    for seed in range(seeds):
        rows = compare_sides(_drifted_pair(seed, 0.15), [ITL]).rows
        paired += (rows[rows["point"] != "all points"]["verdict"] == "worse").any()
        rows = compare_sides(_drifted_pair(seed, 0.15, paired=False), [ITL]).rows
        welch += (rows[rows["point"] != "all points"]["verdict"] == "worse").any()
    assert paired / seeds >= 0.8, (paired, welch)
    assert paired > welch + 0.3 * seeds, (paired, welch)


def test_paired_rounds_need_two_rounds():
    assert not stats.paired_rounds_change([(1.0, 1.1)]).available
    found = stats.paired_rounds_change([(1.0, 1.2), (2.0, 2.4), (0.5, 0.6)])
    assert found.available and found.change is not None and abs(found.change - 0.2) < 1e-9
