"""`tunebench sweep` with `deployment.kind: helm` end to end: fake `helm`/`oc` on PATH act
out the cluster, and their `oc port-forward` forwards to a real vLLM-CPU server, so GuideLLM
load, /metrics scraping through the port-forward and the effective configuration read from
`oc logs` are all real."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
import yaml

from tests.conftest import run_cli
from tests.contract.conftest import FAKE_BIN, FakeCluster
from tests.e2e.conftest import GUARDED_KEY, NEEDS_SERVER
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]


def test_helm_sweep_installs_measures_and_uninstalls_each_configuration(tmp_path, guarded_server):
    state = tmp_path / "cluster"
    state.mkdir()
    cluster = FakeCluster(state)
    cluster.scenario(
        mode="slow",
        ready_after_s=2,
        backend=guarded_server.address,
        sa_token=GUARDED_KEY,
        sa_secret="tunebench-client",
        pod_log=str(guarded_server.log_path),
    )
    spec = tmp_path / "helm.yaml"
    # The point ends on a count of requests, not a clock: a 5-s window held no completed
    # request on a CI machine running three test files beside it, twice, even when the
    # window followed the server's speed measured at the session's start (the machine's
    # load changes within a session). The cap only bounds a hung server.
    spec.write_text(
        textwrap.dedent("""
        name: helm-cpu
        model: oci://quay.io/example/tiny-llama-random:v1
        tokenizer: builtin:tiny-llama-random
        deployment:
          kind: helm
          chart_version: 0.5.11
          namespace: bench
          token_secret: tunebench-client
          access: port-forward
          ready_timeout_s: 60
          health_timeout_s: 60
        server:
          args: {max-model-len: 256}
          matrix: {max-num-seqs: [2, 4]}
        load:
          data: {kind: synthetic, prompt_tokens: 32, output_tokens: 16}
          profiles:
            - {kind: concurrent, streams: [2], max_requests: 24, max_seconds: 240}
        metrics: {interval_s: 0.5}
        """)
    )
    runs = tmp_path / "runs"
    env = {"FAKE_KUBE_STATE": str(state), "PATH": f"{FAKE_BIN}:{os.environ['PATH']}"}
    result = run_cli("sweep", str(spec), "--output", str(runs), "--no-report", env=env, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = next(runs.iterdir())
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["deployment_kind"] == "helm" and manifest["status"] == "complete"

    rows = read_points(run)
    assert [(r["config_label"], r["point_id"]) for r in rows] == [
        ("max-num-seqs=2", "concurrent-2"),
        ("max-num-seqs=4", "concurrent-2"),
    ]
    for row, mns in zip(rows, (2, 4)):
        counts = {k: row[k] for k in ("requests_ok", "requests_failed", "requests_incomplete")}
        assert int(row["requests_ok"]) > 0 and int(row["requests_failed"]) == 0, counts
        assert row["server_metrics"] == "present"  # scraped from the pod via the port-forward
        # The port-forward reaches one server started without max-num-seqs: its log's
        # non-default args prove that neither configuration was measured.
        assert row["valid"] == "False"
        assert (
            f"max-num-seqs requested {mns}, server runs vLLM's default "
            "(not in its non-default args)"
        ) in row["invalid_reason"].split("; ")
    for config in manifest["configs"]:
        assert config["status"] == "complete"
        assert config["effective"]["max_model_len"] == 256  # read through the Route-less path
        assert config["start_s"] >= 2  # waited for the slow InferenceService
        with pytest.raises(ProcessLookupError):  # the port-forward's process group is gone
            os.killpg(config["server_pgid"], 0)

    helm_calls = [argv[0] for argv in cluster.calls("helm")]
    assert helm_calls == ["status", "upgrade", "uninstall"] * 2
    assert cluster.releases() == []
    for config_id, mns in (("c1", 2), ("c2", 4)):
        values = yaml.safe_load((run / "logs" / f"helm-values-{config_id}.yaml").read_text())
        assert values["model"]["args"] == [
            "--gpu-memory-utilization=0.90",
            "--max-model-len=256",
            f"--max-num-seqs={mns}",
        ]
        assert values["model"]["uri"] == "oci://quay.io/example/tiny-llama-random:v1"
        # the pod log (`oc logs`) is kept in the run: here the real server's log
        assert "GET /v1/models" in (run / "logs" / f"server-{config_id}.log").read_text()
    # The service-account token reached vLLM (requests succeeded) but nothing written holds it.
    for path in run.rglob("*"):
        if path.is_file():
            assert GUARDED_KEY not in path.read_text(errors="replace"), path
    assert GUARDED_KEY not in result.stdout + result.stderr


def test_helm_sweep_in_parallel_fails_the_unschedulable_configuration_alone(
    tmp_path, guarded_server
):
    """parallel: 3 installs three releases at once, each named for its configuration and
    measured by its own GuideLLM through its own port-forward; the one whose pod cannot be
    scheduled fails alone, with the reason and the parallel hint."""
    state = tmp_path / "cluster"
    state.mkdir()
    cluster = FakeCluster(state)
    cluster.scenario(
        mode="slow",
        ready_after_s=3,
        backend=guarded_server.address,
        sa_token=GUARDED_KEY,
        sa_secret="tunebench-client",
        pod_log=str(guarded_server.log_path),
        pending_values="--max-num-seqs=16",
    )
    spec = tmp_path / "helm-parallel.yaml"
    spec.write_text(
        textwrap.dedent("""
        name: helm-par
        model: oci://quay.io/example/tiny-llama-random:v1
        tokenizer: builtin:tiny-llama-random
        deployment:
          kind: helm
          chart_version: 0.5.11
          namespace: bench
          token_secret: tunebench-client
          access: port-forward
          ready_timeout_s: 12
          health_timeout_s: 60
          parallel: 3
        server:
          args: {max-model-len: 256}
          matrix: {max-num-seqs: [2, 4, 16]}
        load:
          data: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
          profiles:
            - {kind: concurrent, streams: [1], max_requests: 24, max_seconds: 240}
        metrics: {interval_s: 0.5}
        """)
    )
    # Both measured configurations load the one guarded server at once, beside the tier's
    # other workers: a 16-token answer took 4.0 s there (221 ms a token) and one 4-s window
    # finished none, so each point ends on a count of 8-token answers (the cap only bounds a
    # hung server); what is checked is that each parallel configuration measured through its
    # own port-forward, not how fast
    runs = tmp_path / "runs"
    env = {"FAKE_KUBE_STATE": str(state), "PATH": f"{FAKE_BIN}:{os.environ['PATH']}"}
    result = run_cli("sweep", str(spec), "--output", str(runs), "--no-report", env=env, timeout=900)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    run = next(runs.iterdir())
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["parallel"]["configurations"] == 3
    status = {c["config_id"]: c["status"] for c in manifest["configs"]}
    assert status == {"c1": "complete", "c2": "complete", "c3": "failed"}
    error = manifest["configs"][2]["error"]
    assert "InferenceService tb-helm-par-c3 not Ready" in error
    assert "Insufficient nvidia.com/gpu" in error and "lower parallel" in error

    rows = read_points(run)
    assert [(r["config_id"], r["point_id"]) for r in rows] == [
        ("c1", "concurrent-1"),
        ("c2", "concurrent-1"),
    ]
    assert all(int(r["requests_ok"]) > 0 and r["server_metrics"] == "present" for r in rows)
    # all three installed before the first was uninstalled: measured side by side
    calls = [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]
    helm = [
        (c["argv"][0], c["argv"][1] if c["argv"][0] != "upgrade" else c["argv"][2])
        for c in calls
        if c["tool"] == "helm"
    ]
    installs = [i for i, (verb, _) in enumerate(helm) if verb == "upgrade"]
    first_uninstall = next(i for i, (verb, _) in enumerate(helm) if verb == "uninstall")
    assert len(installs) == 3 and max(installs) < first_uninstall
    assert sorted(name for verb, name in helm if verb == "uninstall") == [
        "tb-helm-par-c1",
        "tb-helm-par-c2",
        "tb-helm-par-c3",
    ]
    assert cluster.releases() == []
    for config in manifest["configs"][:2]:
        assert (run / "logs" / f"port-forward-{config['config_id']}.log").is_file()
        with pytest.raises(ProcessLookupError):
            os.killpg(config["server_pgid"], 0)
    for path in run.rglob("*"):
        if path.is_file():
            assert GUARDED_KEY not in path.read_text(errors="replace"), path
