"""A recorded grid with repeats as a noisy server, and the truth held out from it.

The interpolating recorded deployment (recorded/model.py) answers every probe with the same
numbers, so a search tested on it never meets noise. This one answers like a server does:

- a deployment draws one recorded server start (a `repeat`) from those it may use: the
  between-run variability is the recording's own;
- each probe of that deployment draws n ~ Poisson(rate x window) requests from the requests
  that start recorded, each from the quantile function interpolated between the two
  recorded rates around the probe's (reciprocally, like recorded/model.py: queueing latency
  grows like 1/(1 - load)); a short window is as noisy as a real one, a longer one less;
- `extra` adds noise on top: one log-normal factor (sd `extra`) on a probe's latencies;
- a probe drawn from a window the recording flagged "machine speed changed" says so
  (`RECORDED_DRIFT`), as a live probe on a moving machine would be flagged: a search that
  read one is a search tunebench flags.

The truth a benchmark grades against comes from the repeats the recorded deployment never
draws (held out): their requests pooled per recorded rate, the SLO evaluated at each rate,
and the capacity the crossing between the last rate that met it below the first miss and
that miss (`held_out_capacity`). `run_spread` measures how much the capacity of one
configuration moves between server starts, which sets what "indistinguishable from the
best" means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tunebench.errors import StoreError
from tunebench.numbers import to_float
from tunebench.points import client_limit, trust
from tunebench.points.machine import is_drift
from tunebench.points.slo import SLO_METRICS, evaluate
from tunebench.points.sustained import RatePoint, sustained_capacity
from tunebench.recorded.model import ConfigRecord
from tunebench.spec.plan import args_key
from tunebench.store.run import RunStore, read_requests

PERCENTILES = (50, 90, 95, 99)
#: A drawn probe's column: the drift reason of a recorded window its requests came from.
RECORDED_DRIFT = "recorded_drift"
# The client's own columns a probe inherits from the nearer recorded window.
CLIENT_STATE = (
    "dispatch_lag_p50_ms",
    "dispatch_lag_p95_ms",
    "client_cpu_pct",
    "client_busiest_pct",
    "client_wait_pct",
    "client_warnings",
)


@dataclass(frozen=True)
class RecordedWindow:
    """One recorded load point of one server start: its row and its requests by metric."""

    target: float
    seconds: float
    row: dict[str, Any]
    samples: dict[str, np.ndarray]  # request column (ttft_ms, ...) -> sorted values

    @property
    def requests(self) -> int:
        return min((len(v) for v in self.samples.values()), default=0)

    @property
    def drift(self) -> str | None:
        """The recording's own "machine speed changed" reason for this window (its window
        test, probe, telemetry or a sentinel after it), or None: it was not flagged."""
        return next((r for r in trust.unverified_reasons(self.row) if is_drift(r)), None)


@dataclass
class RecordedStart:
    """One server start of one configuration: its windows of one load kind, by rate."""

    repeat: int
    windows: list[RecordedWindow]

    def bracket(self, rate: float) -> tuple[RecordedWindow, RecordedWindow | None, float]:
        """The windows around `rate` and its share of the way from the first to the second
        (> 1 beyond the highest recorded rate); below the lowest, that window alone."""
        windows = self.windows
        if rate <= windows[0].target or len(windows) == 1:
            return windows[0], None, 0.0
        for low, high in zip(windows, windows[1:]):
            if rate <= high.target:
                return low, high, (rate - low.target) / (high.target - low.target)
        low, high = windows[-2], windows[-1]
        return low, high, (rate - low.target) / (high.target - low.target)

    def probe(
        self,
        kind: str,
        rate: float,
        seconds: float,
        rng: np.random.Generator,
        extra: float = 0.0,
    ) -> dict[str, Any]:
        """The row a `kind` point at `rate` over `seconds` would measure on this start."""
        return self.draw(kind, rate, seconds, rng, extra)[0]

    def draw(
        self,
        kind: str,
        rate: float,
        seconds: float,
        rng: np.random.Generator,
        extra: float = 0.0,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The row of a `kind` point at `rate` over `seconds`, and its drawn requests."""
        low, high, share = self.bracket(rate)
        count = int(rng.poisson(rate * seconds))
        near = low if high is None or share < 0.5 else high
        row: dict[str, Any] = {"load_kind": kind, "target": rate, "duration_s": seconds}
        row.update({c: near.row.get(c) for c in CLIENT_STATE})
        warnings = [w for w in str(row.get("client_warnings") or "").split(";") if w]
        if share > 1:
            warnings.append(client_limit.RECORDED_BEYOND)
        row["client_warnings"] = ";".join(warnings)
        # a probe drawn from a window recorded while the machine moved rests on that move
        sources = [low] if high is None else [low, high]
        row[RECORDED_DRIFT] = next((w.drift for w in sources if w.drift), None)
        row["requests_ok"] = count
        row["requests_failed"] = 0
        row["requests_incomplete"] = 0
        row["achieved_rps"] = count / seconds
        output_tokens = to_float(near.row.get("output_tokens_mean")) or 0.0
        prompt_tokens = to_float(near.row.get("prompt_tokens_mean")) or 0.0
        row["output_tokens_mean"] = output_tokens
        row["prompt_tokens_mean"] = prompt_tokens
        row["output_tok_s"] = count * output_tokens / seconds
        row["total_tok_s"] = count * (output_tokens + prompt_tokens) / seconds
        if count == 0:
            return row, []
        factor = math.exp(rng.normal(0.0, extra)) if extra > 0 else 1.0
        quantiles = rng.random(count)  # one per request, shared by its metrics
        drawn: dict[str, np.ndarray] = {}
        for column, recorded in low.samples.items():
            values = np.quantile(recorded, quantiles)
            if high is not None and column in high.samples:
                values = mix_reciprocal(values, np.quantile(high.samples[column], quantiles), share)
            drawn[column] = values * factor
            _summarize(row, column, drawn[column])
        samples = [
            {column: float(values[i]) for column, values in drawn.items()}
            | {"output_tokens": output_tokens, "prompt_tokens": prompt_tokens}
            for i in range(count)
        ]
        return row, samples


@dataclass
class GridConfig(ConfigRecord):
    """One configuration of the recorded grid: its server starts by repeat."""

    starts: dict[int, RecordedStart] = field(default_factory=dict)

    def deploy(self, repeats: list[int], rng: np.random.Generator) -> RecordedStart:
        """A deployment: one of the recorded starts in `repeats`, drawn at random."""
        usable = [r for r in repeats if r in self.starts]
        if not usable:
            raise StoreError(f"recorded: {self.label} recorded no start in repeats {repeats}")
        return self.starts[usable[int(rng.integers(len(usable)))]]


class RecordedGrid:
    """The configurations of a stored run with repeats and per-request samples."""

    def __init__(self, path: Path, kind: str = "poisson"):
        self.path = Path(path)
        self.kind = kind
        try:
            store = RunStore.open(self.path)
        except (StoreError, OSError) as exc:
            raise StoreError(f"recorded: cannot read the recorded grid {path}: {exc}") from None
        manifest = store.manifest
        self.name = manifest.name
        self.slo = (manifest.spec or {}).get("slo")
        self.rows = store.rows
        self.configs: list[GridConfig] = []
        for entry in manifest.configs:
            config = GridConfig(**ConfigRecord.fields_of(entry))
            requests = read_requests(self.path, entry.config_id)
            rows = [
                r
                for r in store.rows
                if r["config_id"] == entry.config_id
                and r["load_kind"] == kind
                and to_float(r.get("target"))
            ]
            for repeat in sorted({int(to_float(r.get("repeat")) or 1) for r in rows}):
                windows = [
                    _window(row, requests)
                    for row in rows
                    if int(to_float(row.get("repeat")) or 1) == repeat
                ]
                windows = sorted((w for w in windows if w.requests), key=lambda w: w.target)
                if windows:
                    config.starts[repeat] = RecordedStart(repeat, windows)
            self.configs.append(config)
        self.repeats = sorted({r for c in self.configs for r in c.starts})
        if not self.repeats:
            raise StoreError(
                f"recorded: {path} holds no {kind} points with per-request samples "
                "(requests/<config>.csv); record the grid with tunebench sweep"
            )

    def find(self, args: dict[str, Any]) -> GridConfig | None:
        key = args_key(args)
        return next((c for c in self.configs if args_key(c.args) == key), None)

    def costs(self) -> "GridCosts":
        return GridCosts.measure(self.rows, self.kind)


@dataclass(frozen=True)
class GridCosts:
    """What the recording paid, measured from its own timestamps: a deployment (stop, start,
    warm-up points and load generator set-up: from one configuration's last point to the
    next one's first measured point) and the overhead of one load point beyond its window
    (the gap between two measured points of one start)."""

    deployment_s: float
    point_overhead_s: float

    @classmethod
    def measure(cls, rows: list[dict[str, Any]], kind: str = "poisson") -> "GridCosts":
        runs: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
        for row in rows:
            start, end = to_float(row.get("start_time")), to_float(row.get("end_time"))
            if start is None or end is None:
                continue
            key = (str(row["config_id"]), str(row.get("repeat") or 1))
            runs.setdefault(key, []).append((start, end, str(row["load_kind"])))
        ordered = sorted((sorted(spans) for spans in runs.values()), key=lambda v: v[0][0])
        deployments, gaps = [], []
        for previous, run in zip([None, *ordered], ordered):
            measured = [span for span in run if span[2] == kind]
            if not measured:
                continue
            if previous is not None and measured[0][0] > previous[-1][1]:
                deployments.append(measured[0][0] - previous[-1][1])
            gaps += [b[0] - a[1] for a, b in zip(measured, measured[1:]) if b[0] > a[1]]
        return cls(
            deployment_s=float(np.median(deployments)) if deployments else 60.0,
            point_overhead_s=float(np.median(gaps)) if gaps else 2.0,
        )


@dataclass(frozen=True)
class Truth:
    """A configuration's capacity from held-out repeats, by the shared rule
    (points/sustained.py `sustained_capacity`): "exact", "below" or "at-least" `rate`."""

    rate: float
    kind: str

    def within(self, answer: float | None, tolerance: float) -> bool:
        """Is a search's answer (None: no rate met the SLO) right to `tolerance`?"""
        if self.kind == "below":
            return answer is None or answer <= self.rate * (1 + tolerance)
        if answer is None:
            return False
        if self.kind == "at-least":
            return answer >= self.rate * (1 - tolerance)
        return abs(answer / self.rate - 1) <= tolerance

    def error(self, answer: float | None) -> float | None:
        """Relative error of an answer (None where the truth is a bound the answer respects,
        NaN where it does not)."""
        if self.kind != "exact":
            return None if self.within(answer, 0.0) else float("nan")
        return (answer or 0.0) / self.rate - 1


def held_out_capacity(
    config: GridConfig, repeats: list[int], slo: dict, kind: str = "poisson"
) -> Truth | None:
    """The capacity from `repeats` pooled (see module doc); None if none was recorded."""
    starts = [config.starts[r] for r in repeats if r in config.starts]
    if not starts:
        return None
    by_target: dict[float, list[RecordedWindow]] = {}
    for start in starts:
        for window in start.windows:
            by_target.setdefault(window.target, []).append(window)
    points = []
    for target, windows in by_target.items():
        row: dict[str, Any] = {"load_kind": kind, "target": target}
        for column in windows[0].samples:
            _summarize(row, column, np.concatenate([w.samples[column] for w in windows]))
        row["requests_ok"] = sum(w.requests for w in windows)
        verdict = evaluate(row, [], slo)
        limited = any(client_limit.verdict(w.row)["client_limited"] for w in windows)
        points.append(RatePoint(target, bool(verdict["slo_met"]), verdict["slo_ratio"], limited))
    found = sustained_capacity(points)
    return Truth(found.rate, found.kind) if found else None


def run_spread(
    configs: list[GridConfig], repeats: list[int], slo: dict, kind: str = "poisson"
) -> float:
    """The between-start sd of log capacity, pooled over configurations whose capacity was
    crossed exactly in at least two of `repeats`."""
    squares, dof = 0.0, 0
    for config in configs:
        logs = []
        for repeat in repeats:
            truth = held_out_capacity(config, [repeat], slo, kind)
            if truth is not None and truth.kind == "exact" and truth.rate > 0:
                logs.append(math.log(truth.rate))
        if len(logs) >= 2:
            squares += float(np.var(logs, ddof=1)) * (len(logs) - 1)
            dof += len(logs) - 1
    return math.sqrt(squares / dof) if dof else 0.0


def mix_reciprocal(a: np.ndarray, b: np.ndarray, share: float) -> np.ndarray:
    """Between two latencies, interpolating the reciprocal (see recorded/model.py); beyond b
    (share > 1) the reciprocal keeps falling and at 0 the server is saturated."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inverse = 1 / a + (1 / b - 1 / a) * share
        mixed = np.where(inverse > 0, 1 / inverse, np.maximum(a, b) * 1e3)
    linear = a + (b - a) * share
    mixed = np.where((a > 0) & (b > 0), mixed, np.maximum(linear, 0.0))
    return np.maximum(mixed, b) if share > 1 else mixed


def _summarize(row: dict[str, Any], column: str, values: np.ndarray) -> None:
    """points.csv's mean and percentile columns of one request metric."""
    prefix, unit = _names(column)
    if prefix is None:
        return
    row[f"{prefix}_mean_{unit}"] = float(np.mean(values))
    for percentile, value in zip(PERCENTILES, np.percentile(values, PERCENTILES)):
        row[f"{prefix}_p{percentile}_{unit}"] = float(value)


def _names(column: str) -> tuple[str | None, str]:
    for prefix, unit, sample in SLO_METRICS.values():
        if sample == column:
            return prefix, unit
    return None, ""


def _window(row: dict[str, Any], requests: list[dict[str, str]]) -> RecordedWindow:
    repeat = str(int(to_float(row.get("repeat")) or 1))
    mine = [
        r
        for r in requests
        if r.get("point_id") == row["point_id"] and str(r.get("repeat") or "1") == repeat
    ]
    samples = {}
    for _prefix, _unit, column in SLO_METRICS.values():
        values = [v for v in (to_float(r.get(column)) for r in mine) if v is not None]
        if values:
            samples[column] = np.sort(np.asarray(values, dtype=float))
    return RecordedWindow(
        float(row["target"]), float(to_float(row.get("duration_s")) or 0.0), dict(row), samples
    )
