"""Compare runs (or the configurations inside one run) point by point, with statistics.

Points are aligned by load point (kind + target), plus the configuration label when the
runs hold the same set of configurations. For every aligned point and metric the change
B/A - 1 gets a bootstrap confidence interval; the verdict is "better" or "worse" only when
the interval excludes zero (and the change exceeds `min_change_pct`).

Resampling is done without materialising resamples, so thousands of comparisons take
milliseconds:
- latency percentiles: the q-quantile of a resample of n sorted samples is the order
  statistic of rank k ~ Binomial(n, q) (the bootstrap distribution of a sample quantile);
- throughput (req/s, tok/s): the request count of a resample is Poisson(n) and the mean
  tokens per request Normal(mean, sd/sqrt(n));
- repeats (several rows for the same point): the mean over resampled repeats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tunebench.errors import TunebenchError, UsageError

SIGNIFICANT_WORSE = "worse"
SIGNIFICANT_BETTER = "better"
NO_CHANGE = "no significant change"
NOT_AVAILABLE = "n/a"


@dataclass(frozen=True)
class CompareMetric:
    name: str
    label: str
    column: str  # in points.csv
    sample: str | None = None  # per-request column, for quantile metrics
    quantile: float | None = None
    higher_is_better: bool = False
    throughput: str | None = None  # "requests" | "tokens" for rate metrics


METRICS: dict[str, CompareMetric] = {
    m.name: m
    for m in (
        CompareMetric("ttft_p50", "TTFT p50 ms", "ttft_p50_ms", "ttft_ms", 0.50),
        CompareMetric("ttft_p95", "TTFT p95 ms", "ttft_p95_ms", "ttft_ms", 0.95),
        CompareMetric("ttft_p99", "TTFT p99 ms", "ttft_p99_ms", "ttft_ms", 0.99),
        CompareMetric("itl_p50", "ITL p50 ms", "itl_p50_ms", "itl_ms", 0.50),
        CompareMetric("itl_p95", "ITL p95 ms", "itl_p95_ms", "itl_ms", 0.95),
        CompareMetric("tpot_p50", "TPOT p50 ms", "tpot_p50_ms", "tpot_ms", 0.50),
        CompareMetric("e2e_p50", "e2e p50 s", "e2e_p50_s", "e2e_s", 0.50),
        CompareMetric("e2e_p95", "e2e p95 s", "e2e_p95_s", "e2e_s", 0.95),
        CompareMetric(
            "output_tok_s",
            "output tok/s",
            "output_tok_s",
            higher_is_better=True,
            throughput="tokens",
        ),
        CompareMetric(
            "achieved_rps",
            "achieved req/s",
            "achieved_rps",
            higher_is_better=True,
            throughput="requests",
        ),
    )
}
DEFAULT_METRICS = (
    "ttft_p50",
    "ttft_p95",
    "itl_p50",
    "itl_p95",
    "e2e_p95",
    "output_tok_s",
    "achieved_rps",
)
LOAD_KEY = ("load_kind", "target")
MIN_SAMPLES = 10  # fewer per side: no verdict (a bootstrap of 5 values says little)


@dataclass
class Side:
    """One thing being compared: a run, or the configurations of a run with one arg value."""

    name: str
    points: pd.DataFrame
    requests: pd.DataFrame
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Comparison:
    rows: pd.DataFrame  # one row per (candidate, aligned point, metric)
    args_differ: dict[str, list[Any]]  # arg -> value per side, only args that differ
    crossovers: list[dict[str, Any]]
    baseline: str
    key: tuple[str, ...]
    sides: list[Side] = field(default_factory=list, repr=False)

    def regressions(self, threshold_pct: float) -> pd.DataFrame:
        rows = self.rows
        return rows[
            (rows["verdict"] == SIGNIFICANT_WORSE) & (rows["change_pct"].abs() > threshold_pct)
        ]

    def to_dict(self) -> dict[str, Any]:
        rows = self.rows.astype(object).where(self.rows.notna(), None)
        return {
            "baseline": self.baseline,
            "key": list(self.key),
            "args_differ": self.args_differ,
            "rows": rows.to_dict(orient="records"),
            "crossovers": self.crossovers,
        }


def resolve_metrics(names: list[str] | None) -> list[CompareMetric]:
    if not names:
        return [METRICS[n] for n in DEFAULT_METRICS]
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise UsageError(f"--metric {unknown[0]!r} is unknown; use one of {', '.join(METRICS)}")
    return [METRICS[n] for n in names]


# -- statistics ---------------------------------------------------------------------------


def _quantile_draws(values: np.ndarray, q: float, rng: np.random.Generator, n_draws: int):
    ordered = np.sort(values)
    ranks = rng.binomial(len(ordered), q, size=n_draws)
    return ordered[np.clip(ranks, 0, len(ordered) - 1)]


def _throughput_draws(
    observed: float, samples: pd.DataFrame, kind: str, rng: np.random.Generator, n_draws: int
) -> np.ndarray:
    n = len(samples)
    counts = rng.poisson(n, size=n_draws) / n
    if kind == "tokens" and "output_tokens" in samples and n > 1:
        tokens = samples["output_tokens"].to_numpy(dtype=float)
        mean, sd = tokens.mean(), tokens.std(ddof=1)
        if mean > 0:
            counts = counts * rng.normal(mean, sd / np.sqrt(n), size=n_draws) / mean
    return observed * counts


def _estimate(
    metric: CompareMetric,
    points: pd.DataFrame,
    samples: pd.DataFrame,
    rng: np.random.Generator,
    n_draws: int,
) -> tuple[float | None, np.ndarray | None, int]:
    """(point value, bootstrap draws or None, number of samples) for one side of a point."""
    values = (
        points[metric.column].dropna().to_numpy(dtype=float)
        if metric.column in points
        else np.array([])
    )
    if len(values) > 1:  # repeats
        picks = rng.integers(0, len(values), size=(n_draws, len(values)))
        return float(values.mean()), values[picks].mean(axis=1), len(values)
    observed = float(values[0]) if len(values) else None
    if metric.sample:
        column = (
            samples[metric.sample].dropna().to_numpy(dtype=float)
            if metric.sample in samples
            else np.array([])
        )
        if len(column) >= MIN_SAMPLES:
            value = float(np.quantile(column, metric.quantile))
            return value, _quantile_draws(column, metric.quantile, rng, n_draws), len(column)
        return observed, None, len(column)
    if observed is not None and len(samples) >= MIN_SAMPLES:
        return (
            observed,
            _throughput_draws(observed, samples, metric.throughput, rng, n_draws),
            len(samples),
        )
    return observed, None, len(samples)


def _verdict(metric, change, low, high, min_change_pct) -> str:
    if change is None or low is None:
        return NOT_AVAILABLE
    if low <= 0 <= high or abs(change) < min_change_pct:
        return NO_CHANGE
    increased = low > 0
    return SIGNIFICANT_BETTER if increased == metric.higher_is_better else SIGNIFICANT_WORSE


# -- alignment ----------------------------------------------------------------------------


def _samples_by_point(side: Side) -> dict[tuple[str, str], pd.DataFrame]:
    if side.requests.empty:
        return {}
    return {
        key: group for key, group in side.requests.groupby(["config_id", "point_id"], sort=False)
    }


def _samples_for(index: dict, rows: pd.DataFrame) -> pd.DataFrame:
    parts = [index[k] for k in zip(rows["config_id"], rows["point_id"]) if k in index]
    if not parts:
        return pd.DataFrame()
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def compare_sides(
    sides: list[Side],
    metrics: list[CompareMetric],
    key: tuple[str, ...] = LOAD_KEY,
    n_draws: int = 2000,
    confidence: float = 0.95,
    min_change_pct: float = 1.0,
    seed: int = 0,
) -> Comparison:
    if len(sides) < 2:
        raise TunebenchError("compare needs at least two runs or two configurations")
    rng = np.random.default_rng(seed)
    alpha = (1 - confidence) / 2 * 100
    baseline = sides[0]
    records = []
    base_groups = {k: g for k, g in baseline.points.groupby(list(key), sort=False)}
    base_samples = _samples_by_point(baseline)
    for candidate in sides[1:]:
        cand_samples = (
            base_samples
            if candidate.requests is baseline.requests
            else _samples_by_point(candidate)
        )
        for point_key, cand_rows in candidate.points.groupby(list(key), sort=False):
            base_rows = base_groups.get(point_key)
            if base_rows is None:
                continue
            a_samples = _samples_for(base_samples, base_rows)
            b_samples = _samples_for(cand_samples, cand_rows)
            for metric in metrics:
                a, a_draws, n_a = _estimate(metric, base_rows, a_samples, rng, n_draws)
                b, b_draws, n_b = _estimate(metric, cand_rows, b_samples, rng, n_draws)
                change = low = high = None
                if a not in (None, 0) and b is not None:
                    change = (b / a - 1) * 100
                    if a_draws is not None and b_draws is not None:
                        with np.errstate(divide="ignore", invalid="ignore"):
                            ratios = (b_draws / a_draws - 1) * 100
                        ratios = ratios[np.isfinite(ratios)]
                        if len(ratios):
                            low, high = np.percentile(ratios, [alpha, 100 - alpha])
                records.append(
                    {
                        "baseline": baseline.name,
                        "candidate": candidate.name,
                        **dict(
                            zip(key, point_key if isinstance(point_key, tuple) else (point_key,))
                        ),
                        "metric": metric.name,
                        "label": metric.label,
                        "a": a,
                        "b": b,
                        "change_pct": change,
                        "ci_low_pct": low,
                        "ci_high_pct": high,
                        "verdict": _verdict(metric, change, low, high, min_change_pct),
                        "n_a": n_a,
                        "n_b": n_b,
                    }
                )
    rows = pd.DataFrame.from_records(records)
    if rows.empty:
        raise TunebenchError(
            "no load point is common to the compared runs (aligned on "
            f"{' + '.join(key)}); compare runs of the same load profiles"
        )
    return Comparison(
        rows, args_differ(sides), crossovers_between(sides, key), baseline.name, key, sides
    )


def args_differ(sides: list[Side]) -> dict[str, list[Any]]:
    names: list[str] = []
    for side in sides:
        names += [k for k in side.args if k not in names]
    return {
        name: [side.args.get(name) for side in sides]
        for name in names
        if len({repr(side.args.get(name)) for side in sides}) > 1
    }


# -- crossover ----------------------------------------------------------------------------

CROSSOVER_COLUMNS = ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "e2e_p95_s")


def crossover_points(xs, a_values, b_values) -> list[float]:
    """Loads x at which curve B crosses curve A, linearly interpolated between points."""
    found = []
    diffs = [b - a for a, b in zip(a_values, b_values)]
    for i in range(len(xs) - 1):
        d1, d2 = diffs[i], diffs[i + 1]
        if d1 == 0 or np.isnan(d1) or np.isnan(d2):
            continue
        if d1 * d2 < 0:
            found.append(float(xs[i] + (xs[i + 1] - xs[i]) * d1 / (d1 - d2)))
    return found


def crossovers_between(sides: list[Side], key: tuple[str, ...]) -> list[dict[str, Any]]:
    """Where the baseline's latency curve and each candidate's cross as the target grows."""
    out = []
    extra = [k for k in key if k not in LOAD_KEY]
    base = sides[0]
    for candidate in sides[1:]:
        merged = base.points.merge(candidate.points, on=list(key), suffixes=("_a", "_b"))
        if merged.empty:
            continue
        group_cols = ["load_kind", *extra]
        for group_key, group in merged.groupby(group_cols, sort=False):
            group = group.dropna(subset=["target"]).sort_values("target")
            if len(group) < 2:
                continue
            for column in CROSSOVER_COLUMNS:
                if f"{column}_a" not in group:
                    continue
                a_vals = group[f"{column}_a"].astype(float).to_numpy()
                b_vals = group[f"{column}_b"].astype(float).to_numpy()
                xs = group["target"].astype(float).to_numpy()
                for x in crossover_points(xs, a_vals, b_vals):
                    first_better = base.name if b_vals[0] > a_vals[0] else candidate.name
                    out.append(
                        {
                            "metric": column,
                            "load_kind": group_key[0]
                            if isinstance(group_key, tuple)
                            else group_key,
                            "baseline": base.name,
                            "candidate": candidate.name,
                            "target": round(x, 3),
                            "better_below": first_better,
                            "better_above": candidate.name
                            if first_better == base.name
                            else base.name,
                        }
                    )
    return out
