"""Time `tunebench report` and `tunebench compare` on a synthetic run of 50 x 10 points.

    python benchmarks/analysis_speed.py [--configs 50] [--points 10] [--requests 200] [--repeats 3]

Builds the run with tunebench.testing (real run format, per-request samples), then times
each command as a user runs it (a fresh process, so its start-up and imports count), the
commands alternated over `--repeats` rounds; prints min/median/max. A command that exits
other than 0 (or 1, compare's "regression found") fails the benchmark. Target: the median
of each < 10 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tunebench.testing import make_synthetic_run


def timed(*args: str) -> float:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tunebench.cli.main", *args], capture_output=True, text=True
    )
    elapsed = time.monotonic() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed: {result.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", type=int, default=50)
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tunebench-speed-"))
    streams = tuple(range(1, args.points + 1))
    started = time.monotonic()
    run_a = make_synthetic_run(
        root,
        "speed-a",
        configs=args.configs,
        streams=streams,
        requests_per_point=args.requests,
        seed=1,
    )
    run_b = make_synthetic_run(
        root,
        "speed-b",
        configs=args.configs,
        streams=streams,
        requests_per_point=args.requests,
        seed=2,
        slowdown={3: 1.2},
    )
    built = time.monotonic() - started
    print(
        f"synthetic runs: {args.configs} configurations x {args.points} points x "
        f"{args.requests} requests each, built in {built:.1f} s"
    )
    commands = {
        "report (HTML, all plots)": ("report", run_a.path.name, "--root", str(root)),
        "compare A B (7 metrics)": (
            "compare", run_a.path.name, run_b.path.name, "--root", str(root), "--format", "csv"
        ),
        "compare A --by max-num-seqs": (
            "compare", run_a.path.name, "--by", "max-num-seqs", "--root", str(root),
            "--format", "json",
        ),
    }  # fmt: skip
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeats):  # alternated: a slow minute of the machine hits all alike
        for name, command in commands.items():
            seconds[name].append(timed(*command))
    print(f"{args.repeats} alternated rounds; seconds min / median / max")
    met = True
    for name, values in seconds.items():
        middle = statistics.median(values)
        met &= middle < 10
        print(
            f"{name:<32} {min(values):6.2f} {middle:6.2f} {max(values):6.2f}  "
            f"(target median < 10 s: {'met' if middle < 10 else 'NOT met'})"
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
