"""A real server slowed down under one point (a planted throttle of its process group):
the point says the machine changed speed under it, where and from which evidence, the
sentinel is measured, and compare's gate calls the difference undecided, not a regression.

One sweep of two identical configurations (variants a and b), two points each; the second
point of b gets a 50% throttle for 12 s from 6 s into its 30-s window. The windows are long
enough that an untouched one mostly keeps the effective samples a p50 needs on a VM that
wanders (16-s windows left one with 5 of the 6 needed, and the gate, rightly, judged
nothing); when the VM still thins one, the gate's headline is "unverified" for that row,
and the throttled row must still be the undecided one among its causes; when the VM's own
wander moved an untouched window by as much, that row is undecided too (both rows).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import warnings

import pytest

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import NEEDS_SERVER, wait_for
from tunebench.processes import stop_session
from tunebench.store.run import read_points
from tunebench.testing.throttle import Throttle

# it judges the machine's speed under a planted throttle: it runs with the machine to
# itself (a CI machine running three test files beside it hid the throttle in a busy window)
pytestmark = [pytest.mark.speed, NEEDS_SERVER]

SPEC = """
name: drift-e2e
model: builtin:tiny-llama-random
deployment: {kind: local, start_timeout_s: 300, kv_cache_space_gib: 1, cpus: "0"}
server:
  args: {max-model-len: 512, max-num-seqs: 4, enforce-eager: true}
  variants:
    - {name: a}
    - {name: b}
load:
  client_cpus: "1"
  data: {kind: synthetic, prompt_tokens: 32, output_tokens: 32}
  profiles:
    - {kind: concurrent, streams: [2, 3], max_seconds: 30}
machine: {sentinel_seconds: 8}
"""


#: What a point saw of the machine: printed with any failure of the throttled point's test.
MACHINE_COLUMNS = (
    "start_time",
    "window_change_pct",
    "window_change_from_s",
    "window_change_to_s",
    "throttled_pct",
    "steal_pct",
    "foreign_cpu_pct",
    "probe_before_ms",
    "probe_ms",
    "probe_after_ms",
    "machine_note",
)


@pytest.fixture(scope="module")
def throttled(tmp_path_factory):
    root = tmp_path_factory.mktemp("drift")
    spec = root / "drift.yaml"
    spec.write_text(SPEC)
    runs = root / "runs"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "tunebench.cli.main", "sweep", str(spec), "-o", str(runs)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        run = wait_for(
            lambda: next((d for d in runs.iterdir() if d.is_dir()), None), 120, "the run", sweep
        )
        # b's first point stored: its second point (3 streams) starts now
        wait_for(
            lambda: any(
                r["config_label"] == "b" and r["point_id"] == "concurrent-2"
                for r in read_points(run)
            ),
            900,
            "b's first point",
            sweep,
        )
        pgid = next(c for c in _manifest(run)["configs"] if c["label"] == "b")["server_pgid"]
        time.sleep(6)
        with Throttle(int(pgid), 0.5) as throttle:
            time.sleep(12)
        out, err = sweep.communicate(timeout=600)
    finally:
        if sweep.poll() is None:
            stop_session(sweep)
    assert sweep.returncode == 0, err[-3000:]
    return run, throttle, out + err


def _manifest(run):
    import json

    return json.loads((run / "manifest.json").read_text())


def _point(run, label: str, point_id: str) -> dict:
    rows = read_points(run)
    return next(r for r in rows if r["config_label"] == label and r["point_id"] == point_id)


def test_the_throttled_point_says_the_machine_moved_where_and_how(throttled):
    run, throttle, _ = throttled
    row = _point(run, "b", "concurrent-3")
    reason = str(row["unverified_reason"])
    # what the point saw of the machine, printed with any failure below
    seen = {key: row.get(key) for key in MACHINE_COLUMNS} | {"reason": reason}
    assert row["valid"] == "True", row
    assert reason.startswith("machine speed changed: "), seen
    by_requests = "machine speed changed: its requests ran" in reason
    if throttle.method == "sigstop":
        # a duty cycle no counter shows: the window's own requests are the evidence
        assert by_requests, seen
    if by_requests:
        start = float(row["start_time"])
        planted = (throttle.started - start, throttle.ended - start)
        assert float(row["window_change_pct"]) >= 20, seen
        # the stretch named overlaps the planted one (bins of ~1 s, the window's edges)
        assert float(row["window_change_from_s"]) < planted[1], (seen, planted)
        assert float(row["window_change_to_s"]) > planted[0], (seen, planted)
    else:
        # Once in CI the quota's evidence alone flagged this point (throttled 18% of the
        # window, as on this VM, where the same plant runs 119-127% slower inside the
        # window, 40-79 noise units). The verdict stands on the named cause; the window's
        # own test is graded on recorded windows (tests/unit/test_steadiness.py) and on
        # real throttles (benchmarks/drift_detection.py), and a miss here is said aloud.
        warnings.warn(f"the throttled window's own requests did not flag it: {seen}")
    if throttle.method == "cgroup":
        # the telemetry names a cause: the quota, or, on a machine busy with other work
        # (CI runs tests side by side), the other processes that kept the server under
        # its quota so that the quota seldom bit
        quota = float(row["throttled_pct"] or 0)
        foreign = float(row["foreign_cpu_pct"] or 0)
        assert quota > 5 or foreign > 10, seen
        if quota > 5:
            assert "the server's cgroup was throttled by its CPU quota" in reason, seen
        else:
            assert "processes not of this run used" in reason, seen


def test_each_configuration_measures_its_sentinel(throttled):
    run, _, output = throttled
    for config in _manifest(run)["configs"]:
        sentinel = config["sentinel"]
        assert sentinel["point"] == "concurrent-2", sentinel
        assert "held" in sentinel or sentinel.get("note"), sentinel
    assert "sentinel: concurrent-2 again" in output
    # the sentinel is no row of points.csv
    assert not any("sentinel" in r["point_id"] for r in read_points(run))
    assert (run / "machine/c1.csv").read_text().startswith("time,probe_ms,")


def test_compare_calls_the_difference_undecided_unless_drift_is_allowed(throttled):
    run, _, _ = throttled
    gate = [
        "compare",
        run.name,
        "--root",
        str(run.parent),
        "--by",
        "variant",
        "--baseline",
        "a",
        "-m",
        "itl_p50",
        "--fail-on-regression",
        "30",
        "--allow-unverified",
    ]
    undecided = run_cli(*gate)
    assert undecided.returncode == 1, undecided.stderr
    headline = _gate_line(undecided.stderr)
    assert "regression" not in headline, undecided.stderr
    # the throttled row is undecided, never judged as measured
    drift = re.search(
        r"cannot pass: undecided \(machine drift\): (\d+) compared row", undecided.stderr
    )
    assert drift, undecided.stderr
    if drift[1] != "1":
        # the other row too: this VM wandered under an untouched window (its own requests
        # said so), and a row resting on that is undecided as well
        assert drift[1] == "2", undecided.stderr
        untouched = [_point(run, variant, "concurrent-2") for variant in ("a", "b")]
        reasons = [str(row["unverified_reason"]) for row in untouched]
        assert any("machine speed changed" in reason for reason in reasons), reasons
    if not headline.startswith("gate: FAIL (undecided, machine drift"):
        # the one other headline: a row the throttle did not touch could not be judged
        # either (this VM wandered under an untouched window: 5 effective samples of the 6
        # a p50 needs), and that cause is not the drift's, so the gate says unverified
        assert headline.startswith("gate: FAIL (unverified"), undecided.stderr
        assert "not judged: " in undecided.stderr, undecided.stderr
    assert "machine moved under" in undecided.stdout  # each side's machine, under the table
    allowed = run_cli(*gate, "--allow-drift")
    assert "undecided" not in _gate_line(allowed.stderr), allowed.stderr
    assert "accepted by --allow-drift" in allowed.stderr, allowed.stderr


def _gate_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("gate:"))
