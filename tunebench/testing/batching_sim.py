"""A continuous-batching server as a discrete-event simulation: a second, independent law.

tunebench/testing/queueing.py states a capacity as a formula (a queue whose wait grows like
1 / (1 - load)); a search tuned on it can lean on that shape. This simulator has no formula:
it plays a vLLM-like engine step by step and its latency curve is whatever the scheduler
makes of the load.

- Requests arrive as a Poisson process (rate lambda), each with `prompt_tokens` to prefill
  and `output_tokens` to generate.
- Each engine step spends a token budget (`max_num_batched_tokens`): one decode token for
  every running sequence whose prefill is done, then the remaining prompt of sequences in
  prefill, then new sequences from the waiting queue (first come, first served) while fewer
  than `max_num_seqs` run and the KV cache can hold them. A prompt larger than what is left
  of the budget is split across steps (chunked prefill).
- A step lasts t0 + a x tokens + b x sequences, times a slowdown once the KV cache is more
  than `kv_knee` full or the step's tokens pass the bandwidth knee, times the server start's
  speed factor (log-normal, one draw per start: the between-start spread).
- A sequence's first token comes at the end of the step that finishes its prompt; each
  later step gives it one more; it leaves (freeing its slot and its blocks) with its last.

Everything is a function of the seed: the same seed gives the same requests and times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class StepCosts:
    """What one engine step costs, in the shape of a small model on a few CPU cores.

    t0: a step's fixed cost (scheduling, the Python around the model, sampling, the
    forward's per-layer launches): a few ms on CPU, whatever the batch.
    per_token: a forward's cost per token in the batch; CPU matmuls of a tiny model run
    at some 20k tokens/s once the batch is large enough to keep the cores busy.
    per_seq: per sequence in the step (attention over its own context, its sampler and
    detokenizer work), about 0.3 ms each on CPU.
    The knees are where a CPU stops scaling: a KV cache that is nearly full makes the
    allocator churn (vLLM would preempt and recompute; this model reserves a sequence's
    blocks up front and charges the slowdown instead), and past `bandwidth_knee` tokens
    a step's activations no longer fit in cache and every extra token streams from DRAM.
    """

    t0_ms: float = 4.0
    per_token_ms: float = 0.05
    per_seq_ms: float = 0.3
    block_tokens: int = 16  # vLLM's default KV block size
    kv_capacity_tokens: int = 4096  # a small KV cache: 256 blocks
    kv_knee: float = 0.90  # usage beyond which steps slow down ...
    kv_slowdown: float = 1.0  # ... by this much more at a full cache (linear in between)
    bandwidth_knee: int = 256  # tokens per step beyond which ...
    bandwidth_slope: float = 0.5  # ... each knee's worth of tokens costs this much more


@dataclass(frozen=True)
class Engine:
    """One server configuration: the two scheduler limits and the costs of a step."""

    max_num_seqs: int
    max_num_batched_tokens: int
    costs: StepCosts = StepCosts()
    speed: float = 1.0  # step times multiply by this (a server start's factor; > 1 slower)

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1 or self.speed <= 0:
            raise ValueError("max_num_seqs >= 1, max_num_batched_tokens >= 1, speed > 0")

    def step_seconds(self, tokens: int, seqs: int, kv_used: float) -> float:
        """How long one step of `tokens` over `seqs` sequences takes at KV usage `kv_used`."""
        c = self.costs
        ms = c.t0_ms + c.per_token_ms * tokens + c.per_seq_ms * seqs
        if kv_used > c.kv_knee:
            ms *= 1 + c.kv_slowdown * (kv_used - c.kv_knee) / (1 - c.kv_knee)
        if tokens > c.bandwidth_knee:
            ms *= 1 + c.bandwidth_slope * (tokens / c.bandwidth_knee - 1)
        return ms * self.speed / 1000.0

    def with_speed(self, speed: float) -> "Engine":
        return Engine(self.max_num_seqs, self.max_num_batched_tokens, self.costs, speed)


@dataclass(frozen=True)
class Workload:
    prompt_tokens: int = 64
    output_tokens: int = 32

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1 or self.output_tokens < 1:
            raise ValueError("prompt_tokens >= 1 and output_tokens >= 1")


@dataclass(frozen=True)
class Served:
    """Every request of one simulation, in arrival order (times in seconds)."""

    arrival: np.ndarray
    first_token: np.ndarray
    end: np.ndarray
    workload: Workload

    @property
    def ttft_ms(self) -> np.ndarray:
        return (self.first_token - self.arrival) * 1000.0

    @property
    def itl_ms(self) -> np.ndarray:
        """Mean gap between a request's tokens after its first (0 with a single token)."""
        gaps = max(self.workload.output_tokens - 1, 1)
        return (self.end - self.first_token) * 1000.0 / gaps

    @property
    def e2e_s(self) -> np.ndarray:
        return self.end - self.arrival

    def tail(self, skip: int) -> "Served":
        """The requests after the first `skip` (a warm-up the recording discards)."""
        return Served(self.arrival[skip:], self.first_token[skip:], self.end[skip:], self.workload)

    def records(self, clock: float = 0.0) -> list[dict[str, Any]]:
        """One dict per request in the run format's request columns (requests/<config>.csv);
        `clock` is the wall time the simulation's 0 stands for."""
        w = self.workload
        itl = self.itl_ms
        return [
            {
                "start_time": clock + float(a),
                "end_time": clock + float(e),
                "ttft_ms": float(t),
                "itl_ms": float(i),
                "tpot_ms": float(i),  # one token per step: the mean gap is the time per token
                "e2e_s": float(e - a),
                "prompt_tokens": w.prompt_tokens,
                "output_tokens": w.output_tokens,
            }
            for a, e, t, i in zip(self.arrival, self.end, self.ttft_ms, itl)
        ]


def start_speed(seed: int, sd: float = 0.04) -> float:
    """A server start's step-time factor: log-normal with `sd` (4%: what repeated starts of
    one configuration on a quiet machine differ by)."""
    return float(math.exp(np.random.default_rng(seed).normal(0.0, sd)))


def poisson_arrivals(rate: float, count: int, seed: int) -> np.ndarray:
    if rate <= 0 or count < 1:
        raise ValueError("rate > 0 and count >= 1 are required")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, count)
    return np.cumsum(gaps)


def simulate(
    engine: Engine, rate: float, count: int, seed: int, workload: Workload = Workload()
) -> Served:
    """`count` Poisson requests at `rate` req/s through `engine`, from an empty server."""
    return serve(engine, poisson_arrivals(rate, count, seed), workload)


def serve(
    engine: Engine,
    arrival: np.ndarray,
    workload: Workload = Workload(),
    slowdown: Callable[[float], float] | None = None,
) -> Served:
    """Play the engine over requests arriving at `arrival` (sorted seconds). `slowdown`, a
    function of the simulated time, multiplies the step times (a machine that changes speed
    under the server: 1.5 decodes 50% slower); a run of decode-only steps taken at once
    keeps the factor of its first step."""
    n = len(arrival)
    prompt, output = workload.prompt_tokens, workload.output_tokens
    costs = engine.costs
    blocks_total = max(costs.kv_capacity_tokens // costs.block_tokens, 1)
    # A sequence's blocks are reserved whole at admission (prompt and output): no
    # preemption to model, and the usage the slowdown reads changes only at admission
    # and exit, which lets decode-only stretches be taken in one jump below.
    blocks_each = math.ceil((prompt + output) / costs.block_tokens)
    if blocks_each > blocks_total:
        raise ValueError("one sequence does not fit the KV cache")
    first = np.full(n, np.nan)
    end = np.full(n, np.nan)
    # running sequences: [request index, prompt tokens left, tokens generated]
    running: list[list[int]] = []
    admitted = 0  # requests before this index have been admitted (FIFO)
    done = 0
    blocks_used = 0
    now = 0.0
    while done < n:
        arrived = int(np.searchsorted(arrival, now, side="right"))
        if not running and admitted >= arrived:  # idle: jump to the next arrival
            now = max(now, float(arrival[admitted]))
            continue
        budget = engine.max_num_batched_tokens
        # vLLM schedules the running queue before the waiting one: decodes first, ...
        decoding = [s for s in running if s[1] == 0][:budget]
        budget -= len(decoding)
        chunks: list[tuple[list[int], int]] = []
        for seq in running:  # ... then prompts already under way, ...
            if seq[1] > 0 and budget > 0:
                take = min(seq[1], budget)
                chunks.append((seq, take))
                budget -= take
        while (  # ... then new sequences while a slot, the budget and the cache allow
            admitted < arrived
            and budget > 0
            and len(running) < engine.max_num_seqs
            and blocks_used + blocks_each <= blocks_total
        ):
            seq = [admitted, prompt, 0]
            running.append(seq)
            blocks_used += blocks_each
            admitted += 1
            take = min(prompt, budget)
            chunks.append((seq, take))
            budget -= take
        tokens = len(decoding) + sum(take for _, take in chunks)
        seqs = len(decoding) + len(chunks)
        if seqs == 0:  # nothing fits (cannot happen with a budget >= 1): wait for an arrival
            now = float(arrival[min(admitted, n - 1)])
            continue
        step = engine.step_seconds(tokens, seqs, blocks_used / blocks_total)
        if slowdown is not None:
            step *= slowdown(now)
        steps = 1
        if not chunks:
            # Decode-only: every following step is the same until a sequence finishes or
            # a new arrival can be admitted; take those steps at once.
            steps = min(output - s[2] for s in decoding)
            can_admit = (
                len(running) < engine.max_num_seqs and blocks_used + blocks_each <= blocks_total
            )
            if can_admit and admitted < arrived:
                steps = 1  # the budget alone held a waiting request back: step by step
            elif can_admit and arrived < n:
                # the step that starts at or after the next arrival admits it
                steps = min(steps, max(1, math.ceil((arrival[arrived] - now) / step)))
        now += step * steps
        for seq in decoding:
            seq[2] += steps
        for seq, take in chunks:
            seq[1] -= take
            if seq[1] == 0:  # its prompt is done: this step sampled its first token
                seq[2] = 1
                first[seq[0]] = now
        finished = [s for s in running if s[2] >= output]
        for seq in finished:
            end[seq[0]] = now
            blocks_used -= blocks_each
        if finished:
            running = [s for s in running if s[2] < output]
            done += len(finished)
    return Served(np.asarray(arrival, dtype=float), first, end, workload)


def ttft_quantile(served: Served, q: float) -> float:
    """The q-quantile of TTFT in ms (numpy's default, linear between order statistics)."""
    return float(np.quantile(served.ttft_ms, q))


def saturation_rps(engine: Engine, workload: Workload = Workload()) -> float:
    """Where the server saturates, roughly: the completion rate with the queue never empty
    (one long overloaded run). Used to place rates, never as a capacity."""
    count = 40 * engine.max_num_seqs + 200
    served = serve(engine, np.zeros(count), workload)  # everyone waiting at time 0
    half = count // 2  # skip the ramp-up: the steady rate between the middle and the end
    return float((count - half) / (served.end[-1] - served.end[half - 1]))
