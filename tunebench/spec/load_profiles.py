"""The `load` of a sweep file: its load profiles (the kinds, their targets, a capacity
search's settings) and the load generator's settings."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tunebench.spec.base import Strict
from tunebench.spec.deployments import CpuList
from tunebench.spec.load_data import Data, SyntheticData, TraceData
from tunebench.spec.load_kind import LoadKind

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
        if kind == LoadKind.REPLAY:
            return self._fits_replay()
        if kind == LoadKind.CAPACITY and self.arrival == LoadKind.REPLAY:
            return self._fits_replay_search()
        if self.speed is not None or self.data is not None:
            raise ValueError(
                "speed and data only apply to kind replay (data: also to kind capacity with "
                "arrival replay)"
            )
        if kind == LoadKind.CONCURRENT and streams is None:
            raise ValueError("kind concurrent needs streams: a number or a list, e.g. [1, 4, 8]")
        if kind in LoadKind.RATE and rate is None:
            raise ValueError(f"kind {kind} needs rate (requests/s): a number or a list")
        if kind == LoadKind.THROUGHPUT and streams is None:
            raise ValueError("kind throughput needs streams (its maximum concurrency)")
        if kind in LoadKind.UNTARGETED and (streams is not None or rate is not None):
            raise ValueError(f"kind {kind} takes neither streams nor rate")
        if kind in LoadKind.STREAM and rate is not None:
            raise ValueError(f"kind {kind} takes streams, not rate")
        if kind in LoadKind.RATE and streams is not None:
            raise ValueError(f"kind {kind} takes rate, not streams")
        if kind != LoadKind.CAPACITY and any(getattr(self, f) is not None for f in SEARCH_FIELDS):
            raise ValueError(f"{', '.join(SEARCH_FIELDS)} only apply to kind capacity")
        if kind == LoadKind.CAPACITY and (streams is not None or rate is not None):
            raise ValueError("kind capacity chooses its own rates; use start_rate and max_rate")
        if kind == LoadKind.CAPACITY and self.max_seconds is None:
            raise ValueError("kind capacity needs max_seconds (the length of each probe)")
        if self.sweep_points is not None and kind != LoadKind.SWEEP:
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
        return self.kind == LoadKind.REPLAY or (
            self.kind == LoadKind.CAPACITY and self.arrival == LoadKind.REPLAY
        )

    def targets(self) -> list[float | None]:
        if self.kind == LoadKind.REPLAY:
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
                player = (
                    "replay" if profile.kind == LoadKind.REPLAY else "capacity with arrival replay"
                )
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
            if self.driver == "cross-check" and profile.kind == LoadKind.CAPACITY:
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
