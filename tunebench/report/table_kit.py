"""The console tables' shared kit: short configuration labels with their legend, columns
chosen by priority to fit the terminal, and the dim lines under a table (the legend, the
columns left out at this width).

Configurations are named by their id and their varied values with short arg names
("c2 mns=2"), so two configurations can always be told apart; a legend spells the short
names out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rich.text import Text

# Short names of the args sweeps vary most; any other arg gets the initials of its words.
SHORT_ARGS = {
    "max-num-seqs": "mns",
    "max-num-batched-tokens": "mnbt",
    "max-model-len": "mml",
    "kv-cache-dtype": "kv",
    "enable-prefix-caching": "prefix",
    "enforce-eager": "eager",
    "gpu-memory-utilization": "gmu",
    "speculative-config": "spec",
    "quantization": "quant",
    "tensor-parallel-size": "tp",
    "block-size": "bs",
    "dtype": "dtype",
    "model": "model",
}
VALUE_WIDTH = 14  # a varied value longer than this (a JSON config, a path) is shortened


def short_arg(name: str) -> str:
    if name in SHORT_ARGS:
        return SHORT_ARGS[name]
    words = [w for w in re.split(r"[-_.]", name) if w]
    return "".join(w[0] for w in words) if len(words) > 1 else name


def short_value(value: Any) -> str:
    text = str(value)
    if "/" in text and not text.startswith("{"):
        text = text.rstrip("/").rsplit("/", 1)[-1]  # a model path or hub id: its last part
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 1] + "…"


def _short_parts(pairs: list[tuple[str, Any]], legend: dict[str, str]) -> list[str]:
    """Each (arg, value) as "mns=2" (a variant as its name), the short names it used added
    to `legend`."""
    parts = []
    for name, value in pairs:
        if name == "variant":  # a variant is its name
            parts.append(short_value(value))
            continue
        short = short_arg(name)
        if short != name:
            legend[short] = name
        parts.append(f"{short}={short_value(value)}")
    return parts


def short_label(config_id: str, varied: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """("c2 mns=2", {"mns": "max-num-seqs"}): the id, then each varied value."""
    legend: dict[str, str] = {}
    # a tune trial's id already is t<trial>
    pairs = [(name, value) for name, value in varied.items() if name != "trial"]
    return " ".join([config_id, ",".join(_short_parts(pairs, legend))]).strip(), legend


def short_label_text(text: str, legend: dict[str, str]) -> str:
    """A configuration label ("max-num-seqs=2, max-num-batched-tokens=32", a --by side
    "variant=mns1-mnbt32") with the short arg names: "mns=2,mnbt=32", "mns1-mnbt32"; the
    short names it used are added to `legend`."""
    parts = text.split(", ")
    if not all(re.fullmatch(r"[A-Za-z0-9_.-]+=.+", p) for p in parts):
        return short_value(text)
    pairs = [(name, value) for name, value in (part.split("=", 1) for part in parts)]
    return ",".join(_short_parts(pairs, legend))


def config_labels(varied: dict[str, dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """config_id -> its short label, and the legend of every short arg name they use;
    `varied` maps each config_id to its varied values (manifest configs[].varied)."""
    labels: dict[str, str] = {}
    legend: dict[str, str] = {}
    for config_id, values in varied.items():
        labels[config_id], found = short_label(config_id, values)
        legend.update(found)
    return labels, legend


@dataclass(frozen=True)
class Column:
    header: str
    priority: int  # lower is kept first when the terminal is narrow
    render: Any  # row -> str


def _content_width(column: Column, cells: dict[str, list[str]]) -> int:
    """The narrowest a column can be: its widest cell (cells never wrap: a number split over
    two lines misreads) or the longest word of its header (headers may wrap)."""
    longest_word = max(len(w) for w in column.header.split())
    return max([longest_word, *(len(c) for c in cells[column.header])])


def fit_widths(columns: list[Column], cells: dict[str, list[str]], width: int) -> dict[str, int]:
    """Column -> content width: columns by priority while the table fits `width` (each
    column costs its content, two spaces of padding and a border), then the room left goes
    to headers that would otherwise wrap."""
    chosen: dict[str, int] = {}
    used = 1  # the table's left border
    for column in sorted(columns, key=lambda c: c.priority):
        need = _content_width(column, cells)
        if used + need + 3 <= width or column.priority == 0:
            chosen[column.header] = need
            used += need + 3
    spare = width - used
    for column in columns:
        if column.header in chosen and spare > 0:
            grow = min(len(column.header) - chosen[column.header], spare)
            if grow > 0:
                chosen[column.header] += grow
                spare -= grow
    return {c.header: chosen[c.header] for c in columns if c.header in chosen}


def legend_line(legend: dict[str, str]) -> list[Text]:
    """The dim "config: mns = max-num-seqs; ..." line, or nothing when no name was shortened."""
    if not legend:
        return []
    return [Text("config: " + "; ".join(f"{k} = {v}" for k, v in legend.items()), style="dim")]


def hidden_line(hidden: list[str], every_column: str) -> list[Text]:
    """The dim line naming the columns left out at this width and where to read them."""
    if not hidden:
        return []
    return [
        Text(
            f"not shown at this width: {', '.join(hidden)} ({every_column} has every column)",
            style="dim",
        )
    ]
