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
from tunebench.load.client_usage import ProcessGroupUsage
from tunebench.load.vllm_bench_report import client_columns, measured_window, request_samples
from tunebench.load.worker_pipe import ENDED, QUIET, WorkerPipe
from tunebench.seams.deployment import ServerHandle
from tunebench.seams.load import ClientResult
from tunebench.spec.models import FileData, SyntheticData
from tunebench.spec.plan import LoadPoint

PERCENTILES = "50,90,95,99"


def profile_problem(point: LoadPoint) -> str | None:
    """Why `vllm bench serve` cannot run this point (None: it can)."""
    if point.kind in ("constant", "sweep"):
        return f"kind {point.kind} (vllm bench serve has none)"
    if point.warmup or point.cooldown:
        return "warmup/cooldown windows (vllm bench serve measures every request)"
    if point.kind in ("concurrent", "synchronous", "throughput") and not point.max_requests:
        return f"kind {point.kind} without max_requests (vllm bench serve counts requests)"
    return None


def num_prompts(point: LoadPoint) -> int:
    if point.max_requests:
        return int(point.max_requests)
    assert point.target and point.max_seconds, "checked by profile_problem"
    return max(1, math.ceil(point.target * point.max_seconds))


def point_argv(point: LoadPoint, data: SyntheticData) -> list[str]:
    """`vllm bench serve` flags of one point (the worker adds the server and result files)."""
    argv = ["--backend", "vllm", "--endpoint", "/v1/completions", "--dataset-name", "random"]
    argv += ["--random-input-len", str(data.prompt_tokens)]
    argv += ["--random-output-len", str(data.output_tokens)]
    spread = max(data.prompt_tokens_stdev / data.prompt_tokens, 0.0)
    if data.output_tokens_stdev:
        spread = max(spread, data.output_tokens_stdev / data.output_tokens)
    # a uniform range of +-r has sd r/sqrt(3): the same spread as the spec's stdev
    argv += ["--random-range-ratio", f"{min(0.99, spread * math.sqrt(3)):.3f}"]
    argv += ["--num-prompts", str(num_prompts(point)), "--seed", str(data.seed)]
    argv += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", PERCENTILES]
    if point.kind == "concurrent":
        argv += ["--max-concurrency", str(int(point.target or 1))]
    elif point.kind == "synchronous":
        argv += ["--max-concurrency", "1"]
    elif point.kind == "poisson":
        argv += ["--request-rate", f"{point.target:g}", "--burstiness", "1"]
    return argv


def point_budget_s(point: LoadPoint, margin_s: float = 60.0, per_request_s: float = 2.0) -> float:
    """How long one point may take before the worker is declared stalled."""
    by_count = num_prompts(point) * per_request_s
    by_time = 2 * (point.max_seconds or 0)
    return max(by_count, by_time) + margin_s


class VllmBenchDriver:
    """One worker per server configuration: `prepare`, then `run`, then `close`."""

    worker_module = "tunebench.load.vllm_bench_worker"
    import_budget_s = 180.0  # importing vLLM's benchmark module on a busy box

    def __init__(
        self,
        data: SyntheticData | FileData,
        tokenizer: str,
        python: str | None = None,
        cpus: set[int] | None = None,
    ):
        if not isinstance(data, SyntheticData):
            raise LoadError("load.driver vllm-bench: only synthetic data (use driver guidellm)")
        self.data = data
        self.tokenizer = tokenizer
        self.python = python or sys.executable
        self.cpus = cpus
        self.retried: list[dict[str, str]] = []  # this driver does not retry
        self._process: WorkerPipe | None = None
        self._points: list[LoadPoint] = []
        self._work_dir: Path | None = None
        self._abort_reason: str | None = None
        self._usage = ProcessGroupUsage()

    @property
    def pgid(self) -> int | None:
        return self._process.pgid if self._process else None

    def _job_points(self, points: list[LoadPoint], first: int) -> list[dict[str, Any]]:
        for point in points:
            problem = profile_problem(point)
            if problem:
                raise LoadError(f"load.driver vllm-bench cannot run {point.point_id}: {problem}")
        return [
            {"index": first + i, "argv": point_argv(p, self.data)} for i, p in enumerate(points)
        ]

    def prepare(self, points: list[LoadPoint], work_dir: Path) -> None:
        """Start the worker now so that it imports vLLM's benchmark while the server starts."""
        self.close()
        self._points = list(points)
        self._work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        job = {"points": self._job_points(self._points, 0), "out_dir": str(work_dir / "results")}
        job_path = work_dir / "vllm-bench-job.json"
        job_path.write_text(json.dumps(job, indent=2))
        env = dict(os.environ)
        env.pop("OPENAI_API_KEY", None)  # only the pipe carries a key (to this worker)
        env["TOKENIZERS_PARALLELISM"] = "false"
        try:
            self._process = WorkerPipe(
                [self.python, "-m", self.worker_module, str(job_path)],
                env,
                work_dir / "vllm-bench.log",
                self.cpus,
                "vllm-bench",
            )
        except OSError as exc:
            raise LoadError(f"cannot start vllm bench: {exc.strerror}") from None
        self._usage.follow(self._process.pgid)

    def _send(self, message: dict[str, Any], last: bool = False) -> None:
        self._process.send(message, last)

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
        pipe = self._process
        deadline = time.monotonic() + self.import_budget_s
        finished = False
        while True:
            event = pipe.read()
            if event is QUIET:
                if self._abort_reason:
                    raise LoadError(self._abort_reason) from None
                if time.monotonic() > deadline:
                    raise LoadError("vllm bench made no progress; stopped it") from None
                continue
            if event is ENDED:
                break
            kind = event.get("event")
            if kind == "start":
                point = self._points[event["index"]]
                deadline = time.monotonic() + point_budget_s(point)
                if on_start:
                    on_start(point)
            elif kind == "done":
                point = self._points[event["index"]]
                on_result(self._result(point, Path(event["path"])))
            elif kind == "idle":
                more = list(next_points()) if next_points else []
                if not more:
                    self._send({"points": []}, last=True)
                    deadline = time.monotonic() + 30
                    continue
                first = len(self._points)
                self._points += more
                self._send({"points": self._job_points(more, first)})
                deadline = time.monotonic() + point_budget_s(more[0])
            elif kind == "finished":
                finished = True
        if self._abort_reason:
            raise LoadError(self._abort_reason)
        problem = pipe.exit_problem(finished)
        if problem:
            raise LoadError(f"vllm bench {problem}")

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
        return ClientResult(
            point, point.point_id, columns, start, end, path, [], request_samples(data)
        )

    def abort(self, reason: str) -> None:
        self._abort_reason = reason
        if self._process is not None:
            self._process.stop(grace_s=2)

    def close(self) -> None:
        self._usage.follow(None)
        if self._process is not None:
            self._process.stop(grace_s=5)
            self._process = None
