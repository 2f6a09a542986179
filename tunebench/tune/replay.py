"""Capacity searches and tune trials against a recorded run, in memory (no run store).

The same decisions as a sweep over a replay deployment (the CapacitySearch, SLO
evaluation and client-limited verdict), without writing files, so search strategies can
be compared over many seeds in seconds (benchmarks/tune_efficiency.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunebench.points import client_limit, trust
from tunebench.points.capacity import CapacitySearch
from tunebench.points.slo import evaluate
from tunebench.replay.model import RecordedConfig, RecordedRun
from tunebench.spec.plan import ServerConfig
from tunebench.tune.study import TrialOutcome


def replay_probe(
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
        row = replay_probe(config, kind, rate, slo)
        search.tell(
            rate, trust.flag(row["slo_met"]), trust.is_client_limited(row), row["slo_ratio"]
        )
    return search


@dataclass
class ReplayCapacityEvaluator:
    """TrialEvaluator: a trial's capacity from the recording, warm-started like the runner."""

    recorded: RecordedRun
    slo: dict
    kind: str = "poisson"
    start_rate: float = 1.0
    tolerance: float = 0.05
    max_probes: int = 12

    def __post_init__(self) -> None:
        self.hint: float | None = None
        self.probes = 0  # load points run, over all trials

    def evaluate(self, config: ServerConfig) -> TrialOutcome:
        recorded = self.recorded.find(config.args)
        if recorded is None:
            return TrialOutcome(None, "replay: not recorded")
        if recorded.status != "complete":
            return TrialOutcome(
                None,
                f"replay: {recorded.error or 'failed when recorded'}",
                effective=recorded.effective,
            )
        search = search_capacity(
            recorded,
            self.slo,
            self.hint or self.start_rate,
            self.hint is not None,
            self.kind,
            self.tolerance,
            self.max_probes,
        )
        self.probes += len(search.probes)
        if search.capacity:
            self.hint = search.capacity
        return TrialOutcome(
            [float(search.capacity or 0.0)],
            attrs={"probes": len(search.probes)},
            effective=recorded.effective,
        )
