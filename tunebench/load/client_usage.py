"""How much CPU the load generator used, and how long it waited for one, per point.

A load generator that is short of CPU reads its streams late: TTFT and ITL grow while the
concurrency it reports looks right. On a small machine the server and the client share the
cores, so this is measured, not assumed. `ProcessGroupUsage` samples, every `interval_s`,
the Linux scheduler statistics (`/proc/PID/task/TID/schedstat`: nanoseconds on a CPU and
nanoseconds runnable but waiting in a run queue) of every thread of one process group (the
GuideLLM worker and the processes it spawns). `window(start, end)` turns two samples
around a point's measured window into:

- `client_cpu_pct`: CPU used by the whole group, in % of one core;
- `client_busiest_pct`: the busiest thread, in % of one core. An event loop is one thread:
  near 100% it cannot keep up, however many cores are free;
- `client_wait_pct`: of the time the busiest thread had work (ran or waited in a run
  queue), the share it waited: 50% means it got the CPU half of the time it wanted it
  (one other busy process on its core), 87% a seventh (six others). The busiest thread is
  the one whose delay delays the requests; an idle thread's waits say nothing.

Where /proc has no schedstat (not Linux), every value is None and nothing is flagged.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunebench.points.columns import CLIENT_LOAD_COLUMNS

PROC = Path("/proc")
USAGE_COLUMNS = tuple(c for c in CLIENT_LOAD_COLUMNS if c.startswith("client_"))


@dataclass(frozen=True)
class Sample:
    time: float  # epoch seconds
    threads: dict[int, tuple[int, int]]  # tid -> (ns on a CPU, ns waiting for one)


def available() -> bool:
    return (PROC / "self" / "schedstat").exists()


def group_pids(pgid: int, proc: Path = PROC) -> list[int]:
    """Every process whose process group is `pgid` (field 5 of /proc/PID/stat)."""
    pids = []
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            stat = (proc / entry.name / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid):
            pids.append(int(entry.name))
    return pids


def thread_times(pid: int, proc: Path = PROC) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    try:
        tasks = list(os.scandir(proc / str(pid) / "task"))
    except OSError:
        return out
    for task in tasks:
        try:
            run_ns, wait_ns, _ = (
                (proc / str(pid) / "task" / task.name / "schedstat").read_text().split()
            )
        except (OSError, ValueError):
            continue
        out[int(task.name)] = (int(run_ns), int(wait_ns))
    return out


def sample(pgid: int, proc: Path = PROC) -> Sample:
    threads: dict[int, tuple[int, int]] = {}
    for pid in group_pids(pgid, proc):
        threads.update(thread_times(pid, proc))
    return Sample(time.time(), threads)


def usage_between(before: Sample, after: Sample) -> dict[str, Any]:
    """The three columns between two samples of one group (threads seen in both)."""
    span = after.time - before.time
    if span <= 0:
        return dict.fromkeys(USAGE_COLUMNS)
    deltas = [
        (max(0, run_ns - before.threads[tid][0]), max(0, wait_ns - before.threads[tid][1]))
        for tid, (run_ns, wait_ns) in after.threads.items()
        if tid in before.threads
    ]
    if not deltas:
        return dict.fromkeys(USAGE_COLUMNS)
    busiest_run, busiest_wait = max(deltas)

    def pct(ns: float) -> float:
        return round(100 * ns / 1e9 / span, 1)

    wanted = busiest_run + busiest_wait
    return {
        "client_cpu_pct": pct(sum(run for run, _ in deltas)),
        "client_busiest_pct": pct(busiest_run),
        "client_wait_pct": round(100 * busiest_wait / wanted, 1) if wanted else None,
    }


class ProcessGroupUsage:
    """A daemon thread sampling one process group while it is followed: `follow(pgid)`
    starts it or switches it (a retried worker is a new group), `follow(None)` stops it.
    Keeps the last `keep` samples, enough for any point's window."""

    def __init__(self, interval_s: float = 0.5, keep: int = 7200, proc: Path = PROC):
        self.interval_s = interval_s
        self.proc = proc
        self._samples: deque[Sample] = deque(maxlen=keep)
        self._pgid: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def follow(self, pgid: int | None) -> None:
        with self._lock:
            self._pgid = pgid
            self._samples.clear()
        if pgid is None:
            self._stop_thread()
        elif self._thread is None and (self.proc / "self" / "schedstat").exists():
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._loop, args=(self._stop,), name="client-usage", daemon=True
            )
            self._thread.start()
            self.sample_now()

    def _stop_thread(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def sample_now(self) -> None:
        with self._lock:
            pgid = self._pgid
        if pgid is None:
            return
        taken = sample(pgid, self.proc)
        with self._lock:
            if pgid == self._pgid:
                self._samples.append(taken)

    def _loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            self.sample_now()

    def window(self, start: float, end: float) -> dict[str, Any]:
        """Usage over [start, end] from the last sample at or before `start` (else the first)
        and the first at or after `end` (a fresh one if none is that late yet)."""
        if self._thread is None:
            return dict.fromkeys(USAGE_COLUMNS)
        with self._lock:
            samples = list(self._samples)
        if not samples or samples[-1].time < end:
            self.sample_now()
            with self._lock:
                samples = list(self._samples)
        if len(samples) < 2:
            return dict.fromkeys(USAGE_COLUMNS)
        before = next((s for s in reversed(samples) if s.time <= start), samples[0])
        after = next((s for s in samples if s.time >= end), samples[-1])
        return usage_between(before, after)
