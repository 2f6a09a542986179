"""Time `tunebench report` and `tunebench compare` on a synthetic run of 50 x 10 points.

    python benchmarks/analysis_speed.py [--configs 50] [--points 10] [--requests 200]

Builds the run with tunebench.testing (real run format, per-request samples), then times
each command as a user runs it (a fresh process). Target: each < 10 s.
"""

from __future__ import annotations

import argparse
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
    results = {
        "report (HTML, all plots)": timed("report", run_a.path.name, "--root", str(root)),
        "compare A B (7 metrics)": timed(
            "compare", run_a.path.name, run_b.path.name, "--root", str(root), "--format", "csv"
        ),
        "compare A --by max-num-seqs": timed(
            "compare",
            run_a.path.name,
            "--by",
            "max-num-seqs",
            "--root",
            str(root),
            "--format",
            "json",
        ),
    }
    for name, seconds in results.items():
        print(
            f"{name:<32} {seconds:6.2f} s  (target < 10 s: {'met' if seconds < 10 else 'NOT met'})"
        )
    return 0 if all(s < 10 for s in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
