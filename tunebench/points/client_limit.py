"""Did the load generator, not the server, limit a point?

On a small machine the client competes with the server: 8 requested streams reached a
mean concurrency of only 3-4 on 2 cores. Such a point says nothing about server capacity.
A point is `client_limited` when the load it got is not the load it names:
- a concurrent/throughput point's achieved concurrency is below its target streams by more
  than `tolerance` (GuideLLM counts requests outstanding from the client's side, queued
  ones inside the server included, so a shortfall means the client did not keep its
  streams busy), or
- a poisson/constant point's sent request rate (requests finished, failed or cut off at the
  end, over the window) is below its target by more than `tolerance`; the completed rate
  is not used, because an overloaded server completes fewer than it was sent, or
- either of the above is *above* its target by more than `tolerance` (over-driven: the
  point measured a heavier load than its label, so its numbers cannot be credited to it), or
- GuideLLM itself warned that it fell behind (`root_late`: requests sent late), or
- its dataset ran out (GuideLLM's `requests_exhausted`): every row was sent before the
  point's own limit, so the load stopped early and the window's end drained with fewer
  streams or arrivals than named (a replayed trace ends that way by design: not flagged), or
- a replayed trace's requests went out late: more than 5% sent over 50 ms after their trace
  time (points/trace.py), or
- the load generator was short of CPU (load/client_usage.py): its busiest thread used
  `SATURATED_PCT`% of a core or more (an event loop that cannot keep up), or that thread
  waited in a run queue for `STARVED_PCT`% or more of the time it had work (it got the CPU
  a fifth of the time it wanted it: four other busy processes on its core). A starved
  client reads its streams late, inflating TTFT and ITL while its concurrency still looks
  right (measured on 2 cores: pinned next to busy processes, a client's TTFT p50 at one
  stream rose from 103 to 266 ms with its concurrency still at 0.90).
"""

from __future__ import annotations

import math

from tunebench.numbers import to_float
from tunebench.points import trace
from tunebench.points.cells import LimitCells, RowView
from tunebench.spec.load_kind import LoadKind

DEFAULT_TOLERANCE = 0.10
CLIENT_WARNINGS = ("root_late",)
# GuideLLM's name for the end of a dataset (the constraint that stopped queuing, stored in
# client_warnings by load/guidellm_report.py): every row was sent before a limit of the point
DATA_RAN_OUT = "requests_exhausted"
SATURATED_PCT = 90.0
STARVED_PCT = 80.0
# a recorded deployment's point past the recording: not evidence ("replay_extrapolated" in
# runs from before the deployment kind was renamed from replay to recorded)
RECORDED_BEYOND = "recorded_extrapolated"
BEYOND_WARNINGS = (RECORDED_BEYOND, "replay_extrapolated")
# the window's requests by how they ended: together, what the client sent
SENT_COUNTS = ("requests_ok", "requests_failed", "requests_incomplete")


def verdict(row: RowView, tolerance: float = DEFAULT_TOLERANCE) -> LimitCells:
    reasons = []
    kind, target = row.get("load_kind"), to_float(row.get("target"))
    if target and kind in LoadKind.STREAM:
        achieved = to_float(row.get("achieved_concurrency"))
        if achieved is not None and achieved < target * (1 - tolerance):
            reasons.append(f"achieved concurrency {achieved:.2f} of {target:g} streams")
        elif achieved is not None and achieved > target * (1 + tolerance):
            reasons.append(f"over-driven: concurrency {achieved:.2f} for {target:g} streams")
    if target and kind in LoadKind.RATE:
        sent = sent_rate(row)
        slack = rate_slack(kind, target, to_float(row.get("duration_s")), tolerance)
        if sent is not None and sent < target - slack:
            reasons.append(f"sent {sent:.2f} of {target:g} req/s")
        elif sent is not None and sent > target + slack:
            # the point measured a heavier load than its label says (GuideLLM 0.8.1's
            # Poisson start race sent up to 10x): crediting the nominal rate overstates
            # what the server sustains
            reasons.append(f"over-driven: sent {sent:.2f} req/s for a target of {target:g}")
    late_arrivals = trace.late_reason(row)
    if late_arrivals:
        reasons.append(late_arrivals)
    warnings = str(row.get("client_warnings") or "").split(";")
    late = [w for w in warnings if w in CLIENT_WARNINGS]
    if late:
        reasons.append(f"GuideLLM warned: {', '.join(late)}")
    busiest, waited = to_float(row.get("client_busiest_pct")), to_float(row.get("client_wait_pct"))
    if busiest is not None and busiest >= SATURATED_PCT:
        reasons.append(f"client saturated: its busiest thread used {busiest:.0f}% of a core")
    if waited is not None and waited >= STARVED_PCT:
        reasons.append(
            f"client starved: the load generator's busiest thread waited for a CPU {waited:.0f}% "
            "of the time it had work"
        )
    if DATA_RAN_OUT in warnings and kind != LoadKind.REPLAY:
        sent = sum(int(to_float(row.get(c)) or 0) for c in SENT_COUNTS)
        reasons.append(
            f"its dataset ran out after {sent} requests: the load stopped before the point's "
            "end (give load.data more rows than the busiest point sends)"
        )
    if any(w in BEYOND_WARNINGS for w in warnings):
        reasons.append("beyond the highest recorded rate (a recorded run cannot tell)")
    return {"client_limited": bool(reasons), "client_limited_reason": "; ".join(reasons)}


def rate_slack(kind: str, target: float, duration_s: float | None, tolerance: float) -> float:
    """How far a sent rate may stray from its target before the point is flagged: the
    tolerance, or for Poisson arrivals three standard deviations of the count a true
    Poisson process gives in the window (32 expected requests vary by +-18% at one sd),
    whichever is wider. Constant arrivals have no such noise."""
    slack = tolerance * target
    if kind == LoadKind.POISSON and duration_s:
        expected = target * duration_s
        slack = max(slack, 3 * math.sqrt(expected) / duration_s)
    return slack


def sent_rate(row: RowView) -> float | None:
    """Requests the client sent per second in the window; the completed rate as a fallback."""
    duration = to_float(row.get("duration_s"))
    counts = [to_float(row.get(c)) for c in SENT_COUNTS]
    if duration and counts[0] is not None:
        return sum(c or 0 for c in counts) / duration
    return to_float(row.get("achieved_rps"))
