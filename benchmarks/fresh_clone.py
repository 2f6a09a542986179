"""How long a make target takes in a fresh clone, as CI and a new user meet it.

    python benchmarks/fresh_clone.py [--target test|demo|lint] [--repeats 3] [--commit REV]

Each repeat clones this repository (its HEAD, or REV) into a new temporary folder and runs
`make TARGET` there; every output line is time-stamped from the start, so the set-up, lint and
each test tier can be read off the log. At each phase mark it also prints what the phase
cost the whole machine, from /proc/stat: CPU-seconds busy, the share of all cores that was
busy, and the hypervisor's steal apart, so a phase that is CPU-bound (and can get faster only
with less work, not with more overlap) shows as such. The set-up is cached by content
outside the clone (scripts/setup-env.sh): the first repeat on new content builds the
dependencies, the next ones find them. Prints each repeat's wall time and the phase marks,
then min/median/max; exits non-zero when any run of the target failed. The logs stay in the
output folder.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench.processes import stop_session  # noqa: E402

# lines whose time marks a phase's end (make test's and make demo's own output)
MARKS = ("[setup] ok", "[lint] all passed", " passed", "report:", "make: ***")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class MachineCpu:
    """The whole machine's CPU time since boot, from /proc/stat's first line (all cores)."""

    def __init__(self) -> None:
        # user nice system idle iowait irq softirq steal (guest time is inside user already)
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        user, nice, system, idle, iowait, irq, softirq, steal = fields
        self.busy_s = (user + nice + system + irq + softirq) / TICKS_PER_S
        self.steal_s = steal / TICKS_PER_S
        self.total_s = sum(fields) / TICKS_PER_S

    def since(self, before: MachineCpu) -> str:
        busy = self.busy_s - before.busy_s
        total = max(self.total_s - before.total_s, 1e-9)
        steal = self.steal_s - before.steal_s
        return (
            f"{busy:,.0f} CPU-s busy, {100 * busy / total:.1f}% of {os.cpu_count()} cores; "
            f"steal {100 * steal / total:.1f}%"
        )


def one_run(target: str, commit: str | None, logs: Path, index: int) -> tuple[int, float]:
    folder = Path(tempfile.mkdtemp(prefix="tunebench-fresh-"))
    try:
        subprocess.run(["git", "clone", "-q", str(REPO), str(folder)], check=True)
        if commit:
            subprocess.run(["git", "-C", str(folder), "checkout", "-q", commit], check=True)
        log = logs / f"{target}-{index}.log"
        began = time.monotonic()
        phase_began, phase_cpu = began, MachineCpu()
        with log.open("w") as out:
            # its own session, so that stopping it reaches make's whole group; a Ctrl-C or
            # SIGTERM here stops make and every process group its tests started
            process = subprocess.Popen(
                ["make", target],
                cwd=folder,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            try:
                assert process.stdout is not None
                for line in process.stdout:
                    stamped = f"{time.monotonic() - began:7.1f} {line}"
                    out.write(stamped)
                    if any(mark in line for mark in MARKS):
                        now, cpu = time.monotonic(), MachineCpu()
                        # the phase since the last mark, on the whole machine
                        cost = f"{now - phase_began:7.1f} s of it: {cpu.since(phase_cpu)}\n"
                        phase_began, phase_cpu = now, cpu
                        out.write(f"{'':7} {cost}")
                        print(f"  [{index}] {stamped}", end="")
                        print(f"  [{index}] {'':7} {cost}", end="", flush=True)
                code = process.wait()
            except BaseException:
                # pytest tears its servers down on the SIGINT; a minute, then by force
                stop_session(process, grace_s=60)
                raise
        return code, time.monotonic() - began
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _interrupt_on_sigterm() -> None:
    """`kill PID` stops a run as a Ctrl-C does, with everything it started."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def main() -> int:
    _interrupt_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("test", "demo", "lint"), default="test")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--commit", help="a revision of this repository (default: HEAD)")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.mkdtemp(prefix="fresh-logs-")))
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    walls, failed = [], 0
    for index in range(1, args.repeats + 1):
        code, wall = one_run(args.target, args.commit, args.logs, index)
        walls.append(wall)
        failed += code != 0
        print(f"  [{index}] make {args.target}: rc {code}, wall {wall:.0f} s", flush=True)
    print(
        f"make {args.target} in a fresh clone, {len(walls)} runs: min {min(walls):.0f} s, "
        f"median {statistics.median(walls):.0f} s, max {max(walls):.0f} s; logs in {args.logs}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("fresh_clone: stopped; make and every process it started were stopped", flush=True)
        sys.exit(130)
