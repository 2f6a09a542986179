"""Wall time of one tuning study with 1 and with N workers sharing it in PostgreSQL.

    python benchmarks/distributed_tune.py [--trials 24] [--workers 3] [--repeats 3]
                                          [--time-scale 0.01]

Each worker is a real `tunebench tune --storage postgresql://...` process; the database is
a real PostgreSQL started for the benchmark (tunebench/testing/postgres.py). The deployment
is a recorded 31-configuration grid played back (deployment kind recorded), sleeping
`--time-scale` of the recorded time (a start's 40 s and each probe's window), so a trial
costs what a real one does, scaled down; the workers' own costs (Python start-up, the
study's database round trips, the capacity search) are paid in full. Runs alternate (1
worker, N workers, 1, N, ...), each on a fresh study; printed: min/median/max wall seconds
per setting, the speed-up of the medians, and the trials each worker deployed. A worker
that exits non-zero fails the benchmark.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.integration.test_distributed_tune import deployed, start_worker, write_spec  # noqa: E402
from tunebench.environment import cpu_info  # noqa: E402
from tunebench.testing.postgres import postgres_server  # noqa: E402


def one_study(
    work: Path, storage: str, name: str, workers: int, trials: int, scale: float
) -> tuple[float, list[int]]:
    spec = write_spec(work, name, trials=trials, time_scale=scale)
    began = time.monotonic()
    procs = [start_worker(spec, storage, work / f"{name}-w{i}") for i in range(workers)]
    try:
        codes = [p.wait(timeout=3600) for p in procs]
    finally:
        for p in procs:
            p.stop()
    wall = time.monotonic() - began
    if any(codes):
        logs = [(work / f"{name}-w{i}" / "worker.log").read_text()[-2000:] for i in range(workers)]
        raise SystemExit(f"a worker failed: exit codes {codes}\n" + "\n".join(logs))
    study = optuna.load_study(study_name=name, storage=storage)
    done = deployed(study)
    keys = [t.user_attrs["args_key"] for t in done]
    if len(done) != trials or len(set(keys)) != len(keys):
        raise SystemExit(f"{name}: {len(done)} deployments, {len(set(keys))} distinct args")
    counts: dict[str, int] = {}
    for trial in done:
        counts[trial.user_attrs["worker"]] = counts.get(trial.user_attrs["worker"], 0) + 1
    return wall, sorted(counts.values(), reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=0.01)
    args = parser.parse_args()
    info = cpu_info()
    print(f"machine: {info['cpu_model']}, flags {' '.join(info['cpu_flags'])}")
    print(
        f"{args.trials} deployments per study, played at {args.time_scale:g} x recorded time "
        f"(a trial ~{40 * args.time_scale + 4 * 10 * args.time_scale:.1f} s of sleeps)"
    )
    walls: dict[int, list[float]] = {1: [], args.workers: []}
    shares: list[list[int]] = []
    with tempfile.TemporaryDirectory(prefix="tunebench-dist-") as tmp, postgres_server() as url:
        work = Path(tmp)
        for repeat in range(args.repeats):
            for workers in (1, args.workers):
                name = f"bench-r{repeat}-w{workers}"
                wall, per_worker = one_study(work, url, name, workers, args.trials, args.time_scale)
                walls[workers].append(wall)
                if workers > 1:
                    shares.append(per_worker)
                print(
                    f"  repeat {repeat + 1}, {workers} worker(s): {wall:.1f} s  trials {per_worker}"
                )
    for workers, values in walls.items():
        print(
            f"{workers} worker(s): wall min {min(values):.1f} s, median "
            f"{statistics.median(values):.1f} s, max {max(values):.1f} s"
        )
    speedup = statistics.median(walls[1]) / statistics.median(walls[args.workers])
    print(f"speed-up of the medians: {speedup:.2f}x with {args.workers} workers")
    print(f"trials per worker ({args.workers} workers): {shares}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
