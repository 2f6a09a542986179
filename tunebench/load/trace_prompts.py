"""Token-exact prompts for a replayed trace, in the run's tokenizer (`PromptBuilder`):
every hash id becomes one block of whole-word tokens, the same block wherever the id
appears, so requests with equal leading ids share that prefix token for token, and the
text decodes and re-encodes to the same ids (checked per prompt). trace.py says why."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path
from typing import Any

from tunebench.errors import LoadError
from tunebench.load.trace_formats import FittedSlice

#: Words of the tokenizer used to build prompts: a space and 2-12 ASCII letters, which a
#: byte-level or SentencePiece pre-tokenizer keeps as one piece.
_WORD = re.compile(r" [A-Za-z]{2,12}")
_MIN_WORDS = 64
#: Redraws of a block's first token before two sibling blocks may start alike.
_DISTINCT_TRIES = 32


class PromptBuilder:
    """Token-exact prompts in one tokenizer (a local directory or tokenizer.json)."""

    def __init__(self, tokenizer: str):
        self.name = tokenizer
        self._encode, self._decode, vocab = _load_tokenizer(tokenizer)
        # specials the server adds around every prompt (a BOS here): counted in its lengths
        self.prefix, self.suffix = _specials(self._encode)
        self.words = self._word_pool(vocab)
        if len(self.words) < _MIN_WORDS:
            raise LoadError(
                f"tokenizer {tokenizer}: only {len(self.words)} whole-word tokens to build "
                f"trace prompts from (need {_MIN_WORDS}); use a BPE or SentencePiece tokenizer"
            )

    @property
    def specials(self) -> int:
        return len(self.prefix) + len(self.suffix)

    def _word_pool(self, vocab: dict[str, int]) -> list[int]:
        words = []
        for token_id in sorted(vocab.values()):
            text = self._decode([token_id])
            if _WORD.fullmatch(text) and self._encode(text, False) == [token_id]:
                words.append(token_id)
        return words

    def text(self, content: list[int]) -> str:
        return self._decode(content)

    def exact(self, content: list[int]) -> bool:
        """Does the text of `content` encode to exactly these ids (and the specials)?"""
        return self._encode(self.text(content), True) == [*self.prefix, *content, *self.suffix]

    def contents(self, fitted: FittedSlice, salt: str, seed: int = 42) -> list[list[int]]:
        """Every request's prompt ids without specials: the blocks of its hash ids (a block
        per hash id, the same wherever it appears), then ids of its own; `salt` gives a
        point blocks of its own."""
        blocks: dict[Any, list[int]] = {}
        first_tokens: dict[Any, set[int]] = {}
        size = fitted.block_tokens
        out = []
        for request in fitted.requests:
            length = request.prompt_tokens - self.specials
            ids = list(request.hash_ids) if request.hash_ids is not None else []
            content: list[int] = []
            parent: Any = None
            for number in range(math.ceil(length / size)):
                # past the trace's blocks (no hash ids, rounding): blocks of this request alone
                key: Any = ids[number] if number < len(ids) else ("own", request.index, number)
                if key not in blocks:
                    blocks[key] = self._block(key, parent, size, salt, seed, first_tokens)
                content += blocks[key]
                parent = key
            out.append(content[:length])
        return out

    def _block(
        self, key: Any, parent: Any, size: int, salt: str, seed: int, first: dict[Any, set[int]]
    ) -> list[int]:
        rng = random.Random(f"{seed}|{salt}|{key!r}")
        block = [rng.choice(self.words) for _ in range(size)]
        siblings = first.setdefault(parent, set())
        for _ in range(_DISTINCT_TRIES):
            if block[0] not in siblings:
                break
            block[0] = rng.choice(self.words)
        siblings.add(block[0])
        return block


def _specials(encode) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids a tokenizer adds before and after every text it encodes with specials."""
    empty = encode("", True)
    probe = encode(" hello", False)
    with_specials = encode(" hello", True)
    at = _find(with_specials, probe)
    if at < 0:
        return tuple(empty), ()
    return tuple(with_specials[:at]), tuple(with_specials[at + len(probe) :])


def special_count(tokenizer: str) -> int:
    """How many tokens a server adds to every text prompt in this tokenizer (a BOS): every
    driver fits a trace with room for them (`fit_lengths` min_prompt), so that GuideLLM's
    text prompts and vLLM's token-id prompts of one slice have the same lengths."""
    encode, _, _ = _load_tokenizer(tokenizer)
    prefix, suffix = _specials(encode)
    return len(prefix) + len(suffix)


def _find(haystack: list[int], needle: list[int]) -> int:
    for at in range(len(haystack) - len(needle) + 1):
        if haystack[at : at + len(needle)] == needle:
            return at
    return -1


def _load_tokenizer(name: str):
    """(encode(text, specials) -> ids, decode(ids) -> text, vocab) of a local tokenizer:
    the `tokenizers` library on tokenizer.json (fast to load), else transformers."""
    path = Path(name).expanduser()
    file = path / "tokenizer.json" if path.is_dir() else path
    if file.name == "tokenizer.json" and file.is_file():
        from tokenizers import Tokenizer

        fast = Tokenizer.from_file(str(file))
        return (
            lambda text, specials: fast.encode(text, add_special_tokens=specials).ids,
            lambda ids: fast.decode(ids, skip_special_tokens=True),
            fast.get_vocab(),
        )
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name)
    except Exception as exc:  # noqa: BLE001 - any loading failure is the same finding
        raise LoadError(f"cannot load tokenizer {name} to build trace prompts: {exc}") from None
    return (
        lambda text, specials: tokenizer.encode(text, add_special_tokens=specials),
        lambda ids: tokenizer.decode(ids, skip_special_tokens=True),
        tokenizer.get_vocab(),
    )


def reuse_tokens(sequences: list[list[int]]) -> list[int]:
    """For each prompt (in sending order), the longest prefix it shares with a prompt sent
    before it, counted up to that earlier prompt's length: what a prefix cache that keeps
    everything could hold of it, before rounding to the cache's blocks."""
    seen: set[int] = set()
    out = []
    for tokens in sequences:
        chain, shared, matching = 0, 0, True
        prefixes = []
        for token in tokens:
            chain = hash((chain, token))
            prefixes.append(chain)
            if matching and chain in seen:
                shared += 1
            else:
                matching = False
        out.append(shared)
        seen.update(prefixes)
    return out
