"""A recorded run as a model of a server: what load point X would have measured on config Y.

A recorded configuration is found by its engine args. A point is interpolated between the
recorded points of the same kind (poisson, constant, concurrent, ...): rates and counts
linearly in the load target, latencies linearly in their reciprocal (see
`_mix_reciprocal`). Latency columns are first made non-decreasing in the target (a running
maximum): a server is not faster under more load, and measurement noise must not create
several SLO crossings. Below the lowest recorded target latencies stay at that point's
values and rates scale with the target; above the highest they are extrapolated from the
last two points and the point is flagged `recorded_extrapolated`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunebench.errors import StoreError
from tunebench.numbers import to_float
from tunebench.points import client_limit
from tunebench.points.slo import evaluate
from tunebench.points.sustained import RatePoint, sustained_capacity
from tunebench.spec.plan import args_key
from tunebench.store.manifest import ConfigEntry
from tunebench.store.run import RunStore

LATENCY_PREFIXES = ("ttft_", "itl_", "tpot_", "e2e_")
RATE_COLUMNS = ("achieved_rps", "achieved_concurrency", "output_tok_s", "total_tok_s")
COUNT_COLUMNS = ("requests_ok", "requests_failed", "requests_incomplete")
# Columns carried into an interpolated point; the rest (server gauges, SLO verdicts) are
# recomputed by whoever evaluates the point.
INTERPOLATED = (
    *RATE_COLUMNS,
    *COUNT_COLUMNS,
    "duration_s",
    "prompt_tokens_mean",
    "output_tokens_mean",
)


@dataclass
class ConfigRecord:
    """A recorded configuration as its run's manifest holds it (what every recorded
    deployment reads)."""

    config_id: str
    label: str
    args: dict[str, Any]
    status: str
    error: str | None
    effective: dict[str, Any]

    @classmethod
    def fields_of(cls, entry: ConfigEntry) -> dict[str, Any]:
        return {
            "config_id": entry.config_id,
            "label": entry.label or entry.config_id,
            "args": entry.args,
            "status": entry.status.value,
            "error": entry.error,
            "effective": entry.effective or {},
        }


@dataclass
class RecordedConfig(ConfigRecord):
    """Interpolated between its recorded points (the interpolating recorded deployment)."""

    rows: list[dict[str, Any]] = field(default_factory=list)  # its points, from points.csv
    start_s: float | None = None  # how long its server took to start when recorded

    def point_at(self, kind: str, target: float) -> dict[str, Any]:
        """The columns a `kind` point at `target` would have measured (see module doc)."""
        rows = sorted(
            (r for r in self.rows if r["load_kind"] == kind and to_float(r["target"])),
            key=lambda r: float(r["target"]),
        )
        if not rows:
            raise StoreError(f"recorded: configuration {self.label} recorded no {kind} points")
        targets = [float(r["target"]) for r in rows]
        latency = [c for c in rows[0] if c.startswith(LATENCY_PREFIXES)]
        monotone = _running_max(rows, latency)
        out: dict[str, Any] = {"load_kind": kind, "target": target}
        warnings: list[str] = []
        if target <= targets[0] or len(rows) == 1:
            nearest = 0 if target <= targets[0] else len(rows) - 1
            scale = target / targets[nearest]
            for column in latency:
                out[column] = monotone[nearest][column]
            for column in INTERPOLATED:
                value = to_float(rows[nearest].get(column))
                out[column] = (
                    None
                    if value is None
                    else (
                        value * scale
                        if column in RATE_COLUMNS or column in COUNT_COLUMNS
                        else value
                    )
                )
            warnings = _warnings(rows[nearest])
            if target > targets[-1]:
                warnings.append(client_limit.RECORDED_BEYOND)
        else:
            i = next((k for k in range(1, len(rows)) if targets[k] >= target), len(rows) - 1)
            a, b = i - 1, i
            share = (target - targets[a]) / (targets[b] - targets[a])
            for column in latency:
                out[column] = _mix_reciprocal(monotone[a][column], monotone[b][column], share)
            for column in INTERPOLATED:
                out[column] = _mix(
                    to_float(rows[a].get(column)), to_float(rows[b].get(column)), share, floor=False
                )
            warnings = _warnings(rows[a if share < 0.5 else b])
            if share > 1:
                warnings.append(client_limit.RECORDED_BEYOND)
        for column in COUNT_COLUMNS:
            # whole requests: points.csv counts requests, and a stored 26.33 reads as a
            # measurement that never happened (the rates above keep the expected value)
            if out.get(column) is not None:
                out[column] = int(round(out[column]))
        out["client_warnings"] = ";".join(warnings)
        return out


def _running_max(rows: list[dict[str, Any]], columns: list[str]) -> list[dict[str, float | None]]:
    out: list[dict[str, float | None]] = []
    best: dict[str, float] = {}
    for row in rows:
        current = {}
        for column in columns:
            value = to_float(row.get(column))
            if value is not None:
                best[column] = max(value, best.get(column, value))
            current[column] = best.get(column)
        out.append(current)
    return out


def _mix(a: float | None, b: float | None, share: float, floor: bool) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    value = a + (b - a) * share
    return max(value, a) if floor else max(value, 0.0)


def _mix_reciprocal(a: float | None, b: float | None, share: float) -> float | None:
    """Latency between two recorded points, interpolating its reciprocal linearly.

    Queueing latency grows like 1/(1 - load): for an M/M/1 server every percentile of the
    response time is c/(mu - lambda), whose reciprocal is linear in the rate. Interpolating
    the latency itself would draw a straight chord under the knee and understate it.
    Beyond the last point (share > 1) the reciprocal keeps falling; at 0 the server is
    saturated and the latency is unbounded (a large finite number keeps CSVs readable).
    """
    if a is None or b is None:
        return a if b is None else b
    if a <= 0 or b <= 0:
        return _mix(a, b, share, floor=True)
    inverse = 1 / a + (1 / b - 1 / a) * share
    return max(a, 1 / inverse) if inverse > 0 else max(a, b) * 1e3


def _warnings(row: dict[str, Any]) -> list[str]:
    return [w for w in str(row.get("client_warnings") or "").split(";") if w]


class RecordedRun:
    """The configurations and points of one stored run, looked up by engine args."""

    def __init__(self, path: Path):
        self.path = path
        try:
            store = RunStore.open(path)
        except StoreError as exc:
            raise StoreError(f"recorded: cannot read the recorded run: {exc}") from None
        except OSError as exc:
            raise StoreError(f"recorded: cannot read the recorded run {path}: {exc}") from None
        manifest = store.manifest
        self.name = manifest.name
        self.slo = (manifest.spec or {}).get("slo")
        self.configs = [
            RecordedConfig(
                **ConfigRecord.fields_of(c),
                rows=[r for r in store.rows if r["config_id"] == c.config_id],
                start_s=to_float(c.start_s),
            )
            for c in manifest.configs
        ]

    def find(self, args: dict[str, Any]) -> RecordedConfig | None:
        key = args_key(args)
        matches = [c for c in self.configs if args_key(c.args) == key]
        complete = [c for c in matches if c.status == "complete"]
        found = complete or matches
        return found[0] if found else None

    def describe_choices(self, limit: int = 6) -> str:
        shown = [c.label for c in self.configs[:limit]]
        more = len(self.configs) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def true_capacity(
    config: RecordedConfig,
    slo: dict,
    kind: str = "poisson",
    client_tolerance: float = client_limit.DEFAULT_TOLERANCE,
) -> float | None:
    """The capacity the recorded `kind` points show, by the rule every "best" shares
    (points/sustained.py `sustained_capacity`); None when the lowest recorded rate missed."""
    points = []
    for row in config.rows:
        if row["load_kind"] != kind or not to_float(row.get("target")):
            continue
        verdict = evaluate(row, [], slo)
        limited = client_limit.verdict(row, client_tolerance)["client_limited"]
        points.append(
            RatePoint(float(row["target"]), bool(verdict["slo_met"]), verdict["slo_ratio"], limited)
        )
    found = sustained_capacity(points)
    return None if found is None or found.kind == "below" else found.rate
