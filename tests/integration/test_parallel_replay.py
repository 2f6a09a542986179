"""A sweep with deployment.parallel writes the same run as the sweep measured in turn: the
same files and points in the same order (a replay deployment: deterministic points), plus
the fair-comparison note that `show` and the report print."""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.integration.test_merge import _files, _rows, _spec


def test_a_parallel_sweep_writes_the_run_a_sweep_in_turn_writes(tmp_path):
    spec = _spec(tmp_path)
    parallel = tmp_path / "parallel.yaml"
    parallel.write_text(spec.read_text().replace("{kind: replay,", "{kind: replay, parallel: 3,"))
    in_turn = run_cli("sweep", str(spec), "-o", str(tmp_path / "turn"), "--no-report")
    assert in_turn.returncode == 0, in_turn.stderr
    at_once = run_cli("sweep", str(parallel), "-o", str(tmp_path / "once"))
    assert at_once.returncode == 0, at_once.stderr
    assert "measuring up to 3 configurations at a time" in at_once.stderr
    assert "c3: [3/3] fast: starting" in at_once.stderr
    turn = next((tmp_path / "turn").iterdir())
    once = next((tmp_path / "once").iterdir())
    assert _files(once) == _files(turn)
    assert _rows(once) == _rows(turn)  # the plan's order, whichever finished first
    manifest = json.loads((once / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert [c["config_id"] for c in manifest["configs"]] == ["c1", "c2", "c3"]
    assert manifest["parallel"]["configurations"] == 3
    assert "shared the cluster or host" in manifest["parallel"]["note"]
    shown = run_cli("show", str(once))
    assert shown.returncode == 0 and "fair comparison:" in shown.stdout
    assert "fair comparison:" in (once / "report.html").read_text()
