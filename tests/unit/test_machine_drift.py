"""The machine under a point: its evidence as columns and a verdict (points/machine.py), the
telemetry read from /proc and cgroups (machine/telemetry.py), the watch that reads it per
window (machine/watch.py), and the compare gate on points the machine moved under."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tunebench.analysis.compare import compare_sides
from tunebench.analysis.compare_metrics import DEFAULT_METRICS, METRICS
from tunebench.analysis.gate import describe_gate, regression_gate
from tunebench.machine import telemetry
from tunebench.machine.watch import MachineWatch
from tunebench.points.machine import DRIFT_PREFIX, MachineReading, is_drift, machine_columns
from tunebench.points.row import PointId, build_row
from tunebench.points.steadiness import Steadiness, steadiness
from tunebench.testing.latencies import stream_side

DEFAULT = [METRICS[m] for m in DEFAULT_METRICS]
QUIET = MachineReading(0.0, 0.0, 0.01, None, 6.5, 6.4, None, "CPU 0")


def _steady(change: float = 0.02) -> Steadiness:
    return Steadiness(True, change, 0.5, 1.0, 0.0, 10.0, 120, 16)


def test_a_quiet_machine_and_a_steady_window_give_no_drift():
    cells, drift = machine_columns(_steady(), QUIET)
    assert drift is None
    assert cells["throttled_pct"] == 0.0 and cells["foreign_cpu_pct"] == 1.0
    assert cells["probe_ms"] == 6.5 and cells["machine_note"] is None


@pytest.mark.parametrize(
    "reading, evidence",
    [
        (
            MachineReading(0.3, 0.0, 0.0, None, None, None, None, "CPU 0"),
            "the server's cgroup was throttled by its CPU quota for 30% of the window",
        ),
        (
            MachineReading(0.0, 0.08, 0.0, None, None, None, None, "CPU 0"),
            "the hypervisor took 8% of CPU 0 (steal)",
        ),
        (
            MachineReading(0.0, 0.0, 0.4, None, None, None, None, "all CPUs"),
            "processes not of this run used 40% of all CPUs",
        ),
    ],
)
def test_telemetry_beyond_its_threshold_is_drift_with_its_evidence(reading, evidence):
    _, drift = machine_columns(_steady(), reading)
    assert drift is not None and drift.startswith(DRIFT_PREFIX) and evidence in drift
    assert is_drift(drift)


def test_telemetry_just_under_its_thresholds_is_no_drift():
    _, drift = machine_columns(
        _steady(), MachineReading(0.049, 0.049, 0.099, None, None, None, None, "CPU 0")
    )
    assert drift is None


def test_an_unsteady_window_is_drift_saying_where_and_how_much():
    moved = Steadiness(False, 0.43, 0.4, 9.0, 8.0, 16.0, 120, 16)
    cells, drift = machine_columns(moved, QUIET)
    assert drift == (
        f"{DRIFT_PREFIX}: its requests ran 43% slower inside t=8-16 s of the window "
        "(9.0 noise units, 120 requests after the first wave, in 16 bins)"
    )
    assert (cells["window_change_pct"], cells["window_change_from_s"]) == (43.0, 8.0)
    assert "; " not in drift  # one reason among a point's "; "-separated reasons


def test_a_point_no_evidence_could_check_is_unverified_not_steady():
    """A watch that was asked for and read nothing, under a window too short to test: no
    evidence is not evidence of a steady machine."""
    cells, reason = machine_columns("steadiness not tested: 12 requests", "no /proc here")
    assert reason == (
        "machine not checked: steadiness not tested: 12 requests, no telemetry (no /proc here)"
    )
    assert not is_drift(reason)  # --allow-drift does not accept what was never seen
    assert cells["machine_note"] == (
        "steadiness not tested: 12 requests; no machine telemetry: no /proc here"
    )


def test_what_one_source_could_not_read_is_a_note_when_another_checked():
    cells, reason = machine_columns(_steady(), "no /proc here")
    assert reason is None
    assert cells["machine_note"] == "no machine telemetry: no /proc here"
    cells, reason = machine_columns("steadiness not tested: 12 requests", QUIET)
    assert reason is None
    assert cells["machine_note"] == "steadiness not tested: 12 requests"


def test_a_run_that_turned_the_watch_off_keeps_the_note_only():
    cells, reason = machine_columns("steadiness not tested: 12 requests", None)
    assert reason is None
    assert "no machine telemetry: not watched" in cells["machine_note"]


def _requests(slow_from: float | None) -> list[dict]:
    out = []
    for i in range(120):
        slow = slow_from is not None and i / 6 >= slow_from
        out.append(
            {
                "start_time": 1000 + i / 6,
                "end_time": 1000 + i / 6 + 0.1,
                "itl_ms": (3.0 if slow else 2.0) * (1 + 0.02 * (i % 3)),
                "tpot_ms": 2.5,
                "ttft_ms": 10.0,
                "output_tokens": 32,
            }
        )
    return out


def _row(samples: list[dict], machine=None) -> dict:
    client = {"target": 2, "requests_ok": len(samples), "requests_failed": 0}
    return build_row(
        PointId("r", "c1", "base", "concurrent-2", "concurrent"),
        {},
        client,
        samples,
        {"server_samples": 10},
        window=(1000.0, 1020.0),
        machine=machine,
    ).csv_cells()


def test_a_point_whose_requests_slowed_is_unverified_but_valid():
    row = _row(_requests(slow_from=12.0), QUIET)
    assert row["valid"] is True
    reasons = row["unverified_reason"].split("; ")
    found = steadiness(_requests(12.0), 1000.0)
    assert isinstance(found, Steadiness)
    assert [r for r in reasons if is_drift(r)] == [
        f"{DRIFT_PREFIX}: its requests ran 50% slower inside t=13-20 s of the window "
        f"({found.z:.1f} noise units, 119 requests after the first wave, in 16 bins)"
    ]
    steady = _row(_requests(slow_from=None), QUIET)
    assert not any(is_drift(r) for r in steady["unverified_reason"].split("; "))


def test_telemetry_counters_are_read_from_proc_and_cgroups(tmp_path: Path):
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "stat").write_text(
        "cpu  100 0 50 1000 0 0 0 20 0 0\n"
        "cpu0 60 0 30 500 0 0 0 15 0 0\n"
        "cpu1 40 0 20 500 0 0 0 5 0 0\n"
        "intr 1 2 3\n"
    )
    busy, steal, total = telemetry.cpu_times({0}, proc)
    tick = telemetry.TICK
    assert (busy, steal, total) == (90 / tick, 15 / tick, 605 / tick)
    assert telemetry.cpu_times(None, proc)[1] == 20 / tick
    (proc / "7/stat").write_text("7 (a b) S 1 7 7 0 -1 0 0 0 0 0 300 200 0 0 20 0 1 0\n")
    assert telemetry.process_cpu_s([7, 8], proc) == 500 / tick
    # children that ended and were reaped (cutime 40, cstime 10) stay in the sum
    (proc / "7/stat").write_text("7 (a b) S 1 7 7 0 -1 0 0 0 0 0 300 200 40 10 20 0 1 0\n")
    assert telemetry.process_cpu_s([7, 8], proc) == 550 / tick
    (proc / "7/cgroup").write_text("3:cpuset:/\n2:cpu,cpuacct:/throttled\n1:name=x:/\n")
    assert telemetry.cgroup_of(7, proc) == "/throttled"
    root = tmp_path / "cg"
    (root / "throttled").mkdir(parents=True)
    (root / "throttled/cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 5\n")
    assert telemetry.read_cpu_stat("/throttled", (root,)) == {
        "nr_periods": 10,
        "nr_throttled": 4,
        "throttled_time": 5,
    }


class _FakeTelemetry:
    cpus = {0}

    def __init__(self, throttled: float = 0.1):
        self.throttled = throttled
        self.now = 0.0
        self.rows: list[telemetry.Counters] = []

    def read(self, now: float) -> telemetry.Counters:
        # one second a sample: 0.5 s busy of which 0.4 ours, 0.1 s throttled
        k = len(self.rows)
        counters = telemetry.Counters(
            now, 0.5 * k, 0.02 * k, 1.0 * k, 0.4 * k, self.throttled * k, k, k
        )
        self.rows.append(counters)
        return counters


def test_the_watch_turns_counters_around_a_window_into_shares():
    fake = _FakeTelemetry()
    clock = iter(float(t) for t in range(100))
    watch = MachineWatch(fake, None, clock=lambda: next(clock))  # type: ignore[arg-type]
    for _ in range(12):
        watch._sample()
    reading = watch.window(2.0, 9.0)
    assert isinstance(reading, MachineReading)
    assert reading.throttled_share == pytest.approx(0.1)
    assert reading.steal_share == pytest.approx(0.02)
    assert reading.foreign_share == pytest.approx(0.1)
    assert reading.cpus == "CPU 0" and reading.probe_ms is None
    assert watch.window(50.0, 60.0) == "no telemetry around the window"


class _CountingProbe:
    """A probe whose readings say which call they were (1.0, 2.0, ...)."""

    def __init__(self) -> None:
        self.calls = 0

    def measure_median(self, repeats: int) -> float:
        self.calls += 1
        return float(self.calls)


def test_the_probe_a_window_end_asks_for_is_on_record_when_the_window_is_read():
    """The runner reads a window right after its end: the probe that end asked for must be
    on record by then (its `probe_after_ms`), though the watch's own tick is far away."""
    probe = _CountingProbe()
    watch = MachineWatch(_FakeTelemetry(), probe, interval_s=60, probe_interval_s=600)  # type: ignore[arg-type]
    watch.start()
    try:
        assert watch.wait_for_probe(5)  # the watch's first probe, at its start
        start = time.time()
        watch.mark()  # the window starts
        assert watch.wait_for_probe(5)
        end = time.time()
        watch.mark()  # ... and ends: the loop ticks once a minute, only the mark wakes it
        assert watch.wait_for_probe(5)
        probes = watch.probes()
        assert [ms for t, ms in probes if t < start] == [1.0]  # probe_before_ms
        assert [ms for t, ms in probes if t > end] == [3.0]  # probe_after_ms
    finally:
        watch.stop()
    assert not watch.wait_for_probe(0.1)  # no loop: nothing to wait for


def _drifted(name: str, seed: int, slowdown: float = 0.0):
    found = stream_side(name, seed, slowdown)
    points = found.points.copy()
    moved = points["point_id"] == "concurrent-8"
    points["unverified_reason"] = ""
    points.loc[moved, "unverified_reason"] = (
        f"{DRIFT_PREFIX}: its requests ran 45% slower inside t=4-14 s of the window"
    )
    return type(found)(found.name, points, found.requests)


def test_a_regression_on_a_point_the_machine_moved_under_is_undecided_not_regression():
    result = compare_sides([stream_side("a", 1), _drifted("b", 2, slowdown=0.3)], DEFAULT)
    # the same data without the drift flag is a regression (the check below can fail)
    plain = compare_sides([stream_side("a", 1), stream_side("b", 2, 0.3)], DEFAULT)
    assert regression_gate(plain, 5)["verdict"] == "regression"
    gate = regression_gate(result, 5)
    # every point of b is 30% slower: the unflagged points still show the regression
    assert gate["verdict"] == "regression"
    only_drift = compare_sides(
        [stream_side("a", 1, points=(8,)), _drifted("b", 2, slowdown=0.3)], DEFAULT
    )
    gate = regression_gate(only_drift, 5, allow_missing=True)
    assert gate["verdict"] == "machine-drift", gate["causes"]
    assert gate["undecided_rows"] > 0 and gate["regressions"] == 0
    assert "gate: FAIL (undecided, machine drift" in describe_gate(gate)
    allowed = regression_gate(only_drift, 5, allow_missing=True, allow_drift=True)
    assert allowed["verdict"] == "regression" and "--allow-drift" in allowed["opted_out"]


def test_drift_on_either_side_without_a_change_still_fails_closed():
    result = compare_sides([_drifted("a", 1), stream_side("b", 2)], DEFAULT)
    gate = regression_gate(result, 5)
    assert gate["verdict"] == "machine-drift"
    assert gate["drifted_points"][0].startswith("b concurrent 8: baseline: machine speed")
    assert regression_gate(result, 5, allow_drift=True)["verdict"] == "no-regression"


def test_nothing_judged_because_every_thin_row_drifted_is_machine_drift():
    """The drifted side's windows too thin to judge (a spell of another speed makes their
    requests autocorrelated): nothing is gated, and the drift is the one cause."""
    thin = _drifted("b", 2, slowdown=0.3)
    thin = type(thin)(thin.name, thin.points, thin.requests.iloc[0:0])  # no samples to judge
    result = compare_sides([stream_side("a", 1, points=(8,)), thin], [METRICS["itl_p50"]])
    gate = regression_gate(result, 5, allow_missing=True)
    assert gate["rows_gated"] == 0, gate
    assert gate["verdict"] == "machine-drift", gate["causes"]


def test_throttled_time_sums_over_cgroups_made_anew_under_one_path(tmp_path: Path):
    """A planted throttle's cgroup is removed and made again: its counters start from 0,
    which is new throttling, not a step back."""
    watched = telemetry.Telemetry(None, [], roots=(tmp_path,))
    (tmp_path / "t").mkdir()
    for value in (0, 4_000_000_000, 0, 1_000_000_000):
        (tmp_path / "t/cpu.stat").write_text(
            f"nr_periods 1\nnr_throttled 1\nthrottled_time {value}\n"
        )
        watched._add("/t", telemetry.read_cpu_stat("/t", (tmp_path,)) or {})
    assert watched._totals["throttled_time"] == 5_000_000_000
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2/cpu.stat").write_text("nr_periods 3\nnr_throttled 2\nthrottled_usec 500\n")
    watched._add("/v2", telemetry.read_cpu_stat("/v2", (tmp_path,)) or {})
    assert watched._totals["throttled_time"] == 5_000_500_000


def test_gpu_clocks_held_down_through_a_window_are_drift_evidence():
    """Clock readings parsed from a real `nvidia-smi -q` of an RTX 2080 with its power cap
    active (tests/fixtures/gpu-clocks/README.md), sampled through a window."""
    from tests.conftest import FIXTURES
    from tunebench.machine.gpu import parse_nvidia_smi_text, parse_nvidia_smi_xml

    capped = parse_nvidia_smi_text((FIXTURES / "gpu-clocks/nvidia-smi-q-rtx2080.txt").read_text())
    idle = parse_nvidia_smi_xml((FIXTURES / "gpu/nvidia-smi-q.xml").read_text())
    for clocks, expect in ((capped, "GPU clocks held down in 100% of samples"), (idle, None)):
        fake = _FakeTelemetry(throttled=0.0)
        ticks = iter(float(t) for t in range(100))
        watch = MachineWatch(
            fake,  # type: ignore[arg-type]
            None,
            clock=lambda: next(ticks),
            gpu_reader=lambda clocks=clocks: clocks,
        )
        for _ in range(6):
            watch._sample()
        reading = watch.window(1.0, 9.0)
        assert isinstance(reading, MachineReading)
        _, drift = machine_columns(_steady(), reading)
        if expect is None:
            assert drift is None and reading.gpu is None
        else:
            assert drift is not None and expect in drift and "sw_power_cap" in drift


def test_a_capacity_search_whose_probe_the_machine_moved_under_says_so():
    from tunebench.runner.probing import CapacityProbing
    from tunebench.spec.plan import LoadPoint, SearchSettings

    point = LoadPoint("capacity", "capacity", None, 5.0, None, None, search=SearchSettings())
    probing = CapacityProbing(point, None, {"ttft_ms": {"p95": 500}})
    rows = [
        {"valid": True, "slo_met": True, "unverified_reason": ""},
        {
            "valid": True,
            "slo_met": False,
            "unverified_reason": f"no server metrics; {DRIFT_PREFIX}: its requests ran 40% slower",
        },
    ]
    for row in rows:
        (probe,) = probing.next_points()
        probing.observe(probe.point_id, {**row, "target": probe.target})
    summary = probing.summary()
    assert summary["drift"] == (
        "machine drifted during the search (1 of 2 probes; first: capacity-2: "
        f"{DRIFT_PREFIX}: its requests ran 40% slower)"
    )
    from tunebench.report.text import describe_capacity

    assert "machine drifted during the search" in describe_capacity(summary)


def test_only_the_search_s_own_probes_count_and_a_resumed_search_keeps_their_drift():
    """A flagged point of the configuration that is not a probe (a warm-up before the
    search) says nothing of the search's probes; a probe stored by an earlier attempt does."""
    from tunebench.runner.probing import CapacityProbing
    from tunebench.spec.plan import LoadPoint, SearchSettings

    point = LoadPoint("capacity", "capacity", None, 5.0, None, None, search=SearchSettings())
    moved = {"valid": True, "slo_met": True, "unverified_reason": f"{DRIFT_PREFIX}: x"}
    probing = CapacityProbing(point, None, {"ttft_ms": {"p95": 500}})
    probing.observe("concurrent-2", moved)  # type: ignore[arg-type]
    (probe,) = probing.next_points()
    probing.observe(probe.point_id, {"valid": True, "slo_met": True, "target": probe.target})
    assert probing.summary()["drift"] is None
    resumed = CapacityProbing(point, None, {"ttft_ms": {"p95": 500}})
    resumed.seed([{**moved, "point_id": "capacity-1", "target": 1.0}])
    assert resumed.summary()["drift"] == (
        f"machine drifted during the search (1 of 1 probes; first: capacity-1: {DRIFT_PREFIX}: x)"
    )


def test_the_report_plots_the_machine_over_the_run_from_the_points():
    import pandas as pd

    from tunebench.analysis.machine_plots import machine_speed_data, machine_speed_figure

    points = pd.DataFrame(
        {
            "config_label": ["a", "a", "b"],
            "point_id": ["concurrent-1", "concurrent-2", "concurrent-1"],
            "repeat": [1, 1, 1],
            "start_time": [1060.0, 1000.0, 1120.0],
            "probe_before_ms": [6.5, 6.4, 9.8],
            "probe_ms": [13.0, 12.9, 19.5],
            "window_change_pct": [4.0, -3.0, 45.0],
            "unverified_reason": ["", "", f"{DRIFT_PREFIX}: its requests ran 45% slower"],
        }
    )
    data = machine_speed_data(points)
    assert list(data["minutes"]) == [0.0, 1.0, 2.0]
    assert list(data["point"]) == ["concurrent-2", "concurrent-1", "concurrent-1"]
    assert list(data["drift"]) == [False, False, True]
    figure = machine_speed_figure(data)
    top, bottom = figure.axes
    assert top.get_title() == "Machine speed over the run"
    assert [line.get_label() for line in top.get_lines()] == [
        "a before",
        "a inside",
        "b before",
        "b inside",
    ]
    bars = bottom.patches
    assert [round(bar.get_height()) for bar in bars] == [-3, 4, 45]
    assert [bar.get_facecolor()[:3] for bar in bars][2] != bars[0].get_facecolor()[:3]
    # what a reader sees: no legend over the data, every series visible
    from tunebench.analysis.figure_kit import figure_bytes
    from tunebench.testing.plot_layout import layout_problems, read_layout

    png = figure_bytes(machine_speed_figure(data))
    assert layout_problems(read_layout(png), "machine") == []
    # each repeat's sentinel against its first point: a diamond, red where it moved
    from types import SimpleNamespace

    from tunebench.analysis.machine_plots import sentinel_data

    configs = [
        SimpleNamespace(
            config_id="c1",
            label="a",
            sentinels=[
                {"repeat": 1, "window": [1090.0, 1100.0], "change_pct": 3.0, "held": True},
                {"repeat": 2, "window": [1150.0, 1160.0], "change_pct": 38.0, "held": False},
            ],
            sentinel=None,
        ),
        SimpleNamespace(config_id="c2", label="b", sentinels=None, sentinel={"note": "x"}),
    ]
    sentinels = sentinel_data(configs, points)
    assert list(sentinels["minutes"]) == [1.5, 2.5]
    assert list(sentinels["held"]) == [True, False]
    figure = machine_speed_figure(data, sentinels)
    (diamonds,) = figure.axes[1].collections
    assert [tuple(xy) for xy in diamonds.get_offsets()] == [(1.5, 3.0), (2.5, 38.0)]
    png = figure_bytes(machine_speed_figure(data, sentinels))
    assert layout_problems(read_layout(png), "machine") == []
    # a run recorded before the machine was watched has no such figure
    old = points.assign(probe_before_ms=None, probe_ms=None, window_change_pct=None)
    assert machine_speed_data(old).empty


def test_explain_says_the_machine_moved_instead_of_blaming_the_configuration():
    from tunebench.points.diagnosis import diagnose_point, facts_for

    row = {
        "valid": True,
        "queue_depth_mean": 9.0,  # would read as over capacity on a steady machine
        "queue_time_mean_s": 2.0,
        "unverified_reason": f"{DRIFT_PREFIX}: its requests ran 45% slower inside t=4-14 s",
    }
    (finding,) = diagnose_point(facts_for(row, {"args": {"max-num-seqs": 4}}))
    assert finding.rule == "machine-drift"
    assert finding.cause.startswith(f"{DRIFT_PREFIX}: its requests ran 45% slower")
    assert "check-machine" in finding.suggestion


def test_check_machine_times_the_probe_in_bins_and_says_it_in_one_line():
    from tunebench.machine.stability import Stability, check_stability

    found = check_stability(3.0, {0}, bins=3, every_s=0.1)
    assert len(found.bins) == 3 and all(ms > 0 for ms in found.bins)
    assert found.spread == pytest.approx(max(found.bins) / min(found.bins) - 1)
    assert found.cpus == "CPUs 0"
    steady = Stability(60, [6.0, 6.2, 6.1], 0.0333, 0.10, 0.0, 0.01, "CPUs 0")
    assert steady.steady and steady.line() == (
        "machine holds its speed to 10%: over 60 s the probe's slowest 3-bin median was 3% "
        "above its fastest (6.00-6.20 ms on CPUs 0)"
    )
    moved = Stability(60, [6.0, 9.0], 0.5, 0.10, 0.06, 0.3, "CPUs 0")
    assert not moved.steady
    assert moved.line().endswith("; steal 6%, other processes 30% of CPUs 0")
    with pytest.raises(ValueError, match="too few for 2 bins"):
        check_stability(0.3, None, bins=6, every_s=0.1)


def test_check_machine_bad_cpus_is_one_line_and_the_exit_says_the_verdict():
    from tests.conftest import invoke

    bad = invoke("check-machine", "--cpus", "0-x", "--seconds", "10")
    assert bad.returncode == 2 and bad.stderr.count("\n") <= 1
    assert "--cpus 0-x" in bad.stderr
    run = invoke("check-machine", "--seconds", "10", "--precision", "100")
    assert run.returncode in (0, 1)
    assert run.stdout.startswith("machine ") and "to 100%" in run.stdout


def test_a_sweep_preflight_on_a_moving_machine_stops_before_any_server(tmp_path, monkeypatch):
    from tunebench.errors import TunebenchError
    from tunebench.machine import stability
    from tunebench.machine.stability import Stability
    from tunebench.seams.progress import SilentReporter
    from tunebench.spec.loading import load_spec
    from tunebench.store.manifest import RunKind
    from tunebench.store.run import RunStore
    from tunebench.sweep.run import preflight

    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(
        "name: s\nmodel: builtin:tiny-llama-random\ndeployment: {kind: local, cpus: '0'}\n"
        "load: {data: {kind: synthetic, prompt_tokens: 8, output_tokens: 8},\n"
        "       profiles: [{kind: concurrent, streams: [1], max_seconds: 5}]}\n"
        "machine: {stability_s: 30}\n"
    )
    spec = load_spec(spec_path)
    moved = Stability(30, [6.0, 9.0], 0.5, 0.10, 0.0, 0.0, "CPUs 0")
    asked = []
    monkeypatch.setattr(
        stability, "check_stability", lambda s, cpus, **_: asked.append((s, cpus)) or moved
    )
    store = RunStore.create(tmp_path / "runs", RunKind.SWEEP, "s")
    with pytest.raises(TunebenchError, match="machine.stability_s: machine does NOT hold"):
        preflight(spec, spec_path, store, SilentReporter())
    assert asked == [(30.0, {0})]
    assert store.manifest.model_dump()["machine_check"]["steady"] is False


def test_our_cpu_time_does_not_fall_when_one_of_our_processes_ends():
    """A child of ours that burns CPU and ends: its seconds stay ours (the parent's cutime),
    so the window's "processes not of this run" do not grow by them."""
    import os
    import subprocess
    import sys

    before = telemetry.process_cpu_s([os.getpid()])
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)  # ran, ended, reaped by us
    after = telemetry.process_cpu_s([os.getpid()])
    assert after - before >= 0.35, (before, after)
