"""Was a trace replayed faithfully? Arrival, length and prefix-reuse evidence of a point.

A replayed point (`kind: replay`, tunebench/load/trace.py) claims to have sent the trace's
requests at the trace's times with the trace's lengths. Three figures check the claim:

- arrival fidelity: each request's send time minus its scheduled time (the replay clock's
  start plus its trace time over the speed): `arrival_lag_p50_ms`, `arrival_lag_p95_ms`,
  and `arrival_late_share`, the share sent more than `LATE_MS` late. More than `LATE_SHARE`
  late makes the point client-limited: the server saw a smoother, later load than the trace;
- length fidelity: the prompt and output tokens the server counted for each request (its
  usage answer) against the lengths asked for: `prompt_tokens_ratio`, `output_tokens_ratio`
  (sums) and `length_mismatch_share` (requests off by more than `LENGTH_TOLERANCE`). More
  than `LENGTH_SHARE` off makes the point invalid: the server served other requests;
- prefix reuse: the hit rate a prefix cache that keeps everything would reach on this
  workload (`prefix_hit_rate_predicted`: per request the prefix it shares with the prompts
  sent before it, in whole blocks of the server's block size, at most its length minus one
  token, over all prompt tokens: vLLM's `prefix_cache_hits` / `prefix_cache_queries`) beside
  the hit rate the server measured (`prefix_hit_rate`). Far apart, the point is unverified:
  the cache evicted, or the prompts did not share what the trace shares.

A figure the load generator's result could not give (no send times, no per-request token
counts) is not taken as passed: the point is unverified and says what was not checked
(`unchecked`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tunebench.numbers import to_float
from tunebench.points.cells import ArrivalLag, LengthFit, PointCells, RowView, SampleView, TraceFit

LATE_MS = 50.0
LATE_SHARE = 0.05
LENGTH_TOLERANCE = 0.05
LENGTH_SHARE = 0.05
PREFIX_GAP = 0.10  # predicted vs measured hit rate, absolute


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0-1) by linear interpolation between the closest ranks (numpy's
    default): with n sorted values, position q x (n - 1)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def arrival_fidelity(lags_s: list[float]) -> ArrivalLag:
    """Columns of the send lags (seconds; negative: early) of a point's requests."""
    if not lags_s:
        return {"arrival_lag_p50_ms": None, "arrival_lag_p95_ms": None, "arrival_late_share": None}
    late = sum(1 for lag in lags_s if lag * 1000 > LATE_MS)
    return {
        "arrival_lag_p50_ms": round(percentile(lags_s, 0.50) * 1000, 2),
        "arrival_lag_p95_ms": round(percentile(lags_s, 0.95) * 1000, 2),
        "arrival_late_share": round(late / len(lags_s), 4),
    }


def length_fidelity(samples: Sequence[SampleView]) -> LengthFit:
    """Server-counted lengths of the successful requests against the lengths asked for."""
    pairs: list[tuple[float, float, float, float]] = []
    for sample in samples:
        asked_in = to_float(sample.get("trace_prompt_tokens"))
        asked_out = to_float(sample.get("trace_output_tokens"))
        got_in = to_float(sample.get("prompt_tokens"))
        got_out = to_float(sample.get("output_tokens"))
        if asked_in is not None and asked_out is not None and got_in is not None:
            if got_out is not None:
                pairs.append((asked_in, asked_out, got_in, got_out))
    if not pairs:
        return {
            "prompt_tokens_ratio": None,
            "output_tokens_ratio": None,
            "length_mismatch_share": None,
        }

    def off(got: float, asked: float) -> bool:
        return abs(got - asked) > LENGTH_TOLERANCE * asked

    mismatched = sum(1 for ai, ao, gi, go in pairs if off(gi, ai) or off(go, ao))
    asked_in_sum = sum(p[0] for p in pairs)
    asked_out_sum = sum(p[1] for p in pairs)
    return {
        "prompt_tokens_ratio": (
            round(sum(p[2] for p in pairs) / asked_in_sum, 4) if asked_in_sum else None
        ),
        "output_tokens_ratio": (
            round(sum(p[3] for p in pairs) / asked_out_sum, 4) if asked_out_sum else None
        ),
        "length_mismatch_share": round(mismatched / len(pairs), 4),
    }


def predicted_hits(reuse_tokens: int, prompt_tokens: int, block_size: int) -> int:
    """Tokens vLLM finds cached for one prompt: whole blocks of the shared prefix, at most
    its length minus one (the last token is always computed, for its logits)."""
    usable = min(reuse_tokens, prompt_tokens - 1)
    return block_size * (max(usable, 0) // block_size)


def predicted_hit_rate(samples: Sequence[SampleView], block_size: int | None) -> float | None:
    """Predicted prefix-cache hits over prompt tokens of a point's requests."""
    if not block_size:
        return None
    hits = queries = 0
    for sample in samples:
        reuse = to_float(sample.get("reuse_tokens"))
        length = to_float(sample.get("trace_prompt_tokens"))
        if reuse is None or length is None:
            continue
        hits += predicted_hits(int(reuse), int(length), int(block_size))
        queries += int(length)
    return round(hits / queries, 4) if queries else None


def is_replay(samples: Sequence[SampleView]) -> bool:
    return any("trace_prompt_tokens" in s for s in samples)


def trace_columns(samples: Sequence[SampleView], block_size: int | None) -> TraceFit:
    """Length fidelity and the predicted prefix hit rate from a replayed point's samples."""
    out: TraceFit = {**length_fidelity(samples)}
    out["prefix_hit_rate_predicted"] = predicted_hit_rate(samples, block_size)
    return out


def late_reason(row: RowView) -> str | None:
    """Why a replayed point is client-limited by its arrivals, or None."""
    share = to_float(row.get("arrival_late_share"))
    if share is None or share <= LATE_SHARE:
        return None
    p95 = to_float(row.get("arrival_lag_p95_ms"))
    return (
        f"replayed late: {share:.0%} of requests sent more than {LATE_MS:.0f} ms after their "
        f"trace time (lag p95 {p95:.0f} ms)"
    )


def length_problems(row: PointCells) -> list[str]:
    """Why a replayed point did not serve the trace's lengths (empty: it did)."""
    share = row.get("length_mismatch_share")
    if share is None or share <= LENGTH_SHARE:
        return []
    prompt = row.get("prompt_tokens_ratio") or 0.0
    output = row.get("output_tokens_ratio") or 0.0
    return [
        f"lengths differ from the trace: {share:.0%} of requests off by more than "
        f"{LENGTH_TOLERANCE:.0%} (server counted x{prompt:.2f} the prompt and x{output:.2f} "
        "the output tokens asked for)"
    ]


def unchecked(row: PointCells) -> list[str]:
    """What a replayed point's evidence could not check (its load generator's result lacked
    it): said, never taken as passed."""
    out = []
    if row.get("arrival_late_share") is None:
        out.append("arrival timing not checked (no send times against the trace's schedule)")
    if row.get("length_mismatch_share") is None:
        out.append("trace lengths not checked (no server token counts per request)")
    # every request of the slice answered or failed, or the load was not the trace's: the
    # load generator left some out (GuideLLM's replay once sent 23 of 24), or a max_seconds
    # cut the slice short
    asked = row.get("trace_requests")
    seen = (row.get("requests_ok") or 0) + (row.get("requests_failed") or 0)
    if asked is not None and seen < asked:
        out.append(
            f"{asked - seen:.0f} of {asked:.0f} trace requests neither answered nor failed in the "
            "window (not sent, or cut by max_seconds)"
        )
    return out


def prefix_note(row: PointCells) -> str | None:
    """The predicted and measured prefix hit rates far apart (with the cache on), or None."""
    predicted, measured = row.get("prefix_hit_rate_predicted"), row.get("prefix_hit_rate")
    if predicted is None or measured is None or abs(predicted - measured) <= PREFIX_GAP:
        return None
    return (
        f"prefix reuse not reproduced: hit rate {measured:.2f} measured vs {predicted:.2f} "
        "predicted from the workload"
    )
