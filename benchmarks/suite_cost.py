"""What one part of the test suite costs this machine: wall time and CPU-seconds.

    python benchmarks/suite_cost.py [--repeats 3] [-- PYTEST_ARGS ...]

By default the part of `make test`'s first tier that starts no vLLM server (tests/unit,
tests/contract, tests/integration), run with that tier's own flags: three workers, whole
files, in-process coverage, its timeout, no skips. Each repeat runs pytest in the working tree
in a session of its own and reads the CPU time of the whole machine from /proc/stat before
and after (busy CPU-seconds, the share of all cores that was busy, the hypervisor's steal
apart), and the CPU time of pytest and every process it waited for (getrusage of children).
Prints each repeat, then min/median/max; exits non-zero when a run failed or ran no test.

Why it exists: on two cores the first tier is CPU-bound (benchmarks/fresh_clone.py prints
its busy share), so its wall time cannot fall below its CPU-seconds divided by the cores.
This script measures that cost for a part of the tier, so that what `make test` cannot go
under with the suite's present content is a measured figure (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fresh_clone import MachineCpu  # noqa: E402

from tunebench.processes import run_in_own_session  # noqa: E402

# make test's first tier (Makefile), less --cov-fail-under: a part of the suite does not
# reach the whole suite's coverage floor
TIER_ONE_FLAGS = [
    "-q", "-n", "3", "--dist", "loadfile", "--timeout", "900", "--no-loadscope-reorder",
    "--cov=tunebench", "--cov-report=", "-m", "not speed",
]  # fmt: skip
NO_SERVER_PART = ["tests/unit", "tests/contract", "tests/integration"]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(pytest_args: list[str], index: int) -> tuple[int, float, float, float]:
    environment = {**os.environ, "TUNEBENCH_NO_SKIPS": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    command = [sys.executable, "-m", "pytest", *pytest_args]
    before_cpu, before_own = MachineCpu(), children_cpu_s()
    began = time.monotonic()
    # an hour bounds a hung run (make test's whole first tier took 17-24 minutes on a 2-core Xeon);
    # a Ctrl-C gives pytest a minute to tear its servers down
    result = run_in_own_session(command, REPO, environment, timeout=3600, grace_s=60)
    wall = time.monotonic() - began
    machine = MachineCpu()
    own = children_cpu_s() - before_own
    busy = machine.busy_s - before_cpu.busy_s
    lines = result.stdout.strip().splitlines()
    summary = lines[-1] if lines else f"(no output) {result.stderr.strip()[-300:]}"
    print(
        f"  [{index}] rc {result.returncode}, wall {wall:.0f} s; "
        f"machine {machine.since(before_cpu)}; "
        f"pytest and its reaped children {own:,.0f} CPU-s\n  [{index}]   {summary}",
        flush=True,
    )
    # pytest's exit 5: no test was collected, which is a failure here as in make test
    return result.returncode, wall, busy, own


def spread(label: str, values: list[float], unit: str) -> str:
    return (
        f"  {label:<28} min {min(values):7,.0f}  median {statistics.median(values):7,.0f}  "
        f"max {max(values):7,.0f} {unit}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "pytest_args",
        nargs="*",
        help="after --: pytest's arguments (default: the first tier's flags on "
        + " ".join(NO_SERVER_PART)
        + ")",
    )
    args = parser.parse_args()
    pytest_args = args.pytest_args or [*TIER_ONE_FLAGS, *NO_SERVER_PART]
    print(f"suite_cost: pytest {' '.join(pytest_args)}; {args.repeats} repeats", flush=True)
    runs = [one_run(pytest_args, index) for index in range(1, args.repeats + 1)]
    print(f"{len(runs)} runs on {os.cpu_count()} cores:")
    print(spread("wall", [run[1] for run in runs], "s"))
    print(spread("machine busy", [run[2] for run in runs], "CPU-s"))
    print(spread("pytest and its children", [run[3] for run in runs], "CPU-s"))
    return 1 if any(run[0] != 0 for run in runs) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("suite_cost: stopped; pytest and every process it started were stopped", flush=True)
        sys.exit(130)
