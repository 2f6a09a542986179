"""The typed row of one point, from the load driver to the store.

A point's row is built from parts that different code fills: the load driver's client
columns, the server's metrics over the window, and the verdicts of the rules in this
package. Each part is a TypedDict here, with the type of every cell, so a misspelt column
or a cell of the wrong type is a mypy error where it is written, not an empty column in
points.csv. `PointRow` carries the parts' union (`PointCells`) together with the two kinds
of columns whose names depend on the run: the configuration's varied args and a sessions
point's per-turn columns.

The column names and their order in points.csv are points/columns.py's; a unit test holds
each TypedDict here to its tuple there (tests/unit/test_point_cells.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from tunebench.errors import TunebenchError

#: What a points.csv cell holds before it is written: text, a number, a flag, or nothing.
Cell = str | int | float | bool | None

#: A row as the rules that also judge stored runs read it: a point's typed cells while it
#: is built, or a row read back from points.csv (its cells are text there). Rules that only
#: build a new point take `PointCells`.
RowView = Mapping[str, Any]


class IdCells(TypedDict, total=False):
    """Which point this is (points/columns.py ID_COLUMNS, less the driver's `target`)."""

    run_id: str
    config_id: str
    config_label: str
    point_id: str
    load_kind: str
    repeat: int


class ClientStats(TypedDict, total=False):
    """What the load generator measured (CLIENT_COLUMNS)."""

    achieved_rps: float | None
    achieved_concurrency: float | None
    requests_ok: int | None
    requests_failed: int | None
    requests_incomplete: int | None
    duration_s: float | None
    ttft_mean_ms: float | None
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    itl_mean_ms: float | None
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    itl_p99_ms: float | None
    tpot_mean_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None
    e2e_mean_s: float | None
    e2e_p50_s: float | None
    e2e_p95_s: float | None
    e2e_p99_s: float | None
    output_tok_s: float | None
    total_tok_s: float | None
    prompt_tokens_mean: float | None
    output_tokens_mean: float | None
    client_warnings: str


class DispatchLag(TypedDict, total=False):
    """How late the client sent its requests against their targets."""

    dispatch_lag_p50_ms: float | None
    dispatch_lag_p95_ms: float | None


class ClientUsage(TypedDict, total=False):
    """The load generator's CPU over the window (load/client_usage.py)."""

    client_cpu_pct: float | None
    client_busiest_pct: float | None
    client_wait_pct: float | None


class ClientLoad(DispatchLag, ClientUsage, total=False):
    """The load generator itself (CLIENT_LOAD_COLUMNS)."""

    load_driver: str


class TraceSent(TypedDict, total=False):
    """A replayed trace as the driver sent it: the slice, its fit, how late requests went."""

    trace_requests: int | None
    trace_length_scale: float | None
    trace_clamped: int | None


class ArrivalLag(TypedDict, total=False):
    """A replayed trace's send lags against the trace's times (points/trace.py)."""

    arrival_lag_p50_ms: float | None
    arrival_lag_p95_ms: float | None
    arrival_late_share: float | None


class LengthFit(TypedDict, total=False):
    """A replayed trace's lengths as the server counted them against those asked for."""

    prompt_tokens_ratio: float | None
    output_tokens_ratio: float | None
    length_mismatch_share: float | None


class PredictedHits(TypedDict, total=False):
    """The prefix-cache hit rate the workload predicts, beside the measured one."""

    prefix_hit_rate_predicted: float | None


class TraceFit(LengthFit, PredictedHits, total=False):
    """What the rules read from a replayed point's samples (points/trace.py)."""


class PrefixCells(TypedDict, total=False):
    """Shared prefixes on synthetic data (PREFIX_COLUMNS)."""

    prefix_groups: int | None
    prefix_tokens: int | None
    prefix_zipf: float | None
    prefix_primed_groups: int | None
    prefix_requests_before: int | None


class SessionCells(TypedDict, total=False):
    """Multi-turn sessions (SESSION_COLUMNS); the per-turn columns are `PointRow.turns`."""

    session_turns: int | None
    sessions: int | None
    sessions_complete: int | None
    session_e2e_p50_s: float | None
    session_e2e_p95_s: float | None


class ClientCells(
    ClientStats, ClientLoad, TraceSent, ArrivalLag, PrefixCells, SessionCells, total=False
):
    """Everything a load driver reports of one point: its statistics and the evidence of
    what it sent, with the point's `target` and the `strategy` it ran (not stored)."""

    target: float | None
    strategy: str


class ServerCells(TypedDict, total=False):
    """What the server's /metrics said over the window (SERVER_COLUMNS, metrics/summary.py)."""

    kv_usage_mean: float | None
    kv_usage_max: float | None
    running_mean: float | None
    running_max: float | None
    waiting_mean: float | None
    waiting_max: float | None
    queue_depth_mean: float | None
    running_depth_mean: float | None
    queue_time_mean_s: float | None
    prefill_time_mean_s: float | None
    decode_time_mean_s: float | None
    preemptions: float | None
    prefix_hit_rate: float | None
    spec_drafts: float | None
    spec_acceptance_rate: float | None
    spec_mean_acceptance_length: float | None
    server_prompt_tokens: float | None
    server_output_tokens: float | None
    server_requests_ok: float | None
    server_window_extra_s: float | None
    server_samples: int | None


class SloCells(TypedDict, total=False):
    """The SLO's verdict on the point (SLO_COLUMNS, points/slo.py)."""

    slo_met: bool | None
    slo_ratio: float | None
    slo_violations: str | None
    goodput_rps: float | None
    goodput_fraction: float | None


class CostCells(TypedDict, total=False):
    """The replica's price and what the point costs (COST_COLUMNS, points/cost.py)."""

    cost_per_hour: float | None
    cost_per_mtok_output: float | None
    cost_per_mtok_total: float | None
    requests_per_cost: float | None


class EnergyCells(TypedDict, total=False):
    """Energy over the window (ENERGY_COLUMNS, points/energy.py)."""

    energy_j: float | None
    power_w: float | None
    joules_per_output_token: float | None
    joules_per_token: float | None
    energy_source: str | None
    energy_note: str | None


class RooflineCells(TypedDict, total=False):
    """The decode roofline at the point's batch (ROOFLINE_COLUMNS, points/roofline.py)."""

    roofline_decode_tok_s: float | None
    roofline_pct: float | None


class MachineCells(TypedDict, total=False):
    """Whether the machine held still under the window (MACHINE_COLUMNS, points/machine.py)."""

    window_change_pct: float | None
    window_change_from_s: float | None
    window_change_to_s: float | None
    throttled_pct: float | None
    steal_pct: float | None
    foreign_cpu_pct: float | None
    cpu_mhz: float | None
    probe_ms: float | None
    probe_before_ms: float | None
    probe_after_ms: float | None
    machine_note: str | None


class LimitCells(TypedDict, total=False):
    """Whether the load generator kept up (LIMIT_COLUMNS, points/client_limit.py)."""

    client_limited: bool
    client_limited_reason: str


class SampleCells(TypedDict, total=False):
    """Percentiles that rest on too few requests (SAMPLE_COLUMNS, points/samples.py)."""

    thin_percentiles: str


class StatusCells(TypedDict, total=False):
    """Where the server side came from, validity and the window (STATUS_COLUMNS)."""

    server_metrics: str
    server_metrics_note: str
    valid: bool
    invalid_reason: str
    unverified_reason: str
    start_time: float
    end_time: float
    raw_report: str


class VerdictCells(SloCells, LimitCells, SampleCells, StatusCells, total=False):
    """The verdicts of the rules every point is judged by."""


class PointCells(
    IdCells,
    ClientCells,
    ServerCells,
    TraceFit,
    CostCells,
    EnergyCells,
    RooflineCells,
    MachineCells,
    VerdictCells,
    total=False,
):
    """Every fixed column of a measured point's row, typed."""


@dataclass
class PointRow:
    """One measured point on its way to points.csv: its typed cells, the configuration's
    varied args (as vLLM's command line spells their values) and a sessions point's
    per-turn columns (turn<k>_..., as many as its sessions have turns)."""

    cells: PointCells
    args: dict[str, str] = field(default_factory=dict)
    turns: dict[str, float | int | None] = field(default_factory=dict)

    def csv_cells(self) -> dict[str, Cell]:
        """The row as points.csv stores it (the store orders the columns)."""
        # every value PointCells declares is a Cell; a TypedDict reads as Mapping[str, object]
        cells = cast(dict[str, Cell], dict(self.cells))
        return {**cells, **self.args, **self.turns}


class CellError(TunebenchError):
    """A load driver's or a stored row's cell that the typed row has no place for."""


_CLIENT_KEYS = frozenset(ClientCells.__annotations__)


def client_cells(raw: Mapping[str, object], source: str) -> ClientCells:
    """A driver's columns, read from its tool's report (or a recorded row), as the typed
    client part of a row: every key must be a client column, every value a cell.

    The reports are JSON whose shape the tools own; this is the one place their numbers
    become typed cells, so a new column a driver writes without declaring it fails here
    (naming `source`) instead of reaching points.csv unnoticed."""
    # checked: declared keys, cell values (a TypedDict cannot be built from a loop)
    return cast(ClientCells, _checked(raw, _CLIENT_KEYS, "client column", source))


def _checked(
    raw: Mapping[str, object], declared: frozenset[str], what: str, source: str
) -> dict[str, Cell]:
    """`raw` with every key declared and every value a cell, or CellError naming `source`."""
    unknown = sorted(set(raw) - declared)
    if unknown:
        raise CellError(f"{source}: not a {what}: {', '.join(unknown)}")
    cells: dict[str, Cell] = {}
    for key, value in raw.items():
        if value is not None and not isinstance(value, (str, int, float)):
            raise CellError(f"{source}: {key} is {type(value).__name__}, not a cell")
        # a statistic the report could not give (NaN) is no number: the rules read None
        cells[key] = None if isinstance(value, float) and math.isnan(value) else value
    return cells


def declared_type(annotation: object) -> str:
    """A TypedDict key's declared type as written ("float | None"): with postponed
    annotations a TypedDict keeps them as ForwardRefs."""
    return str(getattr(annotation, "__forward_arg__", annotation))


_CLIENT_TEXT = frozenset(
    k for k, a in ClientCells.__annotations__.items() if declared_type(a).startswith("str")
)


def stored_client_cells(stored: Mapping[str, object], source: str) -> ClientCells:
    """The client part of a row read back from points.csv (a recorded run played back as a
    deployment): its client columns only, numbers parsed from their text as written."""
    return client_cells(
        {k: _stored_value(v, k in _CLIENT_TEXT) for k, v in stored.items() if k in _CLIENT_KEYS},
        source,
    )


def _stored_value(value: object, text: bool) -> Cell:
    if text:
        return None if value is None else str(value)
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return value
    written = str(value)
    try:
        return int(written)
    except ValueError:
        pass
    try:
        return float(written)
    except ValueError:
        raise CellError(f"not a number: {written!r}") from None


class RequestSample(TypedDict, total=False):
    """One successful request of a point, as its load driver measured it (a row of
    requests/<config>.csv once stored: points/columns.py REQUEST_COLUMNS, with the point and
    repeat the store adds)."""

    ttft_ms: float | None
    itl_ms: float | None
    tpot_ms: float | None
    e2e_s: float | None
    prompt_tokens: int | None
    output_tokens: int | None
    start_time: float | None
    end_time: float | None
    # a replayed trace: when it was due, the lengths asked for, the prefix it shares
    scheduled_time: float | None
    trace_prompt_tokens: int | None
    trace_output_tokens: int | None
    reuse_tokens: int | None
    # a multi-turn session: which one, which turn (from 1), the prompt tokens found cached
    session: str | None
    turn: int | None
    cached_tokens: int | None
    # GuideLLM's replay: the trace time and clock a request carried, read and dropped by
    # the driver (load/guidellm_data.py) before the point is stored
    trace_time: float | None
    clock_start: float | None


#: A request as the rules that also judge stored runs read it: a driver's `RequestSample`,
#: or a row of requests/<config>.csv read back (its cells are text there).
SampleView = Mapping[str, Any]


_SAMPLE_KEYS = frozenset(RequestSample.__annotations__)


def request_samples(raw: Iterable[Mapping[str, object]], source: str) -> list[RequestSample]:
    """Requests drawn or read elsewhere (a recorded run's), as typed samples: every key
    must be a request column and every value a cell, as `client_cells` checks the columns."""
    return [
        cast(RequestSample, _checked(sample, _SAMPLE_KEYS, "request column", source))
        for sample in raw
    ]
