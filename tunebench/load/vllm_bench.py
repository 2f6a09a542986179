"""The vllm-bench load driver: vLLM's own `vllm bench serve` behind the LoadDriver seam.

A second opinion on the client: GuideLLM and vLLM's benchmark differ in how they send
(GuideLLM's scheduler processes vs one asyncio loop) and so in how much client they need;
on a small box the same server measures quite differently with each (docs/load-drivers.md).
All points of one configuration run in one worker process (`vllm_bench_worker.py`), which
imports vLLM's benchmark module once while the server starts.

`vllm bench serve` counts requests, not seconds: a point runs `max_requests` requests, or
for a rate `ceil(rate x max_seconds)`. It has no constant arrival, sweep, warm-up or
cool-down window; a spec asking for them gets a one-line error naming the guidellm driver
(`profile_problem`).

Synthetic data goes out as vLLM's `random` dataset; with shared prefixes
(`load.data.prefix`) as its `prefix_repetition` dataset, which fits only one shape: equal
groups (no Zipf skew), fixed lengths, and a request count that is a multiple of the groups.
A replayed trace (`kind: replay`) goes out as vLLM's `timed_trace` dataset, one file per
point (`timed_trace.py`).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tunebench.errors import LoadError
from tunebench.load.timed_trace import (
    FIELDS,
    TimedTraceWorkload,
    build_timed_trace,
    replay_evidence,
)
from tunebench.load.trace import replay_context, slice_for
from tunebench.load.trace_formats import TraceRequest
from tunebench.load.trace_prompts import special_count
from tunebench.load.vllm_bench_report import client_columns, measured_window, request_samples
from tunebench.load.worker_driver import WorkerDriver
from tunebench.points.cells import client_cells
from tunebench.seams.deployment import ServerHandle
from tunebench.seams.load import ClientResult
from tunebench.spec.load_kind import LoadKind
from tunebench.spec.models import SyntheticData, TraceData
from tunebench.spec.plan import LoadPoint
from tunebench.store.files import write_atomic

PERCENTILES = "50,90,95,99"
METRICS = ("--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", PERCENTILES)
# A replay's first request is due this long after vLLM's replay clock starts, the rest keep
# the trace's gaps: the lead GuideLLM's replay has (load/guidellm.py REPLAY_LEAD_S), so that
# in a cross-check both drivers play one schedule from their clocks' starts.
REPLAY_LEAD_S = 1.0


def prefix_problem(data: SyntheticData) -> str | None:
    """Why vLLM's prefix_repetition cannot send these shared prefixes (None: it can). It
    sends `groups` prefixes to `num_prompts // groups` requests each, every length fixed."""
    prefix = data.prefix
    if prefix is None:
        return None
    if prefix.zipf:
        return (
            f"load.data.prefix.zipf {prefix.zipf:g} (prefix_repetition gives every group the "
            "same share of requests; set zipf: 0)"
        )
    if data.prompt_tokens_stdev or data.output_tokens_stdev:
        return (
            "load.data.prompt_tokens_stdev/output_tokens_stdev with a prefix "
            "(prefix_repetition sends fixed lengths; set them to 0)"
        )
    return None


def profile_problem(point: LoadPoint, data: SyntheticData | TraceData | None = None) -> str | None:
    """Why `vllm bench serve` cannot run this point with this data (None: it can)."""
    if point.kind in LoadKind.GUIDELLM_ONLY:
        return f"kind {point.kind} (vllm bench serve has none)"
    if point.warmup or point.cooldown:
        return "warmup/cooldown windows (vllm bench serve measures every request)"
    if point.kind == LoadKind.REPLAY:
        return None if point.trace is not None else "kind replay without a trace to play"
    if point.kind in LoadKind.CLOSED_LOOP and not point.max_requests:
        return f"kind {point.kind} without max_requests (vllm bench serve counts requests)"
    if not isinstance(data, SyntheticData):
        return None
    problem = prefix_problem(data)
    if problem is None and data.prefix is not None and point.max_requests:
        groups = data.prefix.groups
        if point.max_requests % groups:
            return (
                f"max_requests {point.max_requests} is not a multiple of load.data.prefix.groups "
                f"{groups} (prefix_repetition sends max_requests // groups per group)"
            )
    return problem


def num_prompts(point: LoadPoint, groups: int = 1) -> int:
    """The requests of a point; a rate's count rounded up to a multiple of `groups` (the
    shared prefixes' groups, which prefix_repetition fills alike)."""
    if point.max_requests:
        return int(point.max_requests)
    assert point.target and point.max_seconds, "checked by profile_problem"
    count = max(1, math.ceil(point.target * point.max_seconds))
    return groups * math.ceil(count / groups)


def dataset_argv(data: SyntheticData) -> list[str]:
    """The flags of the dataset that sends this synthetic data."""
    if data.prefix is not None:
        # GuideLLM puts each group's prefix before the prompt's own tokens; so does this
        # (prefix + suffix tokens). It is not `random`: vLLM ignores EOS there by itself only.
        return [
            "--dataset-name",
            "prefix_repetition",
            "--prefix-repetition-prefix-len",
            str(data.prefix.tokens),
            "--prefix-repetition-suffix-len",
            str(data.prompt_tokens),
            "--prefix-repetition-num-prefixes",
            str(data.prefix.groups),
            "--prefix-repetition-output-len",
            str(data.output_tokens),
            "--ignore-eos",
        ]
    argv = ["--dataset-name", "random"]
    argv += ["--random-input-len", str(data.prompt_tokens)]
    argv += ["--random-output-len", str(data.output_tokens)]
    spread = max(data.prompt_tokens_stdev / data.prompt_tokens, 0.0)
    if data.output_tokens_stdev:
        spread = max(spread, data.output_tokens_stdev / data.output_tokens)
    # a uniform range of +-r has sd r/sqrt(3): the same spread as the spec's stdev
    argv += ["--random-range-ratio", f"{min(0.99, spread * math.sqrt(3)):.3f}"]
    return argv


def point_argv(point: LoadPoint, data: SyntheticData) -> list[str]:
    """`vllm bench serve` flags of one point (the worker adds the server and result files)."""
    argv = ["--backend", "vllm", "--endpoint", "/v1/completions", *dataset_argv(data)]
    groups = data.prefix.groups if data.prefix is not None else 1
    argv += ["--num-prompts", str(num_prompts(point, groups)), "--seed", str(data.seed)]
    argv += METRICS
    if point.kind == LoadKind.CONCURRENT:
        argv += ["--max-concurrency", str(int(point.target or 1))]
    elif point.kind == LoadKind.SYNCHRONOUS:
        argv += ["--max-concurrency", "1"]
    elif point.kind == LoadKind.POISSON:
        argv += ["--request-rate", f"{point.target:g}", "--burstiness", "1"]
    return argv


def replay_argv(workload: TimedTraceWorkload, dataset: Path, seed: int) -> list[str]:
    """`vllm bench serve` flags of one replay point: its timed_trace file, self-timed."""
    argv = ["--backend", "vllm", "--endpoint", "/v1/completions"]
    argv += ["--dataset-name", "timed_trace", "--dataset-path", str(dataset)]
    argv += ["--timed-trace-chunk-hash-size", str(workload.fitted.block_tokens)]
    # vLLM multiplies each timestamp by this: 1 / speed plays the trace `speed` times as fast
    argv += ["--timed-trace-sec-multiplier", repr(workload.sec_multiplier)]
    for field in FIELDS:
        argv += [f"--timed-trace-label-{field.replace('_', '-')}", field]
    argv += ["--self-timed", "--ignore-eos"]
    argv += ["--num-prompts", str(workload.count), "--seed", str(seed)]
    # no test request before the replay: it would send the first prompt twice and warm the
    # prefix cache with it (the server is ready: the deployment waited for it)
    argv += ["--ready-check-timeout-sec", "0"]
    return argv + list(METRICS)


def point_budget_s(
    point: LoadPoint,
    margin_s: float = 60.0,
    per_request_s: float = 2.0,
    replay_s: float | None = None,
) -> float:
    """How long one point may take before the worker is declared stalled (`replay_s`: how
    long a replay point's schedule plays)."""
    if replay_s is not None:
        return 2 * replay_s + margin_s
    by_count = num_prompts(point) * per_request_s
    by_time = 2 * (point.max_seconds or 0)
    return max(by_count, by_time) + margin_s


class VllmBenchDriver(WorkerDriver):
    """One worker per server configuration: `prepare`, then `run`, then `close`."""

    worker_module = "tunebench.load.vllm_bench_worker"
    import_budget_s = 180.0  # importing vLLM's benchmark module on a busy box
    tool = "vllm bench"
    idle_wait_s = 30.0  # told no more points come: its exit

    def __init__(
        self,
        data: Any,  # load.data: synthetic or a trace (any other kind is refused)
        tokenizer: str,
        python: str | None = None,
        cpus: set[int] | None = None,
        spec_dir: Path | None = None,
        context: int | None = None,
    ):
        if not isinstance(data, (SyntheticData, TraceData)):
            raise LoadError(
                f"load.driver vllm-bench cannot send load.data kind {data.kind}: synthetic "
                "data or a trace only; use load.driver guidellm"
            )
        super().__init__()  # this driver does not retry: `retried` stays empty
        self.data = data
        self.tokenizer = tokenizer
        self.python = python or sys.executable
        self.cpus = cpus
        self.spec_dir = spec_dir or Path(".")  # a trace's path is relative to the sweep file
        self.context = context  # a replayed trace's lengths fit this (prompt + output tokens)
        self._workloads: dict[str, TimedTraceWorkload] = {}  # replay points', by point id
        self._slices: dict[TraceData, list[TraceRequest]] = {}
        self._specials: int | None = None  # the tokenizer's BOS and the like, loaded once

    def _job_points(self, points: list[LoadPoint], first: int) -> list[dict[str, Any]]:
        for point in points:
            problem = profile_problem(point, self.data)
            if problem:
                raise LoadError(f"load.driver vllm-bench cannot run {point.point_id}: {problem}")
        return [{"index": first + i, "argv": self._argv(p)} for i, p in enumerate(points)]

    def _argv(self, point: LoadPoint) -> list[str]:
        if point.kind == LoadKind.REPLAY:
            workload, dataset = self._replay(point)
            assert point.trace is not None  # a replay point carries its trace
            return replay_argv(workload, dataset, point.trace.seed)
        if not isinstance(self.data, SyntheticData):
            raise LoadError(
                f"{point.point_id}: load.data kind trace is played by kind replay profiles only"
            )
        return point_argv(point, self.data)

    def _replay(self, point: LoadPoint) -> tuple[TimedTraceWorkload, Path]:
        """The point's workload as a timed_trace file of its own (`trace/<point>.jsonl`),
        and its summary beside it (`trace/<point>.json`)."""
        trace = point.trace
        assert trace is not None and point.target is not None and self._work_dir is not None
        directory = self._work_dir / "trace"
        dataset = directory / f"{point.point_id}.jsonl"
        if point.point_id in self._workloads:
            return self._workloads[point.point_id], dataset
        if trace not in self._slices:
            self._slices[trace] = slice_for(trace, self.spec_dir)
        context = replay_context(point.point_id, trace, self.context)
        if self._specials is None:
            self._specials = special_count(self.tokenizer)
        workload = build_timed_trace(
            self._slices[trace],
            context,
            trace.length_scale,
            trace.block_tokens,
            point.point_id,
            point.target,
            min_prompt=self._specials + 1,  # the same fit as GuideLLM's replay of the slice
            seed=trace.seed,
            lead_s=REPLAY_LEAD_S,
            max_seconds=point.max_seconds,
        )
        workload.write(dataset)
        summary = {"tokenizer": self.tokenizer, "context": context, **workload.summary()}
        write_atomic(directory / f"{point.point_id}.json", json.dumps(summary, indent=2))
        self._workloads[point.point_id] = workload
        return workload, dataset

    def _budget(self, point: LoadPoint) -> float:
        workload = self._workloads.get(point.point_id)
        return point_budget_s(point, replay_s=workload.play_s if workload else None)

    def prepare(self, points: list[LoadPoint], work_dir: Path) -> None:
        """Start the worker now so that it imports vLLM's benchmark while the server starts."""
        self.close()
        self._points = list(points)
        self._work_dir = work_dir
        self._workloads = {}  # each replay point's file is written into this work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        job = {"points": self._job_points(self._points, 0), "out_dir": str(work_dir / "results")}
        job_path = work_dir / "vllm-bench-job.json"
        job_path.write_text(json.dumps(job, indent=2))
        env = dict(os.environ)
        env.pop("OPENAI_API_KEY", None)  # only the pipe carries a key (to this worker)
        env["TOKENIZERS_PARALLELISM"] = "false"
        # vLLM's timed_trace seeds each prompt block with Python's hash() of its id: a fixed
        # hash seed sends the same prompts in every run of the sweep file
        env["PYTHONHASHSEED"] = str(self.data.seed % 2**32)
        self._launch(
            [self.python, "-m", self.worker_module, str(job_path)],
            env,
            work_dir / "vllm-bench.log",
            self.cpus,
            "vllm-bench",
            cannot_start="cannot start vllm bench",
        )

    def run(
        self,
        handle: ServerHandle,
        on_result: Callable[[ClientResult], None],
        on_start: Callable[[LoadPoint], None] | None = None,
        next_points: Callable[[], list[LoadPoint]] | None = None,
    ) -> None:
        if self._process is None:
            raise LoadError("vllm bench worker was not prepared")
        # through the pipe: the API key never touches a file, an argv or an environment
        self._send(
            {
                "target": handle.base_url,
                "model": handle.served_model,
                "tokenizer": self.tokenizer,
                "verify_tls": handle.verify_tls,
                "api_key": handle.api_key,
            }
        )
        self._follow(on_result, on_start, next_points)

    def _follow(self, on_result, on_start, next_points) -> None:
        self._wait_for(self.import_budget_s)

        def handle(kind: str, event: dict[str, Any]) -> None:
            if kind == "start":
                point = self._points[event["index"]]
                self._wait_for(self._budget(point))
                if on_start:
                    on_start(point)
            elif kind == "done":
                point = self._points[event["index"]]
                on_result(self._result(point, Path(event["path"])))
            elif kind == "idle":
                more = self._more_points(next_points, self.idle_wait_s)
                if not more:
                    return
                first = len(self._points)
                self._points += more
                self._send({"points": self._job_points(more, first)})
                self._wait_for(self._budget(more[0]))

        self._follow_events(handle)

    def _no_more_points(self) -> dict[str, Any]:
        return {"points": []}

    def _result(self, point: LoadPoint, path: Path) -> ClientResult:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise LoadError(f"{path}: unreadable vllm bench result: {exc}") from None
        window = measured_window(data)
        end = time.time()
        start, end = window if window else (end - float(data.get("duration") or 0), end)
        columns = client_columns(data)
        columns.pop("load_kind", None)
        columns.update(self._usage.window(start, end))
        columns["target"] = point.target
        columns["strategy"] = point.kind
        columns["load_driver"] = "vllm-bench"
        workload = self._workloads.get(point.point_id)
        if workload is None:
            samples = request_samples(data)
        else:
            evidence, samples = replay_evidence(workload, data)
            columns.update(evidence)
        return ClientResult(
            point, point.point_id, client_cells(columns, str(path)), start, end, path, [], samples
        )
