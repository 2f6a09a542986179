"""GuideLLM report JSON -> tunebench's client-side columns (pure functions, no GuideLLM import).

Reads `benchmarks[i]` of GuideLLM 0.8 reports; metric names are those GuideLLM has used
since 0.2 (`time_to_first_token_ms`, `inter_token_latency_ms`, `request_latency` in
seconds, ...), so older reports parse too where the fields exist.
"""

from __future__ import annotations

from typing import Any

from tunebench.points.cells import RequestSample
from tunebench.points.client_limit import DATA_RAN_OUT
from tunebench.points.columns import CLIENT_COLUMNS  # noqa: F401  (re-exported: what this fills)
from tunebench.spec.load_kind import LoadKind

_DISTRIBUTIONS = {
    "ttft": ("time_to_first_token_ms", "ms", ("mean", "p50", "p90", "p95", "p99")),
    "itl": ("inter_token_latency_ms", "ms", ("mean", "p50", "p95", "p99")),
    "tpot": ("time_per_output_token_ms", "ms", ("mean", "p50", "p95")),
    "e2e": ("request_latency", "s", ("mean", "p50", "p95", "p99")),
}


def _successful(metrics: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = metrics.get(name)
    if isinstance(value, dict):
        return value.get("successful") if "successful" in value else value
    return None


def _stat(dist: dict[str, Any] | None, which: str) -> float | None:
    if not dist or not dist.get("count"):
        return None
    if which == "mean":
        return dist.get("mean")
    if which == "p50":
        return dist.get("median", (dist.get("percentiles") or {}).get("p50"))
    return (dist.get("percentiles") or {}).get(which)


def strategy_of(benchmark: dict[str, Any]) -> tuple[str, float | None]:
    """(kind, target) of a benchmark: streams for concurrent/throughput, rate for async."""
    # GuideLLM 0.4+: config.strategy; 0.2-0.3: args.strategy
    strategy = (
        (benchmark.get("config") or {}).get("strategy")
        or (benchmark.get("args") or {}).get("strategy")
        or {}
    )
    kind = strategy.get("type_") or strategy.get("type") or "unknown"
    if kind == LoadKind.CONCURRENT:
        return kind, strategy.get("streams")
    if kind == LoadKind.THROUGHPUT:
        return kind, strategy.get("max_concurrency")
    if kind in LoadKind.RATE or kind == "async":
        return kind, strategy.get("rate")
    return kind, None


def measured_window(benchmark: dict[str, Any]) -> tuple[float, float]:
    scheduler = benchmark.get("scheduler_metrics") or benchmark.get("run_stats") or {}
    start = (
        scheduler.get("measure_start_time")
        or benchmark.get("start_time")
        or scheduler.get("start_time")
        or 0.0
    )
    end = (
        scheduler.get("measure_end_time")
        or benchmark.get("end_time")
        or scheduler.get("end_time")
        or start
    )
    return float(start), float(end)


def client_columns(benchmark: dict[str, Any]) -> dict[str, Any]:
    metrics = benchmark.get("metrics") or {}
    # 0.4+ keep the counts in metrics; 0.3 beside them, at the benchmark (run_stats'
    # requests_made also counts warm-up and cool-down: not the measured window's)
    totals = metrics.get("request_totals") or benchmark.get("request_totals") or {}
    start, end = measured_window(benchmark)
    row: dict[str, Any] = {
        "achieved_rps": _stat(_successful(metrics, "requests_per_second"), "mean"),
        "achieved_concurrency": _stat(_successful(metrics, "request_concurrency"), "mean"),
        "requests_ok": totals.get("successful"),
        "requests_failed": totals.get("errored"),
        "requests_incomplete": totals.get("incomplete"),
        "duration_s": round(end - start, 3) if end > start else None,
        "output_tok_s": _stat(_successful(metrics, "output_tokens_per_second"), "mean"),
        "total_tok_s": _stat(_successful(metrics, "tokens_per_second"), "mean"),
        "prompt_tokens_mean": _stat(_successful(metrics, "prompt_token_count"), "mean"),
        "output_tokens_mean": _stat(_successful(metrics, "output_token_count"), "mean"),
    }
    for prefix, (name, unit, stats) in _DISTRIBUTIONS.items():
        dist = _successful(metrics, name)
        for which in stats:
            row[f"{prefix}_{which}_{unit}"] = _stat(dist, which)
    row.update(dispatch_lag(benchmark))
    codes = [w.get("code", "?") for w in benchmark.get("warnings") or [] if isinstance(w, dict)]
    if ran_out_of_data(benchmark):
        codes.append(DATA_RAN_OUT)
    row["client_warnings"] = ";".join(codes)
    return row


def ran_out_of_data(benchmark: dict[str, Any]) -> bool:
    """Whether the benchmark stopped sending because its dataset had no rows left (GuideLLM
    0.8 records the constraint that ended queuing in `scheduler_state`)."""
    state = benchmark.get("scheduler_state") or {}
    return DATA_RAN_OUT in (state.get("end_queuing_constraints") or {})


def dispatch_lag(benchmark: dict[str, Any]) -> dict[str, Any]:
    """p50/p95 of how late the client sent each request (every request, failed and cut off
    ones included): `request_start - targeted_start` of GuideLLM 0.4+'s timings, in ms. For
    rate profiles the target is the planned arrival; for concurrent ones the moment a stream
    was free. None for reports without these timings."""
    lags = []
    for status in ("successful", "errored", "incomplete"):
        for request in (benchmark.get("requests") or {}).get(status) or []:
            timings = (request.get("info") or {}).get("timings") or {}
            sent, target = timings.get("request_start"), timings.get("targeted_start")
            if sent is not None and target is not None:
                lags.append(max(0.0, (float(sent) - float(target)) * 1000))
    if not lags:
        return {"dispatch_lag_p50_ms": None, "dispatch_lag_p95_ms": None}
    lags.sort()

    def at(q: float) -> float:
        return round(lags[min(len(lags) - 1, int(q * len(lags)))], 1)

    return {"dispatch_lag_p50_ms": at(0.50), "dispatch_lag_p95_ms": at(0.95)}


def request_samples(benchmark: dict[str, Any], sessions: bool = False) -> list[RequestSample]:
    """Per-request samples of the successful requests, in order of their start (the compare
    statistics resample them in time order and bin their completions over the window).
    `sessions`: multi-turn data, each sample names its session, its turn (from 1) and the
    prompt tokens the server found cached (its usage answer; None unless the server reports
    it)."""
    out: list[RequestSample] = []
    for request in (benchmark.get("requests") or {}).get("successful") or []:
        start, end = _request_times(request)
        sample: RequestSample = {
            "ttft_ms": request.get("time_to_first_token_ms"),
            "itl_ms": request.get("inter_token_latency_ms"),
            "tpot_ms": request.get("time_per_output_token_ms"),
            "e2e_s": request.get("request_latency"),
            "prompt_tokens": request.get("prompt_tokens"),
            "output_tokens": request.get("output_tokens"),
            "start_time": start,
            "end_time": end,
        }
        info = request.get("info") or {}
        if sessions:  # every request has a conversation id in GuideLLM 0.8; only these count
            sample["session"] = info["conversation_id"]
            sample["turn"] = int(info.get("turn_index") or 0) + 1
            sample["cached_tokens"] = request.get("cached_tokens")
        trace_time, clock_start, _ = replay_timing(request)
        if trace_time is not None:  # a replayed trace: which of its requests this was
            sample["trace_time"], sample["clock_start"] = trace_time, clock_start
        out.append(sample)
    starts = [s.get("start_time") for s in out]
    if all(start is not None for start in starts):
        out.sort(key=lambda s: s.get("start_time") or 0.0)
    return out


def _request_times(request: dict[str, Any]) -> tuple[float | None, float | None]:
    """Epoch start and end of a request: GuideLLM 0.4+ `info.timings`, 0.2-0.3 top-level."""
    info = request.get("info") or request.get("request_info") or {}
    timings = info.get("timings") or {}
    start = (
        timings.get("request_start")
        or info.get("started_at")
        or request.get("start_time")
        or request.get("request_start_time")
    )
    end = (
        timings.get("request_end")
        or info.get("completed_at")
        or request.get("end_time")
        or request.get("request_end_time")
    )
    if start is not None and end is None and request.get("request_latency") is not None:
        end = float(start) + float(request["request_latency"])
    return (float(start) if start is not None else None, float(end) if end is not None else None)


def replay_timing(request: dict[str, Any]) -> "Timing":
    """(trace time, replay clock start, send time) of one request of a GuideLLM replay: the
    dataset's `relative_timestamp` it carried, the scheduler's start (epoch s) and when it
    was sent; None where the report has none (not a replay, or never sent)."""
    info = request.get("info") or {}
    settings = info.get("settings") or {}
    timings = info.get("timings") or {}
    values = (
        settings.get("relative_timestamp"),
        info.get("scheduler_start_time"),
        timings.get("request_start"),
    )
    trace_time, clock_start, sent = (float(v) if v is not None else None for v in values)
    return trace_time, clock_start, sent


Timing = tuple[float | None, float | None, float | None]


def replay_requests(benchmark: dict[str, Any]) -> list[Timing]:
    """`replay_timing` of every request of a benchmark: successful, failed and cut off."""
    requests = benchmark.get("requests") or {}
    return [
        replay_timing(request)
        for status in ("successful", "errored", "incomplete")
        for request in requests.get(status) or []
    ]
