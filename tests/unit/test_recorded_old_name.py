"""The recorded-run deployment is `kind: recorded`; `kind: replay`, its old name from before
"replay" came to mean only a trace played as load, still loads, and runs stored under it
are still read: a sweep file, a stored run's manifest and a stored point's warning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.conftest import FIXTURES, REPO
from tunebench.kinds import KINDS, kind_of
from tunebench.points import client_limit
from tunebench.spec.deployments import SETTINGS_BY_KIND, RecordedSettings
from tunebench.spec.loading import load_spec
from tunebench.spec.models import SweepSpec
from tunebench.store.manifest import Manifest
from tunebench.store.run import RunStore
from tunebench.testing import make_synthetic_run

SPEC = REPO / "tests/specs/pipeline-recorded.yaml"


def _spec_with(tmp_path: Path, deployment: dict, name: str = "old-name.yaml") -> Path:
    data = yaml.safe_load(SPEC.read_text())
    data["deployment"] = deployment
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_sweep_file_with_the_old_kind_replay_loads_as_the_recorded_deployment(tmp_path):
    run = str(FIXTURES / "grid-cpu")
    old = load_spec(_spec_with(tmp_path, {"kind": "replay", "run": run, "noisy": False}))
    new = load_spec(_spec_with(tmp_path, {"kind": "recorded", "run": run}, "new.yaml"))
    for spec in (old, new):
        assert isinstance(spec.deployment, RecordedSettings)
        assert spec.deployment.kind == "recorded" and spec.deployment.run == run
        assert kind_of(spec) is KINDS["recorded"] and kind_of(spec).plays_recorded_run
    assert old.deployment == new.deployment


def test_the_old_name_keeps_every_setting_and_its_checks(tmp_path):
    run = str(FIXTURES / "grid-cpu-repeats")
    deployment = {"kind": "replay", "run": run, "noisy": True, "seed": 3, "time_scale": 0.5}
    spec = load_spec(_spec_with(tmp_path, deployment))
    assert spec.deployment.noisy and spec.deployment.seed == 3
    assert spec.deployment.time_scale == 0.5 and spec.deployment.kind == "recorded"
    assert KINDS["recorded"].noisy(spec.deployment)


def test_a_sweep_on_the_old_name_runs_and_records_the_current_one(tmp_path, cli):
    spec = _spec_with(tmp_path, {"kind": "replay", "run": str(FIXTURES / "grid-cpu")})
    result = cli("sweep", str(spec), "-o", str(tmp_path / "runs"), "--no-report")
    assert result.returncode == 0, result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["deployment_kind"] == "recorded"
    assert manifest["spec"]["deployment"]["kind"] == "replay"  # the spec as it was written
    assert len(RunStore.open(run).rows) == 4  # 2 configurations x 2 rates


def test_the_schema_and_the_errors_name_recorded_not_replay():
    assert "recorded" in SETTINGS_BY_KIND and "replay" not in SETTINGS_BY_KIND
    assert set(KINDS) == set(SETTINGS_BY_KIND)
    schema = SweepSpec.model_json_schema()
    recorded = schema["$defs"]["RecordedSettings"]["properties"]["kind"]
    assert recorded.get("const", recorded.get("enum")) in ("recorded", ["recorded"])
    deployment = json.dumps(schema["properties"]["deployment"])
    assert "RecordedSettings" in deployment and "Replay" not in deployment
    mapping = schema["properties"]["deployment"].get("discriminator", {}).get("mapping", {})
    assert "replay" not in mapping and ("recorded" in mapping or not mapping)


def test_an_unknown_deployment_kind_lists_recorded(tmp_path):
    from tunebench.errors import SpecError

    path = _spec_with(tmp_path, {"kind": "bogus"})
    try:
        load_spec(path)
    except SpecError as exc:
        message = str(exc)
    else:
        raise AssertionError("kind bogus loaded")
    assert "'recorded'" in message and "'replay'" not in message, message


def test_a_stored_run_that_says_deployment_kind_replay_is_read_as_recorded(tmp_path, cli):
    store = make_synthetic_run(tmp_path, "old-run", configs=1, streams=(1, 2))
    data = json.loads(store.layout.manifest.read_text())
    data["deployment_kind"] = "replay"
    store.layout.manifest.write_text(json.dumps(data))
    assert Manifest.read(store.path).deployment_kind == "recorded"
    assert RunStore.open(store.path).manifest.deployment_kind == "recorded"
    shown = cli("show", str(store.path))
    assert shown.returncode == 0, shown.stderr
    for kind in ("local", "endpoint", "helm", "batch-vllm", "import", None):
        assert Manifest.from_data({**data, "deployment_kind": kind}, tmp_path).deployment_kind == (
            kind
        )


def test_a_point_stored_beyond_the_recording_under_the_old_warning_is_still_client_limited():
    for warning in ("recorded_extrapolated", "replay_extrapolated"):
        row = {"load_kind": "poisson", "target": 9.0, "client_warnings": f"root_late;{warning}"}
        verdict = client_limit.verdict(row)
        assert verdict["client_limited"], warning
        assert "beyond the highest recorded rate" in verdict["client_limited_reason"]
    assert client_limit.RECORDED_BEYOND == "recorded_extrapolated"


def test_the_docs_call_it_recorded_and_say_the_old_name_still_loads():
    sweep_files = (REPO / "docs/sweep-files.md").read_text()
    assert "### `recorded`: a recorded run played back" in sweep_files
    assert "deployment: {kind: recorded, run:" in sweep_files
    assert "`kind: replay` is the old name and still loads." in sweep_files
    assert "kind: local | endpoint | recorded | helm" in sweep_files
    assert "`tunebench/recorded/` holds it" in sweep_files
    for doc in ("sweep-files.md", "tuning.md", "architecture.md", "run-format.md"):
        text = (REPO / "docs" / doc).read_text()
        assert "{kind: replay, run:" not in text, doc
        # every package a doc names is one that exists (the old name's is gone)
        for package in re.findall(r"(?<![\w./])tunebench/([a-z_]+)/", text):
            assert (REPO / "tunebench" / package / "__init__.py").is_file(), (doc, package)
    architecture = (REPO / "docs/architecture.md").read_text()
    assert "`recorded/`: a recorded run as a model of a server" in architecture
