"""The points of a run as a console table that fits the terminal (100 columns and up).

Configurations are named by their id and their varied values with short arg names
("c2 mns=2", report/table_kit.py), so two configurations can always be told apart.
Columns are chosen by priority until the width is used; the reasons a point is invalid
or client-limited are listed under the table instead of widening it.
"""

from __future__ import annotations

from typing import Any, Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tunebench.points import trust
from tunebench.points.offered import offered_load
from tunebench.report.formats import as_number, cell
from tunebench.report.table_kit import (
    Column,
    config_labels,
    fit_widths,
    hidden_line,
    legend_line,
)

COLUMN_HINT = "--format json or csv"  # where every column can be read


def _load(row: dict[str, Any]) -> str:
    return offered_load(row.get("load_kind"), row.get("target"))


def _valid(row: dict[str, Any]) -> str:
    """yes / no / unv (valid, but something of it could not be checked), * client-limited."""
    if not trust.flag(row.get("valid")):
        text = "no"
    else:
        text = "unv" if trust.unverified_reasons(row) else "yes"
    return text + ("*" if trust.flag(row.get("client_limited")) else "")


def _kv_pct(row: dict[str, Any]) -> str:
    value = as_number(row.get("kv_usage_max"))
    return cell(None if value is None else value * 100, 1)


def _queue_ms(row: dict[str, Any]) -> str:
    value = as_number(row.get("queue_time_mean_s"))
    return cell(None if value is None else value * 1000, 1)


def _counts(row: dict[str, Any]) -> str:
    return f"{cell(row.get('requests_ok'), None)}/{cell(row.get('requests_failed'), None)}"


def _num(key: str, digits: int):
    return lambda row: cell(row.get(key), digits)


# Columns shown only when some point has a value: cost (`cost:`), energy (a readable meter),
# the roofline (a known device bandwidth); (header, column, digits), the console table's and
# the HTML report's.
OPTIONAL_COLUMNS = (
    ("cost/Mtok out", "cost_per_mtok_output", 2),
    ("J/out tok", "joules_per_output_token", 3),
    ("roofline %", "roofline_pct", 1),
)
OPTIONAL = {header: key for header, key, _ in OPTIONAL_COLUMNS}

COLUMNS = (  # in display order
    Column("config", 0, None),
    Column("point", 0, lambda r: _point_cell(r)),
    Column("load", 4, _load),
    Column("req/s", 1, _num("achieved_rps", 2)),
    Column("conc (req)", 5, _num("achieved_concurrency", 1)),
    Column("TTFT p50 ms", 1, _num("ttft_p50_ms", 1)),
    Column("TTFT p95 ms", 2, _num("ttft_p95_ms", 1)),
    Column("ITL p50 ms", 2, _num("itl_p50_ms", 2)),
    Column("ITL p95 ms", 7, _num("itl_p95_ms", 2)),
    Column("out tok/s", 3, _num("output_tok_s", 0)),
    *(
        Column(header, priority, _num(key, digits))
        for (header, key, digits), priority in zip(OPTIONAL_COLUMNS, (4, 5, 8))
    ),
    Column("KV max %", 8, _kv_pct),
    Column("wait max (req)", 10, _num("waiting_max", 0)),
    Column("queue depth (req)", 9, _num("queue_depth_mean", 2)),
    Column("queue ms", 9, _queue_ms),
    Column("ok/failed (req)", 6, _counts),
    Column("valid", 0, _valid),
)


def points_table(
    rows: Iterable[dict[str, Any]],
    varied: dict[str, dict[str, Any]],
    title: str | None = None,
    width: int = 100,
    notes_limit: int = 12,
) -> Group:
    """The table, its legend and the reasons behind every "no" and "*" in `valid`.

    `varied` maps each config_id to its varied values (manifest configs[].varied).
    """
    rows = list(rows)
    labels, legend = config_labels(varied)

    def config_cell(row: dict[str, Any]) -> str:
        config_id = str(row.get("config_id", ""))
        return labels.get(config_id) or config_id or str(row.get("config_label", ""))

    present = {
        header
        for header, key in OPTIONAL.items()
        if any(as_number(r.get(key)) is not None for r in rows)
    }
    columns = [c for c in COLUMNS if c.header not in OPTIONAL or c.header in present]
    cells = {
        c.header: [config_cell(r) if c.render is None else c.render(r) for r in rows]
        for c in columns
    }
    widths = fit_widths(columns, cells, width)
    shown = [c for c in columns if c.header in widths]
    table = Table(title=title, header_style="bold", show_lines=False)
    for column in shown:
        left = column.header in ("config", "point", "valid", "load")
        table.add_column(
            column.header, justify="left" if left else "right", width=widths[column.header]
        )
    for index in range(len(rows)):
        table.add_row(*(cells[c.header][index] for c in shown))
    parts: list[Any] = [table, *legend_line(legend)]
    if "J/out tok" not in present:
        # the energy column is absent: say why once (points.csv energy_note per point)
        reasons = sorted({str(r["energy_note"]) for r in rows if r.get("energy_note")})
        for reason in reasons[:2]:
            # one line: on every CPU box the reason runs to ~200 characters (NVML, RAPL)
            parts.append(
                Text(
                    f"J/out tok not shown (why: energy_note in points.csv): {reason}",
                    style="dim",
                    no_wrap=True,
                    overflow="ellipsis",
                )
            )
    parts.extend(hidden_line([c.header for c in columns if c not in shown], COLUMN_HINT))
    notes = _notes(rows, config_cell)
    for line in notes[:notes_limit]:
        parts.append(Text(line))
    if len(notes) > notes_limit:
        parts.append(
            Text(
                f"... {len(notes) - notes_limit} more points with notes "
                "(tunebench show RUN --format json)",
                style="dim",
            )
        )
    return Group(*parts)


def _notes(rows: list[dict[str, Any]], config_cell) -> list[str]:
    """One line per point whose `valid` cell needs a reason."""
    out = []
    for row in rows:
        where = f"{config_cell(row)} {_point_cell(row)}"
        if not trust.flag(row.get("valid")):
            out.append(f"no: {where}: {row.get('invalid_reason') or 'invalid'}")
        if trust.flag(row.get("client_limited")):
            out.append(f"*  {where}: client-limited: {row.get('client_limited_reason', '')}")
    unchecked: dict[str, list[str]] = {}
    for row in rows:
        if trust.flag(row.get("valid")):
            for reason in trust.unverified_reasons(row):
                unchecked.setdefault(reason, []).append(f"{config_cell(row)} {_point_cell(row)}")
    for reason, where_all in unchecked.items():
        # one line per reason: a run without /metrics would repeat it at every point
        shown = ", ".join(where_all[:3]) + (", ..." if len(where_all) > 3 else "")
        out.append(f"unv: {len(where_all)} point(s) unverified: {reason} ({shown})")
    thin = [row for row in rows if row.get("thin_percentiles")]
    if thin:
        # one line, not one per point: short points leave most tails thin
        levels = sorted({str(r["thin_percentiles"]).split(":")[0] for r in thin})
        out.append(
            f"~  {len(thin)} of {len(rows)} points have percentiles from too few requests "
            f"({'; '.join(levels)}): column thin_percentiles of points.csv says which"
        )
    return out


def _point_cell(row: dict[str, Any]) -> str:
    """The point id, and its repeat when the sweep measured it more than once."""
    repeat = str(row.get("repeat") or "1")
    suffix = f" r{repeat}" if repeat not in ("1", "1.0") else ""
    return f"{row.get('point_id', '')}{suffix}"
