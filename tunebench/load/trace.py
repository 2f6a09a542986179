"""Recorded request traces as replayable workloads: read, slice, fit, build the prompts.

A trace row is one real request: when it arrived and how many tokens it sent and received
(Azure LLM inference 2023, Mooncake FAST'25, BurstGPT, or tunebench's own JSONL); Mooncake
rows also list one hash id per 512-token block of the prompt, equal ids meaning an equal
prefix up to and including that block. No trace holds prompt text, so the prompts are built
here, as token ids of the run's tokenizer:

- every hash id becomes one block of tokens, the same block wherever the id appears, so
  requests with equal leading ids share that prefix token for token and a server's prefix
  cache sees exactly the reuse the trace recorded; blocks that follow the same block start
  with different tokens, so a shared prefix ends where the trace says it does;
- the tokens are whole-word tokens (" word") of the tokenizer, which its pre-tokenizer
  splits apart again, so the text decodes and re-encodes to the same ids (checked per
  prompt): a server counts exactly the prompt length asked for;
- the lengths are scaled (and, beyond the context, clamped) to the served model's context;
  the factor is recorded with every point (`trace_length_scale`).

Each replayed point gets its own blocks (a salt per point), so a server that already
served one point's prompts does not find the next point's in its cache.

The builder knows neither load generator: `guidellm.py` writes a workload as a dataset
file GuideLLM's replay profile plays, and reads the per-request evidence back against it;
`timed_trace.py` writes the same slice, fitted alike, as vLLM's `timed_trace` dataset, whose
prompts vLLM builds itself.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tunebench.errors import LoadError
from tunebench.store.files import write_atomic

#: A trace row's fields where the format names them (tunebench's own JSONL takes either).
_PROMPT_KEYS = ("prompt_tokens", "input_length")
_OUTPUT_KEYS = ("output_tokens", "output_length")
#: Words of the tokenizer used to build prompts: a space and 2-12 ASCII letters, which a
#: byte-level or SentencePiece pre-tokenizer keeps as one piece.
_WORD = re.compile(r" [A-Za-z]{2,12}")
_MIN_WORDS = 64
#: Redraws of a block's first token before two sibling blocks may start alike.
_DISTINCT_TRIES = 32


class TraceFormatError(ValueError):
    """A trace file that cannot be read: the message names the file, the line and a fix."""


@dataclass(frozen=True)
class TraceRequest:
    time: float  # seconds: absolute in a read trace, from the slice's start once sliced
    prompt_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None = None
    line: int = 0  # where it was read, for messages


# -- reading ----------------------------------------------------------------------------


def guess_format(path: Path) -> str:
    """azure | burstgpt (CSV, by header) | mooncake | jsonl (JSON lines, by first record)."""
    if path.suffix.lower() == ".csv":
        header = _first_line(path)
        if "ContextTokens" in header:
            return "azure"
        if "Request tokens" in header:
            return "burstgpt"
        raise TraceFormatError(
            f"{path}:1: a CSV trace needs the Azure header (TIMESTAMP,ContextTokens,"
            "GeneratedTokens) or BurstGPT's (Timestamp,...,Request tokens,Response tokens); "
            "found " + repr(header[:80]) + " (or set load.data.format)"
        )
    for number, line in enumerate(_lines(path), 1):
        record = _json_record(path, number, line)
        if "hash_ids" in record and "input_length" in record:
            return "mooncake"
        return "jsonl"
    raise TraceFormatError(f"{path}: the trace holds no request; cut one with rows in it")


def read_trace(path: Path, trace_format: str | None = None) -> list[TraceRequest]:
    """Every request of the file, in arrival order (equal times keep the file's order)."""
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such trace file; check load.data.path")
    trace_format = trace_format or guess_format(path)
    reader = {
        "azure": _read_azure,
        "burstgpt": _read_burstgpt,
        "mooncake": _read_mooncake,
        "jsonl": _read_jsonl,
    }[trace_format]
    requests = list(reader(path))
    if not requests:
        raise TraceFormatError(f"{path}: the trace holds no request; cut one with rows in it")
    return sorted(requests, key=lambda r: r.time)


def _first_line(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.readline().strip()


def _lines(path: Path) -> Iterator[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield line
    except UnicodeDecodeError:
        raise TraceFormatError(f"{path}: not UTF-8 text; a trace is CSV or JSON lines") from None


def _json_record(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise TraceFormatError(
            f"{path}:{number}: not JSON ({exc.msg}); write one object a line"
        ) from None
    if not isinstance(record, dict):
        raise TraceFormatError(f"{path}:{number}: a JSON object per line, not {record!r:.40}")
    return record


def _count(path: Path, number: int, name: str, value: Any) -> int:
    try:
        count = int(value) if not isinstance(value, bool) else -1
        if isinstance(value, float) and not value.is_integer():
            count = -1
    except (TypeError, ValueError):
        count = -1
    if count < 0:
        raise TraceFormatError(
            f"{path}:{number}: {name} {value!r:.40} is not a token count (a whole number >= 0)"
        )
    return count


def _seconds(path: Path, number: int, name: str, value: Any, unit: float = 1.0) -> float:
    try:
        seconds = float(value) * unit
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds):
        raise TraceFormatError(f"{path}:{number}: {name} {value!r:.40} is not a time in seconds")
    return seconds


def _csv_rows(path: Path, needed: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in needed if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceFormatError(
                    f"{path}:1: the header lacks {', '.join(missing)}; "
                    "check load.data.format or the file"
                )
            for row in reader:
                yield reader.line_num, row
    except UnicodeDecodeError:
        raise TraceFormatError(f"{path}: not UTF-8 text; a trace is CSV or JSON lines") from None


def _azure_time(path: Path, number: int, text: str | None) -> float:
    # "2023-11-16 18:15:46.6805900": seven fractional digits, which datetime does not take
    whole, _, fraction = (text or "").strip().partition(".")
    try:
        moment = datetime.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
        micro = int((fraction + "000000")[:6]) if fraction else 0
    except ValueError:
        raise TraceFormatError(
            f"{path}:{number}: TIMESTAMP {text!r:.40} is not YYYY-MM-DD HH:MM:SS[.fraction]"
        ) from None
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp() + micro / 1e6


def _read_azure(path: Path) -> Iterator[TraceRequest]:
    for number, row in _csv_rows(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        yield TraceRequest(
            _azure_time(path, number, row["TIMESTAMP"]),
            _count(path, number, "ContextTokens", row["ContextTokens"]),
            _count(path, number, "GeneratedTokens", row["GeneratedTokens"]),
            line=number,
        )


def _read_burstgpt(path: Path) -> Iterator[TraceRequest]:
    for number, row in _csv_rows(path, ("Timestamp", "Request tokens", "Response tokens")):
        yield TraceRequest(
            _seconds(path, number, "Timestamp", row["Timestamp"]),
            _count(path, number, "Request tokens", row["Request tokens"]),
            _count(path, number, "Response tokens", row["Response tokens"]),
            line=number,
        )


def _hash_ids(path: Path, number: int, value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise TraceFormatError(f"{path}:{number}: hash_ids must be a list of whole numbers")
    return tuple(value)


def _pick(path: Path, number: int, record: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in record:
            return key, record[key]
    raise TraceFormatError(f"{path}:{number}: the record has no {' or '.join(keys)}")


def _read_mooncake(path: Path) -> Iterator[TraceRequest]:
    # Mooncake's timestamps are milliseconds from the trace's start
    for number, line in enumerate(_lines(path), 1):
        record = _json_record(path, number, line)
        for key in ("timestamp", "input_length", "output_length"):
            if key not in record:
                raise TraceFormatError(f"{path}:{number}: the record has no {key}")
        yield TraceRequest(
            _seconds(path, number, "timestamp", record["timestamp"], unit=1e-3),
            _count(path, number, "input_length", record["input_length"]),
            _count(path, number, "output_length", record["output_length"]),
            _hash_ids(path, number, record.get("hash_ids")),
            line=number,
        )


def _read_jsonl(path: Path) -> Iterator[TraceRequest]:
    # tunebench's own: timestamp in seconds, lengths under either name, optional hash_ids
    for number, line in enumerate(_lines(path), 1):
        record = _json_record(path, number, line)
        if "timestamp" not in record:
            raise TraceFormatError(f"{path}:{number}: the record has no timestamp (seconds)")
        prompt_key, prompt = _pick(path, number, record, _PROMPT_KEYS)
        output_key, output = _pick(path, number, record, _OUTPUT_KEYS)
        yield TraceRequest(
            _seconds(path, number, "timestamp", record["timestamp"]),
            _count(path, number, prompt_key, prompt),
            _count(path, number, output_key, output),
            _hash_ids(path, number, record.get("hash_ids")),
            line=number,
        )


# -- slicing and fitting ----------------------------------------------------------------


def slice_trace(
    requests: list[TraceRequest],
    start: float = 0.0,
    count: int | None = None,
    seconds: float | None = None,
    path: Path | str = "trace",
) -> list[TraceRequest]:
    """The requests from `start` seconds after the trace's first one: the next `count`
    requests, or those within `seconds`, or all; times from the slice's start."""
    origin = requests[0].time + start
    chosen = [r for r in requests if r.time >= origin]
    if seconds is not None:
        chosen = [r for r in chosen if r.time < origin + seconds]
    if count is not None:
        chosen = chosen[:count]
    if not chosen:
        span = requests[-1].time - requests[0].time
        raise TraceFormatError(
            f"{path}: the slice (start {start:g} s) holds no request; the trace spans "
            f"{span:.0f} s: lower load.data.start or widen the slice"
        )
    return [
        TraceRequest(r.time - origin, r.prompt_tokens, r.output_tokens, r.hash_ids, r.line)
        for r in chosen
    ]


@dataclass(frozen=True)
class FittedRequest:
    """One request as it will be sent: lengths in the server's tokens (specials included)."""

    index: int  # in the slice
    time: float  # seconds from the slice's start
    prompt_tokens: int
    output_tokens: int
    trace_prompt_tokens: int  # as recorded
    trace_output_tokens: int
    hash_ids: tuple[int, ...] | None
    clamped: bool = False


@dataclass(frozen=True)
class FittedSlice:
    requests: list[FittedRequest]
    scale: float
    clamped: int  # requests shortened to the context after scaling
    block_tokens: int  # tokens per hash id after scaling

    @property
    def span_s(self) -> float:
        return self.requests[-1].time if self.requests else 0.0


def auto_scale(requests: list[TraceRequest], context: int) -> float:
    """The largest factor <= 1 at which every request fits `context` (prompt + output)."""
    longest = max(r.prompt_tokens + r.output_tokens for r in requests)
    return min(1.0, context / longest) if longest else 1.0


def fit_lengths(
    requests: list[TraceRequest],
    context: int,
    scale: float | str = "auto",
    block_tokens: int = 512,
    min_prompt: int = 1,
) -> FittedSlice:
    """Scale every length by `scale` (auto: `auto_scale`), at least `min_prompt` prompt and 1
    output token; a request still longer than `context` has its output cut to a quarter of
    the context at most, then its prompt to what is left (counted as clamped)."""
    factor = auto_scale(requests, context) if scale == "auto" else float(scale)
    if context < min_prompt + 1:
        raise TraceFormatError(
            f"the context ({context} tokens) cannot hold a prompt of {min_prompt} tokens and "
            "one output token; raise max-model-len or load.data.context"
        )
    fitted, clamped = [], 0
    for index, request in enumerate(requests):
        prompt = max(min_prompt, round(request.prompt_tokens * factor))
        output = max(1, round(request.output_tokens * factor))
        over = prompt + output > context
        if over:
            output = min(output, max(1, context // 4))
            prompt = max(min_prompt, min(prompt, context - output))
            clamped += 1
        fitted.append(
            FittedRequest(
                index,
                request.time,
                prompt,
                output,
                request.prompt_tokens,
                request.output_tokens,
                request.hash_ids,
                over,
            )
        )
    return FittedSlice(fitted, factor, clamped, max(1, round(block_tokens * factor)))


# -- prompts ----------------------------------------------------------------------------


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


# -- a point's workload -----------------------------------------------------------------


@dataclass
class Workload:
    """One replay point's requests as sent: the schedule, the lengths, the prompts."""

    point_id: str
    speed: float
    fitted: FittedSlice
    texts: list[str]
    reuse: list[int]  # per request: tokens an unbounded prefix cache could hold
    inexact: int  # prompts whose text does not re-encode to their ids
    # wall seconds between the replay clock's start and the slice's start (see
    # `build_workload`): every trace time is written shifted by lead_s x speed
    lead_s: float = 0.0
    times: list[float] = field(default_factory=list)  # unique trace seconds, as written

    def __post_init__(self) -> None:
        # GuideLLM reports each request's trace time: unique times name the request
        times, last = [], -math.inf
        shift = self.lead_s * self.speed
        for request in self.fitted.requests:
            stamp = round(max(request.time + shift, last + 1e-6), 6)
            times.append(stamp)
            last = stamp
        self.times = times
        self._by_time = {stamp: index for index, stamp in enumerate(times)}

    def index_of(self, trace_time: float | None) -> int | None:
        if trace_time is None:
            return None
        return self._by_time.get(round(float(trace_time), 6))

    def scheduled(self, index: int, start: float) -> float:
        """Epoch second request `index` is due when the replay clock started at `start`."""
        return start + self.times[index] / self.speed

    def write_dataset(self, path: Path) -> Path:
        """The workload as GuideLLM's dataset: prompt, its lengths and its trace time."""
        lines = [
            json.dumps(
                {
                    "prompt": text,
                    "prompt_tokens_count": request.prompt_tokens,
                    "output_tokens_count": request.output_tokens,
                    "relative_timestamp": stamp,
                }
            )
            for request, text, stamp in zip(self.fitted.requests, self.texts, self.times)
        ]
        write_atomic(path, "\n".join(lines) + "\n")
        return path

    def summary(self) -> dict[str, Any]:
        requests = self.fitted.requests
        return {
            "point_id": self.point_id,
            "speed": self.speed,
            "requests": len(requests),
            "span_s": round(self.fitted.span_s, 3),
            "lead_s": self.lead_s,
            "length_scale": self.fitted.scale,
            "block_tokens": self.fitted.block_tokens,
            "clamped": self.fitted.clamped,
            "prompts_inexact": self.inexact,
            "prompt_tokens": sum(r.prompt_tokens for r in requests),
            "output_tokens": sum(r.output_tokens for r in requests),
        }


def load_slice(
    path: Path,
    trace_format: str | None,
    start: float,
    count: int | None,
    seconds: float | None,
) -> list[TraceRequest]:
    """A trace file's slice; TraceFormatError names the file and line of a problem."""
    return slice_trace(read_trace(path, trace_format), start, count, seconds, path)


def build_workload(
    requests: list[TraceRequest],
    builder: PromptBuilder,
    context: int,
    scale: float | str,
    block_tokens: int,
    point_id: str,
    speed: float,
    seed: int = 42,
    lead_s: float = 0.0,
) -> Workload:
    """One replay point's workload; its first request is due `lead_s` wall seconds after the
    replay clock starts (a load generator that needs a moment to send its first request),
    the rest keep the trace's gaps."""
    fitted = fit_lengths(requests, context, scale, block_tokens, builder.specials + 1)
    contents = builder.contents(fitted, salt=point_id, seed=seed)
    texts = [builder.text(content) for content in contents]
    inexact = sum(not builder.exact(content) for content in contents)
    full = [[*builder.prefix, *content, *builder.suffix] for content in contents]
    return Workload(point_id, speed, fitted, texts, reuse_tokens(full), inexact, lead_s)


def slice_for(trace: Any, spec_dir: Path) -> list[TraceRequest]:
    """The requests of a sweep's `load.data` trace (paths relative to the sweep file); a bad
    trace file is a LoadError with the reader's one line. Both drivers replay through it."""
    try:
        return load_slice(
            (spec_dir / trace.path).resolve(),
            trace.format,
            trace.start,
            trace.requests,
            trace.seconds,
        )
    except TraceFormatError as exc:
        raise LoadError(str(exc)) from None


def replay_context(point_id: str, trace: Any, model_context: int | None) -> int:
    """The context a replayed trace's lengths are fitted to: the trace's own, else the
    model's max-model-len; neither is a LoadError naming the fix."""
    context = trace.context or model_context
    if context is None:
        raise LoadError(
            f"{point_id}: a replayed trace needs the model's context: set "
            "max-model-len or load.data.context"
        )
    return int(context)
