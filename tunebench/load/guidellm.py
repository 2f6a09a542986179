"""The GuideLLM load driver: the only module (with its worker) that knows GuideLLM.

All load points of one server configuration run in one worker process
(`guidellm_worker.py`): GuideLLM's start-up costs ~8 s of CPU and 12-20 s of wall time per
process on a small machine, so one process per configuration instead of one per point.
Consecutive points of the same kind and limits form one GuideLLM profile.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tunebench.errors import LoadError
from tunebench.load.guidellm_data import (
    CHAT,
    LoadData,
    data_args,
    prefix_evidence,
    replay_evidence,
    shared_prefix,
)
from tunebench.load.guidellm_report import (
    client_columns,
    measured_window,
    request_samples,
    strategy_of,
)
from tunebench.load.trace import Workload, build_workload, replay_context, slice_for
from tunebench.load.trace_formats import TraceRequest
from tunebench.load.trace_prompts import PromptBuilder
from tunebench.load.worker_driver import WorkerDriver
from tunebench.points.cells import client_cells
from tunebench.points.sessions import session_columns, turn_columns
from tunebench.seams.deployment import ServerHandle
from tunebench.seams.load import ClientResult
from tunebench.spec.load_kind import LoadKind
from tunebench.spec.models import (
    SessionsData,
    TraceData,
)
from tunebench.spec.plan import LoadPoint
from tunebench.store.files import write_atomic

DEFAULT_SWEEP_POINTS = 10
# A replay's first request is due this long after GuideLLM's replay clock starts, the rest
# keep the trace's gaps. Without it GuideLLM 0.8.1's worker sent the first request of every
# replay ~0.8 s after its clock started (its own start, not the trace); with it, 2-5 ms after
# it was due. Measured on 2 cores, docs/sweep-files.md "Trace replay".
REPLAY_LEAD_S = 1.0
_PROFILE_TARGET_FIELD = {
    "concurrent": "streams",
    "throughput": "max_concurrency",
    "poisson": "rate",
    "constant": "rate",
}


def expected_benchmarks(point: LoadPoint) -> int:
    return (point.sweep_points or DEFAULT_SWEEP_POINTS) if point.kind == LoadKind.SWEEP else 1


def build_groups(
    points: list[LoadPoint], datasets: dict[str, Path] | None = None
) -> list[dict[str, Any]]:
    """Consecutive points sharing kind and limits -> one GuideLLM profile with overrides.
    A replay point is a group of its own, with its workload's dataset (`datasets`)."""
    groups: list[dict[str, Any]] = []
    key_of = lambda p: (  # noqa: E731
        p.kind,
        p.warmup,
        p.cooldown,
        p.max_seconds is None,
        p.max_requests is None,
    )
    for point in points:
        if (
            groups
            and groups[-1]["_key"] == key_of(point)
            and point.kind not in LoadKind.UNTARGETED | {LoadKind.REPLAY}
        ):
            groups[-1]["_points"].append(point)
        else:
            groups.append({"_key": key_of(point), "_points": [point]})
    out = []
    for group in groups:
        args = _group_args(group["_points"])
        first = group["_points"][0]
        if first.kind == LoadKind.REPLAY:
            path = (datasets or {}).get(first.point_id)
            if path is None:
                raise LoadError(f"{first.point_id}: its trace workload was not prepared")
            args["data"] = {"kind": "json_file", "path": str(path)}
        out.append(args)
    return out


def _group_args(points: list[LoadPoint]) -> dict[str, Any]:
    first = points[0]
    if first.kind == LoadKind.REPLAY:
        # GuideLLM's replay sends each request at start + time_scale x its relative_timestamp
        # (schedule_turn timestamp: the trace's own times, not gaps after earlier answers)
        assert first.target is not None
        limits = (
            [{"kind": "max_duration", "seconds": [first.max_seconds]}] if first.max_seconds else []
        )
        replay = {"kind": "replay", "time_scale": 1 / first.target, "schedule_turn": "timestamp"}
        return {"profile": replay, "constraints": limits}
    profile: dict[str, Any] = {"kind": first.kind}
    if first.warmup is not None:
        profile["warmup"] = first.warmup
    if first.cooldown is not None:
        profile["cooldown"] = first.cooldown
    if first.kind == LoadKind.SWEEP and first.sweep_points:
        profile["sweep_size"] = first.sweep_points
    field = _PROFILE_TARGET_FIELD.get(first.kind)
    if field:
        targets = [p.target for p in points]
        assert all(t is not None for t in targets), "a profile with a target field has targets"
        values = [int(t) if field != "rate" else float(t) for t in targets if t is not None]
        profile[field] = values
    constraints: list[dict[str, Any]] = []
    if first.max_seconds is not None:
        constraints.append({"kind": "max_duration", "seconds": [p.max_seconds for p in points]})
    if first.max_requests is not None:
        constraints.append({"kind": "max_requests", "count": [p.max_requests for p in points]})
    return {"profile": profile, "constraints": constraints}


class _WorkerLost(Exception):
    """The worker stalled (`stalled`) or died before finishing; `done` slots were stored."""

    def __init__(self, message: str, done: int, stalled: bool = False):
        super().__init__(message)
        self.done = done
        self.stalled = stalled


def point_budget_s(
    point: LoadPoint,
    margin_s: float = 30.0,
    per_request_s: float = 2.0,
    replay_s: float | None = None,
) -> float:
    """How long one point may take before the worker is declared stalled (`replay_s`: how
    long a replay point's trace plays)."""
    seconds = point.max_seconds or replay_s or (point.max_requests or 100) * per_request_s
    return expected_benchmarks(point) * (seconds * 2 + margin_s) + margin_s


def worker_processes(cpus: set[int] | None) -> int:
    """GuideLLM worker processes for a client on `cpus` (None: this process's CPUs): half of
    them, 1 to 8. On a 2-core box one (more starve the server it measures); a GPU box's
    client needs several to reach thousands of tokens a second."""
    usable = len(cpus) if cpus else len(os.sched_getaffinity(0))
    return max(1, min(8, usable // 2))


class GuideLLMDriver(WorkerDriver):
    """One worker process per server configuration: `prepare`, then `run`, then `close`.

    If the worker stalls on a point (no result within `point_budget_s`) or dies, it is
    stopped and the points not yet finished run again in a fresh worker, `retries` times.
    (A rare hang inside GuideLLM 0.8.1 was seen: its forked data-loader child waits while
    the scheduler worker never starts.)
    """

    worker_module = "tunebench.load.guidellm_worker"
    tool = "GuideLLM"
    stall_margin_s = 30.0  # per point, beyond twice its duration
    # From GuideLLM starting a benchmark to its first request update: spawning its scheduler
    # workers takes 1-4 s on 2 busy cores; GuideLLM 0.8.1's rare hang sits exactly here.
    first_request_s = 30.0

    def __init__(
        self,
        data: LoadData,
        spec_dir: Path,
        tokenizer: str,
        python: str | None = None,
        request_format: str = "/v1/completions",
        retries: int = 1,
        cpus: set[int] | None = None,
        processes: int | None = None,
        context: int | None = None,
    ):
        super().__init__()
        self.data = data
        self.context = context  # a replayed trace's lengths fit this (prompt + output tokens)
        self._workloads: dict[str, Workload] = {}  # replay points' requests, by point id
        self._datasets: dict[str, Path] = {}
        self.cpus = cpus  # the worker's CPU affinity (load.client_cpus), None: any
        self.processes = processes or worker_processes(cpus)
        self.spec_dir = spec_dir
        self.tokenizer = tokenizer
        self.python = python or sys.executable
        # sessions go through the chat API: the history is a list of user and assistant
        # messages, which the server's chat template turns into one prompt
        self.request_format = CHAT if isinstance(data, SessionsData) else request_format
        self.retries = retries
        self._primed: dict[int, dict[str, Any]] = {}  # shared prefixes primed, by benchmark slot
        self._done = 0  # benchmark slots finished and stored by the worker being followed

    def prepare(self, points: list[LoadPoint], work_dir: Path) -> None:
        """Start the worker now so that it imports GuideLLM while the server starts."""
        self._points = list(points)
        self._work_dir = work_dir
        self._prepare_traces(self._points, work_dir)
        self._start_worker(self._points, first_index=0, attempt=0)

    def _prepare_traces(self, points: list[LoadPoint], work_dir: Path) -> None:
        """Each replay point's workload (load/trace.py) as a dataset file of its own, and
        its summary beside it (`trace/<point>.json`)."""
        replays = [
            p for p in points if p.kind == LoadKind.REPLAY and p.point_id not in self._workloads
        ]
        if not replays:
            return
        builder = PromptBuilder(self.tokenizer)
        slices: dict[TraceData, list[TraceRequest]] = {}
        for point in replays:
            trace = point.trace
            assert trace is not None and point.target is not None
            if trace not in slices:
                slices[trace] = slice_for(trace, self.spec_dir)
            context = replay_context(point.point_id, trace, self.context)
            workload = build_workload(
                slices[trace],
                builder,
                context,
                trace.length_scale,
                trace.block_tokens,
                point.point_id,
                point.target,
                trace.seed,
                lead_s=REPLAY_LEAD_S,
            )
            directory = work_dir / "trace"
            self._datasets[point.point_id] = workload.write_dataset(
                directory / f"{point.point_id}.jsonl"
            )
            summary = {"tokenizer": self.tokenizer, "context": context, **workload.summary()}
            write_atomic(directory / f"{point.point_id}.json", json.dumps(summary, indent=2))
            self._workloads[point.point_id] = workload

    def _budget(self, point: LoadPoint) -> float:
        workload = self._workloads.get(point.point_id)
        replay_s = workload.fitted.span_s / workload.speed + workload.lead_s if workload else None
        return point_budget_s(point, self.stall_margin_s, replay_s=replay_s)

    def _start_worker(self, points: list[LoadPoint], first_index: int, attempt: int) -> None:
        self.close()
        prefix = shared_prefix(self.data)
        work_dir = self._work_dir
        assert work_dir is not None, "prepare() names the work directory first"
        work_dir.mkdir(parents=True, exist_ok=True)
        job = {
            "tokenizer": self.tokenizer,
            "request_format": self.request_format,
            "data": data_args(self.data, self.spec_dir),
            "groups": build_groups(points, self._datasets),
            "out_dir": str(work_dir / "benchmarks"),
            "first_index": first_index,
            # load.data.seed: the same prompts in every run of the sweep file
            "seed": getattr(self.data, "seed", None),
            # load.data.prefix.prime: each group's prefix sent once before every benchmark
            "prime": bool(prefix and prefix.prime),
        }
        suffix = f"-retry{attempt}" if attempt else ""
        job_path = work_dir / f"guidellm-job{suffix}.json"
        job_path.write_text(json.dumps(job, indent=2))
        env = dict(os.environ)
        # GuideLLM's own default spawns up to 10 (load.client_processes)
        env.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", str(self.processes))
        # GuideLLM forks its data-loader child after the tokenizer's thread pool has run in
        # this process; a fork with those threads' locks held can hang the child, which is
        # the stall the retry below recovers from. One tokenizer thread avoids the state.
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        env["PYTHONWARNINGS"] = "ignore::FutureWarning"
        self._launch(
            [self.python, "-m", self.worker_module, str(job_path)],
            env,
            work_dir / f"guidellm{suffix}.log",
            self.cpus,
            "guidellm",
            cannot_start="cannot start the load generator",
        )

    def _send_go(self, handle: ServerHandle) -> None:
        # Sent through the pipe, so the API key never touches a file or an environment.
        self._send(
            {
                "target": handle.base_url,
                "model": handle.served_model,
                "verify_tls": handle.verify_tls,
                "ca_bundle": handle.ca_bundle,
                "api_key": handle.api_key,
            }
        )

    def run(
        self,
        handle: ServerHandle,
        on_result: Callable[[ClientResult], None],
        on_start: Callable[[LoadPoint], None] | None = None,
        next_points: Callable[[], list[LoadPoint]] | None = None,
    ) -> None:
        if self._process is None:
            raise LoadError("GuideLLM worker was not prepared")
        done = 0  # benchmark slots finished and stored
        for attempt in range(self.retries + 1):
            slots = self._slots()
            if attempt:
                if done >= len(slots) and next_points is None:
                    return  # every point was stored; only the worker's exit was unclean
                # restart at the first point not finished; finished points stay stored
                first = slots[done][0] if done < len(slots) else None
                start = self._points.index(first) if first is not None else len(self._points)
                done = next((i for i, (p, _) in enumerate(slots) if p is first), len(slots))
                self._start_worker(self._points[start:], first_index=done, attempt=attempt)
            self._send_go(handle)
            try:
                self._follow(done, on_result, on_start, next_points)
                return
            except _WorkerLost as lost:
                done = lost.done
                if lost.stalled and self._process is not None:
                    self._process.dump_stacks()  # where GuideLLM hangs, into its log
                if self._abort_reason:
                    raise LoadError(self._abort_reason) from None
                slots = self._slots()
                if done < len(slots):
                    self.retried.append({"point": slots[done][0].point_id, "reason": str(lost)})
                if attempt == self.retries:
                    raise LoadError(f"{lost} (after {self.retries} retry)") from None

    def _slots(self) -> list[tuple[LoadPoint, int]]:
        """One slot per GuideLLM benchmark: a sweep point yields several."""
        return [(point, j) for point in self._points for j in range(expected_benchmarks(point))]

    def _follow(self, done, on_result, on_start, next_points) -> None:
        self._done = done
        slots = self._slots()
        # the first point also pays for backend validation and data preparation
        first_budget = self._budget(slots[done][0]) if done < len(slots) else 0
        self._wait_for(first_budget + 2 * self.stall_margin_s)

        def handle(kind: str, event: dict[str, Any]) -> None:
            nonlocal slots
            if kind == "start" and event["index"] < len(slots):
                point, j = slots[event["index"]]
                self._wait_for(self._budget(point))
                if j == 0 and on_start:
                    on_start(point)
            elif kind == "benchmark":
                self._deadline = min(self._deadline, time.monotonic() + self.first_request_s)
            elif kind == "sending":
                self._wait_for(self._budget(slots[min(self._done, len(slots) - 1)][0]))
            elif kind == "priming":
                # the prime's requests go out a few at a time: each one done is progress
                self._deadline = max(self._deadline, time.monotonic() + self.stall_margin_s)
            elif kind == "primed":
                self._primed[event["index"]] = event
            elif kind == "done":
                point, j = slots[event["index"]]
                primed = self._primed.pop(event["index"], None)
                on_result(self._result(point, j, Path(event["path"]), primed))
                self._done = event["index"] + 1
            elif kind == "idle":
                more = self._more_points(next_points, self.stall_margin_s)
                if not more:
                    return
                self._points += more
                slots = self._slots()
                # a capacity search over replay speed: each probe replays its own workload
                assert self._work_dir is not None
                self._prepare_traces(more, self._work_dir)
                self._send({"groups": build_groups(more, self._datasets)})
                self._wait_for(self._budget(more[0]))
                if on_start:
                    on_start(more[0])

        self._follow_events(handle)

    def _no_more_points(self) -> dict[str, Any]:
        return {"groups": []}

    def _stalled(self) -> Exception:
        slots = self._slots()
        point = slots[min(self._done, len(slots) - 1)][0]
        return _WorkerLost(
            f"GuideLLM made no progress on {point.point_id}; stopped it", self._done, stalled=True
        )

    def _lost(self, problem: str) -> Exception:
        return _WorkerLost(f"GuideLLM {problem}", self._done)

    def _result(
        self, point: LoadPoint, index: int, path: Path, primed: dict[str, Any] | None = None
    ) -> ClientResult:
        try:
            benchmark = json.loads(path.read_text())["benchmarks"][0]
        except (OSError, ValueError, KeyError, IndexError) as exc:
            raise LoadError(f"{path}: unreadable GuideLLM report: {exc}") from None
        start, end = measured_window(benchmark)
        kind, target = strategy_of(benchmark)
        point_id = f"sweep-{index}" if point.kind == LoadKind.SWEEP else point.point_id
        warnings = [w.get("message", "") for w in benchmark.get("warnings") or []]
        columns = client_columns(benchmark)
        columns.update(self._usage.window(start, end))
        columns["target"] = target if point.kind == LoadKind.SWEEP else point.target
        columns["strategy"] = kind
        columns["load_driver"] = "guidellm"
        sessions = self.data if isinstance(self.data, SessionsData) else None
        samples = request_samples(benchmark, sessions=sessions is not None)
        turns = {}
        if sessions is not None:
            columns.update(session_columns(samples, sessions.turns))
            turns = turn_columns(samples)
        workload = self._workloads.get(point.point_id)
        if workload is not None:
            columns.update(replay_evidence(workload, benchmark, samples))
        prefix = shared_prefix(self.data)
        if prefix is not None:
            columns.update(prefix_evidence(prefix, benchmark, primed))
        return ClientResult(
            point,
            point_id,
            client_cells(columns, str(path)),
            start,
            end,
            path,
            warnings,
            samples,
            turns,
        )
