"""Synthetic request streams with a known truth, for calibrating the compare statistics.

A closed loop of `streams` clients sends requests back to back for a window; each request
has a TTFT, an inter-token latency, a fixed number of output tokens and an end time. The
latencies are either independent draws (`iid`) or autocorrelated the way a queue makes them
(`queue`: TTFT = a base plus the waiting time of a Lindley recursion at 55% utilisation, so
bursts of slow requests come together; ITL follows an AR(1) in log space with rho 0.7).
`slowdown` multiplies every latency of the stream (so B's throughput falls by 1/(1+s)).
`run_sd` adds what a new server start changes: every latency of the stream is multiplied
by one lognormal factor with that standard deviation of its log (0: no run-to-run spread).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

OUTPUT_TOKENS = 32
# The queue's utilisation: its TTFT has an integrated autocorrelation time of about 7,
# the high end of what real vLLM-CPU runs showed (1 to 8.5 over the demo sweep's points).
QUEUE_LOAD = 0.55
ITL_RHO = 0.7
BASE_TTFT_MS = 40.0
BASE_ITL_MS = 5.0


@dataclass(frozen=True)
class Stream:
    ttft_ms: np.ndarray  # in order of start
    itl_ms: np.ndarray
    e2e_s: np.ndarray
    output_tokens: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    window_s: float
    failed: int = 0

    @property
    def n(self) -> int:
        return len(self.ttft_ms)

    def rate(self) -> float:
        return self.n / self.window_s

    def tokens_per_s(self) -> float:
        return float(self.output_tokens.sum()) / self.window_s


def _latencies(n: int, kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind == "iid":
        ttft = BASE_TTFT_MS * rng.lognormal(0.0, 0.35, n)
        itl = BASE_ITL_MS * rng.lognormal(0.0, 0.2, n)
        return ttft, itl
    if kind != "queue":
        raise ValueError(f"kind {kind!r}: use iid or queue")
    service = rng.exponential(20.0, n)  # ms
    gaps = rng.exponential(20.0 / QUEUE_LOAD, n)
    wait = np.zeros(n)
    for k in range(1, n):
        wait[k] = max(0.0, wait[k - 1] + service[k - 1] - gaps[k - 1])
    ttft = 0.5 * BASE_TTFT_MS + service + wait
    log_itl = np.zeros(n)
    shocks = rng.normal(0.0, 0.2 * np.sqrt(1 - ITL_RHO**2), n)
    log_itl[0] = rng.normal(0.0, 0.2)
    for k in range(1, n):
        log_itl[k] = ITL_RHO * log_itl[k - 1] + shocks[k]
    return ttft, BASE_ITL_MS * np.exp(log_itl)


def request_stream(
    n: int,
    kind: str = "iid",
    slowdown: float = 0.0,
    streams: int = 4,
    error_rate: float = 0.0,
    seed: int = 0,
    run_sd: float = 0.0,
) -> Stream:
    """About `n` requests completed in a window of a closed loop of `streams` clients."""
    rng = np.random.default_rng(seed)
    pool = int(n * 1.6) + 4 * streams  # more than the window will hold
    ttft, itl = _latencies(pool, kind, rng)
    # the run's own factor comes from a second generator so that run_sd=0 and run_sd>0
    # streams of one seed share their request-to-request draws
    run_factor = float(np.exp(np.random.default_rng([seed, 7]).normal(0.0, run_sd)))
    scale = (1 + slowdown) * run_factor
    ttft, itl = ttft * scale, itl * scale
    e2e = (ttft + (OUTPUT_TOKENS - 1) * itl) / 1000
    mean_e2e = (BASE_TTFT_MS + (OUTPUT_TOKENS - 1) * BASE_ITL_MS) / 1000
    window = n * mean_e2e / streams  # sized so the baseline completes about n requests
    starts, ends, order = np.zeros(pool), np.zeros(pool), []
    clocks = np.zeros(streams)
    for index in range(pool):  # each request goes to the stream that is free first
        stream = int(np.argmin(clocks))
        starts[index] = clocks[stream]
        clocks[stream] += e2e[index]
        ends[index] = clocks[stream]
        order.append(index)
    inside = ends <= window
    failed = int(rng.binomial(int(inside.sum()), error_rate)) if error_rate else 0
    return Stream(
        ttft[inside],
        itl[inside],
        e2e[inside],
        np.full(int(inside.sum()), OUTPUT_TOKENS),
        starts[inside],
        ends[inside],
        window,
        failed,
    )


def stream_side(
    name: str,
    seed: int,
    slowdown: float = 0.0,
    n: int = 200,
    kind: str = "iid",
    failed: int = 0,
    points: tuple[int, ...] = (1, 4, 8),
    repeats: int = 1,
    run_sd: float = 0.0,
    **row: Any,
):
    """A compare side measured from synthetic request streams: one points.csv row per load
    point and repeat, with its per-request samples (as a run stores them)."""
    import pandas as pd

    from tunebench.analysis.compare import Side

    point_rows, requests = [], []
    for index, target in enumerate(points):
        for repeat in range(1, repeats + 1):
            stream = request_stream(
                n, kind, slowdown, seed=seed * 1000 + index * 10 + repeat, run_sd=run_sd
            )
            point_id = f"concurrent-{target}"
            start = 1_800_000_000.0 + 100 * index + 1000 * repeat
            requests.append(
                pd.DataFrame(
                    {
                        "config_id": "c1",
                        "point_id": point_id,
                        "repeat": repeat,
                        "ttft_ms": stream.ttft_ms,
                        "itl_ms": stream.itl_ms,
                        "e2e_s": stream.e2e_s,
                        "output_tokens": stream.output_tokens,
                        "start_time": start + stream.start_s,
                        "end_time": start + stream.end_s,
                    }
                )
            )
            point_rows.append(
                {
                    "config_id": "c1",
                    "config_label": "c",
                    "point_id": point_id,
                    "repeat": repeat,
                    "load_kind": "concurrent",
                    "target": float(target),
                    "requests_ok": stream.n,
                    "requests_failed": failed,
                    "start_time": start,
                    "end_time": start + stream.window_s,
                    "ttft_p50_ms": float(np.quantile(stream.ttft_ms, 0.5)),
                    "ttft_p95_ms": float(np.quantile(stream.ttft_ms, 0.95)),
                    "itl_p50_ms": float(np.quantile(stream.itl_ms, 0.5)),
                    "itl_p95_ms": float(np.quantile(stream.itl_ms, 0.95)),
                    "e2e_p95_s": float(np.quantile(stream.e2e_s, 0.95)),
                    "output_tok_s": stream.tokens_per_s(),
                    "achieved_rps": stream.rate(),
                    "valid": True,
                    "client_limited": False,
                    **row,
                }
            )
    return Side(name, pd.DataFrame(point_rows), pd.concat(requests, ignore_index=True))
