"""The typed records a configuration's manifest entry holds beside its args: the capacity
search's summary, every sentinel's verdict, the load generator's retries and the roofline.

Each is a TypedDict: the manifest keeps them as the JSON objects they always were (runs
stored before these types read the same), while mypy checks every key the runner writes
and every key analysis and the report read. Keys a later version adds are kept when an
older one rewrites the manifest (extra="allow").
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

_KEEP_UNKNOWN_KEYS = ConfigDict(extra="allow")


@with_config(_KEEP_UNKNOWN_KEYS)
class CapacityRecord(TypedDict, total=False):
    """A capacity search's summary (runner/probing.py `CapacityProbing.summary`)."""

    rate: float | None  # the highest rate that held the SLO (None: none held)
    arrival: str | None  # poisson | constant | replay
    probes: int
    probe_rates: list[float]
    upper: float | None  # the lowest rate that missed it
    interval: list[float | None] | None  # where the crossing lies, once narrowed
    noise: float
    sample_margin: float | None  # None for a replay probe: its slice sized its window
    tolerance: float
    converged: bool
    done: bool  # stopped by its own rule (a resumed run does not search again)
    client_bound: bool
    capped: bool
    slo: dict[str, Any] | None  # the SLO the search held (spec section: its own shape)
    drift: str | None  # why the search is no answer of record (the machine moved)


@with_config(_KEEP_UNKNOWN_KEYS)
class SentinelRecord(TypedDict, total=False):
    """One A...A sentinel of a configuration's repeat (runner/sentinel.py): its verdict, or
    `note` saying why there is none."""

    point: str  # the point it repeats
    repeat: int
    window: list[float]  # [start, end], epoch seconds
    note: str
    held: bool
    change_pct: float
    z: float
    first_requests: int
    sentinel_requests: int
    inconclusive: bool
    # a configuration with sentinels between its points: the point this one followed, the
    # reading it was compared with (the first point or the sentinel before) and the points
    # between the two, which a change marks; against the first point too (when `against` is
    # a sentinel), and whether its span was marked
    after: str
    against: str
    points: list[str]
    first_change_pct: float
    first_held: bool
    first_note: str
    marked: bool


@with_config(_KEEP_UNKNOWN_KEYS)
class LoadRetry(TypedDict):
    """A point the load generator measured again after a failure, and why."""

    point: str
    reason: str


@with_config(_KEEP_UNKNOWN_KEYS)
class RooflineRecord(TypedDict, total=False):
    """The decode roofline the configuration's points are read against
    (roofline/plan.py), or only `note` saying why there is none."""

    weight_bytes: float
    kv_bytes_per_context_tokens: float
    bandwidth_gbs: float
    devices: int
    note: str


@with_config(_KEEP_UNKNOWN_KEYS)
class LmEvalRecord(TypedDict, total=False):
    """lm-eval's score on the configuration (quality/lmeval.py `LmEvalResult`), or `error`."""

    task: str
    metric: str
    score: float
    stderr: float | None
    samples: int | None
    seconds: float
    error: str


@with_config(_KEEP_UNKNOWN_KEYS)
class QualityRecord(TypedDict, total=False):
    """The configuration's quality check (quality/step.py): its greedy answers to the
    prompts (their seconds are excluded from the load figures), lm-eval, or `error`."""

    prompts: int
    max_tokens: int
    top_logprobs: int
    seconds: float
    failed: int
    error: str
    lm_eval: LmEvalRecord


@with_config(_KEEP_UNKNOWN_KEYS)
class ParallelRecord(TypedDict, total=False):
    """A sweep that measured several configurations at once: how many, and what it means."""

    configurations: int
    note: str


@with_config(_KEEP_UNKNOWN_KEYS)
class TuneRecord(TypedDict, total=False):
    """A tune run's study (tune/session.py): its objective, where the study lives (a
    database URL with its password masked, or study.db in the run) and this worker."""

    objective: str
    study: str
    study_name: str
    worker: str


@with_config(_KEEP_UNKNOWN_KEYS)
class TrialRecord(TypedDict, total=False):
    """One trial of a tune run as it ended (tune/results.py `trial_row`)."""

    trial: int
    config_id: str | None
    state: str  # Optuna's: COMPLETE, FAIL, PRUNED, RUNNING, WAITING
    baseline: bool
    params: dict[str, Any]  # the engine args it tried, as the spec names them
    values: list[float] | None
    note: str | None
