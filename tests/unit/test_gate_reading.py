"""The gate read beside the table: rows the table marks "worse" (each row's own interval
against no change) that do not fail `--fail-on-regression` (a threshold, Holm-corrected over
every gated row) are counted and explained, so a pass never reads as a contradiction."""

from __future__ import annotations

from tunebench.analysis.api import compare
from tunebench.analysis.gate import describe_gate, regression_gate
from tunebench.testing import make_synthetic_run


def test_rows_marked_worse_under_a_passing_gate_are_explained(tmp_path):
    a = make_synthetic_run(tmp_path, "a", configs=2, requests_per_point=49, seed=1)
    b = make_synthetic_run(
        tmp_path, "b", configs=2, requests_per_point=49, seed=2, slowdown={1: 1.3}
    )
    result = compare([a.path.name, b.path.name], root=tmp_path)
    gate = regression_gate(result, 5.0)
    worse = int((result.rows["verdict"] == "worse").sum())
    assert gate["passed"] and worse > 0  # the case a user saw: red rows, then "gate: pass"
    text = describe_gate(gate)
    assert f"  {worse} row(s) marked worse do not fail the gate: " in text
    found = gate["worse_not_failing"]
    assert found["rows"] == worse and 0 < found["beyond_threshold"] < worse
    assert (
        f"{found['beyond_threshold']} lie beyond the threshold (5%; error rate 1pp) row by row "
        f"but are not significant after correction for {gate['rows_gated']} gated rows (Holm)"
    ) in text
    assert f"{worse - found['beyond_threshold']} are worse, but not surely by more than" in text


def test_no_line_when_no_row_is_marked_worse(tmp_path):
    a = make_synthetic_run(tmp_path, "a", configs=1, streams=(1, 8), requests_per_point=49)
    result = compare([a.path.name, a.path.name], root=tmp_path)
    assert "marked worse" not in describe_gate(regression_gate(result, 5.0))
