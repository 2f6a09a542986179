"""compare: alignment, verdicts with the right method per evidence, the regression gate,
crossover, formats, errors. A/A pairs are independent draws (never a run against itself);
the many-seed calibration is tests/unit/test_compare_stats.py and
benchmarks/compare_calibration.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from tests.conftest import FIXTURES
from tunebench.analysis.api import compare
from tunebench.analysis.compare import DEFAULT_RUN_CV, Side, compare_sides
from tunebench.analysis.compare_metrics import DEFAULT_METRICS, METRICS
from tunebench.analysis.crossovers import crossover_points
from tunebench.analysis.gate import describe_gate, regression_gate
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
    # fail closed: a candidate whose every point is invalid cannot pass the gate
    gate = regression_gate(result, 5)
    assert gate["rows_gated"] == 0 and gate["verdict"] == "unverified" and not gate["passed"]
    assert any("3 candidate point(s) invalid" in cause for cause in gate["causes"])
    # the opt-out is named; with nothing left to gate the gate still cannot pass
    allowed = regression_gate(result, 5, allow_invalid=True)
    assert allowed["opted_out"] == ["--allow-invalid"] and allowed["verdict"] == "unverified"
    assert allowed["causes"] == ["no row could be judged: nothing was compared"]
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
    # throughput, TTFT and ITL against the offered load, TTFT against the throughput
    assert out.read_text().count("data:image/png;base64,") == 4
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


def _one_invalid_point(name: str, seed: int) -> Side:
    found = side(name, seed)
    points = found.points.copy()
    invalid = points["point_id"] == "concurrent-8"
    points.loc[invalid, "valid"] = False
    points.loc[invalid, "invalid_reason"] = "outputs were cut: 12 of 200 shorter than asked"
    return Side(found.name, points, found.requests)


def test_one_invalid_candidate_point_fails_the_gate_unless_allowed_by_name():
    result = compare_sides([side("a", 1), _one_invalid_point("b", 2)], DEFAULT)
    gate = regression_gate(result, 5)
    assert gate["verdict"] == "unverified" and gate["regressions"] == 0
    assert gate["invalid_points"] == [
        "b concurrent 8: outputs were cut: 12 of 200 shorter than asked"
    ]
    allowed = regression_gate(result, 5, allow_invalid=True)
    assert allowed["verdict"] == "no-regression" and allowed["opted_out"] == ["--allow-invalid"]
    assert "accepted by --allow-invalid" in describe_gate(allowed)
    # an invalid baseline point blames nobody: its rows are listed as not judged
    baseline_bad = compare_sides([_one_invalid_point("a", 1), side("b", 2)], DEFAULT)
    gate = regression_gate(baseline_bad, 5)
    assert gate["verdict"] == "no-regression" and not gate["invalid_points"]
    assert any("A invalid: outputs were cut" in line for line in gate["not_judged"])


def test_a_missing_candidate_point_fails_the_gate_unless_allowed_by_name():
    result = compare_sides([side("a", 1), side("b", 2, points=(1, 4))], DEFAULT)
    assert result.missing == [
        {"candidate": "b", "point": "concurrent 8", "load_kind": "concurrent"}
    ]
    gate = regression_gate(result, 5)
    assert gate["verdict"] == "unverified"
    assert gate["causes"][0].startswith(
        "1 baseline point(s) missing from the candidate (b concurrent 8)"
    )
    assert regression_gate(result, 5, allow_missing=True)["verdict"] == "no-regression"
    # a candidate with no point in common: every point missing, still a comparison that fails
    none_left = compare_sides([side("a", 1, points=(1,)), side("b", 2, points=(4,))], DEFAULT)
    assert none_left.rows.empty and len(none_left.missing) == 1
    assert regression_gate(none_left, 5)["verdict"] == "unverified"


def test_a_candidate_failing_ten_percent_of_requests_fails_on_the_error_rate_threshold():
    # valid points (as if the validity rule allowed 10%): the error rate alone must fail it
    result = compare_sides([side("a", 1), side("b", 2, failed=22)], DEFAULT)
    gate = regression_gate(result, 5)
    assert gate["verdict"] == "regression" and gate["worst"]["unit"] == "pp"
    assert gate["error_rate_threshold_pp"] == 1.0
    # the same difference under a 15 pp threshold is no regression
    assert regression_gate(result, 5, error_rate_pp=15)["verdict"] == "no-regression"


def failing_side(name: str, seed: int, rate: float, rng: np.random.Generator) -> Side:
    """A side whose every point fails an independent binomial draw of its 200 requests."""
    found = side(name, seed)
    points = found.points.assign(requests_failed=rng.binomial(200, rate, len(found.points)))
    return Side(found.name, points, found.requests)


def test_error_rate_threshold_false_fails_on_independent_draws_over_many_seeds():
    """A/A: both sides fail 2% of their requests, each count an independent binomial draw."""
    rng = np.random.default_rng(7)
    fails = 0
    seeds = 200
    for seed in range(seeds):
        a = failing_side("a", 2 * seed, 0.02, rng)
        b = failing_side("b", 2 * seed + 1, 0.02, rng)
        result = compare_sides([a, b], [METRICS["error_rate"]], seed=seed)
        fails += regression_gate(result, 5)["verdict"] != "no-regression"
    assert fails / seeds <= 0.05


@pytest.mark.parametrize("rise, expected", [(0.03, 0.36), (0.06, 0.95)])
def test_error_rate_threshold_power_on_known_rises(rise, expected):
    """2% vs 2% + rise errors at 3 points of 200 requests. The expected power is the normal
    law's for the pooled row (SE of the difference over 600 requests a side, 1 pp threshold,
    Holm's alpha/4 for its first of 4 rows), not the gate's own arithmetic."""
    from scipy import stats as sps

    se = math.sqrt((0.02 * 0.98 + (0.02 + rise) * (0.98 - rise)) / 600)
    analytic = sps.norm.sf(sps.norm.ppf(1 - 0.05 / 4) - (rise - 0.01) / se)
    assert analytic == pytest.approx(expected, abs=0.02)
    rng = np.random.default_rng(11)
    caught = 0
    for seed in range(100):
        a = failing_side("a", 2 * seed, 0.02, rng)
        b = failing_side("b", 2 * seed + 1, 0.02 + rise, rng)
        result = compare_sides([a, b], [METRICS["error_rate"]], seed=seed)
        caught += regression_gate(result, 5)["verdict"] == "regression"
    assert abs(caught / 100 - analytic) <= 0.12


def test_the_gate_always_says_its_verdict_what_it_gated_and_what_it_can_detect():
    gate = regression_gate(compare_sides([side("a", 1), side("b", 2)], DEFAULT), 5)
    text = describe_gate(gate)
    first = text.splitlines()[0]
    assert first.startswith("gate: pass:") and f"{gate['rows_gated']} rows gated" in first
    ttft = gate["detectable"]["ttft_p50"]
    assert ttft["now"] > 5  # one run per side: the assumed run-to-run spread widens it
    assert ttft["repeats"] in (3, 5, 10) and ttft["with_repeats"] < ttft["now"]
    assert f"can detect TTFT p50 ms changes >= {ttft['now']:g}%" in text
    assert f"with `repeats: {ttft['repeats']}` about {ttft['with_repeats']:g}%" in text
    assert "not judged: 3 x TTFT p95 ms: too few samples" not in text  # 200 requests suffice


def test_percentile_rows_of_runs_without_samples_say_the_samples_are_missing():
    a, b = side("a", 1), side("b", 2)
    bare = Side(b.name, b.points, b.requests.iloc[0:0])
    result = compare_sides([a, bare], [METRICS["ttft_p50"]])
    assert result.rows["verdict"].str.contains("no per-request samples on side B").all()
    assert (result.rows["n_b"] == 0).all()


def test_detectable_change_matches_the_power_it_claims():
    """Draw changes from the row's own t model at the detectable size and test them as the
    gate does (worse by more than 5%): 80% are caught, for a latency and a throughput."""
    from tunebench.analysis.gate import detectable_change
    from tunebench.analysis.stats import Change

    se, df, alpha = 0.05, 30.0, 0.01
    rng = np.random.default_rng(3)
    for higher_is_worse in (True, False):
        size = detectable_change(
            Change(0.0, -0.1, 0.1, "t", 100, 100, _t=(0.0, se, df)), alpha, 0.05, higher_is_worse
        )
        true = np.log1p(size if higher_is_worse else -size)
        caught = 0
        for centre in true + se * rng.standard_t(df, 4000):
            drawn = Change(0.0, -0.1, 0.1, "t", 100, 100, _t=(float(centre), se, df))
            caught += drawn.p_worse(0.05, higher_is_worse) < alpha
        assert 0.77 <= caught / 4000 <= 0.83


def test_an_unverified_candidate_point_fails_the_gate_unless_allowed_by_name():
    found = side("b", 2)
    points = found.points.assign(unverified_reason="no server metrics")
    result = compare_sides([side("a", 1), Side("b", points, found.requests)], DEFAULT)
    gate = regression_gate(result, 5)
    assert gate["verdict"] == "unverified"
    assert gate["causes"] == [
        "3 candidate point(s) unverified (first: b concurrent 1: no server metrics); "
        "--allow-unverified accepts that"
    ]
    allowed = regression_gate(result, 5, allow_unverified=True)
    assert allowed["verdict"] == "no-regression"
    assert "  unverified: b concurrent 8: no server metrics" in describe_gate(allowed)
    # the baseline's own blind spots do not fail the candidate
    base = side("a", 1)
    blind_base = Side("a", base.points.assign(server_metrics="absent"), base.requests)
    assert regression_gate(compare_sides([blind_base, side("b", 2)], DEFAULT), 5)["passed"]


def test_imported_runs_are_unverified_and_the_gate_says_so(tmp_path, cli):
    report = FIXTURES / "guidellm/v0.8.1-mns2-c1-c8.json"
    for name in ("base", "new"):
        assert cli("import", str(report), "--name", name, "--root", str(tmp_path)).returncode == 0
    shown = cli("show", "new", "--root", str(tmp_path))
    assert "unv: 2 point(s) unverified: imported: no server metrics" in shown.stdout
    gate = cli("compare", "base", "new", "--root", str(tmp_path), "--fail-on-regression", "5")
    assert gate.returncode == 1
    assert "gate: FAIL (unverified" in gate.stderr and "--allow-unverified" in gate.stderr
    allowed = cli(
        "compare", "base", "new", "--root", str(tmp_path), "--fail-on-regression", "5",
        "--allow-unverified",
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert "gate: pass" in allowed.stderr and "accepted by --allow-unverified" in allowed.stderr
    best = cli("results", "new", "--root", str(tmp_path))
    assert '"unverified":["imported: no server metrics, args not read back"]' in best.stdout


def test_each_note_is_printed_once_with_its_metric():
    from tunebench.report.compare import notes

    result = compare_sides([side("a", 1, n=50), side("b", 2, n=50)], DEFAULT)
    found = notes(result)
    assert "TTFT p95 ms: too few samples: need 72 per side for p95" in found
    assert "too few samples: need 72 per side for p95" not in found  # not again, bare
    assert len(found) == len(set(found))
