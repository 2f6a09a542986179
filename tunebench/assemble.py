"""The composition root: a sweep file's plan checked, and the runner that measures it,
assembled from the parts its deployment kind names (tunebench/kinds.py), its load, quality,
energy and roofline settings.

Commands (sweep, tune, resume, merge, helm-values) ask here for a plan and a runner;
nothing below this module knows how the parts are put together.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from tunebench import demo, environment
from tunebench.deploy.gpu_share import gpus_needed
from tunebench.energy.choose import make_meter
from tunebench.errors import SpecError
from tunebench.kinds import Settings, Slot, Where, kind_of
from tunebench.load.trace import TraceFormatError, fit_lengths, load_slice
from tunebench.machine.choose import make_watch
from tunebench.quality.collect import QualityRequest
from tunebench.quality.lmeval import LmEvalRequest, check_task
from tunebench.quality.prompts import load_prompts, prompts_path
from tunebench.quality.step import QualityCheck
from tunebench.roofline.bandwidth import gpu_bandwidth
from tunebench.roofline.plan import RooflinePlanner
from tunebench.runner import ConfigRunner, PointExtras, PointRules
from tunebench.seams.before_load import BeforeLoad
from tunebench.seams.load import LoadDriver
from tunebench.seams.progress import Reporter
from tunebench.spec.deployments import LocalSettings
from tunebench.spec.kserve_chart import tokenizer_for
from tunebench.spec.models import SessionsData, SweepSpec, SyntheticData
from tunebench.spec.plan import Plan, ServerConfig, build_plan, gpus_per_server, trace_context
from tunebench.store.run import RunStore


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
    check_traces(spec, spec_path, planned.configs)
    device = spec.roofline.device
    if device and gpu_bandwidth(device) is None:
        raise SpecError(
            f"{spec_path}: roofline.device: {device!r} is not in the bandwidth table "
            "(docs/roofline.md): name a listed GPU or give roofline.bandwidth_gbs"
        )
    return planned


def check_traces(spec: SweepSpec, spec_path: Path, configs: list[ServerConfig]) -> None:
    """Every replayed trace read, sliced and fitted to the context before anything starts:
    a bad file, an empty slice or a context too small is one line naming the key."""
    data = spec.load.data
    shaped = data.kind == "sessions" or (data.kind == "synthetic" and data.prefix is not None)
    if shaped and kind_of(spec).plays_recorded_run:
        # a recorded run models a server's latency by load, not by history or shared prefixes
        what = "multi-turn sessions" if data.kind == "sessions" else "shared prefixes"
        raise SpecError(
            f"{spec_path}: load.data: a recorded run (deployment kind recorded) cannot answer "
            f"{what}; use deployment kind local, endpoint or helm"
        )
    for number, profile in enumerate(spec.load.profiles):
        if not profile.plays_trace:
            continue
        if kind_of(spec).plays_recorded_run:
            raise SpecError(
                f"{spec_path}: load.profiles[{number}]: a recorded run (deployment kind "
                "recorded) cannot replay a trace; use deployment kind local, endpoint or helm"
            )
        key = f"load.profiles[{number}].data" if profile.data else "load.data"
        trace = profile.data or spec.load.data
        assert trace.kind == "trace"
        context = trace_context(trace, configs, spec_path)
        try:
            requests = load_slice(
                (spec_path.parent / trace.path).resolve(),
                trace.format,
                trace.start,
                trace.requests,
                trace.seconds,
            )
            # the specials a tokenizer adds are not known here; one BOS is the usual case
            fit_lengths(requests, context, trace.length_scale, trace.block_tokens, min_prompt=2)
        except TraceFormatError as exc:
            raise SpecError(f"{spec_path}: {key}: {exc}") from None


def parallel_of(spec: SweepSpec) -> int:
    """How many configurations the sweep measures at once (deployment.parallel)."""
    return int(getattr(spec.deployment, "parallel", 1))


def parallel_gpus(spec: SweepSpec) -> list[str] | None:
    """The GPUs a local sweep with parallel > 1 shares out (None: nothing to share out):
    deployment.gpus, else CUDA_VISIBLE_DEVICES of the server's environment, else every GPU
    nvidia-smi lists."""
    settings = spec.deployment
    if not kind_of(spec).on_this_host or parallel_of(spec) < 2:
        return None
    # the settings of a server on this host say which GPUs and environment it gets
    assert isinstance(settings, LocalSettings), "a server on this host has local settings"
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
    assert isinstance(spec.deployment, LocalSettings)  # GPUs to share: a server on this host
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
    quality_gates_load: bool = False,
) -> ConfigRunner:
    """The deployment, load-driver factory and runner a sweep (or a tune) uses; with `slot`,
    those of one configuration measured beside others; with `quality_gates_load` (a tune),
    a configuration that fails the quality gate measures no load."""
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
        PointRules(
            slo=spec.slo.as_dict() if spec.slo else None,
            client_tolerance=spec.client_tolerance,
            expected_output_tokens=fixed_output_tokens(spec),
        ),
        before_load=_before_load(spec, spec_path, store, reporter, quality_gates_load),
        extras=PointExtras(
            cost=spec.cost.model_dump() if spec.cost else None,
            make_meter=lambda config: make_meter(
                spec.energy,
                kind.whereabouts,
                getattr(settings, "env", None),
                gpus_per_server(config.args),
            ),
            roofline=RooflinePlanner(
                spec.roofline,
                kind.whereabouts,
                getattr(settings, "cpus", None),
                store.layout.logs,
            ),
            make_machine_watch=(
                (
                    lambda config: make_watch(
                        kind.whereabouts,
                        getattr(settings, "cpus", None),
                        spec.machine.probe_interval_s,
                        getattr(settings, "env", None),
                    )
                )
                if spec.machine.watch
                else None
            ),
            # a recorded run played back has no first point to measure again; the sentinel is
            # a GuideLLM point (the other drivers' reports are read point by point as planned)
            sentinel_seconds=(
                spec.machine.sentinel_seconds
                if spec.machine.sentinel
                and not kind.plays_recorded_run
                and spec.load.driver == "guidellm"
                else None
            ),
            sentinel_every=spec.machine.sentinel_every,
            sentinel_every_s=spec.machine.sentinel_every_s,
        ),
    )


def _before_load(
    spec: SweepSpec, spec_path: Path, store: RunStore, reporter: Reporter, gates_load: bool
) -> list[BeforeLoad]:
    """The steps on each ready server before its load: the quality check (a recorded run has
    no server to ask, its recorded quality stands)."""
    request = quality_request(spec, spec_path)
    if request is None or kind_of(spec).plays_recorded_run:
        return []
    return [QualityCheck(store, reporter, request, gates_load)]


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
        load_prompts(path)[: quality.limit],
        quality.max_tokens,
        quality.top_logprobs,
        quality.max_seconds,
        lm_eval,
        _tokenizer_of(spec),
    )


def _tokenizer_of(spec: SweepSpec) -> Callable[[ServerConfig], str]:
    """A local tokenizer for a configuration (the model may be a URI only the cluster reads)."""
    if spec.deployment.model_is_cluster_uri:
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
    if isinstance(data, (SyntheticData, SessionsData)) and not data.output_tokens_stdev:
        return data.output_tokens
    return None
