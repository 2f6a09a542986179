"""`tunebench export`: a run as vllm bench results that import back to the same numbers, as
llm-d Benchmark Reports that validate against the published schema, and as CSV."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import REPO, run_cli
from tunebench.store.run import read_points
from tunebench.testing import make_synthetic_run

# vendored (README there); the set-up writes the same from the installed inference-perf
BR_SCHEMA = REPO / "tests/fixtures/llmd-br/br_v0_2_1_schema.json"
INSTALLED_SCHEMA = REPO / ".cache/tools/br_v0_2_1_schema.json"
SAME = ("achieved_rps", "output_tok_s", "ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms",
        "e2e_p50_s", "requests_ok", "load_kind", "target")  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_synthetic_run(tmp_path_factory.mktemp("runs"), configs=1, streams=(1, 8),
                              requests_per_point=60)  # fmt: skip


def test_a_run_exported_to_vllm_bench_json_imports_back_to_the_same_numbers(run, tmp_path):
    out = tmp_path / "vb"
    result = run_cli("export", str(run.path), "--format", "vllm-bench", "--dir", str(out))
    assert result.returncode == 0, result.stderr
    files = sorted(out.glob("*.json"))
    assert [f.name for f in files] == ["c1-concurrent-1.json", "c1-concurrent-8.json"]
    original = {r["point_id"]: r for r in read_points(run.path)}
    for file in files:
        back = run_cli("import", str(file), "--name", file.stem, "--root", str(tmp_path / "in"))
        assert back.returncode == 0, back.stderr
    for imported in (tmp_path / "in").iterdir():
        row = read_points(imported)[0]
        source = original[row["point_id"]]
        assert row["load_kind"] == source["load_kind"]
        for column in SAME[:-2]:
            assert float(row[column]) == pytest.approx(float(source[column]), rel=1e-9), column
        assert float(row["target"]) == float(source["target"])


def test_an_exported_benchmark_report_validates_against_the_published_schema(run, tmp_path):
    out = tmp_path / "br"
    result = run_cli("export", str(run.path), "--format", "llmd-br", "--dir", str(out))
    assert result.returncode == 0, result.stderr
    schema = json.loads(BR_SCHEMA.read_text())
    reports = sorted(out.glob("*.br.json"))
    assert len(reports) == 2
    for path in reports:
        report = json.loads(path.read_text())
        jsonschema.Draft202012Validator(schema).validate(report)
        engine = report["scenario"]["stack"][0]
        assert engine["standardized"]["kind"] == "inference_engine"
        assert engine["native"]["args"]["max-num-seqs"] in (1, 2, 4, 8, 16)  # effective args
        latency = report["results"]["request_performance"]["aggregate"]["latency"]
        assert latency["time_to_first_token"]["units"] == "ms"


def test_csv_export_and_an_unknown_format(run, tmp_path):
    result = run_cli("export", str(run.path), "--format", "csv", "--dir", str(tmp_path / "c"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "c/points.csv").read_text() == (Path(run.path) / "points.csv").read_text()
    bad = run_cli("export", str(run.path), "--format", "yaml", "--dir", str(tmp_path / "x"))
    assert bad.returncode == 2 and "use one of llmd-br, vllm-bench, csv" in bad.stderr


@pytest.mark.skipif(
    not INSTALLED_SCHEMA.is_file(),
    reason="the set-up's copy is made by `make test` (scripts/setup-test-deps.sh)",
)
def test_the_vendored_schema_is_the_one_the_published_models_give():
    assert json.loads(INSTALLED_SCHEMA.read_text()) == json.loads(BR_SCHEMA.read_text())
