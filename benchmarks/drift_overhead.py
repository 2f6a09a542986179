"""What watching the machine costs the demo sweep, and how often it flags an unplanted run.

    python benchmarks/drift_overhead.py [--spec sweeps/cpu-demo.yaml] [--repeats 3] [--keep DIR]

Runs the sweep as a user would (a fresh `tunebench sweep` process, timed from outside; a
non-zero exit fails the benchmark) in alternated rounds of two variants:

- `off`: the spec with `machine: {watch: false, sentinel: false}` (no telemetry, no probe, no
  sentinel; the windows' own steadiness test still runs, it costs no load);
- `on`: the spec as it is (the defaults: telemetry and the probe beside every point, the
  A...A sentinel after each configuration's last point).

It prints min/median/max of each variant's wall time and the median growth, and for every
run what the drift checks said on a machine nobody slowed on purpose: points marked
`machine speed changed` (and by which evidence), the sentinels' changes, and the points'
foreign-CPU and window-change figures. The windows' own steadiness test needs no watch and
runs in both variants: what `off` flags is what the requests alone show. Target (the demo on
a quiet machine): growth <= 10%, no drift flags. Exit 1 when a sweep fails; the targets
are printed, not enforced.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tunebench.processes import run_in_own_session  # noqa: E402

OFF = {"watch": False, "sentinel": False}


def _variant_spec(spec: Path, machine: dict | None, into: Path) -> Path:
    text = yaml.safe_load(spec.read_text())
    if machine is not None:
        text["machine"] = {**(text.get("machine") or {}), **machine}
    path = into / spec.name
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    return path


def _run(spec: Path, output: Path) -> tuple[float, Path]:
    started = time.monotonic()
    # its own session, stopped with everything it started on a Ctrl-C here or at the limit
    done = run_in_own_session(
        [sys.executable, "-m", "tunebench.cli.main", "sweep", str(spec), "-o", str(output)]
        + ["--no-report"],
        REPO,
        dict(os.environ),
        timeout=3600,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        tail = done.stdout[-3000:] + done.stderr[-3000:]
        sys.exit(f"sweep failed (exit {done.returncode}):\n{tail}")
    runs = sorted(p for p in output.iterdir() if (p / "manifest.json").exists())
    return wall, runs[-1]


def _flags(run: Path) -> list[str]:
    """One line per point or sentinel: what the drift checks said."""
    lines = []
    with (run / "points.csv").open() as handle:
        for row in csv.DictReader(handle):
            reason = row.get("unverified_reason") or ""
            drift = "machine speed changed" in reason
            change = row["window_change_pct"] or "-"
            foreign = row["foreign_cpu_pct"] or "-"
            probe = f"{row['probe_before_ms'] or '-'}->{row['probe_after_ms'] or '-'}"
            lines.append(
                f"    {row['config_id']} {row['point_id']:<14} window {change:>6}%"
                f"  foreign {foreign:>5}%  probe {probe:>13} ms"
                f"  {'FLAGGED: ' + reason if drift else 'not flagged'}"
            )
    manifest = json.loads((run / "manifest.json").read_text())
    for entry in manifest["configs"]:
        config_id = entry["config_id"]
        for record in entry.get("sentinels") or []:
            state = (
                "moved"
                if record.get("held") is False
                else "inconclusive"
                if record.get("inconclusive")
                else "held"
                if "held" in record
                else record.get("note", "?")
            )
            lines.append(
                f"    {config_id} sentinel       change {record.get('change_pct', '-')}% "
                f"({record.get('z', '-')} noise units): {state}"
            )
    return lines


def _count(run: Path) -> tuple[int, int]:
    with (run / "points.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    flagged = sum("machine speed changed" in (r.get("unverified_reason") or "") for r in rows)
    return flagged, len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "sweeps/cpu-demo.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--keep", type=Path, help="keep the runs here (their requests, for a later look)"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        sys.exit("--repeats: at least 1")
    walls: dict[str, list[float]] = {"off": [], "on": []}
    # points flagged / points, per variant: the windows' own steadiness test runs in both
    flags: dict[str, list[int]] = {"off": [0, 0], "on": [0, 0]}
    with tempfile.TemporaryDirectory(prefix="drift-overhead-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for variant in walls:
            (root / f"{variant}-spec").mkdir(exist_ok=True)
        specs = {
            "off": _variant_spec(args.spec, OFF, root / "off-spec"),
            "on": _variant_spec(args.spec, None, root / "on-spec"),
        }
        for repeat in range(1, args.repeats + 1):
            # alternated, the order turned every round: a drift of the machine over the
            # benchmark falls on both variants
            order = ("off", "on") if repeat % 2 else ("on", "off")
            for variant in order:
                wall, run = _run(specs[variant], root / f"{variant}-{repeat}")
                walls[variant].append(wall)
                print(f"[{repeat}] {variant:<3} {wall:7.1f} s  {run.name}", flush=True)
                f, n = _count(run)
                flags[variant][0] += f
                flags[variant][1] += n
                print("\n".join(_flags(run)), flush=True)
    print()
    for variant, values in walls.items():
        print(
            f"{variant:<3} wall min/median/max {min(values):.1f} / {statistics.median(values):.1f}"
            f" / {max(values):.1f} s ({len(values)} runs)"
        )
    growth = statistics.median(walls["on"]) / statistics.median(walls["off"]) - 1
    print(f"watching the machine: {growth:+.1%} of the wall time (target <= +10%)")
    for variant, (flagged, points) in flags.items():
        print(
            f"{variant:<3} points flagged 'machine speed changed' with nothing planted: "
            f"{flagged} of {points}"
        )


if __name__ == "__main__":
    main()
