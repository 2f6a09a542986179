"""benchmarks/machine_stability.py: the time per output token over a run at constant load, in
bins, and the verdict "steady" only when every bin is within 10% of the fastest."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys

import pytest

from benchmarks.machine_stability import bins, spec
from tests.conftest import FIXTURES, REPO

SCRIPT = REPO / "benchmarks/machine_stability.py"


def _run(tmp_path, per_bin_ms: list[float], per_bin: int = 30):
    """A run directory whose requests decode at `per_bin_ms` in consecutive 20-s bins."""
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
                writer.writerow(["concurrent-1", 1000 + index * 20 + k * 0.5, ms + offset])
    return run


def test_bins_hold_the_median_time_per_token_of_each_interval():
    times = [(100 + i * 0.5, 2.0) for i in range(40)] + [(120 + i * 0.5, 3.0) for i in range(40)]
    assert bins(times, 20.0) == [(0.0, 40, 2.0), (20.0, 40, 3.0)]
    # a bin with fewer than 20 requests is left out, not read as a speed
    assert bins(times + [(141, 9.0)], 20.0) == [(0.0, 40, 2.0), (20.0, 40, 3.0)]


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
    assert f"{len(per_bin)} bins of 20 s" in result.stdout
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
