"""Watches the machine under a configuration's load: telemetry every second, the probe every
`probe_interval_s` and at every point's edges, read back per window (points/machine.py).

Like an energy meter (seams/energy.py): `start()`, `mark()` at a point's edges, `window()`,
`stop()`; a failed read is counted and kept, never the end of a run.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Callable

from tunebench.machine.gpu import GpuClocks, gpu_slowdown, gpu_window
from tunebench.machine.probe import Probe
from tunebench.machine.telemetry import Counters, Telemetry
from tunebench.points.machine import MachineReading


class MachineWatch:
    def __init__(
        self,
        telemetry: Telemetry,
        probe: Probe | None,
        interval_s: float = 1.0,
        probe_interval_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        gpu_reader: Callable[[], list[GpuClocks]] | None = None,
    ):
        self.telemetry = telemetry
        self.gpu_reader = gpu_reader
        self._gpu: list[tuple[float, list[GpuClocks]]] = []
        self.probe = probe
        self.interval_s = interval_s
        self.probe_interval_s = probe_interval_s
        self._clock = clock
        self._counters: list[Counters] = []
        self._probes: list[tuple[float, float]] = []  # (epoch time, ms)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._probe_now = threading.Event()
        self._wake = threading.Event()  # a mark, or the stop: the loop does not wait its tick
        self._probed = threading.Event()  # set after each probe ends (ran or failed)
        self._thread: threading.Thread | None = None
        self.failures = 0
        self.last_error = ""

    @property
    def cpus(self) -> str:
        cpus = self.telemetry.cpus
        if not cpus:
            return "all CPUs"
        return ("CPU " if len(cpus) == 1 else "CPUs ") + ",".join(str(c) for c in sorted(cpus))

    def _sample(self) -> None:
        try:
            counters = self.telemetry.read(self._clock())
        except Exception as exc:  # a /proc hiccup must not end the run
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return
        with self._lock:
            self._counters.append(counters)
        if self.gpu_reader is not None:
            try:
                clocks = self.gpu_reader()
            except Exception as exc:  # an NVML hiccup costs a sample
                self.failures += 1
                self.last_error = f"GPU clocks: {type(exc).__name__}: {exc}"
            else:
                with self._lock:
                    self._gpu.append((self._clock(), clocks))

    def _run_probe(self) -> None:
        if self.probe is None:
            return
        try:
            ms = self.probe.measure_median(3)
        except Exception as exc:
            self.failures += 1
            self.last_error = f"probe: {type(exc).__name__}: {exc}"
        else:
            with self._lock:
                self._probes.append((self._clock(), ms))
        self._probed.set()  # after the probe is on record: a waiter reads it next

    def _loop(self) -> None:
        # its own schedule, whatever the marks ask besides: a load generator that runs its
        # points back to back leaves no idle gap to wait for, and a long window still gets
        # a probe every `probe_interval_s`
        next_probe = time.monotonic()
        while not self._stop.is_set():
            self._sample()
            if self._probe_now.is_set():
                self._probe_now.clear()
                self._run_probe()
            if time.monotonic() >= next_probe:
                self._run_probe()
                next_probe += self.probe_interval_s
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="machine-watch", daemon=True)
            self._thread.start()

    def mark(self) -> None:
        """A point starts or ends: a telemetry sample now, and a probe right away, on the
        watch's own thread (the point's next steps do not wait for it)."""
        self._sample()
        self._probed.clear()
        self._probe_now.set()
        self._wake.set()

    def wait_for_probe(self, timeout: float = 2.0) -> bool:
        """Wait until the probe a mark asked for has run (a window's reading then holds
        the probe after it); False at `timeout`, or when the watch has no probe or no loop."""
        if self.probe is None or self._thread is None or not self._thread.is_alive():
            return False
        return self._probed.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=10)

    def probes(self) -> list[tuple[float, float]]:
        with self._lock:
            return list(self._probes)

    def csv_text(self) -> str:
        """Every probe and telemetry sample so far, one row each, for the run directory:
        time, probe_ms (empty on telemetry rows) and the counters as read."""
        with self._lock:
            counters = list(self._counters)
            probes = list(self._probes)
        lines = ["time,probe_ms,busy_s,steal_s,total_s,ours_s,throttled_s"]
        rows = [(t, f"{t:.3f},{ms:.3f},,,,,") for t, ms in probes]
        rows += [
            (
                c.time,
                f"{c.time:.3f},,{c.busy_s:.2f},{c.steal_s:.2f},{c.total_s:.2f},"
                f"{c.ours_s:.2f},{c.throttled_s:.3f}",
            )
            for c in counters
        ]
        return "\n".join(lines + [text for _, text in sorted(rows)]) + "\n"

    def window(self, start: float, end: float) -> MachineReading | str:
        with self._lock:
            counters = list(self._counters)
            probes = list(self._probes)
        first = [c for c in counters if c.time <= start + self.interval_s]
        last = [c for c in counters if c.time >= end - self.interval_s]
        if not first or not last or last[-1].time - first[-1].time <= 0:
            why = f" (last error: {self.last_error})" if self.last_error else ""
            return f"no telemetry around the window{why}"
        a, b = first[-1], last[-1]
        total = b.total_s - a.total_s
        seconds = b.time - a.time

        def share(value: float, of: float) -> float | None:
            return max(0.0, value) / of if of > 0 else None

        gpu: str | None = None
        if self.gpu_reader is not None:
            with self._lock:
                found = gpu_window(list(self._gpu), start, end)
            gpu = found if isinstance(found, str) else gpu_slowdown(found)
            if isinstance(found, str):
                gpu = f"GPU clocks not judged: {found}"
        inside = [ms for t, ms in probes if start <= t <= end]
        before = [ms for t, ms in probes if t < start]
        after = [ms for t, ms in probes if t > end]
        return MachineReading(
            throttled_share=share(b.throttled_s - a.throttled_s, seconds),
            steal_share=share(b.steal_s - a.steal_s, total),
            foreign_share=share((b.busy_s - a.busy_s) - (b.ours_s - a.ours_s), total),
            mhz=b.mhz,
            probe_ms=statistics.median(inside) if inside else None,
            probe_before_ms=before[-1] if before else None,
            probe_after_ms=after[0] if after else None,
            cpus=self.cpus,
            gpu=gpu,
        )
