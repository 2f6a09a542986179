"""benchmarks/machine_stability.py: the time per output token over a run at constant load, in
bins, and the verdict "steady" only when every bin is within 10% of the fastest."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys

import numpy as np
import pytest

from benchmarks.machine_stability import LEAST, STEADY, bins, spec
from tests.conftest import FIXTURES, REPO
from tunebench.store.run import read_requests

SCRIPT = REPO / "benchmarks/machine_stability.py"


def _run(tmp_path, per_bin_ms: list[float], per_bin: int = 201):
    """A run whose requests decode at `per_bin_ms` in consecutive 30-s bins (the default)."""
    run = tmp_path / "run"
    (run / "requests").mkdir(parents=True)
    # a recorded run's manifest (one configuration, c1); the requests are written here
    shutil.copy(FIXTURES / "grid-cpu-steep/stability/manifest.json", run / "manifest.json")
    with (run / "requests/c1.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["point_id", "start_time", "itl_ms"])
        for index, ms in enumerate(per_bin_ms):
            for k in range(per_bin):
                # spread inside the bin; the median of the bin is `ms` exactly
                offset = (k - per_bin // 2) * 0.01
                writer.writerow(["concurrent-1", 1000 + index * 30 + k * 29 / per_bin, ms + offset])
    return run


def test_bins_hold_the_median_time_per_token_of_each_interval():
    times = [(100 + i * 0.1, 2.0) for i in range(200)] + [(120 + i * 0.1, 3.0) for i in range(200)]
    assert bins(times, 20.0) == [(0.0, 200, 2.0), (20.0, 200, 3.0)]
    # a bin with fewer than LEAST requests is left out, not read as a speed
    sparse = [(141 + i * 0.09, 9.0) for i in range(LEAST - 1)]
    assert bins(times + sparse, 20.0) == [(0.0, 200, 2.0), (20.0, 200, 3.0)]


def _recorded_spell(at_s: float) -> np.ndarray:
    """The time per token of the requests in 20 s of the stability recording from `at_s`: one
    spell of one machine, the spread of requests within a bin."""
    rows = read_requests(FIXTURES / "grid-cpu-steep/stability", "c1")
    first = min(float(r["start_time"]) for r in rows)
    spell = [float(r["itl_ms"]) for r in rows if 0 <= float(r["start_time"]) - first - at_s < 20]
    assert len(spell) > 150
    return np.asarray(spell)


def _ratio(medians) -> float:
    return max(medians) / min(medians)


@pytest.mark.parametrize("spell_s", [0, 100, 300])
def test_a_steady_machine_is_called_steady_and_a_slower_spell_is_caught(spell_s):
    # A/A: 30 bins of LEAST requests each, every one drawn independently from the requests of
    # one 20-s spell of the recording: nothing changed, so "not steady" is a false alarm
    spell = _recorded_spell(spell_s)
    rng = np.random.default_rng(7)
    draws = [[float(np.median(rng.choice(spell, LEAST))) for _ in range(30)] for _ in range(200)]
    false_alarms = sum(_ratio(m) > STEADY for m in draws)
    assert false_alarms <= 0.05 * len(draws)
    # power: the same draws with the last 5 bins 20% slower
    caught = sum(_ratio(m[:25] + [x * 1.2 for x in m[25:]]) > STEADY for m in draws)
    assert caught >= 0.95 * len(draws)


def test_bins_of_a_hundred_requests_would_raise_false_alarms():
    # why LEAST is 200: at the spell at 300 s, bins of 100 differ by more than 10% alone
    spell = _recorded_spell(300)
    rng = np.random.default_rng(7)
    small = [[float(np.median(rng.choice(spell, 100))) for _ in range(30)] for _ in range(200)]
    assert sum(_ratio(m) > STEADY for m in small) > 0.1 * len(small)


@pytest.mark.parametrize(
    ("per_bin", "code", "said"),
    [
        ([2.0, 2.1, 2.05, 2.0], 0, "steady: every bin within 10% of the fastest"),
        ([2.0, 3.0, 2.2, 2.0], 1, "not steady: the same load ran 50% slower"),
    ],
)
def test_the_verdict_and_exit_code(tmp_path, per_bin, code, said):
    run = _run(tmp_path, per_bin)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--run", str(run)], capture_output=True, text=True
    )
    assert result.returncode == code, result.stderr
    assert said in result.stdout
    assert f"{len(per_bin)} bins of 30 s" in result.stdout
    assert f"max {max(per_bin):.2f}" in result.stdout and f"min {min(per_bin):.2f}" in result.stdout


def test_an_unknown_configuration_is_a_one_line_error(tmp_path):
    run = _run(tmp_path, [2.0, 2.0])
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--run", str(run), "--config", "nope"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "no configuration 'nope'" in result.stderr and "Traceback" not in result.stderr


def test_a_directory_that_is_no_run_is_a_one_line_error(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--run", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "not a tunebench run (no manifest.json)" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_recording_decodes_one_sequence_at_a_time_at_constant_load():
    recorded = spec(10)
    assert recorded["server"]["args"]["max-num-seqs"] == 1  # no batch: speed alone
    (profile,) = recorded["load"]["profiles"]
    assert profile == {"kind": "concurrent", "streams": 1, "max_seconds": 600}
    assert recorded["deployment"]["cpus"] != recorded["load"]["client_cpus"]
