"""Does this machine hold its speed? The probe timed over a span, read in bins.

`tunebench check-machine` and a sweep's preflight (`machine.stability_s`): the probe
(machine/probe.py) runs every `every_s` seconds on the given CPUs for `seconds`, and the
medians of consecutive bins are compared: the slowest bin over the fastest says by how much
the machine's speed moved with nothing of ours running. A measurement whose figures must be
good to `precision` (10% by default) needs every bin within that of the fastest. Steal and
other processes' CPU over the span are read beside it (machine/telemetry.py), so a verdict
says why the machine moved when the operating system can tell.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

from tunebench.machine.probe import Probe
from tunebench.machine.telemetry import Telemetry

#: Fewest probes a bin's median is read from.
LEAST_PER_BIN = 5


@dataclass(frozen=True)
class Stability:
    seconds: float
    bins: list[float]  # each bin's median probe time, ms
    spread: float  # slowest bin over the fastest, minus one
    precision: float
    steal_share: float | None
    foreign_share: float | None
    cpus: str

    @property
    def steady(self) -> bool:
        return self.spread <= self.precision

    def line(self) -> str:
        verdict = "holds its speed" if self.steady else "does NOT hold its speed"
        why = []
        if self.steal_share is not None and self.steal_share >= 0.01:
            why.append(f"steal {self.steal_share:.0%}")
        if self.foreign_share is not None and self.foreign_share >= 0.05:
            why.append(f"other processes {self.foreign_share:.0%} of {self.cpus}")
        return (
            f"machine {verdict} to {self.precision:.0%}: over {self.seconds:.0f} s the probe's "
            f"slowest {len(self.bins)}-bin median was {self.spread:.0%} above its fastest "
            f"({min(self.bins):.2f}-{max(self.bins):.2f} ms on {self.cpus})"
            + (f"; {', '.join(why)}" if why else "")
        )


def check_stability(
    seconds: float,
    cpus: set[int] | None = None,
    bins: int = 6,
    every_s: float = 0.5,
    precision: float = 0.10,
    progress: Callable[[float], None] | None = None,
) -> Stability:
    """Time the probe for `seconds` and judge the spread of its bins."""
    probe = Probe(cpus)
    probe.measure()  # the first run pays for first touches: not a reading
    telemetry = Telemetry(cpus, [])
    before = telemetry.read(time.time())
    readings: list[tuple[float, float]] = []
    begin = time.monotonic()
    while (elapsed := time.monotonic() - begin) < seconds:
        readings.append((elapsed, probe.measure()))
        if progress is not None:
            progress(elapsed)
        time.sleep(max(0.0, every_s - (time.monotonic() - begin - elapsed)))
    after = telemetry.read(time.time())
    # as many bins as the probes fill (at least two), up to `bins`
    bins = max(2, min(bins, len(readings) // LEAST_PER_BIN))
    width = seconds / bins
    medians = []
    for k in range(bins):
        part = [ms for t, ms in readings if k * width <= t < (k + 1) * width]
        if len(part) >= LEAST_PER_BIN:
            medians.append(statistics.median(part))
    if len(medians) < 2:
        raise ValueError(
            f"{seconds:g} s gave {len(readings)} probes: too few for {bins} bins of "
            f"{LEAST_PER_BIN}; measure longer"
        )
    total = after.total_s - before.total_s
    busy = (after.busy_s - before.busy_s) - (after.ours_s - before.ours_s)
    return Stability(
        seconds=seconds,
        bins=medians,
        spread=max(medians) / min(medians) - 1,
        precision=precision,
        steal_share=(after.steal_s - before.steal_s) / total if total > 0 else None,
        foreign_share=max(0.0, busy) / total if total > 0 else None,
        cpus="all CPUs" if not cpus else "CPUs " + ",".join(map(str, sorted(cpus))),
    )
