"""A meter that reads a local source on a daemon thread: NVML or RAPL."""

from __future__ import annotations

import threading
import time
from typing import Callable, Literal

from tunebench.energy.window import Reading, counter_joules, power_joules
from tunebench.seams.energy import EnergyReading


class SamplingMeter:
    """Calls `read()` every `interval_s` until `stop()`. `read` returns device -> cumulative
    joules (`kind` counter) or device -> watts (`kind` power); a failed read is counted and
    the last error kept, so one bad read costs a sample, not the point."""

    def __init__(
        self,
        read: Callable[[], dict[str, float]],
        kind: Literal["counter", "power"],
        source: str,
        devices: str,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ):
        self.source = source
        self.devices = devices
        self.kind = kind
        self.interval_s = interval_s
        self._read = read
        self._clock = clock
        self._readings: list[Reading] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0
        self.last_error = ""

    def mark(self) -> None:
        try:
            values = self._read()
        except Exception as exc:  # a driver hiccup must not end the run
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return
        with self._lock:
            self._readings.append(Reading(self._clock(), values))

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.mark()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="energy-meter", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=10)

    def readings(self) -> list[Reading]:
        with self._lock:
            return list(self._readings)

    def window(self, start: float, end: float) -> EnergyReading | str:
        if end <= start:
            return "the window is empty"
        readings = self.readings()
        if self.kind == "counter":
            result = counter_joules(readings, start, end)
        else:
            result = power_joules(readings, start, end)
        if isinstance(result, str):
            return result + (f" (last read error: {self.last_error})" if self.last_error else "")
        joules, inside = result
        return EnergyReading(
            joules=joules,
            mean_watts=joules / (end - start),
            source=self.source,
            devices=self.devices,
            method=self.kind,
            samples=inside,
        )
