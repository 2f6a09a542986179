"""Why the capacity search over-estimates on the second simulator (benchmarks/
capacity_second_sim.py --diagnose): the recording's own bias, one probe's bias at each
start's own capacity, the p90 a window reads by its length, and today's search traced
probe by probe against the truth and the deployed start's own capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import benchmarks.capacity_accuracy as accuracy
import tunebench.tune.recorded as tune_recorded
from benchmarks.grid.search_variants import OVERLOAD, swapped
from benchmarks.grid.second_sim import (
    QUANTILE,
    SLO_MS,
    Recording,
    grid_engines,
    long_p90,
    record_window,
    window_rates,
)
from benchmarks.grid.second_sim_grading import Bench
from tunebench.points.capacity import CapacitySearch, probe_seconds
from tunebench.points.sustained import RatePoint, sustained_capacity
from tunebench.tune.recorded import SearchRules


def trace(bench: Bench, seeds: int, own: dict[tuple[str, int], float], show: bool) -> None:
    """Today's search, probe by probe: where its answer comes from, against the truth and
    against the deployed start's own capacity (`own`)."""
    bench.use()
    rows: list[dict[str, Any]] = []
    probe = tune_recorded.noisy_probe

    def spy(*args: Any, **kwargs: Any) -> dict[str, Any]:
        rows.append(probe(*args, **kwargs))
        return rows[-1]

    rng = np.random.default_rng(accuracy.GRADE_SEED)  # as accuracy.grade draws
    found: dict[str, list[float]] = {k: [] for k in TRACE_KEYS}
    with swapped(tune_recorded, "noisy_probe", spy):
        for seed in range(seeds):
            for config in bench.configs:
                start = config.deploy(bench.played, rng)
                rows.clear()
                search = tune_recorded.search_noisy(
                    start, bench.grid.slo, 1.0, False, bench.rules(), accuracy.COSTS, rng
                ).search
                truth = bench.truths[config.label].rate
                mine = own.get((config.label, start.repeat), float("nan"))
                _collect(found, search, rows, truth, mine)
                if show and seed == 0:
                    probes = " ".join(
                        f"{r['target'] / truth:.2f}x:{r['requests_ok']}:{r['ttft_p90_ms']:.0f}"
                        + ("" if r["slo_met"] else "X")
                        for r in rows
                    )
                    answer = (search.capacity or 0.0) / truth - 1
                    print(
                        f"    {config.label:<15} answer {answer:+5.0%} (own "
                        f"{mine / truth - 1:+4.0%}) converged {search.converged!s:<5} | {probes}"
                    )
    a = {k: np.asarray(v, dtype=float) for k, v in found.items()}
    chord, converged = a["chord"] > 0, a["converged"] > 0
    versus_own = a["answer"] / a["own"]
    print(
        f"    answer / truth: median {np.nanmedian(a['answer']):.3f} = own capacity / truth "
        f"{np.nanmedian(a['own']):.3f} x answer / own {np.nanmedian(versus_own):.3f} (within "
        f"10% of own: {np.nanmean(np.abs(versus_own - 1) <= 0.1):.0%})"
    )
    print(
        f"    answers from the chord between the bracket's ends: {chord.mean():.0%} "
        f"(answer / truth {np.nanmedian(a['answer'][chord]):.3f}); converged "
        f"{converged.mean():.0%} (answer / truth {np.nanmedian(a['answer'][converged]):.3f}), "
        f"unconverged {np.nanmedian(a['answer'][~converged]):.3f}"
    )
    print(
        f"    final bracket: lower end / own {np.nanmedian(a['lower']):.2f} (its ratio "
        f"{np.nanmedian(a['lower_ratio']):.2f}; above own in {np.nanmean(a['lower'] > 1):.0%}), "
        f"upper end / own {np.nanmedian(a['upper']):.2f} (its ratio "
        f"{np.nanmedian(a['upper_ratio']):.2f}; > {OVERLOAD:g} in "
        f"{np.nanmean(a['upper_ratio'] > OVERLOAD):.0%}), width x"
        f"{np.nanmedian(a['upper'] / a['lower']):.2f}"
    )
    near = (a["probe_rate"] >= 1.0) & (a["probe_rate"] <= 1.25)
    print(
        f"    probes: median {np.median(a['probes']):.0f} per search, "
        f"{np.median(a['bracketing']):.0f} of them before the first miss; "
        f"{np.median(a['requests']):.0f} requests per probe (median); probes at 1.00-1.25x "
        f"own capacity passed {np.mean(a['probe_met'][near]):.0%} ({near.sum()} probes)"
    )


TRACE_KEYS = (
    "answer own chord converged lower upper lower_ratio upper_ratio probes bracketing "
    "requests probe_rate probe_met"
).split()


def _collect(
    found: dict[str, list[float]],
    search: CapacitySearch,
    rows: list[dict[str, Any]],
    truth: float,
    mine: float,
) -> None:
    lower, upper = search.lower, search.upper
    answer = search.capacity
    found["answer"].append((answer or 0.0) / truth)
    found["own"].append(mine / truth)
    found["chord"].append(float(answer is not None and lower is not None and answer != lower.rate))
    found["converged"].append(float(search.converged))
    found["lower"].append(lower.rate / mine if lower else np.nan)
    found["upper"].append(upper.rate / mine if upper else np.nan)
    found["lower_ratio"].append(lower.ratio if lower and lower.ratio else np.nan)
    found["upper_ratio"].append(upper.ratio if upper and upper.ratio else np.nan)
    found["probes"].append(len(search.probes))
    misses = [i for i, p in enumerate(search.probes) if not p.slo_met]
    found["bracketing"].append(misses[0] if misses else len(search.probes))
    for row in rows:
        found["requests"].append(row["requests_ok"])
        found["probe_rate"].append(row["target"] / mine)
        found["probe_met"].append(float(bool(row["slo_met"])))


def probe_bias(bench: Bench, own: dict[tuple[str, int], float], repeats: int = 40) -> str:
    """One probe's log SLO ratio at each start's own capacity, window sized as when
    narrowing: the noise model assumes it centred on 0 with sd `noise` (0.2)."""
    values = _log_ratios(bench, own, lambda rate: probe_seconds(rate, 10.0, QUANTILE), repeats)
    return (
        f"one probe at the start's own capacity: median ratio {np.exp(np.median(values)):.2f}, "
        f"passes {np.mean(values <= 0):.0%}, sd of log ratio {values.std():.2f} (the noise model: "
        f"centred on 1, sd {SearchRules().noise:g})"
    )


def _log_ratios(
    bench: Bench,
    own: dict[tuple[str, int], float],
    seconds_at: Callable[[float], float],
    repeats: int,
) -> np.ndarray:
    """Log SLO ratios of `repeats` probes at each played start's own capacity, each window
    `seconds_at(rate)` long (the same draws for every caller: seed 3)."""
    rng = np.random.default_rng(3)
    logs = []
    for config in bench.configs:
        for r in bench.played:
            rate = own.get((config.label, r))
            if rate is None or r not in config.starts:
                continue
            for _ in range(repeats):
                row = tune_recorded.noisy_probe(
                    config.starts[r], rate, seconds_at(rate), bench.grid.slo, rng
                )
                if row.get("slo_ratio"):
                    logs.append(np.log(row["slo_ratio"]))
    return np.asarray(logs)


def window_reading(truth: dict[str, dict[str, Any]], rec: Recording, count: int) -> None:
    """The recording's own bias, in two parts: the five rates read from long runs (the
    interpolation rule's error alone), and from the recorded windows' length (~60
    requests after a warm-up from an empty server) at the truth itself."""
    ideal, short = [], []
    rng = np.random.default_rng(5)
    for label, _, engine in grid_engines():
        knee = truth[label]["rate"]
        points = []
        for rate in window_rates(knee, rec):
            p90 = long_p90(engine, rate, count // 4, 0)
            points.append(RatePoint(rate, p90 <= SLO_MS, p90 / SLO_MS))
        found = sustained_capacity(points)
        if found is not None and found.kind == "exact":
            ideal.append(found.rate / knee)
        for _ in range(20):
            _, requests = record_window(engine, knee, rec, int(rng.integers(2**32)))
            short.append(np.percentile([r["ttft_ms"] for r in requests], 90) / SLO_MS)
    within = np.mean(np.abs(np.asarray(ideal) - 1) <= 0.1)
    print(
        f"    the 5 recorded rates read from long runs ({count // 4} requests): crossing / truth "
        f"median {np.median(ideal):.3f}, within 10%: {within:.0%} (the 1/ratio rule between "
        f"rates {(rec.high / rec.low) ** (1 / (rec.rates - 1)):.2f}x apart is not the problem)"
    )
    print(
        f"    a recorded window ({rec.window_requests} requests after {rec.warmup_requests}) "
        f"at the truth itself: median p90 / limit {np.median(short):.2f}, passes "
        f"{np.mean(np.asarray(short) <= 1):.0%} (a long run: 1.00, 50%)"
    )


def window_length(bench: Bench, own: dict[tuple[str, int], float]) -> None:
    """Live probes at each start's own capacity, by window length: near the knee latency
    comes in busy periods (the queue's excursions) that a short window mostly misses and
    now and then catches whole, so its p90 is low more often than not, and scattered."""
    for count in (60, 144, 600, 2000):
        v = _log_ratios(bench, own, lambda rate, count=count: count / rate, 10)
        print(
            f"    {count:>5} requests at the start's own capacity: median ratio "
            f"{np.exp(np.median(v)):.2f}, passes {np.mean(v <= 0):.0%}, sd of log ratio "
            f"{v.std():.2f}"
        )
