"""Records from a local dataset file, and the prompt each one becomes.

JSONL (one object per line), JSON (a list of objects, or an object holding one such list),
CSV and Parquet. Every record needs a unique id in `id_field`; its output is keyed by it.
Prompts are Jinja2 with StrictUndefined: a field the template names but a record lacks is
an error naming the record, not an empty string in the prompt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from tunebench.errors import SpecError


@dataclass(frozen=True)
class Record:
    id: str
    fields: dict[str, Any]


def load_records(path: Path, id_field: str, limit: int | None = None) -> list[Record]:
    rows = _read_rows(path)
    if limit is not None:
        rows = rows[:limit]
    records: list[Record] = []
    seen: set[str] = set()
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise SpecError(f"{path}: record {number} is not an object with fields")
        if row.get(id_field) in (None, ""):
            raise SpecError(
                f"{path}: record {number} has no {id_field!r}; give every record an "
                f"id or set dataset.id_field to the field that identifies it"
            )
        record_id = str(row[id_field])
        if record_id in seen:
            raise SpecError(
                f"{path}: record {number}: id {record_id!r} appears twice; ids key "
                "the outputs and must be unique"
            )
        seen.add(record_id)
        records.append(Record(record_id, row))
    if not records:
        raise SpecError(f"{path}: no records")
    return records


def _read_rows(path: Path) -> list[Any]:
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            rows = []
            with open(path, encoding="utf-8") as handle:
                for number, line in enumerate(handle, start=1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except ValueError as exc:
                            raise SpecError(f"{path}: line {number}: not JSON ({exc})") from None
            return rows
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                lists = [v for v in data.values() if isinstance(v, list)]
                if len(lists) != 1:
                    raise SpecError(
                        f"{path}: expected a list of records, or an object holding one list"
                    )
                data = lists[0]
            return list(data)
        import pandas as pd

        frame = (
            pd.read_csv(path, dtype=str, keep_default_na=False)
            if suffix == ".csv"
            else pd.read_parquet(path)
        )
        return frame.to_dict(orient="records")
    except FileNotFoundError:
        raise SpecError(f"{path}: dataset file not found") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"{path}: unreadable dataset: {exc}") from None


class PromptRenderer:
    def __init__(self, template: str, where: str):
        environment = jinja2.Environment(
            undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
        )
        environment.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
        try:
            self.template = environment.from_string(template)
        except jinja2.TemplateSyntaxError as exc:
            raise SpecError(f"{where}: template line {exc.lineno}: {exc.message}") from None
        self.where = where

    def render(self, record: Record) -> str:
        try:
            return self.template.render(**record.fields)
        except jinja2.UndefinedError as exc:
            raise SpecError(
                f"{self.where}: record {record.id!r}: {exc.message}; use "
                "{{ field | default('') }} for optional fields"
            ) from None
        except (jinja2.TemplateError, ArithmeticError, LookupError, TypeError, ValueError) as exc:
            # e.g. {{ title + 1 }} or {{ steps | join(1) }}: the template, not the data, is wrong
            raise SpecError(
                f"{self.where}: record {record.id!r}: the template fails: "
                f"{type(exc).__name__}: {exc}"
            ) from None
