"""The run directory: `reports/<run-id>/`, versioned and written atomically.

    manifest.json            schema_version, spec as given, versions, host, times, status,
                             per configuration: args, effective config, validity, errors
    points.csv               one row per configuration x load point (see columns.py)
    guidellm/<config>/       GuideLLM's job, log and raw per-point reports
    metrics/<config>.csv     the /metrics time series scraped during that configuration
    requests/<config>.csv    per-request latency samples of every point (for statistics)
    logs/server-<config>.log the vLLM server log (secrets redacted)

Every write goes to a temporary file and is renamed over the target, so a crash leaves
either the old or the new file, never half of one.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tunebench.errors import StoreError
from tunebench.redact import redact
from tunebench.store.columns import point_columns

SCHEMA_VERSION = 1
REQUEST_COLUMNS = ("point_id", "ttft_ms", "itl_ms", "tpot_ms", "e2e_s", "prompt_tokens",
                   "output_tokens")
STATUSES = ("running", "complete", "failed", "interrupted")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(name: str, root: Path, clock: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    run_id = f"{stamp}-{slug}"
    suffix = 2
    while (root / run_id).exists():
        run_id = f"{stamp}-{slug}-{suffix}"
        suffix += 1
    return run_id


class RunLock:
    """An exclusive lock on a run directory for the life of one tunebench process.

    `flock` on `<run>/.lock`: the kernel releases it when the process dies, so a killed
    sweep never leaves a stale lock; the file holds the owner's PID for the message.
    """

    def __init__(self, path: Path):
        self.path = path / ".lock"
        self._handle = None

    def acquire(self) -> "RunLock":
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            handle.close()
            raise StoreError(f"{self.path.parent}: run is locked by PID {owner}; wait for it to "
                             "finish or stop it (kill -TERM PID), then try again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


class RunStore:
    def __init__(self, path: Path, manifest: dict[str, Any]):
        self.path = path
        self.manifest = manifest
        self.rows: list[dict[str, Any]] = []
        self._requests: dict[str, list[dict[str, Any]]] = {}
        self.lock: RunLock | None = None

    def acquire_lock(self) -> "RunStore":
        """Refuse a second writer (a parallel `--resume` or tune on the same run)."""
        self.lock = RunLock(self.path).acquire()
        return self

    def release_lock(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @classmethod
    def create(cls, root: Path, name: str, manifest: dict[str, Any]) -> "RunStore":
        root.mkdir(parents=True, exist_ok=True)
        run_id = new_run_id(name, root)
        path = root / run_id
        path.mkdir()
        full = {
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "name": name,
            "status": "running",
            "started_at": now_iso(),
            "ended_at": None,
            **manifest,
        }
        store = cls(path, redact(full)).acquire_lock()
        store.save_manifest()
        return store

    @classmethod
    def open(cls, path: Path) -> "RunStore":
        manifest_path = path / "manifest.json"
        try:
            manifest = json.loads(manifest_path.read_text())
        except FileNotFoundError:
            raise StoreError(f"{path}: not a tunebench run (no manifest.json)") from None
        except ValueError as exc:
            raise StoreError(f"{manifest_path}: unreadable JSON: {exc}") from None
        if manifest.get("schema_version", 0) > SCHEMA_VERSION:
            raise StoreError(
                f"{manifest_path}: schema_version {manifest['schema_version']} is newer than "
                f"this tunebench understands ({SCHEMA_VERSION}); upgrade tunebench"
            )
        store = cls(path, manifest)
        store.rows = read_points(path)
        return store

    # -- manifest -----------------------------------------------------------------------
    def save_manifest(self) -> None:
        write_atomic(self.path / "manifest.json", json.dumps(self.manifest, indent=2, default=str))

    def set_status(self, status: str) -> None:
        assert status in STATUSES, status
        self.manifest["status"] = status
        if status != "running":
            self.manifest["ended_at"] = now_iso()
            attempts = self.manifest.get("attempts") or []
            if attempts and attempts[-1].get("ended_at") is None:
                attempts[-1].update(ended_at=self.manifest["ended_at"], status=status)
        self.save_manifest()
        if status != "running":
            self.release_lock()

    def begin_attempt(self, **details: Any) -> int:
        """Record one process's go at this run (the first, then each `--resume`)."""
        attempts = self.manifest.setdefault("attempts", [])
        attempts.append({"attempt": len(attempts) + 1, "pid": os.getpid(),
                         "started_at": now_iso(), "ended_at": None, "status": "running",
                         **details})
        self.manifest["status"] = "running"
        self.manifest["ended_at"] = None
        self.save_manifest()
        return len(attempts)

    def update_config(self, config_id: str, **fields: Any) -> None:
        for entry in self.manifest.setdefault("configs", []):
            if entry["config_id"] == config_id:
                entry.update(redact(fields))
                break
        else:
            self.manifest["configs"].append(redact({"config_id": config_id, **fields}))
        self.save_manifest()

    # -- points -------------------------------------------------------------------------
    def add_point(self, row: dict[str, Any]) -> None:
        """Store one finished point; the whole file is rewritten atomically."""
        self.rows.append(row)
        self._write_points()

    def _write_points(self) -> None:
        varied = self.manifest.get("varied_args", [])
        columns = point_columns(varied)
        extra = sorted({k for row in self.rows for k in row} - set(columns))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns + extra, extrasaction="ignore")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({k: _csv_value(v) for k, v in row.items()})
        write_atomic(self.path / "points.csv", buffer.getvalue())

    def add_requests(self, config_id: str, point_id: str, samples: list[dict[str, Any]]) -> None:
        """Per-request samples of one point, in `requests/<config_id>.csv` (rewritten atomically)."""
        if config_id not in self._requests:  # a resumed run: keep what earlier attempts stored
            self._requests[config_id] = read_requests(self.path, config_id)
        self._requests[config_id].extend(
            {"point_id": point_id, **sample} for sample in samples
        )
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=REQUEST_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for sample in self._requests[config_id]:
            writer.writerow({k: _csv_value(v) for k, v in sample.items()})
        write_atomic(self.path / "requests" / f"{config_id}.csv", buffer.getvalue())

    def write_text(self, relative: str, text: str) -> Path:
        target = self.path / relative
        write_atomic(target, text)
        return target


def _csv_value(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.15g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def read_points(path: Path) -> list[dict[str, Any]]:
    points = path / "points.csv"
    if not points.exists():
        return []
    with open(points, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def read_requests(path: Path, config_id: str) -> list[dict[str, Any]]:
    target = path / "requests" / f"{config_id}.csv"
    if not target.exists():
        return []
    with open(target, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def list_runs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "manifest.json").is_file())


def resolve_run(ref: str, root: Path) -> Path:
    """A run by path, by id under `root`, or by a unique part of its id."""
    direct = Path(ref)
    if (direct / "manifest.json").is_file():
        return direct
    if (root / ref / "manifest.json").is_file():
        return root / ref
    matches = [p for p in list_runs(root) if ref in p.name]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise StoreError(f"no run {ref!r} under {root}; `tunebench runs` lists them")
    names = ", ".join(p.name for p in matches[:5])
    raise StoreError(f"{ref!r} matches {len(matches)} runs ({names}); give more of the id")
