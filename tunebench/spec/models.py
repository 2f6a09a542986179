"""Pydantic models of a sweep file (`sweeps/*.yaml`).

Every model forbids unknown keys, so a typo is an error that names the key instead of a
setting that silently does nothing. In-memory plans are built from these by `plan.py`.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from tunebench.spec.base import Strict
from tunebench.spec.deployments import CpuList, DeploymentSettings, EndpointSettings
from tunebench.spec.load_kind import LoadKind
from tunebench.spec.slurm import Slurm

# Engine-arg values as they may appear in YAML. A mapping becomes a JSON argument
# (e.g. speculative-config), a list becomes several values after one flag.
ArgValue = Union[bool, int, float, str, dict[str, Any], list[Any], None]

#: Keys that a matrix or variant may set besides engine args.
NON_ARG_KEYS = ("model", "tokenizer")
# A `kind: capacity` profile's settings (spec/plan.py SearchSettings)
SEARCH_FIELDS = (
    "arrival",
    "start_rate",
    "tolerance",
    "max_probes",
    "max_rate",
    "noise",
    "sample_margin",
)


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


class SharedPrefix(Strict):
    """A system prompt per group, shared by the requests of that group (GuideLLM's synthetic
    prefix buckets): `groups` prompts of `tokens` tokens, group k chosen with weight
    1 / k^zipf (0: every group alike). `prime`: every group's prefix sent once before each
    point's window, as a long-running server would have them cached
    (tunebench/load/guidellm_prime.py)."""

    groups: int = Field(ge=1, le=1000, description="distinct shared prefixes")
    tokens: int = Field(gt=0, description="tokens of each shared prefix")
    zipf: float = Field(
        0, ge=0, le=4, description="popularity skew: group k weighs 1 / k^zipf (0: uniform)"
    )
    prime: bool = Field(
        False,
        description="send each group's prefix once before every point's window (not "
        "measured), so the window starts with the prefixes cached",
    )


class SyntheticData(Strict):
    kind: Literal["synthetic"]
    prompt_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    prompt_tokens_stdev: int = Field(0, ge=0)
    output_tokens_stdev: int = Field(0, ge=0)
    prefix: SharedPrefix | None = Field(
        None, description="a shared prefix before every prompt (its tokens come on top)"
    )
    seed: int = 42


class SessionsData(Strict):
    """Multi-turn conversations (GuideLLM's synthetic multi-turn data, docs/sweep-files.md
    "Sessions"): each session sends `turns` user turns through the chat API, every turn
    after the first with the earlier turns and their answers as history, `think_time_s`
    after the previous answer."""

    kind: Literal["sessions"]
    turns: int = Field(ge=1, le=64, description="user turns per session")
    think_time_s: float = Field(
        0, ge=0, description="seconds between an answer and the next turn (0: at once)"
    )
    prompt_tokens: int = Field(gt=0, description="new tokens each turn adds")
    output_tokens: int = Field(gt=0, description="tokens each answer holds")
    prompt_tokens_stdev: int = Field(0, ge=0)
    output_tokens_stdev: int = Field(0, ge=0)
    seed: int = 42


FILE_DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet", ".arrow", ".txt")


class FileData(Strict):
    """A local dataset file GuideLLM can read (JSONL, CSV, JSON, Parquet)."""

    kind: Literal["file"]
    path: str = Field(description="relative to the sweep file; .jsonl .json .csv .parquet .txt")

    @field_validator("path")
    @classmethod
    def _known_suffix(cls, value: str) -> str:
        if not value.lower().endswith(FILE_DATA_SUFFIXES):
            raise ValueError(f"use a file ending in one of {', '.join(FILE_DATA_SUFFIXES)}")
        return value


TRACE_FORMATS = ("azure", "mooncake", "burstgpt", "jsonl")
TRACE_SUFFIXES = (".csv", ".jsonl", ".json")


class TraceData(Strict):
    """A recorded request trace replayed by `kind: replay` profiles (tunebench/load/trace.py):
    each request's arrival time and prompt and output lengths; prompts are built so that
    requests with equal Mooncake `hash_ids` share those prefix blocks token for token."""

    kind: Literal["trace"]
    path: str = Field(description="relative to the sweep file; .csv .jsonl .json")
    format: Literal["azure", "mooncake", "burstgpt", "jsonl"] | None = Field(
        None, description="default: guessed from the file's header or first record"
    )
    name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        max_length=32,
        description="names its replay points replay-<name>-<speed> (default: the file's stem)",
    )
    start: float = Field(0, ge=0, description="seconds after the trace's first request")
    requests: int | None = Field(None, gt=0, description="the slice: this many requests")
    seconds: float | None = Field(None, gt=0, description="the slice: this many trace seconds")
    length_scale: float | Literal["auto"] = Field(
        "auto",
        description="factor on every prompt and output length; auto: the largest factor <= 1 "
        "at which every request of the slice fits the context",
    )
    context: int | None = Field(
        None,
        gt=1,
        description="tokens one request may hold, prompt + output (default: the smallest "
        "max-model-len of the configurations)",
    )
    block_tokens: int = Field(
        512, gt=0, description="tokens per hash id in the trace (Mooncake: 512)"
    )
    seed: int = 42

    @field_validator("path")
    @classmethod
    def _known_suffix(cls, value: str) -> str:
        if not value.lower().endswith(TRACE_SUFFIXES):
            raise ValueError(f"use a trace file ending in one of {', '.join(TRACE_SUFFIXES)}")
        return value

    @field_validator("length_scale")
    @classmethod
    def _positive_scale(cls, value: float | str) -> float | str:
        if not isinstance(value, str) and not 0 < value <= 1000:
            raise ValueError("length_scale must be above 0 (e.g. 0.05), or auto")
        return value

    @model_validator(mode="after")
    def _one_slice_end(self) -> "TraceData":
        if self.requests is not None and self.seconds is not None:
            raise ValueError("give the slice as requests or as seconds, not both")
        return self

    @property
    def label(self) -> str:
        """The name its replay points carry."""
        if self.name:
            return self.name
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", PurePath(self.path).stem).strip("-.")
        return stem[:32] or "trace"


Data = Annotated[
    Union[SyntheticData, FileData, TraceData, SessionsData], Field(discriminator="kind")
]

Number = Annotated[float, Field(gt=0)]
Streams = Annotated[int, Field(gt=0)]


class Profile(Strict):
    """One load shape; a list of `streams` or `rate` gives one load point per value."""

    kind: Literal[
        "synchronous",
        "concurrent",
        "poisson",
        "constant",
        "throughput",
        "sweep",
        "capacity",
        "replay",
    ]
    streams: Streams | list[Streams] | None = None
    rate: Number | list[Number] | None = None
    # kind: replay -- the trace's arrivals at `speed` x real time (tunebench/load/trace.py)
    speed: Number | list[Number] | None = Field(
        None,
        description="kind replay: 1 = the trace's own pace, 2 = twice as fast; a list: "
        "one point per speed (default 1)",
    )
    data: TraceData | None = Field(
        None,
        description="kind replay (or capacity with arrival replay): the trace this profile "
        "plays (default: load.data)",
    )
    max_seconds: float | None = Field(None, gt=0)
    max_requests: int | None = Field(None, gt=0)
    warmup: float | None = Field(
        None, ge=0, description="<1: fraction of the point excluded; ≥1: seconds"
    )
    cooldown: float | None = Field(
        None, ge=0, description="as warmup, at the end: the drain is not measured"
    )
    sweep_points: int | None = Field(None, ge=3, description="kind: sweep; GuideLLM default 10")
    # kind: capacity -- the highest rate meeting the spec's slo, see tunebench/points/capacity.py
    arrival: Literal["poisson", "constant", "replay"] | None = Field(
        None,
        description="the probes' arrivals (default poisson); replay: the probes replay a "
        "trace and the search is over its speed (rates below are speeds)",
    )
    start_rate: float | None = Field(
        None,
        gt=0,
        description="req/s (arrival replay: the speed) of the first "
        "configuration's first probe (default 1); later "
        "configurations start from the previous capacity",
    )
    tolerance: float | None = Field(None, gt=0, lt=1, description="relative; default 0.05")
    max_probes: int | None = Field(None, ge=2, le=30, description="default 8")
    max_rate: float | None = Field(None, gt=0, description="req/s the client can drive")
    noise: float | None = Field(
        None,
        ge=0,
        le=1,
        description="sd of one probe's log SLO ratio (default 0.2); a rate closer to the "
        "limit than the noise allows is re-probed; 0 takes every probe at its word",
    )
    sample_margin: float | None = Field(
        None,
        ge=1,
        le=20,
        description="a probe's window holds this many times the requests the SLO's "
        "percentile needs (default 4; p90 needs 36); capped at 10 x max_seconds",
    )

    @model_validator(mode="after")
    def _fits_kind(self) -> "Profile":
        streams, rate, kind = self.streams, self.rate, self.kind
        if kind == "replay":
            return self._fits_replay()
        if kind == "capacity" and self.arrival == "replay":
            return self._fits_replay_search()
        if self.speed is not None or self.data is not None:
            raise ValueError(
                "speed and data only apply to kind replay (data: also to kind capacity with "
                "arrival replay)"
            )
        if kind == "concurrent" and streams is None:
            raise ValueError("kind concurrent needs streams: a number or a list, e.g. [1, 4, 8]")
        if kind in LoadKind.RATE and rate is None:
            raise ValueError(f"kind {kind} needs rate (requests/s): a number or a list")
        if kind == "throughput" and streams is None:
            raise ValueError("kind throughput needs streams (its maximum concurrency)")
        if kind in LoadKind.UNTARGETED and (streams is not None or rate is not None):
            raise ValueError(f"kind {kind} takes neither streams nor rate")
        if kind in LoadKind.STREAM and rate is not None:
            raise ValueError(f"kind {kind} takes streams, not rate")
        if kind in LoadKind.RATE and streams is not None:
            raise ValueError(f"kind {kind} takes rate, not streams")
        if kind != "capacity" and any(getattr(self, f) is not None for f in SEARCH_FIELDS):
            raise ValueError(f"{', '.join(SEARCH_FIELDS)} only apply to kind capacity")
        if kind == "capacity" and (streams is not None or rate is not None):
            raise ValueError("kind capacity chooses its own rates; use start_rate and max_rate")
        if kind == "capacity" and self.max_seconds is None:
            raise ValueError("kind capacity needs max_seconds (the length of each probe)")
        if self.sweep_points is not None and kind != "sweep":
            raise ValueError("sweep_points only applies to kind sweep")
        if self.max_seconds is None and self.max_requests is None:
            raise ValueError("set max_seconds or max_requests so that the point ends")
        if kind in LoadKind.RATE and self.max_seconds is None:
            # GuideLLM sends a request-limited rate profile faster than the rate asked for.
            raise ValueError(f"kind {kind} needs max_seconds (request limits distort rates)")
        return self

    def _fits_replay(self) -> "Profile":
        # The trace sets the arrivals and the slice its end; max_seconds may cut it short.
        if self.streams is not None or self.rate is not None:
            raise ValueError("kind replay takes speed (x the trace's pace), not streams or rate")
        if any(getattr(self, f) is not None for f in SEARCH_FIELDS):
            raise ValueError(f"{', '.join(SEARCH_FIELDS)} only apply to kind capacity")
        if self.sweep_points is not None:
            raise ValueError("sweep_points only applies to kind sweep")
        if self.max_requests is not None:
            raise ValueError(
                "kind replay plays its slice (load.data requests or seconds); use "
                "max_seconds to cut it short, not max_requests"
            )
        if self.warmup or self.cooldown:
            raise ValueError(
                "kind replay measures every request of its slice (no warmup/cooldown); "
                "choose the slice with load.data start and seconds"
            )
        return self

    def _fits_replay_search(self) -> "Profile":
        # every probe replays the whole slice (max_seconds may cut it short), at a speed
        if self.speed is not None or self.streams is not None or self.rate is not None:
            raise ValueError(
                "kind capacity chooses its own speeds; use start_rate and max_rate (speeds "
                "with arrival replay)"
            )
        if self.sweep_points is not None:
            raise ValueError("sweep_points only applies to kind sweep")
        if self.sample_margin is not None:
            raise ValueError(
                "sample_margin sizes poisson/constant probes; a replay probe plays its whole "
                "slice: choose its size with load.data requests or seconds"
            )
        if self.max_requests is not None or self.warmup or self.cooldown:
            raise ValueError(
                "arrival replay probes play their slice (load.data requests or seconds); "
                "max_requests, warmup and cooldown do not apply"
            )
        return self

    @property
    def plays_trace(self) -> bool:
        """Does this profile replay a trace (kind replay, or a capacity search over speed)?"""
        return self.kind == "replay" or (self.kind == "capacity" and self.arrival == "replay")

    def targets(self) -> list[float | None]:
        if self.kind == "replay":
            speed = self.speed if self.speed is not None else 1.0
            return list(speed) if isinstance(speed, list) else [speed]
        value = self.streams if self.streams is not None else self.rate
        if value is None:
            return [None]
        return list(value) if isinstance(value, list) else [value]


class Load(Strict):
    data: Data
    profiles: list[Profile] = Field(min_length=1)
    driver: Literal["guidellm", "vllm-bench", "cross-check"] = Field(
        "guidellm",
        description="the load generator: GuideLLM, vLLM's own `vllm bench serve`, or "
        "cross-check (every point by both, alternated; docs/load-drivers.md)",
    )
    client_cpus: CpuList | None = Field(
        None,
        description="Linux CPU list the load generator is pinned to, e.g. '1' (see "
        "deployment.cpus): on a small box a server and a client on the same cores starve "
        "each other and every point turns client-limited",
    )
    client_processes: int | None = Field(
        None,
        ge=1,
        le=64,
        description="GuideLLM's worker processes (default: half the CPUs the client may "
        "use, 1 to 8: one on a 2-core box, where more starve the server; more at GPU rates, "
        "where one process limits the client)",
    )

    @model_validator(mode="after")
    def _trace_is_replayed(self) -> "Load":
        trace = self.data.kind == "trace"
        for number, profile in enumerate(self.profiles):
            where = f"load.profiles[{number}] (kind {profile.kind})"
            if trace and not profile.plays_trace:
                raise ValueError(
                    f"{where}: load.data kind trace is played by kind replay profiles; "
                    "use {kind: replay, speed: 1} (or {kind: capacity, arrival: replay}), "
                    "or synthetic data for this profile"
                )
            if profile.plays_trace and not trace and profile.data is None:
                player = "replay" if profile.kind == "replay" else "capacity with arrival replay"
                raise ValueError(
                    f"{where}: kind {player} plays a trace: set load.data (or this "
                    "profile's data) to {kind: trace, path: ...}"
                )
        return self

    @model_validator(mode="after")
    def _prime_is_guidellm(self) -> "Load":
        prefix = self.data.prefix if self.data.kind == "synthetic" else None
        if prefix is not None and prefix.prime and self.driver != "guidellm":
            raise ValueError(
                f"load.data.prefix.prime: load.driver {self.driver} does not prime prefixes "
                "(the GuideLLM worker does); use load.driver guidellm or drop prime"
            )
        return self

    @model_validator(mode="after")
    def _driver_fits(self) -> "Load":
        if self.driver == "guidellm":
            return self
        # a cross-check runs every point with vllm bench serve too: the same limits apply
        driver = "vllm-bench" if self.driver == "vllm-bench" else "cross-check (vllm bench serve)"
        # shared prefixes go out as vLLM's prefix_repetition: equal groups, fixed lengths
        synthetic = self.data if isinstance(self.data, SyntheticData) else None
        prefix = synthetic.prefix if synthetic is not None else None
        if prefix is not None and prefix.zipf:
            raise ValueError(
                f"load.data.prefix.zipf {prefix.zipf:g}: load.driver {driver} sends shared "
                "prefixes as vLLM's prefix_repetition, which gives every group the same share; "
                "set zipf: 0 or use load.driver guidellm"
            )
        if (
            synthetic is not None
            and prefix is not None
            and (synthetic.prompt_tokens_stdev or synthetic.output_tokens_stdev)
        ):
            raise ValueError(
                "load.data.prompt_tokens_stdev/output_tokens_stdev: load.driver "
                f"{driver} sends shared prefixes as vLLM's prefix_repetition, which has fixed "
                "lengths; set them to 0 or use load.driver guidellm"
            )
        if self.data.kind not in ("synthetic", "trace"):
            what = {"sessions": "multi-turn session"}.get(self.data.kind, "file")
            raise ValueError(
                f"load.driver {driver} runs synthetic data and traces only; use driver guidellm "
                f"for a {what}"
            )
        for number, profile in enumerate(self.profiles):
            where = f"load.profiles[{number}] (kind {profile.kind})"
            if prefix is not None and profile.max_requests and profile.max_requests % prefix.groups:
                fits = prefix.groups * max(1, round(profile.max_requests / prefix.groups))
                raise ValueError(
                    f"{where}: max_requests {profile.max_requests} is not a multiple of "
                    f"load.data.prefix.groups {prefix.groups} (vLLM's prefix_repetition sends "
                    f"max_requests // groups per group); use e.g. {fits}"
                )
            if self.driver == "cross-check" and profile.kind == "capacity":
                raise ValueError(
                    f"{where}: load.driver cross-check measures fixed points, not a capacity "
                    "search; use concurrent or poisson profiles, or driver guidellm/vllm-bench"
                )
            if profile.kind in LoadKind.GUIDELLM_ONLY or profile.arrival == LoadKind.CONSTANT:
                raise ValueError(
                    f"{where}: vllm bench serve has no {profile.kind} profile; "
                    "use load.driver guidellm"
                )
            if profile.warmup or profile.cooldown:
                raise ValueError(
                    f"{where}: vllm bench serve measures every request (no warmup/cooldown); "
                    "drop them or use load.driver guidellm"
                )
            if profile.kind in LoadKind.CLOSED_LOOP and not (profile.max_requests):
                raise ValueError(
                    f"{where}: vllm bench serve counts requests, not seconds: set "
                    "max_requests, or use load.driver guidellm"
                )
        return self


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


ParamValue = Union[None, bool, int, float, str]


class TuneParam(Strict):
    """One dimension of a tune search space; see tunebench/tune/space.py."""

    type: Literal["int", "float", "categorical"] | None = Field(
        None, description="default: categorical with choices, else int for int bounds, else float"
    )
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = Field(None, gt=0)
    choices: list[ParamValue] | None = Field(None, min_length=1)
    ordered: bool = Field(
        False,
        description="choices are ordered (e.g. [8, 16, 32, 64]): the "
        "sampler learns that neighbours behave alike",
    )
    when: dict[str, ParamValue | list[ParamValue]] | None = Field(
        None, description="only searched when these earlier params have these values"
    )

    @model_validator(mode="after")
    def _consistent(self) -> "TuneParam":
        kind = self.kind
        if kind == "categorical":
            if not self.choices:
                raise ValueError("a categorical param needs choices: [..]")
            if self.low is not None or self.high is not None:
                raise ValueError("give either choices or low/high, not both")
            if self.ordered and len(self.choices) < 2:
                raise ValueError("ordered needs at least two choices")
        else:
            if self.choices is not None:
                raise ValueError(f"a {kind} param takes low/high, not choices")
            if self.low is None or self.high is None or self.low >= self.high:
                raise ValueError("set low < high")
            if self.log and self.low <= 0:
                raise ValueError("log: true needs low > 0")
            if self.log and self.step is not None:
                raise ValueError("use either log or step, not both")
        return self

    @property
    def kind(self) -> str:
        if self.type:
            return self.type
        if self.choices is not None:
            return "categorical"
        ints = all(
            isinstance(v, int) or (isinstance(v, float) and v.is_integer())
            for v in (self.low, self.high)
            if v is not None
        )
        return "int" if ints else "float"


class Tune(Strict):
    """`tunebench tune`: an Optuna study over engine args; see tunebench/tune/study.py."""

    objective: Literal["capacity", "capacity-per-cost", "throughput", "throughput-latency"] = (
        "capacity"
    )
    trials: int = Field(12, ge=1, le=1000, description="deployments, the baseline included")
    sampler: Literal["local", "tpe", "random"] = Field(
        "local",
        description="local: the unmeasured neighbour of the best so far (tune/local_search.py); "
        "tpe: Optuna's TPE; random",
    )
    startup_trials: int | None = Field(
        None,
        ge=1,
        description="random trials (after the baseline) before the sampler uses the measured "
        "ones (default: 1 for local, 3 for tpe)",
    )
    seed: int | None = 0
    baseline: bool = Field(True, description="first trial: server.args only (vLLM's defaults)")
    kv_overcommit: float = Field(
        1.0, ge=1.0, description="allowed max-num-seqs x max-model-len over the learned KV capacity"
    )
    space: dict[str, TuneParam] = Field(min_length=1)
    enqueue: list[dict[str, ParamValue]] = Field(
        default_factory=list,
        description="param sets to try right after the baseline, e.g. "
        "the configuration in production today",
    )
    heartbeat_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="distributed (--storage): a worker's trial records a heartbeat this often; "
        "one silent for 4 heartbeats is failed and retried by another worker",
    )
    retries: int = Field(
        1, ge=0, le=5, description="distributed: times a dead worker's trial is tried again"
    )
    hints: bool = Field(
        True,
        description="after each measured trial, try next what its diagnosis suggests "
        "(e.g. max-num-seqs up when requests queue behind it), when the space holds that "
        "value and it was not measured yet (docs/diagnosis.md)",
    )
    revalidate: int = Field(
        0,
        ge=0,
        le=10,
        description="after the study, re-run the best, the runner-up and the baseline this "
        "many times each (alternated) and report the best's gain with an interval, or a tie; "
        "0: off (3 is a good choice: Welch's t needs 2 per side)",
    )

    @model_validator(mode="after")
    def _enqueued_params_exist(self) -> "Tune":
        for number, params in enumerate(self.enqueue):
            unknown = [k for k in params if k not in self.space]
            if unknown:
                raise ValueError(f"enqueue[{number}]: {', '.join(unknown)} not in tune.space")
            for name, value in params.items():
                choices = self.space[name].choices
                if choices is not None and value not in choices:
                    raise ValueError(
                        f"enqueue[{number}].{name}: {value!r} is not one of its choices {choices}"
                    )
        return self

    @model_validator(mode="after")
    def _conditions_refer_back(self) -> "Tune":
        seen: list[str] = []
        for name, param in self.space.items():
            for other in param.when or {}:
                if other not in seen:
                    raise ValueError(
                        f"space.{name}.when: {other!r} must be a param listed before {name!r}"
                    )
            seen.append(name)
        return self


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
    sentinel_seconds: float = Field(default=10.0, gt=0, le=600, description="the sentinel's window")
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
        description="the generated addition task, or a task of include_path",
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
    min_token_agreement: float | None = Field(0.25, ge=0, le=1)
    min_median_agreement: float | None = Field(
        0.5, ge=0, le=1, description="median share of an answer before its first difference"
    )
    min_exact_match: float | None = Field(None, ge=0, le=1)
    max_seconds: float = Field(
        300, gt=0, description="per configuration; prompts not asked by then are failures"
    )
    lm_eval: LmEval | None = None
    speculative_min_exact_match: float = Field(
        1.0, ge=0, le=1, description="vs the non-speculative twin: greedy must be lossless"
    )


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
                "deployment kind local or replay"
            )
        if self.repeats > 1:
            raise ValueError(
                "repeats: not used when tuning (each trial is one deployment); drop repeats"
            )
        searches = [p for p in self.load.profiles if p.kind == "capacity"]
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
        searches = [p for p in self.load.profiles if p.kind == "capacity"]
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
