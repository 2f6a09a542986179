"""The load generator's CPU and run-queue wait from Linux scheduler statistics."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tunebench.load import client_usage
from tunebench.load.client_usage import ProcessGroupUsage, Sample, usage_between


def fake_proc(root: Path, processes: dict[int, tuple[int, dict[int, tuple[int, int]]]]) -> Path:
    """/proc with `pid -> (pgid, {tid: (run_ns, wait_ns)})`."""
    for pid, (pgid, threads) in processes.items():
        (root / str(pid) / "task").mkdir(parents=True, exist_ok=True)
        # a comm with a space and a parenthesis, as real ones can have
        (root / str(pid) / "stat").write_text(f"{pid} (py (x) y) S 1 {pgid} {pgid} 0 -1\n")
        for tid, (run, wait) in threads.items():
            (root / str(pid) / "task" / str(tid)).mkdir(exist_ok=True)
            (root / str(pid) / "task" / str(tid) / "schedstat").write_text(f"{run} {wait} 7\n")
    (root / "self").mkdir(exist_ok=True)
    (root / "self" / "schedstat").write_text("0 0 0\n")
    return root


def test_only_the_followed_group_is_counted(tmp_path):
    proc = fake_proc(
        tmp_path, {10: (10, {10: (5, 1)}), 11: (10, {11: (7, 2)}), 12: (99, {12: (9, 9)})}
    )
    assert sorted(client_usage.group_pids(10, proc)) == [10, 11]
    assert client_usage.sample(10, proc).threads == {10: (5, 1), 11: (7, 2)}


def test_usage_between_two_samples():
    before = Sample(100.0, {1: (0, 0), 2: (0, 0)})
    after = Sample(102.0, {1: (int(1.8e9), int(0.1e9)), 2: (int(0.4e9), int(1.0e9)), 3: (5, 5)})
    # whole group 2.2 s of CPU in 2 s; the busiest thread ran 1.8 s and waited 0.1 s of the
    # 1.9 s it had work (thread 2's long wait is not the busiest thread's)
    assert usage_between(before, after) == {
        "client_cpu_pct": 110.0,
        "client_busiest_pct": 90.0,
        "client_wait_pct": 5.3,
    }
    assert usage_between(after, after)["client_cpu_pct"] is None


@pytest.mark.skipif(not client_usage.available(), reason="needs Linux schedstat")
def test_a_busy_process_group_reads_as_busy():
    # This test process (its own group under pytest is not guaranteed: follow ours) spins.
    usage = ProcessGroupUsage(interval_s=0.1)
    usage.follow(os.getpgrp())
    try:
        start = time.time()
        while time.time() - start < 0.6:
            pass
        end = time.time()
        time.sleep(0.15)
        window = usage.window(start, end)
    finally:
        usage.follow(None)
    # it had work all the time: on a CPU, or waiting for one (a busy machine shares the core,
    # and the wait is what says so); an idle group has neither
    wanted = window["client_busiest_pct"] / max(1e-9, 1 - window["client_wait_pct"] / 100)
    assert wanted > 50, window
    assert window["client_cpu_pct"] >= window["client_busiest_pct"]


def test_unfollowed_gives_empty_columns():
    usage = ProcessGroupUsage()
    assert usage.window(0, 1) == dict.fromkeys(client_usage.USAGE_COLUMNS)
