"""compare: alignment, bootstrap verdicts, regression gate, crossover, formats, errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import FIXTURES
from tunebench.analysis.api import compare
from tunebench.analysis.compare import crossover_points
from tunebench.testing import make_synthetic_run


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    """Two real GuideLLM 0.8.1 reports (max-num-seqs 8 and 2, concurrency 1 and 8) as runs."""
    from tunebench.importers import import_results

    root = tmp_path_factory.mktemp("runs")
    import_results([FIXTURES / "guidellm/v0.8.1-mns8-c1-c8.json"], "mns8", root)
    import_results([FIXTURES / "guidellm/v0.8.1-mns2-c1-c8.json"], "mns2", root)
    return root


def test_a_run_compared_with_itself_has_no_significant_change(real_runs, cli):
    result = compare(["mns2", "mns2"], root=real_runs)
    assert set(result.rows["verdict"]) == {"no significant change"}
    assert len(result.rows) == 2 * 7  # 2 points x the 7 default metrics
    gate = cli("compare", "mns2", "mns2", "--root", str(real_runs), "--fail-on-regression", "5")
    assert gate.returncode == 0, gate.stderr
    assert "worse" not in gate.stdout


def test_a_real_regression_is_detected(real_runs, cli):
    result = compare(["mns8", "mns2"], root=real_runs, metrics=["ttft_p50", "e2e_p95"])
    at8 = result.rows[result.rows["target"] == 8].set_index("metric")
    assert at8.loc["ttft_p50", "verdict"] == "worse"
    assert at8.loc["ttft_p50", "ci_low_pct"] > 0 and at8.loc["ttft_p50", "change_pct"] > 50
    gate = cli(
        "compare",
        "mns8",
        "mns2",
        "--root",
        str(real_runs),
        "-m",
        "ttft_p50",
        "--fail-on-regression",
        "5",
    )
    assert gate.returncode == 1
    assert "significantly worse by more than 5%" in gate.stderr
    # the reverse direction is an improvement at 8 streams
    reverse = cli(
        "compare", "mns2", "mns8", "--root", str(real_runs), "-m", "ttft_p50", "--format", "json"
    )
    assert reverse.returncode == 0
    rows = json.loads(reverse.stdout)["rows"]
    assert [r["verdict"] for r in rows if r["target"] == 8] == ["better"]


def test_synthetic_effects_and_by(tmp_path):
    make_synthetic_run(tmp_path, "grid", configs=3, slowdown={2: 1.5}, seed=1)
    result = compare(["grid"], by="max-num-seqs", root=tmp_path, metrics=["ttft_p50", "itl_p50"])
    rows = result.rows
    slow = rows[rows["candidate"] == "max-num-seqs=6"]
    assert (slow[slow["metric"] == "itl_p50"]["verdict"] == "worse").all()  # 1.5x slower
    same = rows[(rows["candidate"] == "max-num-seqs=4") & (rows["metric"] == "itl_p50")]
    assert (same["verdict"] == "no significant change").all()  # same distribution
    assert result.args_differ == {"max-num-seqs": ["2", "4", "6"]}
    with_base = compare(["grid"], by="max-num-seqs", baseline="6", root=tmp_path)
    assert with_base.baseline == "max-num-seqs=6"


def test_repeats_are_bootstrapped_over_rows():
    from tunebench.analysis.compare import METRICS, Side, compare_sides

    def side(name, values):
        points = pd.DataFrame(
            {
                "config_id": "c1",
                "point_id": [f"p{i}" for i in range(len(values))],
                "load_kind": "concurrent",
                "target": 4.0,
                "output_tok_s": values,
            }
        )
        return Side(name, points, pd.DataFrame())

    result = compare_sides(
        [side("a", [100, 102, 98, 101]), side("b", [80, 82, 79, 81])], [METRICS["output_tok_s"]]
    )
    row = result.rows.iloc[0]
    assert row["verdict"] == "worse" and row["n_a"] == 4
    assert row["change_pct"] == pytest.approx((80.5 / 100.25 - 1) * 100)


def test_crossover_is_interpolated():
    xs = np.array([1, 2, 4, 8.0])
    a = np.array([10, 20, 40, 80.0])
    b = np.array([5, 15, 45, 120.0])
    assert crossover_points(xs, a, b) == [pytest.approx(3.0)]
    assert crossover_points(xs, a, a * 2) == []


def test_crossover_between_configurations(tmp_path):
    # max-num-seqs 2 is faster per request (0.6x) but queues beyond 2 streams; max-num-seqs
    # 4 queues only beyond 4: their TTFT curves cross between 2 and 4 streams.
    make_synthetic_run(tmp_path, "cross", configs=2, streams=(1, 2, 4, 8, 16), slowdown={0: 0.6})
    result = compare(["cross"], by="max-num-seqs", root=tmp_path)
    crossings = [x for x in result.crossovers if x["metric"] == "ttft_p50_ms"]
    assert len(crossings) == 1, result.crossovers
    assert 2 < crossings[0]["target"] < 4
    assert crossings[0]["better_below"] == "max-num-seqs=2"
    assert crossings[0]["better_above"] == "max-num-seqs=4"


def test_formats(real_runs, cli):
    for fmt, check in (
        ("json", lambda out: json.loads(out)["baseline"].endswith("mns8")),
        (
            "csv",
            lambda out: out.splitlines()[0].startswith(
                "baseline,candidate,load_kind,target,metric"
            ),
        ),
        ("markdown", lambda out: "| candidate | point | metric |" in out),
        ("table", lambda out: "verdict" in out),
    ):
        result = cli("compare", "mns8", "mns2", "--root", str(real_runs), "--format", fmt)
        assert result.returncode == 0, result.stderr
        assert check(result.stdout), (fmt, result.stdout[:300])


def test_plot_overlay(real_runs, cli, tmp_path):
    out = tmp_path / "overlay.html"
    result = cli("compare", "mns8", "mns2", "--root", str(real_runs), "--plot", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_text().count("data:image/png;base64,") == 2
    png = tmp_path / "overlay.png"
    assert (
        cli("compare", "mns8", "mns2", "--root", str(real_runs), "--plot", str(png)).returncode == 0
    )
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "args,message",
    [
        (["mns8", "mns2", "-m", "ttft_p42"], "--metric 'ttft_p42' is unknown; use one of ttft_p50"),
        (["mns8"], "give two or more runs, or one run with --by ARG"),
        (["mns8", "--by", "max-num-seqs"], "--by 'max-num-seqs': not a varied arg"),
        (["nope", "mns2"], "no run 'nope'"),
    ],
)
def test_errors_are_one_line(real_runs, cli, args, message):
    result = cli("compare", *args, "--root", str(real_runs))
    assert result.returncode in (1, 2)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
