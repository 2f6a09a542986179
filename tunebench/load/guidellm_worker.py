"""Child process that runs every load point of one server configuration with GuideLLM.

Started by `guidellm.py` as `python -m tunebench.load.guidellm_worker JOB.json` in its own
process group, while the server is still starting: it imports GuideLLM (~6 s of CPU), says
{"event": "imported"}, then waits for one JSON line on stdin with the server's `target`
and `model` (or end of input: exit). It pays GuideLLM's start-up once for all points, runs
the job's groups in order (one GuideLLM profile per group, possibly several rates), then
says {"event": "idle"} and reads further lines {"groups": [...]} with points chosen at run
time, until {"groups": []} or end of input. It writes each finished benchmark at once as a
one-benchmark GuideLLM report `<out_dir>/<index>.json` (atomically), so the parent can
store that point before the next one ends. Progress goes to stdout as JSON lines:
{"event": "start"|"benchmark"|"sending"|"done", ...} ("benchmark": GuideLLM began a
benchmark; "sending": its first request update arrived).

The API key, if any, arrives with the stdin line, never in the job file.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tunebench.load.worker_pipe import answer_stack_requests
from tunebench.store.files import write_atomic

# A stalled worker is asked for its stacks before it is stopped (worker_pipe.dump_stacks).
# Registered at import when this module runs as the worker: GuideLLM's spawned scheduler and
# manager processes import it again as __mp_main__, so they answer too and a hang shows in
# whichever process it is. An import for its helpers (data_seed) registers nothing.
if __name__ in ("__main__", "__mp_main__"):
    answer_stack_requests()


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "time": time.time(), **fields}), flush=True)


def data_seed(seed: int, index: int) -> int:
    """The data loader's seed for a group whose first benchmark is slot `index`.

    GuideLLM's synthetic data makes its prompts (and shared prefixes) from the loader's seed
    plus the loader's iteration, which restarts at 0 with every loader: with one seed for
    all groups, the first benchmark of every group (every capacity probe, every profile)
    would send the very prompts of the first one, and a prefix cache would serve them from
    the earlier point. Seeded with its first slot, group g's benchmark j gets the seed of
    slot index + j: every benchmark on a server its own prompts, the same in every run.
    """
    return seed + index


async def _run_group(group: dict[str, Any], job: dict[str, Any], index: int) -> int:
    from guidellm.benchmark.benchmarker import Benchmarker
    from guidellm.benchmark.entrypoints import (
        resolve_backend,
        resolve_constraints,
        resolve_profile,
        resolve_to_single_benchmark,
        resolve_tokenizer,
    )
    from guidellm.benchmark.progress import CompositeBenchmarkerProgress
    from guidellm.benchmark.schemas import (
        GenerativeBenchmark,
        GenerativeBenchmarkAccumulator,
        GenerativeBenchmarksReport,
    )
    from guidellm.data import create_data_loader
    from guidellm.scheduler import NonDistributedEnvironment
    from guidellm.schemas.benchmark import BenchmarkScenario

    backend: dict[str, Any] = {
        "kind": "openai_http",
        "target": job["target"],
        "model": job["model"],
        "request_format": job.get("request_format", "/v1/completions"),
        "verify": job.get("verify_tls", True),
    }
    if job.get("api_key"):
        backend["api_key"] = job["api_key"]
    scenario = BenchmarkScenario.model_validate(
        {
            "spec": {
                "backend": backend,
                "profile": group["profile"],
                "constraints": group["constraints"],
                # a replay point brings its own dataset (its trace workload)
                "data": [group.get("data") or job["data"]],
                "tokenizer": {"kind": "huggingface_auto", "model": job["tokenizer"]},
                "outputs": [],
                **(
                    {"seed": {"kind": "static", "value": job["seed"]}}
                    if job.get("seed") is not None
                    else {}
                ),
            }
        }
    )
    args = resolve_to_single_benchmark(scenario.get_benchmarks())
    backend_obj, model = await resolve_backend(backend_args=args.backend)
    await resolve_tokenizer(args=args, model=model)
    loader = await create_data_loader(
        loader_config=args.data_loader,
        data_config=args.data,
        tokenizer_config=args.tokenizer,
        column_mapper_config=args.data_column_mapper,
        preprocessors_config=args.data_preprocessors,
        finalizer_config=args.data_finalizer,
        random_seed=data_seed(args.seed.value, index),
    )
    primer = None
    if job.get("prime"):  # load.data.prefix.prime: each group's prefix before each benchmark
        from tunebench.load.guidellm_prime import Primer

        primer = Primer(loader, job, index, _emit)
    profile = await resolve_profile(
        profile=args.profile,
        constraints=resolve_constraints(args),
        random_seed=args.seed.value,
    )
    metrics = args.metrics
    async for benchmark in Benchmarker().run(
        accumulator_class=GenerativeBenchmarkAccumulator,
        benchmark_class=GenerativeBenchmark,
        requests=loader,
        backend=backend_obj,
        profile=profile,
        environment=NonDistributedEnvironment(),
        progress=CompositeBenchmarkerProgress([_first_request_progress(primer)]),
        sample_size=metrics.sample_size,
        warmup=args.profile.warmup,
        cooldown=args.profile.cooldown,
        prefer_response_metrics=metrics.prefer_response_metrics,
        slo=metrics.slo,
        confidence=metrics.confidence,
        warnings=metrics.warnings,
    ):
        if not benchmark:
            continue
        report = GenerativeBenchmarksReport(config=scenario, benchmarks=[benchmark])
        path = Path(job["out_dir"]) / f"{index:03d}.json"
        write_atomic(path, report.model_dump_json())
        _emit("done", index=index, path=str(path))
        index += 1
        _emit("start", index=index)
    return index


def _first_request_progress(before_benchmark: Any = None) -> Any:
    """A GuideLLM progress hook that says {"event": "benchmark"} when a benchmark starts
    and {"event": "sending"} at its first request update. GuideLLM 0.8.1 rarely hangs
    between the two (its scheduler workers never start); the parent sees the missing
    "sending" within seconds instead of waiting out the whole point's budget.
    `before_benchmark` (a prime) is awaited first: GuideLLM awaits this hook before it
    starts the benchmark's scheduler, so nothing of the benchmark is sent meanwhile."""
    from guidellm.benchmark.progress import BenchmarkerProgress

    class FirstRequestProgress(BenchmarkerProgress):  # type: ignore[type-arg]
        sent = False

        async def on_initialize(self, profile: Any) -> None:
            return None

        async def on_benchmark_start(self, strategy: Any) -> None:
            if before_benchmark is not None:
                await before_benchmark()
            self.sent = False
            _emit("benchmark")

        async def on_benchmark_update(self, accumulator: Any, scheduler_state: Any) -> None:
            if not self.sent:
                self.sent = True
                _emit("sending")

        async def on_benchmark_complete(self, benchmark: Any) -> None:
            return None

        async def on_finalize(self) -> None:
            return None

    return FirstRequestProgress()


def _fix_poisson_start_race() -> None:
    """Set the Poisson arrival clock before releasing the scheduler workers.

    GuideLLM 0.8.1's AsyncPoissonStrategy.init_processes_start sets the event that wakes
    the workers first and only then sets the shared arrival offset to the start time. A
    worker that wakes in between adds its exponential delays to the initial offset of
    -1.0 (the epoch), so every arrival is "overdue" and it sends requests as fast as it
    can until the offset is written: measured on 2 cores, 182 requests in an 8 s point
    at rate 2 (and 133 sent + 82 cut off at rate 3.5). The order is swapped here.
    """
    from guidellm.scheduler.strategies import AsyncPoissonStrategy, ThroughputStrategy

    def init_processes_start(self, start_time: float) -> None:
        if self._offset is None:
            raise RuntimeError("init_processes_timings was not called")
        with self._offset.get_lock():
            self._offset.value = start_time
        ThroughputStrategy.init_processes_start(self, start_time)

    AsyncPoissonStrategy.init_processes_start = init_processes_start


async def _main(job_path: Path) -> None:
    job = json.loads(job_path.read_text())
    import guidellm.benchmark.entrypoints  # noqa: F401  - the slow part, done before "go"

    _fix_poisson_start_race()

    _emit("imported")
    go = sys.stdin.readline()
    if not go.strip():
        return  # the server never came up; nothing to do
    job.update(json.loads(go))
    if job.get("ca_bundle"):
        # GuideLLM's backend takes only verify: bool; httpx trusts SSL_CERT_FILE when verifying.
        os.environ["SSL_CERT_FILE"] = job["ca_bundle"]
    Path(job["out_dir"]).mkdir(parents=True, exist_ok=True)
    index = job.get("first_index", 0)
    _emit("start", index=index)
    groups = job["groups"]
    while True:
        for group in groups:
            index = await _run_group(group, job, index)
        # Points chosen at run time (e.g. capacity-search probes) arrive as further lines.
        _emit("idle", index=index)
        more = sys.stdin.readline()
        groups = json.loads(more).get("groups") if more.strip() else None
        if not groups:
            break
    _emit("finished", index=index)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tunebench.load.guidellm_worker JOB.json")
    asyncio.run(_main(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
