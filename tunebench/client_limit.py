"""Did the load generator, not the server, limit a point?

On a small machine the client competes with the server: 8 requested streams reached a
mean concurrency of only 3-4 on 2 cores. Such a point says nothing about server capacity.
A point is `client_limited` when
- a concurrent/throughput point's achieved concurrency is below its target streams by more
  than `tolerance` (GuideLLM counts requests outstanding from the client's side, queued
  ones inside the server included, so a shortfall means the client did not keep its
  streams busy), or
- a poisson/constant point's achieved request rate is below its target by more than
  `tolerance`, or
- GuideLLM itself warned that it fell behind (`root_late`: requests sent late).
"""

from __future__ import annotations

import math
from typing import Any

DEFAULT_TOLERANCE = 0.10
CLIENT_WARNINGS = ("root_late",)
CLIENT_COLUMNS = ("client_limited", "client_limited_reason")


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def verdict(row: dict[str, Any], tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    reasons = []
    kind, target = row.get("load_kind"), _number(row.get("target"))
    if target and kind in ("concurrent", "throughput"):
        achieved = _number(row.get("achieved_concurrency"))
        if achieved is not None and achieved < target * (1 - tolerance):
            reasons.append(f"achieved concurrency {achieved:.2f} of {target:g} streams")
    if target and kind in ("poisson", "constant"):
        achieved = _number(row.get("achieved_rps"))
        if achieved is not None and achieved < target * (1 - tolerance):
            reasons.append(f"achieved {achieved:.2f} of {target:g} req/s")
    warnings = str(row.get("client_warnings") or "").split(";")
    late = [w for w in warnings if w in CLIENT_WARNINGS]
    if late:
        reasons.append(f"GuideLLM warned: {', '.join(late)}")
    return {"client_limited": bool(reasons), "client_limited_reason": "; ".join(reasons)}
