"""Is this machine steady enough to measure a capacity within 10%?

    python benchmarks/machine_stability.py [--minutes 10] [--bin 30] [--output reports]
    python benchmarks/machine_stability.py --run RUN [--config LABEL] [--bin 30]

A capacity is a rate at which latency crosses an SLO, and a server's latency follows the
speed the machine runs it at. If that speed wanders while nothing else changes, the capacity
wanders with it, and no search, however many requests it spends, can be nearer the truth
than the machine lets it be.

This starts one vLLM server (the built-in tiny model, max-num-seqs 1 so every token is
decoded alone, pinned to CPU 0) and drives it with one stream (GuideLLM, pinned to CPU 1)
for `--minutes` at constant load, keeping every request. Then it reads the time per output
token (the requests' inter-token latency) in bins of `--bin` seconds over the run and
prints each bin, their min/median/max, the log sd between bins and the ratio of the slowest
bin to the fastest. Nothing about the load changes between bins, so a spread here is the
machine's. With `--run` it reads a recorded run instead (any run whose configuration decodes
one sequence at a time, max-num-seqs 1, at any rate: a batch of one has no other load
effect on the time per token).

Steady: every bin within 10% of the fastest (slowest / fastest <= 1.10). A capacity set by
decode speed moves about as much as the speed does, so on a machine that is not steady a
grid's starts disagree by that much (benchmarks/capacity_accuracy.py prints the same figure
per start as "machine speed by start"). Exits 0 when steady, 1 when not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench.errors import StoreError  # noqa: E402
from tunebench.store.manifest import Manifest  # noqa: E402
from tunebench.store.run import read_requests  # noqa: E402

NAME = "machine-stability"
STEADY = 1.10
# Requests a bin needs before its median is read as a speed. Drawn from one 20-s spell's
# requests of the stability recording (a steady machine), 30 bins of 100 requests differed
# by more than 10% in up to 30% of draws (the spell at 300 s), of 200 in at most 0.5%
# (tests/unit/test_machine_stability.py). One stream gets 8-12 requests a second here: the
# default bin of 30 s holds about 300.
LEAST = 200


def spec(minutes: float) -> dict:
    return {
        "name": NAME,
        "model": "builtin:tiny-llama-random",
        "deployment": {
            "kind": "local",
            "start_timeout_s": 300,
            "kv_cache_space_gib": 1,
            "cpus": "0",
        },
        "server": {
            "args": {"max-model-len": 512, "max-num-seqs": 1, "max-num-batched-tokens": 128}
        },
        "load": {
            "client_cpus": "1",
            "data": {"kind": "synthetic", "prompt_tokens": 256, "output_tokens": 32},
            "profiles": [{"kind": "concurrent", "streams": 1, "max_seconds": round(minutes * 60)}],
        },
        "metrics": {"interval_s": 5},
        # the probe every 2 s beside the load: does it track the server's speed?
        "machine": {"probe_interval_s": 2, "sentinel": False},
        "output": "reports",
    }


def record(minutes: float, output: Path) -> Path:
    output.mkdir(parents=True, exist_ok=True)
    path = output / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(spec(minutes), sort_keys=False))
    before = set(output.glob(f"*-{NAME}"))
    sweep = [sys.executable, "-m", "tunebench.cli.main", "sweep", str(path)]
    result = subprocess.run([*sweep, "--output", str(output), "--no-report"], cwd=REPO)
    if result.returncode != 0:
        sys.exit(f"the stability run failed (exit {result.returncode})")
    runs = sorted(set(output.glob(f"*-{NAME}")) - before)
    if not runs:
        sys.exit(f"the stability run left no run directory in {output}")
    return runs[-1]


def token_times(run: Path, config: str | None) -> list[tuple[float, float]]:
    """(start time, ms per output token) of every request of `run` (of one configuration's
    when `config` names its label or id)."""
    try:
        entries = Manifest.read(run).configs
    except StoreError as exc:
        sys.exit(str(exc))
    if config is not None:
        entries = [c for c in entries if config in (c.label, c.config_id)]
        if not entries:
            sys.exit(
                f"{run}/manifest.json: no configuration {config!r} (--config takes a label or id)"
            )
    out = []
    for entry in entries:
        for row in read_requests(run, entry.config_id):
            try:
                out.append((float(row["start_time"]), float(row["itl_ms"])))
            except (KeyError, TypeError, ValueError):
                continue  # a request with one output token has no inter-token latency
    if not out:
        sys.exit(f"{run}/requests: no request has start_time and itl_ms")
    return sorted(out)


def bins(
    times: list[tuple[float, float]], width_s: float, least: int = LEAST
) -> list[tuple[float, int, float]]:
    """(offset in s, requests, median ms per token) per bin of `width_s` holding at least
    `least` requests: fewer make the bins' medians differ by more than 10% on a steady
    machine (tests/unit/test_machine_stability.py draws them)."""
    first = times[0][0]
    grouped: dict[int, list[float]] = {}
    for started, ms in times:
        grouped.setdefault(int((started - first) // width_s), []).append(ms)
    return [
        (index * width_s, len(values), statistics.median(values))
        for index, values in sorted(grouped.items())
        if len(values) >= least
    ]


def probe_times(run: Path) -> list[tuple[float, float]]:
    """(time, probe ms) of every probe the run stored (machine/<config>.csv), or []."""
    out = []
    for path in sorted((run / "machine").glob("*.csv")):
        with path.open() as handle:
            for row in csv.DictReader(handle):
                if row.get("probe_ms"):
                    out.append((float(row["time"]), float(row["probe_ms"])))
    return sorted(out)


def probe_tracking(
    times: list[tuple[float, float]], probes: list[tuple[float, float]], width_s: float
) -> str | None:
    """How the probe's bin medians follow the server's time per token: the correlation of
    their logs over the bins both fill, and the probe's own spread between bins."""
    if not probes:
        return None
    first = times[0][0]
    server = {int(offset // width_s): ms for offset, _, ms in bins(times, width_s)}
    grouped: dict[int, list[float]] = {}
    for when, ms in probes:
        grouped.setdefault(int((when - first) // width_s), []).append(ms)
    common = sorted(k for k in server if len(grouped.get(k, [])) >= 3)
    if len(common) < 3:
        return f"probe: {len(probes)} readings, too few bins beside the server's to compare"
    xs = [math.log(statistics.median(grouped[k])) for k in common]
    ys = [math.log(server[k]) for k in common]
    r = statistics.correlation(xs, ys) if len(set(xs)) > 1 and len(set(ys)) > 1 else float("nan")
    medians = [statistics.median(grouped[k]) for k in common]
    return (
        f"  probe: {len(probes)} readings; bin medians {min(medians):.2f}-{max(medians):.2f} ms "
        f"(slowest / fastest {max(medians) / min(medians):.2f}, log sd {statistics.stdev(xs):.3f});"
        f" correlation with the server's ms per token over {len(common)} bins: r = {r:+.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to load (recording)")
    parser.add_argument("--bin", type=float, default=30.0, help="seconds per bin")
    parser.add_argument("--output", type=Path, default=Path("reports"))
    parser.add_argument("--run", type=Path, nargs="+", help="read these runs, record nothing")
    parser.add_argument("--config", help="with --run: this configuration's requests only")
    args = parser.parse_args()
    if args.bin <= 0 or args.minutes <= 0:
        print("--bin and --minutes must be positive", file=sys.stderr)
        sys.exit(2)
    runs = args.run or [record(args.minutes, args.output)]
    steady = True
    for run in runs:
        found = bins(token_times(run, args.config), args.bin)
        if len(found) < 2:
            sys.exit(
                f"{run}: fewer than two bins of {args.bin:g} s with {LEAST} requests each; "
                "a wider --bin holds more"
            )
        speeds = [ms for _, _, ms in found]
        print(f"{run}: {len(found)} bins of {args.bin:g} s")
        for offset, count, ms in found:
            print(f"  {offset:7.0f} s  {count:5d} requests  {ms:6.2f} ms per output token")
        fastest, slowest = min(speeds), max(speeds)
        sd = statistics.stdev(math.log(s) for s in speeds)
        ratio = slowest / fastest
        print(
            f"  ms per output token: min {fastest:.2f}  median {statistics.median(speeds):.2f}"
            f"  max {slowest:.2f}; slowest / fastest {ratio:.2f}; log sd between bins {sd:.3f}"
        )
        tracking = probe_tracking(token_times(run, args.config), probe_times(run), args.bin)
        if tracking:
            print(tracking)
        if ratio <= STEADY:
            print("  steady: every bin within 10% of the fastest")
        else:
            steady = False
            print(
                f"  not steady: the same load ran {ratio - 1:.0%} slower in one bin than in "
                "another; a capacity measured here moves by about as much"
            )
    sys.exit(0 if steady else 1)


if __name__ == "__main__":
    main()
