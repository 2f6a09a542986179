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
