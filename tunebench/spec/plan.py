"""Expand a SweepSpec into the work to do: server configurations x load points.

Configurations are variants x the product of the matrix lists (in file order), each
merged over the base `server.args`. Load points are each profile's list of targets.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunebench.errors import SpecError
from tunebench.spec.engine_args import token_count
from tunebench.spec.load_kind import LoadKind
from tunebench.spec.models import NON_ARG_KEYS, SEARCH_FIELDS, SweepSpec, TraceData

BUILTIN_PREFIX = "builtin:"
# A capacity search's default sd of one probe's log SLO ratio (points/capacity.py): chosen on
# the training repeats of the recorded grid (benchmarks/capacity_accuracy.py measures it).
DEFAULT_NOISE = 0.2


@dataclass(frozen=True)
class ServerConfig:
    config_id: str  # c1, c2, ... in plan order
    label: str  # what distinguishes it, e.g. "max-num-seqs=2"
    model: str
    tokenizer: str | None
    args: dict[str, Any]  # merged engine args, file order
    varied: dict[str, Any] = field(default_factory=dict)  # matrix/variant values only

    def command_args(self) -> list[str]:
        return engine_arg_list(self.args)


def gpus_per_server(args: dict[str, Any]) -> int:
    """GPUs one server of these engine args holds: tensor x pipeline x data parallel."""
    needed = 1
    for name in ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size"):
        value = args.get(name, args.get(name.replace("-", "_")))
        if value is not None:
            needed *= int(value)
    return needed


@dataclass(frozen=True)
class SearchSettings:
    """A `kind: capacity` profile: its probes are `arrival` points at rates chosen at run time
    (arrival replay: replay points of the profile's trace, at speeds chosen at run time)."""

    arrival: str = "poisson"
    start_rate: float | None = None  # first configuration (None: 1 req/s); later: previous capacity
    tolerance: float = 0.05
    max_probes: int = 8
    max_rate: float | None = None
    noise: float = DEFAULT_NOISE  # sd of one probe's log SLO ratio (points/capacity.py)
    sample_margin: float | None = None  # None: points/capacity.py SAMPLE_MARGIN


@dataclass(frozen=True)
class LoadPoint:
    point_id: str  # e.g. concurrent-4, poisson-2.5, synchronous
    kind: str
    target: float | None  # streams or rate; None for synchronous/sweep
    max_seconds: float | None
    max_requests: int | None
    warmup: float | None
    sweep_points: int | None = None
    search: SearchSettings | None = None  # kind capacity only
    cooldown: float | None = None  # as warmup, cropped from the end of the window
    trace: TraceData | None = None  # kind replay: the trace it plays (target: its speed)

    def probe(self, number: int, rate: float, seconds: float | None = None) -> "LoadPoint":
        """Probe `number` of a capacity search, at `rate` req/s, over `seconds` (default:
        the profile's max_seconds). A search over replay speed: a replay of the trace at
        speed `rate`, cut at max_seconds if the profile sets one."""
        assert self.search is not None, "only a capacity point is probed"
        if self.search.arrival == LoadKind.REPLAY:
            assert self.trace is not None, "a search over replay speed carries its trace"
            return LoadPoint(
                point_id=f"capacity-{number}",
                kind="replay",
                target=rate,
                max_seconds=self.max_seconds,
                max_requests=None,
                warmup=None,
                trace=self.trace,
            )
        return LoadPoint(
            point_id=f"capacity-{number}",
            kind=self.search.arrival,
            target=rate,
            max_seconds=seconds or self.max_seconds,
            max_requests=None,
            warmup=self.warmup,
            cooldown=self.cooldown,
        )


@dataclass(frozen=True)
class Plan:
    configs: list[ServerConfig]
    points: list[LoadPoint]
    repeats: int = 1  # every fixed point this many times, configurations alternating


def engine_arg_list(args: dict[str, Any]) -> list[str]:
    """Engine args as vLLM command-line flags.

    True -> `--flag`; False -> `--no-flag` (vLLM's boolean options accept it); None -> left
    out (vLLM's default); a mapping -> JSON; a list -> several values after one flag.
    """
    out: list[str] = []
    for name, value in args.items():
        flag = f"--{name}"
        if value is None:
            continue
        if value is True:
            out.append(flag)
        elif value is False:
            out.append(f"--no-{name}")
        elif isinstance(value, dict):
            out += [flag, json.dumps(value, separators=(",", ":"), sort_keys=True)]
        elif isinstance(value, list):
            out += [flag, *(str(v) for v in value)]
        else:
            out += [flag, _scalar(value)]
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def format_value(value: Any) -> str:
    """Short, stable text of an arg value for labels and CSV columns."""
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "true" if value else "false"
    return _scalar(value)


def args_key(args: dict[str, Any]) -> str:
    """Identity of a configuration's engine args: their text, args left at vLLM's default
    (None) ignored and secret values masked (it is stored in study.db and compared across
    runs)."""
    from tunebench.redact import redact

    return repr(sorted((k, format_value(v)) for k, v in redact(args).items() if v is not None))


def resolve_model(model: str, spec_dir: Path, key: str, spec_path: Path) -> str:
    """A builtin name, an existing local path (relative to the spec file), or a hub id."""
    if model.startswith(BUILTIN_PREFIX):
        from tunebench import demo

        name = model.removeprefix(BUILTIN_PREFIX)
        if name not in demo.BUILTIN_MODELS:
            raise SpecError(
                f"{spec_path}: {key}: unknown builtin model {name!r}; "
                f"use one of {', '.join(BUILTIN_PREFIX + n for n in demo.BUILTIN_MODELS)}"
            )
        return model  # built on demand by the runner, cached
    if model.startswith(("/", "./", "../", "~")):
        path = (spec_dir / Path(model).expanduser()).resolve()
        if not path.exists():
            raise SpecError(f"{spec_path}: {key}: local model path {path} does not exist")
        return str(path)
    return model


def build_plan(spec: SweepSpec, spec_path: Path, default_noise: float | None = None) -> Plan:
    """Configurations x points; checks that depend on the deployment kind are made by
    `assemble.plan`, which services call instead of this. `default_noise`: a capacity search's
    noise model where the profile sets none (default DEFAULT_NOISE; 0 for a kind whose
    measurements repeat exactly)."""
    spec_dir = spec_path.parent
    configs = expand_configs(spec, spec_dir, spec_path)
    points = _expand_points(
        spec, spec_path, DEFAULT_NOISE if default_noise is None else default_noise
    )
    _check_context_fits(spec, configs, spec_path)
    return Plan(configs=configs, points=points, repeats=spec.repeats)


def expand_configs(spec, spec_dir: Path, spec_path: Path) -> list[ServerConfig]:
    """Variants x matrix of `spec.server` over `spec.model` (a sweep or a batch spec)."""
    variants = spec.server.variants or [None]
    matrix_keys = list(spec.server.matrix)
    combos = list(itertools.product(*(spec.server.matrix[k] for k in matrix_keys)))
    configs: list[ServerConfig] = []
    for variant in variants:
        for combo in combos:
            varied: dict[str, Any] = {}
            args = dict(spec.server.args)
            model, tokenizer = spec.model, spec.tokenizer
            label_parts: list[str] = []
            if variant is not None:
                label_parts.append(variant.name)
                varied["variant"] = variant.name
                args.update(variant.args)
                model = variant.model or model
                tokenizer = variant.tokenizer or tokenizer
            for key, value in zip(matrix_keys, combo):
                varied[key] = value
                label_parts.append(f"{key}={format_value(value)}")
                if key == "model":
                    model = str(value)
                elif key == "tokenizer":
                    tokenizer = str(value)
                else:
                    args[key] = value
            index = len(configs) + 1
            where = "server.matrix.model" if "model" in varied else "model"
            configs.append(
                ServerConfig(
                    config_id=f"c{index}",
                    label=", ".join(label_parts) or "base",
                    model=resolve_model(model, spec_dir, where, spec_path),
                    tokenizer=(
                        resolve_model(tokenizer, spec_dir, "tokenizer", spec_path)
                        if tokenizer
                        else None
                    ),
                    args={k: v for k, v in args.items() if k not in NON_ARG_KEYS},
                    varied=varied,
                )
            )
    return configs


def _expand_points(spec: SweepSpec, spec_path: Path, default_noise: float) -> list[LoadPoint]:
    points: list[LoadPoint] = []
    seen: set[str] = set()
    for number, profile in enumerate(spec.load.profiles):
        trace: TraceData | None = None
        if profile.plays_trace:
            played = profile.data or spec.load.data
            assert isinstance(played, TraceData)  # models.Load: a replay profile plays a trace
            trace = played
        for target in profile.targets():
            point_id = profile.kind if target is None else f"{profile.kind}-{_scalar(target)}"
            if trace is not None and profile.kind == LoadKind.REPLAY:
                point_id = f"replay-{trace.label}-{_scalar(target)}"
            if point_id in seen:
                raise SpecError(
                    f"{spec_path}: load.profiles[{number}]: point {point_id} is listed twice; "
                    "list it once"
                )
            seen.add(point_id)
            points.append(
                LoadPoint(
                    point_id=point_id,
                    kind=profile.kind,
                    target=target,
                    max_seconds=profile.max_seconds,
                    max_requests=profile.max_requests,
                    warmup=profile.warmup,
                    cooldown=profile.cooldown,
                    sweep_points=profile.sweep_points,
                    search=(
                        _search_settings(profile, default_noise)
                        if profile.kind == LoadKind.CAPACITY
                        else None
                    ),
                    trace=trace,
                )
            )
    return points


def _search_settings(profile, default_noise: float) -> SearchSettings:
    given = {k: getattr(profile, k) for k in SEARCH_FIELDS}
    if given["noise"] is None:
        given["noise"] = default_noise
    return SearchSettings(**{k: v for k, v in given.items() if v is not None})


def smallest_context(configs: list[ServerConfig]) -> int | None:
    """The smallest max-model-len of the configurations; None when one leaves it to vLLM."""
    limits = [token_count(c.args.get("max-model-len")) for c in configs]
    if not limits or any(limit is None for limit in limits):
        return None
    return min(limit for limit in limits if limit is not None)


def trace_context(trace: TraceData, configs: list[ServerConfig], spec_path: Path) -> int:
    """The tokens one replayed request may hold (prompt + output): the trace's `context`, else
    the smallest max-model-len of the configurations, so that every configuration serves the
    same scaled requests."""
    context = trace.context if trace.context is not None else smallest_context(configs)
    if context is None:
        raise SpecError(
            f"{spec_path}: load.data.context: a trace's lengths are fitted to the model's "
            "context, and max-model-len is not set for every configuration; set "
            "server.args.max-model-len or load.data.context (tokens, prompt + output)"
        )
    return context


def _check_context_fits(spec: SweepSpec, configs: list[ServerConfig], spec_path: Path) -> None:
    data = spec.load.data
    if data.kind not in ("synthetic", "sessions"):
        return
    needed = data.prompt_tokens + 2 * data.prompt_tokens_stdev + data.output_tokens
    what = "prompt+output tokens"
    if data.kind == "synthetic" and data.prefix is not None:
        needed += data.prefix.tokens  # the shared prefix comes before the prompt
        what = "prefix+prompt+output tokens"
    if data.kind == "sessions":
        # the last turn carries every earlier turn and answer as its history
        needed *= data.turns
        what = f"prompt+output tokens x {data.turns} turns"
    for config in configs:
        limit = token_count(config.args.get("max-model-len"))  # None: -1/auto, vLLM fits it
        if limit is not None and limit < needed:
            raise SpecError(
                f"{spec_path}: {_arg_origin(spec, config, 'max-model-len')}: "
                f"max-model-len {format_value(config.args['max-model-len'])} "
                f"({config.label}) is smaller than "
                f"load.data {what} ({needed}); raise max-model-len or shorten data"
            )


def _arg_origin(spec: SweepSpec, config: ServerConfig, name: str) -> str:
    """The key of the file that gave `config` its value of engine arg `name`."""
    if name in config.varied:
        return f"server.matrix.{name}"
    for number, variant in enumerate(spec.server.variants):
        if variant.name == config.varied.get("variant") and name in variant.args:
            return f"server.variants[{number}].args.{name}"
    return f"server.args.{name}"
