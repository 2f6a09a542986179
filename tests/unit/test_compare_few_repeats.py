"""Intervals over two repeats a side: what compare prints stays readable (a bound past ±999%
reads ">+999") and a note says why they are so wide (one degree of freedom)."""

from __future__ import annotations

from tunebench.analysis.api import compare
from tunebench.report.compare import _ci, compare_markdown, notes
from tunebench.testing.runs import make_repeats_grid_run


def test_a_bound_past_999_percent_is_capped_in_print():
    row = {"ci_low_pct": -100.0, "ci_high_pct": 14980554104.6, "unit": "%"}
    assert _ci(row) == "[-100.0, >+999]%"
    assert _ci({"ci_low_pct": -1500.0, "ci_high_pct": 3.25, "unit": "pp"}) == "[<-999, +3.2] pp"
    assert _ci({"ci_low_pct": -12.34, "ci_high_pct": 56.78, "unit": "%"}) == "[-12.3, +56.8]%"


def _runs(tmp_path, repeats: int):
    grid = {"mns=4": ({"max-num-seqs": 4}, 8.0)}
    a = make_repeats_grid_run(tmp_path, grid, repeats=repeats, seed=1, run_sd=0.4, name="a")
    b = make_repeats_grid_run(tmp_path, grid, repeats=repeats, seed=2, run_sd=0.4, name="b")
    return compare([a.path.name, b.path.name], root=tmp_path)


def test_two_repeats_say_they_give_one_degree_of_freedom(tmp_path):
    result = _runs(tmp_path, repeats=2)
    text = " ".join(notes(result))
    assert "intervals over 2 repeats a side rest on one degree of freedom" in text
    assert "`repeats: 3` or more narrows them" in text
    assert "one degree of freedom" in compare_markdown(result)


def test_three_repeats_need_no_such_note(tmp_path):
    assert "degree of freedom" not in " ".join(notes(_runs(tmp_path, repeats=3)))
