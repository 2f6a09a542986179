"""A replayed-trace run in the real run format, built without a server.

The requests are the shipped trace cuts' own (sweeps/data/traces, the cuts
sweeps/cpu-trace.yaml replays), sliced and fitted to the context by the code a sweep uses
(load/trace.py); each request's due time is the replay's schedule (clock start, lead, trace
time over the speed), and its send lag, its latencies and the server's counts are drawn
here. The point columns come from points/trace.py over those samples, as a sweep computes
them. What it cannot prove is how a server or GuideLLM behaves: the CPU e2e test of the
trace sweep does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tunebench.load.trace import fit_lengths, load_slice
from tunebench.load.trace_formats import FittedSlice
from tunebench.points.columns import SERVER_COLUMNS
from tunebench.points.trace import arrival_fidelity, trace_columns
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore

TRACES = Path(__file__).resolve().parents[2] / "sweeps" / "data" / "traces"
CONTEXT = 512  # sweeps/cpu-trace.yaml's max-model-len
BLOCK_SIZE = 32
LEAD_S = 1.0  # load/guidellm.py REPLAY_LEAD_S: the first request is due this after the clock


@dataclass(frozen=True)
class ReplayedTrace:
    """One trace cut as cpu-trace.yaml slices it, and the speeds it is replayed at."""

    name: str
    file: str
    start: float
    seconds: float
    scale: float | str
    speeds: tuple[float, ...]


AZURE = ReplayedTrace("azure", "azure-2023-conv-180s.csv", 0.0, 30.0, "auto", (1.0, 2.0))
MOONCAKE = ReplayedTrace(
    "mooncake", "mooncake-fast25-conversation-180s.jsonl", 120.0, 60.0, 0.03125, (2.0,)
)


def fitted_slice(trace: ReplayedTrace, context: int = CONTEXT) -> FittedSlice:
    requests = load_slice(TRACES / trace.file, None, trace.start, None, trace.seconds)
    return fit_lengths(requests, context, trace.scale, 512, min_prompt=2)


def make_replay_run(
    root: Path,
    name: str = "replay-like",
    traces: tuple[ReplayedTrace, ...] = (AZURE, MOONCAKE),
    late_every: int = 0,
    seed: int = 0,
) -> RunStore:
    """Two configurations (prefix caching on and off) x each trace at each of its speeds.

    Requests are sent 1-9 ms after they are due; with `late_every` N, every Nth request of
    a point leaves 120 ms late (the point's late share then says so). The server counts
    every length as asked."""
    rng = np.random.default_rng(seed)
    slo = {"ttft_ms": {"p95": 500}}
    store = RunStore.create(
        Path(root),
        RunKind.SWEEP,
        name,
        spec={"name": name, "slo": slo},
        versions={"tunebench": "synthetic"},
        host={},
        deployment_kind="synthetic",
        varied_args=["enable-prefix-caching"],
    )
    fitted = {trace.name: fitted_slice(trace) for trace in traces}
    clock = 1_800_000_000.0
    with store.running("synthetic"):
        for index, caching in enumerate((True, False), start=1):
            config_id, label = f"c{index}", f"enable-prefix-caching={str(caching).lower()}"
            store.update_config(
                config_id,
                label=label,
                model="synthetic",
                status="complete",
                args={"enable-prefix-caching": caching, "max-model-len": CONTEXT},
                varied={"enable-prefix-caching": caching},
                effective={"block_size": BLOCK_SIZE},
            )
            for trace in traces:
                for speed in trace.speeds:
                    point_id = f"replay-{trace.name}-{speed:g}"
                    samples = _samples(fitted[trace.name], speed, clock, late_every, rng)
                    store.add_requests(config_id, point_id, samples)
                    store.add_point(
                        _row(store, config_id, label, point_id, speed, fitted[trace.name], samples)
                    )
                    clock = max(s["end_time"] for s in samples) + 5.0
    return store


def _samples(
    fitted: FittedSlice, speed: float, clock: float, late_every: int, rng
) -> list[dict[str, float]]:
    out = []
    for number, request in enumerate(fitted.requests, start=1):
        due = clock + LEAD_S + request.time / speed
        late = late_every and number % late_every == 0
        lag = 0.120 if late else float(rng.uniform(0.001, 0.009))
        ttft = float(rng.lognormal(np.log(40.0), 0.3))
        itl = 5.0
        e2e = (ttft + itl * (request.output_tokens - 1)) / 1000
        out.append(
            {
                "ttft_ms": ttft,
                "itl_ms": itl,
                "tpot_ms": itl,
                "e2e_s": e2e,
                "prompt_tokens": request.prompt_tokens,
                "output_tokens": request.output_tokens,
                "start_time": due + lag,
                "end_time": due + lag + e2e,
                "scheduled_time": due,
                "trace_prompt_tokens": request.prompt_tokens,
                "trace_output_tokens": request.output_tokens,
                "reuse_tokens": 0,
            }
        )
    return out


def _row(store, config_id, label, point_id, speed, fitted, samples) -> dict:
    start = min(s["scheduled_time"] for s in samples) - LEAD_S
    end = max(s["end_time"] for s in samples)
    duration = end - start
    ttft = np.array([s["ttft_ms"] for s in samples])
    lags = [s["start_time"] - s["scheduled_time"] for s in samples]
    output = sum(s["output_tokens"] for s in samples)
    fidelity = {**arrival_fidelity(lags), **trace_columns(samples, BLOCK_SIZE)}
    late = fidelity["arrival_late_share"] or 0.0
    return {
        "run_id": store.run_id,
        "config_id": config_id,
        "config_label": label,
        "point_id": point_id,
        "load_kind": "replay",
        "target": speed,
        "enable-prefix-caching": label.rsplit("=", 1)[1],
        "achieved_rps": len(samples) / duration,
        "achieved_concurrency": sum(s["e2e_s"] for s in samples) / duration,
        "requests_ok": len(samples),
        "requests_failed": 0,
        "requests_incomplete": 0,
        "duration_s": duration,
        "ttft_p50_ms": float(np.percentile(ttft, 50)),
        "ttft_p95_ms": float(np.percentile(ttft, 95)),
        "itl_p50_ms": 5.0,
        "itl_p95_ms": 5.0,
        "output_tok_s": output / duration,
        "prompt_tokens_mean": float(np.mean([s["prompt_tokens"] for s in samples])),
        "output_tokens_mean": output / len(samples),
        **{c: None for c in SERVER_COLUMNS},
        "trace_requests": len(fitted.requests),
        "trace_length_scale": round(fitted.scale, 6),
        "trace_clamped": fitted.clamped,
        **fidelity,
        "slo_met": float(np.percentile(ttft, 95)) <= 500,
        "valid": True,
        "client_limited": late > 0.05,
        "client_limited_reason": "replayed late" if late > 0.05 else "",
        "invalid_reason": "",
        "start_time": start,
        "end_time": end,
    }
