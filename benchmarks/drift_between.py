"""Does tunebench see the machine slow down between two configurations? Planted throttles.

    python benchmarks/drift_between.py [--slowdowns 0.3 0.5] [--configs 6] [--window 10]
        [--throttle 25] [--method auto|sigstop] [--repeats 1] [--output /tmp/drift-between]

A machine that slows down after one configuration and stays slow into the next one makes
the second configuration look worse than it is: the quietest wrong answer of a compare.
Each sweep here runs `--configs` configurations of the built-in tiny model (server on CPU 0,
GuideLLM on CPU 1; two concurrent points of `--window` s, the defaults' watch and sentinel).
The first configuration runs untouched; into each later one a throttle of its server
(tunebench/testing/throttle.py) is planted from the moment its server is ready, for
`--throttle` s: the server is slower for its first point and part of its second, then its
old speed again, as a machine that changed speed between configurations and recovered.
`--method sigstop` slows it by a SIGSTOP duty cycle that no cgroup counter shows (the
telemetry cannot see it; what is left is the sentinel and the windows' own requests).

Per slowdown it prints every configuration's verdict (flagged `machine speed changed` on any
point, and by which evidence: cgroup telemetry, the sentinel, the window's requests), the
sentinel's change against the nominal one, and the counts: planted configurations flagged,
and flagged without the telemetry. Exits 1 when a sweep fails, 2 on bad input.
"""

from __future__ import annotations

import argparse
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
from drift_detection import point_rows  # noqa: E402
from drift_detection import spec as detection_spec  # noqa: E402
from sweep_process import fail, start_sweep  # noqa: E402

EVIDENCE = {
    "telemetry": "throttled by its CPU quota",
    "sentinel": "the sentinel",
    "requests": "its requests ran",
    # not planted here: another process on the server's cores, or the hypervisor
    "foreign CPU": "processes not of this run",
    "steal": "the hypervisor took",
}


def spec(configs: int, window: int) -> dict:
    """drift_detection.py's sweep (the same server, load and machine), as `configs`
    configurations with two points each: max-num-seqs values above the load's 3 streams run
    alike, so a difference between them is the plant's."""
    out = detection_spec(2, window)
    out["name"] = "drift-between"
    del out["server"]["args"]["max-num-seqs"]
    out["server"]["matrix"] = {"max-num-seqs": [8 + i for i in range(configs)]}
    return out


def _manifest(run: Path) -> dict:
    try:
        return json.loads((run / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def one_sweep(args, slowdown: float, out: Path) -> tuple[Path, dict[str, tuple[float, float, str]]]:
    spec_path = out / f"between-{slowdown}.yaml"
    spec_path.write_text(yaml.safe_dump(spec(args.configs, args.window)))
    stamp = f"{time.time():.0f}"
    runs = out / f"runs-{slowdown}-{stamp}"
    log_path = out / f"sweep-{slowdown}-{stamp}.log"
    sweep = start_sweep(spec_path, runs, log_path)
    planted: dict[str, tuple[float, float, str]] = {}
    run = None
    try:
        while sweep.poll() is None:
            if run is None and runs.exists():
                run = next((p for p in runs.glob("*") if p.is_dir()), None)
            if run is None:
                time.sleep(1)
                continue
            for config in _manifest(run).get("configs", []):
                config_id = config.get("config_id")
                pgid = config.get("server_pgid")
                if (
                    config_id == "c1"
                    or config_id in planted
                    or config.get("status") != "running"
                    or not pgid
                ):
                    continue
                # "running" once its server is ready: the first point begins within seconds
                # (the load generator was started beside the server)
                method = None if args.method == "auto" else args.method
                with Throttle(int(pgid), slowdown, method=method) as throttle:
                    time.sleep(args.throttle)
                planted[config_id] = (throttle.started, throttle.ended, throttle.method)
                print(
                    f"  planted {slowdown:.0%} in {config_id} for "
                    f"{throttle.ended - throttle.started:.1f} s ({throttle.method})",
                    flush=True,
                )
            time.sleep(0.5)
        sweep.wait()
    finally:
        if sweep.poll() is None:
            stop_session(sweep)
    if sweep.returncode != 0 or run is None:
        fail(sweep, log_path)
    return run, planted


def verdicts(run: Path) -> dict[str, set[str]]:
    """Per configuration: the evidence its points were flagged by (empty: not flagged)."""
    out: dict[str, set[str]] = {}
    for row in point_rows(run):
        reason = row.get("unverified_reason") or ""
        found = out.setdefault(row["config_id"], set())
        if "machine speed changed" in reason:
            found.update(name for name, text in EVIDENCE.items() if text in reason)
            found.add("any")
    return out


def summarise(slowdown: float, run: Path, planted: dict, tally: dict) -> None:
    nominal = 1 / (1 - slowdown) - 1
    # the sentinel against a first point throttled throughout: (1 - slowdown) - 1
    print(
        f"slowdown {slowdown:.0%} (time per token x{1 + nominal:.2f}; a sentinel after a first "
        f"point slowed throughout reads {-slowdown:.0%}): {run}"
    )
    found = verdicts(run)
    sentinels = {c["config_id"]: c.get("sentinel") or {} for c in _manifest(run)["configs"]}
    for config_id, evidence in sorted(found.items()):
        sentinel = sentinels.get(config_id, {})
        plant = planted.get(config_id)
        kind = "planted" if plant else "untouched"
        by = ", ".join(sorted(evidence - {"any"})) or "-"
        print(
            f"  {config_id} {kind:<9} flagged: {'yes' if 'any' in evidence else 'no '} (by {by});"
            f" sentinel {sentinel.get('change_pct', '-')}% ({sentinel.get('z', '-')} noise units)"
            + (f", plant {plant[1] - plant[0]:.0f} s {plant[2]}" if plant else "")
        )
        counts = tally.setdefault((slowdown, kind), [0, 0, 0])
        counts[0] += 1
        counts[1] += "any" in evidence
        counts[2] += bool(evidence & {"sentinel", "requests"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.3, 0.5])
    parser.add_argument("--configs", type=int, default=6)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--throttle", type=float, default=25.0)
    parser.add_argument("--method", choices=["auto", "sigstop"], default="auto")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--output", type=Path, default=Path("/tmp/drift-between"))
    args = parser.parse_args()
    if args.configs < 2:
        parser.error("--configs: at least 2 (the first runs untouched)")
    if not all(0 < s < 1 for s in args.slowdowns):
        parser.error("--slowdowns: shares between 0 and 1")
    args.output.mkdir(parents=True, exist_ok=True)
    host = host_info()
    print(f"machine: {host.get('cpu_model', '?')}, {host.get('cpus', '?')} CPUs")
    tally: dict[tuple[float, str], list[int]] = {}
    for repeat in range(args.repeats):
        for slowdown in args.slowdowns:  # alternated within each repeat
            print(f"[{repeat + 1}/{args.repeats}] sweep with {slowdown:.0%} planted", flush=True)
            run, planted = one_sweep(args, slowdown, args.output)
            summarise(slowdown, run, planted, tally)
    for (slowdown, kind), (total, flagged, without) in sorted(tally.items()):
        print(
            f"{slowdown:.0%} {kind:<9} configurations flagged {flagged}/{total}"
            f" (without the telemetry: {without}/{total})"
        )


if __name__ == "__main__":
    main()
