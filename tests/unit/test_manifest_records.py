"""points/records.py: what the manifest keeps of a configuration's measurement is typed,
and manifests keep reading as they were (unknown keys kept, a wrong type named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebench.errors import StoreError
from tunebench.store.manifest import Manifest

BASE = {
    "schema_version": 2,
    "run_id": "r1",
    "name": "t",
    "kind": "sweep",
    "started_at": "2026-11-29T00:00:00Z",
}


def manifest(**config: object) -> Manifest:
    data = {**BASE, "configs": [{"config_id": "c1", **config}]}
    return Manifest.from_data(data, Path("runs/r1/manifest.json"))


def test_a_capacity_record_keeps_a_key_a_later_version_wrote() -> None:
    capacity = {"rate": 2.5, "probes": 4, "probe_rates": [1, 2, 4, 3], "future_key": "kept"}
    read = manifest(capacity=capacity)
    entry = read.config("c1")
    assert entry is not None and entry.capacity is not None
    assert entry.capacity["rate"] == 2.5 and entry.capacity["probe_rates"] == [1, 2, 4, 3]
    assert read.model_dump()["configs"][0]["capacity"]["future_key"] == "kept"


def test_a_record_of_the_wrong_type_is_named_with_its_file_and_key() -> None:
    with pytest.raises(
        StoreError, match=r"runs/r1/manifest.json: manifest key configs.0.capacity.rate"
    ):
        manifest(capacity={"rate": "fast"})
    with pytest.raises(StoreError, match=r"configs.0.sentinels.0.held"):
        manifest(sentinels=[{"point": "concurrent-1", "repeat": 1, "held": "perhaps"}])


def test_sentinel_and_roofline_records_read_back_as_written() -> None:
    sentinel = {"point": "concurrent-1", "repeat": 2, "window": [1.0, 21.0], "held": True}
    sentinel.update(change_pct=-3.2, z=0.8, first_requests=40, sentinel_requests=38)
    roofline = {"note": "roofline: enabled false in the spec"}
    entry = manifest(sentinel=sentinel, sentinels=[sentinel], roofline=roofline).config("c1")
    assert entry is not None
    assert entry.sentinel == sentinel and entry.sentinels == [sentinel]
    assert entry.roofline == roofline


def test_a_tune_runs_study_and_trials_read_back_typed() -> None:
    trial = {"trial": 0, "config_id": "t0", "state": "COMPLETE", "baseline": True}
    trial.update(params={}, values=[2.5], note="")
    data = {**BASE, "kind": "tune", "tune": {"objective": "capacity", "study": "study.db"}}
    read = Manifest.from_data({**data, "trials": {"0": trial}}, Path("runs/r1/manifest.json"))
    assert read.tune == {"objective": "capacity", "study": "study.db"}
    assert read.trials == {"0": trial}
    with pytest.raises(StoreError, match=r"manifest key trials.0.values"):
        Manifest.from_data(
            {**data, "trials": {"0": {**trial, "values": "fast"}}}, Path("runs/r1/manifest.json")
        )
