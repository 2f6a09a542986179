"""What a point costs: the replica's price per hour over what it served in that hour.

`cost:` in the spec gives a price per accelerator-hour (a GPU) or per node-hour and, for
per-accelerator prices, how many accelerators a replica holds (default: the configuration's
tensor-parallel size x pipeline-parallel size x data-parallel size, the GPUs its server
holds, so a TP=2 configuration costs twice). A
point then costs, at the rate it was measured:

    cost per million output tokens = price per replica-hour / (output tok/s x 3600) x 1e6
    cost per million tokens        = the same over prompt + output tok/s
    requests per cost unit         = requests/s x 3600 / price per replica-hour

The same three at capacity@SLO take the capacity's request rate (analysis/best.py).
"""

from __future__ import annotations

from typing import Any

from tunebench.points.cells import CostCells, PointCells
from tunebench.spec.plan import gpus_per_server


def accelerators(cost: dict[str, Any], args: dict[str, Any]) -> int:
    """Accelerators one replica of a configuration holds."""
    if cost.get("accelerators_per_replica"):
        return int(cost["accelerators_per_replica"])
    # a data-parallel server runs that many engines, each with its TP x PP GPUs
    return max(1, gpus_per_server(args))


def replica_price(cost: dict[str, Any], args: dict[str, Any]) -> float:
    """Price of one replica of a configuration per hour."""
    price = float(cost["price_per_hour"])
    return price if cost.get("per") == "node" else price * accelerators(cost, args)


def cost_columns(row: PointCells, price_per_hour: float) -> CostCells:
    out: CostCells = {
        "cost_per_hour": price_per_hour,
        "cost_per_mtok_output": None,
        "cost_per_mtok_total": None,
        "requests_per_cost": None,
    }
    output, total, rate = row.get("output_tok_s"), row.get("total_tok_s"), row.get("achieved_rps")
    if output:
        out["cost_per_mtok_output"] = price_per_hour / (output * 3600) * 1e6
    if total:
        out["cost_per_mtok_total"] = price_per_hour / (total * 3600) * 1e6
    if rate:
        out["requests_per_cost"] = rate * 3600 / price_per_hour
    return out


def at_rate(
    price_per_hour: float, requests_per_s: float, output_tokens_per_request: float | None
) -> dict[str, Any]:
    """The cost figures of a configuration serving `requests_per_s` (its capacity@SLO)."""
    out: dict[str, Any] = {
        "cost_per_hour": price_per_hour,
        "requests_per_cost": requests_per_s * 3600 / price_per_hour if requests_per_s else None,
        "cost_per_mtok_output": None,
    }
    if requests_per_s and output_tokens_per_request:
        tokens_per_hour = requests_per_s * output_tokens_per_request * 3600
        out["cost_per_mtok_output"] = price_per_hour / tokens_per_hour * 1e6
    return out
