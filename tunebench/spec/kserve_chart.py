"""The complete vllm-kserve chart values of one server configuration.

The chart has quirks that make hand-edited values files fragile, and each is handled here:
- a user `model.args` list *replaces* the chart's default list (`--gpu-memory-utilization=0.90`),
  so tunebench always writes the whole list: chart defaults, then the values files' args,
  then the configuration's engine args, merged by flag name;
- the chart itself passes `--port`, `--model` and `--served-model-name`: those are refused
  as engine args (`served_model_name` becomes `model.modelNameOverride`);
- 0.7.0 cannot render `resources` (a nil pointer in its template) and has no Serverless
  mode; it always turns on endpoint auth, so a bearer token is required;
- every version renders `nodeSelector` under `predictor.model`, where KServe does not
  accept it, so it is refused with the alternative;
- names derive from the release name unless `fullnameOverride` is set, so tunebench sets it
  and the InferenceService, ServingRuntime and Route are all named after the release.
"""

from __future__ import annotations

import json
import re
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tunebench.errors import SpecError
from tunebench.redact import is_secret_name
from tunebench.spec.plan import gpus_per_server

CHART_DEFAULT_ARGS = ("--gpu-memory-utilization=0.90",)
#: Flags the chart's ServingRuntime or InferenceService already passes to vLLM.
CHART_OWNED_FLAGS = {
    "port": "the chart runs vLLM on --port=8080",
    "host": "the chart's container listens on all interfaces",
    "model": "the chart serves the model from model.uri at /mnt/models; set the sweep's model",
    "served-model-name": "the chart sets it; use the sweep's served_model_name",
}
URI_SCHEMES = ("oci://", "pvc://", "s3://", "hf://", "gs://", "https://")


@dataclass(frozen=True)
class ChartQuirks:
    version: str
    renders_resources: bool = True
    serverless: bool = True  # deploymentMode Serverless is accepted
    auth_always_on: bool = False
    default_args: tuple[str, ...] = CHART_DEFAULT_ARGS


KNOWN_CHARTS = {
    "0.5.11": ChartQuirks("0.5.11"),
    "0.6.1": ChartQuirks("0.6.1"),
    "0.7.0": ChartQuirks("0.7.0", renders_resources=False, serverless=False, auth_always_on=True),
}


def quirks_for(version: str) -> ChartQuirks:
    """Known versions exactly; an unknown one is treated like the newest known release."""
    if version in KNOWN_CHARTS:
        return KNOWN_CHARTS[version]
    newest = KNOWN_CHARTS[max(KNOWN_CHARTS, key=lambda v: tuple(int(x) for x in v.split(".")))]
    return ChartQuirks(
        version,
        newest.renders_resources,
        newest.serverless,
        newest.auth_always_on,
        newest.default_args,
    )


def release_name(settings, sweep_name: str) -> str:
    """`deployment.release`, else tb-<sweep name> as a DNS label of at most 40 characters."""
    if settings.release:
        return settings.release
    slug = re.sub(r"[^a-z0-9-]+", "-", sweep_name.lower()).strip("-")
    return ("tb-" + slug)[:40].rstrip("-")


def config_release(release: str, config_id: str) -> str:
    """One configuration's release when several are installed at once (deployment.parallel):
    <release>-<config id>, e.g. tb-latency-c12 (release <= 40 characters, ids c1..cN: within
    helm's 53)."""
    return f"{release}-{config_id}"


def chart_args(args: dict[str, Any]) -> list[str]:
    """Engine args as the chart's `model.args` items ("--flag=value", "--flag", "--no-flag")."""
    return [item for name, value in args.items() for item in _chart_items(name, value)]


def _chart_items(name: str, value: Any) -> list[str]:
    if value is None:
        return []
    if value is True:
        return [f"--{name}"]
    if value is False:
        return [f"--no-{name}"]
    if isinstance(value, dict):
        return [f"--{name}={json.dumps(value, separators=(',', ':'), sort_keys=True)}"]
    if isinstance(value, list):
        return [f"--{name}", *(str(v) for v in value)]
    return [f"--{name}={value}"]


def _parse_chart_args(items: list[Any], where: str) -> dict[str, list[str]]:
    """A `model.args` list as flag -> its items, so later sources can replace a flag."""
    parsed: dict[str, list[str]] = {}
    current: str | None = None
    for item in items:
        text = str(item)
        if text.startswith("--"):
            flag = text[2:].split("=", 1)[0]
            current = flag.removeprefix("no-") if flag.startswith("no-") else flag
            parsed.pop(current, None)
            parsed[current] = [text]
        elif current is not None:
            parsed[current].append(text)
        else:
            raise SpecError(
                f"{where}: model.args item {text!r} does not follow a --flag; "
                "write each arg as --flag=value"
            )
    return parsed


def merge_values(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Helm's coalescing: mappings merge key by key, anything else is replaced."""
    out = deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = deepcopy(value)
    return out


def read_values_files(settings, spec_dir: Path, spec_path: Path) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for index, name in enumerate(settings.values):
        path = (spec_dir / Path(name).expanduser()).resolve()
        key = f"deployment.values[{index}]"
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SpecError(
                f"{spec_path}: {key}: values file {path} does not exist; "
                "paths are relative to the sweep file"
            ) from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            line = " ".join(str(exc).split())[:200]
            raise SpecError(f"{path}: not a valid values file ({line}); fix the YAML") from None
        if data is None:
            continue
        if not isinstance(data, dict):
            raise SpecError(f"{path}: a values file must be a mapping of chart values")
        _check_env_secrets(data.get("model", {}).get("env"), str(path))
        merged = merge_values(merged, data)
    return merged


def _check_env_secrets(env: Any, where: str) -> None:
    for entry in env or []:
        if (
            isinstance(entry, dict)
            and is_secret_name(str(entry.get("name", "")))
            and "value" in entry
        ):
            raise SpecError(
                f"{where}: model.env {entry.get('name')} holds a literal secret; use "
                "valueFrom: {secretKeyRef: {name: <secret>, key: <key>}} so it stays in the cluster"
            )


def model_uri(model: str, where: str) -> str:
    """The chart's `model.uri` for a sweep's model: a storage URI as is, a hub id as hf://."""
    if model.startswith(URI_SCHEMES):
        return model
    if model.startswith("builtin:") or model.startswith(("/", ".", "~")):
        raise SpecError(
            f"{where}: {model!r} is on this machine, which the cluster cannot read; "
            "use a hub id (org/name) or an oci://, pvc://, s3:// or hf:// URI"
        )
    if re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        return f"hf://{model}"
    raise SpecError(
        f"{where}: {model!r} is neither a hub id (org/name) nor a storage URI "
        "(oci://, pvc://, s3://, hf://)"
    )


def tokenizer_for(model: str, tokenizer: str | None, where: str) -> str:
    """What GuideLLM tokenizes with: the tokenizer, else the hub id behind the model."""
    if tokenizer:
        return tokenizer
    if model.startswith("hf://"):
        return model.removeprefix("hf://")
    if not model.startswith(URI_SCHEMES):
        return model
    raise SpecError(
        f"{where}: model {model!r} is a storage URI; set tokenizer: to the hub id "
        "or a local directory of its tokenizer (GuideLLM counts tokens with it)"
    )


def chart_values(
    settings,
    config,
    sweep_name: str,
    served_model_name: str | None,
    spec_dir: Path,
    spec_path: Path,
) -> dict[str, Any]:
    """Every chart value of one configuration; raises SpecError naming the key and the fix."""
    where = f"{spec_path}: {config.label}"
    quirks = quirks_for(settings.chart_version)
    release = release_name(settings, sweep_name)
    values: dict[str, Any] = {
        "deploymentMode": "RawDeployment",
        "fullnameOverride": release,
        "endpoint": {"externalRoute": {"enabled": settings.access == "route"}},
        # One server per configuration: a rolling update would need a second GPU.
        "scaling": {"rawDeployment": {"deploymentStrategy": {"type": "Recreate"}}},
    }
    values = merge_values(values, read_values_files(settings, spec_dir, spec_path))
    values = merge_values(values, settings.overrides)

    model = values.setdefault("model", {})
    model["mode"] = "uri"
    model["uri"] = model_uri(config.model, where)
    if served_model_name:
        model["modelNameOverride"] = served_model_name
    for flag in config.args:
        if flag in CHART_OWNED_FLAGS:
            raise SpecError(f"{where}: server arg {flag}: {CHART_OWNED_FLAGS[flag]}; remove it")
    merged = _parse_chart_args(list(quirks.default_args), "chart defaults")
    merged.update(_parse_chart_args(model.get("args") or [], f"{where}: values"))
    for flag in _parse_chart_args(model.get("args") or [], where):
        if flag in CHART_OWNED_FLAGS:
            raise SpecError(
                f"{where}: values model.args --{flag}: {CHART_OWNED_FLAGS[flag]}; remove it"
            )
    for name, value in config.args.items():
        merged.pop(name, None)
        if value is not None:
            merged[name] = _chart_items(name, value)
    model["args"] = [item for items in merged.values() for item in items]

    env = list(model.get("env") or [])
    names = {e.get("name") for e in env if isinstance(e, dict)}
    env += [{"name": k, "value": v} for k, v in settings.env.items() if k not in names]
    _check_env_secrets(env, f"{where}: deployment.env")
    if env:
        model["env"] = env

    if settings.resources is not None:
        values["resources"] = settings.resources
    needed = gpus_per_server(config.args)
    if needed > 1:
        # The chart asks for one GPU unless told: a TP=2 pod would crash-loop on one. Helm
        # merges these keys over the chart's (or the spec's) other requests and limits.
        if not quirks.renders_resources and not (values.get("hardwareProfile") or {}).get("name"):
            raise SpecError(
                f"{where}: {needed} GPUs per server (tensor x pipeline x data parallel): "
                f"vllm-kserve {quirks.version} cannot render resources; name a "
                "hardwareProfile.name with that many GPUs, or use chart 0.6.1"
            )
        if quirks.renders_resources:
            resources = dict(values.get("resources") or {})
            for side in ("limits", "requests"):
                resources[side] = {**(resources.get(side) or {}), "nvidia.com/gpu": str(needed)}
            values["resources"] = resources
    if values.get("resources") and not quirks.renders_resources:
        raise SpecError(
            f"{where}: resources: vllm-kserve {quirks.version} cannot render resources (its "
            "template fails); drop them and choose hardwareProfile.name, or use chart 0.6.1"
        )
    if not quirks.renders_resources:
        values.pop("resources", None)
    if values.get("deploymentMode") != "RawDeployment" and not quirks.serverless:
        raise SpecError(
            f"{where}: deploymentMode: vllm-kserve {quirks.version} supports only "
            "RawDeployment; remove deploymentMode"
        )
    if values.get("nodeSelector"):
        raise SpecError(
            f"{where}: nodeSelector: vllm-kserve {quirks.version} renders it under "
            "predictor.model, which KServe rejects; use tolerations or a hardware profile"
        )
    return values


def token_needed(settings, values: dict[str, Any]) -> bool:
    """Whether the endpoint will demand a bearer token."""
    return quirks_for(settings.chart_version).auth_always_on or bool(
        values.get("endpoint", {}).get("auth", {}).get("enabled")
    )


def render_values_file(values: dict[str, Any], header: list[str]) -> str:
    comments = "".join(f"# {line}\n" for line in header)
    return comments + yaml.safe_dump(values, sort_keys=False, width=1000)


def check_helm_plan(spec, configs, spec_path: Path) -> None:
    """Plan-time checks of a helm sweep: every configuration's values can be generated."""
    settings = spec.deployment
    spec_dir = spec_path.parent
    if settings.chart.startswith(("/", "./", "../", "~")):
        chart_dir = (spec_dir / Path(settings.chart).expanduser()).resolve()
        chart_yaml = chart_dir / "Chart.yaml"
        if not chart_yaml.exists():
            raise SpecError(
                f"{spec_path}: deployment.chart: {chart_dir} is not a chart "
                "directory (no Chart.yaml)"
            )
        found = str(yaml.safe_load(chart_yaml.read_text()).get("version"))
        if found != settings.chart_version:
            raise SpecError(
                f"{spec_path}: deployment.chart_version {settings.chart_version} "
                f"but {chart_yaml} is version {found}; make them agree"
            )
    if settings.ca_bundle and not (spec_dir / Path(settings.ca_bundle).expanduser()).is_file():
        raise SpecError(
            f"{spec_path}: deployment.ca_bundle: {settings.ca_bundle} does not exist "
            "(paths are relative to the sweep file); give the router's CA file"
        )
    for config in configs:
        where = f"{spec_path}: {config.label}"
        values = chart_values(
            settings, config, spec.name, spec.served_model_name, spec_dir, spec_path
        )
        tokenizer_for(config.model, config.tokenizer, where)
        if token_needed(settings, values) and not (settings.token_env or settings.token_secret):
            raise SpecError(
                f"{spec_path}: deployment: the endpoint requires a bearer token (chart "
                f"{settings.chart_version} auth); set token_env: <ENV VAR> or token_secret: <name>"
            )
