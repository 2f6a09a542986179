"""points/cells.py: the typed parts of a point's row match points.csv's columns, and the
driver boundary refuses what the row has no place for."""

from __future__ import annotations

import math

import pytest

from tunebench.points import cells, columns
from tunebench.points.cells import (
    CellError,
    PointRow,
    client_cells,
    request_samples,
    stored_client_cells,
)
from tunebench.points.row import PointId, build_row


def keys(typed: type) -> tuple[str, ...]:
    return tuple(typed.__annotations__)


@pytest.mark.parametrize(
    ("typed", "names"),
    [
        (cells.ClientStats, columns.CLIENT_COLUMNS),
        (cells.ServerCells, columns.SERVER_COLUMNS),
        (cells.CostCells, columns.COST_COLUMNS),
        (cells.EnergyCells, columns.ENERGY_COLUMNS),
        (cells.RooflineCells, columns.ROOFLINE_COLUMNS),
        (cells.PrefixCells, columns.PREFIX_COLUMNS),
        (cells.SessionCells, columns.SESSION_COLUMNS),
        (cells.MachineCells, columns.MACHINE_COLUMNS),
        (cells.SloCells, columns.SLO_COLUMNS),
        (cells.LimitCells, columns.LIMIT_COLUMNS),
        (cells.SampleCells, columns.SAMPLE_COLUMNS),
        (cells.StatusCells, columns.STATUS_COLUMNS),
    ],
)
def test_each_part_declares_its_columns_in_order(typed: type, names: tuple[str, ...]) -> None:
    assert keys(typed) == names


def test_the_row_declares_every_fixed_column_and_nothing_else() -> None:
    fixed = set(columns.point_columns([])) | {"strategy"}
    assert set(keys(cells.PointCells)) == fixed
    assert set(keys(cells.ClientLoad)) == set(columns.CLIENT_LOAD_COLUMNS)
    trace = set(keys(cells.TraceSent)) | set(keys(cells.ArrivalLag)) | set(keys(cells.TraceFit))
    assert trace == set(columns.TRACE_COLUMNS)


def test_text_columns_are_declared_as_text() -> None:
    declared = {k: cells.declared_type(a) for k, a in cells.PointCells.__annotations__.items()}
    text = {k for k, a in declared.items() if a.startswith("str")}
    # `repeat` is an identity column that analysis reads as text; the row writes a number
    assert text == (columns.TEXT_COLUMNS & set(declared)) - {"repeat"} | {"strategy"}
    for name in columns.BOOL_COLUMNS:
        assert declared[name].startswith("bool"), name


def test_a_driver_column_the_row_does_not_declare_is_refused_by_name() -> None:
    with pytest.raises(CellError, match=r"report\.json: not a client column: ttft_p42_ms"):
        client_cells({"ttft_p50_ms": 1.0, "ttft_p42_ms": 2.0}, "report.json")
    with pytest.raises(CellError, match="requests_ok is list"):
        client_cells({"requests_ok": [1]}, "report.json")
    assert client_cells({"requests_ok": 3, "client_warnings": "", "itl_p99_ms": math.nan}, "r") == {
        "requests_ok": 3,
        "client_warnings": "",
        "itl_p99_ms": None,
    }


def test_a_stored_row_gives_its_client_columns_as_numbers_again() -> None:
    stored = {
        "load_kind": "concurrent",
        "requests_ok": "12",
        "ttft_p50_ms": "3.25",
        "client_warnings": "",
        "load_driver": "guidellm",
        "valid": "True",  # a verdict: judged afresh, not carried
        "kv_usage_mean": "0.5",  # the server's: scraped afresh
    }
    assert stored_client_cells(stored, "recorded") == {
        "requests_ok": 12,
        "ttft_p50_ms": 3.25,
        "client_warnings": "",
        "load_driver": "guidellm",
    }
    with pytest.raises(CellError, match="not a number: 'fast'"):
        stored_client_cells({"ttft_p50_ms": "fast"}, "recorded")


def test_build_row_gives_typed_cells_args_and_turns_apart() -> None:
    row = build_row(
        PointId("r1", "c1", "c1 mns=8", "concurrent-2", "concurrent"),
        {"max-num-seqs": 8, "enable-prefix-caching": True},
        {"target": 2, "strategy": "concurrent", "requests_ok": 10, "requests_failed": 0},
        [],
        {"server_samples": 0},
        turns={"turn1_requests": 5},
    )
    assert isinstance(row, PointRow)
    assert row.args == {"max-num-seqs": "8", "enable-prefix-caching": "true"}
    assert row.turns == {"turn1_requests": 5}
    assert "strategy" not in row.cells and row.cells["target"] == 2
    assert row.cells["valid"] is True and row.cells["server_metrics"] == "absent"
    flat = row.csv_cells()
    assert flat["max-num-seqs"] == "8" and flat["turn1_requests"] == 5
    assert flat["requests_ok"] == 10


def test_requests_from_elsewhere_are_typed_samples_or_refused_by_name() -> None:
    drawn = [{"ttft_ms": 12.5, "output_tokens": 64}, {"ttft_ms": 13.0, "output_tokens": 64}]
    assert request_samples(drawn, "recorded c1") == drawn
    with pytest.raises(CellError, match="recorded c1: not a request column: ttft_p50"):
        request_samples([{"ttft_p50": 12.5}], "recorded c1")
    assert set(keys(cells.RequestSample)) >= set(columns.REQUEST_COLUMNS) - {"point_id", "repeat"}
