"""A sweep with repeats says which repeat each server start is ("[3/4] c1 (repeat 2 of 2)"),
so two lines that read alike are told apart while the sweep runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from tunebench.spec.loading import load_spec
from tunebench.spec.plan import build_plan
from tunebench.sweep.work import plan_work, repeat_of

REPO = Path(__file__).resolve().parents[2]
RECORDED_SPEC = REPO / "tests/specs/pipeline-recorded.yaml"


def _spec_with_repeats(tmp_path: Path, repeats: int) -> Path:
    data = yaml.safe_load(RECORDED_SPEC.read_text())
    data["deployment"]["run"] = str(REPO / "tests/fixtures/grid-cpu")
    data["repeats"] = repeats
    data["load"]["profiles"] = [{"kind": "poisson", "rate": 3, "max_seconds": 10}]
    path = tmp_path / "repeats.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_each_start_names_its_repeat(cli, tmp_path):
    spec = _spec_with_repeats(tmp_path, 2)
    result = cli("sweep", str(spec), "-o", str(tmp_path / "runs"), "--no-report")
    assert result.returncode == 0, result.stderr
    starts = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert starts[0].startswith("[1/4] c1 (repeat 1 of 2): ")
    assert starts[3].startswith("[4/4] c2 (repeat 2 of 2): ")


def test_one_repeat_says_nothing_of_repeats(tmp_path):
    spec = load_spec(_spec_with_repeats(tmp_path, 1))
    work = plan_work(build_plan(spec, tmp_path / "repeats.yaml"))
    assert [repeat_of(item) for item in work] == [None, None]
    two = plan_work(build_plan(load_spec(_spec_with_repeats(tmp_path, 2)), tmp_path / "x"))
    assert [repeat_of(item) for item in two] == [(1, 2), (1, 2), (2, 2), (2, 2)]
