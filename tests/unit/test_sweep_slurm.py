"""The scripts of `tunebench sweep SPEC --slurm PATH` (run for real on Slurm by
tests/integration/test_slurm_sweep_array.py)."""

from __future__ import annotations

import pytest

from tunebench.errors import UsageError
from tunebench.spec.loading import validate_spec
from tunebench.sweep.slurm import write_sweep_array


def _spec(tmp_path, slurm=None):
    data = {
        "name": "lat",
        "model": "org/model",
        "deployment": {"kind": "local"},
        "server": {"matrix": {"max-num-seqs": [8, 64]}},
        "load": {
            "data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8},
            "profiles": [{"kind": "concurrent", "streams": 1, "max_seconds": 5}],
        },
        **({"slurm": slurm} if slurm else {}),
    }
    return validate_spec(data, tmp_path / "lat.yaml")


def test_each_task_asks_for_the_specs_node_and_runs_one_configuration(tmp_path):
    spec = _spec(
        tmp_path,
        {"partition": "gpu", "gpus_per_node": 2, "container_image": "nvcr.io/x/vllm:1"},
    )
    scripts = write_sweep_array(
        spec, tmp_path / "lat.yaml", ["c1", "c2"], tmp_path / "lat.sbatch", tmp_path / "out"
    )
    array = scripts.array.read_text()
    for line in (
        "#SBATCH --partition=gpu",
        "#SBATCH --array=0-1",
        "#SBATCH --gres=gpu:2",
        "ids=(c1 c2)",
        "srun --container-image=nvcr.io/x/vllm:1",
    ):
        assert line in array, line
    assert f'--only "$id" --root {tmp_path}/out/parts/lat/"$id" --no-report' in array
    merge = scripts.merge.read_text()
    assert "--gres" not in merge and "--array" not in merge
    assert f'tunebench merge "${{parts[@]}}" --root {tmp_path}/out' in merge
    submit = scripts.submit.read_text()
    assert f'--dependency="afterany:${{array%%;*}}" {scripts.merge}' in submit
    assert all(p.stat().st_mode & 0o111 for p in (scripts.array, scripts.merge, scripts.submit))


def test_one_configuration_needs_no_array(tmp_path):
    with pytest.raises(UsageError, match="one configuration"):
        write_sweep_array(
            _spec(tmp_path), tmp_path / "lat.yaml", ["c1"], tmp_path / "a.sbatch", tmp_path
        )
