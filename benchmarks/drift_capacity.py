"""Does tunebench say so when the machine slows down during a capacity search? Planted throttles.

    python benchmarks/drift_capacity.py [--slowdowns 0.3 0.5] [--configs 3] [--offset 12]
        [--throttle 30] [--method auto|sigstop] [--repeats 1] [--output /tmp/drift-capacity]
        [--slo-ms 40]

A capacity search reads one probe after another off the same server: a machine that slows
down part way through makes the probes under it miss, and the capacity found is the slow
machine's, not the configuration's. tunebench marks such a search in the capacity record
(manifest.json, `configs[].capacity.drift`: "machine drifted during the search (...)") when
a probe was flagged `machine speed changed`. Each sweep here runs `--configs`
configurations of the built-in tiny model (server on CPU 0, GuideLLM on CPU 1, as
drift_detection.py; max-num-seqs 16, 17, ..., above what the load keeps running, so they
run alike): a 5-s warm-up, then one `kind: capacity` point of short poisson probes (64/128
tokens, SLO TTFT p90 <= 40 ms, from 4 req/s, at most 10 req/s and 5 probes: 76 s of probes
untouched on a 2-core VM; a search whose probes keep missing goes down in rate and its
windows grow, up to 80 s each; later configurations start from the last capacity). The
first configuration runs untouched (every one with `--slowdowns 0`: an A/A sweep of
`--configs` searches); into each later one a throttle of its server
(tunebench/testing/throttle.py: a cgroup CPU quota of 1 - slowdown where writable, else or
with `--method sigstop` a SIGSTOP duty cycle no counter shows) is planted `--offset` s
after its server is ready (by then the 5-s warm-up is over and the search under way: a
later configuration starts from the last capacity, and a search that meets its SLO there at
`max_rate` ends after one 8-s probe, so a plant 25 s after the start missed such searches)
for `--throttle` s, ended early when the search ends: the probes under it run slower.

Per configuration it prints whether it was planted, the capacity found and its probes, the
record's drift text, which probes were flagged and by which evidence (cgroup telemetry, the
window's requests, other processes' CPU, steal), and the plant and each probe in seconds
from the search's first probe. Then, per slowdown: planted searches the record flagged
"machine drifted during the search" k/n, and untouched ones k/n. Targets: planted searches
flagged in >= 95%, untouched ones in <= 5%. Exits 1 when a sweep fails, 2 on bad input.
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
from tunebench.points import trust  # noqa: E402
from tunebench.processes import stop_session  # noqa: E402
from tunebench.testing.throttle import Throttle  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from drift_between import EVIDENCE  # noqa: E402
from drift_detection import point_rows  # noqa: E402
from drift_detection import spec as detection_spec  # noqa: E402
from sweep_process import fail, start_sweep  # noqa: E402

# the first requests after a start pay for CPU kernels compiled on first use: not in a probe
WARMUP = {"kind": "concurrent", "streams": 2, "max_seconds": 5}
# Probe windows are max(8 s, 1.25 x 36 / rate s) (points/capacity.py probe_seconds): 12 s at
# 4 req/s, 8 s from 5.6 req/s on, 23 s at 2 req/s, at most 80 s (10 x max_seconds); five
# probes and GuideLLM's pauses between them (6-15 s) made 76 s untouched on a 2-core VM.
SEARCH = {
    "kind": "capacity",
    "arrival": "poisson",
    "max_seconds": 8,
    "start_rate": 4,
    "max_probes": 5,
    "max_rate": 10,
    "sample_margin": 1.25,
}
SLO = {"ttft_ms": {"p90": 40}}
DRIFTED = "machine drifted during the search"


def spec(configs: int, slo_ms: float = SLO["ttft_ms"]["p90"]) -> dict:
    """drift_detection.py's server, client and machine, as `configs` configurations of one
    capacity search each. 128 output tokens keep more requests running than 32 do, so that
    TTFT climbs within the rates one core of GuideLLM drives."""
    out = detection_spec(1, WARMUP["max_seconds"])
    out["name"] = "drift-capacity"
    del out["server"]["args"]["max-num-seqs"]
    out["server"]["matrix"] = {"max-num-seqs": [16 + i for i in range(configs)]}
    out["load"]["data"]["output_tokens"] = 128
    out["load"]["profiles"] = [dict(WARMUP), dict(SEARCH)]
    out["slo"] = {"ttft_ms": {"p90": slo_ms}}
    return out


def _manifest(run: Path) -> dict:
    try:
        return json.loads((run / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def _status(run: Path, config_id: str) -> str | None:
    """The configuration's status; None when the manifest could not be read just now."""
    configs = _manifest(run).get("configs")
    if configs is None:
        return None
    return next((c.get("status") for c in configs if c.get("config_id") == config_id), "")


Plant = tuple[float, float, str] | None  # started, ended, method; None: the search ended first


def _plant(
    args, slowdown: float, run: Path, config_id: str, pgid: int, sweep
) -> tuple[float, float, str]:
    """The throttle, for `--throttle` s or until the configuration stops running."""
    method = None if args.method == "auto" else args.method
    with Throttle(pgid, slowdown, method=method) as throttle:
        while time.time() < throttle.started + args.throttle and sweep.poll() is None:
            if _status(run, config_id) not in (None, "running"):
                break
            time.sleep(0.5)
    return throttle.started, throttle.ended, throttle.method


def one_sweep(args, slowdown: float, out: Path) -> tuple[Path, dict[str, Plant]]:
    stamp = f"{time.time():.0f}"
    spec_path = out / f"capacity-{slowdown}.yaml"
    spec_path.write_text(yaml.safe_dump(spec(args.configs, args.slo_ms)))
    runs = out / f"runs-{slowdown}-{stamp}"
    log_path = out / f"sweep-{slowdown}-{stamp}.log"
    sweep = start_sweep(spec_path, runs, log_path)
    ready: dict[str, tuple[float, int]] = {}  # config -> (seen running at, its server's pgid)
    planted: dict[str, Plant] = {}
    run = None
    try:
        while sweep.poll() is None:
            if run is None and runs.exists():
                run = next((p for p in runs.glob("*") if p.is_dir()), None)
            if run is None:
                time.sleep(1)
                continue
            configs = _manifest(run).get("configs", [])
            for config in configs[1:]:  # the first configuration runs untouched
                config_id, pgid = config.get("config_id"), config.get("server_pgid")
                if config_id not in ready and config.get("status") == "running" and pgid:
                    # "running" once its server is ready; the warm-up begins within seconds
                    ready[config_id] = (time.time(), int(pgid))
            for config_id, (since, pgid) in ready.items():
                if not slowdown:  # an A/A sweep: every search untouched
                    break
                if config_id in planted or time.time() < since + args.offset:
                    continue
                if _status(run, config_id) == "running":
                    started, ended, method = _plant(args, slowdown, run, config_id, pgid, sweep)
                    planted[config_id] = (started, ended, method)
                    print(
                        f"  planted {slowdown:.0%} in {config_id} {started - since:.0f} s after "
                        f"its server was ready, for {ended - started:.1f} s ({method})",
                        flush=True,
                    )
                elif _status(run, config_id) is not None:
                    planted[config_id] = None
                    print(f"  {config_id}: its search ended before the plant", flush=True)
            time.sleep(0.5)
        sweep.wait()
    finally:
        if sweep.poll() is None:
            stop_session(sweep)
    if sweep.returncode != 0 or run is None:
        fail(sweep, log_path)
    return run, planted


def evidence_of(reason: str) -> set[str]:
    """The evidence a point was flagged `machine speed changed` by (empty: not flagged)."""
    drift = [part for part in reason.split("; ") if part.startswith("machine speed changed")]
    return {name for name, text in EVIDENCE.items() if any(text in part for part in drift)} | (
        {"any"} if drift else set()
    )


def _ms(cell: str | None) -> str:
    return f"{float(cell):.0f}" if cell else "-"


def summarise(slowdown: float, run: Path, planted: dict[str, Plant], tally: dict) -> None:
    print(f"slowdown {slowdown:.0%} (time per token x{1 / (1 - slowdown):.2f}): {run}")
    # an A/A sweep (slowdown 0) plants nothing: every search is untouched
    rows = point_rows(run)
    for config in _manifest(run).get("configs", []):
        config_id = config["config_id"]
        probes = [
            r for r in rows if r["config_id"] == config_id and r["point_id"].startswith("capacity-")
        ]
        record = config.get("capacity") or {}
        if not probes:
            print(f"  {config_id}: no probe measured ({config.get('status')})")
            continue
        origin = min(float(r["start_time"]) for r in probes)
        span = max(float(r["end_time"]) for r in probes) - origin
        plant = planted.get(config_id)
        overlaps = [
            r
            for r in probes
            if plant and float(r["start_time"]) < plant[1] and float(r["end_time"]) > plant[0]
        ]
        kind = (
            "untouched"
            if config_id not in planted
            else "planted"
            if overlaps
            else "missed"  # the plant fell outside every probe: no trial
        )
        drift, rate = record.get("drift"), record.get("rate")
        print(
            f"  {config_id} {kind:<9} capacity {f'{rate:.3g}' if rate else '-'} req/s "
            f"({record.get('probes', len(probes))} probes over {span:.0f} s"
            + (", capped" if record.get("capped") else "")
            + (", converged" if record.get("converged") else "")
            + f"); drift: {drift or 'none'}"
        )
        if plant:
            print(f"    plant t={plant[0] - origin:.0f}-{plant[1] - origin:.0f} s ({plant[2]})")
        flagged_probe = False
        for row in probes:
            evidence = evidence_of(row.get("unverified_reason") or "")
            flagged_probe |= "any" in evidence
            start, end = float(row["start_time"]) - origin, float(row["end_time"]) - origin
            print(
                f"    {row['point_id']:<11} {float(row['target']):>5.2f} req/s t={start:.0f}-"
                f"{end:.0f} s, SLO {'met   ' if trust.flag(row.get('slo_met')) else 'missed'} "
                f"(TTFT p90 {_ms(row.get('ttft_p90_ms'))} ms)"
                + (", under the plant" if row in overlaps else "")
                + (
                    f"; flagged by {', '.join(sorted(evidence - {'any'})) or 'other'}"
                    if "any" in evidence
                    else ""
                )
            )
        counts = tally.setdefault((slowdown, kind), [0, 0, 0, 0, 0])
        counts[0] += 1
        counts[1] += bool(drift and drift.startswith(DRIFTED))
        counts[2] += flagged_probe
        counts[3] += sum("any" in evidence_of(r.get("unverified_reason") or "") for r in overlaps)
        counts[4] += len(overlaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slowdowns", type=float, nargs="+", default=[0.3, 0.5])
    parser.add_argument("--configs", type=int, default=3)
    parser.add_argument("--offset", type=float, default=12.0)
    parser.add_argument("--throttle", type=float, default=30.0)
    parser.add_argument("--method", choices=["auto", "sigstop"], default="auto")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--output", type=Path, default=Path("/tmp/drift-capacity"))
    parser.add_argument(
        "--slo-ms",
        type=float,
        default=SLO["ttft_ms"]["p90"],
        help="the searches' SLO, TTFT p90 in ms (a tighter one puts the knee below their "
        "max_rate of 10 req/s on a faster machine, so the probes meet it)",
    )
    args = parser.parse_args()
    if args.configs < 2:
        parser.error("--configs: at least 2 (the first runs untouched)")
    if not all(0 <= s < 1 for s in args.slowdowns):
        parser.error("--slowdowns: shares from 0 (nothing planted: an A/A sweep) to below 1")
    if args.offset < 0 or args.throttle <= 0 or args.repeats < 1:
        parser.error("--offset >= 0, --throttle > 0 and --repeats >= 1 are required")
    args.output.mkdir(parents=True, exist_ok=True)
    host = host_info()
    print(f"machine: {host.get('cpu_model', '?')}, {host.get('cpus', '?')} CPUs")
    tally: dict[tuple[float, str], list[int]] = {}
    for repeat in range(args.repeats):
        for slowdown in args.slowdowns:  # alternated within each repeat
            print(f"[{repeat + 1}/{args.repeats}] sweep with {slowdown:.0%} planted", flush=True)
            run, planted = one_sweep(args, slowdown, args.output)
            summarise(slowdown, run, planted, tally)
    for (slowdown, kind), (total, flagged, by_probe, hit, under) in sorted(tally.items()):
        print(
            f"{slowdown:.0%} {kind:<9} searches flagged '{DRIFTED}' {flagged}/{total}"
            f" (a probe of theirs flagged: {by_probe}/{total}"
            + (f"; probes under the plant flagged {hit}/{under}" if kind == "planted" else "")
            + ")"
        )


if __name__ == "__main__":
    main()
