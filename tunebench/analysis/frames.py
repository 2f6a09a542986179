"""Runs -> pandas DataFrames. The only analysis module that reads run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tunebench.errors import StoreError
from tunebench.load.guidellm_report import request_samples
from tunebench.points.columns import BOOL_COLUMNS, ID_COLUMNS, TEXT_COLUMNS
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import Manifest
from tunebench.store.run import resolve_run


def run_path(run: str | Path, root: str | Path = "reports") -> Path:
    return resolve_run(str(run), Path(root))


def load_manifest(run: str | Path, root: str | Path = "reports") -> dict:
    """The manifest as plain JSON data (kind filled in for runs of schema version 1): the
    public face for notebooks; tunebench's own readers take `read_manifest`."""
    return read_manifest(run, root).model_dump(mode="json")


def read_manifest(run: str | Path, root: str | Path = "reports") -> Manifest:
    """The manifest as its typed model (kind filled in for runs of schema version 1)."""
    return Manifest.read(run_path(run, root))


def load_run(run: str | Path, root: str | Path = "reports") -> pd.DataFrame:
    """The points of a run, one row per configuration x load point, numbers as numbers."""
    path = run_path(run, root)
    points = RunLayout(path).points
    if not points.exists():
        return pd.DataFrame(columns=list(ID_COLUMNS))
    frame = pd.read_csv(points, dtype=str, keep_default_na=False)
    varied = set(Manifest.read(path).varied_args)
    columns: dict[str, pd.Series] = {}
    for column in frame.columns:
        if column in TEXT_COLUMNS or column in varied:
            columns[column] = frame[column]
        elif column in BOOL_COLUMNS:
            # empty (e.g. slo_met without an SLO) stays missing rather than False
            columns[column] = frame[column].map({"True": True, "False": False}).astype(object)
        else:
            columns[column] = pd.to_numeric(frame[column].replace("", None), errors="coerce")
    # built in one go: a column replaced at a time left a frame of ~150 blocks, and every
    # later `assign` on it printed pandas' PerformanceWarning at the end of a sweep
    frame = pd.DataFrame(columns, index=frame.index)
    frame.attrs["run_path"] = str(path)
    return frame


def load_requests(
    run: str | Path,
    root: str | Path = "reports",
    config_id: str | None = None,
    point_id: str | None = None,
) -> pd.DataFrame:
    """Per-request samples (ttft_ms, itl_ms, tpot_ms, e2e_s, tokens) of a run's points."""
    path = run_path(run, root)
    frames = []
    files = sorted(RunLayout(path).requests_dir.glob("*.csv"))
    for file in files:
        if config_id and file.stem != config_id:
            continue
        frame = pd.read_csv(file)
        frame.insert(0, "config_id", file.stem)
        frames.append(frame)
    if not files:
        frames = _requests_from_raw_reports(path, config_id)
    if not frames:
        return pd.DataFrame(
            columns=["config_id", "point_id", "ttft_ms", "itl_ms", "tpot_ms", "e2e_s"]
        )
    out = pd.concat(frames, ignore_index=True)
    if point_id:
        out = out[out["point_id"] == point_id]
    return out


def _requests_from_raw_reports(path: Path, config_id: str | None) -> list[pd.DataFrame]:
    points = load_run(path)
    if "raw_report" not in points:  # runs written before the column existed: plan order
        order = points.groupby("config_id").cumcount()
        layout = RunLayout(path)
        points["raw_report"] = [
            layout.relative(layout.raw_report(c, i)) for c, i in zip(points["config_id"], order)
        ]
    frames = []
    for row in points.itertuples():
        raw = getattr(row, "raw_report", "")
        if not raw or (config_id and row.config_id != config_id):
            continue
        try:
            benchmark = json.loads((path / raw).read_text())["benchmarks"][0]
        except (OSError, ValueError, KeyError, IndexError) as exc:
            raise StoreError(f"{path / raw}: unreadable GuideLLM report: {exc}") from None
        frame = pd.DataFrame(request_samples(benchmark))
        frame.insert(0, "point_id", row.point_id)
        frame.insert(0, "config_id", row.config_id)
        frames.append(frame)
    return frames
