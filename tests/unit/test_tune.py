"""tunebench tune: search space, the ask/tell loop, pruning, resume, results and exports."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import optuna
import pytest
import yaml

from tests.conftest import FIXTURES
from tunebench.recorded.model import RecordedRun, true_capacity
from tunebench.runner import ConfigOutcome
from tunebench.seams.progress import SilentReporter
from tunebench.spec.models import Tune
from tunebench.spec.plan import ServerConfig
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import Manifest, RunKind
from tunebench.store.run import RunStore
from tunebench.testing import make_rate_grid_run
from tunebench.tune import results, space
from tunebench.tune.claims import StudyClaims
from tunebench.tune.evaluate import RunnerEvaluator
from tunebench.tune.storage import open_study
from tunebench.tune.study import TrialOutcome, Tuner

SPACE = {
    "max-num-seqs": {"choices": [2, 4, 8, 16]},
    "max-num-batched-tokens": {"choices": [1, 256, 1024]},
}


def make_tune(**overrides) -> Tune:
    return Tune.model_validate({"space": SPACE, "trials": 5, "seed": 1, **overrides})


class FakeEvaluator:
    """Capacity = max-num-seqs (vLLM defaults: 3); max-num-seqs 16 crashes."""

    def __init__(self):
        self.deployed: list[dict] = []

    def evaluate(self, config):
        self.deployed.append(dict(config.args))
        seqs = config.args.get("max-num-seqs")
        effective = {"kv_capacity_tokens": 8192, "cache_dtype": "auto"}
        if seqs == 16:
            return TrialOutcome(None, "vLLM exited with code 1: out of memory", effective=effective)
        return TrialOutcome([float(seqs or 3)], attrs={"probes": 4}, effective=effective)


def store_at(path):
    """A tune run's store over `path` (where the test's study.db already is)."""
    return RunStore(path, Manifest.new("run1", "demo", RunKind.TUNE, versions={}, host={}))


def run_tuner(tmp_path, tune, evaluator, base_args=None, create=True):
    study = open_study(tmp_path, "t", tune, create=create)
    tuner = Tuner(study, tune, base_args or {"max-model-len": 512}, "m", None, evaluator)
    tuner.mark_interrupted()
    tuner.run()
    return study, tuner


def test_space_suggests_conditional_and_mapping_params():
    params = Tune.model_validate(
        {
            "space": {
                "max-num-seqs": {"low": 8, "high": 256, "log": True},
                "gpu-memory-utilization": {"low": 0.8, "high": 0.95},
                "speculative-config.method": {"choices": [None, "ngram"]},
                "speculative-config.num_speculative_tokens": {
                    "low": 1,
                    "high": 5,
                    "when": {"speculative-config.method": "ngram"},
                },
            }
        }
    ).space
    assert params["max-num-seqs"].kind == "int" and params["gpu-memory-utilization"].kind == "float"
    on = space.suggest(
        params,
        optuna.trial.FixedTrial(
            {
                "max-num-seqs": 64,
                "gpu-memory-utilization": 0.9,
                "speculative-config.method": "ngram",
                "speculative-config.num_speculative_tokens": 3,
            }
        ),
    )
    args = space.engine_args({"max-model-len": 4096}, on)
    assert args == {
        "max-model-len": 4096,
        "max-num-seqs": 64,
        "gpu-memory-utilization": 0.9,
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
    }
    off = space.suggest(
        params,
        optuna.trial.FixedTrial(
            {"max-num-seqs": 8, "gpu-memory-utilization": 0.8, "speculative-config.method": None}
        ),
    )
    assert "speculative-config.num_speculative_tokens" not in off  # condition does not hold
    assert "speculative-config" not in space.engine_args({}, off)  # no method: vLLM default


def test_space_errors_are_explained():
    with pytest.raises(ValueError, match="must be a param listed before"):
        Tune.model_validate(
            {"space": {"a": {"low": 1, "high": 2, "when": {"b": 1}}, "b": {"choices": [1]}}}
        )
    with pytest.raises(ValueError, match="set low < high"):
        Tune.model_validate({"space": {"a": {"low": 2, "high": 1}}})
    with pytest.raises(ValueError, match="not one of its choices"):
        Tune.model_validate({"space": {"a": {"choices": [1, 2]}}, "enqueue": [{"a": 3}]})


def test_baseline_first_failures_and_pruning(tmp_path):
    evaluator = FakeEvaluator()
    study, tuner = run_tuner(
        tmp_path,
        make_tune(trials=6, enqueue=[{"max-num-seqs": 16, "max-num-batched-tokens": 256}]),
        evaluator,
    )
    trials = study.get_trials()
    assert trials[0].user_attrs["baseline"] and trials[0].params == {}
    assert evaluator.deployed[0] == {"max-model-len": 512}  # vLLM defaults for every tuned arg
    assert trials[0].values == [3.0]
    crashed = trials[1]  # the enqueued configuration
    assert crashed.state == optuna.trial.TrialState.FAIL
    assert crashed.user_attrs["fail_reason"] == "vLLM exited with code 1: out of memory"
    assert tuner.deployments() == 6 == len(evaluator.deployed)
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    for trial in pruned:  # never deployed
        assert trial.user_attrs["pruned_reason"]
        assert trial.user_attrs.get("deployed") is None
    # max-num-batched-tokens 1 < max-num-seqs never reaches the evaluator
    assert all(a.get("max-num-batched-tokens") != 1 for a in evaluator.deployed)
    keys = [t.user_attrs["args_key"] for t in trials if t.user_attrs.get("deployed")]
    assert len(keys) == len(set(keys))  # the same args are never deployed twice


def test_kv_capacity_learned_from_a_trial_prunes_later_ones(tmp_path):
    evaluator = FakeEvaluator()
    tune = make_tune(trials=3, space={"max-num-seqs": {"choices": [4, 32]}})
    study, _ = run_tuner(tmp_path, tune, evaluator, base_args={"max-model-len": 512})
    assert [tokens for tokens, _ in study.user_attrs["kv_capacities"].values()] == [8192]
    pruned = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned and pruned[0].params == {"max-num-seqs": 32}
    assert "16384 tokens exceeds the KV cache (8192 tokens" in pruned[0].user_attrs["pruned_reason"]
    assert {"max-model-len": 512, "max-num-seqs": 32} not in evaluator.deployed


def test_resume_continues_the_same_study(tmp_path):
    first = FakeEvaluator()
    run_tuner(tmp_path, make_tune(trials=3), first)
    # a session killed mid-trial leaves it RUNNING: resume marks it FAIL and goes on
    study = open_study(tmp_path, "t", make_tune(), create=False)
    study.ask()
    second = FakeEvaluator()
    study, tuner = run_tuner(tmp_path, make_tune(trials=5), second, create=False)
    assert len(second.deployed) == 2  # 3 done before, 5 in total
    assert {"max-model-len": 512} not in second.deployed  # the baseline ran once
    interrupted = [
        t for t in study.get_trials() if t.user_attrs.get("fail_reason") == "interrupted"
    ]
    assert len(interrupted) == 1


def test_workers_that_claim_the_baseline_together_measure_it_exactly_once(monkeypatch):
    """Two workers of a shared study write their baseline claims before either reads the
    other's: each sees the other and yields. One of them must still measure it (a tie left
    the three-worker study on PostgreSQL without a baseline once in a few runs)."""
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(), direction="maximize")
    tune = make_tune(trials=1)
    evaluator = FakeEvaluator()
    tie = threading.Barrier(2, timeout=10)
    first_reads: set[str] = set()
    claimers = StudyClaims.baseline_claimers

    def claimers_after_the_other_claimed(self, own):
        if self.worker in first_reads:
            return claimers(self, own)
        first_reads.add(self.worker)  # the first round: both claims written, then both read
        tie.wait()
        seen = claimers(self, own)
        tie.wait()
        return seen

    monkeypatch.setattr(StudyClaims, "baseline_claimers", claimers_after_the_other_claimed)
    workers = [
        Tuner(study, tune, {"max-model-len": 512}, "m", None, evaluator, worker=name)
        for name in ("w1", "w2")
    ]
    threads = [threading.Thread(target=worker._baseline) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert evaluator.deployed == [{"max-model-len": 512}]  # measured, and only once
    trials = study.get_trials()
    yielded = [t for t in trials if t.user_attrs.get("yielded")]
    assert len(yielded) >= 2  # the tie happened: both yielded in the first round
    baseline = [t for t in trials if t.user_attrs.get("baseline")]
    assert len(baseline) == 1 and baseline[0].state == optuna.trial.TrialState.COMPLETE


def test_a_finite_space_stops_when_exhausted(tmp_path):
    evaluator = FakeEvaluator()
    tune = make_tune(trials=50, space={"max-num-seqs": {"choices": [2, 4]}})
    _, tuner = run_tuner(tmp_path, tune, evaluator)
    assert len(evaluator.deployed) == 3 and "exhausted" in tuner.stopped_early


def test_results_and_exports(tmp_path):
    evaluator = FakeEvaluator()
    study, _ = run_tuner(tmp_path, make_tune(trials=5), evaluator)
    summary = results.summarize(study, "capacity")
    best = summary["best"]
    assert best["values"][0] == max(
        t.values[0] for t in study.get_trials() if t.state == optuna.trial.TrialState.COMPLETE
    )
    assert summary["improvement_pct"] == pytest.approx(100 * (best["values"][0] / 3.0 - 1))
    files = results.write_exports(
        summary,
        "ibm-granite/granite-3.3-2b-instruct",
        store_at(tmp_path),
        "demo",
        tmp_path / "helm-values",
        "ttft_ms p95 <= 500",
    )
    values = yaml.safe_load((tmp_path / "helm-values/demo.yaml").read_text())
    assert values["model"]["uri"] == "hf://ibm-granite/granite-3.3-2b-instruct"
    assert "--max-model-len=512" in values["model"]["args"]
    assert f"--max-num-seqs={best['args']['max-num-seqs']}" in values["model"]["args"]
    assert files["serve_command"].startswith(
        "vllm serve ibm-granite/granite-3.3-2b-instruct --max-model-len 512 --max-num-seqs "
    )
    saved = json.loads((tmp_path / "tune-result.json").read_text())
    assert saved["best"]["trial"] == best["trial"]


def test_chart_args_format_mappings_and_flags():
    assert results.chart_args(
        {
            "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
            "enable-prefix-caching": False,
            "enforce-eager": True,
        }
    ) == [
        '--speculative-config={"method":"ngram","num_speculative_tokens":3}',
        "--no-enable-prefix-caching",
        "--enforce-eager",
    ]


def test_importances_need_a_few_trials(tmp_path):
    evaluator = FakeEvaluator()
    study, _ = run_tuner(tmp_path, make_tune(trials=7), evaluator)
    importance = results.importances(study)
    assert set(importance) <= set(SPACE) and importance
    assert abs(sum(importance.values()) - 1) < 1e-6


# -- a recorded run as the deployment ----------------------------------------------------

GRID = {
    "slow": ({"max-num-seqs": 2}, 3.0),
    "fast": ({"max-num-seqs": 8}, 9.0),
    "broken": ({"max-num-seqs": 64}, None),
}


def test_a_recorded_run_interpolates_monotone_latency(tmp_path):
    run = RecordedRun(make_rate_grid_run(tmp_path, GRID).path)
    fast = run.find({"max-num-seqs": 8})
    assert fast.label == "fast" and run.find({"max-num-seqs": 3}) is None
    at_1, at_3, at_4 = (fast.point_at("poisson", r)["ttft_p95_ms"] for r in (1, 3, 4))
    assert at_1 < at_3 < at_4
    # between recorded points the reciprocal is linear: exact for this queueing curve
    assert at_3 == pytest.approx(50 / (1 - 3 / 9))
    # the law's own capacity, 0.8 x 9 req/s
    assert true_capacity(fast, {"ttft_ms": {"p95": 250}}) == pytest.approx(7.2, rel=1e-3)
    below = fast.point_at("poisson", 0.5)
    assert below["ttft_p95_ms"] == pytest.approx(50 / (1 - 1 / 9)) and below["achieved_rps"] == 0.5
    above = fast.point_at("poisson", 12)
    assert "recorded_extrapolated" in above["client_warnings"] and above["ttft_p95_ms"] > at_4
    assert run.find({"max-num-seqs": 64}).status == "failed"


def _recorded_spec(tmp_path, recorded, extra: str) -> str:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
name: from-recording
model: builtin:tiny-llama-random
deployment: {{kind: recorded, run: {recorded}}}
load:
  data: {{kind: synthetic, prompt_tokens: 64, output_tokens: 32}}
  profiles:
    - {{kind: capacity, max_seconds: 10}}
slo: {{ttft_ms: {{p95: 250}}}}
output: {tmp_path / "runs"}
{extra}
""")
    return str(spec)


def test_sweep_capacity_profile_on_a_recorded_run(tmp_path, cli):
    # each law's crossing (0.8 x saturation) lies between two recorded rates below its
    # saturation, where the recorded run's reciprocal interpolation is exact; with a recorded rate
    # past saturation between them it is not (slow's answer would be 2.8 for a truth of 2.4)
    recorded = make_rate_grid_run(
        tmp_path / "recorded", GRID, rates=(1, 2, 2.8, 4, 6, 7.5, 8.5, 10)
    ).path
    spec = _recorded_spec(
        tmp_path,
        recorded,
        """
server:
  variants:
    - {name: slow, args: {max-num-seqs: 2}}
    - {name: fast, args: {max-num-seqs: 8}}
    - {name: broken, args: {max-num-seqs: 64}}
""",
    )
    result = cli("sweep", spec, "--no-report")
    assert result.returncode == 1, result.stderr  # the broken configuration failed, as recorded
    assert "capacity: " in result.stderr and "req/s at SLO" in result.stderr, result.stderr
    run = next((tmp_path / "runs").iterdir())
    manifest = json.loads((run / "manifest.json").read_text())
    slow, fast, broken = manifest["configs"]
    for found, label in ((slow, "slow"), (fast, "fast")):
        # the recorded law: TTFT p95 = 50 ms / (1 - rate / saturation) meets 250 ms up to
        # 0.8 x saturation (tunebench/testing/runs.py make_rate_grid_run)
        truth = 0.8 * GRID[label][1]
        # the estimate lies inside the final bracket, which is within 5% and holds the truth
        assert 0.95 * truth <= found["capacity"]["rate"] <= 1.05 * truth, (label, truth)
        assert found["capacity"]["converged"]
    assert fast["capacity"]["probes"] <= 6  # warm start from slow's capacity
    assert broken["status"] == "failed" and "boom" in broken["error"]
    points = (run / "points.csv").read_text().splitlines()
    probes = [line for line in points[1:] if ",capacity-" in line]
    assert len(probes) == slow["capacity"]["probes"] + fast["capacity"]["probes"]


def test_tune_on_a_recorded_run_with_resume(tmp_path, cli):
    grid = {f"mns{s}": ({"max-num-seqs": s}, 1.0 + s) for s in (1, 2, 4, 8, 16)}
    grid["defaults"] = ({}, 4.0)
    recorded = make_rate_grid_run(tmp_path / "recorded", grid, rates=(1, 2, 4, 8, 12, 16, 20)).path
    spec = _recorded_spec(
        tmp_path,
        recorded,
        """
tune:
  trials: 3
  space:
    max-num-seqs: {choices: [1, 2, 4, 8, 16, 3]}
""",
    )
    helm = tmp_path / "helm"
    first = cli("tune", spec, "--no-report", "--helm-dir", str(helm))
    assert first.returncode == 0, first.stderr
    run = next((tmp_path / "runs").iterdir())
    assert "trial 0" in first.stderr and "baseline" in first.stdout
    second = cli("tune", "--resume", str(run), "--trials", "6", "--helm-dir", str(helm))
    assert second.returncode == 0, second.stderr
    html = (run / "report.html").read_text()
    assert "<h2>Capacity at SLO</h2>" in html and "<h2>Tuning</h2>" in html
    assert "6 deployments" in html and "over the baseline" in html
    summary = json.loads((run / "tune-result.json").read_text())
    assert summary["deployments"] == 6
    assert summary["baseline"]["params"] == {} and summary["baseline"]["values"][
        0
    ] == pytest.approx(3.2, rel=0.05)
    assert [t["trial"] for t in summary["trials"] if t["baseline"]] == [0]
    # max-num-seqs 3 was never recorded: the recorded run fails it like a server that cannot start
    failed = [t for t in summary["trials"] if t["state"] == "FAIL"]
    assert all("recorded no configuration" in t["note"] for t in failed)
    assert summary["improvement_pct"] > 0
    values = yaml.safe_load((helm / "from-recording.yaml").read_text())
    assert values["model"]["args"] == [f"--max-num-seqs={summary['best']['args']['max-num-seqs']}"]
    assert (run / "study.db").exists() and (run / "serve-command.sh").exists()
    storage = f"sqlite:///{run / 'study.db'}"
    assert len(optuna.load_study(study_name="from-recording", storage=storage).trials) >= 6


def test_two_objectives_give_a_pareto_front(tmp_path, cli):
    grid = {f"mns{s}": ({"max-num-seqs": s}, 1.0 + s) for s in (1, 2, 4, 8)}
    grid["defaults"] = ({}, 4.0)
    recorded = make_rate_grid_run(tmp_path / "recorded", grid, rates=(1, 2, 4, 8)).path
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
name: pareto
model: builtin:tiny-llama-random
deployment: {{kind: recorded, run: {recorded}}}
load:
  data: {{kind: synthetic, prompt_tokens: 64, output_tokens: 32}}
  profiles:
    - {{kind: poisson, rate: [2, 6], max_seconds: 10}}
output: {tmp_path / "runs"}
tune:
  objective: throughput-latency
  trials: 5
  space:
    max-num-seqs: {{choices: [1, 2, 4, 8]}}
""")
    result = cli("tune", str(spec), "--no-report", "--helm-dir", str(tmp_path / "helm"))
    assert result.returncode == 0, result.stderr
    assert "Pareto front" in result.stdout
    summary = json.loads(
        next((tmp_path / "runs").iterdir()).joinpath("tune-result.json").read_text()
    )
    assert summary["objective_names"] == ["output_tok_s", "ttft_p95_ms"]
    front = [tuple(p["values"]) for p in summary["pareto"]]
    measured = [tuple(t["values"]) for t in summary["trials"] if t["values"]]
    assert front
    for tok_s, ttft in front:  # nothing measured is better on both
        assert not any(t > tok_s and lat < ttft for t, lat in measured)


class FakeRunner:
    """A ConfigRunner's face to the evaluator: `run`, and no steps before the load."""

    before_load = ()

    def __init__(self, outcome):
        self.outcome = outcome

    def run(self, config, points):
        return self.outcome


@pytest.mark.parametrize(
    "outcome,reason",
    [
        (
            ConfigOutcome(
                "t1", "failed", 0, "vLLM exited with code 1 during start-up: CUDA out of memory"
            ),
            "vLLM exited with code 1 during start-up: CUDA out of memory",
        ),
        (
            ConfigOutcome(
                "t1", "complete", 3, None, {"rate": 4.0}, {}, ["quantization fp8 not in effect"]
            ),
            "not in effect: quantization fp8 not in effect",
        ),
        (
            ConfigOutcome(
                "t1",
                "complete",
                1,
                None,
                {
                    "rate": None,
                    "client_bound": True,
                    "probes": 1,
                    "probe_rates": [8.0],
                    "capped": True,
                    "converged": False,
                },
                {},
                [],
            ),
            "the client could not drive the first probe",
        ),
    ],
)
def test_runner_evaluator_turns_problems_into_fail_reasons(outcome, reason):
    evaluator = RunnerEvaluator(FakeRunner(outcome), [], None, "capacity", SilentReporter(), 1)
    config = ServerConfig("t1", "x", "m", None, {})
    result = evaluator.evaluate(config)
    assert result.values is None and result.reason.startswith(reason)


def test_runner_evaluator_capacity_zero_is_a_value():
    outcome = ConfigOutcome(
        "t1",
        "complete",
        2,
        None,
        {
            "rate": None,
            "client_bound": False,
            "probes": 2,
            "probe_rates": [1.0, 0.5],
            "capped": False,
            "converged": False,
        },
        {},
        [],
    )
    result = RunnerEvaluator(
        FakeRunner(outcome), [], None, "capacity", SilentReporter(), 1
    ).evaluate(ServerConfig("t1", "x", "m", None, {}))
    assert result.values == [0.0] and result.attrs["probes"] == 2


def test_a_trial_whose_search_drifted_names_a_best_that_says_so(tmp_path):
    drift = "machine drifted during the search (1 of 3 probes; first: capacity-2: ...)"
    capacity = {
        "rate": 4.0,
        "client_bound": False,
        "probes": 3,
        "probe_rates": [1.0, 4.0, 8.0],
        "capped": False,
        "converged": True,
        "upper": 8.0,
        "drift": drift,
    }
    outcome = ConfigOutcome("t1", "complete", 3, None, capacity, {}, [])
    result = RunnerEvaluator(
        FakeRunner(outcome), [], None, "capacity", SilentReporter(), 1
    ).evaluate(ServerConfig("t1", "x", "m", None, {}))
    assert result.values == [4.0] and result.attrs["drift"] == drift
    study = optuna.create_study(direction="maximize")
    study.add_trial(
        optuna.trial.create_trial(
            value=4.0, user_attrs={**result.attrs, "deployed": True, "args": {}}
        )
    )
    best = results.summarize(study, "capacity")["best"]
    assert best["capacity"]["drift"] == drift  # best_config and headline read it from here


def test_secret_engine_args_never_reach_the_study_or_exports(tmp_path):
    evaluator = FakeEvaluator()
    study, _ = run_tuner(
        tmp_path,
        make_tune(trials=3),
        evaluator,
        base_args={"max-model-len": 512, "api-key": "sk-live-0123456789"},
    )
    assert evaluator.deployed[0]["api-key"] == "sk-live-0123456789"  # the server gets it
    summary = results.summarize(study, "capacity")
    results.write_exports(summary, "org/model", store_at(tmp_path), "demo", tmp_path / "helm", "")
    for path in [
        tmp_path / "study.db",
        tmp_path / "tune-result.json",
        tmp_path / "serve-command.sh",
        tmp_path / "helm/demo.yaml",
    ]:
        assert b"sk-live-0123456789" not in path.read_bytes(), path


# -- tune --resume reads the spec it was started with --------------------------------------

TUNE_SECRET = "sk-tune-secret-7781aa"


def _secret_tune_spec(tmp_path) -> Path:
    spec = tmp_path / "tune-secret.yaml"
    spec.write_text(f"""
name: tune-secret
model: builtin:tiny-llama-random
deployment: {{kind: recorded, run: {FIXTURES / "grid-cpu"}}}
server:
  args: {{max-model-len: 512, api-key: {TUNE_SECRET}}}
load:
  data: {{kind: synthetic, prompt_tokens: 256, output_tokens: 32}}
  profiles:
    - {{kind: capacity, max_seconds: 10, start_rate: 2}}
slo: {{ttft_ms: {{p95: 250}}}}
tune:
  trials: 2
  seed: 0
  space:
    max-num-seqs: {{choices: [8, 16]}}
""")
    return spec


def _tune(*argv: str) -> int:
    from tunebench.cli.main import main

    return main(list(argv))


def test_tune_resume_refuses_a_masked_secret_when_the_spec_file_is_gone(tmp_path, capsys):
    """Before the shared resume rule, `tune --resume` ran on with `***` as the api-key."""
    spec, root, helm = _secret_tune_spec(tmp_path), tmp_path / "runs", str(tmp_path / "h")
    _tune("tune", str(spec), "--root", str(root), "--helm-dir", helm, "--no-report")
    (run,) = list(root.iterdir())
    spec.unlink()
    capsys.readouterr()
    code = _tune("tune", "--resume", str(run), "--trials", "3", "--helm-dir", helm, "--no-report")
    err = capsys.readouterr().err
    assert code == 2, err
    assert "holds a secret that was masked" in err and str(spec) in err


def test_tune_resume_uses_the_real_secret_from_the_unchanged_spec_file(tmp_path, monkeypatch):
    from tunebench.recorded.deployment import RecordedDeployment

    spec, root, helm = _secret_tune_spec(tmp_path), tmp_path / "runs", str(tmp_path / "h")
    _tune("tune", str(spec), "--root", str(root), "--helm-dir", helm, "--no-report")
    (run,) = list(root.iterdir())
    seen: list[dict] = []
    original = RecordedDeployment.start

    def spy(self, config):
        seen.append(dict(config.args))
        return original(self, config)

    monkeypatch.setattr(RecordedDeployment, "start", spy)
    _tune("tune", "--resume", str(run), "--trials", "3", "--helm-dir", helm, "--no-report")
    assert seen and all(args["api-key"] == TUNE_SECRET for args in seen)
    for path in run.rglob("*"):  # trial notes quote the args: the secret is masked there too
        if path.is_file():
            assert TUNE_SECRET.encode() not in path.read_bytes(), path


def test_a_tune_under_a_relative_root_writes_every_file_into_its_run(tmp_path, monkeypatch):
    """`--root runs` (relative, as the default `reports/` is): the tune result, the serve
    command and the tuned values land in the run once, where `results` reads them, and
    nothing lands in the current directory or in <run>/runs/<run>/."""
    spec = tmp_path / "tune-relative.yaml"
    spec.write_text(
        _secret_tune_spec(tmp_path).read_text().replace(f", api-key: {TUNE_SECRET}", "")
    )
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    assert _tune("tune", str(spec), "--root", "runs", "--no-report") == 0
    (run,) = list((work / "runs").iterdir())
    layout = RunLayout(run.relative_to(work))
    for path in (layout.tune_result, layout.serve_command, layout.manifest, layout.points):
        assert (work / path).is_file(), path
    assert (work / layout.tuned_values_dir / "tune-secret.yaml").is_file()  # the spec's name
    assert sorted(p.name for p in work.iterdir()) == ["runs"]  # no helm-values/ here
    assert not (run / "runs").exists()
    from tunebench.analysis.best import best_config

    assert best_config(run.name, "runs")["rule"] == "tune"


def test_a_hint_queued_for_a_trial_that_never_ran_is_no_row_of_the_trials_table():
    """The study queues the next hint before the trial limit stops it: that WAITING trial
    ran nothing, so the table lists only trials that ran and says what was left queued."""
    from rich.console import Console

    from tunebench.report.tables import tune_summary

    def row(trial: int, state: str, note: str = "", values: list | None = None) -> dict:
        return {
            "trial": trial,
            "state": state,
            "baseline": trial == 0,
            "params": {} if trial == 0 else {"max-num-seqs": 5},
            "values": values,
            "note": note,
        }

    summary = {
        "objective_names": ["capacity_rps"],
        "deployments": 2,
        "failed": 0,
        "pruned": 0,
        "trials": [
            row(0, "COMPLETE", values=[2.9]),
            row(1, "COMPLETE", values=[1.7]),
            row(2, "WAITING", "hint from trial 1 (prefill-limited): mnbt 64 -> 128"),
        ],
        "best": None,
    }
    console = Console(width=200, record=True)
    console.print(tune_summary(summary, {}))
    text = console.export_text()
    assert "WAITING" not in text
    assert "│ 2 " not in text  # no row for trial 2
    assert "queued, not run (the trial limit came first): hint from trial 1" in text
