"""Reading a sweep file: bytes -> YAML -> SweepSpec, with one-line errors.

Every failure becomes a `SpecError` whose message names the file, the key path and what
is allowed, e.g.
    sweeps/x.yaml: load.profiles[0].kind: 'burst' is not allowed; use one of synchronous, ...
"""

from __future__ import annotations

import datetime
import math
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from tunebench.errors import SpecError
from tunebench.redact import remember_secrets_in
from tunebench.spec.cores import with_cpu_split
from tunebench.spec.engine_args import check_server
from tunebench.spec.file_kind import other_command
from tunebench.spec.models import SweepSpec

MAX_SPEC_BYTES = 1_000_000
#: Values (scalars, lists, mappings) a spec may hold once YAML aliases are expanded, and how
#: deeply they may nest: a few hundred bytes of aliases can otherwise expand to billions.
MAX_SPEC_VALUES = 100_000
MAX_SPEC_DEPTH = 64
#: Integers beyond this are no count, size or seed any engine or load generator accepts.
MAX_SPEC_INT = 2**63 - 1


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice (PyYAML would keep the last silently)."""

    def construct_object(self, node, deep=False):
        # PyYAML's constructors of explicit tags raise plain Python errors for values that
        # do not fit the tag (`!!float x`, `!!timestamp `, `!!int 1.5`): point at the value.
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError):
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            value = node.value if isinstance(node.value, str) else ""
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"cannot read {value[:40]!r} as {tag}; remove the tag or fix the value",
                node.start_mark,
            ) from None


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "a key must be a plain value, not a list or mapping",
                key_node.start_mark,
            ) from None
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice; keep one", mark
            )
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml_mapping(
    path: Path, what: str = "sweep file", example: str = "sweeps/cpu-demo.yaml"
) -> dict[str, Any]:
    """The top-level mapping of a YAML file, or a SpecError that says what is wrong."""
    raw = _read_limited(path, what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8"
        ) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.problem and exc.context and exc.context.startswith("expected"):
            problem = f"{exc.context}, {exc.problem}"  # e.g. a single document, but found two
        problem = " ".join(str(problem).split())
        raise SpecError(f"{path}{where}: YAML syntax error: {problem}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise SpecError(
            f"{path}:{line}:{column}: character {exc.character:#06x} is not allowed in YAML; "
            "remove it (control characters are not text)"
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: YAML error: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise SpecError(f"{path}: YAML nested too deeply") from None
    if data is None:
        raise SpecError(f"{path}: the file is empty; see {example} for an example")
    if not isinstance(data, dict):
        raise SpecError(
            f"{path}: the top level must be a mapping of keys (name, model, ...), "
            f"not {_type_name(data)}"
        )
    check_plain_data(data, path)
    return data


def _read_limited(path: Path, what: str) -> bytes:
    # Read at most one byte past the limit: a huge file, /dev/zero or a pipe never fills memory.
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)
            size = path.stat().st_size if path.is_file() else 0
    except FileNotFoundError:
        raise SpecError(f"{path}: no such {what}; check the path") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory; give the path of a {what}") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_SPEC_BYTES:
        amount = (
            f"{size:,} bytes" if size > MAX_SPEC_BYTES else f"more than {MAX_SPEC_BYTES:,} bytes"
        )
        raise SpecError(
            f"{path}: {amount} is too large for a {what} (limit {MAX_SPEC_BYTES:,} bytes)"
        )
    return raw


_PLAIN = (str, bool, int, float, type(None))


def check_plain_data(data: Any, path: Path) -> None:
    """Everything a spec holds is JSON-like: text keys, finite numbers, no dates or bytes.

    YAML reads `2024-01-01` as a date, `.nan`/`.inf` as floats, `!!binary` as bytes and
    `1:` as an integer key; none of them is a valid setting, a run's manifest (JSON) could
    not store them and engine args would not render. Aliases are counted as often as they
    are used, so an alias bomb or a self-referencing alias is refused here instead of
    blowing up later.
    """
    budget = MAX_SPEC_VALUES
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, key, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise SpecError(
                f"{path}: more than {MAX_SPEC_VALUES:,} values once YAML aliases are expanded; "
                "write the spec without nested aliases"
            )
        if depth > MAX_SPEC_DEPTH:
            shown = key if len(key) <= 60 else key[:40] + "..."
            raise SpecError(
                f"{path}: {shown}: nested more than {MAX_SPEC_DEPTH} levels deep "
                "(a YAML alias that refers to itself?)"
            )
        if isinstance(value, dict):
            for child_key, child in value.items():
                if not isinstance(child_key, str):
                    shown = (
                        "null"
                        if child_key is None
                        else str(child_key).lower()
                        if isinstance(child_key, bool)
                        else repr(child_key)
                    )
                    raise SpecError(
                        f"{path}: {_join(key, shown)}: a key must be text, YAML read it as "
                        f"{_type_name(child_key) if child_key is not None else 'null'}; "
                        "put the key in quotes"
                    )
                stack.append((child, _join(key, child_key), depth + 1))
        elif isinstance(value, list):
            stack.extend((child, f"{key}[{n}]", depth + 1) for n, child in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise SpecError(
                f"{path}: {key or '(top level)'}: {value} is not allowed; give a finite number"
            )
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SPEC_INT:
            raise SpecError(
                f"{path}: {key or '(top level)'}: {_abbreviate(value)} is too large "
                f"(at most {MAX_SPEC_INT:,} in magnitude)"
            )
        elif not isinstance(value, _PLAIN):
            kind = {
                datetime.date: "a date",
                datetime.datetime: "a timestamp",
                bytes: "binary data",
                set: "a set",
            }.get(type(value), type(value).__name__)
            raise SpecError(
                f"{path}: {key or '(top level)'}: YAML read {kind} here; if you mean text, put it "
                "in quotes"
            )


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{display_key(key)}" if prefix else display_key(key)


def display_key(key: Any) -> str:
    """A key as it appears in a message: as written, or quoted when it holds odd characters."""
    text = str(key)
    if text and text.isprintable() and not text.isspace() and text == text.strip():
        return text
    return repr(text)


def _abbreviate(number: int) -> str:
    digits = str(abs(number))
    sign = "-" if number < 0 else ""
    return f"{sign}{digits[:6]}... ({len(digits)} digits)"


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep file."""
    path = Path(path)
    data = read_yaml_mapping(path)
    return validate_spec(data, path)


def validate_spec(data: dict[str, Any], path: Path) -> SweepSpec:
    remember_secrets_in(data)  # an api-key or token in the spec is masked in every log
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        message = other_command(data, path, "sweep")  # a batch file given to sweep or tune
        raise SpecError(message or f"{path}: {describe_validation_error(exc, SweepSpec)}") from None
    check_server(spec.server, path)
    # a local CPU server and its load generator on CPUs of their own (spec/cores.py)
    return with_cpu_split(spec)


_TYPE_MISMATCH = {
    "int_type",
    "int_parsing",
    "float_type",
    "float_parsing",
    "string_type",
    "bool_type",
    "bool_parsing",
    "list_type",
    "dict_type",
    "model_type",
    "none_required",
    "literal_error",
}


_WANTED = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "text",
    "bool_type": "true/false",
    "bool_parsing": "true/false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "none_required": "null",
}


def _most_specific(errors: list[ErrorDetails]) -> ErrorDetails:
    """Among a union's alternatives, the error that says most (not 'wrong type' for each)."""
    informative = [e for e in errors if e["type"] not in _TYPE_MISMATCH]
    if informative:
        return informative[0]
    # the deepest: where an outer alternative matched and only an item is wrong
    return max(errors, key=lambda e: len(e["loc"]))


def describe_validation_error(exc: ValidationError, root: type[BaseModel]) -> str:
    """One line for the first problem of a pydantic ValidationError (+ how many more)."""
    errors = exc.errors(include_url=False)
    first_key = _key_path(tuple(errors[0]["loc"]), root)[0]
    same_key = [e for e in errors if _key_path(tuple(e["loc"]), root)[0].startswith(first_key)]
    first = _most_specific(same_key)
    key, model, annotation = _key_path(tuple(first["loc"]), root)
    kind = first["type"]
    ctx = first.get("ctx") or {}
    alternatives = [
        e
        for e in same_key
        if e["type"] in _TYPE_MISMATCH - {"literal_error"}
        and _key_path(tuple(e["loc"]), root)[0] == key
    ]
    if kind in _TYPE_MISMATCH and len(alternatives) > 1:
        # a union (e.g. null, true/false, a number or text): say what it takes, not one member
        wanted = list(dict.fromkeys(_WANTED.get(e["type"], e["type"]) for e in alternatives))
        message = (
            f"{_type_name(first.get('input'))} is not allowed here; give "
            f"{', '.join(wanted[:-1])} or {wanted[-1]}"
        )
    elif kind == "extra_forbidden":
        allowed = ", ".join(model.model_fields) if model else "see the documentation"
        message = f"unknown key; allowed here: {allowed}"
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "literal_error":
        what = "as a key here" if first["loc"] and first["loc"][-1] == "[key]" else ""
        message = (
            f"{_shown(first.get('input'))} is not allowed{' ' if what else ''}{what}; "
            f"use one of {ctx.get('expected', '')}"
        )
    elif kind == "union_tag_invalid":
        message = f"{ctx.get('tag')!r} is not allowed; use one of {ctx.get('expected_tags', '')}"
    elif kind == "union_tag_not_found":
        tags = ", ".join(repr(t) for t in _kind_tags(annotation))
        message = f"needs a kind: one of {tags}"
    elif kind == "string_pattern_mismatch":
        message = (
            "may contain only letters, digits, '.', '_' and '-', starting with a letter or "
            f"digit (got {first.get('input')!r})"
        )
    else:
        message = first["msg"].removeprefix("Value error, ")
        if "input" in first and kind not in ("model_type", "dict_type") and _short(first["input"]):
            message += f" (got {first['input']!r})"
        elif kind in _TYPE_MISMATCH and "input" in first:
            message += f" (got {_type_name(first['input'])})"
    others = {
        k for e in errors if not (k := _key_path(tuple(e["loc"]), root)[0]).startswith(first_key)
    }
    more = f" (+{len(others)} more)" if others else ""
    if not key and kind == "value_error":
        return f"{message}{more}"  # a check across sections; its message names the keys
    return f"{key or '(top level)'}: {message}{more}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (int, float)):
        return "a number"
    return "text" if isinstance(value, str) else type(value).__name__


def _short(value: Any) -> bool:
    return isinstance(value, (int, float, str, bool)) and len(repr(value)) <= 60


def _key_path(loc: tuple, root: type[BaseModel]) -> tuple[str, type[BaseModel] | None, Any]:
    """Readable key path ('load.profiles[0].kind'), the model owning the last key, and the
    annotation at that key.

    Pydantic inserts union members into its location: the tag of a discriminated union
    ('local') or the type of a plain union member ('constrained-int', 'list[...]'). Those
    parts pick the member and are left out of the path the user sees.
    """
    parts: list[str] = []
    model: type[BaseModel] | None = root
    owner: type[BaseModel] | None = root
    annotation: Any = None
    for item in loc:
        if item == "[key]":  # pydantic's marker for a problem with the key itself
            continue
        if isinstance(item, int):
            parts.append(f"[{item}]")
            annotation = _element_type(annotation)
            model = _as_model(annotation)
            continue
        member = _union_member(annotation, item)
        if member is not None:
            model, annotation = member, None
            continue
        if model is not None and item in model.model_fields:
            owner = model
            annotation = model.model_fields[item].annotation
            model = _as_model(annotation)
        elif _dict_value_type(annotation) is not None:
            owner = model
            annotation = _dict_value_type(annotation)
            model = _as_model(annotation)
        elif annotation is not None and len(_non_null(annotation)) > 1:
            continue  # a plain union's member tag (an optional model has none: its keys follow)
        else:
            owner = model
            annotation, model = None, None
        parts.append(("." if parts else "") + display_key(item))
    return "".join(parts), owner, annotation


def _kind_tags(annotation: Any) -> list[str]:
    tags: list[str] = []
    for member in _members(annotation):
        if (
            isinstance(member, type)
            and issubclass(member, BaseModel)
            and "kind" in member.model_fields
        ):
            tags += list(typing.get_args(member.model_fields["kind"].annotation))
    return tags


def _strip(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> tuple:
    annotation = _strip(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(_strip(a) for a in typing.get_args(annotation))
    return (annotation,)


def _non_null(annotation: Any) -> tuple:
    return tuple(m for m in _members(annotation) if m is not type(None))


def _as_model(annotation: Any) -> type[BaseModel] | None:
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def _union_member(annotation: Any, tag: Any) -> type[BaseModel] | None:
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            kind = member.model_fields.get("kind")
            if kind is not None and tag in typing.get_args(kind.annotation):
                return member
    return None


def _element_type(annotation: Any) -> Any:
    for member in _members(annotation):
        if typing.get_origin(member) is list:
            return typing.get_args(member)[0]
    return None


def _dict_value_type(annotation: Any) -> Any:
    for member in _members(annotation):
        if typing.get_origin(member) is dict:
            return typing.get_args(member)[1]
    return None
