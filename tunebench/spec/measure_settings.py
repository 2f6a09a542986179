"""What a sweep file asks besides the load: SLOs and cost, metrics scraping, the machine
watch, energy, the roofline and the quality gate."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tunebench.spec.base import Strict

#: A sentinel between a configuration's points once the points since the last reading planned
#: this many seconds of windows (points/sentinel.py): this machine's speed moves in spells of
#: minutes, and a sentinel (at most 10 s, often half that) per two minutes of load costs a
#: few percent of a configuration's time.
DEFAULT_SENTINEL_EVERY_S = 120.0


class Cost(Strict):
    """Price of serving, for cost per million tokens and requests per cost unit at every
    point and at capacity (tunebench/points/cost.py)."""

    price_per_hour: float = Field(gt=0, description="price of one accelerator or node per hour")
    per: Literal["accelerator", "node"] = Field(
        "accelerator", description="what price_per_hour is for: one GPU (accelerator) or a node"
    )
    accelerators_per_replica: int | None = Field(
        None,
        ge=1,
        description="accelerators one replica holds (per: accelerator); default each "
        "configuration's tensor-parallel-size x pipeline-parallel-size",
    )
    currency: str = Field("USD", min_length=1, max_length=8)


Percentile = Literal["p50", "p90", "p95", "p99"]
Limit = Annotated[float, Field(gt=0)]


class Slo(Strict):
    """Latency objectives at percentiles, e.g. ttft_ms: {p95: 500}; see tunebench/points/slo.py."""

    ttft_ms: dict[Percentile, Limit] | None = None
    itl_ms: dict[Percentile, Limit] | None = None
    tpot_ms: dict[Percentile, Limit] | None = None
    e2e_s: dict[Percentile, Limit] | None = None
    # multi-turn sessions only (load.data kind sessions; tunebench/points/sessions.py)
    session_e2e_s: dict[Percentile, Limit] | None = Field(
        None,
        description="a whole conversation, its first turn sent to its last answer (think "
        "times included), over the sessions that ran every turn",
    )
    turn_ttft_ms: dict[Percentile, Limit] | None = Field(
        None, description="TTFT of each turn on its own; the worst turn counts"
    )
    max_error_rate: float | None = Field(None, ge=0, le=1)

    def as_dict(self) -> dict:
        return self.model_dump(exclude_none=True)


class Metrics(Strict):
    enabled: bool = True
    interval_s: float = Field(default=1.0, ge=0.1, le=60)


class MachineSettings(Strict):
    """Watching the machine under the load (docs/machine-drift.md): telemetry and a probe on
    the server's cores beside every point of a local server, and an A...A sentinel per
    configuration. A point the machine changed speed under is unverified, saying how."""

    watch: bool = Field(
        default=True, description="telemetry and the probe beside every local point"
    )
    probe_interval_s: float = Field(
        default=30.0, ge=1, le=600, description="the probe inside a window"
    )
    sentinel: bool = Field(
        default=True,
        description="repeat each configuration's first fixed point, short, after its last: "
        "the two should agree when the machine held its speed",
    )
    sentinel_seconds: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="the sentinel's window at most (it also ends 64 requests past its first wave)",
    )
    sentinel_every_s: float = Field(
        default=DEFAULT_SENTINEL_EVERY_S,
        ge=0,
        le=3600,
        description="a sentinel also between points, once the points since the last reading "
        "planned this many seconds of windows and two or more points follow (0: not by time): "
        "a change is then placed in the span between two readings, and the points before it "
        "stand",
    )
    sentinel_every: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="a sentinel also after every this many points while two or more follow "
        "(0: not by count)",
    )
    stability_s: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="before the sweep, time the probe this long (tunebench check-machine) "
        "and stop when the machine does not hold its speed",
    )


class Energy(Strict):
    """Energy per point: GPU power (NVML, or DCGM through Prometheus) or CPU RAPL
    (docs/energy.md). Without a readable source the columns stay empty and say why."""

    source: Literal["auto", "nvml", "dcgm", "rapl", "off"] = Field(
        default="auto",
        description="auto: DCGM when prometheus_url is set, else the local GPUs (NVML), else RAPL",
    )
    prometheus_url: str | None = Field(
        default=None, description="a Prometheus (or Thanos querier) that scrapes the DCGM exporter"
    )
    selector: str = Field(
        default="",
        description="PromQL label matchers of the server's GPUs, "
        'e.g. \'namespace="llm",pod=~"qwen-predictor-.*"\'',
    )
    bearer_token_env: str | None = Field(
        default=None, description="environment variable holding the Prometheus bearer token"
    )
    verify_tls: bool = True
    settle_s: float = Field(
        default=0.0, ge=0, le=120, description="DCGM: wait after each point for its last scrape"
    )
    interval_s: float = Field(default=1.0, ge=0.1, le=60, description="NVML/RAPL sampling interval")

    @model_validator(mode="after")
    def _dcgm_needs_prometheus(self) -> "Energy":
        if self.source == "dcgm" and not self.prometheus_url:
            raise ValueError(
                "energy.source dcgm needs energy.prometheus_url (a Prometheus that scrapes "
                "the DCGM exporter)"
            )
        return self


class RooflineSettings(Strict):
    """The decode roofline per point (docs/roofline.md): bytes a step reads over the
    device's memory bandwidth."""

    enabled: bool = True
    bandwidth_gbs: float | None = Field(
        default=None, gt=0, description="memory bandwidth of one device, GB/s (overrides)"
    )
    device: str | None = Field(
        default=None,
        description="a GPU of the table in docs/roofline.md (e.g. 'H100 SXM', 'L4'): for "
        "servers tunebench cannot see (helm, endpoint)",
    )


class LmEval(Strict):
    """Task accuracy with lm-eval against each configuration's server (docs/quality.md)."""

    task: str = Field(
        "tunebench_arithmetic",
        min_length=1,
        description="a generated task (tunebench_arithmetic: sums; tunebench_subtraction: "
        "differences), or a task of include_path",
    )
    include_path: str | None = Field(None, description="a directory of lm-eval task YAMLs")
    limit: int | None = Field(50, ge=1, description="documents per task (None: all)")
    max_drop: float | None = Field(
        0.05, ge=0, le=1, description="score below the reference's by more than this fails"
    )
    min_score: float | None = Field(None, ge=0, le=1)
    timeout_s: float = Field(900, gt=0)


class Quality(Strict):
    """Does each configuration still answer right? Greedy completions with logprobs on every
    configuration's server, compared with a reference configuration (docs/quality.md)."""

    prompts: str = Field(
        "default",
        min_length=1,
        description="'default' (16 shipped prompts), or a JSONL file of {\"prompt\": ...} "
        "lines or a .txt file with one prompt per line (relative to the spec file)",
    )
    limit: int | None = Field(
        None,
        ge=1,
        description="the first N prompts only: a quicker check on less evidence (default: all)",
    )
    max_tokens: int = Field(32, ge=1, le=1024, description="greedy tokens per prompt")
    top_logprobs: int = Field(5, ge=1, le=20, description="alternatives per position")
    reference: str | None = Field(
        None, description="config id or label to compare with (default: the first)"
    )
    max_mean_kl: float | None = Field(0.1, ge=0, description="nats, teacher-forced, top-k")
    max_mean_tv: float | None = Field(
        0.1, ge=0, le=1, description="total variation over both top-k lists, teacher-forced"
    )
    min_top1_agreement: float | None = Field(0.9, ge=0, le=1)
    min_token_agreement: float | None = Field(
        0.75, ge=0, le=1, description="mean share of an answer before it parts (near-ties agree)"
    )
    min_median_agreement: float | None = Field(
        0.9, ge=0, le=1, description="median share of an answer before its first difference"
    )
    min_exact_match: float | None = Field(None, ge=0, le=1)
    max_seconds: float = Field(
        300, gt=0, description="per configuration; prompts not asked by then are failures"
    )
    lm_eval: LmEval | None = None
    speculative_min_exact_match: float = Field(
        1.0, ge=0, le=1, description="vs the non-speculative twin: greedy must be lossless"
    )
