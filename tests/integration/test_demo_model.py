"""`tunebench demo-model`: deterministic, offline, cached, loadable."""

from __future__ import annotations

import hashlib
import importlib.util

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_is_deterministic_and_cached(tmp_path, cli):
    first, second = tmp_path / "a", tmp_path / "b"
    out = cli("demo-model", "--output", str(first), env={"HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"built: {first}"
    assert cli("demo-model", "--output", str(second)).returncode == 0
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _digest(first / name) == _digest(second / name), name
    again = cli("demo-model", "--output", str(first))
    assert again.stdout.strip() == f"already built: {first}"

    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(first)
    tokenizer = AutoTokenizer.from_pretrained(first)
    assert config.model_type == "llama" and config.num_hidden_layers == 4
    ids = tokenizer("The server batches requests.")["input_ids"]
    assert 3 <= len(ids) < 20 and tokenizer.eos_token == "</s>"
    assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)


def test_refuses_a_foreign_directory(tmp_path, cli):
    (tmp_path / "notes.txt").write_text("mine")
    result = cli("demo-model", "--output", str(tmp_path))
    assert result.returncode == 1
    assert "exists and is not a tunebench model" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_two_builds_at_once_both_end_with_the_one_model(tmp_path):
    import subprocess
    import sys

    target = tmp_path / "model"
    builds = [
        subprocess.Popen(
            [sys.executable, "-m", "tunebench.cli.main", "demo-model", "--output", str(target)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = [b.communicate(timeout=300) + (b.returncode,) for b in builds]
    assert all(code == 0 for _, _, code in outcomes), outcomes
    assert (target / "model.safetensors").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".building-")]


def test_the_draft_is_the_first_layer_of_the_model_with_its_tokenizer(tmp_path, cli):
    from safetensors.torch import load_file

    from tunebench import demo

    draft = tmp_path / "draft"
    out = cli("demo-model", "--name", "tiny-llama-random-draft", "--output", str(draft))
    assert out.returncode == 0, out.stderr
    target = demo.build_demo_model(name="tiny-llama-random")
    assert _digest(draft / "tokenizer.json") == _digest(target / "tokenizer.json")
    config = (draft / "config.json").read_text()
    assert '"num_hidden_layers": 1' in config
    mine, theirs = load_file(draft / "model.safetensors"), load_file(target / "model.safetensors")
    assert not any(key.startswith("model.layers.1.") for key in mine)
    for key, tensor in mine.items():  # every weight it has is the model's own
        assert (tensor == theirs[key]).all(), key
    bad = cli("demo-model", "--name", "tiny-gpt")
    assert bad.returncode == 2 and "not a builtin model" in bad.stderr


def test_a_builtin_draft_reaches_vllm_as_its_built_path(monkeypatch):
    from tunebench import demo
    from tunebench.deploy.local import with_builtin_drafts
    from tunebench.spec.plan import ServerConfig

    monkeypatch.setattr(demo, "resolve_builtin", lambda m: "/models/" + m.removeprefix("builtin:"))
    speculative = {"method": "draft_model", "model": "builtin:tiny-llama-random-draft"}
    config = ServerConfig("c1", "x", "m", None, {"speculative-config": speculative})
    args = with_builtin_drafts(config).command_args()
    assert '"model":"/models/tiny-llama-random-draft"' in " ".join(args)
    hub = ServerConfig("c1", "x", "m", None, {"speculative-config": {"model": "org/draft"}})
    assert with_builtin_drafts(hub) is hub


@pytest.mark.parametrize(
    ("name", "stored", "max_error"),
    [
        # INT8 per channel: half a step of max|w|/127; INT4 in groups: half of max|w|/7;
        # FP8 e4m3: 3 mantissa bits, a relative error of at most 2^-4
        ("tiny-llama-random-w8a8", "weight", 0.5 / 127),
        ("tiny-llama-random-w4a16", "weight_packed", 0.5 / 7),
        ("tiny-llama-random-fp8", "weight", 1 / 16),
    ],
)
def test_a_quantized_builtin_holds_the_models_weights_quantized(
    tmp_path, cli, name, stored, max_error
):
    """Each quantized linear layer dequantizes to the full-precision model's weight within
    the scheme's rounding step (the truth: the base model's own weights)."""
    import json

    import torch
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from safetensors.torch import load_file

    from tunebench import demo

    out = cli("demo-model", "--name", name, "--output", str(tmp_path / name))
    assert out.returncode == 0, out.stderr
    path = tmp_path / name
    quant = json.loads((path / "config.json").read_text())["quantization_config"]
    assert quant["quant_method"] == "compressed-tensors"
    tensors = load_file(path / "model.safetensors")
    assert f"model.layers.0.self_attn.q_proj.{stored}" in tensors
    assert tensors["lm_head.weight"].dtype.is_floating_point  # the head stays in full precision

    base = load_file(demo.build_demo_model(name="tiny-llama-random") / "model.safetensors")
    weights = {}
    for key in base:
        if not key.endswith("proj.weight"):
            continue
        prefix = key.removesuffix("weight")
        if prefix + "weight_scale" not in tensors:
            assert "down_proj" in key and name.endswith("w4a16"), key  # left unquantized
            continue
        scale = tensors[prefix + "weight_scale"].float()
        if name.endswith("w4a16"):
            rows, columns = tensors[prefix + "weight_shape"].tolist()
            values = unpack_from_int32(tensors[prefix + stored], 4, torch.Size([rows, columns]))
            groups = values.float().reshape(rows, scale.shape[1], -1) * scale.unsqueeze(2)
            weights[key] = groups.reshape(rows, columns)
        else:
            weights[key] = tensors[prefix + stored].float() * scale
    assert len(weights) == (24 if name.endswith("w4a16") else 28)
    for key, weight in weights.items():
        truth = base[key].float()
        error = (weight.float() - truth).abs().max().item()
        scale = truth.abs().max().item()
        assert error <= max_error * scale * 1.01, (key, error, scale)


def test_the_eagle_head_passes_the_models_last_hidden_state_through(tmp_path, cli):
    """fc = [0 | I] over (next token's embedding, hidden state), the model's last decoder
    layer with its output projections silenced and no input norm: the layout vLLM's
    EagleLlamaForCausalLM loads (truth: the model's own weights)."""
    import json

    import torch
    from safetensors.torch import load_file

    from tunebench import demo

    head = tmp_path / "eagle"
    out = cli("demo-model", "--name", "tiny-llama-random-eagle", "--output", str(head))
    assert out.returncode == 0, out.stderr
    target = demo.build_demo_model(name="tiny-llama-random")
    mine, theirs = load_file(head / "model.safetensors"), load_file(target / "model.safetensors")
    hidden = json.loads((target / "config.json").read_text())["hidden_size"]
    assert json.loads((head / "config.json").read_text())["num_hidden_layers"] == 1
    fc = mine.pop("fc.weight")
    assert fc.shape == (hidden, 2 * hidden)
    state = torch.randn(hidden)
    assert torch.equal(fc @ torch.cat([torch.randn(hidden), state]), state)
    assert not any("embed_tokens" in k or "lm_head" in k or "input_layernorm" in k for k in mine)
    for key, tensor in mine.items():
        source = theirs[key.replace("layers.0.", "model.layers.3.")]
        silent = key.endswith(("o_proj.weight", "down_proj.weight"))
        assert torch.equal(tensor, torch.zeros_like(source) if silent else source), key
    assert _digest(head / "tokenizer.json") == _digest(target / "tokenizer.json")
