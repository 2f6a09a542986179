"""compare: alignment, verdicts with the right method per evidence, the regression gate,
crossover, formats, errors. A/A pairs are independent draws (never a run against itself);
the many-seed calibration is tests/unit/test_compare_stats.py and
benchmarks/compare_calibration.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from tests.conftest import FIXTURES
from tunebench.analysis.api import compare
from tunebench.analysis.compare import (
    DEFAULT_METRICS,
    DEFAULT_RUN_CV,
    METRICS,
    Side,
    compare_sides,
    crossover_points,
)
from tunebench.analysis.gate import regression_gate
from tunebench.testing import make_synthetic_run
from tunebench.testing.latencies import stream_side

DEFAULT = [METRICS[m] for m in DEFAULT_METRICS]


def side(name: str, seed: int, slowdown: float = 0.0, **options) -> Side:
    return stream_side(name, seed, slowdown, **options)


def test_independent_draws_of_one_configuration_pass_the_gate_over_many_seeds():
    """Runs that differ by request-to-request noise and a run-to-run factor of the size
    compare assumes (DEFAULT_RUN_CV)."""
    fails = significant = 0
    for seed in range(40):
        a = side("a", 2 * seed, run_sd=DEFAULT_RUN_CV)
        b = side("b", 2 * seed + 1, run_sd=DEFAULT_RUN_CV)
        result = compare_sides([a, b], DEFAULT, seed=seed)
        fails += regression_gate(result, 5)["verdict"] == "regression"
        significant += result.rows["verdict"].isin(["worse", "better"]).sum()
    assert fails <= 2  # at most 5% of 40 compares
    # nominal 5%; 40 seeds' rows share their data, so the bound allows for that noise
    # (benchmarks/compare_calibration.py measures the rate over 200 seeds)
    assert significant / (40 * 3 * len(DEFAULT)) <= 0.08


def test_a_30_percent_slowdown_fails_the_gate_and_says_where():
    result = compare_sides([side("a", 1), side("b", 2, slowdown=0.3)], DEFAULT)
    gate = regression_gate(result, 5)
    # one run per side: the 6% run-to-run spread compare assumes makes the interval wide,
    # but 30% at 200 requests per point is still beyond doubt on some row
    assert gate["verdict"] == "regression" and gate["regressions"] >= 1
    assert gate["worst"]["change_pct"] > 5 and gate["worst"]["ci_low_pct"] > 0
    assert "Holm" in gate["rule"]


def test_a_candidate_failing_half_its_requests_fails_the_gate():
    result = compare_sides([side("a", 1), side("b", 2, failed=200)], DEFAULT)
    errors = result.rows[result.rows["metric"] == "error_rate"]
    assert (errors["verdict"] == "worse").all() and (errors["unit"] == "pp").all()
    assert errors["change_pct"].iloc[0] == pytest.approx(
        100 * 200 / (200 + errors["n_b"].iloc[0] - 200), rel=0.2
    )
    gate = regression_gate(result, 5)
    assert gate["verdict"] == "regression" and gate["worst"]["unit"] == "pp"


def test_a_point_invalid_for_its_failures_still_fails_the_gate_on_its_error_rate():
    # points/row.py marks a point with over 5% failed requests invalid: its latencies come
    # from the survivors, but the failures are evidence and must reach the gate.
    reason = "requests failed: 200 of 400 (50%, a valid point allows 5%)"
    result = compare_sides(
        [side("a", 1), side("b", 2, failed=200, valid=False, invalid_reason=reason)], DEFAULT
    )
    errors = result.rows[result.rows["metric"] == "error_rate"]
    others = result.rows[result.rows["metric"] != "error_rate"]
    assert (errors["verdict"] == "worse").all()
    assert others["verdict"].str.startswith("excluded (B invalid: requests failed").all()
    assert regression_gate(result, 5)["verdict"] == "regression"
    # another reason beside the failures excludes the error rate too
    both = f"max-model-len requested 512, server runs 256; {reason}"
    mixed = compare_sides(
        [side("a", 1), side("b", 2, failed=200, valid=False, invalid_reason=both)], DEFAULT
    )
    assert mixed.rows["verdict"].str.startswith("excluded").all()


def test_invalid_points_are_excluded_and_client_limited_ones_marked():
    result = compare_sides(
        [
            side("a", 1),
            side(
                "b", 2, valid=False, invalid_reason="max-model-len requested 512, server runs 256"
            ),
        ],
        DEFAULT,
    )
    assert result.rows["verdict"].str.startswith("excluded (B invalid: max-model-len").all()
    gate = regression_gate(result, 5)
    assert gate["rows_gated"] == 0 and gate["verdict"] == "no-regression"
    limited = compare_sides([side("a", 1), side("b", 2, client_limited=True)], DEFAULT)
    assert (limited.rows["client_limited"] == "B").all()
    assert regression_gate(limited, 5)["client_limited_rows"] > 0


def test_tail_percentiles_of_few_requests_have_no_verdict():
    result = compare_sides(
        [side("a", 1, n=50), side("b", 2, n=50, slowdown=1.0)],
        [METRICS["ttft_p95"], METRICS["ttft_p50"]],
    )
    p95 = result.rows[result.rows["metric"] == "ttft_p95"]
    assert p95["verdict"].str.startswith("n/a (too few samples: need 72 per side").all()
    assert (result.rows[result.rows["metric"] == "ttft_p50"]["verdict"] == "worse").all()


@pytest.mark.parametrize("repeats", [2, 3, 5])
def test_repeats_on_both_sides_compare_the_repeats(repeats):
    result = compare_sides(
        [side("a", 1, repeats=repeats), side("b", 2, repeats=repeats)],
        [METRICS["ttft_p50"], METRICS["output_tok_s"]],
    )
    assert set(result.rows["method"]) == {"Welch's t over repeats"}
    assert (result.rows["repeats_a"] == repeats).all()
    slower = compare_sides(
        [side("a", 1, repeats=repeats), side("b", 2, 0.5, repeats=repeats)], [METRICS["ttft_p50"]]
    )
    assert (slower.rows["verdict"] == "worse").sum() >= 2


def test_points_without_a_target_align_with_themselves(tmp_path):
    """A GuideLLM 0.3 report with one synchronous benchmark, imported twice."""
    from tests.unit.test_import import guidellm_03_report
    from tunebench.importers import import_results

    report = tmp_path / "sync.yaml"
    report.write_text(yaml.safe_dump(guidellm_03_report(kind="synchronous")))
    import_results([report], "first", tmp_path / "runs")
    import_results([report], "second", tmp_path / "runs")
    result = compare(["first", "second"], root=tmp_path / "runs")
    assert set(result.rows["point"]) == {"synchronous"}


def test_runs_from_different_hardware_are_flagged():
    a, b = side("a", 1), side("b", 2)
    a.host = {"cpu_model": "AMD EPYC", "cpu_flags": ["avx", "avx2"], "accelerator": "cpu"}
    b.host = {"cpu_model": "Intel Xeon", "cpu_flags": ["avx2", "avx512f"], "accelerator": "cpu"}
    (warning,) = compare_sides([a, b], [METRICS["ttft_p50"]]).warnings
    assert "different hardware" in warning and "AMD EPYC (avx2)" in warning
    assert "Intel Xeon (avx512)" in warning
    b.host = dict(a.host)
    assert compare_sides([a, b], [METRICS["ttft_p50"]]).warnings == []


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    """Two real GuideLLM 0.8.1 reports (max-num-seqs 8 and 2, concurrency 1 and 8) as runs."""
    from tunebench.importers import import_results

    root = tmp_path_factory.mktemp("runs")
    import_results([FIXTURES / "guidellm/v0.8.1-mns8-c1-c8.json"], "mns8", root)
    import_results([FIXTURES / "guidellm/v0.8.1-mns2-c1-c8.json"], "mns2", root)
    return root


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
    assert (
        "worse by more than 5% (Holm-corrected); worst: TTFT p50 ms at concurrent 8" in gate.stderr
    )
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
        ("csv", lambda out: out.splitlines()[0].startswith("baseline,candidate,point,load_kind")),
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


def test_rows_over_all_points_where_the_intervals_measure_all_their_variability():
    """Within-run intervals without an assumed spread, and repeats: one row per metric over
    every aligned point; with the default assumed spread (shared by the points): none."""
    a, b = side("a", 1), side("b", 2, slowdown=0.3)
    rows = compare_sides([a, b], DEFAULT, run_cv=0.0).rows
    over_all = rows["point"] == "all points"
    per_point = rows[~over_all & ~rows["verdict"].str.startswith("n/a")]
    counts = per_point.groupby("metric").size()
    assert set(rows[over_all]["metric"]) == set(counts[counts >= 2].index)
    assert len(rows[over_all]) >= 5
    itl = compare_sides([a, b], [METRICS["itl_p50"]], run_cv=0.0).rows
    one, over_all = itl.iloc[0], itl[itl["point"] == "all points"].iloc[0]
    assert over_all["note"] == "mean over 3 points" and over_all["verdict"] == "worse"
    width = over_all["ci_high_pct"] - over_all["ci_low_pct"]
    assert width < 0.8 * (one["ci_high_pct"] - one["ci_low_pct"])
    assumed = compare_sides([a, b], DEFAULT).rows
    assert "all points" not in set(assumed["point"])

    rep_a, rep_b = side("a", 1, repeats=3, run_sd=0.06), side("b", 2, repeats=3, run_sd=0.06)
    rows = compare_sides([rep_a, rep_b], [METRICS["ttft_p50"]]).rows
    over_all = rows[rows["point"] == "all points"].iloc[0]
    assert over_all["method"] == "Welch's t over repeats"
    assert over_all["note"] == "geometric mean over 3 points per repeat"
    assert (over_all["repeats_a"], over_all["repeats_b"]) == (3, 3)


def test_the_gate_counts_the_rows_over_all_points():
    result = compare_sides([side("a", 1), side("b", 2, slowdown=0.3)], DEFAULT, run_cv=0.0)
    gate = regression_gate(result, 5)
    assert gate["rows_gated"] == int((~result.rows["verdict"].str.startswith("n/a")).sum())
    assert gate["verdict"] == "regression"
