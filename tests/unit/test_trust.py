"""One reading of a point's validity flags for every consumer (points/trust.py)."""

from __future__ import annotations

import pytest

from tunebench.points import trust
from tunebench.points.capacity import CapacitySearch


@pytest.mark.parametrize(
    "row, valid, limited, evidence",
    [
        ({"valid": "True", "client_limited": "False"}, True, False, True),
        ({"valid": True, "client_limited": True}, True, True, False),
        ({"valid": "False", "client_limited": "False"}, False, False, False),
        ({"valid": "false", "client_limited": ""}, False, False, False),
        ({}, False, False, False),  # a row that says nothing is no evidence
    ],
)
def test_flags_read_the_same_from_csv_and_memory(row, valid, limited, evidence):
    assert trust.is_valid(row) is valid
    assert trust.is_client_limited(row) is limited
    assert trust.is_server_evidence(row) is evidence


def test_an_invalid_probe_that_met_the_slo_is_no_capacity():
    search = CapacitySearch(start_rate=2, tolerance=0.25, max_probes=4)
    rate = search.next_rate()
    row = {"valid": False, "client_limited": False, "slo_met": True}
    search.tell(rate, trust.flag(row["slo_met"]), not trust.is_server_evidence(row), 0.5)
    assert search.capacity is None


def test_a_point_with_half_its_requests_failed_is_invalid_with_the_count():
    from tunebench.points.row import PointId, build_row

    point = PointId("r", "c1", "c1", "concurrent-2", "concurrent")
    client = {"target": 2, "requests_ok": 20, "requests_failed": 19, "achieved_concurrency": 2}
    row = build_row(point, {}, client, [], {}).csv_cells()
    assert row["valid"] is False
    assert row["invalid_reason"] == "requests failed: 19 of 39 (49%, a valid point allows 5%)"
    # 1 of 40: an incident, not a broken point
    fine = build_row(
        point, {}, {**client, "requests_ok": 39, "requests_failed": 1}, [], {}
    ).csv_cells()
    assert fine["valid"] is True and fine["invalid_reason"] == ""


def test_a_valid_point_that_could_not_be_checked_is_unverified_with_what():
    from tunebench.points.row import PointId, build_row

    point = PointId("r", "c1", "c1", "concurrent-2", "concurrent")
    client = {"target": 2, "requests_ok": 40, "requests_failed": 0, "achieved_concurrency": 2}
    blind = build_row(
        point, {}, client, [], {}, config_unverified=["block-size not read back"]
    ).csv_cells()
    assert blind["valid"] is True
    assert blind["unverified_reason"] == "no server metrics; block-size not read back"
    assert trust.unverified_reasons(blind) == ["no server metrics", "block-size not read back"]
    seen = build_row(point, {}, client, [], {"server_samples": 12}).csv_cells()
    assert seen["unverified_reason"] == "" and trust.unverified_reasons(seen) == []
    # a run stored before the column: a point without server metrics is unverified
    assert trust.unverified_reasons({"server_metrics": "absent"}) == ["no server metrics"]
    assert trust.unverified_reasons({"server_metrics": "present"}) == []
