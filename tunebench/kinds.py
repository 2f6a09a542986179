"""Deployment kinds: the one map from `deployment.kind` to everything that differs by kind.

For each kind: how its Deployment is made, which LoadDriver measures it, how its settings
are resolved against the sweep file (relative paths, names chosen), what is checked before
anything starts, and how long a start typically takes (for --dry-run estimates).

Adding a kind: its settings model goes in spec/deployments.py (the sweep file's schema),
its Deployment in deploy/ (and a LoadDriver in load/ if GuideLLM cannot drive it), and one
`Kind` entry here. Nothing else knows the kinds.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tunebench import demo, environment
from tunebench.deploy.endpoint import EndpointServer
from tunebench.deploy.gpu_share import gpus_needed
from tunebench.deploy.helm import HelmDeployment
from tunebench.deploy.local import LocalVllmServer
from tunebench.energy.choose import make_meter
from tunebench.errors import SpecError, StoreError
from tunebench.load.cross_check import CrossCheckDriver
from tunebench.load.guidellm import GuideLLMDriver
from tunebench.load.vllm_bench import VllmBenchDriver
from tunebench.processes import parse_cpus
from tunebench.quality.collect import QualityRequest
from tunebench.quality.lmeval import LmEvalRequest, check_task
from tunebench.quality.prompts import load_prompts, prompts_path
from tunebench.replay.deployment import ReplayDeployment
from tunebench.replay.driver import ReplayDriver
from tunebench.roofline.bandwidth import gpu_bandwidth
from tunebench.roofline.plan import RooflinePlanner
from tunebench.runner import ConfigRunner
from tunebench.seams.deployment import Deployment, StatusCallback
from tunebench.seams.load import LoadDriver
from tunebench.seams.progress import Reporter
from tunebench.spec.deployments import ReplaySettings
from tunebench.spec.kserve_chart import (
    check_helm_plan,
    config_release,
    release_name,
    tokenizer_for,
)
from tunebench.spec.models import SweepSpec, SyntheticData
from tunebench.spec.plan import Plan, ServerConfig, build_plan
from tunebench.store.layout import RunLayout, is_run
from tunebench.store.run import RunStore, resolve_run

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
    # its decisions near the knee (points/capacity.py); the interpolating replay does not.
    noisy: Callable[[Settings], bool] = lambda settings: True
    # The settings of one configuration measured beside others (deployment.parallel > 1).
    for_slot: Callable[[Settings, Slot], Settings] = lambda settings, slot: settings


def local_driver(
    spec: SweepSpec, spec_path: Path, deployment: Deployment, config: ServerConfig
) -> LoadDriver:
    return load_driver(spec, spec_path, config.tokenizer or config.model)


def load_driver(spec: SweepSpec, spec_path: Path, tokenizer: str) -> LoadDriver:
    """The spec's load generator (load.driver) with a tokenizer it can load here."""
    cpus = parse_cpus(spec.load.client_cpus) if spec.load.client_cpus else None

    def vllm_bench() -> LoadDriver:
        return VllmBenchDriver(spec.load.data, demo.resolve_builtin(tokenizer), cpus=cpus)

    def guidellm() -> LoadDriver:
        return GuideLLMDriver(
            spec.load.data,
            spec_path.parent,
            demo.resolve_builtin(tokenizer),
            python=sys.executable,
            cpus=cpus,
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


def _replay_driver(
    spec: SweepSpec, spec_path: Path, deployment: Deployment, config: ServerConfig
) -> LoadDriver:
    assert isinstance(deployment, ReplayDeployment)
    return ReplayDriver(deployment)


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


def _resolve_replay(settings: Settings, where: Where) -> Settings:
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
    "replay": Kind(
        "replay",
        0.0,
        lambda settings, layout, on_status, served: ReplayDeployment(settings),
        _replay_driver,
        resolve=_resolve_replay,
        noisy=lambda settings: isinstance(settings, ReplaySettings) and settings.noisy,
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


def plan(spec: SweepSpec, spec_path: Path) -> Plan:
    """The plan of a sweep (or tune) with its kind's checks made: nothing starts after this
    fails for a reason that could be known before."""
    kind = kind_of(spec)
    noisy = kind.noisy(spec.deployment)
    planned = build_plan(spec, spec_path, default_noise=None if noisy else 0.0)
    check = kind.check_plan
    if check is not None:
        check(spec, planned.configs, spec_path)
    check_quality(spec, spec_path, planned.configs)
    check_parallel(spec, spec_path, planned.configs)
    device = spec.roofline.device
    if device and gpu_bandwidth(device) is None:
        raise SpecError(
            f"{spec_path}: roofline.device: {device!r} is not in the bandwidth table "
            "(docs/roofline.md): name a listed GPU or give roofline.bandwidth_gbs"
        )
    return planned


def parallel_of(spec: SweepSpec) -> int:
    """How many configurations the sweep measures at once (deployment.parallel)."""
    return int(getattr(spec.deployment, "parallel", 1))


def parallel_gpus(spec: SweepSpec) -> list[str] | None:
    """The GPUs a local sweep with parallel > 1 shares out (None: nothing to share out):
    deployment.gpus, else CUDA_VISIBLE_DEVICES of the server's environment, else every GPU
    nvidia-smi lists."""
    settings = spec.deployment
    if spec.deployment.kind != "local" or parallel_of(spec) < 2:
        return None
    if settings.gpus:
        return list(settings.gpus)
    visible = settings.env.get("CUDA_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [g.strip() for g in visible.split(",") if g.strip()]
    return [str(index) for index, _ in enumerate(environment.gpus())]


def check_parallel(spec: SweepSpec, spec_path: Path, configs: list[ServerConfig]) -> None:
    """deployment.parallel is possible: on a local box, GPUs to share out that fit each
    configuration (helm releases are named apart by config id, kinds._helm_slot)."""
    if parallel_of(spec) < 2:
        return
    gpus = parallel_gpus(spec)
    if gpus is None:
        return
    if spec.deployment.port is not None:
        raise SpecError(
            f"{spec_path}: deployment.port: servers measured at once need ports of their "
            "own; leave port unset (a free one each) or set parallel: 1"
        )
    if not gpus:
        raise SpecError(
            f"{spec_path}: deployment.parallel: kind local measures configurations side by "
            "side on GPUs of their own, and no GPU is visible here (nvidia-smi); list them "
            "in deployment.gpus or set parallel: 1 (servers sharing CPU cores would not give "
            "comparable figures)"
        )
    for config in configs:
        if gpus_needed(config) > len(gpus):
            raise SpecError(
                f"{spec_path}: deployment.parallel: {config.config_id} ({config.label}) needs "
                f"{gpus_needed(config)} GPUs (tensor x pipeline x data parallel size) and "
                f"{len(gpus)} are shared out ({', '.join(gpus)}); add GPUs to "
                "deployment.gpus or lower its parallel sizes"
            )


def resolve_settings(
    spec: SweepSpec, spec_path: Path, output_root: Path, keep: bool = False
) -> Settings:
    """`spec.deployment` with everything relative to the spec file made absolute."""
    return kind_of(spec).resolve(spec.deployment, Where(spec, spec_path, output_root, keep))


def build_runner(
    spec: SweepSpec,
    spec_path: Path,
    store: RunStore,
    output_root: Path,
    reporter: Reporter,
    keep: bool = False,
    slot: Slot | None = None,
) -> ConfigRunner:
    """The deployment, load-driver factory and runner a sweep (or a tune) uses; with `slot`,
    those of one configuration measured beside others."""
    kind = kind_of(spec)
    settings = resolve_settings(spec, spec_path, output_root, keep)
    if slot is not None:
        settings = kind.for_slot(settings, slot)
    deployment = kind.deployment(
        settings,
        store.layout,
        reporter.server_status,
        spec.served_model_name,
    )

    def make_driver(config: ServerConfig) -> LoadDriver:
        return kind.driver(spec, spec_path, deployment, config)

    return ConfigRunner(
        store,
        deployment,
        make_driver,
        spec.metrics,
        reporter,
        slo=spec.slo.as_dict() if spec.slo else None,
        client_tolerance=spec.client_tolerance,
        expected_output_tokens=fixed_output_tokens(spec),
        quality=quality_request(spec, spec_path),
        cost=spec.cost.model_dump() if spec.cost else None,
        make_meter=lambda config: make_meter(
            spec.energy, kind.name, getattr(settings, "env", None)
        ),
        roofline=RooflinePlanner(
            spec.roofline,
            kind.name,
            getattr(settings, "cpus", None),
            store.layout.logs,
        ),
    )


def quality_request(spec: SweepSpec, spec_path: Path) -> QualityRequest | None:
    """The spec's quality check as the runner asks it (prompts read; SpecError if bad)."""
    if spec.quality is None:
        return None
    path = prompts_path(spec.quality.prompts, spec_path.parent)
    quality = spec.quality
    lm_eval = None
    if quality.lm_eval is not None:
        settings = quality.lm_eval
        include = Path(settings.include_path).expanduser() if settings.include_path else None
        if include is not None and not include.is_absolute():
            include = spec_path.parent / include
        lm_eval = LmEvalRequest(settings.task, include, settings.limit, settings.timeout_s)
        check_task(lm_eval, str(spec_path))
    return QualityRequest(
        load_prompts(path),
        quality.max_tokens,
        quality.top_logprobs,
        quality.max_seconds,
        lm_eval,
        _tokenizer_of(spec),
    )


def _tokenizer_of(spec: SweepSpec) -> Callable[[ServerConfig], str]:
    """A local tokenizer for a configuration (helm: the model is a URI on the cluster)."""
    if kind_of(spec).name == "helm":
        return lambda c: demo.resolve_builtin(tokenizer_for(c.model, c.tokenizer, c.label))
    return lambda c: demo.resolve_builtin(c.tokenizer or c.model)


def check_quality(spec: SweepSpec, spec_path: Path, configs: list[ServerConfig]) -> None:
    """Bad quality input fails before any server starts: the prompts file, the reference."""
    if spec.quality is None:
        return
    quality_request(spec, spec_path)
    reference = spec.quality.reference
    if reference is not None and spec.tune is None:
        names = {c.config_id for c in configs} | {c.label for c in configs}
        if reference not in names:
            raise SpecError(
                f"{spec_path}: quality.reference {reference!r} is no configuration of this "
                f"sweep; use a config id ({', '.join(c.config_id for c in configs[:6])}) or "
                "a label, or leave it out to compare with the first"
            )


def fixed_output_tokens(spec: SweepSpec) -> int | None:
    """The output length every request asks for, when the data fixes one (synthetic data
    without spread: GuideLLM sends it as max_tokens with ignore_eos)."""
    data = spec.load.data
    if isinstance(data, SyntheticData) and not data.output_tokens_stdev:
        return data.output_tokens
    return None
