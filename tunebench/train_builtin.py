"""Train the builtin `tiny-llama` model, its draft model and its EAGLE head.

    python -m tunebench.train_builtin --output DIR [--threads 2]

Deterministic on a given CPU and thread count (seeded corpus, seeded initialisation, fixed
step counts; no data loader workers): the corpus is `tunebench.builtin_corpus`, generated,
nothing downloaded. Three phases:

1. a byte-level BPE tokenizer trained on the corpus, digits split one by one;
2. the model (a Llama of the embedded model's size) trained on the corpus as a language
   model; its weights are rounded to bfloat16, the form shipped;
3. the draft model (the model's first `draft_layers` layers, distilled from the model) and
   the EAGLE head (vLLM's EAGLE-1 layout: `fc` over the next token's embedding and the
   model's last hidden state, one decoder layer without input norm, the model's embeddings
   and head shared) trained together against the frozen model's hidden states and
   next-token distributions.

The output directory holds what the repository ships (`tunebench/builtin_weights/`):
`config.json`, the tokenizer, `model.safetensors`, `draft.safetensors` (the draft's own
layers and norm), `eagle.safetensors`, and `training.json` (the configuration, the
evaluation figures, each file's sha256). `tunebench.demo` builds the servable checkpoints
from them.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tunebench import builtin_corpus

SHIPPED_FILES = (
    "config.json",
    "tokenizer.json",
    "model.safetensors",
    "draft.safetensors",
    "eagle.safetensors",
)


@dataclass(frozen=True)
class TrainConfig:
    vocab_size: int = 2048  # at most: the BPE trainer stops when the corpus has no more merges
    # a fifth of the random-weight model's parameters (its decode step on vLLM-CPU is mostly
    # fixed cost, not arithmetic), so it trains on 2 CPU cores in minutes; every linear
    # layer's sizes are multiples of 128, so INT4 groups of 128 fit all of them
    hidden_size: int = 128
    intermediate_size: int = 384
    layers: int = 4
    heads: int = 4  # head size 32 (vLLM-CPU's smallest)
    max_positions: int = 4096
    seq_len: int = 64
    batch: int = 16
    steps: int = 6000
    lr: float = 3e-3
    warmup: int = 200
    draft_layers: int = 2
    distill_steps: int = 1200
    distill_lr: float = 1e-3
    tokenizer_docs: int = 20000
    seed: int = 1234


TINY_TEST_CONFIG = TrainConfig(
    hidden_size=32,
    intermediate_size=64,
    layers=2,
    heads=2,
    seq_len=32,
    batch=4,
    steps=3,
    warmup=1,
    draft_layers=1,
    distill_steps=2,
    tokenizer_docs=500,
)


def train_tokenizer(config: TrainConfig):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from tunebench.demo import finish_tokenizer

    special = ["<unk>", "<s>", "</s>", "<pad>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    docs = itertools.islice(builtin_corpus.documents(config.seed + 1), config.tokenizer_docs)
    tokenizer.train_from_iterator(docs, trainer=trainer)
    return finish_tokenizer(tokenizer, config.max_positions)


def batches(tokenizer, config: TrainConfig, seed: int) -> Iterator[Any]:
    """Documents, each after `<s>`, packed into [batch, seq_len] windows (no end token: the
    model never learns to stop, so a server's answers run to their max_tokens)."""
    import torch

    bos = tokenizer.bos_token_id
    stream: list[int] = []
    docs = builtin_corpus.documents(seed)
    need = config.batch * config.seq_len
    while True:
        while len(stream) < need:
            stream.append(bos)
            stream.extend(tokenizer(next(docs), add_special_tokens=False)["input_ids"])
        chunk, stream = stream[:need], stream[need:]
        yield torch.tensor(chunk, dtype=torch.long).view(config.batch, config.seq_len)


def _schedule(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def _model_config(config: TrainConfig, tokenizer):
    from transformers import LlamaConfig

    model_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.heads,
        max_position_embeddings=config.max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        dtype="float32",
    )
    model_config._attn_implementation = "sdpa"
    return model_config


def train_model(config: TrainConfig, tokenizer, log=print):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(config.seed)
    model = LlamaForCausalLM(_model_config(config, tokenizer))
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(0.9, 0.98), weight_decay=0.01
    )
    model.train()
    data = batches(tokenizer, config, config.seed)
    began = time.monotonic()
    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = config.lr * _schedule(step, config.steps, config.warmup)
        ids = next(data)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % 100 == 0 or step + 1 == config.steps:
            log(
                f"model step {step + 1}/{config.steps} loss {loss.item():.4f} "
                f"{time.monotonic() - began:.0f} s"
            )
        if (step + 1) % 1000 == 0 and step + 1 < config.steps:
            accuracy = arithmetic_accuracy(model, tokenizer, builtin_corpus.validation_pairs()[:50])
            log(f"  validation accuracy {accuracy:.2f}")
            model.train()
    model.eval()
    _round_to_bf16(model)
    return model


def _round_to_bf16(module) -> None:
    """The shipped form: every weight as bfloat16 (computed in float32 when loaded)."""
    import torch

    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).to(torch.float32))


def greedy_answer(model, tokenizer, prompt: str, max_new_tokens: int = 8) -> str:
    """The continuation lm-eval's task reads: greedy, cut at a newline or `Question:`."""
    import torch

    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]  # with <s>, as vLLM adds it
    out = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(input_ids=ids).logits[0, -1]
            token = int(logits.argmax())
            out.append(token)
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
            text = tokenizer.decode(out)
            if "\n" in text or "Question:" in text:
                break
    text = tokenizer.decode(out)
    return text.split("\n")[0].split("Question:")[0]


def arithmetic_accuracy(model, tokenizer, pairs) -> float:
    """exact_match as the task scores it: the continuation equals ` {a + b}`."""
    model.eval()
    right = sum(
        greedy_answer(model, tokenizer, builtin_corpus.task_prompt(a, b)) == f" {a + b}"
        for a, b in pairs
    )
    return right / len(pairs)


class EagleHead:
    """vLLM's EAGLE-1 head for Llama (`EagleLlamaForCausalLM`), in torch: the model's
    embeddings and head are shared and frozen, so only `fc` and the layer train."""

    def __init__(self, model, init_from_layer: int):
        import copy

        import torch
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        hidden = model.config.hidden_size
        self.fc = torch.nn.Linear(2 * hidden, hidden, bias=False)
        with torch.no_grad():
            self.fc.weight.copy_(torch.cat([torch.zeros(hidden, hidden), torch.eye(hidden)], 1))
        self.layer = copy.deepcopy(model.model.layers[init_from_layer])
        for parameter in self.layer.parameters():
            parameter.requires_grad_(True)
        self.layer.input_layernorm = torch.nn.Identity()
        self.rotary = LlamaRotaryEmbedding(model.config)
        self.model = model

    def parameters(self):
        return list(self.fc.parameters()) + list(self.layer.parameters())

    def forward(self, next_ids, hidden):
        """Outputs for (the next token, the model's hidden state at this position)."""
        import torch

        embeds = self.model.model.embed_tokens(next_ids)
        x = self.fc(torch.cat([embeds, hidden], dim=-1))
        positions = torch.arange(x.shape[1]).unsqueeze(0)
        out = self.layer(x, position_ids=positions, position_embeddings=self.rotary(x, positions))
        return out[0] if isinstance(out, tuple) else out

    def state_dict(self) -> dict:
        weights = {"fc.weight": self.fc.weight}
        for key, tensor in self.layer.state_dict().items():
            weights[f"layers.0.{key}"] = tensor
        return weights


def make_draft(model, layers: int):
    import copy

    draft = copy.deepcopy(model)
    draft.model.layers = draft.model.layers[:layers]
    draft.config.num_hidden_layers = layers
    for parameter in draft.parameters():
        parameter.requires_grad_(True)
    draft.model.embed_tokens.weight.requires_grad_(False)  # shared with the model, tied head
    return draft


def _kl(teacher_logits, student_logits):
    import torch.nn.functional as F

    vocab = teacher_logits.shape[-1]
    return F.kl_div(
        F.log_softmax(student_logits.reshape(-1, vocab), -1),
        F.log_softmax(teacher_logits.reshape(-1, vocab), -1),
        log_target=True,
        reduction="batchmean",
    )


def train_speculators(config: TrainConfig, model, tokenizer, log=print):
    """The draft and the EAGLE head, distilled from the frozen model on the same corpus."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(config.seed + 2)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    draft = make_draft(model, config.draft_layers)
    eagle = EagleHead(model, config.layers - 1)
    draft_params = [p for p in draft.parameters() if p.requires_grad]
    optimizers = [
        torch.optim.AdamW(draft_params, lr=config.distill_lr, weight_decay=0.0),
        torch.optim.AdamW(eagle.parameters(), lr=config.distill_lr, weight_decay=0.0),
    ]
    draft.train()
    data = batches(tokenizer, config, config.seed + 3)
    began = time.monotonic()
    for step in range(config.distill_steps):
        scale = _schedule(step, config.distill_steps, max(1, config.warmup // 2))
        for optimizer in optimizers:
            for group in optimizer.param_groups:
                group["lr"] = config.distill_lr * scale
        ids = next(data)
        with torch.no_grad():
            hidden = model.model(input_ids=ids).last_hidden_state  # after the final norm
            teacher = model.lm_head(hidden)
        draft_loss = _kl(teacher, draft(input_ids=ids).logits)
        # EAGLE: at position t, the token t+1 and the model's hidden state at t predict
        # token t+2 (the model's distribution at t+1) and the hidden state there
        out = eagle.forward(ids[:, 1:], hidden[:, :-1])
        # the hidden state's own scale (its RMS) sets the regression's: the final norm's
        # weights make it large, and unscaled the regression drowns the KL
        rms = hidden.detach().pow(2).mean().sqrt()
        eagle_loss = _kl(teacher[:, 1:], model.lm_head(out)) + F.smooth_l1_loss(
            out / rms, hidden[:, 1:] / rms
        )
        (draft_loss + eagle_loss).backward()
        torch.nn.utils.clip_grad_norm_(draft_params, 1.0)
        torch.nn.utils.clip_grad_norm_(eagle.parameters(), 1.0)
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if (step + 1) % 50 == 0 or step + 1 == config.distill_steps:
            log(
                f"speculators step {step + 1}/{config.distill_steps} draft KL "
                f"{draft_loss.item():.4f} eagle loss {eagle_loss.item():.4f} "
                f"{time.monotonic() - began:.0f} s"
            )
    draft.eval()
    _round_to_bf16(draft)
    with torch.no_grad():
        for parameter in eagle.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).to(torch.float32))
    return draft, eagle


def agreement(config: TrainConfig, model, draft, eagle, tokenizer, windows: int = 8) -> dict:
    """Top-1 agreement with the model on held-out corpus windows (teacher-forced): the
    draft's next token, and the EAGLE head's token after next."""
    import torch

    data = batches(tokenizer, config, config.seed + 4)
    same_draft = same_eagle = total_draft = total_eagle = 0
    with torch.no_grad():
        for ids in itertools.islice(data, windows):
            hidden = model.model(input_ids=ids).last_hidden_state
            target = model.lm_head(hidden).argmax(-1)
            same_draft += int((draft(input_ids=ids).logits.argmax(-1) == target).sum())
            total_draft += target.numel()
            guess = model.lm_head(eagle.forward(ids[:, 1:], hidden[:, :-1])).argmax(-1)
            same_eagle += int((guess == target[:, 1:]).sum())
            total_eagle += guess.numel()
    return {
        "draft_top1_agreement": round(same_draft / total_draft, 4),
        "eagle_top1_agreement": round(same_eagle / total_eagle, 4),
    }


def evaluate(config: TrainConfig, model, draft, eagle, tokenizer) -> dict:
    figures = {
        "task_accuracy": arithmetic_accuracy(model, tokenizer, builtin_corpus.arithmetic_pairs()),
        "task_items": builtin_corpus.TASK_ITEMS,
        "validation_accuracy": arithmetic_accuracy(
            model, tokenizer, builtin_corpus.validation_pairs()
        ),
    }
    figures.update(agreement(config, model, draft, eagle, tokenizer))
    return figures


def save(output: Path, config: TrainConfig, model, draft, eagle, tokenizer, extra: dict) -> dict:
    import torch
    from safetensors.torch import save_file

    output.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(output)
    # named as a saved model names it: vLLM derives the EAGLE head's class from it
    model.config.architectures = ["LlamaForCausalLM"]
    model.config.save_pretrained(output)

    def bf16(weights: dict) -> dict:
        return {k: v.detach().to(torch.bfloat16).contiguous() for k, v in weights.items()}

    state = model.state_dict()
    state.pop("lm_head.weight", None)  # tied to the embeddings
    save_file(bf16(state), output / "model.safetensors")
    mine = {
        k: v
        for k, v in draft.state_dict().items()
        if k.startswith(("model.layers.", "model.norm."))
    }
    save_file(bf16(mine), output / "draft.safetensors")
    save_file(bf16(eagle.state_dict()), output / "eagle.safetensors")
    record = {
        "config": asdict(config),
        "figures": extra,
        "sha256": {name: _sha256(output / name) for name in SHIPPED_FILES},
    }
    (output / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def load_shipped(directory: Path):
    """(config, model, draft, EAGLE head, tokenizer) from a directory `save` wrote, in float32."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    record = json.loads((directory / "training.json").read_text())
    config = TrainConfig(**record["config"])
    tokenizer = PreTrainedTokenizerFast.from_pretrained(directory)
    model_config = LlamaConfig.from_pretrained(directory)
    model_config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(model_config)
    weights = {k: v.float() for k, v in load_file(directory / "model.safetensors").items()}
    model.load_state_dict(weights, strict=False)  # the head is tied to the embeddings
    model.tie_weights()
    model.eval()
    draft = make_draft(model, config.draft_layers)
    draft_weights = {k: v.float() for k, v in load_file(directory / "draft.safetensors").items()}
    missing = draft.load_state_dict(draft_weights, strict=False).missing_keys
    assert set(missing) <= {"model.embed_tokens.weight", "lm_head.weight"}, missing
    draft.eval()
    eagle = EagleHead(model, config.layers - 1)
    eagle_weights = load_file(directory / "eagle.safetensors")
    with torch.no_grad():
        eagle.fc.weight.copy_(eagle_weights.pop("fc.weight").float())
        eagle.layer.load_state_dict(
            {k.removeprefix("layers.0."): v.float() for k, v in eagle_weights.items()}
        )
    return config, model, draft, eagle, tokenizer


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def train(
    output: Path, config: TrainConfig, threads: int = 2, log=print, model_from: Path | None = None
) -> dict:
    """All three phases; with `model_from` (a directory this wrote with the same model
    configuration) phases 1-2 are read from it instead, which gives the same model (its
    weights were rounded to bfloat16 before the speculators trained): only the speculators
    are trained again."""
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    began = time.monotonic()
    if model_from is not None:
        shipped, model, _, _, tokenizer = load_shipped(model_from)
        if replace(shipped, distill_steps=config.distill_steps) != config:
            raise ValueError(f"{model_from} was trained with another configuration: {shipped}")
        previous = json.loads((model_from / "training.json").read_text())["figures"]
        model_seconds = float(previous["model_seconds"])
        log(f"model: read from {model_from}")
    else:
        tokenizer = train_tokenizer(config)
        log(f"tokenizer: {len(tokenizer)} tokens")
        model = train_model(config, tokenizer, log)
        model_seconds = time.monotonic() - began
    draft, eagle = train_speculators(config, model, tokenizer, log)
    figures = evaluate(config, model, draft, eagle, tokenizer)
    figures.update(
        threads=threads,
        torch=torch.__version__,
        model_seconds=round(model_seconds),
        # with model_from: the model's time when it was trained, and this run's
        total_seconds=round(time.monotonic() - began + (model_seconds if model_from else 0)),
    )
    log(json.dumps(figures))
    return save(output, config, model, draft, eagle, tokenizer, figures)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, help="model steps (default: TrainConfig's)")
    parser.add_argument("--distill-steps", type=int)
    parser.add_argument(
        "--model-from", type=Path, help="a finished output: train only the speculators again"
    )
    args = parser.parse_args(argv)
    config = TrainConfig()
    if args.steps:
        config = replace(config, steps=args.steps)
    if args.distill_steps:
        config = replace(config, distill_steps=args.distill_steps)

    def log(line: str) -> None:
        print(line, flush=True)

    train(args.output, config, args.threads, log=log, model_from=args.model_from)


if __name__ == "__main__":
    main()
