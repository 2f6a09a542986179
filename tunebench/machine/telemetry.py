"""What the operating system says about the server's cores over a window (Linux).

Read at every sample, as counters, so a window's share is the difference of two readings:
- steal: time the hypervisor ran another guest on our virtual CPUs (`/proc/stat`);
- foreign CPU: time the server's CPUs were busy with processes that are not ours (the CPUs'
  busy time less the CPU time of the server's and the load generator's process groups and
  of tunebench itself; CPU time ours spent on other CPUs makes this an underestimate, never
  an invention);
- throttling: time the server's cgroup was held back by its CPU quota (`cpu.stat`
  `throttled_time`, or `throttled_usec` on cgroup v2), summed over every cgroup its
  processes were seen in (a process moved between cgroups leaves its counts behind);
- frequency: the mean current clock of the server's CPUs where cpufreq shows it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tunebench.processes import group_members

PROC = Path("/proc")
CGROUP_ROOTS = (
    Path("/sys/fs/cgroup/cpu"),
    Path("/sys/fs/cgroup/cpu,cpuacct"),
    Path("/sys/fs/cgroup"),
)
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Counters:
    """Cumulative readings at one moment (seconds unless named)."""

    time: float
    busy_s: float  # the watched CPUs' busy time (user, nice, system, irq, softirq)
    steal_s: float
    total_s: float  # all time of the watched CPUs, steal and idle included
    ours_s: float  # CPU time of our processes
    throttled_s: float  # the server's cgroups' throttled time
    periods: int  # CFS periods the server's cgroups ran in, and those throttled
    throttled_periods: int
    mhz: float | None = None


def cpu_times(cpus: set[int] | None, proc: Path = PROC) -> tuple[float, float, float]:
    """(busy, steal, total) seconds of `cpus` (None: the whole machine) since boot."""
    busy = steal = total = 0.0
    for line in (proc / "stat").read_text().splitlines():
        name, *values = line.split()
        if not name.startswith("cpu"):
            break
        if cpus is None and name != "cpu":
            continue
        if cpus is not None and (name == "cpu" or int(name[3:]) not in cpus):
            continue
        user, nice, system, idle, iowait, irq, softirq, stolen = (
            int(v) for v in (values + ["0"] * 8)[:8]
        )
        busy += (user + nice + system + irq + softirq) / TICK
        steal += stolen / TICK
        total += (user + nice + system + idle + iowait + irq + softirq + stolen) / TICK
    return busy, steal, total


def process_cpu_s(pids: list[int], proc: Path = PROC) -> float:
    """CPU seconds (user and system) the processes have used, the threads' included, and
    those of their children that ended and were reaped (cutime, cstime).

    The children's share keeps the sum from falling when one of our processes ends inside a
    window: GuideLLM's scheduler processes end after every benchmark, and their seconds move
    into their parent's cutime. Without it each such end read as seconds "not of this run"
    (3-5 s at a time, 5-13% of a quiet 20-s window, beyond the 10% that flags a point)."""
    used = 0.0
    for pid in pids:
        try:
            fields = (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile and reaped by none of ours: an underestimate of ours
        utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
        used += (utime + stime + cutime + cstime) / TICK
    return used


def cgroup_of(pid: int, proc: Path = PROC) -> str | None:
    """The cgroup path of the CPU controller (v1) or of the unified hierarchy (v2)."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    unified = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
        if controllers == "":
            unified = path
    return unified


def read_cpu_stat(cgroup: str, roots: tuple[Path, ...] = CGROUP_ROOTS) -> dict[str, int] | None:
    for root in roots:
        path = root / cgroup.lstrip("/") / "cpu.stat"
        try:
            text = path.read_text()
        except OSError:
            continue
        return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line)}
    return None


def mean_mhz(
    cpus: set[int] | None, sys_cpu: Path = Path("/sys/devices/system/cpu")
) -> float | None:
    values = []
    for cpu in sorted(cpus) if cpus else range(os.cpu_count() or 1):
        try:
            khz = int((sys_cpu / f"cpu{cpu}/cpufreq/scaling_cur_freq").read_text())
        except (OSError, ValueError):
            return None
        values.append(khz / 1000)
    return sum(values) / len(values) if values else None


@dataclass
class Telemetry:
    """Reads the counters of the server's CPUs and cgroups, and of our processes."""

    cpus: set[int] | None
    groups: list[int]  # process groups that are ours (server, load generator)
    roots: tuple[Path, ...] = CGROUP_ROOTS
    _last: dict[str, dict[str, int]] = field(default_factory=dict)  # per cgroup, last read
    _totals: dict[str, int] = field(default_factory=dict)  # counter -> summed increments
    _server_group: int | None = None

    def watch_server(self, pgid: int | None) -> None:
        self._server_group = pgid

    def _add(self, cgroup: str, stat: dict[str, int]) -> None:
        """Sum each counter's increments over every cgroup seen: a cgroup made anew under
        the same path starts again from 0, which is a new count, not a step back."""
        if "throttled_usec" in stat:  # cgroup v2 counts in microseconds
            stat = {**stat, "throttled_time": stat["throttled_usec"] * 1000}
        last = self._last.get(cgroup, {})
        for key in ("throttled_time", "nr_periods", "nr_throttled"):
            now, before = stat.get(key, 0), last.get(key, 0)
            self._totals[key] = self._totals.get(key, 0) + (now - before if now >= before else now)
        self._last[cgroup] = stat

    def read(self, now: float) -> Counters:
        busy, steal, total = cpu_times(self.cpus)
        pids = [os.getpid()]
        for group in self.groups:
            pids += group_members(group)
        if self._server_group is not None:
            cgroups = {cgroup_of(pid) for pid in group_members(self._server_group)}
            for cgroup in sorted(c for c in cgroups if c):
                stat = read_cpu_stat(cgroup, self.roots)
                if stat is not None:
                    self._add(cgroup, stat)
        throttled_ns = self._totals.get("throttled_time", 0)
        return Counters(
            time=now,
            busy_s=busy,
            steal_s=steal,
            total_s=total,
            ours_s=process_cpu_s(sorted(set(pids))),
            throttled_s=throttled_ns / 1e9,
            periods=self._totals.get("nr_periods", 0),
            throttled_periods=self._totals.get("nr_throttled", 0),
            mhz=mean_mhz(self.cpus),
        )
