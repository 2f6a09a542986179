"""The dry-run's plan table: what each configuration's server will run, whole."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _config_rows(stdout: str) -> str:
    return stdout.split("load points")[0]


def test_helm_variants_show_the_args_their_release_runs(cli):
    """`speculative-config: null` drops the values file's flag: the engine args cell of both
    variants was empty, though the release runs the values file's args."""
    result = cli("sweep", str(REPO / "sweeps/openshift-speculative.yaml"), "--dry-run")
    assert result.returncode == 0, result.stderr
    table = _config_rows(result.stdout)
    no_spec, eagle = (line for line in table.splitlines() if "c1: no-spec" in line or "c2:" in line)
    assert "--max-model-len=8192" in no_spec and "--speculative-config" not in no_spec
    assert "--max-model-len=8192" in eagle
    assert '--speculative-config={"method":"eagle3"' in table


def test_models_that_differ_at_their_end_are_shown_whole_at_100_columns(cli):
    spec = REPO / "sweeps/openshift-quantized.yaml"
    result = cli("sweep", str(spec), "--dry-run", env={"COLUMNS": "100"})
    assert result.returncode == 0, result.stderr
    cells = "".join(
        line.split("│")[2].strip()
        for line in _config_rows(result.stdout).splitlines()
        if line.startswith("│")
    )
    assert "granite-3.1-8b-instruct-quantized.w8a8" in cells
    assert "…" not in _config_rows(result.stdout)
