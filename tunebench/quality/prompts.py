"""The prompts of a quality check: the shipped default set, or a user's file.

A file is JSON Lines with a "prompt" string per line (the shipped
`default-prompts.jsonl`), or plain text with one prompt per non-empty line (`.txt`).
Errors name the file, the line and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

from tunebench.errors import SpecError

DEFAULT = "default"
DEFAULT_FILE = Path(__file__).with_name("default-prompts.jsonl")
MAX_PROMPTS = 1000


def prompts_path(value: str, spec_dir: Path | None = None) -> Path:
    """Where the prompts of `quality.prompts` live (relative paths: to the spec file)."""
    if value == DEFAULT:
        return DEFAULT_FILE
    path = Path(value).expanduser()
    if not path.is_absolute() and spec_dir is not None:
        path = spec_dir / path
    return path


def load_prompts(path: Path) -> list[str]:
    where = f"quality.prompts {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(
            f'{where}: no such file; give a JSONL file of {{"prompt": ...}} lines, a .txt '
            "file with one prompt per line, or 'default'"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{where}: cannot read it ({exc})") from None
    prompts: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if path.suffix == ".txt":
            prompts.append(line)
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecError(
                f"{where}, line {number}: not JSON ({exc.msg}); write one "
                '{"prompt": "..."} object per line, or use a .txt file'
            ) from None
        prompt = record.get("prompt") if isinstance(record, dict) else None
        if not isinstance(prompt, str) or not prompt:
            raise SpecError(
                f'{where}, line {number}: needs a non-empty "prompt" string, e.g. '
                '{"prompt": "The capital of France is"}'
            )
        prompts.append(prompt)
    if not prompts:
        raise SpecError(f"{where}: holds no prompt; add at least one line")
    if len(prompts) > MAX_PROMPTS:
        raise SpecError(f"{where}: {len(prompts)} prompts; at most {MAX_PROMPTS} per check")
    return prompts
