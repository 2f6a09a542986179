"""The capacity search's answer rule on two analytic latency laws with symmetric window noise.

    python benchmarks/capacity_laws.py [--seeds 400]

benchmarks/capacity_second_sim.py grades the search on a batching server whose short
windows read latency low (a one-sided noise: a window misses the busy periods more often
than it catches one). This grades the answer rule where the noise is symmetric and the
truth is a formula: each window's SLO ratio is the law's at that rate times a log-normal
factor (sd 0.2, the recorded CPU grid's, and 0.4), and the capacity is where the law's
ratio is 1.

- M/M/1: the p90 wait over its value at the capacity, the capacity at 80% load; the ratio
  grows smoothly and without bound towards the service rate (capped at 50, a window's
  worth of queue).
- hockey stick: flat at 0.5 until the knee, then doubling every 10% past it (a batching
  server's latency, without its busy periods); the capacity 1.1 x the knee.

Capacities are drawn from 3-30 req/s; a cold search starts at 1 req/s, a warm one within a
log-normal 15% of the truth; 8 probes, noise model 0.2. Three answer rules: today's, the
chord between the bracket's two ends; the pooled answer (`pool_span=POOL_SPAN`: a line
through the probes near a bracket within `POOL_WIDTH` tolerances); and that line on a
bracket of any width.
Printed per law, noise and start: how often the answer is within 10% of the truth, and the
median signed error (log).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tunebench.points.capacity as capacity  # noqa: E402
from tunebench.points.capacity import CapacitySearch  # noqa: E402

Law = Callable[[float, float], float]  # (rate, capacity) -> SLO ratio


def mm1_ratio(rate: float, capacity_rate: float) -> float:
    """M/M/1's p90 wait at `rate` over its value at `capacity_rate` (80% load there)."""
    service = capacity_rate * 1.25
    if rate >= service:
        return 50.0
    return min((service - capacity_rate) / (service - rate), 50.0)


def hockey_ratio(rate: float, capacity_rate: float) -> float:
    """Flat at 0.5 until the knee (capacity / 1.1), then doubling every 10% past it."""
    knee = capacity_rate / 1.1
    over = max(0.0, rate / knee - 1)
    return 0.5 * math.exp(over * 10 * math.log(2))


LAWS: dict[str, Law] = {"M/M/1": mm1_ratio, "hockey stick": hockey_ratio}


def search_errors(law: Law, sd: float, warm: bool, seeds: int, **settings) -> np.ndarray:
    """Log errors of the answers, one search per seed."""
    errors = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        truth = float(rng.uniform(3.0, 30.0))
        start = truth * math.exp(rng.normal(0, 0.15)) if warm else 1.0
        search = CapacitySearch(start_rate=start, warm=warm, max_probes=8, noise=0.2, **settings)
        while (rate := search.next_rate()) is not None:
            ratio = law(rate, truth) * math.exp(rng.normal(0, sd))
            search.tell(rate, ratio <= 1, ratio=ratio)
        answer = search.capacity
        errors.append(math.log(answer / truth) if answer else -math.inf)
    return np.array(errors)


def describe(errors: np.ndarray) -> str:
    within = np.mean(np.abs(np.expm1(errors)) <= 0.10)
    return f"{within:6.1%} within 10%, median {np.median(errors):+.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=400)
    args = parser.parse_args()
    began = time.monotonic()
    rules = ("today: the chord between the ends", "pooled near a narrow bracket", "at any width")
    print(f"{args.seeds} searches each; " + " | ".join(rules))
    pooled = {"pool_span": capacity.POOL_SPAN}
    for name, law in LAWS.items():
        for sd in (0.2, 0.4):
            for warm in (False, True):
                cells = [describe(search_errors(law, sd, warm, args.seeds))]
                cells.append(describe(search_errors(law, sd, warm, args.seeds, **pooled)))
                width = capacity.POOL_WIDTH
                capacity.POOL_WIDTH = math.inf
                try:
                    cells.append(describe(search_errors(law, sd, warm, args.seeds, **pooled)))
                finally:
                    capacity.POOL_WIDTH = width
                start = "warm" if warm else "cold"
                print(f"  {name:<12} sd {sd:.1f} {start}: " + " | ".join(cells))
    print(f"({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
