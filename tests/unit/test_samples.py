"""Percentile columns say when they rest on too few requests (points/samples.py)."""

from __future__ import annotations

from tunebench.points import samples


def test_the_counts_each_percentile_needs():
    assert [samples.needed(q) for q in (0.5, 0.9, 0.95, 0.99)] == [10, 36, 72, 368]


def test_a_short_point_names_its_thin_percentiles():
    row = {"requests_ok": 40, "ttft_p50_ms": 30.0, "ttft_p95_ms": 80.0, "e2e_p99_s": 1.2}
    assert samples.thin_percentiles(row) == "p95, p99: 40 requests, need 72, 368"
    row["requests_ok"] = 400
    assert samples.thin_percentiles(row) == ""


def test_columns_that_were_not_measured_are_not_named():
    row = {"requests_ok": 50, "ttft_p50_ms": 30.0, "ttft_p99_ms": "", "e2e_p95_s": None}
    assert samples.thin_percentiles(row) == ""


def test_every_percentile_column_of_points_csv_is_covered():
    columns = samples.percentile_columns()
    assert columns["ttft_p99_ms"] == 0.99 and columns["e2e_p50_s"] == 0.5
    assert columns["itl_p95_ms"] == 0.95 and "ttft_mean_ms" not in columns
