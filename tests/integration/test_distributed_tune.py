"""Several `tunebench tune` workers on one Optuna study in a real PostgreSQL (Debian's,
tests/postgres.py), deploying a recorded grid played back in a share of the recorded time
(the recorded deployment's time_scale): no args deployed twice, the budget held over all
workers, and a worker killed mid-trial loses nothing (its trial is failed by its silent
heartbeat and measured again by another)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import optuna
import pytest

from tunebench.processes import ManagedProcess
from tunebench.store.run import read_points
from tunebench.testing import make_rate_grid_run
from tunebench.testing.postgres import postgres_server

REPO = Path(__file__).parents[2]
SEQS = (1, 2, 4, 8, 16)
BATCHED = (32, 64, 128, 256, 512, 1024)


def grid() -> dict[str, tuple[dict, float]]:
    """30 configurations (+ the defaults): capacity grows with both args."""
    out = {"defaults": ({}, 6.0)}
    for seqs in SEQS:
        for tokens in BATCHED:
            out[f"mns{seqs}-mnbt{tokens}"] = (
                {"max-num-seqs": seqs, "max-num-batched-tokens": tokens},
                1.0 + seqs * (1 + BATCHED.index(tokens)) / 4,
            )
    return out


def write_spec(
    tmp: Path, name: str, trials: int, time_scale: float, heartbeat_s: float = 30
) -> Path:
    recorded = tmp / "recorded"
    if not recorded.exists():
        make_rate_grid_run(recorded, grid(), rates=(1, 2, 4, 8, 12, 16, 20, 24))
    run = next(recorded.iterdir())
    spec = tmp / f"{name}.yaml"
    spec.write_text(f"""
name: {name}
model: builtin:tiny-llama-random
deployment: {{kind: recorded, run: {run}, time_scale: {time_scale}}}
load:
  data: {{kind: synthetic, prompt_tokens: 64, output_tokens: 32}}
  profiles:
    - {{kind: capacity, max_seconds: 10}}
slo: {{ttft_ms: {{p95: 250}}}}
tune:
  trials: {trials}
  heartbeat_s: {heartbeat_s}
  space:
    max-num-seqs: {{choices: {list(SEQS)}}}
    max-num-batched-tokens: {{choices: {list(BATCHED)}}}
""")
    return spec


def start_worker(spec: Path, storage: str, out: Path) -> ManagedProcess:
    out.mkdir(parents=True, exist_ok=True)
    return ManagedProcess(
        [
            sys.executable,
            "-m",
            "tunebench.cli.main",
            "tune",
            str(spec),
            "--storage",
            storage,
            "--output",
            str(out / "runs"),
            "--helm-dir",
            str(out / "helm"),
            "--no-report",
        ],
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
        log_path=out / "worker.log",
    )


def deployed(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [
        t
        for t in study.get_trials(deepcopy=False)
        if t.user_attrs.get("deployed") and t.state != optuna.trial.TrialState.WAITING
    ]


@pytest.fixture(scope="module")
def database():
    with postgres_server() as url:
        yield url


def test_three_workers_finish_one_study_without_deploying_any_args_twice(tmp_path, database):
    spec = write_spec(tmp_path, "shared", trials=24, time_scale=0.005)
    workers = [start_worker(spec, database, tmp_path / f"w{i}") for i in range(3)]
    try:
        codes = [w.wait(timeout=600) for w in workers]
    finally:
        for w in workers:
            w.stop()
    logs = [(tmp_path / f"w{i}" / "worker.log").read_text() for i in range(3)]
    assert codes == [0, 0, 0], logs
    study = optuna.load_study(study_name="shared", storage=database)
    done = deployed(study)
    assert len(done) == 24, [
        (
            t.number,
            t.state.name,
            t.user_attrs.get("deployed"),
            t.user_attrs.get("worker"),
            t.user_attrs.get("pruned_reason") or t.user_attrs.get("repeat_of"),
        )
        for t in study.trials
    ] + logs
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in done)
    keys = [t.user_attrs["args_key"] for t in done]
    assert len(set(keys)) == 24  # no args deployed twice
    assert sum(1 for t in done if t.user_attrs.get("baseline")) == 1
    per_worker: dict[str, int] = {}
    for trial in done:
        per_worker[trial.user_attrs["worker"]] = per_worker.get(trial.user_attrs["worker"], 0) + 1
    assert len(per_worker) == 3 and min(per_worker.values()) >= 2, per_worker
    # each worker's run holds the points of the trials it measured, and only those
    for i in range(3):
        run = next((tmp_path / f"w{i}" / "runs").iterdir())
        worker = json.loads((run / "manifest.json").read_text())["tune"]["worker"]
        mine = {t.user_attrs["config_id"] for t in done if t.user_attrs["worker"] == worker}
        assert mine and {r["config_id"] for r in read_points(run)} == mine
    # the password-less URL is in the manifest; the study's summary covers every worker's
    assert database in (next((tmp_path / "w0" / "runs").iterdir()) / "manifest.json").read_text()


def test_a_worker_killed_mid_trial_loses_nothing(tmp_path, database):
    spec = write_spec(tmp_path, "killed", trials=8, time_scale=0.05, heartbeat_s=1)
    first = start_worker(spec, database, tmp_path / "first")
    victim = None
    try:
        deadline = time.monotonic() + 180
        while victim is None and time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                study = optuna.load_study(study_name="killed", storage=database)
            except KeyError:
                continue
            running = [
                t
                for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
                # past its claim (the worker is recorded once the claim holds)
                if t.user_attrs.get("worker") and not t.user_attrs.get("baseline")
            ]
            if running:
                victim = running[0]
        assert victim is not None, (tmp_path / "first" / "worker.log").read_text()
        os.killpg(first.pgid, signal.SIGKILL)  # no clean-up runs: a lost pod
    finally:
        first.stop()
    measured_before = {
        t.number
        for t in optuna.load_study(study_name="killed", storage=database).trials
        if t.state == optuna.trial.TrialState.COMPLETE
    }
    others = [start_worker(spec, database, tmp_path / f"w{i}") for i in range(2)]
    try:
        codes = [w.wait(timeout=600) for w in others]
    finally:
        for w in others:
            w.stop()
    assert codes == [0, 0], [(tmp_path / f"w{i}" / "worker.log").read_text() for i in range(2)]
    study = optuna.load_study(study_name="killed", storage=database)
    dead = study.trials[victim.number]
    assert dead.state == optuna.trial.TrialState.FAIL  # failed by its silent heartbeat
    retries = [t for t in study.trials if t.system_attrs.get("failed_trial") == victim.number]
    assert len(retries) == 1 and retries[0].state == optuna.trial.TrialState.COMPLETE
    assert retries[0].user_attrs["args_key"] == victim.user_attrs["args_key"]
    assert retries[0].user_attrs["worker"] != victim.user_attrs["worker"]
    # what the killed worker finished is still in the study and in its run
    assert measured_before <= {
        t.number for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
    }
    first_run = next((tmp_path / "first" / "runs").iterdir())
    finished = {study.trials[n].user_attrs["config_id"] for n in measured_before}
    assert finished <= {r["config_id"] for r in read_points(first_run)}
    complete = [t for t in deployed(study) if t.state == optuna.trial.TrialState.COMPLETE]
    assert len({t.user_attrs["args_key"] for t in complete}) == len(complete)
    assert len(deployed(study)) == 8  # the dead trial counts: it was deployed


def test_the_kubernetes_example_runs_workers_that_the_cli_accepts(tmp_path):
    import yaml

    from tests.conftest import run_cli

    job = yaml.safe_load((REPO / "docs/examples/tune-workers-job.yaml").read_text())
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 3
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert set(env) == {"TUNEBENCH_STORAGE", "PGPASSWORD"}  # secrets only from a Secret
    args = container["args"]
    assert args[:2] == ["tune", "/spec/tune.yaml"] and "--storage" in args
    # the same command line, with a real spec and URL, is accepted (a dry run starts nothing)
    spec = write_spec(tmp_path, "example", trials=4, time_scale=0)
    line = [a.replace("/spec/tune.yaml", str(spec)) for a in args]
    line[line.index("--storage") + 1] = "postgresql://tunebench@127.0.0.1:5432/tunebench"
    result = run_cli(*line, "--dry-run")
    assert result.returncode == 0, result.stderr
