"""Energy over a window from timed readings: an energy counter, or power samples.

A counter (NVML's total energy, RAPL's energy_uj) is read at its value at the window's start
and end, interpolated between the readings around each edge: exact up to the counter's own
resolution. Power samples (NVML on GPUs without the counter, DCGM through Prometheus) give the
mean power of the samples inside the window times its length: as good as the samples are
dense, so fewer than `MIN_POWER_SAMPLES` per device is no answer rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_POWER_SAMPLES = 2


@dataclass(frozen=True)
class Reading:
    time: float  # epoch seconds
    values: dict[str, float]  # device -> cumulative joules (counter) or watts (power)


def _at(readings: list[Reading], device: str, when: float) -> float | None:
    """The counter of `device` at `when`, interpolated between the readings around it."""
    before = [r for r in readings if r.time <= when and device in r.values]
    after = [r for r in readings if r.time >= when and device in r.values]
    if not before or not after:
        return None
    a, b = before[-1], after[0]
    if b.time == a.time:
        return a.values[device]
    share = (when - a.time) / (b.time - a.time)
    return a.values[device] + share * (b.values[device] - a.values[device])


def counter_joules(readings: list[Reading], start: float, end: float) -> tuple[float, int] | str:
    """Joules summed over devices between `start` and `end`, and the readings inside."""
    readings = sorted(readings, key=lambda r: r.time)
    if not readings:
        return "no energy reading was taken"
    devices = sorted({d for r in readings for d in r.values})
    total = 0.0
    for device in devices:
        first, last = _at(readings, device, start), _at(readings, device, end)
        if first is None or last is None:
            edge = "start" if first is None else "end"
            return f"no energy reading of {device} around the window's {edge}"
        if last < first:
            return f"the energy counter of {device} went back in the window (reset?)"
        total += last - first
    inside = sum(1 for r in readings if start <= r.time <= end)
    return total, inside


def power_joules(
    readings: list[Reading], start: float, end: float, what: str = "power sample"
) -> tuple[float, int] | str:
    """Mean power of the samples inside the window, summed over devices, times its length."""
    inside = [r for r in readings if start <= r.time <= end]
    devices = sorted({d for r in readings for d in r.values})
    if not devices:
        return f"no {what} was taken"
    watts = 0.0
    for device in devices:
        values = [r.values[device] for r in inside if device in r.values]
        if len(values) < MIN_POWER_SAMPLES:
            return (
                f"{len(values)} {what}(s) of {device} inside the {end - start:.1f} s window "
                f"(at least {MIN_POWER_SAMPLES} are needed): sample more often or measure longer"
            )
        watts += sum(values) / len(values)
    return watts * (end - start), len(inside)
