"""What GuideLLM is asked to send and what a point's report says beyond the client columns.

`data_args` turns a sweep file's `load.data` into GuideLLM's data settings (synthetic text
with shared-prefix buckets, multi-turn sessions, a dataset file); `prefix_evidence` and
`replay_evidence` read a shared-prefix or a replayed point's workload back from the
benchmark report, for points/prefix.py and points/trace.py to judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunebench.load.guidellm_report import measured_window, replay_requests
from tunebench.load.trace import Workload
from tunebench.points.cells import PrefixCells, RequestSample
from tunebench.points.prefix import requests_before_window, workload_columns, zipf_weights
from tunebench.points.trace import arrival_fidelity
from tunebench.spec.models import FileData, SessionsData, SharedPrefix, SyntheticData, TraceData

LoadData = SyntheticData | SessionsData | FileData | TraceData
CHAT = "/v1/chat/completions"


def data_args(data: LoadData, spec_dir: Path) -> dict[str, Any] | None:
    """GuideLLM's data settings; None for a trace (each replay point has a dataset of its own)."""
    if isinstance(data, TraceData):
        return None
    if isinstance(data, SessionsData):
        # GuideLLM's synthetic multi-turn data: each turn `prompt_tokens` new tokens, sent
        # with the earlier turns and their answers as history; `delay`: the think time
        sessions: dict[str, Any] = {
            "kind": "synthetic_text",
            "prompt_tokens": data.prompt_tokens,
            "output_tokens": data.output_tokens,
            "turns": data.turns,
        }
        if data.think_time_s:
            sessions["delay"] = data.think_time_s  # GuideLLM takes only a delay above 0
        if data.prompt_tokens_stdev:
            sessions["prompt_tokens_stdev"] = data.prompt_tokens_stdev
        if data.output_tokens_stdev:
            sessions["output_tokens_stdev"] = data.output_tokens_stdev
        return sessions
    if isinstance(data, SyntheticData):
        out: dict[str, Any] = {
            "kind": "synthetic_text",
            "prompt_tokens": data.prompt_tokens,
            "output_tokens": data.output_tokens,
        }
        if data.prompt_tokens_stdev:
            out["prompt_tokens_stdev"] = data.prompt_tokens_stdev
        if data.output_tokens_stdev:
            out["output_tokens_stdev"] = data.output_tokens_stdev
        if data.prefix is not None:
            out["prefix_buckets"] = prefix_buckets(data.prefix)
        return out
    path = (spec_dir / data.path).resolve()
    suffix = path.suffix.lower().lstrip(".")
    kind = {"jsonl": "json", "txt": "text"}.get(suffix, suffix)
    return {"kind": f"{kind}_file", "path": str(path)}


def prefix_buckets(prefix: SharedPrefix) -> list[dict[str, int]]:
    """GuideLLM's synthetic prefix buckets for shared prefixes: one bucket per group (one
    prefix of `tokens` tokens each), weighted by Zipf popularity (points/prefix.py
    `zipf_weights`, which the predicted hit rate draws by too); GuideLLM picks a bucket's
    prefix for each request with that weight."""
    return [
        {"bucket_weight": weight, "prefix_count": 1, "prefix_tokens": prefix.tokens}
        for weight in zipf_weights(prefix.groups, prefix.zipf)
    ]


def shared_prefix(data: LoadData) -> SharedPrefix | None:
    return data.prefix if isinstance(data, SyntheticData) else None


def prefix_evidence(
    prefix: SharedPrefix, benchmark: dict[str, Any], primed: dict[str, Any] | None
) -> PrefixCells:
    """A shared-prefix point's workload columns (points/prefix.py predicts its hit rate from
    them): the groups, how many the prime got answered (None: not primed) and the requests a
    warmup sent before the window."""
    start, end = measured_window(benchmark)
    totals = (benchmark.get("metrics") or {}).get("request_totals") or {}
    first_sent = (benchmark.get("scheduler_metrics") or {}).get("request_start_time")
    before = requests_before_window(
        float(first_sent) if first_sent is not None else None,
        start,
        end,
        int(totals.get("total") or 0),
    )
    # asked to prime but no word from the worker: as good as nothing primed, never "primed"
    answered = int((primed or {}).get("answered") or 0) if prefix.prime else None
    return workload_columns(prefix.groups, prefix.tokens, prefix.zipf, answered, before)


def replay_evidence(
    workload: Workload, benchmark: dict[str, Any], samples: list[RequestSample]
) -> dict[str, Any]:
    """A replay point's columns from its own workload, not GuideLLM's targets: each request
    found by the trace time it carried, its lag against its due time, and its samples given
    what was asked of it (points/trace.py judges them)."""
    lags = []
    for trace_time, clock_start, sent in replay_requests(benchmark):
        index = workload.index_of(trace_time)
        if index is not None and clock_start is not None and sent is not None:
            lags.append(sent - workload.scheduled(index, clock_start))
    for sample in samples:
        index = workload.index_of(sample.pop("trace_time", None))
        clock_start = sample.pop("clock_start", None)
        if index is None:
            continue
        request = workload.fitted.requests[index]
        if clock_start is not None:
            sample["scheduled_time"] = workload.scheduled(index, clock_start)
        sample["trace_prompt_tokens"] = request.prompt_tokens
        sample["trace_output_tokens"] = request.output_tokens
        sample["reuse_tokens"] = workload.reuse[index]
    return {
        "trace_requests": len(workload.fitted.requests),
        "trace_length_scale": round(workload.fitted.scale, 6),
        "trace_clamped": workload.fitted.clamped,
        **arrival_fidelity(lags),
    }
