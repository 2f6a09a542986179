"""The typed manifest of a run (`manifest.json`), its one constructor and its spec for resume.

Every run kind (sweep, tune, batch, import) writes the same document: identity, kind,
status, times, versions and host, the spec as given (secrets masked), one entry per server
configuration and one per attempt (each process's go at the run). Unknown keys are kept,
so a newer tunebench's extra fields survive a read and write by this one.

Schema versions: 2 adds `kind` and the status enum; version 1 runs (kind implied by a
`tune` block, `kind: batch` or `deployment_kind: import`) are read and upgraded in memory.
A deployment kind by an old name (`deployment_kind: replay`, now `recorded`) is read as its
current name, as the spec it was run with is (spec/deployments.py OLD_KIND_NAMES).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tunebench.environment import host_info
from tunebench.environment import versions as current_versions
from tunebench.errors import SpecError, StoreError
from tunebench.points.records import (
    CapacityRecord,
    LoadRetry,
    ParallelRecord,
    QualityRecord,
    RooflineRecord,
    SentinelRecord,
    TrialRecord,
    TuneRecord,
)
from tunebench.redact import MASK, redact
from tunebench.spec.deployments import current_kind
from tunebench.spec.loading import read_yaml_mapping

SCHEMA_VERSION = 2


class RunKind(str, Enum):
    SWEEP = "sweep"
    TUNE = "tune"
    BATCH = "batch"
    IMPORT = "import"


class Status(str, Enum):
    """A run's status; every run kind goes running -> complete | failed | interrupted."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"  # a configuration failed, or an unexpected error ended the run
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM


class ConfigStatus(str, Enum):
    PLANNED = "planned"
    STARTING = "starting"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class _Open(BaseModel):
    # Unknown keys are kept: a newer tunebench's fields survive this one's rewrite.
    model_config = ConfigDict(extra="allow", use_enum_values=False)


class Attempt(_Open):
    """One process's go at a run: the first, then each resume."""

    attempt: int
    pid: int
    command: str
    started_at: str
    ended_at: str | None = None
    status: Status = Status.RUNNING


class ConfigEntry(_Open):
    """One server configuration (a trial of a tune run, a batch configuration)."""

    config_id: str
    label: str = ""
    model: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    command_args: list[str] = Field(default_factory=list)
    varied: dict[str, Any] = Field(default_factory=dict)
    status: ConfigStatus = ConfigStatus.PLANNED
    attempts: int = 1
    error: str | None = None
    effective: dict[str, Any] | None = None
    invalid_reasons: list[str] | None = None
    # one entry per requested engine arg: verified | mismatch | unverified, and from where
    arg_checks: list[dict[str, Any]] | None = None
    start_s: float | None = None
    capacity: CapacityRecord | None = None
    log_tail: str | None = None
    server_pgid: int | None = None
    load_pgid: int | None = None
    points_done: int | None = None
    failed_point: str | None = None
    load_retries: list[LoadRetry] | None = None
    # the quality check: prompts, seconds (excluded from load figures), error
    quality: QualityRecord | None = None
    # the A...A sentinel (points/sentinel.py): its change against the first point, or why none
    # (the last repeat's), and every repeat's in `sentinels` (each with its "repeat")
    sentinel: SentinelRecord | None = None
    sentinels: list[SentinelRecord] | None = None
    # the roofline the configuration's points are read against (tunebench/roofline): its
    # weight bytes per decode step and bandwidth, or a note on why there is none
    roofline: RooflineRecord | None = None


KIND_FIELDS = (
    "only",
    "parallel",
    "merged_from",
    "hosts_differ",
    "tune",
    "trials",
    "records",
    "shards",
)


class Manifest(_Open):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    name: str
    kind: RunKind
    status: Status = Status.RUNNING
    started_at: str
    ended_at: str | None = None
    spec_path: str | None = None
    spec: dict[str, Any] | None = None
    versions: dict[str, Any] = Field(default_factory=dict)
    host: dict[str, Any] = Field(default_factory=dict)
    deployment_kind: str | None = None
    varied_args: list[str] = Field(default_factory=list)
    planned_points: list[str] = Field(default_factory=list)
    configs: list[ConfigEntry] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    # per run kind (absent elsewhere): a part of a split sweep, its configuration ids
    only: list[str] | None = None
    # a sweep measured several configurations at a time: how many, and what that means
    parallel: ParallelRecord | None = None
    # a merged run: its parts, and whether they ran on different hosts
    merged_from: list[str] | None = None
    hosts_differ: bool | None = None
    # a tune run: its objective, study and workers; every trial's row as it ends
    tune: TuneRecord | None = None
    trials: dict[str, TrialRecord] | None = None  # by trial number
    # a batch run: its records and shards
    records: int | None = None
    shards: int | None = None

    @field_validator("deployment_kind")
    @classmethod
    def _current_kind_name(cls, kind: str | None) -> str | None:
        # a run recorded under an old name: `replay` -> `recorded`
        return None if kind is None else current_kind(kind)

    @classmethod
    def new(
        cls,
        run_id: str,
        name: str,
        kind: RunKind | str,
        *,
        spec: dict | None = None,
        spec_path: Path | str | None = None,
        deployment_kind: str | None = None,
        varied_args: list[str] | tuple[str, ...] = (),
        planned_points: list[str] | tuple[str, ...] = (),
        versions: dict[str, Any] | None = None,
        host: dict[str, Any] | None = None,
        **extra: Any,
    ) -> "Manifest":
        """The one constructor: a running run of `kind`, with this machine's versions and
        host unless given (an imported run was measured elsewhere)."""
        return cls(
            run_id=run_id,
            name=name,
            kind=RunKind(kind),
            started_at=now_iso(),
            spec_path=str(spec_path) if spec_path is not None else None,
            spec=spec,
            versions=current_versions() if versions is None else versions,
            host=host_info() if host is None else host,
            deployment_kind=deployment_kind,
            varied_args=list(varied_args),
            planned_points=list(planned_points),
            **extra,
        )

    # -- reading and writing ------------------------------------------------------------
    @classmethod
    def from_data(cls, data: Any, where: Path) -> "Manifest":
        if not isinstance(data, dict):
            raise StoreError(f"{where}: not a tunebench manifest (not a JSON object)")
        version = data.get("schema_version", 0)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise StoreError(
                f"{where}: schema_version {version} is newer than this tunebench "
                f"understands ({SCHEMA_VERSION}); upgrade tunebench"
            )
        if "kind" not in data or data.get("kind") not in {k.value for k in RunKind}:
            data = {**data, "kind": _kind_of_v1(data)}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problem = exc.errors()[0]
            key = ".".join(str(p) for p in problem["loc"])
            raise StoreError(f"{where}: manifest key {key}: {problem['msg']}") from None

    @classmethod
    def read(cls, path: Path) -> "Manifest":
        """The manifest of run directory `path`; StoreError naming the file when unreadable."""
        target = Path(path) / "manifest.json"
        try:
            data = json.loads(target.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StoreError(f"{path}: not a tunebench run (no manifest.json)") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise StoreError(f"{target}: unreadable JSON: {exc}") from None
        return cls.from_data(data, target)

    def to_json(self) -> str:
        """The file's text: secrets masked wherever they are (keys named like secrets, values
        of secret environment variables, secrets met while running)."""
        data = self.model_dump(mode="json")
        data["schema_version"] = SCHEMA_VERSION
        for key in KIND_FIELDS:  # a field of another run kind is not written as null
            if data.get(key) is None:
                data.pop(key, None)
        return json.dumps(redact(data), indent=2, default=str)

    # -- configurations -----------------------------------------------------------------
    def config(self, config_id: str) -> ConfigEntry | None:
        return next((c for c in self.configs if c.config_id == config_id), None)

    def update_config(self, config_id: str, **fields: Any) -> ConfigEntry:
        entry = self.config(config_id)
        if entry is None:
            entry = ConfigEntry(config_id=config_id)
            self.configs.append(entry)
        for key, value in redact(fields).items():
            if key == "status":
                value = ConfigStatus(value)
            setattr(entry, key, value)
        return entry

    # -- attempts and status ------------------------------------------------------------
    def begin_attempt(self, command: str, **details: Any) -> Attempt:
        attempt = Attempt(
            attempt=len(self.attempts) + 1,
            pid=os.getpid(),
            command=command,
            started_at=now_iso(),
            **details,
        )
        self.attempts.append(attempt)
        self.status, self.ended_at = Status.RUNNING, None
        return attempt

    def finish(self, status: Status) -> None:
        self.status = Status(status)
        if self.status is not Status.RUNNING:
            self.ended_at = now_iso()
            if self.attempts and self.attempts[-1].ended_at is None:
                self.attempts[-1].ended_at = self.ended_at
                self.attempts[-1].status = self.status


def _kind_of_v1(data: dict[str, Any]) -> str:
    if "tune" in data:
        return RunKind.TUNE.value
    if data.get("deployment_kind") == "import":
        return RunKind.IMPORT.value
    if str(data.get("deployment_kind", "")).startswith("batch"):
        return RunKind.BATCH.value
    return RunKind.SWEEP.value


def as_stored(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec as a manifest holds it once written and read back: secrets masked, through
    JSON (`Manifest.to_json`), so it compares equal to `Manifest.spec` of a run of it."""
    return json.loads(json.dumps(redact(spec), default=str))


def spec_of(manifest: Manifest) -> tuple[dict[str, Any], Path]:
    """The spec a run was started with, for a resume of any kind.

    The manifest's copy has secrets masked, so the spec file is read again when it still
    holds the same spec; when the file changed, the
    recorded copy is used unless a secret in it was masked, which cannot be resumed.
    """
    spec_path = Path(manifest.spec_path or "")
    recorded = manifest.spec
    if not isinstance(recorded, dict):
        raise StoreError(
            f"run {manifest.run_id}: manifest.json holds no spec; it cannot be resumed"
        )
    masked = MASK in json.dumps(recorded, default=str)
    if manifest.spec_path and spec_path.is_file():
        current = read_yaml_mapping(spec_path)
        if redact(current) == recorded:
            return current, spec_path
        if not masked:
            return recorded, spec_path  # the file changed since: resume what was run
    elif not masked:
        return recorded, spec_path
    raise SpecError(
        f"{spec_path}: the run's spec holds a secret that was masked, and this file "
        "is gone or changed; restore the spec file the run was started with"
    )
