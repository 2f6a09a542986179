"""Whether the machine held still under one point: the evidence, its columns and its verdict.

A point measures the server and the machine together. Three kinds of evidence say when the
machine changed under a point (docs/machine-drift.md):
- the window's own requests (points/steadiness.py): a stretch that ran slower than the rest;
- telemetry of the server's CPUs over the window (tunebench/machine/telemetry.py): the
  server's cgroup throttled by its CPU quota, time stolen by the hypervisor, other
  processes' work on the server's cores;
- the probe (tunebench/machine/probe.py): a fixed piece of work timed on the server's cores
  before, inside and after the window, stored beside the point.

A point with evidence of a change is *unverified* with the reason "machine speed changed:
..." (where, how much, which evidence): its figures rest on a machine that moved. Such a
reason is told apart from other unverified reasons (`is_drift`), so a gate can be told to
accept drift alone (`compare --allow-drift`).

A point the machine could not be checked under at all (too few requests to test its window
and a watch that was asked for but read nothing) is unverified too, "machine not checked:
...": no evidence is not evidence of a steady machine. A run that turned the watch off
(`machine: {watch: false}`) opted out by name and keeps the note only.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.points.cells import MachineCells
from tunebench.points.steadiness import Steadiness

DRIFT_PREFIX = "machine speed changed"
UNCHECKED_PREFIX = "machine not checked"
#: Shares of the window beyond which telemetry is evidence of a change.
THROTTLED_SHARE = 0.05
STEAL_SHARE = 0.05
FOREIGN_SHARE = 0.10


@dataclass(frozen=True)
class MachineReading:
    """Telemetry and probes over one window (None: not readable here)."""

    throttled_share: float | None
    steal_share: float | None
    foreign_share: float | None
    mhz: float | None
    probe_ms: float | None
    probe_before_ms: float | None
    probe_after_ms: float | None
    cpus: str  # which CPUs were watched, e.g. "CPU 0" or "all CPUs"
    # the GPUs' clocks over the window (machine/gpu.py): a slowdown's evidence, "GPU clocks
    # not judged: ..." when too few samples, None when they held or there is no GPU
    gpu: str | None = None


def is_drift(reason: str) -> bool:
    return reason.startswith(DRIFT_PREFIX)


def _pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 2)


def machine_columns(
    steadiness: Steadiness | str, reading: MachineReading | str | None
) -> tuple[MachineCells, str | None]:
    """The point's machine columns, and its unverified reason: drift when the evidence
    shows a change, "machine not checked" when a watch was asked for (`reading` a reason,
    not None) and neither it nor the window's requests could be read; None otherwise."""
    out: MachineCells = {
        "window_change_pct": None,
        "window_change_from_s": None,
        "window_change_to_s": None,
        "throttled_pct": None,
        "steal_pct": None,
        "foreign_cpu_pct": None,
        "cpu_mhz": None,
        "probe_ms": None,
        "probe_before_ms": None,
        "probe_after_ms": None,
        "machine_note": None,
    }
    notes: list[str] = []
    evidence: list[str] = []
    if isinstance(steadiness, str):
        notes.append(steadiness)
    else:
        out["window_change_pct"] = round(100 * steadiness.change, 1)
        out["window_change_from_s"] = round(steadiness.from_s, 1)
        out["window_change_to_s"] = round(steadiness.to_s, 1)
        if not steadiness.steady:
            evidence.append(f"its requests ran {steadiness.describe()}")
    if reading is None or isinstance(reading, str):
        notes.append(f"no machine telemetry: {reading or 'not watched'}")
    else:
        out["throttled_pct"] = _pct(reading.throttled_share)
        out["steal_pct"] = _pct(reading.steal_share)
        out["foreign_cpu_pct"] = _pct(reading.foreign_share)
        out["cpu_mhz"] = None if reading.mhz is None else round(reading.mhz)
        out["probe_ms"] = _round(reading.probe_ms)
        out["probe_before_ms"] = _round(reading.probe_before_ms)
        out["probe_after_ms"] = _round(reading.probe_after_ms)
        if reading.throttled_share is not None and reading.throttled_share >= THROTTLED_SHARE:
            evidence.append(
                f"the server's cgroup was throttled by its CPU quota for "
                f"{reading.throttled_share:.0%} of the window (cpu.stat)"
            )
        if reading.steal_share is not None and reading.steal_share >= STEAL_SHARE:
            evidence.append(
                f"the hypervisor took {reading.steal_share:.0%} of {reading.cpus} (steal)"
            )
        if reading.foreign_share is not None and reading.foreign_share >= FOREIGN_SHARE:
            evidence.append(
                f"processes not of this run used {reading.foreign_share:.0%} of {reading.cpus}"
            )
        if reading.gpu and reading.gpu.startswith("GPU clocks not judged"):
            notes.append(reading.gpu)
        elif reading.gpu:
            evidence.append(reading.gpu)
    out["machine_note"] = "; ".join(notes)[:300] or None
    # a reading that is a reason (not None) is a watch that was asked for and saw nothing
    if not evidence and isinstance(steadiness, str) and isinstance(reading, str):
        return out, f"{UNCHECKED_PREFIX}: {steadiness}, no telemetry ({reading})"
    if not evidence:
        return out, None
    return out, f"{DRIFT_PREFIX}: " + ", ".join(evidence)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
