"""TrialEvaluator over the sweep machinery: one ConfigRunner run per trial, in one run store."""

from __future__ import annotations

from typing import Any

from tunebench.numbers import to_float
from tunebench.points import trust
from tunebench.points.cost import replica_price
from tunebench.points.records import CapacityRecord
from tunebench.quality.verdicts import gate_failure
from tunebench.runner import ConfigRunner
from tunebench.runner.config_runner import WARM_START, WarmStart
from tunebench.seams.progress import Reporter
from tunebench.spec.plan import LoadPoint, ServerConfig
from tunebench.store.run import RunStore
from tunebench.tune.study import TrialOutcome


class RunnerEvaluator:
    def __init__(
        self,
        runner: ConfigRunner,
        points: list[LoadPoint],
        store: RunStore,
        objective: str,
        reporter: Reporter,
        total: int,
        cost: dict | None = None,
    ):
        self.runner = runner
        self.points = points
        self.store = store
        self.objective = objective
        self.reporter = reporter
        self.total = total
        self.cost = cost  # spec cost: (objective capacity-per-cost)
        self.count = 0

    def evaluate(
        self, config: ServerConfig, capacity_hint: float | None | WarmStart = WARM_START
    ) -> TrialOutcome:
        """One trial; a capacity search starts at `capacity_hint` (None: its own start
        rate; by default the last trial's capacity)."""
        self.count += 1
        self.reporter.config_starting(config, self.count, self.total)
        if capacity_hint is WARM_START:
            outcome = self.runner.run(config, self.points)
        else:
            outcome = self.runner.run(config, self.points, capacity_hint=capacity_hint)
        effective = outcome.effective or {}
        if outcome.status != "complete":
            return TrialOutcome(None, outcome.error or "failed", effective=effective)
        if outcome.invalid_reasons:
            return TrialOutcome(
                None, "not in effect: " + "; ".join(outcome.invalid_reasons), effective=effective
            )
        failed_gate = self._quality_failure(config)
        if failed_gate:
            # fast at answering wrong: never a candidate for best (docs/quality.md)
            return TrialOutcome(None, f"quality gate: {failed_gate}", effective=effective)
        if self.objective in ("capacity", "capacity-per-cost"):
            return self._capacity(outcome.capacity, effective, config)
        return self._throughput(config, effective)

    def _quality_failure(self, config: ServerConfig) -> str | None:
        """Why this trial fails the quality gate against the baseline, or could not be
        checked (None: it passes, is the reference, or the spec has no quality check)."""
        if self.store is None:
            return None
        return gate_failure(self.store, config.config_id)

    def _capacity(
        self, capacity: CapacityRecord | None, effective: dict, config: ServerConfig
    ) -> TrialOutcome:
        if not capacity:
            return TrialOutcome(None, "no capacity probe ran", effective=effective)
        attrs: dict[str, Any] = {
            "capacity_rps": capacity["rate"],
            "probes": capacity["probes"],
            "probe_rates": capacity["probe_rates"],
            "client_bound": capacity["client_bound"],
            "capped": capacity["capped"],
            "converged": capacity["converged"],
            # with the flags above: whether the capacity is only a lower bound (no miss seen)
            "upper": capacity.get("upper"),
            # probes measured while the machine moved: the best named on it must say so
            "drift": capacity.get("drift"),
        }
        if capacity["rate"] is None and capacity["client_bound"]:
            return TrialOutcome(
                None,
                "the client could not drive the first probe; no rate was "
                "proven (see client_limited_reason in points.csv)",
                attrs,
                effective,
            )
        # No rate meeting the SLO is a measured capacity of 0, not a failure.
        rate = float(capacity["rate"] or 0.0)
        if self.objective == "capacity-per-cost":
            assert self.cost is not None, "checked by the spec"
            price = replica_price(self.cost, config.args)
            # requests served per cost unit at capacity: a configuration on twice the
            # accelerators must serve twice as much to tie
            attrs["cost_per_hour"] = price
            attrs["requests_per_cost"] = rate * 3600 / price
            return TrialOutcome([attrs["requests_per_cost"]], None, attrs, effective)
        return TrialOutcome([rate], None, attrs, effective)

    def _throughput(self, config: ServerConfig, effective: dict) -> TrialOutcome:
        measured = [
            (speed, r)
            for r in self.store.rows
            if r["config_id"] == config.config_id
            and trust.is_valid(r)
            and (speed := to_float(r.get("output_tok_s"))) is not None
        ]
        if not measured:
            return TrialOutcome(None, "no valid point measured", effective=effective)
        speed, best = max(measured, key=lambda found: found[0])
        ttft = to_float(best.get("ttft_p95_ms"))
        attrs = {
            "output_tok_s": speed,
            "ttft_p95_ms": ttft,
            "at_point": best["point_id"],
            "client_limited": str(best.get("client_limited")) == "True",
        }
        if self.objective != "throughput-latency":
            return TrialOutcome([speed], None, attrs, effective)
        if ttft is None:
            return TrialOutcome(None, "metric missing", attrs, effective)
        return TrialOutcome([speed, ttft], None, attrs, effective)
