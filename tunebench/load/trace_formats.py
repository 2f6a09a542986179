"""Recorded request traces read into `TraceRequest`s: Azure LLM inference 2023, Mooncake
FAST'25, BurstGPT, or tunebench's own JSONL (`guess_format`, `read_trace`). A trace row is
one real request: when it arrived and how many tokens it sent and received; Mooncake rows
also list one hash id per 512-token block of the prompt. A file that cannot be read raises
`TraceFormatError`, whose message names the file, the line and a fix. A request fitted to
the served model (`FittedRequest`, in a `FittedSlice`) is what trace.py makes of one."""

from __future__ import annotations

import csv
import datetime
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

#: A trace row's fields where the format names them (tunebench's own JSONL takes either).
_PROMPT_KEYS = ("prompt_tokens", "input_length")
_OUTPUT_KEYS = ("output_tokens", "output_length")


class TraceFormatError(ValueError):
    """A trace file that cannot be read: the message names the file, the line and a fix."""


@dataclass(frozen=True)
class TraceRequest:
    time: float  # seconds: absolute in a read trace, from the slice's start once sliced
    prompt_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None = None
    line: int = 0  # where it was read, for messages


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
    except json.JSONDecodeError as exc:
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
