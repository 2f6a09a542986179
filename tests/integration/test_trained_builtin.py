"""The trained builtin model (`builtin:tiny-llama`): its corpus holds out the lm-eval
task's questions, its training script is deterministic, and the shipped weights are the ones
the script recorded and score what it recorded."""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import re

import pytest

from tunebench import builtin_corpus, demo

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)

SHIPPED = demo.SHIPPED_WEIGHTS / "tiny-llama-trained"


def _record() -> dict:
    return json.loads((SHIPPED / "training.json").read_text())


def test_the_corpus_never_asks_a_held_out_sum(tmp_path):
    from tunebench.quality.lmeval import ARITHMETIC, SUBTRACTION, write_arithmetic_task

    task = write_arithmetic_task(tmp_path)
    lines = (task / f"{ARITHMETIC}.jsonl").read_text().splitlines()
    asked = [(json.loads(line)["a"], json.loads(line)["b"]) for line in lines]
    assert asked == builtin_corpus.arithmetic_pairs()  # the corpus holds out what lm-eval asks
    held = builtin_corpus.held_out()
    assert {(min(a, b), max(a, b)) for a, b in asked} <= held
    subtraction = (task / f"{SUBTRACTION}.jsonl").read_text().splitlines()
    for line, (a, b) in zip(subtraction, asked):  # the same pairs, the larger first
        doc = json.loads(line)
        assert (doc["a"], doc["b"], doc["answer"]) == (max(a, b), min(a, b), str(abs(a - b)))
    seen = minus = 0
    for doc in itertools.islice(builtin_corpus.documents(1234), 20000):
        for a, b in re.findall(r"(\d+) (?:plus|\+) (\d+)", doc):
            pair = (min(int(a), int(b)), max(int(a), int(b)))
            assert pair not in held, doc
            seen += 1
        for a, b in re.findall(r"(\d+) minus (\d+)", doc):
            assert (min(int(a), int(b)), max(int(a), int(b))) not in held, doc
            minus += 1
    assert seen > 10000 and minus > 1000  # and the corpus is mostly sums, some differences


def test_training_is_deterministic(tmp_path):
    """Two runs of the script (a tiny configuration, seconds) write the same files."""
    from tunebench import train_builtin

    records = [
        train_builtin.train(tmp_path / name, train_builtin.TINY_TEST_CONFIG, 1, log=lambda _: None)
        for name in ("a", "b")
    ]
    assert records[0]["sha256"] == records[1]["sha256"]
    figures = [
        {k: v for k, v in r["figures"].items() if not k.endswith("seconds")} for r in records
    ]
    assert figures[0] == figures[1]


def test_the_shipped_files_are_the_ones_training_wrote():
    for name, digest in _record()["sha256"].items():
        assert hashlib.sha256((SHIPPED / name).read_bytes()).hexdigest() == digest, name


def test_the_shipped_model_scores_what_training_recorded():
    """The task's 100 held-out questions, greedy: the accuracy training recorded, and far
    above chance (an answer is one of about 200 sums); the draft's and the EAGLE head's
    agreement with the model on held-out corpus windows."""
    import torch

    from tunebench import train_builtin

    torch.set_num_threads(2)
    config, model, draft, eagle, tokenizer = train_builtin.load_shipped(SHIPPED)
    recorded = _record()["figures"]
    figures = train_builtin.evaluate(config, model, draft, eagle, tokenizer)
    assert figures["task_accuracy"] == recorded["task_accuracy"] >= 0.5
    assert figures["validation_accuracy"] == recorded["validation_accuracy"]
    for key in ("draft_top1_agreement", "eagle_top1_agreement"):
        assert figures[key] == pytest.approx(recorded[key], abs=0.002), key


def test_the_builds_hold_the_shipped_weights_in_float32(tmp_path):
    from safetensors.torch import load_file

    built = {
        name: demo.build_demo_model(tmp_path / name, name)
        for name in ("tiny-llama", "tiny-llama-draft", "tiny-llama-eagle")
    }
    model = load_file(built["tiny-llama"] / "model.safetensors")
    shipped = load_file(SHIPPED / "model.safetensors")
    assert model.keys() == shipped.keys()
    assert all(
        model[k].dtype == torch_float32() and (model[k] == shipped[k].float()).all() for k in model
    )
    draft = load_file(built["tiny-llama-draft"] / "model.safetensors")
    assert (draft["model.embed_tokens.weight"] == model["model.embed_tokens.weight"]).all()
    assert not any(k.startswith("model.layers.2.") for k in draft)
    eagle = load_file(built["tiny-llama-eagle"] / "model.safetensors")
    assert "fc.weight" in eagle and not any(".input_layernorm." in k for k in eagle)
    for name, layers in (("tiny-llama-draft", 2), ("tiny-llama-eagle", 1)):
        config = json.loads((built[name] / "config.json").read_text())
        assert config["num_hidden_layers"] == layers
        tokenizer = built[name] / "tokenizer.json"
        assert tokenizer.read_bytes() == (SHIPPED / "tokenizer.json").read_bytes()


def torch_float32():
    import torch

    return torch.float32
