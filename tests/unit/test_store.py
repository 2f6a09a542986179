"""Run store: ids that sort by time, atomic files, manifest, points, lookup; redaction."""

from __future__ import annotations

import json

import pytest

from tunebench.errors import StoreError
from tunebench.redact import MASK, redact, redact_text
from tunebench.store.manifest import RunKind, Status
from tunebench.store.run import RunStore, list_runs, new_run_id, resolve_run


def test_run_ids_sort_by_time_and_never_collide(tmp_path):
    first = new_run_id("my sweep!", tmp_path, clock=1_800_000_000)
    later = new_run_id("a", tmp_path, clock=1_800_000_060)
    assert first.endswith("-my-sweep") and sorted([later, first]) == [first, later]
    (tmp_path / first).mkdir()
    assert new_run_id("my sweep!", tmp_path, clock=1_800_000_000) == first + "-2"


def test_points_are_written_at_once_and_read_back(tmp_path):
    store = RunStore.create(tmp_path, RunKind.SWEEP, "t", varied_args=["max-num-seqs"])
    store.add_point(
        {
            "run_id": store.run_id,
            "config_id": "c1",
            "point_id": "concurrent-1",
            "max-num-seqs": "2",
            "ttft_p50_ms": 12.3456789,
            "valid": True,
            "start_time": 1795240177.6253695,
        }
    )
    reopened = RunStore.open(store.path)
    assert len(reopened.rows) == 1
    row = reopened.rows[0]
    assert row["max-num-seqs"] == "2" and row["valid"] == "True"
    assert float(row["start_time"]) == pytest.approx(1795240177.6253695, abs=1e-3)
    header = (store.path / "points.csv").read_text().splitlines()[0].split(",")
    assert header[:8] == [
        "run_id",
        "config_id",
        "config_label",
        "point_id",
        "load_kind",
        "target",
        "repeat",
        "max-num-seqs",
    ]
    assert not list(store.path.glob(".*.tmp"))  # temporary files were renamed away


def test_manifest_status_and_configs(tmp_path):
    store = RunStore.create(tmp_path, RunKind.SWEEP, "t")
    with pytest.raises(KeyboardInterrupt), store.running("sweep"):
        store.update_config("c1", status="running", args={"api-key": "s3cr3t-value"})
        raise KeyboardInterrupt
    manifest = json.loads((store.path / "manifest.json").read_text())
    assert manifest["schema_version"] == 2 and manifest["status"] == "interrupted"
    assert manifest["kind"] == "sweep"
    assert manifest["ended_at"] and manifest["configs"][0]["args"]["api-key"] == MASK
    assert manifest["attempts"][0]["status"] == "interrupted"


@pytest.mark.parametrize("kind", list(RunKind))
@pytest.mark.parametrize(
    "how,status",
    [("returns", "complete"), ("fails", "failed"), ("raises", "failed"), ("ctrl-c", "interrupted")],
)
def test_one_status_lifecycle_for_every_run_kind(tmp_path, kind, how, status):
    store = RunStore.create(tmp_path, kind, "t")
    try:
        with store.running(kind.value) as attempt:
            assert RunStore.open(store.path).manifest.status is Status.RUNNING
            if how == "fails":
                attempt.fail()
            elif how == "raises":
                raise RuntimeError("an unexpected error")
            elif how == "ctrl-c":
                raise KeyboardInterrupt
    except (RuntimeError, KeyboardInterrupt):
        pass
    manifest = RunStore.open(store.path).manifest
    assert manifest.kind is kind and manifest.status.value == status and manifest.ended_at
    assert [a.status.value for a in manifest.attempts] == [status]
    RunStore.open(store.path).acquire_lock()  # the lock was released


def test_version_1_manifests_are_read_with_their_kind(tmp_path):
    for name, extra, kind in (
        ("s", {}, "sweep"),
        ("t", {"tune": {"objective": "capacity"}}, "tune"),
        ("b", {"kind": "batch"}, "batch"),
        ("i", {"deployment_kind": "import"}, "import"),
    ):
        run = tmp_path / name
        run.mkdir()
        (run / "manifest.json").write_text(
            json.dumps(
                {
                    "schema_version": 1,
                    "run_id": name,
                    "name": name,
                    "status": "complete",
                    "started_at": "2026-11-20T10:00:00+00:00",
                    "configs": [
                        {"config_id": "c1", "label": "x", "status": "complete", "args": {}}
                    ],
                    **extra,
                }
            )
        )
        manifest = RunStore.open(run).manifest
        assert manifest.kind.value == kind and manifest.configs[0].status.value == "complete"


def test_a_secret_met_while_running_never_reaches_the_manifest(tmp_path):
    from tunebench.redact import remember

    remember("sk-remembered-secret-4410")
    store = RunStore.create(tmp_path, RunKind.TUNE, "t")
    store.record(
        trials={"0": {"note": "recorded: no configuration with api-key=sk-remembered-secret-4410"}}
    )
    store.update_config("c1", error="failed with sk-remembered-secret-4410")
    text = (store.path / "manifest.json").read_text()
    assert "sk-remembered-secret-4410" not in text and MASK in text


def test_resolve_run(tmp_path):
    a = RunStore.create(tmp_path, RunKind.SWEEP, "alpha").path
    RunStore.create(tmp_path, RunKind.SWEEP, "beta")
    assert resolve_run("alpha", tmp_path) == a
    assert resolve_run(str(a), tmp_path) == a
    assert len(list_runs(tmp_path)) == 2
    with pytest.raises(StoreError, match="no run 'gamma'"):
        resolve_run("gamma", tmp_path)
    with pytest.raises(StoreError, match="matches 2 runs"):
        resolve_run("2", tmp_path)


def test_open_rejects_a_newer_schema(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(StoreError, match="upgrade tunebench"):
        RunStore.open(tmp_path)


def test_redaction(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnop")
    data = {
        "deployment": {"api_key_env": "MY_KEY", "token": "t0ps3cret"},
        "load": {"data": {"prompt_tokens": 64}},
        "note": "uses hf_abcdefghijklmnop",
    }
    clean = redact(data)
    assert clean["deployment"] == {"api_key_env": "MY_KEY", "token": MASK}
    assert clean["load"]["data"]["prompt_tokens"] == 64
    assert clean["note"] == f"uses {MASK}"
    assert redact_text("Authorization: Bearer abcdef123456789") == f"Authorization: Bearer {MASK}"


def test_secret_engine_args_are_masked_in_lists_and_text():
    from tunebench.redact import secret_values

    args = {"api-key": "k3y-value-123", "max-num-seqs": 8, "enforce-eager": True}
    assert redact(["--max-num-seqs", "8", "--api-key", "k3y-value-123"]) == [
        "--max-num-seqs",
        "8",
        "--api-key",
        MASK,
    ]
    assert secret_values(args) == ["k3y-value-123"]
    log = "non-default args: {'api_key': 'k3y-value-123', 'max_num_seqs': 8}"
    assert "k3y-value-123" not in redact_text(log, secret_values(args))
