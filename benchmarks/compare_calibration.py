"""How often `tunebench compare` and its regression gate are wrong, on data with a known truth.

Synthetic part (tunebench.testing.latencies): for n = 15, 50 and 200 requests per point,
independent and queue-autocorrelated latencies, over SEEDS seeds, and three methods:
  - within-run: one run per side, the request-level interval alone (run_cv 0), on data
    without any run-to-run spread: the block bootstrap and batch means on their own;
  - one run + spread: what compare does for runs without repeats (run_cv DEFAULT_RUN_CV),
    on data whose every run carries a run-to-run factor of that size;
  - 3 repeats: Welch's t over three repeats per side, same data model;
and for each:
  - A/A (two independent draws of one distribution): each metric's rate of false
    "significant" verdicts (nominal 5%), and how often the 5% gate fails (target <= 5%);
  - A/B with B slowed down by 10% and 30%: how often the gate catches it (power);
  - a candidate failing 50% of its requests: the gate must fail.
Sensitivity (not circular): the shipped method assumes a 6% run-to-run spread; the data
here carries 5%, 10% and 20% instead, one run per side, n = 200: the A/A gate failures and
the power at 15% and 30% slowdowns at each real spread.
Paired rounds (`--paired-seeds`, `--paired-rounds`, `--paired-drift`): configurations of one
run measured in the same rounds (repeats 4 by default, the fewest compare pairs), each
round's points multiplied by a machine factor both sides share (lognormal, 15% sd by
default: a machine that drifts between rounds; 0: one that holds still) besides each point's
own 3% run-to-run noise; the gate (`regression_gate`, 5%) on the paired t, and on Welch's t
over the same repeats read as two runs (nothing says which were measured together): A/A gate
failures, power at planted slowdowns of 5-30%, and the smallest slowdown each catches in at
least 80% of seeds.
Real part (recorded on the CPU server, tests/fixtures/compare-real): two independent runs of
one configuration (A/A: the gate must not fail) and max-num-seqs 2 vs 8 (A/B: the regression
at 8 streams must be caught). Held-out real pairs (tests/fixtures/grid-cpu-repeats: 9
configurations x 3 server starts = 27 pairs of starts of one configuration, none of which set
the assumed spread): the A/A gate failures, and the power on the same pairs with a known
slowdown planted on side B (every latency x 1.15 or x 1.30, every rate / the same factor).

    python benchmarks/compare_calibration.py [--seeds 200] [--real tests/fixtures/compare-real]
        [--held-out tests/fixtures/grid-cpu-repeats] [--paired-seeds 200]

Exits non-zero when a target is missed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunebench.analysis import quantile_bootstrap, stats  # noqa: E402
from tunebench.analysis.compare import DEFAULT_RUN_CV, Side, compare_sides  # noqa: E402
from tunebench.analysis.compare_metrics import DEFAULT_METRICS  # noqa: E402
from tunebench.analysis.compare_metrics import METRICS as COMPARE_METRICS  # noqa: E402
from tunebench.analysis.frames import load_requests, load_run  # noqa: E402
from tunebench.analysis.gate import regression_gate  # noqa: E402
from tunebench.testing.latencies import request_stream  # noqa: E402

QUANTILES = {
    "ttft_p50": ("ttft_ms", 0.5),
    "ttft_p95": ("ttft_ms", 0.95),
    "itl_p50": ("itl_ms", 0.5),
    "itl_p95": ("itl_ms", 0.95),
    "e2e_p95": ("e2e_s", 0.95),
}


RATES = ("output_tok_s", "achieved_rps")
METRICS = (*QUANTILES, *RATES, "error_rate")
POINTS = 3  # a gate looks at several load points at once: rows = POINTS x metrics
THRESHOLD = 0.05
REPEATS = 3


@dataclass(frozen=True)
class Method:
    name: str
    run_cv: float  # what the interval assumes for the run-to-run spread (one run per side)
    run_sd: float  # what the synthetic data carries
    repeats: int


METHODS = (
    Method("within-run", 0.0, 0.0, 1),
    Method("one run + spread", DEFAULT_RUN_CV, DEFAULT_RUN_CV, 1),
    Method(f"{REPEATS} repeats", 0.0, DEFAULT_RUN_CV, REPEATS),
)
SHIPPED = METHODS[1]  # what compare does for two runs without repeats


def rate_of(stream, name: str) -> tuple[np.ndarray, float]:
    amount = stream.output_tokens if name == "output_tok_s" else np.ones(stream.n)
    bins = stats.rate_bins(stream.end_s, amount, 0, stream.window_s, stats.bins_for(stream.n))
    return bins, stream.tokens_per_s() if name == "output_tok_s" else stream.rate()


def one_run_rows(a, b, rng, run_cv: float) -> dict[str, stats.Change]:
    out: dict[str, stats.Change] = {}
    for name, (field, q) in QUANTILES.items():
        out[name] = quantile_bootstrap.quantile_change(
            getattr(a, field), getattr(b, field), q, rng=rng, run_cv=run_cv
        )
    for name in RATES:
        (bins_a, value_a), (bins_b, value_b) = rate_of(a, name), rate_of(b, name)
        out[name] = stats.rate_change(bins_a, bins_b, value_a, value_b, run_cv=run_cv)
    out["error_rate"] = stats.proportion_change(a.failed, a.n + a.failed, b.failed, b.n + b.failed)
    return out


def values(streams: list, name: str) -> np.ndarray:
    """One value of the metric per repeat."""
    if name in QUANTILES:
        field, q = QUANTILES[name]
        return np.array([np.quantile(getattr(s, field), q) for s in streams])
    return np.array([rate_of(s, name)[1] for s in streams])


def repeat_rows(a: list, b: list, rng) -> dict[str, stats.Change]:
    out = {name: stats.repeats_change(values(a, name), values(b, name)) for name in METRICS[:-1]}
    failed_a, failed_b = sum(s.failed for s in a), sum(s.failed for s in b)
    total_a = sum(s.n + s.failed for s in a)
    total_b = sum(s.n + s.failed for s in b)
    out["error_rate"] = stats.proportion_change(failed_a, total_a, failed_b, total_b)
    return out


HIGHER_IS_WORSE = {m: m not in RATES for m in METRICS}


def all_points_rows(
    points: list[dict[str, stats.Change]], sides: list[tuple[list, list]], run_cv: float
) -> list[dict[str, stats.Change]]:
    """The rows over all points that compare adds (analysis/compare.py `_pooled`): none
    when the intervals assume a run-to-run spread; with repeats, Welch's t over each
    repeat's geometric mean across the points; otherwise the mean of the points' changes."""
    if run_cv > 0:
        return []
    out: dict[str, stats.Change] = {}
    for name in METRICS:
        usable = [p[name] for p in points if p[name].available]
        if len(usable) < 2:
            continue
        if name != "error_rate" and usable[0].method == stats.REPEATS_METHOD:
            keep = [i for i, p in enumerate(points) if p[name].available]

            def mean_over_points(side: int) -> np.ndarray:
                logs = [np.log(values(sides[i][side], name)) for i in keep]
                return np.exp(np.mean(logs, axis=0))

            out[name] = stats.repeats_change(mean_over_points(0), mean_over_points(1))
        else:
            out[name] = stats.pooled_change(usable)
    return [out]


ERROR_RATE_THRESHOLD = 0.01  # the gate's own default for the error rate (1 pp)


def gate_fails(all_rows: list[dict[str, stats.Change]]) -> bool:
    p = [
        row.p_worse(
            ERROR_RATE_THRESHOLD if name == "error_rate" else THRESHOLD, HIGHER_IS_WORSE[name]
        )
        for point in all_rows
        for name, row in point.items()
        if row.available
    ]
    return any(stats.holm(p, 0.05))


def significant(change: stats.Change) -> bool:
    return change.available and (change.low > 0 or change.high < 0)


def one_seed(task: tuple) -> tuple[dict[str, bool], dict[str, bool], bool]:
    """One A/B compare of POINTS points: per metric (first point) significant and n/a, and
    whether the gate failed."""
    method, n, kind, slowdown, error_a, error_b, seed = task
    rng = np.random.default_rng(10_000 + seed)
    points, sides = [], []
    for point in range(POINTS):
        base = 1_000_000 * seed + 1_000 * point

        def streams(side: int, slow: float, errors: float) -> list:
            return [
                request_stream(
                    n,
                    kind,
                    slow,
                    error_rate=errors,
                    seed=base + 10 * side + r,
                    run_sd=method.run_sd,
                )
                for r in range(method.repeats)
            ]

        a = streams(1, 0.0, error_a)
        b = streams(2, slowdown, error_b or error_a)
        sides.append((a, b))
        if method.repeats > 1:
            points.append(repeat_rows(a, b, rng))
        else:
            points.append(one_run_rows(a[0], b[0], rng, method.run_cv))
    first = points[0]
    return (
        {m: significant(first[m]) for m in METRICS},
        {m: not first[m].available for m in METRICS},
        gate_fails(points + all_points_rows(points, sides, method.run_cv)),
    )


def scenario(
    method: Method,
    n: int,
    kind: str,
    slowdown: float,
    seeds: int,
    error_b: float = 0.0,
    error_a: float = 0.02,
) -> tuple[dict[str, float], float, dict[str, int]]:
    """Per-metric "significant" rate, gate failure rate, and per-metric n/a counts."""
    tasks = [(method, n, kind, slowdown, error_a, error_b, seed) for seed in range(seeds)]
    with Pool(2) as pool:  # the machine's two cores
        results = pool.map(one_seed, tasks, chunksize=8)
    hits = {m: sum(r[0][m] for r in results) / seeds for m in METRICS}
    missing = {m: sum(r[1][m] for r in results) for m in METRICS}
    return hits, sum(r[2] for r in results) / seeds, missing


def synthetic(seeds: int) -> bool:
    ok = True
    print(
        f"A/A: false 'significant' per metric (nominal 5%) and gate failures (5% gate), "
        f"{seeds} seeds, {POINTS} points x {len(METRICS)} metrics per gate (and a row over all "
        "points per metric where compare adds one); "
        f"run-to-run spread of the data and of 'one run + spread': {DEFAULT_RUN_CV:.0%}"
    )
    print(
        f"{'method':<17} {'latencies':<9} {'n':>4}  "
        + " ".join(f"{m:>12}" for m in METRICS)
        + f"  {'gate fails':>10}"
    )
    for method in METHODS:
        for kind in ("iid", "queue"):
            for n in (15, 50, 200):
                rates, gate, missing = scenario(method, n, kind, 0.0, seeds)
                cells = []
                for metric in METRICS:
                    if missing[metric] == seeds:
                        cells.append(f"{'n/a':>12}")
                    else:
                        cells.append(f"{rates[metric] * 100:11.1f}%")
                        ok &= rates[metric] <= 0.06
                ok &= gate <= 0.05
                print(
                    f"{method.name:<17} {kind:<9} {n:>4}  "
                    + " ".join(cells)
                    + f"  {gate * 100:9.1f}%"
                )
    print("\nA/B: the 5% gate's power (B slower by 10% / 30%); n/a: no verdict at that n")
    print(f"{'method':<17} {'latencies':<9} {'n':>4}  {'10% slower':>10}  {'30% slower':>10}")
    for method in METHODS:
        for kind in ("iid", "queue"):
            for n in (15, 50, 200):
                power = [scenario(method, n, kind, s, seeds)[1] for s in (0.10, 0.30)]
                if n == 200 and method is METHODS[0]:
                    # the request-level interval's own power; with a run-to-run spread on
                    # top, single runs cannot be sure of 30% (the figures show how often)
                    ok &= power[1] == 1.0
                print(
                    f"{method.name:<17} {kind:<9} {n:>4}  {power[0] * 100:9.1f}%  "
                    f"{power[1] * 100:9.1f}%"
                )
    ok &= sensitivity(seeds)
    for method in METHODS:
        _, errors_caught, _ = scenario(method, 50, "iid", 0.0, seeds, error_b=0.5, error_a=0.0)
        ok &= errors_caught == 1.0
        print(
            f"A candidate failing 50% of its requests ({method.name}, n 50): the gate fails in "
            f"{errors_caught * 100:.1f}% of {seeds} compares"
        )
    return ok


SPREADS = (0.05, 0.10, 0.20)


def sensitivity(seeds: int) -> bool:
    """The shipped method (one run per side, 6% assumed) on data whose real run-to-run
    spread is another: how the A/A failures and the power move. Target: at the 5% real
    spread (what was measured) the gate fails A/A at most 5%; the other rows are reported
    so a user with a noisier machine knows what to expect."""
    print(
        f"\nSensitivity: one run per side assuming {DEFAULT_RUN_CV:.0%}, data with another real "
        "run-to-run spread (n 200, 5% gate)"
    )
    print(
        f"{'real spread':>11} {'latencies':<9}  {'A/A fails':>9}  {'15% slower':>10}  "
        f"{'30% slower':>10}"
    )
    ok = True
    for spread in SPREADS:
        method = Method(f"spread {spread:.0%}", DEFAULT_RUN_CV, spread, 1)
        for kind in ("iid", "queue"):
            cells = [scenario(method, 200, kind, s, seeds)[1] for s in (0.0, 0.15, 0.30)]
            if spread <= DEFAULT_RUN_CV:
                ok &= cells[0] <= 0.05
            print(
                f"{spread:>10.0%} {kind:<9}  {cells[0] * 100:8.1f}%  {cells[1] * 100:9.1f}%  "
                f"{cells[2] * 100:9.1f}%"
            )
    return ok


# -- real data -------------------------------------------------------------------------------


def held_out(path: Path) -> bool:
    """Pairs of server starts of one configuration that the assumed spread was not measured
    on: A/A gate failures (target: at most 5% of the pairs), and the power with a known
    slowdown planted on side B."""
    points = load_run(path)
    requests = load_requests(path)
    metrics = [COMPARE_METRICS[m] for m in DEFAULT_METRICS]
    repeats = sorted(int(r) for r in pd.to_numeric(points["repeat"]).unique())

    def side(label: str, repeat: int, slower: float = 1.0) -> Side:
        rows = points[
            (points["config_label"] == label) & (pd.to_numeric(points["repeat"]) == repeat)
        ]
        rows = rows.reset_index(drop=True).copy()
        mine = requests[requests["config_id"].isin(set(rows["config_id"]))].copy()
        mine = mine[pd.to_numeric(mine["repeat"]) == repeat]
        if slower != 1.0:
            for column in [
                c for c in rows.columns if c.endswith(("_ms", "_s")) and c != "duration_s"
            ]:
                rows[column] = pd.to_numeric(rows[column], errors="coerce") * slower
            for column in ("output_tok_s", "achieved_rps", "total_tok_s"):
                if column in rows:
                    rows[column] = pd.to_numeric(rows[column], errors="coerce") / slower
            for column in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_s"):
                mine[column] = pd.to_numeric(mine[column], errors="coerce") * slower
            # completions spread over a window longer by the same factor
            start = pd.to_numeric(rows["start_time"], errors="coerce").min()
            mine["end_time"] = start + (pd.to_numeric(mine["end_time"]) - start) * slower
            rows["end_time"] = start + (pd.to_numeric(rows["end_time"]) - start) * slower
        return Side(f"{label} r{repeat}", rows, mine)

    labels = list(dict.fromkeys(points["config_label"]))
    pairs = [(lab, a, b) for lab in labels for a, b in itertools.combinations(repeats, 2)]
    print(
        f"\nHeld-out real pairs ({path.name}: {len(labels)} configurations x starts {repeats}: "
        f"{len(pairs)} pairs of starts of one configuration), 5% gate over default metrics"
    )
    counts = {}
    for slower in (1.0, 1.15, 1.30):
        failed = 0
        for label, first, second in pairs:
            result = compare_sides([side(label, first), side(label, second, slower)], metrics)
            failed += regression_gate(result, 5.0)["verdict"] == "regression"
        counts[slower] = failed
    print(f"  A/A: the gate failed {counts[1.0]} of {len(pairs)} pairs")
    print(
        f"  planted 15% slowdown: caught in {counts[1.15]} of {len(pairs)}; 30%: caught in "
        f"{counts[1.30]} of {len(pairs)}"
    )
    return counts[1.0] <= 0.05 * len(pairs)


def real(path: Path) -> bool:
    """Two independent runs of one configuration must pass; mns2 against mns8 must fail."""
    points = load_run(path)
    requests = load_requests(path)
    ok = True

    def side(variant: str, repeat: int | None = None) -> Side:
        rows = points[points["variant"] == variant]
        if repeat is not None:
            rows = rows[pd.to_numeric(rows["repeat"]) == repeat]
        name = variant if repeat is None else f"{variant} r{repeat}"
        return Side(name, rows.reset_index(drop=True), requests)

    metrics = [COMPARE_METRICS[m] for m in DEFAULT_METRICS]
    repeats = sorted(int(r) for r in pd.to_numeric(points["repeat"]).unique())
    spread = run_to_run(points[points["variant"] == "mns2"])
    print(
        f"\nReal data ({path.name}: {len(points)} points, repeats {repeats}, "
        f"host {load_manifest_host(path)})"
    )
    print(
        "run-to-run spread, from mns2's repeats (sd of log over repeats, per metric, RMS over "
        "the points): " + ", ".join(f"{m} {v:.1%}" for m, v in spread.items())
    )
    overall = float(np.sqrt(np.mean([v**2 for v in spread.values()])))
    print(f"  RMS over metrics {overall:.1%}; compare assumes {DEFAULT_RUN_CV:.0%} per side")
    ok &= overall <= DEFAULT_RUN_CV
    print("A/A (held out: mns8's repeats, each a new server start), 5% gate over default metrics:")
    for first, second in itertools.combinations(repeats, 2):
        result = compare_sides([side("mns8", first), side("mns8", second)], metrics)
        gate = regression_gate(result, 5.0)
        rows = result.rows
        flagged = rows[rows["verdict"].isin(["worse", "better"])]
        print(
            f"  mns8 r{first} vs r{second}: gate {gate['verdict']} "
            f"({gate['rows_gated']} rows gated), {len(flagged)} rows 'significant'"
            + (
                f": {', '.join(flagged['label'] + ' @ ' + flagged['point'])}"
                if len(flagged)
                else ""
            )
        )
        ok &= gate["verdict"] == "no-regression"
    print("A/B: mns2 against mns8 (baseline), 5% gate:")
    pairs = [(side("mns8", r), side("mns2", r)) for r in repeats] + [(side("mns8"), side("mns2"))]
    for a, b in pairs:
        result = compare_sides([a, b], metrics)
        gate = regression_gate(result, 5.0)
        at8 = result.rows[result.rows["point"] == "concurrent 8"]
        worse = at8[at8["verdict"] == "worse"]
        caught = gate["verdict"] == "regression" and not worse.empty
        print(
            f"  {a.name} vs {b.name}: gate {gate['verdict']}, at 8 streams worse: "
            + (", ".join(f"{r.label} {r.change_pct:+.0f}%" for r in worse.itertuples()) or "none")
        )
        ok &= caught
    return ok


def run_to_run(points: pd.DataFrame) -> dict[str, float]:
    """sd of the log of each metric over the repeats of every point, RMS over the points."""
    out = {}
    for name in ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_s", "output_tok_s", "achieved_rps"):
        sds = []
        for _, group in points.groupby("point_id"):
            values = pd.to_numeric(group[name], errors="coerce").to_numpy(float)
            values = values[np.isfinite(values) & (values > 0)]
            if len(values) >= 2:
                sds.append(np.log(values).std(ddof=1))
        if sds:
            out[name] = float(np.sqrt(np.mean(np.square(sds))))
    return out


def load_manifest_host(path: Path) -> str:
    host = json.loads((path / "manifest.json").read_text()).get("host") or {}
    flags = host.get("cpu_flags") or []
    vector = "AVX-512" if any(str(f).startswith("avx512") for f in flags) else "AVX2"
    return f"{host.get('cpu_model', '?')}, {vector}, {host.get('cpus', '?')} CPUs"


PAIRED_ROUNDS = 4  # stats.PAIRED_MIN_ROUNDS: with 3, compare uses Welch over the repeats
PAIRED_DRIFT_SD = 0.15  # the machine's factor per round, shared by both sides
PAIRED_RUN_SD = 0.03  # each point's own run-to-run noise
PAIRED_EFFECTS = (0.0, 0.05, 0.10, 0.15, 0.20, 0.30)
PAIRED_POWER = 0.8


def drifted_pair(
    seed: int,
    effect: float,
    paired: bool,
    rounds: int = PAIRED_ROUNDS,
    drift_sd: float = PAIRED_DRIFT_SD,
) -> list[Side]:
    """Two configurations measured in the same PAIRED_ROUNDS rounds of a drifting machine; B
    slower by `effect` (every latency x (1 + effect), every rate / it)."""
    from tunebench.testing.latencies import stream_side

    rng = np.random.default_rng(50_000 + seed)
    drift = np.exp(rng.normal(0, drift_sd, rounds))
    sides = []
    for name, factor, offset in (("a", 1.0, 0), ("b", 1 + effect, 1)):
        found = stream_side(name, 7 * seed + offset, 0.0, repeats=rounds, run_sd=PAIRED_RUN_SD)
        points = found.points.copy()
        slow = points["repeat"].map(lambda r: drift[int(r) - 1]) * factor
        for column in points.columns:
            if column.endswith("_ms"):
                points[column] = pd.to_numeric(points[column], errors="coerce") * slow
            elif column.endswith(("_rps", "_tok_s")):
                points[column] = pd.to_numeric(points[column], errors="coerce") / slow
        points["run_id"] = "one-run" if paired else f"run-{name}"
        sides.append(Side(found.name, points, found.requests))
    return sides


def paired_gate_fails(task: tuple[int, float, bool, int, float]) -> bool:
    seed, effect, paired, rounds, drift_sd = task
    metrics = [COMPARE_METRICS[m] for m in ("itl_p50", "tpot_p50", "output_tok_s")]
    result = compare_sides(drifted_pair(seed, effect, paired, rounds, drift_sd), metrics)
    return not regression_gate(result, THRESHOLD * 100)["passed"]


def paired_rounds(
    seeds: int, rounds: int = PAIRED_ROUNDS, drift_sd: float = PAIRED_DRIFT_SD
) -> bool:
    print(
        f"\nPaired rounds: {rounds} rounds, machine drift {drift_sd:.0%} sd per "
        f"round shared by both sides, {PAIRED_RUN_SD:.0%} run noise; 5% gate, {seeds} seeds"
    )
    effects = "".join(f"{e:>8.0%}" for e in PAIRED_EFFECTS)
    print(f"method            {effects}  smallest caught")
    ok = True
    power: dict[bool, list[float]] = {}
    for label, paired in (("paired t", True), ("Welch (two runs)", False)):
        rates = power[paired] = []
        for effect in PAIRED_EFFECTS:
            tasks = [(seed, effect, paired, rounds, drift_sd) for seed in range(seeds)]
            with Pool(2) as pool:
                rates.append(sum(pool.map(paired_gate_fails, tasks, chunksize=8)) / seeds)
        smallest = next(
            (e for e, r in zip(PAIRED_EFFECTS[1:], rates[1:]) if r >= PAIRED_POWER), None
        )
        caught = f">= {PAIRED_POWER:.0%} at {smallest:.0%}" if smallest else "none tested"
        print(f"{label:<18}" + "".join(f"{r:>8.1%}" for r in rates) + f"  {caught}")
    at_15 = PAIRED_EFFECTS.index(0.15)
    ok = power[True][0] <= 0.05 and power[True][at_15] > power[False][at_15]
    print(
        "target: paired A/A gate failures <= 5%, and a 15% slowdown caught more often than "
        "by Welch's t over the same repeats"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--real", type=Path, default=REPO / "tests/fixtures/compare-real")
    parser.add_argument("--held-out", type=Path, default=REPO / "tests/fixtures/grid-cpu-repeats")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--paired-seeds", type=int, default=200)
    parser.add_argument("--paired-rounds", type=int, default=PAIRED_ROUNDS)
    parser.add_argument("--paired-drift", type=float, default=PAIRED_DRIFT_SD)
    parser.add_argument("--paired-only", action="store_true", help="skip the real parts")
    args = parser.parse_args()
    started = time.monotonic()
    ok = True
    if not args.skip_synthetic:
        ok &= synthetic(args.seeds)
    if args.paired_seeds:
        ok &= paired_rounds(args.paired_seeds, args.paired_rounds, args.paired_drift)
    if args.paired_only:
        return 0 if ok else 1
    ok &= real(args.real)
    ok &= held_out(args.held_out)
    print(f"\n({time.monotonic() - started:.0f} s)  {'all targets met' if ok else 'TARGET MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
