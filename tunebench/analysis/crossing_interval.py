"""How sure a crossover is: the interval of the load at which two latency curves cross.

A crossover (crossovers.py) is read off the points' percentiles: linear interpolation of
B - A between the two targets where its sign changes. Each percentile is one window's
estimate, so the crossing moves with the windows' noise, and with few requests a crossing
may be noise alone. Here each point's percentile is redrawn from the smoothed circular block
bootstrap of its requests in time order (quantile_bootstrap.py: the same draws compare's
intervals use, with the blocks' variance correction), plus a run-to-run spread where a point
was measured once; in each draw the crossing nearest the observed one is read off the same
way. A draw in which the curves do not cross puts the crossing beyond the measured range,
below the lowest target when B - A has there the sign it has above the observed crossing,
else above the highest. The interval is the draws' central `confidence` share: an end
outside the measured range means the data cannot place the crossing inside it. A crossing
is *confirmed* when both ends lie inside and the order of the curves is significant on both
sides of it (two curves that are the same cross somewhere in most draws); otherwise it may
be noise, however clear the point estimate looks.

Calibrated in tests/unit/test_crossing_interval.py on curves whose crossing follows from an
analytic law, with requests from a generator this module does not assume.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tunebench.analysis.quantile_bootstrap import QuantileBootstrap, sorted_quantile


@dataclass(frozen=True)
class CrossingInterval:
    """The central `confidence` share of the crossing's draws; -inf / inf: beyond the lowest /
    highest target measured."""

    low: float
    high: float
    confidence: float
    # the order of the curves is significant on both sides: at some target below the
    # crossing B - A has its lower-side sign, and at some target above it its upper-side
    # sign, each in the central share of the draws or more (two curves that are the same
    # cross somewhere in most draws, but neither is better on either side)
    reversed: bool

    @property
    def confirmed(self) -> bool:
        """The curves do cross, inside the measured range."""
        return self.reversed and math.isfinite(self.low) and math.isfinite(self.high)


def quantile_draws(
    boot: QuantileBootstrap, q: float, run_cv: float, rng: np.random.Generator
) -> np.ndarray:
    """Draws of one point's q-quantile (in its own units): the point's quantile moved by each
    resample's deviation, scaled by the blocks' correction, and by a run-to-run spread of
    `run_cv` (relative) that one window cannot show."""
    resampled = sorted_quantile(boot.resampled, q).astype(np.float64)
    deviation = (resampled - resampled.mean()) * boot.correction
    if run_cv > 0:
        deviation = deviation + rng.normal(0.0, math.log1p(run_cv), len(deviation))
    return np.exp(boot.side(q).log_value + deviation)


def crossing_interval(
    targets: np.ndarray,
    draws_a: np.ndarray,
    draws_b: np.ndarray,
    observed: float,
    above_sign: float,
    confidence: float = 0.95,
) -> CrossingInterval:
    """The interval of the load at which curve B crosses curve A.

    `targets` ascending (k,); `draws_a`, `draws_b` (k, D): D joint draws of each curve's value
    at each target; `observed` the crossing read off the measured values, and `above_sign`
    the sign of the measured B - A just above it."""
    xs = np.asarray(targets, dtype=float)
    diff = np.asarray(draws_b, dtype=float) - np.asarray(draws_a, dtype=float)
    low_d, high_d = diff[:-1], diff[1:]
    crosses = low_d * high_d < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        at = xs[:-1, None] + (xs[1:] - xs[:-1])[:, None] * low_d / (low_d - high_d)
    # per draw: the crossing nearest the observed one
    distance = np.where(crosses, np.abs(at - observed), np.inf)
    nearest = distance.argmin(axis=0)
    columns = np.arange(diff.shape[1])
    # no crossing in a draw: beyond the range, on the side its constant sign points to (the
    # whole range above the crossing: it lies below the lowest target)
    beyond = np.where(np.sign(diff[-1]) == np.sign(above_sign), -np.inf, np.inf)
    positions = np.where(crosses[nearest, columns], at[nearest, columns], beyond)
    ordered = np.sort(positions)
    tail = (1 - confidence) / 2
    count = len(ordered)
    low = ordered[int(math.floor(tail * (count - 1)))]
    high = ordered[int(math.ceil((1 - tail) * (count - 1)))]
    share_above = (np.sign(diff) == np.sign(above_sign)).mean(axis=1)
    share_below = (np.sign(diff) == -np.sign(above_sign)).mean(axis=1)
    reversed_ = bool(
        (share_below[xs < observed] >= 1 - tail).any()
        and (share_above[xs > observed] >= 1 - tail).any()
    )
    return CrossingInterval(float(low), float(high), confidence, reversed_)
