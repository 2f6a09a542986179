"""One row of points.csv: what the client measured, what the server said, and the verdicts.

The runner hands over the typed parts (the load driver's client cells and samples, the
server's cells over the point's window; points/cells.py); this module adds the SLO
columns, the client-limited verdict and validity, so every point of every run is judged by
the same rules, and returns the typed row the store keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunebench.numbers import to_float
from tunebench.points import client_limit, prefix, slo, tokens, trace
from tunebench.points import samples as samples_rule
from tunebench.points.cells import (
    ClientCells,
    PointCells,
    PointRow,
    RowView,
    SampleView,
    ServerCells,
)
from tunebench.points.cost import cost_columns
from tunebench.points.energy import EnergyReading, energy_columns
from tunebench.points.machine import MachineReading, machine_columns
from tunebench.points.roofline import Roofline, roofline_columns
from tunebench.points.steadiness import steadiness
from tunebench.spec.plan import format_value

#: More failed requests than this share of the finished ones make a point invalid: its
#: latencies come from the survivors, at a lighter load than the point names. The failures
#: themselves are evidence: compare still compares the error rate of such a point.
MAX_FAILED_SHARE = 0.05
FAILED_REQUESTS = "requests failed"


def failed_requests(row: RowView) -> list[str]:
    ok, failed = (
        int(to_float(row.get("requests_ok")) or 0),
        int(to_float(row.get("requests_failed")) or 0),
    )
    finished = ok + failed
    if not finished or failed <= MAX_FAILED_SHARE * finished:
        return []
    return [
        f"{FAILED_REQUESTS}: {failed} of {finished} ({failed / finished:.0%}, "
        f"a valid point allows {MAX_FAILED_SHARE:.0%})"
    ]


@dataclass(frozen=True)
class PointId:
    """Which point of which configuration of which run a row describes."""

    run_id: str
    config_id: str
    config_label: str
    point_id: str
    load_kind: str
    repeat: int = 1


def build_row(
    point: PointId,
    varied: Mapping[str, object],
    client: ClientCells,
    samples: Sequence[SampleView],
    server: ServerCells,
    *,
    turns: Mapping[str, float | int | None] | None = None,
    server_note: str = "",
    slo_spec: dict[str, Any] | None = None,
    client_tolerance: float = client_limit.DEFAULT_TOLERANCE,
    config_problems: list[str] | None = None,
    config_unverified: list[str] | None = None,
    expected_output_tokens: int | None = None,
    raw_report: str | None = None,
    window: tuple[float, float] | None = None,
    price_per_hour: float | None = None,
    energy: EnergyReading | str | None = None,
    roofline: Roofline | None = None,
    block_size: int | None = None,
    machine: MachineReading | str | None = None,
) -> PointRow:
    """The points.csv row of one measured point.

    `client` holds the load driver's cells (with `target`; `turns` a sessions point's
    per-turn columns), `server` the metrics summary of the window (all None without
    scrapes; `server_note` then says why), `varied` the configuration's varied args, and
    `config_problems` the reasons the configuration is invalid (args not in effect),
    `config_unverified` what could not be checked of it (args the server gave no read-back
    of). A valid point with something unchecked is *unverified* (`unverified_reason`), also
    when its window's requests or `machine` (telemetry and probe over the window) show that
    the machine changed speed under it.
    A replayed trace's point is checked against its trace (points/trace.py), its predicted
    prefix reuse in whole blocks of the server's `block_size`; evidence its load generator
    did not give (send times, per-request token counts) leaves the point unverified.
    """
    row: PointCells = {
        "run_id": point.run_id,
        "config_id": point.config_id,
        "config_label": point.config_label,
        "point_id": point.point_id,
        "load_kind": point.load_kind,
        "repeat": point.repeat,
    }
    row.update(client)
    row["target"] = client.get("target")
    row.pop("strategy", None)  # how the driver ran the point; load_kind is what was asked
    row.update(server)
    replayed = trace.is_replay(samples)
    if replayed:
        row.update(trace.trace_columns(samples, block_size))
    # synthetic shared prefixes: the reuse their groups predict (points/prefix.py)
    prefixed = prefix.is_prefix_point(row)
    if prefixed:
        row["prefix_hit_rate_predicted"] = prefix.predicted_from_row(row, block_size)
    row["server_metrics"] = "present" if server.get("server_samples") else "absent"
    if not server.get("server_samples"):
        # The client's measurements stand; say why the server side is missing.
        row["server_metrics_note"] = (
            f"no server metrics: {server_note or 'no scrape in the window'}"[:300]
        )
    row.update(slo.evaluate(row, samples, slo_spec))
    row.update(client_limit.verdict(row, client_tolerance))
    row.update(samples_rule.sample_columns(row))
    problems = list(config_problems or [])
    if not client.get("requests_ok"):
        problems.append("no successful requests")
    else:
        problems += failed_requests(row)
    # a replayed point asks each request for its trace's length (length fidelity checks
    # them), not the fixed length of the run's synthetic data, which a sweep may also hold
    problems += tokens.reconcile(row, samples, None if replayed else expected_output_tokens)
    if replayed:
        problems += trace.length_problems(row)
    row["valid"] = not problems
    row["invalid_reason"] = "; ".join(problems)
    unchecked = list(config_unverified or [])
    if not server.get("server_samples"):
        unchecked.insert(0, "no server metrics")
    if replayed:
        unchecked += trace.unchecked(row)
    # the machine under the window: its own requests, telemetry and probe (points/machine.py)
    machine_cells, drift = machine_columns(
        steadiness(samples, window[0] if window else None), machine
    )
    row.update(machine_cells)
    if drift:
        unchecked.append(drift)
    reuse = trace.prefix_note(row) if replayed or prefixed else None
    if reuse:
        unchecked.append(reuse)
    prime = prefix.prime_note(row) if prefixed else None
    if prime:
        unchecked.append(prime)
    row["unverified_reason"] = "; ".join(unchecked)
    if raw_report is not None:
        row["raw_report"] = raw_report
    if window is not None:
        row["start_time"] = round(window[0], 3)
        row["end_time"] = round(window[1], 3)
    if price_per_hour is not None:
        row.update(cost_columns(row, price_per_hour))
    if energy is not None:
        row.update(energy_columns(row, energy))
    if roofline is not None:
        row.update(roofline_columns(row, roofline))
    args = {key: format_value(value) for key, value in varied.items()}
    return PointRow(row, args, dict(turns or {}))
