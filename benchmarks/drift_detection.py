"""Does tunebench see a server slowed down under a point? Planted throttles on the real server.

    python benchmarks/drift_detection.py [--slowdowns 0.3 0.5] [--points 6] [--window 30]
        [--throttle 12] [--repeats 1] [--output /tmp/drift]

Each repeat runs one real sweep per slowdown (the built-in tiny model on CPU 0, GuideLLM on
CPU 1, `--points` load points of `--window` seconds at 2-7 streams). Into every other point
it plants a throttle of the server (tunebench/testing/throttle.py: a cgroup CPU quota of
1 - slowdown, or a SIGSTOP duty cycle where cgroups are not writable) for `--throttle`
seconds from `--offset` seconds into the window; the other points run untouched. Then it
reads each point's verdict and prints, per slowdown:
- planted points flagged "machine speed changed" (any evidence, and the window's own
  requests alone, which see every cause, not only a cgroup), with the size found;
- untouched points flagged (false flags, or the machine's own wander);
- the sentinels' readings (the first point again after every `--sentinel-every` points, 4,
  and at the end, each against the reading before it and the first point), which, when one
  says the speed changed, mark the points since the reading before it (points/sentinel.py).
`--slowdowns 0` runs a sweep with nothing planted (A/A: every flag there is a false flag or
this machine's own wander). `--step-from K` plants one throttle from point K to the end of
the sweep instead (a step that lasts: the sentinels between points should mark the span it
began in and every span after it, and leave the points before).
Exits 1 when a sweep fails, 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench.environment import host_info  # noqa: E402
from tunebench.processes import stop_session  # noqa: E402
from tunebench.testing.throttle import Throttle  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from sweep_process import fail, start_sweep  # noqa: E402


def spec(points: int, window: int, sentinel_every: int | None = None) -> dict:
    """The sweep; `sentinel_every`: sentinels after every this many points (and after the
    last), by count alone: the spans the figures in docs/benchmarks.md name (None: the
    product's defaults)."""
    out = {
        "name": "drift-detection",
        "model": "builtin:tiny-llama-random",
        "deployment": {
            "kind": "local",
            "start_timeout_s": 300,
            "kv_cache_space_gib": 1,
            "cpus": "0",
        },
        "server": {"args": {"max-model-len": 512, "max-num-seqs": 8, "enforce-eager": True}},
        "load": {
            "client_cpus": "1",
            "data": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 32},
            "profiles": [
                {
                    "kind": "concurrent",
                    "streams": [2 + i for i in range(points)],
                    "max_seconds": window,
                }
            ],
        },
        "metrics": {"interval_s": 1},
        "output": "reports",
    }
    if sentinel_every is not None:
        out["machine"] = {"sentinel_every": sentinel_every, "sentinel_every_s": 0}
    return out


def point_rows(run: Path) -> list[dict]:
    path = run / "points.csv"
    if not path.exists():
        return []
    with path.open() as handle:
        return list(csv.DictReader(handle))


def _server_pgid(run: Path) -> int | None:
    try:
        manifest = json.loads((run / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    for config in manifest.get("configs", []):
        if config.get("status") == "running" and config.get("server_pgid"):
            return int(config["server_pgid"])
    return None


def one_sweep(args, slowdown: float, out: Path) -> tuple[list[dict], dict | None]:
    spec_path = out / f"drift-{slowdown}.yaml"
    spec_path.write_text(yaml.safe_dump(spec(args.points, args.window, args.sentinel_every)))
    stamp = f"{time.time():.0f}"
    runs = out / f"runs-{slowdown}-{stamp}"
    log_path = out / f"sweep-{slowdown}-{stamp}.log"
    sweep = start_sweep(spec_path, runs, log_path)
    planted: dict[str, tuple[float, float, str]] = {}
    step: Throttle | None = None  # --step-from: one throttle from a point to the sweep's end
    try:
        run = None
        while sweep.poll() is None:
            run = (
                run or next((p for p in runs.glob("*") if p.is_dir()), None)
                if runs.exists()
                else None
            )
            if run is None:
                time.sleep(1)
                continue
            pgid = _server_pgid(run)
            done = len(point_rows(run))
            index = done  # the point now running, from 0
            if args.step_from and slowdown > 0:
                if pgid and step is None and index == args.step_from - 1:
                    time.sleep(args.offset)
                    step = Throttle(pgid, slowdown).__enter__()
                    print(
                        f"  planted {slowdown:.0%} from point {index + 1} on ({step.method})",
                        flush=True,
                    )
                time.sleep(0.5)
                continue
            due = index % 2 == 1 and index < args.points and str(index) not in planted
            if pgid and slowdown > 0 and due:
                # the point starts as the last one's row lands; plant inside its window
                time.sleep(args.offset)
                with Throttle(pgid, slowdown) as throttle:
                    time.sleep(args.throttle)
                planted[str(index)] = (throttle.started, throttle.ended, throttle.method)
                print(
                    f"  planted {slowdown:.0%} in point {index + 1} for "
                    f"{throttle.ended - throttle.started:.1f} s ({throttle.method})",
                    flush=True,
                )
            time.sleep(0.5)
        sweep.wait()
    finally:
        if step is not None:
            step.__exit__(None, None, None)
        if sweep.poll() is None:
            stop_session(sweep)
    if sweep.returncode != 0:
        fail(sweep, log_path)
    rows = point_rows(run) if run else []
    if step is not None:
        for index in range(args.step_from - 1, len(rows)):
            planted[str(index)] = (step.started, step.ended, step.method)
    for index, row in enumerate(rows):
        row["planted"] = planted.get(str(index))
    return rows, _sentinels(run) if run else []


def _sentinels(run: Path) -> list[dict]:
    configs = json.loads((run / "manifest.json").read_text()).get("configs", [])
    if not configs:
        return []
    return configs[0].get("sentinels") or (
        [configs[0]["sentinel"]] if configs[0].get("sentinel") else []
    )


def describe_sentinel(sentinel: dict) -> str:
    where = f" after {sentinel['after']}" if sentinel.get("after") else " again at the end"
    if "held" not in sentinel:
        return f"sentinel{where}: {sentinel.get('note', 'not judged')}"
    # an inconclusive sentinel is not "held": 20% or more apart, within its windows' noise
    verdict = (
        "inconclusive"
        if sentinel.get("inconclusive")
        else "held"
        if sentinel["held"]
        else "speed changed"
    )
    against = sentinel.get("against") or sentinel["point"]
    whole = (
        f"; against {sentinel['point']} itself {sentinel['first_change_pct']:+.1f}%"
        if sentinel.get("first_change_pct") is not None
        else ""
    )
    if sentinel.get("marked"):
        whole += f"; marked {', '.join(sentinel.get('points') or ['every point'])}"
    return (
        f"sentinel{where}: {sentinel['point']} again, time per token "
        f"{sentinel['change_pct']:+.1f}% against {against} (z {sentinel['z']:.1f}): "
        f"{verdict}{whole}"
    )


def summarise(slowdown: float, rows: list[dict], sentinels: list[dict], step: bool) -> None:
    """`step`: one throttle from a point to the end (--step-from): the windows under it ran
    slowed throughout, so their own change is not the plant's size, and is not sized."""
    planted = [r for r in rows if r["planted"]]
    untouched = [r for r in rows if not r["planted"]]

    def flagged(row: dict, own: bool = False) -> bool:
        reason = row.get("unverified_reason") or ""
        text = "its requests ran" if own else "machine speed changed"
        return text in reason

    def by_sentinel(row: dict) -> bool:
        return "machine speed changed: the sentinel" in (row.get("unverified_reason") or "")

    expected = 1 / (1 - slowdown) - 1
    if slowdown:
        print(f"slowdown {slowdown:.0%} (time per token x{1 + expected:.2f}):")
    else:
        print("nothing planted (A/A):")
    for row in rows:
        where = ""
        if row["planted"]:
            # inside the window: a lasting step (--step-from) began before most of its
            # windows and ended after them, so it is clipped to each window's own span
            start, span = float(row["start_time"]), float(row.get("duration_s") or "inf")
            begin = max(0.0, row["planted"][0] - start)
            end = min(span, row["planted"][1] - start)
            where = f" planted t={begin:.0f}-{end:.0f} s;"
        print(
            f"  {row['point_id']:<14} change {row.get('window_change_pct') or '-':>6}% at "
            f"t={row.get('window_change_from_s') or '-'}-{row.get('window_change_to_s') or '-'}"
            f" s, throttled {row.get('throttled_pct') or '-'}%, foreign "
            f"{row.get('foreign_cpu_pct') or '-'}%, probe {row.get('probe_ms') or '-'} ms;"
            f"{where} flagged: {'yes' if flagged(row) else 'no'}"
            f" (requests alone: {'yes' if flagged(row, True) else 'no'}; by a sentinel: "
            f"{'yes' if by_sentinel(row) else 'no'})"
        )
    if not sentinels:
        print("  sentinel: none recorded")
    for sentinel in sentinels:
        print(f"  {describe_sentinel(sentinel)}")
    sizes = [float(r["window_change_pct"]) / 100 for r in planted if r.get("window_change_pct")]
    if slowdown and sizes and not step:
        # the plant takes a share of the server's CPU; the window test reads time per token
        lost = [1 - 1 / (1 + size) for size in sizes]
        print(
            f"  sized within 10 points: as speed lost {sum(abs(x - slowdown) <= 0.1 for x in lost)}"
            f"/{len(sizes)} ({min(lost):.1%} to {max(lost):.1%} for {slowdown:.0%}); as time "
            f"per token {sum(abs(x - expected) <= 0.1 for x in sizes)}/{len(sizes)} "
            f"(+{min(sizes):.0%} to +{max(sizes):.0%} for +{expected:.0%})"
        )
    print(
        f"  planted flagged: {sum(map(flagged, planted))}/{len(planted)} "
        f"(by the window's requests alone: {sum(flagged(r, True) for r in planted)}/"
        f"{len(planted)}); untouched flagged: {sum(map(flagged, untouched))}/{len(untouched)}"
        f" (by a sentinel: {sum(by_sentinel(r) for r in untouched)}/{len(untouched)})"
    )
    if step:
        print(f"  planted flagged by a sentinel: {sum(map(by_sentinel, planted))}/{len(planted)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.3, 0.5])
    parser.add_argument("--points", type=int, default=6)
    parser.add_argument("--window", type=int, default=30)
    parser.add_argument("--offset", type=float, default=8.0)
    parser.add_argument("--throttle", type=float, default=12.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--sentinel-every",
        type=int,
        default=4,
        help="a sentinel after every this many points (0: only after the last)",
    )
    parser.add_argument(
        "--step-from",
        type=int,
        default=0,
        help="instead of plants inside windows, one throttle from this point (1-based, "
        "--offset s into it) to the sweep's end: a step that lasts, for the sentinels",
    )
    parser.add_argument("--output", type=Path, default=Path("/tmp/drift-detection"))
    args = parser.parse_args()
    if args.offset + args.throttle > args.window:
        parser.error("--offset + --throttle must fit inside --window")
    if any(not 0 <= s < 1 for s in args.slowdowns):
        parser.error("--slowdowns: each must lie in [0, 1) (0: nothing planted)")
    args.output.mkdir(parents=True, exist_ok=True)
    host = host_info()
    print(f"machine: {host.get('cpu_model', '?')}, {host.get('cpus', '?')} CPUs")
    for repeat in range(args.repeats):
        for slowdown in args.slowdowns:  # alternated within each repeat
            what = f"{slowdown:.0%} planted" if slowdown else "nothing planted"
            print(f"[{repeat + 1}/{args.repeats}] sweep with {what}", flush=True)
            rows, sentinels = one_sweep(args, slowdown, args.output)
            summarise(slowdown, rows, sentinels, step=bool(args.step_from))


if __name__ == "__main__":
    main()
