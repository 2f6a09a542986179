"""A sweep split with `sweep --only` and joined with `tunebench merge` has the layout and
the points of the same sweep run in one go (a recorded deployment: deterministic points)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, spec_file
from tunebench.store.run import read_points
from tunebench.testing import make_rate_grid_run

GRID = {
    "defaults": ({}, 4.0),
    "slow": ({"max-num-seqs": 2}, 3.0),
    "fast": ({"max-num-seqs": 8}, 9.0),
}
# columns that record when a point ran, or in which run: not what it measured
WHEN = {"run_id", "start_time", "end_time"}


def _spec(tmp_path: Path) -> Path:
    recorded = make_rate_grid_run(tmp_path / "recorded", GRID).path
    spec = tmp_path / "split.yaml"
    spec.write_text(f"""
name: split
model: builtin:tiny-llama-random
deployment: {{kind: recorded, run: {recorded}}}
server:
  variants:
    - {{name: defaults}}
    - {{name: slow, args: {{max-num-seqs: 2}}}}
    - {{name: fast, args: {{max-num-seqs: 8}}}}
load:
  data: {{kind: synthetic, prompt_tokens: 64, output_tokens: 32}}
  profiles:
    - {{kind: poisson, rate: [1, 2, 4], max_seconds: 10}}
slo: {{ttft_ms: {{p95: 250}}}}
""")
    return spec


def _files(run: Path) -> set[str]:
    skip = {"manifest.json", "report.html", ".lock"}
    return {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()} - skip


def _rows(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in WHEN} for r in read_points(run)]


def test_a_split_sweep_merged_equals_the_sweep_run_in_one_go(tmp_path):
    spec = _spec(tmp_path)
    whole = run_cli("sweep", str(spec), "-o", str(tmp_path / "whole"), "--no-report")
    assert whole.returncode == 0, whole.stderr
    for part, ids in (("a", "c2"), ("b", "defaults,fast")):  # ids or labels, any order
        result = run_cli(
            "sweep", str(spec), "--only", ids, "-o", str(tmp_path / part), "--no-report"
        )
        assert result.returncode == 0, result.stderr
    part_a = next((tmp_path / "a").iterdir())
    assert json.loads((part_a / "manifest.json").read_text())["only"] == ["c2"]
    assert {r["config_id"] for r in read_points(part_a)} == {"c2"}
    parts = [str(next((tmp_path / p).iterdir())) for p in ("b", "a")]
    merged = run_cli("merge", *parts, "-o", str(tmp_path / "merged"), "--no-report")
    assert merged.returncode == 0, merged.stderr
    assert "merged 2 runs: c1, c2, c3" in merged.stdout
    one_go = next((tmp_path / "whole").iterdir())
    joined = next((tmp_path / "merged").iterdir())
    assert _files(joined) == _files(one_go)
    assert _rows(joined) == _rows(one_go)
    assert {r["run_id"] for r in read_points(joined)} == {joined.name}
    whole_manifest = json.loads((one_go / "manifest.json").read_text())
    manifest = json.loads((joined / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["hosts_differ"] is False
    assert manifest["merged_from"] == [Path(p).name for p in parts]
    for mine, theirs in zip(manifest["configs"], whole_manifest["configs"], strict=True):
        for key in ("config_id", "label", "args", "varied", "status", "effective"):
            assert mine[key] == theirs[key], key
        assert mine["measured_in"] in manifest["merged_from"] and mine["host"]
    # the merged run reads like any other
    shown = run_cli("show", str(joined), "--format", "json")
    assert shown.returncode == 0 and len(json.loads(shown.stdout)) == 9


def test_parts_that_overlap_or_differ_are_refused_in_one_line(tmp_path):
    spec = _spec(tmp_path)
    for part, ids in (("a", "c1,c2"), ("b", "c2")):
        assert (
            run_cli("sweep", str(spec), "--only", ids, "-o", str(tmp_path / part)).returncode == 0
        )
    a, b = (str(next((tmp_path / p).iterdir())) for p in ("a", "b"))
    overlap = run_cli("merge", a, b, "-o", str(tmp_path / "m"))
    assert overlap.returncode == 2
    assert "c2 was measured in" in overlap.stderr and len(overlap.stderr.strip().splitlines()) == 1
    alone = run_cli("merge", a, "-o", str(tmp_path / "m"))
    assert alone.returncode == 2 and "two or more runs" in alone.stderr
    unknown = run_cli("sweep", str(spec), "--only", "c9", "--dry-run")
    assert (
        unknown.returncode == 2 and "--only c9: not a configuration of the plan" in unknown.stderr
    )
    other = spec_file(tmp_path, spec.read_text(), "rate: [1, 2, 4]", "rate: [1, 2]", "other.yaml")
    assert run_cli("sweep", str(other), "--only", "c3", "-o", str(tmp_path / "c")).returncode == 0
    differ = run_cli("merge", a, str(next((tmp_path / "c").iterdir())), "-o", str(tmp_path / "m"))
    assert differ.returncode == 2 and "a different spec" in differ.stderr


def test_dry_run_ids_json_prints_the_plan_ids_for_a_matrix(tmp_path):
    spec = _spec(tmp_path)
    every = run_cli("sweep", str(spec), "--dry-run", "--ids-json")
    assert every.returncode == 0, every.stderr
    assert every.stdout == '["c1","c2","c3"]\n'  # nothing else: a Tekton array result as is
    part = run_cli("sweep", str(spec), "--dry-run", "--ids-json", "--only", "fast,c1")
    assert part.returncode == 0 and json.loads(part.stdout) == ["c1", "c3"]  # plan order
    alone = run_cli("sweep", str(spec), "--ids-json")
    assert alone.returncode == 2 and "--ids-json prints the plan" in alone.stderr


def test_a_configuration_no_part_holds_is_named_and_the_merge_fails(tmp_path):
    """An array task or TaskRun that never made its run: the merge plans the spec again,
    records the missing configuration as failed and exits 1 instead of saying complete."""
    spec = _spec(tmp_path)
    for part, ids in (("a", "c1"), ("b", "c3")):
        result = run_cli(
            "sweep", str(spec), "--only", ids, "-o", str(tmp_path / part), "--no-report"
        )
        assert result.returncode == 0, result.stderr
    parts = [str(next((tmp_path / p).iterdir())) for p in ("a", "b")]
    merged = run_cli("merge", *parts, "-o", str(tmp_path / "merged"), "--no-report")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "c2: no part measured it" in merged.stdout
    run = next((tmp_path / "merged").iterdir())
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert [(c["config_id"], c["status"]) for c in manifest["configs"]] == [
        ("c1", "complete"),
        ("c2", "failed"),
        ("c3", "complete"),
    ]
    assert {r["config_id"] for r in read_points(run)} == {"c1", "c3"}
