"""The `deployment:` section of a sweep file: one settings model per deployment kind.

How each kind is started, driven and estimated is wired in tunebench/kinds.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from tunebench.processes import parse_cpus
from tunebench.spec.base import Strict


def _check_cpu_list(value: str) -> str:
    parse_cpus(value)  # ValueError: pydantic reports it with the key
    return value


# A Linux CPU list ("0", "0-3", "0,2-3"), kept as written.
CpuList = Annotated[str, AfterValidator(_check_cpu_list)]

PARALLEL_MAX = 32


def parallel_field(what: str) -> Any:
    """`deployment.parallel`: how many configurations are measured at once."""
    return Field(
        1,
        ge=1,
        le=PARALLEL_MAX,
        description=f"measure up to this many configurations at once ({what}); they share "
        "the hardware, so the run records a fair-comparison note",
    )


class Placement(Strict):
    """What a kind's server is, as far as measuring it goes (each settings model says)."""

    #: The server runs on this machine: its CPUs, GPUs and power draw are ours to read.
    on_this_host: ClassVar[bool] = False
    #: No server: a recorded run answers, with no device, power draw or model to ask.
    plays_recorded_run: ClassVar[bool] = False
    #: tunebench starts the server with the spec's engine args (which it then checks).
    passes_engine_args: ClassVar[bool] = False
    #: The model is a URI the cluster pulls, not a path or hub id this host can read: a
    #: tokenizer for this host's side of the work is named apart (spec/kserve_chart.py).
    model_is_cluster_uri: ClassVar[bool] = False


@dataclass(frozen=True)
class Whereabouts:
    """A kind's name (for messages) and its Placement, for the parts that measure a server
    without knowing the kinds (energy meters, the roofline, the machine watch)."""

    kind: str
    on_this_host: bool = False
    plays_recorded_run: bool = False

    @classmethod
    def of(cls, settings: type[Placement] | Placement, kind: str) -> "Whereabouts":
        return cls(kind, settings.on_this_host, settings.plays_recorded_run)


class LocalSettings(Placement):
    """Start `vllm serve` (as `python -m vllm.entrypoints.openai.api_server`) on this host."""

    on_this_host: ClassVar[bool] = True
    passes_engine_args: ClassVar[bool] = True

    kind: Literal["local"]
    host: Literal["127.0.0.1", "localhost", "::1"] = "127.0.0.1"
    port: int | None = Field(None, ge=1024, le=65535, description="None: a free port")
    start_timeout_s: float = Field(600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    python: str | None = Field(None, description="interpreter that has vLLM; default: this one")
    launcher: Literal["module", "vllm-serve"] = "module"
    cpu: Literal["auto", "on", "off"] = Field(
        "auto", description="set the vLLM CPU environment (auto: when no GPU is visible)"
    )
    kv_cache_space_gib: float = Field(1.0, gt=0, description="VLLM_CPU_KVCACHE_SPACE on CPU")
    cpus: CpuList | None = Field(
        None,
        description="Linux CPU list the server's processes are pinned to, e.g. '0' or '0-3' "
        "(on CPU also its OpenMP threads); give the load generator the others with "
        "load.client_cpus so the two do not starve each other",
    )
    parallel: int = parallel_field(
        "each on its own share of `gpus`: CUDA_VISIBLE_DEVICES by the configuration's "
        "tensor x pipeline x data parallel size"
    )
    gpus: list[str] | None = Field(
        None,
        min_length=1,
        description="GPU indices or UUIDs the configurations are shared out over when "
        "parallel > 1 (default: every GPU NVML sees)",
    )


class EndpointSettings(Placement):
    """An already running OpenAI-compatible vLLM server; tunebench never starts or stops it."""

    kind: Literal["endpoint"]
    url: str
    metrics_url: str | None = None
    api_key_env: str | None = Field(None, description="name of the env var holding the key")
    verify_tls: bool = True
    ready_timeout_s: float = Field(30.0, gt=0)

    @field_validator("url", "metrics_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/") if value else value


class RecordedSettings(Placement):
    """Answer every point from an earlier run's recorded points; no server.

    By default a point is interpolated between the recorded ones: the same answer every
    time. With `noisy: true` (a run with per-request samples, ideally with repeats) each
    start draws one recorded server start and each point draws its requests from it, so a
    sweep or tune on a recorded run meets the noise a real one does
    (tunebench/recorded/noisy.py). `kind: replay` is its old name (OLD_KIND_NAMES)."""

    plays_recorded_run: ClassVar[bool] = True

    kind: Literal["recorded"]
    run: str = Field(
        min_length=1, description="run directory (relative to the sweep file) or run id"
    )
    noisy: bool = False
    repeats: list[int] | None = Field(
        None, description="noisy: the recorded repeats a start may draw (default all)"
    )
    seed: int = Field(0, description="noisy: the seed of the draws")
    time_scale: float = Field(
        0.0,
        ge=0,
        le=1,
        description="take this share of the recorded time: each start sleeps its recorded "
        "start-up seconds x time_scale, each point its window x time_scale (0: answer at "
        "once); for timing parallel workers or schedules against a recorded run",
    )
    parallel: int = parallel_field("played back side by side")


_DNS_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


class HelmSettings(Placement):
    """Install the vllm-kserve chart once per configuration (OpenShift AI / KServe).

    tunebench writes the whole values file of each configuration (see spec/kserve_chart.py),
    runs `helm upgrade --install`, waits for the InferenceService and then for vLLM itself,
    and uninstalls the release when the configuration is done.
    """

    passes_engine_args: ClassVar[bool] = True
    model_is_cluster_uri: ClassVar[bool] = True

    kind: Literal["helm"]
    chart: str = Field(
        "vllm-kserve",
        min_length=1,
        description="chart name in `repo`, an oci:// reference or a local directory",
    )
    repo: str | None = Field(
        "https://redhat-ai-services.github.io/helm-charts/",
        description="chart repository URL; null for oci:// or a directory",
    )
    chart_version: str = Field(
        pattern=r"^\d+\.\d+\.\d+([-+].*)?$",
        description="e.g. 0.5.11 (RHOAI 2.2x) or 0.7.0 (RHOAI 3.3)",
    )
    namespace: str = Field(pattern=_DNS_LABEL, max_length=63)
    release: str | None = Field(
        None,
        pattern=_DNS_LABEL,
        max_length=40,
        description="release and InferenceService name; default tb-<sweep>",
    )
    values: list[str] = Field(
        default_factory=list,
        description="values files (relative to the sweep file), merged in order",
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="chart values merged over the files"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra model.env entries")
    resources: dict[str, Any] | None = Field(None, description="vLLM container requests/limits")
    access: Literal["route", "port-forward"] = Field(
        "route", description="reach vLLM through its Route (HTTPS) or an `oc port-forward`"
    )
    scrape: Literal["pod", "route"] = Field(
        "pod", description="/metrics from the pod (port-forward) or through the access URL"
    )
    ca_bundle: str | None = Field(None, description="CA file for the Route's certificate")
    insecure_skip_tls_verify: bool = False
    token_env: str | None = Field(None, description="env var holding the bearer token")
    token_secret: str | None = Field(None, description="service-account token Secret to read")
    ready_timeout_s: float = Field(1800.0, gt=0, description="InferenceService Ready")
    health_timeout_s: float = Field(900.0, gt=0, description="after Ready: /health and /v1/models")
    uninstall_timeout_s: float = Field(600.0, gt=0)
    keep: bool = Field(False, description="leave the last configuration installed (also --keep)")
    parallel: int = parallel_field(
        "one release per configuration, <release>-<config id>, each with its own load "
        "driver; a release that cannot be scheduled fails its configuration only"
    )
    kube_context: str | None = None
    helm: str = Field("helm", description="helm executable")
    oc: str = Field("oc", description="oc (or kubectl) executable")

    @model_validator(mode="after")
    def _one_of_each(self) -> "HelmSettings":
        if self.token_env and self.token_secret:
            raise ValueError("token_env and token_secret: give one source of the bearer token")
        if self.ca_bundle and self.insecure_skip_tls_verify:
            raise ValueError(
                "ca_bundle and insecure_skip_tls_verify: give one; a CA bundle "
                "verifies the Route, insecure skips verification"
            )
        return self


#: Old names of deployment kinds, still read from sweep files and stored runs: `replay` was
#: the recorded-run deployment's name while "replay" also named a trace played as load.
OLD_KIND_NAMES: dict[str, str] = {"replay": "recorded"}


def current_kind(kind: str) -> str:
    """A deployment kind by its current name (`replay` -> `recorded`); others as given."""
    return OLD_KIND_NAMES.get(kind, kind)


def _current_kind_name(deployment: Any) -> Any:
    """A `deployment:` section as written, its kind by its current name (before validation)."""
    if isinstance(deployment, dict) and isinstance(deployment.get("kind"), str):
        return {**deployment, "kind": current_kind(deployment["kind"])}
    return deployment


# A new deployment kind adds its settings model here and its wiring in tunebench/kinds.py.
DeploymentSettings = Annotated[
    Union[LocalSettings, EndpointSettings, RecordedSettings, HelmSettings],
    Field(discriminator="kind"),
    BeforeValidator(_current_kind_name),
]

#: Each kind's settings model, by the `kind` that picks it in a sweep file.
SETTINGS_BY_KIND: dict[str, type[Placement]] = {
    get_args(model.model_fields["kind"].annotation)[0]: model
    for model in get_args(get_args(DeploymentSettings)[0])
}


def placement_of(deployment: Any) -> type[Placement]:
    """The settings model of `deployment.kind`, which says where its server runs."""
    return SETTINGS_BY_KIND[deployment.kind]
