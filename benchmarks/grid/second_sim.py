"""The second simulator's grid: a continuous-batching DES (tunebench/testing/batching_sim.py)
over max-num-seqs x max-num-batched-tokens and vLLM's defaults, each configuration's truth
from long simulations, and a recording of its server starts in the run format a noisy
recorded deployment reads (tunebench/recorded/noisy.py). benchmarks/capacity_second_sim.py
grades the capacity search on it; benchmarks/tune_efficiency.py tunes on it.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tunebench.points.columns import SERVER_COLUMNS
from tunebench.store.manifest import ConfigStatus, RunKind
from tunebench.store.run import RunStore
from tunebench.testing.batching_sim import (
    Engine,
    StepCosts,
    Workload,
    poisson_arrivals,
    serve,
    simulate,
    start_speed,
)

SEQS = (1, 2, 4, 8, 16)
TOKENS = (32, 64, 128, 512)
# vLLM V1's defaults for an API server on a small device; they run into the KV cache
# (256 sequences of 96 tokens do not fit 4096 tokens), which the grid's own never do.
DEFAULTS = {"max-num-seqs": 256, "max-num-batched-tokens": 2048}
SLO_MS, QUANTILE = 150.0, 0.9
SLO = {"ttft_ms": {"p90": SLO_MS}}
CACHE = Path(tempfile.gettempdir()) / "tunebench-second-sim"
TRUTH_REQUESTS = 20_000  # capacity_second_sim.py --truth-requests


@dataclass(frozen=True)
class Recording:
    """How the grid is recorded: rates around each configuration's truth, windows of
    ~`window_requests` after a warm-up of `warmup_requests`, on `repeats` server starts."""

    rates: int = 5
    low: float = 0.5  # x the truth
    high: float = 1.6
    window_requests: int = 60
    warmup_requests: int = 20
    repeats: int = 3
    speed_sd: float = 0.04


def grid_engines(costs: StepCosts = StepCosts()) -> list[tuple[str, dict[str, int], Engine]]:
    defaults = Engine(DEFAULTS["max-num-seqs"], DEFAULTS["max-num-batched-tokens"], costs)
    out = [("defaults", {}, defaults)]
    for seqs in SEQS:
        for tokens in TOKENS:
            args = {"max-num-seqs": seqs, "max-num-batched-tokens": tokens}
            out.append((f"mns{seqs}-mnbt{tokens}", args, Engine(seqs, tokens, costs)))
    return out


# -- the truth ------------------------------------------------------------------------------


def long_p90(engine: Engine, rate: float, count: int, seed: int) -> float:
    """TTFT p90 (ms) of one long run at `rate`, its first tenth dropped (the queue's ramp
    from empty). Every rate scales the same arrival draws (common random numbers), so the
    curve over rates is smooth and its crossing is not moved by draws."""
    served = simulate(engine, rate, count, seed)
    return float(np.quantile(served.tail(count // 10).ttft_ms, QUANTILE))


def true_capacity(engine: Engine, count: int, seed: int = 0) -> tuple[float, list[list[float]]]:
    """The highest rate whose long-run TTFT p90 meets the SLO, and the (rate, p90) it rests
    on: a coarse geometric scan (a tenth of the requests) finds the knee within 20%, then 9
    rates 2.5% apart across it at `count` requests each; the crossing is linear between the
    last rate that met it and the first that missed (a running maximum, as
    `sustained_capacity` takes it)."""
    coarse = max(count // 10, 1000)
    rate, passed = 0.25, None
    while rate < 2000 and long_p90(engine, rate, coarse, seed) <= SLO_MS:
        passed, rate = rate, rate * 1.2
    low = passed if passed is not None else rate / 4
    curve: list[list[float]] = []
    for _ in range(8):  # widen until the fine grid holds the crossing (coarse draws can miss)
        rates = np.linspace(low, rate, 9)
        values = np.maximum.accumulate([long_p90(engine, float(r), count, seed) for r in rates])
        curve = [[float(r), float(v)] for r, v in zip(rates, values)]
        if values[0] > SLO_MS:
            low, rate = low / 1.2, low
        elif values[-1] <= SLO_MS:
            low, rate = rate, rate * 1.2
        else:
            break
    else:
        raise RuntimeError(f"no crossing found for {engine}")
    i = int(np.argmax(values > SLO_MS))
    (r0, v0), (r1, v1) = curve[i - 1], curve[i]
    return r0 + (SLO_MS - v0) / (v1 - v0) * (r1 - r0), curve


def truths_cached(count: int, costs: StepCosts = StepCosts()) -> dict[str, dict[str, Any]]:
    """Every configuration's truth, computed once per simulator setting and request count."""
    engines = grid_engines(costs)
    key = json.dumps(
        [count, SLO_MS, QUANTILE, [(label, asdict(e)) for label, _, e in engines]],
        sort_keys=True,
        default=str,
    )
    path = CACHE / f"truth-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if path.exists():
        return json.loads(path.read_text())
    out = {}
    for label, _args, engine in engines:
        began = time.monotonic()
        rate, curve = true_capacity(engine, count)
        out[label] = {"rate": rate, "curve": curve}
        print(f"  truth {label:<16} {rate:7.3f} req/s ({time.monotonic() - began:.0f} s)")
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    return out


# -- the recording --------------------------------------------------------------------------


def window_rates(knee: float, rec: Recording) -> list[float]:
    return [float(r) for r in np.geomspace(rec.low * knee, rec.high * knee, rec.rates)]


def start_seed(label: str, repeat: int, salt: int = 0) -> int:
    return int.from_bytes(hashlib.sha256(f"{label}|{repeat}|{salt}".encode()).digest()[:4], "big")


def record_window(
    engine: Engine, rate: float, rec: Recording, seed: int
) -> tuple[float, list[dict[str, Any]]]:
    """One window from an empty server: Poisson arrivals for the warm-up's length, then
    for the window's (~`window_requests` at `rate`), then none (the client stops sending;
    what is in flight finishes). Returns the window's seconds and its requests."""
    warmup_s, window_s = rec.warmup_requests / rate, rec.window_requests / rate
    arrivals = poisson_arrivals(rate, int(3 * (rec.warmup_requests + rec.window_requests)), seed)
    arrivals = arrivals[arrivals < warmup_s + window_s]
    served = serve(engine, arrivals, Workload())
    skip = int(np.searchsorted(arrivals, warmup_s))
    return window_s, served.tail(skip).records(-warmup_s)


def make_batching_grid(
    root: Path,
    knees: dict[str, float],
    rec: Recording = Recording(),
    name: str = "batching",
    costs: StepCosts = StepCosts(),
) -> RunStore:
    """The grid as a recorded run (points.csv, requests/, repeats = server starts) whose
    windows sit around each configuration's truth `knees[label]`."""
    engines = [e for e in grid_engines(costs) if e[0] in knees]
    store = RunStore.create(
        Path(root),
        RunKind.SWEEP,
        name,
        spec={"name": name, "slo": SLO},
        versions={},
        host={},
        deployment_kind="synthetic",
        varied_args=sorted({k for _, args, _ in engines for k in args}),
    )
    clock = 1_800_000_000.0
    with store.running("synthetic"):
        for index, (label, args, _) in enumerate(engines, start=1):
            store.update_config(
                f"c{index}", label=label, args=args, status=ConfigStatus.COMPLETE, effective={}
            )
        for repeat in range(1, rec.repeats + 1):  # starts alternate, as a recording does
            for index, (label, args, engine) in enumerate(engines, start=1):
                clock += 60.0  # a deployment
                started = engine.with_speed(start_speed(start_seed(label, repeat), rec.speed_sd))
                for k, rate in enumerate(window_rates(knees[label], rec)):
                    seconds, requests = record_window(
                        started, rate, rec, start_seed(label, repeat, k + 1)
                    )
                    _add_window(
                        store, f"c{index}", label, args, rate, repeat, seconds, requests, clock
                    )
                    clock += seconds + 2.0  # a load point's overhead
    return store


def _add_window(
    store: RunStore,
    config_id: str,
    label: str,
    args: dict[str, int],
    rate: float,
    repeat: int,
    seconds: float,
    requests: list[dict[str, Any]],
    clock: float,
) -> None:
    for r in requests:
        r["start_time"] += clock
        r["end_time"] += clock
    point_id = f"poisson-{rate:.4g}"
    store.add_requests(config_id, point_id, requests, repeat=repeat)
    ttft = np.array([r["ttft_ms"] for r in requests])
    itl = np.array([r["itl_ms"] for r in requests])
    e2e = np.array([r["e2e_s"] for r in requests])
    store.add_point(
        {
            "run_id": store.run_id,
            "config_id": config_id,
            "config_label": label,
            "point_id": point_id,
            "load_kind": "poisson",
            "target": rate,
            "repeat": repeat,
            **args,
            "achieved_rps": len(requests) / seconds,
            "requests_ok": len(requests),
            "requests_failed": 0,
            "duration_s": seconds,
            "ttft_mean_ms": float(ttft.mean()),
            **{f"ttft_p{p}_ms": float(np.percentile(ttft, p)) for p in (50, 90, 95, 99)},
            "itl_p50_ms": float(np.median(itl)),
            "itl_mean_ms": float(itl.mean()),
            "e2e_p50_s": float(np.median(e2e)),
            "e2e_p95_s": float(np.percentile(e2e, 95)),
            "output_tok_s": len(requests) * Workload().output_tokens / seconds,
            "prompt_tokens_mean": Workload().prompt_tokens,
            "output_tokens_mean": Workload().output_tokens,
            **{c: None for c in SERVER_COLUMNS},
            "server_metrics": "absent",
            "valid": True,
            "invalid_reason": "",
            "start_time": clock,
            "end_time": clock + seconds,
        }
    )
