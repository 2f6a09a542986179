"""The columns of points.csv, in order. Part of the stable run format (schema_version 1)."""

from __future__ import annotations

from tunebench.client_limit import CLIENT_COLUMNS as LIMIT_COLUMNS
from tunebench.load.guidellm_report import CLIENT_COLUMNS
from tunebench.metrics.summary import SERVER_COLUMNS
from tunebench.slo import SLO_COLUMNS

ID_COLUMNS = ("run_id", "config_id", "config_label", "point_id", "load_kind", "target")
STATUS_COLUMNS = (
    "server_metrics", "server_metrics_note", "valid", "invalid_reason", "start_time", "end_time", "raw_report",
)


def point_columns(varied_args: list[str]) -> list[str]:
    """Identity, varied server args, client stats, server stats, SLO, client-limited, validity."""
    return [
        *ID_COLUMNS,
        *varied_args,
        *(c for c in CLIENT_COLUMNS if c != "client_warnings"),
        *SERVER_COLUMNS,
        *SLO_COLUMNS,
        *LIMIT_COLUMNS,
        *STATUS_COLUMNS,
        "client_warnings",
    ]
