"""CPU package energy from RAPL (Linux powercap: /sys/class/powercap/intel-rapl:N).

AMD's RAPL appears under the same name. energy_uj counts microjoules and wraps at
max_energy_range_uj; the reader unwraps it into a counter that only grows. A package zone
counts everything on that socket: the load generator too, when it shares the socket
(docs/energy.md says how to read it).
"""

from __future__ import annotations

import re
from pathlib import Path

from tunebench.energy.sampler import SamplingMeter

POWERCAP = Path("/sys/class/powercap")
_PACKAGE_ZONE = re.compile(r"^intel-rapl:\d+$")


def package_zones(root: Path = POWERCAP) -> list[Path] | str:
    """The readable RAPL package zones, or why there are none."""
    if not root.is_dir():
        return f"{root} is absent: no RAPL (virtual machines rarely expose it)"
    zones = sorted(p for p in root.iterdir() if _PACKAGE_ZONE.match(p.name))
    if not zones:
        return f"no RAPL package zone (intel-rapl:N) under {root}"
    for zone in zones:
        try:
            int((zone / "energy_uj").read_text())
        except PermissionError:
            return (
                f"{zone / 'energy_uj'} is not readable (root only since Linux 5.10): "
                "run as root or make it readable"
            )
        except (OSError, ValueError) as exc:
            return f"{zone / 'energy_uj'} cannot be read: {exc}"
    return zones


class _Unwrapped:
    """Cumulative joules of each zone, across the counter's wrap-arounds."""

    def __init__(self, zones: list[Path]):
        self.zones = zones
        self.names = [_zone_name(z) for z in zones]
        self.ranges = [_max_range(z) for z in zones]
        self.last: list[int | None] = [None] * len(zones)
        self.offset = [0] * len(zones)

    def __call__(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for i, zone in enumerate(self.zones):
            raw = int((zone / "energy_uj").read_text())
            previous = self.last[i]
            if previous is not None and raw < previous and self.ranges[i]:
                self.offset[i] += self.ranges[i]
            self.last[i] = raw
            out[self.names[i]] = (raw + self.offset[i]) / 1e6
        return out


def _zone_name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip() or zone.name
    except OSError:
        return zone.name


def _max_range(zone: Path) -> int:
    try:
        return int((zone / "max_energy_range_uj").read_text())
    except (OSError, ValueError):
        return 0


def rapl_meter(interval_s: float = 1.0, root: Path = POWERCAP) -> SamplingMeter | str:
    zones = package_zones(root)
    if isinstance(zones, str):
        return zones
    read = _Unwrapped(zones)
    devices = ", ".join(read.names) + " (whole CPU package: every process on it counts)"
    return SamplingMeter(read, "counter", "rapl", devices, interval_s)
