"""`tunebench results`: run id, best configuration and verdict of a run, for pipelines."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from tests.conftest import FIXTURES, invoke
from tunebench.analysis.best import MAX_BEST_CONFIG_BYTES, best_config, compact, compare_verdict
from tunebench.testing import make_synthetic_run

RECORDED_GRIDS = ["grid-cpu", "grid-cpu-repeats"]


def passing_bracket(grid: str) -> dict[str, tuple[float, float | None]]:
    """Read off points.csv, without the capacity rule: per configuration (pooling its
    repeats), the highest poisson rate up to which every recorded point met the SLO, and
    the next recorded rate above it (None: none). A rate where the client fell behind is
    no evidence either way: the read ends there."""
    by_config: dict[str, dict[float, bool | None]] = {}
    with open(FIXTURES / grid / "points.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["load_kind"] != "poisson":
                continue
            rates = by_config.setdefault(row["config_label"], {})
            rate = float(row["target"])
            if row["client_limited"] == "True":
                rates[rate] = None
            elif rates.get(rate, True) is not None:
                rates[rate] = rates.get(rate, True) and row["slo_met"] == "True"
    brackets = {}
    for label, rates in by_config.items():
        passed, missed = 0.0, None
        for rate in sorted(rates):
            if not rates[rate]:  # a miss, or no evidence
                missed = rate
                break
            passed = rate
        brackets[label] = (passed, missed)
    return brackets


@pytest.mark.parametrize("grid", RECORDED_GRIDS)
def test_results_names_a_best_the_recorded_points_support(grid):
    best = best_config(FIXTURES / grid)
    assert best["rule"] == "slo-capacity" and best["metric"] == "capacity_rps"
    brackets = passing_bracket(grid)
    top = max(passed for passed, _ in brackets.values())
    passed, missed = brackets[best["label"]]
    # the best passed up to the highest rate any configuration passed up to, and its
    # capacity lies between that rate and the next one recorded
    assert passed == top, (best, brackets)
    assert passed <= best["value"] <= (missed if missed is not None else passed), (best, brackets)
    # on grid-cpu the defaults' 8 req/s point met the SLO after lower rates missed it: luck,
    # not capacity; it used to be named best
    assert best["label"] != "defaults" or brackets["defaults"][0] > 0


def test_a_pass_above_a_miss_does_not_make_a_configuration_best():
    best = best_config(FIXTURES / "grid-cpu")
    assert (best["label"], best["value"]) == ("mns8-mnbt64", 5.086)


def test_run_without_slo_best_is_the_highest_output_tok_s(tmp_path):
    store = make_synthetic_run(tmp_path, configs=3, slowdown={0: 3.0, 2: 2.0})
    best = best_config(store.path)
    assert best["rule"] == "throughput" and best["metric"] == "output_tok_s"
    rows = [r for r in store.rows if r["valid"] and not r.get("client_limited")]
    top = max(rows, key=lambda r: r["output_tok_s"])
    assert (best["config_id"], best["point"]) == (top["config_id"], top["point_id"])
    assert best["args"] == {"max-num-seqs": int(top["config_label"].split("=")[1])}


def test_capacity_search_best_is_the_highest_capacity(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2)
    store.update_config("c1", capacity={"rate": 4.0, "probes": 5})
    store.update_config("c2", capacity={"rate": 6.5, "probes": 4, "client_bound": True})
    best = best_config(store.path)
    assert (best["config_id"], best["rule"], best["value"]) == ("c2", "capacity", 6.5)
    assert best["client_bound"] is True


def test_tune_run_best_is_the_studys_best_trial(tmp_path):
    store = make_synthetic_run(tmp_path, configs=2)
    (store.path / "tune-result.json").write_text(
        json.dumps(
            {
                "objective": "capacity",
                "objective_names": ["capacity_rps"],
                "improvement_pct": 42.123,
                "best": {
                    "trial": 1,
                    "config_id": "c2",
                    "values": [7.4321],
                    "args": {"max-num-seqs": 4, "max-model-len": 512},
                },
            }
        )
    )
    best = best_config(store.path)
    assert best == {
        "config_id": "c2",
        "label": "max-num-seqs=4",
        "model": "synthetic",
        "args": {"max-num-seqs": 4, "max-model-len": 512},
        "rule": "tune",
        "metric": "capacity_rps",
        "value": 7.432,
        "trial": 1,
        "improvement_pct": 42.12,
    }


def test_compact_stays_within_the_result_budget():
    big = {
        "config_id": "c1",
        "label": "x" * 800,
        "model": "m" * 800,
        "args": {"a": 1},
        "rule": "throughput",
        "metric": "output_tok_s",
        "value": 1.0,
    }
    text = compact(big)
    assert len(text.encode()) <= MAX_BEST_CONFIG_BYTES
    assert json.loads(text)["args"] == {"a": 1} and "model" not in json.loads(text)
    huge = {**big, "args": {f"arg{i}": "v" * 50 for i in range(100)}}
    assert json.loads(compact(huge)) == {
        "config_id": "c1",
        "rule": "throughput",
        "metric": "output_tok_s",
        "value": 1.0,
        "args_truncated": True,
    }
    assert compact(None) == "{}"


def test_compare_verdict_uses_the_gate_else_any_worse_metric():
    assert compare_verdict({"gate": {"verdict": "regression"}, "rows": []}) == "regression"
    assert (
        compare_verdict({"gate": {"verdict": "no-regression"}, "rows": [{"verdict": "worse"}]})
        == "no-regression"
    )
    assert compare_verdict({"rows": [{"verdict": "better"}, {"verdict": "worse"}]}) == "regression"
    assert compare_verdict({"rows": [{"verdict": "no significant change"}]}) == "no-regression"


def test_cli_writes_the_three_result_files_verbatim(tmp_path):
    run = tmp_path / "grid-cpu"
    shutil.copytree(FIXTURES / "grid-cpu", run)
    out = tmp_path / "results"
    result = invoke("results", "grid", "--root", str(tmp_path), "--to", str(out))
    assert result.returncode == 0, result.stderr
    assert (out / "run-id").read_text() == "grid-cpu"
    assert (out / "verdict").read_text() == "complete"
    best = (out / "best-config").read_text()
    assert not best.endswith("\n") and json.loads(best)["config_id"] == "c11"
    assert f"best-config: {best}" in result.stdout


@pytest.mark.parametrize(
    "slowdown,verdict,code", [(1.6, "regression", 1), (1.0, "no-regression", 0)]
)
def test_compare_gate_verdict_reaches_the_results(tmp_path, slowdown, verdict, code):
    store = make_synthetic_run(tmp_path, configs=2, slowdown={1: slowdown})
    compare_json = tmp_path / "cmp.json"
    compared = invoke(
        "compare",
        store.path.name,
        "--root",
        str(tmp_path),
        "--by",
        "max-num-seqs",
        "--fail-on-regression",
        "5",
        "--json",
        str(compare_json),
    )
    assert compared.returncode == code, compared.stderr
    gate = json.loads(compare_json.read_text())["gate"]
    assert gate["verdict"] == verdict and gate["threshold_pct"] == 5
    assert (gate["regressions"] > 0) == (verdict == "regression")
    assert json.loads(compare_json.read_text())["runs"] == [store.path.name]
    result = invoke(
        "results", store.path.name, "--root", str(tmp_path), "--compare-json", str(compare_json)
    )
    assert result.returncode == 0, result.stderr
    assert f"verdict: {verdict}" in result.stdout


def test_missing_compare_json_is_one_line_error(tmp_path):
    store = make_synthetic_run(tmp_path, configs=1)
    result = invoke(
        "results",
        store.path.name,
        "--root",
        str(tmp_path),
        "--compare-json",
        str(tmp_path / "nope.json"),
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "no such file" in result.stderr


def test_a_comparison_without_a_gate_is_unverified_where_the_candidate_was_not_compared():
    from tunebench.analysis.best import compare_verdict

    fine = {"rows": [{"verdict": "no significant change"}], "missing": []}
    assert compare_verdict(fine) == "no-regression"
    both_invalid = {"rows": [{"verdict": "excluded (A invalid: x; B invalid: y)"}]}
    assert compare_verdict(both_invalid) == "unverified"
    assert compare_verdict({"rows": [], "missing": [{"point": "concurrent 8"}]}) == "unverified"
    assert compare_verdict({"rows": [{"verdict": "worse"}]}) == "regression"
