"""Engine-arg checks that vLLM would only make after a server (or batch engine) started.

A sweep or batch spec writes engine args in three places: the base `args`, each variant's
`args` and the `matrix` lists. vLLM refuses some values only once it parses its command
line or builds its scheduler, minutes into a sweep; these checks name the key at load time:

- JSON args (speculative-config, compilation-config, ...): a mapping or a JSON object string;
- well-known counts (max-num-seqs, max-model-len, ...): numbers in range, not lists or flags;
- contradictions: `X` and `no-X` together, `no-X: false`, a matrix arg that also has a fixed
  value (which the matrix would silently replace), max-num-batched-tokens below
  max-num-seqs, or below max-model-len with chunked prefill off.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

from tunebench.errors import SpecError

#: Args whose vLLM type is a JSON object besides every `*-config` one.
JSON_ARGS = frozenset(
    {
        "hf-overrides",
        "model-class-overrides",
        "limit-mm-per-prompt",
        "media-io-kwargs",
        "mm-processor-kwargs",
    }
)
#: `*-config` args that take text, not JSON.
TEXT_CONFIG_ARGS = frozenset({"generation-config"})
#: Counts vLLM parses with int(); "8k" style values are allowed where vLLM allows them.
POSITIVE_INT_ARGS = frozenset(
    {
        "max-num-seqs",
        "tensor-parallel-size",
        "pipeline-parallel-size",
        "data-parallel-size",
        "block-size",
    }
)
TOKEN_ARGS = frozenset({"max-num-batched-tokens", "max-model-len"})
FRACTION_ARGS = frozenset({"gpu-memory-utilization"})

_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def is_json_arg(name: str) -> bool:
    return name in JSON_ARGS or (name.endswith("-config") and name not in TEXT_CONFIG_ARGS)


def parse_count(value: Any, human: bool = True) -> int | None:
    """A count as vLLM reads it from its command line (512, 512.0, "512"; with `human` also
    "8k" = 8000 and "8K" = 8192), or None if vLLM could not read it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    match = _HUMAN.fullmatch(text) if human else None
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        return int(number) * _BINARY[suffix] if number.isdigit() else None
    return int(text) if re.fullmatch(r"[+-]?\d{1,19}", text) else None


def token_count(value: Any) -> int | None:
    """A positive count (e.g. max-model-len 2048 or "2k"); None for -1/"auto" (vLLM
    chooses) and for anything vLLM could not read."""
    count = parse_count(value)
    return count if count is not None and count > 0 else None


def check_server(server, path, where: str = "server", model_keys: bool = True) -> None:
    """Raise a SpecError naming the first engine arg of `server` (a spec's `Server`) that
    vLLM would refuse; `where` is its key in the file (server, engine_args)."""
    for key, name, value in _all_values(server, where):
        _check_value(path, key, name, value)
    variants: list[tuple[int | None, Any]] = list(enumerate(server.variants)) or [(None, None)]
    for number, variant in variants:
        fixed = dict(server.args)
        origin = {name: f"{where}.args.{name}" for name in server.args}
        if variant is not None:
            fixed.update(variant.args)
            origin.update({n: f"{where}.variants[{number}].args.{n}" for n in variant.args})
            if model_keys:
                for name in ("model", "tokenizer"):
                    if getattr(variant, name) is not None:
                        fixed[name] = getattr(variant, name)
                        origin[name] = f"{where}.variants[{number}].{name}"
        for name in server.matrix:
            if fixed.get(name) is not None:
                raise SpecError(
                    f"{path}: {where}.matrix.{name}: also set in {origin[name]} "
                    f"({_show(fixed[name])}), which the matrix replaces in every configuration; "
                    "remove one of them"
                )
            origin[name] = f"{where}.matrix.{name}"
        _check_negations(path, fixed, server.matrix, origin)
        _check_batched_tokens(path, fixed, server.matrix, origin)


def _all_values(server, where: str) -> Iterator[tuple[str, str, Any]]:
    for name, value in server.args.items():
        yield f"{where}.args.{name}", name, value
    for number, variant in enumerate(server.variants):
        for name, value in variant.args.items():
            yield f"{where}.variants[{number}].args.{name}", name, value
    for name, values in server.matrix.items():
        for number, value in enumerate(values):
            yield f"{where}.matrix.{name}[{number}]", name, value


def _check_value(path, key: str, name: str, value: Any) -> None:
    if value is None:
        return  # vLLM's default
    problem = None
    if is_json_arg(name):
        problem = _json_problem(value, name)
    elif name in POSITIVE_INT_ARGS or name in TOKEN_ARGS:
        problem = _count_problem(name, value)
    elif name in FRACTION_ARGS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            problem = f"{_show(value)} is not allowed; give a fraction in (0, 1], e.g. 0.9"
    elif name.startswith("no-") and value is False:
        problem = f"false would mean --no-{name}; write {name.removeprefix('no-')}: true instead"
    if problem:
        raise SpecError(f"{path}: {key}: {problem}")


def _json_problem(value: Any, name: str) -> str | None:
    if isinstance(value, dict):
        return None
    example = (
        "{method: ngram, num_speculative_tokens: 3}"
        if name == "speculative-config"
        else "{key: value}"
    )
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            return (
                f"not valid JSON ({exc.msg} at character {exc.pos}); write it as a YAML "
                f"mapping, e.g. {example}"
            )
        if isinstance(parsed, dict):
            return None
    return (
        f"{_show(value)} is not allowed; give a mapping (or a JSON object in quotes), "
        f"e.g. {example}"
    )


def _count_problem(name: str, value: Any) -> str | None:
    if name == "max-model-len" and isinstance(value, str) and value.strip().lower() == "auto":
        return None
    if isinstance(value, (bool, dict, list)) or (
        isinstance(value, float) and not value.is_integer()
    ):
        return f"{_show(value)} is not allowed; give a whole number"
    count = parse_count(value, human=name in TOKEN_ARGS)
    if count is None:
        example = "2048 or 8k" if name in TOKEN_ARGS else "8"
        return f"{_show(value)} is not a count; give a whole number such as {example}"
    if name == "max-model-len" and count == -1:
        return None  # vLLM fits the context to memory
    if count <= 0:
        hint = " (or -1 for vLLM to choose)" if name == "max-model-len" else ""
        return f"{_show(value)} is not allowed; give a number greater than 0{hint}"
    return None


def _check_negations(path, fixed: dict, matrix: dict, origin: dict) -> None:
    names = {n for n, v in fixed.items() if v is not None}
    names |= {n for n, values in matrix.items() if any(v is not None for v in values)}
    for name in sorted(names):
        plain = name.removeprefix("no-")
        if name.startswith("no-") and plain in names:
            raise SpecError(
                f"{path}: {origin[name]}: contradicts {origin[plain]}; keep one: "
                f"{plain}: false is the same as {name}: true"
            )


def _check_batched_tokens(path, fixed: dict, matrix: dict, origin: dict) -> None:
    names = ("max-num-batched-tokens", "max-num-seqs", "max-model-len", "enable-chunked-prefill")
    choices = [matrix[n] if n in matrix else [fixed.get(n)] for n in names]
    for batched, seqs, context, chunked in itertools.product(*choices):
        tokens = token_count(batched)
        if tokens is None:
            continue
        seqs_count = token_count(seqs)
        if seqs_count is not None and tokens < seqs_count:
            raise SpecError(
                f"{path}: {origin['max-num-batched-tokens']}: {_show(batched)} is less than "
                f"max-num-seqs {_show(seqs)} ({origin['max-num-seqs']}); vLLM refuses it: raise "
                "max-num-batched-tokens or lower max-num-seqs"
            )
        context_count = token_count(context)
        if chunked is False and context_count is not None and tokens < context_count:
            raise SpecError(
                f"{path}: {origin['max-num-batched-tokens']}: {_show(batched)} is less than "
                f"max-model-len {_show(context)} with enable-chunked-prefill false; vLLM refuses "
                "it: raise max-num-batched-tokens, lower max-model-len or enable chunked prefill"
            )


def _show(value: Any) -> str:
    text = (
        json.dumps(value) if isinstance(value, (dict, list, bool)) or value is None else repr(value)
    )
    return text if len(text) <= 60 else text[:57] + "..."
