"""A spec file given to the wrong command is named as what it is, with the command that reads
it: a batch file to `sweep` or `tune`, a sweep file to `batch` (not a list of missing keys)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebench.batch.spec import BatchSpec
from tunebench.spec.file_kind import BATCH_ONLY, SWEEP_ONLY
from tunebench.spec.models import SweepSpec

REPO = Path(__file__).resolve().parents[2]


def test_the_key_sets_follow_both_models():
    sweep, batch = set(SweepSpec.model_fields), set(BatchSpec.model_fields)
    assert SWEEP_ONLY == sweep - batch
    assert BATCH_ONLY == batch - sweep


@pytest.mark.parametrize(
    "command, spec, says",
    [
        ("sweep", "sweeps/batch-recipes.yaml", "a batch file (it has dataset, engine, "),
        ("tune", "sweeps/batch-recipes.yaml", "run it with `tunebench batch "),
        ("batch", "sweeps/cpu-demo.yaml", "run it with `tunebench sweep sweeps/cpu-demo.yaml`"),
        ("batch", "sweeps/tune-cpu.yaml", "run it with `tunebench tune sweeps/tune-cpu.yaml`"),
    ],
)
def test_a_file_for_another_command_names_that_command(cli, command, spec, says):
    result = cli(command, spec, "--dry-run")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "required key" not in lines[0], lines


def test_a_sweep_file_with_a_mistake_still_gets_its_own_error(cli, tmp_path):
    spec = tmp_path / "half.yaml"
    spec.write_text("name: half\nmodel: m\nload: {}\n")  # a sweep file, deployment missing
    result = cli("sweep", str(spec), "--dry-run")
    assert result.returncode == 2 and "deployment: required key is missing" in result.stderr
