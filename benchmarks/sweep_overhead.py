"""Measure a sweep's overhead: wall time against server starts plus measured load.

    python benchmarks/sweep_overhead.py sweeps/cpu-demo.yaml [--output DIR]

Runs `tunebench sweep SPEC` as a user would (a fresh process, timed from outside), then
reads the run: per configuration the server start time (launch -> /health 200) and the
measured duration of each load point. Everything else (GuideLLM start-up and its pauses
between points, effective-config reads, writing results, server shutdown, Python start)
is overhead. Target: overhead <= 15% of wall time.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("spec", type=Path)
    parser.add_argument("--output", type=Path, default=None, help="run root (default: a temp dir)")
    parser.add_argument("--target", type=float, default=0.15, help="overhead ratio target")
    args = parser.parse_args()

    root = args.output or Path(tempfile.mkdtemp(prefix="tunebench-bench-"))
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tunebench.cli.main",
            "sweep",
            str(args.spec),
            "--output",
            str(root),
        ],
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    runs = sorted(p for p in root.iterdir() if (p / "manifest.json").exists())
    if not runs:
        print(result.stdout, result.stderr, sep="\n")
        return 1
    run = runs[-1]
    manifest = json.loads((run / "manifest.json").read_text())
    rows = list(csv.DictReader(open(run / "points.csv")))

    print(f"run: {run} (exit {result.returncode}, status {manifest['status']})")
    print(f"{'config':<8}{'label':<24}{'start s':>9}{'points':>8}{'load s':>9}")
    total_start = total_load = 0.0
    for config in manifest["configs"]:
        start = float(config.get("start_s") or 0)
        points = [r for r in rows if r["config_id"] == config["config_id"]]
        load = sum(float(r["duration_s"] or 0) for r in points)
        total_start += start
        total_load += load
        print(
            f"{config['config_id']:<8}{config['label'][:23]:<24}{start:>9.1f}{len(points):>8}{load:>9.1f}"
        )
    overhead = wall - total_start - total_load
    ratio = overhead / wall
    print(f"wall time            {wall:8.1f} s")
    print(f"server starts        {total_start:8.1f} s")
    print(f"measured load        {total_load:8.1f} s")
    print(
        f"overhead             {overhead:8.1f} s = {ratio:.1%} of wall time "
        f"(target <= {args.target:.0%}: {'met' if ratio <= args.target else 'NOT met'})"
    )
    return 0 if result.returncode == 0 else result.returncode


if __name__ == "__main__":
    sys.exit(main())
