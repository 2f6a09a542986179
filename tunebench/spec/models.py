"""Pydantic models of a sweep file (`sweeps/*.yaml`): the face of the spec's models.

Every model forbids unknown keys, so a typo is an error that names the key instead of a
setting that silently does nothing. In-memory plans are built from these by `plan.py`.
"""

from __future__ import annotations

from typing import Any, Union

from pydantic import Field, field_validator, model_validator

from tunebench.spec.base import Strict
from tunebench.spec.deployments import DeploymentSettings, EndpointSettings
from tunebench.spec.load_data import (
    FILE_DATA_SUFFIXES,
    TRACE_FORMATS,
    TRACE_SUFFIXES,
    Data,
    FileData,
    SessionsData,
    SharedPrefix,
    SyntheticData,
    TraceData,
)
from tunebench.spec.load_kind import LoadKind
from tunebench.spec.load_profiles import SEARCH_FIELDS, Load, Profile
from tunebench.spec.measure_settings import (
    Cost,
    Energy,
    LmEval,
    MachineSettings,
    Metrics,
    Quality,
    RooflineSettings,
    Slo,
)
from tunebench.spec.slurm import Slurm
from tunebench.spec.tune_spec import Tune, TuneParam

# The sweep file's sections live in modules of their own (load_data, load_profiles,
# measure_settings, tune_spec); this module is their one face, and holds the server's
# configurations and the whole file.
__all__ = [
    "FILE_DATA_SUFFIXES",
    "NON_ARG_KEYS",
    "SEARCH_FIELDS",
    "TRACE_FORMATS",
    "TRACE_SUFFIXES",
    "ArgValue",
    "Cost",
    "Data",
    "Energy",
    "FileData",
    "LmEval",
    "Load",
    "MachineSettings",
    "Metrics",
    "Profile",
    "Quality",
    "RooflineSettings",
    "Server",
    "SessionsData",
    "SharedPrefix",
    "Slo",
    "Strict",
    "SweepSpec",
    "SyntheticData",
    "TraceData",
    "Tune",
    "TuneParam",
    "Variant",
]

# Engine-arg values as they may appear in YAML. A mapping becomes a JSON argument
# (e.g. speculative-config), a list becomes several values after one flag.
ArgValue = Union[bool, int, float, str, dict[str, Any], list[Any], None]

#: Keys that a matrix or variant may set besides engine args.
NON_ARG_KEYS = ("model", "tokenizer")


class Variant(Strict):
    """A named server configuration; `model` may name a separately quantized checkpoint."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
    model: str | None = None
    tokenizer: str | None = None
    args: dict[str, ArgValue] = Field(default_factory=dict)


class Server(Strict):
    args: dict[str, ArgValue] = Field(default_factory=dict)
    variants: list[Variant] = Field(default_factory=list)
    matrix: dict[str, list[ArgValue]] = Field(default_factory=dict)

    @field_validator("args", "matrix")
    @classmethod
    def _flag_names(cls, value: dict) -> dict:
        for key in value:
            if key.startswith("-"):
                raise ValueError(f"write engine args without dashes: {key.lstrip('-')!r}")
            if "_" in key:
                raise ValueError(f"write engine args with dashes: {key.replace('_', '-')!r}")
        return value

    @field_validator("matrix")
    @classmethod
    def _non_empty_lists(cls, value: dict) -> dict:
        for key, values in value.items():
            if not values:
                raise ValueError(f"{key}: an empty list gives no configuration; list ≥ 1 value")
            if len({repr(v) for v in values}) != len(values):
                raise ValueError(f"{key}: values repeat; list each value once")
        return value

    @model_validator(mode="after")
    def _unique_variants(self) -> "Server":
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError("variants: names repeat; give each variant its own name")
        return self


class SweepSpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    description: str | None = None
    model: str = Field(min_length=1)
    tokenizer: str | None = None
    served_model_name: str | None = None
    deployment: DeploymentSettings
    server: Server = Field(default_factory=Server)
    load: Load
    metrics: Metrics = Field(default_factory=Metrics)
    energy: Energy = Field(default_factory=Energy)
    machine: MachineSettings = Field(default_factory=MachineSettings)
    roofline: RooflineSettings = Field(default_factory=RooflineSettings)
    slo: Slo | None = None
    client_tolerance: float = Field(0.10, ge=0, lt=1, description="client-limited shortfall")
    repeats: int = Field(
        default=1,
        ge=1,
        le=20,
        description="measure every fixed load point this many times, each repeat on its own "
        "server start, configurations alternating (c1 c2 c1 c2): compare then sees the "
        "run-to-run spread",
    )
    output: str = "reports"
    tune: Tune | None = None
    quality: Quality | None = None
    cost: Cost | None = None
    slurm: Slurm | None = Field(
        None, description="`sweep --slurm`: one array task per configuration (docs/operations.md)"
    )

    @model_validator(mode="after")
    def _tune_fits(self) -> "SweepSpec":
        if self.tune is None:
            return self
        if self.server.matrix or self.server.variants:
            raise ValueError(
                "tune: server.matrix and server.variants are not used when tuning; "
                "move the values into tune.space"
            )
        if isinstance(self.deployment, EndpointSettings):
            raise ValueError(
                "tune: an endpoint deployment cannot change server args; use "
                "deployment kind local or recorded"
            )
        if self.repeats > 1:
            raise ValueError(
                "repeats: not used when tuning (each trial is one deployment); drop repeats"
            )
        searches = [p for p in self.load.profiles if p.kind == LoadKind.CAPACITY]
        searching = self.tune.objective in ("capacity", "capacity-per-cost")
        if searching and not searches:
            raise ValueError(
                f"tune.objective {self.tune.objective} needs a load profile of kind capacity, "
                "e.g. {kind: capacity, max_seconds: 20}"
            )
        if self.tune.objective == "capacity-per-cost" and self.cost is None:
            raise ValueError(
                "tune.objective capacity-per-cost needs a price: add e.g. "
                "cost: {price_per_hour: 4.0} (per accelerator-hour)"
            )
        if not searching and searches:
            raise ValueError(
                f"tune.objective {self.tune.objective} measures fixed points; "
                "drop the capacity profile or use objective capacity"
            )
        return self

    @model_validator(mode="after")
    def _capacity_needs_slo(self) -> "SweepSpec":
        searches = [p for p in self.load.profiles if p.kind == LoadKind.CAPACITY]
        if len(searches) > 1:
            raise ValueError("load.profiles: list at most one profile of kind capacity")
        if searches and not (
            self.slo and any(v for k, v in self.slo.as_dict().items() if k != "max_error_rate")
        ):
            raise ValueError(
                "load.profiles: kind capacity needs an slo section with a "
                "latency threshold, e.g. slo: {ttft_ms: {p95: 500}}"
            )
        return self

    @model_validator(mode="after")
    def _session_slo_needs_sessions(self) -> "SweepSpec":
        named = [k for k in ("session_e2e_s", "turn_ttft_ms") if self.slo and getattr(self.slo, k)]
        if named and self.load.data.kind != "sessions":
            raise ValueError(
                f"slo.{named[0]}: load.data kind {self.load.data.kind} has no sessions; use "
                "load.data kind sessions or drop the key"
            )
        return self

    @model_validator(mode="after")
    def _endpoint_is_fixed(self) -> "SweepSpec":
        if isinstance(self.deployment, EndpointSettings) and (
            self.server.matrix or self.server.variants
        ):
            raise ValueError(
                "server.matrix/variants: an endpoint deployment cannot change server args; "
                "use deployment kind local (or helm)"
            )
        return self
