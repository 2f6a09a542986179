"""Configurations measured N at a time (`deployment.parallel: N`).

Each configuration runs in a thread of its own with a runner of its own (its deployment, its
load driver, its scraper): helm installs one release per configuration, a local box gives
each server its own GPUs. They write to one run: the run store serialises the manifest and
points.csv, every other file is the configuration's own.

Scheduling, in plan order: a configuration starts when a slot is free, no other repeat of it
is running (a release or GPU set is one configuration's at a time) and, on a local box, when
enough GPUs are free. A configuration that fails (a release that cannot be scheduled, a
server that dies) fails alone; the others go on.

Ctrl-C (or SIGTERM) reaches the main thread only. It is passed on to every configuration
still running as a KeyboardInterrupt raised in its thread, so each tears down exactly as a
sequential sweep does on Ctrl-C, and the sweep waits for all of them before it stops.
"""

from __future__ import annotations

import ctypes
import queue
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

from tunebench.deploy.gpu_share import GpuPool, gpus_needed
from tunebench.kinds import Slot
from tunebench.points.cells import Cell
from tunebench.runner import ConfigOutcome
from tunebench.seams.progress import Reporter
from tunebench.spec.plan import LoadPoint, ServerConfig
from tunebench.sweep.work import WorkItem, repeat_of

FAIR_COMPARISON_NOTE = (
    "{n} configurations were measured at a time: they shared the cluster or host (network, "
    "nodes, storage, CPU of the load generators), so a difference between two of them may "
    "come partly from what ran beside them; confirm a close call with parallel: 1 or repeats"
)

MeasureItem = Callable[[WorkItem, Slot, Reporter], ConfigOutcome]


@dataclass
class _Running:
    item: WorkItem
    slot: Slot
    thread: threading.Thread | None = None
    outcome: ConfigOutcome | None = None
    error: BaseException | None = None


def measure_in_parallel(
    work: list[WorkItem],
    parallel: int,
    measure: MeasureItem,
    reporter: Reporter,
    gpus: list[str] | None = None,
) -> list[ConfigOutcome]:
    """Outcomes of every item of `work` (in the order they finished), up to `parallel` at
    a time; `gpus`: share these out by each configuration's parallel size."""
    pool = GpuPool(gpus) if gpus is not None else None
    shared = ParallelReporter(reporter)
    finished: queue.Queue[_Running] = queue.Queue()
    pending = list(enumerate(work, start=1))
    running: list[_Running] = []
    outcomes: list[ConfigOutcome] = []

    def work_on(entry: _Running, index: int) -> None:
        try:
            shared.config_starting(entry.item.config, index, len(work), repeat_of(entry.item))
            entry.outcome = measure(entry.item, entry.slot, shared)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            entry.error = exc
        finally:
            finished.put(entry)

    try:
        while pending or running:
            for index, item in list(pending):
                if len(running) >= parallel:
                    break
                busy = {r.item.config.config_id for r in running}
                if item.config.config_id in busy:
                    continue
                taken = pool.take(gpus_needed(item.config)) if pool is not None else None
                if pool is not None and taken is None:
                    continue
                pending.remove((index, item))
                entry = _Running(item, Slot(item.config.config_id, taken))
                entry.thread = threading.Thread(
                    target=work_on,
                    args=(entry, index),
                    name=f"config-{item.config.config_id}",
                    daemon=True,
                )
                running.append(entry)
                entry.thread.start()
            done = _next_finished(finished)
            running.remove(done)
            if pool is not None and done.slot.gpus:
                pool.give_back(done.slot.gpus)
            if done.error is not None:
                raise done.error
            assert done.outcome is not None
            outcomes.append(done.outcome)
    except BaseException:
        _stop_all(running, shared)
        raise
    return outcomes


def _next_finished(finished: queue.Queue[_Running]) -> _Running:
    # Short waits: the main thread runs Python between them, so a Ctrl-C (whichever thread
    # the kernel handed the signal to) is raised here within half a second.
    while True:
        try:
            return finished.get(timeout=0.5)
        except queue.Empty:
            continue


def _stop_all(running: list[_Running], reporter: Reporter) -> None:
    """Interrupt every configuration still running and wait until each has torn down."""
    live = [r for r in running if r.thread is not None and r.thread.is_alive()]
    if live:
        reporter.note(f"stopping {len(live)} configuration(s) running beside it …")
    for entry in live:
        assert entry.thread is not None and entry.thread.ident is not None
        # The only way to stop a thread blocked in a wait: raise in it. It runs the same
        # teardown (finally blocks, process groups reaped) as Ctrl-C in a sequential sweep.
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(entry.thread.ident), ctypes.py_object(KeyboardInterrupt)
        )
    for entry in live:
        assert entry.thread is not None
        while entry.thread.is_alive():
            try:
                entry.thread.join()
            except KeyboardInterrupt:  # a second Ctrl-C: teardown still has to finish
                print("still tearing down the other configurations …", file=sys.stderr)


class ParallelReporter:
    """A Reporter for configurations running at once: every event one line that names its
    configuration, from one thread at a time (the console's spinner is one line for one
    configuration, so server start-up status lines are left out)."""

    def __init__(self, inner: Reporter):
        self.inner = inner
        self._lock = threading.Lock()
        self._local = threading.local()  # the configuration of the calling thread

    def _tag(self) -> str:
        config = getattr(self._local, "config", None)
        return f"{config.config_id}: " if config is not None else ""

    def config_starting(
        self,
        config: ServerConfig,
        index: int,
        total: int,
        repeat: tuple[int, int] | None = None,
    ) -> None:
        self._local.config = config
        again = f" (repeat {repeat[0]} of {repeat[1]})" if repeat else ""
        self.note(f"[{index}/{total}] {config.label}{again}: starting")

    def server_status(self, message: str) -> None:
        pass

    def server_ready(self, config: ServerConfig, seconds: float | None) -> None:
        self.note("server ready" + (f" in {seconds:.0f} s" if seconds else ""))

    def point_starting(self, config: ServerConfig, point: LoadPoint) -> None:
        pass

    def point_done(self, config: ServerConfig, row: Mapping[str, Cell]) -> None:
        tagged = {**row, "point_id": f"{config.config_id} {row.get('point_id')}"}
        with self._lock:
            self.inner.point_done(config, tagged)

    def config_failed(self, config: ServerConfig, message: str, log_tail: str = "") -> None:
        with self._lock:
            self.inner.config_failed(config, f"{config.config_id}: {message}", log_tail)

    def capacity_found(self, config: ServerConfig, summary: dict[str, Any]) -> None:
        with self._lock:
            self.inner.note(f"{config.config_id}:")
            self.inner.capacity_found(config, summary)

    def trial_done(self, trial: Any, note: str) -> None:
        with self._lock:
            self.inner.trial_done(trial, note)

    def note(self, message: str) -> None:
        with self._lock:
            self.inner.note(self._tag() + message.strip())

    def close(self) -> None:
        with self._lock:
            self.inner.close()
