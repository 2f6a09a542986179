"""Deployment kinds: the one map from `deployment.kind` to everything that differs by kind.

For each kind: how its Deployment is made, which LoadDriver measures it, how its settings
are resolved against the sweep file (relative paths, names chosen), what is checked before
anything starts, and how long a start typically takes (for --dry-run estimates).

Adding a kind: its settings model goes in spec/deployments.py (the sweep file's schema),
its Deployment in deploy/ (and a LoadDriver in load/ if GuideLLM cannot drive it), and one
`Kind` entry here. Nothing else knows the kinds.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tunebench import demo
from tunebench.deploy.endpoint import EndpointServer
from tunebench.deploy.helm import HelmDeployment
from tunebench.deploy.local import LocalVllmServer
from tunebench.errors import SpecError, StoreError
from tunebench.load.cross_check import CrossCheckDriver
from tunebench.load.guidellm import GuideLLMDriver
from tunebench.load.vllm_bench import VllmBenchDriver
from tunebench.processes import parse_cpus
from tunebench.recorded.deployment import RecordedDeployment
from tunebench.recorded.driver import RecordedDriver
from tunebench.seams.deployment import Deployment, StatusCallback
from tunebench.seams.load import LoadDriver
from tunebench.spec.deployments import (
    SETTINGS_BY_KIND,
    Placement,
    RecordedSettings,
    Whereabouts,
)
from tunebench.spec.kserve_chart import (
    check_helm_plan,
    config_release,
    release_name,
    tokenizer_for,
)
from tunebench.spec.models import SweepSpec
from tunebench.spec.plan import ServerConfig, expand_configs, smallest_context
from tunebench.store.layout import RunLayout, is_run
from tunebench.store.run import resolve_run

Settings = Any  # one of spec.deployments' settings models


@dataclass(frozen=True)
class Where:
    """What resolving a kind's settings may need: the sweep file and the run root."""

    spec: SweepSpec
    spec_path: Path
    output_root: Path
    keep: bool = False

    def absolute(self, name: str) -> str:
        return str((self.spec_path.parent / Path(name).expanduser()).resolve())


@dataclass(frozen=True)
class Slot:
    """One configuration measured beside others (deployment.parallel > 1): its own release
    (helm) or its own GPUs (local)."""

    config_id: str
    gpus: tuple[str, ...] | None = None


DeploymentFactory = Callable[[Settings, RunLayout, StatusCallback, "str | None"], Deployment]
DriverFactory = Callable[[SweepSpec, Path, Deployment, ServerConfig], LoadDriver]


@dataclass(frozen=True)
class Kind:
    name: str
    start_s: float  # a typical start-up on a 2-core CPU box (docs/benchmarks.md)
    deployment: DeploymentFactory
    driver: DriverFactory
    resolve: Callable[[Settings, Where], Settings] = lambda settings, where: settings
    check_plan: Callable[[SweepSpec, list[ServerConfig], Path], None] | None = None
    # Does measuring the same point twice give two answers? A capacity search then confirms
    # its decisions near the knee (points/capacity.py); an interpolated recorded run does not.
    noisy: Callable[[Settings], bool] = lambda settings: True
    # The settings of one configuration measured beside others (deployment.parallel > 1).
    for_slot: Callable[[Settings, Slot], Settings] = lambda settings, slot: settings

    @property
    def settings(self) -> type[Placement]:
        """Its settings model (the one its `kind` picks in a sweep file): where its server runs."""
        return SETTINGS_BY_KIND[self.name]

    @property
    def on_this_host(self) -> bool:
        """Its server runs on this machine: its CPUs, GPUs and power are ours to read."""
        return self.settings.on_this_host

    @property
    def plays_recorded_run(self) -> bool:
        """No server: a recorded run answers (no device, power, model or history to ask)."""
        return self.settings.plays_recorded_run

    @property
    def whereabouts(self) -> Whereabouts:
        return Whereabouts.of(self.settings, self.name)


def local_driver(
    spec: SweepSpec, spec_path: Path, deployment: Deployment, config: ServerConfig
) -> LoadDriver:
    return load_driver(spec, spec_path, config.tokenizer or config.model)


def load_driver(spec: SweepSpec, spec_path: Path, tokenizer: str) -> LoadDriver:
    """The spec's load generator (load.driver) with a tokenizer it can load here."""
    cpus = parse_cpus(spec.load.client_cpus) if spec.load.client_cpus else None
    replays = any(p.plays_trace for p in spec.load.profiles)
    # a replayed trace fits every configuration's context alike: the smallest
    context = (
        smallest_context(expand_configs(spec, spec_path.parent, spec_path)) if replays else None
    )

    def vllm_bench() -> LoadDriver:
        return VllmBenchDriver(
            spec.load.data,
            demo.resolve_builtin(tokenizer),
            cpus=cpus,
            spec_dir=spec_path.parent,
            context=context,
        )

    def guidellm() -> LoadDriver:
        return GuideLLMDriver(
            spec.load.data,
            spec_path.parent,
            demo.resolve_builtin(tokenizer),
            python=sys.executable,
            cpus=cpus,
            processes=spec.load.client_processes,
            context=context,
        )

    if spec.load.driver == "vllm-bench":
        return vllm_bench()
    if spec.load.driver == "cross-check":
        # they take turns, never load together: both may share the client's cores
        return CrossCheckDriver({"guidellm": guidellm(), "vllm-bench": vllm_bench()})
    return guidellm()


def _helm_driver(
    spec: SweepSpec, spec_path: Path, deployment: Deployment, config: ServerConfig
) -> LoadDriver:
    # The model is a storage URI on the cluster; the client needs a tokenizer it can load here.
    return load_driver(spec, spec_path, tokenizer_for(config.model, config.tokenizer, config.label))


def _recorded_driver(
    spec: SweepSpec, spec_path: Path, deployment: Deployment, config: ServerConfig
) -> LoadDriver:
    assert isinstance(deployment, RecordedDeployment)
    return RecordedDriver(deployment)


def _resolve_helm(settings: Settings, where: Where) -> Settings:
    """Release name chosen; values files, chart directory and CA bundle as absolute paths
    (their existence was checked with the plan)."""
    chart = settings.chart
    if chart.startswith(("/", "./", "../", "~")):
        chart = where.absolute(chart)
    return settings.model_copy(
        update={
            "release": release_name(settings, where.spec.name),
            "values": [where.absolute(v) for v in settings.values],
            "chart": chart,
            "ca_bundle": where.absolute(settings.ca_bundle) if settings.ca_bundle else None,
            "keep": where.keep or settings.keep,
        }
    )


def _resolve_recorded(settings: Settings, where: Where) -> Settings:
    """The recorded run: a directory relative to the sweep file, or a run id."""
    beside = where.spec_path.parent / settings.run
    try:
        path = beside if is_run(beside) else resolve_run(settings.run, where.output_root)
    except StoreError as exc:
        raise SpecError(f"{where.spec_path}: deployment.run: {exc}") from None
    return settings.model_copy(update={"run": str(path)})


def _local_slot(settings: Settings, slot: Slot) -> Settings:
    if not slot.gpus:
        return settings
    env = {**settings.env, "CUDA_VISIBLE_DEVICES": ",".join(slot.gpus)}
    return settings.model_copy(update={"env": env})


def _helm_slot(settings: Settings, slot: Slot) -> Settings:
    # Releases installed at once need names of their own (and so InferenceServices, pods).
    return settings.model_copy(update={"release": config_release(settings.release, slot.config_id)})


KINDS: dict[str, Kind] = {
    "local": Kind("local", 60.0, LocalVllmServer, local_driver, for_slot=_local_slot),
    "endpoint": Kind("endpoint", 2.0, EndpointServer, local_driver),
    "recorded": Kind(
        "recorded",
        0.0,
        lambda settings, layout, on_status, served: RecordedDeployment(settings),
        _recorded_driver,
        resolve=_resolve_recorded,
        noisy=lambda settings: isinstance(settings, RecordedSettings) and settings.noisy,
    ),
    "helm": Kind(
        "helm",
        180.0,
        HelmDeployment,
        _helm_driver,
        resolve=_resolve_helm,
        check_plan=check_helm_plan,
        for_slot=_helm_slot,
    ),
}


def kind_of(spec: SweepSpec) -> Kind:
    return KINDS[spec.deployment.kind]
