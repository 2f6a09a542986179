"""The columns of points.csv, in order. Part of the stable run format (schema_version 1)."""

from __future__ import annotations

from tunebench.load.guidellm_report import CLIENT_COLUMNS
from tunebench.metrics.summary import SERVER_COLUMNS

ID_COLUMNS = ("run_id", "config_id", "config_label", "point_id", "load_kind", "target")
STATUS_COLUMNS = (
    "server_metrics", "valid", "invalid_reason", "start_time", "end_time", "raw_report",
)


def point_columns(varied_args: list[str]) -> list[str]:
    """Identity, one column per varied server arg, client stats, server stats, validity."""
    return [
        *ID_COLUMNS,
        *varied_args,
        *(c for c in CLIENT_COLUMNS if c != "client_warnings"),
        *SERVER_COLUMNS,
        *STATUS_COLUMNS,
        "client_warnings",
    ]
