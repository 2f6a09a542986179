"""`tunebench batch` for real: vLLM's offline engine on CPU, structured outputs, shards."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]

RECIPES = REPO / "sweeps/batch-recipes.yaml"


def _run(spec, root, *extra):
    result = run_cli("batch", str(spec), "--output", str(root), *extra, timeout=1200)
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    return result, runs[-1] if runs else None


SHARD_RECORDS = 16  # two shards of 8: enough to lose or repeat a record
RECIPE_RECORDS = 32  # the shipped job on its first records (160 tokens each), eager engines


@pytest.fixture(scope="module")
def recipes(tmp_path_factory):
    """The shipped recipes job (sweeps/batch-recipes.yaml: its dataset, template, schema and
    configurations) with eager engines and the first RECIPE_RECORDS records."""
    root = tmp_path_factory.mktemp("batch")
    spec = yaml.safe_load(RECIPES.read_text())
    spec["dataset"]["path"] = str(REPO / "sweeps" / spec["dataset"]["path"])
    spec["dataset"]["limit"] = RECIPE_RECORDS
    spec["engine_args"]["args"]["enforce-eager"] = True
    spec["quality"] = {"max_tokens": 16}  # answers vs the first configuration (docs/quality.md)
    path = root / "batch-recipes.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result, run = _run(path, root)
    return result, run


def _small_spec(tmp_path, limit: int, **changes) -> str:
    spec = yaml.safe_load(RECIPES.read_text())
    spec["dataset"]["path"] = str(REPO / "sweeps/data/recipes.jsonl")
    spec["dataset"]["limit"] = limit
    # eager: an engine starts in seconds instead of a torch.compile warm-up
    spec["engine_args"] = {
        "args": {"max-model-len": 512, "max-num-seqs": 16, "enforce-eager": True}
    }
    spec.update(changes)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_recipes_end_to_end_with_valid_structured_outputs(recipes):
    result, run = recipes
    assert result.returncode == 0, result.stderr[-3000:]
    spec = yaml.safe_load(RECIPES.read_text())
    schema = spec["structured_output"]["json_schema"]
    ids = [
        json.loads(line)["id"]
        for line in (REPO / "sweeps/data/recipes.jsonl").read_text().splitlines()
    ][:RECIPE_RECORDS]
    rows = read_points(run)
    assert [r["config_label"] for r in rows] == ["max-num-seqs=8", "max-num-seqs=32"]
    for row in rows:
        outputs = [
            json.loads(line)
            for line in (run / f"outputs/{row['config_id']}.jsonl").read_text().splitlines()
        ]
        assert sorted(o["id"] for o in outputs) == sorted(ids)
        for output in outputs:  # every record's output is valid against the schema
            jsonschema.validate(json.loads(output["output"]), schema)
        assert row["valid"] == "True" and float(row["schema_valid_fraction"]) == 1.0
        for phase in ("load_s", "init_s", "generate_s", "write_s"):
            assert float(row[phase]) > 0, (phase, row)
        assert float(row["output_tok_s"]) > 0 and float(row["input_tok_s"]) > 0
        assert float(row["achieved_rps"]) > 0 and int(row["requests_ok"]) == RECIPE_RECORDS
    assert (run / "report.html").exists()
    assert "generate s" in result.stdout and "out tok/s" in result.stdout
    assert "<h2>Batch phases and throughput</h2>" in (run / "report.html").read_text()


def test_two_shards_cover_every_record_once(tmp_path):
    spec = _small_spec(tmp_path, SHARD_RECORDS)
    two, run_two = _run(spec, tmp_path / "two", "--shards", "2", "--no-report")
    assert two.returncode == 0, two.stderr[-3000:]
    ids = [
        json.loads(line)["id"] for line in (run_two / "outputs/c1.jsonl").read_text().splitlines()
    ]
    dataset = [
        json.loads(line)["id"]
        for line in (REPO / "sweeps/data/recipes.jsonl").read_text().splitlines()
    ][:SHARD_RECORDS]
    assert len(ids) == len(set(ids)) == SHARD_RECORDS  # none lost, none twice
    assert set(ids) == set(dataset)  # exactly the records one shard would have run
    manifest = json.loads((run_two / "manifest.json").read_text())
    assert manifest["shards"] == 2 and len(manifest["configs"][0]["shards"]) == 2


def test_transformers_baseline_engine(tmp_path):
    spec = _small_spec(
        tmp_path,
        16,
        engine="transformers",
        transformers={"batch_size": 8},
        sampling={"temperature": 0, "max_tokens": 16, "ignore_eos": True},
    )
    spec_data = yaml.safe_load(spec.read_text())
    spec_data.pop("structured_output")
    spec_data.pop("engine_args")
    spec.write_text(yaml.safe_dump(spec_data, sort_keys=False))
    result, run = _run(spec, tmp_path / "hf", "--no-report")
    assert result.returncode == 0, result.stderr[-3000:]
    row = read_points(run)[0]
    assert int(row["requests_ok"]) == 16 and float(row["output_tok_s"]) > 0
    outputs = [json.loads(line) for line in (run / "outputs/c1.jsonl").read_text().splitlines()]
    assert all(o["output_tokens"] == 16 for o in outputs)


def test_the_quality_check_runs_in_the_batch_engine_after_the_timed_generation(recipes):
    from tunebench.analysis.quality import quality_table

    result, run = recipes
    assert result.returncode == 0, result.stderr[-3000:]
    table = quality_table(run).set_index("config_id")
    assert table.loc["c1", "verdict"] == "reference"
    # max-num-seqs does not change what one request at a time computes
    assert table.loc["c2", "verdict"] == "pass" and table.loc["c2", "exact_match"] == 1.0
    assert table.loc["c2", "top1_agreement"] == 1.0 and table.loc["c2", "prompts"] == 16
    manifest = json.loads((run / "manifest.json").read_text())
    for config in manifest["configs"]:
        assert config["quality"]["prompts"] == 16 and config["quality"]["seconds"] > 0
    assert (run / "quality" / "summary.csv").is_file()
