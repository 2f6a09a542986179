"""A percentile of one run's requests against another's (`quantile_change`): a smoothed
circular block bootstrap over the requests in time order gives each side's standard error
(latencies under load are autocorrelated: a queue builds and drains, so neighbouring
requests are not independent draws; kernel noise on each resampled value keeps a resampled
median from sticking to a few order statistics, and the blocks' first-order variance bias
is undone), and Welch's t with the blocks' degrees of freedom makes the interval (stats.py).
Below the fewest samples for which a distribution-free interval of that percentile exists
at all (`min_samples`, counted in *effective* samples: requests divided by their integrated
autocorrelation time) there is no verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tunebench.analysis.stats import SE_DRAWS, Change, not_available, welch
from tunebench.points.samples import MIN_REQUESTS, min_samples

# -- sample sufficiency (the counts: points/samples.py) ---------------------------------------


def autocorrelation_time(values: np.ndarray) -> float:
    """Integrated autocorrelation time of a series (1 for independent samples): Geyer's
    initial positive sequence, which sums pairs of autocorrelations while they are positive.
    On a short window of a slowly varying queue it errs less on the low side than a
    fixed-window estimate."""
    return autocorrelation_moments(values)[0]


def autocorrelation_moments(values: np.ndarray) -> tuple[float, float]:
    """(tau, m1): the integrated autocorrelation time 1 + 2 sum(rho_k) and the first moment
    2 sum(k rho_k), both over Geyer's initial positive sequence. A block bootstrap with
    blocks of length b understates the variance by about m1 / (b tau) (Kuensch 1989)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 8 or np.ptp(x) == 0:
        return 1.0, 0.0
    x = x - x.mean()
    spectrum = np.fft.rfft(x, 2 * n)
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    acf = acf / acf[0]
    tau, moment, pair = 1.0, 0.0, 1
    while 2 * pair < n // 2:
        both = acf[2 * pair - 1] + acf[2 * pair]
        if both <= 0:
            break
        tau += 2 * both
        moment += 2 * ((2 * pair - 1) * acf[2 * pair - 1] + 2 * pair * acf[2 * pair])
        pair += 1
    return float(max(1.0, tau)), float(max(0.0, moment))


MAX_BLOCK_CORRECTION = 2.0  # at most doubles a variance: the moment is noisy on short series


def block_bias_factor(tau: float, moment: float, block: int) -> float:
    """What a block bootstrap's variance is multiplied by to undo its first-order bias
    (the correlation cut at the edges of each block)."""
    cut = moment / (block * tau)
    return min(MAX_BLOCK_CORRECTION, 1.0 / max(1e-9, 1.0 - cut))


def block_length(n: int, tau: float) -> int:
    """Block length for the circular block bootstrap: long enough to keep a queue's burst
    together (four autocorrelation times: shorter blocks cut the correlation at their
    edges and understate the standard error, measurably so at tau ~ 6) and at least
    n^(1/3); at most n/3."""
    return int(max(1, min(max(math.ceil(n ** (1 / 3)), math.ceil(4 * tau)), n // 3 or 1)))


def block_indices(n: int, block: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """`draws` circular block-bootstrap resamples of range(n), shape (draws, n)."""
    count = -(-n // block)
    # int32: half the memory traffic of the default int64 on these (draws x n) arrays
    starts = rng.integers(0, n, size=(draws, count), dtype=np.int32)
    index = (starts[:, :, None] + np.arange(block, dtype=np.int32)) % np.int32(n)
    return index.reshape(draws, count * block)[:, :n]


# -- within one run ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Side:
    log_value: float  # log of the quantile of all the side's requests
    se: float  # block-bootstrap standard error of it
    df: int  # blocks - 1
    effective: float  # requests / autocorrelation time


def smoothing_bandwidth(log_values: np.ndarray) -> float:
    """Silverman's bandwidth of the log values: the width of the noise the smoothed
    bootstrap adds to each resampled value."""
    n = len(log_values)
    spread = float(np.std(log_values, ddof=1))
    q75, q25 = np.quantile(log_values, [0.75, 0.25])
    iqr = float(q75 - q25) / 1.349
    scale = min(spread, iqr) if iqr > 0 else spread
    return 0.9 * scale * n ** (-1 / 5)


class QuantileBootstrap:
    """The smoothed circular block bootstrap of one side's requests, drawn once and read for
    any quantile (compare asks p50 and p95 of the same requests: one draw serves both).

    A smoothed bootstrap: a sample quantile takes only a few distinct values over the
    resamples (its plain bootstrap standard error converges at n^-1/4 and came out low for
    the median: 6-7% A/A false positives at a nominal 5%); kernel noise on each resampled
    value makes the resampled quantile continuous. Each resample is kept sorted, so a
    quantile of all of them is one interpolation."""

    def __init__(self, values: np.ndarray, rng: np.random.Generator, draws: int = SE_DRAWS):
        self.values = np.asarray(values, dtype=float)
        self.sorted_values = np.sort(self.values)
        logs = np.log(np.maximum(self.values, 1e-300))
        self.tau, moment = autocorrelation_moments(logs)
        self.block = block_length(len(self.values), self.tau)
        index = block_indices(len(self.values), self.block, draws, rng)
        # float32 for the (draws x n) resamples: log latencies need no more digits, and the
        # sort and the noise cost half
        noise = rng.standard_normal(index.shape, dtype=np.float32)
        noise *= np.float32(smoothing_bandwidth(logs))
        noise += logs.astype(np.float32)[index]
        noise.sort(axis=1)
        self.resampled = noise
        # blocks cut the correlation at their edges: undo that first-order bias
        self.correction = math.sqrt(block_bias_factor(self.tau, moment, self.block))

    def side(self, q: float) -> _Side:
        return _Side(
            math.log(float(sorted_quantile(self.sorted_values, q))),
            self.correction
            * float(sorted_quantile(self.resampled, q).astype(np.float64).std(ddof=1)),
            max(1, len(self.values) // self.block - 1),
            len(self.values) / self.tau,
        )


def sorted_quantile(ordered: np.ndarray, q: float) -> np.ndarray:
    """numpy's default (linear) quantile of sorted data along the last axis."""
    position = q * (ordered.shape[-1] - 1)
    low = int(math.floor(position))
    high = min(low + 1, ordered.shape[-1] - 1)
    return ordered[..., low] + (position - low) * (ordered[..., high] - ordered[..., low])


def _quantile_side(values: np.ndarray, q: float, rng: np.random.Generator, draws: int) -> _Side:
    return QuantileBootstrap(values, rng, draws).side(q)


def quantile_change(
    a: np.ndarray,
    b: np.ndarray,
    q: float,
    confidence: float = 0.95,
    rng: np.random.Generator | None = None,
    draws: int = SE_DRAWS,
    run_cv: float = 0.0,
) -> Change:
    """The change of the q-quantile from A's requests to B's (each in time order).

    Each side's standard error comes from a circular block bootstrap (blocks of four times the
    autocorrelation time); the interval is Welch's t with the blocks' degrees of freedom,
    so a window of few independent stretches gets a wide interval. `run_cv` adds the
    run-to-run spread a single window cannot show (a relative standard deviation per side).
    """
    rng = rng or np.random.default_rng(0)
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a[np.isfinite(a) & (a > 0)], b[np.isfinite(b) & (b > 0)]
    return quantile_change_between(
        lambda: QuantileBootstrap(a, rng, draws),
        lambda: QuantileBootstrap(b, rng, draws),
        len(a),
        len(b),
        q,
        confidence,
        run_cv,
    )


def min_quantile_requests(q: float, confidence: float = 0.95) -> int:
    """The fewest requests per side for which `quantile_change` draws a bootstrap."""
    return max(min_samples(q, confidence), MIN_REQUESTS)


def positive_finite(values: np.ndarray) -> np.ndarray:
    """The values a quantile change reads: finite and above zero."""
    values = np.asarray(values, dtype=float)
    return values[np.isfinite(values) & (values > 0)]


def quantile_change_between(
    boot_a: Callable[[], QuantileBootstrap],
    boot_b: Callable[[], QuantileBootstrap],
    n_a: int,
    n_b: int,
    q: float,
    confidence: float = 0.95,
    run_cv: float = 0.0,
) -> Change:
    """`quantile_change` over bootstraps drawn once per side (`boot_a()`/`boot_b()` give
    them, drawn only when the counts allow an interval), so several quantiles of the same
    requests share one draw."""
    method = "block bootstrap over requests, Welch t"
    need = max(min_samples(q, confidence), MIN_REQUESTS)
    label = f"p{round(q * 100)}"
    if n_a < need or n_b < need:
        return not_available(method, n_a, n_b, f"too few samples: need {need} per side for {label}")
    a, b = boot_a(), boot_b()
    side_a = a.side(q)
    side_b = b.side(q)
    center = side_b.log_value - side_a.log_value
    # the floor of MIN_REQUESTS is for raw requests; effective samples need what the
    # order-statistic interval itself needs
    need_effective = min_samples(q, confidence)
    if min(side_a.effective, side_b.effective) < need_effective:
        return not_available(
            method,
            n_a,
            n_b,
            f"too few effective samples: need {need_effective} per side for {label}, have "
            f"{side_a.effective:.0f} and {side_b.effective:.0f} (requests / autocorrelation "
            "time)",
            math.expm1(center),
        )
    return welch(
        center,
        side_a.se,
        side_a.df,
        side_b.se,
        side_b.df,
        confidence,
        method,
        n_a,
        n_b,
        run_cv=run_cv,
    )
