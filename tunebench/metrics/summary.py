"""Per-point server statistics from a scraped time series.

A point's window is GuideLLM's measured interval [start, end]. Gauges are averaged and
maximised over the snapshots inside it; counters and histogram sums use the last snapshot
at or before `start` as the baseline and the first one at or after `end` as the final
value, so every request of the point is counted.

Gauges are samples: a 1 s scrape can miss short bursts (seen on small CPU hosts, where the
engine often holds 0-1 requests at the instant of a scrape). The `*_depth_mean` columns
are exact time averages by Little's law instead: the mean number of requests waiting is
the queue time all requests spent in the window divided by the window's length.
"""

from __future__ import annotations

from tunebench.metrics.parse import Snapshot
from tunebench.points.cells import ServerCells


def summarize_window(snapshots: list[Snapshot], start: float, end: float) -> ServerCells:
    """Server statistics for [start, end]; every value is None when there is no data."""
    inside = [s for s in snapshots if start <= s.time <= end]
    before = [s for s in snapshots if s.time <= start]
    after = [s for s in snapshots if s.time >= end]

    def gauge(key: str) -> tuple[float | None, float | None]:
        values = [s.values[key] for s in inside if key in s.values]
        return (sum(values) / len(values), max(values)) if values else (None, None)

    out: ServerCells = {
        "kv_usage_mean": None,
        "kv_usage_max": None,
        "running_mean": None,
        "running_max": None,
        "waiting_mean": None,
        "waiting_max": None,
        "queue_depth_mean": None,
        "running_depth_mean": None,
        "queue_time_mean_s": None,
        "prefill_time_mean_s": None,
        "decode_time_mean_s": None,
        "preemptions": None,
        "prefix_hit_rate": None,
        "spec_drafts": None,
        "spec_acceptance_rate": None,
        "spec_mean_acceptance_length": None,
        "server_prompt_tokens": None,
        "server_output_tokens": None,
        "server_requests_ok": None,
        "server_window_extra_s": None,
        "server_samples": len(inside),
    }
    out["kv_usage_mean"], out["kv_usage_max"] = gauge("kv_usage")
    out["running_mean"], out["running_max"] = gauge("running")
    out["waiting_mean"], out["waiting_max"] = gauge("waiting")
    if not (before and after):
        return out
    first, last = before[-1], after[0]

    def delta(key: str) -> float | None:
        if key in first.values and key in last.values:
            return max(0.0, last.values[key] - first.values[key])
        return None

    def ratio(numerator: str, denominator: str) -> float | None:
        top, bottom = delta(numerator), delta(denominator)
        return top / bottom if top is not None and bottom else None

    span = last.time - first.time
    if span > 0:
        queued, running = delta("queue_time_sum"), delta("inference_time_sum")
        out["queue_depth_mean"] = queued / span if queued is not None else None
        out["running_depth_mean"] = running / span if running is not None else None
    out["queue_time_mean_s"] = ratio("queue_time_sum", "queue_time_count")
    out["prefill_time_mean_s"] = ratio("prefill_time_sum", "prefill_time_count")
    out["decode_time_mean_s"] = ratio("decode_time_sum", "decode_time_count")
    out["preemptions"] = delta("preemptions")
    out["prefix_hit_rate"] = ratio("prefix_hits", "prefix_queries")
    if out["prefix_hit_rate"] is None:
        rates = [
            s.values["prefix_hit_rate_gauge"] for s in inside if "prefix_hit_rate_gauge" in s.values
        ]
        out["prefix_hit_rate"] = sum(rates) / len(rates) if rates else None
    out["server_prompt_tokens"] = delta("prompt_tokens")
    out["server_output_tokens"] = delta("generation_tokens")
    out["server_requests_ok"] = delta("requests_finished")
    out["server_window_extra_s"] = round((start - first.time) + (last.time - end), 3)
    # drafts proposed in the window: 0 tells "speculation proposed nothing" (n-gram lookup on
    # text that never repeats) apart from "no speculative counters" (None), where the
    # acceptance rate is empty either way
    out["spec_drafts"] = delta("spec_drafts")
    out["spec_acceptance_rate"] = ratio("spec_accepted_tokens", "spec_draft_tokens")
    per_draft = ratio("spec_accepted_tokens", "spec_drafts")
    out["spec_mean_acceptance_length"] = 1 + per_draft if per_draft is not None else None
    return out
