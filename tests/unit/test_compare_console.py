"""`tunebench compare` on the console fits the terminal as `tunebench show` does: short names
of runs and configurations with a legend, one line per row, the columns that do not fit
dropped and named. The expected cells come from the runs' shapes (tunebench/testing/runs.py
DEMO_SHAPE), not from the renderer."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd

from tests.conftest import FIXTURES, invoke
from tunebench.report.compare import side_names
from tunebench.testing import make_demo_like_run, make_synthetic_run

NARROW = {"COLUMNS": "100"}


def table_rows(out: str) -> list[list[str]]:
    """The cells of each body row of the table (the lines between │ borders)."""
    return [
        [c.strip() for c in line.strip("│").split("│")]
        for line in out.splitlines()
        if line.startswith("│")
    ]


def compare_json(*args: str) -> list[dict]:
    result = invoke("compare", *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["rows"]


def test_two_demo_runs_at_100_columns_one_line_per_row_with_short_names(tmp_path):
    make_demo_like_run(tmp_path, name="base")
    make_demo_like_run(tmp_path, name="new")
    result = invoke("compare", "base", "new", "--root", str(tmp_path), env=NARROW)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    # the run ids are dated; the title names the runs by their names, the legend in full
    assert "A: base (baseline)   B: new" in result.stdout
    runs_line = next(line for line in lines if line.startswith("runs: "))
    assert "base = 2" in runs_line and "-base" in runs_line and "new = 2" in runs_line
    assert "legend: mns = max-num-seqs" in result.stdout
    assert "…" not in result.stdout  # nothing cut short
    rows = table_rows(result.stdout)
    # one candidate: no candidate column; every compared row is one line
    assert len(rows) == len(compare_json("base", "new", "--root", str(tmp_path)))
    assert len(rows) == 2 * 4 * 8  # 2 configurations x 4 points x 8 default metrics
    assert sum(r[:2] == ["conc 8 · mns=8", "TTFT p95 ms"] for r in rows) == 1
    # the same run twice: the interval is printed whole on one line
    row = next(r for r in rows if r[:2] == ["conc 1 · mns=2", "error rate %"])
    assert row[2:5] == ["0.00", "0.00", "+0.0 pp"] and row[5].endswith("pp")
    assert row[-1] == "n.s."
    assert "n.s. = no significant change" in result.stdout


def test_by_arg_names_the_sides_short_and_reads_the_demo_shape(tmp_path):
    store = make_demo_like_run(tmp_path)
    result = invoke(
        "compare", store.path.name, "--root", str(tmp_path), "--by", "max-num-seqs",
        env=NARROW,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 100
    assert "A: mns=2 (baseline)   B: mns=8" in result.stdout
    assert "runs: " not in result.stdout  # a --by side is spelled out by the arg legend
    rows = table_rows(result.stdout)
    at8 = next(r for r in rows if r[:2] == ["conc 8", "TTFT p95 ms"])
    # DEMO_SHAPE: TTFT p95 618 ms with max-num-seqs=2, 114 ms with 8 (to the quantile grid)
    a, b = float(at8[2]), float(at8[3])
    assert abs(a - 618) / 618 < 0.03 and abs(b - 114) / 114 < 0.03
    assert at8[4].startswith("-8") and at8[4].endswith("%")  # about -81%
    assert at8[-1] == "better"
    out8 = next(r for r in rows if r[:2] == ["conc 8", "output tok/s"])
    assert (out8[2], out8[3]) == ("406.00", "541.00") and out8[-1] == "better"


def test_a_fixture_of_eight_candidates_drops_the_interval_and_names_it():
    result = invoke("compare", str(FIXTURES / "grid-cpu-repeats"), "--by", "variant", env=NARROW)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    header = next(line for line in lines if line.startswith("┃"))
    assert [h.strip() for h in header.strip("┃").split("┃")] == [
        "candidate", "point", "metric", "A", "B", "change", "verdict",
    ]  # fmt: skip
    assert (
        "not shown at this width: 95% CI (--format json, csv or markdown has every column)"
        in result.stdout
    )
    assert "A: defaults (baseline)   B: the row's candidate" in result.stdout
    rows = table_rows(result.stdout)
    assert len(rows) == len(compare_json(str(FIXTURES / "grid-cpu-repeats"), "--by", "variant"))
    assert {r[0] for r in rows} == {
        "mns1-mnbt32", "mns2-mnbt32", "mns4-mnbt32", "mns8-mnbt32",
        "mns1-mnbt128", "mns2-mnbt128", "mns4-mnbt128", "mns8-mnbt128",
    }  # fmt: skip
    assert {r[1] for r in rows} >= {"conc 2", "poisson 4.5", "all points"}


def test_a_wide_terminal_shows_the_interval(tmp_path):
    make_synthetic_run(tmp_path, "grid", configs=2)
    result = invoke("compare", "grid", "--root", str(tmp_path), "--by", "max-num-seqs")
    assert result.returncode == 0, result.stderr
    assert "95% CI" in result.stdout and "not shown at this width" not in result.stdout
    assert any(r[5].startswith("[") for r in table_rows(result.stdout))


def test_runs_of_one_name_are_told_apart_by_their_time():
    def names(baseline: str, *candidates: str) -> dict[str, str]:
        fake = SimpleNamespace(baseline=baseline, rows=pd.DataFrame({"candidate": candidates}))
        return side_names(fake, {})

    assert names("20261126-101010-cpu-demo", "20261126-111111-cpu-demo") == {
        "20261126-101010-cpu-demo": "cpu-demo@101010",
        "20261126-111111-cpu-demo": "cpu-demo@111111",
    }
    # the same name and time on two dates: only the whole ids tell them apart
    same = names("20261125-101010-cpu-demo", "20261126-101010-cpu-demo")
    assert same == {n: n for n in same}
    assert names("max-num-seqs=2", "max-num-seqs=8") == {
        "max-num-seqs=2": "mns=2",
        "max-num-seqs=8": "mns=8",
    }
