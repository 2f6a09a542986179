"""Runs that hold different configurations: the error names the configurations one run has
and the other lacks and how to compare the ones they share (`--common`), which does that."""

from __future__ import annotations

import pytest

from tunebench.analysis.api import compare
from tunebench.errors import TunebenchError
from tunebench.testing import make_synthetic_run


@pytest.fixture
def two_and_three(tmp_path):
    a = make_synthetic_run(tmp_path, "a", configs=2, streams=(1, 8), requests_per_point=49)
    b = make_synthetic_run(tmp_path, "b", configs=3, streams=(1, 8), requests_per_point=49)
    return tmp_path, a.path.name, b.path.name


def test_the_error_names_what_differs_and_how_to_compare_the_rest(cli, two_and_three):
    root, a, b = two_and_three
    result = cli("compare", a, b, "--root", str(root))
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert f"{b} alone has max-num-seqs=6" in line
    assert "compare the 2 they share with --common" in line


def test_common_compares_the_configurations_both_hold(cli, two_and_three):
    root, a, b = two_and_three
    result = compare([a, b], root=root, common=True, metrics=["ttft_p50"])
    assert sorted(set(result.rows["config_label"])) == ["max-num-seqs=2", "max-num-seqs=4"]
    assert any("left out: max-num-seqs=6" in w for w in result.warnings)
    shown = cli("compare", a, b, "--root", str(root), "--common", "-m", "ttft_p50")
    assert shown.returncode == 0, shown.stderr
    assert "left out: max-num-seqs=6" in shown.stdout


def test_runs_sharing_no_configuration_say_so(tmp_path):
    a = make_synthetic_run(tmp_path, "a", configs=2, streams=(1,), requests_per_point=20)
    b = make_synthetic_run(tmp_path, "b", configs=2, streams=(1,), requests_per_point=20)
    points = b.layout.points  # the same runs, b's configurations relabelled
    points.write_text(points.read_text().replace("max-num-seqs=", "other="))
    with pytest.raises(TunebenchError, match="they share none"):
        compare([a.path.name, b.path.name], root=tmp_path, common=True)
