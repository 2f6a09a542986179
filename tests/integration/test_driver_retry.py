"""The GuideLLM driver survives a stalled or dead worker (fake worker: a unit test of the seam)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from tests.conftest import REPO
from tests.unit.test_trace import tokenizer_dir  # noqa: F401  (a fixture: the demo tokenizer)
from tunebench.errors import LoadError
from tunebench.load.guidellm import GuideLLMDriver
from tunebench.load.worker_pipe import QUIET, WorkerPipe
from tunebench.seams.deployment import ServerHandle
from tunebench.spec.models import SyntheticData
from tunebench.spec.plan import LoadPoint

POINTS = [LoadPoint(f"concurrent-{n}", "concurrent", n, 0.5, None, None) for n in (1, 2, 4)]
HANDLE = ServerHandle("http://127.0.0.1:9", "http://127.0.0.1:9/metrics", "m")


def drive(tmp_path, monkeypatch, mode, stall_margin_s=1.0, first_request_s=1.0):
    monkeypatch.setenv("FAKE_WORKER_MODE", mode)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    driver = GuideLLMDriver(
        SyntheticData(kind="synthetic", prompt_tokens=8, output_tokens=8), tmp_path, "tok"
    )
    driver.worker_module = "tests.fakes.fake_guidellm_worker"
    driver.stall_margin_s = stall_margin_s
    driver.first_request_s = first_request_s
    results = []
    driver.prepare(POINTS, tmp_path / "work")
    try:
        driver.run(HANDLE, results.append)
    finally:
        groups = driver.pgid
        driver.close()
    return [r.point_id for r in results], groups, driver


@pytest.mark.parametrize("mode", ["stall-once", "die-once"])
def test_remaining_points_run_again_in_a_fresh_worker(tmp_path, monkeypatch, mode):
    points, _, _ = drive(tmp_path, monkeypatch, mode)
    assert points == ["concurrent-1", "concurrent-2", "concurrent-4"]  # each exactly once
    assert (tmp_path / "work" / "guidellm-job-retry1.json").exists()


def test_a_stalled_worker_writes_where_it_hangs_into_its_log_before_it_is_stopped(
    tmp_path, monkeypatch
):
    drive(tmp_path, monkeypatch, "stall-once")
    log = (tmp_path / "work" / "guidellm.log").read_text()
    # faulthandler's dump of the stalled worker: the fake sleeps in main() on its 2nd point
    assert "most recent call first" in log
    assert 'fake_guidellm_worker.py", line' in log and "in main" in log


def test_the_real_worker_answers_a_stack_request(tmp_path):
    """The GuideLLM worker itself (GuideLLM imported, waiting for the server's "go")."""
    job = tmp_path / "job.json"
    job.write_text("{}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    pipe = WorkerPipe(
        [sys.executable, "-m", "tunebench.load.guidellm_worker", str(job)],
        env,
        tmp_path / "worker.log",
        None,
        "guidellm",
    )
    try:
        deadline = time.monotonic() + 120
        event = pipe.read()
        while event is QUIET and time.monotonic() < deadline:
            event = pipe.read()
        assert isinstance(event, dict) and event["event"] == "imported", event
        pipe.dump_stacks()
        # the dump is written when the worker next runs: a busy machine may take longer than
        # dump_stacks' settle time, so read until it is there (the assertion below says what)
        log_path, until = tmp_path / "worker.log", time.monotonic() + 60
        while "in _main" not in log_path.read_text() and time.monotonic() < until:
            time.sleep(0.2)
        log = log_path.read_text()
        assert "most recent call first" in log and "guidellm_worker.py" in log, log[-2000:]
        assert "in _main" in log  # where it waits: the go line
        assert pipe.process.popen.poll() is None  # it answered and went on
    finally:
        pipe.stop(grace_s=2)


def test_gives_up_after_the_retry(tmp_path, monkeypatch):
    with pytest.raises(LoadError, match="no progress on concurrent-2.*after 1 retry"):
        drive(tmp_path, monkeypatch, "stall")


def test_a_benchmark_that_never_sends_is_stopped_at_the_first_request_deadline(
    tmp_path, monkeypatch
):
    """A point's own budget here is over a minute (stall margin 30 s); the hang between
    GuideLLM starting a benchmark and its first request is cut after first_request_s."""
    started = time.monotonic()
    points, _, driver = drive(
        tmp_path, monkeypatch, "hang-once", stall_margin_s=30.0, first_request_s=1.0
    )
    assert points == ["concurrent-1", "concurrent-2", "concurrent-4"]
    assert driver.retried == [
        {"point": "concurrent-2", "reason": "GuideLLM made no progress on concurrent-2; stopped it"}
    ]
    assert time.monotonic() - started < 30  # not the 30 s + 2 x 0.5 s + 30 s point budget


def test_capacity_probes_over_replay_speed_get_workloads_of_their_own(
    tmp_path,
    monkeypatch,
    tokenizer_dir,  # noqa: F811  (the fixture imported above)
):
    """Probes chosen at run time (a capacity search over replay speed) are replays: each is
    sent with a dataset built for it, as the prepared replay points are."""
    import json

    from tunebench.spec.models import TraceData

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "\n".join(
            json.dumps({"timestamp": t, "prompt_tokens": 20, "output_tokens": 2})
            for t in (0.0, 1.0, 3.0)
        )
    )
    data = TraceData(kind="trace", path=str(trace))
    driver = GuideLLMDriver(data, tmp_path, str(tokenizer_dir), context=512)
    driver.worker_module = "tests.fakes.fake_guidellm_worker"
    probes = [
        LoadPoint(f"capacity-{n}", "replay", s, None, None, None, trace=data)
        for n, s in ((1, 1.0), (2, 2.0))
    ]
    asked = []

    def next_points():
        asked.append(1)
        return [probes[len(asked) - 1]] if len(asked) <= len(probes) else []

    results = []
    driver.prepare([], tmp_path / "work")
    try:
        driver.run(HANDLE, results.append, None, next_points)
    finally:
        driver.close()
    assert [r.point_id for r in results] == ["capacity-1", "capacity-2"]
    sent = [
        json.loads(line)
        for line in (tmp_path / "work" / "benchmarks" / "groups.jsonl").read_text().splitlines()
    ][1:]  # the job's own groups first: none were prepared
    assert [g[0]["profile"]["time_scale"] for g in sent] == [1.0, 0.5]
    for group, probe in zip(sent, probes):
        dataset = tmp_path / "work" / "trace" / f"{probe.point_id}.jsonl"
        assert group[0]["data"] == {"kind": "json_file", "path": str(dataset)}
        assert len(dataset.read_text().splitlines()) == 3  # the whole slice
    assert all(r.columns["trace_requests"] == 3 for r in results)
