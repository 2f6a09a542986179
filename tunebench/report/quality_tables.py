"""The quality tables on the console: a run's (`show`, the end of a sweep) and the change
between runs (`compare`).

Configurations go by their id and short label ("c4 kv=fp8"), never cut: columns are kept by
priority within the width (the rest named), a verdict's reasons go under the table, and a
legend spells the short arg names out. The lm-eval
column says under the table what its number is, and why it cannot show a drop when every
configuration scored 0 (a model with random weights answers none of the questions)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tunebench.report.formats import cell, sig
from tunebench.report.table_kit import Column, fit_widths, short_label_text


def quality_vs(row: Any) -> str:
    """The quality table's "vs" cell: the configuration compared with; the reference row
    is compared with nothing (no NaN printed for it), a row not checked has no partner."""
    get = row.get if isinstance(row, dict) else lambda key: getattr(row, key, None)
    other = get("compared_with")
    if isinstance(other, str) and other:
        return other
    return "(reference)" if get("verdict") == "reference" else "-"


def _config_names(pairs: list[tuple[str, str]], legend: dict[str, str]) -> list[str]:
    return [f"{config_id} {short_label_text(label, legend)}".strip() for config_id, label in pairs]


def _legend(legend: dict[str, str]) -> Text:
    return Text("config: " + "; ".join(f"{k} = {v}" for k, v in legend.items()), style="dim")


def lm_eval_note(scores: list[float], lm_eval: dict[str, Any] | None) -> str | None:
    """What the lm-eval column is; None when no configuration has a score."""
    if not scores:
        return None
    lm_eval = lm_eval or {}
    task = lm_eval.get("task") or "the task"
    metric = lm_eval.get("metric") or "its score"
    samples = lm_eval.get("samples")
    of = f" of {samples} questions" if samples else ""
    text = f"lm-eval: {metric} on {task}{of}, 0 to 1"
    if all(score == 0 for score in scores):
        text += (
            "; 0 in every configuration: the model answered none right (the embedded "
            "builtin models have random weights), so this score cannot show a drop here"
        )
    return text


# header, priority (lower is kept first when the terminal is narrow)
QUALITY_COLUMNS = (
    ("config", 0),
    ("vs", 0),
    ("prompts", 2),
    ("exact", 0),
    ("agree", 0),
    ("top-1", 1),
    ("mean KL", 1),
    ("TV", 3),
    ("ties", 3),
    ("lm-eval", 1),
    ("s", 3),
    ("gate", 0),
)
STYLES = {"pass": "green", "fail": "red", "reference": "cyan", "not-checked": "yellow"}


def quality_view(
    frame: Any, lm_eval: dict[str, Any] | None = None, width: int = 100
) -> Group | None:
    """The quality table (analysis/quality.py) for the console; None without a check.
    `lm_eval`: a configuration's lm-eval result (task, metric, samples) for the note.
    Columns are kept by priority within `width`; the reasons of a verdict go under it."""
    if frame is None or frame.empty:
        return None
    legend: dict[str, str] = {}
    rows = list(frame.itertuples())
    configs = _config_names([(str(r.config_id), str(r.label or "")) for r in rows], legend)

    def share(value: Any) -> str:
        return "-" if value is None or value != value else f"{value:.0%}"

    cells = {
        "config": configs,
        "vs": [quality_vs(r) for r in rows],
        "prompts": [cell(r.prompts, 0) for r in rows],
        "exact": [share(r.exact_match) for r in rows],
        "agree": [share(r.token_agreement) for r in rows],
        "top-1": [share(r.top1_agreement) for r in rows],
        "mean KL": [sig(r.mean_kl) for r in rows],
        "TV": [sig(r.mean_tv) for r in rows],
        "ties": [cell(r.near_ties, 0) for r in rows],
        "lm-eval": [sig(r.lm_eval_score) for r in rows],
        "s": [cell(r.seconds, 1) for r in rows],
        "gate": [str(r.verdict) for r in rows],
    }
    scores = [float(r.lm_eval_score) for r in rows if r.lm_eval_score is not None]
    scores = [x for x in scores if x == x]
    columns = [
        # a task score, where there is one, says as much as the answers do
        Column(name, 0 if name == "lm-eval" and scores else priority, None)
        for name, priority in QUALITY_COLUMNS
        if name != "lm-eval" or scores
    ]
    widths = fit_widths(columns, cells, width)
    shown = [c.header for c in columns if c.header in widths]
    table = Table(title="quality: greedy answers vs the reference", title_justify="left")
    for name in shown:
        left = name in ("config", "vs", "gate")
        table.add_column(name, justify="left" if left else "right", width=widths[name])
    for index, row in enumerate(rows):
        values: list[Any] = [cells[name][index] for name in shown]
        values[-1] = Text(values[-1], style=STYLES.get(values[-1], ""))
        table.add_row(*values)
    parts: list[Any] = [table]
    if legend:
        parts.append(_legend(legend))
    for row, config in zip(rows, configs):
        if row.reasons:
            parts.append(Text(f"{config}: {row.verdict}: {row.reasons}"))
    hidden = [c.header for c in columns if c.header not in widths]
    if hidden:
        parts.append(
            Text(
                f"not shown at this width: {', '.join(hidden)} "
                "(quality/summary.csv in the run has every column)",
                style="dim",
            )
        )
    note = lm_eval_note(scores, lm_eval)
    if note:
        parts.append(Text(note, style="dim"))
    return Group(*parts)


def quality_change_table(rows: list[dict]) -> Group:
    """`compare`: how far each configuration's answers moved from the baseline run's."""
    table = Table(title="quality: answers vs the baseline run", title_justify="left")
    legend: dict[str, str] = {}
    configs = _config_names([(r["config_id"], r.get("label") or "") for r in rows], legend)
    for name in ("run", "config", "vs", "exact", "agree", "top-1", "mean KL", "lm-eval change"):
        is_config = name == "config"
        table.add_column(
            name,
            justify="left" if name in ("run", "config", "vs") else "right",
            no_wrap=is_config,
            min_width=max(map(len, configs)) if is_config else None,
        )

    def share(value: Any) -> str:
        return "-" if value is None else f"{value:.0%}"

    for row, config in zip(rows, configs):
        change = row.get("lm_eval_change")
        table.add_row(
            row["run"],
            config,
            row["baseline_config"],
            share(row.get("exact_match")),
            share(row.get("token_agreement")),
            share(row.get("top1_agreement")),
            sig(row.get("mean_kl")),
            "-" if change is None else f"{change:+.3f}",
        )
    return Group(table, _legend(legend)) if legend else Group(table)
