"""The LoadDriver contract (tunebench/seams/load.py), run against every implementation:
the fake of tunebench.testing, the recorded driver, the GuideLLM and vllm-bench drivers with
stand-in worker processes, and the cross-check of those two (each with its stand-in worker,
as `load.driver: cross-check` builds it)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tunebench.errors import LoadError
from tunebench.load.cross_check import CrossCheckDriver
from tunebench.load.guidellm import GuideLLMDriver
from tunebench.load.vllm_bench import VllmBenchDriver
from tunebench.recorded.deployment import RecordedDeployment
from tunebench.recorded.driver import RecordedDriver
from tunebench.seams.deployment import ServerHandle
from tunebench.seams.load import LoadDriver
from tunebench.spec.deployments import RecordedSettings
from tunebench.spec.models import SyntheticData
from tunebench.spec.plan import LoadPoint, ServerConfig
from tunebench.testing import FakeLoadDriver, make_rate_grid_run

POINTS = [LoadPoint(f"poisson-{r}", "poisson", float(r), 2.0, None, None) for r in (1, 2)]
MORE = LoadPoint("capacity-1", "poisson", 4.0, 2.0, None, None)
FAKE_HANDLE = ServerHandle("http://127.0.0.1:9", "", "m")


def fake_driver(tmp_path, monkeypatch):
    return FakeLoadDriver(hold_s=0.05), FAKE_HANDLE


def recorded_driver(tmp_path, monkeypatch):
    recorded = make_rate_grid_run(tmp_path / "recorded", {"a": ({"max-num-seqs": 8}, 10.0)})
    deployment = RecordedDeployment(RecordedSettings(kind="recorded", run=str(recorded.path)))
    handle = deployment.start(ServerConfig("c1", "a", "m", None, {"max-num-seqs": 8}))
    return RecordedDriver(deployment), handle


def guidellm_driver(tmp_path, monkeypatch, mode: str = ""):
    monkeypatch.setenv("FAKE_WORKER_MODE", mode)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    driver = GuideLLMDriver(
        SyntheticData(kind="synthetic", prompt_tokens=8, output_tokens=8), tmp_path, "tok"
    )
    driver.worker_module = "tests.fakes.fake_guidellm_worker"
    driver.stall_margin_s = 5.0
    return driver, FAKE_HANDLE


def slow_guidellm_driver(tmp_path, monkeypatch):
    return guidellm_driver(tmp_path, monkeypatch, "slow")


def vllm_bench_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    driver = VllmBenchDriver(
        SyntheticData(kind="synthetic", prompt_tokens=8, output_tokens=8), "tok"
    )
    driver.worker_module = "tests.fakes.fake_vllm_bench_worker"
    return driver, FAKE_HANDLE


def cross_check_driver(tmp_path, monkeypatch):
    guidellm, handle = slow_guidellm_driver(tmp_path, monkeypatch)
    vllm_bench, _ = vllm_bench_driver(tmp_path, monkeypatch)
    return CrossCheckDriver({"guidellm": guidellm, "vllm-bench": vllm_bench}), handle


IMPLEMENTATIONS = {
    "fake": fake_driver,
    "recorded": recorded_driver,
    "guidellm-stand-in": slow_guidellm_driver,
    "vllm-bench-stand-in": vllm_bench_driver,
    "cross-check-stand-ins": cross_check_driver,
}


@pytest.fixture(params=list(IMPLEMENTATIONS))
def made(request, tmp_path, monkeypatch):
    driver, handle = IMPLEMENTATIONS[request.param](tmp_path, monkeypatch)
    yield driver, handle, tmp_path
    driver.close()


# -- the checks -----------------------------------------------------------------------------


def plan_order(driver: LoadDriver, points: list[LoadPoint]) -> list[str]:
    """The ids of the points `driver` runs for `points`, in the order it runs them. A
    cross-check runs each point once per side, under an id naming the side, and the side
    that goes first alternates from point to point (so a server that drifts over the
    configuration's life favours neither)."""
    if not isinstance(driver, CrossCheckDriver):
        return [p.point_id for p in points]
    names = list(driver.drivers)
    return [
        f"{point.point_id}@{name}"
        for number, point in enumerate(points)
        for name in (names if number % 2 == 0 else names[::-1])
    ]


def takes_more_points(driver: LoadDriver) -> bool:
    """Whether `driver` asks next_points() for more once the prepared points are done. A
    cross-check measures fixed points only: it refuses a capacity search in prepare (before
    any server is needed), so it has no probes to ask for and never calls next_points."""
    return not isinstance(driver, CrossCheckDriver)


def check_reports_every_point_in_order_then_asks_for_more(
    driver: LoadDriver, handle, work: Path, points, more
) -> list:
    events: list[tuple[str, str]] = []
    asked = []

    def next_points():
        asked.append(len(events))
        return [more] if len(asked) == 1 else []

    driver.prepare(points, work)
    driver.run(
        handle,
        lambda r: events.append(("result", r.point_id)),
        lambda p: events.append(("start", p.point_id)),
        next_points,
    )
    if takes_more_points(driver):
        ids = plan_order(driver, [*points, more])
        assert len(asked) == 2  # asked once after the prepared points, once after the extra one
    else:
        ids = plan_order(driver, points)
        assert asked == []
    assert events == [e for pid in ids for e in (("start", pid), ("result", pid))]
    assert isinstance(driver.retried, list)
    return events


def check_abort_ends_the_run_with_the_reason(driver: LoadDriver, handle, work: Path, points):
    results = []
    first, second = plan_order(driver, points)[:2]

    def on_start(point):
        if point.point_id == second:
            threading.Timer(0.2, driver.abort, args=("the server is gone",)).start()

    driver.prepare(points, work)
    began = time.monotonic()
    with pytest.raises(LoadError, match="the server is gone"):
        driver.run(handle, results.append, on_start)
    assert time.monotonic() - began < 30
    assert [r.point_id for r in results] == [first]  # nothing after the abort


def process_groups(driver: LoadDriver) -> set[int]:
    """The process groups `driver` runs now: `pgid`, and for a cross-check every side's
    (prepare starts both workers; `pgid` names the one whose turn it is)."""
    groups = {driver.pgid}
    if isinstance(driver, CrossCheckDriver):
        groups |= {side.pgid for side in driver.drivers.values()}
    return {group for group in groups if group is not None}


def check_close_is_idempotent_and_leaves_no_process(driver: LoadDriver, work: Path, points):
    driver.prepare(points, work)
    groups = process_groups(driver)
    driver.close()
    driver.close()
    assert driver.pgid is None
    for group in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)


# -- against every implementation --------------------------------------------------------


def test_reports_every_point_in_order_then_asks_for_more(made):
    driver, handle, tmp_path = made
    check_reports_every_point_in_order_then_asks_for_more(
        driver, handle, tmp_path / "w", POINTS, MORE
    )


def test_abort_ends_the_run_with_the_reason(made):
    driver, handle, tmp_path = made
    points = [*POINTS, LoadPoint("poisson-3", "poisson", 3.0, 2.0, None, None)]
    if isinstance(driver, RecordedDriver):
        # A recorded run answers instantly, so there is no point in flight to abort from a timer:
        # an abort after the first result must still end the run before the second.
        driver.prepare(points, tmp_path / "w")
        results: list = []
        with pytest.raises(LoadError, match="the server is gone"):
            driver.run(handle, lambda r: (results.append(r), driver.abort("the server is gone")))
        assert len(results) == 1
        return
    if isinstance(driver, FakeLoadDriver):
        driver.hold_s = 2.0
    check_abort_ends_the_run_with_the_reason(driver, handle, tmp_path / "w", points)


def test_close_is_idempotent_and_leaves_no_process(made):
    driver, _, tmp_path = made
    check_close_is_idempotent_and_leaves_no_process(driver, tmp_path / "w", POINTS)


def test_the_vllm_bench_driver_replays_a_trace_point_through_its_worker(tmp_path, monkeypatch):
    """A replay point goes to the worker as a timed_trace run and comes back with the trace
    evidence: the stand-in answers with the recorded 40-request result, so the trace holds
    40 requests (line i of the file is request i of the result)."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    from tunebench.spec.models import TraceData

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    made = Tokenizer(models.WordLevel({"<s>": 0, "<unk>": 1, "hello": 2}, unk_token="<unk>"))
    made.pre_tokenizer = pre_tokenizers.Whitespace()
    made.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)]
    )
    made.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "t.jsonl").write_text(
        "".join(
            json.dumps({"timestamp": i * 0.01, "prompt_tokens": 64, "output_tokens": 32}) + "\n"
            for i in range(40)
        )
    )
    trace = TraceData(kind="trace", path="t.jsonl", name="t")
    driver = VllmBenchDriver(trace, str(tmp_path), spec_dir=tmp_path, context=512)
    driver.worker_module = "tests.fakes.fake_vllm_bench_worker"
    point = LoadPoint("replay-t-2", "replay", 2.0, None, None, None, trace=trace)
    results = []
    try:
        driver.prepare([point], tmp_path / "w")
        driver.run(FAKE_HANDLE, results.append)
    finally:
        driver.close()
    job = json.loads((tmp_path / "w" / "vllm-bench-job.json").read_text())
    argv = job["points"][0]["argv"]
    assert argv[argv.index("--dataset-name") + 1] == "timed_trace"
    assert argv[argv.index("--dataset-path") + 1] == str(tmp_path / "w/trace/replay-t-2.jsonl")
    [found] = results
    # the recorded result was no replay: its lags are figures, not meaningful ones
    assert found.columns["trace_requests"] == 40
    assert found.columns["arrival_lag_p95_ms"] is not None
    assert found.columns["load_driver"] == "vllm-bench" and found.columns["strategy"] == "replay"
    assert len(found.samples) == 40
    assert all(s["trace_prompt_tokens"] == 64 and "scheduled_time" in s for s in found.samples)
