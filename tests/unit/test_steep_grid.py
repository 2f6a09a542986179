"""The recorded grid with a steep SLO (benchmarks/grid/grid-cpu-steep.yaml,
tests/fixtures/grid-cpu-steep) and the facts docs/benchmarks.md reads from it, each read with
csv from the recording itself, not through the code that grades the search."""

from __future__ import annotations

import csv
import statistics
import subprocess
import sys
from collections import defaultdict

import yaml

from benchmarks.grid.truths import ceiling, decode_ms, long_truths
from tests.conftest import FIXTURES, REPO
from tunebench.points.samples import needed
from tunebench.recorded.noisy import RecordedGrid

STEEP = FIXTURES / "grid-cpu-steep"
SPEC = yaml.safe_load((REPO / "benchmarks/grid/grid-cpu-steep.yaml").read_text())
SLO_MS = 250


def test_every_window_holds_six_times_the_requests_a_median_needs():
    assert SPEC["slo"] == {"ttft_ms": {"p50": SLO_MS}}
    windows = [p for p in SPEC["load"]["profiles"] if p["kind"] == "poisson"]
    rates = [p["rate"] for p in windows]
    assert rates == sorted(rates) and rates[-1] == 18
    assert all(p["rate"] * p["max_seconds"] >= 6 * needed(0.5) for p in windows)


def _medians(runs, label=None) -> dict[float, tuple[float, int]]:
    """Pooled TTFT median and request count by poisson rate over `runs`, from requests/."""
    pooled: dict[float, list[float]] = defaultdict(list)
    for run in runs:
        targets = {
            r["point_id"]: float(r["target"])
            for r in csv.DictReader((run / "points.csv").open())
            if r["load_kind"] == "poisson" and (label is None or r["config_label"] == label)
        }
        for path in (run / "requests").glob("*.csv"):
            for row in csv.DictReader(path.open()):
                if row["point_id"] in targets:
                    pooled[targets[row["point_id"]]].append(float(row["ttft_ms"]))
    return {rate: (statistics.median(v), len(v)) for rate, v in sorted(pooled.items())}


def test_the_truth_lies_between_the_long_windows_around_the_first_miss():
    grid = RecordedGrid(STEEP / "played")
    truths, said = long_truths(sorted(STEEP.glob("truth-*")), grid.configs, grid.slo)
    for label in ("mns1-mnbt128", "mns2-mnbt128"):
        medians = _medians(sorted(STEEP.glob(f"truth-?-{label}")))
        first_miss = min(rate for rate, (p50, _) in medians.items() if p50 > SLO_MS)
        below = max(rate for rate in medians if rate < first_miss)
        assert truths[label].kind == "exact"
        assert below < truths[label].rate < first_miss
        assert medians[below][1] > 500 and medians[first_miss][1] > 500  # two long starts
    # max-num-seqs 1 x 32: the pooled long windows met the median at every rate measured
    medians = _medians(sorted(STEEP.glob("truth-?-mns1-mnbt32")))
    assert max(p50 for p50, _ in medians.values()) <= SLO_MS
    assert (truths["mns1-mnbt32"].kind, truths["mns1-mnbt32"].rate) == ("at-least", 5.66)
    assert "each alone: below 6.38, 7.13 req/s" in said["mns1-mnbt128"]


def test_the_same_load_decoded_at_different_speeds_on_different_starts():
    # the first recording: one start of max-num-seqs 1 x 32 decoded every token ~45% slower
    # at 2 and 3 req/s than the other (points.csv's mean inter-token latency)
    rows = list(csv.DictReader((STEEP / "first-recording/points.csv").open()))
    itl = defaultdict(list)
    for row in rows:
        if (
            row["config_label"] == "mns1-mnbt32"
            and row["load_kind"] == "poisson"
            and float(row["target"]) in (2.0, 3.0)
        ):
            itl[row["repeat"]].append(float(row["itl_mean_ms"]))
    slow, fast = statistics.mean(itl["1"]), statistics.mean(itl["2"])
    assert slow / fast > 1.35
    # decode_ms reads the same figure per start (the played part: a start's two lowest rates)
    played = list(csv.DictReader((STEEP / "played/points.csv").open()))
    lowest = [
        float(r["itl_mean_ms"])
        for r in played
        if r["config_label"] == "mns1-mnbt32"
        and r["repeat"] == "2"
        and r["load_kind"] == "poisson"
        and float(r["target"]) in (2.0, 3.0)
    ]
    grid = RecordedGrid(STEEP / "played")
    (config,) = [c for c in grid.configs if c.label == "mns1-mnbt32"]
    assert abs(decode_ms(config.starts[2]) - statistics.mean(lowest)) < 1e-9


def test_on_this_recording_half_of_the_deployed_starts_are_within_ten_percent_of_the_truth():
    grid = RecordedGrid(STEEP / "played")
    truths, _ = long_truths(sorted(STEEP.glob("truth-*")), grid.configs, grid.slo)
    assert ceiling(grid.configs, truths, grid.slo, grid.repeats) == 0.5


def test_at_constant_load_the_time_per_token_wandered_by_half():
    # the stability recording: one stream, one sequence at a time, ten minutes
    rows = list(csv.DictReader(next((STEEP / "stability/requests").glob("*.csv")).open()))
    assert {r["point_id"] for r in rows} == {"concurrent-1"} and len(rows) > 5000
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks/machine_stability.py"),
            "--run",
            str(STEEP / "stability"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr  # not steady
    assert "20 bins of 30 s" in result.stdout
    assert "min 2.08  median 2.42  max 3.24; slowest / fastest 1.56" in result.stdout


def test_as_one_process_the_server_was_faster_and_still_not_steady():
    run = STEEP / "stability-one-process"
    manifest = (run / "manifest.json").read_text()
    assert '"max_num_seqs": 1' in manifest or '"max-num-seqs": 1' in manifest
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/machine_stability.py"), "--run", str(run)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    assert "min 1.82  median 2.19  max 2.73; slowest / fastest 1.50" in result.stdout
