"""Greedy completions with their top logprobs, one prompt at a time, from a running server.

One request at a time keeps the batch the same for every configuration (batch composition
changes floating-point results on some backends), so two runs of one configuration agree
token for token and a difference means the configuration.
"""

from __future__ import annotations

import json
import ssl
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import httpx

from tunebench.errors import LoadError
from tunebench.quality.lmeval import LmEvalRequest

TOKEN_PREFIX = "token_id:"


@dataclass
class Completion:
    index: int
    prompt: str
    tokens: list[int] = field(default_factory=list)
    # per generated position: [[token id, logprob], ...] best first
    top: list[list[list[float]]] = field(default_factory=list)
    # per prompt position from the second on: the model's top-k for it given the text
    # before it (teacher-forced: the same context for every configuration)
    prompt_top: list[list[list[float]]] = field(default_factory=list)
    finish_reason: str | None = None
    error: str | None = None


@dataclass
class Collected:
    completions: list[Completion]
    seconds: float


def _token_id(text: str) -> int:
    if not text.startswith(TOKEN_PREFIX):
        raise ValueError(f"expected {TOKEN_PREFIX}N, got {text!r}")
    return int(text[len(TOKEN_PREFIX) :])


def _completion(index: int, prompt: str, body: dict[str, Any], top_k: int) -> Completion:
    choice = body["choices"][0]
    logprobs = choice.get("logprobs") or {}
    tokens = [_token_id(t) for t in logprobs.get("tokens") or []]
    top = []
    for position in logprobs.get("top_logprobs") or []:
        ranked = sorted((position or {}).items(), key=lambda kv: -kv[1])
        top.append([[_token_id(t), float(lp)] for t, lp in ranked])
    prompt_top = []
    for position in choice.get("prompt_logprobs") or []:
        if not position:
            continue  # the first token has no context
        ranked = sorted(
            (
                (int(t), float(v["logprob"]), int(v.get("rank") or 0))
                for t, v in position.items()
                if isinstance(v, dict)
            ),
            key=lambda item: -item[1],
        )
        prompt_top.append([[t, lp] for t, lp, rank in ranked if rank and rank <= top_k])
    finish = choice.get("finish_reason")
    return Completion(index, prompt, tokens, top, prompt_top, finish)


def collect(
    base_url: str,
    model: str,
    prompts: list[str],
    max_tokens: int,
    top_logprobs: int,
    headers: dict[str, str] | None = None,
    verify: bool | ssl.SSLContext = True,
    timeout_s: float = 120.0,
    max_seconds: float | None = None,
    on_completion: Callable[[list[Completion]], None] | None = None,
) -> Collected:
    """Every prompt once, greedy (temperature 0), `max_tokens` tokens with `top_logprobs`
    alternatives per generated position and per prompt position. A request that fails is
    recorded on its completion; when the first request fails the server is not answering
    at all and LoadError is raised. Past `max_seconds` the remaining prompts are recorded
    as not asked. `on_completion` gets the list so far after every prompt (to store it)."""
    began = time.monotonic()
    out: list[Completion] = []
    with httpx.Client(headers=headers or {}, verify=verify, timeout=timeout_s) as client:
        for index, prompt in enumerate(prompts):
            if max_seconds is not None and time.monotonic() - began > max_seconds:
                out.append(Completion(index, prompt, error=f"not asked: over {max_seconds:g} s"))
                continue
            request = {
                "model": model,
                "prompt": prompt,
                "max_tokens": max_tokens,
                "temperature": 0,
                "logprobs": top_logprobs,
                "prompt_logprobs": top_logprobs,
                "return_tokens_as_token_ids": True,
                "seed": 0,
            }
            try:
                response = client.post(f"{base_url}/v1/completions", json=request)
                response.raise_for_status()
                out.append(_completion(index, prompt, response.json(), top_logprobs))
            except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
                detail = _detail(exc)
                if index == 0:
                    raise LoadError(f"quality check: the first request failed: {detail}") from None
                out.append(Completion(index, prompt, error=detail))
            if on_completion is not None:
                on_completion(out)
    return Collected(out, time.monotonic() - began)


def _detail(exc: Exception) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}: {exc.response.text[:200]}"
    return f"{type(exc).__name__}: {exc}"[:300]


def write_completions(path: Path, completions: list[Completion]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(asdict(c)) + "\n" for c in completions))
    tmp.replace(path)


def read_completions(path: Path) -> list[Completion]:
    return [Completion(**json.loads(line)) for line in path.read_text().splitlines() if line]


@dataclass(frozen=True)
class QualityRequest:
    """What the runner asks of every configuration's server (from the spec's `quality`)."""

    prompts: list[str]
    max_tokens: int = 32
    top_logprobs: int = 5
    max_seconds: float = 300.0
    lm_eval: LmEvalRequest | None = None
    # a local tokenizer for a configuration (lm-eval loads it); None: lm-eval not asked
    tokenizer: Callable[[Any], str] | None = None
