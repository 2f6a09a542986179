"""Recorded request traces as replayable workloads: read, slice, fit, build the prompts.

A trace row is one real request: when it arrived and how many tokens it sent and received
(Azure LLM inference 2023, Mooncake FAST'25, BurstGPT, or tunebench's own JSONL); Mooncake
rows also list one hash id per 512-token block of the prompt, equal ids meaning an equal
prefix up to and including that block. No trace holds prompt text, so the prompts are built
here, as token ids of the run's tokenizer:

- every hash id becomes one block of tokens, the same block wherever the id appears, so
  requests with equal leading ids share that prefix token for token and a server's prefix
  cache sees exactly the reuse the trace recorded; blocks that follow the same block start
  with different tokens, so a shared prefix ends where the trace says it does;
- the tokens are whole-word tokens (" word") of the tokenizer, which its pre-tokenizer
  splits apart again, so the text decodes and re-encodes to the same ids (checked per
  prompt): a server counts exactly the prompt length asked for;
- the lengths are scaled (and, beyond the context, clamped) to the served model's context;
  the factor is recorded with every point (`trace_length_scale`).

Each replayed point gets its own blocks (a salt per point), so a server that already
served one point's prompts does not find the next point's in its cache.

The builder knows neither load generator: `guidellm.py` writes a workload as a dataset
file GuideLLM's replay profile plays, and reads the per-request evidence back against it;
`timed_trace.py` writes the same slice, fitted alike, as vLLM's `timed_trace` dataset, whose
prompts vLLM builds itself.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunebench.errors import LoadError
from tunebench.load.trace_formats import (
    FittedRequest,
    FittedSlice,
    TraceFormatError,
    TraceRequest,
    read_trace,
)
from tunebench.load.trace_prompts import PromptBuilder, reuse_tokens
from tunebench.store.files import write_atomic

# -- slicing and fitting ----------------------------------------------------------------


def slice_trace(
    requests: list[TraceRequest],
    start: float = 0.0,
    count: int | None = None,
    seconds: float | None = None,
    path: Path | str = "trace",
) -> list[TraceRequest]:
    """The requests from `start` seconds after the trace's first one: the next `count`
    requests, or those within `seconds`, or all; times from the slice's start."""
    origin = requests[0].time + start
    chosen = [r for r in requests if r.time >= origin]
    if seconds is not None:
        chosen = [r for r in chosen if r.time < origin + seconds]
    if count is not None:
        chosen = chosen[:count]
    if not chosen:
        span = requests[-1].time - requests[0].time
        raise TraceFormatError(
            f"{path}: the slice (start {start:g} s) holds no request; the trace spans "
            f"{span:.0f} s: lower load.data.start or widen the slice"
        )
    return [
        TraceRequest(r.time - origin, r.prompt_tokens, r.output_tokens, r.hash_ids, r.line)
        for r in chosen
    ]


def auto_scale(requests: list[TraceRequest], context: int) -> float:
    """The largest factor <= 1 at which every request fits `context` (prompt + output)."""
    longest = max(r.prompt_tokens + r.output_tokens for r in requests)
    return min(1.0, context / longest) if longest else 1.0


def fit_lengths(
    requests: list[TraceRequest],
    context: int,
    scale: float | str = "auto",
    block_tokens: int = 512,
    min_prompt: int = 1,
) -> FittedSlice:
    """Scale every length by `scale` (auto: `auto_scale`), at least `min_prompt` prompt and 1
    output token; a request still longer than `context` has its output cut to a quarter of
    the context at most, then its prompt to what is left (counted as clamped)."""
    factor = auto_scale(requests, context) if scale == "auto" else float(scale)
    if context < min_prompt + 1:
        raise TraceFormatError(
            f"the context ({context} tokens) cannot hold a prompt of {min_prompt} tokens and "
            "one output token; raise max-model-len or load.data.context"
        )
    fitted, clamped = [], 0
    for index, request in enumerate(requests):
        prompt = max(min_prompt, round(request.prompt_tokens * factor))
        output = max(1, round(request.output_tokens * factor))
        over = prompt + output > context
        if over:
            output = min(output, max(1, context // 4))
            prompt = max(min_prompt, min(prompt, context - output))
            clamped += 1
        fitted.append(
            FittedRequest(
                index,
                request.time,
                prompt,
                output,
                request.prompt_tokens,
                request.output_tokens,
                request.hash_ids,
                over,
            )
        )
    return FittedSlice(fitted, factor, clamped, max(1, round(block_tokens * factor)))


# -- a point's workload -----------------------------------------------------------------


@dataclass
class Workload:
    """One replay point's requests as sent: the schedule, the lengths, the prompts."""

    point_id: str
    speed: float
    fitted: FittedSlice
    texts: list[str]
    reuse: list[int]  # per request: tokens an unbounded prefix cache could hold
    inexact: int  # prompts whose text does not re-encode to their ids
    # wall seconds between the replay clock's start and the slice's start (see
    # `build_workload`): every trace time is written shifted by lead_s x speed
    lead_s: float = 0.0
    times: list[float] = field(default_factory=list)  # unique trace seconds, as written

    def __post_init__(self) -> None:
        # GuideLLM reports each request's trace time: unique times name the request
        times, last = [], -math.inf
        shift = self.lead_s * self.speed
        for request in self.fitted.requests:
            stamp = round(max(request.time + shift, last + 1e-6), 6)
            times.append(stamp)
            last = stamp
        self.times = times
        self._by_time = {stamp: index for index, stamp in enumerate(times)}

    def index_of(self, trace_time: float | None) -> int | None:
        if trace_time is None:
            return None
        return self._by_time.get(round(float(trace_time), 6))

    def scheduled(self, index: int, start: float) -> float:
        """Epoch second request `index` is due when the replay clock started at `start`."""
        return start + self.times[index] / self.speed

    def write_dataset(self, path: Path) -> Path:
        """The workload as GuideLLM's dataset: prompt, its lengths and its trace time."""
        lines = [
            json.dumps(
                {
                    "prompt": text,
                    "prompt_tokens_count": request.prompt_tokens,
                    "output_tokens_count": request.output_tokens,
                    "relative_timestamp": stamp,
                }
            )
            for request, text, stamp in zip(self.fitted.requests, self.texts, self.times)
        ]
        write_atomic(path, "\n".join(lines) + "\n")
        return path

    def summary(self) -> dict[str, Any]:
        requests = self.fitted.requests
        return {
            "point_id": self.point_id,
            "speed": self.speed,
            "requests": len(requests),
            "span_s": round(self.fitted.span_s, 3),
            "lead_s": self.lead_s,
            "length_scale": self.fitted.scale,
            "block_tokens": self.fitted.block_tokens,
            "clamped": self.fitted.clamped,
            "prompts_inexact": self.inexact,
            "prompt_tokens": sum(r.prompt_tokens for r in requests),
            "output_tokens": sum(r.output_tokens for r in requests),
        }


def load_slice(
    path: Path,
    trace_format: str | None,
    start: float,
    count: int | None,
    seconds: float | None,
) -> list[TraceRequest]:
    """A trace file's slice; TraceFormatError names the file and line of a problem."""
    return slice_trace(read_trace(path, trace_format), start, count, seconds, path)


def build_workload(
    requests: list[TraceRequest],
    builder: PromptBuilder,
    context: int,
    scale: float | str,
    block_tokens: int,
    point_id: str,
    speed: float,
    seed: int = 42,
    lead_s: float = 0.0,
) -> Workload:
    """One replay point's workload; its first request is due `lead_s` wall seconds after the
    replay clock starts (a load generator that needs a moment to send its first request),
    the rest keep the trace's gaps."""
    fitted = fit_lengths(requests, context, scale, block_tokens, builder.specials + 1)
    contents = builder.contents(fitted, salt=point_id, seed=seed)
    texts = [builder.text(content) for content in contents]
    inexact = sum(not builder.exact(content) for content in contents)
    full = [[*builder.prefix, *content, *builder.suffix] for content in contents]
    return Workload(point_id, speed, fitted, texts, reuse_tokens(full), inexact, lead_s)


def slice_for(trace: Any, spec_dir: Path) -> list[TraceRequest]:
    """The requests of a sweep's `load.data` trace (paths relative to the sweep file); a bad
    trace file is a LoadError with the reader's one line. Both drivers replay through it."""
    try:
        return load_slice(
            (spec_dir / trace.path).resolve(),
            trace.format,
            trace.start,
            trace.requests,
            trace.seconds,
        )
    except TraceFormatError as exc:
        raise LoadError(str(exc)) from None


def replay_context(point_id: str, trace: Any, model_context: int | None) -> int:
    """The context a replayed trace's lengths are fitted to: the trace's own, else the
    model's max-model-len; neither is a LoadError naming the fix."""
    context = trace.context or model_context
    if context is None:
        raise LoadError(
            f"{point_id}: a replayed trace needs the model's context: set "
            "max-model-len or load.data.context"
        )
    return int(context)
