"""Record the far longer measurement a recorded grid is graded against.

    python benchmarks/grid/record_truth.py PLAYED_RUN [--requests 300] [--output DIR]

PLAYED_RUN is a grid recorded with repeats (benchmarks/grid/grid-cpu-long.yaml). For every
configuration whose capacity its starts cross (pooled, by points/capacity.py's rule), this
starts that configuration once more and measures five poisson rates close around that
capacity (0.8, 0.9, 1.0, 1.1 and 1.2 times it), each window holding about `--requests`
requests: many more than a capacity probe holds (up to 4 x the 36 a p90 needs), at rates
10% apart, so the crossing between two of them moves the truth by less than 5%. One sweep
per configuration (each has its own rates), on the same machine and with the same server,
client pinning and data as the played part; `benchmarks/capacity_accuracy.py --grid
PLAYED_RUN --truth RUN...` grades against them.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from tunebench.recorded.noisy import RecordedGrid, held_out_capacity  # noqa: E402
from tunebench.store.manifest import Manifest  # noqa: E402

FACTORS = (0.8, 0.9, 1.0, 1.1, 1.2)


def truth_spec(spec: dict, variant: dict, capacity: float, requests: int, starts: int = 1) -> dict:
    """The played part's spec for one configuration, started `starts` times (one after the
    other), at rates around `capacity`."""
    warmups = [p for p in spec["load"]["profiles"] if p["kind"] != "poisson"]
    rates = sorted({round(capacity * f, 2) for f in FACTORS})
    out = {key: value for key, value in spec.items() if key != "repeats"}
    if starts > 1:
        out["repeats"] = starts
    out["name"] = f"{spec['name']}-truth-{variant['name']}"
    out["server"] = {**spec["server"], "variants": [variant]}
    out["load"] = {
        **spec["load"],
        "profiles": warmups
        + [
            {"kind": "poisson", "rate": rate, "max_seconds": math.ceil(requests / rate)}
            for rate in rates
        ],
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("played", type=Path, help="the grid's run with repeats (the played part)")
    parser.add_argument("--requests", type=int, default=300, help="requests a window holds")
    parser.add_argument("--starts", type=int, default=1, help="long starts per configuration")
    parser.add_argument("--only", action="append", metavar="LABEL", help="these configurations")
    parser.add_argument("--output", type=Path, default=Path("reports"))
    parser.add_argument("--dry-run", action="store_true", help="write the specs, run nothing")
    args = parser.parse_args()
    grid = RecordedGrid(args.played)
    spec = Manifest.read(args.played).spec
    slo = grid.slo
    variants = {v["name"]: v for v in spec["server"]["variants"]}
    args.output.mkdir(parents=True, exist_ok=True)
    for config in grid.configs:
        if args.only and config.label not in args.only:
            continue
        capacity = held_out_capacity(config, sorted(config.starts), slo)
        if capacity is None or capacity.kind != "exact":
            kind = capacity.kind if capacity else "no window"
            print(f"{config.label}: {kind} {capacity.rate if capacity else ''}: no truth to record")
            continue
        path = args.output / f"truth-{config.label}.yaml"
        truth = truth_spec(spec, variants[config.label], capacity.rate, args.requests, args.starts)
        path.write_text(yaml.safe_dump(truth, sort_keys=False))
        rates = [p["rate"] for p in truth["load"]["profiles"] if p["kind"] == "poisson"]
        print(f"{config.label}: played capacity {capacity.rate:.3g} req/s; truth rates {rates}")
        if args.dry_run:
            continue
        sweep = [sys.executable, "-m", "tunebench.cli.main", "sweep", str(path)]
        result = subprocess.run([*sweep, "--output", str(args.output), "--no-report"])
        if result.returncode != 0:
            sys.exit(f"the truth sweep of {config.label} failed (exit {result.returncode})")


if __name__ == "__main__":
    main()
