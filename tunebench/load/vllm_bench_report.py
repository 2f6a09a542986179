"""`vllm bench serve --save-result [--save-detailed]` JSON -> points.csv columns and samples.

Shared by the vllm-bench load driver (load/vllm_bench.py) and `tunebench import`. The
summary gives rates, throughputs and percentiles (`median_ttft_ms`, `p99_itl_ms`, ...);
`--save-detailed` adds per-request lists (`ttfts`, `itls`, `latencies`, `input_lens`,
`output_lens`, `errors`, and in vLLM 0.11+ `start_times` and `queue_times`). Start times are
`time.perf_counter()` readings; the driver's worker adds `epoch_offset` (time.time() -
time.perf_counter() in its process) so that they become epoch seconds like GuideLLM's.
"""

from __future__ import annotations

import math
from typing import Any

from tunebench.points.cells import RequestSample

# Keys `vllm bench serve --metadata KEY=VALUE` adds to its result: which configuration and
# repeat a point belongs to (tunebench export writes them, tunebench import reads them).
LABEL_KEY = "tunebench_config_label"
REPEAT_KEY = "tunebench_repeat"
# ... and what a round trip through the file would otherwise lose: the configuration's engine
# args and the client's verdict on the point (the model goes in vllm's own `model_id`)
ARGS_KEY = "tunebench_engine_args"
CLIENT_LIMITED_KEY = "tunebench_client_limited_reason"


def _ms(data: dict, stat: str, name: str) -> float | None:
    value = data.get(f"{stat}_{name}_ms")
    return float(value) if value is not None else None


def strategy(data: dict) -> tuple[str, float | None]:
    """(load kind, target) of a result: concurrent N, throughput, poisson or gamma rate."""
    rate, concurrency = data.get("request_rate"), data.get("max_concurrency")
    unbounded = rate in (None, "inf") or (isinstance(rate, float) and math.isinf(rate))
    if concurrency and unbounded:
        return "concurrent", float(concurrency)
    if unbounded:
        return "throughput", None
    kind = "poisson" if float(data.get("burstiness") or 1) == 1 else "gamma"
    return kind, float(rate) if rate is not None else None


def client_columns(data: dict) -> dict[str, Any]:
    kind, target = strategy(data)
    e2e_mean = _ms(data, "mean", "e2el")
    row: dict[str, Any] = {
        "load_kind": kind,
        "target": target,
        "achieved_rps": data.get("request_throughput"),
        # Little's law: vllm bench does not report concurrency; rate x mean latency is it.
        "achieved_concurrency": (
            data["request_throughput"] * e2e_mean / 1000
            if e2e_mean is not None and data.get("request_throughput")
            else None
        ),
        "requests_ok": data.get("completed"),
        "requests_failed": data.get("failed", 0),
        "duration_s": data.get("duration"),
        "output_tok_s": data.get("output_throughput"),
        "total_tok_s": data.get("total_token_throughput"),
    }
    for prefix, name, stats in (
        ("ttft", "ttft", ("mean", "p50", "p90", "p95", "p99")),
        ("itl", "itl", ("mean", "p50", "p95", "p99")),
        ("tpot", "tpot", ("mean", "p50", "p95")),
    ):
        for stat in stats:
            row[f"{prefix}_{stat}_ms"] = _ms(data, "median" if stat == "p50" else stat, name)
    for stat in ("mean", "p50", "p95", "p99"):
        value = _ms(data, "median" if stat == "p50" else stat, "e2el")
        row[f"e2e_{stat}_s"] = value / 1000 if value is not None else None
    outs, ins = data.get("output_lens") or [], data.get("input_lens") or []
    ok = [i for i, t in enumerate(data.get("ttfts") or []) if t]
    if ok and outs and ins:
        row["output_tokens_mean"] = sum(outs[i] for i in ok) / len(ok)
        row["prompt_tokens_mean"] = sum(ins[i] for i in ok) / len(ok)
    lags = [1000 * float(q) for q in data.get("queue_times") or [] if q is not None]
    if lags:
        lags.sort()

        def at(q: float) -> float:
            return round(lags[min(len(lags) - 1, int(q * len(lags)))], 1)

        # how long a request waited in the client before it was sent: its dispatch lag
        row["dispatch_lag_p50_ms"], row["dispatch_lag_p95_ms"] = at(0.50), at(0.95)
    return row


def indexed_samples(data: dict) -> list[tuple[int, RequestSample]]:
    """(position in vLLM's lists, sample) of each successful request (a failed request has
    ttft 0), in the order vLLM sent them to its request functions: the order of its dataset,
    which a replay's workload is matched against."""
    ttfts, itls = data.get("ttfts") or [], data.get("itls") or []
    latencies = data.get("latencies") or []
    outs, ins = data.get("output_lens") or [], data.get("input_lens") or []
    starts = data.get("start_times") or []
    offset = data.get("epoch_offset")
    samples: list[tuple[int, RequestSample]] = []
    for i, ttft in enumerate(ttfts):
        if not ttft:
            continue
        gaps = itls[i] if i < len(itls) and itls[i] else []
        latency = latencies[i] if i < len(latencies) else None
        output_tokens = outs[i] if i < len(outs) else None
        start = None
        if offset is not None and i < len(starts) and starts[i] is not None:
            start = float(starts[i]) + float(offset)
        sample: RequestSample = {
            "ttft_ms": ttft * 1000,
            "itl_ms": 1000 * sum(gaps) / len(gaps) if gaps else None,
            "tpot_ms": (
                1000 * (latency - ttft) / (output_tokens - 1)
                if latency is not None and output_tokens and output_tokens > 1
                else None
            ),
            "e2e_s": latency,
            "output_tokens": output_tokens,
            "prompt_tokens": ins[i] if i < len(ins) else None,
            "start_time": start,
            "end_time": start + latency if start is not None and latency else None,
        }
        samples.append((i, sample))
    return samples


def in_start_order(samples: list[RequestSample]) -> list[RequestSample]:
    """The samples in order of their start, when every start is known."""
    if samples and all(s["start_time"] is not None for s in samples):
        return sorted(samples, key=lambda s: s.get("start_time") or 0.0)
    return samples


def request_samples(data: dict) -> list[RequestSample]:
    """Per-request samples of the successful requests, in order of their start when start
    times are known."""
    return in_start_order([sample for _, sample in indexed_samples(data)])


def measured_window(data: dict) -> tuple[float, float] | None:
    """Epoch start and end of the benchmark: its requests' first start to last end."""
    samples = request_samples(data)
    starts = [s["start_time"] for s in samples if s["start_time"] is not None]
    ends = [s["end_time"] for s in samples if s["end_time"] is not None]
    if not starts or not ends:
        return None
    return min(starts), max(ends)
