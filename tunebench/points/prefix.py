"""Shared prefixes on synthetic data (`load.data.prefix`): the hit rate a prefix cache should reach.

GuideLLM draws each request's group at random with the groups' weights (group k weighs
`zipf_weights`, the same numbers tunebench hands it as prefix buckets) and does not record
the draw in its report, so the prediction is the expectation over those draws rather than a
count over the requests sent:

- a request finds its prefix cached when its group was drawn before it in the same benchmark
  (the requests of the window and the `prefix_requests_before` of a warmup ahead of it), or
  when the point was primed (`prefix.prime`: every group's prefix sent once before the
  window; `prefix_primed_groups` says how many were answered);
- what it finds is the prefix in whole blocks of the server's block size, at most its prompt
  minus one token (points/trace.py `predicted_hits`, vLLM's rule);
- over the point: that expected share of requests x the whole-block prefix tokens over the
  mean prompt tokens the server counted, i.e. vLLM's `prefix_cache_hits / prefix_cache_queries`
  in the window, for a cache that evicts nothing.

Each benchmark's prefixes are new to the server (the worker seeds every benchmark's data
differently: load/guidellm_worker.py `data_seed`), so earlier points leave nothing behind
that this would have to count. Not counted: a request that runs while the first request of
its group is still in prefill (it may miss at high concurrency), and the one to three tokens
after the prefix that requests of a group also share (they matter only when they complete a
block).
"""

from __future__ import annotations

from tunebench.points.cells import PointCells, PrefixCells
from tunebench.points.trace import predicted_hits

# GuideLLM's bucket weights are whole numbers: group k weighs round(this / k^zipf), at least 1.
# It draws from a list holding each prefix weight / gcd(weights) times, so the scale keeps
# that list short (about 7,500 entries for 1,000 groups at zipf 1) while the popular groups'
# weights stay within 1% of Zipf's (rounding matters only where a weight falls under 50).
PREFIX_WEIGHT_SCALE = 1000


def zipf_weights(groups: int, zipf: float) -> list[int]:
    """Group k's draw weight (k from 1): what GuideLLM is given, and so what it draws by."""
    return [max(1, round(PREFIX_WEIGHT_SCALE / rank**zipf)) for rank in range(1, groups + 1)]


def seen_share(weights: list[int], requests: int, before: int = 0, primed: bool = False) -> float:
    """The expected share of `requests` consecutive draws, after `before` earlier ones, whose
    group was drawn earlier (or primed).

    Request k of the window (k from 0) follows before + k draws; group g (probability p) is
    new to it with probability (1 - p)^(before + k). Averaged over the window:
    1 - (1 - p)^before x (1 - (1 - p)^requests) / (requests x p), weighted by p.
    """
    if primed:
        return 1.0
    total = sum(weights)
    if requests <= 0 or total <= 0:
        return 0.0
    share = 0.0
    for weight in weights:
        p = weight / total
        unseen = (1 - p) ** before * (1 - (1 - p) ** requests) / (requests * p)
        share += p * (1 - unseen)
    return share


def predicted_hit_rate(
    weights: list[int],
    prefix_tokens: int,
    prompt_tokens: float,
    block_size: int,
    requests: int,
    before: int = 0,
    primed: bool = False,
) -> float:
    """Expected prefix-cache hits over prompt tokens of a point's window (see the module)."""
    hit_tokens = predicted_hits(prefix_tokens, int(round(prompt_tokens)), block_size)
    return seen_share(weights, requests, before, primed) * hit_tokens / prompt_tokens


def requests_before_window(
    first_sent: float | None, window_start: float, window_end: float, in_window: int
) -> int:
    """Requests of a benchmark sent before its measured window (a warmup), estimated at the
    window's own pace: GuideLLM's report lists only the window's requests."""
    if first_sent is None or first_sent >= window_start or window_end <= window_start:
        return 0
    return round((window_start - first_sent) * in_window / (window_end - window_start))


def workload_columns(
    groups: int, tokens: int, zipf: float, primed_groups: int | None, before: int
) -> PrefixCells:
    """The prefix workload of a point, as points.csv records it (the prediction's inputs)."""
    return {
        "prefix_groups": groups,
        "prefix_tokens": tokens,
        "prefix_zipf": zipf,
        "prefix_primed_groups": primed_groups,
        "prefix_requests_before": before,
    }


def is_prefix_point(row: PointCells) -> bool:
    return row.get("prefix_groups") is not None


def predicted_from_row(row: PointCells, block_size: int | None) -> float | None:
    """`prefix_hit_rate_predicted` of a synthetic-prefix point; None when something it needs is
    unknown (the server's block size, the prompt tokens) or the prime was incomplete."""
    groups, tokens = row.get("prefix_groups"), row.get("prefix_tokens")
    prompt = row.get("prompt_tokens_mean")
    if not block_size or groups is None or tokens is None or not prompt:
        return None
    requests = (
        (row.get("requests_ok") or 0)
        + (row.get("requests_failed") or 0)
        + (row.get("requests_incomplete") or 0)
    )
    primed_groups = row.get("prefix_primed_groups")
    if primed_groups is not None and primed_groups < groups:
        return None  # which groups were left out is unknown, so their weight is too
    weights = zipf_weights(int(groups), row.get("prefix_zipf") or 0.0)
    rate = predicted_hit_rate(
        weights,
        int(tokens),
        prompt,
        int(block_size),
        requests,
        before=row.get("prefix_requests_before") or 0,
        primed=primed_groups is not None,
    )
    return round(rate, 4)


def prime_note(row: PointCells) -> str | None:
    """Why a primed point's caches may not have been warm, or None."""
    groups, primed = row.get("prefix_groups"), row.get("prefix_primed_groups")
    if groups is None or primed is None or primed >= groups:
        return None
    return (
        f"prefix prime incomplete: the server answered {primed:.0f} of {groups:.0f} groups' "
        "prefixes before the window (no hit rate predicted)"
    )
