"""The `load.data` of a sweep file: synthetic prompts (with shared prefixes), multi-turn
sessions, a dataset file, or a recorded request trace."""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from tunebench.spec.base import Strict


class SharedPrefix(Strict):
    """A system prompt per group, shared by the requests of that group (GuideLLM's synthetic
    prefix buckets): `groups` prompts of `tokens` tokens, group k chosen with weight
    1 / k^zipf (0: every group alike). `prime`: every group's prefix sent once before each
    point's window, as a long-running server would have them cached
    (tunebench/load/guidellm_prime.py)."""

    groups: int = Field(ge=1, le=1000, description="distinct shared prefixes")
    tokens: int = Field(gt=0, description="tokens of each shared prefix")
    zipf: float = Field(
        0, ge=0, le=4, description="popularity skew: group k weighs 1 / k^zipf (0: uniform)"
    )
    prime: bool = Field(
        False,
        description="send each group's prefix once before every point's window (not "
        "measured), so the window starts with the prefixes cached",
    )


class SyntheticData(Strict):
    kind: Literal["synthetic"]
    prompt_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    prompt_tokens_stdev: int = Field(0, ge=0)
    output_tokens_stdev: int = Field(0, ge=0)
    prefix: SharedPrefix | None = Field(
        None, description="a shared prefix before every prompt (its tokens come on top)"
    )
    seed: int = 42


class SessionsData(Strict):
    """Multi-turn conversations (GuideLLM's synthetic multi-turn data, docs/sweep-files.md
    "Sessions"): each session sends `turns` user turns through the chat API, every turn
    after the first with the earlier turns and their answers as history, `think_time_s`
    after the previous answer."""

    kind: Literal["sessions"]
    turns: int = Field(ge=1, le=64, description="user turns per session")
    think_time_s: float = Field(
        0, ge=0, description="seconds between an answer and the next turn (0: at once)"
    )
    prompt_tokens: int = Field(gt=0, description="new tokens each turn adds")
    output_tokens: int = Field(gt=0, description="tokens each answer holds")
    prompt_tokens_stdev: int = Field(0, ge=0)
    output_tokens_stdev: int = Field(0, ge=0)
    seed: int = 42


FILE_DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet", ".arrow", ".txt")


class FileData(Strict):
    """A local dataset file GuideLLM can read (JSONL, CSV, JSON, Parquet)."""

    kind: Literal["file"]
    path: str = Field(description="relative to the sweep file; .jsonl .json .csv .parquet .txt")

    @field_validator("path")
    @classmethod
    def _known_suffix(cls, value: str) -> str:
        if not value.lower().endswith(FILE_DATA_SUFFIXES):
            raise ValueError(f"use a file ending in one of {', '.join(FILE_DATA_SUFFIXES)}")
        return value


TRACE_FORMATS = ("azure", "mooncake", "burstgpt", "jsonl")
TRACE_SUFFIXES = (".csv", ".jsonl", ".json")


class TraceData(Strict):
    """A recorded request trace replayed by `kind: replay` profiles (tunebench/load/trace.py):
    each request's arrival time and prompt and output lengths; prompts are built so that
    requests with equal Mooncake `hash_ids` share those prefix blocks token for token."""

    kind: Literal["trace"]
    path: str = Field(description="relative to the sweep file; .csv .jsonl .json")
    format: Literal["azure", "mooncake", "burstgpt", "jsonl"] | None = Field(
        None, description="default: guessed from the file's header or first record"
    )
    name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        max_length=32,
        description="names its replay points replay-<name>-<speed> (default: the file's stem)",
    )
    start: float = Field(0, ge=0, description="seconds after the trace's first request")
    requests: int | None = Field(None, gt=0, description="the slice: this many requests")
    seconds: float | None = Field(None, gt=0, description="the slice: this many trace seconds")
    length_scale: float | Literal["auto"] = Field(
        "auto",
        description="factor on every prompt and output length; auto: the largest factor <= 1 "
        "at which every request of the slice fits the context",
    )
    context: int | None = Field(
        None,
        gt=1,
        description="tokens one request may hold, prompt + output (default: the smallest "
        "max-model-len of the configurations)",
    )
    block_tokens: int = Field(
        512, gt=0, description="tokens per hash id in the trace (Mooncake: 512)"
    )
    seed: int = 42

    @field_validator("path")
    @classmethod
    def _known_suffix(cls, value: str) -> str:
        if not value.lower().endswith(TRACE_SUFFIXES):
            raise ValueError(f"use a trace file ending in one of {', '.join(TRACE_SUFFIXES)}")
        return value

    @field_validator("length_scale")
    @classmethod
    def _positive_scale(cls, value: float | str) -> float | str:
        if not isinstance(value, str) and not 0 < value <= 1000:
            raise ValueError("length_scale must be above 0 (e.g. 0.05), or auto")
        return value

    @model_validator(mode="after")
    def _one_slice_end(self) -> "TraceData":
        if self.requests is not None and self.seconds is not None:
            raise ValueError("give the slice as requests or as seconds, not both")
        return self

    @property
    def label(self) -> str:
        """The name its replay points carry."""
        if self.name:
            return self.name
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", PurePath(self.path).stem).strip("-.")
        return stem[:32] or "trace"


Data = Annotated[
    Union[SyntheticData, FileData, TraceData, SessionsData], Field(discriminator="kind")
]
