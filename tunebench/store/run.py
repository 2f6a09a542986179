"""A run directory on disk: created, locked, written atomically, given one status lifecycle.

Every run kind (sweep, tune, batch, import) goes through `RunStore`: `create()` makes the
directory with its typed manifest and takes the run lock; `running(command)` is the one
status lifecycle (running, then complete, failed or interrupted); `add_point()` and
`add_requests()` store each finished point at once. Paths come from `layout.RunLayout`.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator, Mapping, Sequence

from tunebench.errors import PathError, StoreError, TunebenchError
from tunebench.points.cells import Cell, PointRow, SampleView
from tunebench.points.columns import REQUEST_COLUMNS, point_columns
from tunebench.processes import stop_leftover_group
from tunebench.redact import redact, redact_text
from tunebench.store.files import csv_text, read_csv, write_atomic
from tunebench.store.layout import RunLayout, is_run
from tunebench.store.manifest import ConfigEntry, Manifest, RunKind, Status


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
        self.path = path
        self._handle: IO[str] | None = None

    def acquire(self) -> "RunLock":
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            handle.close()
            raise StoreError(
                f"{self.path.parent}: run is locked by PID {owner}; wait for it to "
                "finish or stop it (kill -TERM PID), then try again"
            ) from None
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


@dataclass
class AttemptResult:
    """What the body of `RunStore.running()` decides: complete unless a configuration failed."""

    number: int
    failed: bool = False

    def fail(self) -> None:
        self.failed = True


class RunStore:
    def __init__(self, path: Path, manifest: Manifest):
        self.path = Path(path)
        self.layout = RunLayout(self.path)
        self.manifest = manifest
        self.rows: list[dict[str, Any]] = []
        self._requests: dict[str, list[dict[str, Any]]] = {}
        self._lock: RunLock | None = None
        # The manifest and points.csv are shared by configurations measured in parallel
        # (threads of one process; the run lock keeps other processes out).
        self._writing = threading.RLock()

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, kind: RunKind | str, name: str, **fields: Any) -> "RunStore":
        """A new run directory under `root` (locked by this process); `fields` go to
        `Manifest.new` (spec, spec_path, deployment_kind, varied_args, ...)."""
        root = Path(root)
        try:
            root.mkdir(parents=True, exist_ok=True)
            run_id = new_run_id(name, root)
            (root / run_id).mkdir()
        except OSError as exc:  # a file there, /proc, a read-only or full disk
            raise PathError(
                f"{root}: cannot make a run here ({exc.strerror or exc}); give a directory "
                "you can write (--root DIR)"
            ) from None
        store = cls(root / run_id, Manifest.new(run_id, name, kind, **fields)).acquire_lock()
        store.save_manifest()
        return store

    @classmethod
    def open(cls, path: Path) -> "RunStore":
        store = cls(Path(path), Manifest.read(Path(path)))
        store.rows = read_csv(store.layout.points)
        return store

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def kind(self) -> RunKind:
        return self.manifest.kind

    # -- the lock and the status lifecycle ----------------------------------------------
    def acquire_lock(self) -> "RunStore":
        """Refuse a second writer (a parallel `--resume` or tune on the same run)."""
        if self._lock is None:
            self._lock = RunLock(self.layout.lock).acquire()
        return self

    def stop_leftover_processes(self) -> list[str]:
        """Stop the servers and load generators an interrupted writer of this run left
        running (their process groups are in the manifest): a SIGKILLed tunebench (OOM,
        a pipeline's timeout, Slurm) cannot reap them, and a server left holding its GPU
        makes the next start fail. Call it holding the lock: no live writer owns them then.
        Returns a note per group stopped."""
        notes = []
        for config in self.manifest.configs:
            for pgid, markers, what in (
                (config.server_pgid, ("vllm",), "server"),
                (config.load_pgid, ("guidellm", "tunebench.load", "vllm"), "load generator"),
            ):
                if pgid and stop_leftover_group(int(pgid), markers):
                    notes.append(
                        f"stopped the {what} of {config.config_id} that the interrupted run "
                        f"left running (process group {pgid})"
                    )
        return notes

    def release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @contextmanager
    def running(self, command: str, **details: Any) -> Iterator[AttemptResult]:
        """One process's go at the run, recorded as an attempt.

        The status is `running` inside; afterwards `complete`, or `failed` when the body
        called `result.fail()` or raised, or `interrupted` on Ctrl-C/SIGTERM (which the CLI
        turns into KeyboardInterrupt). The lock is released at the end either way.
        """
        self.acquire_lock()
        attempt = self.manifest.begin_attempt(command, **details)
        self.save_manifest()
        result = AttemptResult(attempt.attempt)
        status = Status.FAILED
        try:
            yield result
            status = Status.FAILED if result.failed else Status.COMPLETE
        except KeyboardInterrupt:
            status = Status.INTERRUPTED
            raise
        finally:
            self.manifest.finish(status)
            self.save_manifest()
            self.release_lock()

    # -- manifest -----------------------------------------------------------------------
    def save_manifest(self) -> None:
        with self._writing:
            write_atomic(self.layout.manifest, self.manifest.to_json())

    def update_config(self, config_id: str, **fields: Any) -> ConfigEntry:
        with self._writing:
            entry = self.manifest.update_config(config_id, **fields)
            self.save_manifest()
            return entry

    def record(self, **fields: Any) -> None:
        """Top-level manifest fields of a run kind (a tune run's trials, ...), saved at once."""
        with self._writing:
            for key, value in redact(fields).items():
                setattr(self.manifest, key, value)
            self.save_manifest()

    # -- points -------------------------------------------------------------------------
    def add_point(self, row: PointRow | Mapping[str, Cell]) -> None:
        """Store one finished point (a measured point's typed row, or a row already in
        points.csv's form: an imported file's point, a batch configuration's); the whole file
        is rewritten atomically."""
        with self._writing:
            self.rows.append(row.csv_cells() if isinstance(row, PointRow) else dict(row))
            self._write_points()

    def mark_unverified(
        self, config_id: str, repeat: int, reason: str, point_ids: Sequence[str] | None = None
    ) -> None:
        """Add `reason` to what could not be checked of the stored points `point_ids` (None:
        every one) of one configuration's repeat (a sentinel that found the machine moved
        under them)."""
        with self._writing:
            for row in self.rows:
                if row.get("config_id") != config_id or str(row.get("repeat") or 1) != str(repeat):
                    continue
                if point_ids is not None and row.get("point_id") not in point_ids:
                    continue
                reasons = [r for r in str(row.get("unverified_reason") or "").split("; ") if r]
                if reason not in reasons:
                    row["unverified_reason"] = "; ".join([*reasons, reason])
            self._write_points()

    def order_points(self) -> None:
        """Rows in the order a sequential sweep writes them (repeat, then plan order: config
        ids are c1, c2, ... in plan order; each configuration's points as measured):
        configurations measured in parallel finish in any order."""

        def key(row: dict[str, Any]) -> tuple[int, int]:
            repeat = str(row.get("repeat") or "1")
            return (int(repeat) if repeat.isdigit() else 1, config_number(row.get("config_id")))

        with self._writing:
            self.rows.sort(key=key)
            if self.rows:
                self._write_points()
            self.manifest.configs.sort(key=lambda entry: config_number(entry.config_id))
            self.save_manifest()

    def _write_points(self) -> None:
        columns = point_columns(self.manifest.varied_args)
        extra = sorted({k for r in self.rows for k in r} - set(columns))
        write_atomic(self.layout.points, csv_text(columns + extra, self.rows))

    def add_requests(
        self, config_id: str, point_id: str, samples: Sequence[SampleView], repeat: int = 1
    ) -> None:
        """Per-request samples of one point, in requests/<config>.csv (rewritten atomically)."""
        with self._writing:
            if config_id not in self._requests:  # a resumed run: keep earlier attempts' rows
                self._requests[config_id] = self._stored_requests(config_id)
            self._requests[config_id].extend(
                {"point_id": point_id, "repeat": repeat, **s} for s in samples
            )
            write_atomic(
                self.layout.requests(config_id),
                csv_text(list(REQUEST_COLUMNS), self._requests[config_id]),
            )

    def _stored_requests(self, config_id: str) -> list[dict[str, Any]]:
        """Earlier attempts' samples of points that are stored: a point in flight when the
        run stopped has samples but no row, and is measured again (its old samples would
        pool with the new ones)."""
        stored = {
            (r.get("point_id"), str(int(float(r.get("repeat") or 1))))
            for r in self.rows
            if r.get("config_id") == config_id
        }
        return [
            s
            for s in read_csv(self.layout.requests(config_id))
            if (s.get("point_id"), str(int(float(s.get("repeat") or 1)))) in stored
        ]

    # -- other files --------------------------------------------------------------------
    def write_text(self, path: Path | str, text: str, secrets: list[str] | None = None) -> Path:
        """Write a file of the run (absolute, relative to the run, or a layout path), secrets
        masked. A layout path of a run under a relative root (`reports/<run>/metrics/c1.csv`)
        already starts with the run's path: it is not joined to it a second time."""
        given = Path(path)
        inside = given.parts[: len(self.path.parts)] == self.path.parts
        target = given if given.is_absolute() or inside else self.path / given
        write_atomic(target, redact_text(text, secrets or ()))
        return target

    def keep_earlier_log(self, config_id: str, attempt: int = 1, repeat: int = 1) -> None:
        """Before another go at a configuration (a resumed attempt, or its next repeat), the
        log of the earlier one keeps its own name."""
        log = self.layout.server_log(config_id)
        if not log.exists():
            return
        if repeat > 1:
            log.rename(_free(self.layout.server_log(config_id, repeat=repeat - 1)))
        elif attempt > 1:
            log.rename(_free(self.layout.server_log(config_id, attempt - 1)))

    def redact_file(self, path: Path | None, secrets: list[str]) -> None:
        """Mask secrets in a file a server or tool wrote into the run (its log)."""
        if path and path.exists():
            text = path.read_text(errors="replace")
            clean = redact_text(text, secrets)
            if clean != text:
                path.write_text(clean)


def config_number(config_id: Any) -> int:
    """The plan position of a config id (c1, c2, ... c12): plan order, not text order."""
    digits = re.sub(r"\D", "", str(config_id or ""))
    return int(digits) if digits else 0


def _free(path: Path) -> Path:
    """`path`, or path.2, path.3 ... if taken: a kept log is never overwritten."""
    candidate, number = path, 2
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}.{number}{path.suffix}")
        number += 1
    return candidate


def read_points(path: Path) -> list[dict[str, str]]:
    return read_csv(RunLayout(Path(path)).points)


def read_requests(path: Path, config_id: str) -> list[dict[str, str]]:
    return read_csv(RunLayout(Path(path)).requests(config_id))


def list_runs(root: Path) -> list[Path]:
    if not Path(root).is_dir():
        return []
    return sorted(p for p in Path(root).iterdir() if is_run(p))


def newest_runs(root: Path) -> Iterator[RunStore]:
    """The runs under `root` that open, newest first (run ids sort by time); one that does
    not open (a half-written or foreign directory) is passed over."""
    for path in reversed(list_runs(root)):
        try:
            yield RunStore.open(path)
        except TunebenchError:
            continue


def resolve_run(ref: str, root: Path) -> Path:
    """A run by path, by id under `root`, or by a unique part of its id."""
    direct = Path(ref)
    if is_run(direct):
        return direct
    if is_run(Path(root) / ref):
        return Path(root) / ref
    matches = [p for p in list_runs(root) if ref in p.name]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise PathError(f"no run {ref!r} under {root}; `tunebench runs` lists them")
    names = ", ".join(p.name for p in matches[:5])
    raise PathError(f"{ref!r} matches {len(matches)} runs ({names}); give more of the id")
