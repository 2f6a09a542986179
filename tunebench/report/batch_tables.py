"""`tunebench batch` on the console: the plan of a dry run and the summary of a run.

Configurations go by the short labels `show` uses ("c2 mns=8"), spelled out in a legend, so
two configurations can be told apart at 100 columns; a phase no configuration reported
(compile time on a build that does not compile) is named under the table, not a column of
dashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tunebench.report.formats import MISSING, as_number, cell, plural
from tunebench.report.table_kit import Column, config_labels, fit_widths, hidden_line, legend_line
from tunebench.report.tables import duration_text


def batch_plan(spec: Any, configs: list[Any], prompts: list[dict], shards: int) -> Group:
    table = Table(
        title=f"plan for {spec.name}: {plural(len(configs), 'configuration')} x "
        f"{plural(len(prompts), 'record')}, engine {spec.engine}, {plural(shards, 'shard')}"
    )
    for column in ("config", "model", "engine args"):
        table.add_column(column)
    for config in configs:
        table.add_row(
            f"{config.config_id}: {config.label}", config.model, " ".join(config.command_args())
        )
    longest = max(len(p["prompt"]) for p in prompts)
    return Group(
        table,
        Text(
            f"prompts: {len(prompts)} rendered (longest {longest} characters);"
            f" max_tokens {spec.sampling.max_tokens}; dry run: nothing started"
        ),
    )


def estimate_line(estimate: Any, root: Path, name: str) -> Text:
    """The batch's estimated time (batch/estimate.py), or why there is none."""
    if estimate.run_id is None:
        return Text(
            f"estimated time: none (no earlier complete run of batch {name!r} under {root}: the "
            "first run records each phase, and the next dry-run estimates from it)"
        )
    if estimate.seconds is None:
        return Text(
            f"estimated time: none (run {estimate.run_id} of this batch measured none of these "
            "configurations)"
        )
    share = (
        ""
        if estimate.known == estimate.configs
        else f" for {estimate.known} of {estimate.configs} configurations"
    )
    return Text(
        f"estimated time: {duration_text(estimate.seconds)}{share} (each configuration's "
        f"phases as run {estimate.run_id} measured them, its generation scaled to "
        f"{estimate.records} records)"
    )


# header, points.csv column, decimals; the priority keeps the phases that say most at 100
BATCH_COLUMNS = (
    ("config", "config_label", None, 0),
    ("load s", "load_s", 1, 1),
    ("init s", "init_s", 1, 1),
    ("compile s", "compile_s", 1, 2),
    ("generate s", "generate_s", 1, 0),
    ("write ms", "write_s", 1, 2),  # milliseconds: a write takes 1 ms, "0.00 s" said nothing
    ("req/s", "achieved_rps", 2, 0),
    ("in tok/s", "input_tok_s", 0, 1),
    ("out tok/s", "output_tok_s", 0, 0),
    ("schema ok (share)", "schema_valid_fraction", 3, 1),
)


def batch_summary(
    run_id: str,
    records: Any,
    shards: Any,
    rows: list[dict],
    varied: dict[str, dict[str, Any]] | None = None,
    width: int = 100,
) -> Group:
    """The phases and rates of each configuration; `varied` maps each config_id to its
    varied values (manifest configs[].varied), which name it as `show` does."""
    labels, legend = config_labels(varied or {})

    def config_cell(row: dict) -> str:
        config_id = str(row.get("config_id") or "")
        return labels.get(config_id) or " ".join(
            part for part in (config_id, str(row.get("config_label") or "")) if part
        )

    def value(row: dict, header: str, key: str) -> Any:
        found = as_number(row.get(key))
        return found * 1000 if header.endswith(" ms") and found is not None else row.get(key)

    cells = {
        header: [
            config_cell(r) if digits is None else cell(value(r, header, key), digits) for r in rows
        ]
        for header, key, digits, _ in BATCH_COLUMNS
    }
    unreported = [h for h, *_ in BATCH_COLUMNS[1:] if rows and all(c == MISSING for c in cells[h])]
    columns = [Column(h, p, None) for h, _, _, p in BATCH_COLUMNS if h not in unreported]
    widths = fit_widths(columns, cells, width)
    shown = [c for c in columns if c.header in widths]
    table = Table(
        title=f"batch {run_id}: {records} records, {plural(int(shards or 1), 'shard')}",
        header_style="bold",
    )
    for column in shown:
        left = column.header == "config"
        table.add_column(
            column.header,
            justify="left" if left else "right",
            width=widths[column.header],  # a cell's widest value: cells never wrap
        )
    for index in range(len(rows)):
        table.add_row(*(cells[c.header][index] for c in shown))
    parts: list[Any] = [table, *legend_line(legend)]
    if unreported:
        parts.append(Text(f"no configuration reported: {', '.join(unreported)}", style="dim"))
    hidden = [c.header for c in columns if c not in shown]
    parts.extend(hidden_line(hidden, "tunebench show RUN --format json or csv"))
    return Group(*parts)
