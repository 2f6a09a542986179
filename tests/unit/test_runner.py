"""The runner sequences the seams: each point on disk before the next, teardown always, every
failure recorded with its reason. Fakes of the seams (tunebench.testing) stand in for vLLM
and GuideLLM; the real ones are exercised by tests/e2e."""

from __future__ import annotations

import json
import threading

import pytest

from tunebench.runner import ConfigRunner, PointRules
from tunebench.runner.config_runner import stop_together
from tunebench.runner.measuring import PointExtras
from tunebench.seams.progress import SilentReporter
from tunebench.spec.models import Metrics
from tunebench.spec.plan import LoadPoint, SearchSettings, ServerConfig
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore, read_points
from tunebench.testing import FakeDeployment, FakeLoadDriver, fake_columns

CONFIG = ServerConfig(
    "c1",
    "max-num-seqs=4",
    "m",
    None,
    {"max-num-seqs": 4, "max-model-len": 512},
    {"max-num-seqs": 4},
)
POINTS = [LoadPoint(f"concurrent-{n}", "concurrent", n, 5.0, None, None) for n in (1, 2, 4)]
SLO = {"ttft_ms": {"p95": 100}}


def make_runner(tmp_path, deployment, driver, slo=None, extras=PointExtras()):
    store = RunStore.create(
        tmp_path, RunKind.SWEEP, "t", varied_args=["max-num-seqs"], versions={}, host={}
    )
    runner = ConfigRunner(
        store,
        deployment,
        lambda config: driver,
        Metrics(),
        SilentReporter(),
        PointRules(slo=slo),
        extras=extras,
    )
    return store, runner


def test_every_point_is_stored_before_the_next_one_runs(tmp_path):
    seen_before: dict[str, list[str]] = {}

    def before(point):
        seen_before[point.point_id] = [r["point_id"] for r in read_points(store.path)]

    driver = FakeLoadDriver(before_point=before)
    store, runner = make_runner(tmp_path, FakeDeployment(effective={"max_model_len": 512}), driver)
    outcome = runner.run(CONFIG, POINTS)
    assert outcome.status == "complete" and outcome.points_done == 3
    assert seen_before == {
        "concurrent-1": [],
        "concurrent-2": ["concurrent-1"],
        "concurrent-4": ["concurrent-1", "concurrent-2"],
    }
    rows = read_points(store.path)
    assert [r["point_id"] for r in rows] == ["concurrent-1", "concurrent-2", "concurrent-4"]
    assert all(r["valid"] == "True" and r["max-num-seqs"] == "4" for r in rows)
    entry = store.manifest.config("c1")
    assert entry.status.value == "complete" and entry.effective == {"max_model_len": 512}
    assert driver.closed == 1


def test_a_server_that_cannot_start_fails_its_configuration_with_the_reason(tmp_path):
    deployment = FakeDeployment(fail_start="vLLM exited with code 1 during start-up: boom")
    driver = FakeLoadDriver()
    store, runner = make_runner(tmp_path, deployment, driver)
    outcome = runner.run(CONFIG, POINTS)
    assert outcome.status == "failed" and outcome.error.endswith("boom")
    entry = store.manifest.config("c1")
    assert entry.status.value == "failed" and entry.log_tail.strip() == "INFO fake server"
    assert read_points(store.path) == [] and driver.ran == []
    assert driver.closed == 1 and deployment.stops >= 1  # torn down all the same


def test_a_load_failure_keeps_the_finished_points_and_names_the_lost_one(tmp_path):
    deployment = FakeDeployment()
    store, runner = make_runner(tmp_path, deployment, FakeLoadDriver(fail_at="concurrent-2"))
    outcome = runner.run(CONFIG, POINTS)
    assert outcome.status == "failed" and outcome.points_done == 1
    entry = store.manifest.config("c1")
    assert entry.failed_point == "concurrent-2"
    assert "(point concurrent-2 not measured)" in entry.error
    assert [r["point_id"] for r in read_points(store.path)] == ["concurrent-1"]
    assert deployment.stops >= 1


def test_a_sentinel_the_load_generator_failed_leaves_the_points_and_says_it_checked_nothing(
    tmp_path,
):
    from tunebench.report.tables import sentinel_notes

    driver = FakeLoadDriver(fail_at="concurrent-1~sentinel")
    extras = PointExtras(sentinel_seconds=5.0)
    store, runner = make_runner(tmp_path, FakeDeployment(), driver, extras=extras)
    outcome = runner.run(CONFIG, POINTS)
    # every point was measured: the configuration is complete, not failed
    assert outcome.status == "complete" and outcome.points_done == 3
    entry = store.manifest.config("c1")
    assert entry.status.value == "complete" and entry.error is None
    assert entry.sentinels == [
        {
            "point": "concurrent-1",
            "repeat": 1,
            "note": "sentinel not measured: fake load generator failed on concurrent-1~sentinel",
        }
    ]
    assert [r["point_id"] for r in read_points(store.path)] == [p.point_id for p in POINTS]
    # `show` and the report say what was not checked
    assert sentinel_notes(store.manifest.configs) == [
        "c1 repeat 1: sentinel not measured: fake load generator failed on "
        "concurrent-1~sentinel (whether the machine held its speed over its points is not "
        "checked)"
    ]


def test_a_server_that_dies_during_the_load_aborts_it(tmp_path):
    deployment = FakeDeployment(fail_after_s=0.5)
    store, runner = make_runner(tmp_path, deployment, FakeLoadDriver(hold_s=2.0))
    outcome = runner.run(CONFIG, POINTS)
    assert outcome.status == "failed" and outcome.points_done == 0
    assert "fake server exited (signal SIGKILL) while load was running" in outcome.error


def test_ctrl_c_during_the_load_still_tears_everything_down(tmp_path):
    def interrupt(point):
        if point.point_id == "concurrent-2":
            raise KeyboardInterrupt

    deployment, driver = FakeDeployment(), FakeLoadDriver(before_point=interrupt)
    store, runner = make_runner(tmp_path, deployment, driver)
    with pytest.raises(KeyboardInterrupt):
        runner.run(CONFIG, POINTS)
    assert driver.closed == 1 and deployment.stops >= 1
    assert [r["point_id"] for r in read_points(store.path)] == ["concurrent-1"]


def test_a_load_retry_is_kept_when_the_run_is_interrupted_after_it(tmp_path):
    driver = FakeLoadDriver()

    def retry_then_interrupt(point):
        if point.point_id == "concurrent-2":
            driver.retried.append({"point": "concurrent-2", "reason": "worker died"})
        if point.point_id == POINTS[-1].point_id:
            raise KeyboardInterrupt

    driver.before_point = retry_then_interrupt
    store, runner = make_runner(tmp_path, FakeDeployment(), driver)
    with pytest.raises(KeyboardInterrupt):
        runner.run(CONFIG, POINTS)
    assert store.manifest.config("c1").load_retries == [
        {"point": "concurrent-2", "reason": "worker died"}
    ]


def test_args_that_did_not_take_effect_make_every_point_invalid(tmp_path):
    deployment = FakeDeployment(effective={"max_model_len": 256})
    store, runner = make_runner(tmp_path, deployment, FakeLoadDriver())
    runner.run(CONFIG, POINTS[:1])
    (row,) = read_points(store.path)
    assert row["valid"] == "False"
    assert row["invalid_reason"] == "max-model-len requested 512, server runs 256"


def test_a_capacity_point_becomes_probes_stored_as_points(tmp_path):
    # TTFT p95 follows 50 ms / (1 - rate/10): the 100 ms SLO holds up to 5 req/s.
    def measure(point):
        return fake_columns(point, ttft_ms=50.0 / max(1e-3, 1 - point.target / 10))

    search = LoadPoint(
        "capacity",
        "capacity",
        None,
        5.0,
        None,
        None,
        search=SearchSettings(start_rate=1.0, tolerance=0.05, max_probes=12),
    )
    store, runner = make_runner(tmp_path, FakeDeployment(), FakeLoadDriver(measure), slo=SLO)
    outcome = runner.run(CONFIG, [search])
    capacity = outcome.capacity
    assert capacity["converged"] and 0.95 * 5 <= capacity["rate"] <= 5
    rows = read_points(store.path)
    assert [r["point_id"] for r in rows] == [f"capacity-{n}" for n in range(1, len(rows) + 1)]
    assert all(r["load_kind"] == "poisson" for r in rows)
    assert json.loads((store.path / "manifest.json").read_text())["configs"][0]["capacity"][
        "probes"
    ] == len(rows)
    assert runner.capacity_hint == capacity["rate"]  # the next configuration starts warm


def test_a_capacity_the_machine_moved_under_does_not_start_the_next_search(tmp_path):
    """A search flagged `machine drifted during the search` found the slowed machine's
    capacity: the next configuration starts from the last one measured on a steady machine."""
    from tunebench.runner.probing import CapacityProbing

    search = LoadPoint("capacity", "capacity", None, 5.0, None, None, search=SearchSettings())
    _, runner = make_runner(tmp_path, FakeDeployment(), FakeLoadDriver(), slo=SLO)
    runner.capacity_hint = 7.0  # an earlier configuration's, measured on a steady machine
    for reason, hint in (("machine speed changed: its requests ran 40% slower", 7.0), ("", 1.0)):
        probing = CapacityProbing(search, None, SLO)
        (probe,) = probing.next_points()
        row = {"valid": True, "slo_met": True, "unverified_reason": reason}
        probing.observe(probe.point_id, {**row, "target": probe.target})
        summary = runner._record_capacity(CONFIG, probing)
        assert summary is not None and bool(summary["drift"]) == bool(reason)
        assert runner.capacity_hint == hint


def test_a_resumed_configuration_continues_its_search_from_the_stored_probes(tmp_path):
    def measure(point):
        return fake_columns(point, ttft_ms=50.0 / max(1e-3, 1 - point.target / 10))

    search = LoadPoint(
        "capacity",
        "capacity",
        None,
        5.0,
        None,
        None,
        search=SearchSettings(start_rate=1.0, tolerance=0.05, max_probes=12),
    )
    store, runner = make_runner(tmp_path, FakeDeployment(), FakeLoadDriver(measure), slo=SLO)
    first = runner.run(CONFIG, [search])
    earlier = read_points(store.path)[:2]
    driver = FakeLoadDriver(measure)
    store2, runner2 = make_runner(tmp_path / "again", FakeDeployment(), driver, slo=SLO)
    second = runner2.run(CONFIG, [search], attempt=2, earlier_rows=earlier)
    assert second.capacity["rate"] == first.capacity["rate"]
    assert len(driver.ran) == first.capacity["probes"] - 2  # the stored probes were not redone


class RecordingStep:
    """A BeforeLoad step that notes when it ran (seams/before_load.py)."""

    def __init__(self, store):
        self.store, self.calls = store, []

    def run(self, config, handle, repeat):
        stored = [r["point_id"] for r in read_points(self.store.path)]
        self.calls.append((config.config_id, repeat, stored))


def test_steps_before_the_load_run_once_after_the_start_and_before_any_point(tmp_path):
    store = RunStore.create(tmp_path, RunKind.SWEEP, "t", versions={}, host={})
    step = RecordingStep(store)
    runner = ConfigRunner(
        store, FakeDeployment(), lambda c: FakeLoadDriver(), Metrics(), SilentReporter(),
        before_load=[step],
    )  # fmt: skip
    assert runner.run(CONFIG, POINTS).status == "complete"
    assert step.calls == [("c1", 1, [])]  # once, before the first point was stored


def test_a_tune_with_a_quality_check_skips_the_load_of_a_trial_that_fails_the_gate(
    tmp_path, monkeypatch
):
    from tunebench.quality import step as quality_step
    from tunebench.quality.collect import QualityRequest
    from tunebench.quality.step import QualityCheck

    store = RunStore.create(tmp_path, RunKind.TUNE, "t", versions={}, host={})
    monkeypatch.setattr(quality_step, "gate_failure", lambda store, config_id: "agreement 0.1")

    def check(gates_load):
        step = QualityCheck(store, SilentReporter(), QualityRequest(["a prompt"]), gates_load)
        monkeypatch.setattr(step, "_collect", lambda config, handle, repeat: None)
        return step

    assert check(True).run(CONFIG, None, 1) == "quality gate: agreement 0.1"
    assert check(False).run(CONFIG, None, 1) is None  # a sweep measures the load either way
    runner = ConfigRunner(
        store, FakeDeployment(), lambda c: FakeLoadDriver(), Metrics(), SilentReporter(),
        before_load=[check(True)],
    )  # fmt: skip
    assert runner.run(CONFIG, POINTS).status == "complete"
    assert read_points(store.path) == []
    manifest = json.loads((store.path / "manifest.json").read_text())
    assert manifest["configs"][0]["load_skipped"] == "quality gate: agreement 0.1"


def test_the_load_generator_and_the_server_are_stopped_together(tmp_path):
    # Each stop waits for the other to have begun: one after the other, the first would
    # wait out its 30 s and record that it never saw the other begin.
    closing, stopping = threading.Event(), threading.Event()
    saw: dict[str, bool] = {}

    class Driver(FakeLoadDriver):
        def close(self) -> None:
            closing.set()
            saw["server stopping while the load generator closed"] = stopping.wait(30)
            super().close()

    class Server(FakeDeployment):
        def stop(self) -> None:
            if self.stops == 0:
                stopping.set()
                saw["load generator closing while the server stopped"] = closing.wait(30)
            super().stop()

    deployment, driver = Server(), Driver()
    _, runner = make_runner(tmp_path, deployment, driver)
    assert runner.run(CONFIG, POINTS).status == "complete"
    assert saw == {
        "server stopping while the load generator closed": True,
        "load generator closing while the server stopped": True,
    }
    assert driver.closed == 1 and deployment.stops >= 1


def test_a_failing_stop_does_not_keep_the_other_from_running():
    ran: list[str] = []

    def broken() -> None:
        ran.append("broken")
        raise RuntimeError("close failed")

    with pytest.raises(RuntimeError, match="close failed"):
        stop_together(broken, lambda: ran.append("server"))
    assert sorted(ran) == ["broken", "server"]
