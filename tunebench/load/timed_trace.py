"""A replay point as vLLM's `timed_trace` dataset, and its replay evidence read back.

`vllm bench serve --dataset-name timed_trace` plays a JSON-lines file, one request a line:
`timestamp` (times `--timed-trace-sec-multiplier`: seconds after its replay clock starts),
`input_length`, `output_length` and `hash_ids`. It builds every prompt itself and sends it
as token ids: one chunk of `--timed-trace-chunk-hash-size` tokens per hash id, drawn from the
vocabulary with a seed made of the id and the chunk's size, the last chunk cut to the
prompt's length. It takes no prompt of ours, so the vllm-bench driver's prompts are vLLM's,
not the word prompts GuideLLM sends (load/trace.py). The rest of the workload is the same:

- the requests, lengths and times: the slice fitted to the context as for GuideLLM (room
  kept for the tokenizer's BOS alike), the same lead, each request due at its trace time
  over the speed;
- the prefix structure: one hash id per block of `block_tokens` (scaled) tokens, equal
  wherever the trace's hash ids are equal, so requests with equal leading hash ids share
  that prefix token for token; blocks past the trace's ids belong to their request alone;
- exact lengths: token ids reach the model as sent (no BOS added), so the server counts
  `input_length` prompt tokens.

What differs, and is accounted for: vLLM draws a block cut short (a prompt's last block)
afresh for its size, so it shares nothing with the whole block of the same id, where
GuideLLM's prompts share its first tokens; the predicted reuse (`chunk_reuse`) follows
vLLM's chunks. vLLM seeds a chunk with Python's `hash()` of its id, which differs per
process unless PYTHONHASHSEED is fixed (the driver fixes it). The ids are made per point
(a hash of the seed, the point id and the block), so that no point finds another's blocks in
the server's prefix cache, as GuideLLM's points do not.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunebench.errors import LoadError
from tunebench.load.trace import fit_lengths
from tunebench.load.trace_formats import FittedRequest, FittedSlice, TraceRequest
from tunebench.load.trace_prompts import reuse_tokens
from tunebench.load.vllm_bench_report import in_start_order, indexed_samples
from tunebench.points.cells import RequestSample
from tunebench.points.trace import arrival_fidelity
from tunebench.store.files import write_atomic

#: A request's keys in the dataset file; each is passed as its --timed-trace-label-* flag,
#: so that a change of vLLM's defaults changes nothing here.
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class TimedTraceWorkload:
    """One replay point's requests as vLLM's timed_trace dataset."""

    point_id: str
    speed: float
    fitted: FittedSlice  # the whole slice, fitted to the context
    lead_s: float  # wall seconds from vLLM's replay clock's start to the slice's start
    count: int  # the first `count` requests are sent: those due before max_seconds
    hash_ids: list[list[int]]  # per sent request: one id per chunk of fitted.block_tokens
    reuse: list[int]  # per sent request: tokens it shares with a prompt sent before it

    @property
    def sec_multiplier(self) -> float:
        """--timed-trace-sec-multiplier: vLLM multiplies every timestamp by it."""
        return 1 / self.speed

    def timestamp(self, index: int) -> float:
        """Request `index`'s trace time as written: shifted by the lead (lead_s wall seconds
        are lead_s x speed trace seconds)."""
        return round(self.fitted.requests[index].time + self.lead_s * self.speed, 6)

    def due_s(self, index: int) -> float:
        """Seconds after vLLM's replay clock starts that request `index` is due: vLLM's own
        arithmetic (the written timestamp times the multiplier)."""
        return self.timestamp(index) * self.sec_multiplier

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "timestamp": self.timestamp(index),
                "input_length": request.prompt_tokens,
                "output_length": request.output_tokens,
                "hash_ids": self.hash_ids[index],
            }
            for index, request in enumerate(self.fitted.requests[: self.count])
        ]

    def write(self, path: Path) -> Path:
        write_atomic(path, "".join(json.dumps(row) + "\n" for row in self.rows()))
        return path

    def summary(self) -> dict[str, Any]:
        sent = self.fitted.requests[: self.count]
        return {
            "point_id": self.point_id,
            "speed": self.speed,
            "requests": len(self.fitted.requests),
            "sent": self.count,
            "span_s": round(self.fitted.span_s, 3),
            "lead_s": self.lead_s,
            "length_scale": self.fitted.scale,
            "block_tokens": self.fitted.block_tokens,
            "clamped": self.fitted.clamped,
            "prompt_tokens": sum(r.prompt_tokens for r in sent),
            "output_tokens": sum(r.output_tokens for r in sent),
            "prompts": "vllm timed_trace (token ids drawn by vLLM per hash id)",
        }

    @property
    def play_s(self) -> float:
        """Wall seconds from the replay clock's start to the last request's due time."""
        return self.due_s(self.count - 1)


def block_id(seed: int, point_id: str, key: str) -> int:
    """The hash id of one block of one point: 48 bits of a digest, a number every JSON
    reader keeps exact."""
    digest = hashlib.sha256(f"{seed}|{point_id}|{key}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def chunk_ids(request: FittedRequest, chunk: int, point_id: str, seed: int) -> list[int]:
    """One id per chunk of the prompt: the trace's hash id where it has one (equal trace
    ids, equal blocks), else a block of this request alone."""
    trace_ids = list(request.hash_ids or ())
    out = []
    for number in range(math.ceil(request.prompt_tokens / chunk)):
        key = (
            f"hash {trace_ids[number]}"
            if number < len(trace_ids)
            else f"own {request.index}.{number}"
        )
        out.append(block_id(seed, point_id, key))
    return out


def chunk_reuse(ids: list[list[int]], lengths: list[int], chunk: int) -> list[int]:
    """Per prompt (in sending order), the tokens it shares with a prompt sent before it, as
    vLLM builds them: chunk after chunk of `chunk` tokens, each drawn for (id, size), the
    last one cut to what is left of the length (so a cut chunk matches only one cut alike)."""
    sequences: list[list[Any]] = []
    for request_ids, length in zip(ids, lengths):
        tokens: list[Any] = []
        left = length
        for hash_id in request_ids:
            size = min(chunk, left)
            tokens += [(hash_id, size, position) for position in range(size)]
            left -= size
        sequences.append(tokens)
    return reuse_tokens(sequences)


def sent_before(fitted: FittedSlice, speed: float, lead_s: float, max_seconds: float | None) -> int:
    """How many requests of the slice are due before `max_seconds` (None: all of them)."""
    if max_seconds is None:
        return len(fitted.requests)
    return sum(1 for r in fitted.requests if lead_s + r.time / speed < max_seconds)


def build_timed_trace(
    requests: list[TraceRequest],
    context: int,
    scale: float | str,
    block_tokens: int,
    point_id: str,
    speed: float,
    *,
    min_prompt: int,
    seed: int = 42,
    lead_s: float = 0.0,
    max_seconds: float | None = None,
) -> TimedTraceWorkload:
    """One replay point's workload for vLLM's timed_trace. The slice is fitted as a whole
    (as for GuideLLM) and `max_seconds` then keeps the requests due before it: vllm bench
    has no time limit of its own, and lets the requests it sent finish."""
    fitted = fit_lengths(requests, context, scale, block_tokens, min_prompt)
    count = sent_before(fitted, speed, lead_s, max_seconds)
    if not count:
        raise LoadError(
            f"{point_id}: max_seconds {max_seconds:g} ends before the first request is due "
            f"({lead_s:g} s after the start); raise the profile's max_seconds"
        )
    chunk = fitted.block_tokens
    sent = fitted.requests[:count]
    ids = [chunk_ids(request, chunk, point_id, seed) for request in sent]
    reuse = chunk_reuse(ids, [r.prompt_tokens for r in sent], chunk)
    return TimedTraceWorkload(point_id, speed, fitted, lead_s, count, ids, reuse)


# -- evidence ---------------------------------------------------------------------------


def replay_clock(data: dict[str, Any]) -> float | None:
    """When vLLM's replay clock started, in the result's perf-counter seconds, at the
    latest; None when the result lacks send times or its duration.

    vLLM saves each request's send time (`start_times`) but not its replay clock's start
    (taken just after `benchmark_start_time`). Its `duration` runs from that moment to after
    the last answer, so the last answer's end minus the duration is no later than the clock's
    start: lags measured from it are upper bounds (over by the moments between vLLM's last
    answer and the end of its benchmark), never flattering."""
    starts, latencies = data.get("start_times"), data.get("latencies") or []
    duration = data.get("duration")
    if not starts or duration is None:
        return None
    ends = []
    for index, start in enumerate(starts):
        if start is None:
            continue
        # a failed request's latency is 0: its start still bounds the end from below
        latency = latencies[index] if index < len(latencies) else None
        ends.append(float(start) + float(latency or 0))
    return max(ends) - float(duration) if ends else None


def replay_evidence(
    workload: TimedTraceWorkload, data: dict[str, Any]
) -> tuple[dict[str, Any], list[RequestSample]]:
    """A replay point's trace columns and samples from vLLM's result: request i of vLLM's
    lists is request i of the dataset file; each one sent is timed against its due time,
    each one answered carries the lengths asked of it (points/trace.py judges them)."""
    answered = len(data.get("ttfts") or [])
    if answered != workload.count:
        raise LoadError(
            f"{workload.point_id}: vllm bench's result lists {answered} requests where its "
            f"timed_trace file holds {workload.count}; the requests cannot be matched to the trace"
        )
    clock = replay_clock(data)
    offset = data.get("epoch_offset")
    lags = []
    if clock is not None:
        for index, sent in enumerate(data["start_times"]):
            if sent is not None:
                lags.append(float(sent) - (clock + workload.due_s(index)))
    samples: list[RequestSample] = []
    for index, sample in indexed_samples(data):
        request = workload.fitted.requests[index]
        if clock is not None and offset is not None:
            sample["scheduled_time"] = clock + float(offset) + workload.due_s(index)
        sample["trace_prompt_tokens"] = request.prompt_tokens
        sample["trace_output_tokens"] = request.output_tokens
        sample["reuse_tokens"] = workload.reuse[index]
        samples.append(sample)
    columns = {
        "trace_requests": len(workload.fitted.requests),
        "trace_length_scale": round(workload.fitted.scale, 6),
        "trace_clamped": workload.fitted.clamped,
        **arrival_fidelity(lags),
    }
    return columns, in_start_order(samples)
