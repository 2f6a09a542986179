"""Recorded grids from a queueing law, with capacities known exactly (not measured).

A recorded grid (tests/fixtures/grid-cpu-repeats) grades a capacity search against a truth
measured from held-out windows by the same crossing rule the recorded deployment
interpolates with: a search can look right because it shares the rule. These grids instead
come from a law whose capacity is a formula:

- each configuration saturates at `service_rps` (mu); a server start scales it by a
  log-normal factor (the between-start spread);
- at arrival rate lambda < mu a request's TTFT is `base_ms` plus an exponential wait whose
  mean grows like a queue's, `wait_ms` / (1 - lambda / mu), so the q-quantile of TTFT is
  base + wait x ln(1 / (1 - q)) / (1 - lambda / mu) and the SLO "TTFT pq <= L" holds up to

      capacity = mu x (1 - wait x ln(1 / (1 - q)) / (L - base))      (`analytic_capacity`);

  a small `wait_ms` puts the capacity close to mu with a sharp knee, a large one far below
  it with a gradual rise;
- at lambda >= mu the queue grows without bound: TTFT of seconds.

Every window holds `requests_per_window` requests, so its own quantiles are precise; the
rates are a geometric grid up to the client's top rate. Written in the run format the
recorded deployment reads (points.csv, requests/, repeats), so benchmarks/capacity_accuracy.py and
benchmarks/tune_efficiency.py grade against `analytic_capacity` (`--synthetic SHAPE`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tunebench.points.columns import SERVER_COLUMNS
from tunebench.store.manifest import ConfigStatus, RunKind
from tunebench.store.run import RunStore

OUTPUT_TOKENS = 32
PROMPT_TOKENS = 64
SATURATED_S = 10.0  # the wait a request sees once the queue grows without bound


@dataclass(frozen=True)
class QueueingConfig:
    label: str
    args: dict[str, Any]
    service_rps: float  # mu: where the server saturates
    base_ms: float = 20.0  # TTFT with no queue
    wait_ms: float = 10.0  # mean queueing wait at no load (it grows like 1 / (1 - load))


@dataclass(frozen=True)
class QueueingGrid:
    """Configurations, the SLO, the rates recorded and how the starts differ."""

    configs: tuple[QueueingConfig, ...]
    slo_ms: float = 250.0
    quantile: float = 0.95
    top_rate: float = 16.0  # the client's top rate: capacities above it are capped
    rates: int = 16  # recorded rates, geometric from top_rate / 32 to top_rate
    repeats: int = 3
    spread: float = 0.03  # sd of log service rate between server starts
    requests_per_window: int = 400
    start_factors: dict[tuple[str, int], float] = field(default_factory=dict, compare=False)

    @property
    def slo(self) -> dict[str, Any]:
        return {"ttft_ms": {f"p{round(self.quantile * 100)}": self.slo_ms}}

    def recorded_rates(self) -> list[float]:
        return [float(r) for r in np.geomspace(self.top_rate / 32, self.top_rate, self.rates)]


def analytic_capacity(config: QueueingConfig, grid: QueueingGrid, factor: float = 1.0) -> float:
    """The highest arrival rate whose TTFT quantile meets the SLO, from the law (req/s)."""
    headroom_ms = grid.slo_ms - config.base_ms
    if headroom_ms <= 0:
        return 0.0
    share = 1.0 - config.wait_ms * math.log(1 / (1 - grid.quantile)) / headroom_ms
    return max(0.0, config.service_rps * factor * share)


def start_factor(grid: QueueingGrid, label: str, repeat: int) -> float:
    """The service-rate factor of one server start (a fixed draw per label and repeat)."""
    seed = int.from_bytes(f"{label}|{repeat}".encode(), "little") % (2**32)
    return float(math.exp(np.random.default_rng(seed).normal(0.0, grid.spread)))


def make_queueing_grid(root: Path, grid: QueueingGrid, name: str = "queueing", seed: int = 0):
    """Write the grid as a recorded run; returns the RunStore."""
    rng = np.random.default_rng(seed)
    store = RunStore.create(
        Path(root),
        RunKind.SWEEP,
        name,
        spec={"name": name, "slo": grid.slo},
        versions={},
        host={},
        deployment_kind="synthetic",
        varied_args=sorted({k for c in grid.configs for k in c.args}),
    )
    clock = 1_800_000_000.0
    with store.running("synthetic"):
        for index, config in enumerate(grid.configs, start=1):
            config_id = f"c{index}"
            store.update_config(
                config_id,
                label=config.label,
                args=config.args,
                status=ConfigStatus.COMPLETE,
                effective={},
            )
        for repeat in range(1, grid.repeats + 1):  # starts alternate, as a recording does
            for index, config in enumerate(grid.configs, start=1):
                clock += 60.0  # a deployment
                factor = start_factor(grid, config.label, repeat)
                for rate in grid.recorded_rates():
                    clock = _window(
                        store, f"c{index}", config, grid, rate, repeat, factor, clock, rng
                    )
    return store


def _window(
    store: RunStore,
    config_id: str,
    config: QueueingConfig,
    grid: QueueingGrid,
    rate: float,
    repeat: int,
    factor: float,
    clock: float,
    rng: np.random.Generator,
) -> float:
    seconds = grid.requests_per_window / rate
    count = max(1, int(rng.poisson(rate * seconds)))
    mu = config.service_rps * factor
    if rate < mu:
        wait_ms = rng.exponential(config.wait_ms / (1.0 - rate / mu), count)
    else:
        wait_ms = 1000.0 * (SATURATED_S + rng.exponential(1.0, count))
    ttft = config.base_ms + wait_ms
    itl = 5.0 * (1.0 + min(rate / mu, 1.0)) * np.ones(count)
    e2e = (ttft + (OUTPUT_TOKENS - 1) * itl) / 1000.0
    ends = np.sort(clock + rng.uniform(0, seconds, count))
    point_id = f"poisson-{rate:.4g}"
    store.add_requests(
        config_id,
        point_id,
        [
            {
                "ttft_ms": float(t),
                "itl_ms": float(i),
                "tpot_ms": float(i),
                "e2e_s": float(e),
                "prompt_tokens": PROMPT_TOKENS,
                "output_tokens": OUTPUT_TOKENS,
                "start_time": float(end - e),
                "end_time": float(end),
            }
            for t, i, e, end in zip(ttft, itl, e2e, ends)
        ],
        repeat=repeat,
    )
    store.add_point(
        {
            "run_id": store.run_id,
            "config_id": config_id,
            "config_label": config.label,
            "point_id": point_id,
            "load_kind": "poisson",
            "target": rate,
            "repeat": repeat,
            **{k: v for k, v in config.args.items()},
            "achieved_rps": count / seconds,
            "requests_ok": count,
            "requests_failed": 0,
            "duration_s": seconds,
            "ttft_mean_ms": float(ttft.mean()),
            **{f"ttft_p{p}_ms": float(np.percentile(ttft, p)) for p in (50, 90, 95, 99)},
            "itl_p50_ms": float(np.median(itl)),
            "e2e_p50_s": float(np.median(e2e)),
            "e2e_p95_s": float(np.percentile(e2e, 95)),
            "output_tok_s": count * OUTPUT_TOKENS / seconds,
            "prompt_tokens_mean": PROMPT_TOKENS,
            "output_tokens_mean": OUTPUT_TOKENS,
            **{c: None for c in SERVER_COLUMNS},
            "server_metrics": "absent",
            "valid": True,
            "invalid_reason": "",
            "start_time": clock,
            "end_time": clock + seconds,
        }
    )
    return clock + seconds + 2.0  # a load point's overhead


def sharp_knee_grid(top_rate: float = 16.0) -> QueueingGrid:
    """Configurations whose capacity lies from about 1 to beyond the client's top rate; the
    latency stays flat until close to saturation, then rises steeply (a sharp knee)."""
    configs = tuple(
        QueueingConfig(
            f"mns{seqs}-mnbt{tokens}",
            {"max-num-seqs": seqs, "max-num-batched-tokens": tokens},
            service,
        )
        for (seqs, tokens), service in zip(
            [(1, 32), (2, 32), (4, 32), (8, 32), (1, 128), (2, 128), (4, 128), (8, 128)],
            (2.0, 3.5, 6.0, 9.0, 4.0, 7.0, 12.0, 20.0),
        )
    )
    return QueueingGrid(configs, top_rate=top_rate)


# -- grids for the tuner: vLLM's defaults are not the best ------------------------------------

SEQS = (1, 2, 4, 8, 16, 32)
TOKENS = (32, 128, 512)
DEFAULTS = QueueingConfig("defaults", {}, 0.0)  # its service rate is set per shape


def _tuning_grid(service, defaults_share: float, wait_ms: float = 10.0) -> QueueingGrid:
    """Every max-num-seqs x max-num-batched-tokens, and vLLM's defaults at `defaults_share`
    of the best service rate; `service(seqs, tokens)` is the shape."""
    configs = [
        QueueingConfig(
            f"mns{seqs}-mnbt{tokens}",
            {"max-num-seqs": seqs, "max-num-batched-tokens": tokens},
            service(seqs, tokens),
            wait_ms=wait_ms,
        )
        for seqs in SEQS
        for tokens in TOKENS
    ]
    best = max(c.service_rps for c in configs)
    defaults = QueueingConfig("defaults", {}, best * defaults_share, wait_ms=wait_ms)
    return QueueingGrid((defaults, *configs), top_rate=best * 1.5, rates=14)


def knee_tuning_grid() -> QueueingGrid:
    """One best region (max-num-seqs 8-16 with 128 batched tokens), falling off on every
    side; the defaults at 0.8 of the best."""

    def service(seqs: int, tokens: int) -> float:
        seq_term = math.exp(-((math.log2(seqs) - 3.5) ** 2) / 4)
        token_term = math.exp(-((math.log2(tokens) - 7) ** 2) / 6)
        return 2.0 + 10.0 * seq_term * token_term

    return _tuning_grid(service, 0.8)


def plateau_tuning_grid() -> QueueingGrid:
    """Capacity rises with max-num-seqs up to 8 and stays flat, batched tokens matter little:
    many configurations near the best; the defaults at 0.75 of it."""

    def service(seqs: int, tokens: int) -> float:
        return (3.0 + 9.0 * min(seqs, 8) / 8) * (0.95 if tokens == 32 else 1.0)

    return _tuning_grid(service, 0.75)


def interacting_tuning_grid() -> QueueingGrid:
    """Two args that only work together: the best needs many sequences with a large token
    budget, or few with a small one (seqs x 16 near the budget); the defaults at 0.7."""

    def service(seqs: int, tokens: int) -> float:
        match = math.exp(-((math.log2(seqs * 16 / tokens)) ** 2) / 2)
        return 2.0 + 8.0 * match * (1 + math.log2(seqs) / 10)

    return _tuning_grid(service, 0.7)


def cliff_tuning_grid() -> QueueingGrid:
    """Capacity grows with max-num-seqs until the batch no longer fits the KV cache, then
    falls off a cliff (preemption: requests are evicted and recomputed); more batched
    tokens help up to 512 and cost KV space, moving the cliff one step down. The best is
    right at the edge (16 sequences with 128 tokens); the defaults at 0.7 of it."""

    def service(seqs: int, tokens: int) -> float:
        edge = 16 if tokens < 512 else 8  # the largest batch that still fits
        rate = 2.0 + 8.0 * math.log2(min(seqs, edge)) / 4 + (1.0 if tokens >= 128 else 0.0)
        return rate if seqs <= edge else rate * 0.3

    return _tuning_grid(service, 0.7)


TUNING_SHAPES = {
    "cliff": cliff_tuning_grid,
    "knee": knee_tuning_grid,
    "plateau": plateau_tuning_grid,
    "interacting": interacting_tuning_grid,
}
