"""The vLLM Prometheus metrics tunebench reads, under every name they have had.

vLLM V1 (0.8+) and V0 (still common on clusters) name some series differently, and
counters appear with and without `_total`. Each logical metric lists its candidate sample
names, newest first; the first one present in a scrape wins.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    key: str  # tunebench's name, used as a time-series column
    kind: str  # gauge | counter | hist_sum | hist_count
    names: tuple[str, ...]
    combine: str = "sum"  # how series of several engines/labels combine: sum | mean | max


def _counter(key: str, *bases: str) -> Metric:
    names = tuple(n for base in bases for n in (f"{base}_total", base))
    return Metric(key, "counter", names)


def _histogram(key: str, base: str) -> tuple[Metric, Metric]:
    return (
        Metric(f"{key}_sum", "hist_sum", (f"{base}_sum",)),
        Metric(f"{key}_count", "hist_count", (f"{base}_count",)),
    )


CATALOGUE: tuple[Metric, ...] = (
    Metric("kv_usage", "gauge", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "mean"),
    Metric("running", "gauge", ("vllm:num_requests_running",)),
    Metric("waiting", "gauge", ("vllm:num_requests_waiting",)),
    # V0 only exposes a hit-rate gauge, not the counters.
    Metric("prefix_hit_rate_gauge", "gauge", ("vllm:gpu_prefix_cache_hit_rate",), "mean"),
    _counter("preemptions", "vllm:num_preemptions"),
    _counter("prefix_queries", "vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    _counter("prefix_hits", "vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
    _counter("prompt_tokens", "vllm:prompt_tokens"),
    _counter("generation_tokens", "vllm:generation_tokens"),
    _counter("requests_finished", "vllm:request_success"),
    _counter("spec_drafts", "vllm:spec_decode_num_drafts"),
    _counter("spec_draft_tokens", "vllm:spec_decode_num_draft_tokens"),
    _counter("spec_accepted_tokens", "vllm:spec_decode_num_accepted_tokens"),
    *_histogram("queue_time", "vllm:request_queue_time_seconds"),
    *_histogram("prefill_time", "vllm:request_prefill_time_seconds"),
    *_histogram("decode_time", "vllm:request_decode_time_seconds"),
    *_histogram("inference_time", "vllm:request_inference_time_seconds"),
    *_histogram("ttft_server", "vllm:time_to_first_token_seconds"),
)

CACHE_CONFIG_INFO = "vllm:cache_config_info"

COLUMNS: tuple[str, ...] = tuple(metric.key for metric in CATALOGUE)
