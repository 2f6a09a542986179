"""Batch mode pieces that need no engine: spec, dataset, prompts, shards, sbatch, schema."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, spec_file
from tunebench.batch.dataset import PromptRenderer, Record, load_records
from tunebench.batch.run import render_prompts, schema_failures, shard_slices
from tunebench.batch.spec import load_batch_spec
from tunebench.batch.worker import ray_processor_parts
from tunebench.errors import SpecError

RECIPES = REPO / "sweeps/batch-recipes.yaml"


def test_shipped_recipes_spec_renders_a_prompt_per_record():
    spec, _ = load_batch_spec(RECIPES)
    prompts = render_prompts(spec, RECIPES)
    assert len(prompts) == 200 and len({p["id"] for p in prompts}) == 200
    first = prompts[0]["prompt"]
    assert first.startswith("Recipe: Scones") and "1. Preheat the oven to 325 degrees F." in first
    assert "Extract temperature and duration values for each step" in first


@pytest.mark.parametrize("shards", [1, 2, 3, 7])
def test_shards_cover_every_record_once(shards):
    slices = shard_slices(200, shards)
    covered = [i for start, end in slices for i in range(start, end)]
    assert covered == list(range(200))
    sizes = [end - start for start, end in slices]
    assert max(sizes) - min(sizes) <= 1
    assert shard_slices(1, 4) == [(0, 1)]  # never an empty shard


def test_dataset_formats_and_errors(tmp_path):
    (tmp_path / "a.csv").write_text("id,text\n1,hello\n2,world\n")
    assert [r.fields["text"] for r in load_records(tmp_path / "a.csv", "id")] == ["hello", "world"]
    (tmp_path / "b.json").write_text(json.dumps({"recipes": [{"id": 1}, {"id": 2}, {"id": 3}]}))
    assert len(load_records(tmp_path / "b.json", "id", limit=2)) == 2
    (tmp_path / "c.jsonl").write_text('{"id": 1}\n{"id": 1}\n')
    with pytest.raises(SpecError, match="id '1' appears twice"):
        load_records(tmp_path / "c.jsonl", "id")
    (tmp_path / "d.jsonl").write_text('{"name": "x"}\n')
    with pytest.raises(SpecError, match="record 1 has no 'id'"):
        load_records(tmp_path / "d.jsonl", "id")
    (tmp_path / "e.jsonl").write_text('{"id": 1}\nnot json\n')
    with pytest.raises(SpecError, match="line 2: not JSON"):
        load_records(tmp_path / "e.jsonl", "id")


def test_prompt_names_the_record_and_the_missing_field():
    renderer = PromptRenderer("{{ title }}: {{ steps | join(', ') }}", "spec.yaml: prompt.template")
    assert renderer.render(Record("r1", {"title": "Pie", "steps": ["a", "b"]})) == "Pie: a, b"
    with pytest.raises(SpecError, match=r"record 'r2': 'steps' is undefined"):
        renderer.render(Record("r2", {"title": "Pie"}))


def test_bad_batch_spec_is_one_line(tmp_path, cli):
    bad = spec_file(tmp_path, RECIPES.read_text(), "engine: vllm", "engine: tgi", "bad.yaml")
    result = cli("batch", str(bad), "--slurm", str(tmp_path / "x.sbatch"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert (
        "engine: 'tgi' is not allowed; use one of 'vllm', 'transformers' or 'ray'" in result.stderr
    )


def test_sbatch_script(tmp_path, cli):
    spec = tmp_path / "job.yaml"
    spec.write_text(
        RECIPES.read_text().replace(
            "path: data/recipes.jsonl", f"path: {REPO}/sweeps/data/recipes.jsonl"
        )
        + "slurm: {partition: gpu, gpus_per_node: 4, memory: 128G, time: '02:00:00', "
        "container_image: 'nvcr.io/nvidia/vllm:latest', setup: ['module load cuda']}\n"
    )
    target = tmp_path / "job.sbatch"
    result = cli("batch", str(spec), "--slurm", str(target))
    assert result.returncode == 0, result.stderr
    text = target.read_text()
    for line in (
        "#SBATCH --partition=gpu",
        "#SBATCH --gres=gpu:4",
        "#SBATCH --mem=128G",
        "#SBATCH --time=02:00:00",
        "module load cuda",
        "--container-image=nvcr.io/nvidia/vllm:latest",
        f"tunebench batch {spec} --shards 4",
    ):
        assert line in text, line
    assert text.startswith("#!/bin/bash")


def test_schema_failures():
    schema = {"type": "object", "properties": {"steps": {"type": "array"}}, "required": ["steps"]}
    outputs = [
        {"id": "a", "output": '{"steps": []}'},
        {"id": "b", "output": '{"steps": 3}'},
        {"id": "c", "output": '{"steps": [1'},
    ]
    assert schema_failures(outputs, schema) == ["b", "c"]


def test_ray_processor_config():
    job = {
        "sampling": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 32, "seed": 0},
        "structured_output": {"json_schema": {"type": "object"}, "choice": None},
        "mode": "chat",
        "system": "be brief",
        "model": "/m",
        "engine_args": {"max-num-seqs": 8},
        "ray": {"concurrency": 2, "batch_size": 16, "address": None},
    }
    config, pre, post = ray_processor_parts(job)
    assert config == {
        "model_source": "/m",
        "engine_kwargs": {
            "max_num_seqs": 8,
            "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
        },
        "concurrency": 2,
        "batch_size": 16,
        "chat_template_stage": True,
        "log_engine_metrics": False,
    }
    row = pre({"id": "r1", "prompt": "hi"})
    assert row["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert row["sampling_params"]["structured_outputs"] == {
        "json": {"type": "object"},
        "disable_any_whitespace": True,
    }
    assert row["sampling_params"]["ignore_eos"] is False
    assert (
        post(
            {"id": "r1", "generated_text": "ok", "num_input_tokens": 5, "num_generated_tokens": 2}
        )["output_tokens"]
        == 2
    )


def test_offline_vs_online_throughput_ratio(tmp_path, cli):
    from tunebench.store.manifest import RunKind
    from tunebench.store.run import RunStore
    from tunebench.testing import make_synthetic_run

    sweep = make_synthetic_run(tmp_path, name="serving", configs=2)  # max-num-seqs 2 and 4
    batch = RunStore.create(tmp_path, RunKind.BATCH, "offline")
    batch.update_config(
        "c1", label="max-num-seqs=4", model="synthetic", args={"max-num-seqs": 4}, status="complete"
    )
    batch.add_point(
        {
            "run_id": batch.run_id,
            "config_id": "c1",
            "config_label": "max-num-seqs=4",
            "point_id": "batch",
            "load_kind": "batch",
            "target": 200,
            "output_tok_s": 1000.0,
        }
    )
    result = cli("compare", batch.run_id, sweep.run_id, "--root", str(tmp_path), "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    best = max(float(r["output_tok_s"]) for r in sweep.rows if r["config_id"] == "c2")
    assert rows == [
        {
            "config": "max-num-seqs=4",
            "sweep_config": "max-num-seqs=4",
            "offline_tok_s": 1000.0,
            "online_tok_s": pytest.approx(best),
            "online_point": rows[0]["online_point"],
            "ratio": pytest.approx(best / 1000.0),
        }
    ]
    table = cli("compare", batch.run_id, sweep.run_id, "--root", str(tmp_path))
    assert "serving overhead" in table.stdout


def test_an_unexpected_error_leaves_a_batch_run_failed_not_interrupted(tmp_path, monkeypatch):
    """Before the shared status lifecycle, this batch run ended "interrupted"."""
    import tunebench.batch.run as batch_run

    def boom(*args, **kwargs):
        raise RuntimeError("an unexpected error")

    monkeypatch.setattr(batch_run, "_run_config", boom)
    spec_path = REPO / "sweeps" / "batch-recipes.yaml"
    spec, data = load_batch_spec(spec_path)
    with pytest.raises(RuntimeError):
        batch_run.run_batch(spec, spec_path, data, tmp_path)
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["kind"] == "batch" and manifest["status"] == "failed"
    assert manifest["attempts"][0]["status"] == "failed"


def test_the_shipped_recipes_are_what_their_generator_writes(capsys, monkeypatch):
    from tunebench.batch import recipes

    shipped = (REPO / "sweeps" / "data" / "recipes.jsonl").read_text()
    monkeypatch.setattr("sys.argv", ["recipes", str(len(shipped.splitlines()))])
    recipes.main()
    assert capsys.readouterr().out == shipped


def test_engine_args_become_the_keywords_vllm_llm_takes():
    from tunebench.batch.worker import llm_kwargs

    kwargs = llm_kwargs(
        {
            "max-num-seqs": 8,
            "no-enable-prefix-caching": True,
            "speculative-config": '{"method": "ngram", "num_speculative_tokens": 3}',
            "compilation-config": {"level": 0},
            "served-model-name": "{not json",
        }
    )
    assert kwargs == {
        "max_num_seqs": 8,
        "enable_prefix_caching": False,
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 3},
        "compilation_config": {"level": 0},
        "served_model_name": "{not json",
    }


def test_sbatch_shards_fit_the_gpus_one_engine_holds(tmp_path, cli):
    spec = tmp_path / "job.yaml"
    text = RECIPES.read_text().replace(
        "path: data/recipes.jsonl", f"path: {REPO}/sweeps/data/recipes.jsonl"
    )
    text = text.replace(
        "args: {max-model-len: 512}", "args: {max-model-len: 512, tensor-parallel-size: 2}"
    )
    assert "tensor-parallel-size: 2" in text
    spec.write_text(text + "slurm: {partition: gpu, gpus_per_node: 8}\n")
    target = tmp_path / "job.sbatch"
    result = cli("batch", str(spec), "--slurm", str(target))
    assert result.returncode == 0, result.stderr
    assert f"tunebench batch {spec} --shards 4" in target.read_text()  # 8 GPUs / TP=2


def test_each_shard_gets_its_own_gpus_from_the_visible_ones():
    from tunebench.batch.run import shard_gpus

    assert shard_gpus(["4", "5", "6", "7"], 2, 2) == [["4", "5"], ["6", "7"]]
    assert shard_gpus(["0"], 1, 1) == [["0"]]
    with pytest.raises(
        ValueError, match="2 shard\\(s\\) x 2 GPU\\(s\\) each .* need 4 GPUs, 3 visible"
    ):
        shard_gpus(["0", "1", "2"], 2, 2)
