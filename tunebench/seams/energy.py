"""The EnergyMeter seam: how much energy the serving hardware drew over a point's window.

Contract for every implementation (tunebench/energy/ holds them;
tests/contract/test_energy_meter_contract.py runs it):
- `start()` begins sampling (a meter that is asked afterwards, such as a Prometheus query,
  may do nothing); `stop()` ends it, idempotent, never raises.
- `mark()` takes a reading now if the meter samples: the runner calls it when a point ends,
  so the window's end is bracketed by a reading without waiting for the next tick.
- `window(start, end)` is the energy of the epoch-second window [start, end]: an
  `EnergyReading`, or a `str` that says why there is none (never a reading of 0 for
  "unknown").
"""

from __future__ import annotations

from typing import Protocol

from tunebench.points.energy import EnergyReading


class EnergyMeter(Protocol):
    source: str

    def start(self) -> None: ...

    def mark(self) -> None: ...

    def window(self, start: float, end: float) -> EnergyReading | str: ...

    def stop(self) -> None: ...
