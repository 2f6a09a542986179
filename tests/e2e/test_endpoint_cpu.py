"""`deployment.kind: endpoint` against a real vLLM server that requires an API key."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import GUARDED_KEY, NEEDS_SERVER
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]

KEY = GUARDED_KEY


def _spec(tmp_path, handle, key_env: str) -> str:
    spec = tmp_path / "endpoint.yaml"
    spec.write_text(
        textwrap.dedent(f"""
        name: endpoint-cpu
        model: builtin:tiny-llama-random
        deployment: {{kind: endpoint, url: "{handle.base_url}/v1", api_key_env: {key_env}}}
        load:
          data: {{kind: synthetic, prompt_tokens: 32, output_tokens: 16}}
          profiles:
            - {{kind: concurrent, streams: [1, 2], max_seconds: 5}}
        """)
    )
    return str(spec)


def test_sweep_against_an_endpoint_keeps_the_key_secret(tmp_path, guarded_server):
    runs = tmp_path / "runs"
    result = run_cli(
        "sweep",
        _spec(tmp_path, guarded_server, "TB_ENDPOINT_KEY"),
        "--output",
        str(runs),
        env={"TB_ENDPOINT_KEY": KEY},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run = next(runs.iterdir())
    rows = read_points(run)
    assert [r["point_id"] for r in rows] == ["concurrent-1", "concurrent-2"]
    assert all(int(r["requests_ok"]) > 0 and int(r["requests_failed"]) == 0 for r in rows)
    assert all(r["server_metrics"] == "present" for r in rows)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["deployment_kind"] == "endpoint"
    assert manifest["configs"][0]["effective"]["max_model_len"] == 256
    # The key reached the server (requests succeeded) but no file, log or output holds it.
    for path in run.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    assert KEY not in result.stdout + result.stderr


def test_wrong_key_is_a_clear_failure(tmp_path, guarded_server):
    runs = tmp_path / "runs"
    result = run_cli(
        "sweep",
        _spec(tmp_path, guarded_server, "TB_ENDPOINT_KEY"),
        "--output",
        str(runs),
        env={"TB_ENDPOINT_KEY": "wrong-key-123"},
    )
    assert result.returncode == 1
    manifest = json.loads((next(runs.iterdir()) / "manifest.json").read_text())
    assert "HTTP 401; check the token in TB_ENDPOINT_KEY" in manifest["configs"][0]["error"]


def test_missing_key_variable(tmp_path, guarded_server):
    result = run_cli(
        "sweep",
        _spec(tmp_path, guarded_server, "TB_UNSET_KEY"),
        "--output",
        str(tmp_path / "runs"),
        env={"TB_UNSET_KEY": ""},
    )
    assert result.returncode == 1
    assert "environment variable TB_UNSET_KEY is not set" in result.stdout + result.stderr
