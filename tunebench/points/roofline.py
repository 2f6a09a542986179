"""Decode throughput against its memory-bandwidth bound, per point (docs/roofline.md).

A decode step of a batch of B sequences with C tokens of context each reads the weights once
and the KV of every sequence's context:

    step time   >= (weight bytes + B x C x KV bytes per token) / bandwidth
    decode tok/s = B / step time <= B x bandwidth / (weight bytes + B x C x KV bytes per token)

The point's batch B is the client's achieved concurrency (requests in flight: at least the
server's running batch, and a larger B only raises the bound, so it stays a bound; the
server's mean running requests when the client did not say), its context the mean prompt
plus half the mean output (a sequence's context grows over its decode). `roofline_pct` is
the point's output tok/s over that bound x 100: prefill steps and per-step overheads are
what keeps it under 100. Tensor parallelism multiplies the devices reading in parallel, so
the bound scales with the device count.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.points.cells import PointCells, RooflineCells


@dataclass(frozen=True)
class Roofline:
    weight_bytes: float
    kv_bytes_per_token: float
    bandwidth_gbs: float  # the whole replica: one device's times the devices
    note: str  # what the figures rest on

    def bound_tok_s(self, batch: float, context_tokens: float) -> float:
        read = self.weight_bytes + batch * context_tokens * self.kv_bytes_per_token
        return batch * self.bandwidth_gbs * 1e9 / read


def roofline_columns(row: PointCells, roofline: Roofline) -> RooflineCells:
    out: RooflineCells = {"roofline_decode_tok_s": None, "roofline_pct": None}
    batch = row.get("achieved_concurrency") or row.get("running_mean")
    measured = row.get("output_tok_s")
    prompt = row.get("prompt_tokens_mean") or 0.0
    output = row.get("output_tokens_mean") or 0.0
    if not batch or batch <= 0:
        return out
    bound = roofline.bound_tok_s(batch, prompt + output / 2)
    out["roofline_decode_tok_s"] = round(bound, 1)
    if measured is not None:
        out["roofline_pct"] = round(100.0 * measured / bound, 2)
    return out
