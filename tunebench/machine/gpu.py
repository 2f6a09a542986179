"""Whether the GPU slowed down while a load point was measured.

A GPU held at full load heats up and runs into its power limit. The driver then lowers its
clocks, so a later point in a sweep may measure a slower machine than the one before it, and
the difference gets blamed on the configuration. nvbench discards samples taken below 75% of
the SM clock for the same reason. This module reads what the driver says about its clocks
(nvidia-smi's query output, NVML, or the DCGM exporter's violation counters) and turns the
readings taken during a point's window into one line of evidence, or none.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, Callable

from tunebench.environment import load_nvml

# Reasons that cost throughput. The others (idle, application clocks, sync boost, display)
# are settings or the absence of work, not a slower machine.
SLOWING_REASONS: frozenset[str] = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "sw_thermal_slowdown",
    }
)

# NVML's nvmlClocksEventReason* bits; the older nvmlClocksThrottleReason* names share them.
_MASK_BITS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clocks_setting"),
)
_KNOWN = frozenset(name for _, name in _MASK_BITS)

# `nvidia-smi -q` labels; the XML tags already carry the normalised names.
_TEXT_LABELS = {
    "Idle": "gpu_idle",
    "Applications Clocks Setting": "applications_clocks_setting",
    "SW Power Cap": "sw_power_cap",
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "Display Clock Setting": "display_clocks_setting",
}
_REASON_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
_GPU_HEADER = re.compile(r"^GPU [0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+\s*$")

# nvbench's threshold: below it a sample measures a throttled GPU.
LOW_CLOCK_SHARE = 0.75

# In ns, though the exporter's help text says us (tests/fixtures/gpu-clocks/README.md: Units).
_VIOLATION = re.compile(
    r"^DCGM_FI_DEV_(POWER|THERMAL|SYNC_BOOST|BOARD_LIMIT|LOW_UTIL|RELIABILITY)_VIOLATION"
    r"(?:\{([^}]*)\})?\s+(\S+)"
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class GpuClocks:
    """One GPU's clocks and active clock-event reasons at one moment."""

    gpu: str  # UUID or index: how the source names the GPU
    sm_mhz: float | None
    sm_max_mhz: float | None
    reasons: frozenset[str]

    @property
    def slowing(self) -> frozenset[str]:
        return self.reasons & SLOWING_REASONS


def reasons_from_mask(mask: int) -> frozenset[str]:
    """NVML's clock-event bitmask as reason names; bits NVML may add later are ignored."""
    return frozenset(name for bit, name in _MASK_BITS if mask & bit)


def _mhz(value: str | None) -> float | None:
    match = re.match(r"\s*([0-9.]+)\s*MHz", value or "")
    return float(match.group(1)) if match else None


def parse_nvidia_smi_xml(text: str) -> list[GpuClocks]:
    """`nvidia-smi -q -x`: one reading per <gpu>."""
    readings = []
    for index, gpu in enumerate(ET.fromstring(text).findall("gpu")):
        reasons = set()
        for tag in ("clocks_event_reasons", "clocks_throttle_reasons"):
            section = gpu.find(tag)
            for child in section if section is not None else ():
                name = re.sub(r"^clocks_(event|throttle)_reason_", "", child.tag)
                if name in _KNOWN and (child.text or "").strip() == "Active":
                    reasons.add(name)
        uuid = (gpu.findtext("uuid") or "").strip()
        readings.append(
            GpuClocks(
                gpu=uuid or str(index),
                sm_mhz=_mhz(gpu.findtext("clocks/sm_clock")),
                sm_max_mhz=_mhz(gpu.findtext("max_clocks/sm_clock")),
                reasons=frozenset(reasons),
            )
        )
    return readings


def parse_nvidia_smi_text(text: str) -> list[GpuClocks]:
    """The human-readable `nvidia-smi -q`, whole or cut down to some of its sections."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if _GPU_HEADER.match(line):
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
    if not blocks:  # a capture cut to its sections, without the GPU's header line
        blocks = [text.splitlines()]
    readings = [_text_block(str(i), lines) for i, lines in enumerate(blocks)]
    return [r for r in readings if r is not None]


def _text_block(index: str, lines: list[str]) -> GpuClocks | None:
    section, section_indent, seen = "", -1, False
    uuid, clocks, reasons = "", {}, set()
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= section_indent:
            section, section_indent = "", -1
        key, colon, value = (part.strip() for part in line.partition(":"))
        if not colon:
            section, section_indent = key, indent
            seen = seen or key in (*_REASON_SECTIONS, "Clocks", "Max Clocks")
        elif key == "GPU UUID":
            uuid = value
        elif section in _REASON_SECTIONS and key in _TEXT_LABELS and value == "Active":
            reasons.add(_TEXT_LABELS[key])
        elif section in ("Clocks", "Max Clocks") and key == "SM":
            clocks[section] = _mhz(value)
    if not seen:  # e.g. `-d MEMORY`: nothing about clocks
        return None
    return GpuClocks(
        uuid or index, clocks.get("Clocks"), clocks.get("Max Clocks"), frozenset(reasons)
    )


def nvml_clock_reader(
    cuda_visible_devices: str | None = None, nvml: Any = None
) -> Callable[[], list[GpuClocks]] | str:
    """A reader of the server's GPUs' clocks (its CUDA_VISIBLE_DEVICES, else every GPU), or
    why there is none (no NVML, no GPU)."""
    nvml = nvml if nvml is not None else load_nvml()
    if isinstance(nvml, str):
        return nvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return f"NVML did not start: {exc} (no NVIDIA driver: no GPU here)"
    wanted = [d.strip() for d in (cuda_visible_devices or "").split(",") if d.strip()]
    try:
        count = nvml.nvmlDeviceGetCount()
        if not count:
            return "NVML sees no GPU"
        if not wanted:
            wanted = [str(i) for i in range(count)]
        handles = {
            d: nvml.nvmlDeviceGetHandleByIndex(int(d))
            if d.isdigit()
            else nvml.nvmlDeviceGetHandleByUUID(d)
            for d in wanted
        }
    except nvml.NVMLError as exc:
        return f"NVML could not open the server's GPUs ({cuda_visible_devices}): {exc}"
    # nvidia-ml-py before 12.535 only has the older "Throttle" name for the same call.
    current_reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    if current_reasons is None:
        return "this nvidia-ml-py reads no clock-event reasons (pip install -U nvidia-ml-py)"

    def read() -> list[GpuClocks]:
        readings = []
        for device, handle in handles.items():
            try:
                readings.append(
                    GpuClocks(
                        gpu=device,
                        sm_mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                        sm_max_mhz=float(
                            nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
                        ),
                        reasons=reasons_from_mask(int(current_reasons(handle))),
                    )
                )
            except nvml.NVMLError:  # a failed read says nothing about the clocks: no reading
                continue
        return readings

    return read


def dcgm_violations(prom_text: str) -> dict[str, dict[str, float]]:
    """The DCGM exporter's violation counters, per GPU: {"power_violation_ns": ...}. The
    exporter ships with them commented out, so most exporters give {}."""
    found: dict[str, dict[str, float]] = {}
    for line in prom_text.splitlines():
        match = _VIOLATION.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match.group(2) or ""))
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            gpu = labels.get("gpu") or labels.get("UUID") or "0"
            found.setdefault(gpu, {})[f"{match.group(1).lower()}_violation_ns"] = value
    return found


@dataclass(frozen=True)
class GpuWindow:
    samples: int
    slowed_share: float  # samples in which any GPU was held down
    lowest_clock_share: float | None  # lowest SM clock / max of a GPU that was not idle
    # (an idle GPU's clocks, or a 0 MHz reading, say nothing about a slower machine)
    reasons: tuple[str, ...]  # slowing reasons seen, sorted


def _held_down(reading: GpuClocks) -> bool:
    if reading.slowing:
        return True
    if "gpu_idle" in reading.reasons or not reading.sm_mhz or not reading.sm_max_mhz:
        return False  # an idle GPU's low clocks are the absence of work
    return reading.sm_mhz < LOW_CLOCK_SHARE * reading.sm_max_mhz


def gpu_window(
    samples: list[tuple[float, list[GpuClocks]]], start: float, end: float
) -> GpuWindow | str:
    """The clock readings taken inside [start, end], or why they say nothing."""
    inside = [readings for at, readings in samples if start <= at <= end]
    if len(inside) < 2:
        return f"{len(inside)} GPU clock sample(s) in the window {start:.0f}-{end:.0f}; 2 needed"
    slowed = sum(1 for readings in inside if any(_held_down(r) for r in readings))
    shares = [
        r.sm_mhz / r.sm_max_mhz
        for readings in inside
        for r in readings
        if "gpu_idle" not in r.reasons and r.sm_mhz and r.sm_max_mhz
    ]
    reasons = sorted({name for readings in inside for r in readings for name in r.slowing})
    return GpuWindow(
        samples=len(inside),
        slowed_share=slowed / len(inside),
        lowest_clock_share=min(shares) if shares else None,
        reasons=tuple(reasons),
    )


def gpu_slowdown(window: GpuWindow, least_share: float = 0.1) -> str | None:
    """None when the GPU held its clocks through the window; else one line of evidence."""
    if window.slowed_share <= 0 or window.slowed_share < least_share:
        return None
    details = [", ".join(window.reasons)] if window.reasons else []
    if window.lowest_clock_share is not None:
        details.append(f"SM down to {window.lowest_clock_share:.0%} of max")
    # ', ': a point's reasons are joined by '; '
    why = f" ({', '.join(details)})" if details else ""
    return f"GPU clocks held down in {window.slowed_share:.0%} of samples{why}"


def violation_slowdown(
    before: dict[str, dict[str, float]],
    after: dict[str, dict[str, float]],
    seconds: float,
    least_share: float = 0.05,
) -> str | None:
    """DCGM counters read at a window's edges: one line when power or thermal throttling took
    more than `least_share` of the window on any GPU; None otherwise."""
    if seconds <= 0:
        return None
    found = []
    for gpu in sorted(set(before) & set(after)):
        for kind in ("power", "thermal"):
            key = f"{kind}_violation_ns"
            grew = after[gpu].get(key, 0.0) - before[gpu].get(key, 0.0)  # < 0: counter reset
            if key in before[gpu] and grew / 1e9 / seconds > least_share:
                found.append(f"{kind} throttling for {grew / 1e9 / seconds:.0%} of it on GPU {gpu}")
    if not found:
        return None
    return f"DCGM violation counters over the {seconds:.0f} s window: {'; '.join(found)}"
