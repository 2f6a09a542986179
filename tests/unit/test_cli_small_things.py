"""Small things a new user notices: `--version`, and counts that read as English ("1
configuration x 1 point", never "1 configurations")."""

from __future__ import annotations

from pathlib import Path

import yaml

from tunebench.version import __version__

REPO = Path(__file__).resolve().parents[2]


def test_version(cli):
    result = cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"tunebench {__version__}"


def test_a_plan_of_one_says_configuration_and_point(cli, tmp_path):
    data = yaml.safe_load((REPO / "tests/specs/pipeline-recorded.yaml").read_text())
    data["deployment"]["run"] = str(REPO / "tests/fixtures/grid-cpu")
    data["server"] = {"args": {"max-num-seqs": 8, "max-num-batched-tokens": 128}}
    data["load"]["profiles"] = [{"kind": "poisson", "rate": 3, "max_seconds": 10}]
    spec = tmp_path / "one.yaml"
    spec.write_text(yaml.safe_dump(data))
    result = cli("sweep", str(spec), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "1 configuration x 1 point" in result.stdout
    assert "configurations x" not in result.stdout and "1 points" not in result.stdout
