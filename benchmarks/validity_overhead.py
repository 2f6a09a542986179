"""What the validity checks cost on the demo sweep, as a share of its wall time.

    python benchmarks/validity_overhead.py                 # runs the demo sweep first
    python benchmarks/validity_overhead.py --run RUN_DIR   # a demo run already recorded

Without `--run` it runs `tunebench sweep sweeps/cpu-demo.yaml` as a user would (a fresh
process, timed from outside; a non-zero exit fails the benchmark). Then, on that run, it
times every cost the checks add to a sweep, in `--repeats` alternated rounds:

- verdicts: every point's row built again from its stored client and server columns and
  requests (`build_row`: SLO, client verdict with over-drive and CPU, sample sufficiency,
  token reconciliation, failed requests); the whole row, older checks included;
- arg checks: `verify_args` of every configuration against its recorded effective config;
- dispatch lag: `dispatch_lag` over every stored GuideLLM report;
- CPU sampling: the load generator's sampler (`ProcessGroupUsage`) takes one sample every
  0.5 s while a configuration's load runs; one sample of a live process group is timed and
  charged for every 0.5 s of the sweep's wall (an upper bound: it does not run while
  servers start).

It prints min/median/max of each and the median total against the sweep's wall time.
Target: < 2% of wall. Exit 1 when missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tunebench.assemble import fixed_output_tokens  # noqa: E402
from tunebench.environment import cpu_info  # noqa: E402
from tunebench.load import client_usage  # noqa: E402
from tunebench.load.guidellm_report import dispatch_lag  # noqa: E402
from tunebench.points.row import PointId, build_row  # noqa: E402
from tunebench.points.validity import verify_args  # noqa: E402
from tunebench.spec.loading import load_spec  # noqa: E402
from tunebench.store.run import read_csv, read_points  # noqa: E402

SAMPLE_INTERVAL_S = 0.5


def run_demo(spec: Path) -> tuple[Path, float]:
    root = Path(tempfile.mkdtemp(prefix="tunebench-validity-"))
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tunebench.cli.main",
            "sweep",
            str(spec),
            "--root",
            str(root),
            "--no-report",
        ],
        cwd=REPO,
        start_new_session=True,
    )
    wall = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"the demo sweep exited with {result.returncode}; nothing to measure")
    (run,) = root.iterdir()
    return run, wall


def time_verdicts(
    run: Path, manifest: dict, rows: list[dict], slo: dict | None, output_tokens: int | None
) -> float:
    """The rows' inputs are prepared first (the runner holds them in memory); only
    `build_row` is timed."""
    requests = {
        c["config_id"]: [
            {k: _number(v) for k, v in s.items()}
            for s in read_csv(run / "requests" / f"{c['config_id']}.csv")
        ]
        for c in manifest["configs"]
    }
    problems = {c["config_id"]: c.get("invalid_reasons") or [] for c in manifest["configs"]}
    server_prefixes = (
        "kv_", "running", "waiting", "queue", "prefill", "decode", "server_", "preempt",
        "prefix", "spec_",
    )  # fmt: skip
    inputs = []
    for row in rows:
        repeat = int(row.get("repeat") or 1)
        samples = [
            s
            for s in requests[row["config_id"]]
            if s["point_id"] == row["point_id"] and int(s.get("repeat") or 1) == repeat
        ]
        point = PointId(
            row["run_id"], row["config_id"], row["config_label"], row["point_id"],
            row["load_kind"], repeat,
        )  # fmt: skip
        server = {k: _number(v) for k, v in row.items() if k.startswith(server_prefixes)}
        client = {k: _number(v) for k, v in row.items() if k not in server}
        inputs.append((point, client, samples, server, problems[row["config_id"]]))
    started = time.perf_counter()
    for point, client, samples, server, config_problems in inputs:
        build_row(
            point,
            {},
            client,
            samples,
            server,
            slo_spec=slo,
            config_problems=config_problems,
            expected_output_tokens=output_tokens,
        )
    return time.perf_counter() - started


def time_arg_checks(manifest: dict) -> float:
    started = time.perf_counter()
    for config in manifest["configs"]:
        verify_args(config.get("args") or {}, config.get("effective") or {})
    return time.perf_counter() - started


def time_dispatch_lag(reports: list[dict]) -> float:
    started = time.perf_counter()
    for report in reports:
        for benchmark in report["benchmarks"]:
            dispatch_lag(benchmark)
    return time.perf_counter() - started


def time_one_sample(pgid: int, n: int = 20) -> float:
    started = time.perf_counter()
    for _ in range(n):
        client_usage.sample(pgid)
    return (time.perf_counter() - started) / n


def _number(value):
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def spread(values: list[float]) -> str:
    return (
        f"min {min(values) * 1000:8.2f} ms  median {statistics.median(values) * 1000:8.2f} ms"
        f"  max {max(values) * 1000:8.2f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spec", type=Path, default=REPO / "sweeps" / "cpu-demo.yaml")
    parser.add_argument("--run", type=Path, help="a recorded run of the spec (skips the sweep)")
    parser.add_argument("--wall-s", type=float, help="its wall time, when --run is given")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.02)
    args = parser.parse_args()

    if args.run:
        run = args.run
        manifest = json.loads((run / "manifest.json").read_text())
        wall = args.wall_s or float(manifest.get("elapsed_s") or 0)
        if not wall:
            sys.exit("--wall-s is needed: the manifest does not say how long the sweep took")
    else:
        run, wall = run_demo(args.spec)
        manifest = json.loads((run / "manifest.json").read_text())
    spec = load_spec(args.spec)
    slo = spec.slo.model_dump(exclude_none=True) if getattr(spec, "slo", None) else None
    rows = read_points(run)
    reports = [json.loads(p.read_text()) for p in sorted(run.glob("guidellm/*/benchmarks/*.json"))]
    # a live process group like the load generator's: this process and a child
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    costs: dict[str, list[float]] = {
        "verdicts": [],
        "arg checks": [],
        "dispatch lag": [],
        "CPU sampling": [],
    }
    try:
        for _ in range(args.repeats):  # alternated: one of each per round
            costs["verdicts"].append(
                time_verdicts(run, manifest, rows, slo, fixed_output_tokens(spec))
            )
            costs["arg checks"].append(time_arg_checks(manifest))
            costs["dispatch lag"].append(time_dispatch_lag(reports))
            per_sample = time_one_sample(os.getpgrp())
            costs["CPU sampling"].append(per_sample * wall / SAMPLE_INTERVAL_S)
    finally:
        child.kill()
        child.wait()

    cpu = cpu_info()
    print(f"machine: {cpu['cpu_model']} ({', '.join(cpu['cpu_flags'])}), {os.cpu_count()} cores")
    print(
        f"run: {run} ({len(rows)} points, {len(manifest['configs'])} configurations, "
        f"{len(reports)} GuideLLM reports)"
    )
    print(f"sweep wall: {wall:.1f} s; {args.repeats} alternated rounds")
    for name, values in costs.items():
        print(f"  {name:13s} {spread(values)}")
    total = sum(statistics.median(v) for v in costs.values())
    share = total / wall
    print(
        f"checks total (medians): {total * 1000:.1f} ms = {share:.3%} of wall "
        f"(target < {args.target:.0%})"
    )
    if share >= args.target:
        print("TARGET MISSED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
