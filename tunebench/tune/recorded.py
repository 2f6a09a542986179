"""Capacity searches and tune trials against a recorded run, in memory (no run store).

The same decisions as a sweep over a recorded deployment (the CapacitySearch, its probe
windows, SLO evaluation and client-limited verdict), without writing files, so search
strategies can be compared over many seeds in seconds (benchmarks/capacity_accuracy.py,
benchmarks/tune_efficiency.py). Against a noisy recorded run (recorded/noisy.py) every search
also counts what it cost: a deployment, and each probe's window plus its overhead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tunebench.points import client_limit, trust
from tunebench.points.capacity import (
    BRACKETING_MARGIN,
    SAMPLE_MARGIN,
    CapacitySearch,
    probe_seconds,
)
from tunebench.points.slo import evaluate, highest_quantile
from tunebench.recorded.model import RecordedConfig
from tunebench.recorded.noisy import RECORDED_DRIFT, GridCosts, RecordedGrid, RecordedStart
from tunebench.spec.plan import DEFAULT_NOISE, ServerConfig
from tunebench.tune.study import TrialOutcome


def recorded_probe(
    config: RecordedConfig,
    kind: str,
    rate: float,
    slo: dict,
    client_tolerance: float = client_limit.DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """The row a probe at `rate` would store: interpolated columns + SLO + client verdict."""
    row = config.point_at(kind, rate)
    row.update(evaluate(row, [], slo))
    row.update(client_limit.verdict(row, client_tolerance))
    return row


def search_capacity(
    config: RecordedConfig,
    slo: dict,
    start_rate: float,
    warm: bool,
    kind: str = "poisson",
    tolerance: float = 0.05,
    max_probes: int = 12,
) -> CapacitySearch:
    search = CapacitySearch(
        start_rate=start_rate, warm=warm, tolerance=tolerance, max_probes=max_probes
    )
    while (rate := search.next_rate()) is not None:
        rate = float(f"{rate:.3g}")  # as the runner rounds probe rates
        row = recorded_probe(config, kind, rate, slo)
        search.tell(
            rate, trust.flag(row["slo_met"]), trust.is_client_limited(row), row["slo_ratio"]
        )
    return search


@dataclass(frozen=True)
class SearchRules:
    """How a capacity search runs: the settings of a `kind: capacity` profile."""

    window_s: float = 10.0  # the profile's max_seconds
    tolerance: float = 0.05
    max_probes: int = 8
    noise: float = DEFAULT_NOISE
    sized_windows: bool = True  # lengthen windows for the SLO percentile (probe_seconds)
    sample_margin: float = SAMPLE_MARGIN  # ... to this many times the requests it needs
    bracketing_margin: float = BRACKETING_MARGIN  # ... at most this many before the bracket
    max_rate: float | None = None  # what the client can drive (a recorded run: its top rate)


@dataclass
class SearchCost:
    deployments: int = 0
    probes: int = 0
    seconds: float = 0.0  # server starts + load windows + per-point overhead

    def add(self, other: "SearchCost") -> None:
        self.deployments += other.deployments
        self.probes += other.probes
        self.seconds += other.seconds


@dataclass
class PlayedSearch:
    """A capacity search played on a recorded start: the search, what it cost, and the probes
    that drew on windows the recording flagged "machine speed changed" (a live search would
    have been marked "machine drifted during the search": no answer of record)."""

    search: CapacitySearch
    cost: SearchCost
    drifted: list[str]


def noisy_probe(
    start: RecordedStart,
    rate: float,
    seconds: float,
    slo: dict,
    rng: np.random.Generator,
    extra: float = 0.0,
    kind: str = "poisson",
) -> dict[str, Any]:
    """The row a probe of one recorded start would store: drawn requests + SLO + client."""
    row = start.probe(kind, rate, seconds, rng, extra)
    row.update(evaluate(row, [], slo))
    row.update(client_limit.verdict(row))
    return row


def search_noisy(
    start: RecordedStart,
    slo: dict,
    start_rate: float,
    warm: bool,
    rules: SearchRules,
    costs: GridCosts,
    rng: np.random.Generator,
    extra: float = 0.0,
) -> PlayedSearch:
    """One capacity search on one deployment (a recorded start), with what it cost and the
    probes that read windows recorded while the machine moved."""
    search = CapacitySearch(
        start_rate=start_rate,
        warm=warm,
        tolerance=rules.tolerance,
        max_probes=rules.max_probes,
        noise=rules.noise,
        max_rate=rules.max_rate,
    )
    quantile = highest_quantile(slo) if rules.sized_windows else None
    cost = SearchCost(deployments=1, seconds=costs.deployment_s)
    drifted: list[str] = []
    while (rate := search.next_rate()) is not None:
        rate = float(f"{rate:.3g}")  # as the runner rounds probe rates
        margin = search.window_margin(rules.sample_margin, rules.bracketing_margin)
        seconds = probe_seconds(rate, rules.window_s, quantile, margin)
        row = noisy_probe(start, rate, seconds, slo, rng, extra)
        cost.probes += 1
        cost.seconds += seconds + costs.point_overhead_s
        if row.get(RECORDED_DRIFT):
            drifted.append(f"{rate:g} req/s: {row[RECORDED_DRIFT]}")
        search.tell(
            rate, trust.flag(row["slo_met"]), trust.is_client_limited(row), row["slo_ratio"]
        )
    return PlayedSearch(search, cost, drifted)


@dataclass
class NoisyCapacityEvaluator:
    """TrialEvaluator on a noisy recorded run: each trial deploys (draws a recorded start of
    the configuration among `repeats`) and searches its capacity, warm-started like the
    runner; `cost` sums what every trial paid."""

    grid: RecordedGrid
    slo: dict
    repeats: list[int]
    rules: SearchRules
    rng: np.random.Generator
    start_rate: float = 1.0
    extra: float = 0.0
    cost: SearchCost = field(default_factory=SearchCost)

    def __post_init__(self) -> None:
        self.hint: float | None = None
        self.costs = self.grid.costs()

    def evaluate(self, config: ServerConfig) -> TrialOutcome:
        recorded = self.grid.find(config.args)
        if recorded is None:
            return TrialOutcome(None, "recorded: these args were not recorded")
        if not any(r in recorded.starts for r in self.repeats):
            return TrialOutcome(
                None,
                f"recorded: {recorded.error or 'failed when recorded'}",
                effective=recorded.effective,
            )
        start = recorded.deploy(self.repeats, self.rng)
        played = search_noisy(
            start,
            self.slo,
            self.hint or self.start_rate,
            self.hint is not None,
            self.rules,
            self.costs,
            self.rng,
            self.extra,
        )
        search = played.search
        self.cost.add(played.cost)
        if search.capacity:
            self.hint = search.capacity
        return TrialOutcome(
            [float(search.capacity or 0.0)],
            attrs={
                "probes": len(search.probes),
                "label": recorded.label,
                # as a live trial's (tune/evaluate.py): probes read while the machine moved
                "drift": played.drifted[0] if played.drifted else None,
            },
            effective=recorded.effective,
        )
